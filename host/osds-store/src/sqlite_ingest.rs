//! The SQLite archive's ingest commits, run right on the calling thread through a connection of their own
//! (rusqlite). The archive task has a thread of its own (`writer_task.rs`), so it may block there.
//!
//! A commit is on the path of every live report to its subscribers. Through sqlx, its steps (`BEGIN` with the
//! first context read, the writes with `COMMIT`) were round trips from the archive task to the connection's
//! worker thread, two thread wake-ups each; after the pause between two live reports each wake-up costs tens of
//! microseconds here (BENCHMARKS.md, issue 25).

use crate::archiving::{Incoming, IngestSummary, ReadContext, VersionContext, archive_batch};
use crate::checkpoint::WRITER_AUTOCHECKPOINT_PAGES;
use crate::ids::{HORIZON, IdReservation};
use crate::statements::Statements;
use crate::wal_batch;
use anyhow::Context as _;
use std::future::Future;
use std::path::Path;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

/// Write transactions take the write lock up front: a deferred one that read first could not upgrade after
/// another process (`osds reparse`, `osds backup`) committed, and SQLite would refuse it without waiting.
pub(crate) const WRITE_TRANSACTION: &str = "BEGIN IMMEDIATE";

/// Prepared statements the connection keeps: a frame's archiving uses about a dozen shapes.
const STATEMENT_CACHE: usize = 64;

/// The ingest connection, set as the sqlx writer's is (`sqlite::open`; WAL is the file's own mode, set there).
pub(crate) fn connect(database: &Path) -> anyhow::Result<rusqlite::Connection> {
    let conn = rusqlite::Connection::open_with_flags_and_vfs(
        database,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
        wal_batch::register()?,
    )?;
    conn.busy_timeout(Duration::from_secs(10))?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    // The WAL-batching VFS is safe only while every commit syncs the WAL (`wal_batch.rs`).
    let synchronous: i64 = conn.pragma_query_value(None, "synchronous", |row| row.get(0))?;
    anyhow::ensure!(
        synchronous == 2,
        "the ingest connection is not synchronous=FULL"
    );
    conn.pragma_update(None, "foreign_keys", true)?;
    // Checkpoints are the checkpointer's (see `checkpoint.rs`).
    conn.pragma_update(None, "wal_autocheckpoint", WRITER_AUTOCHECKPOINT_PAGES)?;
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    Ok(conn)
}

/// One ingest transaction: `BEGIN`, each unit's context read and writes, `COMMIT`; rolled back on failure.
/// Blocks until the commit is durable.
pub(crate) fn commit(
    conn: &rusqlite::Connection,
    ids: &mut IdReservation,
    batch: &[Incoming],
) -> anyhow::Result<IngestSummary> {
    let result = (|| {
        let mut summary = IngestSummary::default();
        let mut pending = Statements::default();
        pending.push(WRITE_TRANSACTION);
        ready(archive_batch(
            &mut Blocking(conn),
            &mut pending,
            batch,
            &mut summary,
        ))??;
        if let Some(last) = summary.new_versions.last().map(|v| v.id.0) {
            ids.cover(last)?;
        }
        pending.push("COMMIT");
        pending
            .run_blocking(conn)
            .context("commit ingest transaction")?;
        Ok(summary)
    })();
    // SQLite may or may not have ended a failed transaction (a failed COMMIT on a full disk does not always).
    if result.is_err() && !conn.is_autocommit() {
        let _ = conn.execute_batch("ROLLBACK");
    }
    result
}

/// The ingest connection, read from inside its transaction.
struct Blocking<'c>(&'c rusqlite::Connection);

impl ReadContext for Blocking<'_> {
    async fn version_context(
        &mut self,
        before: Statements,
        source: &str,
        identity: &str,
        event_key: &str,
    ) -> anyhow::Result<VersionContext> {
        context_query(before, source, identity, event_key)
            .first_row_blocking(self.0, |row| VersionContext::from_row(row))
    }
}

/// `before`, then the read of a unit's [`VersionContext`] in SQLite's SQL.
pub(crate) fn context_query(
    mut before: Statements,
    source: &str,
    identity: &str,
    event_key: &str,
) -> Statements {
    before
        .push(&format!(
            "SELECT (SELECT id FROM reports WHERE source = ? AND identity_sha256 = ?) AS existing, \
             {HORIZON} + 1 AS next_id, \
             (SELECT COALESCE(MAX(id), 0) FROM deliveries) + 1 AS next_delivery_id, \
             (SELECT group_concat(DISTINCT revision) FROM reports WHERE event_key = ?) AS revisions, \
             e.id AS event_id, e.latest_revision, e.origin_at, e.sort_ms, e.upstream_ids \
             FROM (SELECT 1) LEFT JOIN events e ON e.id = ?"
        ))
        .bind(source.to_string())
        .bind(identity.to_string())
        .bind(event_key.to_string())
        .bind(event_key.to_string());
    before
}

/// The output of a future that never waits (the archiving code is shared with the asynchronous backends; on
/// the ingest connection every read it awaits is done when it is called).
fn ready<F: Future>(future: F) -> anyhow::Result<F::Output> {
    let mut future = std::pin::pin!(future);
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(output) => Ok(output),
        Poll::Pending => anyhow::bail!("a blocking archive step waited"),
    }
}
