//! Magnitude from peaks: Si & Midorikawa (1999) PGV attenuation (peak intensity ↔ PGV by I = 2.68 +
//! 1.72 log10 PGV) solved for the Mw at which the median station's observed intensity equals the predicted
//! one; the median absolute deviation of the per-station inversions as uncertainty; nothing below two stations.
//!
//! Two estimates, named by `magnitudeType`:
//! - `Mw-SM99`: stations the S wave has reached (and passed by a few seconds, so their peak is the S peak).
//! - `Mw-SM99-P`: before two stations have that, stations settled in their P window (three seconds or more
//!   after their P arrival, before the S wave). Realtime intensity in the P window runs below the S peak by a
//!   roughly constant contrast; the estimate adds that contrast ([`P_TO_S_INTENSITY`], an assumption of this
//!   method) to the P-window peak before inverting. The S estimate replaces it as soon as two stations qualify.
//!
//! Before either can be made the magnitude is not reported (`null`): on the independent truth model an estimate
//! from stations just reached, whose emergent P is still building, ran a unit low in the median. A rougher
//! [`provisional`] estimate from every station reached only tells a quake from a burst before publication.
//!
//! Only the stations nearest the hypocentre count (the S wave's peaks decay towards the noise far away), but
//! not those so near a large source that the relation saturates there (see [`sensitive`]), and a peak at the
//! top of the scale (7.0) is a lower bound, so it counts only when nothing else does.

/// The depth term of the relation is not extrapolated past this depth: fitted to crustal and slab events,
/// it would make a 600 km deep quake shake the surface a hundred times harder than a shallow one of its size.
const DEPTH_TERM_MAX_KM: f64 = 150.0;

/// Surface PGV (cm/s) predicted at hypocentral distance `r_km` from an event of `mw` at `depth_km` (crustal,
/// d = 0, site amplification 1).
pub fn pgv_cm_s(mw: f64, depth_km: f64, r_km: f64) -> f64 {
    let fault_length = 10f64.powf(0.5 * mw - 1.85);
    let x = (r_km - fault_length / 2.0).max(3.0);
    let log_pgv = 0.58 * mw + 0.0038 * depth_km.min(DEPTH_TERM_MAX_KM)
        - (x + 0.0028 * 10f64.powf(0.5 * mw)).log10()
        - 0.002 * x
        - 1.29;
    10f64.powf(log_pgv)
}

/// Realtime intensity of a PGV.
pub fn intensity_of_pgv(pgv: f64) -> f64 {
    2.68 + 1.72 * pgv.log10()
}

/// The realtime intensity an event of `mw` at `depth_km` causes at hypocentral distance `r_km`.
pub fn predicted_intensity(mw: f64, depth_km: f64, r_km: f64) -> f64 {
    intensity_of_pgv(pgv_cm_s(mw, depth_km, r_km))
}

/// PGV of a realtime intensity.
pub fn pgv_of_intensity(intensity: f64) -> f64 {
    10f64.powf((intensity - 2.68) / 1.72)
}

/// The Mw whose predicted intensity at this distance and depth equals `intensity` (bisection; the prediction
/// grows with Mw).
pub fn invert(intensity: f64, depth_km: f64, r_km: f64) -> f64 {
    let target = pgv_of_intensity(intensity);
    let (mut low, mut high) = (0.0_f64, MAX_MW);
    for _ in 0..60 {
        let mid = (low + high) / 2.0;
        if pgv_cm_s(mid, depth_km, r_km) < target {
            low = mid;
        } else {
            high = mid;
        }
    }
    (low + high) / 2.0
}

/// The top of the magnitude scale the estimates search: an estimate there is shaking no quake explains at
/// those distances, not a measurement.
pub const MAX_MW: f64 = 9.5;

/// Whether an estimate of `mw` stands at the top of the scale (the bisections end within a hair of it).
pub fn at_top(mw: f64) -> bool {
    mw >= MAX_MW - 0.01
}

/// How far below the S peak realtime intensity runs in the P window (intensity units).
pub const P_TO_S_INTENSITY: f64 = 1.5;
/// The S-wave estimate's `magnitudeType`.
pub const KIND_S: &str = "Mw-SM99";
/// The P-window estimate's `magnitudeType`.
pub const KIND_P: &str = "Mw-SM99-P";
/// Stations counted: the nearest this many of those that qualify.
const NEAREST: usize = 30;
/// The top of the realtime-intensity scale: a peak there is clipped.
const CLIPPED: f64 = 6.95;
/// Peaks at or below this are too close to the noise to say anything.
const FLOOR: f64 = -0.5;

/// A station's P-window level counts for the P magnitude this long after its P arrival, once the P wave's
/// shaking has built up (an emergent onset takes seconds)…
const P_SETTLE_S: f64 = 3.0;
/// …and until this long before its predicted S arrival (the S wave's first peaks must not pass for P).
const S_MARGIN_S: f64 = 1.5;
/// A station's peak is its S peak this long after the S arrival.
const S_BUILD_S: f64 = 3.0;

/// Which wave a station's peak so far belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wave {
    /// The P wave arrived a while ago (its shaking has built up), the S wave not yet.
    P,
    /// The P wave has only just arrived: used when no station is further into its P window.
    PEarly,
    /// The S wave has arrived and is still building: its level so far is a lower bound of its peak.
    SBuilding,
    /// The S wave has arrived and its peak has had time to build.
    S,
    /// Neither yet, or the S wave is still building.
    Neither,
}

impl Wave {
    /// The wave a station shows `since` seconds after the origin, its P and S arriving `tp` and `ts` seconds
    /// after it.
    pub fn at(since: f64, tp: f64, ts: f64) -> Wave {
        if since > ts + S_BUILD_S {
            Wave::S
        } else if since >= ts {
            Wave::SBuilding
        } else if since >= ts - S_MARGIN_S {
            Wave::Neither
        } else if since >= tp + P_SETTLE_S {
            Wave::P
        } else if since >= tp {
            Wave::PEarly
        } else {
            Wave::Neither
        }
    }
}

/// One station's contribution.
#[derive(Debug, Clone, Copy)]
pub struct PeakAtStation {
    pub peak_intensity: f64,
    pub hypocentral_km: f64,
    pub wave: Wave,
}

/// The estimate: median Mw, MAD, stations used, and which estimate (`KIND_S` or `KIND_P`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    pub mw: f64,
    pub uncertainty: f64,
    pub stations: usize,
    pub kind: &'static str,
}

/// The S estimate when two stations qualify for it, else the P estimate from two stations settled in their P
/// window (3 s after their P arrival, when an emergent onset has built up); `None` otherwise: the magnitude is
/// not reported before it can be estimated this well.
pub fn estimate(peaks: &[PeakAtStation], depth_km: f64) -> Option<Estimate> {
    let s = |w| (w == Wave::S).then_some(0.0);
    by_wave(peaks, depth_km, &s, KIND_S, Saturated::Ignored).or_else(|| {
        let settled = |w| (w == Wave::P).then_some(P_TO_S_INTENSITY);
        by_wave(peaks, depth_km, &settled, KIND_P, Saturated::Ignored)
    })
}

/// [`estimate`], or before it can be made, a rough one from every station reached, each read for the wave it
/// shows (a P wave still building reads low; a building S wave is a lower bound) and counted even where the
/// relation saturates: enough to tell a quake of magnitude 3 from a burst on a few stations, never reported.
pub fn provisional(peaks: &[PeakAtStation], depth_km: f64) -> Option<Estimate> {
    estimate(peaks, depth_km).or_else(|| {
        let any = |w| match w {
            Wave::S | Wave::SBuilding => Some(0.0),
            Wave::P | Wave::PEarly => Some(P_TO_S_INTENSITY),
            Wave::Neither => None,
        };
        by_wave(peaks, depth_km, &any, KIND_P, Saturated::Counted)
    })
}

/// Whether a station where the relation saturates counts (see [`sensitive`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Saturated {
    /// Not: its peak does not measure the magnitude (every reported estimate).
    Ignored,
    /// As any other: a rough reading, never reported.
    Counted,
}

/// The estimate from the stations `contrast` accepts, each peak raised by the contrast it gives for its wave.
fn by_wave(
    peaks: &[PeakAtStation],
    depth_km: f64,
    contrast: &dyn Fn(Wave) -> Option<f64>,
    kind: &'static str,
    saturated: Saturated,
) -> Option<Estimate> {
    let mut qualifying: Vec<PeakAtStation> = peaks
        .iter()
        .filter(|p| p.peak_intensity > FLOOR)
        .filter_map(|p| {
            contrast(p.wave).map(|c| PeakAtStation {
                peak_intensity: p.peak_intensity + c,
                ..*p
            })
        })
        .collect();
    qualifying.sort_by(|a, b| a.hypocentral_km.total_cmp(&b.hypocentral_km));
    qualifying.truncate(NEAREST);
    // Clipped peaks only say "at least": used only when there is nothing else.
    let unclipped: Vec<PeakAtStation> = qualifying
        .iter()
        .copied()
        .filter(|p| p.peak_intensity < CLIPPED)
        .collect();
    let chosen = if unclipped.len() >= 2 {
        unclipped
    } else {
        qualifying
    };
    if chosen.len() < 2 {
        return None;
    }
    // The Mw at which the median station's observed intensity equals the predicted one. Solving in intensity
    // rather than taking the median of per-station Mw keeps a station next to a large fault, whose intensity
    // hardly grows with Mw any more, from turning a small intensity error into a large Mw error.
    //
    // Near a large source the relation saturates: a station there shakes about as hard whatever the
    // magnitude, so its peak says nothing of it, and the relation's own error of half a unit there would
    // move the magnitude by units (site amplification read as an M9.5). At each magnitude tried, only the
    // stations where the prediction still grows by [`MIN_SENSITIVITY`] per unit of Mw count; with fewer than
    // two of them the magnitude tried is more than these stations can tell.
    let counts = |mw: f64, p: &PeakAtStation| {
        saturated == Saturated::Counted || sensitive(mw, depth_km, p.hypocentral_km)
    };
    let misfit = |mw: f64| {
        let mut residuals: Vec<f64> = chosen
            .iter()
            .filter(|p| counts(mw, p))
            .map(|p| p.peak_intensity - predicted_intensity(mw, depth_km, p.hypocentral_km))
            .collect();
        (residuals.len() >= 2).then(|| median(&mut residuals))
    };
    let (mut low, mut high) = (0.0_f64, MAX_MW);
    for _ in 0..50 {
        let mid = (low + high) / 2.0;
        if misfit(mid).is_some_and(|m| m > 0.0) {
            low = mid;
        } else {
            high = mid;
        }
    }
    // The stations must say "no larger" themselves, not fall silent: a magnitude at which the last of them
    // saturate is where the relation stops measuring, not a measurement.
    misfit(high)?;
    let mw = (low + high) / 2.0;
    let chosen: Vec<PeakAtStation> = chosen.into_iter().filter(|p| counts(mw, p)).collect();
    if chosen.len() < 2 {
        return None;
    }
    let mut deviations: Vec<f64> = chosen
        .iter()
        .map(|p| (invert(p.peak_intensity, depth_km, p.hypocentral_km) - mw).abs())
        .collect();
    Some(Estimate {
        mw,
        uncertainty: median(&mut deviations),
        stations: chosen.len(),
        kind,
    })
}

/// How much a station's predicted intensity must grow per unit of Mw for its peak to measure the magnitude
/// (far from the source it grows by about 1; where it grows by less than half that, the relation's error of
/// half an intensity unit is more than a unit of Mw).
const MIN_SENSITIVITY: f64 = 0.5;

/// Whether the intensity an event of `mw` predicts `r_km` away still grows by [`MIN_SENSITIVITY`] per unit
/// of Mw there.
fn sensitive(mw: f64, depth_km: f64, r_km: f64) -> bool {
    const STEP: f64 = 0.05;
    let growth = predicted_intensity(mw + STEP, depth_km, r_km)
        - predicted_intensity(mw - STEP, depth_km, r_km);
    growth >= MIN_SENSITIVITY * 2.0 * STEP
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(|a, b| a.total_cmp(b));
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inversion_recovers_the_magnitude_that_produced_the_peak() {
        for mw in [4.5, 5.5, 6.5, 7.4] {
            for r in [20.0, 60.0, 150.0] {
                let i = intensity_of_pgv(pgv_cm_s(mw, 10.0, r));
                assert!((invert(i, 10.0, r) - mw).abs() < 1e-6, "mw {mw} r {r}");
            }
        }
    }

    #[test]
    fn two_s_stations_give_the_s_estimate_else_two_p_stations_the_p_estimate() {
        let at = |wave| PeakAtStation {
            peak_intensity: 4.0,
            hypocentral_km: 50.0,
            wave,
        };
        assert_eq!(estimate(&[at(Wave::S), at(Wave::Neither)], 10.0), None);
        // One station of each, or stations whose P is still building: nothing reported yet, only a
        // provisional reading, each station for the wave it shows.
        assert_eq!(estimate(&[at(Wave::P), at(Wave::SBuilding)], 10.0), None);
        assert_eq!(estimate(&[at(Wave::PEarly), at(Wave::PEarly)], 10.0), None);
        let mixed = provisional(&[at(Wave::P), at(Wave::SBuilding)], 10.0).unwrap();
        assert_eq!(mixed.kind, KIND_P);
        assert_eq!(mixed.stations, 2);
        let s = estimate(&[at(Wave::S), at(Wave::S), at(Wave::P)], 10.0).unwrap();
        assert_eq!(s.kind, KIND_S);
        assert_eq!(s.stations, 2);
        // The P estimate reads the P-window peak as the S peak it foreshadows.
        let p = estimate(&[at(Wave::P), at(Wave::P), at(Wave::S)], 10.0).unwrap();
        assert_eq!(p.kind, KIND_P);
        assert!((p.mw - invert(4.0 + P_TO_S_INTENSITY, 10.0, 50.0)).abs() < 1e-6);
        // Only stations settled in their P window count, not those just reached.
        let settled = PeakAtStation {
            peak_intensity: 3.0,
            ..at(Wave::P)
        };
        let p = estimate(&[settled, settled, at(Wave::PEarly)], 10.0).unwrap();
        assert!((p.mw - invert(3.0 + P_TO_S_INTENSITY, 10.0, 50.0)).abs() < 1e-6);
        assert_eq!(p.stations, 2);
    }

    #[test]
    fn clipped_and_noise_level_peaks_do_not_count_when_others_do() {
        let at = |i: f64, r: f64| PeakAtStation {
            peak_intensity: i,
            hypocentral_km: r,
            wave: Wave::S,
        };
        let e = estimate(
            &[at(7.0, 10.0), at(4.0, 40.0), at(4.0, 40.0), at(-1.0, 30.0)],
            10.0,
        )
        .unwrap();
        assert_eq!(e.stations, 2);
        assert!((e.mw - invert(4.0, 10.0, 40.0)).abs() < 1e-9);
    }

    /// Beside a large source the relation hardly grows with magnitude: peaks there half a unit above it (a
    /// soft site, another relation's strong shaking) made an M6.8 an M8.4 and, on other draws, an M9.5.
    #[test]
    fn peaks_where_the_relation_saturates_say_nothing_of_the_magnitude() {
        let at = |i: f64, r: f64| PeakAtStation {
            peak_intensity: i,
            hypocentral_km: r,
            wave: Wave::S,
        };
        let beside = [at(6.0, 11.0), at(6.3, 13.0), at(5.7, 14.0)];
        assert_eq!(estimate(&beside, 10.0), None);
        // Farther stations that the relation does measure by give the magnitude; the saturated ones do not
        // drag it up.
        let farther: Vec<PeakAtStation> = [45.0, 50.0, 60.0]
            .iter()
            .map(|&r| at(predicted_intensity(6.8, 10.0, r), r))
            .collect();
        let all: Vec<PeakAtStation> = beside.iter().chain(&farther).copied().collect();
        let e = estimate(&all, 10.0).unwrap();
        assert!((e.mw - 6.8).abs() < 0.05, "{e:?}");
        assert_eq!(e.stations, 3);
    }

    #[test]
    fn the_median_resists_one_outlier_and_the_mad_reports_the_spread() {
        let at = |i: f64| PeakAtStation {
            peak_intensity: i,
            hypocentral_km: 40.0,
            wave: Wave::S,
        };
        let mw = |i: f64| invert(i, 10.0, 40.0);
        let e = estimate(&[at(4.0), at(4.1), at(3.9), at(6.9)], 10.0).unwrap();
        // At one distance the median station is the median intensity.
        assert!((e.mw - mw(4.05)).abs() < 1e-6, "{e:?}");
        assert!(e.uncertainty < 0.2);
        assert_eq!(e.stations, 4);
    }
}
