//! Synthetic earthquakes with known truth: a station network, arrival times from the travel-time model, peaks
//! from the Si & Midorikawa attenuation, and a 1 Hz realtime-intensity envelope per station with seeded noise,
//! quantised to 0.1 like the monitor's colour scale. Imperfections on demand: per-station timing offsets and site
//! factors (so a solution is not right only because the scenario and the locator share one travel-time table),
//! dropouts, stuck stations, lone spikes.

use crate::detector::Station;
use crate::geo::{destination, distance_km};
use crate::magnitude::predicted_intensity;
use crate::rng::Rng;
use crate::traveltime::{Model, hypocentral_km};
use crate::trigger::StationPosition;

/// A synthetic earthquake. `origin` is in seconds on the scenario clock (frame n is at n seconds).
#[derive(Debug, Clone, Copy)]
pub struct Quake {
    pub latitude: f64,
    pub longitude: f64,
    pub depth_km: f64,
    pub mw: f64,
    pub origin: f64,
}

impl Quake {
    pub fn at(latitude: f64, longitude: f64, depth_km: f64, mw: f64, origin: f64) -> Quake {
        Quake {
            latitude,
            longitude,
            depth_km,
            mw,
            origin,
        }
    }
}

/// Background realtime intensity and its noise.
const BACKGROUND: f64 = -2.0;
const NOISE_SD: f64 = 0.15;

/// Stations on a square grid `spacing_km` apart within `radius_km` of a centre, kept where `keep` says (e.g.
/// only on land, for an offshore event).
pub fn grid_network(
    latitude: f64,
    longitude: f64,
    radius_km: f64,
    spacing_km: f64,
    keep: impl Fn(f64, f64) -> bool,
) -> Vec<StationPosition> {
    let n = (radius_km / spacing_km).floor() as i64;
    let mut stations = Vec::new();
    for i in -n..=n {
        for j in -n..=n {
            let (dx, dy) = (i as f64 * spacing_km, j as f64 * spacing_km);
            let distance = dx.hypot(dy);
            if distance > radius_km {
                continue;
            }
            let azimuth = dx.atan2(dy).to_degrees();
            let (lat, lon) = destination(latitude, longitude, azimuth, distance);
            if keep(lat, lon) {
                stations.push(StationPosition {
                    latitude: lat,
                    longitude: lon,
                });
            }
        }
    }
    stations
}

/// The detector's stations at `positions`, coded by their index (`S0`, `S1`, …), unnamed.
pub fn stations_at(positions: &[StationPosition]) -> Vec<Station> {
    positions
        .iter()
        .enumerate()
        .map(|(i, p)| Station {
            code: format!("S{i}"),
            name: None,
            latitude: p.latitude,
            longitude: p.longitude,
        })
        .collect()
}

/// The peak realtime intensity a quake produces at a station.
pub fn peak_intensity(quake: &Quake, station: &StationPosition) -> f64 {
    let epicentral = distance_km(
        quake.latitude,
        quake.longitude,
        station.latitude,
        station.longitude,
    );
    let r = hypocentral_km(epicentral, quake.depth_km);
    predicted_intensity(quake.mw, quake.depth_km, r).min(7.0)
}

/// How realtime intensity builds and fades at a station: the P window runs `p_contrast` below the S peak and
/// is reached `p_rise_s` after the P arrival; the S peak is reached `s_rise_s` after the S arrival; then it
/// decays by `decay_per_s` a second. The default is the detector's own assumption (a 1.5 contrast, an
/// immediate P step); scenarios vary it so the detector is not right only because the two agree.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Envelope {
    pub p_contrast: f64,
    pub p_rise_s: f64,
    pub s_rise_s: f64,
    pub decay_per_s: f64,
}

impl Default for Envelope {
    fn default() -> Self {
        Envelope {
            p_contrast: 1.5,
            p_rise_s: 0.0,
            s_rise_s: 3.0,
            decay_per_s: 0.2,
        }
    }
}

/// The intensity one quake alone would show at a station at time `t` (before noise), with the station's timing
/// offset (seconds its clock and onset lag the model) and site term (intensity added to its peak).
fn envelope(
    model: &Model,
    quake: &Quake,
    station: &StationPosition,
    t: f64,
    offset: f64,
    site: f64,
    shape: &Envelope,
) -> f64 {
    let epicentral = distance_km(
        quake.latitude,
        quake.longitude,
        station.latitude,
        station.longitude,
    );
    let tp = quake.origin + model.p(epicentral, quake.depth_km) + offset;
    let ts = quake.origin + model.s(epicentral, quake.depth_km) + offset;
    let peak = (peak_intensity(quake, station) + site).min(7.0);
    let p_level = peak - shape.p_contrast;
    // A linear rise from `from` to `to` over `seconds` starting at `start`.
    let ramp = |start: f64, seconds: f64, from: f64, to: f64| {
        if seconds <= 0.0 {
            to
        } else {
            from + (to - from) * ((t - start) / seconds).clamp(0.0, 1.0)
        }
    };
    let value = if t < tp {
        BACKGROUND
    } else if t < ts {
        ramp(tp, shape.p_rise_s, BACKGROUND, p_level)
    } else if t < ts + shape.s_rise_s {
        let reached = ramp(tp, shape.p_rise_s, BACKGROUND, p_level);
        ramp(ts, shape.s_rise_s, reached, peak)
    } else {
        peak - shape.decay_per_s * (t - ts - shape.s_rise_s)
    };
    value.max(BACKGROUND)
}

/// Imperfections to add to a scenario.
#[derive(Debug, Clone, Default)]
pub struct Faults {
    /// Stations that read this level throughout.
    pub stuck: Vec<(usize, f64)>,
    /// Stations that jump to this level for one frame.
    pub spike: Vec<(usize, u64, f64)>,
    /// Share of readings missing (no data).
    pub dropout: f64,
    /// Per station (by index; missing = 0): seconds its arrivals lag the travel-time model.
    pub timing_offsets: Vec<f64>,
    /// Per station (by index; missing = 0): intensity its site adds to the attenuation relation's peak.
    pub site_terms: Vec<f64>,
    /// How the shaking builds and fades.
    pub envelope: Envelope,
}

impl Faults {
    /// Timing offsets uniform within ±`offset_s` and site terms normal with `site_sd`, for `stations`.
    pub fn station_terms(
        mut self,
        stations: usize,
        offset_s: f64,
        site_sd: f64,
        seed: u64,
    ) -> Faults {
        let mut rng = Rng::new(seed);
        self.timing_offsets = (0..stations)
            .map(|_| (rng.uniform() * 2.0 - 1.0) * offset_s)
            .collect();
        self.site_terms = (0..stations).map(|_| rng.normal(0.0, site_sd)).collect();
        self
    }
}

/// Frames 0..`frames` (one per second) of every station's realtime intensity, the waves travelling by `model`, quantised to 0.1; quakes add
/// up as the strongest at each moment. Deterministic for a seed.
pub fn frames(
    model: &Model,
    quakes: &[Quake],
    stations: &[StationPosition],
    frames: u64,
    faults: &Faults,
    seed: u64,
) -> Vec<Vec<Option<f64>>> {
    let mut rng = Rng::new(seed);
    (0..frames)
        .map(|n| {
            let t = n as f64;
            stations
                .iter()
                .enumerate()
                .map(|(i, station)| {
                    let noise = rng.normal(0.0, NOISE_SD);
                    let missing = rng.uniform() < faults.dropout;
                    let offset = faults.timing_offsets.get(i).copied().unwrap_or(0.0);
                    let site = faults.site_terms.get(i).copied().unwrap_or(0.0);
                    let mut value = quakes
                        .iter()
                        .map(|q| envelope(model, q, station, t, offset, site, &faults.envelope))
                        .fold(BACKGROUND, f64::max)
                        + noise;
                    if let Some((_, level)) = faults.stuck.iter().find(|(s, _)| *s == i) {
                        value = *level;
                    }
                    if let Some((.., level)) = faults
                        .spike
                        .iter()
                        .find(|(s, frame, _)| *s == i && *frame == n)
                    {
                        value = *level;
                    }
                    (!missing).then(|| ((value.clamp(-3.0, 7.0)) * 10.0).round() / 10.0)
                })
                .collect()
        })
        .collect()
}
