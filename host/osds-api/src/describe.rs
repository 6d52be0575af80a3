//! What the service says about itself under `/api/v1`: an index of its resources, the OpenAPI document its
//! answers are tested against (`openapi.json`, `openapi.yaml`) and a reference page made from it at build
//! time (`docs`; see `build.rs`). Public reads under the same gateway rules as the rest.

use crate::error::ApiError;
use crate::params::no_params;
use crate::state::AppState;
use axum::Router;
use axum::extract::RawQuery;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};
use std::sync::LazyLock;

/// The document as written.
pub const OPENAPI_YAML: &str = include_str!("../../../schemas/openapi.yaml");
/// The same document as JSON.
pub const OPENAPI_JSON: &str = include_str!(concat!(env!("OUT_DIR"), "/openapi.json"));
const DOCS_HTML: &str = include_str!(concat!(env!("OUT_DIR"), "/docs.html"));

/// Where the API lives; every path of the document is below it.
const BASE: &str = "/api/v1";

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/", get(index))
        .route("/openapi.json", get(openapi_json))
        .route("/openapi.yaml", get(openapi_yaml))
        .route("/docs", get(docs))
}

/// The index, made once from the document: the API's name and version and a link to every resource.
static INDEX: LazyLock<String> = LazyLock::new(|| {
    let document: Value = serde_json::from_str(OPENAPI_JSON).unwrap_or_default();
    let resources: Vec<Value> = document["paths"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(path, item)| {
            json!({
                "path": format!("{BASE}{path}"),
                "summary": item["get"]["summary"],
                "tag": item["get"]["tags"][0],
            })
        })
        .collect();
    json!({
        "name": document["info"]["title"],
        "apiVersion": document["info"]["version"],
        "serviceVersion": env!("CARGO_PKG_VERSION"),
        "docs": format!("{BASE}/docs"),
        "openapi": { "json": format!("{BASE}/openapi.json"), "yaml": format!("{BASE}/openapi.yaml") },
        "health": { "live": "/livez", "ready": "/readyz" },
        "resources": resources,
    })
    .to_string()
});

pub async fn index(RawQuery(query): RawQuery) -> Result<Response, ApiError> {
    no_params(query)?;
    Ok(typed("application/json", INDEX.as_str()))
}

async fn openapi_json(RawQuery(query): RawQuery) -> Result<Response, ApiError> {
    no_params(query)?;
    Ok(typed("application/json", OPENAPI_JSON))
}

async fn openapi_yaml(RawQuery(query): RawQuery) -> Result<Response, ApiError> {
    no_params(query)?;
    Ok(typed("application/yaml; charset=utf-8", OPENAPI_YAML))
}

async fn docs(RawQuery(query): RawQuery) -> Result<Response, ApiError> {
    no_params(query)?;
    Ok(typed("text/html; charset=utf-8", DOCS_HTML))
}

fn typed(content_type: &'static str, body: &'static str) -> Response {
    (
        [(header::CONTENT_TYPE, HeaderValue::from_static(content_type))],
        body,
    )
        .into_response()
}
