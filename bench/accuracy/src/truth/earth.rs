//! The network as the truth sees it: what each station adds to every earthquake it records, fixed for the
//! network (one seed), as real stations keep their site and their place in the 3-D Earth from one quake to the
//! next.
//!
//! - **Delays**: the 3-D structure the 1-D models miss delays or advances a station's arrivals by up to about a
//!   second, alike over a region (hyp.md: ±0.5–1 s, correlated over regions): a smooth random field (a sum of
//!   Gaussian bumps 60–200 km wide) scaled to σ 0.4 s, plus σ 0.12 s of the station's own; S delays are 1.7
//!   times the P delays (Vp/Vs).
//! - **Site**: a Vs30 drawn around 330 m/s (σ 0.15 in log10, correlated over basins the same way) through Kanno et
//!   al.'s site correction, plus σ 0.12 log10 PGV of the station's own (about ±0.25 intensity).
//! - **Noise**: a background level around intensity −2.2 (σ 0.35) and a frame-to-frame noise of 0.08–0.25.
//! - **How shaking builds**: the P-window level runs 0.9–2.8 below the S peak (σ 0.35 around 1.7) and builds
//!   over 1–4 s after the P onset (emergent, not a step); the S peak is reached 1.5–5 s after the S onset; the
//!   coda decays by 0.08–0.25 a second.

use super::shaking::site_log_pgv;
use osds_detector::geo::distance_km;
use osds_detector::rng::Rng;
use osds_detector::trigger::StationPosition;

/// What a station adds to every earthquake.
#[derive(Debug, Clone, Copy)]
pub struct StationTerms {
    /// Seconds its P arrivals lag ak135 (S: 1.7 times this).
    pub delay_s: f64,
    /// log10 PGV its site adds.
    pub site_log_pgv: f64,
    pub noise_level: f64,
    pub noise_sd: f64,
    /// How far the P-window level runs below the S peak (intensity).
    pub p_contrast: f64,
    /// Seconds the P level takes to build.
    pub p_rise_s: f64,
    /// Seconds the S peak takes to build.
    pub s_rise_s: f64,
    pub decay_per_s: f64,
}

/// How far the truth's Earth departs from the detector's model. The recorded tables use the default; the others
/// ask how the detector holds up where the world departs further (`osds-accuracy --delays=0.8`, ...).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Departures {
    /// Standard deviation (s) of the stations' P delays over regions (0.4; hyp.md: ±0.5–1 s), clamped at three.
    pub delay_sd: f64,
    /// log10 PGV added to every site (0: Vs30 around 330 m/s).
    pub site_log_pgv: f64,
    /// The mean of how far the P-window level runs below the S peak (1.7).
    pub p_contrast: f64,
    /// What the time the P level takes to build (1–4 s) is multiplied by.
    pub p_rise_scale: f64,
    /// What the frame-to-frame noise is multiplied by.
    pub noise_scale: f64,
}

impl Default for Departures {
    fn default() -> Departures {
        Departures {
            delay_sd: 0.4,
            site_log_pgv: 0.0,
            p_contrast: 1.7,
            p_rise_scale: 1.0,
            noise_scale: 1.0,
        }
    }
}

impl Departures {
    /// The settings that differ from the default, for a table's title (empty when none do).
    pub fn describe(&self) -> String {
        let base = Departures::default();
        let mut parts = Vec::new();
        if self.delay_sd != base.delay_sd {
            parts.push(format!("station delays sd {} s", self.delay_sd));
        }
        if self.site_log_pgv != base.site_log_pgv {
            parts.push(format!("sites {:+} log10 PGV", self.site_log_pgv));
        }
        if self.p_contrast != base.p_contrast {
            parts.push(format!("P/S contrast around {}", self.p_contrast));
        }
        if self.p_rise_scale != base.p_rise_scale {
            parts.push(format!("P build-up x{}", self.p_rise_scale));
        }
        if self.noise_scale != base.noise_scale {
            parts.push(format!("noise x{}", self.noise_scale));
        }
        parts.join(", ")
    }
}

/// Every station's terms, by index.
#[derive(Debug, Clone)]
pub struct Earth {
    pub terms: Vec<StationTerms>,
}

/// A smooth random field over the stations with standard deviation `sd`.
fn correlated_field(positions: &[StationPosition], rng: &mut Rng, sd: f64) -> Vec<f64> {
    let bumps: Vec<(f64, f64, f64, f64)> = (0..64)
        .map(|_| {
            (
                24.0 + 22.0 * rng.uniform(),
                123.0 + 23.0 * rng.uniform(),
                60.0 + 140.0 * rng.uniform(),
                rng.normal(0.0, 1.0),
            )
        })
        .collect();
    let raw: Vec<f64> = positions
        .iter()
        .map(|p| {
            bumps
                .iter()
                .map(|&(lat, lon, width, amplitude)| {
                    let d = distance_km(p.latitude, p.longitude, lat, lon);
                    amplitude * (-(d * d) / (2.0 * width * width)).exp()
                })
                .sum()
        })
        .collect();
    let n = raw.len().max(1) as f64;
    let mean = raw.iter().sum::<f64>() / n;
    let spread = (raw.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n)
        .sqrt()
        .max(1e-9);
    raw.iter().map(|v| (v - mean) / spread * sd).collect()
}

impl Earth {
    pub fn new(positions: &[StationPosition], seed: u64, departures: &Departures) -> Earth {
        let d = departures;
        let mut rng = Rng::new(seed);
        let delays = correlated_field(positions, &mut rng, d.delay_sd);
        let basins = correlated_field(positions, &mut rng, 0.15);
        let terms = delays
            .iter()
            .zip(&basins)
            .map(|(&delay, &basin)| {
                let vs30 = 10f64.powf(330f64.log10() + basin);
                StationTerms {
                    delay_s: (delay + rng.normal(0.0, 0.12))
                        .clamp(-3.0 * d.delay_sd, 3.0 * d.delay_sd),
                    site_log_pgv: site_log_pgv(vs30) + d.site_log_pgv + rng.normal(0.0, 0.12),
                    noise_level: rng.normal(-2.2, 0.35).clamp(-3.0, -1.0),
                    noise_sd: d.noise_scale * (0.08 + 0.17 * rng.uniform()),
                    p_contrast: rng
                        .normal(d.p_contrast, 0.35)
                        .clamp(d.p_contrast - 0.8, d.p_contrast + 1.1),
                    p_rise_s: d.p_rise_scale * (1.0 + 3.0 * rng.uniform()),
                    s_rise_s: 1.5 + 3.5 * rng.uniform(),
                    decay_per_s: 0.08 + 0.17 * rng.uniform(),
                }
            })
            .collect();
        Earth { terms }
    }
}
