//! What a run measured, and the table printed at its end.

use crate::harness::Summary;
use crate::options::Options;
use crate::{archive, breakdown, fanout, frames, wasm_cost};

/// What the run measured, printed as one table at the end.
#[derive(Default)]
pub(crate) struct Results {
    pub(crate) fsync: Option<Summary>,
    /// The same with push-latency's pause before each sync.
    pub(crate) fsync_paced: Option<Summary>,
    pub(crate) sse: Option<Summary>,
    pub(crate) ws: Option<Summary>,
    pub(crate) push_lost: Option<(usize, usize, usize)>,
    /// Push latency with the archive on PostgreSQL and the subscribers on an API replica.
    pub(crate) push_replica: Option<PushLatency>,
    /// In-process: decode, durable commit, read back, durable commit on PostgreSQL (see
    /// `breakdown::push_path`).
    pub(crate) push_path: Option<[Option<Summary>; 4]>,
    pub(crate) ingest: Option<Ingest>,
    pub(crate) fan_out: Vec<fanout::FanOut>,
    pub(crate) feed_reads: Vec<breakdown::FeedReads>,
    pub(crate) wasm: Option<wasm_cost::WasmCost>,
    pub(crate) query: Option<archive::QueryResults>,
    pub(crate) query_postgres: Option<archive::QueryResults>,
    pub(crate) frames: Vec<frames::FrameMemory>,
}

pub(crate) struct Ingest {
    pub(crate) frames: u64,
    pub(crate) versions: u64,
    pub(crate) push_secs: f64,
    pub(crate) total_secs: f64,
    /// Reception records archived by the end of the push phase (as last polled).
    pub(crate) archived_during_push: u64,
}

pub(crate) fn print_table(options: &Options, results: &Results) {
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

/// What one push-latency run saw.
pub(crate) struct PushLatency {
    pub(crate) sse: Option<Summary>,
    pub(crate) ws: Option<Summary>,
    /// Frames measured, and how many of them the SSE and the WebSocket subscriber never saw.
    pub(crate) lost: (usize, usize, usize),
}
