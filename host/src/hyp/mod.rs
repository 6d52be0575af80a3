//! The self-sensing detector at work in the service: the frame sources (kmoni fetcher, replay), the runner
//! that feeds the detector (the `osds-detector` crate, re-exported here) and archives its reports, and the
//! recorder's backfill.

pub use osds_detector::{
    colour, csv, detector, geo, kmoni, locate, magnitude, rng, stations, synthetic, traveltime,
    trigger,
};

pub mod backfill;
pub mod runner;
pub mod source;
