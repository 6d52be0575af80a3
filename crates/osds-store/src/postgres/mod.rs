//! The archive on PostgreSQL (`postgres://` database URLs), for deployments that outgrow one machine: several
//! ingesters may archive into one database at once.
//!
//! Here: the schema (`migrations-postgres/`), one ingester's writer ([`PgWriter`], which shares every decision
//! about what to write with the SQLite writer and differs in how ids are handed out) and the read side
//! ([`open_store`]). docs/design.md, "Several ingesters", says what is done and what is not; the service does
//! not open PostgreSQL archives yet (`osds serve` refuses the URL).
//!
//! Ids across ingesters: every archiving transaction takes `ARCHIVING_LOCK` first and holds it until it ends,
//! and reads the next id after taking it, so ids commit in id order with no gap and a version two ingesters
//! received is archived once (docs/design.md, "Several ingesters", says why).

use crate::db::{ReadPool, WriteConn};
use crate::hyp;
use crate::ids::POSTGRES_HORIZON as HORIZON;
use crate::records;
use crate::served::SERVED_FORMAT;
use crate::statements::Statements;
use crate::writer::{
    IngestSummary, ReadContext, RecoverySummary, VersionContext, archive_batch, recover_in,
};
use crate::{ComponentChange, HypReportInput, Incoming, Recovered, StationMetric, Store};
use anyhow::Context;
use osds_time::now_rfc3339;
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPoolOptions};
use sqlx::{ConnectOptions, Connection};
use std::str::FromStr;

mod horizon;
#[cfg(test)]
mod tests;

use horizon::notify_horizon;
pub use horizon::watch_horizon;

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations-postgres");

/// Taken first by every archiving transaction, held until it ends (see the module's comment).
const ARCHIVING_LOCK: &str = "SELECT singleton FROM archive WHERE singleton = 1 FOR UPDATE";

/// Connections of a store's read pool.
const READ_CONNECTIONS: u32 = 8;

/// How every connection to the database at `url` is made.
fn connect_options(url: &str) -> anyhow::Result<PgConnectOptions> {
    Ok(PgConnectOptions::from_str(url)
        .with_context(|| format!("database url `{url}`"))?
        .disable_statement_logging())
}

/// The read side of the PostgreSQL archive at `url`, whose schema a writer has put in place.
pub async fn open_store(url: &str) -> anyhow::Result<Store> {
    let pool = PgPoolOptions::new()
        .max_connections(READ_CONNECTIONS)
        .connect_with(connect_options(url)?)
        .await
        .with_context(|| format!("open database read pool {url}"))?;
    let archive_id: String = sqlx::query_scalar("SELECT archive_id FROM archive")
        .fetch_one(&pool)
        .await
        .context("read the archive's identity")?;
    Ok(Store::new(ReadPool::Postgres(pool), archive_id))
}

/// Session ids of one ingester lie in `number << SESSION_ID_BITS ..`: see the `ingesters` table.
const SESSION_ID_BITS: u32 = 40;

/// One ingester's writer on a PostgreSQL archive.
pub struct PgWriter {
    conn: PgConnection,
    /// Names this ingester's sessions.
    ingester: String,
    /// The session id the next upstream connection gets (see [`PgWriter::next_session_id`]).
    next_session_id: i64,
    high_water: i64,
}

impl PgWriter {
    /// Connects to the database at `url`, brings its schema up to date (sqlx migrations take a lock of their
    /// own, so ingesters starting together do not race) and returns the writer of ingester `ingester`.
    pub async fn open(url: &str, ingester: &str) -> anyhow::Result<PgWriter> {
        let mut conn = connect_options(url)?
            .connect()
            .await
            .with_context(|| format!("open database {url}"))?;
        // (`run_direct`: `run`'s generic connection makes the future not `Send` for a spawned ingester.)
        MIGRATOR
            .run_direct(&mut conn)
            .await
            .context("run database migrations")?;
        // Texts are written with each version: an archive begun by this release is in its form. One begun by
        // a release that served another form would need its texts rendered again, which PostgreSQL archives
        // cannot do yet.
        sqlx::query(
            "UPDATE archive SET served_format = $1 \
             WHERE served_format = 0 AND NOT EXISTS (SELECT 1 FROM reports)",
        )
        .bind(SERVED_FORMAT)
        .execute(&mut conn)
        .await?;
        let format: i64 = sqlx::query_scalar("SELECT served_format FROM archive")
            .fetch_one(&mut conn)
            .await?;
        anyhow::ensure!(
            format == SERVED_FORMAT,
            "the archive's served texts are in form {format}, this release serves form {SERVED_FORMAT}"
        );
        let high_water = sqlx::query_scalar(&format!("SELECT {HORIZON}"))
            .fetch_one(&mut conn)
            .await?;
        let next_session_id = register(&mut conn, ingester).await?;
        Ok(PgWriter {
            conn,
            ingester: ingester.to_owned(),
            next_session_id,
            high_water,
        })
    }

    /// A session id for a new upstream connection, handed out at once (the row is written with
    /// [`PgWriter::open_session_with_id`], in order before anything that names it).
    pub fn next_session_id(&mut self) -> i64 {
        let id = self.next_session_id;
        self.next_session_id += 1;
        id
    }

    /// Records the session `id` (from [`PgWriter::next_session_id`]) started at `started_at`.
    pub async fn open_session_with_id(
        &mut self,
        id: i64,
        path: &str,
        role: &str,
        url: &str,
        started_at: &str,
    ) -> anyhow::Result<()> {
        sqlx::query(
            "INSERT INTO sessions (id, ingester, path, role, url, started_at) VALUES ($1, $2, $3, $4, $5, $6) \
             ON CONFLICT (id) DO NOTHING",
        )
        .bind(id)
        .bind(&self.ingester)
        .bind(path)
        .bind(role)
        .bind(url)
        .bind(started_at)
        .execute(&mut self.conn)
        .await?;
        Ok(())
    }

    /// This ingester's sessions left open by a previous run of it that stopped without closing them (another
    /// ingester's open sessions are its own, and may be live).
    pub async fn close_stale_sessions(&mut self) -> anyhow::Result<()> {
        sqlx::query(
            "UPDATE sessions SET ended_at = $1, end_reason = 'interrupted' \
             WHERE ended_at IS NULL AND ingester = $2",
        )
        .bind(now_rfc3339())
        .bind(&self.ingester)
        .execute(&mut self.conn)
        .await?;
        Ok(())
    }

    pub async fn session_connected(&mut self, id: i64) -> anyhow::Result<()> {
        records::session_connected(id)
            .pg_execute(&mut self.conn)
            .await
    }

    pub async fn session_ended(&mut self, id: i64, reason: &str) -> anyhow::Result<()> {
        records::session_ended(id, reason)
            .pg_execute(&mut self.conn)
            .await
    }

    pub async fn outage_begin(&mut self, source: &str, reason: &str) -> anyhow::Result<()> {
        records::outage_begin(source, reason)
            .pg_execute(&mut self.conn)
            .await
    }

    pub async fn outage_end(&mut self, source: &str) -> anyhow::Result<()> {
        records::outage_end(source).pg_execute(&mut self.conn).await
    }

    pub async fn refused_frame(
        &mut self,
        session_id: i64,
        received_at: &str,
        size: u64,
        limit: u64,
    ) -> anyhow::Result<()> {
        records::refused_frame(session_id, received_at, size, limit)
            .pg_execute(&mut self.conn)
            .await
    }

    pub async fn add_counter(&mut self, name: &str, by: i64) -> anyhow::Result<()> {
        records::add_counter(name, by)
            .pg_execute(&mut self.conn)
            .await
    }

    /// The highest report id this writer knows committed (its own commits and what it saw at open).
    pub fn high_water(&self) -> i64 {
        self.high_water
    }

    /// Records a new upstream connection of this ingester; returns its id.
    pub async fn open_session(&mut self, path: &str, role: &str, url: &str) -> anyhow::Result<i64> {
        let id = self.next_session_id();
        self.open_session_with_id(id, path, role, url, &now_rfc3339())
            .await?;
        Ok(id)
    }

    /// Appends the versions recovered from unparsed deliveries (see `Writer::recover`), under the archiving
    /// lock like any version.
    pub async fn recover(&mut self, items: &[Recovered]) -> anyhow::Result<RecoverySummary> {
        let mut tx = Connection::begin(&mut self.conn).await?;
        sqlx::query(ARCHIVING_LOCK).execute(&mut *tx).await?;
        let summary = recover_in(&mut *tx, items).await?;
        notify_horizon(&mut tx, summary.new_versions.last().copied()).await?;
        tx.commit().await.context("commit recovery transaction")?;
        if let Some(&last) = summary.new_versions.last() {
            self.high_water = self.high_water.max(last);
        }
        Ok(summary)
    }

    /// Appends one hyp report in a durable transaction (see `Writer::append_hyp_report`).
    pub async fn append_hyp_report(&mut self, input: &HypReportInput) -> anyhow::Result<String> {
        let mut tx = Connection::begin(&mut self.conn).await?;
        let sha256 = hyp::append_report(&mut *tx, input).await?;
        tx.commit().await.context("commit hyp report")?;
        Ok(sha256)
    }

    /// Adds recovered station peaks to a hyp event (see `Writer::add_hyp_station_metrics`).
    pub async fn add_hyp_station_metrics(
        &mut self,
        event_id: &str,
        metrics: &[StationMetric],
    ) -> anyhow::Result<u64> {
        let mut tx = Connection::begin(&mut self.conn).await?;
        let changed = hyp::add_metrics(&mut *tx, event_id, metrics).await?;
        tx.commit()
            .await
            .context("commit recovered station peaks")?;
        Ok(changed)
    }

    /// Withdraws a hyp event from the public API (or brings it back); false when there is no such event.
    pub async fn set_hyp_hidden(&mut self, event_id: &str, hidden: bool) -> anyhow::Result<bool> {
        Ok(self.conn.run(hyp::set_hidden(event_id, hidden)).await? > 0)
    }

    /// Records the latest state of the detector or the recorder.
    pub async fn set_hyp_state(
        &mut self,
        name: &str,
        at: i64,
        state: &serde_json::Value,
    ) -> anyhow::Result<()> {
        self.conn
            .run(hyp::set_state(name, at, state))
            .await
            .map(drop)
    }

    /// Records a component put in service (see `Writer::record_component`).
    pub async fn record_component(&mut self, change: &ComponentChange) -> anyhow::Result<()> {
        let statements = crate::components::component_change(change)?;
        let mut tx = Connection::begin(&mut self.conn).await?;
        tx.run(statements).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Archives a batch of frames in one durable transaction, under the archiving lock.
    pub async fn ingest(&mut self, batch: &[Incoming]) -> anyhow::Result<IngestSummary> {
        let mut tx = Connection::begin(&mut self.conn).await?;
        sqlx::query(ARCHIVING_LOCK).execute(&mut *tx).await?;
        let mut summary = IngestSummary::default();
        let mut pending = Statements::default();
        archive_batch(&mut *tx, &mut pending, batch, &mut summary).await?;
        pending.pg_execute(&mut tx).await?;
        notify_horizon(&mut tx, summary.new_versions.last().map(|v| v.id)).await?;
        tx.commit().await.context("commit ingest transaction")?;
        if let Some(last) = summary.new_versions.last().map(|v| v.id) {
            self.high_water = self.high_water.max(last);
        }
        Ok(IngestSummary {
            high_water: self.high_water,
            ..summary
        })
    }
}

/// Registers ingester `name` (once per database), takes its advisory lock for as long as `conn` is open, and
/// returns the first session id it has not handed out.
async fn register(conn: &mut PgConnection, name: &str) -> anyhow::Result<i64> {
    anyhow::ensure!(!name.is_empty(), "an ingester needs a name");
    let number: i64 = sqlx::query_scalar(
        "INSERT INTO ingesters (name, first_seen_at) VALUES ($1, $2) \
         ON CONFLICT (name) DO UPDATE SET name = excluded.name RETURNING number",
    )
    .bind(name)
    .bind(now_rfc3339())
    .fetch_one(&mut *conn)
    .await?;
    let locked: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock($1)")
        .bind(number)
        .fetch_one(&mut *conn)
        .await?;
    anyhow::ensure!(
        locked,
        "ingester `{name}` is already running against this database (each ingester needs a name of its own)"
    );
    let base = number << SESSION_ID_BITS;
    Ok(sqlx::query_scalar(
        "SELECT COALESCE(MAX(id), $1) + 1 FROM sessions WHERE id > $1 AND id < $2",
    )
    .bind(base)
    .bind(base + (1 << SESSION_ID_BITS))
    .fetch_one(&mut *conn)
    .await?)
}

impl ReadContext for PgConnection {
    async fn version_context(
        &mut self,
        mut before: Statements,
        source: &str,
        identity: &str,
        event_key: &str,
    ) -> anyhow::Result<VersionContext> {
        before
            .push(&format!(
                "SELECT (SELECT id FROM reports WHERE source = ? AND identity_sha256 = ?) AS existing, \
                 {HORIZON} + 1 AS next_id, \
                 nextval(pg_get_serial_sequence('deliveries', 'id')) AS next_delivery_id, \
                 (SELECT string_agg(DISTINCT revision::text, ',') FROM reports WHERE event_key = ?) AS revisions, \
                 e.id AS event_id, e.latest_revision, e.origin_at, e.sort_ms, e.upstream_ids \
                 FROM (SELECT 1) AS one LEFT JOIN events e ON e.id = ?"
            ))
            .bind(source)
            .bind(identity)
            .bind(event_key)
            .bind(event_key);
        Ok(VersionContext::from_row(&before.pg_fetch_one(self).await?))
    }
}
