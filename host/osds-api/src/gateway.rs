//! The public entrance, built into the service so it holds with or without a reverse proxy: per-client rate and
//! connection limits (429), the retired legacy host (410), read-only methods (405), 503 while stopping or when
//! a request cannot be answered in time, and validators for caching (ETag, 304).

use crate::error::{ApiError, ErrorCode};
use crate::listener::Peer;
use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, Request, State};
use axum::http::header::{self, HeaderMap, HeaderName, HeaderValue};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::watch;

pub const ALLOWED_METHODS: &str = "GET, HEAD, OPTIONS";
pub const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");
pub const RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
/// How often the clients whose rate state is back to full are forgotten.
const PRUNE_EVERY: Duration = Duration::from_secs(60);

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

type Limiter = governor::RateLimiter<
    ClientKey,
    governor::state::keyed::DefaultKeyedStateStore<ClientKey>,
    governor::clock::DefaultClock,
    governor::middleware::StateInformationMiddleware,
>;

/// Limits and addresses of the entrance (the spec's values are the defaults).
#[derive(Debug, Clone)]
pub struct GatewayConfig {
    /// Average requests per second per client address.
    pub rate_per_second: f64,
    /// Requests a client may make at once before the average applies.
    pub burst: f64,
    /// Requests in progress per client address, live streams included.
    pub max_connections: usize,
    /// Peers whose `X-Forwarded-For` names the client.
    pub trusted_proxies: Vec<IpAddr>,
    /// IPv6 clients are counted by this many leading bits of their address (see [`ClientKey`]).
    pub ipv6_prefix_len: u8,
    /// `Host` values of the retired entrance, answered with 410.
    pub legacy_hosts: Vec<String>,
    /// The current base URL, named in the 410 body.
    pub public_base_url: String,
    /// A request whose response has not started by then is answered with 503.
    pub request_timeout: Duration,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        GatewayConfig {
            rate_per_second: 10.0,
            burst: 80.0,
            max_connections: 20,
            trusted_proxies: Vec::new(),
            ipv6_prefix_len: DEFAULT_IPV6_PREFIX_LEN,
            legacy_hosts: Vec::new(),
            public_base_url: "/api/v1".into(),
            request_timeout: Duration::from_secs(30),
        }
    }
}

/// Shared state of the entrance.
pub struct Gateway {
    config: GatewayConfig,
    /// Each client's rate state: a request costs the same however many clients there are.
    rates: Limiter,
    active: Mutex<HashMap<ClientKey, usize>>,
    shutdown: watch::Receiver<bool>,
}

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
enum Take {
    Allowed { remaining: u64, full_in: u64 },
    Limited { retry_after: u64 },
}

impl Gateway {
    /// The entrance with `config`'s limits (rate and burst must be positive; the service checks its flags).
    /// Inside a Tokio runtime, a task forgets idle clients every minute for as long as the gateway lives.
    pub fn new(config: GatewayConfig, shutdown: watch::Receiver<bool>) -> Arc<Gateway> {
        let period = Duration::from_secs_f64(1.0 / config.rate_per_second.max(1e-9));
        let burst =
            std::num::NonZeroU32::new(config.burst as u32).unwrap_or(std::num::NonZeroU32::MIN);
        let quota = governor::Quota::with_period(period)
            .unwrap_or_else(|| governor::Quota::per_second(std::num::NonZeroU32::MIN))
            .allow_burst(burst);
        let gateway = Arc::new(Gateway {
            config,
            rates: governor::RateLimiter::dashmap(quota).with_middleware(),
            active: Mutex::default(),
            shutdown,
        });
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let weak = Arc::downgrade(&gateway);
            runtime.spawn(async move {
                let mut every = tokio::time::interval(PRUNE_EVERY);
                every.tick().await;
                loop {
                    every.tick().await;
                    let Some(gateway) = weak.upgrade() else {
                        return;
                    };
                    gateway.rates.retain_recent();
                    gateway.rates.shrink_to_fit();
                }
            });
        }
        gateway
    }

    fn lock_active(&self) -> std::sync::MutexGuard<'_, HashMap<ClientKey, usize>> {
        self.active.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The client: the peer, or the forwarded address when the peer is a trusted proxy; an IPv6 one by its
    /// network.
    fn client(&self, peer: IpAddr, headers: &HeaderMap) -> ClientKey {
        ClientKey::new(self.client_ip(peer, headers), self.config.ipv6_prefix_len)
    }

    /// The client's address: the peer, or the forwarded address when the peer is a trusted proxy.
    fn client_ip(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
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

    fn take_token(&self, client: ClientKey) -> Take {
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

    fn take_slot(self: &Arc<Self>, ip: ClientKey) -> Option<ConnectionSlot> {
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

    fn policy_header(&self) -> HeaderValue {
        let window = (self.config.burst / self.config.rate_per_second).ceil() as u64;
        HeaderValue::from_str(&format!(
            "\"per-client\";q={};w={window}",
            self.config.burst as u64
        ))
        .unwrap_or_else(|_| HeaderValue::from_static("\"per-client\""))
    }

    fn is_legacy_host(&self, headers: &HeaderMap) -> bool {
        let Some(host) = headers.get(header::HOST).and_then(|h| h.to_str().ok()) else {
            return false;
        };
        let host = host.to_ascii_lowercase();
        let without_port = strip_port(&host);
        self.config.legacy_hosts.iter().any(|legacy| {
            let legacy = legacy.to_ascii_lowercase();
            legacy == host || legacy == without_port
        })
    }
}

fn strip_port(host: &str) -> &str {
    if host.starts_with('[') {
        // [v6]:port
        return host
            .split_once(']')
            .map(|(h, _)| &host[..=h.len()])
            .unwrap_or(host);
    }
    match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    }
}

/// A 429, counted for the operator's metrics by the limit (`rate` or `concurrent`) it enforces.
fn too_many(limit: &'static str, code: ErrorCode, message: String, retry_after: u64) -> Response {
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

/// The retired entrance never serves data: 410 naming the current base URL.
pub async fn legacy_host(
    State(gateway): State<Arc<Gateway>>,
    request: Request,
    next: Next,
) -> Response {
    if !gateway.is_legacy_host(request.headers()) {
        return next.run(request).await;
    }
    let base = &gateway.config.public_base_url;
    let body = serde_json::json!({
        "error": format!("this entrance is retired; the API is served at {base}"),
        "code": ErrorCode::Gone.as_str(),
        "baseUrl": base,
    });
    (StatusCode::GONE, axum::Json(body)).into_response()
}

/// GET, HEAD and OPTIONS only. A CORS preflight goes on to the CORS layer; a plain OPTIONS lists the methods.
pub async fn methods(request: Request, next: Next) -> Response {
    let allow = [
        (header::ALLOW, HeaderValue::from_static(ALLOWED_METHODS)),
        (
            header::ACCESS_CONTROL_ALLOW_ORIGIN,
            HeaderValue::from_static("*"),
        ),
    ];
    let preflight = request
        .headers()
        .contains_key(header::ACCESS_CONTROL_REQUEST_METHOD);
    let mut response = match *request.method() {
        Method::GET | Method::HEAD => next.run(request).await,
        Method::OPTIONS if preflight => next.run(request).await,
        Method::OPTIONS => (StatusCode::NO_CONTENT, allow).into_response(),
        ref other => {
            let error = ApiError {
                status: StatusCode::METHOD_NOT_ALLOWED,
                code: ErrorCode::MethodNotAllowed,
                message: format!(
                    "{other} is not supported: this API is read-only ({ALLOWED_METHODS})"
                ),
                retry_after: None,
            };
            (allow, error).into_response()
        }
    };
    // No body of ours is to be sniffed as anything but the type it declares.
    response.headers_mut().insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

/// 503 while the service stops, or when a response has not started within the request timeout.
pub async fn availability(
    State(gateway): State<Arc<Gateway>>,
    request: Request,
    next: Next,
) -> Response {
    if *gateway.shutdown.borrow() {
        return ApiError::unavailable("the service is stopping; retry after backing off")
            .into_response();
    }
    match before_deadline(gateway.config.request_timeout, next.run(request)).await {
        Some(response) => response,
        None => {
            tracing::warn!("a request timed out before its response started");
            ApiError::unavailable("the service could not answer in time; retry after backing off")
                .into_response()
        }
    }
}

/// `work`'s output if it is ready before `timeout` has passed, else `None`. Unlike `tokio::time::timeout`, the
/// deadline is checked before the work is polled again: an answer that arrives after the deadline (but before
/// the timer wheel's next millisecond tick) is late, not served.
async fn before_deadline<T>(timeout: Duration, work: impl Future<Output = T>) -> Option<T> {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut work = std::pin::pin!(work);
    let mut alarm = std::pin::pin!(tokio::time::sleep_until(deadline));
    std::future::poll_fn(|cx| {
        if tokio::time::Instant::now() >= deadline {
            return Poll::Ready(None);
        }
        if let Poll::Ready(output) = work.as_mut().poll(cx) {
            return Poll::Ready(Some(output));
        }
        alarm.as_mut().poll(cx).map(|()| None)
    })
    .await
}

/// How long a JSON answer may be reused without asking again.
pub const JSON_CACHE_CONTROL: &str = "public, max-age=5";

/// Weak ETags and short caching on JSON, and `If-None-Match` → 304 wherever an ETag is given.
pub async fn caching(request: Request, next: Next) -> Response {
    let if_none_match = request.headers().get(header::IF_NONE_MATCH).cloned();
    let response = next.run(request).await;
    if response.status() != StatusCode::OK {
        return response;
    }
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    // A JSON answer is one buffer already (its size is known), so hashing it holds nothing extra, whatever its
    // size (a full self-sensing event can be tens of MB). A body of unknown size would be a stream: no ETag.
    let whole = http_body::Body::size_hint(response.body())
        .exact()
        .is_some();
    let response = if is_json && whole && !response.headers().contains_key(header::ETAG) {
        let (mut parts, body) = response.into_parts();
        let bytes = match axum::body::to_bytes(body, usize::MAX).await {
            Ok(bytes) => bytes,
            Err(e) => {
                tracing::warn!(error = %e, "a JSON body could not be read for its ETag");
                return ApiError::unavailable(
                    "the response could not be produced; retry after backing off",
                )
                .into_response();
            }
        };
        let digest = Sha256::digest(&bytes);
        mark_json_validator(&mut parts.headers, &digest[..16]);
        Response::from_parts(parts, Body::from(bytes))
    } else {
        response
    };
    match (if_none_match, response.headers().get(header::ETAG)) {
        (Some(wanted), Some(etag)) if etag_matches(&wanted, etag) => {
            let mut not_modified = StatusCode::NOT_MODIFIED.into_response();
            for name in [header::ETAG, header::CACHE_CONTROL] {
                if let Some(value) = response.headers().get(&name) {
                    not_modified.headers_mut().insert(name, value.clone());
                }
            }
            not_modified
        }
        _ => response,
    }
}

/// A JSON answer's weak `ETag` from a digest of what it says, and its `Cache-Control` unless it has one.
pub fn mark_json_validator(headers: &mut HeaderMap, digest: &[u8]) {
    if let Ok(etag) = HeaderValue::from_str(&format!("W/\"{}\"", hex::encode(digest))) {
        headers.insert(header::ETAG, etag);
    }
    headers
        .entry(header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static(JSON_CACHE_CONTROL));
}

/// The 304 for a request whose `If-None-Match` names the validator `digest` (see [`mark_json_validator`]), for a
/// handler that knows its answer's validator before building the answer.
pub fn not_modified(request: &HeaderMap, digest: &[u8]) -> Option<Response> {
    let wanted = request.get(header::IF_NONE_MATCH)?;
    let mut headers = HeaderMap::new();
    mark_json_validator(&mut headers, digest);
    let etag = headers.get(header::ETAG)?;
    if !etag_matches(wanted, etag) {
        return None;
    }
    let mut response = StatusCode::NOT_MODIFIED.into_response();
    *response.headers_mut() = headers;
    Some(response)
}

/// `If-None-Match` uses the weak comparison: `W/"x"` and `"x"` match.
fn etag_matches(wanted: &HeaderValue, etag: &HeaderValue) -> bool {
    let Ok(wanted) = wanted.to_str() else {
        return false;
    };
    let Ok(etag) = etag.to_str() else {
        return false;
    };
    let opaque = |tag: &str| tag.trim().trim_start_matches("W/").to_string();
    wanted.trim() == "*"
        || wanted
            .split(',')
            .any(|candidate| opaque(candidate) == opaque(etag))
}

/// Only JSON is compressed: never the event stream, never raw bytes.
pub fn compress_json(
    _status: StatusCode,
    _version: axum::http::Version,
    headers: &HeaderMap,
    _extensions: &axum::http::Extensions,
) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ipv6_client_is_its_network_and_a_mapped_ipv4_one_its_address() {
        let key = |ip: &str, bits| ClientKey::new(ip.parse().unwrap(), bits);
        assert_eq!(
            key("2001:db8:1:2:aaaa::1", 64),
            key("2001:db8:1:2:ffff::9", 64)
        );
        assert_ne!(key("2001:db8:1:2::1", 64), key("2001:db8:1:3::1", 64));
        assert_ne!(key("2001:db8:1:2::1", 128), key("2001:db8:1:2::2", 128));
        assert_eq!(key("2001:db8::1", 1), key("7fff::1", 1));
        assert_eq!(key("::ffff:192.0.2.7", 64), key("192.0.2.7", 64));
        assert_ne!(key("192.0.2.7", 64), key("192.0.2.8", 64));
    }

    /// Many clients: each keeps its own burst, and a client rotating within its /64 shares one.
    #[tokio::test]
    async fn every_client_has_its_own_burst_and_a_network_shares_one() {
        let (_tx, shutdown) = watch::channel(false);
        let gateway = Gateway::new(
            GatewayConfig {
                rate_per_second: 0.001,
                burst: 3.0,
                ..GatewayConfig::default()
            },
            shutdown,
        );
        for n in 0..20_000u32 {
            let [_, a, b, c] = n.to_be_bytes();
            let ip = IpAddr::from([10, a, b, c]);
            let client = ClientKey::new(ip, 64);
            for _ in 0..3 {
                assert!(matches!(gateway.take_token(client), Take::Allowed { .. }));
            }
        }
        let rotating = |n: u16| {
            ClientKey::new(
                IpAddr::from([0x2001, 0xdb8, 7, 7, n, n, n, n]),
                DEFAULT_IPV6_PREFIX_LEN,
            )
        };
        for n in 0..3 {
            assert!(matches!(
                gateway.take_token(rotating(n)),
                Take::Allowed { .. }
            ));
        }
        assert!(matches!(
            gateway.take_token(rotating(9)),
            Take::Limited { .. }
        ));
    }

    /// A JSON answer larger than any buffer limit (a big self-sensing export) is served whole, with its ETag.
    #[tokio::test]
    async fn a_json_answer_of_any_size_is_served_with_its_etag() {
        let text = format!("\"{}\"", "x".repeat(65 << 20));
        let length = text.len();
        let app = axum::Router::new()
            .route(
                "/big",
                axum::routing::get(move || {
                    let text = text.clone();
                    async move { ([(header::CONTENT_TYPE, "application/json")], text) }
                }),
            )
            .layer(axum::middleware::from_fn(caching));
        let request = axum::http::Request::get("/big")
            .body(Body::empty())
            .unwrap();
        let response = tower::ServiceExt::oneshot(app, request).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert!(response.headers().contains_key(header::ETAG));
        let body = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        assert_eq!(body.len(), length);
    }

    /// Work that finishes in time is served; work whose answer comes only after the deadline is late even when
    /// it is ready by the time anyone looks (the order is what decides, not the timer's resolution); work that
    /// never answers ends at the deadline.
    #[tokio::test]
    async fn an_answer_counts_only_before_its_deadline() {
        assert_eq!(
            before_deadline(Duration::from_secs(60), async { 7 }).await,
            Some(7)
        );
        // Pending once, after making sure 50 µs have passed, then ready at once: by its second poll the 1 µs
        // deadline is long gone although no timer tick has come (`tokio::time::timeout` answered Some here).
        let started = std::time::Instant::now();
        let mut polled = false;
        let late = std::future::poll_fn(move |cx| {
            if polled {
                return Poll::Ready(7);
            }
            polled = true;
            while started.elapsed() < Duration::from_micros(50) {
                std::hint::spin_loop();
            }
            cx.waker().wake_by_ref();
            Poll::Pending
        });
        assert_eq!(before_deadline(Duration::from_micros(1), late).await, None);
        let never = std::future::pending::<()>();
        assert_eq!(before_deadline(Duration::from_millis(1), never).await, None);
    }

    fn gateway(config: GatewayConfig) -> Arc<Gateway> {
        Gateway::new(config, watch::channel(false).1)
    }

    #[test]
    fn forwarded_address_counts_only_behind_a_trusted_proxy() {
        let proxy: IpAddr = "10.1.1.1".parse().unwrap();
        let g = gateway(GatewayConfig {
            trusted_proxies: vec![proxy],
            ..Default::default()
        });
        let mut headers = HeaderMap::new();
        headers.insert(
            "x-forwarded-for",
            HeaderValue::from_static("203.0.113.9, 10.1.1.1"),
        );
        assert_eq!(
            g.client_ip(proxy, &headers),
            "203.0.113.9".parse::<IpAddr>().unwrap()
        );
        let stranger: IpAddr = "198.51.100.7".parse().unwrap();
        assert_eq!(g.client_ip(stranger, &headers), stranger);
    }

    #[test]
    fn legacy_hosts_match_with_or_without_port() {
        let g = gateway(GatewayConfig {
            legacy_hosts: vec!["Old.Example.org".into()],
            ..Default::default()
        });
        let host = |h: &'static str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::HOST, HeaderValue::from_static(h));
            g.is_legacy_host(&headers)
        };
        assert!(host("old.example.org"));
        assert!(host("old.example.org:8443"));
        assert!(!host("new.example.org"));
        assert_eq!(strip_port("[::1]:80"), "[::1]");
    }

    #[test]
    fn weak_comparison_of_etags() {
        let etag = HeaderValue::from_static("W/\"abc\"");
        assert!(etag_matches(&HeaderValue::from_static("\"abc\""), &etag));
        assert!(etag_matches(
            &HeaderValue::from_static("\"x\", W/\"abc\""),
            &etag
        ));
        assert!(etag_matches(&HeaderValue::from_static("*"), &etag));
        assert!(!etag_matches(&HeaderValue::from_static("\"abd\""), &etag));
    }
}
