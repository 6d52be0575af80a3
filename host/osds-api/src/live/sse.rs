//! `/stream`: live delivery as Server-Sent Events, one consumer's [`Feed`] turned into frames by [`Events`]; a
//! report's event is framed once for every consumer ([`crate::wire::Rendered`]). On a plain HTTP/1.1
//! connection the stream takes the connection from hyper once the response head is out and writes its chunks
//! itself, lending the socket to the hub while caught up ([`crate::net::socket`]); over TLS the response body moves
//! the feed whenever hyper asks for more.

use super::consumer::{
    DisconnectReason, Duties, Subscriber, checked_request, lifetime_reason, ready_message,
    start_feed, status_message,
};
use super::feed::Feed;
use super::state::LiveState;
use crate::error::ApiError;
use crate::gateway::HeldSlot;
use crate::net::listener::Peer;
use crate::net::socket::{Kind, Tap};
use crate::wire::{LAST_CHUNK, comment, json_event, put_http_chunk};
use axum::body::Body;
use axum::extract::{ConnectInfo, Extension, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, Method, Version, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use bytes::BytesMut;
use http_body::Frame;
use std::collections::VecDeque;
use std::convert::Infallible;
use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio_util::task::TaskTracker;

/// A comment line: keeps the connection (and proxies) from idling out.
const KEEPALIVE: &[u8] = b":\n\n";

pub async fn stream(
    State(state): State<LiveState>,
    method: Method,
    version: Version,
    peer: Option<Extension<ConnectInfo<Peer>>>,
    slot: Option<Extension<HeldSlot>>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let asked = checked_request(&state, query.as_deref(), Some(&headers)).await?;
    let mut feed = start_feed(&state, asked);
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    // Proxies must not buffer an event stream.
    headers.insert(
        header::HeaderName::from_static("x-accel-buffering"),
        HeaderValue::from_static("no"),
    );
    // The stream writes chunks of a chunked HTTP/1.1 body itself: not for HEAD (no body), HTTP/1.0 (no
    // chunks), nor over TLS (no tap).
    let tap = peer.and_then(|Extension(ConnectInfo(peer))| peer.tap);
    let body = match tap {
        Some(tap) if method == Method::GET && version == Version::HTTP_11 => {
            state.hub.register(&tap);
            feed.lend_when_caught_up(tap.clone(), Kind::Sse);
            let streams = state.streams.clone();
            let events = Events::new(state, feed);
            // The stream ends the connection; hyper does not get it back.
            headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
            Body::new(Detaching {
                handover: Some((events, tap, slot)),
                streams,
            })
        }
        _ => Body::from_stream(futures_util::stream::unfold(
            Events::new(state, feed),
            |mut events| async move {
                let frame = events.next().await?;
                Some((Ok::<_, Infallible>(frame), events))
            },
        )),
    };
    Ok((headers, body).into_response())
}

/// The body hyper sends of a stream that takes its connection over: none. Polled once, after hyper has queued
/// the response head, it asks hyper to let go of the connection and starts the stream as a task of its own.
struct Detaching {
    handover: Option<(Events, Arc<Tap>, Option<Extension<HeldSlot>>)>,
    streams: TaskTracker,
}

impl http_body::Body for Detaching {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if let Some((events, tap, slot)) = self.handover.take() {
            tap.detach();
            self.streams.spawn(detached(events, tap, slot));
        }
        // hyper drops the connection (and this body) once it sees the end of its input.
        Poll::Pending
    }
}

/// A stream on a connection hyper let go of: each frame as a chunk, the last chunk, then the connection closes.
/// A consumer that reads slowly is written to at its pace, as within hyper; one that closed its side of the
/// connection ends the stream at once.
async fn detached(mut events: Events, tap: Arc<Tap>, slot: Option<Extension<HeldSlot>>) {
    // The stream occupies one of its client's connection slots for as long as it is open.
    let _slot = slot;
    if !poll_fn(|cx| tap.poll_detached(cx)).await {
        return;
    }
    loop {
        let frame = tokio::select! {
            frame = events.next() => frame,
            // A client that has gone frees its slot now, not at the next write (up to a keep-alive later).
            () = poll_fn(|cx| tap.poll_peer_gone(cx)) => {
                tap.close();
                return;
            }
        };
        let Some(frame) = frame else { break };
        // A batch (a replayed backlog's ten, a burst of commits) goes out in one write, not one per report.
        let mut chunks = BytesMut::new();
        for frame in std::iter::once(frame).chain(events.pending.drain(..)) {
            put_http_chunk(&mut chunks, &frame);
        }
        if write_own(&tap, &chunks).await.is_err() {
            tap.close();
            return;
        }
    }
    let _ = write_own(&tap, LAST_CHUNK).await;
    tap.close();
}

/// Writes all of `bytes` and flushes, as the connection's own writer.
async fn write_own(tap: &Tap, bytes: &[u8]) -> std::io::Result<()> {
    let mut written = 0;
    while written < bytes.len() {
        let n = poll_fn(|cx| tap.poll_write_own(cx, &bytes[written..])).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        written += n;
    }
    poll_fn(|cx| tap.poll_flush_own(cx)).await
}

/// What woke [`Events::next`].
enum Turn {
    Reports(anyhow::Result<Vec<std::sync::Arc<crate::wire::Rendered>>>),
    Duty,
    Stopping,
}

/// One consumer's stream of frames, produced when the response body is polled: the connection's own task
/// moves the feed, so a delivery wakes one task and queues nothing. A consumer that reads slowly is not
/// disconnected: hyper stops polling the body while its write buffer is full, and the feed falls back to
/// the archive as far behind as the consumer is.
struct Events {
    state: LiveState,
    feed: Feed,
    duties: Duties,
    stopping: Pin<Box<dyn Future<Output = ()> + Send>>,
    /// Frames ready to go.
    pending: VecDeque<Bytes>,
    /// Whether nothing went out since the last keep-alive was due.
    quiet: bool,
    ended: bool,
    subscriber: Subscriber,
}

impl Events {
    fn new(state: LiveState, feed: Feed) -> Events {
        let config = &state.config;
        let duties = Duties::new(config);
        let mut shutdown = state.shutdown.clone();
        let retry = Bytes::from(format!("retry: {}\n\n", config.retry.as_millis()));
        let ready = json_event("ready", &ready_message(&feed, state.store.archive_id()));
        let subscriber = Subscriber::new("sse", &feed);
        Events {
            stopping: Box::pin(async move {
                let _ = shutdown.changed().await;
            }),
            pending: VecDeque::from([retry, ready]),
            quiet: true,
            ended: false,
            subscriber,
            duties,
            feed,
            state,
        }
    }

    async fn next(&mut self) -> Option<Bytes> {
        if let Some(frame) = self.pending.pop_front() {
            return Some(frame);
        }
        if self.ended {
            return None;
        }
        loop {
            let due = self.duties.due();
            if due.lifetime {
                return self.end(
                    DisconnectReason::Lifetime,
                    lifetime_reason(self.feed.cursor()),
                );
            }
            let keepalive = due.keepalive && self.quiet;
            if due.keepalive {
                self.quiet = true;
            }
            if due.status {
                self.quiet = false;
                return Some(json_event("status", &status_message(&self.state)));
            }
            if keepalive {
                return Some(Bytes::from_static(KEEPALIVE));
            }
            let before = self.feed.cursor();
            // Biased: a woken consumer usually has a report, and then nothing else is polled.
            let turn = tokio::select! {
                biased;
                batch = self.feed.next() => Turn::Reports(batch),
                () = self.duties.elapsed() => Turn::Duty,
                _ = &mut self.stopping => Turn::Stopping,
            };
            // Reports the hub wrote while the feed waited.
            if self.feed.cursor() > before {
                self.quiet = false;
            }
            match turn {
                Turn::Reports(Ok(reports)) => {
                    self.quiet = false;
                    self.subscriber.sent(reports.len(), &self.feed);
                    self.pending
                        .extend(reports.iter().map(|r| r.sse_event.clone()));
                    if let Some(frame) = self.pending.pop_front() {
                        return Some(frame);
                    }
                }
                Turn::Reports(Err(e)) => {
                    tracing::warn!(
                        error = %format!("{e:#}"),
                        "live feed cannot read the archive; closing the stream"
                    );
                    // Every report returned before went out: nothing is pending here.
                    let reason = format!(
                        "archive unavailable; resume after report id {}",
                        self.feed.cursor()
                    );
                    return self.end(DisconnectReason::ArchiveUnavailable, reason);
                }
                Turn::Duty => {}
                Turn::Stopping => {
                    let reason = format!(
                        "service stopping; resume after report id {}",
                        self.feed.cursor()
                    );
                    return self.end(DisconnectReason::Stopping, reason);
                }
            }
        }
    }

    /// The last frame: the reason, as a comment (not an event); `code` names it in the metrics.
    fn end(&mut self, code: DisconnectReason, reason: String) -> Option<Bytes> {
        tracing::debug!(%reason, "closing an SSE stream");
        self.subscriber.ending(code);
        self.ended = true;
        Some(comment(&reason))
    }
}
