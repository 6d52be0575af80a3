//! The self-sensing family's bodies (`HypStatus`, `HypReport`, `HypEvent`, … of `schemas/openapi.yaml`).
//! A report is the shaper's stored payload, every field of it preserved, with `sha256` added.

use crate::scorecard::{Comparison, Summary};
use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};
use serde_json::{Map, Value};

/// `HypReport`, or `HypReportSummary` after [`HypReport::summarise`].
#[derive(Serialize)]
pub struct HypReport {
    #[serde(flatten)]
    pub payload: Map<String, Value>,
    /// SHA-256 of the stored payload (not of the HTTP body).
    pub sha256: String,
}

impl HypReport {
    /// The report of a stored shaper `payload` with this SHA-256 (a `sha256` inside the payload is replaced).
    pub fn from_payload(payload: &[u8], sha256: String) -> HypReport {
        let mut payload: Map<String, Value> = serde_json::from_slice(payload).unwrap_or_default();
        payload.remove("sha256");
        HypReport { payload, sha256 }
    }

    /// The lightweight form: the main parameters, without per-report evidence, station snapshot and source
    /// frames.
    pub fn summarise(mut self) -> HypReport {
        self.payload.remove("stations");
        self.payload.remove("sourceFrames");
        if let Some(event) = self.payload.get_mut("event").and_then(Value::as_object_mut) {
            event.remove("evidence");
        }
        self
    }
}

/// `HypLiveReport`: a report as `/hyp/stream` and `/hyp/ws` send it, with its event's id.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HypLiveReport<'a> {
    pub event_id: &'a str,
    pub report: HypReport,
}

/// `HypEventHead` (its keys are snake_case, as the contract has them).
#[derive(Serialize)]
pub struct HypEventHead<'a> {
    pub id: &'a str,
    pub first_at: i64,
    pub updated_at: i64,
    pub status: &'a str,
    pub region: &'a str,
}

/// `HypEvent` (or `HypEventSummary` with summarised reports); with `exportedAt`, `HypExport`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HypEvent<'a> {
    #[serde(flatten)]
    pub head: HypEventHead<'a>,
    /// The official agency's determination of the same quake and how this event compares, `null` while it
    /// has none (see `docs/self-sensing.md`, "Scorecard").
    pub jma: Option<Comparison>,
    pub reports: Vec<HypReport>,
    pub stations: Vec<HypEventStation<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exported_at: Option<i64>,
}

/// An item of `HypPage`: the head and the latest report, summarised.
#[derive(Serialize)]
pub struct HypPageItem<'a> {
    #[serde(flatten)]
    pub head: HypEventHead<'a>,
    pub latest: Option<HypReport>,
}

/// `HypPage`.
#[derive(Serialize)]
pub struct HypPage<'a> {
    pub items: Vec<HypPageItem<'a>>,
    pub total: i64,
    pub page: i64,
    pub limit: i64,
}

/// `HypEventStation`.
#[derive(Serialize)]
pub struct HypEventStation<'a> {
    pub code: &'a str,
    pub name: Option<&'a str>,
    pub latitude: f64,
    pub longitude: f64,
    pub metrics: Metrics<'a>,
}

/// A station's peaks keyed by layered metric (`surface:pgaGal`, …), in stored order.
pub struct Metrics<'a>(pub Vec<(&'a str, Peak)>);

/// A station's peak of one metric.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Peak {
    pub peak: f64,
    /// Observation time (Unix ms) of the frame that carried the peak.
    pub source_at: i64,
    /// When that frame was received (Unix ms).
    pub received_at: i64,
    pub recovered: bool,
}

impl Serialize for Metrics<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (metric, peak) in &self.0 {
            map.serialize_entry(metric, peak)?;
        }
        map.end()
    }
}

/// `HypStatus`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HypStatus<'a> {
    pub algorithm: String,
    /// The detection process's latest state (its own document), null while none has run.
    pub detector: Option<Value>,
    pub recorder: Option<Value>,
    pub errors: Vec<Value>,
    pub official_eew_takeover: bool,
    pub station_scope: &'static str,
    pub sources: Vec<Value>,
    pub archive: HypArchive,
    pub shaper: Shaper<'a>,
    /// The scorecard against the official agency.
    pub scorecard: &'a Summary,
    pub server_time: i64,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HypArchive {
    pub events: i64,
    pub public_events: i64,
    pub reports: i64,
}

/// The shaper component in service.
#[derive(Serialize)]
pub struct Shaper<'a> {
    pub name: &'a str,
    pub version: &'a str,
    pub sha256: &'a str,
}
