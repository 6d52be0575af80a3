//! The self-sensing detector's stages, each a plain module tested on its own (see `../shared/hyp.md`):
//! colour-scale decoding of monitor pixels, geodesy, travel times, triggering, location, magnitude, and the
//! synthetic scenarios with known truth that prove them.
//!
//! Not yet wired into `osds serve`: the frame sources (kmoni fetcher, replay), association, lifecycle and the
//! recorder come next; until then `/hyp/status` honestly reports that no detector runs.

pub mod colour;
pub mod detector;
pub mod geo;
pub mod locate;
pub mod magnitude;
pub mod rng;
pub mod stations;
pub mod synthetic;
pub mod traveltime;
pub mod trigger;

#[cfg(test)]
mod tests;
