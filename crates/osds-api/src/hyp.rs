//! The self-sensing family: `/hyp/status`, `/hyp/events`, `/hyp/events/{id}` (full or `view=summary`),
//! `/hyp/events/{id}/reports/{number}` and `/hyp/events/{id}/export`. Times are Unix ms; reports are served
//! from their stored payload with `sha256`, the hash of that payload, added.

use crate::error::{ApiError, ErrorCode};
use crate::params::{MAX_SAFE_INTEGER, Params, PathText, PathTexts, parse_int};
use crate::state::AppState;
use axum::Router;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Json, Response};
use axum::routing::get;
use osds_store::{HypEventRow, HypFilter, HypReportRow, HypStationRow};
use osds_time::now_ms;
use serde_json::{Map, Value, json};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/hyp/status", get(status))
        .route("/hyp/events", get(events))
        .route("/hyp/events/{id}", get(event))
        .route("/hyp/events/{id}/reports/{number}", get(report))
        .route("/hyp/events/{id}/export", get(export))
}

/// A stored report as served: its payload with `sha256` added.
fn report_json(row: &HypReportRow) -> Value {
    let mut report: Map<String, Value> = serde_json::from_slice(&row.payload).unwrap_or_default();
    report.insert("sha256".into(), json!(row.sha256));
    Value::Object(report)
}

/// The lightweight form: main parameters without per-report evidence, station snapshot and source frames.
fn summary(mut report: Value) -> Value {
    if let Some(object) = report.as_object_mut() {
        object.remove("stations");
        object.remove("sourceFrames");
    }
    if let Some(event) = report.get_mut("event").and_then(Value::as_object_mut) {
        event.remove("evidence");
    }
    report
}

fn stations_json(stations: &[HypStationRow]) -> Value {
    Value::Array(
        stations
            .iter()
            .map(|s| {
                let metrics: Map<String, Value> = s
                    .metrics
                    .iter()
                    .map(|m| {
                        (
                            m.metric.clone(),
                            json!({ "peak": m.peak, "sourceAt": m.source_at, "receivedAt": m.received_at, "recovered": m.recovered }),
                        )
                    })
                    .collect();
                json!({ "code": s.code, "name": s.name, "latitude": s.latitude, "longitude": s.longitude, "metrics": metrics })
            })
            .collect(),
    )
}

fn event_head(row: &HypEventRow) -> Map<String, Value> {
    let mut event = Map::new();
    event.insert("id".into(), json!(row.id));
    event.insert("first_at".into(), json!(row.first_at));
    event.insert("updated_at".into(), json!(row.updated_at));
    event.insert("status".into(), json!(row.status));
    event.insert("region".into(), json!(row.region));
    event
}

fn not_found(id: &str) -> ApiError {
    ApiError::not_found(format!("no public self-sensing event `{id}`"))
}

/// The event with every report, full or summarised, and the event-level station peaks.
async fn event_document(
    state: &AppState,
    id: &str,
    summarised: bool,
) -> Result<Map<String, Value>, ApiError> {
    let row = state
        .store
        .hyp_event(id)
        .await?
        .ok_or_else(|| not_found(id))?;
    let reports: Vec<Value> = state
        .store
        .hyp_reports(id)
        .await?
        .iter()
        .map(report_json)
        .map(|r| if summarised { summary(r) } else { r })
        .collect();
    let stations = state.store.hyp_stations(id).await?;
    let mut event = event_head(&row);
    event.insert("reports".into(), Value::Array(reports));
    event.insert("stations".into(), stations_json(&stations));
    Ok(event)
}

async fn status(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, ApiError> {
    Params::parse(query.as_deref())?.finish()?;
    let detector = state.store.hyp_state("detector").await?;
    let recorder = state.store.hyp_state("recorder").await?;
    let algorithm = match detector.as_ref().and_then(|d| d["algorithm"].as_str()) {
        Some(algorithm) => algorithm.to_string(),
        None => state
            .store
            .hyp_latest_algorithm()
            .await?
            .unwrap_or_else(|| "none: no detector has run".into()),
    };
    let errors = detector
        .as_ref()
        .and_then(|d| d["errors"].as_array().cloned())
        .unwrap_or_default();
    let sources = detector
        .as_ref()
        .and_then(|d| d["sources"].as_array().cloned())
        .unwrap_or_else(|| {
            vec![json!({ "source": "kmoni", "health": "not-running", "detail": "no detector has reported a state" })]
        });
    let (events, public, reports) = state.store.hyp_counts().await?;
    Ok(Json(json!({
        "algorithm": algorithm,
        "detector": detector,
        "recorder": recorder,
        "errors": errors,
        "officialEewTakeover": false,
        "stationScope": "algorithm-associated",
        "sources": sources,
        "archive": { "events": events, "publicEvents": public, "reports": reports },
        "shaper": state.shaper.load().info(),
        "serverTime": now_ms(),
    })))
}

async fn events(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, ApiError> {
    let mut params = Params::parse(query.as_deref())?;
    let q = params.text("q", 100)?.filter(|q| !q.is_empty());
    let from_ms = params.int("from", 0..=MAX_SAFE_INTEGER)?.unwrap_or(0);
    let to_ms = params.int("to", 0..=MAX_SAFE_INTEGER)?;
    let page = params.int("page", 1..=100_000)?.unwrap_or(1);
    let limit = params.int("limit", 1..=100)?.unwrap_or(30);
    params.finish()?;
    if to_ms.is_some_and(|to| to < from_ms) {
        return Err(ApiError::bad_request(
            ErrorCode::InvalidRange,
            "`to` is before `from`",
        ));
    }
    let filter = HypFilter {
        q,
        from_ms,
        to_ms,
        page,
        limit,
    };
    let (rows, total) = state.store.hyp_events(&filter).await?;
    let mut items = Vec::with_capacity(rows.len());
    for row in &rows {
        let latest = state
            .store
            .hyp_report(&row.id, row.latest_number)
            .await?
            .map(|r| summary(report_json(&r)))
            .unwrap_or(Value::Null);
        let mut item = event_head(row);
        item.insert("latest".into(), latest);
        items.push(Value::Object(item));
    }
    Ok(Json(
        json!({ "items": items, "total": total, "page": page, "limit": limit }),
    ))
}

async fn event(
    State(state): State<AppState>,
    PathText(id): PathText,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, ApiError> {
    let mut params = Params::parse(query.as_deref())?;
    let summarised = summary_view(&mut params)?;
    params.finish()?;
    Ok(Json(Value::Object(
        event_document(&state, &id, summarised).await?,
    )))
}

/// Whether `view=summary` was asked for; any other view is a 400.
fn summary_view(params: &mut Params) -> Result<bool, ApiError> {
    match params.take("view").as_deref() {
        None => Ok(false),
        Some("summary") => Ok(true),
        Some(other) => Err(ApiError::bad_request(
            ErrorCode::InvalidParameter,
            format!("`view` may only be `summary`, not `{other}`"),
        )),
    }
}

async fn export(
    State(state): State<AppState>,
    PathText(id): PathText,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, ApiError> {
    // The export is always the full event: `view=summary` is accepted and does not change it.
    let mut params = Params::parse(query.as_deref())?;
    summary_view(&mut params)?;
    params.finish()?;
    let mut event = event_document(&state, &id, false).await?;
    event.insert("exportedAt".into(), json!(now_ms()));
    Ok(Json(Value::Object(event)))
}

async fn report(
    State(state): State<AppState>,
    PathTexts(parts): PathTexts,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    Params::parse(query.as_deref())?.finish()?;
    let (id, number) = match parts.as_slice() {
        [id, number] => (id, number),
        _ => {
            return Err(ApiError::bad_request(
                ErrorCode::InvalidPath,
                "expected an event id and a report number",
            ));
        }
    };
    let number = parse_int("number", number, 1..=MAX_SAFE_INTEGER)?;
    state
        .store
        .hyp_event(id)
        .await?
        .ok_or_else(|| not_found(id))?;
    let row = state
        .store
        .hyp_report(id, number)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("event `{id}` has no report {number}")))?;
    let mut response = Json(report_json(&row)).into_response();
    // A report never changes: its payload's hash identifies it.
    if let Ok(etag) = HeaderValue::from_str(&format!("\"{}\"", row.sha256)) {
        response.headers_mut().insert(header::ETAG, etag);
    }
    Ok(response)
}
