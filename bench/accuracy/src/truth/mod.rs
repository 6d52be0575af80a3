//! The independent truth model: synthetic earthquakes and disturbances made with published models the
//! detector does not use, so that the benchmark measures accuracy against a world that is not the detector's
//! own (the in-model matrix makes its frames with the detector's tables and
//! measures self-consistency only).
//!
//! | | the detector | the truth |
//! |---|---|---|
//! | travel times | JMA2001 | ak135 ([`travel`]), plus correlated station delays ([`earth`]) |
//! | peak shaking | Si & Midorikawa 1999 PGV, bedrock, no site term, hypocentral distance less half Utsu's fault length | Kanno et al. 2006 PGV, shallow/deep forms, distance to the broken fault, Vs30 site terms and scatter ([`shaking`]) |
//! | intensity from PGV | I = 2.68 + 1.72 log PGV | Midorikawa et al. 1999 with its strong-motion relation above 4 |
//! | the P window | 1.5 below the S peak, a step | 0.9–2.8 below by station, built over 1–4 s |
//! | large quakes | a point | a fault breaking at 2.5 km/s, shaking growing for tens of seconds ([`source`]) |
//!
//! Besides earthquakes, the truth makes what must never become one ([`Disturbance`]): bursts on a few
//! neighbouring stations at once, stations that flap, spikes, stuck stations and dropouts.

pub mod earth;
pub mod shaking;
pub mod source;
pub mod travel;

pub use earth::{Departures, Earth};
pub use source::{Rupture, TruthQuake};

use osds_detector::geo::distance_km;
use osds_detector::rng::Rng;
use osds_detector::trigger::StationPosition;
use shaking::{intensity, log_pgv};
use source::{Arrivals, arrivals};

/// Something on the network that is not an earthquake.
#[derive(Debug, Clone, PartialEq)]
pub enum Disturbance {
    /// The `stations` stations nearest a point jump by `rise` in the same second (no moveout), hold for
    /// `seconds`, and fall back: a storm, a train, a fault in a regional data link.
    Burst {
        latitude: f64,
        longitude: f64,
        stations: usize,
        from: u64,
        seconds: u64,
        rise: f64,
    },
    /// A station whose readings come and go every `period` frames; with `level`, it reads that level whenever
    /// it reads, else its background.
    Flapping {
        station: usize,
        period: u64,
        level: Option<f64>,
    },
    /// One frame at `level`.
    Spike {
        station: usize,
        frame: u64,
        level: f64,
    },
    /// A station that reads `level` throughout.
    Stuck { station: usize, level: f64 },
}

/// What happens on the network during a scenario.
#[derive(Debug, Clone, Default)]
pub struct Truth {
    pub quakes: Vec<TruthQuake>,
    pub disturbances: Vec<Disturbance>,
    /// Share of readings missing (no data).
    pub dropout: f64,
}

/// A quake made ready for one network: every station's arrivals and its own scatter this time.
struct Prepared {
    quake: TruthQuake,
    patches: usize,
    /// Per station: (P, S) arrivals.
    arrivals: Vec<(Arrivals, Arrivals)>,
    /// Per station: log10 PGV this quake adds at this station beyond its site (σ 0.1).
    scatter: Vec<f64>,
}

impl Prepared {
    fn new(quake: TruthQuake, earth: &Earth, stations: &[StationPosition], rng: &mut Rng) -> Self {
        let patches = quake.patches();
        Prepared {
            quake,
            patches: patches.len(),
            arrivals: stations
                .iter()
                .zip(&earth.terms)
                .map(|(station, terms)| arrivals(&quake, &patches, station, terms.delay_s))
                .collect(),
            scatter: stations.iter().map(|_| rng.normal(0.0, 0.1)).collect(),
        }
    }

    /// Intensity from the first `arrived` patches, the nearest `nearest_km` away, at station `i`.
    fn peak(&self, earth: &Earth, i: usize, arrived: usize, nearest_km: f64) -> f64 {
        let q = &self.quake;
        let broken = arrived as f64 / self.patches as f64;
        let mw = q.mw + 2.0 / 3.0 * broken.log10();
        let log =
            log_pgv(mw, q.depth_km, nearest_km) + earth.terms[i].site_log_pgv + self.scatter[i];
        intensity(log).min(7.0)
    }

    /// The realtime intensity this quake alone causes at station `i` at time `t`, before noise; `None` before
    /// its P wave.
    fn level(&self, earth: &Earth, i: usize, t: f64) -> Option<f64> {
        let terms = &earth.terms[i];
        let (p, s) = &self.arrivals[i];
        let (arrived, nearest) = p.by(t)?;
        let background = terms.noise_level;
        let p_target = self.peak(earth, i, arrived, nearest) - terms.p_contrast;
        // Emergent: the P level builds over `p_rise_s` (95 % of the way).
        let built = 1.0 - (-(t - p.first()) * 3.0 / terms.p_rise_s).exp();
        let p_level = background + (p_target - background).max(0.0) * built;
        let Some((arrived, nearest)) = s.by(t) else {
            return Some(p_level);
        };
        let s_target = self.peak(earth, i, arrived, nearest);
        let after_peak = t - (s.last() + terms.s_rise_s);
        let level = if after_peak > 0.0 {
            // The coda: everything dies away together.
            s_target - terms.decay_per_s * after_peak
        } else {
            let grown = ((t - s.first()) / terms.s_rise_s).clamp(0.0, 1.0);
            p_level + (s_target - p_level).max(0.0) * grown
        };
        Some(level.max(background))
    }
}

/// A scenario made for one network: its frames (one per second, one value or no data per station) and, per
/// quake, every station's true P arrival (seconds on the scenario clock, its delay included).
pub struct Rendered {
    pub frames: Vec<Vec<Option<f64>>>,
    pub p_arrivals: Vec<Vec<f64>>,
}

/// Frames 0..`seconds` of every station's realtime intensity, quantised to 0.1; quakes add up as the strongest
/// at each moment. Deterministic for a seed.
pub fn render(
    earth: &Earth,
    truth: &Truth,
    stations: &[StationPosition],
    seconds: u64,
    seed: u64,
) -> Rendered {
    let mut rng = Rng::new(seed);
    let prepared: Vec<Prepared> = truth
        .quakes
        .iter()
        .map(|q| Prepared::new(*q, earth, stations, &mut rng))
        .collect();
    let burst_members: Vec<Vec<usize>> = truth
        .disturbances
        .iter()
        .map(|d| match d {
            Disturbance::Burst {
                latitude,
                longitude,
                stations: count,
                ..
            } => {
                let mut by_distance: Vec<(f64, usize)> = stations
                    .iter()
                    .enumerate()
                    .map(|(i, s)| {
                        (
                            distance_km(*latitude, *longitude, s.latitude, s.longitude),
                            i,
                        )
                    })
                    .collect();
                by_distance.sort_by(|a, b| a.0.total_cmp(&b.0));
                by_distance.iter().take(*count).map(|(_, i)| *i).collect()
            }
            _ => Vec::new(),
        })
        .collect();
    let frames = (0..seconds)
        .map(|n| {
            let t = n as f64;
            (0..stations.len())
                .map(|i| {
                    let terms = &earth.terms[i];
                    let noise = rng.normal(0.0, terms.noise_sd);
                    let missing = rng.uniform() < truth.dropout;
                    let mut value = prepared
                        .iter()
                        .filter_map(|q| q.level(earth, i, t))
                        .fold(terms.noise_level, f64::max)
                        + noise;
                    let mut present = !missing;
                    for (d, members) in truth.disturbances.iter().zip(&burst_members) {
                        match *d {
                            Disturbance::Burst {
                                from,
                                seconds,
                                rise,
                                ..
                            } if members.contains(&i) && n >= from => {
                                // Holds, then falls back over 3 s.
                                let past = (n - from) as f64 - seconds as f64;
                                let burst = terms.noise_level + rise - past.max(0.0) * rise / 3.0;
                                value = value.max(burst);
                            }
                            Disturbance::Flapping {
                                station,
                                period,
                                level,
                            } if station == i => {
                                let on = (n / period.max(1)) % 2 == 0;
                                match level {
                                    None => present &= on,
                                    Some(level) if on => value = level + noise,
                                    Some(_) => {}
                                }
                            }
                            Disturbance::Spike {
                                station,
                                frame,
                                level,
                            } if station == i && frame == n => value = level,
                            Disturbance::Stuck { station, level } if station == i => value = level,
                            _ => {}
                        }
                    }
                    present.then(|| (value.clamp(-3.0, 7.0) * 10.0).round() / 10.0)
                })
                .collect()
        })
        .collect();
    let p_arrivals = prepared
        .iter()
        .map(|q| q.arrivals.iter().map(|(p, _)| p.first()).collect())
        .collect();
    Rendered { frames, p_arrivals }
}
