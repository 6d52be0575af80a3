//! `/hyp/stream` (SSE) and `/hyp/ws` (WebSocket): the self-sensing reports as they are published, with a cursor of
//! their own (a report's `seq`, its place in the order the archive took them) and the EEW channels' rules: `ready`
//! with the cursor; with `after` (or `Last-Event-ID`) the published reports after it are replayed first, paced at
//! the replay rate, then each new one as it is archived; `status` every interval; a cursor above the horizon is
//! refused (409). Published means no longer `candidate`, of an event no operator hid (`Store::hyp_published`), so
//! a live consumer and one replaying later get the same reports. One task per server follows the horizon
//! ([`super::hyp_horizon::HypHorizon`]): reports another process archived reach every consumer too.

use super::consumer::last_event_id;
use super::state::LiveState;
use super::ws::{upgrade_required, within};
use crate::error::ApiError;
use crate::gateway::HeldSlot;
use crate::params::{MAX_SAFE_INTEGER, Params};
use axum::extract::ws::{
    Message, WebSocket, WebSocketUpgrade, rejection::WebSocketUpgradeRejection,
};
use axum::extract::{Extension, RawQuery, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use osds_contract::hyp::{HypLiveReport, HypReport};
use osds_store::{HypLiveRow, Store};
use osds_time::now_rfc3339;
use serde_json::{Value, json};
use std::convert::Infallible;
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::{Instant, sleep_until};

/// Most reports (by `seq`) read in one query once the backlog is replayed.
const LIVE_BATCH: i64 = 1000;

/// The published reports after one consumer's cursor, in archive order.
struct HypFeed {
    store: Store,
    horizon: watch::Receiver<i64>,
    cursor: i64,
    /// Reports up to here existed when the consumer connected: the backlog, replayed at the paced rate.
    replay_until: i64,
    batch: i64,
    pace: Duration,
    next_batch_at: Instant,
}

impl HypFeed {
    async fn next(&mut self) -> anyhow::Result<Vec<HypLiveRow>> {
        loop {
            let horizon = *self.horizon.borrow_and_update();
            if self.cursor < horizon {
                let replaying = self.cursor < self.replay_until;
                if replaying {
                    sleep_until(self.next_batch_at).await;
                }
                let step = if replaying { self.batch } else { LIVE_BATCH };
                let until = horizon.min(self.cursor + step);
                let rows = self.store.hyp_published(self.cursor, until).await?;
                if replaying {
                    self.next_batch_at = Instant::now() + self.pace;
                }
                // The cursor passes over what is not published, too: it is the archive's order.
                self.cursor = until;
                if !rows.is_empty() {
                    return Ok(rows);
                }
                continue;
            }
            if self.horizon.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }

    fn ready(&self, archive_id: &str) -> Value {
        json!({
            "type": "ready",
            "archiveId": archive_id,
            "cursor": self.cursor,
            "highWater": *self.horizon.borrow(),
            "replaying": self.cursor < self.replay_until,
            "serverTime": now_rfc3339(),
        })
    }
}

fn status(feed: &HypFeed) -> Value {
    json!({ "type": "status", "serverTime": now_rfc3339(), "highWater": *feed.horizon.borrow() })
}

/// A report as the live channels send it: `{"eventId", "report"}`, the report as `/hyp/events/{id}/reports/{n}`
/// serves it.
fn report_data(row: &HypLiveRow) -> String {
    let report = HypReport::from_payload(&row.report.payload, row.report.sha256.clone());
    serde_json::to_string(&HypLiveReport {
        event_id: &row.event_id,
        report,
    })
    .unwrap_or_default()
}

/// The consumer's feed: from `after` (or `Last-Event-ID`), else from the current horizon (no history).
async fn start(
    state: &LiveState,
    query: Option<&str>,
    headers: Option<&HeaderMap>,
) -> Result<HypFeed, ApiError> {
    let mut params = Params::parse(query)?;
    let after = params.int("after", 0..=MAX_SAFE_INTEGER)?;
    params.finish()?;
    let after = match after {
        Some(after) => Some(after),
        None => last_event_id(headers)?,
    };
    let mut horizon = state
        .hyp_horizon
        .follow(&state.store, &state.shutdown)
        .await?;
    // The archive's own horizon, not the followed one: a report archived a moment ago is a cursor already.
    let high = state.store.hyp_high_water().await?;
    if let Some(after) = after
        && after > high
    {
        return Err(ApiError::cursor_ahead(
            after,
            high,
            state.store.archive_id(),
        ));
    }
    let followed = *horizon.borrow_and_update();
    let rate = state.config.replay_rate.max(1.0);
    let batch = (rate / 10.0).ceil().max(1.0);
    Ok(HypFeed {
        store: state.store.clone(),
        horizon,
        cursor: after.unwrap_or(high),
        replay_until: high.max(followed),
        batch: batch as i64,
        pace: Duration::from_secs_f64(batch / rate),
        next_batch_at: Instant::now(),
    })
}

/// What the consumer's task does next.
enum Turn {
    Reports(anyhow::Result<Vec<HypLiveRow>>),
    Status,
    Stopping,
}

/// One SSE consumer's state between frames.
struct SseState {
    feed: HypFeed,
    /// Frames ready to go, the next last.
    pending: Vec<Event>,
    ended: bool,
    next_status: Instant,
    status_every: Duration,
    shutdown: watch::Receiver<bool>,
}

impl SseState {
    async fn next(mut self) -> Option<(Result<Event, Infallible>, SseState)> {
        if let Some(event) = self.pending.pop() {
            return Some((Ok(event), self));
        }
        if self.ended {
            return None;
        }
        let mut shutdown = self.shutdown.clone();
        let turn = tokio::select! {
            biased;
            rows = self.feed.next() => Turn::Reports(rows),
            () = sleep_until(self.next_status) => Turn::Status,
            _ = shutdown.wait_for(|stop| *stop) => Turn::Stopping,
        };
        let event = match turn {
            Turn::Reports(Ok(rows)) => {
                self.pending = rows
                    .iter()
                    .rev()
                    .map(|row| {
                        Event::default()
                            .event("report")
                            .id(row.seq.to_string())
                            .data(report_data(row))
                    })
                    .collect();
                self.pending.pop()?
            }
            Turn::Reports(Err(error)) => {
                tracing::warn!(
                    error = %format!("{error:#}"),
                    "the self-sensing stream cannot read the archive"
                );
                self.ended = true;
                Event::default().comment(format!(
                    "archive unavailable; resume after report {}",
                    self.feed.cursor
                ))
            }
            Turn::Status => {
                self.next_status = Instant::now() + self.status_every;
                Event::default()
                    .event("status")
                    .data(status(&self.feed).to_string())
            }
            Turn::Stopping => {
                self.ended = true;
                Event::default().comment(format!(
                    "service stopping; resume after report {}",
                    self.feed.cursor
                ))
            }
        };
        Some((Ok(event), self))
    }
}

/// `/hyp/stream`.
pub async fn stream(
    State(state): State<LiveState>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let feed = start(&state, query.as_deref(), Some(&headers)).await?;
    let ready = Event::default()
        .event("ready")
        .retry(state.config.retry)
        .data(feed.ready(state.store.archive_id()).to_string());
    let first = SseState {
        feed,
        pending: vec![ready],
        ended: false,
        next_status: Instant::now() + state.config.status_interval,
        status_every: state.config.status_interval,
        shutdown: state.shutdown.clone(),
    };
    let events = futures_util::stream::unfold(first, SseState::next);
    Ok(Sse::new(events)
        .keep_alive(KeepAlive::new().interval(state.config.keepalive_interval))
        .into_response())
}

/// `/hyp/ws`.
pub async fn ws(
    State(state): State<LiveState>,
    RawQuery(query): RawQuery,
    slot: Option<Extension<HeldSlot>>,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<Response, ApiError> {
    let feed = start(&state, query.as_deref(), None).await?;
    let upgrade = upgrade.map_err(|rejection| upgrade_required("/hyp/ws", &rejection))?;
    Ok(upgrade.on_upgrade(move |socket| async move {
        // The socket occupies one of its client's connection slots for as long as it is open.
        let _slot = slot;
        run(state, feed, socket).await
    }))
}

async fn run(state: LiveState, mut feed: HypFeed, mut socket: WebSocket) {
    let send = |value: Value| Message::Text(value.to_string().into());
    let patience = state.config.slow_consumer;
    let ready = send(feed.ready(state.store.archive_id()));
    if within(patience, socket.send(ready)).await.is_err() {
        return;
    }
    let mut shutdown = state.shutdown.clone();
    let mut next_status = Instant::now() + state.config.status_interval;
    loop {
        tokio::select! {
            biased;
            incoming = socket.recv() => match incoming {
                Some(Ok(Message::Text(text))) if text.trim() == "ping" => {
                    if within(patience, socket.send(send(json!({ "type": "pong" })))).await.is_err() {
                        return;
                    }
                }
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return,
                Some(Ok(_)) => {}
            },
            rows = feed.next() => match rows {
                Ok(rows) => {
                    for row in &rows {
                        let message = format!(
                            "{{\"type\":\"report\",\"id\":{},\"data\":{}}}",
                            row.seq,
                            report_data(row)
                        );
                        if within(patience, socket.send(Message::Text(message.into()))).await.is_err() {
                            return;
                        }
                    }
                }
                Err(error) => {
                    tracing::warn!(error = %format!("{error:#}"), "the self-sensing socket cannot read the archive");
                    let _ = within(patience, socket.send(Message::Close(None))).await;
                    return;
                }
            },
            () = sleep_until(next_status) => {
                next_status = Instant::now() + state.config.status_interval;
                if within(patience, socket.send(send(status(&feed)))).await.is_err() {
                    return;
                }
            }
            // (The guard `wait_for` returns is not `Send`: it is dropped inside.)
            () = async { let _ = shutdown.wait_for(|stop| *stop).await; } => break,
        }
    }
    // The service stops: the consumer resumes from its last report's id.
    let _ = within(patience, socket.send(Message::Close(None))).await;
}
