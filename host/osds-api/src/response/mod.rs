//! The response bodies of `schemas/openapi.yaml` (the types of `osds_contract`, one per schema), built from the
//! store's rows. Handlers serialise these and nothing else (errors are `crate::error`).

pub mod eew;
pub mod hyp;
pub mod status;

use crate::error::{ApiError, ErrorCode};
use crate::params::Params;
use axum::http::header::{self, HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Json};
use osds_contract::geojson;

/// The JSON answer of a response body. Bodies borrow the rows they were built from, so a handler serialises
/// them before returning.
pub fn json<T: serde::Serialize>(body: &T) -> crate::error::ApiResult {
    Ok(Json(body).into_response())
}

/// How an event list or detail is written: the service's JSON, or GeoJSON ([`osds_contract::geojson`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Json,
    GeoJson,
}

impl Format {
    /// `format` (`json` or `geojson`) when given; else GeoJSON when `Accept` asks for `application/geo+json`
    /// (with a quality above 0) and not for JSON more; else JSON.
    pub fn negotiate(params: &mut Params, request: &HeaderMap) -> Result<Format, ApiError> {
        match params.take("format").as_deref() {
            Some("json") => Ok(Format::Json),
            Some("geojson") => Ok(Format::GeoJson),
            Some(other) => Err(ApiError::bad_request(
                ErrorCode::InvalidParameter,
                format!("`format` may be `json` or `geojson`, not `{other}`"),
            )),
            None => {
                let accept = request
                    .get_all(header::ACCEPT)
                    .iter()
                    .filter_map(|v| v.to_str().ok())
                    .collect::<Vec<_>>()
                    .join(",");
                let geo = quality(&accept, geojson::MEDIA_TYPE);
                let json = quality(&accept, "application/json");
                Ok(if geo > 0.0 && geo >= json {
                    Format::GeoJson
                } else {
                    Format::Json
                })
            }
        }
    }

    /// The answer in this format: `body` as it is, or its GeoJSON form. Either says it varies with `Accept`.
    pub fn answer<B: serde::Serialize + geojson::AsGeoJson>(
        self,
        body: &B,
    ) -> crate::error::ApiResult {
        let mut response = match self {
            Format::Json => Json(body).into_response(),
            Format::GeoJson => {
                let mut response = Json(body.geojson()).into_response();
                response.headers_mut().insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static(geojson::MEDIA_TYPE),
                );
                response
            }
        };
        response
            .headers_mut()
            .append(header::VARY, HeaderValue::from_static("accept"));
        Ok(response)
    }
}

/// The quality `Accept` gives `media` by name (0 when it is not named; a wildcard does not name it).
fn quality(accept: &str, media: &str) -> f32 {
    accept
        .split(',')
        .filter_map(|range| {
            let mut parts = range.split(';').map(str::trim);
            let name = parts.next()?;
            if !name.eq_ignore_ascii_case(media) {
                return None;
            }
            let q = parts
                .filter_map(|p| p.strip_prefix("q="))
                .find_map(|q| q.parse::<f32>().ok())
                .unwrap_or(1.0);
            Some(q)
        })
        .fold(0.0, f32::max)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn negotiated(query: &str, accept: Option<&str>) -> Result<Format, ApiError> {
        let mut params = Params::parse(Some(query)).unwrap();
        let mut headers = HeaderMap::new();
        if let Some(accept) = accept {
            headers.insert(header::ACCEPT, HeaderValue::from_str(accept).unwrap());
        }
        Format::negotiate(&mut params, &headers)
    }

    #[test]
    fn the_format_parameter_wins_then_accept_then_json() {
        assert_eq!(negotiated("format=geojson", None).unwrap(), Format::GeoJson);
        assert_eq!(
            negotiated("format=json", Some("application/geo+json")).unwrap(),
            Format::Json
        );
        assert_eq!(
            negotiated("", Some("application/geo+json")).unwrap(),
            Format::GeoJson
        );
        assert_eq!(
            negotiated("", Some("application/json;q=0.5, application/geo+json")).unwrap(),
            Format::GeoJson
        );
        assert_eq!(
            negotiated("", Some("application/json, application/geo+json;q=0.5")).unwrap(),
            Format::Json
        );
        assert_eq!(
            negotiated("", Some("application/geo+json;q=0")).unwrap(),
            Format::Json
        );
        assert_eq!(negotiated("", Some("*/*")).unwrap(), Format::Json);
        assert_eq!(negotiated("", None).unwrap(), Format::Json);
        assert!(negotiated("format=xml", None).is_err());
    }
}
