//! The one error type of the HTTP surface: `{"error": "<sentence>", "code": "<stable code>"}`.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// Every error code the service answers with: the `code` of `Error` in `schemas/openapi.yaml`, one variant per
/// cause (a test keeps the two lists equal).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    UnknownParameter,
    RepeatedParameter,
    InvalidParameter,
    OutOfRange,
    ParameterTooLong,
    InvalidRange,
    InvalidEventId,
    InvalidPath,
    InvalidLastEventId,
    WebsocketUpgradeRequired,
    NotFound,
    CursorAheadOfArchive,
    MethodNotAllowed,
    Gone,
    RateLimited,
    TooManyConnections,
    Unavailable,
    MalformedRequest,
    UriTooLong,
    HeadersTooLarge,
}

impl ErrorCode {
    pub const ALL: [ErrorCode; 20] = [
        ErrorCode::UnknownParameter,
        ErrorCode::RepeatedParameter,
        ErrorCode::InvalidParameter,
        ErrorCode::OutOfRange,
        ErrorCode::ParameterTooLong,
        ErrorCode::InvalidRange,
        ErrorCode::InvalidEventId,
        ErrorCode::InvalidPath,
        ErrorCode::InvalidLastEventId,
        ErrorCode::WebsocketUpgradeRequired,
        ErrorCode::NotFound,
        ErrorCode::CursorAheadOfArchive,
        ErrorCode::MethodNotAllowed,
        ErrorCode::Gone,
        ErrorCode::RateLimited,
        ErrorCode::TooManyConnections,
        ErrorCode::Unavailable,
        ErrorCode::MalformedRequest,
        ErrorCode::UriTooLong,
        ErrorCode::HeadersTooLarge,
    ];

    /// The code as the body carries it.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::UnknownParameter => "unknown_parameter",
            ErrorCode::RepeatedParameter => "repeated_parameter",
            ErrorCode::InvalidParameter => "invalid_parameter",
            ErrorCode::OutOfRange => "out_of_range",
            ErrorCode::ParameterTooLong => "parameter_too_long",
            ErrorCode::InvalidRange => "invalid_range",
            ErrorCode::InvalidEventId => "invalid_event_id",
            ErrorCode::InvalidPath => "invalid_path",
            ErrorCode::InvalidLastEventId => "invalid_last_event_id",
            ErrorCode::WebsocketUpgradeRequired => "websocket_upgrade_required",
            ErrorCode::NotFound => "not_found",
            ErrorCode::CursorAheadOfArchive => "cursor_ahead_of_archive",
            ErrorCode::MethodNotAllowed => "method_not_allowed",
            ErrorCode::Gone => "gone",
            ErrorCode::RateLimited => "rate_limited",
            ErrorCode::TooManyConnections => "too_many_connections",
            ErrorCode::Unavailable => "unavailable",
            ErrorCode::MalformedRequest => "malformed_request",
            ErrorCode::UriTooLong => "uri_too_long",
            ErrorCode::HeadersTooLarge => "headers_too_large",
        }
    }
}

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: ErrorCode,
    pub message: String,
    pub retry_after: Option<u64>,
}

impl ApiError {
    pub fn bad_request(code: ErrorCode, message: impl Into<String>) -> Self {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            code,
            message: message.into(),
            retry_after: None,
        }
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        ApiError {
            status: StatusCode::NOT_FOUND,
            code: ErrorCode::NotFound,
            message: message.into(),
            retry_after: None,
        }
    }

    /// A cursor above the archive's horizon: it came from another archive (one a restore replaced), and
    /// resuming from it would silently skip reports.
    pub fn cursor_ahead(cursor: i64, high_water: i64, archive_id: &str) -> Self {
        ApiError {
            status: StatusCode::CONFLICT,
            code: ErrorCode::CursorAheadOfArchive,
            message: format!(
                "cursor {cursor} is above this archive's highWater {high_water}: it is not a cursor of archive \
                 {archive_id} (restored from a backup?); start again from after=0, or from a time you trust"
            ),
            retry_after: None,
        }
    }

    pub fn unavailable(message: impl Into<String>) -> Self {
        ApiError {
            status: StatusCode::SERVICE_UNAVAILABLE,
            code: ErrorCode::Unavailable,
            message: message.into(),
            retry_after: Some(5),
        }
    }
}

/// A handler's answer: its response, or an error.
pub type ApiResult = Result<axum::response::Response, ApiError>;

/// A storage failure is the service being unable to answer (503), never a 500 with internals.
impl From<anyhow::Error> for ApiError {
    fn from(error: anyhow::Error) -> Self {
        tracing::error!(error = %format!("{error:#}"), "request failed in storage");
        ApiError::unavailable("the archive cannot be read right now; retry after backing off")
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (
            self.status,
            axum::Json(json!({ "error": self.message, "code": self.code.as_str() })),
        )
            .into_response();
        if let Some(seconds) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `code` enum of `Error` in the OpenAPI document, read from its one line list.
    fn documented_codes() -> Vec<String> {
        let openapi = include_str!("../../../schemas/openapi.yaml");
        let start = openapi
            .find("enum: [unknown_parameter")
            .expect("the Error schema lists its codes");
        let list = &openapi[start + "enum: [".len()..];
        list[..list.find(']').unwrap()]
            .split(',')
            .map(|code| code.trim().to_string())
            .collect()
    }

    #[test]
    fn the_error_codes_are_the_ones_the_openapi_document_lists() {
        let ours: Vec<String> = ErrorCode::ALL
            .iter()
            .map(|c| c.as_str().to_string())
            .collect();
        assert_eq!(ours, documented_codes());
        for code in ErrorCode::ALL {
            assert_eq!(serde_json::to_value(code).unwrap(), code.as_str());
        }
    }
}
