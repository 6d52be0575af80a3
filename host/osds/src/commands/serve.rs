//! `osds serve`: ingest from the upstream relay, archive, and serve the public API.

use super::detector_args::{DetectorArgs, HypSource};
use super::limits_args::LimitsArgs;
use anyhow::Context;
use osds_api::gateway::GatewayConfig;
use osds_api::live::LiveConfig;
use osds_api::server::ConnectionLimits;
use osds_server::ingest::UpstreamConfig;
use osds_server::service::{self, DetectorPlan, DetectorSource, ServiceConfig};
use osds_store::BackupSettings;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
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
    /// Do not connect upstream: serve the archive only (on PostgreSQL: an API replica).
    #[arg(long, env = "OSDS_NO_INGEST")]
    pub no_ingest: bool,
    /// This ingester's name on a PostgreSQL archive, where several may ingest at once (each needs its own; its
    /// sessions are recorded under it). Default: HOST:PORT, the host name and the --listen port.
    #[arg(long, env = "OSDS_INGESTER_NAME", value_name = "NAME")]
    pub ingester_name: Option<String>,
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
    /// The largest upstream frame read, MiB; a larger one is refused by its header (counted per socket in
    /// `/status`, logged, its size recorded as the session's end reason) and the connection re-established.
    #[arg(
        long,
        env = "OSDS_UPSTREAM_MAX_FRAME_MIB",
        value_name = "MIB",
        default_value_t = (osds_server::ingest::DEFAULT_MAX_FRAME_BYTES >> 20) as u64,
        value_parser = clap::value_parser!(u64).range(1..=4096)
    )]
    pub upstream_max_frame_mib: u64,
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
    /// IPv6 clients are limited by their network: this many leading bits of the address (a host is usually
    /// given a /64 and could rotate within it; 128 limits each address on its own).
    #[arg(long, env = "OSDS_IPV6_PREFIX_LEN", default_value_t = 64, value_parser = clap::value_parser!(u8).range(1..=128))]
    pub ipv6_prefix_len: u8,
    /// Requests in progress per client address, live streams and WebSockets included.
    #[arg(long, env = "OSDS_MAX_CONNECTIONS_PER_CLIENT", default_value_t = 20)]
    pub max_connections_per_client: usize,
    /// A reverse proxy or load balancer whose `X-Forwarded-For` names the client: an address or a network in
    /// CIDR form, e.g. 10.0.0.0/8 (repeatable, or comma-separated).
    #[arg(
        long,
        env = "OSDS_TRUSTED_PROXY",
        value_delimiter = ',',
        value_name = "IP|CIDR",
        value_parser = osds_api::gateway::parse_trusted_proxy
    )]
    pub trusted_proxy: Vec<osds_api::gateway::IpNet>,
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
    /// Serve Prometheus metrics at http://ADDR/metrics, a listener of their own (never the public port, which
    /// is refused); off when not given. Keep it on loopback or a private network.
    #[arg(long, env = "OSDS_METRICS_LISTEN", value_name = "ADDR")]
    pub metrics_listen: Option<SocketAddr>,
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
    /// Received frames that may wait in memory while the archive cannot write (a full disk), MiB; a frame beyond
    /// it is dropped, counted per channel in `/status` and logged.
    #[arg(
        long,
        env = "OSDS_INGEST_QUEUE_MIB",
        value_name = "MIB",
        default_value_t = (osds_store::DEFAULT_QUEUE_BYTES >> 20) as u64,
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub ingest_queue_mib: u64,
    /// Connections one client address may hold open, idle ones included (a trusted proxy's are not counted);
    /// one more is answered with 429 and closed. Keep it above --max-connections-per-client.
    #[arg(long, env = "OSDS_MAX_OPEN_CONNECTIONS_PER_CLIENT", default_value_t = 64, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub max_open_connections_per_client: usize,
    /// Seconds a client has to send a request's headers, counted from when the server waits for them: a
    /// connection without a request in progress is closed after this long.
    #[arg(long, env = "OSDS_HEADER_READ_TIMEOUT_SECS", default_value_t = 30.0)]
    pub header_read_timeout_secs: f64,
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
    pub limits: LimitsArgs,
    #[command(flatten)]
    pub detector: DetectorArgs,
}

/// Every connection is a descriptor: the soft limit (often 1,024) goes up to the hard one the system allows.
fn raise_open_files_limit() {
    match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(limit) => tracing::info!(open_files = limit, "open-files limit"),
        Err(e) => tracing::warn!(error = %e, "the open-files limit could not be raised"),
    }
}

fn seconds(name: &str, value: f64) -> anyhow::Result<Duration> {
    Duration::try_from_secs_f64(value)
        .ok()
        .filter(|d| !d.is_zero())
        .with_context(|| format!("--{name} must be a positive number of seconds"))
}

/// The host name and the listening port: the same across restarts, and different for every process of one
/// host (they cannot share a port). A port the system picks (0) gives the process id instead.
fn default_ingester_name(listen: SocketAddr) -> anyhow::Result<String> {
    let host = whoami::fallible::hostname()
        .context("no --ingester-name given, and the host name cannot be read")?;
    Ok(match listen.port() {
        0 => format!("{host}:pid{}", std::process::id()),
        port => format!("{host}:{port}"),
    })
}

pub fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let served = runtime.block_on(serve(args));
    // Work still blocking a thread (a write to a full disk) must not hold the process after the stop.
    runtime.shutdown_timeout(Duration::from_secs(1));
    served?;
    Ok(ExitCode::SUCCESS)
}

async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    raise_open_files_limit();
    let mut upstream = UpstreamConfig::new(args.upstream_url.clone());
    upstream.check_interval = seconds("upstream-check-secs", args.upstream_check_secs)?;
    upstream.silence_timeout = seconds("upstream-silence-secs", args.upstream_silence_secs)?;
    upstream.query_window = seconds(
        "upstream-query-window-secs",
        args.upstream_query_window_secs,
    )?;
    upstream.backoff_cap = seconds("upstream-backoff-cap-secs", args.upstream_backoff_cap_secs)?;
    upstream.max_frame_bytes = (args.upstream_max_frame_mib as usize) << 20;

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

    if args
        .metrics_listen
        .is_some_and(|metrics| metrics == args.listen && metrics.port() != 0)
    {
        anyhow::bail!(
            "--metrics-listen {} is the public --listen address: metrics need a listener of their own",
            args.listen
        );
    }
    if !(args.rate_limit_per_sec.is_finite() && args.rate_limit_per_sec > 0.0)
        || args.rate_limit_burst == 0
    {
        anyhow::bail!("--rate-limit-per-sec and --rate-limit-burst must be positive");
    }
    let config = ServiceConfig {
        listen: args.listen,
        database_url: args.database_url.clone(),
        upstream: (!args.no_ingest).then_some(upstream),
        ingester_name: match &args.ingester_name {
            Some(name) => name.clone(),
            None => default_ingester_name(args.listen)?,
        },
        live: live_config,
        components_dir: args.components_dir.clone(),
        report_cache_mb: args.report_cache_mb,
        ingest_queue_bytes: usize::try_from(args.ingest_queue_mib)
            .ok()
            .and_then(|mib| mib.checked_mul(1 << 20))
            .context("--ingest-queue-mib is too large")?,
        canary_fixtures: args.canary_fixtures.clone(),
        canary_recent: args.canary_recent,
        admin_socket: args.admin_socket.clone(),
        backups: BackupSettings {
            directory: args.backup_dir.clone(),
            every: (args.backup_every_secs > 0)
                .then(|| Duration::from_secs(args.backup_every_secs)),
            keep: args.backup_keep as usize,
        },
        gateway: GatewayConfig {
            rate_per_second: args.rate_limit_per_sec,
            burst: f64::from(args.rate_limit_burst),
            max_connections: args.max_connections_per_client,
            trusted_proxies: osds_api::gateway::TrustedProxies::new(args.trusted_proxy.clone()),
            ipv6_prefix_len: args.ipv6_prefix_len,
            legacy_hosts: args.legacy_host.clone(),
            public_base_url: String::new(),
            request_timeout: seconds("request-timeout-secs", args.request_timeout_secs)?,
        },
        connections: ConnectionLimits {
            open_per_client: args.max_open_connections_per_client,
            header_read_timeout: seconds(
                "header-read-timeout-secs",
                args.header_read_timeout_secs,
            )?,
            // The gateway's trusted proxies; set by the service.
            trusted_proxies: Default::default(),
            ipv6_prefix_len: args.ipv6_prefix_len,
        },
        public_base_url: args.public_base_url.clone(),
        tls: args.tls_cert.clone().zip(args.tls_key.clone()),
        shutdown_grace: seconds("shutdown-grace-secs", args.shutdown_grace_secs)?,
        limits: args.limits.limits(),
        detector: detector_plan(&args.detector)?,
        metrics_listen: args.metrics_listen,
    };
    service::run(config).await
}

/// What `--hyp-source` and the detector's flags ask for.
fn detector_plan(args: &DetectorArgs) -> anyhow::Result<DetectorPlan> {
    let source = match args.hyp_source {
        HypSource::Off => return Ok(DetectorPlan::Off),
        HypSource::Kmoni => DetectorSource::Kmoni {
            fetcher: Box::new(args.images.fetcher(args.live_schedule()?)?),
            retention: args.retention()?,
        },
        HypSource::Replay => {
            let (Some(from_ms), Some(to_ms)) = (args.replay_from, args.replay_to) else {
                anyhow::bail!("--hyp-source replay needs --replay-from and --replay-to");
            };
            DetectorSource::Replay { from_ms, to_ms }
        }
    };
    Ok(DetectorPlan::Run {
        network: Box::new(args.images.network()?),
        config: args.detector_config()?,
        frames_url: args.images.hyp_frames_url.clone(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::default_ingester_name;

    #[test]
    fn the_default_ingester_name_is_the_host_and_its_port() {
        let named = default_ingester_name("0.0.0.0:8081".parse().unwrap()).unwrap();
        assert!(named.ends_with(":8081") && named.len() > 5, "{named}");
        let picked = default_ingester_name("127.0.0.1:0".parse().unwrap()).unwrap();
        assert!(
            picked.ends_with(&format!(":pid{}", std::process::id())),
            "{picked}"
        );
    }
}
