//! The bodies of `/status` (`osds_contract::status`) built from the store's and the runtime's state.

use osds_contract::status::{
    Decoder, Dropped, Ingester, IngesterSocket, LastBackup, WriteFailure, Writes,
};
use osds_runtime::DecoderInfo;
use osds_store::{BackupFile, Code, IngesterRow, WriteHealth};

/// `Ingester`.
pub fn ingester(row: &IngesterRow) -> Ingester<'_> {
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
                role: s.role.as_str(),
                connected_at: &s.connected_at,
            })
            .collect(),
    }
}

/// `Writes`.
pub fn writes(health: WriteHealth) -> Writes {
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

/// The `backups.last` object.
pub fn last_backup(file: &BackupFile) -> LastBackup {
    LastBackup {
        path: file_name(&file.path),
        size_bytes: file.size_bytes,
        created_at: file.created_at.clone(),
    }
}

/// `DecoderInfo`, with when it was installed (null for one loaded at start).
pub fn decoder<'a>(info: &'a DecoderInfo, installed_at: Option<&'a str>) -> Decoder<'a> {
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

/// A file's or directory's own name: `/status` names server files, it does not show where they are.
pub fn file_name(path: &std::path::Path) -> String {
    path.file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default()
}
