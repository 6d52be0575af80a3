//! `/livez` and `/readyz`, for load balancers and orchestrators: outside `/api/v1`, the rate and connection
//! limits and the caches. Liveness is the process answering; readiness is "can serve reads": the archive's
//! database answers a read and the service is not stopping. Ingestion's health (a channel without a socket,
//! an archive that cannot be written) does not take a process out of its load balancer, whose reads all still
//! work: `/api/v1/status` and the metrics say it.

use crate::state::AppState;
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

pub async fn livez() -> Response {
    no_store((StatusCode::OK, Json(json!({ "live": true }))).into_response())
}

/// How long `/readyz` waits for the database to answer before calling it unreachable.
const DATABASE_CHECK: std::time::Duration = std::time::Duration::from_secs(2);

pub async fn readyz(State(state): State<AppState>) -> Response {
    let mut reasons = not_ready(&state);
    // Every process reads the archive, a replica only reads it: ready means the database answers.
    match tokio::time::timeout(DATABASE_CHECK, state.store.high_water()).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => {
            tracing::warn!(error = %format!("{e:#}"), "readyz: the archive's database does not answer");
            reasons.push("database_unreachable".to_string());
        }
        Err(_) => reasons.push("database_unreachable".to_string()),
    }
    let status = if reasons.is_empty() {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let ready = reasons.is_empty();
    no_store((status, Json(json!({ "ready": ready, "reasons": reasons }))).into_response())
}

/// Why the service should not get traffic now, besides its database (each a code).
fn not_ready(state: &AppState) -> Vec<String> {
    let mut reasons = Vec::new();
    if *state.shutdown.borrow() {
        reasons.push("stopping".to_string());
    }
    reasons
}

fn no_store(mut response: Response) -> Response {
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}
