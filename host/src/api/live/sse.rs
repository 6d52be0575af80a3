//! `/stream`: live delivery as Server-Sent Events. The response body is the consumer's [`Feed`], moved whenever
//! hyper asks for more (no task or queue of its own per consumer); a report's event is framed once for every
//! consumer ([`crate::api::recent::Rendered`]), so a delivery hands over shared bytes.

use super::socket::Kind;
use super::{
    AppState, Duties, Feed, lifetime_reason, ready_message, requested_cursor, status_message,
};
use crate::api::error::ApiError;
use crate::listener::Peer;
use axum::body::Body;
use axum::extract::{ConnectInfo, Extension, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, Method, Version, header};
use axum::response::{IntoResponse, Response};
use bytes::{BufMut, Bytes, BytesMut};
use serde_json::Value;
use std::collections::VecDeque;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;

/// A comment line: keeps the connection (and proxies) from idling out.
const KEEPALIVE: &[u8] = b":\n\n";

/// One framed event: `event:`, one `data:` line per line of `data`, `id:` when given.
pub fn event(name: &str, id: Option<i64>, data: &str) -> Bytes {
    let mut frame = BytesMut::with_capacity(name.len() + data.len() + 40);
    frame.put_slice(b"event: ");
    frame.put_slice(name.as_bytes());
    frame.put_u8(b'\n');
    // A line break (LF, CRLF or CR) inside the data would end the field: each line gets its own `data:` field.
    let normalized;
    let data = if data.contains('\r') {
        normalized = data.replace("\r\n", "\n").replace('\r', "\n");
        &normalized
    } else {
        data
    };
    for line in data.split('\n') {
        frame.put_slice(b"data: ");
        frame.put_slice(line.as_bytes());
        frame.put_u8(b'\n');
    }
    if let Some(id) = id {
        frame.put_slice(format!("id: {id}\n").as_bytes());
    }
    frame.put_u8(b'\n');
    frame.freeze()
}

fn json_event(name: &str, data: &Value) -> Bytes {
    event(name, None, &data.to_string())
}

/// A comment (never shown to an EventSource listener); line breaks become spaces.
fn comment(text: &str) -> Bytes {
    Bytes::from(format!(": {}\n\n", text.replace(['\r', '\n'], " ")))
}

pub async fn stream(
    State(state): State<AppState>,
    method: Method,
    version: Version,
    peer: Option<Extension<ConnectInfo<Peer>>>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let after = requested_cursor(query.as_deref(), Some(&headers))?;
    let mut feed = Feed::start(&state, after);
    // The hub writes chunks of a chunked HTTP/1.1 body: not for HEAD (no body), HTTP/1.0 (no chunks) or
    // HTTP/2 (frames of a shared connection), nor over TLS (no tap).
    if method == Method::GET
        && version == Version::HTTP_11
        && let Some(tap) = peer.and_then(|Extension(ConnectInfo(peer))| peer.tap)
    {
        feed.lend_when_caught_up(&state.hub, tap, Kind::Sse);
    }
    let events = Events::new(state, feed);
    let body = Body::from_stream(futures_util::stream::unfold(
        events,
        |mut events| async move {
            let frame = events.next().await?;
            Some((Ok::<_, Infallible>(frame), events))
        },
    ));
    let headers = [
        (
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/event-stream"),
        ),
        (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        // Proxies must not buffer an event stream.
        (
            header::HeaderName::from_static("x-accel-buffering"),
            HeaderValue::from_static("no"),
        ),
    ];
    Ok((headers, body).into_response())
}

/// What woke [`Events::next`].
enum Turn {
    Reports(anyhow::Result<Vec<std::sync::Arc<crate::api::recent::Rendered>>>),
    Duty,
    Stopping,
}

/// One consumer's stream of frames, produced when the response body is polled: the connection's own task
/// moves the feed, so a delivery wakes one task and queues nothing. A consumer that reads slowly is not
/// disconnected: hyper stops polling the body while its write buffer is full, and the feed falls back to
/// the archive as far behind as the consumer is.
struct Events {
    state: AppState,
    feed: Feed,
    duties: Duties,
    stopping: Pin<Box<dyn Future<Output = ()> + Send>>,
    /// Frames ready to go.
    pending: VecDeque<Bytes>,
    /// Whether nothing went out since the last keep-alive was due.
    quiet: bool,
    ended: bool,
}

impl Events {
    fn new(state: AppState, feed: Feed) -> Events {
        let config = &state.live_config;
        let duties = Duties::new(config);
        let mut shutdown = state.shutdown.clone();
        let retry = Bytes::from(format!("retry: {}\n\n", config.retry.as_millis()));
        let ready = json_event("ready", &ready_message(&feed));
        Events {
            stopping: Box::pin(async move {
                let _ = shutdown.changed().await;
            }),
            pending: VecDeque::from([retry, ready]),
            quiet: true,
            ended: false,
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
                return self.end(lifetime_reason(self.feed.cursor()));
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
                    return self.end(reason);
                }
                Turn::Duty => {}
                Turn::Stopping => {
                    let reason = format!(
                        "service stopping; resume after report id {}",
                        self.feed.cursor()
                    );
                    return self.end(reason);
                }
            }
        }
    }

    /// The last frame: the reason, as a comment (not an event).
    fn end(&mut self, reason: String) -> Option<Bytes> {
        tracing::debug!(%reason, "closing an SSE stream");
        self.ended = true;
        Some(comment(&reason))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_frame_each_data_line_and_the_id() {
        assert_eq!(
            event("report", Some(7), r#"{"a":1}"#),
            Bytes::from_static(b"event: report\ndata: {\"a\":1}\nid: 7\n\n")
        );
        assert_eq!(
            event("status", None, "one\r\ntwo\nthree\rfour"),
            Bytes::from_static(b"event: status\ndata: one\ndata: two\ndata: three\ndata: four\n\n")
        );
        assert_eq!(comment("a\nb"), Bytes::from_static(b": a b\n\n"));
    }
}
