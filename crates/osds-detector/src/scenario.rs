//! Synthetic earthquakes run through the whole detector on a real station network, scored against their truth:
//! the frames of [`crate::synthetic`] rendered as monitor images, decoded at the stations' pixels, fed to the
//! [`Detector`] second by second, every solution shaped and graded (by the hyp shaper component, or by
//! `hyp-core`, its code, natively), and the reports compared with the quakes that made them. The accuracy benchmark runs a matrix
//! of these; tests pin behaviours with a few.

use crate::detector::{Detector, DetectorConfig};
use crate::geo::distance_km;
use crate::kmoni::{self, Image, SURFACE_INTENSITY};
use crate::stations::Network;
use crate::synthetic::{Faults, Quake, frames};
use crate::traveltime::Model;
use hyp_core::Solution;
use std::ops::Range;
use std::sync::Arc;

/// Unix ms of frame 0.
pub const START_MS: i64 = 1_700_000_000_000;

/// Where a scenario's main quake is, for the targets that differ by setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setting {
    Inland,
    Offshore,
    /// Deeper than 60 km.
    Deep,
    /// No earthquake: only false events can be counted.
    Quiet,
}

/// One run: the quakes (origin in seconds after frame 0), the network's imperfections, the frames lost.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub name: String,
    pub setting: Setting,
    pub quakes: Vec<Quake>,
    pub seconds: u64,
    pub faults: Faults,
    /// Frames never delivered.
    pub gap: Option<Range<u64>>,
    pub seed: u64,
}

/// One shaped report, as a consumer reads it.
#[derive(Debug, Clone)]
pub struct Report {
    pub event_id: String,
    pub status: String,
    pub reported_at_ms: i64,
    pub latitude: f64,
    pub longitude: f64,
    pub depth_km: f64,
    pub origin_at_ms: i64,
    pub magnitude: Option<f64>,
    pub magnitude_type: Option<String>,
    pub grade: String,
    pub station_count: u64,
    pub rms_seconds: Option<f64>,
    pub gap_degrees: Option<f64>,
    /// Stations in the report that the location did not use (later phases, far or late picks).
    pub unused_stations: usize,
    /// The farthest station of the report from its epicentre (km).
    pub farthest_station_km: f64,
}

impl Report {
    fn from_json(report: &serde_json::Value) -> Report {
        let event = &report["event"];
        let h = &event["hypEstimate"];
        let quality = &report["quality"];
        let stations = report["stations"].as_array().map_or(&[][..], Vec::as_slice);
        Report {
            event_id: event["id"].as_str().unwrap_or_default().to_string(),
            status: event["status"].as_str().unwrap_or_default().to_string(),
            reported_at_ms: report["reportedAt"].as_i64().unwrap_or_default(),
            latitude: h["latitude"].as_f64().unwrap_or(f64::NAN),
            longitude: h["longitude"].as_f64().unwrap_or(f64::NAN),
            depth_km: h["depthKm"].as_f64().unwrap_or(f64::NAN),
            origin_at_ms: h["originAt"].as_i64().unwrap_or_default(),
            magnitude: event["magnitude"].as_f64(),
            magnitude_type: event["magnitudeType"].as_str().map(str::to_string),
            grade: quality["grade"].as_str().unwrap_or_default().to_string(),
            station_count: quality["stationCount"].as_u64().unwrap_or_default(),
            rms_seconds: quality["rmsSeconds"].as_f64(),
            gap_degrees: quality["azimuthGapDegrees"].as_f64(),
            unused_stations: stations.iter().filter(|s| s["used"] == false).count(),
            farthest_station_km: stations
                .iter()
                .filter_map(|s| s["distanceKm"].as_f64())
                .fold(0.0, f64::max),
        }
    }
}

/// Shapes a solution with `hyp-core`, the code the hyp shaper component runs.
pub fn shape_natively(solution: &Solution) -> serde_json::Value {
    hyp_core::shape(solution).expect("a detector solution shapes")
}

/// Runs a scenario through images (render → decode at the pixels) or, with `images` false, feeds the
/// quantised values straight to the detector, and shapes every solution with `shape`. Returns every report in
/// the order issued.
pub fn run(
    scenario: &Scenario,
    network: &Network,
    travel_times: &Arc<Model>,
    images: bool,
    shape: &dyn Fn(&Solution) -> serde_json::Value,
) -> Vec<Report> {
    let positions = network.positions();
    let frames = frames(
        travel_times,
        &scenario.quakes,
        &positions,
        scenario.seconds,
        &scenario.faults,
        scenario.seed,
    );
    let config = DetectorConfig {
        travel_times: travel_times.clone(),
        ..DetectorConfig::default()
    };
    let mut detector = Detector::new(network.stations.clone(), config);
    let mut reports = Vec::new();
    let mut shape = |detections: Vec<crate::detector::Detection>| {
        for detection in detections {
            reports.push(Report::from_json(&shape(&detection.solution)));
        }
    };
    for (n, values) in frames.into_iter().enumerate() {
        if scenario
            .gap
            .as_ref()
            .is_some_and(|gap| gap.contains(&(n as u64)))
        {
            continue;
        }
        let values = if images {
            let at: Vec<_> = network.pixels.iter().copied().zip(values).collect();
            let gif = kmoni::render(SURFACE_INTENSITY, &at);
            Image::decode(&gif)
                .expect("a rendered image decodes")
                .sample(SURFACE_INTENSITY, &network.pixels)
        } else {
            values
        };
        shape(detector.step(START_MS + n as i64 * 1000, &values));
    }
    shape(detector.stop());
    reports
}

/// How one true quake was reported.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The public event matched to it, if any.
    pub event_id: Option<String>,
    pub reports: usize,
    /// Epicentre error (km) of the first report, the median from the 3rd report on, and the final report.
    pub first_km: Option<f64>,
    pub median_km: Option<f64>,
    pub final_km: Option<f64>,
    /// Distance (km) of the final report from the event's median tracking position.
    pub final_from_tracking_km: Option<f64>,
    /// Median depth error (km) from the 3rd report on.
    pub depth_km: Option<f64>,
    /// Magnitude error of the first report with a magnitude, and of the final report.
    pub first_dm: Option<f64>,
    pub final_dm: Option<f64>,
    /// Seconds from the 3rd P arrival at a station to the first public report.
    pub latency_s: Option<f64>,
    /// The final report's status and grade, and the best grade of any report.
    pub final_status: Option<String>,
    pub final_grade: Option<String>,
    pub best_grade: Option<String>,
}

/// A scenario's score: one outcome per quake and the public events no quake explains.
#[derive(Debug, Clone)]
pub struct Score {
    pub outcomes: Vec<Outcome>,
    /// Public events that match no quake, or a quake another event matched already.
    pub false_events: usize,
    pub false_event_ids: Vec<String>,
}

pub(crate) fn median(values: &mut [f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    Some(if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    })
}

/// An event is a quake's when its median epicentre lies within this distance of the truth…
const MATCH_KM: f64 = 150.0;
/// …and its median origin time within this many seconds.
const MATCH_S: f64 = 20.0;

/// Scores the reports of a scenario against its quakes.
pub fn score(
    scenario: &Scenario,
    network: &Network,
    travel_times: &Model,
    reports: &[Report],
) -> Score {
    let mut events: Vec<(String, Vec<&Report>)> = Vec::new();
    for report in reports {
        match events.iter_mut().find(|(id, _)| *id == report.event_id) {
            Some((_, list)) => list.push(report),
            None => events.push((report.event_id.clone(), vec![report])),
        }
    }
    let positions = network.positions();
    let mut taken = vec![false; events.len()];
    let outcomes = scenario
        .quakes
        .iter()
        .map(|quake| {
            let origin_ms = START_MS as f64 + quake.origin * 1000.0;
            // The best-matching event: most reports among those whose median position and origin fit.
            let matched = events
                .iter()
                .enumerate()
                .filter(|(i, _)| !taken[*i])
                .filter(|(_, (_, list))| {
                    let mut lat: Vec<f64> = list.iter().map(|r| r.latitude).collect();
                    let mut lon: Vec<f64> = list.iter().map(|r| r.longitude).collect();
                    let mut origin: Vec<f64> = list.iter().map(|r| r.origin_at_ms as f64).collect();
                    let (lat, lon, origin) = (
                        median(&mut lat).unwrap_or(f64::NAN),
                        median(&mut lon).unwrap_or(f64::NAN),
                        median(&mut origin).unwrap_or(f64::NAN),
                    );
                    distance_km(lat, lon, quake.latitude, quake.longitude) <= MATCH_KM
                        && (origin - origin_ms).abs() <= MATCH_S * 1000.0
                })
                .max_by_key(|(_, (_, list))| list.len())
                .map(|(i, _)| i);
            let Some(index) = matched else {
                return Outcome {
                    event_id: None,
                    reports: 0,
                    first_km: None,
                    median_km: None,
                    final_km: None,
                    final_from_tracking_km: None,
                    depth_km: None,
                    first_dm: None,
                    final_dm: None,
                    latency_s: None,
                    final_status: None,
                    final_grade: None,
                    best_grade: None,
                };
            };
            taken[index] = true;
            let (id, list) = &events[index];
            let error =
                |r: &Report| distance_km(r.latitude, r.longitude, quake.latitude, quake.longitude);
            let later = list.iter().skip(2);
            let mut errors: Vec<f64> = later.clone().map(|r| error(r)).collect();
            let mut depths: Vec<f64> = later.map(|r| (r.depth_km - quake.depth_km).abs()).collect();
            let last = list.last().expect("an event has a report");
            let mut tracking_lat: Vec<f64> = list
                .iter()
                .filter(|r| r.status == "tracking")
                .map(|r| r.latitude)
                .collect();
            let mut tracking_lon: Vec<f64> = list
                .iter()
                .filter(|r| r.status == "tracking")
                .map(|r| r.longitude)
                .collect();
            let final_from_tracking_km = median(&mut tracking_lat)
                .zip(median(&mut tracking_lon))
                .map(|(lat, lon)| distance_km(lat, lon, last.latitude, last.longitude));
            let mut arrivals: Vec<f64> = positions
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    let d = distance_km(quake.latitude, quake.longitude, p.latitude, p.longitude);
                    quake.origin
                        + travel_times.p(d, quake.depth_km)
                        + scenario
                            .faults
                            .timing_offsets
                            .get(i)
                            .copied()
                            .unwrap_or(0.0)
                })
                .collect();
            arrivals.sort_by(f64::total_cmp);
            let third_p_ms =
                START_MS as f64 + arrivals.get(2).copied().unwrap_or(f64::NAN) * 1000.0;
            let rank = |g: &str| {
                ["S", "A", "B", "C", "D"]
                    .iter()
                    .position(|x| *x == g)
                    .unwrap_or(5)
            };
            Outcome {
                event_id: Some(id.clone()),
                reports: list.len(),
                first_km: list.first().map(|r| error(r)),
                median_km: median(&mut errors),
                final_km: Some(error(last)),
                final_from_tracking_km,
                depth_km: median(&mut depths),
                first_dm: list.iter().find_map(|r| r.magnitude).map(|m| m - quake.mw),
                final_dm: last.magnitude.map(|m| m - quake.mw),
                latency_s: list
                    .first()
                    .map(|r| (r.reported_at_ms as f64 - third_p_ms) / 1000.0),
                final_status: Some(last.status.clone()),
                final_grade: Some(last.grade.clone()),
                best_grade: list
                    .iter()
                    .map(|r| r.grade.as_str())
                    .min_by_key(|g| rank(g))
                    .map(str::to_string),
            }
        })
        .collect();
    let false_event_ids: Vec<String> = events
        .iter()
        .zip(&taken)
        .filter(|(_, taken)| !**taken)
        .map(|((id, _), _)| id.clone())
        .collect();
    Score {
        outcomes,
        false_events: false_event_ids.len(),
        false_event_ids,
    }
}
