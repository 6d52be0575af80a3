//! `reconnect-storm`: after a restart (or a network blip) during a big quake every live consumer comes back at
//! once with almost the same cursor. `--storm-consumers` consumers (half SSE, half WebSocket) reconnect at once
//! with cursors 1–20 reports behind, and 2 % of them `--storm-far` reports behind (beyond the server's ring of
//! recent reports), while new reports keep coming; each must receive every report after its cursor, in order,
//! with no gap and no duplicate. Measured: when each had caught up with the backlog and with the last new report
//! (from the storm's start), the server's CPU until everyone had, and for osds the archive reads live delivery
//! made (`osds_live_archive_reads_total`). osds is restarted on its archive first, so its ring starts from the
//! archive; nchan resumes from its own message buffer (`last_event_id`), sized to hold the whole history.

use crate::fanout::Publisher;
use crate::harness::{
    PgDeployment, Summary, UNLIMITED, all_connected, get_json, proc_cpu_secs, summarize,
};
use crate::nchan;
use anyhow::{Context, Result, anyhow, bail};
use fake_relay::{FakeRelay, RelayConfig};
use futures_util::StreamExt;
use osds_testkit::server::{Launch, Server};
use osds_testkit::sse::SseFramer;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{Semaphore, mpsc};
use tokio_tungstenite::tungstenite::Message;

/// Consumers connecting at the same moment (the rest queue behind them within the storm's first second).
const CONNECT_CONCURRENCY: usize = 1000;
/// Reports published while the storm lasts, 100 ms apart: the quake goes on.
const LIVE_REPORTS: u64 = 10;
/// Cursors of the near consumers lie 1..=NEAR_SPREAD reports behind.
const NEAR_SPREAD: u64 = 20;
/// The tag of the storm's reports (upstream event ids on osds, the message's event id on nchan).
const TAG: char = 'S';
/// The backlog replay rate the spec sets for osds (reports per second per consumer).
const SPEC_REPLAY_RATE: f64 = 100.0;

/// How a target's consumers say where they resume.
enum Resume {
    /// osds: `after=<report id>`.
    After,
    /// nchan: `last_event_id=<its message id>`, indexed by report number.
    LastEventId(Vec<String>),
}

struct Target {
    name: &'static str,
    sse_urls: Vec<String>,
    ws_urls: Vec<String>,
    pids: Vec<u32>,
    metrics_urls: Vec<String>,
    resume: Resume,
}

impl Target {
    /// osds servers (started with `--metrics-listen`), the consumers spread over them.
    fn osds(name: &'static str, servers: &[Server]) -> Result<Target> {
        Ok(Target {
            name,
            sse_urls: servers.iter().map(|s| s.url("/stream")).collect(),
            ws_urls: servers.iter().map(|s| s.ws_url("/ws")).collect(),
            pids: servers.iter().map(Server::pid).collect(),
            metrics_urls: servers.iter().map(metrics_url).collect::<Result<_>>()?,
            resume: Resume::After,
        })
    }
}

/// What one storm measured.
pub struct Storm {
    pub target: &'static str,
    pub consumers: usize,
    pub far: usize,
    pub far_behind: u64,
    /// Until every consumer had its first answer (osds: `ready`; nchan: the response head).
    pub connect_secs: f64,
    /// From the storm's start until a near (far) consumer had every report archived before it.
    pub near_caught_up: Option<Summary>,
    pub far_caught_up: Option<Summary>,
    /// From the storm's start until the last consumer had the last new report.
    pub all_done_secs: f64,
    /// Server CPU (user + system) from the storm's start until everyone was done.
    pub cpu_secs: f64,
    /// Archive reads by live delivery during the storm (osds only).
    pub archive_reads: Option<f64>,
    /// Consumers whose reports were not exactly those after their cursor, in order.
    pub wrong: usize,
}

/// Runs the storm on osds (SQLite), on two PostgreSQL replicas (unless `postgres` is false) and on nchan
/// (when installed and `peers`).
pub async fn run(
    osds: &Path,
    dir: &Path,
    consumers: usize,
    far_behind: u64,
    postgres: bool,
    peers: bool,
) -> Result<Vec<Storm>> {
    let history = far_behind + 1_000;
    let mut storms = Vec::new();
    println!("reconnect-storm: osds, {consumers} consumers, {history} reports archived, a restart");
    storms.push(osds_sqlite(osds, dir, consumers, history, far_behind).await?);
    if postgres {
        println!("reconnect-storm: osds on PostgreSQL, 2 restarted API replicas");
        storms.push(osds_replicas(osds, dir, consumers, history, far_behind).await?);
    }
    if peers && nchan::Nginx::available() {
        println!("reconnect-storm: nginx + nchan, {history} messages in its buffer");
        storms.push(nchan_storm(dir, consumers, history, far_behind).await?);
    }
    Ok(storms)
}

async fn osds_sqlite(
    osds: &Path,
    root: &Path,
    consumers: usize,
    history: u64,
    far_behind: u64,
) -> Result<Storm> {
    let relay = FakeRelay::start(RelayConfig::default()).await?;
    let dir = root.join(format!("osds-bench-storm-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let start = |dir: &Path| {
        let launch = Launch::new(osds, dir)
            .args(["--upstream-url", &relay.url()])
            .args(UNLIMITED)
            .args(["--metrics-listen", "127.0.0.1:0"]);
        tokio::task::spawn_blocking(move || launch.start())
    };
    let mut server = start(&dir).await??;
    all_connected(&relay).await?;
    fill(&relay, &server, history).await?;
    // The restart: the new process's ring of recent reports starts from the archive.
    server.stop().await;
    let server = start(&dir).await??.removing_dir();
    all_connected(&relay).await?;
    let servers = [server];
    let target = Target::osds("osds", &servers)?;
    let storm = storm(
        &target,
        consumers,
        history,
        far_behind,
        &Publisher::Relay(&relay),
    )
    .await;
    drop(servers);
    relay.shutdown().await;
    storm
}

async fn osds_replicas(
    osds: &Path,
    root: &Path,
    consumers: usize,
    history: u64,
    far_behind: u64,
) -> Result<Storm> {
    let deployment = PgDeployment::start(osds, root, "storm").await?;
    fill(&deployment.relay, &deployment.ingester, history).await?;
    let mut replicas = Vec::new();
    for label in ["storm-replica-1", "storm-replica-2"] {
        replicas.push(
            deployment
                .replica_with(label, &["--metrics-listen", "127.0.0.1:0"])
                .await?,
        );
    }
    let target = Target::osds("pg-2rep", &replicas)?;
    let publisher = Publisher::Relay(&deployment.relay);
    let storm = storm(&target, consumers, history, far_behind, &publisher).await;
    drop(replicas);
    deployment.stop().await;
    storm
}

async fn nchan_storm(
    root: &Path,
    consumers: usize,
    history: u64,
    far_behind: u64,
) -> Result<Storm> {
    let buffer = (history + LIVE_REPORTS + 10) as usize;
    let nginx = nchan::Nginx::start_buffered(root, 2, consumers + 1_000, buffer)?;
    let base = nginx.base();
    let publisher = Publisher::Nchan {
        client: reqwest::Client::new(),
        url: format!("http://{base}/pub"),
    };
    // A subscriber from the start learns each message's id, which the storm's consumers resume from.
    let (ids_tx, mut ids_rx) = mpsc::unbounded_channel();
    let recorder = tokio::spawn(record_ids(format!("http://{base}/sub"), ids_tx));
    tokio::time::sleep(Duration::from_millis(300)).await;
    for number in 1..=history {
        publisher.publish(TAG, number).await?;
    }
    let mut ids = vec![String::new(); history as usize + 1];
    let mut known = 0;
    while known < history {
        let (number, id) = tokio::time::timeout(Duration::from_secs(30), ids_rx.recv())
            .await
            .context("nchan's ids")?
            .ok_or_else(|| anyhow!("the id recorder ended"))?;
        if number >= 1 && number <= history {
            ids[number as usize] = id;
            known += 1;
        }
    }
    recorder.abort();
    let target = Target {
        name: "nchan",
        sse_urls: vec![format!("http://{base}/sub")],
        ws_urls: vec![format!("ws://{base}/sub")],
        pids: nginx.pids(),
        metrics_urls: Vec::new(),
        resume: Resume::LastEventId(ids),
    };
    let storm = storm(&target, consumers, history, far_behind, &publisher).await;
    drop(nginx);
    storm
}

/// The storm itself: every consumer connects at once, new reports follow; waits until everyone has everything.
async fn storm(
    target: &Target,
    consumers: usize,
    history: u64,
    far_behind: u64,
    publisher: &Publisher<'_>,
) -> Result<Storm> {
    let last = history + LIVE_REPORTS;
    let far_every = 50; // 2 %
    let reads_before = archive_reads(&target.metrics_urls).await?;
    let cpu = || {
        target
            .pids
            .iter()
            .filter_map(|&pid| proc_cpu_secs(pid))
            .sum::<f64>()
    };
    let cpu_before = cpu();
    let (tx, mut rx) = mpsc::unbounded_channel::<Outcome>();
    let gate = Arc::new(Semaphore::new(CONNECT_CONCURRENCY));
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    let mut far = 0;
    for index in 0..consumers {
        let behind = if index % far_every == far_every - 1 {
            far += 1;
            far_behind
        } else {
            1 + index as u64 % NEAR_SPREAD
        };
        let cursor = history - behind;
        let resume = match &target.resume {
            Resume::After => format!("after={cursor}"),
            Resume::LastEventId(ids) => {
                format!("last_event_id={}", ids[cursor as usize].replace(':', "%3A"))
            }
        };
        let sse = index % 2 == 0;
        let urls = if sse {
            &target.sse_urls
        } else {
            &target.ws_urls
        };
        let url = format!("{}?{resume}", urls[index % urls.len()]);
        let consumer = Consumer {
            cursor,
            caught_up_at: history,
            last,
            started,
            far: behind == far_behind,
        };
        let (tx, gate) = (tx.clone(), gate.clone());
        tasks.spawn(async move {
            let permit = gate.acquire_owned().await.expect("the gate stays open");
            let outcome = if sse {
                consumer.sse(&url, permit).await
            } else {
                consumer.ws(&url, permit).await
            };
            let _ = tx.send(outcome.unwrap_or_else(|e| Outcome::failed(&e)));
        });
    }
    drop(tx);
    // The quake goes on while the consumers come back.
    for n in history + 1..=last {
        publisher.publish(TAG, n).await?;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut outcomes = Vec::with_capacity(consumers);
    let deadline = tokio::time::Instant::now()
        + Duration::from_secs_f64(120.0 + far_behind as f64 / SPEC_REPLAY_RATE);
    while outcomes.len() < consumers {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(outcome)) => outcomes.push(outcome),
            Ok(None) => break,
            Err(_) => bail!(
                "{}: {} of {consumers} consumers done in time",
                target.name,
                outcomes.len()
            ),
        }
    }
    let cpu_secs = cpu() - cpu_before;
    tasks.abort_all();
    let reads_after = archive_reads(&target.metrics_urls).await?;
    if let Some(failed) = outcomes.iter().find_map(|o| o.error.clone()) {
        bail!("{}: a consumer failed: {failed}", target.name);
    }
    let times = |far: bool, pick: fn(&Outcome) -> Duration| {
        let samples: Vec<Duration> = outcomes.iter().filter(|o| o.far == far).map(pick).collect();
        summarize(&samples)
    };
    Ok(Storm {
        target: target.name,
        consumers,
        far,
        far_behind,
        connect_secs: outcomes
            .iter()
            .map(|o| o.answered.as_secs_f64())
            .fold(0.0, f64::max),
        near_caught_up: times(false, |o| o.caught_up),
        far_caught_up: times(true, |o| o.caught_up),
        all_done_secs: outcomes
            .iter()
            .map(|o| o.done.as_secs_f64())
            .fold(0.0, f64::max),
        cpu_secs,
        archive_reads: reads_before.zip(reads_after).map(|(b, a)| a - b),
        wrong: outcomes.iter().filter(|o| !o.exact).count(),
    })
}

/// One consumer's cursor and what it must receive.
struct Consumer {
    cursor: u64,
    /// The report that was the newest when the storm began.
    caught_up_at: u64,
    last: u64,
    started: Instant,
    far: bool,
}

struct Outcome {
    far: bool,
    answered: Duration,
    caught_up: Duration,
    done: Duration,
    /// It received exactly cursor+1..=last, in order.
    exact: bool,
    error: Option<String>,
}

impl Outcome {
    fn failed(e: &anyhow::Error) -> Outcome {
        Outcome {
            far: false,
            answered: Duration::ZERO,
            caught_up: Duration::ZERO,
            done: Duration::ZERO,
            exact: false,
            error: Some(format!("{e:#}")),
        }
    }
}

/// Tracks the numbers a consumer receives.
struct Progress<'a> {
    consumer: &'a Consumer,
    expected: u64,
    exact: bool,
    caught_up: Option<Duration>,
}

impl Progress<'_> {
    /// Takes one received report number; true once the last has come.
    fn take(&mut self, number: u64) -> bool {
        if number != self.expected {
            self.exact = false;
        }
        self.expected = number + 1;
        if number >= self.consumer.caught_up_at && self.caught_up.is_none() {
            self.caught_up = Some(self.consumer.started.elapsed());
        }
        number >= self.consumer.last
    }

    fn outcome(self, answered: Duration) -> Outcome {
        let done = self.consumer.started.elapsed();
        Outcome {
            far: self.consumer.far,
            answered,
            caught_up: self.caught_up.unwrap_or(done),
            done,
            exact: self.exact,
            error: None,
        }
    }
}

impl Consumer {
    fn progress(&self) -> Progress<'_> {
        Progress {
            consumer: self,
            expected: self.cursor + 1,
            exact: true,
            caught_up: None,
        }
    }

    async fn sse(&self, url: &str, permit: tokio::sync::OwnedSemaphorePermit) -> Result<Outcome> {
        let response = reqwest::Client::new()
            .get(url)
            .header("Accept", "text/event-stream")
            .send()
            .await?;
        if !response.status().is_success() {
            bail!("SSE answered {}", response.status());
        }
        let answered = self.started.elapsed();
        drop(permit);
        let mut progress = self.progress();
        let mut body = response.bytes_stream();
        let mut framer = SseFramer::default();
        while let Some(chunk) = body.next().await {
            framer.push(&chunk?);
            while let Some(message) = framer.next_message() {
                let message = message.context("SSE is UTF-8")?;
                if matches!(
                    message.event.as_deref(),
                    None | Some("message") | Some("report")
                ) && let Some(number) = first_id(&message.data)
                    && progress.take(number)
                {
                    return Ok(progress.outcome(answered));
                }
            }
        }
        Err(anyhow!("the SSE stream ended"))
    }

    async fn ws(&self, url: &str, permit: tokio::sync::OwnedSemaphorePermit) -> Result<Outcome> {
        let (mut socket, _) = tokio_tungstenite::connect_async(url).await?;
        let answered = self.started.elapsed();
        drop(permit);
        let mut progress = self.progress();
        while let Some(message) = socket.next().await {
            let Message::Text(text) = message? else {
                continue;
            };
            if text.contains("\"type\":\"report\"")
                && let Some(number) = first_id(&text)
                && progress.take(number)
            {
                return Ok(progress.outcome(answered));
            }
        }
        Err(anyhow!("the WebSocket closed"))
    }
}

/// The first `"id":<digits>` of a message: osds's report id (both protocols), the number nchan's message carries.
fn first_id(text: &str) -> Option<u64> {
    let start = text.find("\"id\":")? + 5;
    let digits: &str = text[start..].split(|c: char| !c.is_ascii_digit()).next()?;
    digits.parse().ok()
}

/// Reads nchan's stream from the start and sends (number, message id) for every message.
async fn record_ids(url: String, tx: mpsc::UnboundedSender<(u64, String)>) -> Result<()> {
    let response = reqwest::Client::new()
        .get(&url)
        .header("Accept", "text/event-stream")
        .send()
        .await?;
    let mut body = response.bytes_stream();
    let mut framer = SseFramer::default();
    while let Some(chunk) = body.next().await {
        framer.push(&chunk?);
        while let Some(message) = framer.next_message() {
            let message = message?;
            if let (Some(number), Some(id)) = (first_id(&message.data), message.id) {
                let _ = tx.send((number, id));
            }
        }
    }
    Ok(())
}

/// Archives reports 1..=`history` through the relay and waits until the server has them all.
async fn fill(relay: &FakeRelay, server: &Server, history: u64) -> Result<()> {
    for n in 1..=history {
        Publisher::Relay(relay).publish(TAG, n).await?;
    }
    let client = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let page = get_json(&client, &server.url("/reports?limit=1")).await?;
        let high_water = page["highWater"].as_u64().unwrap_or(0);
        if high_water == history {
            return Ok(());
        }
        if high_water > history {
            bail!("the archive holds {high_water} reports, {history} expected");
        }
        if Instant::now() > deadline {
            bail!("only {high_water} of {history} reports archived in 120 s");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn metrics_url(server: &Server) -> Result<String> {
    server
        .stdout()
        .iter()
        .find_map(|line| line.strip_prefix("osds: metrics ").map(str::to_owned))
        .context("no metrics address on the server's stdout")
}

/// The sum over the servers of `osds_live_archive_reads_total` (None without servers to ask, or from a
/// build that does not count them).
async fn archive_reads(urls: &[String]) -> Result<Option<f64>> {
    if urls.is_empty() {
        return Ok(None);
    }
    let mut sum = 0.0;
    for url in urls {
        let text = reqwest::get(url).await?.text().await?;
        let Some(reads) = text
            .lines()
            .find_map(|line| line.strip_prefix("osds_live_archive_reads_total "))
            .and_then(|value| value.trim().parse::<f64>().ok())
        else {
            return Ok(None);
        };
        sum += reads;
    }
    Ok(Some(sum))
}

/// Prints the storms and, for osds beside nchan, the ratios.
pub fn print(storms: &[Storm]) {
    if storms.is_empty() {
        return;
    }
    println!();
    println!(
        "reconnect storm: consumers come back at once (half SSE, half WebSocket), cursors 1-{NEAR_SPREAD} reports behind, 2 % far behind; {LIVE_REPORTS} new reports during it; times from the storm's start, in ms"
    );
    println!("{:-<132}", "");
    println!(
        "{:<8} {:>6} {:>5} {:>9} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>9} {:>8} {:>6}",
        "target",
        "cons",
        "far",
        "connect",
        "near p50",
        "near p99",
        "near max",
        "far p50",
        "far max",
        "all done",
        "CPU s",
        "reads",
        "wrong"
    );
    for s in storms {
        let ms = |summary: Option<Summary>, pick: fn(&Summary) -> f64| {
            summary.map_or("-".to_owned(), |s| format!("{:.0}", pick(&s)))
        };
        println!(
            "{:<8} {:>6} {:>5} {:>9.0} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10.0} {:>9.2} {:>8} {:>6}",
            s.target,
            s.consumers,
            s.far,
            s.connect_secs * 1000.0,
            ms(s.near_caught_up, |s| s.p50),
            ms(s.near_caught_up, |s| s.p99),
            ms(s.near_caught_up, |s| s.max),
            ms(s.far_caught_up, |s| s.p50),
            ms(s.far_caught_up, |s| s.max),
            s.all_done_secs * 1000.0,
            s.cpu_secs,
            s.archive_reads
                .map_or("-".to_owned(), |r| format!("{r:.0}")),
            s.wrong,
        );
    }
    println!("{:-<132}", "");
    if let Some(s) = storms.first() {
        println!(
            "far: {} reports behind; osds replays a backlog at the spec's {SPEC_REPLAY_RATE:.0} reports/s per consumer (floor {:.1} s), nchan without a limit. \
reads: osds_live_archive_reads_total during the storm. wrong: consumers whose reports were not exactly those after their cursor, in order.",
            s.far_behind,
            s.far_behind as f64 / SPEC_REPLAY_RATE
        );
    }
    let nchan = storms.iter().find(|s| s.target == "nchan");
    for osds in storms.iter().filter(|s| s.target != "nchan") {
        let Some(nchan) = nchan else { break };
        let (Some(a), Some(b)) = (osds.near_caught_up, nchan.near_caught_up) else {
            continue;
        };
        println!(
            "ratio {}/nchan: near consumers caught up p50 {:.2}x, p99 {:.2}x, max {:.2}x; server CPU {:.2}x",
            osds.target,
            a.p50 / b.p50,
            a.p99 / b.p99,
            a.max / b.max,
            osds.cpu_secs / nchan.cpu_secs.max(f64::MIN_POSITIVE),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_first_id_of_either_server() {
        assert_eq!(
            first_id(r#"{"type":"report","id":42,"data":{"id":42}}"#),
            Some(42)
        );
        assert_eq!(first_id(&crate::fanout::nchan_message(TAG, 7)), Some(7));
        assert_eq!(first_id(r#"{"type":"ready"}"#), None);
    }
}
