//! Validators for caching: an ETag on every JSON answer, 304 on a match, `Cache-Control`, and compression.

use crate::error::ApiError;
use axum::body::Body;
use axum::extract::Request;
use axum::http::StatusCode;
use axum::http::header::{self, HeaderMap, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

/// How long a JSON answer may be reused without asking again.
pub const JSON_CACHE_CONTROL: &str = "public, max-age=5";

/// Weak ETags and short caching on JSON, and `If-None-Match` → 304 wherever an ETag is given.
pub async fn caching(request: Request, next: Next) -> Response {
    let if_none_match = request.headers().get(header::IF_NONE_MATCH).cloned();
    let response = next.run(request).await;
    if response.status() != StatusCode::OK {
        return response;
    }
    let is_json = is_json(response.headers());
    // A JSON answer is one buffer already (its size is known), so hashing it holds nothing extra, whatever its
    // size (a full self-sensing event can be tens of MB). A body of unknown size would be a stream: no ETag.
    let whole = http_body::Body::size_hint(response.body())
        .exact()
        .is_some();
    let response = if is_json && whole && !response.headers().contains_key(header::ETAG) {
        let (mut parts, body) = response.into_parts();
        let bytes = match axum::body::to_bytes(body, usize::MAX).await {
            Ok(bytes) => bytes,
            Err(e) => {
                tracing::warn!(error = %e, "a JSON body could not be read for its ETag");
                return ApiError::unavailable(
                    "the response could not be produced; retry after backing off",
                )
                .into_response();
            }
        };
        let digest = Sha256::digest(&bytes);
        mark_json_validator(&mut parts.headers, &digest[..16]);
        Response::from_parts(parts, Body::from(bytes))
    } else {
        response
    };
    match (if_none_match, response.headers().get(header::ETAG)) {
        (Some(wanted), Some(etag)) if etag_matches(&wanted, etag) => {
            let mut not_modified = StatusCode::NOT_MODIFIED.into_response();
            for name in [header::ETAG, header::CACHE_CONTROL] {
                if let Some(value) = response.headers().get(&name) {
                    not_modified.headers_mut().insert(name, value.clone());
                }
            }
            not_modified
        }
        _ => response,
    }
}

/// A JSON answer's weak `ETag` from a digest of what it says, and its `Cache-Control` unless it has one.
pub fn mark_json_validator(headers: &mut HeaderMap, digest: &[u8]) {
    if let Ok(etag) = HeaderValue::from_str(&format!("W/\"{}\"", hex::encode(digest))) {
        headers.insert(header::ETAG, etag);
    }
    headers
        .entry(header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static(JSON_CACHE_CONTROL));
}

/// The 304 for a request whose `If-None-Match` names the validator `digest` (see [`mark_json_validator`]), for a
/// handler that knows its answer's validator before building the answer.
pub fn not_modified(request: &HeaderMap, digest: &[u8]) -> Option<Response> {
    let wanted = request.get(header::IF_NONE_MATCH)?;
    let mut headers = HeaderMap::new();
    mark_json_validator(&mut headers, digest);
    let etag = headers.get(header::ETAG)?;
    if !etag_matches(wanted, etag) {
        return None;
    }
    let mut response = StatusCode::NOT_MODIFIED.into_response();
    *response.headers_mut() = headers;
    Some(response)
}

/// `If-None-Match` uses the weak comparison: `W/"x"` and `"x"` match.
pub(super) fn etag_matches(wanted: &HeaderValue, etag: &HeaderValue) -> bool {
    let Ok(wanted) = wanted.to_str() else {
        return false;
    };
    let Ok(etag) = etag.to_str() else {
        return false;
    };
    let opaque = |tag: &str| tag.trim().trim_start_matches("W/").to_string();
    wanted.trim() == "*"
        || wanted
            .split(',')
            .any(|candidate| opaque(candidate) == opaque(etag))
}

/// Whether an answer is JSON: the service's own, or GeoJSON.
fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.starts_with("application/json") || v.starts_with(osds_contract::geojson::MEDIA_TYPE)
        })
}

/// Only JSON is compressed: never the event stream, never raw bytes.
pub fn compress_json(
    _status: StatusCode,
    _version: axum::http::Version,
    headers: &HeaderMap,
    _extensions: &axum::http::Extensions,
) -> bool {
    is_json(headers)
}
