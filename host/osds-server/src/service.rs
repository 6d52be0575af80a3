//! The service, wired: the archive and its writer task, the decoders and the shaper with their hot-swap manager
//! and admin socket, ingestion, the detector, periodic backups and the public listener, all started from one
//! [`ServiceConfig`] and stopped in order on SIGINT or SIGTERM (`osds serve` builds the config from its flags).
//! [`Service::start`] wires everything but the listener, so tests can send requests to [`Service::router`]
//! in-process; [`Service::serve`] binds and serves until a signal.

use crate::admin;
use crate::hot_swap::{
    CanarySources, ComponentManager, InService, installed_decoders, installed_shaper,
};
use crate::hyp::runner::{Recorder, Runner};
use crate::hyp::source::{KmoniFetcher, ReplaySource};
use crate::ingest::{ChannelSpec, Ingester, UpstreamBoard, UpstreamConfig};
use crate::prometheus::Exporter;
use anyhow::Context;
use osds_api::AppState;
use osds_api::gateway::{Gateway, GatewayConfig};
use osds_api::live::LiveConfig;
use osds_api::net::listener::LiveListener;
use osds_api::net::tls;
use osds_api::server::{self, ConnectionLimits};
use osds_detector::detector::DetectorConfig;
use osds_detector::stations::Network;
use osds_runtime::{DecoderSet, Limits, Runtime, SharedShaper};
use osds_store::{BackupSettings, WriterTask};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Everything the service is started with.
pub struct ServiceConfig {
    /// Address of the public API.
    pub listen: SocketAddr,
    pub database_url: String,
    /// The relay to ingest from; `None`: serve the archive only.
    pub upstream: Option<UpstreamConfig>,
    /// The ingester's name on a PostgreSQL archive, where several may ingest (each with a name of its own).
    pub ingester_name: String,
    pub live: LiveConfig,
    /// Decoder components to load instead of the built-in ones.
    pub components_dir: Option<PathBuf>,
    /// Memory for rendered report versions, MiB.
    pub report_cache_mb: usize,
    /// Received frames that may wait while the archive cannot write, bytes.
    pub ingest_queue_bytes: usize,
    pub canary_fixtures: Option<PathBuf>,
    pub canary_recent: i64,
    /// The local admin socket of `osds components`.
    pub admin_socket: PathBuf,
    pub backups: BackupSettings,
    /// The gateway's limits; its `public_base_url` is set from the field below.
    pub gateway: GatewayConfig,
    /// Open connections per client address and the header-read timeout (trusted proxies are the gateway's).
    pub connections: ConnectionLimits,
    /// The base URL named to clients of the legacy host; `None`: the listen address's.
    pub public_base_url: Option<String>,
    /// PEM certificate chain and key: serve HTTPS and WSS.
    pub tls: Option<(PathBuf, PathBuf)>,
    /// How long a shutdown waits for open connections.
    pub shutdown_grace: Duration,
    /// The memory limit and deadline of every call into a component.
    pub limits: Limits,
    pub detector: DetectorPlan,
    /// Where the operator's Prometheus metrics are served; `None`: not at all.
    pub metrics_listen: Option<SocketAddr>,
}

/// Whether and how the self-sensing detector runs.
pub enum DetectorPlan {
    Off,
    Run {
        network: Box<Network>,
        config: DetectorConfig,
        /// The recorder's frame archive (images), also what a replay reads.
        frames_url: String,
        source: DetectorSource,
    },
}

/// Where the detector's frames come from.
pub enum DetectorSource {
    /// The live monitor images, recorded for `retention` when given.
    Kmoni {
        fetcher: Box<KmoniFetcher>,
        retention: Option<Duration>,
    },
    /// The recorded images of `from_ms..=to_ms`.
    Replay { from_ms: i64, to_ms: i64 },
}

/// How often a process of a shared PostgreSQL archive looks for components another process installed.
const FOLLOW_CHANGES_EVERY: std::time::Duration = std::time::Duration::from_secs(2);

/// Runs the service until SIGINT or SIGTERM, then stops it in order.
pub async fn run(mut config: ServiceConfig) -> anyhow::Result<()> {
    // Bound first: a taken port fails the start, and the recorder is in place before anything records.
    let exporter = match config.metrics_listen.take() {
        Some(address) => Some(Exporter::bind(address).await?),
        None => None,
    };
    let service = Service::start(config).await?;
    if let Some(exporter) = exporter {
        exporter.serve(
            service.state.upstream.clone(),
            service.state.writes.clone(),
            service.state.shutdown.clone(),
        )?;
    }
    service.serve().await
}

/// The service, started: archive, components, ingestion, the detector and backups running; not listening yet.
pub struct Service {
    state: AppState,
    gateway: GatewayConfig,
    connections: ConnectionLimits,
    listen: SocketAddr,
    public_base_url: Option<String>,
    tls: Option<(PathBuf, PathBuf)>,
    shutdown_grace: Duration,
    /// When the stop signal came (set by [`Service::serve`]): the whole stop fits in the grace from then.
    signalled_at: Arc<std::sync::OnceLock<tokio::time::Instant>>,
    /// Turns true when the service stops; `state.shutdown` follows it.
    stopping: tokio::sync::watch::Sender<bool>,
    /// The admin socket's task and path; `None` when another process of a shared archive has the path.
    admin_socket: Option<(tokio::task::JoinHandle<()>, PathBuf)>,
    backups: tokio::task::JoinHandle<()>,
    detector: Option<tokio::task::JoinHandle<()>>,
    ingester: Option<Arc<Ingester>>,
    board: Arc<UpstreamBoard>,
    writer_task: WriterTask,
    database_url: String,
    /// Held until the service has stopped (SQLite: one service per archive file).
    _lock: Option<osds_store::ArchiveLock>,
}

impl Service {
    /// Opens the archive, loads the components, starts ingestion, the detector and backups.
    pub async fn start(config: ServiceConfig) -> anyhow::Result<Service> {
        let ServiceConfig {
            listen,
            database_url,
            upstream,
            ingester_name,
            live,
            components_dir,
            report_cache_mb,
            ingest_queue_bytes,
            canary_fixtures,
            canary_recent,
            admin_socket: admin_path,
            mut backups,
            gateway,
            connections,
            public_base_url,
            tls,
            shutdown_grace,
            limits,
            detector,
            // Served by `run` (a process has one recorder).
            metrics_listen: _,
        } = config;
        let postgres = osds_store::is_postgres_url(&database_url);
        // One service per SQLite archive; `osds restore` refuses while it runs. On PostgreSQL any number of
        // services share the archive (ingesters are told apart by name).
        let lock = if postgres {
            None
        } else {
            Some(osds_store::ArchiveLock::acquire(
                &osds_store::database_path(&database_url)?,
            )?)
        };
        let (store, mut writer) = osds_store::open(&database_url).await?;
        if upstream.is_some() {
            writer.register_ingester(&ingester_name).await?;
        }
        if postgres && backups.every.take().is_some() {
            tracing::warn!(
                "periodic backups copy a SQLite file: on PostgreSQL they are off (back the database up with \
                 pg_dump; docs/operating.md, \"Running on several machines\")"
            );
        }
        // Commits of other processes wake the live hub at once (on SQLite the horizon is read every second,
        // for `osds reparse`).
        let followed = if postgres {
            Some(osds_store::postgres::watch_horizon(&database_url).await?)
        } else {
            None
        };
        let wasm = Runtime::new(limits)?;
        // The built-in decoders (or --components-dir), then what was installed on this archive since.
        let started_with = DecoderSet::load(&wasm, components_dir.as_deref())?;
        // Read first: a change recorded meanwhile by another process is then followed, never missed.
        let last_change = store.last_component_change().await?;
        let installed = installed_decoders(&wasm, started_with, &store).await?;
        for decoder in installed.set.decoders() {
            let info = decoder.info();
            tracing::info!(name = %info.name, version = %info.version, source = %info.source, claims = ?info.claims, sha256 = %info.sha256, "decoder loaded");
        }
        let board = Arc::new(UpstreamBoard::new(ChannelSpec::from_decoders(
            &installed.set,
        )));
        let decoders = Arc::new(arc_swap::ArcSwap::from_pointee(installed.set));
        // A previous run killed: its sessions end, and each channel it held is out from when it was last known
        // alive with the channel connected.
        let (alive_at, left_open) = store.last_alive(writer.ingester()).await?;
        let mut held: std::collections::BTreeMap<String, String> = Default::default();
        for channel in board.channels() {
            for (path, connected_at) in &left_open {
                if *path == channel.path || path == crate::ingest::REDUNDANT_PATH {
                    let since = alive_at
                        .clone()
                        .unwrap_or_default()
                        .max(connected_at.clone());
                    let at = held.entry(channel.source.clone()).or_default();
                    *at = (*at).clone().max(since);
                }
            }
        }
        if !left_open.is_empty() {
            tracing::warn!(
                alive_at = alive_at.as_deref().unwrap_or("unknown"),
                sockets = left_open.len(),
                channels = ?held,
                "the previous run stopped without closing its connections (killed?): they end, and the channels' \
                 outage begins, when it was last known alive"
            );
        }
        let held: Vec<(String, String)> = held.into_iter().collect();
        writer
            .close_stale_sessions(alive_at.as_deref(), &held)
            .await?;
        board.seed_last_received(store.last_receptions().await?);
        tracing::info!(database = %database_url, ingester = writer.ingester(), high_water = writer.high_water(), report_cache_mib = report_cache_mb, "archive open");
        let recent = Arc::new(osds_api::live::recent::RecentReports::new(
            store.clone(),
            writer.high_water(),
        ));
        recent.warm().await?;
        let offer_to = recent.clone();
        let writer_task = WriterTask::spawn(
            writer,
            ingest_queue_bytes,
            Some(Arc::new(move |committed: &[osds_store::ServedReport]| {
                offer_to.offer(committed)
            })),
            followed,
        )?;

        let ingester = if let Some(upstream) = upstream {
            tracing::info!(upstream = %upstream.url, "ingesting from the relay");
            Some(Ingester::start(
                upstream,
                decoders.clone(),
                writer_task.clone(),
                board.clone(),
            ))
        } else {
            tracing::info!("ingestion disabled (--no-ingest): serving the archive only");
            None
        };
        let (shaper, previous_shaper) = installed_shaper(&wasm, &store).await?;
        tracing::info!(name = %shaper.info().name, sha256 = %shaper.info().sha256, "hyp shaper loaded");
        let shaper = Arc::new(arc_swap::ArcSwap::new(shaper));
        // The reference decoder that reads JMA's own frames for the scorecard: the components directory's
        // `reference_<agency>.wasm` when it has one, else the built-in one.
        let reference = match components_dir.as_deref() {
            Some(dir) => osds_runtime::ReferenceComponent::from_dir(&wasm, dir)?,
            None => None,
        };
        let reference = match reference {
            Some(reference) => reference,
            None => osds_runtime::ReferenceComponent::embedded(&wasm)?,
        };
        tracing::info!(name = %reference.info().name, sha256 = %reference.info().sha256, "reference decoder loaded");
        let reference: osds_runtime::SharedReference =
            Arc::new(arc_swap::ArcSwap::from_pointee(reference));
        let components = ComponentManager::new(
            wasm.clone(),
            InService {
                decoders: decoders.clone(),
                previous_decoders: installed.previous,
                shaper: shaper.clone(),
                previous_shaper,
                reference: reference.clone(),
            },
            CanarySources {
                fixtures: canary_fixtures,
                recent: canary_recent,
            },
            store.clone(),
            writer_task.clone(),
            ingester.clone(),
        );
        let admin_socket = match admin::serve(admin_path.clone(), components.clone()) {
            Ok(task) => Some((task, admin_path)),
            // Several processes of a shared archive on one host: the first has the default path. (On SQLite a
            // second service on the archive never gets this far.)
            Err(e) if postgres => {
                tracing::warn!(
                    error = %format!("{e:#}"),
                    "no admin socket for this process (`osds components` reaches the one that has it); give each process its own --admin-socket"
                );
                None
            }
            Err(e) => return Err(e),
        };
        if let Some(dir) = components_dir {
            reload_on_hangup(components.clone(), dir);
        }

        let (stopping, shutdown) = tokio::sync::watch::channel(false);
        if postgres {
            // The other processes of the archive install through their own admin sockets.
            components.follow_changes(last_change, FOLLOW_CHANGES_EVERY, shutdown.clone());
        }
        let report_cache = Arc::new(osds_api::reports::pages::ReportCache::new(
            report_cache_mb.saturating_mul(1 << 20),
        ));
        // One hub shard per worker thread (the runtime's default count).
        let hub = osds_api::live::hub::Hub::start(
            &store,
            &report_cache,
            &recent,
            &writer_task.high_water(),
            std::thread::available_parallelism().map_or(1, |n| n.get()),
        );
        let live_streams = tokio_util::task::TaskTracker::new();
        let scorecard: osds_api::scorecard::SharedScorecard = Arc::default();
        // JMA's quakes inside the detector's network are the ones it can miss.
        let position = |s: &osds_detector::detector::Station| (s.latitude, s.longitude);
        let stations: Vec<(f64, f64)> = match &detector {
            DetectorPlan::Run { network, .. } => network.stations.iter().map(position).collect(),
            DetectorPlan::Off => Network::shipped().stations.iter().map(position).collect(),
        };
        tokio::spawn(
            crate::hyp::scorecard::ScorecardTask::new(
                store.clone(),
                reference,
                scorecard.clone(),
                stations,
            )
            .run(shutdown.clone()),
        );
        let state = AppState {
            hub,
            report_cache,
            live_streams: live_streams.clone(),
            recent,
            store,
            upstream: board.clone(),
            decoders,
            high_water: writer_task.high_water(),
            writes: writer_task.monitor(),
            live_config: live,
            shutdown,
            backups: Arc::new(backups),
            shaper,
            scorecard,
            hyp_horizon: osds_api::live::hyp_horizon::HypHorizon::new(),
        };
        let detector = start_detector(
            detector,
            &database_url,
            state.shaper.clone(),
            state.shutdown.clone(),
        )
        .await?;
        let backups = tokio::spawn(osds_store::backup::periodic(
            database_url.clone(),
            state.backups.clone(),
            state.shutdown.clone(),
        ));
        Ok(Service {
            state,
            gateway,
            connections,
            listen,
            public_base_url,
            tls,
            shutdown_grace,
            signalled_at: Arc::default(),
            stopping,
            admin_socket,
            backups,
            detector,
            ingester,
            board,
            writer_task,
            database_url,
            _lock: lock,
        })
    }

    /// The public router with the gateway's layers, for requests sent in-process (no socket: every request
    /// counts as coming from 127.0.0.1).
    pub fn router(&self) -> axum::Router {
        self.router_at(&format!("http://{}/api/v1", self.listen))
    }

    /// The public router; `served_at` is the base URL named to clients unless one is configured.
    fn router_at(&self, served_at: &str) -> axum::Router {
        let mut gateway = self.gateway.clone();
        gateway.public_base_url = self
            .public_base_url
            .clone()
            .unwrap_or_else(|| served_at.to_string());
        let gateway = Gateway::new(gateway, self.state.shutdown.clone());
        osds_api::router(self.state.clone(), gateway)
    }

    /// Binds the listener and serves until SIGINT or SIGTERM, then drains the connections (for the shutdown
    /// grace at most) and stops in order.
    pub async fn serve(mut self) -> anyhow::Result<()> {
        let tls = match self.tls.take() {
            Some((cert, key)) => {
                let served = tls::ServedCertificate::load(&cert, &key)?;
                reload_certificate_on_hangup(served.clone());
                Some(served)
            }
            None => None,
        };
        let listen = self.listen;
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .with_context(|| format!("listen on {listen}"))?;
        let address = listener.local_addr()?;
        let scheme = if tls.is_some() { "https" } else { "http" };
        let app = self.router_at(&format!("{scheme}://{address}/api/v1"));
        let mut connections = self.connections.clone();
        connections.trusted_proxies = self.gateway.trusted_proxies.clone();
        let (draining, drain_started) = tokio::sync::oneshot::channel::<()>();
        let stopping = self.stopping.clone();
        let signalled_at = self.signalled_at.clone();
        let drain = async move {
            shutdown_signal().await;
            crate::systemd::stopping();
            let _ = signalled_at.set(tokio::time::Instant::now());
            // Live connections never end by themselves: tell them to close so the drain can finish.
            let _ = stopping.send(true);
            let _ = draining.send(());
        };
        let shutdown_grace = self.shutdown_grace;
        let grace_over = async move {
            match drain_started.await {
                Ok(()) => tokio::time::sleep(shutdown_grace).await,
                Err(_) => std::future::pending().await,
            }
        };
        let live_streams = self.state.live_streams.clone();
        tracing::info!(%address, %scheme, "serving /api/v1");
        // A line on stdout that scripts and tests can wait for (the port may have been chosen by the system).
        println!("osds: serving {scheme}://{address}/api/v1");
        crate::systemd::ready(&format!("{scheme}://{address}/api/v1"));
        crate::systemd::spawn_watchdog(self.stopping.subscribe());
        match tls {
            Some(acceptor) => {
                let listener = tls::TlsListener::new(listener, acceptor)?;
                let serving = server::serve(listener, app, connections, drain);
                drain_within(
                    then_streams(serving, live_streams),
                    grace_over,
                    shutdown_grace,
                )
                .await
            }
            None => {
                let serving = server::serve(LiveListener(listener), app, connections, drain);
                drain_within(
                    then_streams(serving, live_streams),
                    grace_over,
                    shutdown_grace,
                )
                .await
            }
        }
        self.stop().await;
        tracing::info!("stopped");
        // The last line, as `osds: serving` was the first.
        println!("osds: stopped");
        Ok(())
    }

    /// Stops in order: the admin socket, backups, the detector (closing its open events as `interrupted`),
    /// ingestion, then an outage recorded for every channel and the writer flushed.
    pub async fn stop(self) {
        tracing::info!("shutting down");
        let _ = self.stopping.send(true);
        if let Some((task, path)) = self.admin_socket {
            task.abort();
            let _ = std::fs::remove_file(&path);
            tracing::info!(socket = %path.display(), "admin socket closed");
        }
        // Returns at once: it stops on the shutdown signal, abandoning a backup in progress.
        let _ = self.backups.await;
        tracing::info!("periodic backups stopped");
        if let Some(detector) = self.detector {
            let _ = detector.await;
            tracing::info!("hyp detector stopped");
        }
        let ingesting = self.ingester.is_some();
        if let Some(ingester) = self.ingester {
            ingester.stop().await;
            tracing::info!("ingestion stopped: every upstream connection closed");
        }
        // Channels this service ingested are out now (a replica had none).
        if ingesting {
            for source in self.board.sources() {
                self.writer_task
                    .outage_begin(&source, osds_store::OutageReason::ServiceStopped);
            }
        }
        // An archive that cannot write (a full disk) would keep the stop waiting for ever: it gets what is left
        // of the grace since the signal (at least a second, for the final checkpoint of a healthy archive).
        let now = tokio::time::Instant::now();
        let deadline = self
            .signalled_at
            .get()
            .map_or(now + self.shutdown_grace, |at| *at + self.shutdown_grace)
            .max(now + self.shutdown_grace.min(Duration::from_secs(1)));
        match tokio::time::timeout_at(deadline, self.writer_task.close()).await {
            Ok(Ok(())) => tracing::info!(
                database = %self.database_url,
                "archive closed: every commit is in the database file"
            ),
            Ok(Err(e)) => tracing::error!(
                database = %self.database_url,
                error = format!("{e:#}"),
                "archive not closed cleanly: its WAL file holds the last commits"
            ),
            Err(_) => {
                let health = self.writer_task.monitor().health();
                tracing::error!(
                    database = %self.database_url,
                    reason = health.failure.as_ref().map_or("slow", |f| f.code.as_str()),
                    frames = health.queued_frames,
                    "the archive could not write within the shutdown grace: the frames still queued are not archived"
                );
            }
        }
    }
}

/// Starts the self-sensing detector as `plan` says, with its own connection to the archive (hyp reports never
/// wait on the EEW writer). It stops when `shutdown` turns true.
async fn start_detector(
    plan: DetectorPlan,
    database_url: &str,
    shaper: SharedShaper,
    shutdown: tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<Option<tokio::task::JoinHandle<()>>> {
    let DetectorPlan::Run {
        network,
        config,
        frames_url,
        source,
    } = plan
    else {
        tracing::info!("hyp detector off (--hyp-source kmoni|replay runs it)");
        return Ok(None);
    };
    tracing::info!(model = %config.travel_times.name(), "hyp travel times");
    let (store, mut writer) = osds_store::open(database_url).await?;
    writer.claim_detector().await?;
    let frames = osds_store::FrameArchive::open(&frames_url).await?;
    let handle = match source {
        DetectorSource::Kmoni { fetcher, retention } => {
            let recorder = retention.map(|retention| Recorder {
                archive: frames,
                retention,
            });
            let runner = Runner::new(*network, config, store, writer, shaper, recorder);
            tokio::spawn(async move {
                if let Err(error) = runner.run(*fetcher, shutdown).await {
                    tracing::error!(error = %format!("{error:#}"), "hyp detector failed");
                }
            })
        }
        DetectorSource::Replay { from_ms, to_ms } => {
            // Replayed images are in the archive already: nothing to record.
            let runner = Runner::new(*network, config, store, writer, shaper, None);
            let replay = ReplaySource::new(frames, from_ms, to_ms);
            tokio::spawn(async move {
                if let Err(error) = runner.run(replay, shutdown).await {
                    tracing::error!(error = %format!("{error:#}"), "hyp replay failed");
                }
            })
        }
    };
    Ok(Some(handle))
}

/// SIGHUP reads the TLS certificate and key again (a renewed certificate without a restart); files that
/// cannot be read or do not fit keep the certificate in service.
fn reload_certificate_on_hangup(served: tls::ServedCertificate) {
    #[cfg(unix)]
    tokio::spawn(async move {
        let Some(mut hangups) = hangups("the TLS certificate is read at start only") else {
            return;
        };
        while hangups.recv().await.is_some() {
            match served.reload() {
                Ok(()) => {
                    tracing::info!(cert = %served.cert_path().display(), "SIGHUP: TLS certificate reloaded")
                }
                Err(error) => tracing::error!(
                    error = %format!("{error:#}"),
                    "SIGHUP: TLS certificate not reloaded; the one in service stays"
                ),
            }
        }
    });
}

/// SIGHUP installs every component in `dir` that is not loaded yet, through the same validate → canary →
/// swap path as `osds components install`.
fn reload_on_hangup(components: Arc<ComponentManager>, dir: PathBuf) {
    #[cfg(unix)]
    tokio::spawn(async move {
        let Some(mut hangups) = hangups("reload components with `osds components install`") else {
            return;
        };
        while hangups.recv().await.is_some() {
            tracing::info!(dir = %dir.display(), "SIGHUP: reloading components");
            components.reload_dir(&dir).await;
        }
    });
}

/// SIGHUP as a stream (each reloader watches its own), or none when it cannot be watched: logged, with what
/// the operator does `instead`.
#[cfg(unix)]
fn hangups(instead: &str) -> Option<tokio::signal::unix::Signal> {
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
        Ok(signal) => Some(signal),
        Err(error) => {
            tracing::warn!(%error, "SIGHUP cannot be watched; {instead}");
            None
        }
    }
}

/// Serves until the drain after a shutdown signal ends, or until `grace_over`: the connections still open
/// then are closed with the runtime.
/// Serving, then the SSE streams that took their connections from hyper (they end when told to stop).
async fn then_streams(serving: impl Future<Output = ()>, streams: tokio_util::task::TaskTracker) {
    serving.await;
    streams.close();
    streams.wait().await;
}

async fn drain_within(
    serving: impl Future<Output = ()>,
    grace_over: impl Future<Output = ()>,
    grace: Duration,
) {
    tokio::select! {
        () = serving => {}
        () = grace_over => {
            tracing::warn!(
                grace_secs = grace.as_secs_f64(),
                "connections still open after the shutdown grace (consumers that read nothing); closing them"
            );
        }
    }
}

async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut terminate =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(signal) => signal,
                Err(_) => return interrupt.await.unwrap_or_default(),
            };
        tokio::select! {
            _ = interrupt => {}
            _ = terminate.recv() => {}
        }
    }
    #[cfg(not(unix))]
    interrupt.await.unwrap_or_default();
}
