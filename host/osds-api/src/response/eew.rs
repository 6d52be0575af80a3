//! The EEW family's bodies (`osds_contract::eew`) built from the store's rows.

use osds_contract::eew::{Delivery, DeliveryConnection, EewEvent, Month, Outage, Session, raw_url};
use osds_store::{Code, DeliveryRow, EventRow, MonthRow, OutageRow, SessionRow};
use serde_json::value::RawValue;

/// `EewEvent` of an event row (no reports, not an export).
pub fn event(row: &EventRow) -> EewEvent<'_> {
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

/// `Delivery`.
pub fn delivery(row: &DeliveryRow) -> Delivery<'_> {
    Delivery {
        id: row.id,
        received_at: &row.received_at,
        source: row.source.as_deref(),
        type_tag: row.type_tag.as_deref(),
        marker: row.marker.as_str(),
        outcome: row.outcome.as_str(),
        report_id: row.report_id,
        session_id: row.session_id,
        connection: DeliveryConnection {
            path: &row.path,
            role: row.role.as_str(),
            ingester: row.ingester.as_deref(),
        },
        unit_index: row.unit_index,
        sha256: &row.raw_sha256,
        size: row.size,
        raw_url: raw_url(row.id),
    }
}

/// A `Months` item.
pub fn month(row: &MonthRow) -> Month<'_> {
    Month {
        month: &row.month,
        events: row.events,
    }
}

/// `Session`.
pub fn session(row: &SessionRow) -> Session<'_> {
    Session {
        session_id: row.id,
        ingester: row.ingester.as_deref(),
        path: &row.path,
        role: row.role.as_str(),
        started_at: &row.started_at,
        connected_at: row.connected_at.as_deref(),
        ended_at: row.ended_at.as_deref(),
        end_reason: row.end_reason.as_deref(),
    }
}

/// `Outage`.
pub fn outage(row: &OutageRow) -> Outage<'_> {
    Outage {
        source: &row.source,
        started_at: &row.started_at,
        ended_at: row.ended_at.as_deref(),
        reason: &row.reason,
    }
}
