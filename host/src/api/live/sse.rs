//! `/stream`: live delivery as Server-Sent Events. A producer task per consumer moves the [`Feed`] and queues
//! framed events; the response body is that queue. A report's event is framed once for every consumer
//! ([`super::super::recent::Rendered`]), so a delivery hands over shared bytes.

use super::{
    AppState, Duties, Feed, Stop, lifetime_reason, ready_message, requested_cursor,
    slow_consumer_reason, status_message, within,
};
use crate::api::error::ApiError;
use axum::body::Body;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use bytes::{BufMut, Bytes, BytesMut};
use serde_json::Value;
use std::convert::Infallible;
use tokio::sync::mpsc;
use tokio::time::{Instant, sleep_until};

/// Events queued for one consumer before its producer waits on it.
const QUEUE: usize = 64;
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
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let after = requested_cursor(query.as_deref(), Some(&headers))?;
    let feed = Feed::start(&state, after);
    let (events, queue) = mpsc::channel::<Bytes>(QUEUE);
    tokio::spawn(produce(state, feed, events));
    let body = Body::from_stream(futures_util::stream::unfold(
        queue,
        |mut queue| async move {
            queue
                .recv()
                .await
                .map(|frame| (Ok::<_, Infallible>(frame), queue))
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

async fn produce(state: AppState, mut feed: Feed, events: mpsc::Sender<Bytes>) {
    let config = state.live_config.clone();
    let patience = config.slow_consumer;
    let mut shutdown = state.shutdown.clone();
    let retry = Bytes::from(format!("retry: {}\n\n", config.retry.as_millis()));
    let ready = json_event("ready", &ready_message(&feed));
    for first in [retry, ready] {
        if within(patience, events.send(first)).await.is_err() {
            return;
        }
    }
    let mut duties = Duties::new(&config);
    // Created once, not per turn of the loop: each turn would register anew with the shared shutdown signal
    // (one lock for all subscribers) and with the queue.
    let wake = sleep_until(duties.next());
    let stopping = shutdown.changed();
    let gone = events.closed();
    tokio::pin!(wake, stopping, gone);
    let mut sent_up_to = feed.cursor();
    // Whether anything went out since the last keep-alive was due: one is sent only on an idle stream.
    let mut quiet = true;
    let mut now = Instant::now();
    let stopped = loop {
        // Looked at before waiting, so a feed that is ready on every turn cannot starve the duties.
        if now >= duties.next() {
            let due = duties.due(now);
            if due.lifetime {
                break Ok(lifetime_reason(sent_up_to));
            }
            if due.status {
                let status = json_event("status", &status_message(&state));
                if let Err(stop) = within(patience, events.send(status)).await {
                    break Err(stop);
                }
                quiet = false;
            }
            if due.keepalive {
                if quiet
                    && let Err(stop) =
                        within(patience, events.send(Bytes::from_static(KEEPALIVE))).await
                {
                    break Err(stop);
                }
                quiet = true;
            }
            wake.as_mut().reset(duties.next());
        }
        // Biased: a woken consumer usually has a report, and then nothing else is polled.
        tokio::select! {
            biased;
            batch = feed.next() => {
                let reports = match batch {
                    Ok(reports) => reports,
                    Err(e) => {
                        tracing::warn!(error = %format!("{e:#}"), "live feed cannot read the archive; closing the stream");
                        break Ok(format!("archive unavailable; resume after report id {sent_up_to}"));
                    }
                };
                let mut outcome = Ok(());
                for report in reports {
                    outcome = within(patience, events.send(report.sse_event.clone())).await;
                    if outcome.is_err() {
                        break;
                    }
                    sent_up_to = report.id;
                    quiet = false;
                }
                if let Err(stop) = outcome {
                    break Err(stop);
                }
                now = Instant::now();
            }
            _ = &mut wake => now = Instant::now().max(wake.deadline()),
            _ = &mut stopping => break Ok(format!("service stopping; resume after report id {sent_up_to}")),
            _ = &mut gone => break Err(Stop::Gone),
        }
    };
    let farewell = match stopped {
        Ok(reason) => reason,
        Err(Stop::Slow) => slow_consumer_reason(sent_up_to),
        Err(Stop::Gone) => return,
    };
    tracing::debug!(reason = %farewell, "closing an SSE stream");
    // The reason goes out as a comment (not an event) only if the consumer has room for it.
    let _ = events.try_send(comment(&farewell));
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
