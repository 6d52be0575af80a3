//! Scoring a run against its quakes, as ShakeAlert counts alerts: an event is a quake's when its median
//! epicentre lies within 100 km of the quake's and its median origin time within 30 s; a public event that is
//! no quake's (or a second event for a quake already matched) is false. Where an event fits two quakes (a
//! foreshock and its mainshock), it is the one it lies nearer in space and time.

use crate::scenario::{Run, START_MS, Setting, TrueQuake};
use osds_detector::geo::distance_km;

/// An event is a quake's when its median epicentre lies within this distance of the truth…
pub const MATCH_KM: f64 = 100.0;
/// …and its median origin time within this many seconds.
pub const MATCH_S: f64 = 30.0;

/// How one true quake was reported.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub quake: TrueQuake,
    /// The public event matched to it, if any.
    pub event_id: Option<String>,
    pub reports: usize,
    /// Epicentre error (km) of the first report and of the final one.
    pub first_km: Option<f64>,
    pub final_km: Option<f64>,
    /// Epicentre and depth errors (km) of every report from the 3rd on.
    pub errors_km: Vec<f64>,
    pub depth_errors_km: Vec<f64>,
    /// Magnitude error of the first report with a magnitude, and of the final report.
    pub first_dm: Option<f64>,
    pub final_dm: Option<f64>,
    /// Seconds from the 3rd P arrival at any station to the first report's publication.
    pub latency_s: Option<f64>,
    /// Seconds from the first report's publication to the first report with a magnitude's.
    pub magnitude_wait_s: Option<f64>,
    /// The final report's status and grade, and the best grade of any report.
    pub final_status: Option<String>,
    pub final_grade: Option<String>,
    pub best_grade: Option<String>,
    /// Ended `interrupted` while frames were still coming (a feed outage cut it).
    pub interrupted_mid_run: bool,
}

impl Outcome {
    pub fn median_km(&self) -> Option<f64> {
        median(&mut self.errors_km.clone())
    }

    pub fn median_depth_km(&self) -> Option<f64> {
        median(&mut self.depth_errors_km.clone())
    }
}

/// One report's grade, its epicentre error and the uncertainty it gave (for the grade's calibration).
#[derive(Debug, Clone)]
pub struct Graded {
    pub grade: String,
    pub error_km: f64,
    pub uncertainty_km: Option<f64>,
}

/// A scenario's score.
#[derive(Debug, Clone)]
pub struct Score {
    pub outcomes: Vec<Outcome>,
    /// Public events that match no quake, or a quake another event matched already.
    pub false_event_ids: Vec<String>,
    /// How many of those were first published during a lead-in (before the scenario's first frame): a
    /// detector's own first seconds, not the running detector the lead-in stands for.
    pub false_in_lead_in: usize,
    /// Every report of a matched event, for the grade's calibration.
    pub graded: Vec<Graded>,
}

pub fn median(values: &mut [f64]) -> Option<f64> {
    percentile(values, 0.5)
}

/// The `q` quantile (nearest rank, interpolated between the two around it).
pub fn percentile(values: &mut [f64], q: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let at = (values.len() - 1) as f64 * q;
    let (low, high) = (at.floor() as usize, at.ceil() as usize);
    Some(values[low] + (values[high] - values[low]) * (at - low as f64))
}

fn rank(grade: &str) -> usize {
    ["S", "A", "B", "C", "D"]
        .iter()
        .position(|x| *x == grade)
        .unwrap_or(5)
}

/// Scores the reports of a run against its quakes.
pub fn score(run: &Run) -> Score {
    let mut events: Vec<(String, Vec<&crate::scenario::Report>)> = Vec::new();
    for report in &run.reports {
        match events.iter_mut().find(|(id, _)| *id == report.event_id) {
            Some((_, list)) => list.push(report),
            None => events.push((report.event_id.clone(), vec![report])),
        }
    }
    // Each event's median epicentre and origin, and how far it lies from each quake (in units of the match's
    // bounds; `None` beyond them).
    let centres: Vec<(f64, f64, f64)> = events
        .iter()
        .map(|(_, list)| {
            let mut lat: Vec<f64> = list.iter().map(|r| r.latitude).collect();
            let mut lon: Vec<f64> = list.iter().map(|r| r.longitude).collect();
            let mut origin: Vec<f64> = list.iter().map(|r| r.origin_at_ms as f64).collect();
            (
                median(&mut lat).unwrap_or(f64::NAN),
                median(&mut lon).unwrap_or(f64::NAN),
                median(&mut origin).unwrap_or(f64::NAN),
            )
        })
        .collect();
    let fit = |event: usize, quake: &TrueQuake| -> Option<f64> {
        let (lat, lon, origin) = centres[event];
        let km = distance_km(lat, lon, quake.latitude, quake.longitude);
        let seconds = (origin - (START_MS as f64 + quake.origin * 1000.0)).abs() / 1000.0;
        (km <= MATCH_KM && seconds <= MATCH_S).then_some(km / MATCH_KM + seconds / MATCH_S)
    };
    // The quake each event lies nearest, of those it fits.
    let nearest: Vec<Option<usize>> = (0..events.len())
        .map(|e| {
            run.quakes
                .iter()
                .enumerate()
                .filter_map(|(q, quake)| Some((q, fit(e, quake)?)))
                .min_by(|a, b| a.1.total_cmp(&b.1))
                .map(|(q, _)| q)
        })
        .collect();
    let mut taken = vec![false; events.len()];
    let mut graded = Vec::new();
    let outcomes = run
        .quakes
        .iter()
        .enumerate()
        .map(|(q, quake)| {
            let error = |r: &crate::scenario::Report| {
                distance_km(r.latitude, r.longitude, quake.latitude, quake.longitude)
            };
            // The best-matching event: of those whose median position and origin fit, one that lies nearer
            // this quake than any other, then the most reports.
            let matched = events
                .iter()
                .enumerate()
                .filter(|(i, _)| !taken[*i] && fit(*i, quake).is_some())
                .max_by_key(|(i, (_, list))| (nearest[*i] == Some(q), list.len()))
                .map(|(i, _)| i);
            let Some(index) = matched else {
                return Outcome {
                    quake: *quake,
                    event_id: None,
                    reports: 0,
                    first_km: None,
                    final_km: None,
                    errors_km: Vec::new(),
                    depth_errors_km: Vec::new(),
                    first_dm: None,
                    final_dm: None,
                    latency_s: None,
                    magnitude_wait_s: None,
                    final_status: None,
                    final_grade: None,
                    best_grade: None,
                    interrupted_mid_run: false,
                };
            };
            taken[index] = true;
            let (id, list) = &events[index];
            graded.extend(list.iter().map(|r| Graded {
                grade: r.grade.clone(),
                error_km: error(r),
                uncertainty_km: r.uncertainty_km,
            }));
            let last = list.last().expect("an event has a report");
            let third_p_ms = START_MS as f64 + quake.third_p * 1000.0;
            Outcome {
                quake: *quake,
                event_id: Some(id.clone()),
                reports: list.len(),
                first_km: list.first().map(|r| error(r)),
                final_km: Some(error(last)),
                errors_km: list.iter().skip(2).map(|r| error(r)).collect(),
                depth_errors_km: list
                    .iter()
                    .skip(2)
                    .map(|r| (r.depth_km - quake.depth_km).abs())
                    .collect(),
                first_dm: list.iter().find_map(|r| r.magnitude).map(|m| m - quake.mw),
                final_dm: last.magnitude.map(|m| m - quake.mw),
                latency_s: list
                    .first()
                    .map(|r| (r.reported_at_ms as f64 - third_p_ms) / 1000.0),
                magnitude_wait_s: list
                    .iter()
                    .find(|r| r.magnitude.is_some())
                    .zip(list.first())
                    .map(|(m, first)| (m.reported_at_ms - first.reported_at_ms) as f64 / 1000.0),
                final_status: Some(last.status.clone()),
                final_grade: Some(last.grade.clone()),
                best_grade: list
                    .iter()
                    .map(|r| r.grade.as_str())
                    .min_by_key(|g| rank(g))
                    .map(str::to_string),
                interrupted_mid_run: last.status == "interrupted"
                    && last.frame_at_ms < run.last_frame_ms,
            }
        })
        .collect();
    let false_events: Vec<_> = events
        .iter()
        .zip(&taken)
        .filter(|(_, taken)| !**taken)
        .map(|(event, _)| event)
        .collect();
    let false_in_lead_in = false_events
        .iter()
        .filter(|(_, list)| list.iter().any(|r| r.frame_at_ms < START_MS))
        .count();
    Score {
        outcomes,
        false_event_ids: false_events.iter().map(|(id, _)| id.clone()).collect(),
        false_in_lead_in,
        graded,
    }
}

/// Whether a quake's setting asks that it be found.
pub fn must_find(quake: &TrueQuake) -> bool {
    quake.setting != Setting::Outside
}
