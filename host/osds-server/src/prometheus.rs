//! The operator's metrics: Prometheus text on a listener of its own (`--metrics-listen`), never the public
//! port. Counters and histograms are recorded where things happen, through the `metrics` facade (a no-op
//! until [`Exporter::bind`] installs the recorder); what the service keeps as state anyway (upstream sockets,
//! the ingest queue, when each socket and channel last heard from the relay) is read when scraped. Every metric
//! is listed in the Metrics table of docs/operating.md.

use anyhow::Context;
use axum::Router;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use osds_api::live::DisconnectReason;
use osds_api::upstream::Upstream;
use osds_store::WriteMonitor;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::watch;

/// Bucket bounds of every `*_seconds` histogram: from a fast commit (under a millisecond) to a slow request.
const SECONDS_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];
/// How often histograms are folded into their buckets between scrapes (the exporter leaves it to its user).
const UPKEEP_EVERY: Duration = Duration::from_secs(5);

/// The recorder, installed, and its listener, bound.
pub struct Exporter {
    handle: PrometheusHandle,
    listener: TcpListener,
}

/// What a scrape reads besides the recorded metrics.
#[derive(Clone)]
struct Scrape {
    handle: PrometheusHandle,
    upstream: Arc<dyn Upstream>,
    writes: WriteMonitor,
}

impl Exporter {
    /// Binds `address` and installs the process's metrics recorder; before the service starts, so nothing
    /// records into the no-op recorder.
    pub async fn bind(address: SocketAddr) -> anyhow::Result<Exporter> {
        let listener = TcpListener::bind(address)
            .await
            .with_context(|| format!("listen for metrics on {address}"))?;
        let handle = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), SECONDS_BUCKETS)?
            .install_recorder()
            .context("install the metrics recorder")?;
        describe();
        metrics::gauge!("osds_build_info", "version" => env!("CARGO_PKG_VERSION")).set(1.0);
        Ok(Exporter { handle, listener })
    }

    /// Serves `GET /metrics` until `shutdown` turns true.
    pub fn serve(
        self,
        upstream: Arc<dyn Upstream>,
        writes: WriteMonitor,
        mut shutdown: watch::Receiver<bool>,
    ) -> anyhow::Result<()> {
        let address = self.listener.local_addr()?;
        at_zero(&upstream.sources());
        let upkeep = self.handle.clone();
        let mut upkeep_shutdown = shutdown.clone();
        tokio::spawn(async move {
            let mut every = tokio::time::interval(UPKEEP_EVERY);
            loop {
                tokio::select! {
                    _ = every.tick() => upkeep.run_upkeep(),
                    _ = upkeep_shutdown.changed() => return,
                }
            }
        });
        let app = Router::new()
            .route("/metrics", get(scrape))
            .with_state(Scrape {
                handle: self.handle,
                upstream,
                writes,
            });
        tracing::info!(%address, "serving metrics at /metrics");
        // Scripts and tests find the port here, as they find the public one in `osds: serving`.
        println!("osds: metrics http://{address}/metrics");
        tokio::spawn(async move {
            let stopped = async move {
                let _ = shutdown.wait_for(|stopping| *stopping).await;
            };
            if let Err(e) = axum::serve(self.listener, app)
                .with_graceful_shutdown(stopped)
                .await
            {
                tracing::error!(error = %e, "the metrics listener failed");
            }
        });
        Ok(())
    }
}

/// An RFC 3339 time as Unix seconds (a Prometheus timestamp gauge).
fn seconds(at: &str) -> Option<f64> {
    osds_time::parse_ms(at).map(|ms| ms as f64 / 1000.0)
}

/// The state-derived metrics, refreshed, then everything in the Prometheus text format.
async fn scrape(State(scrape): State<Scrape>) -> impl IntoResponse {
    for socket in scrape.upstream.connections() {
        let labels = [
            ("socket", socket.path.clone()),
            ("role", socket.role.to_owned()),
        ];
        metrics::gauge!("osds_upstream_connected", &labels)
            .set(f64::from(u8::from(socket.connected)));
        metrics::counter!("osds_upstream_reconnects_total", &labels).absolute(socket.reconnects);
        metrics::counter!("osds_upstream_refused_frames_total", &labels)
            .absolute(socket.refused_frames);
        if let Some(at) = socket.last_message_at.as_deref().and_then(seconds) {
            metrics::gauge!("osds_upstream_last_message_timestamp_seconds", &labels).set(at);
        }
    }
    for source in scrape.upstream.source_states() {
        if let Some(at) = source.last_received_at.as_deref().and_then(seconds) {
            metrics::gauge!("osds_source_last_received_timestamp_seconds", "source" => source.source.clone())
                .set(at);
        }
        metrics::gauge!("osds_source_connected", "source" => source.source)
            .set(f64::from(u8::from(source.connected)));
    }
    let health = scrape.writes.health();
    metrics::gauge!("osds_archive_writable").set(f64::from(u8::from(health.failure.is_none())));
    metrics::gauge!("osds_ingest_queued_frames").set(health.queued_frames as f64);
    metrics::gauge!("osds_ingest_queued_bytes").set(health.queued_bytes as f64);
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        scrape.handle.render(),
    )
}

/// Every series whose labels are known at start, at zero until something happens: an alert on an increase or
/// a rate needs the series before its first event, and `absent()` must not fire on a quiet service. (Series
/// labelled by what traffic brings, a route or a component, appear with it; timestamps with the first message
/// or commit.)
fn at_zero(sources: &[String]) {
    for source in sources {
        metrics::counter!("osds_ingest_dropped_frames_total", "source" => source.clone())
            .increment(0);
    }
    for protocol in ["sse", "ws"] {
        metrics::gauge!("osds_live_subscribers", "protocol" => protocol).increment(0.0);
        metrics::gauge!("osds_live_replay_backlog_reports", "protocol" => protocol).increment(0.0);
        metrics::counter!("osds_live_deliveries_total", "protocol" => protocol).increment(0);
        for reason in DisconnectReason::ALL {
            metrics::counter!("osds_live_disconnects_total", "protocol" => protocol, "reason" => reason.as_str())
                .increment(0);
        }
    }
    for limit in ["rate", "concurrent", "open_connections"] {
        metrics::counter!("osds_http_rate_limited_total", "limit" => limit).increment(0);
    }
    metrics::counter!("osds_live_archive_reads_total").increment(0);
    for name in [
        "osds_hyp_frames_total",
        "osds_hyp_missing_images_total",
        "osds_hyp_undecodable_images_total",
    ] {
        metrics::counter!(name).increment(0);
    }
    for outcome in ["archived", "failed"] {
        metrics::counter!("osds_hyp_reports_total", "outcome" => outcome).increment(0);
    }
    for name in [
        "osds_hyp_scorecard_matched",
        "osds_hyp_scorecard_ours_unmatched",
        "osds_hyp_scorecard_agency_missed",
    ] {
        metrics::gauge!(name).increment(0.0);
    }
}

/// The `# HELP` line of every metric.
fn describe() {
    use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
    describe_counter!(
        "osds_upstream_frames_received_total",
        "Frames received from the relay, per socket and channel (`unrouted`: no channel's)."
    );
    describe_counter!(
        "osds_ingest_units_total",
        "Units of received frames, archived: per channel and outcome (archived: a new report version; duplicate, unparsed, ignored)."
    );
    describe_counter!(
        "osds_ingest_dropped_frames_total",
        "Received frames dropped because the ingest queue was full while the archive could not write."
    );
    describe_gauge!(
        "osds_ingest_queued_frames",
        "Received frames waiting for the archive."
    );
    describe_gauge!(
        "osds_ingest_queued_bytes",
        Unit::Bytes,
        "Bytes of received frames waiting for the archive."
    );
    describe_gauge!(
        "osds_archive_writable",
        "1 while the archive takes writes, 0 while they fail (see /status `writes`)."
    );
    describe_histogram!(
        "osds_commit_duration_seconds",
        Unit::Seconds,
        "Time of a successful group commit of received frames."
    );
    describe_gauge!(
        "osds_upstream_connected",
        "1 while the upstream socket is connected."
    );
    describe_gauge!(
        "osds_upstream_last_message_timestamp_seconds",
        "When the upstream socket last received a message (Unix seconds): alert on its age."
    );
    describe_gauge!(
        "osds_source_last_received_timestamp_seconds",
        "When a frame of the channel was last received on any socket (Unix seconds)."
    );
    describe_gauge!(
        "osds_archive_last_commit_timestamp_seconds",
        "When this process last archived a new report version (Unix seconds)."
    );
    describe_gauge!(
        "osds_build_info",
        "Always 1; the service's version as a label."
    );
    describe_counter!(
        "osds_upstream_reconnects_total",
        "Reconnects of the upstream socket."
    );
    describe_counter!(
        "osds_upstream_refused_frames_total",
        "Frames over --upstream-max-frame-mib the upstream socket refused."
    );
    describe_gauge!(
        "osds_source_connected",
        "1 while the channel has a connected socket (its own or /all_eew)."
    );
    describe_gauge!(
        "osds_live_subscribers",
        "Live consumers connected, per protocol (sse, ws)."
    );
    describe_counter!(
        "osds_live_deliveries_total",
        "Reports written to live consumers, per protocol."
    );
    describe_counter!(
        "osds_live_disconnects_total",
        "Live connections ended, per protocol and reason."
    );
    describe_gauge!(
        "osds_live_replay_backlog_reports",
        "Reports live consumers still have to replay from their cursors, per protocol."
    );
    describe_counter!(
        "osds_live_archive_reads_total",
        "Queries live delivery made to the archive (replayed blocks, fills of the recent reports' ring)."
    );
    describe_counter!(
        "osds_http_requests_total",
        "Requests answered, per route and status."
    );
    describe_histogram!(
        "osds_http_request_duration_seconds",
        Unit::Seconds,
        "Time until a response's head, per route."
    );
    describe_counter!(
        "osds_http_rate_limited_total",
        "Requests and connections answered 429, per limit (rate, concurrent, open_connections)."
    );
    describe_counter!(
        "osds_wasm_calls_total",
        "Calls into Wasm components, per component and outcome (ok, trap, timeout)."
    );
    describe_counter!(
        "osds_hyp_frames_total",
        "Seconds of monitor images the detector took."
    );
    describe_counter!(
        "osds_hyp_missing_images_total",
        "Monitor images that did not arrive."
    );
    describe_counter!(
        "osds_hyp_undecodable_images_total",
        "Monitor images that arrived but could not be decoded."
    );
    describe_counter!(
        "osds_hyp_reports_total",
        "Detector reports, per outcome (archived, failed)."
    );
    describe_gauge!(
        "osds_hyp_scorecard_matched",
        "Self-sensing events matched with JMA's determination of the same quake (100 km, 30 s)."
    );
    describe_gauge!(
        "osds_hyp_scorecard_ours_unmatched",
        "Public self-sensing events JMA has not reported after 10 minutes: possibly false."
    );
    describe_gauge!(
        "osds_hyp_scorecard_agency_missed",
        "JMA quakes of M 3 or more inside the network that no self-sensing event matched."
    );
    describe_gauge!(
        "osds_hyp_scorecard_median_epicentre_km",
        "Median distance (km) of matched self-sensing epicentres from JMA's."
    );
}
