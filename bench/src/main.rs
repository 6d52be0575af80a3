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
//! - `reconnect-storm`: `--storm-consumers` live consumers come back at once after a restart, with cursors a few
//!   reports behind and 2 % `--storm-far` behind, while new reports come; time until each caught up, server CPU,
//!   archive reads, and any gap, duplicate or disorder; the same on two PostgreSQL replicas (unless
//!   `--no-postgres`) and on nginx + nchan resuming from its message buffer (`storm.rs`).
//! - `big-frames`: one padded report of each `--frame-mb` size on a fresh server: its peak and remaining memory.
//! - `limiter`: the per-client limits' cost per request with `--limiter-clients` distinct loopback client
//!   addresses remembered, beside `/livez` (outside the limits) as the floor (`limiter.rs`).
//!
//! Every wait is bounded: a benchmark that does not finish in time fails instead of hanging.

mod archive;
mod breakdown;
mod fanout;
mod fanout_runs;
mod frames;
mod harness;
mod incoming;
mod ingest;
mod limiter;
mod nchan;
mod options;
mod push;
mod results;
mod storm;
mod wasm_cost;

use crate::fanout_runs::fan_out;
use crate::harness::{fsync_floor, raise_fd_limit, summarize};
use crate::ingest::ingest;
use crate::options::{Which, parse_args};
use crate::push::push_latency;
use crate::results::{Results, print_table};
use anyhow::{Context, Result, bail};
use std::path::Path;

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
    let storms = if matches!(options.which, Which::ReconnectStorm | Which::All) {
        raise_fd_limit();
        storm::run(
            &options.osds,
            &options.dir,
            options.storm_consumers,
            options.storm_far,
            options.postgres,
            options.peers,
        )
        .await
        .context("reconnect-storm")?
    } else {
        Vec::new()
    };
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
    storm::print(&storms);
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
mod documentation_tests {
    use crate::options::Options;
    use clap::Parser;

    /// The documentation's `bench/run.sh ARGS` lines are arguments `osds-bench` takes (run.sh passes them on).
    #[test]
    fn the_documented_run_sh_lines_parse() {
        let lines = osds_testkit::readme::invocations(
            &osds_testkit::readme::documentation(),
            &["bench/run.sh"],
        );
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
