//! Location by grid search: at each trial hypocentre every pick implies an origin time; the score is their
//! weighted spread (weights Rmin²/R², distances floored at 20 km) plus, while the evidence is young, a penalty
//! for stations inside the triggered area that should already have been reached but have not triggered. Three passes around the
//! centre (the first station, or the previous solution): 0.4° within 2°, 0.1° within 0.4°, 0.04° within
//! 0.08°. Depth is fixed at 10 km for 1–2 picks and capped at 130 km for 3–4 and 150 km for 5–7, so a shallow
//! quake that reaches a few stations at once is not taken for a deep one; from 8 picks the search reaches the
//! deep slab (700 km, the travel-time table's floor), coarse then refined around the best depth.

use crate::geo::distance_km;
use crate::traveltime::{Model, hypocentral_km};

/// A triggered station: where it is, which wave arrived and when (seconds on the detector's clock; a pick from
/// 1-second frames is the frame time minus 0.5 s).
#[derive(Debug, Clone, Copy)]
pub struct Pick {
    pub latitude: f64,
    pub longitude: f64,
    pub at: f64,
    pub arrival: Arrival,
}

/// Which wave a pick is the arrival of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    P,
    /// A deep quake's S onset, on a station whose P arrival is a pick too: the two together fix its distance.
    S,
}

impl Arrival {
    /// The travel time of this wave to a station `d` km from an epicentre `depth` km deep.
    pub fn travel(self, model: &Model, d: f64, depth: f64) -> f64 {
        match self {
            Arrival::P => model.p(d, depth),
            Arrival::S => model.s(d, depth),
        }
    }
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
    /// The deepest the picks allowed (see [`depth_cap`]): a solution there is the cap talking, not the picks.
    pub depth_cap: f64,
    /// The best point lies on the edge of the coarse search: the source is probably beyond it.
    pub at_edge: bool,
    /// How far (km) the epicentre may move, in the direction the picks constrain least, before the misfit
    /// grows by [`UNCERTAINTY_SCORE_S`]: the misfit surface's half-width, not a constant.
    pub horizontal_uncertainty_km: f64,
    /// The same in depth, at the epicentre; `None` when the depth is fixed.
    pub depth_uncertainty_km: Option<f64>,
}

impl Hypocentre {
    /// The misfit surface stays low as far as the uncertainty is looked for in some direction: the picks fix
    /// no epicentre (a trough out to sea, seen from one side).
    pub fn unbounded(&self) -> bool {
        self.horizontal_uncertainty_km >= UNCERTAINTY_MAX_KM
    }
}

/// Distances under this count as this much in the weights: otherwise a trial point on top of a station at
/// the surface gives that one station all the weight and fits any picks perfectly.
const WEIGHT_FLOOR_KM: f64 = 20.0;
/// Seconds a station may lag behind its predicted arrival before its silence counts against a trial point.
const NON_ARRIVAL_GRACE_S: f64 = 1.5;
/// Weight of one second of unexplained silence, against one second of origin-time spread.
const NON_ARRIVAL_WEIGHT: f64 = 0.5;
/// One silent station counts at most this many seconds (a station that never triggers because its site is
/// quiet must not outweigh the picks).
const NON_ARRIVAL_CAP_S: f64 = 2.0;
/// Silence is evidence only while few stations have triggered; later the picks decide alone.
pub const NON_ARRIVAL_PICKS: usize = 20;

/// Trial depths of the coarse pass, and the deepest allowed, by the number of picks.
fn depth_rule(picks: usize) -> (&'static [f64], f64, bool) {
    const SHALLOW: [f64; 6] = [10.0, 30.0, 50.0, 80.0, 110.0, 130.0];
    const FULL: [f64; 17] = [
        10.0, 30.0, 50.0, 80.0, 110.0, 150.0, 200.0, 250.0, 300.0, 350.0, 400.0, 450.0, 500.0,
        550.0, 600.0, 650.0, 700.0,
    ];
    match picks {
        0..=2 => (&[10.0], 10.0, true),
        3..=4 => (&SHALLOW, 130.0, false),
        5..=7 => (&SHALLOW, 150.0, false),
        _ => (&FULL, 700.0, false),
    }
}

/// A solution may be at most this many times deeper than its picks are spread apart (and never shallower
/// than [`APERTURE_FLOOR_KM`] for that reason): picks that all arrive at once on a few neighbouring stations fit
/// a deep source as well as anything, but a real deep quake reaches stations over a wide area within seconds.
const DEPTH_PER_APERTURE: f64 = 4.0;
const APERTURE_FLOOR_KM: f64 = 60.0;

/// The deepest a location from `picks` may be: by their number (depth fixed for 1–2, 130 km for 3–4, 150 km
/// for 5–7, the table's 700 km from 8) and by how far apart they are.
pub fn depth_cap(picks: &[Pick]) -> f64 {
    let mut aperture: f64 = 0.0;
    for (i, a) in picks.iter().enumerate() {
        for b in &picks[i + 1..] {
            aperture = aperture.max(distance_km(
                a.latitude,
                a.longitude,
                b.latitude,
                b.longitude,
            ));
        }
    }
    depth_rule(picks.len())
        .1
        .min((DEPTH_PER_APERTURE * aperture).max(APERTURE_FLOOR_KM))
}

/// Scores trial points at one epicentre for several depths: (score, depth, origin) of the best.
struct Trial<'a> {
    model: &'a Model,
    picks: &'a [Pick],
    quiet: &'a [Quiet],
    now: f64,
}

impl Trial<'_> {
    fn best_at(&self, lat: f64, lon: f64, depths: &[f64]) -> (f64, f64, f64) {
        let distances: Vec<f64> = self
            .picks
            .iter()
            .map(|p| distance_km(lat, lon, p.latitude, p.longitude))
            .collect();
        let reach = distances.iter().copied().fold(0.0, f64::max);
        let nearest = distances.iter().copied().fold(f64::INFINITY, f64::min);
        // Only silent stations inside the triggered area say something: farther ones may just be too weak.
        let quiet: Vec<f64> = if self.picks.len() < NON_ARRIVAL_PICKS {
            self.quiet
                .iter()
                .map(|q| distance_km(lat, lon, q.latitude, q.longitude))
                .filter(|d| *d < reach)
                .collect()
        } else {
            Vec::new()
        };
        let mut best = (f64::INFINITY, 0.0, 0.0);
        for &depth in depths {
            let (score, origin) = self.evaluate(&distances, nearest, &quiet, depth);
            if score < best.0 {
                best = (score, depth, origin);
            }
        }
        best
    }

    /// Scores one depth; `nearest` is the smallest of `distances` (the hypocentral distance grows with it).
    fn evaluate(&self, distances: &[f64], nearest: f64, quiet: &[f64], depth: f64) -> (f64, f64) {
        let r_min = hypocentral_km(nearest, depth).max(WEIGHT_FLOOR_KM);
        // Times relative to the first pick, so the sums of squares keep their precision (picks are Unix seconds).
        let reference = self.picks[0].at;
        let (mut total, mut sum, mut sum_sq) = (0.0, 0.0, 0.0);
        for (p, &d) in self.picks.iter().zip(distances) {
            let r = hypocentral_km(d, depth).max(WEIGHT_FLOOR_KM);
            let w = (r_min * r_min) / (r * r);
            let implied = p.at - reference - p.arrival.travel(self.model, d, depth);
            total += w;
            sum += w * implied;
            sum_sq += w * implied * implied;
        }
        let mean = sum / total;
        let spread = (sum_sq / total - mean * mean).max(0.0).sqrt();
        let origin = reference + mean;
        let silence: f64 = quiet
            .iter()
            .map(|&d| {
                let due = origin + self.model.p(d, depth);
                (self.now - NON_ARRIVAL_GRACE_S - due).clamp(0.0, NON_ARRIVAL_CAP_S)
            })
            .sum();
        let penalty = NON_ARRIVAL_WEIGHT * silence / (self.picks.len() as f64);
        (spread + penalty, origin)
    }

    /// The misfit surface's half-widths around the best point (`score` there): in 16 directions the epicentre
    /// is moved out (depth free within ±20 km) until the score has grown by [`UNCERTAINTY_SCORE_S`], and the
    /// farthest such distance is the horizontal uncertainty; the depth is moved up and down at the epicentre
    /// likewise. Bounded by [`UNCERTAINTY_MAX_KM`].
    fn uncertainty(
        &self,
        lat: f64,
        lon: f64,
        depth: f64,
        score: f64,
        cap: f64,
        depth_fixed: bool,
    ) -> (f64, Option<f64>) {
        let limit = score + UNCERTAINTY_SCORE_S;
        let depths = if depth_fixed {
            vec![depth]
        } else {
            depths_around(depth, 20.0, 10.0, cap)
        };
        let radii: Vec<f64> = (1..=10)
            .map(|k| 2.0 * f64::from(k))
            .chain((5..=20).map(|k| 5.0 * f64::from(k)))
            .chain((11..=30).map(|k| 10.0 * f64::from(k)))
            .collect();
        let horizontal = (0..16)
            .map(|k| {
                let azimuth = 22.5 * f64::from(k);
                let mut within = 0.0;
                for &r in &radii {
                    let (la, lo) = crate::geo::destination(lat, lon, azimuth, r);
                    if self.best_at(la, lo, &depths).0 > limit {
                        break;
                    }
                    within = r;
                }
                within
            })
            .fold(0.0, f64::max)
            // The grid's own spacing is the floor: the best point is only known to a grid step.
            .max(FINEST_STEP_KM);
        let vertical = (!depth_fixed).then(|| {
            let reach = |direction: f64| {
                let mut within = 0.0;
                let mut d = depth;
                loop {
                    d += direction * 2.5;
                    if !(0.0..=cap).contains(&d) || self.best_at(lat, lon, &[d]).0 > limit {
                        break within;
                    }
                    within = (d - depth).abs();
                    if within >= UNCERTAINTY_MAX_KM {
                        break within;
                    }
                }
            };
            reach(1.0).max(reach(-1.0)).max(2.5)
        });
        (horizontal.min(UNCERTAINTY_MAX_KM), vertical)
    }

    /// The best of a lat × lon grid: (score, lat, lon, depth, origin).
    fn search(&self, lats: &[f64], lons: &[f64], depths: &[f64]) -> (f64, f64, f64, f64, f64) {
        let mut best = (f64::INFINITY, 0.0, 0.0, 0.0, 0.0);
        for &lat in lats {
            for &lon in lons {
                let (score, depth, origin) = self.best_at(lat, lon, depths);
                if score < best.0 {
                    best = (score, lat, lon, depth, origin);
                }
            }
        }
        best
    }
}

/// A trial point whose misfit is within this many seconds of the best one's is as good a solution: about the
/// error of a pick from 1-second frames spread over the picks.
pub const UNCERTAINTY_SCORE_S: f64 = 0.25;
/// Uncertainties are not looked for beyond this.
const UNCERTAINTY_MAX_KM: f64 = 300.0;
/// The finest search step (0.04° of latitude), the floor of any horizontal uncertainty.
const FINEST_STEP_KM: f64 = 4.4;

/// The coarse pass searches this many degrees either side of its centre.
const COARSE_HALF_WIDTH: f64 = 2.0;

fn steps(center: f64, half_width: f64, step: f64) -> Vec<f64> {
    let n = (half_width / step).round() as i64;
    (-n..=n).map(|i| center + i as f64 * step).collect()
}

/// Depths around `depth`: `step` apart within ±`half_width`, inside 0..=`cap`.
fn depths_around(depth: f64, half_width: f64, step: f64, cap: f64) -> Vec<f64> {
    let mut depths: Vec<f64> = steps(depth, half_width, step)
        .into_iter()
        .map(|d| d.clamp(0.0, cap))
        .collect();
    depths.dedup();
    depths
}

/// Observed minus predicted arrival of each pick, for a hypocentre and origin time.
pub fn residuals(
    model: &Model,
    picks: &[Pick],
    latitude: f64,
    longitude: f64,
    depth_km: f64,
    origin: f64,
) -> Vec<f64> {
    picks
        .iter()
        .map(|p| {
            let d = distance_km(latitude, longitude, p.latitude, p.longitude);
            p.at - (origin + p.arrival.travel(model, d, depth_km))
        })
        .collect()
}

/// A pick this far off the first solution is set aside and the location repeated without it.
const OUTLIER_S: f64 = 3.0;
/// Picks needed before any is set aside.
const MIN_PICKS_FOR_OUTLIERS: usize = 6;

/// The hypocentre that best explains the picks (and the silence of `quiet` stations at time `now`), or `None`
/// without picks. Picks that sit more than 3 s off the first solution are set aside and the search repeated.
pub fn locate(model: &Model, picks: &[Pick], quiet: &[Quiet], now: f64) -> Option<Hypocentre> {
    locate_near(model, picks, quiet, now, None)
}

/// Like [`locate`], with the coarse search centred on `center` (a previous solution) instead of the first
/// station, so an event whose first stations have gone quiet is still searched where it is.
pub fn locate_near(
    model: &Model,
    picks: &[Pick],
    quiet: &[Quiet],
    now: f64,
    center: Option<(f64, f64)>,
) -> Option<Hypocentre> {
    let first = locate_once(model, picks, quiet, now, center)?;
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
    let second = locate_once(model, &kept, quiet, now, center)?;
    let residuals = residuals(
        model,
        picks,
        second.latitude,
        second.longitude,
        second.depth_km,
        second.origin,
    );
    let rms_seconds = rms(residuals
        .iter()
        .zip(&keep)
        .filter(|(_, k)| **k)
        .map(|(r, _)| *r));
    Some(Hypocentre {
        residuals,
        used: keep,
        rms_seconds,
        ..second
    })
}

fn rms(residuals: impl Iterator<Item = f64>) -> f64 {
    let (n, sum) = residuals.fold((0usize, 0.0), |(n, sum), r| (n + 1, sum + r * r));
    if n == 0 { 0.0 } else { (sum / n as f64).sqrt() }
}

fn locate_once(
    model: &Model,
    picks: &[Pick],
    quiet: &[Quiet],
    now: f64,
    center: Option<(f64, f64)>,
) -> Option<Hypocentre> {
    let first = picks.iter().min_by(|a, b| a.at.total_cmp(&b.at))?;
    let (center_lat, center_lon) = center.unwrap_or((first.latitude, first.longitude));
    let (coarse_depths, _, depth_fixed) = depth_rule(picks.len());
    let cap = depth_cap(picks);
    let mut coarse_depths: Vec<f64> = coarse_depths
        .iter()
        .copied()
        .filter(|d| *d <= cap)
        .collect();
    if !depth_fixed && coarse_depths.last().is_some_and(|d| *d < cap) {
        coarse_depths.push(cap);
    }
    let trial = Trial {
        model,
        picks,
        quiet,
        now,
    };
    let (_, lat, lon, depth, _) = trial.search(
        &steps(center_lat, COARSE_HALF_WIDTH, 0.4),
        &steps(center_lon, COARSE_HALF_WIDTH, 0.4),
        &coarse_depths,
    );
    let at_edge = (lat - center_lat).abs() >= COARSE_HALF_WIDTH - 0.01
        || (lon - center_lon).abs() >= COARSE_HALF_WIDTH - 0.01;
    // Refine the depth within the coarse axis's spacing there (20 km shallow, 50 km deep).
    let spacing = if depth < 110.0 { 20.0 } else { 50.0 };
    let fine_depths = if depth_fixed {
        vec![10.0]
    } else {
        depths_around(depth, spacing, spacing / 4.0, cap)
    };
    let (_, lat, lon, depth, _) =
        trial.search(&steps(lat, 0.4, 0.1), &steps(lon, 0.4, 0.1), &fine_depths);
    let finest_depths = if depth_fixed {
        vec![10.0]
    } else {
        depths_around(depth, spacing / 4.0, spacing / 8.0, cap)
    };
    let (score, lat, lon, depth, origin) = trial.search(
        &steps(lat, 0.08, 0.04),
        &steps(lon, 0.08, 0.04),
        &finest_depths,
    );
    let residuals = residuals(model, picks, lat, lon, depth, origin);
    let rms_seconds = rms(residuals.iter().copied());
    let (horizontal_uncertainty_km, depth_uncertainty_km) =
        trial.uncertainty(lat, lon, depth, score, cap, depth_fixed);
    Some(Hypocentre {
        latitude: lat,
        longitude: lon,
        depth_km: depth,
        origin,
        score,
        horizontal_uncertainty_km,
        depth_uncertainty_km,
        used: vec![true; residuals.len()],
        residuals,
        rms_seconds,
        depth_fixed,
        depth_cap: cap,
        at_edge,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geo::destination;

    fn picks_around(lat: f64, lon: f64, depth: f64, origin: f64, n: usize) -> Vec<Pick> {
        (0..n)
            .map(|i| {
                let (la, lo) =
                    destination(lat, lon, 360.0 * i as f64 / n as f64, 20.0 + 7.0 * i as f64);
                Pick {
                    arrival: Arrival::P,
                    latitude: la,
                    longitude: lo,
                    at: origin + Model::jma2001().p(distance_km(lat, lon, la, lo), depth),
                }
            })
            .collect()
    }

    #[test]
    fn exact_picks_locate_the_hypocentre() {
        let picks = picks_around(35.0, 135.0, 30.0, 100.0, 12);
        let h = locate(&Model::jma2001(), &picks, &[], 130.0).unwrap();
        assert!(
            distance_km(h.latitude, h.longitude, 35.0, 135.0) < 12.0,
            "{h:?}"
        );
        assert!((h.depth_km - 30.0).abs() <= 20.0, "{h:?}");
        assert!((h.origin - 100.0).abs() < 3.0, "{h:?}");
        assert!(!h.depth_fixed);
    }

    #[test]
    fn s_onsets_are_located_with_the_s_wave_s_travel_times() {
        // A 450 km deep source 280-460 km from a line of stations on one side, their P and S arrivals.
        let model = Model::jma2001();
        let (lat, lon, depth, origin) = (38.8, 134.5, 450.0, 100.0);
        let stations: Vec<(f64, f64)> = (0..10)
            .map(|i| {
                destination(
                    lat,
                    lon,
                    100.0 + 8.0 * f64::from(i),
                    280.0 + 20.0 * f64::from(i),
                )
            })
            .collect();
        let model = &model;
        let picks: Vec<Pick> = [Arrival::P, Arrival::S]
            .into_iter()
            .flat_map(|arrival| {
                stations.iter().map(move |&(la, lo)| Pick {
                    arrival,
                    latitude: la,
                    longitude: lo,
                    at: origin + arrival.travel(model, distance_km(lat, lon, la, lo), depth),
                })
            })
            .collect();
        let h = locate_near(model, &picks, &[], 300.0, Some((lat, lon))).unwrap();
        assert!(h.rms_seconds < 0.5, "{h:?}");
        assert!(
            distance_km(h.latitude, h.longitude, lat, lon) < 15.0,
            "{h:?}"
        );
        assert!((h.depth_km - depth).abs() <= 25.0, "{h:?}");
    }

    #[test]
    fn one_or_two_stations_fix_the_depth_at_10_km() {
        let picks = picks_around(35.0, 135.0, 30.0, 100.0, 2);
        let h = locate(&Model::jma2001(), &picks, &[], 110.0).unwrap();
        assert!(h.depth_fixed);
        assert_eq!(h.depth_km, 10.0);
    }

    #[test]
    fn silent_stations_push_the_solution_away_from_them() {
        // Two picks to the east of a silent station: the epicentre cannot sit next to the silent one.
        let picks = vec![
            Pick {
                arrival: Arrival::P,
                latitude: 35.0,
                longitude: 135.5,
                at: 10.0,
            },
            Pick {
                arrival: Arrival::P,
                latitude: 35.2,
                longitude: 135.6,
                at: 11.0,
            },
            Pick {
                arrival: Arrival::P,
                latitude: 34.8,
                longitude: 135.6,
                at: 11.0,
            },
        ];
        let quiet = [Quiet {
            latitude: 35.0,
            longitude: 135.0,
        }];
        let h = locate(&Model::jma2001(), &picks, &quiet, 20.0).unwrap();
        let to_silent = distance_km(h.latitude, h.longitude, 35.0, 135.0);
        let to_first = distance_km(h.latitude, h.longitude, 35.0, 135.5);
        assert!(to_first < to_silent, "{h:?}");
    }
}
