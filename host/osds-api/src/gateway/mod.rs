//! The public entrance, built into the service so it holds with or without a reverse proxy: per-client rate and
//! connection limits (429), the retired legacy host (410), read-only methods (405), 503 while stopping or when
//! a request cannot be answered in time, and validators for caching (ETag, 304).
//!
//! By concern: [`limits`] (clients, rates, connections), [`entrance`] (410, 405, 503), [`caching`] (ETag, 304).

mod caching;
mod entrance;
mod limits;

pub use caching::{JSON_CACHE_CONTROL, caching, compress_json, mark_json_validator, not_modified};
pub use entrance::{ALLOWED_METHODS, availability, legacy_host, methods};
pub use limits::{
    ClientKey, ConnectionSlot, DEFAULT_IPV6_PREFIX_LEN, HeldSlot, RATELIMIT, RATELIMIT_POLICY,
    limits,
};

pub use ipnet::IpNet;
use limits::Limiter;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;

/// The reverse proxies and load balancers in front of the service, whose `X-Forwarded-For` names the client
/// and whose connections are not counted as a client's: addresses and networks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedProxies(Vec<IpNet>);

impl TrustedProxies {
    pub fn new(networks: Vec<IpNet>) -> TrustedProxies {
        TrustedProxies(networks)
    }

    /// Whether `ip` is one of them (an IPv4-mapped IPv6 address as the IPv4 one).
    pub fn contains(&self, ip: &IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.0.iter().any(|network| network.contains(&ip))
    }
}

/// A `--trusted-proxy` value: an address (`10.0.0.7`, `::1`) or a network in CIDR form (`10.0.0.0/8`,
/// `fd00::/8`), as load balancers and ingress controllers come.
pub fn parse_trusted_proxy(text: &str) -> Result<IpNet, String> {
    let text = text.trim();
    text.parse::<IpNet>()
        .or_else(|_| text.parse::<IpAddr>().map(IpNet::from))
        .map(|network| network.trunc())
        .map_err(|_| format!("`{text}` is neither an IP address nor a network (e.g. 10.0.0.0/8)"))
}

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
    pub trusted_proxies: TrustedProxies,
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
            trusted_proxies: TrustedProxies::default(),
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

/// How often the clients whose rate state is back to full are forgotten.
const PRUNE_EVERY: Duration = Duration::from_secs(60);

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
}

#[cfg(test)]
mod tests;
