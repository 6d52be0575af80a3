//! The detector at work: frames from a source → the recorder → values at the stations' pixels → the detector →
//! solutions shaped by the hyp component → the append-only archive, with the detector's and the recorder's
//! state kept for `/hyp/status`. A report that cannot be shaped or stored is logged and counted; detection goes
//! on.

use super::images;
use super::source::FrameSource;
use anyhow::Context;
use hyp_core::{EventStatus, Solution};
use osds_detector::detector::{Detection, Detector, DetectorConfig, Station};
use osds_detector::kmoni::Observation;
use osds_detector::kmoni::{Image, Layer, SURFACE_INTENSITY};
use osds_detector::stations::Network;
use osds_runtime::SharedShaper;
use osds_store::{FrameArchive, HypReportInput, StationMetric, Store, Writer};
use osds_time::now_ms;
use serde_json::json;
use std::collections::{HashMap, VecDeque};
use std::time::Duration;

/// Values are kept this long for the peaks of the layers the detector does not trigger on.
const HISTORY_MS: i64 = 300_000;
/// The detector's state is written this often (wall clock).
const STATE_EVERY_MS: i64 = 5_000;
/// Old images are pruned this often.
const PRUNE_EVERY_MS: i64 = 60_000;
/// Recent errors kept in the state.
const RECENT_ERRORS: usize = 10;

/// The recorder's settings.
pub struct Recorder {
    pub archive: FrameArchive,
    /// Images older than this (by observation time) are deleted.
    pub retention: Duration,
}

/// One frame's values, per layer, per station.
struct Values {
    at_ms: i64,
    received_at: i64,
    layers: Vec<(Layer, Vec<Option<f64>>)>,
}

impl Values {
    fn layer(&self, layer: Layer) -> Option<&[Option<f64>]> {
        self.layers
            .iter()
            .find(|(l, _)| *l == layer)
            .map(|(_, v)| v.as_slice())
    }
}

#[derive(Debug, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Counters {
    frames: u64,
    frames_without_trigger_layer: u64,
    undecodable_images: u64,
    reports: u64,
    failed_reports: u64,
    recorded_images: u64,
    failed_recordings: u64,
    pruned_images: u64,
}

pub struct Runner {
    network: Network,
    index: HashMap<String, usize>,
    detector: Detector,
    store: Store,
    writer: Writer,
    shaper: SharedShaper,
    recorder: Option<Recorder>,
    history: VecDeque<Values>,
    counters: Counters,
    errors: VecDeque<String>,
    last_frame_at: Option<i64>,
    state_due_ms: i64,
    prune_due_ms: i64,
    print_reports: bool,
}

impl Runner {
    pub fn new(
        network: Network,
        config: DetectorConfig,
        store: Store,
        writer: Writer,
        shaper: SharedShaper,
        recorder: Option<Recorder>,
    ) -> Runner {
        let index = network
            .stations
            .iter()
            .enumerate()
            .map(|(i, s)| (s.code.clone(), i))
            .collect();
        Runner {
            detector: Detector::new(network.stations.clone(), config),
            network,
            index,
            store,
            writer,
            shaper,
            recorder,
            history: VecDeque::new(),
            counters: Counters::default(),
            errors: VecDeque::new(),
            last_frame_at: None,
            state_due_ms: 0,
            prune_due_ms: 0,
            print_reports: false,
        }
    }

    /// Print one line per report on stdout (`osds simulate`).
    pub fn print_reports(mut self) -> Runner {
        self.print_reports = true;
        self
    }

    /// Runs until the source ends or `shutdown` turns true; open events then end `interrupted`. Returns the
    /// number of reports archived.
    pub async fn run<S: FrameSource>(
        mut self,
        mut source: S,
        mut shutdown: tokio::sync::watch::Receiver<bool>,
    ) -> anyhow::Result<u64> {
        tracing::info!(
            source = %source.describe(),
            stations = self.network.stations.len(),
            algorithm = %self.detector.algorithm(),
            recorder = self.recorder.is_some(),
            "hyp detector started"
        );
        self.close_leftovers().await;
        loop {
            let frame = tokio::select! {
                frame = source.next() => frame,
                _ = shutdown.wait_for(|stop| *stop) => None,
            };
            let Some(frame) = frame else { break };
            self.take(&frame).await;
            if now_ms() >= self.state_due_ms {
                self.write_state(&source, "running").await;
            }
        }
        for detection in self.detector.stop() {
            self.report(&detection).await;
        }
        self.write_state(&source, "stopped").await;
        tracing::info!(
            frames = self.counters.frames,
            reports = self.counters.reports,
            "hyp detector stopped"
        );
        Ok(self.counters.reports)
    }

    /// Events a previous run left open end `interrupted` (a restart mid-event); no final report is invented.
    async fn close_leftovers(&mut self) {
        let open = match self.store.hyp_open_solutions().await {
            Ok(open) => open,
            Err(error) => {
                return self.error(
                    "archive_read_failed",
                    "reading open events",
                    format!("{error:#}"),
                );
            }
        };
        for bytes in open {
            let Ok(mut solution) = serde_json::from_slice::<Solution>(&bytes) else {
                continue;
            };
            solution.status = EventStatus::Interrupted;
            solution.report_number += 1;
            solution.reported_at = now_ms();
            solution.recorded_at = solution.reported_at;
            tracing::warn!(event = %solution.event_id, "hyp: an event left open by a previous run ends interrupted");
            self.archive(&solution, Vec::new()).await;
        }
    }

    async fn take(&mut self, frame: &Observation) {
        self.counters.frames += 1;
        metrics::counter!("osds_hyp_frames_total").increment(1);
        self.record(frame).await;
        let values = self.decode(frame);
        self.history.push_back(values);
        while self
            .history
            .front()
            .is_some_and(|v| v.at_ms < frame.at_ms - HISTORY_MS)
        {
            self.history.pop_front();
        }
        let Some(intensities) = self
            .history
            .back()
            .and_then(|v| v.layer(SURFACE_INTENSITY))
            .map(<[Option<f64>]>::to_vec)
        else {
            // No trigger layer this second: a long enough silence interrupts the open events.
            self.counters.frames_without_trigger_layer += 1;
            for detection in self.detector.silent(frame.at_ms) {
                self.report(&detection).await;
            }
            return;
        };
        self.last_frame_at = Some(frame.at_ms);
        let source = json!({
            "layer": SURFACE_INTENSITY.to_string(),
            "at": frame.at_ms,
            "receivedAt": frame.received_at,
        });
        for mut detection in self.detector.step(frame.at_ms, &intensities) {
            detection.solution.source_frames = Some(vec![source.clone()]);
            self.report(&detection).await;
        }
    }

    fn decode(&mut self, frame: &Observation) -> Values {
        let mut layers = Vec::new();
        for (layer, bytes) in &frame.images {
            match Image::decode(bytes) {
                Ok(image) => layers.push((*layer, image.sample(*layer, &self.network.pixels))),
                Err(error) => {
                    self.counters.undecodable_images += 1;
                    metrics::counter!("osds_hyp_undecodable_images_total").increment(1);
                    self.error(
                        "image_undecodable",
                        format!("{layer} at {}", frame.at_ms),
                        error,
                    );
                }
            }
        }
        Values {
            at_ms: frame.at_ms,
            received_at: frame.received_at,
            layers,
        }
    }

    async fn record(&mut self, frame: &Observation) {
        let Some(recorder) = &self.recorder else {
            return;
        };
        match images::record(&recorder.archive, frame, false).await {
            Ok(n) => self.counters.recorded_images += n as u64,
            Err(error) => {
                self.counters.failed_recordings += 1;
                return self.error(
                    "recording_failed",
                    format!("frame {}", frame.at_ms),
                    format!("{error:#}"),
                );
            }
        }
        if now_ms() >= self.prune_due_ms {
            self.prune_due_ms = now_ms() + PRUNE_EVERY_MS;
            let before = frame.at_ms - recorder.retention.as_millis() as i64;
            match recorder.archive.prune(before).await {
                Ok(n) => self.counters.pruned_images += n,
                Err(error) => self.error("pruning_failed", "recorded frames", format!("{error:#}")),
            }
        }
    }

    /// The station peaks of a detection: the trigger layer's from the detector, the other layers' from the
    /// values kept since the event began.
    fn metrics(&self, detection: &Detection) -> Vec<StationMetric> {
        let since = detection.solution.first_detected_at - 10_000;
        let mut metrics = Vec::new();
        for (station, peak, at) in &detection.peaks {
            let received_at = self
                .history
                .iter()
                .find(|v| v.at_ms == *at)
                .map_or(*at, |v| v.received_at);
            metrics.push(station_metric(
                station,
                SURFACE_INTENSITY,
                (*peak, *at, received_at),
                false,
            ));
            let Some(&i) = self.index.get(&station.code) else {
                continue;
            };
            let mut best: HashMap<Layer, (f64, i64, i64)> = HashMap::new();
            for values in self.history.iter().filter(|v| v.at_ms >= since) {
                for (layer, row) in &values.layers {
                    if *layer == SURFACE_INTENSITY {
                        continue;
                    }
                    if let Some(v) = row[i]
                        && best.get(layer).is_none_or(|b| v > b.0)
                    {
                        best.insert(*layer, (v, values.at_ms, values.received_at));
                    }
                }
            }
            let mut best: Vec<_> = best.into_iter().collect();
            best.sort_by_key(|(layer, _)| *layer);
            for (layer, (peak, at, received_at)) in best {
                metrics.push(station_metric(
                    station,
                    layer,
                    (peak, at, received_at),
                    false,
                ));
            }
        }
        metrics
    }

    /// Archives a detection as published now: `reportedAt` is when it was published, its frame's observation
    /// time stays in `hypEstimate.calculatedAt` (and `sourceFrames`, with when the frame arrived).
    async fn report(&mut self, detection: &Detection) {
        let metrics = self.metrics(detection);
        let mut solution = detection.solution.clone();
        solution.reported_at = now_ms();
        solution.recorded_at = solution.reported_at;
        self.archive(&solution, metrics).await;
    }

    /// Shapes a solution through the component and appends it with its stations' peaks.
    async fn archive(&mut self, solution: &Solution, metrics: Vec<StationMetric>) {
        match self.try_archive(solution, metrics).await {
            Ok(()) => {
                self.counters.reports += 1;
                metrics::counter!("osds_hyp_reports_total", "outcome" => "archived").increment(1);
            }
            Err(error) => {
                self.counters.failed_reports += 1;
                metrics::counter!("osds_hyp_reports_total", "outcome" => "failed").increment(1);
                self.error(
                    "report_failed",
                    format!("report {} of {}", solution.report_number, solution.event_id),
                    format!("{error:#}"),
                );
            }
        }
    }

    async fn try_archive(
        &mut self,
        solution: &Solution,
        metrics: Vec<StationMetric>,
    ) -> anyhow::Result<()> {
        let solution_bytes = serde_json::to_vec(solution)?;
        let shaper = self.shaper.load_full();
        let payload = shaper.shape(&solution_bytes)?;
        let report: serde_json::Value =
            serde_json::from_slice(&payload).context("the shaper returned no JSON")?;
        let input = HypReportInput {
            event_id: solution.event_id.clone(),
            number: i64::from(solution.report_number),
            status: solution.status,
            first_at: solution.first_detected_at,
            reported_at: solution.reported_at,
            recorded_at: solution.recorded_at,
            region: solution.region.clone(),
            payload,
            shaper: shaper.info().identity(),
            solution: solution_bytes,
            metrics,
        };
        let sha256 = self.writer.append_hyp_report(&input).await?;
        let h = &report["event"]["hypEstimate"];
        let line = format!(
            "{} report {} {:<11} grade {} {:.3}N {:.3}E {:>5.1} km M{} stations {} sha256 {}",
            solution.event_id,
            solution.report_number,
            solution.status,
            report["quality"]["grade"].as_str().unwrap_or("?"),
            h["latitude"].as_f64().unwrap_or_default(),
            h["longitude"].as_f64().unwrap_or_default(),
            h["depthKm"].as_f64().unwrap_or_default(),
            report["event"]["magnitude"]
                .as_f64()
                .map_or("-".to_string(), |m| format!("{m:.1}")),
            report["quality"]["stationCount"],
            &sha256[..12]
        );
        if self.print_reports {
            println!("{line}");
        } else {
            tracing::info!(report = %line, "hyp report archived");
        }
        Ok(())
    }

    /// Keeps `code: what` among the recent errors `/hyp/status` shows; `detail` (a library's words) goes to
    /// the log only.
    fn error(&mut self, code: &str, what: impl std::fmt::Display, detail: impl std::fmt::Display) {
        tracing::warn!(code, %what, error = %detail, "hyp detector");
        self.errors.push_back(format!("{code}: {what}"));
        while self.errors.len() > RECENT_ERRORS {
            self.errors.pop_front();
        }
    }

    async fn write_state<S: FrameSource>(&mut self, source: &S, state: &str) {
        self.state_due_ms = now_ms() + STATE_EVERY_MS;
        let open: Vec<_> = self
            .detector
            .open_events()
            .iter()
            .map(|(id, status, n)| json!({ "id": id, "status": status, "stations": n }))
            .collect();
        let detector = json!({
            "state": state,
            "algorithm": self.detector.algorithm(),
            "source": source.describe(),
            "stations": self.network.stations.len(),
            "lastFrameAt": self.last_frame_at,
            "openEvents": open,
            "counters": self.counters,
            "sources": [source.health()],
            "errors": self.errors,
        });
        let recorder = match &self.recorder {
            None => json!({ "state": "off" }),
            Some(recorder) => {
                let summary = recorder.archive.summary().await.unwrap_or_default();
                json!({
                    "state": state,
                    "retentionHours": recorder.retention.as_secs_f64() / 3600.0,
                    "recordedImages": self.counters.recorded_images,
                    "failedRecordings": self.counters.failed_recordings,
                    "prunedImages": self.counters.pruned_images,
                    "archive": summary,
                })
            }
        };
        let at = now_ms();
        for (name, value) in [("detector", detector), ("recorder", recorder)] {
            if let Err(error) = self.writer.set_hyp_state(name, at, &value).await {
                tracing::warn!(%error, "hyp: writing the {name} state failed");
            }
        }
    }
}

/// A station's peak of one layer, as stored with an event.
pub fn station_metric(
    station: &Station,
    layer: Layer,
    (peak, at, received_at): (f64, i64, i64),
    recovered: bool,
) -> StationMetric {
    StationMetric {
        station: station.code.clone(),
        name: station.name.clone(),
        latitude: station.latitude,
        longitude: station.longitude,
        metric: layer.metric(),
        peak,
        source_at: at,
        received_at,
        recovered,
    }
}
