//! What `/stream` and `/ws` share about a consumer: its starting cursor and feed, its `ready` and `status`
//! messages, the reason its connection's lifetime ended, and its timed duties.

use super::config::LiveConfig;
use super::feed::Feed;
use super::state::LiveState;
use crate::error::{ApiError, ErrorCode};
use crate::params::{MAX_SAFE_INTEGER, Params, parse_int};
use crate::sources::SourceFilter;
use axum::http::HeaderMap;
use osds_time::now_rfc3339;
use serde_json::{Value, json};
use std::pin::Pin;
use std::time::Duration;
use tokio::time::{Instant, Sleep, sleep_until};

/// What a consumer asked for: where to start, and which channels to follow.
pub(super) struct Asked {
    /// None: from the current horizon (no history).
    pub(super) after: Option<i64>,
    pub(super) filter: Option<SourceFilter>,
}

/// Subscribes to commits, then fixes the starting cursor: `after`, or the current horizon (no history).
pub(super) fn start_feed(state: &LiveState, asked: Asked) -> Feed {
    Feed::new(
        state.store.clone(),
        state.report_cache.clone(),
        state.recent.clone(),
        state.high_water.clone(),
        asked.after,
        state.config.replay_rate,
        asked.filter,
    )
}

/// What a consumer asked for ([`requested`]); its cursor is refused (409) when it is above the archive's
/// horizon: it came from another archive, and resuming from it would skip reports in silence.
pub(super) async fn checked_request(
    state: &LiveState,
    query: Option<&str>,
    headers: Option<&HeaderMap>,
) -> Result<Asked, ApiError> {
    let asked = requested(query, headers, || state.upstream.sources())?;
    // Nothing to check at or below the commit watch, which never runs ahead of the archive (a reconnect storm
    // asks no query per consumer); above it, the archive's own horizon decides: a version `osds reparse`
    // appended a moment ago is served by `/reports` before the watch sees it.
    if let Some(after) = asked.after
        && after > *state.high_water.borrow()
    {
        let high_water = state.store.high_water().await?;
        if after > high_water {
            return Err(ApiError::cursor_ahead(
                after,
                high_water,
                state.store.archive_id(),
            ));
        }
    }
    Ok(asked)
}

/// The channels (`source`, of the `known` ones) and the cursor a consumer asked for: `after` beats
/// `Last-Event-ID` (digits only); neither means no history.
fn requested(
    query: Option<&str>,
    headers: Option<&HeaderMap>,
    known: impl FnOnce() -> Vec<String>,
) -> Result<Asked, ApiError> {
    let mut params = Params::parse(query)?;
    let after = params.int("after", 0..=MAX_SAFE_INTEGER)?;
    let filter = SourceFilter::from_params(&mut params, known)?;
    params.finish()?;
    let after = match after {
        Some(after) => Some(after),
        None => last_event_id(headers)?,
    };
    Ok(Asked { after, filter })
}

/// The `Last-Event-ID` header's cursor, if it holds one.
pub(super) fn last_event_id(headers: Option<&HeaderMap>) -> Result<Option<i64>, ApiError> {
    let Some(value) = headers.and_then(|h| h.get("last-event-id")) else {
        return Ok(None);
    };
    let text = value.to_str().unwrap_or("\u{fffd}").trim();
    if text.is_empty() {
        return Ok(None);
    }
    if !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ApiError::bad_request(
            ErrorCode::InvalidLastEventId,
            "the Last-Event-ID header must be a report id (digits only)",
        ));
    }
    parse_int("Last-Event-ID", text, 0..=MAX_SAFE_INTEGER).map(Some)
}

pub(super) fn ready_message(feed: &Feed, archive_id: &str) -> Value {
    json!({
        "type": "ready",
        "archiveId": archive_id,
        "cursor": feed.cursor(),
        "highWater": feed.horizon(),
        "replaying": feed.replaying(),
        "serverTime": now_rfc3339(),
    })
}

pub(super) fn status_message(state: &LiveState) -> Value {
    json!({
        "type": "status",
        "serverTime": now_rfc3339(),
        "highWater": *state.high_water.borrow(),
        "sources": state.upstream.source_states(),
    })
}

/// Why a live connection ended: the `reason` label of `osds_live_disconnects_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DisconnectReason {
    /// The consumer left (closed, or the connection dropped).
    ClientGone,
    /// The connection's configured lifetime ran out.
    Lifetime,
    /// The service is stopping.
    Stopping,
    /// A WebSocket consumer left a message unread too long.
    SlowConsumer,
    /// A WebSocket consumer stopped answering pings.
    Unresponsive,
    /// A WebSocket consumer sent a message over the limit.
    MessageTooBig,
    /// The archive could not be read to catch the consumer up.
    ArchiveUnavailable,
}

impl DisconnectReason {
    pub const ALL: [DisconnectReason; 7] = [
        DisconnectReason::ClientGone,
        DisconnectReason::Lifetime,
        DisconnectReason::Stopping,
        DisconnectReason::SlowConsumer,
        DisconnectReason::Unresponsive,
        DisconnectReason::MessageTooBig,
        DisconnectReason::ArchiveUnavailable,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            DisconnectReason::ClientGone => "client_gone",
            DisconnectReason::Lifetime => "lifetime",
            DisconnectReason::Stopping => "stopping",
            DisconnectReason::SlowConsumer => "slow_consumer",
            DisconnectReason::Unresponsive => "unresponsive",
            DisconnectReason::MessageTooBig => "message_too_big",
            DisconnectReason::ArchiveUnavailable => "archive_unavailable",
        }
    }
}

/// A live consumer as the operator's metrics see it: counted among the subscribers of its protocol while it
/// lives, with the reports it sent itself (the hub counts the ones it writes), its share of the replay
/// backlog, and why it ended (`client_gone` unless the server ended it).
pub(super) struct Subscriber {
    protocol: &'static str,
    subscribers: metrics::Gauge,
    backlog: metrics::Gauge,
    deliveries: metrics::Counter,
    /// This consumer's part of the backlog gauge.
    behind: f64,
    reason: DisconnectReason,
}

impl Subscriber {
    pub(super) fn new(protocol: &'static str, feed: &Feed) -> Subscriber {
        let subscribers = metrics::gauge!("osds_live_subscribers", "protocol" => protocol);
        subscribers.increment(1.0);
        let mut subscriber = Subscriber {
            protocol,
            subscribers,
            backlog: metrics::gauge!("osds_live_replay_backlog_reports", "protocol" => protocol),
            deliveries: metrics::counter!("osds_live_deliveries_total", "protocol" => protocol),
            behind: 0.0,
            reason: DisconnectReason::ClientGone,
        };
        subscriber.track(feed);
        subscriber
    }

    /// `sent` reports of the feed's last batch went out.
    pub(super) fn sent(&mut self, sent: usize, feed: &Feed) {
        self.deliveries.increment(sent as u64);
        self.track(feed);
    }

    fn track(&mut self, feed: &Feed) {
        let behind = feed.backlog() as f64;
        self.backlog.increment(behind - self.behind);
        self.behind = behind;
    }

    /// The server ends the connection, for `reason`.
    pub(super) fn ending(&mut self, reason: DisconnectReason) {
        self.reason = reason;
    }
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        self.subscribers.decrement(1.0);
        self.backlog.decrement(self.behind);
        metrics::counter!("osds_live_disconnects_total", "protocol" => self.protocol, "reason" => self.reason.as_str())
            .increment(1);
    }
}

pub(super) fn lifetime_reason(cursor: i64) -> String {
    format!("connection lifetime reached; resume after report id {cursor}")
}

/// The timed duties of one connection (status messages, keep-alives, its lifetime) as deadlines, served by one
/// timer: a connection that woke for a report used to poll a timer per duty before sleeping again.
pub(super) struct Duties {
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
pub(super) struct Due {
    pub(super) status: bool,
    pub(super) keepalive: bool,
    pub(super) lifetime: bool,
}

impl Duties {
    pub(super) fn new(config: &LiveConfig) -> Duties {
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
    pub(super) fn due(&mut self) -> Due {
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
    pub(super) async fn elapsed(&mut self) {
        self.timer.as_mut().await
    }
}
