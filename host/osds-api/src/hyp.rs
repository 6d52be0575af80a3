//! The self-sensing family: `/hyp/status`, `/hyp/events`, `/hyp/events/{id}` (full or `view=summary`),
//! `/hyp/events/{id}/reports/{number}` and `/hyp/events/{id}/export`. Times are Unix ms; reports are served
//! from their stored payload with `sha256`, the hash of that payload, added.

use crate::error::{ApiError, ApiResult, ErrorCode};
use crate::params::{MAX_SAFE_INTEGER, Params, PathText, PathTexts, parse_int};
use crate::place::place_params;
use crate::response;
use crate::response::{Format, json};
use crate::scorecard::Comparison;
use crate::state::AppState;
use axum::Router;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::routing::get;
use osds_contract::hyp::{HypArchive, HypEvent, HypPage, HypPageItem, HypReport, HypStatus};
use osds_store::{HypFilter, HypStationRow};
use osds_time::now_ms;
use serde_json::{Value, json};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/hyp/status", get(status))
        .route("/hyp/events", get(events))
        .route("/hyp/events/{id}", get(event))
        .route("/hyp/events/{id}/reports/{number}", get(report))
        .route("/hyp/events/{id}/export", get(export))
}

fn not_found(id: &str) -> ApiError {
    ApiError::not_found(format!("no public self-sensing event `{id}`"))
}

/// An event's stored parts: its row, its reports (full or summarised) and the event-level station peaks.
struct EventParts {
    row: osds_store::HypEventRow,
    reports: Vec<HypReport>,
    stations: Vec<HypStationRow>,
}

impl EventParts {
    async fn read(state: &AppState, id: &str, summarised: bool) -> Result<EventParts, ApiError> {
        let row = state
            .store
            .hyp_event(id)
            .await?
            .ok_or_else(|| not_found(id))?;
        let reports = state
            .store
            .hyp_reports(id)
            .await?
            .iter()
            .map(response::hyp::report)
            .map(|r| if summarised { r.summarise() } else { r })
            .collect();
        let stations = state.store.hyp_stations(id).await?;
        Ok(EventParts {
            row,
            reports,
            stations,
        })
    }

    fn event(&mut self, jma: Option<Comparison>, exported_at: Option<i64>) -> HypEvent<'_> {
        HypEvent {
            head: response::hyp::event_head(&self.row),
            jma,
            reports: std::mem::take(&mut self.reports),
            stations: self.stations.iter().map(response::hyp::station).collect(),
            exported_at,
        }
    }
}

/// A running process writes its state every 5 s: one that has not for this long has stopped without saying so.
const STALE_AFTER_MS: i64 = 30_000;

/// A process's state with `updatedAt`, and, when it claims to be running but has not written for
/// [`STALE_AFTER_MS`], `state: stale` and every source it reported `stale` too: a dead detector is not `ok`.
fn with_staleness(row: osds_store::HypStateRow, now: i64) -> Value {
    let mut document = row.state;
    let Some(object) = document.as_object_mut() else {
        return document;
    };
    object.insert("updatedAt".into(), json!(row.updated_at));
    let claims_running = object.get("state").and_then(Value::as_str) == Some("running");
    if claims_running && now - row.updated_at > STALE_AFTER_MS {
        let silent_for = (now - row.updated_at) / 1000;
        object.insert("state".into(), json!("stale"));
        if let Some(sources) = object.get_mut("sources").and_then(Value::as_array_mut) {
            for source in sources.iter_mut().filter_map(Value::as_object_mut) {
                source.insert("health".into(), json!("stale"));
                source.insert(
                    "detail".into(),
                    json!(format!(
                        "the detector has written no state for {silent_for} s"
                    )),
                );
            }
        }
    }
    document
}

async fn status(State(state): State<AppState>, RawQuery(query): RawQuery) -> ApiResult {
    Params::parse(query.as_deref())?.finish()?;
    let now = now_ms();
    let detector = state
        .store
        .hyp_state("detector")
        .await?
        .map(|row| with_staleness(row, now));
    let recorder = state
        .store
        .hyp_state("recorder")
        .await?
        .map(|row| with_staleness(row, now));
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
    let (events, public_events, reports) = state.store.hyp_counts().await?;
    let shaper = state.shaper.load();
    let scorecard = state.scorecard.load();
    json(&HypStatus {
        algorithm,
        detector,
        recorder,
        errors,
        official_eew_takeover: false,
        station_scope: "algorithm-associated",
        sources,
        archive: HypArchive {
            events,
            public_events,
            reports,
        },
        shaper: response::hyp::shaper(shaper.info()),
        scorecard: &scorecard.summary,
        server_time: now,
    })
}

async fn events(
    State(state): State<AppState>,
    request: HeaderMap,
    RawQuery(query): RawQuery,
) -> ApiResult {
    let mut params = Params::parse(query.as_deref())?;
    let q = params.text("q", 100)?.filter(|q| !q.is_empty());
    let from_ms = params.int("from", 0..=MAX_SAFE_INTEGER)?.unwrap_or(0);
    let to_ms = params.int("to", 0..=MAX_SAFE_INTEGER)?;
    let page = params.int("page", 1..=100_000)?.unwrap_or(1);
    let limit = params.int("limit", 1..=100)?.unwrap_or(30);
    let (place, order) = place_params(&mut params)?;
    let format = Format::negotiate(&mut params, &request)?;
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
        place,
        order,
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
            .map(|r| response::hyp::report(&r).summarise());
        items.push(HypPageItem {
            head: response::hyp::event_head(row),
            latest,
        });
    }
    let body = HypPage {
        items,
        total,
        page,
        limit,
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
    let summarised = summary_view(&mut params)?;
    let format = Format::negotiate(&mut params, &request)?;
    params.finish()?;
    let mut parts = EventParts::read(&state, &id, summarised).await?;
    let jma = state.scorecard.load().comparisons.get(&id).cloned();
    format.answer(&parts.event(jma, None))
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
) -> ApiResult {
    // The export is always the full event: `view=summary` is accepted and does not change it.
    let mut params = Params::parse(query.as_deref())?;
    summary_view(&mut params)?;
    params.finish()?;
    let mut parts = EventParts::read(&state, &id, false).await?;
    let jma = state.scorecard.load().comparisons.get(&id).cloned();
    json(&parts.event(jma, Some(now_ms())))
}

async fn report(
    State(state): State<AppState>,
    PathTexts(parts): PathTexts,
    RawQuery(query): RawQuery,
) -> ApiResult {
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
    let mut response = json(&response::hyp::report(&row))?;
    // A report never changes: its payload's hash identifies it. Weak, because the identity, gzip and br bodies
    // of one report share it.
    if let Ok(etag) = HeaderValue::from_str(&format!("W/\"{}\"", row.sha256)) {
        response.headers_mut().insert(header::ETAG, etag);
    }
    Ok(response)
}
