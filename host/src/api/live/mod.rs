//! Live delivery: `/stream` (SSE) and `/ws` (WebSocket) over one mechanism, [`Feed`]: subscribe to the commit
//! notifications first, then read every report after the cursor from the database up to the commit horizon,
//! paced while a backlog is replayed, pushed at once after that. Notifications only wake a feed; what it sends
//! always comes from the database in id order, so every consumer sees the same ids as `/reports`.

use super::AppState;
use super::error::ApiError;
use super::gateway::HeldSlot;
use super::params::{MAX_SAFE_INTEGER, Params, parse_int};
use super::recent::{RecentReports, Rendered};
use crate::store::Store;
use crate::time::now_rfc3339;
use axum::extract::ws::{
    CloseFrame, Message, WebSocket, WebSocketUpgrade, rejection::WebSocketUpgradeRejection,
};
use axum::extract::{Extension, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio::time::{Instant, MissedTickBehavior, interval_at, sleep_until, timeout};

/// Most reports read in one query once the backlog is replayed.
const LIVE_BATCH: i64 = 1000;
/// Read buffer of a live WebSocket, allocated up front for every socket; consumers only send `ping`, and a
/// longer message is read in more steps.
const WS_READ_BUFFER: usize = 1024;
/// Bytes a live WebSocket gathers before writing (every report is flushed at once anyway).
const WS_WRITE_BUFFER: usize = 8 * 1024;
/// Largest message a live WebSocket consumer may send.
const WS_MAX_INCOMING: usize = 64 * 1024;
/// SSE events queued for one consumer before its producer waits on it.
const SSE_QUEUE: usize = 64;
/// A WebSocket peer that answers no ping for this many ping intervals is gone.
const MISSED_PINGS: u32 = 3;

/// Timing of live delivery (the spec's values are the defaults).
#[derive(Debug, Clone)]
pub struct LiveConfig {
    /// Reports per second while a backlog is replayed.
    pub replay_rate: f64,
    /// Interval of `status` messages.
    pub status_interval: Duration,
    /// Interval of SSE keep-alive comments and WebSocket protocol pings.
    pub keepalive_interval: Duration,
    /// The SSE `retry:` a browser waits before reconnecting.
    pub retry: Duration,
    /// A consumer that takes no message for this long is disconnected.
    pub slow_consumer: Duration,
    /// Connections are closed after this long (the client resumes from its cursor); `None`: never.
    pub max_connection: Option<Duration>,
}

impl Default for LiveConfig {
    fn default() -> Self {
        LiveConfig {
            replay_rate: 100.0,
            status_interval: Duration::from_secs(15),
            keepalive_interval: Duration::from_secs(15),
            retry: Duration::from_secs(3),
            slow_consumer: Duration::from_secs(30),
            max_connection: None,
        }
    }
}

/// The reports after one consumer's cursor, in id order: from the shared ring of recent reports when it covers
/// the cursor, else from the database.
pub struct Feed {
    store: Store,
    recent: Arc<RecentReports>,
    high_water: watch::Receiver<i64>,
    cursor: i64,
    /// Ids up to here existed when the consumer connected: they are the backlog, replayed at the paced rate.
    replay_until: i64,
    batch: i64,
    pace: Duration,
    next_batch_at: Instant,
}

impl Feed {
    /// Subscribes to commits, then fixes the starting cursor: `after`, or the current horizon (no history).
    pub fn start(state: &AppState, after: Option<i64>) -> Feed {
        let mut high_water = state.high_water.clone();
        let horizon = *high_water.borrow_and_update();
        let rate = state.live_config.replay_rate.max(1.0);
        // Ten batches a second keep the pace smooth without a query per report.
        let batch = (rate / 10.0).ceil().max(1.0);
        Feed {
            store: state.store.clone(),
            recent: state.recent.clone(),
            high_water,
            cursor: after.unwrap_or(horizon),
            replay_until: horizon,
            batch: batch as i64,
            pace: Duration::from_secs_f64(batch / rate),
            next_batch_at: Instant::now(),
        }
    }

    pub fn cursor(&self) -> i64 {
        self.cursor
    }

    pub fn horizon(&self) -> i64 {
        *self.high_water.borrow()
    }

    pub fn replaying(&self) -> bool {
        self.cursor < self.replay_until
    }

    /// The next reports after the cursor, waiting for a commit when there are none. Cancel-safe: the cursor
    /// moves only when a batch is returned.
    pub async fn next(&mut self) -> anyhow::Result<Vec<Arc<Rendered>>> {
        loop {
            let horizon = *self.high_water.borrow_and_update();
            if self.cursor < horizon {
                let replaying = self.replaying();
                if replaying {
                    sleep_until(self.next_batch_at).await;
                }
                let limit = if replaying { self.batch } else { LIVE_BATCH };
                let page = match self
                    .recent
                    .after(self.cursor, horizon, limit as usize)
                    .await?
                {
                    Some(page) => page,
                    None => self
                        .store
                        .reports_after(self.cursor, limit)
                        .await?
                        .items
                        .into_iter()
                        .map(|r| Arc::new(Rendered::new(r)))
                        .collect(),
                };
                if replaying {
                    self.next_batch_at = Instant::now() + self.pace;
                }
                if let Some(last) = page.last() {
                    self.cursor = last.id;
                    return Ok(page);
                }
            }
            if self.high_water.changed().await.is_err() {
                // The archive writer is gone: nothing new can commit.
                std::future::pending::<()>().await;
            }
        }
    }
}

/// The cursor a consumer asked for: `after` beats `Last-Event-ID` (digits only); neither means no history.
fn requested_cursor(
    query: Option<&str>,
    headers: Option<&HeaderMap>,
) -> Result<Option<i64>, ApiError> {
    let mut params = Params::parse(query)?;
    let after = params.int("after", 0..=MAX_SAFE_INTEGER)?;
    params.finish()?;
    if after.is_some() {
        return Ok(after);
    }
    let Some(value) = headers.and_then(|h| h.get("last-event-id")) else {
        return Ok(None);
    };
    let text = value.to_str().unwrap_or("\u{fffd}").trim();
    if text.is_empty() {
        return Ok(None);
    }
    if !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ApiError::bad_request(
            "invalid_last_event_id",
            "the Last-Event-ID header must be a report id (digits only)",
        ));
    }
    parse_int("Last-Event-ID", text, 0..=MAX_SAFE_INTEGER).map(Some)
}

fn ready_message(feed: &Feed) -> Value {
    json!({
        "type": "ready",
        "cursor": feed.cursor(),
        "highWater": feed.horizon(),
        "replaying": feed.replaying(),
        "serverTime": now_rfc3339(),
    })
}

fn status_message(state: &AppState) -> Value {
    json!({
        "type": "status",
        "serverTime": now_rfc3339(),
        "highWater": *state.high_water.borrow(),
        "sources": state.live.source_states(),
    })
}

fn slow_consumer_reason(cursor: i64) -> String {
    format!("slow consumer disconnected; resume after report id {cursor}")
}

fn lifetime_reason(cursor: i64) -> String {
    format!("connection lifetime reached; resume after report id {cursor}")
}

fn deadline(config: &LiveConfig) -> Option<Instant> {
    config.max_connection.map(|d| Instant::now() + d)
}

/// Waits for `at`, or forever when there is none.
async fn sleep_until_some(at: Option<Instant>) {
    match at {
        Some(at) => sleep_until(at).await,
        None => std::future::pending().await,
    }
}

pub async fn stream(
    State(state): State<AppState>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let after = requested_cursor(query.as_deref(), Some(&headers))?;
    let feed = Feed::start(&state, after);
    let (events, queue) = mpsc::channel::<Event>(SSE_QUEUE);
    let keepalive = state.live_config.keepalive_interval;
    tokio::spawn(produce_sse(state, feed, events));
    let body = futures_util::stream::unfold(queue, |mut queue| async move {
        queue
            .recv()
            .await
            .map(|event| (Ok::<_, Infallible>(event), queue))
    });
    let mut response = Sse::new(body)
        .keep_alive(KeepAlive::new().interval(keepalive))
        .into_response();
    // Proxies must not buffer an event stream.
    response
        .headers_mut()
        .insert("x-accel-buffering", HeaderValue::from_static("no"));
    Ok(response)
}

enum Sent {
    Ok,
    Gone,
    Slow,
}

async fn queue_event(events: &mpsc::Sender<Event>, event: Event, patience: Duration) -> Sent {
    // A consumer that keeps up has room: no timer is armed for it (ten thousand per report otherwise).
    let event = match events.try_send(event) {
        Ok(()) => return Sent::Ok,
        Err(mpsc::error::TrySendError::Closed(_)) => return Sent::Gone,
        Err(mpsc::error::TrySendError::Full(event)) => event,
    };
    match timeout(patience, events.send(event)).await {
        Ok(Ok(())) => Sent::Ok,
        Ok(Err(_)) => Sent::Gone,
        Err(_) => Sent::Slow,
    }
}

fn json_event(name: &'static str, data: &Value) -> Event {
    Event::default().event(name).data(data.to_string())
}

async fn produce_sse(state: AppState, mut feed: Feed, events: mpsc::Sender<Event>) {
    let config = state.live_config.clone();
    let patience = config.slow_consumer;
    let mut shutdown = state.shutdown.clone();
    let first = Event::default().retry(config.retry);
    if !matches!(queue_event(&events, first, patience).await, Sent::Ok)
        || !matches!(
            queue_event(
                &events,
                json_event("ready", &ready_message(&feed)),
                patience
            )
            .await,
            Sent::Ok
        )
    {
        return;
    }
    let mut status = interval_at(
        Instant::now() + config.status_interval,
        config.status_interval,
    );
    status.set_missed_tick_behavior(MissedTickBehavior::Delay);
    // Created once, not per turn of the loop: each turn would register anew with the shared shutdown signal
    // (one lock for all subscribers) and with the queue.
    let lifetime = sleep_until_some(deadline(&config));
    let stopping = shutdown.changed();
    let gone = events.closed();
    tokio::pin!(lifetime, stopping, gone);
    let mut sent_up_to = feed.cursor();
    let farewell = loop {
        tokio::select! {
            batch = feed.next() => {
                let reports = match batch {
                    Ok(reports) => reports,
                    Err(e) => {
                        tracing::warn!(error = %format!("{e:#}"), "live feed cannot read the archive; closing the stream");
                        break format!("archive unavailable; resume after report id {sent_up_to}");
                    }
                };
                let mut outcome = Sent::Ok;
                for report in reports {
                    let id = report.id;
                    let event = Event::default().event("report").data(&report.text).id(id.to_string());
                    outcome = queue_event(&events, event, patience).await;
                    if !matches!(outcome, Sent::Ok) {
                        break;
                    }
                    sent_up_to = id;
                }
                match outcome {
                    Sent::Ok => {}
                    Sent::Gone => return,
                    Sent::Slow => break slow_consumer_reason(sent_up_to),
                }
            }
            _ = status.tick() => {
                match queue_event(&events, json_event("status", &status_message(&state)), patience).await {
                    Sent::Ok => {}
                    Sent::Gone => return,
                    Sent::Slow => break slow_consumer_reason(sent_up_to),
                }
            }
            _ = &mut lifetime => break lifetime_reason(sent_up_to),
            _ = &mut stopping => break format!("service stopping; resume after report id {sent_up_to}"),
            _ = &mut gone => return,
        }
    };
    tracing::debug!(reason = %farewell, "closing an SSE stream");
    // The reason goes out as a comment (not an event) only if the consumer has room for it.
    let _ = events.try_send(Event::default().comment(farewell));
}

pub async fn ws(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
    slot: Option<Extension<HeldSlot>>,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<Response, ApiError> {
    let after = requested_cursor(query.as_deref(), None)?;
    let upgrade = upgrade.map_err(|rejection| {
        ApiError::bad_request(
            "websocket_upgrade_required",
            format!(
                "/ws needs a WebSocket upgrade request: {}",
                rejection.body_text()
            ),
        )
    })?;
    // The cursor is fixed when the request arrives, before the upgrade completes.
    let feed = Feed::start(&state, after);
    // Consumers only send `ping`: small buffers keep ten thousand sockets cheap (the defaults are 128 KiB).
    let upgrade = upgrade
        .read_buffer_size(WS_READ_BUFFER)
        .write_buffer_size(WS_WRITE_BUFFER)
        .max_message_size(WS_MAX_INCOMING)
        .max_frame_size(WS_MAX_INCOMING);
    Ok(upgrade.on_upgrade(move |socket| async move {
        // The socket occupies one of its client's connection slots for as long as it is open.
        let _slot = slot;
        run_ws(state, feed, socket).await
    }))
}

async fn run_ws(state: AppState, mut feed: Feed, socket: WebSocket) {
    let config = state.live_config.clone();
    let patience = config.slow_consumer;
    let mut shutdown = state.shutdown.clone();
    let (mut sink, mut incoming) = socket.split();
    let send = |message: Value| Message::text(message.to_string());
    if !matches!(
        timeout(patience, sink.send(send(ready_message(&feed)))).await,
        Ok(Ok(()))
    ) {
        return;
    }
    let mut status = interval_at(
        Instant::now() + config.status_interval,
        config.status_interval,
    );
    status.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut ping = interval_at(
        Instant::now() + config.keepalive_interval,
        config.keepalive_interval,
    );
    ping.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut last_heard = Instant::now();
    let lifetime = sleep_until_some(deadline(&config));
    let stopping = shutdown.changed();
    tokio::pin!(lifetime, stopping);
    let mut sent_up_to = feed.cursor();
    // (close code, reason) when the server ends the connection; None when the peer is gone.
    let close: Option<(u16, String)> = loop {
        // Each message with the report id it carries, if any.
        let outgoing: Vec<(Option<i64>, Message)> = tokio::select! {
            batch = feed.next() => match batch {
                Ok(reports) => reports
                    .into_iter()
                    .map(|report| (Some(report.id), Message::Text(report.ws_text.clone())))
                    .collect(),
                Err(e) => {
                    tracing::warn!(error = %format!("{e:#}"), "live feed cannot read the archive; closing the socket");
                    break Some((1011, format!("archive unavailable; resume after report id {sent_up_to}")));
                }
            },
            message = incoming.next() => match message {
                Some(Ok(Message::Text(text))) => {
                    last_heard = Instant::now();
                    if text.as_str().trim() == "ping" {
                        vec![(None, send(json!({ "type": "pong", "serverTime": now_rfc3339() })))]
                    } else {
                        Vec::new()
                    }
                }
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break None,
                Some(Ok(_)) => {
                    last_heard = Instant::now();
                    Vec::new()
                }
            },
            _ = status.tick() => vec![(None, send(status_message(&state)))],
            _ = ping.tick() => {
                if last_heard.elapsed() > config.keepalive_interval * MISSED_PINGS {
                    break None;
                }
                vec![(None, Message::Ping(Default::default()))]
            }
            _ = &mut lifetime => break Some((1001, lifetime_reason(sent_up_to))),
            _ = &mut stopping => break Some((1001, format!("service stopping; resume after report id {sent_up_to}"))),
        };
        let mut slow = false;
        for (report_id, message) in outgoing {
            // Armed only when the socket cannot take the message at once (see `queue_event`).
            let mut sending = std::pin::pin!(sink.send(message));
            let once = std::future::poll_fn(|cx| Poll::Ready(sending.as_mut().poll(cx))).await;
            let sent = match once {
                Poll::Ready(sent) => Ok(sent),
                Poll::Pending => timeout(patience, sending).await,
            };
            match sent {
                Ok(Ok(())) => {
                    if let Some(id) = report_id {
                        sent_up_to = id;
                    }
                }
                Ok(Err(_)) => return,
                Err(_) => {
                    slow = true;
                    break;
                }
            }
        }
        if slow {
            break Some((1008, slow_consumer_reason(sent_up_to)));
        }
    };
    if let Some((code, reason)) = close {
        tracing::debug!(%reason, "closing a WebSocket");
        let frame = CloseFrame {
            code,
            reason: reason.into(),
        };
        let _ = timeout(
            Duration::from_secs(1),
            sink.send(Message::Close(Some(frame))),
        )
        .await;
    }
}
