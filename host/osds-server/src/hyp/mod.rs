//! The self-sensing detector (the `osds-detector` crate) at work in the service: the frame sources (kmoni
//! fetcher, replay), the runner that feeds the detector and archives its reports, the recorder's backfill, how
//! observations are kept in the image archive, the live scorecard against JMA, and the simulation of synthetic
//! earthquakes (`osds simulate`).

pub mod backfill;
pub mod images;
pub mod runner;
pub mod scorecard;
pub mod simulation;
pub mod source;
