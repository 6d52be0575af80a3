//! The ingest path's bookkeeping writes (sessions, outages, counters, refused frames), as statements both
//! backends run. (On PostgreSQL an outage also depends on the other ingesters: `postgres/`.)

use crate::codes::{Code, EndReason};
use crate::statements::Statements;
use osds_time::now_rfc3339;

/// Records session `id` started at `started_at`; on an archive several ingesters share, under `ingester`.
pub(crate) fn open_session(
    id: i64,
    ingester: Option<&str>,
    path: &str,
    role: &str,
    url: &str,
    started_at: &str,
) -> Statements {
    let mut s = Statements::one(match ingester {
        Some(_) => {
            "INSERT INTO sessions (id, path, role, url, started_at, ingester) VALUES (?, ?, ?, ?, ?, ?) \
             ON CONFLICT (id) DO NOTHING"
        }
        None => {
            "INSERT INTO sessions (id, path, role, url, started_at) VALUES (?, ?, ?, ?, ?) \
             ON CONFLICT (id) DO NOTHING"
        }
    });
    s.bind(id).bind(path).bind(role).bind(url).bind(started_at);
    if let Some(ingester) = ingester {
        s.bind(ingester);
    }
    s
}

/// Ends the sessions a previous run left open (stopped without closing them): all of them, or on an archive
/// several ingesters share only `ingester`'s (another's may be live). They end when the dead process was last
/// known alive (`alive_at`, never before a session connected), else now.
pub(crate) fn close_stale_sessions(ingester: Option<&str>, alive_at: Option<&str>) -> Statements {
    let at = alive_at.map_or_else(now_rfc3339, str::to_owned);
    let mut s = Statements::one(match ingester {
        Some(_) => {
            "UPDATE sessions SET ended_at = CASE WHEN COALESCE(connected_at, started_at) > ? \
             THEN COALESCE(connected_at, started_at) ELSE ? END, \
             end_reason = ? WHERE ended_at IS NULL AND ingester = ?"
        }
        None => {
            "UPDATE sessions SET ended_at = CASE WHEN COALESCE(connected_at, started_at) > ? \
             THEN COALESCE(connected_at, started_at) ELSE ? END, \
             end_reason = ? WHERE ended_at IS NULL"
        }
    });
    s.bind(at.clone())
        .bind(at)
        .bind(EndReason::Interrupted.as_str());
    if let Some(ingester) = ingester {
        s.bind(ingester);
    }
    s
}

/// Records that ingester `ingester` (`''` on SQLite) is alive now.
pub(crate) fn mark_alive(ingester: &str) -> Statements {
    let mut s = Statements::one(
        "INSERT INTO liveness (ingester, alive_at) VALUES (?, ?) \
         ON CONFLICT (ingester) DO UPDATE SET alive_at = excluded.alive_at",
    );
    s.bind(ingester).bind(now_rfc3339());
    s
}

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
    outage_begin_unless(source, reason, None)
}

/// [`outage_begin`] at `at` rather than now (a crashed process's channels, from when it was last alive).
pub(crate) fn outage_begin_at(source: &str, reason: &str, at: &str) -> Statements {
    let mut s = Statements::one(
        "INSERT INTO outages (source, started_at, reason) SELECT ?, ?, ? \
         WHERE NOT EXISTS (SELECT 1 FROM outages WHERE source = ? AND ended_at IS NULL)",
    );
    s.bind(source).bind(at).bind(reason).bind(source);
    s
}

/// [`outage_begin`], also not while `held` holds: a condition on the channel, its one `?` bound to `source`
/// (on PostgreSQL: another running ingester has it).
pub(crate) fn outage_begin_unless(source: &str, reason: &str, held: Option<&str>) -> Statements {
    let mut sql = "INSERT INTO outages (source, started_at, reason) SELECT ?, ?, ? \
         WHERE NOT EXISTS (SELECT 1 FROM outages WHERE source = ? AND ended_at IS NULL)"
        .to_owned();
    if let Some(held) = held {
        sql.push_str(" AND NOT ");
        sql.push_str(held);
    }
    let mut s = Statements::one(&sql);
    s.bind(source).bind(now_rfc3339()).bind(reason).bind(source);
    if held.is_some() {
        s.bind(source);
    }
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
