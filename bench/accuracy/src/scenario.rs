//! One scenario run through the whole detector on a real station network: its frames (made by the detector's
//! own synthetic model, or by the independent truth) rendered as monitor images and decoded at the stations'
//! pixels, delivered when the feed would deliver them, fed to the [`Detector`] second by second, every
//! solution shaped and graded (by the hyp shaper component, or by `hyp-core` natively) and stamped with the
//! time it would have been published.

use crate::feed::{Delivery, Feed};
use crate::truth::{self, Earth, Truth};
use hyp_core::Solution;
use osds_detector::detector::{Detection, Detector, DetectorConfig};
use osds_detector::geo::distance_km;
use osds_detector::kmoni::{self, Image, SURFACE_INTENSITY};
use osds_detector::stations::Network;
use osds_detector::synthetic::{Faults, Quake, frames};
use osds_detector::traveltime::Model;
use osds_detector::trigger::StationPosition;
use std::sync::Arc;

/// Unix ms of frame 0.
pub const START_MS: i64 = 1_700_000_000_000;

/// Where a quake is, for the targets that differ by setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setting {
    Inland,
    Offshore,
    /// Outside the network (a distant great earthquake): finding it is not required; a public event for it
    /// that is not within 100 km of it is false.
    Outside,
}

/// What makes a scenario's frames.
#[derive(Debug, Clone)]
pub enum Source {
    /// The detector's own model (`osds_detector::synthetic`): its travel times, attenuation and P/S contrast.
    InModel { quakes: Vec<Quake>, faults: Faults },
    /// The independent truth model.
    Truth(Truth),
}

/// One quake as the score sees it: where, how big, when, in which setting.
#[derive(Debug, Clone, Copy)]
pub struct TrueQuake {
    pub latitude: f64,
    pub longitude: f64,
    pub depth_km: f64,
    pub mw: f64,
    /// Seconds on the scenario clock.
    pub origin: f64,
    pub setting: Setting,
    /// The third earliest P arrival at any station (seconds on the scenario clock, station delays included).
    pub third_p: f64,
}

/// One run.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub name: String,
    /// The setting of each quake, in the source's order.
    pub settings: Vec<Setting>,
    pub source: Source,
    pub seconds: u64,
    pub feed: Feed,
    pub seed: u64,
}

/// One shaped report, as a consumer reads it.
#[derive(Debug, Clone)]
pub struct Report {
    pub event_id: String,
    pub status: String,
    /// When it would have been published (its frame's delivery).
    pub reported_at_ms: i64,
    /// The observation second it was computed from.
    pub frame_at_ms: i64,
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
    /// The report's own horizontal uncertainty (km), when it gives one.
    pub uncertainty_km: Option<f64>,
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
            frame_at_ms: h["calculatedAt"].as_i64().unwrap_or_default(),
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
            uncertainty_km: quality["horizontalUncertaintyKm"].as_f64(),
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

/// What a run gives: its quakes as the score sees them, every report in the order issued, and how the feed
/// behaved.
pub struct Run {
    pub quakes: Vec<TrueQuake>,
    pub reports: Vec<Report>,
    /// Frames the detector was given, a lead-in's included.
    pub fed_frames: usize,
    /// Frames the feed never delivered.
    pub lost_frames: usize,
    /// The frame time of the last frame delivered.
    pub last_frame_ms: i64,
}

fn third(mut arrivals: Vec<f64>) -> f64 {
    arrivals.sort_by(f64::total_cmp);
    arrivals.get(2).copied().unwrap_or(f64::NAN)
}

/// Added to a scenario's seed for its lead-in's frames, so that the scenario's own draws stay as they were.
const LEAD_IN_SEED: u64 = 0x001e_ad1e;

/// `seconds` of the scenario's network before it begins, with nothing happening but its lasting faults
/// (stuck and flapping stations, dropouts) and its noise: a detector that has been running for a while.
fn lead_in(
    scenario: &Scenario,
    positions: &[StationPosition],
    earth: &Earth,
    travel_times: &Model,
    seconds: u64,
) -> Vec<Vec<Option<f64>>> {
    let seed = scenario.seed + LEAD_IN_SEED;
    match &scenario.source {
        Source::InModel { faults, .. } => {
            let faults = Faults {
                spike: Vec::new(),
                ..faults.clone()
            };
            frames(travel_times, &[], positions, seconds, &faults, seed)
        }
        Source::Truth(truth) => {
            let quiet = Truth {
                quakes: Vec::new(),
                disturbances: truth
                    .disturbances
                    .iter()
                    .filter(|d| {
                        matches!(
                            d,
                            truth::Disturbance::Stuck { .. } | truth::Disturbance::Flapping { .. }
                        )
                    })
                    .cloned()
                    .collect(),
                dropout: truth.dropout,
            };
            truth::render(earth, &quiet, positions, seconds, seed).frames
        }
    }
}

/// Runs a scenario through images (render → decode at the pixels) or, with `images` false, feeds the
/// quantised values straight to the detector, and shapes every solution with `shape`. `lead_in_s` seconds of
/// quiet network come first, each frame delivered 1.5 s after its second (reports published then count as
/// false events like any other).
pub fn run(
    scenario: &Scenario,
    network: &Network,
    earth: &Earth,
    travel_times: &Arc<Model>,
    images: bool,
    lead_in_s: u64,
    shape: &dyn Fn(&Solution) -> serde_json::Value,
) -> Run {
    let positions = network.positions();
    let (frames, quakes) = match &scenario.source {
        Source::InModel { quakes, faults } => {
            let frames = frames(
                travel_times,
                quakes,
                &positions,
                scenario.seconds,
                faults,
                scenario.seed,
            );
            let quakes = quakes
                .iter()
                .zip(&scenario.settings)
                .map(|(q, setting)| {
                    let arrivals = positions
                        .iter()
                        .enumerate()
                        .map(|(i, p)| {
                            let d = distance_km(q.latitude, q.longitude, p.latitude, p.longitude);
                            q.origin
                                + travel_times.p(d, q.depth_km)
                                + faults.timing_offsets.get(i).copied().unwrap_or(0.0)
                        })
                        .collect();
                    TrueQuake {
                        latitude: q.latitude,
                        longitude: q.longitude,
                        depth_km: q.depth_km,
                        mw: q.mw,
                        origin: q.origin,
                        setting: *setting,
                        third_p: third(arrivals),
                    }
                })
                .collect();
            (frames, quakes)
        }
        Source::Truth(truth) => {
            let rendered = truth::render(earth, truth, &positions, scenario.seconds, scenario.seed);
            let quakes = truth
                .quakes
                .iter()
                .zip(&scenario.settings)
                .zip(rendered.p_arrivals)
                .map(|((q, setting), arrivals)| TrueQuake {
                    latitude: q.latitude,
                    longitude: q.longitude,
                    depth_km: q.depth_km,
                    mw: q.mw,
                    origin: q.origin,
                    setting: *setting,
                    third_p: third(arrivals),
                })
                .collect();
            (rendered.frames, quakes)
        }
    };
    let deliveries = scenario.feed.deliveries(scenario.seconds, scenario.seed);
    let config = DetectorConfig {
        travel_times: travel_times.clone(),
        ..DetectorConfig::default()
    };
    let mut detector = Detector::new(network.stations.clone(), config);
    let mut reports = Vec::new();
    let mut publish = |detections: Vec<Detection>, at_ms: i64| {
        for detection in detections {
            let mut solution = detection.solution;
            solution.reported_at = at_ms;
            solution.recorded_at = at_ms;
            reports.push(Report::from_json(&shape(&solution)));
        }
    };
    let through_images = |values: Vec<Option<f64>>| {
        if images {
            let at: Vec<_> = network.pixels.iter().copied().zip(values).collect();
            let gif = kmoni::render(SURFACE_INTENSITY, &at);
            Image::decode(&gif)
                .expect("a rendered image decodes")
                .sample(SURFACE_INTENSITY, &network.pixels)
        } else {
            values
        }
    };
    let mut fed_frames = 0;
    let lead_in = lead_in(scenario, &positions, earth, travel_times, lead_in_s);
    for (n, values) in lead_in.into_iter().enumerate() {
        fed_frames += 1;
        let frame_ms = START_MS - (lead_in_s as i64 - n as i64) * 1000;
        publish(
            detector.step(frame_ms, &through_images(values)),
            frame_ms + 1500,
        );
    }
    let mut lost_frames = 0;
    let mut last_frame_ms = START_MS;
    let mut last_delivery_ms = START_MS;
    for (n, (values, delivery)) in frames.into_iter().zip(deliveries).enumerate() {
        let frame_ms = START_MS + n as i64 * 1000;
        let Delivery::At(at) = delivery else {
            lost_frames += 1;
            publish(detector.silent(frame_ms), last_delivery_ms);
            continue;
        };
        let values = through_images(values);
        fed_frames += 1;
        last_delivery_ms = START_MS + (at * 1000.0).round() as i64;
        last_frame_ms = frame_ms;
        publish(detector.step(frame_ms, &values), last_delivery_ms);
    }
    publish(detector.stop(), last_delivery_ms);
    Run {
        quakes,
        reports,
        fed_frames,
        lost_frames,
        last_frame_ms,
    }
}
