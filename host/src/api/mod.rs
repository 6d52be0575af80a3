//! The public HTTP surface under `/api/v1`.

mod eew;
pub mod error;
pub mod gateway;
mod hyp;
pub mod live;
pub mod params;
pub mod recent;

use crate::decoders::SharedDecoders;
use crate::ingest::LiveState;
use crate::store::Store;
use axum::Router;
use axum::http::{HeaderName, Method, Uri, header};
use axum::middleware;
use axum::routing::get;
use error::ApiError;
use gateway::Gateway;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tower_http::compression::CompressionLayer;
use tower_http::cors::{Any, CorsLayer};

/// What every handler can reach.
#[derive(Clone)]
pub struct AppState {
    pub store: Store,
    pub live: Arc<LiveState>,
    pub decoders: SharedDecoders,
    /// The commit horizon published by the archive writer.
    pub high_water: watch::Receiver<i64>,
    pub live_config: live::LiveConfig,
    /// Becomes true when the service stops: live connections close so shutdown does not wait on them.
    pub shutdown: watch::Receiver<bool>,
    /// Where backups are kept and how often they are taken; `/status` lists the directory.
    pub backups: Arc<crate::store::BackupSettings>,
    /// The hyp report shaper in service; `/hyp/status` names it.
    pub shaper: crate::components::SharedShaper,
    /// Recently committed reports, read and rendered once for all live consumers.
    pub recent: Arc<recent::RecentReports>,
    /// Writes new reports to the sockets of caught-up live consumers.
    pub hub: Arc<live::hub::Hub>,
    /// SSE streams that took their connections from hyper; a shutdown waits for them as for connections.
    pub live_streams: tokio_util::task::TaskTracker,
}

/// The whole public surface: the `/api/v1` routes behind the entrance's layers. Outermost first: methods,
/// CORS, limits, the legacy host, availability, compression, caching; the live streams skip the last two.
pub fn router(state: AppState, gateway: Arc<Gateway>) -> Router {
    let cors = CorsLayer::new()
        .allow_origin(Any)
        .allow_methods([Method::GET, Method::HEAD, Method::OPTIONS])
        .allow_headers(Any)
        .expose_headers([
            HeaderName::from_static("x-content-sha256"),
            header::ETAG,
            header::RETRY_AFTER,
            header::CONTENT_LENGTH,
            gateway::RATELIMIT,
            gateway::RATELIMIT_POLICY,
        ])
        .max_age(Duration::from_secs(86_400));
    Router::new()
        .nest("/api/v1", eew::routes().merge(hyp::routes()))
        .fallback(not_found)
        .layer(middleware::from_fn(gateway::caching))
        .layer(CompressionLayer::new().compress_when(gateway::compress_json))
        // Added after those two layers, so outside them: neither applies to an event stream or an upgrade, and
        // the compression layer would keep every SSE body in a box sized for its largest encoder (5.8 kB per
        // subscriber, measured with heaptrack).
        .route("/api/v1/stream", get(live::stream))
        .route("/api/v1/ws", get(live::ws))
        .with_state(state)
        .layer(middleware::from_fn_with_state(
            gateway.clone(),
            gateway::availability,
        ))
        .layer(middleware::from_fn_with_state(
            gateway.clone(),
            gateway::legacy_host,
        ))
        .layer(middleware::from_fn_with_state(gateway, gateway::limits))
        .layer(cors)
        // Outermost: the CORS layer takes every OPTIONS for a preflight, so plain ones are answered first.
        .layer(middleware::from_fn(gateway::methods))
}

async fn not_found(uri: Uri) -> ApiError {
    ApiError::not_found(format!("no such resource: {}", uri.path()))
}
