//! The detector's observations kept in the store's image archive: an [`Observation`] is stored as one image per
//! layer (by the layer's name) and read back grouped by second.

use osds_detector::kmoni::{Layer, Observation};
use osds_store::{FrameArchive, FrameImage};

/// Stores the images of `frame`; returns how many were new.
pub async fn record(
    archive: &FrameArchive,
    frame: &Observation,
    recovered: bool,
) -> anyhow::Result<usize> {
    let images: Vec<(String, &[u8])> = frame
        .images
        .iter()
        .map(|(layer, image)| (layer.to_string(), image.as_slice()))
        .collect();
    archive
        .record(frame.at_ms, frame.received_at, &images, recovered)
        .await
}

/// Up to `seconds` recorded seconds in `from_ms..=to_ms`, in order, each with the layers stored for it (an
/// image of a layer this build does not know is skipped).
pub async fn observations(
    archive: &FrameArchive,
    from_ms: i64,
    to_ms: i64,
    seconds: i64,
) -> anyhow::Result<Vec<Observation>> {
    Ok(group(archive.frames(from_ms, to_ms, seconds).await?))
}

/// The seconds in `from_ms..=to_ms` that have an image of `layer`.
pub async fn recorded_seconds(
    archive: &FrameArchive,
    layer: Layer,
    from_ms: i64,
    to_ms: i64,
) -> anyhow::Result<Vec<i64>> {
    archive
        .recorded_seconds(&layer.to_string(), from_ms, to_ms)
        .await
}

/// Images ordered by second, grouped into one observation per second.
fn group(images: Vec<FrameImage>) -> Vec<Observation> {
    let mut frames: Vec<Observation> = Vec::new();
    for stored in images {
        let Ok(layer) = Layer::parse(&stored.layer) else {
            continue;
        };
        match frames.last_mut() {
            Some(frame) if frame.at_ms == stored.at_ms => {
                frame.received_at = frame.received_at.max(stored.received_at);
                frame.images.push((layer, stored.image));
            }
            _ => frames.push(Observation {
                at_ms: stored.at_ms,
                received_at: stored.received_at,
                images: vec![(layer, stored.image)],
                missing: Vec::new(),
            }),
        }
    }
    frames
}
