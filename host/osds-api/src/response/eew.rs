//! The EEW family's response bodies (`EewReport`, `EewEvent`, `Delivery`, … of `schemas/openapi.yaml`), built
//! from the store's rows.

use osds_store::served::raw_url;
pub use osds_store::served::{DecoderRef, EewReport};
use osds_store::{DeliveryId, DeliveryRow, EventRow, MonthRow, OutageRow, ReportId, SessionRow};
use serde::Serialize;
use serde_json::value::RawValue;

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

impl<'a> EewEvent<'a> {
    pub fn from_row(row: &'a EventRow) -> EewEvent<'a> {
        EewEvent {
            id: &row.id,
            source: &row.source,
            source_event_id: &row.source_event_id,
            origin_at: row.origin_at.as_deref(),
            // The writer stored serde's own output, so it parses; `null` would show otherwise.
            latest: serde_json::from_str(&row.latest).unwrap_or(RawValue::NULL),
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
                ingester: row.ingester.as_deref(),
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
    pub ingester: Option<&'a str>,
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
            ingester: row.ingester.as_deref(),
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
