//! WAL checkpoints off the commit path. SQLite's automatic checkpoint runs inside the commit that crosses
//! 1,000 WAL pages (about every 40 report versions here), so that commit, and the report's delivery, waited for
//! the database file to be written and synced. This task runs a passive checkpoint on a connection of its own
//! once commits have written `THRESHOLD` units of work (frames, reports) since the last one, which never
//! blocks the writer or readers; the writer's own automatic checkpoint stays as a backstop at
//! `WRITER_AUTOCHECKPOINT_PAGES`, for sustained bursts in which the task never catches up with the WAL's end.
//!
//! Not after every commit: once a checkpoint has copied the whole WAL, the next commit starts the WAL over,
//! and a restarted WAL's header is synced before the commit's own frames, a second sync on that report's way
//! to its subscribers. What stays in the WAL below the threshold is committed and durable; SQLite
//! checkpoints it when the last connection closes.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use sqlx::SqliteConnection;
use tokio::sync::mpsc;

/// How long after the commit that crossed the threshold the checkpoint waits, so it does not compete with that
/// commit's delivery.
const SETTLE: Duration = Duration::from_millis(10);
/// Units of work (one a frame or a report) between checkpoints: a single report version writes ~17 WAL pages,
/// so the WAL between checkpoints stays around 1,000 pages, SQLite's own default.
const THRESHOLD: usize = 64;
/// The writer's own automatic checkpoint, at ten times SQLite's default (about 40 MB of WAL).
pub(super) const WRITER_AUTOCHECKPOINT_PAGES: u32 = 10_000;

pub(super) struct Checkpointer {
    wake: mpsc::Sender<()>,
    /// Units committed since the last checkpoint began.
    pending: Arc<AtomicUsize>,
}

impl Checkpointer {
    /// Starts the checkpoint task on `conn` (a read-write connection to the same database). It ends when the
    /// checkpointer is dropped.
    pub(super) fn spawn(conn: SqliteConnection) -> Checkpointer {
        let (wake, requests) = mpsc::channel(1);
        let pending = Arc::new(AtomicUsize::new(0));
        tokio::spawn(run(conn, requests, pending.clone()));
        Checkpointer { wake, pending }
    }

    /// Counts a commit of `units` frames or reports and asks for a checkpoint once they add up to the
    /// threshold; never waits (one pending request covers any number of commits).
    pub(super) fn committed(&self, units: usize) {
        let units = units.max(1);
        if self.pending.fetch_add(units, Ordering::Relaxed) + units >= THRESHOLD {
            let _ = self.wake.try_send(());
        }
    }
}

async fn run(
    mut conn: SqliteConnection,
    mut requests: mpsc::Receiver<()>,
    pending: Arc<AtomicUsize>,
) {
    while requests.recv().await.is_some() {
        tokio::time::sleep(SETTLE).await;
        // Commits from here on count towards the next checkpoint (this one may not reach their frames).
        pending.store(0, Ordering::Relaxed);
        let outcome: Result<(i64, i64, i64), sqlx::Error> =
            sqlx::query_as("PRAGMA wal_checkpoint(PASSIVE)")
                .fetch_one(&mut conn)
                .await;
        match outcome {
            Ok((_, wal_pages, checkpointed)) => {
                tracing::trace!(wal_pages, checkpointed, "WAL checkpoint");
            }
            Err(e) => tracing::warn!(error = %e, "WAL checkpoint failed; retrying later"),
        }
    }
    let _ = sqlx::Connection::close(conn).await;
}

#[cfg(test)]
mod tests {
    use crate::test_archive::{archive, frames};
    use std::time::Duration;

    /// With the writer's own checkpoint pushed far out, the WAL must still be recycled between commits: it stays
    /// a small part of the database instead of holding every page written.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_wal_is_recycled_while_the_writer_commits() {
        let (_store, mut writer, dir) = archive("checkpoints", 100).await;
        let session = crate::test_archive::cq_session(&mut writer).await;
        for round in 1..=40 {
            let first = round * 50 + 51;
            writer
                .ingest(&frames(session, first..=first + 49))
                .await
                .unwrap();
            // Time for the checkpoint behind each commit, even on a machine busy with other tests.
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let size = |name: &str| std::fs::metadata(dir.join(name)).unwrap().len();
        let (database, wal) = (size("osds.db"), size("osds.db-wal"));
        // Checkpointed pages are in the database file; without checkpoints it would still be one page and
        // the WAL would hold all ~20 MB written.
        assert!(
            database > 2 << 20 && wal < database,
            "WAL {wal} bytes against a database of {database} bytes"
        );
        let _ = std::fs::remove_dir_all(dir);
    }

    /// Single reports committed one by one, as they arrive live, append to the WAL: none of them starts it
    /// over, which would cost a second sync (of the WAL header) on that report's way to its subscribers.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn reports_committed_one_by_one_do_not_restart_the_wal() {
        let (_store, mut writer, dir) = archive("wal-restarts", 10).await;
        let session = crate::test_archive::cq_session(&mut writer).await;
        // The WAL header's salt changes each time the WAL starts over.
        let salt = || std::fs::read(dir.join("osds.db-wal")).unwrap()[16..24].to_vec();
        let mut salts = Vec::new();
        for n in 11..=30 {
            writer.ingest(&frames(session, n..=n)).await.unwrap();
            salts.push(salt());
            // Longer than a checkpoint takes to follow a commit.
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        salts.dedup();
        assert!(
            salts.len() <= 2,
            "the WAL started over {} times in 20 single-report commits",
            salts.len() - 1
        );
        let _ = std::fs::remove_dir_all(dir);
    }
}
