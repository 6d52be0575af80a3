//! WAL checkpoints off the commit path. SQLite's automatic checkpoint runs inside the commit that crosses
//! 1,000 WAL pages (about every 40 report versions here), so that commit, and the report's delivery, waited for
//! the database file to be written and synced. This task runs a passive checkpoint on a connection of its own
//! shortly after commits (and once a second regardless), which never blocks the writer or readers; the writer's
//! own automatic checkpoint stays as a backstop at `WRITER_AUTOCHECKPOINT_PAGES`, for sustained bursts in which
//! the task never catches up with the WAL's end (only then can the WAL start over).

use sqlx::SqliteConnection;
use std::time::Duration;
use tokio::sync::mpsc;

/// How long after a commit the checkpoint waits, so it does not compete with that commit's delivery.
const SETTLE: Duration = Duration::from_millis(10);
/// Checkpoints run at least this often while the writer exists.
const PERIOD: Duration = Duration::from_secs(1);
/// The writer's own automatic checkpoint, at ten times SQLite's default (about 40 MB of WAL).
pub(super) const WRITER_AUTOCHECKPOINT_PAGES: u32 = 10_000;

pub(super) struct Checkpointer {
    wake: mpsc::Sender<()>,
}

impl Checkpointer {
    /// Starts the checkpoint task on `conn` (a read-write connection to the same database). It ends when the
    /// checkpointer is dropped.
    pub(super) fn spawn(conn: SqliteConnection) -> Checkpointer {
        let (wake, requests) = mpsc::channel(1);
        tokio::spawn(run(conn, requests));
        Checkpointer { wake }
    }

    /// Asks for a checkpoint soon; never waits (one pending request covers any number of commits).
    pub(super) fn request(&self) {
        let _ = self.wake.try_send(());
    }
}

async fn run(mut conn: SqliteConnection, mut requests: mpsc::Receiver<()>) {
    loop {
        tokio::select! {
            request = requests.recv() => {
                if request.is_none() {
                    break;
                }
                tokio::time::sleep(SETTLE).await;
            }
            _ = tokio::time::sleep(PERIOD) => {}
        }
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
    use super::super::test_archive::{archive, frames};
    use std::time::Duration;

    /// With the writer's own checkpoint pushed far out, the WAL must still be recycled between commits: it stays
    /// a small part of the database instead of holding every page written.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_wal_is_recycled_while_the_writer_commits() {
        let (_store, mut writer, dir) = archive("checkpoints", 100).await;
        let session = writer
            .open_session("/cq_eew", "channel", "ws://test.invalid/cq_eew")
            .await
            .unwrap();
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
}
