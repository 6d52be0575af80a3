//! `/status` (`Status` of `schemas/openapi.yaml`) and `/latest` (`Latest`).

use crate::codes::FailureCode;
use crate::eew::{EewEvent, Outage, Session};
use crate::upstream::{ConnectionState, SourceState};
use serde::Serialize;

/// `Status`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Status<'a> {
    pub version: u32,
    pub archive_id: &'a str,
    pub server_time: String,
    pub healthy: bool,
    pub sources: Vec<SourceStatus<'a>>,
    pub archive: ArchiveCounts,
    pub connections: Vec<Session<'a>>,
    pub upstream_sockets: Vec<ConnectionState>,
    pub outages: Vec<Outage<'a>>,
    pub ingesters: Vec<Ingester<'a>>,
    pub backups: Backups,
    pub decoders: Vec<Decoder<'a>>,
    /// The WIT worlds this host runs components of, each with its version (`osds:eew/decoder@1.0.0`): a
    /// component of the same major version, not newer, is accepted.
    pub accepted_worlds: Vec<String>,
    pub writes: Writes,
}

/// `Ingester`: one of the ingesters of a PostgreSQL archive.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Ingester<'a> {
    pub name: &'a str,
    pub running: bool,
    pub channels: &'a [String],
    pub sockets: Vec<IngesterSocket<'a>>,
}

/// `IngesterSocket`: one of an ingester's upstream sessions, connected and not ended.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct IngesterSocket<'a> {
    pub session_id: i64,
    pub path: &'a str,
    pub role: &'a str,
    pub connected_at: &'a str,
}

/// `Writes`: whether the archive takes writes, and the received frames waiting for it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Writes {
    pub writable: bool,
    pub failure: Option<WriteFailure>,
    pub queued_frames: usize,
    pub queued_bytes: usize,
    pub queue_limit_bytes: usize,
    /// Frames dropped because the queue was full, per channel, since the service started.
    pub dropped: Vec<Dropped>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WriteFailure {
    pub code: FailureCode,
    pub since: String,
    pub attempts: u64,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Dropped {
    pub source: String,
    pub frames: u64,
}

/// A channel's state with its outage in progress.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SourceStatus<'a> {
    #[serde(flatten)]
    pub state: SourceState,
    pub current_outage: Option<Outage<'a>>,
}

/// `ArchiveCounts`: what the archive holds, counted by the store.
#[derive(Debug, Default, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ArchiveCounts {
    pub events: i64,
    pub versions: i64,
    pub deliveries: i64,
    pub raw_payloads: i64,
    /// Deliveries that did not decode and have not been recovered by a later decoder.
    pub unparsed: i64,
    /// The same, per reason (the decoder's error kind, or `unstorable`, a report the archive cannot store).
    pub unparsed_by_reason: std::collections::BTreeMap<String, i64>,
    /// Unparsed deliveries a later decoder recovered (`osds reparse`).
    pub recovered: i64,
    pub ignored: i64,
    pub duplicates: i64,
    pub high_water: i64,
}

/// The `backups` object.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Backups {
    pub directory: String,
    pub every_seconds: Option<u64>,
    pub keep: usize,
    pub last: Option<LastBackup>,
    pub count: usize,
    pub note: &'static str,
}

/// What `backups.note` says.
pub const BACKUPS_NOTE: &str =
    "backups are kept on the same server; they are not off-site disaster recovery";

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LastBackup {
    pub path: String,
    pub size_bytes: u64,
    pub created_at: String,
}

/// `DecoderInfo`, with when it was installed (null for one loaded at start).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Decoder<'a> {
    pub name: &'a str,
    pub version: &'a str,
    pub source: &'a str,
    pub claims: &'a [String],
    pub upstream_path: &'a str,
    pub query_command: &'a str,
    pub sha256: &'a str,
    pub installed_at: Option<&'a str>,
}

/// `Latest`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Latest<'a> {
    pub items: Vec<EewEvent<'a>>,
    pub sources: Vec<SourceState>,
    pub server_time: String,
    pub note: &'static str,
}
