//! An FDSN event web service (fdsnws-event 1.2) beside `/api/v1`, at `/fdsnws/event/1/`: `query` (QuakeML 1.2
//! or the FDSN text format), `version`, `application.wadl`, `catalogs` and `contributors`. Both families are
//! catalogues of it (`osds-eew`: every EEW channel a contributor under its own name; `osds-hyp`: this service's
//! detections), read through the same store filters as `/events` and `/hyp/events`. Errors are the FDSN text
//! form, naming the parameter.

mod params;
mod quakeml;
mod wadl;

use crate::error::ApiError;
use crate::params::Params;
use crate::state::AppState;
use axum::Router;
use axum::extract::{RawQuery, State};
use axum::http::{StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use osds_store::{EventFilter, HypFilter, Order};
use params::{Format, Query};
use quakeml::{Event, Kind, Origin};
use serde_json::Value;

pub use params::{EEW_CATALOG, HYP_CATALOG, HYP_CONTRIBUTOR};

/// The version of the specification this service implements, as `version` answers it.
pub const SERVICE_VERSION: &str = "1.2.0";
/// Where the service lives.
pub const BASE_PATH: &str = "/fdsnws/event/1";

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/query", get(query))
        .route("/version", get(version))
        .route("/application.wadl", get(wadl_document))
        .route("/catalogs", get(catalogs))
        .route("/contributors", get(contributors))
}

/// An error in the FDSN text form.
struct FdsnError {
    status: StatusCode,
    message: String,
}

impl From<ApiError> for FdsnError {
    fn from(error: ApiError) -> Self {
        FdsnError {
            status: error.status,
            message: error.message,
        }
    }
}

impl FdsnError {
    fn new(status: StatusCode, message: impl Into<String>) -> FdsnError {
        FdsnError {
            status,
            message: message.into(),
        }
    }

    fn response(self, uri: &Uri) -> Response {
        let body = format!(
            "Error {code}: {reason}\n\n{message}\n\nUsage details are available from {BASE_PATH}/application.wadl\n\n\
             Request:\n{uri}\n\nRequest Submitted:\n{now}\n\nService version:\n{SERVICE_VERSION}\n",
            code = self.status.as_u16(),
            reason = self.status.canonical_reason().unwrap_or("Error"),
            message = self.message,
            now = osds_time::now_rfc3339(),
        );
        (
            self.status,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            body,
        )
            .into_response()
    }
}

fn text(body: String, content_type: &'static str) -> Response {
    ([(header::CONTENT_TYPE, content_type)], body).into_response()
}

async fn version(uri: Uri, RawQuery(query): RawQuery) -> Response {
    match crate::params::no_params(query) {
        Ok(()) => text(SERVICE_VERSION.to_string(), "text/plain; charset=utf-8"),
        Err(error) => FdsnError::from(error).response(&uri),
    }
}

async fn wadl_document(uri: Uri, RawQuery(query): RawQuery) -> Response {
    match crate::params::no_params(query) {
        Ok(()) => text(wadl::document(), "application/xml"),
        Err(error) => FdsnError::from(error).response(&uri),
    }
}

async fn catalogs(uri: Uri, RawQuery(query): RawQuery) -> Response {
    match crate::params::no_params(query) {
        Ok(()) => text(
            wadl::list("Catalogs", "Catalog", &[EEW_CATALOG, HYP_CATALOG]),
            "application/xml",
        ),
        Err(error) => FdsnError::from(error).response(&uri),
    }
}

/// The contributors: every channel this deployment archives, and the detector.
fn contributor_names(state: &AppState) -> Vec<String> {
    let mut names = state.upstream.sources();
    names.push(HYP_CONTRIBUTOR.to_string());
    names
}

async fn contributors(
    State(state): State<AppState>,
    uri: Uri,
    RawQuery(query): RawQuery,
) -> Response {
    match crate::params::no_params(query) {
        Ok(()) => {
            let names = contributor_names(&state);
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            text(
                wadl::list("Contributors", "Contributor", &names),
                "application/xml",
            )
        }
        Err(error) => FdsnError::from(error).response(&uri),
    }
}

async fn query(State(state): State<AppState>, uri: Uri, RawQuery(raw): RawQuery) -> Response {
    match answer(&state, raw.as_deref()).await {
        Ok(response) => response,
        Err(error) => error.response(&uri),
    }
}

async fn answer(state: &AppState, raw: Option<&str>) -> Result<Response, FdsnError> {
    let mut params = Params::parse(raw)?;
    let query = Query::parse(&mut params)?;
    params.finish()?;
    if let Some(contributor) = &query.contributor
        && !contributor_names(state).contains(contributor)
    {
        return Err(FdsnError::new(
            StatusCode::BAD_REQUEST,
            format!(
                "`contributor` may be one of {}, not `{contributor}`",
                contributor_names(state).join(", ")
            ),
        ));
    }
    let mut events = match &query.event_id {
        Some(id) => one_event(state, id).await?.into_iter().collect(),
        None => select(state, &query).await?,
    };
    if query.all_origins {
        if events.len() as i64 > params::MAX_EVENTS_ALL_ORIGINS {
            return Err(FdsnError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!(
                    "`includeallorigins` answers at most {} events; set `limit`",
                    params::MAX_EVENTS_ALL_ORIGINS
                ),
            ));
        }
        for event in &mut events {
            event.origins = all_origins(state, event).await?;
        }
    }
    if events.is_empty() {
        return match query.nodata {
            404 => Err(FdsnError::new(
                StatusCode::NOT_FOUND,
                "No data matches the selection.",
            )),
            _ => Ok(StatusCode::NO_CONTENT.into_response()),
        };
    }
    Ok(match query.format {
        Format::Xml => {
            let xml = quakeml::quakeml(&events, query.all_origins).map_err(|e| {
                FdsnError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!("QuakeML could not be written: {e}"),
                )
            })?;
            ([(header::CONTENT_TYPE, "application/xml")], xml).into_response()
        }
        Format::Text => text(quakeml::text(&events), "text/plain; charset=utf-8"),
    })
}

/// The events a query selects from both catalogues, merged in its order, `offset` and `limit` applied.
async fn select(state: &AppState, query: &Query) -> Result<Vec<Event>, FdsnError> {
    // Each catalogue's first `depth` events in the order; the merged list's are among them.
    let depth = match query.limit {
        Some(limit) => query.offset - 1 + limit,
        None => params::MAX_EVENTS + 1,
    };
    let mut found: Vec<(Event, i64)> = Vec::new();
    let mut total = 0;
    if query.wants_eew() {
        let filter = EventFilter {
            source: query.contributor.clone(),
            place: query.place.clone(),
            order: query.order,
            page: 1,
            limit: depth,
            ..Default::default()
        };
        let horizon = state.store.high_water().await.map_err(ApiError::from)?;
        let page = state
            .store
            .events(&filter, horizon)
            .await
            .map_err(ApiError::from)?;
        total += page.total;
        for row in &page.items {
            let latest: Value = serde_json::from_str(&row.latest).unwrap_or_default();
            let event = eew_event(&row.id, &row.source, &latest);
            let time = eew_time(&latest);
            found.push((event, time));
        }
    }
    if query.wants_hyp() {
        let filter = HypFilter {
            q: None,
            from_ms: 0,
            to_ms: None,
            place: query.place.clone(),
            order: query.order,
            page: 1,
            limit: depth,
        };
        let (rows, count) = state
            .store
            .hyp_events(&filter)
            .await
            .map_err(ApiError::from)?;
        total += count;
        for row in &rows {
            found.push((latest_hyp_event(state, row).await?, row.first_at));
        }
    }
    if query.limit.is_none() && total > params::MAX_EVENTS {
        return Err(FdsnError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "{total} events match, more than the {} one answer holds: narrow the query or set `limit` and `offset`",
                params::MAX_EVENTS
            ),
        ));
    }
    // The stores' own orders: by time (origin, else first reception, for EEW; first detection for
    // self-sensing), or by magnitude, unknown last, then newest first.
    let magnitude = |e: &Event| e.origins.last().and_then(|o| o.magnitude);
    let newest = |a: &(Event, i64), b: &(Event, i64)| b.1.cmp(&a.1);
    found.sort_by(|a, b| match query.order {
        Order::Oldest => newest(b, a),
        order => order
            .by_magnitude(magnitude(&a.0), magnitude(&b.0))
            .then(newest(a, b)),
    });
    let skip = usize::try_from(query.offset - 1).unwrap_or(0);
    let take = usize::try_from(query.limit.unwrap_or(params::MAX_EVENTS)).unwrap_or(0);
    Ok(found
        .into_iter()
        .skip(skip)
        .take(take)
        .map(|(e, _)| e)
        .collect())
}

/// The event `id` names (an EEW event id, or a self-sensing id with colons or with the dots of its public
/// ID), or none.
async fn one_event(state: &AppState, id: &str) -> Result<Option<Event>, FdsnError> {
    if id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()) {
        let Some(stored) = state.store.event(id).await.map_err(ApiError::from)? else {
            return Ok(None);
        };
        let latest: Value = serde_json::from_str(&stored.event.latest).unwrap_or_default();
        return Ok(Some(eew_event(
            &stored.event.id,
            &stored.event.source,
            &latest,
        )));
    }
    let id = if id.starts_with("hyp.") {
        id.replace('.', ":")
    } else {
        id.to_string()
    };
    let Some(row) = state.store.hyp_event(&id).await.map_err(ApiError::from)? else {
        return Ok(None);
    };
    Ok(Some(latest_hyp_event(state, &row).await?))
}

/// A self-sensing event at its latest report.
async fn latest_hyp_event(
    state: &AppState,
    row: &osds_store::HypEventRow,
) -> Result<Event, FdsnError> {
    let latest = state
        .store
        .hyp_report(&row.id, row.latest_number)
        .await
        .map_err(ApiError::from)?;
    let report: Value = latest
        .map(|r| serde_json::from_slice(&r.payload).unwrap_or_default())
        .unwrap_or_default();
    Ok(hyp_event(&row.id, row.status.as_str(), &[report]))
}

/// Every origin of `event`: one per stored version (EEW) or report (self-sensing) that has a time and a place.
async fn all_origins(state: &AppState, event: &Event) -> Result<Vec<Origin>, FdsnError> {
    if event.catalog == EEW_CATALOG {
        let Some(stored) = state.store.event(&event.id).await.map_err(ApiError::from)? else {
            return Ok(event.origins.clone());
        };
        let versions: Vec<Value> = stored
            .versions
            .iter()
            .map(|v| {
                serde_json::to_value(osds_store::served::report(&v.report)).unwrap_or_default()
            })
            .collect();
        return Ok(versions.iter().filter_map(eew_origin).collect());
    }
    let reports: Vec<Value> = state
        .store
        .hyp_reports(&event.id)
        .await
        .map_err(ApiError::from)?
        .iter()
        .map(|r| serde_json::from_slice(&r.payload).unwrap_or_default())
        .collect();
    Ok(reports.iter().filter_map(hyp_origin).collect())
}

fn ms(value: &Value) -> Option<i64> {
    value.as_str().and_then(osds_time::parse_ms)
}

/// An EEW event's time for the order: its origin, else when its latest version arrived.
fn eew_time(latest: &Value) -> i64 {
    ms(&latest["originAt"])
        .or_else(|| ms(&latest["receivedAt"]))
        .unwrap_or(0)
}

fn eew_origin(report: &Value) -> Option<Origin> {
    Some(Origin {
        key: report["id"].to_string(),
        time_ms: ms(&report["originAt"])?,
        latitude: report["latitude"].as_f64()?,
        longitude: report["longitude"].as_f64()?,
        depth_km: report["depthKm"].as_f64(),
        magnitude: report["magnitude"].as_f64(),
        magnitude_type: "M".into(),
        is_final: report["isFinal"].as_bool().unwrap_or(false),
        created_ms: ms(&report["issuedAt"]).or_else(|| ms(&report["receivedAt"])),
    })
}

/// An EEW event from its latest version's served report.
fn eew_event(id: &str, source: &str, latest: &Value) -> Event {
    let kind = if latest["isTest"].as_bool() == Some(true) {
        Kind::Test
    } else if latest["isCancelled"].as_bool() == Some(true) {
        Kind::NotExisting
    } else {
        Kind::Earthquake
    };
    Event {
        id: id.to_string(),
        catalog: EEW_CATALOG,
        contributor: source.to_string(),
        name: latest["epicenter"].as_str().map(str::to_string),
        kind,
        origins: eew_origin(latest).into_iter().collect(),
    }
}

fn hyp_origin(report: &Value) -> Option<Origin> {
    let event = &report["event"];
    let estimate = &event["hypEstimate"];
    Some(Origin {
        key: report["reportNumber"].to_string(),
        time_ms: estimate["originAt"].as_i64()?,
        latitude: estimate["latitude"].as_f64()?,
        longitude: estimate["longitude"].as_f64()?,
        depth_km: estimate["depthKm"].as_f64(),
        magnitude: event["magnitude"].as_f64(),
        magnitude_type: event["magnitudeType"].as_str().unwrap_or("M").to_string(),
        is_final: event["status"].as_str() == Some("finalized"),
        created_ms: report["reportedAt"].as_i64(),
    })
}

/// A self-sensing event from its reports (the last is the latest).
fn hyp_event(id: &str, status: &str, reports: &[Value]) -> Event {
    Event {
        id: id.to_string(),
        catalog: HYP_CATALOG,
        contributor: HYP_CONTRIBUTOR.to_string(),
        name: reports
            .last()
            .and_then(|r| r["epicenter"].as_str())
            .map(str::to_string),
        kind: if status == "retracted" {
            Kind::NotExisting
        } else {
            Kind::Earthquake
        },
        origins: reports.iter().filter_map(hyp_origin).collect(),
    }
}
