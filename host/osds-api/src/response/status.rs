//! `/status` (`Status` of `schemas/openapi.yaml`) and `/latest` (`Latest`).

use super::eew::{EewEvent, Outage, Session};
use crate::upstream::{ConnectionState, SourceState};
use osds_runtime::DecoderInfo;
use osds_store::{ArchiveCounts, BackupFile, IngesterRow, WriteHealth};
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
    pub archive: Archive,
    pub connections: Vec<Session<'a>>,
    pub upstream_sockets: Vec<ConnectionState>,
    pub outages: Vec<Outage<'a>>,
    pub ingesters: Vec<Ingester<'a>>,
    pub backups: Backups,
    pub decoders: Vec<Decoder<'a>>,
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

impl<'a> From<&'a IngesterRow> for Ingester<'a> {
    fn from(row: &'a IngesterRow) -> Ingester<'a> {
        Ingester {
            name: &row.name,
            running: row.running,
            channels: &row.channels,
            sockets: row
                .sockets
                .iter()
                .map(|s| IngesterSocket {
                    session_id: s.session_id,
                    path: &s.path,
                    role: &s.role,
                    connected_at: &s.connected_at,
                })
                .collect(),
        }
    }
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
    pub code: osds_store::FailureCode,
    pub since: String,
    pub attempts: u64,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Dropped {
    pub source: String,
    pub frames: u64,
}

impl From<WriteHealth> for Writes {
    fn from(health: WriteHealth) -> Writes {
        Writes {
            writable: health.failure.is_none(),
            failure: health.failure.map(|f| WriteFailure {
                code: f.code,
                since: f.since,
                attempts: f.attempts,
            }),
            queued_frames: health.queued_frames,
            queued_bytes: health.queued_bytes,
            queue_limit_bytes: health.limit_bytes,
            dropped: health
                .dropped
                .into_iter()
                .map(|(source, frames)| Dropped { source, frames })
                .collect(),
        }
    }
}

/// A channel's state with its outage in progress.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SourceStatus<'a> {
    #[serde(flatten)]
    pub state: SourceState,
    pub current_outage: Option<Outage<'a>>,
}

/// `ArchiveCounts`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Archive {
    pub events: i64,
    pub versions: i64,
    pub deliveries: i64,
    pub raw_payloads: i64,
    pub unparsed: i64,
    pub unparsed_by_reason: std::collections::BTreeMap<String, i64>,
    pub recovered: i64,
    pub ignored: i64,
    pub duplicates: i64,
    pub high_water: i64,
}

impl From<ArchiveCounts> for Archive {
    fn from(c: ArchiveCounts) -> Archive {
        Archive {
            events: c.events,
            versions: c.versions,
            deliveries: c.deliveries,
            raw_payloads: c.raw_payloads,
            unparsed: c.unparsed,
            unparsed_by_reason: c.unparsed_by_reason,
            recovered: c.recovered,
            ignored: c.ignored,
            duplicates: c.duplicates,
            high_water: c.high_water,
        }
    }
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

impl From<&BackupFile> for LastBackup {
    fn from(file: &BackupFile) -> LastBackup {
        LastBackup {
            path: file_name(&file.path),
            size_bytes: file.size_bytes,
            created_at: file.created_at.clone(),
        }
    }
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

impl<'a> Decoder<'a> {
    pub fn new(info: &'a DecoderInfo, installed_at: Option<&'a str>) -> Decoder<'a> {
        Decoder {
            name: &info.name,
            version: &info.version,
            source: &info.source,
            claims: &info.claims,
            upstream_path: &info.upstream_path,
            query_command: &info.query_command,
            sha256: &info.sha256,
            installed_at,
        }
    }
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

/// A file's or directory's own name: `/status` names server files, it does not show where they are.
pub fn file_name(path: &std::path::Path) -> String {
    path.file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default()
}
