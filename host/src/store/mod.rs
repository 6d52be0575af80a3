//! All access to the database. SQLite (one file, WAL, `synchronous=FULL`) is the embedded default.
//! Writes go through one [`Writer`] (see `writer.rs`), so report ids increase in commit order; reads use a pool.

pub mod backup;
mod checkpoint;
mod frames;
mod hyp;
mod read;
pub mod report_cache;
mod report_item;
#[cfg(test)]
mod report_pages_tests;
mod statements;
#[cfg(test)]
mod test_archive;
mod writer;

pub use backup::{BackupFile, BackupOutcome, BackupSettings};
pub use frames::{DEFAULT_FRAMES_URL, FrameArchive, FrameArchiveSummary};
pub use hyp::*;
pub use read::*;
pub use report_item::ReportItem;
pub use writer::{
    Incoming, IngestSummary, Recovered, RecoverySummary, UnitKind, UnitRecord, Writer,
};

use anyhow::Context;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{ConnectOptions, SqlitePool};
use std::str::FromStr;
use std::time::Duration;

/// The archive when none is configured: a file under `./data/`, created with its folder on first use.
pub const DEFAULT_DATABASE_URL: &str = "sqlite://data/osds.db";

/// Rows a read connection's worker thread may run ahead of the task reading them. sqlx's default (50) makes a
/// cache block of 1,024 report versions a ping-pong of thread wake-ups; a whole block fits in this.
const ROW_BUFFER: usize = report_cache::BLOCK_IDS as usize;

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// Read access to the archive.
#[derive(Clone)]
pub struct Store {
    pool: SqlitePool,
    /// The last archive counts and the newest ids they were counted at (see `Store::archive_counts`).
    counts: std::sync::Arc<std::sync::Mutex<Option<read::CountedAt>>>,
    /// Rendered report versions below the horizon (see `report_cache.rs`).
    reports: std::sync::Arc<report_cache::ReportCache>,
}

/// Opens (creating when missing) the database at `url`, runs the migrations, and returns the read side and the
/// single writer.
pub async fn open(url: &str) -> anyhow::Result<(Store, Writer)> {
    let options = SqliteConnectOptions::from_str(url)
        .with_context(|| format!("database url `{url}`"))?
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Full)
        .foreign_keys(true)
        .busy_timeout(Duration::from_secs(10))
        .disable_statement_logging();
    if let Some(parent) = options
        .get_filename()
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
    {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("create database directory {}", parent.display()))?;
    }
    let mut write_conn = options
        .connect()
        .await
        .with_context(|| format!("open database {url}"))?;
    MIGRATOR
        .run(&mut write_conn)
        .await
        .context("run database migrations")?;
    let pool = SqlitePoolOptions::new()
        .max_connections(8)
        .connect_with(options.clone().read_only(true).row_buffer_size(ROW_BUFFER))
        .await
        .context("open database read pool")?;
    let checkpoint_conn = options
        .connect()
        .await
        .with_context(|| format!("open database {url} for checkpoints"))?;
    let writer = Writer::new(write_conn, checkpoint_conn).await?;
    Ok((
        Store {
            pool,
            counts: Default::default(),
            reports: Default::default(),
        },
        writer,
    ))
}
