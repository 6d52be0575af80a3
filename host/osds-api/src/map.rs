//! `/map`: a live map page, self-contained (a coastline of East Asia inside, nothing fetched from elsewhere),
//! that shows each EEW channel's latest report and the self-sensing events, and follows `/stream` and
//! `/hyp/stream` as reports arrive. The page and its data's source are in `map/`.

use crate::error::ApiError;
use crate::params::no_params;
use crate::state::AppState;
use axum::Router;
use axum::extract::RawQuery;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

const PAGE: &str = concat!(
    include_str!("map/head.html"),
    include_str!("map/coastline.geojson"),
    include_str!("map/tail.html")
);

pub fn routes() -> Router<AppState> {
    Router::new().route("/map", get(page))
}

async fn page(RawQuery(query): RawQuery) -> Result<Response, ApiError> {
    no_params(query)?;
    Ok((
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/html; charset=utf-8"),
        )],
        PAGE,
    )
        .into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_carries_its_coastline_and_fetches_nothing_from_elsewhere() {
        assert!(PAGE.contains("\"type\":\"MultiLineString\""));
        // The one absolute URL is SVG's namespace name, which is never fetched.
        let elsewhere: Vec<&str> = PAGE
            .match_indices("http")
            .map(|(at, _)| &PAGE[at..(at + 30).min(PAGE.len())])
            .filter(|url| !url.starts_with("http://www.w3.org/2000/svg"))
            .collect();
        assert!(elsewhere.is_empty(), "{elsewhere:?}");
        assert!(PAGE.contains("/api/v1/stream") && PAGE.contains("/api/v1/hyp/stream"));
    }
}
