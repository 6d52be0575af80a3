//! The EEW family: `/status`, `/events…`, `/deliveries/{id}/raw`, `/latest`, `/months`, `/reports`.

use crate::error::{ApiError, ApiResult, ErrorCode};
use crate::gateway;
use crate::params::{MAX_SAFE_INTEGER, Params, PathText, no_params, parse_int};
use crate::place::place_params;
use crate::reports::item::ReportPage;
use crate::reports::pages::source_reports_after;
use crate::response;
use crate::response::status::file_name;
use crate::response::{Format, json};
use crate::sources::SourceFilter;
use crate::state::AppState;
use axum::Router;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use chrono::NaiveDate;
use osds_contract::eew::{DeliveryPage, EewEvent, EewPage, EewReport, Months};
use osds_contract::status::{BACKUPS_NOTE, Backups, Latest, SourceStatus, Status};
use osds_store::{DeliveryId, EventFilter};
use osds_time::{beijing_day_start_ms, now_ms, now_rfc3339, rfc3339_ms};
use sha2::{Digest, Sha256};

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

/// `/status` lists the ingesters that run, and those that stopped within this long (a day): a rolling deploy
/// that names each process anew does not grow the list for ever.
const INGESTERS_SEEN_WITHIN_MS: i64 = 24 * 3_600_000;

async fn status(State(state): State<AppState>, RawQuery(query): RawQuery) -> ApiResult {
    no_params(query)?;
    let archive = state.store.archive_counts().await?;
    let sessions = state.store.recent_sessions(20).await?;
    let outages = state.store.outages(50).await?;
    let open_outages = state.store.open_outages().await?;
    let ingesters = state
        .store
        .ingesters(&rfc3339_ms(now_ms() - INGESTERS_SEEN_WITHIN_MS))
        .await?;
    let sources: Vec<SourceStatus> = state
        .upstream
        .source_states()
        .into_iter()
        .map(|s| SourceStatus {
            current_outage: open_outages
                .iter()
                .find(|o| o.source == s.source)
                .map(response::eew::outage),
            state: s,
        })
        .collect();
    let writes = response::status::writes(state.writes.health());
    // A channel is had when a socket of this process or of any running ingester (PostgreSQL) is connected.
    let held = |source: &str| {
        ingesters
            .iter()
            .any(|i| i.running && i.channels.iter().any(|c| c == source))
    };
    let healthy = writes.writable
        && sources
            .iter()
            .all(|s| s.state.connected || held(&s.state.source));
    let decoder_set = state.decoders.load();
    let loaded = decoder_set.decoders();
    let decoders = loaded
        .iter()
        .map(|d| response::status::decoder(d.info(), decoder_set.installed_at(&d.info().sha256)))
        .collect();
    let backup_files = osds_store::backup::files(&state.backups).await;
    let backups = Backups {
        directory: file_name(&state.backups.directory),
        every_seconds: state.backups.every.map(|every| every.as_secs()),
        keep: state.backups.keep,
        last: backup_files.first().map(response::status::last_backup),
        count: backup_files.len(),
        note: BACKUPS_NOTE,
    };
    json(&Status {
        version: 1,
        archive_id: state.store.archive_id(),
        server_time: now_rfc3339(),
        healthy,
        sources,
        archive,
        connections: sessions.iter().map(response::eew::session).collect(),
        upstream_sockets: state.upstream.connections(),
        outages: outages.iter().map(response::eew::outage).collect(),
        ingesters: ingesters.iter().map(response::status::ingester).collect(),
        backups,
        decoders,
        accepted_worlds: osds_runtime::worlds::ALL.iter().map(|w| w.id()).collect(),
        writes,
    })
}

async fn events(
    State(state): State<AppState>,
    request: HeaderMap,
    RawQuery(query): RawQuery,
) -> ApiResult {
    let mut params = Params::parse(query.as_deref())?;
    let source = source_param(&mut params, &state)?;
    let from = date_param(&mut params, "from")?;
    let to = date_param(&mut params, "to")?;
    let q = params.text("q", 100)?.filter(|q| !q.is_empty());
    let (place, order) = place_params(&mut params)?;
    let page = params.int("page", 1..=1_000_000)?.unwrap_or(1);
    let limit = params.int("limit", 1..=100)?.unwrap_or(30);
    let format = Format::negotiate(&mut params, &request)?;
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
        place,
        order,
        page,
        limit,
    };
    // Events change only with a new report version, which moves the horizon: the list a query gives at one
    // horizon is fixed, so its validator comes from both, and a revalidation is answered before the list is read.
    // (The list may be read at a newer horizon than this one; the horizon never comes back, so no later request
    // can match a validator given with a newer list.)
    let horizon = state.store.high_water().await?;
    let validator = Sha256::new()
        .chain_update(state.store.archive_id())
        .chain_update(horizon.to_be_bytes())
        .chain_update(query.as_deref().unwrap_or_default())
        .chain_update([format as u8])
        .finalize();
    if let Some(not_modified) = gateway::not_modified(&request, &validator[..16]) {
        return Ok(not_modified);
    }
    let page_data = state.store.events(&filter, horizon).await?;
    let body = EewPage {
        items: page_data.items.iter().map(response::eew::event).collect(),
        total: page_data.total,
        page,
        limit,
        pages: (page_data.total + limit - 1) / limit,
    };
    let mut response = format.answer(&body)?;
    gateway::mark_json_validator(response.headers_mut(), &validator[..16]);
    Ok(response)
}

/// `/events/{id}` and its export: the event with every stored version, in an export each with its raw text.
async fn event_detail(state: &AppState, id: &str, export: bool, format: Format) -> ApiResult {
    let id = event_id(id)?;
    let stored = state
        .store
        .event(id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("no event {id}")))?;
    let reports = stored.versions.iter().map(|v| EewReport {
        raw_text: export.then(|| String::from_utf8_lossy(&v.raw).into_owned()),
        ..osds_store::served::report(&v.report)
    });
    let body = EewEvent {
        reports: Some(reports.collect()),
        exported_at: export.then(now_rfc3339),
        ..response::eew::event(&stored.event)
    };
    format.answer(&body)
}

async fn event(
    State(state): State<AppState>,
    request: HeaderMap,
    PathText(id): PathText,
    RawQuery(query): RawQuery,
) -> ApiResult {
    let mut params = Params::parse(query.as_deref())?;
    let format = Format::negotiate(&mut params, &request)?;
    params.finish()?;
    event_detail(&state, &id, false, format).await
}

async fn export(
    State(state): State<AppState>,
    PathText(id): PathText,
    RawQuery(query): RawQuery,
) -> ApiResult {
    no_params(query)?;
    event_detail(&state, &id, true, Format::Json).await
}

async fn deliveries(
    State(state): State<AppState>,
    PathText(id): PathText,
    RawQuery(query): RawQuery,
) -> ApiResult {
    let mut params = Params::parse(query.as_deref())?;
    let after = params.int("after", 0..=MAX_SAFE_INTEGER)?.unwrap_or(0);
    let limit = params.int("limit", 1..=1000)?.unwrap_or(100);
    params.finish()?;
    let id = event_id(&id)?;
    if !state.store.event_exists(id).await? {
        return Err(ApiError::not_found(format!("no event {id}")));
    }
    let page = state.store.deliveries(id, DeliveryId(after), limit).await?;
    json(&DeliveryPage {
        items: page.items.iter().map(response::eew::delivery).collect(),
        next_cursor: page.next_cursor,
    })
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
        .raw(DeliveryId(id))
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

/// What `/latest`'s `note` says.
const LATEST_NOTE: &str = "Each item is the most recently archived event of its channel. It is not a list of warnings in progress: \
     check issuedAt/originAt and the isTest, isCancelled and isFinal flags. `connected` describes only the \
     current upstream connection and does not mean that no report is missing from the history.";

async fn latest(State(state): State<AppState>, RawQuery(query): RawQuery) -> ApiResult {
    no_params(query)?;
    let mut rows = Vec::new();
    for source in state.upstream.sources() {
        if let Some(event) = state.store.latest_event(&source).await? {
            rows.push(event);
        }
    }
    json(&Latest {
        items: rows.iter().map(response::eew::event).collect(),
        sources: state.upstream.source_states(),
        server_time: now_rfc3339(),
        note: LATEST_NOTE,
    })
}

async fn months(State(state): State<AppState>, RawQuery(query): RawQuery) -> ApiResult {
    let mut params = Params::parse(query.as_deref())?;
    let source = source_param(&mut params, &state)?;
    params.finish()?;
    let rows = state.store.months(source.as_deref()).await?;
    json(&Months {
        items: rows.iter().map(response::eew::month).collect(),
    })
}

async fn reports(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let mut params = Params::parse(query.as_deref())?;
    let after = params.int("after", 0..=MAX_SAFE_INTEGER)?.unwrap_or(0);
    let limit = params.int("limit", 1..=1000)?.unwrap_or(100);
    let filter = SourceFilter::from_params(&mut params, || state.upstream.sources())?;
    params.finish()?;
    let page = match &filter {
        None => {
            state
                .report_cache
                .reports_after(&state.store, after, limit)
                .await?
        }
        Some(filter) => source_reports_after(&state.store, after, limit, filter).await?,
    };
    if after > page.high_water {
        return Err(ApiError::cursor_ahead(
            after,
            page.high_water,
            state.store.archive_id(),
        ));
    }
    Ok(report_page_response(&page))
}

/// A `/reports` answer with the page's own validator as its ETag.
fn report_page_response(page: &ReportPage) -> Response {
    let (body, validator) = page.to_json();
    let mut response = ([(header::CONTENT_TYPE, "application/json")], body).into_response();
    gateway::mark_json_validator(response.headers_mut(), &validator);
    response
}
