//! `push-latency`: one SSE and one WebSocket subscriber; distinct `cq_eew` frames pushed at a fixed pace
//! through the relay; time from the push to the matching `report` at each (also against an API replica
//! on PostgreSQL).

use crate::breakdown;
use crate::harness::{
    PgDeployment, cq_frame, sse_subscriber, start_connected, summarize, ws_subscriber,
};
use crate::options::Options;
use crate::results::{PushLatency, Results};
use anyhow::{Context, Result, bail};
use fake_relay::FakeRelay;
use osds_testkit::server::Server;
use std::collections::HashMap;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// Frames pushed before push-latency measures.
pub(crate) const PUSH_WARMUP: u64 = 20;

/// Pushes `options.frames` frames (after a warm-up) through `relay` at `options.interval` and times each until
/// an SSE and a WebSocket subscriber of `server` have it.
pub(crate) async fn measure_push(
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

pub(crate) async fn push_latency(options: &Options, results: &mut Results) -> Result<()> {
    let (relay, server) = start_connected(&options.osds, &options.dir, "push").await?;
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
    if options.postgres {
        let deployment = PgDeployment::start(&options.osds, &options.dir, "push").await?;
        let replica = deployment.replica("push-replica").await?;
        println!("push-latency: the same with PostgreSQL, subscribers on an API replica");
        let across = measure_push(options, &deployment.relay, &replica).await?;
        results.push_replica = Some(across);
        drop(replica);
        deployment.stop().await;
    }
    println!(
        "push-latency: the server-side steps alone, in-process, {} frames",
        options.frames
    );
    let path = breakdown::push_path(&options.dir, options.frames as u64, options.postgres).await?;
    results.push_path = Some([
        summarize(&path.decode),
        summarize(&path.commit),
        summarize(&path.read_back),
        summarize(&path.postgres_commit),
    ]);
    Ok(())
}
