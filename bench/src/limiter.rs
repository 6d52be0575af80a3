//! `limiter`: what a request costs the per-client limits as the number of clients they remember grows.
//!
//! `osds serve --no-ingest` with the spec's burst (80) and a refill so slow (0.001/s) that no client's state is
//! back to full during the run, so the limiter must keep every one. Clients are distinct loopback addresses
//! (127.0.0.0/8 is all loopback on Linux): each fill client makes one request from its own address over its own
//! connection. After each fill step, `MEASURED` requests to `/api/v1/` (cheap, behind the limits) come from
//! fresh measuring addresses, 80 each over one kept-alive connection, `PARALLEL` at once; beside them the same
//! number to `/livez` (outside the limits) is the floor. Per request: the server's CPU time (from
//! `/proc/PID/stat`) and the latency each client saw.

use anyhow::{Context, Result, bail};
use osds_testkit::server::{Launch, Server};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::time::Instant;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Requests measured per step and path.
const MEASURED: usize = 8_000;
/// Requests each measuring address makes (the burst: all are answered 200).
const PER_CLIENT: usize = 80;
/// Clients at once, when filling and when measuring.
const PARALLEL: usize = 8;

pub struct Row {
    pub clients: usize,
    pub path: &'static str,
    pub cpu_us: f64,
    pub per_second: f64,
    pub p50_us: f64,
    pub p99_us: f64,
}

/// The `n`-th loopback address of a block (`block` 10.. for fill clients, 200.. for measuring ones), never
/// ending in .0 or .255.
fn address(block: u8, n: usize) -> Ipv4Addr {
    let third = (n / 254) % 254 + 1;
    let second = n / (254 * 254);
    Ipv4Addr::new(127, block + second as u8, third as u8, (n % 254 + 1) as u8)
}

/// One request from `source` over a new connection; its status code.
async fn one_request(source: Ipv4Addr, server: SocketAddr) -> Result<u16> {
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.bind(SocketAddr::new(IpAddr::V4(source), 0))?;
    let mut stream = socket.connect(server).await?;
    stream
        .write_all(b"GET /api/v1/ HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n")
        .await?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await?;
    let status = std::str::from_utf8(answer.get(9..12).unwrap_or_default())
        .ok()
        .and_then(|s| s.parse().ok())
        .context("no status line")?;
    Ok(status)
}

/// Makes `fill` new clients, numbered from `from`, `PARALLEL` at a time.
async fn fill(server: SocketAddr, from: usize, to: usize) -> Result<()> {
    let mut next = from;
    while next < to {
        let batch: Vec<usize> = (next..to.min(next + 64 * PARALLEL)).collect();
        next += batch.len();
        let mut tasks = tokio::task::JoinSet::new();
        for chunk in batch.chunks(64) {
            let chunk = chunk.to_vec();
            tasks.spawn(async move {
                for n in chunk {
                    let status = one_request(address(10, n), server).await?;
                    if status != 200 {
                        bail!("fill client {n}: {status}");
                    }
                }
                anyhow::Ok(())
            });
        }
        while let Some(done) = tasks.join_next().await {
            done??;
        }
    }
    Ok(())
}

/// `MEASURED` requests to `path` from measuring addresses numbered from `first`; returns the row.
async fn measure(server: &Server, clients: usize, path: &'static str, first: usize) -> Result<Row> {
    let url = format!("{}{path}", server.base.trim_end_matches("/api/v1"));
    let cpu_before =
        crate::harness::proc_cpu_secs(server.pid()).context("the server's CPU time")?;
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    let measuring = MEASURED / PER_CLIENT;
    for lane in 0..PARALLEL {
        let url = url.clone();
        tasks.spawn(async move {
            let mut latencies = Vec::new();
            for k in (lane..measuring).step_by(PARALLEL) {
                let client = reqwest::Client::builder()
                    .local_address(IpAddr::V4(address(200, first + k)))
                    .pool_max_idle_per_host(1)
                    .build()?;
                for _ in 0..PER_CLIENT {
                    let at = Instant::now();
                    let response = client.get(&url).send().await?;
                    let status = response.status();
                    response.bytes().await?;
                    latencies.push(at.elapsed());
                    if status != 200 {
                        bail!("{url}: {status}");
                    }
                }
            }
            anyhow::Ok(latencies)
        });
    }
    let mut latencies = Vec::new();
    while let Some(done) = tasks.join_next().await {
        latencies.extend(done??);
    }
    let wall = started.elapsed();
    let cpu =
        crate::harness::proc_cpu_secs(server.pid()).context("the server's CPU time")? - cpu_before;
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e6;
    Ok(Row {
        clients,
        path,
        cpu_us: cpu * 1e6 / latencies.len() as f64,
        per_second: latencies.len() as f64 / wall.as_secs_f64(),
        p50_us: at(0.5),
        p99_us: at(0.99),
    })
}

pub async fn run(osds: &Path, root: &Path, steps: &[usize]) -> Result<Vec<Row>> {
    let dir = root.join(format!("osds-bench-limiter-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let launch = Launch::new(osds, dir).args([
        "--no-ingest",
        "--rate-limit-per-sec",
        "0.001",
        "--rate-limit-burst",
        "80",
    ]);
    let server = tokio::task::spawn_blocking(move || launch.start())
        .await??
        .removing_dir();
    let address: SocketAddr = server
        .base
        .trim_start_matches("http://")
        .trim_end_matches("/api/v1")
        .parse()
        .context("the server's address")?;
    let mut rows = Vec::new();
    let mut filled = 0;
    let mut measuring = 0;
    for &clients in steps {
        println!("limiter: {clients} clients remembered");
        fill(address, filled, clients).await?;
        filled = filled.max(clients);
        for path in ["/api/v1/", "/livez"] {
            rows.push(measure(&server, clients, path, measuring).await?);
            measuring += MEASURED / PER_CLIENT;
        }
    }
    Ok(rows)
}

pub fn print(rows: &[Row]) {
    if rows.is_empty() {
        return;
    }
    println!();
    println!(
        "limiter: {MEASURED} requests per row, {PER_CLIENT} per measuring address over one connection, {PARALLEL} at once"
    );
    println!(
        "  clients remembered  path        server CPU us/request   requests/s   p50 us   p99 us"
    );
    for row in rows {
        println!(
            "  {:>18}  {:<10}  {:>21.1}   {:>10.0}   {:>6.0}   {:>6.0}",
            row.clients, row.path, row.cpu_us, row.per_second, row.p50_us, row.p99_us
        );
    }
}
