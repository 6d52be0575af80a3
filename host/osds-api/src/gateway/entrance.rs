//! What the entrance refuses before any handler: the retired legacy host (410), methods other than reads
//! (405), and answers that cannot start in time or while the service stops (503).

use super::Gateway;
use crate::error::{ApiError, ErrorCode};
use axum::extract::{Request, State};
use axum::http::header::{self, HeaderMap, HeaderValue};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

pub const ALLOWED_METHODS: &str = "GET, HEAD, OPTIONS";

impl Gateway {
    pub(super) fn is_legacy_host(&self, headers: &HeaderMap) -> bool {
        let Some(host) = headers.get(header::HOST).and_then(|h| h.to_str().ok()) else {
            return false;
        };
        let host = host.to_ascii_lowercase();
        let without_port = strip_port(&host);
        self.config.legacy_hosts.iter().any(|legacy| {
            let legacy = legacy.to_ascii_lowercase();
            legacy == host || legacy == without_port
        })
    }
}

pub(super) fn strip_port(host: &str) -> &str {
    if host.starts_with('[') {
        // [v6]:port
        return host
            .split_once(']')
            .map(|(h, _)| &host[..=h.len()])
            .unwrap_or(host);
    }
    match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    }
}

/// The retired entrance never serves data: 410 naming the current base URL.
pub async fn legacy_host(
    State(gateway): State<Arc<Gateway>>,
    request: Request,
    next: Next,
) -> Response {
    if !gateway.is_legacy_host(request.headers()) {
        return next.run(request).await;
    }
    let base = &gateway.config.public_base_url;
    let body = serde_json::json!({
        "error": format!("this entrance is retired; the API is served at {base}"),
        "code": ErrorCode::Gone.as_str(),
        "baseUrl": base,
    });
    (StatusCode::GONE, axum::Json(body)).into_response()
}

/// GET, HEAD and OPTIONS only. A CORS preflight goes on to the CORS layer; a plain OPTIONS lists the methods.
pub async fn methods(request: Request, next: Next) -> Response {
    let allow = [
        (header::ALLOW, HeaderValue::from_static(ALLOWED_METHODS)),
        (
            header::ACCESS_CONTROL_ALLOW_ORIGIN,
            HeaderValue::from_static("*"),
        ),
    ];
    let preflight = request
        .headers()
        .contains_key(header::ACCESS_CONTROL_REQUEST_METHOD);
    let mut response = match *request.method() {
        Method::GET | Method::HEAD => next.run(request).await,
        Method::OPTIONS if preflight => next.run(request).await,
        Method::OPTIONS => (StatusCode::NO_CONTENT, allow).into_response(),
        ref other => {
            let error = ApiError {
                status: StatusCode::METHOD_NOT_ALLOWED,
                code: ErrorCode::MethodNotAllowed,
                message: format!(
                    "{other} is not supported: this API is read-only ({ALLOWED_METHODS})"
                ),
                retry_after: None,
            };
            (allow, error).into_response()
        }
    };
    // No body of ours is to be sniffed as anything but the type it declares.
    response.headers_mut().insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

/// 503 while the service stops, or when a response has not started within the request timeout.
pub async fn availability(
    State(gateway): State<Arc<Gateway>>,
    request: Request,
    next: Next,
) -> Response {
    if *gateway.shutdown.borrow() {
        return ApiError::unavailable("the service is stopping; retry after backing off")
            .into_response();
    }
    match before_deadline(gateway.config.request_timeout, next.run(request)).await {
        Some(response) => response,
        None => {
            tracing::warn!("a request timed out before its response started");
            ApiError::unavailable("the service could not answer in time; retry after backing off")
                .into_response()
        }
    }
}

/// `work`'s output if it is ready before `timeout` has passed, else `None`. Unlike `tokio::time::timeout`, the
/// deadline is checked before the work is polled again: an answer that arrives after the deadline (but before
/// the timer wheel's next millisecond tick) is late, not served.
pub(super) async fn before_deadline<T>(
    timeout: Duration,
    work: impl Future<Output = T>,
) -> Option<T> {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut work = std::pin::pin!(work);
    let mut alarm = std::pin::pin!(tokio::time::sleep_until(deadline));
    std::future::poll_fn(|cx| {
        if tokio::time::Instant::now() >= deadline {
            return Poll::Ready(None);
        }
        if let Poll::Ready(output) = work.as_mut().poll(cx) {
            return Poll::Ready(Some(output));
        }
        alarm.as_mut().poll(cx).map(|()| None)
    })
    .await
}
