//! The archive's handles: [`Store`] (reads, through a pool) and [`open`], which also returns the single writer.

use crate::counts::{CountedAt, EventMatches, EventTotals};
use crate::db::ReadPool;
use crate::writer::Writer;
use anyhow::Context;
use sqlx::ConnectOptions;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use std::time::Duration;

/// The archive when none is configured: a file under `./data/`, created with its folder on first use.
pub const DEFAULT_DATABASE_URL: &str = "sqlite://data/osds.db";

/// Rows a read connection's worker thread may run ahead of the task reading them: sqlx's default (50) makes a
/// read of many rows (a page of deliveries, an event's versions) a ping-pong of thread wake-ups. (Report texts
/// are read as one row of aggregates and do not depend on it.)
const ROW_BUFFER: usize = 1024;

/// How much of the archive file a read connection maps.
const READ_MMAP_BYTES: u64 = 1 << 31;

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// Read access to the archive.
#[derive(Clone)]
pub struct Store {
    pub(crate) db: ReadPool,
    /// The last archive counts and the newest ids they were counted at (see `Store::archive_counts`).
    pub(crate) counts: std::sync::Arc<std::sync::Mutex<Option<CountedAt>>>,
    /// Totals of `/events` filters at the horizon they were counted at (see `Store::events`).
    pub(crate) event_totals: std::sync::Arc<std::sync::Mutex<EventTotals>>,
    /// The events each `/events` filter lists, at the horizon they were found at (see `Store::events`).
    pub(crate) event_matches: std::sync::Arc<std::sync::Mutex<EventMatches>>,
    /// The archive's identity (see `ids.rs`); only `osds restore` changes it, never under a running store.
    archive_id: std::sync::Arc<str>,
}

impl Store {
    /// The store reading through `db`, of the archive `archive_id`.
    pub(crate) fn new(db: ReadPool, archive_id: String) -> Store {
        Store {
            db,
            counts: Default::default(),
            event_totals: Default::default(),
            event_matches: Default::default(),
            archive_id: archive_id.into(),
        }
    }

    /// The archive's identity, `archiveId` in the API.
    pub fn archive_id(&self) -> &str {
        &self.archive_id
    }
}

/// The options of a SQLite URL (`what` names it in errors). Anything else is refused rather than taken as a
/// file name (`postgres://host/db` would otherwise quietly make a SQLite file under `postgres:/`).
pub(crate) fn sqlite_options(what: &str, url: &str) -> anyhow::Result<SqliteConnectOptions> {
    anyhow::ensure!(
        !crate::db::is_postgres_url(url),
        "{what} `{url}` is a PostgreSQL database: this release keeps its archive in SQLite only \
         (PostgreSQL support is being built)"
    );
    anyhow::ensure!(
        url.starts_with("sqlite:"),
        "{what} `{url}` is not a SQLite URL (one begins with `sqlite:`, e.g. `{DEFAULT_DATABASE_URL}`)"
    );
    <SqliteConnectOptions as std::str::FromStr>::from_str(url)
        .with_context(|| format!("{what} `{url}`"))
}

/// The database file a SQLite URL names.
pub fn database_path(url: &str) -> anyhow::Result<std::path::PathBuf> {
    Ok(sqlite_options("database url", url)?
        .get_filename()
        .to_path_buf())
}

/// Opens the database at `url`, which must exist (every command but `osds serve` works on an archive that
/// is already there: a mistyped URL must not quietly create an empty one), like [`open`].
pub async fn open_existing(url: &str) -> anyhow::Result<(Store, Writer)> {
    let path = database_path(url)?;
    anyhow::ensure!(
        path.is_file(),
        "database {} does not exist (is --database-url right?); only `osds serve` creates an archive",
        path.display()
    );
    open(url).await
}

/// Opens (creating when missing) the database at `url`, runs the migrations, and returns the read side and the
/// single writer.
pub async fn open(url: &str) -> anyhow::Result<(Store, Writer)> {
    let options = sqlite_options("database url", url)?
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
    let mut conn = options
        .connect()
        .await
        .with_context(|| format!("open database {url}"))?;
    MIGRATOR
        .run(&mut conn)
        .await
        .context("run database migrations")?;
    crate::served::refresh(&mut conn)
        .await
        .context("write the served texts of the archive's report versions")?;
    let archive_id: String = sqlx::query_scalar("SELECT archive_id FROM archive")
        .fetch_one(&mut conn)
        .await
        .context("read the archive's identity")?;
    let pool = SqlitePoolOptions::new()
        .max_connections(8)
        .connect_with(
            options
                .clone()
                .read_only(true)
                .row_buffer_size(ROW_BUFFER)
                // Reads map the file instead of copying each page in (SQLite caps the size it maps).
                .pragma("mmap_size", READ_MMAP_BYTES.to_string()),
        )
        .await
        .context("open database read pool")?;
    let checkpoint_conn = options
        .connect()
        .await
        .with_context(|| format!("open database {url} for checkpoints"))?;
    let writer = Writer::new(conn, options, checkpoint_conn)
        .await
        .with_context(|| format!("open database {url} for writing"))?;
    Ok((Store::new(ReadPool::Sqlite(pool), archive_id), writer))
}
