//! The archive in one SQLite file (WAL, `synchronous=FULL`), the embedded default: [`open`] and the writer's
//! SQLite side. One process writes (the `<database>-lock` file, `lock.rs`); others read.

use crate::archiving::{
    Incoming, IngestSummary, ReadContext, Recovered, RecoverySummary, VersionContext, recover_in,
};
use crate::checkpoint::{Checkpointer, WRITER_AUTOCHECKPOINT_PAGES};
use crate::db::{ReadPool, WriteConn};
use crate::hyp::{self, HypReportInput, StationMetric};
use crate::ids::{HORIZON, IdReservation};
use crate::records;
use crate::sqlite_ingest::{self, WRITE_TRANSACTION, context_query};
use crate::statements::Statements;
use crate::store::{Store, sqlite_options};
use anyhow::Context;
use sqlx::sqlite::{
    Sqlite, SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous,
    SqliteTransactionManager,
};
use sqlx::{ConnectOptions, Connection, SqliteConnection, Transaction, TransactionManager};
use std::time::Duration;

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// Rows a read connection's worker thread may run ahead of the task reading them: sqlx's default (50) makes a
/// read of many rows (a page of deliveries, an event's versions) a ping-pong of thread wake-ups. (Report texts
/// are read as one row of aggregates and do not depend on it.)
const ROW_BUFFER: usize = 1024;

/// How much of the archive file a read connection maps.
const READ_MMAP_BYTES: u64 = 1 << 31;

/// The SQLite archive's writer (the backend of `Writer` for `sqlite:` URLs).
pub(crate) struct SqliteWriter {
    conn: SqliteConnection,
    /// How `conn` was opened, to open it again after a failed commit (see [`begin`]).
    options: SqliteConnectOptions,
    checkpoints: Checkpointer,
    /// Ids are reserved (beside the database file) before a commit hands them out.
    ids: IdReservation,
    /// Frames are archived through a connection of their own (see `sqlite_ingest.rs`); `conn` writes the rest.
    archive: rusqlite::Connection,
}

/// Opens (creating when missing) the SQLite database at `url`, runs the migrations, and returns the read side
/// and the writer.
pub(crate) async fn open(url: &str) -> anyhow::Result<(Store, SqliteWriter)> {
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
    // (`run_direct`: `run`'s generic connection makes the future not `Send` for a spawned task.)
    MIGRATOR
        .run_direct(&mut conn)
        .await
        .context("run database migrations")?;
    crate::served::refresh(&mut conn)
        .await
        .context("write the served texts of the archive's report versions")?;
    crate::positions::fill_in(&mut conn)
        .await
        .context("fill in the positions of the archive's events")?;
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
    let writer = SqliteWriter::new(conn, options, checkpoint_conn)
        .await
        .with_context(|| format!("open database {url} for writing"))?;
    Ok((Store::new(ReadPool::Sqlite(pool), archive_id), writer))
}

impl SqliteWriter {
    /// The writer on `conn`, with WAL checkpoints moved off its commits onto `checkpoint_conn`.
    async fn new(
        mut conn: SqliteConnection,
        options: SqliteConnectOptions,
        checkpoint_conn: SqliteConnection,
    ) -> anyhow::Result<SqliteWriter> {
        leave_checkpoints_alone(&mut conn).await?;
        let database = options.get_filename().to_path_buf();
        Ok(SqliteWriter {
            conn,
            options,
            checkpoints: Checkpointer::spawn(checkpoint_conn),
            ids: IdReservation::open(&database),
            archive: sqlite_ingest::connect(&database)
                .with_context(|| format!("open {} for archiving", database.display()))?,
        })
    }

    /// The highest committed report id.
    pub(crate) async fn horizon(&mut self) -> anyhow::Result<i64> {
        Ok(sqlx::query_scalar(&format!("SELECT {HORIZON}"))
            .fetch_one(&mut self.conn)
            .await?)
    }

    /// The first session id not handed out.
    pub(crate) async fn first_session_id(&mut self) -> anyhow::Result<i64> {
        Ok(
            sqlx::query_scalar("SELECT COALESCE(MAX(id), 0) + 1 FROM sessions")
                .fetch_one(&mut self.conn)
                .await?,
        )
    }

    /// See [`Writer::mark_restored`].
    pub(crate) async fn mark_restored(&mut self, floor: i64) -> anyhow::Result<String> {
        self.ids.cover(floor)?;
        Ok(sqlx::query_scalar(
            "UPDATE archive SET archive_id = lower(hex(randomblob(16))), id_floor = MAX(id_floor, ?) \
             RETURNING archive_id",
        )
        .bind(floor)
        .fetch_one(&mut self.conn)
        .await?)
    }

    /// Copies the whole WAL into the database file and empties it (a `TRUNCATE` checkpoint), so the database
    /// file alone holds every commit, then closes the connections.
    pub(crate) async fn close(mut self) -> anyhow::Result<()> {
        let (busy, _, _): (i64, i64, i64) = sqlx::query_as("PRAGMA wal_checkpoint(TRUNCATE)")
            .fetch_one(&mut self.conn)
            .await?;
        anyhow::ensure!(
            busy == 0,
            "the WAL could not be checkpointed completely: another connection is still reading"
        );
        drop(self.checkpoints);
        sqlx::Connection::close(self.conn).await?;
        Ok(())
    }

    /// Archives a batch of frames in one durable transaction (group commit). Blocks the calling thread until
    /// it is durable (see `sqlite_ingest.rs`).
    pub(crate) async fn ingest(&mut self, batch: &[Incoming]) -> anyhow::Result<IngestSummary> {
        let summary = sqlite_ingest::commit(&self.archive, &mut self.ids, batch)?;
        self.checkpoints.committed(batch.len());
        Ok(summary)
    }

    /// See [`Writer::recover`].
    pub(crate) async fn recover(&mut self, items: &[Recovered]) -> anyhow::Result<RecoverySummary> {
        let mut tx = begin(&mut self.conn, &self.options).await?;
        let summary = recover_in(&mut *tx, items).await?;
        if let Some(&last) = summary.new_versions.last() {
            self.ids.cover(last)?;
        }
        tx.commit().await.context("commit recovery transaction")?;
        self.checkpoints.committed(items.len());
        Ok(summary)
    }

    /// See [`crate::Writer::outage_begin`] (one ingester per file: its channel is the archive's).
    pub(crate) async fn outage_begin(&mut self, source: &str, reason: &str) -> anyhow::Result<()> {
        self.run(records::outage_begin(source, reason))
            .await
            .map(drop)
    }

    pub(crate) async fn outage_end(&mut self, source: &str) -> anyhow::Result<()> {
        self.run(records::outage_end(source)).await.map(drop)
    }

    /// Nothing to check: the file's one ingester records its channels' outages itself.
    pub(crate) async fn check_outages(&mut self) -> anyhow::Result<()> {
        Ok(())
    }

    /// Runs `statements` outside any transaction of the writer's.
    pub(crate) async fn run(&mut self, statements: Statements) -> anyhow::Result<u64> {
        self.conn.run(statements).await
    }

    /// See [`Writer::append_hyp_report`].
    pub(crate) async fn append_hyp_report(
        &mut self,
        input: &HypReportInput,
    ) -> anyhow::Result<String> {
        let mut tx = begin(&mut self.conn, &self.options).await?;
        let sha256 = hyp::append_report(&mut *tx, input).await?;
        tx.commit().await.context("commit hyp report")?;
        self.checkpoints.committed(1);
        Ok(sha256)
    }

    /// See [`Writer::add_hyp_station_metrics`].
    pub(crate) async fn add_hyp_station_metrics(
        &mut self,
        event_id: &str,
        metrics: &[StationMetric],
    ) -> anyhow::Result<u64> {
        let mut tx = begin(&mut self.conn, &self.options).await?;
        let changed = hyp::add_metrics(&mut *tx, event_id, metrics).await?;
        tx.commit()
            .await
            .context("commit recovered station peaks")?;
        Ok(changed)
    }

    /// Runs `statements` in one transaction.
    pub(crate) async fn in_transaction(&mut self, statements: Statements) -> anyhow::Result<()> {
        let mut tx = begin(&mut self.conn, &self.options).await?;
        tx.run(statements).await?;
        tx.commit().await?;
        Ok(())
    }
}

impl ReadContext for SqliteConnection {
    async fn version_context(
        &mut self,
        before: Statements,
        source: &str,
        identity: &str,
        event_key: &str,
    ) -> anyhow::Result<VersionContext> {
        let row = context_query(before, source, identity, event_key)
            .fetch_one(self)
            .await?;
        Ok(VersionContext::from_row(&row))
    }
}

/// The writer's connection leaves WAL checkpoints to the checkpointer.
async fn leave_checkpoints_alone(conn: &mut SqliteConnection) -> anyhow::Result<()> {
    sqlx::query(&format!(
        "PRAGMA wal_autocheckpoint = {WRITER_AUTOCHECKPOINT_PAGES}"
    ))
    .execute(conn)
    .await?;
    Ok(())
}

/// Begins a write transaction on `conn`, settled first (see [`settle`]).
async fn begin<'c>(
    conn: &'c mut SqliteConnection,
    options: &SqliteConnectOptions,
) -> anyhow::Result<Transaction<'c, Sqlite>> {
    settle(conn, options).await?;
    Ok(conn.begin_with(WRITE_TRANSACTION).await?)
}

/// Makes `conn` fit for a new transaction. A commit through sqlx's `Transaction` that failed (a full disk:
/// SQLite has rolled the transaction back) leaves the connection counting a transaction that no longer exists,
/// and it would refuse every later one; such a connection is replaced by a new one from `options`. A round
/// trip to the connection's thread (~70 us).
async fn settle(conn: &mut SqliteConnection, options: &SqliteConnectOptions) -> anyhow::Result<()> {
    // The round trip runs any rollback still queued by a dropped transaction before the depth is read.
    conn.ping().await?;
    if SqliteTransactionManager::get_transaction_depth(conn) > 0 {
        tracing::warn!("the archive connection was left inside a failed transaction; reopening it");
        let mut fresh = options.connect().await?;
        leave_checkpoints_alone(&mut fresh).await?;
        // Closing the old connection rolls back whatever SQLite still held open.
        drop(std::mem::replace(conn, fresh));
    }
    Ok(())
}
