//! `big-frames`: the server's memory around one large upstream frame. For each size, a fresh `osds serve`
//! connected to the relay receives one `cq_eew` report padded to that size on `/cq_eew` alone; the peak RSS
//! (VmHWM) before and after it is archived, and the RSS left once it is, tell what one frame costs and whether
//! it is given back.

use crate::harness::{proc_memory, start_server};
use anyhow::{Context, Result, bail};
use fake_relay::{FakeRelay, RelayConfig};
use std::path::Path;
use std::time::{Duration, Instant};

/// One frame's memory figures, kB.
pub struct FrameMemory {
    pub bytes: usize,
    pub rss_before_kb: u64,
    pub hwm_before_kb: u64,
    pub hwm_after_kb: u64,
    pub rss_after_kb: u64,
    /// Time from the push to its reception record.
    pub archived_in: Duration,
}

/// A `cq_eew` report grown to `bytes` by a field no decoder reads.
fn padded_report(bytes: usize) -> String {
    let head = r#"{"type":"cq_eew","ID":"1","EventID":"20260910101000_1","ReportTime":"2026-09-10 10:10:25","ReportNum":1,"OriginTime":"2026-09-10 10:10:10","HypoCenter":"重庆荣昌区","Latitude":29.4,"Longitude":105.5,"Magnitude":4.1,"Depth":8,"MaxIntensity":5.9,"Padding":""#;
    let padding = bytes.saturating_sub(head.len() + 2);
    format!("{head}{}\"}}", "x".repeat(padding))
}

async fn deliveries(status_url: &str) -> Result<i64> {
    let status: serde_json::Value = reqwest::get(status_url).await?.json().await?;
    status["archive"]["deliveries"]
        .as_i64()
        .context("/status has archive.deliveries")
}

/// Measures each of `sizes` on a server of its own.
pub async fn run(osds: &Path, dir: &Path, sizes: &[usize]) -> Result<Vec<FrameMemory>> {
    let mut results = Vec::new();
    for &bytes in sizes {
        let relay = FakeRelay::start(RelayConfig::default()).await?;
        let server = start_server(osds, dir, &format!("frames-{bytes}"), &relay.url()).await?;
        if !relay
            .wait_connected("/cq_eew", 1, Duration::from_secs(30))
            .await
        {
            bail!("osds serve never connected /cq_eew");
        }
        // The queries after connect are answered (with nothing) and the first heartbeats counted.
        tokio::time::sleep(Duration::from_secs(6)).await;
        let status_url = server.url("/status");
        let before = deliveries(&status_url).await?;
        let (rss_before_kb, hwm_before_kb) =
            proc_memory(server.pid()).context("read the server's memory")?;
        let frame = padded_report(bytes);
        let pushed = Instant::now();
        if relay.push_to("/cq_eew", frame.as_bytes()).await != 1 {
            bail!("the relay had no /cq_eew client for the frame");
        }
        drop(frame);
        let deadline = pushed + Duration::from_secs(120);
        while deliveries(&status_url).await? <= before {
            if Instant::now() > deadline {
                bail!("a frame of {bytes} bytes was not archived within 120 s");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let archived_in = pushed.elapsed();
        // Whatever the frame left behind once the server is idle again.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let (rss_after_kb, hwm_after_kb) =
            proc_memory(server.pid()).context("read the server's memory")?;
        results.push(FrameMemory {
            bytes,
            rss_before_kb,
            hwm_before_kb,
            hwm_after_kb,
            rss_after_kb,
            archived_in,
        });
        drop(server);
        relay.shutdown().await;
    }
    Ok(results)
}

pub fn print(results: &[FrameMemory]) {
    if results.is_empty() {
        return;
    }
    println!("{:-<110}", "");
    println!(
        "big frames: one padded cq_eew report on /cq_eew of a fresh server; memory in MB (VmRSS, VmHWM)"
    );
    println!(
        "{:>12} {:>12} {:>12} {:>12} {:>14} {:>12} {:>12}",
        "frame MB",
        "RSS before",
        "peak before",
        "peak after",
        "peak - before",
        "x frame",
        "RSS after"
    );
    let mb = |kb: u64| kb as f64 / 1024.0;
    for r in results {
        let frame_mb = r.bytes as f64 / (1024.0 * 1024.0);
        let growth = mb(r.hwm_after_kb) - mb(r.rss_before_kb);
        println!(
            "{:>12.1} {:>12.1} {:>12.1} {:>12.1} {:>14.1} {:>12.1} {:>12.1}   archived in {:.0} ms",
            frame_mb,
            mb(r.rss_before_kb),
            mb(r.hwm_before_kb),
            mb(r.hwm_after_kb),
            growth,
            growth / frame_mb,
            mb(r.rss_after_kb),
            r.archived_in.as_secs_f64() * 1000.0
        );
    }
}
