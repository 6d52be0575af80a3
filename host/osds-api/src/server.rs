//! The HTTP server's connection loop, in place of `axum::serve` (which offers neither a header-read timeout
//! nor a limit per address): it accepts connections from a [`Listener`], refuses an address's connection over
//! its cap of open ones, serves each with hyper, closes a connection whose next request's headers have not
//! arrived within the header-read timeout (so an idle connection, one without a request in progress, lasts that
//! long), and after the stop signal lets the connections finish what they are doing.

use crate::error::ErrorCode;
use crate::gateway::{ClientKey, TrustedProxies};
use crate::net::listener::Listener;
use crate::net::parse_errors::ErrorBodies;
use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// What the server allows a connection.
#[derive(Debug, Clone)]
pub struct ConnectionLimits {
    /// Connections one client address may hold open, idle ones included (a trusted proxy's are not counted).
    pub open_per_client: usize,
    /// A connection whose next request's headers are not complete this long after the server began waiting
    /// for them is closed.
    pub header_read_timeout: Duration,
    /// Peers that forward many clients' requests: their connections are not capped.
    pub trusted_proxies: TrustedProxies,
    /// IPv6 clients are counted by this many leading bits of their address (as the gateway counts them).
    pub ipv6_prefix_len: u8,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            open_per_client: 64,
            header_read_timeout: Duration::from_secs(30),
            trusted_proxies: TrustedProxies::default(),
            ipv6_prefix_len: crate::gateway::DEFAULT_IPV6_PREFIX_LEN,
        }
    }
}

/// The open connections of each client address.
struct OpenConnections {
    limits: ConnectionLimits,
    by_address: Mutex<HashMap<ClientKey, usize>>,
}

/// One open connection, counted until it is dropped.
struct Counted {
    open: Arc<OpenConnections>,
    ip: ClientKey,
}

impl OpenConnections {
    fn admit(self: &Arc<Self>, ip: IpAddr) -> Option<Option<Counted>> {
        if self.limits.trusted_proxies.contains(&ip) {
            return Some(None);
        }
        let ip = ClientKey::new(ip, self.limits.ipv6_prefix_len);
        let mut by_address = self
            .by_address
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let open = by_address.entry(ip).or_default();
        if *open >= self.limits.open_per_client {
            return None;
        }
        *open += 1;
        Some(Some(Counted {
            open: self.clone(),
            ip,
        }))
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        let mut by_address = self
            .open
            .by_address
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(open) = by_address.get_mut(&self.ip) {
            *open -= 1;
            if *open == 0 {
                by_address.remove(&self.ip);
            }
        }
    }
}

/// The answer on a connection over its address's cap, before it is closed: the gateway's 429 body.
fn too_many_open() -> Vec<u8> {
    let body = serde_json::json!({
        "error": "too many open connections from this address; close idle ones before opening more",
        "code": ErrorCode::TooManyConnections.as_str(),
    })
    .to_string();
    format!(
        "HTTP/1.1 429 Too Many Requests\r\ncontent-type: application/json\r\nretry-after: 1\r\n\
         x-content-type-options: nosniff\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Serves `app` on `listener`'s connections until `stop` resolves; then accepts no more, asks every open
/// connection to finish (an idle one closes at once, a request in progress completes) and returns when all have.
pub async fn serve<L: Listener>(
    mut listener: L,
    app: Router,
    limits: ConnectionLimits,
    stop: impl Future<Output = ()>,
) {
    let open = Arc::new(OpenConnections {
        limits,
        by_address: Mutex::default(),
    });
    let stopping = CancellationToken::new();
    let connections = TaskTracker::new();
    let mut stop = std::pin::pin!(stop);
    loop {
        let (io, peer) = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut stop => break,
        };
        let Some(counted) = open.admit(peer.addr.ip()) else {
            tracing::debug!(peer = %peer.addr, "too many open connections from this address: refused");
            tokio::spawn(refuse(io));
            continue;
        };
        let service = app.clone();
        let header_read_timeout = open.limits.header_read_timeout;
        let stopping = stopping.clone();
        connections.spawn(async move {
            let _counted = counted;
            let service = TowerToHyperService::new(tower::ServiceExt::map_request(
                service,
                move |mut request: hyper::Request<Incoming>| {
                    request.extensions_mut().insert(ConnectInfo(peer.clone()));
                    request.map(Body::new)
                },
            ));
            // HTTP/1.1 only (TLS offers nothing else either): hyper's HTTP/2-or-1 sniffing would wait for the
            // first bytes without any timeout.
            let connection = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(header_read_timeout)
                .serve_connection(TokioIo::new(ErrorBodies::new(io)), service)
                .with_upgrades();
            let mut connection = std::pin::pin!(connection);
            tokio::select! {
                result = connection.as_mut() => {
                    if let Err(e) = result {
                        tracing::debug!(error = %e, "connection ended with an error");
                    }
                    return;
                }
                () = stopping.cancelled() => {}
            }
            connection.as_mut().graceful_shutdown();
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "connection ended with an error while stopping");
            }
        });
    }
    drop(listener);
    stopping.cancel();
    connections.close();
    connections.wait().await;
}

/// Answers 429 on a connection over its address's cap and closes it.
async fn refuse(mut io: impl AsyncWrite + Unpin) {
    metrics::counter!("osds_http_rate_limited_total", "limit" => "open_connections").increment(1);
    let answer = async {
        io.write_all(&too_many_open()).await?;
        io.shutdown().await
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), answer).await;
}
