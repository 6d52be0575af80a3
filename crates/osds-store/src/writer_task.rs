//! The writer task: owns the [`Writer`], commits frames in groups (one durable commit for whatever queued up
//! meanwhile), and only after a commit publishes the new high-water mark to live subscribers.

use crate::writer::{Incoming, Writer};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, watch};

/// Frames committed together at most.
const GROUP_COMMIT_MAX: usize = 512;
/// How often the horizon is re-read for versions appended by another process.
const HORIZON_CHECK: Duration = Duration::from_secs(1);
/// Frames waiting for the writer before connection tasks are held back.
const QUEUE_DEPTH: usize = 16_384;

enum Command {
    Ingest(Box<Incoming>),
    OpenSession {
        path: String,
        role: &'static str,
        url: String,
        reply: oneshot::Sender<i64>,
    },
    SessionConnected(i64),
    SessionEnded(i64, String),
    OutageBegin(String, String),
    OutageEnd(String),
    Counter(&'static str, i64),
    Flush(oneshot::Sender<()>),
    Close(oneshot::Sender<anyhow::Result<()>>),
    RecordComponent {
        change: ComponentChange,
        reply: oneshot::Sender<anyhow::Result<()>>,
    },
}

/// A decoder put in service on a running server (see `components.rs`).
pub struct ComponentChange {
    pub channel: String,
    /// `install` or `rollback`.
    pub action: &'static str,
    pub sha256: String,
    /// The bytes, for an installed component.
    pub wasm: Option<Vec<u8>>,
    /// What a rollback would put back after this change.
    pub previous: Option<String>,
}

/// Sends work to the archive task. Cheap to clone.
#[derive(Clone)]
pub struct WriterTask {
    commands: mpsc::Sender<Command>,
    high_water: watch::Receiver<i64>,
}

impl WriterTask {
    /// Starts the archive task over `writer`.
    pub fn spawn(writer: Writer) -> WriterTask {
        let (commands, receiver) = mpsc::channel(QUEUE_DEPTH);
        let (high_water_tx, high_water) = watch::channel(writer.high_water());
        tokio::spawn(run(writer, receiver, high_water_tx));
        WriterTask {
            commands,
            high_water,
        }
    }

    /// The commit horizon: every report id at or below it is durably committed. Changes after each commit.
    pub fn high_water(&self) -> watch::Receiver<i64> {
        self.high_water.clone()
    }

    pub async fn ingest(&self, incoming: Incoming) {
        self.send(Command::Ingest(Box::new(incoming))).await;
    }

    /// A session id for a new upstream connection (0 if the archive task is gone).
    pub async fn open_session(&self, path: &str, role: &'static str, url: &str) -> i64 {
        self.ask(|reply| Command::OpenSession {
            path: path.into(),
            role,
            url: url.into(),
            reply,
        })
        .await
        .unwrap_or(0)
    }

    pub async fn session_connected(&self, id: i64) {
        self.send(Command::SessionConnected(id)).await;
    }

    pub async fn session_ended(&self, id: i64, reason: &str) {
        self.send(Command::SessionEnded(id, reason.into())).await;
    }

    pub async fn outage_begin(&self, source: &str, reason: &str) {
        self.send(Command::OutageBegin(source.into(), reason.into()))
            .await;
    }

    pub async fn outage_end(&self, source: &str) {
        self.send(Command::OutageEnd(source.into())).await;
    }

    pub async fn count(&self, name: &'static str, by: i64) {
        self.send(Command::Counter(name, by)).await;
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
        self.send(command(reply)).await;
        answer.await.ok()
    }

    async fn send(&self, command: Command) {
        if self.commands.send(command).await.is_err() {
            tracing::error!("archive task has stopped; a command was not executed");
        }
    }
}

async fn run(
    mut writer: Writer,
    mut receiver: mpsc::Receiver<Command>,
    high_water: watch::Sender<i64>,
) {
    let mut pending: Option<Command> = None;
    let mut horizon_check = tokio::time::interval(HORIZON_CHECK);
    horizon_check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
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
                        Ok(Some(moved)) => {
                            high_water.send_replace(moved);
                        }
                        Ok(None) => {}
                        Err(e) => tracing::warn!(error = %format!("{e:#}"), "reading the archive horizon failed"),
                    }
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
                commit_batch(&mut writer, &batch, &high_water).await;
            }
            Command::OpenSession {
                path,
                role,
                url,
                reply,
            } => {
                let id = loop {
                    match writer.open_session(&path, role, &url).await {
                        Ok(id) => break id,
                        Err(e) => {
                            tracing::error!(error = %format!("{e:#}"), "opening a session record failed; retrying");
                            tokio::time::sleep(Duration::from_millis(500)).await;
                        }
                    }
                };
                let _ = reply.send(id);
            }
            Command::SessionConnected(id) => {
                log_error("session connected", writer.session_connected(id).await)
            }
            Command::SessionEnded(id, reason) => {
                log_error("session ended", writer.session_ended(id, &reason).await)
            }
            Command::OutageBegin(source, reason) => {
                log_error("outage begin", writer.outage_begin(&source, &reason).await)
            }
            Command::OutageEnd(source) => log_error("outage end", writer.outage_end(&source).await),
            Command::Counter(name, by) => log_error("counter", writer.add_counter(name, by).await),
            Command::Flush(reply) => {
                let _ = reply.send(());
            }
            Command::RecordComponent { change, reply } => {
                let recorded = writer
                    .record_component(
                        &change.channel,
                        change.action,
                        &change.sha256,
                        change.wasm.as_deref(),
                        change.previous.as_deref(),
                    )
                    .await;
                let _ = reply.send(recorded);
            }
            Command::Close(reply) => {
                let _ = reply.send(writer.close().await);
                return;
            }
        }
    }
}

/// Commits a batch, retrying until the database takes it: frames are never dropped because a write failed.
async fn commit_batch(writer: &mut Writer, batch: &[Incoming], high_water: &watch::Sender<i64>) {
    let mut delay = Duration::from_millis(100);
    loop {
        match writer.ingest(batch).await {
            Ok(summary) => {
                if !summary.new_versions.is_empty() {
                    tracing::debug!(versions = ?summary.new_versions, "committed new report versions");
                    high_water.send_replace(summary.high_water);
                }
                return;
            }
            Err(e) => {
                tracing::error!(error = %format!("{e:#}"), frames = batch.len(), "archiving failed; retrying");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(5));
            }
        }
    }
}

fn log_error(what: &str, result: anyhow::Result<()>) {
    if let Err(e) = result {
        tracing::error!(error = %format!("{e:#}"), "{what} failed");
    }
}
