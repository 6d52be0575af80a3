//! Where the time goes, measured in-process on the host library's own read path (`osds_store::Store`), to
//! explain the end-to-end numbers:
//! - `feed-reads`: every live subscriber reads each new report from the archive itself (`Feed::next` →
//!   `Store::reports_after`). N concurrent `reports_after` calls, as N subscribers make after one commit, take
//!   this long at the least, before any serialising or sending.
//! - `page-cost`: a `/reports?limit=1000` page split into the archive read (`Store::reports_after`, rows
//!   rendered to text; random pages of a fresh store, so mostly cache misses) and writing the response body,
//!   and its size.

use anyhow::{Context, Result};
use osds_api::reports::pages::ReportCache;
use osds_runtime::decoder_set::DecoderSet;
use osds_store::Incoming;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// One new cq report version as the ingest pipeline hands it to the writer.
fn cq_incoming(decoders: &DecoderSet, session: i64, tag: &str, n: u64) -> Result<Incoming> {
    crate::incoming::decoded_incoming(decoders, session, crate::harness::cq_frame(tag, n, 1))
}

/// An empty archive in a new folder under `root`, its store and writer, and a session to archive frames on.
async fn fresh_archive(
    root: &Path,
    name: &str,
) -> Result<(PathBuf, osds_store::Store, osds_store::Writer, i64)> {
    let dir = root.join(format!("osds-bench-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let url = format!("sqlite://{}", dir.join("osds.db").display());
    let (store, mut writer) = osds_store::open(&url).await?;
    let session = writer
        .open_session(
            "/cq_eew",
            osds_store::SocketRole::Primary,
            "ws://osds-bench.invalid/cq_eew",
        )
        .await?;
    Ok((dir, store, writer, session))
}

/// The server-side steps of one push, timed one at a time in-process, `frames` times each.
pub struct PushPath {
    /// The cq component decoding the frame (warm instances, as the ingest pipeline calls it).
    pub decode: Vec<Duration>,
    /// `Writer::ingest` of that one frame: a durable commit.
    pub commit: Vec<Duration>,
    /// Reading the committed version back, rendered (what the live ring does after the commit).
    pub read_back: Vec<Duration>,
    /// The same frames' durable commits on PostgreSQL (`PgWriter::ingest`, a throwaway local server reached
    /// over its Unix socket), for the cost of the second backend.
    pub postgres_commit: Vec<Duration>,
}

/// The steps of one push; the PostgreSQL commits only with `postgres`.
pub async fn push_path(root: &Path, frames: u64, postgres: bool) -> Result<PushPath> {
    let (dir, store, mut writer, session) = fresh_archive(root, "push-path").await?;
    let decoders = crate::incoming::embedded_decoders()?;
    let cq = decoders
        .for_tag("cq_eew")
        .context("no embedded cq decoder")?
        .clone();
    let mut path = PushPath {
        decode: Vec::new(),
        commit: Vec::new(),
        read_back: Vec::new(),
        postgres_commit: Vec::new(),
    };
    let mut sent = Vec::new();
    for n in 0..frames {
        let incoming = cq_incoming(&decoders, session, "P", n)?;
        sent.push(incoming.clone());
        let at = Instant::now();
        cq.decode(&incoming.frame)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        path.decode.push(at.elapsed());
        let at = Instant::now();
        let summary = writer.ingest(&[incoming]).await?;
        path.commit.push(at.elapsed());
        let at = Instant::now();
        let read = store
            .served_between(summary.high_water - 1, summary.high_water, 1)
            .await?;
        path.read_back.push(at.elapsed());
        anyhow::ensure!(read.len() == 1, "the committed version did not read back");
        // The pace of push-latency, so the WAL checkpoint behind each commit runs as it does there.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(writer);
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
    if !postgres {
        return Ok(path);
    }

    let cluster = osds_store::test_postgres::Cluster::start("bench");
    let (_, mut writer) = osds_store::open(&cluster.database("osds").await).await?;
    writer.register_ingester("bench").await?;
    let session = writer
        .open_session(
            "/cq_eew",
            osds_store::SocketRole::Primary,
            "ws://osds-bench.invalid/cq_eew",
        )
        .await?;
    for mut incoming in sent {
        incoming.session_id = session;
        let at = Instant::now();
        writer.ingest(&[incoming]).await?;
        path.postgres_commit.push(at.elapsed());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(path)
}

pub struct FeedReads {
    pub readers: usize,
    /// Time until all N reads completed.
    pub all_secs: f64,
    /// Per read, when done one at a time.
    pub single_us: f64,
}

/// A small fresh archive with a few reports, then `readers` concurrent reads of the newest one.
pub async fn feed_reads(root: &Path, readers: &[usize]) -> Result<Vec<FeedReads>> {
    let (dir, store, mut writer, session) = fresh_archive(root, "feed").await?;
    let decoders = crate::incoming::embedded_decoders()?;
    for n in 0..20 {
        writer
            .ingest(&[cq_incoming(&decoders, session, "B", n)?])
            .await?;
    }
    let newest = writer.high_water();
    let cache = std::sync::Arc::new(ReportCache::default());
    let mut out = Vec::new();
    // Single reads first (warm).
    let mut single = Duration::ZERO;
    for _ in 0..200 {
        let at = Instant::now();
        cache.reports_after(&store, newest - 1, 100).await?;
        single += at.elapsed();
    }
    for &n in readers {
        let started = Instant::now();
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..n {
            let store = store.clone();
            let cache = cache.clone();
            tasks.spawn(async move {
                cache
                    .reports_after(&store, newest - 1, 100)
                    .await
                    .map(|p| p.items.len())
            });
        }
        while let Some(outcome) = tasks.join_next().await {
            outcome??;
        }
        out.push(FeedReads {
            readers: n,
            all_secs: started.elapsed().as_secs_f64(),
            single_us: single.as_secs_f64() * 1e6 / 200.0,
        });
    }
    drop(writer);
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(out)
}

pub struct PageCost {
    pub pages: usize,
    pub read_ms: f64,
    pub serialize_ms: f64,
    pub body_bytes: f64,
}

/// `pages` random `/reports` pages of 1,000 (through the API's report cache) on the archive at `db`, then
/// their serialisation.
pub async fn page_cost(db: &Path, versions: u64, pages: usize) -> Result<PageCost> {
    let (store, writer) = osds_store::open(&format!("sqlite://{}", db.display())).await?;
    drop(writer);
    let cache = ReportCache::default();
    let (mut read, mut serialize, mut bytes) = (Duration::ZERO, Duration::ZERO, 0_usize);
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    for _ in 0..pages {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let after = (seed % versions.saturating_sub(1000).max(1)) as i64;
        let at = Instant::now();
        let page = cache.reports_after(&store, after, 1000).await?;
        read += at.elapsed();
        let at = Instant::now();
        let (body, _) = page.to_json();
        serialize += at.elapsed();
        bytes += body.len();
    }
    Ok(PageCost {
        pages,
        read_ms: read.as_secs_f64() * 1000.0 / pages as f64,
        serialize_ms: serialize.as_secs_f64() * 1000.0 / pages as f64,
        body_bytes: bytes as f64 / pages as f64,
    })
}
