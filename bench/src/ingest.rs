//! `ingest`: frames pushed as fast as the server drains them (80 % new versions, 20 % duplicates); sustained
//! frames/s and versions/s.

use crate::harness::{cq_frame, get_json, start_connected};
use crate::options::Options;
use crate::results::{Ingest, Results};
use anyhow::{Context, Result, bail};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

pub(crate) async fn ingest(options: &Options, results: &mut Results) -> Result<()> {
    /// Frames the relay may be ahead of the archive: bounds the relay's queue and the drain after the push.
    const WINDOW: u64 = 2_000;
    let (relay, server) = start_connected(&options.osds, &options.dir, "ingest").await?;
    let client = reqwest::Client::new();
    let status_url = server.url("/status");
    let archive = get_json(&client, &status_url).await?["archive"].clone();
    let base_deliveries = archive["deliveries"]
        .as_u64()
        .context("archive.deliveries")?;
    let base_versions = archive["versions"].as_u64().context("archive.versions")?;

    // A poller keeps the archived reception count fresh for the push loop's window.
    let committed = Arc::new(AtomicU64::new(0));
    let poller = {
        let committed = committed.clone();
        let client = client.clone();
        let url = status_url.clone();
        tokio::spawn(async move {
            loop {
                if let Ok(status) = get_json(&client, &url).await
                    && let Some(deliveries) = status["archive"]["deliveries"].as_u64()
                {
                    committed.store(deliveries.saturating_sub(base_deliveries), Ordering::SeqCst);
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };

    println!(
        "ingest: pushing for {} s (80 % new versions, 20 % exact duplicates, at most {WINDOW} frames ahead of the archive)",
        options.seconds
    );
    let start = Instant::now();
    let push_for = Duration::from_secs_f64(options.seconds);
    let (mut frames, mut new_versions) = (0_u64, 0_u64);
    let mut last_new = String::new();
    while start.elapsed() < push_for {
        if frames.saturating_sub(committed.load(Ordering::SeqCst)) >= WINDOW {
            tokio::time::sleep(Duration::from_millis(2)).await;
            continue;
        }
        let frame = if frames % 5 == 4 && !last_new.is_empty() {
            last_new.clone()
        } else {
            // Ten revisions per event.
            let frame = cq_frame("I", new_versions / 10, new_versions % 10 + 1);
            new_versions += 1;
            last_new = frame.clone();
            frame
        };
        if relay.push_to("/cq_eew", frame.as_bytes()).await != 1 {
            bail!("the relay had no /cq_eew client to push to");
        }
        frames += 1;
        if frames % 256 == 0 {
            tokio::task::yield_now().await;
        }
    }
    let push_secs = start.elapsed().as_secs_f64();
    poller.abort();
    let archived_during_push = committed.load(Ordering::SeqCst);

    // Drain: every frame has its reception record.
    let deadline = Instant::now() + Duration::from_secs(120);
    let (deliveries, versions) = loop {
        let archive = get_json(&client, &status_url).await?["archive"].clone();
        let deliveries = archive["deliveries"]
            .as_u64()
            .unwrap_or(0)
            .saturating_sub(base_deliveries);
        let versions = archive["versions"]
            .as_u64()
            .unwrap_or(0)
            .saturating_sub(base_versions);
        if deliveries >= frames {
            break (deliveries, versions);
        }
        if Instant::now() > deadline {
            bail!("only {deliveries} of {frames} frames archived 120 s after the push ended");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let total_secs = start.elapsed().as_secs_f64();
    if versions != new_versions {
        println!(
            "ingest: warning: {versions} versions archived, {new_versions} new versions pushed"
        );
    }
    results.ingest = Some(Ingest {
        frames: deliveries,
        versions,
        push_secs,
        total_secs,
        archived_during_push,
    });
    drop(server);
    relay.shutdown().await;
    Ok(())
}
