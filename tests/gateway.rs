//! The public entrance over real sockets: read-only methods, HEAD, CORS, per-client rate and connection limits,
//! the retired legacy host, and caching validators and compression.

mod support;

use fake_relay::RelayConfig;
use reqwest::{Method, StatusCode};
use serde_json::Value;
use std::time::{Duration, Instant};
use support::live::ws_url;
use support::{Server, eventually, get_json, osds, start_connected, start_server};

const LIMITS: [&str; 6] = [
    "--rate-limit-burst",
    "80",
    "--rate-limit-per-sec",
    "10",
    "--max-connections-per-client",
    "20",
];

const FRAME: &str = r#"{"type":"sc_eew","ID":8187,"EventID":"202608281313.0001_2","ReportTime":"2026-08-28 13:13:56","ReportNum":2,"OriginTime":"2026-08-28 13:13:34","HypoCenter":"四川内江市隆昌市","Latitude":29.239,"Longitude":105.227,"Magunitude":5.2,"Depth":0.0,"MaxIntensity":7.1}"#;

/// A server with one archived report; returns it with the report's raw URL path (below /api/v1).
async fn server_with_a_report(extra: &[&str]) -> (fake_relay::FakeRelay, Server, String) {
    let (relay, server) = start_connected(RelayConfig::default(), extra).await;
    relay.push_to("/sc_eew", FRAME.as_bytes()).await;
    let report = eventually(20, "the report archived", || async {
        let page = get_json(&server.url("/reports")).await;
        page["items"].as_array().unwrap().first().cloned()
    })
    .await;
    let raw = report["rawUrl"]
        .as_str()
        .unwrap()
        .replacen("/api/v1", "", 1);
    (relay, server, raw)
}

fn assert_json_error(body: &str, code: &str) {
    let body: Value = serde_json::from_str(body).unwrap_or_else(|_| panic!("not JSON: {body}"));
    assert_eq!(body["code"], code, "{body}");
    assert!(body["error"].as_str().is_some_and(|e| !e.is_empty()));
}

#[tokio::test(flavor = "multi_thread")]
async fn only_reads_are_allowed_head_works_and_cors_exposes_the_headers() {
    let (_relay, server, raw) = server_with_a_report(&[]).await;
    let client = reqwest::Client::new();

    for method in ["POST", "PUT", "DELETE", "PATCH", "TRACE"] {
        for path in ["/status", "/reports", "/no/such/path"] {
            let response = client
                .request(
                    Method::from_bytes(method.as_bytes()).unwrap(),
                    server.url(path),
                )
                .send()
                .await
                .unwrap();
            assert_eq!(
                response.status(),
                StatusCode::METHOD_NOT_ALLOWED,
                "{method} {path}"
            );
            assert_eq!(response.headers()["allow"], "GET, HEAD, OPTIONS");
            assert_json_error(&response.text().await.unwrap(), "method_not_allowed");
        }
    }
    let options = client
        .request(Method::OPTIONS, server.url("/events"))
        .send()
        .await
        .unwrap();
    assert_eq!(options.status(), StatusCode::NO_CONTENT);
    assert_eq!(options.headers()["allow"], "GET, HEAD, OPTIONS");

    // HEAD: the same headers as GET, no body.
    let get = client.get(server.url(&raw)).send().await.unwrap();
    let get_headers = get.headers().clone();
    let bytes = get.bytes().await.unwrap();
    let head = client.head(server.url(&raw)).send().await.unwrap();
    assert_eq!(head.status(), StatusCode::OK);
    assert_eq!(
        head.headers()["content-length"],
        bytes.len().to_string().as_str()
    );
    assert_eq!(
        head.headers()["x-content-sha256"],
        get_headers["x-content-sha256"]
    );
    assert_eq!(head.headers()["etag"], get_headers["etag"]);
    assert!(head.bytes().await.unwrap().is_empty());
    // Neither raw bytes nor JSON nor an error may be sniffed as another type.
    assert_eq!(get_headers["x-content-type-options"], "nosniff");
    for path in ["/events", "/no/such/path", "/events?page=0"] {
        let response = client.get(server.url(path)).send().await.unwrap();
        assert_eq!(
            response.headers()["x-content-type-options"],
            "nosniff",
            "{path}"
        );
    }
    let head_json = client.head(server.url("/events")).send().await.unwrap();
    assert_eq!(head_json.status(), StatusCode::OK);
    assert!(head_json.headers().contains_key("etag"));

    // CORS for reads, and a preflight answered.
    let cors = client
        .get(server.url(&raw))
        .header("Origin", "https://app.example.org")
        .send()
        .await
        .unwrap();
    assert_eq!(cors.headers()["access-control-allow-origin"], "*");
    let exposed = cors.headers()["access-control-expose-headers"]
        .to_str()
        .unwrap()
        .to_ascii_lowercase();
    for header in [
        "x-content-sha256",
        "etag",
        "retry-after",
        "ratelimit",
        "ratelimit-policy",
    ] {
        assert!(
            exposed.split(',').any(|h| h.trim() == header),
            "{header} not in {exposed}"
        );
    }
    let preflight = client
        .request(Method::OPTIONS, server.url("/stream"))
        .header("Origin", "https://app.example.org")
        .header("Access-Control-Request-Method", "GET")
        .header("Access-Control-Request-Headers", "last-event-id")
        .send()
        .await
        .unwrap();
    assert!(preflight.status().is_success());
    assert_eq!(preflight.headers()["access-control-allow-origin"], "*");
    let methods = preflight.headers()["access-control-allow-methods"]
        .to_str()
        .unwrap();
    assert!(methods.contains("GET"), "{methods}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_burst_of_100_lets_80_through_then_429_with_retry_after() {
    let (_relay, server) = start_connected(RelayConfig::default(), &LIMITS).await;
    let client = reqwest::Client::new();
    let started = Instant::now();
    let mut statuses = Vec::new();
    let mut limited = None;
    for n in 0..100 {
        // Without a trusted proxy, X-Forwarded-For is ignored: it cannot buy a fresh bucket.
        let response = client
            .get(server.url("/reports?limit=1"))
            .header("X-Forwarded-For", format!("198.51.100.{n}"))
            .send()
            .await
            .unwrap();
        statuses.push(response.status());
        if response.status() == StatusCode::OK {
            assert!(response.headers().contains_key("ratelimit"));
            assert!(response.headers().contains_key("ratelimit-policy"));
        } else if limited.is_none() {
            limited = Some((response.headers().clone(), response.text().await.unwrap()));
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    assert!(
        statuses[..80].iter().all(|s| *s == StatusCode::OK),
        "the first 80 pass"
    );
    let passed = statuses.iter().filter(|s| **s == StatusCode::OK).count();
    // Tokens refill at 10/s while the burst is sent.
    assert!(
        passed <= 80 + (elapsed * 10.0).ceil() as usize,
        "{passed} passed in {elapsed:.2} s"
    );
    assert!(statuses.contains(&StatusCode::TOO_MANY_REQUESTS));
    let (headers, body) = limited.unwrap();
    let retry_after: u64 = headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=30).contains(&retry_after));
    assert_eq!(headers["ratelimit-policy"], "\"per-client\";q=80;w=8");
    assert!(headers["ratelimit"].to_str().unwrap().contains("r=0"));
    assert_json_error(&body, "rate_limited");

    // After a pause the bucket refills.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(
        client
            .get(server.url("/reports?limit=1"))
            .send()
            .await
            .unwrap()
            .status(),
        StatusCode::OK
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn twenty_live_streams_per_client_and_the_21st_is_refused() {
    // Keep-alives far apart: only the closed connection itself can tell the server a stream's client has gone.
    let mut args = LIMITS.to_vec();
    args.extend(["--live-keepalive-secs", "600"]);
    let (_relay, server) = start_connected(RelayConfig::default(), &args).await;
    let client = reqwest::Client::new();
    // Both families' channels hold a slot each: 13 + 2 streams, 1 + 4 sockets.
    let mut streams = Vec::new();
    for index in 0..15 {
        let path = if index < 2 { "/hyp/stream" } else { "/stream" };
        let response = client.get(server.url(path)).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{path}");
        streams.push(response);
    }
    let mut sockets = Vec::new();
    for index in 0..5 {
        let url = if index == 0 {
            server.ws_url("/hyp/ws")
        } else {
            ws_url(&server, "")
        };
        let (socket, _) = tokio_tungstenite::connect_async(url).await.unwrap();
        sockets.push(socket);
    }
    let refused = client.get(server.url("/stream")).send().await.unwrap();
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(refused.headers()["retry-after"], "1");
    assert_json_error(&refused.text().await.unwrap(), "too_many_connections");
    let plain = client.get(server.url("/status")).send().await.unwrap();
    assert_eq!(
        plain.status(),
        StatusCode::TOO_MANY_REQUESTS,
        "a plain request needs a slot too"
    );

    // Closing a WebSocket frees its slot.
    drop(sockets.pop());
    eventually(10, "a slot freed by a closed socket", || async {
        let response = client.get(server.url("/status")).send().await.unwrap();
        (response.status() == StatusCode::OK).then_some(())
    })
    .await;

    // Abandoning the event streams frees their slots as soon as their connections close: 16 new ones fit
    // beside the 4 sockets still open.
    drop(streams);
    let reopened = std::sync::Mutex::new(Vec::new());
    eventually(10, "the abandoned streams' slots", || async {
        let response = client.get(server.url("/stream")).send().await.unwrap();
        let mut reopened = reopened.lock().unwrap();
        if response.status() == StatusCode::OK {
            reopened.push(response);
        }
        (reopened.len() == 16).then_some(())
    })
    .await;
    let refused = client.get(server.url("/stream")).send().await.unwrap();
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_legacy_host_is_gone_and_serves_no_data() {
    let (_relay, server) = start_connected(
        RelayConfig::default(),
        &[
            "--legacy-host",
            "old.example.org",
            "--public-base-url",
            "https://api.example.org/api/v1",
        ],
    )
    .await;
    let client = reqwest::Client::new();
    for path in ["/reports", "/events", "/status", "/stream"] {
        let response = client
            .get(server.url(path))
            .header("Host", "old.example.org")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::GONE, "{path}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["code"], "gone");
        assert_eq!(body["baseUrl"], "https://api.example.org/api/v1");
        assert!(body.get("items").is_none());
    }
    let current = client.get(server.url("/reports")).send().await.unwrap();
    assert_eq!(current.status(), StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_trusted_proxy_forwards_the_client_address() {
    let (_relay, server) = start_connected(
        RelayConfig::default(),
        &[
            "--trusted-proxy",
            "127.0.0.1",
            "--rate-limit-burst",
            "5",
            "--rate-limit-per-sec",
            "0.0001",
        ],
    )
    .await;
    let client = reqwest::Client::new();
    let get = |ip: &'static str| {
        let request = client
            .get(server.url("/reports?limit=1"))
            .header("X-Forwarded-For", ip);
        async move { request.send().await.unwrap().status() }
    };
    for _ in 0..5 {
        assert_eq!(get("203.0.113.1").await, StatusCode::OK);
    }
    assert_eq!(get("203.0.113.1").await, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        get("203.0.113.2").await,
        StatusCode::OK,
        "another client has its own bucket"
    );
}

/// A load balancer comes as a network: `--trusted-proxy 127.0.0.0/8` trusts the peer and every hop of the
/// forwarded chain inside it, and a malformed value stops the service with the value named.
#[tokio::test(flavor = "multi_thread")]
async fn a_trusted_network_forwards_the_client_address() {
    let (_relay, server) = start_connected(
        RelayConfig::default(),
        &[
            "--trusted-proxy",
            "192.0.2.0/24,127.0.0.0/8",
            "--rate-limit-burst",
            "3",
            "--rate-limit-per-sec",
            "0.0001",
        ],
    )
    .await;
    let client = reqwest::Client::new();
    let get = |chain: &'static str| {
        let request = client
            .get(server.url("/reports?limit=1"))
            .header("X-Forwarded-For", chain);
        async move { request.send().await.unwrap().status() }
    };
    // The same client behind different hops of the network: one bucket.
    for chain in [
        "203.0.113.1",
        "203.0.113.1, 127.0.0.5",
        "203.0.113.1, 192.0.2.9",
    ] {
        assert_eq!(get(chain).await, StatusCode::OK, "{chain}");
    }
    assert_eq!(
        get("203.0.113.1, 127.8.8.8").await,
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(get("203.0.113.2, 127.0.0.5").await, StatusCode::OK);

    let refused = osds()
        .args(["serve", "--trusted-proxy", "10.0.0.0/33"])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("`10.0.0.0/33` is neither an IP address nor a network"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn etags_revalidate_and_only_json_is_compressed() {
    let (_relay, server, raw) = server_with_a_report(&[]).await;
    let client = reqwest::Client::new();

    let events = client.get(server.url("/events")).send().await.unwrap();
    let etag = events.headers()["etag"].to_str().unwrap().to_string();
    assert!(etag.starts_with("W/\""), "{etag}");
    assert!(
        events.headers()["cache-control"]
            .to_str()
            .unwrap()
            .contains("max-age")
    );
    let again = client
        .get(server.url("/events"))
        .header("If-None-Match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
    assert_eq!(again.headers()["etag"], etag.as_str());
    assert!(again.bytes().await.unwrap().is_empty());
    let other = client
        .get(server.url("/events"))
        .header("If-None-Match", "W/\"something-else\"")
        .send()
        .await
        .unwrap();
    assert_eq!(other.status(), StatusCode::OK);

    let raw_response = client.get(server.url(&raw)).send().await.unwrap();
    let strong = raw_response.headers()["etag"].to_str().unwrap().to_string();
    assert!(
        strong.starts_with('"'),
        "raw bytes carry a strong ETag: {strong}"
    );
    assert!(
        raw_response.headers()["cache-control"]
            .to_str()
            .unwrap()
            .contains("immutable")
    );
    let revalidated = client
        .get(server.url(&raw))
        .header("If-None-Match", &strong)
        .send()
        .await
        .unwrap();
    assert_eq!(revalidated.status(), StatusCode::NOT_MODIFIED);

    for encoding in ["gzip", "br"] {
        let json = client
            .get(server.url("/status"))
            .header("Accept-Encoding", encoding)
            .send()
            .await
            .unwrap();
        assert_eq!(json.headers()["content-encoding"], encoding);
        let bytes = client
            .get(server.url(&raw))
            .header("Accept-Encoding", encoding)
            .send()
            .await
            .unwrap();
        assert!(
            !bytes.headers().contains_key("content-encoding"),
            "raw bytes are never re-encoded"
        );
        let stream = client
            .get(server.url("/stream"))
            .header("Accept-Encoding", encoding)
            .send()
            .await
            .unwrap();
        assert_eq!(stream.headers()["content-type"], "text/event-stream");
        assert!(
            !stream.headers().contains_key("content-encoding"),
            "SSE is never compressed"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn tls_serves_rest_and_websocket_with_a_self_signed_certificate() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let certified =
        rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string(), "localhost".to_string()])
            .unwrap();
    let cert_pem = certified.cert.pem();
    let dir = support::tempdir("tls");
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert, &cert_pem).unwrap();
    std::fs::write(&key, certified.signing_key.serialize_pem()).unwrap();
    let relay = fake_relay::FakeRelay::start(RelayConfig::default())
        .await
        .unwrap();
    let server = start_server(
        &relay.url(),
        &[
            "--tls-cert",
            cert.to_str().unwrap(),
            "--tls-key",
            key.to_str().unwrap(),
            "--max-connections-per-client",
            "3",
            "--live-keepalive-secs",
            "600",
        ],
    );
    assert!(
        server.base.starts_with("https://127.0.0.1:"),
        "{}",
        server.base
    );

    // REST over TLS, trusting only our certificate.
    let client = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(cert_pem.as_bytes()).unwrap())
        .build()
        .unwrap();
    let status = client.get(server.url("/status")).send().await.unwrap();
    assert_eq!(status.status(), StatusCode::OK);
    assert_eq!(status.json::<Value>().await.unwrap()["version"], 1);
    // Plain HTTP on the TLS port gets no answer.
    let plain = reqwest::get(server.url("/status").replacen("https://", "http://", 1)).await;
    assert!(plain.is_err() || !plain.unwrap().status().is_success());

    // Event streams over TLS hold their slots while open and free them when their clients go, without waiting
    // for a keep-alive write (ten minutes apart here).
    let mut streams = Vec::new();
    for _ in 0..3 {
        let stream = client.get(server.url("/stream")).send().await.unwrap();
        assert_eq!(stream.status(), StatusCode::OK);
        streams.push(stream);
    }
    let refused = client.get(server.url("/status")).send().await.unwrap();
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    drop(streams);
    eventually(10, "the abandoned TLS streams' slots", || async {
        let response = client.get(server.url("/status")).send().await.unwrap();
        (response.status() == StatusCode::OK).then_some(())
    })
    .await;

    // WebSocket over TLS (wss://).
    let mut roots = rustls::RootCertStore::empty();
    roots.add(certified.cert.der().clone()).unwrap();
    let config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let wss = server.url("/ws").replacen("https://", "wss://", 1);
    let (mut socket, response) = tokio_tungstenite::connect_async_tls_with_config(
        wss,
        None,
        false,
        Some(tokio_tungstenite::Connector::Rustls(std::sync::Arc::new(
            config,
        ))),
    )
    .await
    .unwrap();
    assert_eq!(response.status(), 101);
    let ready = support::live::ws_next(&mut socket).await.unwrap();
    assert_eq!(ready["type"], "ready");
}

/// A renewed certificate is served after SIGHUP, without a restart; files that do not parse keep the one in
/// service (and the log says so).
#[tokio::test(flavor = "multi_thread")]
async fn sighup_serves_a_renewed_tls_certificate() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let names = vec!["127.0.0.1".to_string(), "localhost".to_string()];
    let (old, new) = (
        rcgen::generate_simple_self_signed(names.clone()).unwrap(),
        rcgen::generate_simple_self_signed(names).unwrap(),
    );
    let dir = support::tempdir("tls-renewal");
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let install = |certified: &rcgen::CertifiedKey<rcgen::KeyPair>| {
        std::fs::write(&cert, certified.cert.pem()).unwrap();
        std::fs::write(&key, certified.signing_key.serialize_pem()).unwrap();
    };
    install(&old);
    let server = start_server(
        "ws://127.0.0.1:9",
        &[
            "--no-ingest",
            "--tls-cert",
            cert.to_str().unwrap(),
            "--tls-key",
            key.to_str().unwrap(),
        ],
    );
    // A client that trusts one certificate only (a fresh connection each time).
    let trusting = |certified: &rcgen::CertifiedKey<rcgen::KeyPair>| {
        reqwest::Client::builder()
            .add_root_certificate(
                reqwest::Certificate::from_pem(certified.cert.pem().as_bytes()).unwrap(),
            )
            .pool_max_idle_per_host(0)
            .build()
            .unwrap()
    };
    let (old_client, new_client) = (trusting(&old), trusting(&new));
    let status = server.url("/status");
    assert!(old_client.get(&status).send().await.is_ok());
    assert!(new_client.get(&status).send().await.is_err());

    let hangup = || {
        let sent = std::process::Command::new("kill")
            .args(["-HUP", &server.pid().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
    };
    install(&new);
    hangup();
    eventually(20, "the renewed certificate served", || async {
        new_client.get(&status).send().await.is_ok().then_some(())
    })
    .await;
    assert!(old_client.get(&status).send().await.is_err());

    std::fs::write(&cert, "not a certificate").unwrap();
    hangup();
    eventually(20, "the refused reload logged", || async {
        server
            .log()
            .contains("TLS certificate not reloaded; the one in service stays")
            .then_some(())
    })
    .await;
    assert_eq!(
        new_client.get(&status).send().await.unwrap().status(),
        StatusCode::OK
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn a_request_that_cannot_be_answered_in_time_is_a_503_not_a_hang() {
    // The gateway's deadline layer in front of a handler that answers only when the test lets it: the request
    // is still unanswered when its deadline passes, however fast or slow the machine.
    use osds_api::gateway::{Gateway, GatewayConfig, availability};
    let answer = std::sync::Arc::new(tokio::sync::Notify::new());
    let held = answer.clone();
    let app = axum::Router::new()
        .route(
            "/held",
            axum::routing::get(move || {
                let held = held.clone();
                async move {
                    held.notified().await;
                    "late"
                }
            }),
        )
        .layer(axum::middleware::from_fn_with_state(
            Gateway::new(
                GatewayConfig {
                    request_timeout: Duration::from_millis(100),
                    ..GatewayConfig::default()
                },
                tokio::sync::watch::channel(false).1,
            ),
            availability,
        ));
    let request = axum::http::Request::get("/held")
        .body(axum::body::Body::empty())
        .unwrap();
    let response = tower::ServiceExt::oneshot(app, request).await.unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    let retry_after: u64 = response.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(retry_after >= 1);
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    assert_json_error(std::str::from_utf8(&body).unwrap(), "unavailable");
    // The handler never answered: the deadline, not the handler, ended the request.
    answer.notify_one();
}

#[test]
fn the_request_deadline_must_be_positive() {
    let refused = std::process::Command::new(env!("CARGO_BIN_EXE_osds"))
        .args(["serve", "--request-timeout-secs", "0", "--no-ingest"])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr)
            .contains("--request-timeout-secs must be a positive number of seconds"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
}

/// Reads until the server closes the connection (or 20 s pass, which fails the test); returns what it sent.
async fn until_closed(stream: &mut tokio::net::TcpStream) -> String {
    use tokio::io::AsyncReadExt;
    let mut received = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), stream.read_to_end(&mut received))
        .await
        .expect("the server closes the connection")
        .expect("read");
    String::from_utf8_lossy(&received).into_owned()
}

fn address_of(server: &Server) -> String {
    server
        .base
        .trim_start_matches("http://")
        .trim_end_matches("/api/v1")
        .to_string()
}

/// A server for raw-socket tests, started through `sh -c 'ulimit -Sn 256; exec …'`: a low soft limit of open
/// files that the server raises to the hard one at start. Returns it with its `host:port`.
async fn server_with_low_open_files(extra: &[&str]) -> (fake_relay::FakeRelay, Server, String) {
    let relay = fake_relay::FakeRelay::start(RelayConfig::default())
        .await
        .unwrap();
    let server = support::launch(support::tempdir("raw-sockets"), &relay.url(), extra)
        .wrapped("sh", ["-c", "ulimit -Sn 256 && exec \"$0\" \"$@\""])
        .start()
        .unwrap_or_else(|e| panic!("{e:#}"))
        .removing_dir();
    let address = address_of(&server);
    (relay, server, address)
}

#[tokio::test(flavor = "multi_thread")]
async fn open_connections_are_capped_per_address_idle_ones_included() {
    use tokio::io::AsyncWriteExt;
    use tokio::net::TcpStream;
    let (_relay, server, address) =
        server_with_low_open_files(&["--max-open-connections-per-client", "5"]).await;
    // Each connection is a descriptor: the server raised its soft limit (256 when it started) to the hard one.
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", server.pid())).unwrap();
    let open_files: Vec<&str> = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(open_files[3], open_files[4], "soft = hard: {limits}");
    // Five connections that send nothing: the sixth is answered with 429 and closed.
    let mut idle = Vec::new();
    for _ in 0..5 {
        idle.push(TcpStream::connect(&address).await.unwrap());
    }
    let mut sixth = TcpStream::connect(&address).await.unwrap();
    let refused = until_closed(&mut sixth).await;
    assert!(refused.starts_with("HTTP/1.1 429"), "{refused}");
    let body = &refused[refused.find("\r\n\r\n").unwrap() + 4..];
    assert_json_error(body, "too_many_connections");
    // One closed by its client makes room for a request.
    drop(idle.pop());
    eventually(20, "room for a new connection", || async {
        let mut stream = TcpStream::connect(&address).await.unwrap();
        stream
            .write_all(b"GET /api/v1/status HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        until_closed(&mut stream)
            .await
            .starts_with("HTTP/1.1 200")
            .then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_connection_without_a_request_in_progress_is_closed_after_the_header_timeout() {
    use tokio::io::AsyncWriteExt;
    use tokio::net::TcpStream;
    let (_relay, _server, address) =
        server_with_low_open_files(&["--header-read-timeout-secs", "2"]).await;
    // Silent from the start; half a request's headers; idle after a request kept alive: each is closed.
    let mut silent = TcpStream::connect(&address).await.unwrap();
    assert_eq!(until_closed(&mut silent).await, "");
    let mut partial = TcpStream::connect(&address).await.unwrap();
    partial
        .write_all(b"GET /api/v1/status HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    assert!(!until_closed(&mut partial).await.contains("200 OK"));
    let mut kept = TcpStream::connect(&address).await.unwrap();
    kept.write_all(b"GET /api/v1/status HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let answered = until_closed(&mut kept).await;
    assert!(answered.starts_with("HTTP/1.1 200"), "{answered}");
}

#[tokio::test(flavor = "multi_thread")]
async fn requests_hyper_cannot_read_get_the_error_body_too() {
    use tokio::io::AsyncWriteExt;
    use tokio::net::TcpStream;
    let (_relay, server, address) = server_with_low_open_files(&[]).await;
    let long_uri = format!(
        "GET /api/v1/events?{} HTTP/1.1\r\nHost: x\r\n\r\n",
        "a".repeat(70_000)
    );
    let big_headers = format!(
        "GET /api/v1/status HTTP/1.1\r\nHost: x\r\n{}\r\n",
        (0..200)
            .map(|i| format!("x-filler-{i}: v\r\n"))
            .collect::<String>()
    );
    let cases: [(&[u8], &str, &str); 5] = [
        (
            b"NOT HTTP AT ALL\r\n\r\n",
            "HTTP/1.1 400",
            "malformed_request",
        ),
        (
            b"GET /api/v1/status HTTP/1.1\r\nHost: x\r\nBad\0Header: 1\r\n\r\n",
            "HTTP/1.1 400",
            "malformed_request",
        ),
        (
            b"GET /\xff\xfe HTTP/1.1\r\nHost: x\r\n\r\n",
            "HTTP/1.1 400",
            "malformed_request",
        ),
        (long_uri.as_bytes(), "HTTP/1.1 414", "uri_too_long"),
        (big_headers.as_bytes(), "HTTP/1.1 431", "headers_too_large"),
    ];
    for (request, status, code) in cases {
        let mut stream = TcpStream::connect(&address).await.unwrap();
        // (The server may answer and close before it has read all of a request over its limits.)
        let _ = stream.write_all(request).await;
        let answer = until_closed(&mut stream).await;
        assert!(answer.starts_with(status), "{code}: {answer}");
        let (head, body) = answer.split_once("\r\n\r\n").unwrap();
        assert!(
            head.to_ascii_lowercase()
                .contains("content-type: application/json"),
            "{head}"
        );
        assert_json_error(body, code);
    }
    // The connection loop goes on serving.
    let status = get_json(&server.url("/status")).await;
    assert!(status["healthy"].is_boolean());
}

#[tokio::test(flavor = "multi_thread")]
async fn livez_and_readyz_answer_load_balancers_outside_the_limits() {
    let (relay, server) = start_connected(RelayConfig::default(), &LIMITS).await;
    let root = server.base.trim_end_matches("/api/v1").to_string();
    let client = reqwest::Client::new();
    // A hundred probes in a burst: none is rate limited (the burst is 80).
    for _ in 0..100 {
        let live = client.get(format!("{root}/livez")).send().await.unwrap();
        assert_eq!(live.status(), StatusCode::OK);
        assert_eq!(live.headers()["cache-control"], "no-store");
    }
    let ready = eventually(20, "ready", || async {
        let response = client.get(format!("{root}/readyz")).send().await.unwrap();
        (response.status() == StatusCode::OK).then_some(response)
    })
    .await;
    assert_eq!(
        ready.json::<Value>().await.unwrap(),
        serde_json::json!({ "ready": true, "reasons": [] })
    );
    // Every upgrade refused and every socket dropped: /status says every channel is down, and the process
    // stays ready, since every read still works (readiness is "can serve reads").
    relay.refuse_upgrades(Some(503)).await;
    relay.close_all().await;
    eventually(20, "every channel down in /status", || async {
        let status: Value = client
            .get(server.url("/status"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        status["sources"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["health"] == "down")
            .then_some(())
    })
    .await;
    let ready = client.get(format!("{root}/readyz")).send().await.unwrap();
    assert_eq!(ready.status(), StatusCode::OK);
    assert_eq!(
        ready.json::<Value>().await.unwrap(),
        serde_json::json!({ "ready": true, "reasons": [] })
    );
    // A service that does not ingest is ready without the relay.
    let archive_only = start_server("ws://127.0.0.1:9", &["--no-ingest"]);
    let root = archive_only.base.trim_end_matches("/api/v1");
    let ready = client.get(format!("{root}/readyz")).send().await.unwrap();
    assert_eq!(ready.status(), StatusCode::OK);
}
