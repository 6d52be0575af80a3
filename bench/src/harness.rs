//! What the benchmarks share: starting the real `osds serve` (and PostgreSQL deployments), live
//! subscribers, test frames, process memory and CPU, the fsync floor, percentile summaries.

use anyhow::{Context, Result, bail};
use fake_relay::{FakeRelay, RelayConfig};
use futures_util::StreamExt;
use osds_testkit::server::{Launch, Server};
use osds_testkit::sse::SseFramer;
use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;

/// Percentiles of a sample, in milliseconds (nearest rank).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Summary {
    pub(crate) n: usize,
    pub(crate) p50: f64,
    pub(crate) p90: f64,
    pub(crate) p99: f64,
    pub(crate) max: f64,
}

pub(crate) fn summarize(samples: &[Duration]) -> Option<Summary> {
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

/// VmRSS and VmHWM of a process, in kB.
pub(crate) fn proc_memory(pid: u32) -> Option<(u64, u64)> {
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
pub(crate) fn proc_cpu_secs(pid: u32) -> Option<f64> {
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
pub(crate) fn raise_fd_limit() -> u64 {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut limit = getrlimit(Resource::Nofile);
    limit.current = limit.maximum;
    let _ = setrlimit(Resource::Nofile, limit);
    getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX)
}

/// A running `osds serve` on a fresh database in its own directory (removed with it), with the per-client
/// limits out of the way.
pub(crate) async fn start_server(
    osds: &Path,
    root: &Path,
    label: &str,
    upstream: &str,
) -> Result<Server> {
    start_server_with(osds, root, label, upstream, None, &[]).await
}

/// Like [`start_server`], on the archive at `database_url` when given, with more `osds serve` arguments.
pub(crate) async fn start_server_with(
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
pub(crate) const UNLIMITED: [&str; 8] = [
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
pub(crate) async fn start_connected(
    osds: &Path,
    dir: &Path,
    label: &str,
) -> Result<(FakeRelay, Server)> {
    let relay = FakeRelay::start(RelayConfig::default()).await?;
    let server = start_server(osds, dir, label, &relay.url()).await?;
    all_connected(&relay).await?;
    Ok((relay, server))
}

/// Waits until a server has connected every channel path of `relay` (30 s at most).
pub(crate) async fn all_connected(relay: &FakeRelay) -> Result<()> {
    for path in fake_relay::channel_paths() {
        if !relay.wait_connected(path, 1, Duration::from_secs(30)).await {
            bail!("osds serve never connected {path} to the relay");
        }
    }
    Ok(())
}

pub(crate) async fn get_json(client: &reqwest::Client, url: &str) -> Result<Value> {
    let response = client.get(url).send().await?.error_for_status()?;
    Ok(response.json().await?)
}

/// A `cq_eew` frame like the relay sends; `event` makes the EventID unique, `revision` the ReportNum.
pub(crate) fn cq_frame(tag: &str, event: u64, revision: u64) -> String {
    format!(
        r#"{{"type":"cq_eew","ID":"{tag}{event}r{revision}","EventID":"{tag}{event:08}_{revision}","ReportTime":"2026-09-10 10:10:25","ReportNum":{revision},"OriginTime":"2026-09-10 10:10:10","HypoCenter":"重庆荣昌区","Latitude":29.4,"Longitude":105.5,"Magnitude":4.1,"Depth":8,"MaxIntensity":5.9}}"#
    )
}

/// `rounds` durable appends, back to back or each after `pause` (the disk idle in between, as between paced
/// reports: on this machine's virtual disk a sync after an idle spell costs about three times one that follows
/// another at once).
pub(crate) fn fsync_floor(
    dir: &Path,
    rounds: usize,
    pause: Option<Duration>,
) -> Result<Vec<Duration>> {
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

/// Reads `/stream` and sends (upstreamEventId, arrival) of every `report` event; the first message says ready.
pub(crate) async fn sse_subscriber(
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
pub(crate) async fn ws_subscriber(
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

/// An archive on a throwaway PostgreSQL cluster with one ingester on its own relay; API replicas join it.
pub(crate) struct PgDeployment {
    /// Kept for the deployment's life (stopped and deleted when dropped).
    pub(crate) _cluster: osds_store::test_postgres::Cluster,
    pub(crate) database: String,
    pub(crate) relay: FakeRelay,
    pub(crate) ingester: Server,
    /// The binary and the folder replicas are started with.
    osds: PathBuf,
    dir: PathBuf,
}

impl PgDeployment {
    pub(crate) async fn start(osds: &Path, dir: &Path, label: &str) -> Result<PgDeployment> {
        let cluster = osds_store::test_postgres::Cluster::start(&format!("bench-{label}"));
        let database = cluster.database("osds").await;
        let relay = FakeRelay::start(RelayConfig::default()).await?;
        let ingester = start_server_with(
            osds,
            dir,
            &format!("{label}-ingester"),
            &relay.url(),
            Some(&database),
            &["--ingester-name", "bench"],
        )
        .await?;
        all_connected(&relay).await?;
        Ok(PgDeployment {
            _cluster: cluster,
            database,
            relay,
            ingester,
            osds: osds.to_path_buf(),
            dir: dir.to_path_buf(),
        })
    }

    /// An API replica (`--no-ingest`) on the deployment's archive.
    pub(crate) async fn replica(&self, label: &str) -> Result<Server> {
        self.replica_with(label, &[]).await
    }

    /// An API replica with more `osds serve` arguments.
    pub(crate) async fn replica_with(&self, label: &str, extra: &[&str]) -> Result<Server> {
        let mut args = vec!["--no-ingest"];
        args.extend_from_slice(extra);
        start_server_with(
            &self.osds,
            &self.dir,
            label,
            &self.relay.url(),
            Some(&self.database),
            &args,
        )
        .await
    }

    pub(crate) async fn stop(self) {
        drop(self.ingester);
        self.relay.shutdown().await;
    }
}
