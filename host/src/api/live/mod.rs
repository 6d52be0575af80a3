//! Live delivery: `/stream` (SSE, [`sse`]) and `/ws` (WebSocket, [`mod@ws`]) over one mechanism, [`Feed`]: subscribe
//! to the commit notifications first, then read every report after the cursor from the database up to the
//! commit horizon, paced while a backlog is replayed, pushed at once after that. Notifications only wake a feed;
//! what it sends always comes from the database in id order, so every consumer sees the same ids as `/reports`.
//! A caught-up feed lends its consumer's socket to the [`hub`], whose own feeds write the next reports to
//! every lent socket at once ([`socket`]); the consumer's feed goes on from wherever the hub stopped.

pub mod hub;
pub mod socket;
pub mod sse;
pub mod ws;

pub use sse::stream;
pub use ws::ws;

use super::AppState;
use super::error::ApiError;
use super::params::{MAX_SAFE_INTEGER, Params, parse_int};
use super::recent::{RecentReports, Rendered};
use crate::store::Store;
use crate::time::now_rfc3339;
use axum::http::HeaderMap;
use hub::Hub;
use serde_json::{Value, json};
use socket::{Kind, Tap};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::{Instant, Sleep, sleep_until};

/// Most reports read in one query once the backlog is replayed.
const LIVE_BATCH: i64 = 1000;

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
    /// A WebSocket consumer that takes no message for this long is disconnected (an SSE stream goes at its
    /// reader's pace).
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
    /// The cursor before the batch last returned.
    before_batch: i64,
    /// The consumer's socket, lent to the hub whenever the feed is caught up.
    lend: Option<(Arc<Tap>, Kind)>,
}

impl Feed {
    /// Subscribes to commits, then fixes the starting cursor: `after`, or the current horizon (no history).
    pub fn start(state: &AppState, after: Option<i64>) -> Feed {
        Feed::new(
            state.store.clone(),
            state.recent.clone(),
            state.high_water.clone(),
            after,
            state.live_config.replay_rate,
        )
    }

    pub fn new(
        store: Store,
        recent: Arc<RecentReports>,
        mut high_water: watch::Receiver<i64>,
        after: Option<i64>,
        replay_rate: f64,
    ) -> Feed {
        let horizon = *high_water.borrow_and_update();
        let rate = replay_rate.max(1.0);
        // Ten batches a second keep the pace smooth without a query per report.
        let batch = (rate / 10.0).ceil().max(1.0);
        let cursor = after.unwrap_or(horizon);
        Feed {
            store,
            recent,
            high_water,
            cursor,
            replay_until: horizon,
            batch: batch as i64,
            pace: Duration::from_secs_f64(batch / rate),
            next_batch_at: Instant::now(),
            before_batch: cursor,
            lend: None,
        }
    }

    /// Lends the consumer's socket to the hub whenever the feed is caught up (see [`socket`]): the reports the
    /// hub writes move the cursor without passing through [`Feed::next`].
    pub fn lend_when_caught_up(&mut self, hub: &Hub, tap: Arc<Tap>, kind: Kind) {
        hub.register(&tap);
        self.lend = Some((tap, kind));
    }

    /// The last report id sent: returned by [`Feed::next`] or written by the hub.
    pub fn cursor(&self) -> i64 {
        self.cursor
    }

    /// The cursor before the batch [`Feed::next`] returned last.
    pub fn before_batch(&self) -> i64 {
        self.before_batch
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
                    self.before_batch = self.cursor;
                    self.cursor = last.id;
                    return Ok(page);
                }
            }
            if let Some((tap, kind)) = &self.lend
                && tap.lend(*kind, self.cursor)
            {
                let lent = Lent {
                    tap,
                    from: self.cursor,
                    cursor: &mut self.cursor,
                };
                // A commit published before the socket was lent may have been passed over by the hub.
                if *self.high_water.borrow() <= lent.from {
                    std::future::poll_fn(|cx| tap.poll_given_back(cx)).await;
                }
                continue;
            }
            if self.high_water.changed().await.is_err() {
                // The archive writer is gone: nothing new can commit.
                std::future::pending::<()>().await;
            }
        }
    }
}

/// A socket lent to the hub for as long as this lives (a cancelled wait takes it back too); the cursor moves
/// past what the hub wrote when it comes back.
struct Lent<'a> {
    tap: &'a Tap,
    cursor: &'a mut i64,
    from: i64,
}

impl Drop for Lent<'_> {
    fn drop(&mut self) {
        *self.cursor = (*self.cursor).max(self.tap.take_back());
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

fn lifetime_reason(cursor: i64) -> String {
    format!("connection lifetime reached; resume after report id {cursor}")
}

/// The timed duties of one connection (status messages, keep-alives, its lifetime) as deadlines, served by one
/// timer: a connection that woke for a report used to poll a timer per duty before sleeping again.
struct Duties {
    status_every: Duration,
    keepalive_every: Duration,
    next_status: Instant,
    next_keepalive: Instant,
    end: Option<Instant>,
    /// Set for the earliest deadline.
    timer: Pin<Box<Sleep>>,
}

/// What [`Duties::due`] found due.
#[derive(Default)]
struct Due {
    status: bool,
    keepalive: bool,
    lifetime: bool,
}

impl Duties {
    fn new(config: &LiveConfig) -> Duties {
        let now = Instant::now();
        let mut duties = Duties {
            status_every: config.status_interval,
            keepalive_every: config.keepalive_interval,
            next_status: now + config.status_interval,
            next_keepalive: now + config.keepalive_interval,
            end: config.max_connection.map(|d| now + d),
            timer: Box::pin(sleep_until(now)),
        };
        let first = duties.earliest();
        duties.timer.as_mut().reset(first);
        duties
    }

    fn earliest(&self) -> Instant {
        let periodic = self.next_status.min(self.next_keepalive);
        self.end.map_or(periodic, |end| end.min(periodic))
    }

    /// What is due now. Looked at before each wait, so a feed that is ready on every turn cannot starve the
    /// duties. A periodic duty found due is next due one interval later (a late one is not made up for).
    fn due(&mut self) -> Due {
        let mut now = Instant::now();
        // A timer that fired counts as its deadline reached, whatever the clock read since.
        if self.timer.is_elapsed() {
            now = now.max(self.timer.deadline());
        }
        if now < self.earliest() {
            return Due::default();
        }
        let mut due = Due {
            lifetime: self.end.is_some_and(|end| now >= end),
            ..Due::default()
        };
        if now >= self.next_status {
            due.status = true;
            self.next_status = now + self.status_every;
        }
        if now >= self.next_keepalive {
            due.keepalive = true;
            self.next_keepalive = now + self.keepalive_every;
        }
        let next = self.earliest();
        self.timer.as_mut().reset(next);
        due
    }

    /// Resolves once the earliest deadline has passed.
    async fn elapsed(&mut self) {
        self.timer.as_mut().await
    }
}
