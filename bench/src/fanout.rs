//! Fan-out: N concurrent live subscribers (half SSE, half WebSocket) of one publisher, each of which must
//! receive every published report. The same harness drives `osds serve` (published through the fake relay, so a
//! report goes relay → ingest → durable commit → every subscriber) and nginx + nchan (published with an HTTP POST
//! to its publisher location), so the two are measured the same way.

use crate::harness::{Summary, cq_frame, proc_cpu_secs, proc_memory, summarize};
use anyhow::{Context, Result, anyhow, bail};
use fake_relay::FakeRelay;
use futures_util::StreamExt;
use osds_testkit::sse::SseFramer;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::{Semaphore, mpsc};
use tokio_tungstenite::tungstenite::Message;

/// Upstream event id prefix of the warm-up reports (not measured).
const WARM: char = 'W';
/// Upstream event id prefix of the measured reports.
const MEASURED: char = 'F';
/// Subscribers connecting at once.
const CONNECT_CONCURRENCY: usize = 200;

/// Where the subscribers connect and how they know they are subscribed.
pub struct Target {
    pub name: &'static str,
    /// Where subscribers connect, spread over the list by subscriber index (one URL per process serving them).
    pub sse_urls: Vec<String>,
    pub ws_urls: Vec<String>,
    /// osds sends a `ready` message once the subscription is in place; nchan subscribes before it answers.
    pub ready_message: bool,
    /// The process(es) whose memory is reported.
    pub pids: Vec<u32>,
}

/// How a report is published.
pub enum Publisher<'a> {
    /// A `cq_eew` frame pushed by the fake relay to `osds serve`'s `/cq_eew` socket.
    Relay(&'a FakeRelay),
    /// An HTTP POST of a report message to nchan's publisher location.
    Nchan {
        client: reqwest::Client,
        url: String,
    },
}

impl Publisher<'_> {
    /// Publishes report `number` with id prefix `tag`; returns the time taken just before publishing.
    pub async fn publish(&self, tag: char, number: u64) -> Result<Instant> {
        match self {
            Publisher::Relay(relay) => {
                let frame = cq_frame(&tag.to_string(), number, 1);
                let at = Instant::now();
                if relay.push_to("/cq_eew", frame.as_bytes()).await != 1 {
                    bail!("the relay had no /cq_eew client to push to");
                }
                Ok(at)
            }
            Publisher::Nchan { client, url } => {
                let body = nchan_message(tag, number);
                let at = Instant::now();
                let response = client.post(url).body(body).send().await?;
                if !response.status().is_success() {
                    bail!("nchan publish answered {}", response.status());
                }
                Ok(at)
            }
        }
    }
}

/// The message nchan carries: the shape and size of what osds sends on `/ws` for a `cq_eew` report.
pub fn nchan_message(tag: char, number: u64) -> String {
    format!(
        r#"{{"type":"report","id":{number},"data":{{"id":{number},"eventKey":"5c1f7e0d2a9b4c3e8f6a1b2c3d4e5f60","source":"cq","eventId":"{tag}{number:08}","upstreamEventId":"{tag}{number:08}_1","revision":1,"issuedAt":"2026-09-10T02:10:25Z","originAt":"2026-09-10T02:10:10Z","epicenter":"重庆荣昌区","latitude":29.4,"longitude":105.5,"depthKm":8.0,"magnitude":4.1,"maxIntensity":5.9,"isFinal":false,"isCancelled":false,"isTest":false,"receivedAt":"2026-09-10T02:10:26.123456Z","deliveryId":{number},"decoder":"wolfx-cq@0123456789abcdef"}}}}"#
    )
}

/// Which live channel the subscribers use.
#[derive(Debug, Clone, Copy, PartialEq, clap::ValueEnum)]
pub enum Protocol {
    /// Even subscribers SSE, odd WebSocket.
    Mix,
    Sse,
    Ws,
}

impl Protocol {
    fn is_sse(self, index: usize) -> bool {
        match self {
            Protocol::Mix => index.is_multiple_of(2),
            Protocol::Sse => true,
            Protocol::Ws => false,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Protocol::Mix => "SSE+WS",
            Protocol::Sse => "SSE",
            Protocol::Ws => "WS",
        }
    }
}

/// What one fan-out run measured.
pub struct FanOut {
    pub target: &'static str,
    pub subscribers: usize,
    pub protocol: Protocol,
    pub rounds: usize,
    /// Latency from publish to arrival over every (subscriber, round) pair, and per protocol.
    pub all: Option<Summary>,
    pub sse: Option<Summary>,
    pub ws: Option<Summary>,
    /// (subscriber, round) pairs that never arrived.
    pub missing: usize,
    /// Time to connect every subscriber.
    pub connect_secs: f64,
    /// Time from the publish until the last subscriber had the report, per round (p50 and max).
    pub complete: Option<Summary>,
    /// Memory (kB) of the target: at rest before subscribers, with all subscribed, and the peak (VmHWM).
    pub rss_idle_kb: u64,
    pub rss_connected_kb: u64,
    pub rss_after_kb: u64,
    pub hwm_kb: u64,
    /// CPU time (user + system) the target used during the measured rounds, per delivered report, in µs.
    pub cpu_us_per_delivery: f64,
}

/// An arrival: subscriber index, whether measured (else warm-up), report number, time.
type Arrival = (usize, bool, u64, Instant);

/// Finds `"upstreamEventId":"<tag><digits>` in a message and returns (measured, number).
fn find_report(text: &str) -> Option<(bool, u64)> {
    const KEY: &str = "\"upstreamEventId\":\"";
    let start = text.find(KEY)? + KEY.len();
    let rest = &text[start..];
    let tag = rest.chars().next()?;
    let measured = match tag {
        MEASURED => true,
        WARM => false,
        _ => return None,
    };
    let digits: &str = rest[1..].split(|c: char| !c.is_ascii_digit()).next()?;
    Some((measured, digits.parse().ok()?))
}

async fn sse_subscriber(
    index: usize,
    client: reqwest::Client,
    url: String,
    ready_message: bool,
    connected: Arc<AtomicUsize>,
    permit: tokio::sync::OwnedSemaphorePermit,
    tx: mpsc::UnboundedSender<Arrival>,
) -> Result<()> {
    let response = client
        .get(&url)
        .header("Accept", "text/event-stream")
        .send()
        .await?;
    if !response.status().is_success() {
        bail!("SSE subscribe answered {}", response.status());
    }
    let mut permit = Some(permit);
    let mut ready = || {
        if permit.take().is_some() {
            connected.fetch_add(1, Ordering::SeqCst);
        }
    };
    if !ready_message {
        ready();
    }
    let mut body = response.bytes_stream();
    let mut framer = SseFramer::default();
    while let Some(chunk) = body.next().await {
        let arrived = Instant::now();
        framer.push(&chunk?);
        while let Some(message) = framer.next_message() {
            let message = message.context("SSE is UTF-8")?;
            if message.event.as_deref() == Some("ready") {
                ready();
            } else if let Some((measured, number)) = find_report(&message.data) {
                let _ = tx.send((index, measured, number, arrived));
            }
        }
    }
    Err(anyhow!("the SSE stream ended"))
}

async fn ws_subscriber(
    index: usize,
    url: String,
    ready_message: bool,
    connected: Arc<AtomicUsize>,
    permit: tokio::sync::OwnedSemaphorePermit,
    tx: mpsc::UnboundedSender<Arrival>,
) -> Result<()> {
    let (mut socket, _) = tokio_tungstenite::connect_async(&url).await?;
    let mut permit = Some(permit);
    let mut ready = || {
        if permit.take().is_some() {
            connected.fetch_add(1, Ordering::SeqCst);
        }
    };
    if !ready_message {
        ready();
    }
    while let Some(message) = socket.next().await {
        let arrived = Instant::now();
        let Message::Text(text) = message? else {
            continue;
        };
        if let Some((measured, number)) = find_report(&text) {
            let _ = tx.send((index, measured, number, arrived));
        } else if text.contains("\"type\":\"ready\"") {
            ready();
        }
    }
    Err(anyhow!("the WebSocket closed"))
}

/// Connects `subscribers` (even index SSE, odd WebSocket), publishes warm-up reports until every subscriber
/// has one, then `rounds` measured reports, `interval` apart (or later, once the previous one reached everyone).
pub async fn run(
    target: &Target,
    publisher: &Publisher<'_>,
    subscribers: usize,
    protocol: Protocol,
    rounds: usize,
    interval: Duration,
) -> Result<FanOut> {
    let memory = |pids: &[u32]| {
        pids.iter()
            .map(|&pid| proc_memory(pid).unwrap_or((0, 0)))
            .fold((0, 0), |(r, h), (rss, hwm)| (r + rss, h + hwm))
    };
    let (rss_idle_kb, _) = memory(&target.pids);
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()?;
    let connected = Arc::new(AtomicUsize::new(0));
    let gate = Arc::new(Semaphore::new(CONNECT_CONCURRENCY));
    let (tx, mut rx) = mpsc::unbounded_channel::<Arrival>();
    let mut tasks = tokio::task::JoinSet::new();
    let started = Instant::now();
    for index in 0..subscribers {
        let permit = gate.clone().acquire_owned().await?;
        let connected = connected.clone();
        let tx = tx.clone();
        if protocol.is_sse(index) {
            tasks.spawn(sse_subscriber(
                index,
                client.clone(),
                target.sse_urls[index % target.sse_urls.len()].clone(),
                target.ready_message,
                connected,
                permit,
                tx,
            ));
        } else {
            tasks.spawn(ws_subscriber(
                index,
                target.ws_urls[index % target.ws_urls.len()].clone(),
                target.ready_message,
                connected,
                permit,
                tx,
            ));
        }
        // A subscriber that failed while connecting fails the run now rather than after a timeout.
        if let Some(Ok(Err(e))) = tasks.try_join_next() {
            bail!(
                "{}: a subscriber failed while connecting: {e:#}",
                target.name
            );
        }
    }
    drop(tx);
    let deadline = Instant::now() + Duration::from_secs(180);
    while connected.load(Ordering::SeqCst) < subscribers {
        if let Some(outcome) = tasks.try_join_next() {
            let e = match outcome {
                Ok(Err(e)) => e,
                Ok(Ok(())) => anyhow!("ended"),
                Err(e) => e.into(),
            };
            bail!(
                "{}: a subscriber failed ({} of {subscribers} connected): {e:#}",
                target.name,
                connected.load(Ordering::SeqCst)
            );
        }
        if Instant::now() > deadline {
            bail!(
                "{}: only {} of {subscribers} subscribers connected in 180 s",
                target.name,
                connected.load(Ordering::SeqCst)
            );
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let connect_secs = started.elapsed().as_secs_f64();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (rss_connected_kb, _) = memory(&target.pids);

    // Warm-up: until every subscriber received at least one warm-up report.
    let mut warmed = vec![false; subscribers];
    let mut warmed_count = 0;
    for attempt in 0..20_u64 {
        publisher.publish(WARM, attempt).await?;
        let until = tokio::time::Instant::now() + Duration::from_secs(10);
        while warmed_count < subscribers {
            match tokio::time::timeout_at(until, rx.recv()).await {
                Ok(Some((index, false, _, _))) => {
                    if !warmed[index] {
                        warmed[index] = true;
                        warmed_count += 1;
                    }
                }
                Ok(Some(_)) => {}
                Ok(None) => bail!("{}: every subscriber ended", target.name),
                Err(_) => break,
            }
        }
        if warmed_count == subscribers {
            break;
        }
    }
    if warmed_count < subscribers {
        bail!(
            "{}: only {warmed_count} of {subscribers} subscribers received a warm-up report",
            target.name
        );
    }

    // Measured rounds.
    let cpu = |pids: &[u32]| {
        pids.iter()
            .filter_map(|&pid| proc_cpu_secs(pid))
            .sum::<f64>()
    };
    let cpu_before = cpu(&target.pids);
    let mut sse_latencies = Vec::with_capacity(subscribers * rounds / 2 + 1);
    let mut ws_latencies = Vec::with_capacity(subscribers * rounds / 2 + 1);
    let mut complete = Vec::with_capacity(rounds);
    let mut missing = 0;
    for round in 0..rounds as u64 {
        let sent = publisher.publish(MEASURED, round).await?;
        let mut seen = vec![false; subscribers];
        let mut count = 0;
        let mut last = sent;
        let until = tokio::time::Instant::now() + Duration::from_secs(60);
        while count < subscribers {
            match tokio::time::timeout_at(until, rx.recv()).await {
                Ok(Some((index, true, number, at))) if number == round && !seen[index] => {
                    seen[index] = true;
                    count += 1;
                    let latency = at.saturating_duration_since(sent);
                    last = last.max(at);
                    if protocol.is_sse(index) {
                        sse_latencies.push(latency);
                    } else {
                        ws_latencies.push(latency);
                    }
                }
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => break,
            }
        }
        missing += subscribers - count;
        complete.push(last.saturating_duration_since(sent));
        let next = sent + interval;
        if let Some(wait) = next.checked_duration_since(Instant::now()) {
            tokio::time::sleep(wait).await;
        }
    }
    let cpu_used = cpu(&target.pids) - cpu_before;
    let (rss_after_kb, hwm_kb) = memory(&target.pids);
    tasks.abort_all();
    while tasks.join_next().await.is_some() {}

    let mut all = sse_latencies.clone();
    all.extend_from_slice(&ws_latencies);
    Ok(FanOut {
        target: target.name,
        subscribers,
        protocol,
        rounds,
        all: summarize(&all),
        sse: summarize(&sse_latencies),
        ws: summarize(&ws_latencies),
        missing,
        connect_secs,
        complete: summarize(&complete),
        rss_idle_kb,
        rss_connected_kb,
        rss_after_kb,
        hwm_kb,
        cpu_us_per_delivery: cpu_used * 1e6 / (rounds * subscribers - missing).max(1) as f64,
    })
}

/// Prints the fan-out table and, for every size measured on both, the osds/nchan ratios.
pub fn print(runs: &[FanOut]) {
    if runs.is_empty() {
        return;
    }
    println!();
    println!(
        "fan-out: publish -> arrival at every subscriber (half SSE, half WebSocket); latencies in ms"
    );
    println!("{:-<118}", "");
    println!(
        "{:<6} {:>6} {:<5} {:>7} {:>8} {:>8} {:>8} {:>9} {:>8} {:>10} {:>9} {:>9} {:>9} {:>9}",
        "target",
        "subs",
        "proto",
        "n",
        "p50",
        "p90",
        "p99",
        "max",
        "missing",
        "all-in p50",
        "connect s",
        "RSS idle",
        "RSS subs",
        "RSS end"
    );
    let mb = |kb: u64| format!("{:.1} MB", kb as f64 / 1024.0);
    for run in runs {
        for (proto, summary) in [("all", run.all), ("SSE", run.sse), ("WS", run.ws)] {
            let Some(s) = summary else { continue };
            if proto == "all" {
                println!(
                    "{:<6} {:>6} {:<5} {:>7} {:>8.3} {:>8.3} {:>8.3} {:>9.3} {:>8} {:>10.3} {:>9.2} {:>9} {:>9} {:>9}",
                    run.target,
                    run.subscribers,
                    proto,
                    s.n,
                    s.p50,
                    s.p90,
                    s.p99,
                    s.max,
                    run.missing,
                    run.complete.map_or(f64::NAN, |c| c.p50),
                    run.connect_secs,
                    mb(run.rss_idle_kb),
                    mb(run.rss_connected_kb),
                    mb(run.rss_after_kb),
                );
            } else {
                println!(
                    "{:<6} {:>6} {:<5} {:>7} {:>8.3} {:>8.3} {:>8.3} {:>9.3}",
                    "", "", proto, s.n, s.p50, s.p90, s.p99, s.max
                );
            }
        }
    }
    println!("{:-<118}", "");
    println!(
        "all-in p50: median over reports of the time until the last subscriber had it. RSS: VmRSS of the server \
(nginx: master + workers) before subscribing, with every subscriber connected, and after the last report."
    );
    for run in runs {
        println!(
            "{} at {} subscribers ({}): {} reports, peak RSS (VmHWM) {}, server CPU {:.1} us per delivery",
            run.target,
            run.subscribers,
            run.protocol.label(),
            run.rounds,
            mb(run.hwm_kb),
            run.cpu_us_per_delivery
        );
    }
    for osds in runs.iter().filter(|r| r.target == "osds") {
        let Some(peer) = runs.iter().find(|r| {
            r.target == "nchan" && r.subscribers == osds.subscribers && r.protocol == osds.protocol
        }) else {
            continue;
        };
        let (Some(a), Some(b)) = (osds.all, peer.all) else {
            continue;
        };
        let per_sub = |r: &FanOut| {
            r.rss_connected_kb.saturating_sub(r.rss_idle_kb) as f64 / r.subscribers as f64
        };
        println!(
            "ratio osds/nchan at {:>5} subscribers ({}): p50 {:.2}x, p99 {:.2}x, max {:.2}x, all-in p50 {:.2}x, memory per subscriber {:.1} kB / {:.1} kB = {:.2}x, CPU per delivery {:.2}x",
            osds.subscribers,
            osds.protocol.label(),
            a.p50 / b.p50,
            a.p99 / b.p99,
            a.max / b.max,
            osds.complete.map_or(f64::NAN, |c| c.p50) / peer.complete.map_or(f64::NAN, |c| c.p50),
            per_sub(osds),
            per_sub(peer),
            per_sub(osds) / per_sub(peer).max(f64::MIN_POSITIVE),
            osds.cpu_us_per_delivery / peer.cpu_us_per_delivery.max(f64::MIN_POSITIVE),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_report_number() {
        assert_eq!(find_report(&nchan_message(MEASURED, 42)), Some((true, 42)));
        assert_eq!(find_report(&nchan_message(WARM, 7)), Some((false, 7)));
        assert_eq!(find_report(r#"{"type":"ready","cursor":3}"#), None);
    }
}
