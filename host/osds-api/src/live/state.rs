//! What live delivery reaches of the service: its own part of the handlers' state (the app state hands it over
//! through axum's `FromRef`), so live delivery never depends on the whole of it.

use super::config::LiveConfig;
use super::hub::Hub;
use crate::live::recent::RecentReports;
use crate::reports::pages::ReportCache;
use crate::upstream::Upstream;
use osds_store::Store;
use std::sync::Arc;
use tokio::sync::watch;

/// The live handlers' state.
#[derive(Clone)]
pub struct LiveState {
    pub store: Store,
    /// The upstream connection board (status messages, the channels a consumer may ask for).
    pub upstream: Arc<dyn Upstream>,
    /// The commit horizon published by the archive writer.
    pub high_water: watch::Receiver<i64>,
    pub config: LiveConfig,
    /// Becomes true when the service stops: live connections close so shutdown does not wait on them.
    pub shutdown: watch::Receiver<bool>,
    /// Rendered report versions below the horizon, for replaying consumers.
    pub report_cache: Arc<ReportCache>,
    /// Recently committed reports, read and rendered once for all live consumers.
    pub recent: Arc<RecentReports>,
    /// Writes new reports to the sockets of caught-up live consumers.
    pub hub: Arc<Hub>,
    /// SSE streams that took their connections from hyper; a shutdown waits for them as for connections.
    pub streams: tokio_util::task::TaskTracker,
    /// The self-sensing horizon the live self-sensing channels follow.
    pub hyp_horizon: Arc<super::hyp_horizon::HypHorizon>,
}
