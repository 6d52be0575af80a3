//! Ingestion from the Wolfx relay: one WebSocket per channel plus the redundant `/all_eew`, each frame routed,
//! decoded by its channel's component and handed to the store's writer task, which commits durably and only
//! then announces the new high-water mark to live subscribers.

mod board;
mod connection;
mod pipeline;
mod socket;

#[cfg(test)]
mod hostile_tests;

pub use board::{ChannelSpec, REDUNDANT_PATH, UpstreamBoard};

use osds_runtime::SharedDecoders;
use osds_store::{OutageReason, WriterTask};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{oneshot, watch};

/// Timing of the upstream connections (the spec's values are the defaults).
#[derive(Debug, Clone)]
pub struct UpstreamConfig {
    /// Base URL of the relay, e.g. `wss://ws-api.wolfx.jp`.
    pub url: String,
    /// How often liveness is checked, and how often a `ping` is sent so quiet channels stay alive.
    pub check_interval: Duration,
    /// A connection without any message for this long is re-established.
    pub silence_timeout: Duration,
    /// Cap of the exponential reconnect back-off.
    pub backoff_cap: Duration,
    /// Gap between two query commands on one connection.
    pub query_spacing: Duration,
    /// A frame of a channel arriving this soon after its query was sent may be the reply.
    pub query_window: Duration,
    /// The largest frame read; a larger one is refused (by its header, never read into memory).
    pub max_frame_bytes: usize,
}

/// The frame size limit when none is configured: far above anything the relay sends.
pub const DEFAULT_MAX_FRAME_BYTES: usize = 64 << 20;

impl UpstreamConfig {
    pub fn new(url: impl Into<String>) -> Self {
        UpstreamConfig {
            url: url.into(),
            check_interval: Duration::from_secs(15),
            silence_timeout: Duration::from_secs(45),
            backoff_cap: Duration::from_secs(15),
            query_spacing: Duration::from_secs(1),
            query_window: Duration::from_secs(5),
            max_frame_bytes: DEFAULT_MAX_FRAME_BYTES,
        }
    }
}

/// The running ingester.
pub struct Ingester {
    config: UpstreamConfig,
    decoders: SharedDecoders,
    writer: WriterTask,
    board: Arc<UpstreamBoard>,
    /// One per connection, closed when its thread ends.
    tasks: std::sync::Mutex<Vec<oneshot::Receiver<()>>>,
    shutdown: watch::Sender<bool>,
}

impl Ingester {
    /// Connects to every channel path of the loaded decoders and to `/all_eew`.
    pub fn start(
        config: UpstreamConfig,
        decoders: SharedDecoders,
        writer: WriterTask,
        board: Arc<UpstreamBoard>,
    ) -> Arc<Ingester> {
        let (shutdown, _) = watch::channel(false);
        let ingester = Arc::new(Ingester {
            config,
            decoders,
            writer,
            board,
            tasks: Default::default(),
            shutdown,
        });
        for channel in ingester.board.channels() {
            ingester
                .writer
                .outage_begin(&channel.source, OutageReason::ServiceStarted);
            ingester.connect(channel.path.clone(), true);
        }
        ingester.connect(board::REDUNDANT_PATH.to_string(), false);
        ingester
    }

    /// Holds a connection to `path` open for as long as the service runs, on a thread of its own (in a runtime
    /// of its own): its frames are decoded right where they are read, without a hand-over to another thread on
    /// each report's way to the archive (see `pipeline::prepare`).
    fn connect(&self, path: String, primary: bool) {
        let context = connection::Context {
            config: self.config.clone(),
            path,
            primary,
            decoders: self.decoders.clone(),
            writer: self.writer.clone(),
            board: self.board.clone(),
            shutdown: self.shutdown.subscribe(),
            refused_last: false,
        };
        let (ended, task) = oneshot::channel::<()>();
        let thread = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .and_then(|runtime| {
                std::thread::Builder::new()
                    .name(format!("osds-upstream{}", context.path))
                    .spawn(move || {
                        let _ended = ended;
                        runtime.block_on(connection::run(context));
                    })
            });
        if let Err(e) = thread {
            tracing::error!(error = %e, "cannot start an upstream connection's thread; that socket stays closed");
            return;
        }
        self.tasks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(task);
    }

    /// Starts archiving a channel added while the service runs (a component for a new agency).
    pub fn add_channel(&self, channel: ChannelSpec) {
        if self.board.add_channel(channel.clone()) {
            tracing::info!(source = %channel.source, path = %channel.path, "new channel: connecting upstream");
            self.writer
                .outage_begin(&channel.source, OutageReason::ChannelAdded);
            self.connect(channel.path, true);
        }
    }

    /// Closes every upstream connection and waits for the connection tasks to finish.
    pub async fn stop(&self) {
        let _ = self.shutdown.send(true);
        let tasks = std::mem::take(&mut *self.tasks.lock().unwrap_or_else(|e| e.into_inner()));
        for task in tasks {
            // Closed, never sent: the thread has ended.
            let _ = task.await;
        }
    }
}
