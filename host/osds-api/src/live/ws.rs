//! `/ws`: live delivery over a WebSocket. One task per socket moves the [`Feed`], answers `ping`, sends
//! `status` and protocol pings, and closes with a reason naming the cursor to resume after.

use super::consumer::{
    DisconnectReason, Duties, Subscriber, checked_request, lifetime_reason, ready_message,
    start_feed, status_message,
};
use super::feed::Feed;
use super::state::LiveState;
use crate::error::{ApiError, ErrorCode};
use crate::gateway::HeldSlot;
use crate::net::listener::Peer;
use crate::net::socket::Kind;
use axum::extract::ws::{
    CloseFrame, Message, WebSocket, WebSocketUpgrade, rejection::WebSocketUpgradeRejection,
};
use axum::extract::{ConnectInfo, Extension, RawQuery, State};
use axum::response::Response;
use futures_util::SinkExt;
use osds_time::now_rfc3339;
use serde_json::{Value, json};
use std::future::Future;
use std::task::Poll;
use std::time::Duration;
use tokio::time::{Instant, timeout};

/// Read buffer of a live WebSocket, allocated up front for every socket; consumers only send `ping`, and a
/// longer message is read in more steps.
const READ_BUFFER: usize = 1024;
/// Bytes a live WebSocket gathers before writing (every report is flushed at once anyway).
const WRITE_BUFFER: usize = 8 * 1024;
/// Largest message a live WebSocket consumer may send.
const MAX_INCOMING: usize = 64 * 1024;
/// A peer that answers no ping for this many ping intervals is gone.
const MISSED_PINGS: u32 = 3;

pub async fn ws(
    State(state): State<LiveState>,
    RawQuery(query): RawQuery,
    slot: Option<Extension<HeldSlot>>,
    peer: Option<Extension<ConnectInfo<Peer>>>,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<Response, ApiError> {
    let asked = checked_request(&state, query.as_deref(), None).await?;
    let upgrade = upgrade.map_err(|rejection| upgrade_required("/ws", &rejection))?;
    // The cursor is fixed when the request arrives, before the upgrade completes.
    let mut feed = start_feed(&state, asked);
    if let Some(tap) = peer.and_then(|Extension(ConnectInfo(peer))| peer.tap) {
        state.hub.register(&tap);
        feed.lend_when_caught_up(tap, Kind::Ws);
    }
    // Consumers only send `ping`: small buffers keep ten thousand sockets cheap (the defaults are 128 KiB).
    let upgrade = upgrade
        .read_buffer_size(READ_BUFFER)
        .write_buffer_size(WRITE_BUFFER)
        .max_message_size(MAX_INCOMING)
        .max_frame_size(MAX_INCOMING);
    Ok(upgrade.on_upgrade(move |socket| async move {
        // The socket occupies one of its client's connection slots for as long as it is open.
        let _slot = slot;
        run(state, feed, socket).await
    }))
}

/// Whether a read failed because the consumer sent a message over [`MAX_INCOMING`] (answered with close code
/// 1009, "message too big", rather than a silent drop).
fn too_big(error: &axum::Error) -> bool {
    matches!(
        std::error::Error::source(error).and_then(|e| e.downcast_ref::<tungstenite::Error>()),
        Some(tungstenite::Error::Capacity(_))
    )
}

/// The 400 for a request to a WebSocket endpoint (`path`) that is not an upgrade.
pub(super) fn upgrade_required(path: &str, rejection: &WebSocketUpgradeRejection) -> ApiError {
    ApiError::bad_request(
        ErrorCode::WebsocketUpgradeRequired,
        format!(
            "{path} needs a WebSocket upgrade request: {}",
            rejection.body_text()
        ),
    )
}

/// Why a message could not be handed to a consumer.
pub(super) enum Stop {
    /// The consumer is gone.
    Gone,
    /// It took nothing for the slow-consumer patience.
    Slow,
}

/// Completes `sending`; a timer is armed only when it cannot complete at once (with ten thousand consumers
/// that keep up, a timer per message was a measurable share of the fan-out).
pub(super) async fn within<F: Future<Output = Result<(), E>>, E>(
    patience: Duration,
    sending: F,
) -> Result<(), Stop> {
    let mut sending = std::pin::pin!(sending);
    let once = std::future::poll_fn(|cx| Poll::Ready(sending.as_mut().poll(cx))).await;
    let sent = match once {
        Poll::Ready(sent) => sent,
        Poll::Pending => timeout(patience, sending).await.map_err(|_| Stop::Slow)?,
    };
    sent.map_err(|_| Stop::Gone)
}

fn slow_consumer_reason(cursor: i64) -> String {
    format!("slow consumer disconnected; resume after report id {cursor}")
}

/// Why the server closes a socket: the close code, a reason code for the metrics, and the reason sent.
type Close = (u16, DisconnectReason, String);

/// How a socket ends when a message could not be handed over: a slow consumer is told why.
fn ended(stop: Stop, sent_up_to: i64) -> Option<Close> {
    match stop {
        Stop::Slow => Some((
            1008,
            DisconnectReason::SlowConsumer,
            slow_consumer_reason(sent_up_to),
        )),
        Stop::Gone => None,
    }
}

fn text(message: &Value) -> Message {
    Message::text(message.to_string())
}

/// What one turn of a socket's loop has to send.
enum Outgoing {
    Reports(Vec<std::sync::Arc<crate::wire::Rendered>>),
    Control(Message),
    Nothing,
}

async fn run(state: LiveState, mut feed: Feed, mut socket: WebSocket) {
    let config = state.config.clone();
    let patience = config.slow_consumer;
    let mut shutdown = state.shutdown.clone();
    let ready = text(&ready_message(&feed, state.store.archive_id()));
    let mut subscriber = Subscriber::new("ws", &feed);
    if within(patience, socket.send(ready)).await.is_err() {
        return;
    }
    let mut duties = Duties::new(&config);
    let mut last_heard = Instant::now();
    let stopping = shutdown.changed();
    tokio::pin!(stopping);
    // Set when the server ends the connection; None when the peer is gone. Every report the feed returned
    // went out (or the loop ended), so the feed's cursor is what the consumer has, outside the sending of a
    // batch.
    let close: Option<Close> = loop {
        let due = duties.due();
        if due.lifetime {
            break Some((
                1001,
                DisconnectReason::Lifetime,
                lifetime_reason(feed.cursor()),
            ));
        }
        if due.status
            && let Err(stop) = within(patience, socket.send(text(&status_message(&state)))).await
        {
            break ended(stop, feed.cursor());
        }
        if due.keepalive {
            if last_heard.elapsed() > config.keepalive_interval * MISSED_PINGS {
                subscriber.ending(DisconnectReason::Unresponsive);
                break None;
            }
            if let Err(stop) =
                within(patience, socket.send(Message::Ping(Default::default()))).await
            {
                break ended(stop, feed.cursor());
            }
        }
        // Biased: a woken consumer usually has a report, and then nothing else is polled; the socket's incoming
        // messages (pings, close) are read whenever no report is waiting.
        let outgoing = tokio::select! {
            biased;
            batch = feed.next() => match batch {
                Ok(reports) => Outgoing::Reports(reports),
                Err(e) => {
                    tracing::warn!(error = %format!("{e:#}"), "live feed cannot read the archive; closing the socket");
                    break Some((1011, DisconnectReason::ArchiveUnavailable, format!("archive unavailable; resume after report id {}", feed.cursor())));
                }
            },
            message = socket.recv() => match message {
                Some(Ok(Message::Text(message))) => {
                    last_heard = Instant::now();
                    if message.as_str().trim() == "ping" {
                        Outgoing::Control(text(&json!({ "type": "pong", "serverTime": now_rfc3339() })))
                    } else {
                        Outgoing::Nothing
                    }
                }
                Some(Err(e)) if too_big(&e) => break Some((
                    1009,
                    DisconnectReason::MessageTooBig,
                    format!("a message over {MAX_INCOMING} bytes; consumers only send `ping`; resume after report id {}", feed.cursor()),
                )),
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break None,
                Some(Ok(_)) => {
                    last_heard = Instant::now();
                    Outgoing::Nothing
                }
            },
            () = duties.elapsed() => continue,
            _ = &mut stopping => break Some((1001, DisconnectReason::Stopping, format!("service stopping; resume after report id {}", feed.cursor()))),
        };
        let mut sent_up_to = feed.cursor();
        let sent = match outgoing {
            Outgoing::Reports(reports) => {
                // Queued, then flushed once: a batch (a replayed backlog's ten, a burst of commits) goes out in
                // one write. Until the flush, none of it counts as sent.
                sent_up_to = feed.before_batch();
                let mut sent = Ok(());
                for report in &reports {
                    sent =
                        within(patience, socket.feed(Message::Text(report.ws_text.clone()))).await;
                    if sent.is_err() {
                        break;
                    }
                }
                if sent.is_ok() {
                    sent = within(patience, socket.flush()).await;
                }
                if sent.is_ok() {
                    sent_up_to = feed.cursor();
                    subscriber.sent(reports.len(), &feed);
                }
                sent
            }
            Outgoing::Control(message) => within(patience, socket.send(message)).await,
            Outgoing::Nothing => Ok(()),
        };
        if let Err(stop) = sent {
            break ended(stop, sent_up_to);
        }
    };
    if let Some((code, metric_reason, reason)) = close {
        tracing::debug!(%reason, "closing a WebSocket");
        subscriber.ending(metric_reason);
        let frame = CloseFrame {
            code,
            reason: reason.into(),
        };
        let _ = timeout(
            Duration::from_secs(1),
            socket.send(Message::Close(Some(frame))),
        )
        .await;
    }
}
