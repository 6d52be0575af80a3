//! The self-sensing detector (the `osds-detector` crate) at work in the service: the frame sources (kmoni
//! fetcher, replay), the runner that feeds the detector and archives its reports, and the recorder's backfill.

pub mod backfill;
pub mod runner;
pub mod source;
