//! The writer task: owns the [`Writer`], commits frames in groups (one durable commit for whatever queued up
//! meanwhile), and only after a commit publishes the new high-water mark to live subscribers.

use crate::archiving::{Incoming, IngestSummary};
use crate::codes::OutageReason;
use crate::components::ComponentChange;
use crate::error::{FailureCode, WriteError};
use crate::ids::raise_horizon;
use crate::rows::ServedReport;
use crate::writer::Writer;
use anyhow::Context;
use osds_time::now_rfc3339;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, watch};

/// Frames committed together at most.
const GROUP_COMMIT_MAX: usize = 512;
/// How often the horizon is re-read for versions appended by another process.
const HORIZON_CHECK: Duration = Duration::from_secs(1);
/// How often the task records that the process is alive: after a crash, the outage of the channels it held
/// begins at most this long before the process died.
const ALIVE_EVERY: Duration = Duration::from_secs(5);
/// The first wait after a failed write; it doubles up to [`RETRY_CAP`].
const FIRST_RETRY: Duration = Duration::from_millis(100);
const RETRY_CAP: Duration = Duration::from_secs(5);
/// Received frames that may wait for the archive when no size is configured.
pub const DEFAULT_QUEUE_BYTES: usize = 256 << 20;

enum Command {
    Ingest(Box<Incoming>),
    Write(Write),
    Flush(oneshot::Sender<()>),
    Close(oneshot::Sender<anyhow::Result<()>>),
    RecordComponent {
        change: ComponentChange,
        reply: oneshot::Sender<anyhow::Result<()>>,
    },
}

/// A write the task retries until the archive takes it.
enum Write {
    Batch(Vec<Incoming>),
    OpenSession {
        id: i64,
        path: String,
        role: crate::SocketRole,
        url: String,
        started_at: String,
    },
    SessionConnected(i64),
    /// This process is alive (see [`Writer::mark_alive`]).
    Alive,
    SessionEnded(i64, crate::EndReason),
    OutageBegin(String, OutageReason),
    OutageEnd(String),
    Counter(&'static str, i64),
    RefusedFrame {
        session_id: i64,
        received_at: String,
        size: u64,
        limit: u64,
    },
}

impl Write {
    fn what(&self) -> &'static str {
        match self {
            Write::Batch(_) => "archiving frames",
            Write::OpenSession { .. } => "recording a session",
            Write::SessionConnected(_) => "recording a connect",
            Write::Alive => "recording that the service is alive",
            Write::SessionEnded(..) => "recording a disconnect",
            Write::OutageBegin(..) => "recording an outage",
            Write::OutageEnd(_) => "ending an outage",
            Write::Counter(..) => "counting",
            Write::RefusedFrame { .. } => "recording a refused frame",
        }
    }

    /// Writes it once; a batch tells what it archived.
    async fn apply(&self, writer: &mut Writer) -> Result<Option<IngestSummary>, WriteError> {
        match self {
            Write::Batch(batch) => return writer.ingest(batch).await.map(Some),
            Write::OpenSession {
                id,
                path,
                role,
                url,
                started_at,
            } => {
                writer
                    .open_session_with_id(*id, path, *role, url, started_at)
                    .await?
            }
            Write::SessionConnected(id) => writer.session_connected(*id).await?,
            Write::Alive => writer.mark_alive().await?,
            Write::SessionEnded(id, reason) => writer.session_ended(*id, *reason).await?,
            Write::OutageBegin(source, reason) => writer.outage_begin(source, reason).await?,
            Write::OutageEnd(source) => writer.outage_end(source).await?,
            Write::Counter(name, by) => writer.add_counter(name, *by).await?,
            Write::RefusedFrame {
                session_id,
                received_at,
                size,
                limit,
            } => {
                writer
                    .refused_frame(*session_id, received_at, *size, *limit)
                    .await?
            }
        }
        Ok(None)
    }
}

/// Called by the archive task with each commit's new versions (consecutive ids, with their served texts) before
/// the commit's horizon is published, so the live ring can take them without reading them back.
pub type CommitHook = Arc<dyn Fn(&[ServedReport]) + Send + Sync>;

/// Sends work to the archive task. Cheap to clone.
///
/// Nothing that sends waits for the archive: while it cannot write (a full disk), every command waits in
/// order, received frames up to a size limit; a frame beyond it is dropped and counted for its channel.
#[derive(Clone)]
pub struct WriterTask {
    commands: mpsc::UnboundedSender<Command>,
    high_water: watch::Receiver<i64>,
    state: Arc<Mutex<WriteHealth>>,
    next_session_id: Arc<AtomicI64>,
}

/// Why the archive cannot write at the moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteFailure {
    pub code: FailureCode,
    /// When writes began to fail (RFC 3339).
    pub since: String,
    /// Failed attempts so far.
    pub attempts: u64,
}

/// What the archive task has not written yet, and why (`/status` shows it).
#[derive(Debug, Clone)]
pub struct WriteHealth {
    pub failure: Option<WriteFailure>,
    pub queued_frames: usize,
    pub queued_bytes: usize,
    pub limit_bytes: usize,
    /// Frames dropped because the queue was full, per channel (`unrouted` for a frame of none).
    pub dropped: BTreeMap<String, u64>,
}

/// A read-only view of the archive task's [`WriteHealth`]. Cheap to clone.
#[derive(Clone)]
pub struct WriteMonitor(Arc<Mutex<WriteHealth>>);

impl WriteMonitor {
    pub fn health(&self) -> WriteHealth {
        lock(&self.0).clone()
    }
}

impl WriterTask {
    /// Starts the archive task over `writer`; up to `queue_bytes` of received frames wait while it cannot
    /// write. `on_commit` is handed each commit's new versions before their horizon is published. `followed`
    /// is the horizon of commits made by other processes (see `postgres::watch_horizon`), published as it
    /// moves; without it they are found by reading the horizon every second.
    ///
    /// On SQLite the task runs on a thread of its own, in a runtime of its own: a commit blocks it (see
    /// `sqlite_ingest.rs`), and a report reaches the live hub with one thread wake-up from there. On PostgreSQL
    /// it stays on the caller's runtime, whose I/O driver serves its connection's socket.
    pub fn spawn(
        mut writer: Writer,
        queue_bytes: usize,
        on_commit: Option<CommitHook>,
        followed: Option<watch::Receiver<i64>>,
    ) -> anyhow::Result<WriterTask> {
        let (commands, receiver) = mpsc::unbounded_channel();
        let (high_water_tx, high_water) = watch::channel(writer.high_water());
        let next_session_id = Arc::new(AtomicI64::new(writer.next_session_id()));
        let state = Arc::new(Mutex::new(WriteHealth {
            limit_bytes: queue_bytes,
            queued_frames: 0,
            queued_bytes: 0,
            dropped: BTreeMap::new(),
            failure: None,
        }));
        let blocks = writer.ingest_blocks();
        let task = run(
            writer,
            receiver,
            high_water_tx,
            state.clone(),
            on_commit,
            followed,
        );
        if blocks {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .context("start the archive task's runtime")?;
            std::thread::Builder::new()
                .name("osds-archive".into())
                .spawn(move || runtime.block_on(task))
                .context("start the archive task's thread")?;
        } else {
            tokio::spawn(task);
        }
        Ok(WriterTask {
            commands,
            high_water,
            state,
            next_session_id,
        })
    }

    /// Reads whether the archive writes and what waits for it (for `/status`).
    pub fn monitor(&self) -> WriteMonitor {
        WriteMonitor(self.state.clone())
    }

    /// The commit horizon: every report id at or below it is durably committed. Changes after each commit.
    pub fn high_water(&self) -> watch::Receiver<i64> {
        self.high_water.clone()
    }

    /// Queues a received frame for the archive. One that does not fit in the queue is dropped, counted for its
    /// channel and logged.
    pub fn ingest(&self, incoming: Incoming) {
        let size = incoming.frame.len();
        {
            let mut state = lock(&self.state);
            if state.queued_bytes > 0 && state.queued_bytes + size > state.limit_bytes {
                let source = incoming.source().unwrap_or("unrouted").to_string();
                let queued_bytes = state.queued_bytes;
                let dropped = state.dropped.entry(source.clone()).or_default();
                *dropped += 1;
                metrics::counter!("osds_ingest_dropped_frames_total", "source" => source.clone())
                    .increment(1);
                tracing::error!(
                    %source,
                    bytes = size,
                    dropped = *dropped,
                    queued_bytes,
                    "the archive cannot keep up and the ingest queue is full: a received frame is dropped"
                );
                return;
            }
            state.queued_frames += 1;
            state.queued_bytes += size;
        }
        self.send(Command::Ingest(Box::new(incoming)));
    }

    /// A session id for a new upstream connection, at once; its record is written in order before any frame
    /// sent after it.
    pub fn open_session(&self, path: &str, role: crate::SocketRole, url: &str) -> i64 {
        let id = self.next_session_id.fetch_add(1, Ordering::Relaxed);
        self.send(Command::Write(Write::OpenSession {
            id,
            path: path.into(),
            role,
            url: url.into(),
            started_at: now_rfc3339(),
        }));
        id
    }

    pub fn session_connected(&self, id: i64) {
        self.send(Command::Write(Write::SessionConnected(id)));
    }

    pub fn session_ended(&self, id: i64, reason: crate::EndReason) {
        self.send(Command::Write(Write::SessionEnded(id, reason)));
    }

    pub fn outage_begin(&self, source: &str, reason: OutageReason) {
        self.send(Command::Write(Write::OutageBegin(source.into(), reason)));
    }

    pub fn outage_end(&self, source: &str) {
        self.send(Command::Write(Write::OutageEnd(source.into())));
    }

    pub fn count(&self, name: &'static str, by: i64) {
        self.send(Command::Write(Write::Counter(name, by)));
    }

    /// Records a frame of `size` bytes refused on `session_id` (over `limit`).
    pub fn refused_frame(&self, session_id: i64, size: u64, limit: u64) {
        self.send(Command::Write(Write::RefusedFrame {
            session_id,
            received_at: now_rfc3339(),
            size,
            limit,
        }));
    }

    /// Waits until everything sent before is committed.
    pub async fn flush(&self) {
        self.ask(Command::Flush).await;
    }

    /// Records a decoder change durably (after everything sent before).
    pub async fn record_component(&self, change: ComponentChange) -> anyhow::Result<()> {
        self.ask(|reply| Command::RecordComponent { change, reply })
            .await
            .unwrap_or_else(|| Err(anyhow::anyhow!("the archive task has stopped")))
    }

    /// Commits everything sent before, then closes the archive (see [`Writer::close`]): the task ends, and
    /// commands sent later are not executed.
    pub async fn close(&self) -> anyhow::Result<()> {
        self.ask(Command::Close)
            .await
            .unwrap_or_else(|| Err(anyhow::anyhow!("the archive task had already stopped")))
    }

    /// Sends a command that replies, and waits for the reply (`None` when the task is gone).
    async fn ask<T>(&self, command: impl FnOnce(oneshot::Sender<T>) -> Command) -> Option<T> {
        let (reply, answer) = oneshot::channel();
        self.send(command(reply));
        answer.await.ok()
    }

    fn send(&self, command: Command) {
        if self.commands.send(command).is_err() {
            tracing::error!("archive task has stopped; a command was not executed");
        }
    }
}

async fn run(
    mut writer: Writer,
    mut receiver: mpsc::UnboundedReceiver<Command>,
    high_water: watch::Sender<i64>,
    state: Arc<Mutex<WriteHealth>>,
    on_commit: Option<CommitHook>,
    mut followed: Option<watch::Receiver<i64>>,
) {
    let mut pending: Option<Command> = None;
    let mut horizon_check = tokio::time::interval(HORIZON_CHECK);
    horizon_check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut alive = tokio::time::interval(ALIVE_EVERY);
    alive.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let command = match pending.take() {
            Some(command) => command,
            None => tokio::select! {
                command = receiver.recv() => match command {
                    Some(command) => command,
                    None => break,
                },
                _ = horizon_check.tick() => {
                    // Another process (`osds reparse`) may have appended versions: announce them too.
                    match writer.refresh_high_water().await {
                        Ok(Some(moved)) => raise_horizon(&high_water, moved),
                        Ok(None) => {}
                        Err(e) => tracing::warn!(error = %format!("{e:#}"), "reading the archive horizon failed"),
                    }
                    // Another ingester may have been killed holding a channel only it had.
                    if let Err(e) = writer.check_outages().await {
                        tracing::warn!(error = %format!("{e:#}"), "checking the channels of stopped ingesters failed");
                    }
                    continue;
                }
                _ = alive.tick() => Command::Write(Write::Alive),
                horizon = followed_change(&mut followed) => {
                    raise_horizon(&high_water, horizon);
                    continue;
                }
            },
        };
        match command {
            Command::Ingest(first) => {
                let mut batch = vec![*first];
                while batch.len() < GROUP_COMMIT_MAX {
                    match receiver.try_recv() {
                        Ok(Command::Ingest(next)) => batch.push(*next),
                        Ok(other) => {
                            pending = Some(other);
                            break;
                        }
                        Err(_) => break,
                    }
                }
                let size: usize = batch.iter().map(|i| i.frame.len()).sum();
                let count = batch.len();
                if let Some(summary) = archive(&mut writer, &state, batch).await {
                    for ((source, outcome), units) in &summary.units {
                        metrics::counter!("osds_ingest_units_total", "source" => source.clone(), "outcome" => outcome.metric_label())
                            .increment(*units);
                    }
                    if let (Some(first), Some(last)) =
                        (summary.new_versions.first(), summary.new_versions.last())
                    {
                        tracing::debug!(
                            first = first.id.0,
                            last = last.id.0,
                            "committed new report versions"
                        );
                        metrics::gauge!("osds_archive_last_commit_timestamp_seconds")
                            .set(osds_time::now_ms() as f64 / 1000.0);
                        if let Some(hook) = &on_commit {
                            hook(&summary.new_versions);
                        }
                        raise_horizon(&high_water, summary.high_water);
                    }
                }
                let mut state = lock(&state);
                state.queued_frames -= count;
                state.queued_bytes -= size;
            }
            Command::Write(write) => {
                // Nothing in these is a frame's: a refusal is retried like any failure.
                let _ = persist(&mut writer, &state, &write, false).await;
            }
            Command::Flush(reply) => {
                let _ = reply.send(());
            }
            Command::RecordComponent { change, reply } => {
                // The operator waits for the answer: a failure is theirs to see, not to be retried here.
                let recorded = writer.record_component(&change).await.map_err(Into::into);
                let _ = reply.send(recorded);
            }
            Command::Close(reply) => {
                let _ = reply.send(writer.close().await);
                return;
            }
        }
    }
}

/// The next horizon `followed` moves to; never, without one (or once it has ended).
async fn followed_change(followed: &mut Option<watch::Receiver<i64>>) -> i64 {
    let Some(receiver) = followed.as_mut() else {
        return std::future::pending().await;
    };
    if receiver.changed().await.is_err() {
        *followed = None;
        return std::future::pending().await;
    }
    *receiver.borrow_and_update()
}

/// Archives `batch`. When the database refuses the data of the group commit ([`FailureCode::RefusedData`]),
/// its frames are archived one by one, in order, and a frame refused on its own is archived as unstorable
/// (its bytes, its reception and why: see [`Incoming::unstorable`]): one frame never stops the others, and is
/// never retried for ever. Any other failure is retried until the archive takes the write.
async fn archive(
    writer: &mut Writer,
    state: &Mutex<WriteHealth>,
    batch: Vec<Incoming>,
) -> Option<IngestSummary> {
    let write = Write::Batch(batch);
    let refused = match persist(writer, state, &write, true).await {
        Ok(summary) => return summary,
        Err(refused) => refused,
    };
    let Write::Batch(batch) = write else {
        unreachable!("a batch was written")
    };
    let mut total: Option<IngestSummary> = None;
    let alone = batch.len() == 1;
    for frame in batch {
        let write = Write::Batch(vec![frame]);
        let refused = if alone {
            format!("{refused:#}")
        } else {
            match persist(writer, state, &write, true).await {
                Ok(done) => {
                    add(&mut total, done);
                    continue;
                }
                Err(e) => format!("{e:#}"),
            }
        };
        let Write::Batch(mut frames) = write else {
            unreachable!("a frame was written")
        };
        let frame = frames.remove(0);
        tracing::error!(
            session_id = frame.session_id,
            received_at = %frame.received_at,
            bytes = frame.frame.len(),
            source = frame.source().unwrap_or("unrouted"),
            reason = %refused,
            "the database refused a frame's decoded data: it is archived as unstorable (bytes and reception kept)"
        );
        let kept = Write::Batch(vec![frame.unstorable(format!(
            "the database refused what was decoded from it: {refused}"
        ))]);
        match persist(writer, state, &kept, true).await {
            Ok(done) => add(&mut total, done),
            Err(e) => {
                let Write::Batch(frames) = kept else {
                    unreachable!("a frame was written")
                };
                drop_refused(state, &frames[0], &e);
            }
        }
    }
    total
}

fn add(total: &mut Option<IngestSummary>, done: Option<IngestSummary>) {
    match (total.as_mut(), done) {
        (Some(total), Some(done)) => total.merge(done),
        (None, done) => *total = done,
        (Some(_), None) => {}
    }
}

/// A frame the database refused even as bytes alone: it cannot be kept, and is counted as dropped.
fn drop_refused(state: &Mutex<WriteHealth>, frame: &Incoming, error: &WriteError) {
    let source = frame.source().unwrap_or("unrouted").to_string();
    *lock(state).dropped.entry(source.clone()).or_default() += 1;
    metrics::counter!("osds_ingest_dropped_frames_total", "source" => source.clone()).increment(1);
    tracing::error!(
        %source,
        bytes = frame.frame.len(),
        error = %format!("{error:#}"),
        "the database refused even the bytes of a received frame: it is dropped"
    );
}

/// Runs `write` until the archive takes it, waiting longer after each failure (up to [`RETRY_CAP`]): nothing
/// is dropped because a write failed. Meanwhile the failure is shown in the task's state; the first success
/// clears it. With `frame_tied`, a refusal of the write's data ([`FailureCode::RefusedData`]) is returned at
/// once instead: retrying the same data cannot help.
async fn persist(
    writer: &mut Writer,
    state: &Mutex<WriteHealth>,
    write: &Write,
    frame_tied: bool,
) -> Result<Option<IngestSummary>, WriteError> {
    let mut delay = FIRST_RETRY;
    loop {
        let started = std::time::Instant::now();
        match write.apply(writer).await {
            Ok(done) => {
                if let Write::Batch(_) = write {
                    metrics::histogram!("osds_commit_duration_seconds")
                        .record(started.elapsed().as_secs_f64());
                }
                if let Some(failure) = lock(state).failure.take() {
                    tracing::warn!(
                        code = %failure.code,
                        since = %failure.since,
                        attempts = failure.attempts,
                        "the archive writes again"
                    );
                }
                return Ok(done);
            }
            Err(e) => {
                let code = e.kind();
                if frame_tied && code == FailureCode::RefusedData {
                    return Err(e);
                }
                let attempts = {
                    let mut state = lock(state);
                    let failure = state.failure.get_or_insert_with(|| WriteFailure {
                        code,
                        since: now_rfc3339(),
                        attempts: 0,
                    });
                    failure.code = code;
                    failure.attempts += 1;
                    failure.attempts
                };
                tracing::error!(
                    error = %format!("{e:#}"),
                    %code,
                    attempts,
                    retry_in = ?delay,
                    "{} failed; retrying (received frames wait in the ingest queue)",
                    write.what()
                );
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(RETRY_CAP);
            }
        }
    }
}

fn lock(state: &Mutex<WriteHealth>) -> std::sync::MutexGuard<'_, WriteHealth> {
    state.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_archive::frames;
    use crate::test_postgres::Cluster;

    /// Archives three frames through the archive task on `url`, after `refuse` (SQL that makes the database
    /// refuse the second frame's report as bad data, as a trigger can stand for any such refusal); returns the
    /// deliveries' (outcome, error kind, report id) and the task's health.
    async fn archive_around_a_refused_frame(
        url: &str,
        refuse: &[&str],
    ) -> (Vec<(String, Option<String>, Option<i64>)>, WriteHealth) {
        let (store, mut writer) = crate::open(url).await.unwrap();
        writer.register_ingester("poison").await.unwrap();
        let task = WriterTask::spawn(writer, DEFAULT_QUEUE_BYTES, None, None).unwrap();
        let session = task.open_session(
            "/cq_eew",
            crate::SocketRole::Primary,
            "ws://relay.invalid/cq_eew",
        );
        task.flush().await;
        for sql in refuse {
            use sqlx::Connection;
            if crate::is_postgres_url(url) {
                let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
                sqlx::raw_sql(sql).execute(&mut conn).await.unwrap();
            } else {
                let mut conn = sqlx::SqliteConnection::connect(url).await.unwrap();
                sqlx::raw_sql(sql).execute(&mut conn).await.unwrap();
            }
        }
        // Events 10, 11 and 12, one frame each (ids 30, 33, 36); the second is refused. Whether the three go in
        // one commit or several, the outcome is the same.
        let sent: Vec<Incoming> = frames(session, 30..=36).into_iter().step_by(3).collect();
        for frame in sent {
            task.ingest(frame);
        }
        task.flush().await;
        let health = task.monitor().health();
        let query = crate::statements::Statements::one(
            "SELECT outcome, error_kind, report_id FROM deliveries ORDER BY id",
        );
        let rows = store
            .db
            .rows(query, |r| {
                (
                    r.text("outcome"),
                    r.opt_text("error_kind"),
                    r.opt_int("report_id"),
                )
            })
            .await
            .unwrap();
        task.close().await.unwrap();
        (rows, health)
    }

    fn expected() -> Vec<(String, Option<String>, Option<i64>)> {
        vec![
            ("new-version".into(), None, Some(1)),
            (
                "unparsed".into(),
                Some(crate::archiving::UNSTORABLE.into()),
                None,
            ),
            ("new-version".into(), None, Some(2)),
        ]
    }

    #[tokio::test]
    async fn a_frame_sqlite_refuses_is_kept_as_unstorable_and_the_others_are_archived() {
        let dir = std::env::temp_dir().join(format!(
            "osds-poison-{}-{}",
            std::process::id(),
            osds_time::now_ms()
        ));
        let (rows, health) = archive_around_a_refused_frame(
            &format!("sqlite://{}/osds.db", dir.display()),
            &[
                "CREATE TRIGGER poison BEFORE INSERT ON reports WHEN NEW.event_id = 'cq:11' \
               BEGIN SELECT RAISE(ABORT, 'poisoned'); END",
            ],
        )
        .await;
        assert_eq!(rows, expected());
        assert_eq!(health.failure, None);
        assert!(health.dropped.is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn a_frame_postgres_refuses_is_kept_as_unstorable_and_the_others_are_archived() {
        let cluster = Cluster::start("poison");
        let url = cluster.database("osds").await;
        let (rows, health) = archive_around_a_refused_frame(
            &url,
            &[
                "CREATE FUNCTION poison() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
                 IF NEW.event_id = 'cq:11' THEN RAISE EXCEPTION 'poisoned' USING ERRCODE = '22000'; END IF; \
                 RETURN NEW; END $$",
                "CREATE TRIGGER poison BEFORE INSERT ON reports FOR EACH ROW EXECUTE FUNCTION poison()",
            ],
        )
        .await;
        assert_eq!(rows, expected());
        assert_eq!(health.failure, None);
        assert!(health.dropped.is_empty());
    }

    /// A group commit retried after its acknowledgement was lost (it had committed) records no reception a
    /// second time; the same frames received again (new receptions) are recorded as duplicates.
    async fn a_retried_commit_records_each_reception_once(url: &str) {
        let (store, mut writer) = crate::open(url).await.unwrap();
        writer.register_ingester("retry").await.unwrap();
        let session = crate::test_archive::cq_session(&mut writer).await;
        let mut batch = frames(session, 1..=4);
        for (n, frame) in batch.iter_mut().enumerate() {
            frame.reception = Some(n as i64 + 1);
        }
        let first = writer.ingest(&batch).await.unwrap();
        assert_eq!(first.new_versions.len(), 4);
        let retried = writer.ingest(&batch).await.unwrap();
        assert!(retried.new_versions.is_empty());
        let count = |sql: &str| {
            let store = store.clone();
            let sql = sql.to_owned();
            async move {
                store
                    .db
                    .one(crate::statements::Statements::one(&sql), |r| r.int("n"))
                    .await
                    .unwrap()
            }
        };
        assert_eq!(count("SELECT COUNT(*) AS n FROM deliveries").await, 4);
        for frame in &mut batch {
            frame.reception = Some(frame.reception.unwrap() + 4);
        }
        writer.ingest(&batch).await.unwrap();
        assert_eq!(count("SELECT COUNT(*) AS n FROM deliveries").await, 8);
        assert_eq!(
            count("SELECT COUNT(*) AS n FROM deliveries WHERE outcome = 'duplicate'").await,
            4
        );
        assert_eq!(count("SELECT COUNT(*) AS n FROM reports").await, 4);
        writer.close().await.unwrap();
    }

    #[tokio::test]
    async fn a_retried_commit_records_each_reception_once_on_sqlite() {
        let dir = std::env::temp_dir().join(format!(
            "osds-retry-{}-{}",
            std::process::id(),
            osds_time::now_ms()
        ));
        a_retried_commit_records_each_reception_once(&format!(
            "sqlite://{}/osds.db",
            dir.display()
        ))
        .await;
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn a_retried_commit_records_each_reception_once_on_postgres() {
        let cluster = Cluster::start("retry");
        a_retried_commit_records_each_reception_once(&cluster.database("osds").await).await;
    }
}
