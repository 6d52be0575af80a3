//! The command line of `osds-bench`: which benchmark, and every knob (`--help`).

use crate::fanout;
use anyhow::Result;
use clap::builder::TypedValueParser;
use std::path::PathBuf;
use std::time::Duration;

/// Which benchmark to run.
#[derive(Debug, Clone, Copy, PartialEq, clap::ValueEnum)]
pub(crate) enum Which {
    PushLatency,
    Ingest,
    Fsync,
    FanOut,
    Wasm,
    Query,
    QueryPostgres,
    BigFrames,
    Limiter,
    ReconnectStorm,
    All,
}

/// `osds-bench`: the real `osds serve` against the fake Wolfx relay and its peers (see BENCHMARKS.md).
#[derive(Debug, clap::Parser)]
#[command(name = "osds-bench")]
pub(crate) struct Options {
    /// The osds binary to test.
    #[arg(long, default_value = "target/release/osds")]
    pub(crate) osds: PathBuf,
    /// Duration of the ingest push phase, in seconds (0, 600].
    #[arg(long, default_value_t = 10.0, value_parser = seconds)]
    pub(crate) seconds: f64,
    /// Frames measured by push-latency.
    #[arg(long, default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..=100_000).map(|n| n as usize))]
    pub(crate) frames: usize,
    /// Pace of push-latency, in milliseconds.
    #[arg(long = "interval-ms", default_value = "20", value_parser = millis)]
    pub(crate) interval: Duration,
    /// Where the temporary databases and the fsync probe file go [default: the system temp dir].
    #[arg(long, default_value_os_t = std::env::temp_dir())]
    pub(crate) dir: PathBuf,
    /// Client addresses the limiter remembers at each step of `limiter`, comma-separated, increasing.
    #[arg(long, value_delimiter = ',', default_value = "1,10000,40000,100000", value_parser = clap::value_parser!(u64).range(1..=1_000_000).map(|n| n as usize))]
    pub(crate) limiter_clients: Vec<usize>,
    /// Fan-out sizes, comma-separated, each in [1, 50000].
    #[arg(long, value_delimiter = ',', default_value = "1000,10000", value_parser = clap::value_parser!(u64).range(1..=50_000).map(|n| n as usize))]
    pub(crate) subscribers: Vec<usize>,
    /// Reports measured per fan-out size.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=10_000).map(|n| n as usize))]
    pub(crate) rounds: usize,
    /// Pace of the fan-out reports, in milliseconds (later if a report has not reached everyone).
    #[arg(long = "round-interval-ms", default_value = "1000", value_parser = millis)]
    pub(crate) round_interval: Duration,
    /// Skip nginx + nchan in fan-out.
    #[arg(long = "no-peers", action = clap::ArgAction::SetFalse)]
    pub(crate) peers: bool,
    /// Skip the PostgreSQL runs of push-latency, fan-out and reconnect-storm (quick A/B runs).
    #[arg(long = "no-postgres", action = clap::ArgAction::SetFalse)]
    pub(crate) postgres: bool,
    /// Consumers of reconnect-storm, in [1, 50000].
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..=50_000).map(|n| n as usize))]
    pub(crate) storm_consumers: usize,
    /// How far behind the far consumers of reconnect-storm resume (reports; beyond the server's ring of 4,096).
    #[arg(long, default_value_t = 5_000, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub(crate) storm_far: u64,
    /// Fan-out subscribers: half SSE and half WebSocket, SSE only or WebSocket only.
    #[arg(long, value_enum, default_value = "mix")]
    pub(crate) protocol: fanout::Protocol,
    /// Upstream frames, one a line, decoded by `wasm` besides tests/fixtures.
    #[arg(long, value_name = "FILE")]
    pub(crate) samples: Option<PathBuf>,
    /// Report versions in the query archive (at least 2000).
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(2_000..))]
    pub(crate) versions: u64,
    /// Keep using an archive of --versions left in --dir by an earlier query run.
    #[arg(long)]
    pub(crate) reuse_archive: bool,
    /// wrk connections per endpoint (2 threads).
    #[arg(long, default_value_t = 32)]
    pub(crate) wrk_connections: usize,
    /// wrk seconds per endpoint.
    #[arg(long, default_value_t = 10)]
    pub(crate) wrk_seconds: u64,
    /// An uncounted wrk load before each measured one, for both servers, in seconds.
    #[arg(long, default_value_t = 5)]
    pub(crate) wrk_warmup_seconds: u64,
    /// osds serve --report-cache-mb for query [default: the server's own default].
    #[arg(long)]
    pub(crate) report_cache_mb: Option<usize>,
    /// The datasette program [default: $CARGO_TARGET_DIR/bench-venv/bin/datasette, else
    /// target/bench-venv/bin/datasette; query skips Datasette when missing].
    #[arg(long)]
    pub(crate) datasette: Option<PathBuf>,
    /// Frame sizes of big-frames, in MB (10^6 bytes), comma-separated, each in [1, 64].
    #[arg(long = "frame-mb", value_delimiter = ',', default_value = "10,60", value_parser = clap::value_parser!(u64).range(1..=64).map(|n| n as usize))]
    pub(crate) frame_mb: Vec<usize>,
    /// The benchmark to run.
    #[arg(value_enum)]
    pub(crate) which: Which,
}

pub(crate) fn seconds(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(s) if s > 0.0 && s <= 600.0 => Ok(s),
        _ => Err("a number of seconds in (0, 600]".into()),
    }
}

pub(crate) fn millis(text: &str) -> Result<Duration, String> {
    text.parse::<u64>()
        .map(Duration::from_millis)
        .map_err(|_| "a whole number of milliseconds".into())
}

pub(crate) fn parse_args() -> Options {
    let mut options = <Options as clap::Parser>::parse();
    if options.datasette.is_none() {
        options.datasette = [
            std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from),
            Some(PathBuf::from("target")),
        ]
        .into_iter()
        .flatten()
        .map(|dir| dir.join("bench-venv/bin/datasette"))
        .find(|p| p.is_file());
    }
    options
}
