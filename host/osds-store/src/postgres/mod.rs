//! The archive on PostgreSQL (`postgres://` database URLs), for deployments that outgrow one machine: several
//! ingesters may archive into one database at once.
//!
//! Here: the schema (`migrations-postgres/`), the writer's PostgreSQL side ([`PgWriter`], which shares every
//! decision about what to write with the SQLite writer and differs in how ids are handed out), the read side
//! ([`open_store`]) and the horizon followed across processes ([`watch_horizon`]).
//!
//! Ids across ingesters: every archiving transaction takes `ARCHIVING_LOCK` first and holds it until it ends,
//! and reads the next id after taking it, so ids commit in id order with no gap and a version two ingesters
//! received is archived once (docs/design.md, "Several processes on one archive", says why).

use crate::archiving::{
    Incoming, IngestSummary, ReadContext, Recovered, RecoverySummary, VersionContext,
    archive_batch, recover_in,
};
use crate::codes::{Code, EndReason, OutageReason};
use crate::db::{ReadPool, WriteConn, ingester_runs};
use crate::hyp::{self, HypReportInput, StationMetric};
use crate::ids::POSTGRES_HORIZON as HORIZON;
use crate::records;
use crate::served::SERVED_FORMAT;
use crate::statements::Statements;
use crate::store::Store;
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

/// How long a read waits for a connection of the pool.
const READ_ACQUIRE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);

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
        // While the server is unreachable a request is answered 503 soon rather than after sqlx's 30 s.
        .acquire_timeout(READ_ACQUIRE_TIMEOUT)
        .connect_with(connect_options(url)?)
        .await
        .with_context(|| format!("open database read pool {url}"))?;
    let archive_id: String = sqlx::query_scalar("SELECT archive_id FROM archive")
        .fetch_one(&pool)
        .await
        .context("read the archive's identity")?;
    Ok(Store::new(ReadPool::Postgres(pool), archive_id))
}

/// After a `pg_restore` into the database at `url`: a new identity, and report ids above `ids_above` (the
/// highest id the replaced archive handed out, which the database cannot know any more) and above the restored
/// horizon from now on. Refused while anything else is connected to the database (every `osds` on it must be
/// stopped). Returns the new identity, the restored horizon and the new floor.
pub async fn mark_restored(url: &str, ids_above: i64) -> anyhow::Result<(String, i64, i64)> {
    anyhow::ensure!(
        holds_an_archive(url).await?,
        "database {url} holds no osds archive (restore the pg_dump into it first)"
    );
    let mut conn = connect_options(url)?.connect().await?;
    let others: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()",
    )
    .fetch_one(&mut conn)
    .await?;
    anyhow::ensure!(
        others == 0,
        "{others} other connection(s) to {url}: stop every osds process on this database first"
    );
    let restored: i64 = sqlx::query_scalar(&format!("SELECT {HORIZON}"))
        .fetch_one(&mut conn)
        .await?;
    let floor = restored.max(ids_above);
    let archive_id: String = sqlx::query_scalar(
        "UPDATE archive SET archive_id = replace(gen_random_uuid()::text, '-', ''), \
         id_floor = GREATEST(id_floor, $1) RETURNING archive_id",
    )
    .bind(floor)
    .fetch_one(&mut conn)
    .await?;
    conn.close().await?;
    Ok((archive_id, restored, floor))
}

/// Whether the database at `url` (which must exist) holds an archive: its schema is in place.
pub(crate) async fn holds_an_archive(url: &str) -> anyhow::Result<bool> {
    let mut conn = connect_options(url)?
        .connect()
        .await
        .with_context(|| format!("open database {url}"))?;
    let found: bool = sqlx::query_scalar("SELECT to_regclass('archive') IS NOT NULL")
        .fetch_one(&mut conn)
        .await?;
    conn.close().await?;
    Ok(found)
}

/// Opens the PostgreSQL archive at `url` (bringing its schema up to date) and returns the read side and a
/// writer of no ingester yet (see `Writer::register_ingester`).
pub(crate) async fn open(url: &str) -> anyhow::Result<(Store, PgWriter)> {
    let writer = PgWriter::open(url).await?;
    Ok((open_store(url).await?, writer))
}

/// Session ids of one ingester lie in `number << SESSION_ID_BITS ..`: see the `ingesters` table.
const SESSION_ID_BITS: u32 = 40;

/// The PostgreSQL archive's writer (the backend of `Writer` for `postgres:` URLs).
pub(crate) struct PgWriter {
    conn: PgConnection,
    /// How `conn` was made, to make it again after it failed.
    options: Box<PgConnectOptions>,
    /// The roles this writer's connection holds the locks of (an ingester's: the one whose sessions it
    /// records).
    roles: Vec<Role>,
    /// A write failed: the connection is replaced before the next (the server may have restarted, or the
    /// network dropped it).
    broken: bool,
}

impl PgWriter {
    /// Connects to the database at `url` and brings its schema up to date (sqlx migrations take a lock of
    /// their own, so ingesters starting together do not race).
    async fn open(url: &str) -> anyhow::Result<PgWriter> {
        let options = Box::new(connect_options(url)?);
        let mut conn = options
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
        crate::positions::fill_in(&mut conn)
            .await
            .context("fill in the positions of the archive's events")?;
        Ok(PgWriter {
            conn,
            options,
            roles: Vec::new(),
            broken: false,
        })
    }

    /// Makes the writer fit for a write: after a failed one, a new connection (holding the ingester's lock
    /// again). Fails while the database cannot be reached; the caller retries.
    pub(crate) async fn ready(&mut self) -> anyhow::Result<()> {
        if self.broken {
            let mut conn = self
                .options
                .connect()
                .await
                .context("connect to the database again")?;
            for role in &self.roles {
                role.take(&mut conn).await?;
            }
            tracing::info!("connected to the archive database again");
            // The old connection is gone or going: dropping it closes whatever is left of it.
            drop(std::mem::replace(&mut self.conn, conn));
            self.broken = false;
        }
        Ok(())
    }

    /// A write failed: one that lost the connection has the next write connect again (a refused
    /// statement leaves the connection as it was, and its ingester's lock held).
    pub(crate) fn failed(&mut self, connection_lost: bool) {
        self.broken |= connection_lost;
    }

    /// The highest committed report id.
    pub(crate) async fn horizon(&mut self) -> anyhow::Result<i64> {
        Ok(sqlx::query_scalar(&format!("SELECT {HORIZON}"))
            .fetch_one(&mut self.conn)
            .await?)
    }

    pub(crate) fn ingester(&self) -> Option<&str> {
        self.ingester_role().map(|(name, _)| name)
    }

    /// The name and number of the ingester this writer is, once registered.
    fn ingester_role(&self) -> Option<(&str, i64)> {
        self.roles.iter().find_map(|role| match role {
            Role::Ingester { name, number } => Some((name.as_str(), *number)),
            Role::Detector => None,
        })
    }

    /// Registers ingester `name` (once per database) and takes its advisory lock for as long as the writer's
    /// connection is open (a second process of the same name is refused). Returns the first session id it has
    /// not handed out: its session ids are `number << 40` plus its own count, so ingesters need no round trip
    /// to agree on one.
    pub(crate) async fn register(&mut self, name: &str) -> anyhow::Result<i64> {
        anyhow::ensure!(!name.is_empty(), "an ingester needs a name");
        anyhow::ensure!(
            self.ingester().is_none(),
            "this writer is ingester `{}` already",
            self.ingester().unwrap_or_default()
        );
        let number: i64 = sqlx::query_scalar(
            "INSERT INTO ingesters (name, first_seen_at) VALUES ($1, $2) \
             ON CONFLICT (name) DO UPDATE SET name = excluded.name RETURNING number",
        )
        .bind(name)
        .bind(now_rfc3339())
        .fetch_one(&mut self.conn)
        .await?;
        // Its own channels of a previous run that was killed are stale: record what that left out.
        self.in_transaction(stale_holders()).await?;
        let role = Role::Ingester {
            name: name.to_owned(),
            number,
        };
        role.take(&mut self.conn).await?;
        let base = number << SESSION_ID_BITS;
        let next = sqlx::query_scalar(
            "SELECT COALESCE(MAX(id), $1) + 1 FROM sessions WHERE id > $1 AND id < $2",
        )
        .bind(base)
        .bind(base + (1 << SESSION_ID_BITS))
        .fetch_one(&mut self.conn)
        .await?;
        self.roles.push(role);
        Ok(next)
    }

    /// The ingester whose sessions this writer records; an error for one that is no ingester's.
    pub(crate) fn registered(&self) -> anyhow::Result<&str> {
        self.ingester()
            .context("only an ingester's writer records upstream sessions (register it first)")
    }

    /// Takes the detector's lock: one process of all that share the archive runs the detector.
    pub(crate) async fn claim_detector(&mut self) -> anyhow::Result<()> {
        Role::Detector.take(&mut self.conn).await?;
        self.roles.push(Role::Detector);
        Ok(())
    }

    /// This ingester lost `source` (no socket of it connected): the channel's outage begins unless another
    /// running ingester has it. A writer of no ingester records it as on SQLite.
    pub(crate) async fn outage_begin(&mut self, source: &str, reason: &str) -> anyhow::Result<()> {
        let Some((_, number)) = self.ingester_role() else {
            return self
                .run(records::outage_begin(source, reason))
                .await
                .map(drop);
        };
        let mut s = Statements::one(OUTAGES_LOCK);
        s.push("DELETE FROM channel_holders WHERE ingester = ? AND source = ?")
            .bind(number)
            .bind(source);
        let held = format!(
            "EXISTS (SELECT 1 FROM channel_holders h WHERE h.source = ? AND {})",
            ingester_runs("h.ingester")
        );
        s.extend(records::outage_begin_unless(source, reason, Some(&held)));
        self.in_transaction(s).await
    }

    /// This ingester has `source` again: the channel's outage, if any, ends.
    pub(crate) async fn outage_end(&mut self, source: &str) -> anyhow::Result<()> {
        let mut s = Statements::one(OUTAGES_LOCK);
        if let Some((_, number)) = self.ingester_role() {
            s.push(
                "INSERT INTO channel_holders (ingester, source, since) VALUES (?, ?, ?) \
                 ON CONFLICT DO NOTHING",
            )
            .bind(number)
            .bind(source)
            .bind(now_rfc3339());
        }
        s.extend(records::outage_end(source));
        self.in_transaction(s).await
    }

    /// See [`stale_holders`]; only an ingester's writer checks.
    pub(crate) async fn check_outages(&mut self) -> anyhow::Result<()> {
        if self.ingester().is_some() {
            self.in_transaction(stale_holders()).await?;
        }
        Ok(())
    }

    pub(crate) async fn close(self) -> anyhow::Result<()> {
        Ok(self.conn.close().await?)
    }

    /// Runs `statements` on their own.
    pub(crate) async fn run(&mut self, statements: Statements) -> anyhow::Result<u64> {
        self.conn.run(statements).await
    }

    /// Appends the versions recovered from unparsed deliveries, under the archiving lock like any version.
    pub(crate) async fn recover(&mut self, items: &[Recovered]) -> anyhow::Result<RecoverySummary> {
        let mut tx = Connection::begin(&mut self.conn).await?;
        sqlx::query(ARCHIVING_LOCK).execute(&mut *tx).await?;
        let summary = recover_in(&mut *tx, items).await?;
        notify_horizon(&mut tx, summary.new_versions.last().copied()).await?;
        tx.commit().await.context("commit recovery transaction")?;
        Ok(summary)
    }

    pub(crate) async fn append_hyp_report(
        &mut self,
        input: &HypReportInput,
    ) -> anyhow::Result<String> {
        let mut tx = Connection::begin(&mut self.conn).await?;
        let sha256 = hyp::append_report(&mut *tx, input).await?;
        tx.commit().await.context("commit hyp report")?;
        Ok(sha256)
    }

    pub(crate) async fn add_hyp_station_metrics(
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

    /// Runs `statements` in one transaction.
    pub(crate) async fn in_transaction(&mut self, statements: Statements) -> anyhow::Result<()> {
        let mut tx = Connection::begin(&mut self.conn).await?;
        tx.run(statements).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Archives a batch of frames in one durable transaction, under the archiving lock.
    pub(crate) async fn ingest(&mut self, batch: &[Incoming]) -> anyhow::Result<IngestSummary> {
        let mut tx = Connection::begin(&mut self.conn).await?;
        sqlx::query(ARCHIVING_LOCK).execute(&mut *tx).await?;
        let mut summary = IngestSummary::default();
        let mut pending = Statements::default();
        archive_batch(&mut *tx, &mut pending, batch, &mut summary).await?;
        pending.pg_execute(&mut tx).await?;
        notify_horizon(&mut tx, summary.new_versions.last().map(|v| v.id.0)).await?;
        tx.commit().await.context("commit ingest transaction")?;
        Ok(summary)
    }
}

/// Serialises the outage bookkeeping of all ingesters (an advisory lock key no ingester number takes).
const OUTAGES_LOCK: &str = "SELECT pg_advisory_xact_lock(-1)";

/// Records the outages of channels whose only holders stopped without saying so (killed), forgets their
/// holdings and ends their sessions. Run by every ingester now and then, and by one registering (its own rows of a previous run are
/// such).
fn stale_holders() -> Statements {
    let mut s = Statements::one(OUTAGES_LOCK);
    // The outage begins when the last of its holders was last known alive (never before it took the channel).
    s.push(&format!(
        "INSERT INTO outages (source, started_at, reason) \
         SELECT h.source, COALESCE(MAX(GREATEST(l.alive_at, h.since)), ?), ? \
         FROM channel_holders h \
         LEFT JOIN ingesters i ON i.number = h.ingester LEFT JOIN liveness l ON l.ingester = i.name \
         WHERE NOT {} \
         AND NOT EXISTS (SELECT 1 FROM channel_holders o WHERE o.source = h.source AND {}) \
         AND NOT EXISTS (SELECT 1 FROM outages x WHERE x.source = h.source AND x.ended_at IS NULL) \
         GROUP BY h.source",
        ingester_runs("h.ingester"),
        ingester_runs("o.ingester"),
    ))
    .bind(now_rfc3339())
    .bind(OutageReason::IngesterStopped.to_string());
    s.push(&format!(
        "DELETE FROM channel_holders h WHERE NOT {}",
        ingester_runs("h.ingester")
    ));
    // Their sessions end when they were last known alive (an ingester started under another name never
    // closes them itself).
    s.push(&format!(
        "UPDATE sessions s SET end_reason = ?, ended_at = \
         CASE WHEN COALESCE(s.connected_at, s.started_at) > COALESCE(l.alive_at, ?) \
         THEN COALESCE(s.connected_at, s.started_at) ELSE COALESCE(l.alive_at, ?) END \
         FROM ingesters i LEFT JOIN liveness l ON l.ingester = i.name \
         WHERE s.ingester = i.name AND s.ended_at IS NULL AND NOT {}",
        ingester_runs("i.number")
    ))
    .bind(EndReason::Interrupted.as_str())
    .bind(now_rfc3339())
    .bind(now_rfc3339());
    s
}

/// What only one process may do at a time on an archive, held as an advisory lock for as long as the
/// writer's connection is open (and taken again with a new one).
enum Role {
    /// Ingester `name`, whose lock key is its `number`.
    Ingester { name: String, number: i64 },
    /// The self-sensing detector: two would publish two sets of `hyp` reports.
    Detector,
}

impl Role {
    /// The detector's key, outside the ingester numbers (positive) and [`OUTAGES_LOCK`]'s.
    const DETECTOR_KEY: i64 = -2;

    fn key(&self) -> i64 {
        match self {
            Role::Ingester { number, .. } => *number,
            Role::Detector => Role::DETECTOR_KEY,
        }
    }

    /// Takes the role's lock on `conn`, or says who has it.
    async fn take(&self, conn: &mut PgConnection) -> anyhow::Result<()> {
        let locked: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock($1)")
            .bind(self.key())
            .fetch_one(&mut *conn)
            .await?;
        match self {
            Role::Ingester { name, .. } => anyhow::ensure!(
                locked,
                "ingester `{name}` is already running against this database (each ingester needs a name of its own)"
            ),
            Role::Detector => anyhow::ensure!(
                locked,
                "a hyp detector already runs on this archive (another `osds serve --hyp-source`): run it in one process"
            ),
        }
        Ok(())
    }
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
