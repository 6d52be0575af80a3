//! The router: the `/api/v1` routes behind the entrance's layers.

use crate::error::ApiError;
use crate::gateway::{self, Gateway};
use crate::state::AppState;
use crate::{describe, eew, fdsn, health, hyp, live, map};
use axum::Router;
use axum::extract::MatchedPath;
use axum::http::{HeaderName, Method, Uri, header};
use axum::middleware;
use axum::response::Response;
use axum::routing::get;
use std::sync::Arc;
use std::time::Duration;
use tower_http::CompressionLevel;
use tower_http::compression::CompressionLayer;
use tower_http::cors::{Any, CorsLayer};

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
        .nest(
            "/api/v1",
            eew::routes()
                .merge(hyp::routes())
                .merge(describe::routes())
                .merge(map::routes()),
        )
        .nest(fdsn::BASE_PATH, fdsn::routes())
        // The index answers with and without the trailing slash (the document names it `/`).
        .route("/api/v1/", get(describe::index))
        .fallback(not_found)
        .layer(middleware::from_fn(gateway::caching))
        // Level 3 of gzip and brotli: a 600 kB `/reports` page compresses in 1.5 ms at gzip 3 against 3.5 ms at
        // the default 6, 38 kB against 30 kB (BENCHMARKS.md, run 15 and after).
        .layer(
            CompressionLayer::new()
                .quality(CompressionLevel::Precise(3))
                .compress_when(gateway::compress_json),
        )
        // Added after those two layers, so outside them: neither applies to an event stream or an upgrade, and
        // the compression layer would keep every SSE body in a box sized for its largest encoder (5.8 kB per
        // subscriber, measured with heaptrack).
        .route("/api/v1/stream", get(live::stream))
        .route("/api/v1/ws", get(live::ws))
        .route("/api/v1/hyp/stream", get(live::hyp::stream))
        .route("/api/v1/hyp/ws", get(live::hyp::ws))
        .with_state(state.clone())
        .layer(middleware::from_fn_with_state(
            gateway.clone(),
            gateway::availability,
        ))
        .layer(middleware::from_fn_with_state(
            gateway.clone(),
            gateway::legacy_host,
        ))
        .layer(middleware::from_fn_with_state(gateway, gateway::limits))
        // Outside the limits: a load balancer probes often, from one address.
        .route("/livez", get(health::livez))
        .route("/readyz", get(health::readyz).with_state(state))
        .layer(cors)
        // Outermost: the CORS layer takes every OPTIONS for a preflight, so plain ones are answered first.
        .layer(middleware::from_fn(gateway::methods))
        .layer(middleware::from_fn(access_log))
}

/// Every request at debug level: its route (the matched pattern, not the concrete path), status and latency
/// until the response head (a live stream's body goes on after).
async fn access_log(request: axum::extract::Request, next: middleware::Next) -> Response {
    let started = std::time::Instant::now();
    let method = request.method().clone();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map(|path| path.as_str().to_owned());
    let response = next.run(request).await;
    let latency = started.elapsed().as_secs_f64();
    let status = response.status().as_u16();
    // Unmatched paths share one label: a scanner's paths must not each become a series.
    let route = route.unwrap_or_else(|| "(none)".to_owned());
    tracing::debug!(
        %method,
        route = route.as_str(),
        status,
        latency_ms = latency * 1000.0,
        "request"
    );
    metrics::counter!("osds_http_requests_total", "route" => route.clone(), "status" => status.to_string())
        .increment(1);
    metrics::histogram!("osds_http_request_duration_seconds", "route" => route).record(latency);
    response
}

async fn not_found(uri: Uri) -> ApiError {
    ApiError::not_found(format!("no such resource: {}", uri.path()))
}
