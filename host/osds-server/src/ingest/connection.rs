//! One upstream WebSocket held open for as long as the service runs: reconnect with capped back-off, `ping`
//! on every check interval, reconnect after the silence timeout, `query_*` commands after each connect.

use super::UpstreamConfig;
use super::board::UpstreamBoard;
use super::pipeline;
use super::socket::{self, Socket};
use futures_util::{SinkExt, StreamExt};
use osds_runtime::SharedDecoders;
use osds_runtime::units;
use osds_store::{Code, EndReason, Marker, OutageReason, SocketRole, WriterTask};
use osds_time::now_rfc3339;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::{Instant, MissedTickBehavior, interval_at, sleep, timeout};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::error::{CapacityError, Error};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const FIRST_RETRY: Duration = Duration::from_secs(1);

pub(super) struct Context {
    pub config: UpstreamConfig,
    pub path: String,
    /// The channel's own socket (else the redundant `/all_eew`).
    pub primary: bool,
    pub decoders: SharedDecoders,
    pub writer: WriterTask,
    pub board: Arc<UpstreamBoard>,
    pub shutdown: watch::Receiver<bool>,
    /// The last connection ended on a frame over the size limit: the next one sends no queries (their reply
    /// may be that frame again).
    pub refused_last: bool,
}

impl Context {
    fn role(&self) -> SocketRole {
        if self.primary {
            SocketRole::Primary
        } else {
            SocketRole::Redundant
        }
    }

    fn url(&self) -> String {
        format!("{}{}", self.config.url.trim_end_matches('/'), self.path)
    }

    fn stopping(&self) -> bool {
        *self.shutdown.borrow()
    }
}

pub(super) async fn run(mut cx: Context) {
    let mut backoff = FIRST_RETRY;
    while !cx.stopping() {
        let url = cx.url();
        let limits = WebSocketConfig::default()
            .max_frame_size(Some(cx.config.max_frame_bytes))
            .max_message_size(Some(cx.config.max_frame_bytes));
        match timeout(CONNECT_TIMEOUT, socket::connect(&url, limits)).await {
            Ok(Ok(socket)) => {
                backoff = FIRST_RETRY;
                let session_id = cx.writer.open_session(&cx.path, cx.role(), &url);
                cx.writer.session_connected(session_id);
                tracing::info!(path = %cx.path, session_id, "upstream connected");
                transition(&cx, true, Some(session_id), None);
                let ended = pump(&mut cx, socket, session_id).await;
                if cx.stopping() {
                    tracing::info!(path = %cx.path, session_id, "upstream connection closed");
                } else {
                    tracing::warn!(path = %cx.path, session_id, reason = ended.code.as_str(), detail = %ended.detail, "upstream connection ended");
                }
                cx.writer.session_ended(session_id, ended.code);
                transition(&cx, false, None, Some(ended.code));
            }
            Ok(Err(e)) => {
                let code = match e {
                    Error::Http(_) => EndReason::UpgradeRefused,
                    _ => EndReason::ConnectFailed,
                };
                tracing::warn!(path = %cx.path, reason = code.as_str(), detail = %e, retry_in = ?backoff, "upstream unavailable");
                transition(&cx, false, None, Some(code));
            }
            Err(_) => {
                tracing::warn!(path = %cx.path, reason = EndReason::ConnectTimeout.as_str(), retry_in = ?backoff, "upstream connect timed out");
                transition(&cx, false, None, Some(EndReason::ConnectTimeout));
            }
        }
        if cx.stopping() {
            break;
        }
        tokio::select! {
            _ = sleep(backoff) => {}
            _ = cx.shutdown.changed() => {}
        }
        backoff = (backoff * 2).min(cx.config.backoff_cap);
    }
}

/// Records a connect or disconnect (with its reason code, see [`Ended`]), and begins or ends the outages it
/// causes.
fn transition(cx: &Context, connected: bool, session_id: Option<i64>, error: Option<EndReason>) {
    for (source, up) in cx
        .board
        .set_connected(&cx.path, connected, session_id, error)
    {
        if up {
            tracing::info!(%source, "channel back: outage ends");
            cx.writer.outage_end(&source);
        } else {
            if cx.stopping() {
                tracing::info!(%source, "channel closed: the service is stopping");
            } else {
                tracing::warn!(%source, "channel out: neither its own socket nor /all_eew is connected");
            }
            cx.writer.outage_begin(
                &source,
                OutageReason::SocketLost {
                    path: cx.path.clone(),
                    reason: error,
                },
            );
        }
    }
}

/// Why a connection ended: a stable code that `/status` shows (`lastError`, a session's `endReason`, an
/// outage's reason), and the library's own words, which only the log gets.
struct Ended {
    code: EndReason,
    detail: String,
}

impl Ended {
    fn new(code: EndReason, detail: impl std::fmt::Display) -> Ended {
        Ended {
            code,
            detail: detail.to_string(),
        }
    }
}

/// JMA's earthquake list is asked for again this often on `/all_eew`.
const LIST_QUERY_EVERY: Duration = Duration::from_secs(600);

fn list_query_item() -> (String, String) {
    (
        wolfx_core::jma::LIST_QUERY.to_string(),
        wolfx_core::jma::LIST_TAG.to_string(),
    )
}

/// Reads frames until the connection fails, falls silent or the service stops. Returns why it ended.
async fn pump(cx: &mut Context, mut socket: Socket, session_id: i64) -> Ended {
    let config = cx.config.clone();
    let mut last_message = Instant::now();
    let mut check = interval_at(
        Instant::now() + config.check_interval,
        config.check_interval,
    );
    check.set_missed_tick_behavior(MissedTickBehavior::Delay);
    // Queries go out one at a time, `query_spacing` apart, starting right after connect.
    let mut queries: VecDeque<(String, String)> = if std::mem::take(&mut cx.refused_last) {
        tracing::warn!(path = %cx.path, "no queries on this connection: the last one ended on a refused frame");
        VecDeque::new()
    } else {
        cx.board
            .channels()
            .iter()
            .filter(|c| !cx.primary || c.path == cx.path)
            .map(|c| (c.query_command.clone(), c.type_tag.clone()))
            .collect()
    };
    // On `/all_eew`, JMA's earthquake list too, and again every few minutes: it scores the self-sensing
    // detector (`hyp/scorecard.rs`) and is kept like any frame of a channel not archived.
    let mut list_query = interval_at(Instant::now() + LIST_QUERY_EVERY, LIST_QUERY_EVERY);
    list_query.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let asks_for_list = !cx.primary && !queries.is_empty();
    if asks_for_list {
        queries.push_back(list_query_item());
    }
    let mut next_query = Instant::now();
    // The frames archived on this session so far (each frame's number: see `Incoming::reception`).
    let mut reception = 0i64;
    let mut queried_at: HashMap<String, Instant> = HashMap::new();
    let own_type = cx
        .board
        .channel_for_path(&cx.path)
        .filter(|_| cx.primary)
        .map(|c| c.type_tag.clone());

    loop {
        let query_due = !queries.is_empty();
        tokio::select! {
            message = socket.next() => {
                let bytes = match message {
                    // (Text frames arrive as binary: see `socket.rs`.)
                    Some(Ok(Message::Text(text))) => text.as_bytes().to_vec(),
                    Some(Ok(Message::Binary(bytes))) => bytes.to_vec(),
                    // Protocol pings keep TCP alive (tungstenite answers them); they are not messages, so a
                    // relay that only pings is reconnected after the silence timeout like one that is silent.
                    Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => continue,
                    Some(Ok(Message::Close(frame))) => {
                        return Ended::new(EndReason::ClosedByUpstream, frame.map(|f| format!("{} {}", f.code, f.reason)).unwrap_or_default());
                    }
                    Some(Err(Error::Capacity(CapacityError::MessageTooLong { size, max_size }))) => {
                        cx.board.refused(&cx.path);
                        cx.writer.refused_frame(session_id, size as u64, max_size as u64);
                        cx.refused_last = true;
                        tracing::error!(path = %cx.path, size, max_size, "refused a frame over the size limit (--upstream-max-frame-mib)");
                        return Ended::new(EndReason::FrameTooLarge, format!("{size} bytes, the limit is {max_size}"));
                    }
                    Some(Err(e)) => return Ended::new(EndReason::ConnectionLost, e),
                    None => return Ended::new(EndReason::ConnectionLost, "the stream ended"),
                };
                last_message = Instant::now();
                let received_at = now_rfc3339();
                let units = units::split(&bytes);
                if units::is_control_frame(&units) {
                    cx.board.message(&cx.path);
                    let counter = if units[0].type_tag.as_deref() == Some("pong") { "pongs" } else { "heartbeats" };
                    cx.writer.count(counter, 1);
                    continue;
                }
                let within_query_window = |tag: &Option<String>| {
                    tag.as_ref().or(own_type.as_ref()).and_then(|t| queried_at.get(t)).is_some_and(|at| at.elapsed() <= config.query_window)
                };
                let marker = if units.iter().any(|u| within_query_window(&u.type_tag)) {
                    Marker::QueryOrPush
                } else if cx.primary {
                    Marker::PrimaryPush
                } else {
                    Marker::RedundantPush
                };
                reception += 1;
                let received = pipeline::Received { session_id, reception, received_at: received_at.clone(), marker };
                let incoming = pipeline::prepare(&cx.decoders, bytes, units, own_type.as_deref(), received);
                cx.board.received(&cx.path, incoming.source(), &received_at);
                metrics::counter!(
                    "osds_upstream_frames_received_total",
                    "socket" => cx.path.clone(),
                    "source" => incoming.source().unwrap_or("unrouted").to_owned()
                )
                .increment(1);
                cx.writer.ingest(incoming);
                // Time spent decoding a big frame is not silence: the relay's next message may be waiting.
                last_message = Instant::now();
            }
            _ = check.tick() => {
                if last_message.elapsed() >= config.silence_timeout {
                    return Ended::new(EndReason::Silence, format!("no message for {} s", config.silence_timeout.as_secs_f64()));
                }
                if let Err(e) = socket.send(Message::text("ping")).await {
                    return Ended::new(EndReason::SendFailed, format!("ping: {e}"));
                }
            }
            _ = tokio::time::sleep_until(next_query), if query_due => {
                if let Some((command, tag)) = queries.pop_front() {
                    if let Err(e) = socket.send(Message::text(command.clone())).await {
                        return Ended::new(EndReason::SendFailed, format!("{command}: {e}"));
                    }
                    queried_at.insert(tag, Instant::now());
                    next_query = Instant::now() + config.query_spacing;
                }
            }
            _ = list_query.tick(), if asks_for_list => queries.push_back(list_query_item()),
            _ = cx.shutdown.changed() => {
                let _ = socket.close(None).await;
                return Ended::new(EndReason::ServiceStopping, "");
            }
        }
    }
}
