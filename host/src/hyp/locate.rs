//! Location by grid search: at each trial hypocentre every pick implies an origin time; the score is their
//! weighted spread (weights Rmin²/R²) plus a penalty for stations that should already have been reached but
//! have not triggered. Coarse (0.4°, depths 10/50/90/130 km) within 2° of the first station, then fine (0.1°,
//! ±20 km). Depth is fixed at 10 km for 1–2 stations, capped at 130 km for 3–4 and 150 km from 5.

use super::geo::distance_km;
use super::traveltime::{hypocentral_km, p_seconds};

/// A triggered station: where it is and when the P wave arrived (seconds on the detector's clock; a pick from
/// 1-second frames is the frame time minus 0.5 s).
#[derive(Debug, Clone, Copy)]
pub struct Pick {
    pub latitude: f64,
    pub longitude: f64,
    pub at: f64,
}

/// A station that has not triggered by `now`.
#[derive(Debug, Clone, Copy)]
pub struct Quiet {
    pub latitude: f64,
    pub longitude: f64,
}

/// The best trial hypocentre.
#[derive(Debug, Clone, PartialEq)]
pub struct Hypocentre {
    pub latitude: f64,
    pub longitude: f64,
    pub depth_km: f64,
    /// Origin time on the detector's clock.
    pub origin: f64,
    pub score: f64,
    /// Per pick: observed minus predicted arrival, seconds.
    pub residuals: Vec<f64>,
    /// Per pick: whether it was used (a pick far off every good solution, e.g. an S onset read as P, is not).
    pub used: Vec<bool>,
    pub rms_seconds: f64,
    pub depth_fixed: bool,
}

/// Seconds a station may lag behind its predicted arrival before its silence counts against a trial point.
const NON_ARRIVAL_GRACE_S: f64 = 1.5;
/// Weight of one second of unexplained silence, against one second of origin-time spread.
const NON_ARRIVAL_WEIGHT: f64 = 0.5;

fn depth_rule(picks: usize) -> (Vec<f64>, f64, bool) {
    match picks {
        0..=2 => (vec![10.0], 10.0, true),
        3..=4 => (vec![10.0, 50.0, 90.0, 130.0], 130.0, false),
        _ => (vec![10.0, 50.0, 90.0, 130.0], 150.0, false),
    }
}

/// Scores one trial point: (score, origin time).
fn evaluate(
    lat: f64,
    lon: f64,
    depth: f64,
    picks: &[Pick],
    quiet: &[Quiet],
    now: f64,
) -> (f64, f64) {
    let distances: Vec<f64> = picks
        .iter()
        .map(|p| distance_km(lat, lon, p.latitude, p.longitude))
        .collect();
    let r: Vec<f64> = distances
        .iter()
        .map(|&d| hypocentral_km(d, depth).max(1.0))
        .collect();
    let r_min = r.iter().copied().fold(f64::INFINITY, f64::min);
    let weights: Vec<f64> = r.iter().map(|&ri| (r_min * r_min) / (ri * ri)).collect();
    let implied: Vec<f64> = picks
        .iter()
        .zip(&distances)
        .map(|(p, &d)| p.at - p_seconds(d, depth))
        .collect();
    let total: f64 = weights.iter().sum();
    let origin = implied
        .iter()
        .zip(&weights)
        .map(|(t, w)| t * w)
        .sum::<f64>()
        / total;
    let spread = (implied
        .iter()
        .zip(&weights)
        .map(|(t, w)| w * (t - origin).powi(2))
        .sum::<f64>()
        / total)
        .sqrt();
    let silence: f64 = quiet
        .iter()
        .map(|q| {
            let due = origin + p_seconds(distance_km(lat, lon, q.latitude, q.longitude), depth);
            (now - NON_ARRIVAL_GRACE_S - due).max(0.0)
        })
        .sum();
    let penalty = NON_ARRIVAL_WEIGHT * silence / (picks.len() as f64);
    (spread + penalty, origin)
}

fn search(
    picks: &[Pick],
    quiet: &[Quiet],
    now: f64,
    lats: impl Iterator<Item = f64> + Clone,
    lons: impl Iterator<Item = f64> + Clone,
    depths: &[f64],
) -> (f64, f64, f64, f64, f64) {
    let mut best = (f64::INFINITY, 0.0, 0.0, 0.0, 0.0);
    for lat in lats {
        for lon in lons.clone() {
            for &depth in depths {
                let (score, origin) = evaluate(lat, lon, depth, picks, quiet, now);
                if score < best.0 {
                    best = (score, lat, lon, depth, origin);
                }
            }
        }
    }
    best
}

fn steps(center: f64, half_width: f64, step: f64) -> impl Iterator<Item = f64> + Clone {
    let n = (half_width / step).round() as i64;
    (-n..=n).map(move |i| center + i as f64 * step)
}

/// Observed minus predicted P arrival of each pick, for a hypocentre and origin time.
pub fn residuals(
    picks: &[Pick],
    latitude: f64,
    longitude: f64,
    depth_km: f64,
    origin: f64,
) -> Vec<f64> {
    picks
        .iter()
        .map(|p| {
            p.at - (origin
                + p_seconds(
                    distance_km(latitude, longitude, p.latitude, p.longitude),
                    depth_km,
                ))
        })
        .collect()
}

/// A pick this far off the first solution is set aside and the location repeated without it.
const OUTLIER_S: f64 = 3.0;
/// Picks needed before any is set aside.
const MIN_PICKS_FOR_OUTLIERS: usize = 6;

/// The hypocentre that best explains the picks (and the silence of `quiet` stations at time `now`), or `None`
/// without picks. Picks that sit more than 3 s off the first solution are set aside and the search repeated.
pub fn locate(picks: &[Pick], quiet: &[Quiet], now: f64) -> Option<Hypocentre> {
    locate_near(picks, quiet, now, None)
}

/// Like [`locate`], with the coarse search centred on `center` (a previous solution) instead of the first
/// station, so an event whose first stations have gone quiet is still searched where it is.
pub fn locate_near(
    picks: &[Pick],
    quiet: &[Quiet],
    now: f64,
    center: Option<(f64, f64)>,
) -> Option<Hypocentre> {
    let first = locate_once(picks, quiet, now, center)?;
    let keep: Vec<bool> = first
        .residuals
        .iter()
        .map(|r| r.abs() <= OUTLIER_S)
        .collect();
    let kept: Vec<Pick> = picks
        .iter()
        .zip(&keep)
        .filter(|(_, k)| **k)
        .map(|(p, _)| *p)
        .collect();
    // Only a few stray picks are set aside: when many disagree, the first solution itself is in doubt.
    if picks.len() < MIN_PICKS_FOR_OUTLIERS
        || kept.len() == picks.len()
        || kept.len() * 5 < picks.len() * 4
    {
        return Some(first);
    }
    let second = locate_once(&kept, quiet, now, center)?;
    let residuals = residuals(
        picks,
        second.latitude,
        second.longitude,
        second.depth_km,
        second.origin,
    );
    Some(Hypocentre {
        residuals,
        used: keep,
        ..second
    })
}

fn locate_once(
    picks: &[Pick],
    quiet: &[Quiet],
    now: f64,
    center: Option<(f64, f64)>,
) -> Option<Hypocentre> {
    let first = picks.iter().min_by(|a, b| a.at.total_cmp(&b.at))?;
    let (center_lat, center_lon) = center.unwrap_or((first.latitude, first.longitude));
    let (coarse_depths, cap, depth_fixed) = depth_rule(picks.len());
    let (_, lat, lon, depth, _) = search(
        picks,
        quiet,
        now,
        steps(center_lat, 2.0, 0.4),
        steps(center_lon, 2.0, 0.4),
        &coarse_depths,
    );
    let fine_depths: Vec<f64> = if depth_fixed {
        vec![10.0]
    } else {
        steps(depth, 20.0, 5.0).map(|d| d.clamp(0.0, cap)).collect()
    };
    let (score, lat, lon, depth, origin) = search(
        picks,
        quiet,
        now,
        steps(lat, 0.4, 0.1),
        steps(lon, 0.4, 0.1),
        &fine_depths,
    );
    let residuals = residuals(picks, lat, lon, depth, origin);
    let rms_seconds =
        (residuals.iter().map(|r| r * r).sum::<f64>() / residuals.len() as f64).sqrt();
    Some(Hypocentre {
        latitude: lat,
        longitude: lon,
        depth_km: depth,
        origin,
        score,
        used: vec![true; residuals.len()],
        residuals,
        rms_seconds,
        depth_fixed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hyp::geo::destination;

    fn picks_around(lat: f64, lon: f64, depth: f64, origin: f64, n: usize) -> Vec<Pick> {
        (0..n)
            .map(|i| {
                let (la, lo) =
                    destination(lat, lon, 360.0 * i as f64 / n as f64, 20.0 + 7.0 * i as f64);
                Pick {
                    latitude: la,
                    longitude: lo,
                    at: origin + p_seconds(distance_km(lat, lon, la, lo), depth),
                }
            })
            .collect()
    }

    #[test]
    fn exact_picks_locate_the_hypocentre() {
        let picks = picks_around(35.0, 135.0, 30.0, 100.0, 12);
        let h = locate(&picks, &[], 130.0).unwrap();
        assert!(
            distance_km(h.latitude, h.longitude, 35.0, 135.0) < 12.0,
            "{h:?}"
        );
        assert!((h.depth_km - 30.0).abs() <= 20.0, "{h:?}");
        assert!((h.origin - 100.0).abs() < 3.0, "{h:?}");
        assert!(!h.depth_fixed);
    }

    #[test]
    fn one_or_two_stations_fix_the_depth_at_10_km() {
        let picks = picks_around(35.0, 135.0, 30.0, 100.0, 2);
        let h = locate(&picks, &[], 110.0).unwrap();
        assert!(h.depth_fixed);
        assert_eq!(h.depth_km, 10.0);
    }

    #[test]
    fn silent_stations_push_the_solution_away_from_them() {
        // Two picks to the east of a silent station: the epicentre cannot sit next to the silent one.
        let picks = vec![
            Pick {
                latitude: 35.0,
                longitude: 135.5,
                at: 10.0,
            },
            Pick {
                latitude: 35.2,
                longitude: 135.6,
                at: 11.0,
            },
            Pick {
                latitude: 34.8,
                longitude: 135.6,
                at: 11.0,
            },
        ];
        let quiet = [Quiet {
            latitude: 35.0,
            longitude: 135.0,
        }];
        let h = locate(&picks, &quiet, 20.0).unwrap();
        let to_silent = distance_km(h.latitude, h.longitude, 35.0, 135.0);
        let to_first = distance_km(h.latitude, h.longitude, 35.0, 135.5);
        assert!(to_first < to_silent, "{h:?}");
    }
}
