//! `/livez` and `/readyz`, for load balancers and orchestrators: outside `/api/v1`, the rate and connection
//! limits and the caches. Liveness is the process answering; readiness is the archive's database answering a
//! read, the archive taking writes and every archived channel having an upstream socket connected (unless the
//! service does not ingest).

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

/// Why the service should not get traffic now, each `code` or `code:subject`.
fn not_ready(state: &AppState) -> Vec<String> {
    let mut reasons = Vec::new();
    if *state.shutdown.borrow() {
        reasons.push("stopping".to_string());
    }
    if let Some(failure) = state.writes.health().failure {
        reasons.push(format!("archive_not_writable:{}", failure.code));
    }
    if state.ingesting {
        reasons.extend(
            state
                .upstream
                .source_states()
                .into_iter()
                .filter(|s| !s.connected)
                .map(|s| format!("source_down:{}", s.source)),
        );
    }
    reasons
}

fn no_store(mut response: Response) -> Response {
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}
