//! What every handler can reach.

use crate::live::LiveState;
use crate::live::config::LiveConfig;
use crate::live::hub::Hub;
use crate::live::recent::RecentReports;
use crate::reports::pages::ReportCache;
use crate::upstream::Upstream;
use osds_runtime::{SharedDecoders, SharedShaper};
use osds_store::{BackupSettings, Store, WriteMonitor};
use std::sync::Arc;
use tokio::sync::watch;

/// The handlers' shared state.
#[derive(Clone)]
pub struct AppState {
    pub store: Store,
    /// The upstream connection board that ingestion keeps.
    pub upstream: Arc<dyn Upstream>,
    pub decoders: SharedDecoders,
    /// The commit horizon published by the archive writer.
    pub high_water: watch::Receiver<i64>,
    /// Whether the archive writes, and the received frames waiting for it.
    pub writes: WriteMonitor,
    pub live_config: LiveConfig,
    /// Becomes true when the service stops: live connections close so shutdown does not wait on them.
    pub shutdown: watch::Receiver<bool>,
    /// Where backups are kept and how often they are taken; `/status` lists the directory.
    pub backups: Arc<BackupSettings>,
    /// The hyp report shaper in service; `/hyp/status` names it.
    pub shaper: SharedShaper,
    /// The self-sensing scorecard against the official agency's determinations (`/hyp/status`, each event).
    pub scorecard: crate::scorecard::SharedScorecard,
    /// Rendered report versions below the horizon, by block, for `/reports` and replaying consumers (its
    /// budget is set by `osds serve --report-cache-mb`).
    pub report_cache: Arc<ReportCache>,
    /// Recently committed reports, read and rendered once for all live consumers.
    pub recent: Arc<RecentReports>,
    /// Writes new reports to the sockets of caught-up live consumers.
    pub hub: Arc<Hub>,
    /// SSE streams that took their connections from hyper; a shutdown waits for them as for connections.
    pub live_streams: tokio_util::task::TaskTracker,
    /// The self-sensing horizon the live self-sensing channels follow.
    pub hyp_horizon: Arc<crate::live::hyp_horizon::HypHorizon>,
}

/// Live delivery's part of the state (see `crate::live::state`).
impl axum::extract::FromRef<AppState> for LiveState {
    fn from_ref(state: &AppState) -> LiveState {
        LiveState {
            store: state.store.clone(),
            upstream: state.upstream.clone(),
            high_water: state.high_water.clone(),
            config: state.live_config.clone(),
            shutdown: state.shutdown.clone(),
            report_cache: state.report_cache.clone(),
            recent: state.recent.clone(),
            hub: state.hub.clone(),
            streams: state.live_streams.clone(),
            hyp_horizon: state.hyp_horizon.clone(),
        }
    }
}
