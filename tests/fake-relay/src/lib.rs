//! A fake Wolfx EEW relay speaking the real protocol over a real socket (see `upstream/wolfx.md`): the paths
//! `/cenc_eew`, `/sc_eew`, `/fj_eew`, `/cq_eew` and `/all_eew`; a heartbeat on connect and on a period;
//! `ping` → `pong`; `query_*` → the channel's latest report, byte for byte (and on `/all_eew`, `query_jmaeqlist`
//! → JMA's earthquake list when one is set); pushes to the channel's socket and
//! every `/all_eew` socket; and faults on demand (refused upgrades, abrupt close, silence).

use futures_util::{SinkExt, StreamExt};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Mutex, mpsc, watch};
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::{Message, http};

use wolfx_core::CHANNELS;

/// The relay's all-channel socket.
pub const REDUNDANT_PATH: &str = "/all_eew";
/// The command that asks for JMA's earthquake list on `/all_eew`; answered with what [`FakeRelay::set_latest`]
/// set for it.
pub const JMA_LIST_QUERY: &str = "query_jmaeqlist";

/// The upstream paths a server archiving the spec's channels holds open: each channel's own, then `/all_eew`.
pub fn channel_paths() -> Vec<&'static str> {
    CHANNELS
        .iter()
        .map(|c| c.upstream_path)
        .chain([REDUNDANT_PATH])
        .collect()
}

/// The socket path of a channel's `type` tag (`sc_eew` → `/sc_eew`).
pub fn channel_path(type_tag: &str) -> Option<&'static str> {
    CHANNELS
        .iter()
        .find(|c| c.type_tag == type_tag)
        .map(|c| c.upstream_path)
}

/// The query command of a channel's `type` tag (`sc_eew` → `query_sceew`).
pub fn query_command(type_tag: &str) -> Option<&'static str> {
    CHANNELS
        .iter()
        .find(|c| c.type_tag == type_tag)
        .map(|c| c.query_command)
}

/// The five paths of the spec's channels, and any further `/<agency>_eew` channel (the real relay carries
/// more agencies than the service archives by default).
fn known_path(path: &str) -> bool {
    path == REDUNDANT_PATH
        || CHANNELS.iter().any(|c| c.upstream_path == path)
        || path
            .strip_prefix('/')
            .and_then(|p| p.strip_suffix("_eew"))
            .is_some_and(|name| !name.is_empty() && name.bytes().all(|b| b.is_ascii_lowercase()))
}

fn now_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0)
}

/// How the relay behaves.
#[derive(Debug, Clone)]
pub struct RelayConfig {
    /// Period of heartbeats after the first; `None`: never.
    pub heartbeat_every: Option<Duration>,
    /// Send a heartbeat right after a client connects.
    pub heartbeat_on_connect: bool,
    /// WebSocket protocol pings (not messages) this often, also while silent: a relay that keeps the socket
    /// alive and says nothing. `None`: never.
    pub protocol_pings_every: Option<Duration>,
}

impl Default for RelayConfig {
    fn default() -> Self {
        RelayConfig {
            heartbeat_every: Some(Duration::from_secs(60)),
            heartbeat_on_connect: true,
            protocol_pings_every: None,
        }
    }
}

enum Out {
    Frame(Message),
    Drop,
}

struct Client {
    path: String,
    out: mpsc::UnboundedSender<Out>,
}

#[derive(Default)]
struct Shared {
    clients: Mutex<HashMap<u64, Client>>,
    latest: Mutex<HashMap<String, Vec<u8>>>,
    refuse: Mutex<Option<u16>>,
    received: Mutex<Vec<(String, String)>>,
    accepted: Mutex<HashMap<String, usize>>,
    silent: AtomicBool,
    next_id: AtomicU64,
}

/// A running relay on a loopback port. Dropping it stops it.
pub struct FakeRelay {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
}

impl FakeRelay {
    /// Starts on `127.0.0.1` with a free port.
    pub async fn start(config: RelayConfig) -> anyhow::Result<FakeRelay> {
        FakeRelay::start_on(SocketAddr::from(([127, 0, 0, 1], 0)), config).await
    }

    pub async fn start_on(addr: SocketAddr, config: RelayConfig) -> anyhow::Result<FakeRelay> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared::default());
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(accept_loop(listener, shared.clone(), config, stopped));
        Ok(FakeRelay {
            addr,
            shared,
            stop,
            task: Some(task),
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `ws://127.0.0.1:PORT`, without a trailing slash.
    pub fn url(&self) -> String {
        format!("ws://{}", self.addr)
    }

    /// Sends exactly `bytes` to every client of the channel of `type_tag` and of `/all_eew`. Returns the number
    /// of sockets written to.
    pub async fn push(&self, type_tag: &str, bytes: &[u8]) -> usize {
        let channel = channel_path(type_tag)
            .map(str::to_string)
            .unwrap_or_else(|| format!("/{type_tag}"));
        self.send_where(bytes, |path| path == channel || path == REDUNDANT_PATH)
            .await
    }

    /// Sends exactly `bytes` to the clients of one path only.
    pub async fn push_to(&self, path: &str, bytes: &[u8]) -> usize {
        self.send_where(bytes, |p| p == path).await
    }

    /// Sends `bytes` to the clients of one path as a text frame even when they are not UTF-8 (a relay that
    /// breaks the protocol that way).
    pub async fn push_text_to(&self, path: &str, bytes: &[u8]) -> usize {
        use tokio_tungstenite::tungstenite::protocol::frame::Frame;
        use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode};
        let clients = self.shared.clients.lock().await;
        clients
            .values()
            .filter(|c| c.path == path)
            .filter(|c| {
                let frame = Frame::message(bytes.to_vec(), OpCode::Data(Data::Text), true);
                c.out.send(Out::Frame(Message::Frame(frame))).is_ok()
            })
            .count()
    }

    async fn send_where(&self, bytes: &[u8], matches: impl Fn(&str) -> bool) -> usize {
        if self.shared.silent.load(Ordering::SeqCst) {
            return 0;
        }
        let clients = self.shared.clients.lock().await;
        clients
            .values()
            .filter(|c| matches(&c.path))
            .filter(|c| c.out.send(Out::Frame(frame_of(bytes))).is_ok())
            .count()
    }

    /// What `query_command` is answered with (the channel's latest report); without one, no answer.
    pub async fn set_latest(&self, query_command: &str, bytes: &[u8]) {
        self.shared
            .latest
            .lock()
            .await
            .insert(query_command.to_string(), bytes.to_vec());
    }

    /// `Some(503)` or `Some(429)`: answer every upgrade with that status. `None`: accept again.
    pub async fn refuse_upgrades(&self, status: Option<u16>) {
        *self.shared.refuse.lock().await = status;
    }

    /// Drops every client connection without a close frame.
    pub async fn close_all(&self) {
        for client in self.shared.clients.lock().await.values() {
            let _ = client.out.send(Out::Drop);
        }
    }

    /// While silent the relay sends nothing at all (heartbeats, pongs, replies, pushes), sockets stay open.
    pub async fn set_silent(&self, silent: bool) {
        self.shared.silent.store(silent, Ordering::SeqCst);
    }

    /// Clients connected on `path` now.
    pub async fn connected(&self, path: &str) -> usize {
        self.shared
            .clients
            .lock()
            .await
            .values()
            .filter(|c| c.path == path)
            .count()
    }

    /// Waits until at least `n` clients are connected on `path`.
    pub async fn wait_connected(&self, path: &str, n: usize, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        while tokio::time::Instant::now() < deadline {
            if self.connected(path).await >= n {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        false
    }

    /// Every text message clients sent, as (path, text), in arrival order.
    pub async fn received(&self) -> Vec<(String, String)> {
        self.shared.received.lock().await.clone()
    }

    /// Upgrades accepted on `path` since the start.
    pub async fn connection_count(&self, path: &str) -> usize {
        self.shared
            .accepted
            .lock()
            .await
            .get(path)
            .copied()
            .unwrap_or(0)
    }

    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        self.close_all().await;
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for FakeRelay {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

fn frame_of(bytes: &[u8]) -> Message {
    match std::str::from_utf8(bytes) {
        Ok(text) => Message::text(text.to_string()),
        Err(_) => Message::binary(bytes.to_vec()),
    }
}

fn heartbeat(id: u64) -> Message {
    Message::text(format!(
        r#"{{"type":"heartbeat","ver":22,"id":"{id}","timestamp":{}}}"#,
        now_ms()
    ))
}

async fn accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    config: RelayConfig,
    mut stopped: watch::Receiver<bool>,
) {
    let mut clients = Vec::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                if let Ok((stream, _)) = accepted {
                    // A relay pushes one small frame at a time to a client that rarely answers: with Nagle's
                    // algorithm a frame could wait for the client's delayed ACK of the one before.
                    let _ = stream.set_nodelay(true);
                    clients.push(tokio::spawn(serve_client(stream, shared.clone(), config.clone(), stopped.clone())));
                }
            }
            _ = stopped.changed() => break,
        }
    }
    for client in clients {
        client.abort();
    }
}

async fn serve_client(
    stream: TcpStream,
    shared: Arc<Shared>,
    config: RelayConfig,
    mut stopped: watch::Receiver<bool>,
) {
    let refuse = *shared.refuse.lock().await;
    let mut path = String::new();
    // The error type is tungstenite's (an HTTP response); its size is not ours to choose.
    #[allow(clippy::result_large_err)]
    let callback = |request: &Request, response: Response| -> Result<Response, ErrorResponse> {
        path = request.uri().path().to_string();
        let status = match refuse {
            Some(status) => status,
            None if !known_path(&path) => 404,
            None => return Ok(response),
        };
        let mut refusal = ErrorResponse::new(Some(format!("refused with {status}")));
        *refusal.status_mut() =
            http::StatusCode::from_u16(status).unwrap_or(http::StatusCode::SERVICE_UNAVAILABLE);
        Err(refusal)
    };
    let Ok(mut socket) = tokio_tungstenite::accept_hdr_async(stream, callback).await else {
        return;
    };

    let id = shared.next_id.fetch_add(1, Ordering::SeqCst);
    let (out, mut outgoing) = mpsc::unbounded_channel();
    shared.clients.lock().await.insert(
        id,
        Client {
            path: path.clone(),
            out: out.clone(),
        },
    );
    *shared
        .accepted
        .lock()
        .await
        .entry(path.clone())
        .or_default() += 1;
    let silent = || shared.silent.load(Ordering::SeqCst);

    if config.heartbeat_on_connect && !silent() {
        let _ = out.send(Out::Frame(heartbeat(id)));
    }
    let period = config
        .heartbeat_every
        .unwrap_or(Duration::from_secs(86_400 * 365));
    let mut beat = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    let ping_period = config
        .protocol_pings_every
        .unwrap_or(Duration::from_secs(86_400 * 365));
    let mut protocol_ping =
        tokio::time::interval_at(tokio::time::Instant::now() + ping_period, ping_period);
    loop {
        tokio::select! {
            incoming = socket.next() => match incoming {
                Some(Ok(Message::Text(text))) => {
                    let text = text.to_string();
                    shared.received.lock().await.push((path.clone(), text.clone()));
                    if silent() {
                        continue;
                    }
                    if text == "ping" {
                        let _ = out.send(Out::Frame(Message::text(format!(r#"{{"type":"pong","timestamp":{}}}"#, now_ms()))));
                    } else if let Some(channel) = CHANNELS.iter().find(|c| c.query_command == text)
                        && (path == REDUNDANT_PATH || path == channel.upstream_path)
                        && let Some(latest) = shared.latest.lock().await.get(&text)
                    {
                        let _ = out.send(Out::Frame(frame_of(latest)));
                    } else if text == JMA_LIST_QUERY
                        && path == REDUNDANT_PATH
                        && let Some(list) = shared.latest.lock().await.get(&text)
                    {
                        // JMA's earthquake list, answered on `/all_eew` only (upstream/wolfx.md).
                        let _ = out.send(Out::Frame(frame_of(list)));
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(_)) | None => break,
            },
            next = outgoing.recv() => match next {
                Some(Out::Frame(message)) => {
                    if socket.send(message).await.is_err() {
                        break;
                    }
                }
                Some(Out::Drop) | None => break,
            },
            _ = beat.tick(), if config.heartbeat_every.is_some() => {
                if !silent() && socket.send(heartbeat(id)).await.is_err() {
                    break;
                }
            }
            _ = protocol_ping.tick(), if config.protocol_pings_every.is_some() => {
                if socket.send(Message::Ping(Vec::new().into())).await.is_err() {
                    break;
                }
            }
            _ = stopped.changed() => break,
        }
    }
    shared.clients.lock().await.remove(&id);
    // Dropping the socket closes the TCP connection without a WebSocket close frame.
}
