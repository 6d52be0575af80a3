//! Shaping of self-sensing (`hyp`) detector solutions into the public API's self-sensing report, and their
//! quality grade.
//!
//! This is the logic behind the `hyp-shaper` component (`wit/hyp/v1.0.0/shaper.wit`). It is plain Rust so it can be
//! unit-tested natively; the component is a thin wrapper around [`shape_bytes`].
//!
//! Rules (from `docs/self-sensing.md` and `docs/api.md`): times are Unix ms (`i64`) everywhere; a
//! value the detector did not give stays `null`, never 0; the grade is the worst of three criteria (station
//! count, azimuthal gap, RMS residual) and is D when the depth is fixed or the gap or RMS is unknown. Position
//! is emitted only inside `event.hypEstimate`, never as `event.latitude`/`event.longitude`.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// One detector solution: the input of [`shape`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Solution {
    /// E.g. `hyp:20240101T071022:1` (contains colons).
    pub event_id: String,
    /// Starts at 1.
    pub report_number: u32,
    pub status: EventStatus,
    pub first_detected_at: i64,
    pub reported_at: i64,
    pub recorded_at: i64,
    pub algorithm: String,
    pub epicenter: String,
    /// Display grouping of the event; not part of the report.
    #[serde(default)]
    pub region: Option<String>,
    #[serde(default)]
    pub epicenter_region: Option<Value>,
    pub hypocentre: Hypocentre,
    pub magnitude: MagnitudeEstimate,
    #[serde(default)]
    pub selection: Option<Selection>,
    #[serde(default)]
    pub completion: Option<Value>,
    pub stations: Vec<StationPick>,
    #[serde(default)]
    pub source_frames: Option<Vec<Value>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Hypocentre {
    pub latitude: f64,
    pub longitude: f64,
    pub depth_km: f64,
    pub origin_at: i64,
    pub calculated_at: i64,
    pub score: f64,
    pub best_score: f64,
    pub depth_fixed: bool,
    pub quiet_station_count: u32,
    pub s_like_station_count: u32,
    /// How far (km) the epicentre may move before the misfit grows appreciably: the misfit surface's
    /// half-width in its least constrained direction. `None` from a detector that does not give it.
    #[serde(default)]
    pub horizontal_uncertainty_km: Option<f64>,
    /// The same in depth; `None` when the depth is fixed.
    #[serde(default)]
    pub depth_uncertainty_km: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MagnitudeEstimate {
    /// `None`: a magnitude cannot yet be estimated.
    #[serde(default)]
    pub value: Option<f64>,
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    pub station_count: u32,
    pub uncertainty: f64,
    pub calculated_at: i64,
    pub retained: bool,
    #[serde(default)]
    pub estimate_location: Option<Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Selection {
    pub window_start: i64,
    pub selected_at: i64,
    pub candidate_count: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StationPick {
    pub code: String,
    #[serde(default)]
    pub name: Option<String>,
    pub latitude: f64,
    pub longitude: f64,
    pub distance_km: f64,
    pub azimuth_degrees: f64,
    #[serde(default)]
    pub pick_at: Option<i64>,
    #[serde(default)]
    pub residual_seconds: Option<f64>,
    /// Whether the pick was used by the location.
    pub used: bool,
    pub s_wave_reached: bool,
    /// Keys like `surface:intensity`, `surface:pgaGal`, `underground:intensity`.
    #[serde(default)]
    pub peaks: BTreeMap<String, f64>,
    #[serde(default)]
    pub magnitude: Option<f64>,
}

/// The quality grade; S is best. Ordered best to worst, so the worst of several is their `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Grade {
    S,
    A,
    B,
    C,
    D,
}

/// The report's `quality` object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Quality {
    pub grade: Grade,
    pub rms_seconds: Option<f64>,
    pub azimuth_gap_degrees: Option<f64>,
    pub station_count: u32,
    /// The solution's own uncertainty in km, from its misfit surface (see [`Hypocentre`]).
    pub horizontal_uncertainty_km: Option<f64>,
    pub depth_uncertainty_km: Option<f64>,
}

/// Why a solution could not be shaped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShapeError {
    pub message: String,
}

impl ShapeError {
    fn new(message: impl Into<String>) -> Self {
        ShapeError {
            message: message.into(),
        }
    }
}

impl fmt::Display for ShapeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ShapeError {}

/// An event's lifecycle state (`event.status`): a candidate is never published; `finalized`, `retracted` and
/// `interrupted` end an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EventStatus {
    Candidate,
    Preliminary,
    Tracking,
    Finalized,
    Retracted,
    /// The detector stopped (or its feed was cut) while the event was public: no final report is invented.
    Interrupted,
}

impl EventStatus {
    /// Every status, in lifecycle order.
    pub const ALL: [EventStatus; 6] = [
        EventStatus::Candidate,
        EventStatus::Preliminary,
        EventStatus::Tracking,
        EventStatus::Finalized,
        EventStatus::Retracted,
        EventStatus::Interrupted,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            EventStatus::Candidate => "candidate",
            EventStatus::Preliminary => "preliminary",
            EventStatus::Tracking => "tracking",
            EventStatus::Finalized => "finalized",
            EventStatus::Retracted => "retracted",
            EventStatus::Interrupted => "interrupted",
        }
    }

    /// The status spelled `text`, if it is one.
    pub fn parse(text: &str) -> Option<EventStatus> {
        EventStatus::ALL.into_iter().find(|s| s.as_str() == text)
    }
}

// By hand, so that a wrong value is named with the field and the values it may take.
impl<'de> Deserialize<'de> for EventStatus {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = std::borrow::Cow::<str>::deserialize(deserializer)?;
        EventStatus::parse(&text).ok_or_else(|| {
            let all: Vec<&str> = EventStatus::ALL.map(EventStatus::as_str).to_vec();
            serde::de::Error::custom(format!("status `{text}` is not one of {}", all.join(", ")))
        })
    }
}

impl fmt::Display for EventStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

fn used(stations: &[StationPick]) -> impl Iterator<Item = &StationPick> {
    stations.iter().filter(|s| s.used)
}

/// Root mean square of `residual_seconds` over the used stations that have one; `None` if none has.
pub fn rms_seconds(stations: &[StationPick]) -> Option<f64> {
    let (count, sum) = used(stations)
        .filter_map(|s| s.residual_seconds)
        .fold((0usize, 0.0f64), |(n, sum), r| (n + 1, sum + r * r));
    (count > 0).then(|| (sum / count as f64).sqrt())
}

/// The largest angular gap (degrees) between the azimuths of the used stations, the gap across north included;
/// `None` with fewer than 2 used stations.
pub fn azimuth_gap_degrees(stations: &[StationPick]) -> Option<f64> {
    let mut azimuths: Vec<f64> = used(stations)
        .map(|s| s.azimuth_degrees.rem_euclid(360.0))
        .collect();
    if azimuths.len() < 2 {
        return None;
    }
    azimuths.sort_by(f64::total_cmp);
    let wrap = azimuths[0] + 360.0 - azimuths[azimuths.len() - 1];
    Some(
        azimuths
            .windows(2)
            .map(|pair| pair[1] - pair[0])
            .fold(wrap, f64::max),
    )
}

/// The grade by the table in `docs/self-sensing.md`: each criterion gives the best grade it satisfies, the grade is the
/// worst of the three; D when the depth is fixed or the gap or RMS is unknown.
pub fn grade(station_count: u32, gap: Option<f64>, rms: Option<f64>, depth_fixed: bool) -> Grade {
    struct Row {
        grade: Grade,
        min_stations: u32,
        max_gap: f64,
        max_rms: f64,
    }
    const fn row(grade: Grade, min_stations: u32, max_gap: f64, max_rms: f64) -> Row {
        Row {
            grade,
            min_stations,
            max_gap,
            max_rms,
        }
    }
    /// Best first; anything below the last row is D.
    const TABLE: [Row; 4] = [
        row(Grade::S, 20, 90.0, 0.5),
        row(Grade::A, 10, 135.0, 0.8),
        row(Grade::B, 6, 180.0, 1.2),
        row(Grade::C, 3, 270.0, 2.0),
    ];
    let (Some(gap), Some(rms)) = (gap, rms) else {
        return Grade::D;
    };
    if depth_fixed {
        return Grade::D;
    }
    let best = |satisfied: &dyn Fn(&Row) -> bool| {
        TABLE
            .iter()
            .find(|r| satisfied(r))
            .map_or(Grade::D, |r| r.grade)
    };
    let by_count = best(&|r| station_count >= r.min_stations);
    let by_gap = best(&|r| gap <= r.max_gap);
    let by_rms = best(&|r| rms <= r.max_rms);
    by_count.max(by_gap).max(by_rms)
}

/// The quality of a solution; `station_count` counts the used stations.
pub fn quality(solution: &Solution) -> Quality {
    let stations = &solution.stations;
    let station_count = used_count(stations);
    let rms_seconds = rms_seconds(stations);
    let azimuth_gap_degrees = azimuth_gap_degrees(stations);
    Quality {
        grade: grade(
            station_count,
            azimuth_gap_degrees,
            rms_seconds,
            solution.hypocentre.depth_fixed,
        ),
        rms_seconds,
        azimuth_gap_degrees,
        station_count,
        horizontal_uncertainty_km: solution.hypocentre.horizontal_uncertainty_km,
        depth_uncertainty_km: solution.hypocentre.depth_uncertainty_km,
    }
}

fn used_count(stations: &[StationPick]) -> u32 {
    u32::try_from(used(stations).count()).unwrap_or(u32::MAX)
}

/// Checks what [`shape`] relies on.
pub fn validate(solution: &Solution) -> Result<(), ShapeError> {
    if solution.event_id.is_empty() {
        return Err(ShapeError::new("eventId is empty"));
    }
    if solution.report_number < 1 {
        return Err(ShapeError::new("reportNumber must be at least 1, got 0"));
    }
    let h = &solution.hypocentre;
    if !(h.latitude.is_finite() && (-90.0..=90.0).contains(&h.latitude)) {
        return Err(ShapeError::new(format!(
            "hypocentre.latitude {} is not within -90..90",
            h.latitude
        )));
    }
    if !(h.longitude.is_finite() && (-180.0..=180.0).contains(&h.longitude)) {
        return Err(ShapeError::new(format!(
            "hypocentre.longitude {} is not within -180..180",
            h.longitude
        )));
    }
    if !(h.depth_km.is_finite() && h.depth_km >= 0.0) {
        return Err(ShapeError::new(format!(
            "hypocentre.depthKm {} is not a depth of at least 0 km",
            h.depth_km
        )));
    }
    let uncertainties = [h.horizontal_uncertainty_km, h.depth_uncertainty_km];
    if uncertainties
        .iter()
        .flatten()
        .any(|u| !(u.is_finite() && *u >= 0.0))
    {
        return Err(ShapeError::new(
            "hypocentre uncertainties must be finite numbers of at least 0 km",
        ));
    }
    for (i, s) in solution.stations.iter().enumerate() {
        let finite = s.latitude.is_finite()
            && s.longitude.is_finite()
            && s.distance_km.is_finite()
            && s.azimuth_degrees.is_finite()
            && s.residual_seconds.is_none_or(f64::is_finite);
        if !finite {
            return Err(ShapeError::new(format!(
                "stations[{i}] (`{}`) has a non-finite number",
                s.code
            )));
        }
    }
    let objects = [
        ("epicenterRegion", solution.epicenter_region.as_ref()),
        ("completion", solution.completion.as_ref()),
        (
            "magnitude.estimateLocation",
            solution.magnitude.estimate_location.as_ref(),
        ),
    ];
    for (name, value) in objects {
        if let Some(value) = value
            && !value.is_object()
        {
            return Err(ShapeError::new(format!("{name} is not a JSON object")));
        }
    }
    Ok(())
}

/// Shapes a solution into the spec's self-sensing report object (field order is fixed).
pub fn shape(solution: &Solution) -> Result<Value, ShapeError> {
    validate(solution)?;
    let quality = quality(solution);
    let h = &solution.hypocentre;
    let m = &solution.magnitude;

    let mut hyp_estimate = Map::new();
    hyp_estimate.insert("latitude".into(), number(h.latitude));
    hyp_estimate.insert("longitude".into(), number(h.longitude));
    hyp_estimate.insert("depthKm".into(), number(h.depth_km));
    hyp_estimate.insert("originAt".into(), h.origin_at.into());
    hyp_estimate.insert("calculatedAt".into(), h.calculated_at.into());
    hyp_estimate.insert("stationCount".into(), quality.station_count.into());
    hyp_estimate.insert("score".into(), number(h.score));
    hyp_estimate.insert("bestScore".into(), number(h.best_score));
    hyp_estimate.insert("quietStationCount".into(), h.quiet_station_count.into());
    hyp_estimate.insert("sLikeStationCount".into(), h.s_like_station_count.into());

    let evidence: Vec<Value> = used(&solution.stations)
        .map(|s| {
            let mut e = Map::new();
            e.insert("code".into(), s.code.clone().into());
            e.insert("pickAt".into(), s.pick_at.into());
            e.insert("residualSeconds".into(), optional(s.residual_seconds));
            e.insert("azimuthDegrees".into(), number(s.azimuth_degrees));
            e.insert("distanceKm".into(), number(s.distance_km));
            Value::Object(e)
        })
        .collect();

    let mut event = Map::new();
    event.insert("id".into(), solution.event_id.clone().into());
    event.insert("status".into(), solution.status.as_str().into());
    event.insert("firstDetectedAt".into(), solution.first_detected_at.into());
    event.insert("hypEstimate".into(), Value::Object(hyp_estimate));
    event.insert("magnitude".into(), optional(m.value));
    event.insert("magnitudeType".into(), m.kind.clone().into());
    event.insert("magnitudeStationCount".into(), m.station_count.into());
    event.insert("magnitudeUncertainty".into(), number(m.uncertainty));
    event.insert("magnitudeCalculatedAt".into(), m.calculated_at.into());
    event.insert("magnitudeRetained".into(), m.retained.into());
    event.insert(
        "magnitudeEstimateLocation".into(),
        object_or_empty(m.estimate_location.as_ref()),
    );
    event.insert(
        "hypCompletion".into(),
        object_or_empty(solution.completion.as_ref()),
    );
    event.insert("evidence".into(), Value::Array(evidence));

    let stations: Vec<Value> = solution
        .stations
        .iter()
        .map(|s| {
            let mut o = Map::new();
            o.insert("code".into(), s.code.clone().into());
            o.insert("name".into(), s.name.clone().into());
            o.insert("latitude".into(), number(s.latitude));
            o.insert("longitude".into(), number(s.longitude));
            o.insert("distanceKm".into(), number(s.distance_km));
            o.insert("sWaveReached".into(), s.s_wave_reached.into());
            o.insert("used".into(), s.used.into());
            o.insert(
                "peaks".into(),
                Value::Object(
                    s.peaks
                        .iter()
                        .map(|(k, v)| (k.clone(), number(*v)))
                        .collect(),
                ),
            );
            o.insert("magnitude".into(), optional(s.magnitude));
            Value::Object(o)
        })
        .collect();

    let mut quality_object = Map::new();
    quality_object.insert(
        "grade".into(),
        serde_json::to_value(quality.grade).expect("a grade serialises"),
    );
    quality_object.insert("rmsSeconds".into(), optional(quality.rms_seconds));
    quality_object.insert(
        "azimuthGapDegrees".into(),
        optional(quality.azimuth_gap_degrees),
    );
    quality_object.insert("stationCount".into(), quality.station_count.into());
    quality_object.insert(
        "horizontalUncertaintyKm".into(),
        optional(quality.horizontal_uncertainty_km),
    );
    quality_object.insert(
        "depthUncertaintyKm".into(),
        optional(quality.depth_uncertainty_km),
    );

    let mut report = Map::new();
    report.insert("reportNumber".into(), solution.report_number.into());
    report.insert("reportedAt".into(), solution.reported_at.into());
    report.insert("recordedAt".into(), solution.recorded_at.into());
    report.insert("epicenter".into(), solution.epicenter.clone().into());
    if let Some(region) = &solution.epicenter_region {
        report.insert("epicenterRegion".into(), region.clone());
    }
    report.insert("algorithm".into(), solution.algorithm.clone().into());
    report.insert("quality".into(), Value::Object(quality_object));
    if let Some(selection) = &solution.selection {
        let mut o = Map::new();
        o.insert("windowStartAt".into(), selection.window_start.into());
        o.insert("selectedAt".into(), selection.selected_at.into());
        o.insert("candidateCount".into(), selection.candidate_count.into());
        report.insert("hypSelection".into(), Value::Object(o));
    }
    report.insert("event".into(), Value::Object(event));
    report.insert("stations".into(), Value::Array(stations));
    if let Some(frames) = &solution.source_frames {
        report.insert("sourceFrames".into(), Value::Array(frames.clone()));
    }
    Ok(Value::Object(report))
}

/// Parses a [`Solution`] from UTF-8 JSON and returns its report as compact UTF-8 JSON.
pub fn shape_bytes(json: &[u8]) -> Result<Vec<u8>, ShapeError> {
    let solution: Solution = serde_json::from_slice(json)
        .map_err(|e| ShapeError::new(format!("solution is not valid: {e}")))?;
    let report = shape(&solution)?;
    serde_json::to_vec(&report).map_err(|e| ShapeError::new(format!("report not serialised: {e}")))
}

/// A number; a non-finite one (which JSON cannot carry) becomes `null` rather than an invented value.
fn number(value: f64) -> Value {
    serde_json::Number::from_f64(value).map_or(Value::Null, Value::Number)
}

fn optional(value: Option<f64>) -> Value {
    value.map_or(Value::Null, number)
}

fn object_or_empty(value: Option<&Value>) -> Value {
    value.cloned().unwrap_or_else(|| Value::Object(Map::new()))
}

#[cfg(test)]
mod tests;
