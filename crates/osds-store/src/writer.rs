//! The single writer. Every insert happens here, in transactions whose commit is durable before the caller
//! learns the new high-water mark (docs/design.md: commit, then publish).

use crate::checkpoint::{Checkpointer, WRITER_AUTOCHECKPOINT_PAGES};
use crate::db::WriteConn;
use crate::ids::{HORIZON, IdReservation};
use crate::records;
use crate::rows::{ReportRow, ServedReport};
use crate::statements::Statements;
use anyhow::Context;
use osds_time::{beijing_month, now_rfc3339, parse_ms};
use sha2::{Digest, Sha256};
use sqlx::sqlite::{Sqlite, SqliteConnectOptions, SqliteTransactionManager};
use sqlx::{ConnectOptions, Connection, Row, SqliteConnection, Transaction, TransactionManager};
use std::collections::{BTreeMap, BTreeSet};
use wolfx_core::Report;

/// Write transactions take the write lock up front: a deferred one that read first could not upgrade after
/// another process (`osds reparse`, `osds backup`) committed, and SQLite would refuse it without waiting.
const WRITE_TRANSACTION: &str = "BEGIN IMMEDIATE";

/// Revisions above this are not expanded into a missing-revisions list (a garbage `ReportNum` must not make a
/// list of millions).
const MISSING_REVISIONS_SCAN_LIMIT: i64 = 1000;

/// One received frame, routed and decoded, ready to archive.
#[derive(Debug, Clone)]
pub struct Incoming {
    pub session_id: i64,
    pub received_at: String,
    pub frame: Vec<u8>,
    pub marker: &'static str,
    pub units: Vec<UnitRecord>,
}

impl Incoming {
    /// The channel the frame belongs to: its first report's or unparsed unit's (`None` when it has none).
    pub fn source(&self) -> Option<&str> {
        self.units.iter().find_map(|u| match &u.kind {
            UnitKind::Report { source, .. } => Some(source.as_str()),
            UnitKind::Unparsed { source, .. } => source.as_deref(),
            UnitKind::Ignored => None,
        })
    }
}

/// One decodable unit of a frame (the frame itself, or an element of a JSON-array frame).
#[derive(Debug, Clone)]
pub struct UnitRecord {
    pub unit_index: i64,
    pub type_tag: Option<String>,
    pub kind: UnitKind,
}

#[derive(Debug, Clone)]
pub enum UnitKind {
    /// Decoded to a report. `identity` is the SHA-256 of the unit's canonical JSON without `type`.
    Report {
        source: String,
        identity: String,
        report: Box<Report>,
        decoder_name: String,
        decoder_sha256: String,
    },
    /// Could not be decoded; kept and counted as unparsed.
    Unparsed {
        source: Option<String>,
        decoder: Option<String>,
        error_kind: String,
        message: String,
    },
    /// A channel this service does not archive; kept and counted as ignored.
    Ignored,
}

/// What one ingest transaction did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct IngestSummary {
    /// The versions archived, in id order (consecutive ids), with their served texts.
    pub new_versions: Vec<ServedReport>,
    /// Units per (channel, outcome): `archived`, `duplicate`, `unparsed` or `ignored`; a unit without a
    /// channel counts under its `type` (for the operator's metrics).
    pub units: BTreeMap<(String, &'static str), u64>,
    /// Highest report id after the commit.
    pub high_water: i64,
}

impl IngestSummary {
    fn tally(&mut self, unit: &UnitRecord, source: Option<&str>, outcome: &'static str) {
        let channel = source
            .or(unit.type_tag.as_deref())
            .unwrap_or("unknown")
            .to_owned();
        *self.units.entry((channel, outcome)).or_default() += 1;
    }
}

/// An archived delivery that a later decoder turned into a report (see `osds reparse`).
#[derive(Debug, Clone)]
pub struct Recovered {
    pub delivery_id: i64,
    pub received_at: String,
    pub source: String,
    /// SHA-256 of the unit's canonical JSON without `type`.
    pub identity: String,
    pub report: Box<Report>,
    pub decoder_name: String,
    pub decoder_sha256: String,
}

/// What one recovery transaction did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RecoverySummary {
    pub new_versions: Vec<i64>,
    /// Recovered units whose version was archived already (from another delivery).
    pub duplicates: usize,
}

pub struct Writer {
    pub(super) conn: SqliteConnection,
    /// How `conn` was opened, to open it again after a failed commit (see [`begin`]).
    pub(super) options: SqliteConnectOptions,
    /// The session id the next upstream connection gets (see [`Writer::next_session_id`]).
    next_session_id: i64,
    high_water: i64,
    pub(super) checkpoints: Checkpointer,
    /// Ids are reserved (beside the database file) before a commit hands them out.
    ids: IdReservation,
    /// No transaction but an ingest's has run on `conn` since one committed, so the next ingest need not
    /// [`settle`] it first.
    pub(super) settled: bool,
}

impl Writer {
    /// The writer on `conn` to the database file `database`, with WAL checkpoints moved off its commits onto
    /// `checkpoint_conn`.
    pub(super) async fn new(
        mut conn: SqliteConnection,
        options: SqliteConnectOptions,
        checkpoint_conn: SqliteConnection,
    ) -> anyhow::Result<Writer> {
        leave_checkpoints_alone(&mut conn).await?;
        let high_water: i64 = sqlx::query_scalar(&format!("SELECT {HORIZON}"))
            .fetch_one(&mut conn)
            .await?;
        let next_session_id: i64 =
            sqlx::query_scalar("SELECT COALESCE(MAX(id), 0) + 1 FROM sessions")
                .fetch_one(&mut conn)
                .await?;
        let database = options.get_filename().to_path_buf();
        Ok(Writer {
            conn,
            options,
            next_session_id,
            high_water,
            checkpoints: Checkpointer::spawn(checkpoint_conn),
            ids: IdReservation::open(&database),
            settled: false,
        })
    }

    /// A session id for a new upstream connection, handed out at once (the row is written with
    /// [`Writer::open_session_with_id`], in order before anything that names it): a connection never waits
    /// for the archive to accept its frames.
    pub fn next_session_id(&mut self) -> i64 {
        let id = self.next_session_id;
        self.next_session_id += 1;
        id
    }

    pub fn high_water(&self) -> i64 {
        self.high_water
    }

    /// After a backup was restored into this archive: a new identity, and report ids above `floor` from now
    /// on (every id the replaced archive can have handed out). Returns the new `archiveId`.
    pub async fn mark_restored(&mut self, floor: i64) -> anyhow::Result<String> {
        self.ids.cover(floor)?;
        let archive_id: String = sqlx::query_scalar(
            "UPDATE archive SET archive_id = lower(hex(randomblob(16))), id_floor = MAX(id_floor, ?) \
             RETURNING archive_id",
        )
        .bind(floor)
        .fetch_one(&mut self.conn)
        .await?;
        self.high_water = self.high_water.max(floor);
        Ok(archive_id)
    }

    /// Closes the writer: copies the whole WAL into the database file and empties it (a `TRUNCATE`
    /// checkpoint), so the database file alone holds every commit, then closes its connections.
    pub async fn close(mut self) -> anyhow::Result<()> {
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

    /// Archives a batch of frames in one durable transaction (group commit).
    pub async fn ingest(&mut self, batch: &[Incoming]) -> anyhow::Result<IngestSummary> {
        if !std::mem::take(&mut self.settled) {
            settle(&mut self.conn, &self.options).await?;
        }
        match self.ingest_in_transaction(batch).await {
            Ok(summary) => {
                self.settled = true;
                self.checkpoints.committed(batch.len());
                if let Some(last) = summary.new_versions.last().map(|v| v.id) {
                    self.high_water = self.high_water.max(last);
                }
                Ok(IngestSummary {
                    high_water: self.high_water,
                    ..summary
                })
            }
            Err(e) => {
                // SQLite may or may not have ended the transaction (a failed COMMIT on a full disk does not
                // always); leave none open for the next one.
                let _ = sqlx::query("ROLLBACK").execute(&mut self.conn).await;
                Err(e)
            }
        }
    }

    /// The batch's transaction, begun and committed by SQL of its own rather than by sqlx's `Transaction`, so
    /// `BEGIN` travels with the first unit's context read and `COMMIT` with the last unit's writes: two round
    /// trips to the connection's thread for a frame of one unit instead of four (each is two thread wake-ups).
    async fn ingest_in_transaction(&mut self, batch: &[Incoming]) -> anyhow::Result<IngestSummary> {
        let mut summary = IngestSummary::default();
        let mut pending = Statements::default();
        pending.push(WRITE_TRANSACTION);
        archive_batch(&mut self.conn, &mut pending, batch, &mut summary).await?;
        if let Some(last) = summary.new_versions.last().map(|v| v.id) {
            self.ids.cover(last)?;
        }
        pending.push("COMMIT");
        pending
            .execute(&mut self.conn)
            .await
            .context("commit ingest transaction")?;
        Ok(summary)
    }

    /// Appends the versions recovered from unparsed deliveries in one durable transaction. The deliveries
    /// themselves are never touched; each recovery is a `reparses` row. A delivery recovered before is skipped.
    pub async fn recover(&mut self, items: &[Recovered]) -> anyhow::Result<RecoverySummary> {
        self.settled = false;
        let mut tx = begin(&mut self.conn, &self.options).await?;
        let summary = recover_in(&mut *tx, items).await?;
        if let Some(&last) = summary.new_versions.last() {
            self.ids.cover(last)?;
        }
        tx.commit().await.context("commit recovery transaction")?;
        self.checkpoints.committed(items.len());
        if let Some(&last) = summary.new_versions.last() {
            self.high_water = self.high_water.max(last);
        }
        Ok(summary)
    }

    /// Re-reads the highest report id: another process (`osds reparse`) may have appended versions.
    /// Returns the new horizon when it moved.
    pub async fn refresh_high_water(&mut self) -> anyhow::Result<Option<i64>> {
        let current: i64 = sqlx::query_scalar(&format!("SELECT {HORIZON}"))
            .fetch_one(&mut self.conn)
            .await?;
        if current > self.high_water {
            self.high_water = current;
            return Ok(Some(current));
        }
        Ok(None)
    }

    pub async fn open_session(&mut self, path: &str, role: &str, url: &str) -> anyhow::Result<i64> {
        let id = self.next_session_id();
        self.open_session_with_id(id, path, role, url, &now_rfc3339())
            .await?;
        Ok(id)
    }

    /// Records the session `id` (from [`Writer::next_session_id`]) started at `started_at`.
    pub async fn open_session_with_id(
        &mut self,
        id: i64,
        path: &str,
        role: &str,
        url: &str,
        started_at: &str,
    ) -> anyhow::Result<()> {
        sqlx::query(
            "INSERT INTO sessions (id, path, role, url, started_at) VALUES (?, ?, ?, ?, ?) \
             ON CONFLICT (id) DO NOTHING",
        )
        .bind(id)
        .bind(path)
        .bind(role)
        .bind(url)
        .bind(started_at)
        .execute(&mut self.conn)
        .await?;
        Ok(())
    }

    pub async fn session_connected(&mut self, id: i64) -> anyhow::Result<()> {
        records::session_connected(id).execute(&mut self.conn).await
    }

    pub async fn session_ended(&mut self, id: i64, reason: &str) -> anyhow::Result<()> {
        records::session_ended(id, reason)
            .execute(&mut self.conn)
            .await
    }

    /// Sessions left open by a previous run that stopped without closing them.
    pub async fn close_stale_sessions(&mut self) -> anyhow::Result<()> {
        sqlx::query(
            "UPDATE sessions SET ended_at = ?, end_reason = 'interrupted' WHERE ended_at IS NULL",
        )
        .bind(now_rfc3339())
        .execute(&mut self.conn)
        .await?;
        Ok(())
    }

    /// Starts an outage of `source` unless one is already open (an outage survives a restart of the service).
    pub async fn outage_begin(&mut self, source: &str, reason: &str) -> anyhow::Result<()> {
        records::outage_begin(source, reason)
            .execute(&mut self.conn)
            .await
    }

    pub async fn outage_end(&mut self, source: &str) -> anyhow::Result<()> {
        records::outage_end(source).execute(&mut self.conn).await
    }

    /// Records a frame refused for its size on `session_id`.
    pub async fn refused_frame(
        &mut self,
        session_id: i64,
        received_at: &str,
        size: u64,
        limit: u64,
    ) -> anyhow::Result<()> {
        records::refused_frame(session_id, received_at, size, limit)
            .execute(&mut self.conn)
            .await
    }

    pub async fn add_counter(&mut self, name: &str, by: i64) -> anyhow::Result<()> {
        records::add_counter(name, by).execute(&mut self.conn).await
    }
}

/// [`Writer::recover`] inside the caller's archiving transaction, on either backend.
pub(crate) async fn recover_in<C: ReadContext + WriteConn>(
    conn: &mut C,
    items: &[Recovered],
) -> anyhow::Result<RecoverySummary> {
    let mut summary = RecoverySummary::default();
    let now = now_rfc3339();
    for item in items {
        let mut done = Statements::one("SELECT 1 AS done FROM reparses WHERE delivery_id = ?");
        done.bind(item.delivery_id);
        if !conn.rows(done, |_| ()).await?.is_empty() {
            continue;
        }
        let event_key = event_key(&item.source, &item.report.event_id);
        let context = conn
            .version_context(
                Statements::default(),
                &item.source,
                &item.identity,
                &event_key,
            )
            .await?;
        let mut statements = Statements::default();
        let (report_id, outcome) = match context.existing {
            Some(id) => {
                summary.duplicates += 1;
                (id, "duplicate")
            }
            None => {
                let id = context.next_id;
                let _ = store_version(
                    &mut statements,
                    &context,
                    &NewVersion {
                        id,
                        delivery_id: item.delivery_id,
                        event_key: &event_key,
                        source: &item.source,
                        identity: &item.identity,
                        report: &item.report,
                        received_at: &item.received_at,
                        decoder_name: &item.decoder_name,
                        decoder_sha256: &item.decoder_sha256,
                    },
                )?;
                summary.new_versions.push(id);
                (id, "new-version")
            }
        };
        statements
            .push(
                "INSERT INTO reparses (delivery_id, report_id, event_key, outcome, decoder, reparsed_at) \
                 VALUES (?, ?, ?, ?, ?, ?)",
            )
            .bind(item.delivery_id)
            .bind(report_id)
            .bind(event_key)
            .bind(outcome)
            .bind(format!("{}@{}", item.decoder_name, item.decoder_sha256))
            .bind(now.clone());
        conn.run(statements).await?;
    }
    Ok(summary)
}

/// Archives a batch of frames inside the caller's archiving transaction: their bytes, a delivery per unit, and
/// the new versions with their texts and events. Writes are added to `pending` (see [`archive_unit`]).
pub(crate) async fn archive_batch<C: ReadContext>(
    conn: &mut C,
    pending: &mut Statements,
    batch: &[Incoming],
    summary: &mut IngestSummary,
) -> anyhow::Result<()> {
    for incoming in batch {
        let raw_sha256 = hex::encode(Sha256::digest(&incoming.frame));
        pending
            .push(
                "INSERT INTO raw_payloads (sha256, bytes, size, first_seen_at) VALUES (?, ?, ?, ?) \
                 ON CONFLICT DO NOTHING",
            )
            .bind(raw_sha256.clone())
            .bind(incoming.frame.clone())
            .bind(incoming.frame.len() as i64)
            .bind(incoming.received_at.clone());
        for unit in &incoming.units {
            archive_unit(conn, pending, incoming, &raw_sha256, unit, summary).await?;
        }
    }
    Ok(())
}

/// Reads a unit's [`VersionContext`] inside the archiving transaction, each backend in its own SQL.
pub(crate) trait ReadContext {
    /// Runs `before` and then reads the context (on SQLite in one round trip).
    async fn version_context(
        &mut self,
        before: Statements,
        source: &str,
        identity: &str,
        event_key: &str,
    ) -> anyhow::Result<VersionContext>;
}

/// Archives one unit: what is still `pending` runs before its version's context is read, in the same round trip
/// (a unit without a version reads nothing); its own writes are added to `pending`.
async fn archive_unit<C: ReadContext>(
    conn: &mut C,
    pending: &mut Statements,
    incoming: &Incoming,
    raw_sha256: &str,
    unit: &UnitRecord,
    summary: &mut IngestSummary,
) -> anyhow::Result<()> {
    let delivery = |outcome: &'static str| Delivery {
        id: None,
        incoming,
        raw_sha256,
        unit,
        outcome,
        source: None,
        report_id: None,
        event_key: None,
        decoder: None,
        error_kind: None,
        error_message: None,
    };
    match &unit.kind {
        UnitKind::Ignored => {
            delivery("ignored").push(pending);
            summary.tally(unit, None, "ignored");
        }
        UnitKind::Unparsed {
            source,
            decoder,
            error_kind,
            message,
        } => {
            Delivery {
                source: source.clone(),
                decoder: decoder.clone(),
                error_kind: Some(error_kind.clone()),
                error_message: Some(message.clone()),
                ..delivery("unparsed")
            }
            .push(pending);
            summary.tally(unit, source.as_deref(), "unparsed");
        }
        UnitKind::Report {
            source,
            identity,
            report,
            decoder_name,
            decoder_sha256,
        } => {
            let event_key = event_key(source, &report.event_id);
            let context = conn
                .version_context(std::mem::take(pending), source, identity, &event_key)
                .await?;
            let (outcome, report_id) = match context.existing {
                Some(id) => ("duplicate", id),
                None => ("new-version", context.next_id),
            };
            Delivery {
                id: Some(context.next_delivery_id),
                source: Some(source.clone()),
                report_id: Some(report_id),
                event_key: Some(event_key.clone()),
                decoder: Some(format!("{decoder_name}@{decoder_sha256}")),
                ..delivery(outcome)
            }
            .push(pending);
            if context.existing.is_some() {
                summary.tally(unit, Some(source), "duplicate");
            } else {
                summary.tally(unit, Some(source), "archived");
                let served = store_version(
                    pending,
                    &context,
                    &NewVersion {
                        id: report_id,
                        delivery_id: context.next_delivery_id,
                        event_key: &event_key,
                        source,
                        identity,
                        report,
                        received_at: &incoming.received_at,
                        decoder_name,
                        decoder_sha256,
                    },
                )?;
                summary.new_versions.push(served);
            }
        }
    }
    Ok(())
}

/// A `deliveries` row: the frame's reception columns and what became of the unit.
struct Delivery<'a> {
    /// The row's id when it must be known before the insert (a new version's text names it); `None` lets
    /// SQLite choose.
    id: Option<i64>,
    incoming: &'a Incoming,
    raw_sha256: &'a str,
    unit: &'a UnitRecord,
    outcome: &'static str,
    source: Option<String>,
    report_id: Option<i64>,
    event_key: Option<String>,
    decoder: Option<String>,
    error_kind: Option<String>,
    error_message: Option<String>,
}

impl Delivery<'_> {
    fn push(self, statements: &mut Statements) {
        const COLUMNS: &str = "session_id, received_at, raw_sha256, unit_index, type_tag, source, marker, \
             outcome, report_id, event_key, decoder, error_kind, error_message";
        const VALUES: &str = "?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?";
        match self.id {
            Some(id) => statements
                .push(&format!(
                    "INSERT INTO deliveries (id, {COLUMNS}) VALUES (?, {VALUES})"
                ))
                .bind(id),
            None => statements.push(&format!(
                "INSERT INTO deliveries ({COLUMNS}) VALUES ({VALUES})"
            )),
        };
        statements
            .bind(self.incoming.session_id)
            .bind(self.incoming.received_at.clone())
            .bind(self.raw_sha256.to_string())
            .bind(self.unit.unit_index)
            .bind(self.unit.type_tag.clone())
            .bind(self.source)
            .bind(self.incoming.marker)
            .bind(self.outcome)
            .bind(self.report_id)
            .bind(self.event_key)
            .bind(self.decoder)
            .bind(self.error_kind)
            .bind(self.error_message);
    }
}

/// Stable event id: the first 16 bytes of SHA-256 of `<source>:<eventId>`, as 32 lowercase hex digits.
pub fn event_key(source: &str, event_id: &str) -> String {
    let digest = Sha256::digest(format!("{source}:{event_id}").as_bytes());
    hex::encode(&digest[..16])
}

/// A report version about to be stored.
struct NewVersion<'a> {
    id: i64,
    /// The delivery it came in (inserted just before it, or archived before for a recovery).
    delivery_id: i64,
    event_key: &'a str,
    source: &'a str,
    identity: &'a str,
    report: &'a Report,
    received_at: &'a str,
    decoder_name: &'a str,
    decoder_sha256: &'a str,
}

/// What the archive holds about a unit's version and its event, read in one query inside the write
/// transaction (so ids increase in commit order).
pub(crate) struct VersionContext {
    /// The version already archived with this identity in this channel, if any.
    existing: Option<i64>,
    /// The next cursor id.
    next_id: i64,
    /// The id the unit's `deliveries` row gets.
    next_delivery_id: i64,
    /// Revisions archived for the event so far.
    revisions: BTreeSet<i64>,
    /// The event's summary row, if the event is known.
    event: Option<EventRow>,
}

struct EventRow {
    latest_revision: i64,
    origin_at: Option<String>,
    sort_ms: i64,
    upstream_ids: String,
}

impl ReadContext for SqliteConnection {
    async fn version_context(
        &mut self,
        mut before: Statements,
        source: &str,
        identity: &str,
        event_key: &str,
    ) -> anyhow::Result<VersionContext> {
        let conn = self;
        before
            .push(
            &format!("SELECT (SELECT id FROM reports WHERE source = ? AND identity_sha256 = ?) AS existing, \
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
        Ok(VersionContext::from_row(&before.fetch_one(conn).await?))
    }
}

impl VersionContext {
    /// The context from the row of a backend's context query (`existing`, `next_id`, `next_delivery_id`,
    /// `revisions` as a comma-separated list, and the event's columns, `event_id` NULL when it is new).
    pub(crate) fn from_row<R>(row: &R) -> VersionContext
    where
        R: Row,
        &'static str: sqlx::ColumnIndex<R>,
        i64: sqlx::Type<R::Database> + for<'r> sqlx::Decode<'r, R::Database>,
        String: sqlx::Type<R::Database> + for<'r> sqlx::Decode<'r, R::Database>,
    {
        let list: Option<String> = row.get("revisions");
        let revisions = list
            .unwrap_or_default()
            .split(',')
            .filter_map(|r| r.parse().ok())
            .collect();
        let event = row.get::<Option<String>, _>("event_id").map(|_| EventRow {
            latest_revision: row.get("latest_revision"),
            origin_at: row.get("origin_at"),
            sort_ms: row.get("sort_ms"),
            upstream_ids: row.get("upstream_ids"),
        });
        VersionContext {
            existing: row.get("existing"),
            next_id: row.get("next_id"),
            next_delivery_id: row.get("next_delivery_id"),
            revisions,
            event,
        }
    }
}

/// Adds the version's insert, its served text's and its event's update to `statements`; returns the text.
fn store_version(
    statements: &mut Statements,
    context: &VersionContext,
    v: &NewVersion<'_>,
) -> anyhow::Result<ServedReport> {
    let row = ReportRow {
        id: v.id,
        event_key: v.event_key.to_string(),
        source: v.source.to_string(),
        received_at: v.received_at.to_string(),
        delivery_id: v.delivery_id,
        decoded: serde_json::to_string(v.report)?,
        decoder_name: v.decoder_name.to_string(),
        decoder_sha256: v.decoder_sha256.to_string(),
    };
    statements.push(
        "INSERT INTO reports (id, event_key, source, identity_sha256, delivery_id, received_at, event_id, upstream_event_id, \
         revision, issued_at, origin_at, epicenter, magnitude, report_json, decoder_name, decoder_sha256) \
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    );
    statements
        .bind(v.id)
        .bind(v.event_key.to_string())
        .bind(v.source.to_string())
        .bind(v.identity.to_string())
        .bind(v.delivery_id)
        .bind(v.received_at.to_string())
        .bind(v.report.event_id.clone())
        .bind(v.report.upstream_event_id.clone())
        .bind(v.report.revision)
        .bind(v.report.issued_at.clone())
        .bind(v.report.origin_at.clone())
        .bind(v.report.epicenter.clone())
        .bind(v.report.magnitude)
        .bind(row.decoded.clone())
        .bind(v.decoder_name.to_string())
        .bind(v.decoder_sha256.to_string());
    let served = ServedReport {
        id: v.id,
        source: v.source.to_string(),
        json: crate::served::served_json(&row).into(),
    };
    statements
        .push("INSERT INTO report_texts (id, source, json) VALUES (?, ?, ?)")
        .bind(v.id)
        .bind(v.source.to_string())
        .bind(served.json.to_string());
    upsert_event(statements, context, v)?;
    Ok(served)
}

/// Brings the event's summary row up to date with a newly archived version.
fn upsert_event(
    statements: &mut Statements,
    context: &VersionContext,
    v: &NewVersion<'_>,
) -> anyhow::Result<()> {
    let report = v.report;
    let mut revisions = context.revisions.clone();
    revisions.insert(report.revision);
    let top = revisions.last().copied().unwrap_or(report.revision);
    let missing: Vec<i64> = (1..=top.min(MISSING_REVISIONS_SCAN_LIMIT))
        .filter(|r| !revisions.contains(r))
        .collect();
    let missing = serde_json::to_string(&missing)?;
    match &context.event {
        None => {
            let origin_ms = report.origin_at.as_deref().and_then(parse_ms);
            let sort_ms = origin_ms.or_else(|| parse_ms(v.received_at)).unwrap_or(0);
            statements
                .push(
                    "INSERT INTO events (id, source, source_event_id, origin_at, origin_ms, sort_ms, month, latest_report_id, \
                     latest_revision, report_count, missing_revisions, epicenter, magnitude, upstream_ids, first_report_id, last_report_id) \
                     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?, ?)",
                )
                .bind(v.event_key.to_string())
                .bind(v.source.to_string())
                .bind(report.event_id.clone())
                .bind(report.origin_at.clone())
                .bind(origin_ms)
                .bind(sort_ms)
                .bind(beijing_month(sort_ms))
                .bind(v.id)
                .bind(report.revision)
                .bind(missing)
                .bind(report.epicenter.clone())
                .bind(report.magnitude)
                .bind(report.upstream_event_id.clone())
                .bind(v.id)
                .bind(v.id);
        }
        Some(event) => {
            let mut origin_at = event.origin_at.clone();
            let mut sort_ms = event.sort_ms;
            let mut upstream_ids = event.upstream_ids.clone();
            // The latest report is the highest revision; a new version of that revision supersedes the older one.
            let becomes_latest = report.revision >= event.latest_revision;
            if becomes_latest && report.origin_at.is_some()
                || origin_at.is_none() && report.origin_at.is_some()
            {
                origin_at = report.origin_at.clone();
                sort_ms = origin_at.as_deref().and_then(parse_ms).unwrap_or(sort_ms);
            }
            if !upstream_ids
                .split(' ')
                .any(|id| id == report.upstream_event_id)
            {
                upstream_ids.push(' ');
                upstream_ids.push_str(&report.upstream_event_id);
            }
            let origin_ms = origin_at.as_deref().and_then(parse_ms);
            statements
                .push(
                    "UPDATE events SET origin_at = ?, origin_ms = ?, sort_ms = ?, month = ?, report_count = report_count + 1, \
                     missing_revisions = ?, upstream_ids = ?, last_report_id = ?, \
                     latest_report_id = CASE WHEN ? THEN ? ELSE latest_report_id END, \
                     latest_revision = CASE WHEN ? THEN ? ELSE latest_revision END, \
                     epicenter = CASE WHEN ? THEN ? ELSE epicenter END, \
                     magnitude = CASE WHEN ? THEN ? ELSE magnitude END \
                     WHERE id = ?",
                )
                .bind(origin_at)
                .bind(origin_ms)
                .bind(sort_ms)
                .bind(beijing_month(sort_ms))
                .bind(missing)
                .bind(upstream_ids)
                .bind(v.id)
                .bind(becomes_latest)
                .bind(v.id)
                .bind(becomes_latest)
                .bind(report.revision)
                .bind(becomes_latest)
                .bind(report.epicenter.clone())
                .bind(becomes_latest)
                .bind(report.magnitude)
                .bind(v.event_key.to_string());
        }
    }
    Ok(())
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
pub(super) async fn begin<'c>(
    conn: &'c mut SqliteConnection,
    options: &SqliteConnectOptions,
) -> anyhow::Result<Transaction<'c, Sqlite>> {
    settle(conn, options).await?;
    Ok(conn.begin_with(WRITE_TRANSACTION).await?)
}

/// Makes `conn` fit for a new transaction. A commit through sqlx's `Transaction` that failed (a full disk:
/// SQLite has rolled the transaction back) leaves the connection counting a transaction that no longer exists,
/// and it would refuse every later one; such a connection is replaced by a new one from `options`. A round
/// trip to the connection's thread (~70 us), so an ingest skips it after a commit that succeeded.
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
