//! The archive's writer, on either database. Every insert happens through it, in transactions whose commit is
//! durable before the caller learns the new high-water mark (docs/design.md: commit, then publish). What a
//! write contains is decided once (`archiving.rs`, `records.rs`, `hyp.rs`, `components.rs`); how it is
//! committed is each backend's (`sqlite.rs`, `postgres/`).

use crate::archiving::{Incoming, IngestSummary, Recovered, RecoverySummary};
use crate::codes::{Code, OutageReason};
use crate::components::{ComponentChange, component_change};
use crate::error::WriteError;
use crate::hyp::{self, HypReportInput, StationMetric};
use crate::postgres::PgWriter;
use crate::records;
use crate::sqlite::SqliteWriter;
use crate::statements::Statements;
use osds_time::now_rfc3339;

/// The archive's writer: one per process that writes, on SQLite the only one.
pub struct Writer {
    backend: Backend,
    /// The session id the next upstream connection gets (see [`Writer::next_session_id`]).
    next_session_id: i64,
    high_water: i64,
}

pub(crate) enum Backend {
    // (Boxed: a SQLite connection is held inline, a PostgreSQL one is not.)
    Sqlite(Box<SqliteWriter>),
    Postgres(PgWriter),
}

/// Runs the same call on whichever backend the writer has. On PostgreSQL a call that fails has the next one
/// connect again first (a server restart or a network cut must not wedge the writer).
macro_rules! on_backend {
    ($writer:expr, $backend:ident => $call:expr) => {
        match &mut $writer.backend {
            Backend::Sqlite($backend) => $call.map_err(WriteError::from),
            Backend::Postgres($backend) => {
                $backend.ready().await?;
                let result = $call.map_err(WriteError::from);
                if let Err(error) = &result {
                    $backend.failed(error.connection_lost());
                }
                result
            }
        }
    };
}

impl Writer {
    pub(crate) async fn new(mut backend: Backend) -> anyhow::Result<Writer> {
        let (high_water, next_session_id) = match &mut backend {
            Backend::Sqlite(b) => (b.horizon().await?, b.first_session_id().await?),
            Backend::Postgres(b) => (b.horizon().await?, 0),
        };
        Ok(Writer {
            backend,
            next_session_id,
            high_water,
        })
    }

    /// On PostgreSQL, makes this the writer of ingester `name` (see [`PgWriter::register`]): only an
    /// ingester's writer records upstream sessions. On SQLite the one writer is the ingester already.
    pub async fn register_ingester(&mut self, name: &str) -> anyhow::Result<()> {
        if let Backend::Postgres(b) = &mut self.backend {
            self.next_session_id = b.register(name).await?;
        }
        Ok(())
    }

    /// On PostgreSQL, makes this the writer of the one detector of all processes that share the archive (a
    /// second is refused). On SQLite the one service is.
    pub async fn claim_detector(&mut self) -> anyhow::Result<()> {
        if let Backend::Postgres(b) = &mut self.backend {
            b.claim_detector().await?;
        }
        Ok(())
    }

    /// The ingester's name on PostgreSQL (`None` on SQLite, and for a writer of no ingester).
    pub fn ingester(&self) -> Option<&str> {
        match &self.backend {
            Backend::Sqlite(_) => None,
            Backend::Postgres(b) => b.ingester(),
        }
    }

    /// A session id for a new upstream connection, handed out at once (the row is written with
    /// [`Writer::open_session_with_id`], in order before anything that names it): a connection never waits
    /// for the archive to accept its frames.
    pub fn next_session_id(&mut self) -> i64 {
        let id = self.next_session_id;
        self.next_session_id += 1;
        id
    }

    /// Whether an ingest blocks the calling thread until it is durable (SQLite's: see `sqlite_ingest.rs`);
    /// PostgreSQL's awaits its connection's socket.
    pub(crate) fn ingest_blocks(&self) -> bool {
        matches!(self.backend, Backend::Sqlite(_))
    }

    /// The highest report id this writer knows committed (its own commits and what it read).
    pub fn high_water(&self) -> i64 {
        self.high_water
    }

    /// After a backup was restored into this archive: a new identity, and report ids above `floor` from now
    /// on (every id the replaced archive can have handed out). Returns the new `archiveId`.
    pub async fn mark_restored(&mut self, floor: i64) -> anyhow::Result<String> {
        let Backend::Sqlite(b) = &mut self.backend else {
            anyhow::bail!("`osds restore` restores SQLite archives only");
        };
        let archive_id = b.mark_restored(floor).await?;
        self.high_water = self.high_water.max(floor);
        Ok(archive_id)
    }

    /// Closes the writer; on SQLite every commit is in the database file afterwards (no WAL left).
    pub async fn close(self) -> anyhow::Result<()> {
        match self.backend {
            Backend::Sqlite(b) => b.close().await,
            Backend::Postgres(b) => b.close().await,
        }
    }

    /// Archives a batch of frames in one durable transaction (group commit).
    pub async fn ingest(&mut self, batch: &[Incoming]) -> Result<IngestSummary, WriteError> {
        let summary = on_backend!(self, b => b.ingest(batch).await)?;
        if let Some(last) = summary.new_versions.last().map(|v| v.id.0) {
            self.high_water = self.high_water.max(last);
        }
        Ok(IngestSummary {
            high_water: self.high_water,
            ..summary
        })
    }

    /// Appends the versions recovered from unparsed deliveries in one durable transaction. The deliveries
    /// themselves are never touched; each recovery is a `reparses` row. A delivery recovered before is skipped.
    pub async fn recover(&mut self, items: &[Recovered]) -> Result<RecoverySummary, WriteError> {
        let summary = on_backend!(self, b => b.recover(items).await)?;
        if let Some(&last) = summary.new_versions.last() {
            self.high_water = self.high_water.max(last);
        }
        Ok(summary)
    }

    /// Re-reads the highest report id: another process (`osds reparse`, another ingester) may have appended
    /// versions. Returns the new horizon when it moved.
    pub async fn refresh_high_water(&mut self) -> Result<Option<i64>, WriteError> {
        let current = on_backend!(self, b => b.horizon().await)?;
        if current > self.high_water {
            self.high_water = current;
            return Ok(Some(current));
        }
        Ok(None)
    }

    pub async fn open_session(
        &mut self,
        path: &str,
        role: crate::SocketRole,
        url: &str,
    ) -> Result<i64, WriteError> {
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
        role: crate::SocketRole,
        url: &str,
        started_at: &str,
    ) -> Result<(), WriteError> {
        let ingester = match &self.backend {
            Backend::Sqlite(_) => None,
            Backend::Postgres(b) => Some(b.registered()?.to_owned()),
        };
        let statement = records::open_session(
            id,
            ingester.as_deref(),
            path,
            role.as_str(),
            url,
            started_at,
        );
        self.run(statement).await.map(drop)
    }

    pub async fn session_connected(&mut self, id: i64) -> Result<(), WriteError> {
        self.run(records::session_connected(id)).await.map(drop)
    }

    pub async fn session_ended(
        &mut self,
        id: i64,
        reason: crate::EndReason,
    ) -> Result<(), WriteError> {
        self.run(records::session_ended(id, reason.as_str()))
            .await
            .map(drop)
    }

    /// After a previous run of this ingester stopped without closing its sessions (it was killed): ends them
    /// at `alive_at`, the last moment it was known alive (see [`crate::Store::last_alive`]; now when it is not
    /// known), and on SQLite begins the outage of each channel in `held` (source, when it was last known held)
    /// there: the time the service was down is an outage, ended when a socket of the channel connects again.
    /// (On PostgreSQL the channels a killed ingester held are found by `stale_holders`.)
    pub async fn close_stale_sessions(
        &mut self,
        alive_at: Option<&str>,
        held: &[(String, String)],
    ) -> Result<(), WriteError> {
        let ingester = match &self.backend {
            Backend::Sqlite(_) => None,
            // A writer of no ingester (an API replica's) has no sessions of its own.
            Backend::Postgres(b) => match b.ingester() {
                Some(name) => Some(name.to_owned()),
                None => return Ok(()),
            },
        };
        let mut statements = records::close_stale_sessions(ingester.as_deref(), alive_at);
        if let Backend::Sqlite(_) = &self.backend {
            for (source, at) in held {
                statements.extend(records::outage_begin_at(
                    source,
                    &OutageReason::StoppedUnexpectedly.to_string(),
                    at,
                ));
            }
        }
        on_backend!(self, b => b.in_transaction(statements).await)
    }

    /// Records that this ingester is alive now (the archive task does, every few seconds); a writer of no
    /// ingester does nothing.
    pub async fn mark_alive(&mut self) -> Result<(), WriteError> {
        let name = match &self.backend {
            Backend::Sqlite(_) => String::new(),
            Backend::Postgres(b) => match b.ingester() {
                Some(name) => name.to_owned(),
                None => return Ok(()),
            },
        };
        self.run(records::mark_alive(&name)).await.map(drop)
    }

    /// This process lost `source`: its outage starts unless one is already open (an outage survives a restart
    /// of the service) or, on PostgreSQL, another running ingester still has the channel.
    pub async fn outage_begin(
        &mut self,
        source: &str,
        reason: &OutageReason,
    ) -> Result<(), WriteError> {
        let reason = reason.to_string();
        on_backend!(self, b => b.outage_begin(source, &reason).await)
    }

    /// This process has `source` again: its outage, if any, ends.
    pub async fn outage_end(&mut self, source: &str) -> Result<(), WriteError> {
        on_backend!(self, b => b.outage_end(source).await)
    }

    /// On PostgreSQL, records the outages of channels whose only ingesters were killed (nothing to do on
    /// SQLite, whose one ingester records its own at its next start).
    pub async fn check_outages(&mut self) -> Result<(), WriteError> {
        on_backend!(self, b => b.check_outages().await)
    }

    /// Records a frame refused for its size on `session_id`.
    pub async fn refused_frame(
        &mut self,
        session_id: i64,
        received_at: &str,
        size: u64,
        limit: u64,
    ) -> Result<(), WriteError> {
        self.run(records::refused_frame(session_id, received_at, size, limit))
            .await
            .map(drop)
    }

    pub async fn add_counter(&mut self, name: &str, by: i64) -> Result<(), WriteError> {
        self.run(records::add_counter(name, by)).await.map(drop)
    }

    /// Appends one hyp report in a durable transaction. Report numbers run from 1 without gaps; a number that
    /// is taken, or that skips one, is refused (reports are never replaced).
    pub async fn append_hyp_report(
        &mut self,
        input: &HypReportInput,
    ) -> Result<String, WriteError> {
        on_backend!(self, b => b.append_hyp_report(input).await)
    }

    /// Adds station peaks recovered later from the image archive to an event (reports are never touched).
    /// Returns how many peaks were added or raised; an unknown event is an error.
    pub async fn add_hyp_station_metrics(
        &mut self,
        event_id: &str,
        metrics: &[StationMetric],
    ) -> Result<u64, WriteError> {
        on_backend!(self, b => b.add_hyp_station_metrics(event_id, metrics).await)
    }

    /// Withdraws a hyp event from the public API (or brings it back). Returns false when there is no such
    /// event.
    pub async fn set_hyp_hidden(
        &mut self,
        event_id: &str,
        hidden: bool,
    ) -> Result<bool, WriteError> {
        Ok(self.run(hyp::set_hidden(event_id, hidden)).await? > 0)
    }

    /// Records the latest state of the detector or the recorder.
    pub async fn set_hyp_state(
        &mut self,
        name: &str,
        at: i64,
        state: &serde_json::Value,
    ) -> Result<(), WriteError> {
        self.run(hyp::set_state(name, at, state)).await.map(drop)
    }

    /// Records that `change.channel` is now decoded by the component with SHA-256 `change.sha256` since
    /// `change.changed_at`. Its bytes, for an installed component, are stored once per SHA-256 (a rollback
    /// names a component stored before, or a built-in one).
    pub async fn record_component(&mut self, change: &ComponentChange) -> Result<(), WriteError> {
        let statements = component_change(change)?;
        on_backend!(self, b => b.in_transaction(statements).await)
    }

    /// Runs `statements` on their own (each commits by itself); returns the rows they changed.
    async fn run(&mut self, statements: Statements) -> Result<u64, WriteError> {
        on_backend!(self, b => b.run(statements).await)
    }
}
