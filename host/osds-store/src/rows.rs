//! What the read queries return: typed rows. The API crate turns them into its response types; nothing here
//! knows the public JSON.

use crate::codes::{DeliveryOutcome, Marker, SocketRole};
use crate::db::Columns;
use crate::ids::{DeliveryId, ReportId};

/// The columns of a `reports` row (as `r`) that [`report_row`] reads.
pub(crate) const REPORT_COLUMNS: &str = "r.id, r.event_key, r.source, r.received_at, r.delivery_id, r.report_json, r.decoder_name, r.decoder_sha256";

/// A [`ReportRow`] from a row selecting [`REPORT_COLUMNS`].
pub(crate) fn report_row(row: &dyn Columns) -> ReportRow {
    ReportRow {
        id: ReportId(row.int("id")),
        event_key: row.text("event_key"),
        source: row.text("source"),
        received_at: row.text("received_at"),
        delivery_id: DeliveryId(row.int("delivery_id")),
        decoded: row.text("report_json"),
        decoder_name: row.text("decoder_name"),
        decoder_sha256: row.text("decoder_sha256"),
    }
}

/// One stored report version (a `reports` row).
#[derive(Debug, Clone)]
pub struct ReportRow {
    pub id: ReportId,
    pub event_key: String,
    pub source: String,
    pub received_at: String,
    pub delivery_id: DeliveryId,
    /// The decoded fields as the writer stored them: serde's JSON text of `wolfx_core::Report`.
    pub decoded: String,
    pub decoder_name: String,
    pub decoder_sha256: String,
}

/// A report version's served text (see `served.rs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServedReport {
    pub id: ReportId,
    /// Its channel (shared by the versions read together).
    pub source: std::sync::Arc<str>,
    /// Its `EewReport` JSON (shared: pages, caches and live consumers hold the one copy).
    pub json: std::sync::Arc<str>,
}

/// An event with its latest report version.
#[derive(Debug, Clone)]
pub struct EventRow {
    pub id: String,
    pub source: String,
    pub source_event_id: String,
    pub origin_at: Option<String>,
    pub report_count: i64,
    /// Revisions below the highest one that are not archived.
    pub missing_revisions: Vec<i64>,
    /// The latest version's served `EewReport` text.
    pub latest: std::sync::Arc<str>,
}

/// A stored report version with the raw bytes of the delivery that first brought it.
#[derive(Debug, Clone)]
pub struct VersionRow {
    pub report: ReportRow,
    pub raw: Vec<u8>,
}

/// An event with every stored version, in revision order (several versions of one revision by id).
#[derive(Debug, Clone)]
pub struct EventVersions {
    pub event: EventRow,
    pub versions: Vec<VersionRow>,
}

/// One reception record with its session's path and role and the payload's size.
#[derive(Debug, Clone)]
pub struct DeliveryRow {
    pub id: DeliveryId,
    pub received_at: String,
    pub source: Option<String>,
    pub type_tag: Option<String>,
    pub marker: Marker,
    pub outcome: DeliveryOutcome,
    pub report_id: Option<ReportId>,
    pub session_id: i64,
    pub path: String,
    pub role: SocketRole,
    /// The ingester that received it (PostgreSQL archives; `None` on SQLite).
    pub ingester: Option<String>,
    pub unit_index: i64,
    pub raw_sha256: String,
    pub size: i64,
}

/// A month (Beijing time, `YYYY-MM`) and how many events it holds.
#[derive(Debug, Clone)]
pub struct MonthRow {
    pub month: String,
    pub events: i64,
}

/// One recorded attempt to hold an upstream connection.
#[derive(Debug, Clone)]
pub struct SessionRow {
    pub id: i64,
    /// The ingester that held it (PostgreSQL archives; `None` on SQLite).
    pub ingester: Option<String>,
    pub path: String,
    pub role: SocketRole,
    pub started_at: String,
    pub connected_at: Option<String>,
    pub ended_at: Option<String>,
    /// An `EndReason`'s spelling; archives from before the codes hold the words of their time (`service
    /// stopped`, a library's message), so it is read as the text it is.
    pub end_reason: Option<String>,
}

/// An ingester of a PostgreSQL archive and what it has now.
#[derive(Debug, Clone)]
pub struct IngesterRow {
    pub name: String,
    /// It runs (holds its lock); a stopped one keeps its name for when it comes back.
    pub running: bool,
    /// The channels it has at least one socket of connected.
    pub channels: Vec<String>,
    /// Its sessions connected and not ended (a killed ingester's stay so until it starts again).
    pub sockets: Vec<OpenSocket>,
}

/// An upstream session connected and not ended.
#[derive(Debug, Clone)]
pub struct OpenSocket {
    pub session_id: i64,
    pub path: String,
    pub role: SocketRole,
    pub connected_at: String,
}

/// An interval without a connected socket; `ended_at: None` is still going on.
#[derive(Debug, Clone)]
pub struct OutageRow {
    pub source: String,
    pub started_at: String,
    pub ended_at: Option<String>,
    /// An `OutageReason` as its sentence (archives from before the type hold their own sentences).
    pub reason: String,
}
