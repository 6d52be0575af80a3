//! The self-sensing detector's stages, each a plain module tested on its own (see `../shared/hyp.md`):
//! colour-scale decoding of monitor pixels, geodesy, travel times, triggering, location, magnitude, and the
//! synthetic scenarios with known truth that prove them.
//! The frame sources (kmoni fetcher, replay), the runner that feeds the detector and archives its reports, the
//! recorder's backfill.

pub mod backfill;
pub mod colour;
pub mod csv;
pub mod detector;
pub mod geo;
pub mod kmoni;
pub mod locate;
pub mod magnitude;
pub mod rng;
pub mod runner;
pub mod source;
pub mod stations;
pub mod synthetic;
pub mod traveltime;
pub mod trigger;

#[cfg(test)]
mod tests;
