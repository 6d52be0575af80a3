//! `osds serve`: ingest from the upstream relay, archive, and serve the public API.

use super::detector_args::{DetectorArgs, HypSource};
use anyhow::Context;
use osds_api::gateway::{Gateway, GatewayConfig};
use osds_api::listener::{LiveListener, Peer};
use osds_api::live::LiveConfig;
use osds_api::tls;
use osds_api::{self, AppState};
use osds_runtime::DecoderSet;
use osds_runtime::SharedShaper;
use osds_runtime::{Limits, Runtime, ShaperComponent};
use osds_server::admin;
use osds_server::hot_swap::ComponentManager;
use osds_server::hyp::runner::{Recorder, Runner};
use osds_server::hyp::source::ReplaySource;
use osds_server::ingest::{ChannelSpec, Ingester, UpstreamBoard, UpstreamConfig};
use osds_store as store;
use osds_store::WriterTask;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Address the public API listens on.
    #[arg(long, env = "OSDS_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Database to archive into (created with its directory when missing).
    #[arg(
        long,
        env = "OSDS_DATABASE_URL",
        default_value = osds_store::DEFAULT_DATABASE_URL
    )]
    pub database_url: String,
    /// Base URL of the Wolfx relay; channel paths (/sc_eew, ..., /all_eew) are appended.
    #[arg(
        long,
        env = "OSDS_UPSTREAM_URL",
        default_value = "wss://ws-api.wolfx.jp"
    )]
    pub upstream_url: String,
    /// Do not connect upstream: serve the archive only.
    #[arg(long, env = "OSDS_NO_INGEST")]
    pub no_ingest: bool,
    /// Load decoder components (`*.wasm`) from this directory instead of the built-in ones.
    #[arg(long, env = "OSDS_COMPONENTS_DIR", value_name = "DIR")]
    pub components_dir: Option<PathBuf>,
    /// Seconds between liveness checks and `ping`s on each upstream connection.
    #[arg(long, env = "OSDS_UPSTREAM_CHECK_SECS", default_value_t = 15.0)]
    pub upstream_check_secs: f64,
    /// Seconds without any upstream message after which a connection is re-established.
    #[arg(long, env = "OSDS_UPSTREAM_SILENCE_SECS", default_value_t = 45.0)]
    pub upstream_silence_secs: f64,
    /// Seconds after a `query_*` command during which frames of that channel are marked as possibly its reply.
    #[arg(long, env = "OSDS_UPSTREAM_QUERY_WINDOW_SECS", default_value_t = 5.0)]
    pub upstream_query_window_secs: f64,
    /// Cap, in seconds, of the reconnect back-off.
    #[arg(long, env = "OSDS_UPSTREAM_BACKOFF_CAP_SECS", default_value_t = 15.0)]
    pub upstream_backoff_cap_secs: f64,
    /// Reports per second sent to a live consumer (`/stream`, `/ws`) while its backlog is replayed.
    #[arg(long, env = "OSDS_LIVE_REPLAY_RATE", default_value_t = 100.0)]
    pub live_replay_rate: f64,
    /// Seconds between `status` messages on live connections.
    #[arg(long, env = "OSDS_LIVE_STATUS_SECS", default_value_t = 15.0)]
    pub live_status_secs: f64,
    /// Seconds between SSE keep-alive comments and WebSocket pings on idle live connections.
    #[arg(long, env = "OSDS_LIVE_KEEPALIVE_SECS", default_value_t = 15.0)]
    pub live_keepalive_secs: f64,
    /// Milliseconds an SSE client waits before reconnecting (the stream's `retry:`).
    #[arg(long, env = "OSDS_LIVE_RETRY_MS", default_value_t = 3000)]
    pub live_retry_ms: u64,
    /// Seconds a WebSocket consumer may leave a message unread before it is disconnected (it resumes by
    /// cursor); an SSE stream goes at its reader's pace.
    #[arg(long, env = "OSDS_LIVE_SLOW_CONSUMER_SECS", default_value_t = 30.0)]
    pub live_slow_consumer_secs: f64,
    /// Close live connections after this many seconds so clients rebalance (they resume by cursor); 0: never.
    #[arg(long, env = "OSDS_LIVE_MAX_CONNECTION_SECS", default_value_t = 0.0)]
    pub live_max_connection_secs: f64,
    /// Seconds a shutdown waits for open connections to finish (a consumer that reads nothing never does)
    /// before closing them.
    #[arg(long, env = "OSDS_SHUTDOWN_GRACE_SECS", default_value_t = 10.0)]
    pub shutdown_grace_secs: f64,
    /// Average requests per second allowed per client address.
    #[arg(long, env = "OSDS_RATE_LIMIT_PER_SEC", default_value_t = 10.0)]
    pub rate_limit_per_sec: f64,
    /// Requests a client may make in a burst before the average applies.
    #[arg(long, env = "OSDS_RATE_LIMIT_BURST", default_value_t = 80)]
    pub rate_limit_burst: u32,
    /// Requests in progress per client address, live streams and WebSockets included.
    #[arg(long, env = "OSDS_MAX_CONNECTIONS_PER_CLIENT", default_value_t = 20)]
    pub max_connections_per_client: usize,
    /// A reverse proxy whose `X-Forwarded-For` names the client (repeatable, or comma-separated).
    #[arg(
        long,
        env = "OSDS_TRUSTED_PROXY",
        value_delimiter = ',',
        value_name = "IP"
    )]
    pub trusted_proxy: Vec<std::net::IpAddr>,
    /// `Host` of the retired entrance, answered with 410 Gone (repeatable, or comma-separated).
    #[arg(
        long,
        env = "OSDS_LEGACY_HOST",
        value_delimiter = ',',
        value_name = "HOST"
    )]
    pub legacy_host: Vec<String>,
    /// The public base URL (ending in /api/v1) named to clients of the legacy host; default: the listen address.
    #[arg(long, env = "OSDS_PUBLIC_BASE_URL", value_name = "URL")]
    pub public_base_url: Option<String>,
    /// Local admin socket for `osds components` (a Unix domain socket, never the public port).
    #[arg(
        long,
        env = "OSDS_ADMIN_SOCKET",
        default_value = osds_server::admin::DEFAULT_SOCKET,
        value_name = "PATH"
    )]
    pub admin_socket: PathBuf,
    /// Fixture frames for the canary of a decoder install: DIR/<source>/*.json.
    #[arg(long, env = "OSDS_CANARY_FIXTURES", value_name = "DIR")]
    pub canary_fixtures: Option<PathBuf>,
    /// Most recent archived payloads of a channel that the canary of a decoder install decodes.
    #[arg(long, env = "OSDS_CANARY_RECENT", default_value_t = 200)]
    pub canary_recent: i64,
    /// PEM certificate chain: serve HTTPS (and WSS) instead of plain HTTP. Needs --tls-key.
    #[arg(long, env = "OSDS_TLS_CERT", value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert.
    #[arg(long, env = "OSDS_TLS_KEY", value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Memory for rendered report versions that `/reports` pages and live replays are served from (MiB; 0 turns
    /// it off). An archive needs about 0.6 MiB per 1,000 versions to be held whole.
    #[arg(
        long,
        env = "OSDS_REPORT_CACHE_MB",
        value_name = "MIB",
        default_value_t = 256
    )]
    pub report_cache_mb: usize,
    /// Seconds a request may take before its response starts; then it is answered with 503.
    #[arg(long, env = "OSDS_REQUEST_TIMEOUT_SECS", default_value_t = 30.0)]
    pub request_timeout_secs: f64,
    /// Directory of the archive's backups (`osds-YYYYMMDDTHHMMSSZ.db`); `/status` lists it.
    #[arg(
        long,
        env = "OSDS_BACKUP_DIR",
        value_name = "DIR",
        default_value = "data/backups"
    )]
    pub backup_dir: PathBuf,
    /// Seconds between periodic backups (the first one after one interval); 0: no periodic backups.
    #[arg(long, env = "OSDS_BACKUP_EVERY_SECS", default_value_t = 86_400)]
    pub backup_every_secs: u64,
    /// Backups kept in --backup-dir; older ones are deleted after each backup.
    #[arg(long, env = "OSDS_BACKUP_KEEP", default_value_t = 7, value_parser = clap::value_parser!(u32).range(1..))]
    pub backup_keep: u32,
    #[command(flatten)]
    pub detector: DetectorArgs,
}

fn seconds(name: &str, value: f64) -> anyhow::Result<Duration> {
    Duration::try_from_secs_f64(value)
        .ok()
        .filter(|d| !d.is_zero())
        .with_context(|| format!("--{name} must be a positive number of seconds"))
}

pub fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(serve(args))?;
    Ok(ExitCode::SUCCESS)
}

async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut upstream = UpstreamConfig::new(args.upstream_url.clone());
    upstream.check_interval = seconds("upstream-check-secs", args.upstream_check_secs)?;
    upstream.silence_timeout = seconds("upstream-silence-secs", args.upstream_silence_secs)?;
    upstream.query_window = seconds(
        "upstream-query-window-secs",
        args.upstream_query_window_secs,
    )?;
    upstream.backoff_cap = seconds("upstream-backoff-cap-secs", args.upstream_backoff_cap_secs)?;

    if !(args.live_replay_rate.is_finite() && args.live_replay_rate >= 1.0) {
        anyhow::bail!("--live-replay-rate must be at least 1 report per second");
    }
    let live_config = LiveConfig {
        replay_rate: args.live_replay_rate,
        status_interval: seconds("live-status-secs", args.live_status_secs)?,
        keepalive_interval: seconds("live-keepalive-secs", args.live_keepalive_secs)?,
        retry: Duration::from_millis(args.live_retry_ms),
        slow_consumer: seconds("live-slow-consumer-secs", args.live_slow_consumer_secs)?,
        max_connection: if args.live_max_connection_secs == 0.0 {
            None
        } else {
            Some(seconds(
                "live-max-connection-secs",
                args.live_max_connection_secs,
            )?)
        },
    };

    let wasm = Runtime::new(Limits::default())?;
    let decoder_set = DecoderSet::load(&wasm, args.components_dir.as_deref())?;
    for decoder in decoder_set.decoders() {
        let info = decoder.info();
        tracing::info!(name = %info.name, version = %info.version, source = %info.source, claims = ?info.claims, sha256 = %info.sha256, "decoder loaded");
    }
    let board = Arc::new(UpstreamBoard::new(ChannelSpec::from_decoders(&decoder_set)));
    let decoders = Arc::new(arc_swap::ArcSwap::from_pointee(decoder_set));

    let (store, mut writer) = osds_store::open(&args.database_url).await?;
    store
        .report_cache()
        .set_budget(args.report_cache_mb.saturating_mul(1 << 20));
    writer.close_stale_sessions().await?;
    board.seed_last_received(store.last_receptions().await?);
    tracing::info!(database = %args.database_url, high_water = writer.high_water(), report_cache_mib = args.report_cache_mb, "archive open");
    let writer_task = WriterTask::spawn(writer);

    let ingester = if args.no_ingest {
        tracing::info!("ingestion disabled (--no-ingest): serving the archive only");
        None
    } else {
        tracing::info!(upstream = %upstream.url, "ingesting from the relay");
        Some(
            Ingester::start(
                upstream,
                decoders.clone(),
                writer_task.clone(),
                board.clone(),
            )
            .await?,
        )
    };
    let shaper = ShaperComponent::embedded(&wasm)?;
    tracing::info!(name = %shaper.info().name, sha256 = %shaper.info().sha256, "hyp shaper loaded");
    let shaper = Arc::new(arc_swap::ArcSwap::from_pointee(shaper));
    let components = ComponentManager::new(
        wasm.clone(),
        decoders.clone(),
        store.clone(),
        shaper.clone(),
        args.canary_fixtures.clone(),
        args.canary_recent.max(0),
    );
    if let Some(ingester) = &ingester {
        components.attach_ingester(ingester.clone());
    }
    let admin_socket = admin::serve(args.admin_socket.clone(), components.clone())?;
    if let Some(dir) = args.components_dir.clone() {
        reload_on_hangup(components.clone(), dir);
    }

    if !(args.rate_limit_per_sec.is_finite() && args.rate_limit_per_sec > 0.0)
        || args.rate_limit_burst == 0
    {
        anyhow::bail!("--rate-limit-per-sec and --rate-limit-burst must be positive");
    }
    let (stopping, shutdown) = tokio::sync::watch::channel(false);
    let recent = Arc::new(osds_api::recent::RecentReports::new(
        store.clone(),
        *writer_task.high_water().borrow(),
    ));
    // One hub shard per worker thread (the runtime's default count).
    let hub = osds_api::live::hub::Hub::start(
        &store,
        &recent,
        &writer_task.high_water(),
        std::thread::available_parallelism().map_or(1, |n| n.get()),
    );
    let live_streams = tokio_util::task::TaskTracker::new();
    let state = AppState {
        hub,
        live_streams: live_streams.clone(),
        recent,
        store,
        upstream: board.clone(),
        decoders,
        high_water: writer_task.high_water(),
        live_config,
        shutdown,
        backups: Arc::new(store::BackupSettings {
            directory: args.backup_dir.clone(),
            every: (args.backup_every_secs > 0)
                .then(|| Duration::from_secs(args.backup_every_secs)),
            keep: args.backup_keep as usize,
        }),
        shaper,
    };
    let detector = start_detector(
        &args.detector,
        &args.database_url,
        state.shaper.clone(),
        state.shutdown.clone(),
    )
    .await?;
    let backups = tokio::spawn(store::backup::periodic(
        args.database_url.clone(),
        state.backups.clone(),
        state.shutdown.clone(),
    ));
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(tls::acceptor(cert, key)?),
        _ => None,
    };
    let request_timeout = seconds("request-timeout-secs", args.request_timeout_secs)?;
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("listen on {}", args.listen))?;
    let address = listener.local_addr()?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    let gateway = Gateway::new(
        GatewayConfig {
            rate_per_second: args.rate_limit_per_sec,
            burst: f64::from(args.rate_limit_burst),
            max_connections: args.max_connections_per_client,
            trusted_proxies: args.trusted_proxy.clone(),
            legacy_hosts: args.legacy_host.clone(),
            public_base_url: args
                .public_base_url
                .clone()
                .unwrap_or_else(|| format!("{scheme}://{address}/api/v1")),
            request_timeout,
        },
        state.shutdown.clone(),
    );
    let app = osds_api::router(state, gateway).into_make_service_with_connect_info::<Peer>();
    let shutdown_grace = seconds("shutdown-grace-secs", args.shutdown_grace_secs)?;
    let (draining, drain_started) = tokio::sync::oneshot::channel::<()>();
    let drain = async move {
        shutdown_signal().await;
        // Live connections never end by themselves: tell them to close so the drain can finish.
        let _ = stopping.send(true);
        let _ = draining.send(());
    };
    let grace_over = async move {
        match drain_started.await {
            Ok(()) => tokio::time::sleep(shutdown_grace).await,
            Err(_) => std::future::pending().await,
        }
    };
    tracing::info!(%address, %scheme, "serving /api/v1");
    // A line on stdout that scripts and tests can wait for (the port may have been chosen by the system).
    println!("osds: serving {scheme}://{address}/api/v1");
    match tls {
        Some(acceptor) => {
            let listener = tls::TlsListener::new(listener, acceptor)?;
            let serving = axum::serve(listener, app).with_graceful_shutdown(drain);
            let serving = then_streams(serving.into_future(), live_streams);
            drain_within(serving, grace_over, shutdown_grace).await?
        }
        None => {
            let listener = LiveListener(listener);
            let serving = axum::serve(listener, app).with_graceful_shutdown(drain);
            let serving = then_streams(serving.into_future(), live_streams);
            drain_within(serving, grace_over, shutdown_grace).await?
        }
    }

    tracing::info!("shutting down");
    admin_socket.abort();
    let _ = std::fs::remove_file(&args.admin_socket);
    // Returns at once: it stops on the shutdown signal, abandoning a backup in progress.
    let _ = backups.await;
    if let Some(detector) = detector {
        // It closes the events still open as `interrupted` before it returns.
        let _ = detector.await;
    }
    if let Some(ingester) = ingester {
        ingester.stop().await;
    }
    for source in board.sources() {
        writer_task.outage_begin(&source, "service stopped").await;
    }
    writer_task.flush().await;
    Ok(())
}

/// Starts the self-sensing detector on the configured source, with its own connection to the archive (hyp
/// reports never wait on the EEW writer). It stops when `shutdown` turns true.
async fn start_detector(
    args: &DetectorArgs,
    database_url: &str,
    shaper: SharedShaper,
    shutdown: tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<Option<tokio::task::JoinHandle<()>>> {
    if args.hyp_source == HypSource::Off {
        tracing::info!("hyp detector off (--hyp-source kmoni|replay runs it)");
        return Ok(None);
    }
    let network = args.images.network()?;
    let config = args.detector_config()?;
    tracing::info!(model = %config.travel_times.name(), "hyp travel times");
    let (store, writer) = osds_store::open(database_url).await?;
    let frames = osds_store::FrameArchive::open(&args.images.hyp_frames_url).await?;
    let handle = match args.hyp_source {
        HypSource::Kmoni => {
            let recorder = args.retention()?.map(|retention| Recorder {
                archive: frames,
                retention,
            });
            let runner = Runner::new(network, config, store, writer, shaper, recorder);
            let fetcher = args.images.fetcher(args.live_schedule()?)?;
            tokio::spawn(async move {
                if let Err(error) = runner.run(fetcher, shutdown).await {
                    tracing::error!(error = %format!("{error:#}"), "hyp detector failed");
                }
            })
        }
        HypSource::Replay => {
            let (Some(from), Some(to)) = (args.replay_from, args.replay_to) else {
                anyhow::bail!("--hyp-source replay needs --replay-from and --replay-to");
            };
            // Replayed images are in the archive already: nothing to record.
            let runner = Runner::new(network, config, store, writer, shaper, None);
            let replay = ReplaySource::new(frames, from, to);
            tokio::spawn(async move {
                if let Err(error) = runner.run(replay, shutdown).await {
                    tracing::error!(error = %format!("{error:#}"), "hyp replay failed");
                }
            })
        }
        HypSource::Off => unreachable!("handled above"),
    };
    Ok(Some(handle))
}

/// SIGHUP installs every component in `dir` that is not loaded yet, through the same validate → canary →
/// swap path as `osds components install`.
fn reload_on_hangup(components: Arc<ComponentManager>, dir: PathBuf) {
    #[cfg(unix)]
    tokio::spawn(async move {
        let Ok(mut hangups) =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        else {
            tracing::warn!(
                "SIGHUP cannot be watched; reload components with `osds components install`"
            );
            return;
        };
        while hangups.recv().await.is_some() {
            tracing::info!(dir = %dir.display(), "SIGHUP: reloading components");
            components.reload_dir(&dir).await;
        }
    });
}

/// Serves until the drain after a shutdown signal ends, or until `grace_over`: the connections still open
/// then are closed with the runtime.
/// Serving, then the SSE streams that took their connections from hyper (they end when told to stop).
async fn then_streams(
    serving: impl Future<Output = std::io::Result<()>>,
    streams: tokio_util::task::TaskTracker,
) -> std::io::Result<()> {
    serving.await?;
    streams.close();
    streams.wait().await;
    Ok(())
}

async fn drain_within(
    serving: impl Future<Output = std::io::Result<()>>,
    grace_over: impl Future<Output = ()>,
    grace: Duration,
) -> std::io::Result<()> {
    tokio::select! {
        served = serving => served,
        () = grace_over => {
            tracing::warn!(
                grace_secs = grace.as_secs_f64(),
                "connections still open after the shutdown grace (consumers that read nothing); closing them"
            );
            Ok(())
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
