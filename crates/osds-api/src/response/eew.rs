//! The EEW family's response bodies (`EewReport`, `EewEvent`, `Delivery`, … of `schemas/openapi.yaml`), built
//! from the store's rows.

use osds_store::{DeliveryRow, EventRow, MonthRow, OutageRow, ReportRow, SessionRow};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// The decoded fields as the writer stored them, borrowed as the exact text serde wrote; a field absent or
/// `null` is served as `null`, a stored text that is not an object as all `null`.
#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Decoded<'a> {
    #[serde(borrow)]
    event_id: Option<&'a RawValue>,
    #[serde(borrow)]
    upstream_event_id: Option<&'a RawValue>,
    #[serde(borrow)]
    revision: Option<&'a RawValue>,
    #[serde(borrow)]
    issued_at: Option<&'a RawValue>,
    #[serde(borrow)]
    origin_at: Option<&'a RawValue>,
    #[serde(borrow)]
    epicenter: Option<&'a RawValue>,
    #[serde(borrow)]
    latitude: Option<&'a RawValue>,
    #[serde(borrow)]
    longitude: Option<&'a RawValue>,
    #[serde(borrow)]
    depth_km: Option<&'a RawValue>,
    #[serde(borrow)]
    magnitude: Option<&'a RawValue>,
    #[serde(borrow)]
    max_intensity: Option<&'a RawValue>,
    #[serde(borrow)]
    is_final: Option<&'a RawValue>,
    #[serde(borrow)]
    is_cancelled: Option<&'a RawValue>,
    #[serde(borrow)]
    is_test: Option<&'a RawValue>,
}

fn flag(raw: Option<&RawValue>) -> bool {
    raw.is_some_and(|r| r.get() == "true")
}

/// `EewReport` (and, with `raw_text`, `EewReportWithRawText`).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EewReport<'a> {
    pub id: i64,
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
    pub delivery_id: i64,
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

impl<'a> EewReport<'a> {
    pub fn from_row(row: &'a ReportRow) -> EewReport<'a> {
        let decoded: Decoded = serde_json::from_str(&row.decoded).unwrap_or_default();
        EewReport {
            id: row.id,
            event_key: &row.event_key,
            source: &row.source,
            event_id: decoded.event_id,
            upstream_event_id: decoded.upstream_event_id,
            revision: decoded.revision,
            issued_at: decoded.issued_at,
            origin_at: decoded.origin_at,
            received_at: &row.received_at,
            epicenter: decoded.epicenter,
            latitude: decoded.latitude,
            longitude: decoded.longitude,
            depth_km: decoded.depth_km,
            magnitude: decoded.magnitude,
            max_intensity: decoded.max_intensity,
            is_final: flag(decoded.is_final),
            is_cancelled: flag(decoded.is_cancelled),
            is_test: flag(decoded.is_test),
            delivery_id: row.delivery_id,
            raw_url: raw_url(row.delivery_id),
            decoder: DecoderRef {
                name: &row.decoder_name,
                sha256: &row.decoder_sha256,
            },
            raw_text: None,
        }
    }
}

fn raw_url(delivery_id: i64) -> String {
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
    pub latest: EewReport<'a>,
    pub report_count: i64,
    pub missing_revisions: &'a [i64],
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reports: Option<Vec<EewReport<'a>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exported_at: Option<String>,
}

impl<'a> EewEvent<'a> {
    pub fn from_row(row: &'a EventRow) -> EewEvent<'a> {
        EewEvent {
            id: &row.id,
            source: &row.source,
            source_event_id: &row.source_event_id,
            origin_at: row.origin_at.as_deref(),
            latest: EewReport::from_row(&row.latest),
            report_count: row.report_count,
            missing_revisions: &row.missing_revisions,
            reports: None,
            exported_at: None,
        }
    }
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
    pub id: i64,
    pub received_at: &'a str,
    pub source: Option<&'a str>,
    #[serde(rename = "type")]
    pub type_tag: Option<&'a str>,
    pub marker: &'a str,
    pub outcome: &'a str,
    pub report_id: Option<i64>,
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
}

impl<'a> Delivery<'a> {
    pub fn from_row(row: &'a DeliveryRow) -> Delivery<'a> {
        Delivery {
            id: row.id,
            received_at: &row.received_at,
            source: row.source.as_deref(),
            type_tag: row.type_tag.as_deref(),
            marker: &row.marker,
            outcome: &row.outcome,
            report_id: row.report_id,
            session_id: row.session_id,
            connection: DeliveryConnection {
                path: &row.path,
                role: &row.role,
            },
            unit_index: row.unit_index,
            sha256: &row.raw_sha256,
            size: row.size,
            raw_url: raw_url(row.id),
        }
    }
}

/// `DeliveryPage`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeliveryPage<'a> {
    pub items: Vec<Delivery<'a>>,
    pub next_cursor: i64,
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

impl<'a> Month<'a> {
    pub fn from_row(row: &'a MonthRow) -> Month<'a> {
        Month {
            month: &row.month,
            events: row.events,
        }
    }
}

/// `Session`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Session<'a> {
    pub session_id: i64,
    pub path: &'a str,
    pub role: &'a str,
    pub started_at: &'a str,
    pub connected_at: Option<&'a str>,
    pub ended_at: Option<&'a str>,
    pub end_reason: Option<&'a str>,
}

impl<'a> Session<'a> {
    pub fn from_row(row: &'a SessionRow) -> Session<'a> {
        Session {
            session_id: row.id,
            path: &row.path,
            role: &row.role,
            started_at: &row.started_at,
            connected_at: row.connected_at.as_deref(),
            ended_at: row.ended_at.as_deref(),
            end_reason: row.end_reason.as_deref(),
        }
    }
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

impl<'a> Outage<'a> {
    pub fn from_row(row: &'a OutageRow) -> Outage<'a> {
        Outage {
            source: &row.source,
            started_at: &row.started_at,
            ended_at: row.ended_at.as_deref(),
            reason: &row.reason,
        }
    }
}
