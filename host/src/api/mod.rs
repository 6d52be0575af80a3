//! The public HTTP surface under `/api/v1`.

mod eew;
pub mod error;
pub mod live;
pub mod params;

use crate::decoders::SharedDecoders;
use crate::ingest::LiveState;
use crate::store::Store;
use axum::Router;
use axum::http::Uri;
use axum::routing::get;
use error::ApiError;
use std::sync::Arc;
use tokio::sync::watch;

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
}

pub fn router(state: AppState) -> Router {
    Router::new()
        .nest(
            "/api/v1",
            eew::routes()
                .route("/stream", get(live::stream))
                .route("/ws", get(live::ws)),
        )
        .fallback(not_found)
        .with_state(state)
}

async fn not_found(uri: Uri) -> ApiError {
    ApiError::not_found(format!("no such resource: {}", uri.path()))
}
