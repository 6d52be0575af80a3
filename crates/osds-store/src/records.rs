//! The ingest path's bookkeeping writes (a session's connect and end, outages, counters, refused frames), as
//! statements both backends run. Opening a session and closing stale ones differ per backend (PostgreSQL
//! sessions name their ingester) and stay with each writer.

use crate::statements::Statements;
use osds_time::now_rfc3339;

pub(crate) fn session_connected(id: i64) -> Statements {
    let mut s = Statements::one("UPDATE sessions SET connected_at = ? WHERE id = ?");
    s.bind(now_rfc3339()).bind(id);
    s
}

pub(crate) fn session_ended(id: i64, reason: &str) -> Statements {
    let mut s = Statements::one(
        "UPDATE sessions SET ended_at = ?, end_reason = ? WHERE id = ? AND ended_at IS NULL",
    );
    s.bind(now_rfc3339()).bind(reason).bind(id);
    s
}

/// Starts an outage of `source` unless one is already open (an outage survives a restart of the service).
pub(crate) fn outage_begin(source: &str, reason: &str) -> Statements {
    let mut s = Statements::one(
        "INSERT INTO outages (source, started_at, reason) SELECT ?, ?, ? \
         WHERE NOT EXISTS (SELECT 1 FROM outages WHERE source = ? AND ended_at IS NULL)",
    );
    s.bind(source).bind(now_rfc3339()).bind(reason).bind(source);
    s
}

pub(crate) fn outage_end(source: &str) -> Statements {
    let mut s =
        Statements::one("UPDATE outages SET ended_at = ? WHERE source = ? AND ended_at IS NULL");
    s.bind(now_rfc3339()).bind(source);
    s
}

/// A frame refused for its size on `session_id`.
pub(crate) fn refused_frame(
    session_id: i64,
    received_at: &str,
    size: u64,
    limit: u64,
) -> Statements {
    let mut s = Statements::one(
        "INSERT INTO refused_frames (session_id, received_at, size_bytes, limit_bytes) VALUES (?, ?, ?, ?)",
    );
    s.bind(session_id)
        .bind(received_at)
        .bind(i64::try_from(size).unwrap_or(i64::MAX))
        .bind(i64::try_from(limit).unwrap_or(i64::MAX));
    s
}

pub(crate) fn add_counter(name: &str, by: i64) -> Statements {
    let mut s = Statements::one(
        "INSERT INTO counters (name, value) VALUES (?, ?) \
         ON CONFLICT (name) DO UPDATE SET value = counters.value + excluded.value",
    );
    s.bind(name).bind(by);
    s
}
