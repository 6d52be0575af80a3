//! Frame sources behind one trait: the kmoni image fetcher (live, following real time, or a past range) and
//! the replay of frames the recorder archived. A frame is one observation second: the images of the layers
//! that arrived, and the layers that did not (a gap is recorded, never filled in).

use super::images;
use osds_detector::kmoni::{Layer, Observation};
use osds_store::FrameArchive;
use osds_time::now_ms;
use std::collections::VecDeque;
use std::future::Future;
use std::time::Duration;

/// Where frames come from.
pub trait FrameSource: Send {
    /// The next observation second, or `None` when the source has ended.
    fn next(&mut self) -> impl Future<Output = Option<Observation>> + Send;

    /// What the source is, for logs and `/hyp/status`.
    fn describe(&self) -> String;

    /// Its health and counters, for `/hyp/status`.
    fn health(&self) -> SourceHealth;
}

/// Counters of a source.
#[derive(Debug, Clone, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SourceHealth {
    pub source: String,
    /// `ok`, `degraded` (images missing lately) or `down` (nothing arrives).
    pub health: &'static str,
    pub frames: u64,
    pub images: u64,
    pub missing_images: u64,
    /// Recent runs of seconds without the trigger layer: [from, to] observation ms.
    pub gaps: Vec<[i64; 2]>,
    /// Why the last image could not be had, as a reason code (`image_missing`: the server answered without
    /// it; `image_fetch_failed`: no answer; `replay_read_failed`: the image archive could not be read). The
    /// details go to the log.
    pub last_error: Option<&'static str>,
}

const RECENT_GAPS: usize = 20;

/// A live fetch further behind than this skips ahead instead of catching up.
const CATCH_UP_LIMIT_MS: i64 = 60_000;

/// When to fetch.
#[derive(Debug, Clone, Copy)]
pub enum Schedule {
    /// Follow real time: fetch an observation second `delay` after it, retrying a late image until
    /// `delay + patience`.
    Live { delay: Duration, patience: Duration },
    /// Fetch the seconds `from_ms..to_ms` as fast as the server answers, then end.
    Range { from_ms: i64, to_ms: i64 },
}

/// Fetches monitor images over HTTP(S): one request per layer per observation second.
pub struct KmoniFetcher {
    client: reqwest::Client,
    base: String,
    layers: Vec<Layer>,
    trigger_layer: Layer,
    schedule: Schedule,
    next_ms: i64,
    /// The trigger layer was missing in the previous second: do not retry (an outage is not hammered).
    outage: bool,
    gap_start: Option<i64>,
    health: SourceHealth,
}

impl KmoniFetcher {
    pub fn new(
        base: &str,
        layers: Vec<Layer>,
        trigger_layer: Layer,
        schedule: Schedule,
    ) -> anyhow::Result<KmoniFetcher> {
        anyhow::ensure!(
            layers.contains(&trigger_layer),
            "the layers must include {trigger_layer}"
        );
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(3))
            .user_agent(concat!("osds/", env!("CARGO_PKG_VERSION")))
            .build()?;
        let next_ms = match schedule {
            Schedule::Live { delay, .. } => whole_second(now_ms() - delay.as_millis() as i64),
            Schedule::Range { from_ms, .. } => whole_second(from_ms),
        };
        let base = base.trim_end_matches('/').to_string();
        Ok(KmoniFetcher {
            health: SourceHealth {
                source: format!("kmoni {base}"),
                health: "ok",
                ..SourceHealth::default()
            },
            client,
            base,
            layers,
            trigger_layer,
            schedule,
            next_ms,
            outage: false,
            gap_start: None,
        })
    }

    /// The image of one layer and observation second.
    /// One image, or the reason code of its failure (the details are logged at debug).
    pub async fn fetch_image(&self, layer: Layer, at_ms: i64) -> Result<Vec<u8>, &'static str> {
        let url = format!("{}/{}", self.base, layer.image_path(at_ms));
        let failed = |e: reqwest::Error| {
            tracing::debug!(%url, error = %e, "hyp: fetching an image failed");
            "image_fetch_failed"
        };
        let response = self.client.get(&url).send().await.map_err(failed)?;
        if !response.status().is_success() {
            tracing::debug!(%url, status = %response.status(), "hyp: no image");
            return Err("image_missing");
        }
        let bytes = response.bytes().await.map_err(failed)?;
        Ok(bytes.to_vec())
    }

    /// Fetches every layer of one second; in live mode a late image is asked for again until `deadline`.
    async fn fetch_second(&mut self, at_ms: i64, deadline: Option<i64>) -> Observation {
        let mut images = Vec::new();
        let mut pending = self.layers.clone();
        loop {
            let results = futures_util::future::join_all(
                pending.iter().map(|&layer| self.fetch_image(layer, at_ms)),
            )
            .await;
            let mut still = Vec::new();
            for (layer, result) in pending.iter().zip(results) {
                match result {
                    Ok(bytes) => images.push((*layer, bytes)),
                    Err(error) => {
                        self.health.last_error = Some(error);
                        still.push(*layer);
                    }
                }
            }
            pending = still;
            let retry = deadline.is_some_and(|d| now_ms() + 500 <= d)
                && pending.contains(&self.trigger_layer)
                && !self.outage;
            if pending.is_empty() || !retry {
                break;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        self.health.images += images.len() as u64;
        self.health.missing_images += pending.len() as u64;
        Observation {
            at_ms,
            received_at: now_ms(),
            images,
            missing: pending,
        }
    }

    fn note_trigger_layer(&mut self, frame: &Observation) {
        let present = frame.image(self.trigger_layer).is_some();
        self.outage = !present;
        match (present, self.gap_start) {
            (false, None) => {
                self.gap_start = Some(frame.at_ms);
                tracing::warn!(
                    at = frame.at_ms,
                    layer = %self.trigger_layer,
                    error = self.health.last_error.unwrap_or(""),
                    "hyp: monitor images stopped arriving"
                );
            }
            (true, Some(start)) => {
                self.gap_start = None;
                self.record_gap(start, frame.at_ms - 1000);
            }
            _ => {}
        }
        self.health.health = match (present, frame.missing.is_empty()) {
            (false, _) => "down",
            (true, false) => "degraded",
            (true, true) => "ok",
        };
    }

    fn record_gap(&mut self, from_ms: i64, to_ms: i64) {
        let gaps = &mut self.health.gaps;
        gaps.push([from_ms, to_ms]);
        if gaps.len() > RECENT_GAPS {
            gaps.remove(0);
        }
        tracing::warn!(
            from = from_ms,
            to = to_ms,
            seconds = (to_ms - from_ms) / 1000 + 1,
            "hyp: frames missing"
        );
    }
}

fn whole_second(ms: i64) -> i64 {
    ms.div_euclid(1000) * 1000
}

impl FrameSource for KmoniFetcher {
    async fn next(&mut self) -> Option<Observation> {
        let mut at_ms = self.next_ms;
        let deadline = match self.schedule {
            Schedule::Range { to_ms, .. } => {
                if at_ms >= to_ms {
                    if let Some(start) = self.gap_start.take() {
                        self.record_gap(start, at_ms - 1000);
                    }
                    return None;
                }
                None
            }
            Schedule::Live { delay, patience } => {
                let (delay, patience) = (delay.as_millis() as i64, patience.as_millis() as i64);
                // Behind (a busy machine) it catches up at full speed; only after a long stall (a suspended
                // machine) does it skip to the present and record the gap.
                if now_ms() - (at_ms + delay) > patience + CATCH_UP_LIMIT_MS {
                    let resume = whole_second(now_ms() - delay);
                    self.record_gap(at_ms, resume - 1000);
                    at_ms = resume;
                }
                let wait = at_ms + delay - now_ms();
                if wait > 0 {
                    tokio::time::sleep(Duration::from_millis(wait as u64)).await;
                }
                Some(at_ms + delay + patience)
            }
        };
        let frame = self.fetch_second(at_ms, deadline).await;
        self.note_trigger_layer(&frame);
        self.health.frames += 1;
        self.next_ms = at_ms + 1000;
        Some(frame)
    }

    fn describe(&self) -> String {
        let layers: Vec<String> = self.layers.iter().map(Layer::to_string).collect();
        format!("kmoni {} ({})", self.base, layers.join(","))
    }

    fn health(&self) -> SourceHealth {
        let mut health = self.health.clone();
        // A gap still open shows up to the last second asked for.
        if let Some(start) = self.gap_start {
            health.gaps.push([start, self.next_ms - 1000]);
        }
        health
    }
}

/// Replays frames the recorder archived, in observation order, as fast as the detector takes them.
pub struct ReplaySource {
    archive: FrameArchive,
    next_ms: i64,
    to_ms: i64,
    buffered: VecDeque<Observation>,
    health: SourceHealth,
}

impl ReplaySource {
    pub fn new(archive: FrameArchive, from_ms: i64, to_ms: i64) -> ReplaySource {
        ReplaySource {
            archive,
            next_ms: from_ms,
            to_ms,
            buffered: VecDeque::new(),
            health: SourceHealth {
                source: "replay".into(),
                health: "ok",
                ..SourceHealth::default()
            },
        }
    }
}

impl FrameSource for ReplaySource {
    async fn next(&mut self) -> Option<Observation> {
        if self.buffered.is_empty() && self.next_ms <= self.to_ms {
            match images::observations(&self.archive, self.next_ms, self.to_ms, 60).await {
                Ok(frames) => {
                    if let Some(last) = frames.last() {
                        self.next_ms = last.at_ms + 1000;
                    } else {
                        self.next_ms = self.to_ms + 1;
                    }
                    self.buffered.extend(frames);
                }
                Err(error) => {
                    tracing::error!(%error, "hyp replay: reading recorded frames failed");
                    self.health.health = "down";
                    self.health.last_error = Some("replay_read_failed");
                    return None;
                }
            }
        }
        let frame = self.buffered.pop_front()?;
        self.health.frames += 1;
        self.health.images += frame.images.len() as u64;
        Some(frame)
    }

    fn describe(&self) -> String {
        "replay of recorded frames".into()
    }

    fn health(&self) -> SourceHealth {
        self.health.clone()
    }
}
