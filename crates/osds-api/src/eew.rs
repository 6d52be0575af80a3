//! The EEW family: `/status`, `/events…`, `/deliveries/{id}/raw`, `/latest`, `/months`, `/reports`.

use crate::error::{ApiError, ErrorCode};
use crate::params::{MAX_SAFE_INTEGER, Params, PathText, parse_int};
use crate::state::AppState;
use axum::Router;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Json, Response};
use axum::routing::get;
use chrono::NaiveDate;
use osds_store::{EventFilter, ReportPage};
use osds_time::{beijing_day_start_ms, now_rfc3339};
use serde_json::{Value, json};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/status", get(status))
        .route("/events", get(events))
        .route("/events/{id}", get(event))
        .route("/events/{id}/export", get(export))
        .route("/events/{id}/deliveries", get(deliveries))
        .route("/deliveries/{id}/raw", get(raw))
        .route("/latest", get(latest))
        .route("/months", get(months))
        .route("/reports", get(reports))
}

/// `^[a-f0-9]{32}$`, else a 400.
fn event_id(id: &str) -> Result<&str, ApiError> {
    if id.len() == 32 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        Ok(id)
    } else {
        Err(ApiError::bad_request(
            ErrorCode::InvalidEventId,
            "event id must be 32 lowercase hexadecimal characters (the `id` of /events)",
        ))
    }
}

fn no_params(query: Option<String>) -> Result<(), ApiError> {
    Params::parse(query.as_deref())?.finish()
}

fn source_param(params: &mut Params, state: &AppState) -> Result<Option<String>, ApiError> {
    let Some(source) = params.take("source") else {
        return Ok(None);
    };
    let known = state.upstream.sources();
    if known.contains(&source) {
        Ok(Some(source))
    } else {
        Err(ApiError::bad_request(
            ErrorCode::InvalidParameter,
            format!("`source` must be one of {}", known.join(", ")),
        ))
    }
}

fn date_param(params: &mut Params, name: &str) -> Result<Option<NaiveDate>, ApiError> {
    let Some(text) = params.take(name) else {
        return Ok(None);
    };
    let well_formed = text.len() == 10
        && text.bytes().enumerate().all(|(i, b)| {
            if i == 4 || i == 7 {
                b == b'-'
            } else {
                b.is_ascii_digit()
            }
        });
    match NaiveDate::parse_from_str(&text, "%Y-%m-%d") {
        Ok(date) if well_formed => Ok(Some(date)),
        _ => Err(ApiError::bad_request(
            ErrorCode::InvalidParameter,
            format!("`{name}` must be a date YYYY-MM-DD (Beijing time)"),
        )),
    }
}

async fn status(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, ApiError> {
    no_params(query)?;
    let archive = state.store.archive_counts().await?;
    let sessions = state.store.recent_sessions(20).await?;
    let outages = state.store.outages(50).await?;
    let open_outages = state.store.open_outages().await?;
    let sources: Vec<Value> = state
        .upstream
        .source_states()
        .into_iter()
        .map(|s| {
            let current_outage = open_outages
                .iter()
                .find(|o| o["source"] == s.source.as_str())
                .cloned();
            let mut value = serde_json::to_value(&s).unwrap_or_default();
            value["currentOutage"] = current_outage.unwrap_or(Value::Null);
            value
        })
        .collect();
    let healthy = sources.iter().all(|s| s["connected"] == true);
    let decoder_set = state.decoders.load();
    let decoders: Vec<Value> = decoder_set
        .decoders()
        .iter()
        .map(|d| {
            let mut info = serde_json::to_value(d.info()).unwrap_or_default();
            info["installedAt"] = json!(decoder_set.installed_at(&d.info().sha256));
            info
        })
        .collect();
    Ok(Json(json!({
        "version": 1,
        "serverTime": now_rfc3339(),
        "healthy": healthy,
        "sources": sources,
        "archive": archive,
        "connections": sessions,
        "upstreamSockets": state.upstream.connections(),
        "outages": outages,
        "backups": osds_store::backup::status(&state.backups).await,
        "decoders": decoders,
    })))
}

async fn events(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, ApiError> {
    let mut params = Params::parse(query.as_deref())?;
    let source = source_param(&mut params, &state)?;
    let from = date_param(&mut params, "from")?;
    let to = date_param(&mut params, "to")?;
    let q = params.text("q", 100)?.filter(|q| !q.is_empty());
    let min_magnitude = params.number("minMagnitude", -2.0..=10.0)?;
    let page = params.int("page", 1..=1_000_000)?.unwrap_or(1);
    let limit = params.int("limit", 1..=100)?.unwrap_or(30);
    params.finish()?;
    if let (Some(from), Some(to)) = (from, to)
        && from > to
    {
        return Err(ApiError::bad_request(
            ErrorCode::InvalidRange,
            "`from` is after `to`",
        ));
    }
    let filter = EventFilter {
        source,
        from_ms: from.map(beijing_day_start_ms),
        to_ms: to.and_then(|d| d.succ_opt()).map(beijing_day_start_ms),
        q,
        min_magnitude,
        page,
        limit,
    };
    let page_data = state.store.events(&filter).await?;
    let pages = (page_data.total + limit - 1) / limit;
    Ok(Json(
        json!({ "items": page_data.items, "total": page_data.total, "page": page, "limit": limit, "pages": pages }),
    ))
}

async fn event(
    State(state): State<AppState>,
    PathText(id): PathText,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, ApiError> {
    no_params(query)?;
    let id = event_id(&id)?;
    state
        .store
        .event(id, false)
        .await?
        .map(Json)
        .ok_or_else(|| ApiError::not_found(format!("no event {id}")))
}

async fn export(
    State(state): State<AppState>,
    PathText(id): PathText,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, ApiError> {
    no_params(query)?;
    let id = event_id(&id)?;
    let mut event = state
        .store
        .event(id, true)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("no event {id}")))?;
    event["exportedAt"] = json!(now_rfc3339());
    Ok(Json(event))
}

async fn deliveries(
    State(state): State<AppState>,
    PathText(id): PathText,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, ApiError> {
    let mut params = Params::parse(query.as_deref())?;
    let after = params.int("after", 0..=MAX_SAFE_INTEGER)?.unwrap_or(0);
    let limit = params.int("limit", 1..=1000)?.unwrap_or(100);
    params.finish()?;
    let id = event_id(&id)?;
    if !state.store.event_exists(id).await? {
        return Err(ApiError::not_found(format!("no event {id}")));
    }
    let page = state.store.deliveries(id, after, limit).await?;
    Ok(Json(
        json!({ "items": page.items, "nextCursor": page.next_cursor }),
    ))
}

async fn raw(
    State(state): State<AppState>,
    PathText(id): PathText,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    no_params(query)?;
    let id = parse_int("id", &id, 1..=MAX_SAFE_INTEGER)?;
    let (bytes, sha256) = state
        .store
        .raw(id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("no delivery {id}")))?;
    let headers = [
        (
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/octet-stream"),
        ),
        (
            header::HeaderName::from_static("x-content-sha256"),
            HeaderValue::from_str(&sha256).map_err(|e| anyhow::anyhow!(e))?,
        ),
        (
            header::ETAG,
            HeaderValue::from_str(&format!("\"{sha256}\"")).map_err(|e| anyhow::anyhow!(e))?,
        ),
        (
            header::CACHE_CONTROL,
            HeaderValue::from_static("public, max-age=31536000, immutable"),
        ),
    ];
    Ok((headers, bytes).into_response())
}

async fn latest(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, ApiError> {
    no_params(query)?;
    let mut items = Vec::new();
    for source in state.upstream.sources() {
        if let Some(event) = state.store.latest_event(&source).await? {
            items.push(event);
        }
    }
    Ok(Json(json!({
        "items": items,
        "sources": state.upstream.source_states(),
        "serverTime": now_rfc3339(),
        "note": "Each item is the most recently archived event of its channel. It is not a list of warnings in progress: \
                 check issuedAt/originAt and the isTest, isCancelled and isFinal flags. `connected` describes only the \
                 current upstream connection and does not mean that no report is missing from the history.",
    })))
}

async fn months(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, ApiError> {
    let mut params = Params::parse(query.as_deref())?;
    let source = source_param(&mut params, &state)?;
    params.finish()?;
    Ok(Json(
        json!({ "items": state.store.months(source.as_deref()).await? }),
    ))
}

async fn reports(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let mut params = Params::parse(query.as_deref())?;
    let after = params.int("after", 0..=MAX_SAFE_INTEGER)?.unwrap_or(0);
    let limit = params.int("limit", 1..=1000)?.unwrap_or(100);
    params.finish()?;
    let page = state.store.reports_after(after, limit).await?;
    Ok(report_page_response(&page))
}

/// A `/reports` answer with the page's own validator as its ETag.
fn report_page_response(page: &ReportPage) -> Response {
    let (body, validator) = page.to_json();
    let mut response = ([(header::CONTENT_TYPE, "application/json")], body).into_response();
    crate::gateway::mark_json_validator(response.headers_mut(), &validator);
    response
}
