//! Per-client limits: who a client is ([`ClientKey`]: an address, an IPv6 network, the forwarded address
//! behind a trusted proxy), its rate (a keyed GCRA limiter whose cost does not grow with the clients) and its
//! requests in progress, with the RateLimit headers on every answer and a 429 over either.

use super::Gateway;
use crate::error::{ApiError, ErrorCode};
use crate::net::listener::Peer;
use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, Request, State};
use axum::http::StatusCode;
use axum::http::header::{HeaderMap, HeaderName, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::collections::HashMap;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

pub const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");

pub const RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");

/// A client as the limits count it: an IPv4 address, or the first `ipv6_prefix_len` bits of an IPv6 one (a
/// host is usually given a /64 and could rotate addresses within it). An IPv4-mapped IPv6 address is IPv4.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClientKey(IpAddr);

impl ClientKey {
    pub fn new(ip: IpAddr, ipv6_prefix_len: u8) -> ClientKey {
        match ip.to_canonical() {
            IpAddr::V6(v6) => {
                let bits = u32::from(ipv6_prefix_len.min(128));
                let mask = u128::MAX.checked_shl(128 - bits).unwrap_or(0);
                ClientKey(IpAddr::V6((u128::from(v6) & mask).into()))
            }
            v4 => ClientKey(v4),
        }
    }
}

impl std::fmt::Display for ClientKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            IpAddr::V6(_) => write!(f, "{} (its network)", self.0),
            IpAddr::V4(_) => self.0.fmt(f),
        }
    }
}

/// The IPv6 prefix a client is counted by when none is configured.
pub const DEFAULT_IPV6_PREFIX_LEN: u8 = 64;

pub(super) type Limiter = governor::RateLimiter<
    ClientKey,
    governor::state::keyed::DefaultKeyedStateStore<ClientKey>,
    governor::clock::DefaultClock,
    governor::middleware::StateInformationMiddleware,
>;

/// One request in progress for a client; released when the response (or the WebSocket it became) ends.
pub struct ConnectionSlot {
    gateway: Arc<Gateway>,
    ip: ClientKey,
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        let mut active = self.gateway.lock_active();
        if let Some(count) = active.get_mut(&self.ip) {
            *count -= 1;
            if *count == 0 {
                active.remove(&self.ip);
            }
        }
    }
}

/// Carried in the request's extensions so a WebSocket handler can keep the slot for the socket's lifetime.
#[derive(Clone)]
pub struct HeldSlot(pub Arc<ConnectionSlot>);

/// The outcome of taking a token: remaining whole tokens and seconds until the bucket is full, or the seconds
/// to wait for the next token.
pub(super) enum Take {
    Allowed { remaining: u64, full_in: u64 },
    Limited { retry_after: u64 },
}

impl Gateway {
    pub(super) fn lock_active(&self) -> std::sync::MutexGuard<'_, HashMap<ClientKey, usize>> {
        self.active.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The client: the peer, or the forwarded address when the peer is a trusted proxy; an IPv6 one by its
    /// network.
    pub(super) fn client(&self, peer: IpAddr, headers: &HeaderMap) -> ClientKey {
        ClientKey::new(self.client_ip(peer, headers), self.config.ipv6_prefix_len)
    }

    /// The client's address: the peer, or the forwarded address when the peer is a trusted proxy.
    pub(super) fn client_ip(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        if !self.config.trusted_proxies.contains(&peer) {
            return peer;
        }
        let forwarded: Vec<IpAddr> = headers
            .get_all("x-forwarded-for")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .filter_map(|part| part.trim().parse().ok())
            .collect();
        // The nearest address that is not one of our proxies is the client.
        forwarded
            .into_iter()
            .rev()
            .find(|ip| !self.config.trusted_proxies.contains(ip))
            .unwrap_or(peer)
    }

    pub(super) fn take_token(&self, client: ClientKey) -> Take {
        let rate = self.config.rate_per_second;
        match self.rates.check_key(&client) {
            Ok(state) => {
                let remaining = u64::from(state.remaining_burst_capacity());
                Take::Allowed {
                    remaining,
                    full_in: ((self.config.burst - remaining as f64) / rate)
                        .ceil()
                        .max(0.0) as u64,
                }
            }
            Err(not_until) => {
                use governor::clock::Clock;
                let wait = not_until.wait_time_from(self.rates.clock().now());
                Take::Limited {
                    retry_after: wait.as_secs_f64().ceil().max(1.0) as u64,
                }
            }
        }
    }

    pub(super) fn take_slot(self: &Arc<Self>, ip: ClientKey) -> Option<ConnectionSlot> {
        let mut active = self.lock_active();
        let count = active.entry(ip).or_insert(0);
        if *count >= self.config.max_connections {
            return None;
        }
        *count += 1;
        Some(ConnectionSlot {
            gateway: self.clone(),
            ip,
        })
    }

    pub(super) fn policy_header(&self) -> HeaderValue {
        let window = (self.config.burst / self.config.rate_per_second).ceil() as u64;
        HeaderValue::from_str(&format!(
            "\"per-client\";q={};w={window}",
            self.config.burst as u64
        ))
        .unwrap_or_else(|_| HeaderValue::from_static("\"per-client\""))
    }
}

/// A 429, counted for the operator's metrics by the limit (`rate` or `concurrent`) it enforces.
pub(super) fn too_many(
    limit: &'static str,
    code: ErrorCode,
    message: String,
    retry_after: u64,
) -> Response {
    metrics::counter!("osds_http_rate_limited_total", "limit" => limit).increment(1);
    ApiError {
        status: StatusCode::TOO_MANY_REQUESTS,
        code,
        message,
        retry_after: Some(retry_after),
    }
    .into_response()
}

/// Rate and connection limits per client address, with the RateLimit headers on every response.
pub async fn limits(
    State(gateway): State<Arc<Gateway>>,
    mut request: Request,
    next: Next,
) -> Response {
    let peer = request
        .extensions()
        .get::<ConnectInfo<Peer>>()
        .map(|c| c.0.addr.ip())
        .unwrap_or(IpAddr::from([127, 0, 0, 1]));
    let ip = gateway.client(peer, request.headers());
    let policy = gateway.policy_header();
    let (remaining, full_in) = match gateway.take_token(ip) {
        Take::Allowed { remaining, full_in } => (remaining, full_in),
        Take::Limited { retry_after } => {
            let mut response = too_many(
                "rate",
                ErrorCode::RateLimited,
                format!(
                    "more than {} requests per second on average (burst {}) from {ip}; retry after backing off",
                    gateway.config.rate_per_second, gateway.config.burst
                ),
                retry_after,
            );
            let headers = response.headers_mut();
            headers.insert(RATELIMIT_POLICY, policy);
            if let Ok(value) = HeaderValue::from_str(&format!("\"per-client\";r=0;t={retry_after}"))
            {
                headers.insert(RATELIMIT, value);
            }
            return response;
        }
    };
    let Some(slot) = gateway.take_slot(ip) else {
        let mut response = too_many(
            "concurrent",
            ErrorCode::TooManyConnections,
            format!(
                "more than {} requests or live streams at once from {ip}; close one and retry after backing off",
                gateway.config.max_connections
            ),
            1,
        );
        response.headers_mut().insert(RATELIMIT_POLICY, policy);
        return response;
    };
    let slot = Arc::new(slot);
    request.extensions_mut().insert(HeldSlot(slot.clone()));
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    headers.insert(RATELIMIT_POLICY, policy);
    if let Ok(value) = HeaderValue::from_str(&format!("\"per-client\";r={remaining};t={full_in}")) {
        headers.insert(RATELIMIT, value);
    }
    response.map(|body| {
        Body::new(SlotBody {
            inner: body,
            _slot: slot,
        })
    })
}

/// A response body that keeps its connection slot until the body is finished or dropped.
struct SlotBody {
    inner: Body,
    _slot: Arc<ConnectionSlot>,
}

impl http_body::Body for SlotBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.get_mut().inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}
