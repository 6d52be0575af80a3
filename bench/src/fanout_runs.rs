//! `fan-out` runs: osds (on SQLite, and subscribers on PostgreSQL replicas) against nginx + nchan, through
//! the harness in `fanout.rs`.

use crate::harness::{PgDeployment, raise_fd_limit, start_connected};
use crate::options::Options;
use crate::results::Results;
use crate::{breakdown, fanout, nchan};
use anyhow::{Result, bail};
use osds_testkit::server::Server;
use std::time::Duration;

pub(crate) async fn fan_out(options: &Options, results: &mut Results) -> Result<()> {
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
        let (relay, server) = start_connected(&options.osds, &options.dir, "fanout").await?;
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
        if n > 2 && options.postgres {
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
pub(crate) async fn fan_out_on_replicas(
    options: &Options,
    subscribers: usize,
    protocol: fanout::Protocol,
    rounds: usize,
    interval: Duration,
) -> Result<fanout::FanOut> {
    let deployment = PgDeployment::start(&options.osds, &options.dir, "fanout").await?;
    let mut replicas = Vec::new();
    for label in ["fanout-replica-1", "fanout-replica-2"] {
        replicas.push(deployment.replica(label).await?);
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
