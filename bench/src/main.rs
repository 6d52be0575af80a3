//! `osds-bench`: starts the real `osds serve` on a fresh database against the fake Wolfx relay and measures it.
//!
//! Benchmarks (see `BENCHMARKS.md` for the method and the numbers):
//! - `fsync`: the physical cost of one durable commit on this disk (append 64 bytes, `sync_data`), the floor
//!   of push latency with durable commits. Always run first; `push-latency` also takes it after an idle
//!   pause at its own pace, the floor a paced report actually meets.
//! - `push-latency`: one SSE and one WebSocket subscriber; distinct `cq_eew` frames pushed at a fixed pace
//!   through the relay; time from the push to the matching `report` at each subscriber.
//! - `ingest`: frames pushed as fast as the server drains them (80 % new versions, 20 % exact duplicates) for
//!   `--seconds`, then until every frame has its reception record; sustained frames/s and versions/s.
//!
//! - `fan-out`: `--subscribers` concurrent live subscribers (half SSE, half WebSocket), each receiving every
//!   report; delivery latency over all subscribers and the server's memory; the same against nginx + nchan
//!   (unless `--no-peers`), plus push latency to one SSE and one WebSocket subscriber of both, as ratios.
//! - `wasm`: the same decoder called as a Wasm component (as the host calls it) and natively (`wolfx-core`),
//!   per frame over the decoder fixtures and the upstream samples, as a ratio.
//! - `query`: an archive of `--versions` report versions (default 1,000,000) written through the host's writer;
//!   `osds serve --no-ingest` on it: time to the first 200 of `/status`, memory at rest; `wrk` (a separate
//!   process) on `/reports?limit=1000`, a filtered `/events?limit=100` and `/events/{id}`, and the same queries
//!   as Datasette canned queries on the same file, as ratios.
//!
//! - `big-frames`: one padded report of each `--frame-mb` size on a fresh server: its peak and remaining memory.
//! - `limiter`: the per-client limits' cost per request with `--limiter-clients` distinct loopback client
//!   addresses remembered, beside `/livez` (outside the limits) as the floor (`limiter.rs`).
//!
//! Every wait is bounded: a benchmark that does not finish in time fails instead of hanging.

mod archive;
mod breakdown;
mod fanout;
mod frames;
mod incoming;
mod limiter;
mod nchan;
mod wasm_cost;

use anyhow::{Context, Result, bail};
use clap::builder::TypedValueParser;
use fake_relay::{FakeRelay, RelayConfig};
use futures_util::StreamExt;
use osds_testkit::server::{Launch, Server};
use osds_testkit::sse::SseFramer;
use serde_json::Value;
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;

/// Which benchmark to run.
#[derive(Debug, Clone, Copy, PartialEq, clap::ValueEnum)]
enum Which {
    PushLatency,
    Ingest,
    Fsync,
    FanOut,
    Wasm,
    Query,
    QueryPostgres,
    BigFrames,
    Limiter,
    All,
}

/// `osds-bench`: the real `osds serve` against the fake Wolfx relay and its peers (see BENCHMARKS.md).
#[derive(Debug, clap::Parser)]
#[command(name = "osds-bench")]
struct Options {
    /// The osds binary to test.
    #[arg(long, default_value = "target/release/osds")]
    osds: PathBuf,
    /// Duration of the ingest push phase, in seconds (0, 600].
    #[arg(long, default_value_t = 10.0, value_parser = seconds)]
    seconds: f64,
    /// Frames measured by push-latency.
    #[arg(long, default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..=100_000).map(|n| n as usize))]
    frames: usize,
    /// Pace of push-latency, in milliseconds.
    #[arg(long = "interval-ms", default_value = "20", value_parser = millis)]
    interval: Duration,
    /// Where the temporary databases and the fsync probe file go [default: the system temp dir].
    #[arg(long, default_value_os_t = std::env::temp_dir())]
    dir: PathBuf,
    /// Client addresses the limiter remembers at each step of `limiter`, comma-separated, increasing.
    #[arg(long, value_delimiter = ',', default_value = "1,10000,40000,100000", value_parser = clap::value_parser!(u64).range(1..=1_000_000).map(|n| n as usize))]
    limiter_clients: Vec<usize>,
    /// Fan-out sizes, comma-separated, each in [1, 50000].
    #[arg(long, value_delimiter = ',', default_value = "1000,10000", value_parser = clap::value_parser!(u64).range(1..=50_000).map(|n| n as usize))]
    subscribers: Vec<usize>,
    /// Reports measured per fan-out size.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=10_000).map(|n| n as usize))]
    rounds: usize,
    /// Pace of the fan-out reports, in milliseconds (later if a report has not reached everyone).
    #[arg(long = "round-interval-ms", default_value = "1000", value_parser = millis)]
    round_interval: Duration,
    /// Skip nginx + nchan in fan-out.
    #[arg(long = "no-peers", action = clap::ArgAction::SetFalse)]
    peers: bool,
    /// Fan-out subscribers: half SSE and half WebSocket, SSE only or WebSocket only.
    #[arg(long, value_enum, default_value = "mix")]
    protocol: fanout::Protocol,
    /// Upstream frames, one a line, decoded by `wasm` besides tests/fixtures.
    #[arg(long, value_name = "FILE")]
    samples: Option<PathBuf>,
    /// Report versions in the query archive (at least 2000).
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(2_000..))]
    versions: u64,
    /// Keep using an archive of --versions left in --dir by an earlier query run.
    #[arg(long)]
    reuse_archive: bool,
    /// wrk connections per endpoint (2 threads).
    #[arg(long, default_value_t = 32)]
    wrk_connections: usize,
    /// wrk seconds per endpoint.
    #[arg(long, default_value_t = 10)]
    wrk_seconds: u64,
    /// An uncounted wrk load before each measured one, for both servers, in seconds.
    #[arg(long, default_value_t = 5)]
    wrk_warmup_seconds: u64,
    /// osds serve --report-cache-mb for query [default: the server's own default].
    #[arg(long)]
    report_cache_mb: Option<usize>,
    /// The datasette program [default: $CARGO_TARGET_DIR/bench-venv/bin/datasette, else
    /// target/bench-venv/bin/datasette; query skips Datasette when missing].
    #[arg(long)]
    datasette: Option<PathBuf>,
    /// Frame sizes of big-frames, in MB (10^6 bytes), comma-separated, each in [1, 64].
    #[arg(long = "frame-mb", value_delimiter = ',', default_value = "10,60", value_parser = clap::value_parser!(u64).range(1..=64).map(|n| n as usize))]
    frame_mb: Vec<usize>,
    /// The benchmark to run.
    #[arg(value_enum)]
    which: Which,
}

fn seconds(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(s) if s > 0.0 && s <= 600.0 => Ok(s),
        _ => Err("a number of seconds in (0, 600]".into()),
    }
}

fn millis(text: &str) -> Result<Duration, String> {
    text.parse::<u64>()
        .map(Duration::from_millis)
        .map_err(|_| "a whole number of milliseconds".into())
}

fn parse_args() -> Options {
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

/// Percentiles of a sample, in milliseconds (nearest rank).
#[derive(Debug, Clone, Copy)]
struct Summary {
    n: usize,
    p50: f64,
    p90: f64,
    p99: f64,
    max: f64,
}

fn summarize(samples: &[Duration]) -> Option<Summary> {
    if samples.is_empty() {
        return None;
    }
    let mut ms: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1000.0).collect();
    ms.sort_by(f64::total_cmp);
    let rank = |p: f64| {
        let index = ((p / 100.0) * ms.len() as f64).ceil() as usize;
        ms[index.clamp(1, ms.len()) - 1]
    };
    Some(Summary {
        n: ms.len(),
        p50: rank(50.0),
        p90: rank(90.0),
        p99: rank(99.0),
        max: ms[ms.len() - 1],
    })
}

/// What the run measured, printed as one table at the end.
#[derive(Default)]
struct Results {
    fsync: Option<Summary>,
    /// The same with push-latency's pause before each sync.
    fsync_paced: Option<Summary>,
    sse: Option<Summary>,
    ws: Option<Summary>,
    push_lost: Option<(usize, usize, usize)>,
    /// Push latency with the archive on PostgreSQL and the subscribers on an API replica.
    push_replica: Option<PushLatency>,
    /// In-process: decode, durable commit, read back, durable commit on PostgreSQL (see
    /// `breakdown::push_path`).
    push_path: Option<[Option<Summary>; 4]>,
    ingest: Option<Ingest>,
    fan_out: Vec<fanout::FanOut>,
    feed_reads: Vec<breakdown::FeedReads>,
    wasm: Option<wasm_cost::WasmCost>,
    query: Option<archive::QueryResults>,
    query_postgres: Option<archive::QueryResults>,
    frames: Vec<frames::FrameMemory>,
}

struct Ingest {
    frames: u64,
    versions: u64,
    push_secs: f64,
    total_secs: f64,
    /// Reception records archived by the end of the push phase (as last polled).
    archived_during_push: u64,
}

/// VmRSS and VmHWM of a process, in kB.
fn proc_memory(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|kb| kb.parse::<u64>().ok())
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

/// CPU time (user + system) a process has used so far, in seconds.
fn proc_cpu_secs(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the parenthesised name, which may itself hold spaces: utime and stime are the 12th and 13th.
    let rest = &stat[stat.rfind(')')? + 2..];
    let mut fields = rest.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    let ticks = rustix::param::clock_ticks_per_second().max(1) as f64;
    Some((utime + stime) as f64 / ticks)
}

/// Raises this process's open-file limit to its hard limit (children inherit it); returns the new soft limit.
fn raise_fd_limit() -> u64 {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut limit = getrlimit(Resource::Nofile);
    limit.current = limit.maximum;
    let _ = setrlimit(Resource::Nofile, limit);
    getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX)
}

// ---------------------------------------------------------------------------------------------------------
// The server under test

/// A running `osds serve` on a fresh database in its own directory (removed with it), with the per-client
/// limits out of the way.
async fn start_server(osds: &Path, root: &Path, label: &str, upstream: &str) -> Result<Server> {
    start_server_with(osds, root, label, upstream, None, &[]).await
}

/// Like [`start_server`], on the archive at `database_url` when given, with more `osds serve` arguments.
async fn start_server_with(
    osds: &Path,
    root: &Path,
    label: &str,
    upstream: &str,
    database_url: Option<&str>,
    extra: &[&str],
) -> Result<Server> {
    let dir = root.join(format!("osds-bench-{label}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut launch = Launch::new(osds, dir);
    if let Some(url) = database_url {
        launch = launch.database_url(url);
    }
    let launch = launch
        .args(["--upstream-url", upstream])
        .args(UNLIMITED)
        .args(extra.iter().copied());
    // Waiting for the line blocks: off the runtime's threads, which serve the relay meanwhile.
    Ok(tokio::task::spawn_blocking(move || launch.start())
        .await??
        .removing_dir())
}

/// The gateway's per-client limits, raised out of the way: every benchmark client comes from one address.
pub const UNLIMITED: [&str; 8] = [
    "--rate-limit-burst",
    "100000000",
    "--rate-limit-per-sec",
    "100000000",
    "--max-connections-per-client",
    "100000",
    "--max-open-connections-per-client",
    "200000",
];

/// The relay and a server connected to it on all five paths.
async fn start_connected(options: &Options, label: &str) -> Result<(FakeRelay, Server)> {
    let relay = FakeRelay::start(RelayConfig::default()).await?;
    let server = start_server(&options.osds, &options.dir, label, &relay.url()).await?;
    for path in fake_relay::channel_paths() {
        if !relay.wait_connected(path, 1, Duration::from_secs(30)).await {
            bail!("osds serve never connected {path} to the relay");
        }
    }
    Ok((relay, server))
}

async fn get_json(client: &reqwest::Client, url: &str) -> Result<Value> {
    let response = client.get(url).send().await?.error_for_status()?;
    Ok(response.json().await?)
}

/// A `cq_eew` frame like the relay sends; `event` makes the EventID unique, `revision` the ReportNum.
fn cq_frame(tag: &str, event: u64, revision: u64) -> String {
    format!(
        r#"{{"type":"cq_eew","ID":"{tag}{event}r{revision}","EventID":"{tag}{event:08}_{revision}","ReportTime":"2026-09-10 10:10:25","ReportNum":{revision},"OriginTime":"2026-09-10 10:10:10","HypoCenter":"重庆荣昌区","Latitude":29.4,"Longitude":105.5,"Magnitude":4.1,"Depth":8,"MaxIntensity":5.9}}"#
    )
}

// ---------------------------------------------------------------------------------------------------------
// fsync floor

/// `rounds` durable appends, back to back or each after `pause` (the disk idle in between, as between paced
/// reports: on this machine's virtual disk a sync after an idle spell costs about three times one that follows
/// another at once).
fn fsync_floor(dir: &Path, rounds: usize, pause: Option<Duration>) -> Result<Vec<Duration>> {
    let path = dir.join(format!("osds-bench-fsync-{}", std::process::id()));
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(&path)
        .with_context(|| format!("open {}", path.display()))?;
    let record = [0x5a_u8; 64];
    let mut samples = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        if let Some(pause) = pause {
            std::thread::sleep(pause);
        }
        let start = Instant::now();
        file.write_all(&record)?;
        file.sync_data()?;
        samples.push(start.elapsed());
    }
    drop(file);
    let _ = std::fs::remove_file(&path);
    Ok(samples)
}

// ---------------------------------------------------------------------------------------------------------
// push latency

/// Reads `/stream` and sends (upstreamEventId, arrival) of every `report` event; the first message says ready.
async fn sse_subscriber(
    url: String,
    tx: mpsc::UnboundedSender<(String, Instant)>,
    ready: mpsc::Sender<()>,
) -> Result<()> {
    let response = reqwest::Client::new()
        .get(&url)
        .send()
        .await?
        .error_for_status()?;
    let mut body = response.bytes_stream();
    let mut framer = SseFramer::default();
    let mut ready = Some(ready);
    while let Some(chunk) = body.next().await {
        let arrived = Instant::now();
        framer.push(&chunk?);
        while let Some(message) = framer.next_message() {
            let message = message.context("SSE is UTF-8")?;
            match message.event.as_deref() {
                Some("ready") => {
                    if let Some(ready) = ready.take() {
                        let _ = ready.send(()).await;
                    }
                }
                Some("report") => {
                    let report: Value = message.try_json().context("SSE report is JSON")?;
                    if let Some(id) = report["upstreamEventId"].as_str() {
                        let _ = tx.send((id.to_string(), arrived));
                    }
                }
                _ => {}
            }
        }
    }
    Ok(())
}

/// Reads `/ws` and sends (upstreamEventId, arrival) of every `report` message.
async fn ws_subscriber(
    url: String,
    tx: mpsc::UnboundedSender<(String, Instant)>,
    ready: mpsc::Sender<()>,
) -> Result<()> {
    let (mut socket, _) = tokio_tungstenite::connect_async(&url).await?;
    let mut ready = Some(ready);
    while let Some(message) = socket.next().await {
        let arrived = Instant::now();
        let Message::Text(text) = message? else {
            continue;
        };
        let message: Value = serde_json::from_str(&text).context("WebSocket message is JSON")?;
        match message["type"].as_str() {
            Some("ready") => {
                if let Some(ready) = ready.take() {
                    let _ = ready.send(()).await;
                }
            }
            Some("report") => {
                if let Some(id) = message["data"]["upstreamEventId"].as_str() {
                    let _ = tx.send((id.to_string(), arrived));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// Frames pushed before push-latency measures.
const PUSH_WARMUP: u64 = 20;

/// What one push-latency run saw.
struct PushLatency {
    sse: Option<Summary>,
    ws: Option<Summary>,
    /// Frames measured, and how many of them the SSE and the WebSocket subscriber never saw.
    lost: (usize, usize, usize),
}

/// Pushes `options.frames` frames (after a warm-up) through `relay` at `options.interval` and times each until
/// an SSE and a WebSocket subscriber of `server` have it.
async fn measure_push(
    options: &Options,
    relay: &FakeRelay,
    server: &Server,
) -> Result<PushLatency> {
    let (sse_tx, mut sse_rx) = mpsc::unbounded_channel();
    let (ws_tx, mut ws_rx) = mpsc::unbounded_channel();
    let (ready_tx, mut ready_rx) = mpsc::channel(2);
    let sse = tokio::spawn(sse_subscriber(
        server.url("/stream"),
        sse_tx,
        ready_tx.clone(),
    ));
    let ws = tokio::spawn(ws_subscriber(server.ws_url("/ws"), ws_tx, ready_tx));
    for _ in 0..2 {
        tokio::time::timeout(Duration::from_secs(20), ready_rx.recv())
            .await
            .context("subscribers not ready in 20 s")?
            .context("a subscriber failed before it was ready")?;
    }

    let total = PUSH_WARMUP + options.frames as u64;
    let mut sent: HashMap<String, Instant> = HashMap::new();
    let mut pace = tokio::time::interval(options.interval);
    pace.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    for n in 0..total {
        pace.tick().await;
        let frame = cq_frame("L", n, 1);
        let id = format!("L{n:08}_1");
        let at = Instant::now();
        if relay.push_to("/cq_eew", frame.as_bytes()).await != 1 {
            bail!("the relay had no /cq_eew client to push to");
        }
        if n >= PUSH_WARMUP {
            sent.insert(id, at);
        }
    }

    // Collect arrivals until both subscribers saw every frame, or 30 s after the last push.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let (mut sse_seen, mut ws_seen) = (HashMap::new(), HashMap::new());
    while (sse_seen.len() < sent.len() || ws_seen.len() < sent.len())
        && tokio::time::Instant::now() < deadline
    {
        tokio::select! {
            Some((id, at)) = sse_rx.recv() => { if sent.contains_key(&id) { sse_seen.insert(id, at); } }
            Some((id, at)) = ws_rx.recv() => { if sent.contains_key(&id) { ws_seen.insert(id, at); } }
            _ = tokio::time::sleep_until(deadline) => break,
        }
    }
    sse.abort();
    ws.abort();
    let latencies = |seen: &HashMap<String, Instant>| -> Vec<Duration> {
        seen.iter()
            .filter_map(|(id, at)| sent.get(id).map(|sent| at.saturating_duration_since(*sent)))
            .collect()
    };
    Ok(PushLatency {
        sse: summarize(&latencies(&sse_seen)),
        ws: summarize(&latencies(&ws_seen)),
        lost: (
            sent.len(),
            sent.len() - sse_seen.len(),
            sent.len() - ws_seen.len(),
        ),
    })
}

async fn push_latency(options: &Options, results: &mut Results) -> Result<()> {
    let (relay, server) = start_connected(options, "push").await?;
    println!(
        "push-latency: {} frames, one every {} ms (after {PUSH_WARMUP} warm-up frames), one SSE and one WebSocket subscriber",
        options.frames,
        options.interval.as_millis()
    );
    let one = measure_push(options, &relay, &server).await?;
    (results.sse, results.ws, results.push_lost) = (one.sse, one.ws, Some(one.lost));
    drop(server);
    relay.shutdown().await;

    // The same on PostgreSQL, the subscribers on an API replica: relay -> ingester -> commit -> NOTIFY ->
    // replica -> subscriber.
    let deployment = PgDeployment::start(options, "push").await?;
    let replica = deployment.replica(options, "push-replica").await?;
    println!("push-latency: the same with PostgreSQL, subscribers on an API replica");
    let across = measure_push(options, &deployment.relay, &replica).await?;
    results.push_replica = Some(across);
    drop(replica);
    deployment.stop().await;
    println!(
        "push-latency: the server-side steps alone, in-process, {} frames",
        options.frames
    );
    let path = breakdown::push_path(&options.dir, options.frames as u64).await?;
    results.push_path = Some([
        summarize(&path.decode),
        summarize(&path.commit),
        summarize(&path.read_back),
        summarize(&path.postgres_commit),
    ]);
    Ok(())
}

// ---------------------------------------------------------------------------------------------------------
// ingest throughput

async fn ingest(options: &Options, results: &mut Results) -> Result<()> {
    /// Frames the relay may be ahead of the archive: bounds the relay's queue and the drain after the push.
    const WINDOW: u64 = 2_000;
    let (relay, server) = start_connected(options, "ingest").await?;
    let client = reqwest::Client::new();
    let status_url = server.url("/status");
    let archive = get_json(&client, &status_url).await?["archive"].clone();
    let base_deliveries = archive["deliveries"]
        .as_u64()
        .context("archive.deliveries")?;
    let base_versions = archive["versions"].as_u64().context("archive.versions")?;

    // A poller keeps the archived reception count fresh for the push loop's window.
    let committed = Arc::new(AtomicU64::new(0));
    let poller = {
        let committed = committed.clone();
        let client = client.clone();
        let url = status_url.clone();
        tokio::spawn(async move {
            loop {
                if let Ok(status) = get_json(&client, &url).await
                    && let Some(deliveries) = status["archive"]["deliveries"].as_u64()
                {
                    committed.store(deliveries.saturating_sub(base_deliveries), Ordering::SeqCst);
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };

    println!(
        "ingest: pushing for {} s (80 % new versions, 20 % exact duplicates, at most {WINDOW} frames ahead of the archive)",
        options.seconds
    );
    let start = Instant::now();
    let push_for = Duration::from_secs_f64(options.seconds);
    let (mut frames, mut new_versions) = (0_u64, 0_u64);
    let mut last_new = String::new();
    while start.elapsed() < push_for {
        if frames.saturating_sub(committed.load(Ordering::SeqCst)) >= WINDOW {
            tokio::time::sleep(Duration::from_millis(2)).await;
            continue;
        }
        let frame = if frames % 5 == 4 && !last_new.is_empty() {
            last_new.clone()
        } else {
            // Ten revisions per event.
            let frame = cq_frame("I", new_versions / 10, new_versions % 10 + 1);
            new_versions += 1;
            last_new = frame.clone();
            frame
        };
        if relay.push_to("/cq_eew", frame.as_bytes()).await != 1 {
            bail!("the relay had no /cq_eew client to push to");
        }
        frames += 1;
        if frames % 256 == 0 {
            tokio::task::yield_now().await;
        }
    }
    let push_secs = start.elapsed().as_secs_f64();
    poller.abort();
    let archived_during_push = committed.load(Ordering::SeqCst);

    // Drain: every frame has its reception record.
    let deadline = Instant::now() + Duration::from_secs(120);
    let (deliveries, versions) = loop {
        let archive = get_json(&client, &status_url).await?["archive"].clone();
        let deliveries = archive["deliveries"]
            .as_u64()
            .unwrap_or(0)
            .saturating_sub(base_deliveries);
        let versions = archive["versions"]
            .as_u64()
            .unwrap_or(0)
            .saturating_sub(base_versions);
        if deliveries >= frames {
            break (deliveries, versions);
        }
        if Instant::now() > deadline {
            bail!("only {deliveries} of {frames} frames archived 120 s after the push ended");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let total_secs = start.elapsed().as_secs_f64();
    if versions != new_versions {
        println!(
            "ingest: warning: {versions} versions archived, {new_versions} new versions pushed"
        );
    }
    results.ingest = Some(Ingest {
        frames: deliveries,
        versions,
        push_secs,
        total_secs,
        archived_during_push,
    });
    drop(server);
    relay.shutdown().await;
    Ok(())
}

// ---------------------------------------------------------------------------------------------------------
// fan-out

async fn fan_out(options: &Options, results: &mut Results) -> Result<()> {
    let nofile = raise_fd_limit();
    let largest = options.subscribers.iter().copied().max().unwrap_or(0);
    if (nofile as usize) < largest + 500 {
        bail!(
            "the open-file limit is {nofile}; {largest} subscribers need more (raise the hard limit: ulimit -Hn)"
        );
    }
    let peers = options.peers && nchan::Nginx::available();
    if options.peers && !peers {
        println!(
            "fan-out: nginx + nchan not installed (bench/install-peers.sh); measuring osds only"
        );
    }
    // Push latency of both, the same way: one SSE and one WebSocket subscriber, reports paced by --interval-ms.
    let mut sizes = vec![(2, options.frames, options.interval)];
    for &n in &options.subscribers {
        sizes.push((n, options.rounds, options.round_interval));
    }
    for (n, rounds, interval) in sizes {
        println!(
            "fan-out: osds, {n} subscribers, {rounds} reports {} ms apart",
            interval.as_millis()
        );
        let (relay, server) = start_connected(options, "fanout").await?;
        let target = fanout::Target {
            name: "osds",
            sse_urls: vec![server.url("/stream")],
            ws_urls: vec![server.ws_url("/ws")],
            ready_message: true,
            pids: vec![server.pid()],
        };
        let protocol = if n == 2 {
            fanout::Protocol::Mix
        } else {
            options.protocol
        };
        let outcome = fanout::run(
            &target,
            &fanout::Publisher::Relay(&relay),
            n,
            protocol,
            rounds,
            interval,
        )
        .await;
        drop(server);
        relay.shutdown().await;
        results.fan_out.push(outcome?);
        if n > 2 {
            println!(
                "fan-out: osds on PostgreSQL, an ingester and 2 API replicas with {n} subscribers between them"
            );
            results
                .fan_out
                .push(fan_out_on_replicas(options, n, protocol, rounds, interval).await?);
        }
        if peers {
            println!("fan-out: nginx + nchan, {n} subscribers");
            let nginx = nchan::Nginx::start(&options.dir, 2, n + 1_000)?;
            let base = nginx.base();
            let target = fanout::Target {
                name: "nchan",
                sse_urls: vec![format!("http://{base}/sub")],
                ws_urls: vec![format!("ws://{base}/sub")],
                ready_message: false,
                pids: nginx.pids(),
            };
            let publisher = fanout::Publisher::Nchan {
                client: reqwest::Client::new(),
                url: format!("http://{base}/pub"),
            };
            let outcome = fanout::run(&target, &publisher, n, protocol, rounds, interval).await;
            drop(nginx);
            results.fan_out.push(outcome?);
        }
        // Let the closed connections' TIME_WAIT state not pile up between sizes.
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let mut readers = vec![1];
    readers.extend(&options.subscribers);
    results.feed_reads = breakdown::feed_reads(&options.dir, &readers).await?;
    Ok(())
}

/// Fan-out with the archive on PostgreSQL: one ingester, and `subscribers` spread over two API replicas (woken
/// by the ingester's commits through LISTEN/NOTIFY). Memory and CPU are the replicas'.
async fn fan_out_on_replicas(
    options: &Options,
    subscribers: usize,
    protocol: fanout::Protocol,
    rounds: usize,
    interval: Duration,
) -> Result<fanout::FanOut> {
    let deployment = PgDeployment::start(options, "fanout").await?;
    let mut replicas = Vec::new();
    for label in ["fanout-replica-1", "fanout-replica-2"] {
        replicas.push(deployment.replica(options, label).await?);
    }
    let target = fanout::Target {
        name: "pg-2rep",
        sse_urls: replicas.iter().map(|r| r.url("/stream")).collect(),
        ws_urls: replicas.iter().map(|r| r.ws_url("/ws")).collect(),
        ready_message: true,
        pids: replicas.iter().map(Server::pid).collect(),
    };
    let outcome = fanout::run(
        &target,
        &fanout::Publisher::Relay(&deployment.relay),
        subscribers,
        protocol,
        rounds,
        interval,
    )
    .await;
    drop(replicas);
    deployment.stop().await;
    outcome
}

/// An archive on a throwaway PostgreSQL cluster with one ingester on its own relay; API replicas join it.
struct PgDeployment {
    /// Kept for the deployment's life (stopped and deleted when dropped).
    _cluster: osds_store::test_postgres::Cluster,
    database: String,
    relay: FakeRelay,
    ingester: Server,
}

impl PgDeployment {
    async fn start(options: &Options, label: &str) -> Result<PgDeployment> {
        let cluster = osds_store::test_postgres::Cluster::start(&format!("bench-{label}"));
        let database = cluster.database("osds").await;
        let relay = FakeRelay::start(RelayConfig::default()).await?;
        let ingester = start_server_with(
            &options.osds,
            &options.dir,
            &format!("{label}-ingester"),
            &relay.url(),
            Some(&database),
            &["--ingester-name", "bench"],
        )
        .await?;
        for path in fake_relay::channel_paths() {
            if !relay.wait_connected(path, 1, Duration::from_secs(30)).await {
                bail!("the ingester never connected {path} to the relay");
            }
        }
        Ok(PgDeployment {
            _cluster: cluster,
            database,
            relay,
            ingester,
        })
    }

    /// An API replica (`--no-ingest`) on the deployment's archive.
    async fn replica(&self, options: &Options, label: &str) -> Result<Server> {
        start_server_with(
            &options.osds,
            &options.dir,
            label,
            &self.relay.url(),
            Some(&self.database),
            &["--no-ingest"],
        )
        .await
    }

    async fn stop(self) {
        drop(self.ingester);
        self.relay.shutdown().await;
    }
}

// ---------------------------------------------------------------------------------------------------------

fn print_table(options: &Options, results: &Results) {
    println!();
    println!(
        "osds-bench results ({}; {} CPUs)",
        options.osds.display(),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!("{:-<86}", "");
    println!(
        "{:<40} {:>6} {:>8} {:>8} {:>8} {:>8}",
        "latency (ms)", "n", "p50", "p90", "p99", "max"
    );
    let row = |name: &str, summary: &Option<Summary>| {
        if let Some(s) = summary {
            println!(
                "{name:<40} {:>6} {:>8.3} {:>8.3} {:>8.3} {:>8.3}",
                s.n, s.p50, s.p90, s.p99, s.max
            );
        }
    };
    row("fsync floor (64 B append + sync_data)", &results.fsync);
    row("  the same, each after an idle pause", &results.fsync_paced);
    row("push -> SSE report", &results.sse);
    row("push -> WebSocket report", &results.ws);
    if let Some((sent, sse_lost, ws_lost)) = results.push_lost {
        println!(
            "{:<40} {sent} measured frames; missing at SSE {sse_lost}, at WebSocket {ws_lost}",
            "push-latency frames"
        );
    }
    if let Some(replica) = &results.push_replica {
        row("PostgreSQL: push -> SSE on a replica", &replica.sse);
        row("PostgreSQL: push -> WS on a replica", &replica.ws);
        let (sent, sse_lost, ws_lost) = replica.lost;
        println!(
            "{:<40} {sent} measured frames; missing at SSE {sse_lost}, at WebSocket {ws_lost}",
            "  replica frames"
        );
        if let (Some(one), Some(across)) = (results.sse, replica.sse) {
            println!(
                "{:<40} {:.1}x",
                "ratio SSE p50 replica / one process",
                across.p50 / one.p50
            );
        }
    }
    if let Some([decode, commit, read_back, postgres_commit]) = &results.push_path {
        row("  in-process: cq decode (Wasm, warm)", decode);
        row("  in-process: durable commit, 1 frame", commit);
        row("  in-process: read back + render", read_back);
        row("  the same commit on PostgreSQL (local)", postgres_commit);
        if let (Some(sqlite), Some(postgres)) = (commit, postgres_commit) {
            println!(
                "{:<40} {:.1}x",
                "ratio commit p50 PostgreSQL / SQLite",
                postgres.p50 / sqlite.p50
            );
        }
    }
    for (floor, label) in [
        (results.fsync, "fsync"),
        (results.fsync_paced, "idle fsync"),
    ] {
        let Some(floor) = floor else { continue };
        for (name, summary) in [("SSE", results.sse), ("WebSocket", results.ws)] {
            if let Some(s) = summary {
                println!(
                    "{:<40} {:.1}x",
                    format!("ratio push->{name} p50 / {label} p50"),
                    s.p50 / floor.p50
                );
            }
        }
    }
    if let Some(ingest) = &results.ingest {
        println!("{:-<86}", "");
        println!(
            "{:<40} {} frames ({} new versions) pushed in {:.1} s, all archived after {:.1} s",
            "ingest", ingest.frames, ingest.versions, ingest.push_secs, ingest.total_secs
        );
        println!(
            "{:<40} {:.0} frames/s",
            "ingest sustained",
            ingest.frames as f64 / ingest.total_secs
        );
        println!(
            "{:<40} {:.0} versions/s",
            "ingest sustained",
            ingest.versions as f64 / ingest.total_secs
        );
        println!(
            "{:<40} {:.0} frames/s ({} archived while pushing)",
            "ingest during the push phase",
            ingest.archived_during_push as f64 / ingest.push_secs,
            ingest.archived_during_push
        );
        if let Some(fsync) = results.fsync {
            println!(
                "{:<40} {:.3} ms per frame vs fsync p50 {:.3} ms",
                "ingest cost per frame",
                ingest.total_secs * 1000.0 / ingest.frames.max(1) as f64,
                fsync.p50
            );
        }
    }
    println!("{:-<86}", "");
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> Result<()> {
    let options = parse_args();
    if !matches!(options.which, Which::Fsync | Which::Wasm) && !options.osds.is_file() {
        bail!(
            "no osds binary at {} (build it: cargo build --release -p osds, or pass --osds)",
            options.osds.display()
        );
    }
    std::fs::create_dir_all(&options.dir)
        .with_context(|| format!("create {}", options.dir.display()))?;
    let mut results = Results::default();

    println!(
        "fsync: 200 x (append 64 B + sync_data) in {}",
        options.dir.display()
    );
    let dir = options.dir.clone();
    results.fsync =
        summarize(&tokio::task::spawn_blocking(move || fsync_floor(&dir, 200, None)).await??);

    if matches!(options.which, Which::PushLatency | Which::All) {
        println!(
            "fsync: 200 x the same, each after {} ms idle (push-latency's pace)",
            options.interval.as_millis()
        );
        let (dir, pause) = (options.dir.clone(), options.interval);
        results.fsync_paced = summarize(
            &tokio::task::spawn_blocking(move || fsync_floor(&dir, 200, Some(pause))).await??,
        );
        push_latency(&options, &mut results)
            .await
            .context("push-latency")?;
    }
    if matches!(options.which, Which::Ingest | Which::All) {
        ingest(&options, &mut results).await.context("ingest")?;
    }
    if matches!(options.which, Which::Wasm | Which::All) {
        let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures");
        let samples = options.samples.clone();
        println!("wasm: decoding the fixtures and samples as components and natively");
        results.wasm = Some(
            tokio::task::spawn_blocking(move || {
                wasm_cost::run(&fixtures, samples.as_deref(), 2_000)
            })
            .await?
            .context("wasm")?,
        );
    }
    let wrk_options = archive::WrkOptions {
        threads: 2,
        connections: options.wrk_connections,
        seconds: options.wrk_seconds,
        warmup_seconds: options.wrk_warmup_seconds,
    };
    let serve_args: Vec<String> = options
        .report_cache_mb
        .map(|mb| vec!["--report-cache-mb".to_string(), mb.to_string()])
        .unwrap_or_default();
    if matches!(options.which, Which::Query | Which::All) {
        if options.datasette.is_none() {
            println!(
                "query: datasette not installed (bench/install-peers.sh); measuring osds only"
            );
        }
        results.query = Some(
            archive::run(
                &options.osds,
                &options.dir,
                options.versions,
                options.reuse_archive,
                options.datasette.clone(),
                &wrk_options,
                &serve_args,
            )
            .await
            .context("query")?,
        );
    }
    if matches!(options.which, Which::QueryPostgres | Which::All) {
        results.query_postgres = Some(
            archive::run_postgres(
                &options.osds,
                &options.dir,
                options.versions,
                &wrk_options,
                &serve_args,
            )
            .await
            .context("query-postgres")?,
        );
    }
    if matches!(options.which, Which::FanOut | Which::All) {
        fan_out(&options, &mut results).await.context("fan-out")?;
    }
    if matches!(options.which, Which::BigFrames | Which::All) {
        let sizes: Vec<usize> = options.frame_mb.iter().map(|mb| mb * 1_000_000).collect();
        results.frames = frames::run(&options.osds, &options.dir, &sizes)
            .await
            .context("big-frames")?;
    }
    let limiter = if matches!(options.which, Which::Limiter | Which::All) {
        limiter::run(&options.osds, &options.dir, &options.limiter_clients)
            .await
            .context("limiter")?
    } else {
        Vec::new()
    };
    print_table(&options, &results);
    limiter::print(&limiter);
    if let Some(cost) = &results.wasm {
        wasm_cost::print(cost);
    }
    fanout::print(&results.fan_out);
    frames::print(&results.frames);
    for reads in &results.feed_reads {
        println!(
            "feed reads: {:>5} concurrent Store::reports_after (one per subscriber) took {:8.1} ms; one alone {:.0} us",
            reads.readers,
            reads.all_secs * 1000.0,
            reads.single_us
        );
    }
    if let Some(query) = &results.query_postgres {
        println!();
        println!("query on PostgreSQL (local, over its Unix socket):");
        archive::print(query, &wrk_options);
    }
    if let Some(query) = &results.query {
        archive::print(query, &wrk_options);
    }
    Ok(())
}

#[cfg(test)]
mod readme_tests {
    use super::Options;
    use clap::Parser;

    /// The README's `bench/run.sh ARGS` lines are arguments `osds-bench` takes (run.sh passes them on).
    #[test]
    fn the_readme_run_sh_lines_parse() {
        let lines =
            osds_testkit::readme::invocations(&osds_testkit::readme::readme(), &["bench/run.sh"]);
        let given: Vec<_> = lines.into_iter().filter(|l| !l.is_empty()).collect();
        assert!(given.len() >= 2, "{given:?}");
        for line in given {
            let args = std::iter::once("osds-bench".to_owned()).chain(line.iter().cloned());
            if let Err(e) = Options::try_parse_from(args) {
                panic!("`bench/run.sh {}` does not parse:\n{e}", line.join(" "));
            }
        }
    }
}
