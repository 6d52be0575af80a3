//! Frame sources behind one trait: the kmoni image fetcher (live, following real time, or a past range) and
//! the replay of frames the recorder archived. A frame is one observation second: the images of the layers
//! that arrived, and the layers that did not (a gap is recorded, never filled in).

use super::images;
use osds_detector::kmoni::{self, Layer, Observation};
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
    /// Whose clock the fetch follows: `server` (the monitor's latest image time) or `local` (this machine's,
    /// when the monitor gives none).
    pub clock: &'static str,
    /// How far the monitor's latest image lags this machine's clock (ms): when a second is asked for.
    pub lag_ms: Option<i64>,
    pub frames: u64,
    pub images: u64,
    pub missing_images: u64,
    /// Images that came only when asked again (published late).
    pub late_images: u64,
    /// Images that repeated the previous second's (a stale image, asked for again, never used as new).
    pub repeated_images: u64,
    /// Recent runs of seconds without the trigger layer: [from, to] observation ms.
    pub gaps: Vec<[i64; 2]>,
    /// Why the last image could not be had, as a reason code (`image_missing`: the server answered without
    /// it; `image_fetch_failed`: no answer; `image_repeated`: the previous second's image again;
    /// `replay_read_failed`: the image archive could not be read). The details go to the log.
    pub last_error: Option<&'static str>,
}

const RECENT_GAPS: usize = 20;

/// A live fetch further behind than this skips ahead instead of catching up.
const CATCH_UP_LIMIT_MS: i64 = 60_000;
/// The monitor's clock is read again this often.
const CLOCK_EVERY_MS: i64 = 60_000;
/// A server clock further than this from ours is not believed.
const CLOCK_SANITY_MS: i64 = 3_600_000;

/// When to fetch.
#[derive(Debug, Clone, Copy)]
pub enum Schedule {
    /// Follow the monitor: ask for an observation second once the monitor's clock says its image should be
    /// out (its latest image time, read from `latest.json` every minute; `fallback_delay` behind this
    /// machine's clock while the monitor gives none), and again while it is missing or repeats the previous
    /// second's (every quarter second at first, then every second: [`kmoni::retry_in_ms`]), for `patience` at
    /// most, whatever happened to the seconds before.
    Live {
        fallback_delay: Duration,
        patience: Duration,
    },
    /// Fetch the seconds `from_ms..to_ms` as fast as the server answers, then end.
    Range { from_ms: i64, to_ms: i64 },
}

/// Fetches monitor images over HTTP(S): one request per layer per observation second, and one for the clock a
/// minute.
pub struct KmoniFetcher {
    client: reqwest::Client,
    base: String,
    layers: Vec<Layer>,
    trigger_layer: Layer,
    schedule: Schedule,
    next_ms: i64,
    /// How far the monitor's latest image lags our clock (ms), and when that was last read.
    lag_ms: Option<i64>,
    clock_read_at: Option<i64>,
    /// The digest of the last trigger-layer image taken: the same bytes for the next second are a repeat.
    previous_trigger: Option<[u8; 32]>,
    gap_start: Option<i64>,
    health: SourceHealth,
}

/// What asking for one image gave.
enum Fetched {
    Image(Vec<u8>),
    Failed(&'static str),
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
        let base = base.trim_end_matches('/').to_string();
        let mut fetcher = KmoniFetcher {
            health: SourceHealth {
                source: format!("kmoni {base}"),
                health: "ok",
                clock: "local",
                ..SourceHealth::default()
            },
            client,
            base,
            layers,
            trigger_layer,
            schedule,
            next_ms: 0,
            lag_ms: None,
            clock_read_at: None,
            previous_trigger: None,
            gap_start: None,
        };
        fetcher.next_ms = match schedule {
            Schedule::Live { .. } => whole_second(now_ms() - fetcher.lag(schedule)),
            Schedule::Range { from_ms, .. } => whole_second(from_ms),
        };
        Ok(fetcher)
    }

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

    /// The lag to follow: the monitor's, else the configured delay behind our clock.
    fn lag(&self, schedule: Schedule) -> i64 {
        match (self.lag_ms, schedule) {
            (Some(lag), _) => lag,
            (None, Schedule::Live { fallback_delay, .. }) => fallback_delay.as_millis() as i64,
            (None, Schedule::Range { .. }) => 0,
        }
    }

    /// Reads the monitor's clock (its latest image time) when a minute has passed since the last reading;
    /// falls back to our own clock when it gives none.
    async fn read_clock(&mut self) {
        let now = now_ms();
        if self
            .clock_read_at
            .is_some_and(|at| now - at < CLOCK_EVERY_MS)
        {
            return;
        }
        self.clock_read_at = Some(now);
        let url = format!("{}/{}", self.base, kmoni::LATEST_PATH);
        let latest = match self.client.get(&url).send().await {
            Ok(response) if response.status().is_success() => response
                .bytes()
                .await
                .ok()
                .and_then(|body| kmoni::parse_latest(&body)),
            Ok(response) => {
                tracing::debug!(%url, status = %response.status(), "hyp: no monitor clock");
                None
            }
            Err(error) => {
                tracing::debug!(%url, %error, "hyp: reading the monitor clock failed");
                None
            }
        };
        let lag = latest
            .map(|latest| now - latest)
            .filter(|lag| lag.abs() <= CLOCK_SANITY_MS);
        let clock = if lag.is_some() { "server" } else { "local" };
        if clock != self.health.clock || self.lag_ms.is_none() {
            tracing::info!(clock, lag_ms = ?lag, "hyp: following the {clock} clock");
        }
        self.lag_ms = lag;
        self.health.clock = clock;
        self.health.lag_ms = lag;
    }

    /// Asks for the still pending layers of one second once.
    async fn ask(&self, pending: &[Layer], at_ms: i64) -> Vec<Fetched> {
        futures_util::future::join_all(pending.iter().map(|&layer| async move {
            match self.fetch_image(layer, at_ms).await {
                Ok(bytes) => Fetched::Image(bytes),
                Err(error) => Fetched::Failed(error),
            }
        }))
        .await
    }

    /// Fetches every layer of one second; until `deadline` a missing or repeated trigger-layer image is asked
    /// for again, quickly at first and then every second ([`kmoni::retry_in_ms`]); the other layers with it
    /// while it is missing (a backfill can find them later).
    async fn fetch_second(&mut self, at_ms: i64, deadline: Option<i64>) -> Observation {
        use sha2::{Digest, Sha256};
        let mut images = Vec::new();
        let mut pending = self.layers.clone();
        let mut asked = 0;
        let first_asked = now_ms();
        loop {
            let results = self.ask(&pending, at_ms).await;
            asked += 1;
            let mut still = Vec::new();
            for (layer, result) in pending.iter().zip(results) {
                match result {
                    Fetched::Image(bytes) if *layer == self.trigger_layer => {
                        let digest: [u8; 32] = Sha256::digest(&bytes).into();
                        if self.previous_trigger == Some(digest) {
                            self.health.repeated_images += 1;
                            self.health.last_error = Some("image_repeated");
                            still.push(*layer);
                        } else {
                            self.previous_trigger = Some(digest);
                            images.push((*layer, bytes));
                        }
                    }
                    Fetched::Image(bytes) => images.push((*layer, bytes)),
                    Fetched::Failed(error) => {
                        self.health.last_error = Some(error);
                        still.push(*layer);
                    }
                }
            }
            pending = still;
            let wait = kmoni::retry_in_ms(now_ms() - first_asked);
            let retry = deadline.is_some_and(|d| now_ms() + wait <= d)
                && pending.contains(&self.trigger_layer);
            if pending.is_empty() || !retry {
                break;
            }
            tokio::time::sleep(Duration::from_millis(wait as u64)).await;
        }
        if asked > 1 && !images.is_empty() {
            self.health.late_images += images.len() as u64;
        }
        self.health.images += images.len() as u64;
        self.health.missing_images += pending.len() as u64;
        metrics::counter!("osds_hyp_missing_images_total").increment(pending.len() as u64);
        Observation {
            at_ms,
            received_at: now_ms(),
            images,
            missing: pending,
        }
    }

    fn note_trigger_layer(&mut self, frame: &Observation) {
        let present = frame.image(self.trigger_layer).is_some();
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
                tracing::info!(at = frame.at_ms, "hyp: monitor images arrive again");
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
            Schedule::Live { patience, .. } => {
                self.read_clock().await;
                let lag = self.lag(self.schedule);
                // The first second asked for is the present on the clock followed.
                if self.health.frames == 0 {
                    at_ms = whole_second(now_ms() - lag);
                }
                let patience = patience.as_millis() as i64;
                // Behind (a busy machine, an outage's retries) it catches up at full speed; only after a long
                // stall (a suspended machine) does it skip to the present and record the gap.
                if now_ms() - (at_ms + lag) > patience + CATCH_UP_LIMIT_MS {
                    let resume = whole_second(now_ms() - lag);
                    self.record_gap(at_ms, resume - 1000);
                    at_ms = resume;
                }
                let wait = at_ms + lag - now_ms();
                if wait > 0 {
                    tokio::time::sleep(Duration::from_millis(wait as u64)).await;
                }
                Some(at_ms + lag + patience)
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

#[cfg(test)]
mod tests {
    use super::*;
    use axum::extract::{Request, State};
    use axum::http::StatusCode;
    use axum::response::{IntoResponse, Response};
    use osds_detector::kmoni::{SURFACE_INTENSITY, render};
    use std::sync::Arc;

    /// The monitor's clock runs this far ahead of ours.
    const SKEW_MS: i64 = 30_000;

    /// A different image for every second.
    fn image_of(at_ms: i64) -> Vec<u8> {
        let level = (at_ms / 1000 % 50) as f64 / 10.0 - 2.0;
        render(SURFACE_INTENSITY, &[((10, 10), Some(level))])
    }

    /// The images a test monitor serves, and how often each was asked for.
    struct Monitor {
        paths: Vec<(String, i64)>,
        asked: std::sync::Mutex<(Option<i64>, std::collections::HashMap<i64, u32>)>,
    }

    /// A monitor whose clock runs [`SKEW_MS`] ahead of ours and says a second is out half a second after it.
    /// Asked for the first time, an even second's image is not there yet and an odd one's is the previous
    /// second's (except for the first second anyone asked for: there is no previous image to tell it from);
    /// asked again, each is right. So every run sees the same late and repeated images, however slow it is.
    async fn monitor(State(monitor): State<Arc<Monitor>>, request: Request) -> Response {
        let now = now_ms() + SKEW_MS;
        let path = request.uri().path().trim_start_matches('/');
        if path == kmoni::LATEST_PATH {
            return kmoni::latest_json(whole_second(now - 500), now).into_response();
        }
        let Some(&(_, at)) = monitor.paths.iter().find(|(p, _)| p == path) else {
            return StatusCode::NOT_FOUND.into_response();
        };
        let (first, times) = {
            let mut asked = monitor.asked.lock().unwrap();
            let first = *asked.0.get_or_insert(at);
            let times = asked.1.entry(at).or_default();
            *times += 1;
            (first, *times)
        };
        match (times, (at / 1000) % 2 == 1) {
            (1, false) => StatusCode::NOT_FOUND.into_response(),
            (1, true) if at != first => image_of(at - 1000).into_response(),
            _ => image_of(at).into_response(),
        }
    }

    #[tokio::test]
    async fn the_fetch_follows_the_monitors_clock_and_retries_late_and_repeated_images() {
        let server_now = now_ms() + SKEW_MS;
        let paths: Vec<(String, i64)> = (-5..60)
            .map(|k| {
                let at = whole_second(server_now) + k * 1000;
                (SURFACE_INTENSITY.image_path(at), at)
            })
            .collect();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let app = axum::Router::new()
            .fallback(monitor)
            .with_state(Arc::new(Monitor {
                paths,
                asked: Default::default(),
            }));
        tokio::spawn(async move { axum::serve(listener, app).await });

        let mut fetcher = KmoniFetcher::new(
            &base,
            vec![SURFACE_INTENSITY],
            SURFACE_INTENSITY,
            Schedule::Live {
                fallback_delay: Duration::from_millis(1500),
                patience: Duration::from_secs(5),
            },
        )
        .unwrap();
        let mut seen = Vec::new();
        for _ in 0..4 {
            let frame = fetcher.next().await.expect("a live source does not end");
            // The second the monitor's clock names, with that second's image, never the one before.
            assert!((frame.at_ms - server_now).abs() < 10_000, "{}", frame.at_ms);
            assert_eq!(
                frame.image(SURFACE_INTENSITY),
                Some(image_of(frame.at_ms).as_slice())
            );
            seen.push(frame.at_ms);
        }
        assert!(seen.windows(2).all(|w| w[1] == w[0] + 1000), "{seen:?}");
        let health = fetcher.health();
        assert_eq!(health.clock, "server");
        assert!(health.lag_ms.is_some_and(|lag| lag < -20_000), "{health:?}");
        assert!(health.repeated_images >= 1, "{health:?}");
        assert!(health.late_images >= 1, "{health:?}");
        assert!(health.gaps.is_empty(), "{health:?}");
    }
}
