//! The self-sensing detector's stages, each a plain module tested on its own: colour-scale decoding of monitor
//! pixels, geodesy, travel times, triggering, association and location, magnitude, and the synthetic scenarios
//! with known truth that prove them. Pure computation: the frame sources, the recorder and the archive live in
//! the host.

pub mod chance;
pub mod colour;
pub mod consistency;
pub mod csv;
pub mod detector;
pub mod geo;
pub mod kmoni;
pub mod locate;
pub mod magnitude;
pub mod rng;
pub mod stations;
pub mod synthetic;
pub mod traveltime;
pub mod trigger;

#[cfg(test)]
mod tests;
