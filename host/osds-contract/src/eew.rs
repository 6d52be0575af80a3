//! The EEW family's bodies (`EewReport`, `EewEvent`, `Delivery`, … of `schemas/openapi.yaml`).

use crate::ids::{DeliveryId, ReportId};
use serde::Serialize;
use serde_json::value::RawValue;

/// `EewReport` (and, with `raw_text`, `EewReportWithRawText`).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EewReport<'a> {
    pub id: ReportId,
    pub event_key: &'a str,
    pub source: &'a str,
    pub event_id: Option<&'a RawValue>,
    pub upstream_event_id: Option<&'a RawValue>,
    pub revision: Option<&'a RawValue>,
    pub issued_at: Option<&'a RawValue>,
    pub origin_at: Option<&'a RawValue>,
    pub received_at: &'a str,
    pub epicenter: Option<&'a RawValue>,
    pub latitude: Option<&'a RawValue>,
    pub longitude: Option<&'a RawValue>,
    pub depth_km: Option<&'a RawValue>,
    pub magnitude: Option<&'a RawValue>,
    pub max_intensity: Option<&'a RawValue>,
    pub is_final: bool,
    pub is_cancelled: bool,
    pub is_test: bool,
    pub delivery_id: DeliveryId,
    pub raw_url: String,
    pub decoder: DecoderRef<'a>,
    /// Only in exports: the first-received raw text of this version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub raw_text: Option<String>,
}

#[derive(Serialize)]
pub struct DecoderRef<'a> {
    pub name: &'a str,
    pub sha256: &'a str,
}

/// A delivery's raw-bytes path in the API.
pub fn raw_url(delivery_id: DeliveryId) -> String {
    format!("/api/v1/deliveries/{delivery_id}/raw")
}

/// `EewEvent`; with `reports` `EewEventDetail`, with `exportedAt` too `EewEventExport`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EewEvent<'a> {
    pub id: &'a str,
    pub source: &'a str,
    pub source_event_id: &'a str,
    pub origin_at: Option<&'a str>,
    /// The latest version's `EewReport`, as stored.
    pub latest: &'a RawValue,
    pub report_count: i64,
    pub missing_revisions: &'a [i64],
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reports: Option<Vec<EewReport<'a>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exported_at: Option<String>,
}

/// `EewPage`.
#[derive(Serialize)]
pub struct EewPage<'a> {
    pub items: Vec<EewEvent<'a>>,
    pub total: i64,
    pub page: i64,
    pub limit: i64,
    pub pages: i64,
}

/// `Delivery`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Delivery<'a> {
    pub id: DeliveryId,
    pub received_at: &'a str,
    pub source: Option<&'a str>,
    #[serde(rename = "type")]
    pub type_tag: Option<&'a str>,
    pub marker: &'a str,
    pub outcome: &'a str,
    pub report_id: Option<ReportId>,
    pub session_id: i64,
    pub connection: DeliveryConnection<'a>,
    pub unit_index: i64,
    pub sha256: &'a str,
    pub size: i64,
    pub raw_url: String,
}

#[derive(Serialize)]
pub struct DeliveryConnection<'a> {
    pub path: &'a str,
    pub role: &'a str,
    pub ingester: Option<&'a str>,
}

/// `DeliveryPage`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeliveryPage<'a> {
    pub items: Vec<Delivery<'a>>,
    pub next_cursor: DeliveryId,
}

/// `Months`.
#[derive(Serialize)]
pub struct Months<'a> {
    pub items: Vec<Month<'a>>,
}

#[derive(Serialize)]
pub struct Month<'a> {
    pub month: &'a str,
    pub events: i64,
}

/// `Session`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Session<'a> {
    pub session_id: i64,
    pub ingester: Option<&'a str>,
    pub path: &'a str,
    pub role: &'a str,
    pub started_at: &'a str,
    pub connected_at: Option<&'a str>,
    pub ended_at: Option<&'a str>,
    pub end_reason: Option<&'a str>,
}

/// `Outage`.
#[derive(Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Outage<'a> {
    pub source: &'a str,
    pub started_at: &'a str,
    pub ended_at: Option<&'a str>,
    pub reason: &'a str,
}
