use super::caching::*;
use super::entrance::*;
use super::limits::*;
use super::*;
use axum::body::Body;
use axum::http::StatusCode;
use axum::http::header::{self, HeaderMap, HeaderValue};
use std::task::Poll;

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
        trusted_proxies: TrustedProxies::new(vec![proxy.into()]),
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

#[test]
fn a_trusted_proxy_is_an_address_or_a_network() {
    let parse = |text: &str| parse_trusted_proxy(text).map(|n| n.to_string());
    assert_eq!(parse("10.0.0.7").unwrap(), "10.0.0.7/32");
    assert_eq!(parse(" 10.1.2.3/8 ").unwrap(), "10.0.0.0/8");
    assert_eq!(parse("fd00::/8").unwrap(), "fd00::/8");
    assert_eq!(parse("::1").unwrap(), "::1/128");
    for bad in ["", "10.0.0.0/33", "ten", "10.0.0.0/", "example.org"] {
        let error = parse(bad).unwrap_err();
        assert!(
            error.contains("neither an IP address nor a network"),
            "{bad}: {error}"
        );
    }
    let proxies = TrustedProxies::new(vec![
        parse_trusted_proxy("10.0.0.0/8").unwrap(),
        parse_trusted_proxy("2001:db8::1").unwrap(),
    ]);
    let contains = |ip: &str| proxies.contains(&ip.parse().unwrap());
    assert!(contains("10.200.3.4") && contains("::ffff:10.0.0.9") && contains("2001:db8::1"));
    assert!(!contains("11.0.0.1") && !contains("2001:db8::2"));
}

/// Behind a load balancer that is a network, each address of it counts as a proxy, in the peer and along the
/// forwarded chain; the nearest address outside it is the client.
#[test]
fn forwarded_address_counts_behind_a_trusted_network() {
    let g = gateway(GatewayConfig {
        trusted_proxies: TrustedProxies::new(vec![parse_trusted_proxy("10.0.0.0/8").unwrap()]),
        ..Default::default()
    });
    let mut headers = HeaderMap::new();
    headers.insert(
        "x-forwarded-for",
        HeaderValue::from_static("198.51.100.1, 203.0.113.9, 10.2.0.1"),
    );
    let peer: IpAddr = "10.9.9.9".parse().unwrap();
    assert_eq!(
        g.client_ip(peer, &headers),
        "203.0.113.9".parse::<IpAddr>().unwrap()
    );
    let outside: IpAddr = "192.0.2.1".parse().unwrap();
    assert_eq!(g.client_ip(outside, &headers), outside);
}
