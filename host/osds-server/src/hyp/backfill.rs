//! Backfill: station peaks of an event recovered later from the image archive. Images the live fetch missed
//! (late or lost) may be fetched again and recorded as recovered; then the peaks of the event's stations over
//! the event's window are taken from every recorded layer, and a peak that is new, or higher than the one seen
//! live, is added marked `recovered`. Reports are never touched and nothing here feeds live detection.

use super::images;
use super::runner::station_metric;
use super::source::KmoniFetcher;
use anyhow::Context;
use osds_detector::kmoni::Observation;
use osds_detector::kmoni::{Image, Layer};
use osds_detector::stations::Network;
use osds_store::{FrameArchive, StationMetric, Store, Writer};
use osds_time::now_ms;
use std::collections::HashMap;

/// The window of an event: from this long before its first detection …
const BEFORE_MS: i64 = 30_000;
/// … to this long after its latest report, but never longer than `MAX_WINDOW_MS`.
const AFTER_MS: i64 = 60_000;
const MAX_WINDOW_MS: i64 = 15 * 60_000;

#[derive(Debug, Default)]
pub struct BackfillSummary {
    pub window: (i64, i64),
    pub fetched_images: usize,
    pub frames_read: usize,
    pub peaks_added: u64,
}

/// Where missing images may be fetched again.
pub struct Refetch {
    pub fetcher: KmoniFetcher,
    pub layers: Vec<Layer>,
}

pub async fn backfill(
    store: &Store,
    writer: &mut Writer,
    archive: &FrameArchive,
    network: &Network,
    event_id: &str,
    refetch: Option<Refetch>,
) -> anyhow::Result<BackfillSummary> {
    let event = store
        .hyp_event(event_id)
        .await?
        .with_context(|| format!("no hyp event `{event_id}`"))?;
    let from = (event.first_at - BEFORE_MS).div_euclid(1000) * 1000;
    let to = (event.updated_at + AFTER_MS).min(from + MAX_WINDOW_MS);
    let mut summary = BackfillSummary {
        window: (from, to),
        ..BackfillSummary::default()
    };
    let members: Vec<String> = store
        .hyp_stations(event_id)
        .await?
        .into_iter()
        .map(|s| s.code)
        .collect();
    anyhow::ensure!(
        !members.is_empty(),
        "event `{event_id}` has no stations to recover peaks for"
    );

    if let Some(refetch) = refetch {
        summary.fetched_images = fetch_missing(archive, &refetch, from, to).await?;
    }

    let index: HashMap<&str, usize> = network
        .stations
        .iter()
        .enumerate()
        .map(|(i, s)| (s.code.as_str(), i))
        .collect();
    let stations: Vec<usize> = members
        .iter()
        .filter_map(|code| index.get(code.as_str()).copied())
        .collect();
    let pixels: Vec<(u32, u32)> = stations.iter().map(|&i| network.pixels[i]).collect();
    // (station position in `stations`, layer) → (peak, observed at, received at)
    let mut peaks: HashMap<(usize, Layer), (f64, i64, i64)> = HashMap::new();
    let mut next = from;
    while next <= to {
        let frames = images::observations(archive, next, to, 120).await?;
        let Some(last) = frames.last() else { break };
        next = last.at_ms + 1000;
        summary.frames_read += frames.len();
        for frame in &frames {
            take_peaks(frame, &pixels, &mut peaks);
        }
        eprintln!(
            "osds: hyp backfill: {} seconds read of {}",
            summary.frames_read,
            (to - from) / 1000 + 1
        );
    }
    let metrics: Vec<StationMetric> = peaks
        .into_iter()
        .map(|((s, layer), peak)| station_metric(&network.stations[stations[s]], layer, peak, true))
        .collect();
    summary.peaks_added = writer.add_hyp_station_metrics(event_id, &metrics).await?;
    Ok(summary)
}

fn take_peaks(
    frame: &Observation,
    pixels: &[(u32, u32)],
    peaks: &mut HashMap<(usize, Layer), (f64, i64, i64)>,
) {
    for (layer, bytes) in &frame.images {
        let Ok(image) = Image::decode(bytes) else {
            continue;
        };
        for (s, value) in image.sample(*layer, pixels).into_iter().enumerate() {
            let Some(value) = value else { continue };
            let entry = peaks
                .entry((s, *layer))
                .or_insert((f64::NEG_INFINITY, 0, 0));
            if value > entry.0 {
                *entry = (value, frame.at_ms, frame.received_at);
            }
        }
    }
}

/// Fetches the images of the window that the archive lacks and records them as recovered.
async fn fetch_missing(
    archive: &FrameArchive,
    refetch: &Refetch,
    from: i64,
    to: i64,
) -> anyhow::Result<usize> {
    let mut fetched = 0;
    for &layer in &refetch.layers {
        let have = images::recorded_seconds(archive, layer, from, to).await?;
        let missing: Vec<i64> = (from..=to)
            .step_by(1000)
            .filter(|at| have.binary_search(at).is_err())
            .collect();
        for (n, &at) in missing.iter().enumerate() {
            if let Ok(image) = refetch.fetcher.fetch_image(layer, at).await {
                let frame = Observation {
                    at_ms: at,
                    received_at: now_ms(),
                    images: vec![(layer, image)],
                    missing: Vec::new(),
                };
                fetched += images::record(archive, &frame, true).await?;
            }
            if (n + 1) % 60 == 0 || n + 1 == missing.len() {
                eprintln!(
                    "osds: hyp backfill: {layer}: {} of {} missing seconds asked for, {fetched} images recovered",
                    n + 1,
                    missing.len()
                );
            }
        }
    }
    Ok(fetched)
}
