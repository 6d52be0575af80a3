//! Live delivery end to end: `/stream` (SSE) and `/ws` on the real server fed by the fake relay, and the
//! promise that matters: from the same cursor, `/reports`, SSE and WebSocket consumers, even ones that drop and
//! resume mid-stream, see exactly the same ids in the same order, with nothing skipped or repeated.

mod support;

use fake_relay::{FakeRelay, RelayConfig};
use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use std::time::Duration;
use support::live::{SseClient, ws_next, ws_url};
use support::{Server, eventually, get_json, page_ids, start_connected};
use tokio_tungstenite::tungstenite::Message;

fn cq_frame(n: u32) -> String {
    format!(
        r#"{{"type":"cq_eew","ID":"{n}","EventID":"2026091010{n:04}_1","ReportTime":"2026-09-10 10:10:25","ReportNum":1,"OriginTime":"2026-09-10 10:10:10","HypoCenter":"重庆荣昌区","Latitude":29.4,"Longitude":105.5,"Magnitude":4.1,"Depth":8,"MaxIntensity":5.9}}"#
    )
}

async fn push_and_wait(relay: &FakeRelay, server: &Server, numbers: std::ops::RangeInclusive<u32>) {
    let last = *numbers.end() as i64;
    for n in numbers {
        relay.push_to("/cq_eew", cq_frame(n).as_bytes()).await;
    }
    eventually(120, "reports archived", || async {
        (get_json(&server.url("/reports?after=0&limit=1")).await["highWater"]
            .as_i64()
            .unwrap()
            >= last)
            .then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sse_replays_from_the_cursor_then_pushes_new_reports() {
    let (relay, server) =
        start_connected(RelayConfig::default(), &["--live-status-secs", "0.5"]).await;
    push_and_wait(&relay, &server, 1..=5).await;

    // No cursor: no history, then what is committed after connecting.
    let mut fresh = SseClient::connect(&server.url("/stream"), None)
        .await
        .unwrap();
    let retry = fresh.next().await.unwrap();
    assert_eq!(retry.retry.as_deref(), Some("3000"), "retry: comes first");
    let ready = fresh.next_event().await.unwrap();
    assert_eq!(ready.event.as_deref(), Some("ready"));
    assert_eq!(ready.id, None, "only report events carry an id");
    assert_eq!(ready.json()["cursor"], 5);
    assert_eq!(ready.json()["highWater"], 5);
    assert_eq!(ready.json()["replaying"], false);

    // `after` replays, and beats Last-Event-ID.
    let mut replay = SseClient::connect(&server.url("/stream?after=2"), Some("4"))
        .await
        .unwrap();
    let ready = replay.next_event().await.unwrap();
    assert_eq!(ready.json()["cursor"], 2);
    assert_eq!(ready.json()["replaying"], true);
    // Last-Event-ID alone resumes after it.
    let mut resumed = SseClient::connect(&server.url("/stream"), Some("4"))
        .await
        .unwrap();
    assert_eq!(resumed.next_event().await.unwrap().json()["cursor"], 4);

    push_and_wait(&relay, &server, 6..=6).await;
    let mut seen = Vec::new();
    while seen.len() < 4 {
        let event = replay.next_event().await.unwrap();
        if event.event.as_deref() == Some("report") {
            let report = event.json();
            assert_eq!(event.id.as_deref(), Some(report["id"].to_string().as_str()));
            assert_eq!(report["source"], "cq");
            assert!(
                report["rawUrl"]
                    .as_str()
                    .unwrap()
                    .starts_with("/api/v1/deliveries/")
            );
            seen.push(report["id"].as_i64().unwrap());
        } else {
            assert_eq!(event.id, None, "only report events carry an id");
        }
    }
    assert_eq!(seen, [3, 4, 5, 6]);
    let report = loop {
        let event = fresh.next_event().await.unwrap();
        if event.event.as_deref() == Some("report") {
            break event;
        }
    };
    assert_eq!(
        report.id.as_deref(),
        Some("6"),
        "the new report, nothing older"
    );
    let after_resume = loop {
        let event = resumed.next_event().await.unwrap();
        if event.event.as_deref() == Some("report") {
            break event;
        }
    };
    assert_eq!(after_resume.id.as_deref(), Some("5"));

    // Status every interval, with each source's health.
    let status = loop {
        let event = fresh.next_event().await.unwrap();
        if event.event.as_deref() == Some("status") {
            break event;
        }
    };
    assert_eq!(status.id, None);
    let sources = status.json()["sources"].as_array().unwrap().clone();
    assert_eq!(sources.len(), 4);
    assert!(sources.iter().all(|s| s["health"].is_string()));

    // A bad cursor is a 400 with the JSON error body.
    for (query, last_event_id) in [
        ("/stream", Some("abc")),
        ("/stream", Some("-1")),
        ("/stream?after=x", None),
        ("/stream?after=9007199254740992", None),
        ("/stream?from=1", None),
    ] {
        let (status, body) = match SseClient::connect(&server.url(query), last_event_id).await {
            Ok(_) => panic!("{query} {last_event_id:?} was accepted"),
            Err(e) => e,
        };
        assert_eq!(status, 400, "{query} {last_event_id:?}");
        let body: Value = serde_json::from_str(&body).unwrap();
        assert!(body["error"].is_string() && body["code"].is_string());
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn websocket_ready_report_status_and_ping() {
    let (relay, server) =
        start_connected(RelayConfig::default(), &["--live-status-secs", "0.5"]).await;
    push_and_wait(&relay, &server, 1..=3).await;

    let (mut ws, response) = tokio_tungstenite::connect_async(ws_url(&server, "?after=1"))
        .await
        .unwrap();
    assert_eq!(response.status(), 101);
    let ready = ws_next(&mut ws).await.unwrap();
    assert_eq!(ready["type"], "ready");
    assert_eq!(ready["cursor"], 1);
    assert_eq!(ready["highWater"], 3);
    ws.send(Message::text("ping")).await.unwrap();
    let mut reports = Vec::new();
    let mut pong = false;
    let mut status = false;
    push_and_wait(&relay, &server, 4..=4).await;
    while reports.len() < 3 || !pong || !status {
        let message = ws_next(&mut ws).await.unwrap();
        match message["type"].as_str().unwrap() {
            "report" => {
                assert_eq!(message["id"], message["data"]["id"]);
                reports.push(message["id"].as_i64().unwrap());
            }
            "pong" => pong = true,
            "status" => {
                assert_eq!(message["sources"].as_array().unwrap().len(), 4);
                status = true;
            }
            other => panic!("unexpected message type {other}"),
        }
    }
    assert_eq!(reports, [2, 3, 4]);

    // Without `after`, the socket starts at the newest cursor.
    let (mut fresh, _) = tokio_tungstenite::connect_async(ws_url(&server, ""))
        .await
        .unwrap();
    assert_eq!(ws_next(&mut fresh).await.unwrap()["cursor"], 4);

    // A message over the consumer limit (64 KiB) closes the socket with 1009, naming the cursor.
    fresh
        .send(Message::text("x".repeat(65 * 1024)))
        .await
        .unwrap();
    let close = loop {
        match fresh.next().await {
            Some(Ok(Message::Close(frame))) => break frame,
            Some(Ok(_)) => continue,
            other => panic!("no close frame: {other:?}"),
        }
    };
    let close = close.expect("a close frame with a code");
    assert_eq!(u16::from(close.code), 1009);
    assert!(
        close.reason.contains("resume after report id 4"),
        "{close:?}"
    );

    // A plain GET and a bad cursor are refused with the JSON error body.
    let plain = reqwest::get(server.url("/ws")).await.unwrap();
    assert_eq!(plain.status(), 400);
    let bad = reqwest::get(server.url("/ws?after=-5")).await.unwrap();
    assert_eq!(bad.status(), 400);
    assert_eq!(bad.json::<Value>().await.unwrap()["code"], "out_of_range");
}

#[tokio::test(flavor = "multi_thread")]
async fn idle_streams_get_keep_alive_comments_and_websocket_pings() {
    let (_relay, server) = start_connected(
        RelayConfig::default(),
        &["--live-keepalive-secs", "0.3", "--live-status-secs", "60"],
    )
    .await;
    let mut sse = SseClient::connect(&server.url("/stream"), None)
        .await
        .unwrap();
    assert_eq!(
        sse.next_event().await.unwrap().event.as_deref(),
        Some("ready")
    );
    for _ in 0..2 {
        let idle = sse.next().await.unwrap();
        assert_eq!(idle.event, None, "{idle:?}");
        assert_eq!(
            idle.comments,
            [""],
            "a bare comment keeps an idle stream alive"
        );
    }

    let (mut ws, _) = tokio_tungstenite::connect_async(ws_url(&server, ""))
        .await
        .unwrap();
    let mut pings = 0;
    while pings < 2 {
        match tokio::time::timeout(Duration::from_secs(10), ws.next()).await {
            Ok(Some(Ok(Message::Ping(_)))) => pings += 1,
            Ok(Some(Ok(Message::Text(text)))) => {
                assert!(text.contains("\"ready\""), "{text}");
            }
            other => panic!("expected protocol pings on an idle socket, got {other:?}"),
        }
    }
    // The client answered each ping (tungstenite does by itself), so the socket is still open.
    ws.send(Message::text("ping")).await.unwrap();
    loop {
        let message = ws_next(&mut ws).await.expect("the socket stays open");
        if message["type"] == "pong" {
            break;
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn connections_past_their_lifetime_close_with_a_reason_naming_the_cursor() {
    let (relay, server) =
        start_connected(RelayConfig::default(), &["--live-max-connection-secs", "1"]).await;
    push_and_wait(&relay, &server, 1..=2).await;
    let mut sse = SseClient::connect(&server.url("/stream?after=0"), None)
        .await
        .unwrap();
    let mut comments = Vec::new();
    while let Some(message) = sse.next().await {
        comments.extend(message.comments);
    }
    assert!(
        comments
            .iter()
            .any(|c| c.contains("resume after report id 2")),
        "{comments:?}"
    );
    let (mut ws, _) = tokio_tungstenite::connect_async(ws_url(&server, "?after=1"))
        .await
        .unwrap();
    let close = loop {
        match tokio::time::timeout(Duration::from_secs(10), ws.next())
            .await
            .unwrap()
        {
            Some(Ok(Message::Close(frame))) => break frame.expect("a close frame with a reason"),
            Some(Ok(_)) => continue,
            other => panic!("socket ended without a close frame: {other:?}"),
        }
    };
    assert!(
        close.reason.contains("resume after report id 2"),
        "{}",
        close.reason
    );
}

/// Reads one line (up to and without its CRLF) of a raw HTTP/1.1 exchange.
async fn read_line(reader: &mut (impl tokio::io::AsyncBufRead + Unpin)) -> String {
    use tokio::io::AsyncBufReadExt;
    let mut line = Vec::new();
    reader.read_until(b'\n', &mut line).await.unwrap();
    let line = String::from_utf8(line).unwrap();
    line.strip_suffix("\r\n")
        .unwrap_or_else(|| panic!("a line ending in CRLF, got {line:?}"))
        .to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stream_written_by_the_hub_is_well_framed_and_ends_with_its_connection() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
    let (relay, server) =
        start_connected(RelayConfig::default(), &["--live-max-connection-secs", "3"]).await;
    push_and_wait(&relay, &server, 1..=2).await;
    let address = server
        .base
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap()
        .to_string();
    let mut connection = BufReader::new(tokio::net::TcpStream::connect(&address).await.unwrap());
    // No cursor: the stream starts caught up, so its socket is lent to the hub from the start.
    connection
        .get_mut()
        .write_all(b"GET /api/v1/stream HTTP/1.1\r\nHost: osds\r\n\r\n")
        .await
        .unwrap();
    assert_eq!(read_line(&mut connection).await, "HTTP/1.1 200 OK");
    let mut headers = Vec::new();
    loop {
        let line = read_line(&mut connection).await;
        if line.is_empty() {
            break;
        }
        headers.push(line.to_ascii_lowercase());
    }
    assert!(
        headers.contains(&"transfer-encoding: chunked".to_string()),
        "{headers:?}"
    );
    assert!(
        headers.contains(&"connection: close".to_string()),
        "{headers:?}"
    );

    let pushing = tokio::spawn(async move {
        for n in 3..=8 {
            relay.push_to("/cq_eew", cq_frame(n).as_bytes()).await;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        relay
    });
    // Every chunk whole, until the last one: what the hub wrote and what hyper wrote alike.
    let mut body = Vec::new();
    loop {
        let size = usize::from_str_radix(&read_line(&mut connection).await, 16).unwrap();
        let mut chunk = vec![0; size + 2];
        connection.read_exact(&mut chunk).await.unwrap();
        assert!(chunk.ends_with(b"\r\n"), "a chunk ends with CRLF");
        if size == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..size]);
    }
    let relay = pushing.await.unwrap();
    let body = String::from_utf8(body).unwrap();
    let mut ids = Vec::new();
    for event in body
        .split("\n\n")
        .filter(|e| e.starts_with("event: report\n"))
    {
        let lines: Vec<&str> = event.lines().collect();
        let data: Value = serde_json::from_str(lines[1].strip_prefix("data: ").unwrap()).unwrap();
        let id: i64 = lines[2].strip_prefix("id: ").unwrap().parse().unwrap();
        assert_eq!(data["id"], id, "{event}");
        ids.push(id);
    }
    assert_eq!(ids, (3..=8).collect::<Vec<i64>>(), "{body}");
    assert!(body.contains("resume after report id 8"), "{body}");

    // The stream took the connection over from hyper, so it closes it: nothing follows the last chunk, not
    // even reports committed after the stream ended.
    push_and_wait(&relay, &server, 9..=11).await;
    let mut rest = Vec::new();
    connection.read_to_end(&mut rest).await.unwrap();
    assert_eq!(String::from_utf8_lossy(&rest), "");
}

/// How a test consumer follows the archive.
#[derive(Clone, Copy, Debug)]
enum Consumer {
    Poll,
    Sse { reconnect_every: Option<usize> },
    Ws { reconnect_every: Option<usize> },
}

/// Follows from `cursor` until it has seen report `last`, reconnecting every few reports when asked, and
/// returns every id it received, in order, duplicates kept.
async fn follow(server_base: String, consumer: Consumer, cursor: i64, last: i64) -> Vec<i64> {
    let url = |path: &str| format!("{server_base}{path}");
    let mut seen: Vec<i64> = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let position = |seen: &Vec<i64>| seen.last().copied().unwrap_or(cursor);
    while position(&seen) < last {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{consumer:?} stalled at {seen:?}"
        );
        match consumer {
            Consumer::Poll => {
                let page =
                    get_json(&url(&format!("/reports?after={}&limit=7", position(&seen)))).await;
                let items = page["items"].as_array().unwrap();
                seen.extend(items.iter().map(|r| r["id"].as_i64().unwrap()));
                if items.is_empty() {
                    tokio::time::sleep(Duration::from_millis(30)).await;
                }
            }
            Consumer::Sse { reconnect_every } => {
                // The first connection names the cursor with `after`; resumptions use Last-Event-ID as a browser does.
                let mut client = if seen.is_empty() {
                    SseClient::connect(&url(&format!("/stream?after={cursor}")), None).await
                } else {
                    SseClient::connect(&url("/stream"), Some(&position(&seen).to_string())).await
                }
                .unwrap();
                let mut this_connection = 0;
                while let Some(event) = client.next_event().await {
                    if event.event.as_deref() == Some("report") {
                        seen.push(event.id.unwrap().parse().unwrap());
                        this_connection += 1;
                        if position(&seen) >= last || reconnect_every == Some(this_connection) {
                            break;
                        }
                    }
                }
            }
            Consumer::Ws { reconnect_every } => {
                let ws_url =
                    url(&format!("/ws?after={}", position(&seen))).replacen("http://", "ws://", 1);
                let (mut ws, _) = tokio_tungstenite::connect_async(ws_url).await.unwrap();
                let mut this_connection = 0;
                while let Some(message) = ws_next(&mut ws).await {
                    if message["type"] == "report" {
                        seen.push(message["id"].as_i64().unwrap());
                        this_connection += 1;
                        if position(&seen) >= last || reconnect_every == Some(this_connection) {
                            break;
                        }
                    }
                }
                let _ = ws.close(None).await;
            }
        }
    }
    seen
}

#[tokio::test(flavor = "multi_thread")]
async fn polling_sse_and_websocket_consumers_see_the_same_ids_while_reports_arrive() {
    let (relay, server) =
        start_connected(RelayConfig::default(), &["--live-replay-rate", "400"]).await;
    push_and_wait(&relay, &server, 1..=30).await;

    const LAST: i64 = 120;
    const CURSOR: i64 = 7;
    let pusher = tokio::spawn(async move {
        for n in 31..=LAST as u32 {
            relay.push("cq_eew", cq_frame(n).as_bytes()).await;
            tokio::time::sleep(Duration::from_millis(15)).await;
        }
        relay
    });
    let consumers = [
        Consumer::Poll,
        Consumer::Sse {
            reconnect_every: None,
        },
        Consumer::Sse {
            reconnect_every: Some(9),
        },
        Consumer::Ws {
            reconnect_every: None,
        },
        Consumer::Ws {
            reconnect_every: Some(13),
        },
    ];
    let followers: Vec<_> = consumers
        .iter()
        .map(|&consumer| tokio::spawn(follow(server.url(""), consumer, CURSOR, LAST)))
        .collect();
    let mut results = Vec::new();
    for (consumer, follower) in consumers.iter().zip(followers) {
        // A consumer that misses an id waits for it forever (keep-alives keep its socket busy): bound it.
        match tokio::time::timeout(Duration::from_secs(90), follower).await {
            Ok(ids) => results.push(ids.unwrap()),
            Err(_) => panic!("{consumer:?} never received every id up to {LAST}"),
        }
    }
    let _relay = pusher.await.unwrap();

    let expected: Vec<i64> = (CURSOR + 1..=LAST).collect();
    for (consumer, ids) in consumers.iter().zip(&results) {
        assert_eq!(
            ids, &expected,
            "{consumer:?}: every id after the cursor, once, in order"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_websocket_that_stops_reading_is_disconnected_and_an_sse_stream_is_waited_for() {
    let (relay, mut server) = start_connected(
        RelayConfig::default(),
        &[
            "--live-replay-rate",
            "1000000",
            "--live-slow-consumer-secs",
            "1",
            "--shutdown-grace-secs",
            "2",
        ],
    )
    .await;
    // More than the kernel's socket buffers and the WebSocket's write buffer hold between them.
    const TOTAL: i64 = 12_000;
    push_and_wait(&relay, &server, 1..=TOTAL as u32).await;

    // A WebSocket client with a tiny receive window that reads nothing for a while.
    let address = server
        .base
        .trim_start_matches("http://")
        .trim_end_matches("/api/v1")
        .parse()
        .unwrap();
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(2048).unwrap();
    let stream = socket.connect(address).await.unwrap();
    let (mut slow, _) = tokio_tungstenite::client_async(ws_url(&server, "?after=0"), stream)
        .await
        .unwrap();
    // An SSE consumer that reads nothing for as long.
    let mut slow_sse = SseClient::connect(&server.url("/stream?after=0"), None)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(4)).await;

    // It gets what was already on its way, in order, and then the server has closed the connection.
    let mut ids: Vec<i64> = Vec::new();
    let mut last_report = tokio::time::Instant::now();
    loop {
        assert!(
            last_report.elapsed() < Duration::from_secs(20),
            "the slow consumer was never disconnected ({} reports read)",
            ids.len()
        );
        match tokio::time::timeout(Duration::from_secs(20), slow.next()).await {
            Ok(Some(Ok(Message::Text(text)))) => {
                let message: Value = serde_json::from_str(&text).unwrap();
                if message["type"] == "report" {
                    ids.push(message["id"].as_i64().unwrap());
                    last_report = tokio::time::Instant::now();
                }
            }
            Ok(Some(Ok(Message::Close(_)))) | Ok(None) | Ok(Some(Err(_))) => break,
            Ok(Some(Ok(_))) => continue,
            Err(_) => panic!(
                "the slow consumer was never disconnected ({} reports read)",
                ids.len()
            ),
        }
    }
    assert!(!ids.is_empty());
    assert!(
        (ids.len() as i64) < TOTAL,
        "disconnected before the backlog was delivered"
    );
    assert_eq!(
        ids,
        (1..=ids.len() as i64).collect::<Vec<_>>(),
        "in order, nothing skipped"
    );

    // It resumes from its cursor.
    let last = *ids.last().unwrap();
    let (mut resumed, _) =
        tokio_tungstenite::connect_async(ws_url(&server, &format!("?after={last}")))
            .await
            .unwrap();
    assert_eq!(ws_next(&mut resumed).await.unwrap()["cursor"], last);
    let next = loop {
        let message = ws_next(&mut resumed).await.unwrap();
        if message["type"] == "report" {
            break message;
        }
    };
    assert_eq!(next["id"], last + 1);

    // The SSE stream was not dropped: it goes on at the consumer's pace, in order, nothing skipped.
    let mut sse_ids = Vec::new();
    while sse_ids.len() < TOTAL as usize {
        let event = slow_sse
            .next_event()
            .await
            .unwrap_or_else(|| panic!("the SSE stream ended after {} reports", sse_ids.len()));
        if event.event.as_deref() == Some("report") {
            sse_ids.push(event.id.unwrap().parse::<i64>().unwrap());
        }
    }
    assert_eq!(sse_ids, (1..=TOTAL).collect::<Vec<_>>());

    // A consumer that reads nothing does not hold a shutdown beyond its grace.
    let _stuck = SseClient::connect(&server.url("/stream?after=0"), None)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    server.stop().await;
    assert!(server.log().contains("closing them"), "{}", server.log());
}

/// The ids stored by the example client, in order.
fn stored_ids(store: &std::path::Path) -> Vec<i64> {
    std::fs::read_to_string(store)
        .unwrap_or_default()
        .lines()
        .map(|line| {
            serde_json::from_str::<Value>(line).unwrap()["id"]
                .as_i64()
                .unwrap()
        })
        .collect()
}

fn saved_cursor(path: &std::path::Path) -> Value {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or(Value::Null)
}

/// The server ends every stream after a second: the example reconnects from its cursor each time.
const EXAMPLE_SERVER_ARGS: &[&str] = &["--live-max-connection-secs", "1"];

/// A client example (`program args… example`) through forced disconnects, a restart of the server, a restart
/// of the example and a cursor of another archive: it stores every report once, in order, and its cursor
/// follows.
async fn an_example_follows_resumes_and_recovers(program: &std::path::Path, example: &str) {
    let (relay, server) = start_connected(RelayConfig::default(), EXAMPLE_SERVER_ARGS).await;
    support::wait_queries_done(&relay).await;
    push_and_wait(&relay, &server, 1..=3).await;
    let dir = support::tempdir("client-example");
    let (cursor, store) = (dir.join("cursor.json"), dir.join("reports.jsonl"));
    // A cursor of another archive, far ahead of this one's: the example is told (409) and starts again here.
    std::fs::write(&cursor, r#"{"cursor": 1000000, "archiveId": "another"}"#).unwrap();
    let example = support::tests_dir().join("../examples").join(example);
    // The restarted server answers at the same address.
    let base = server.base.clone();
    let run = |reports: u32| {
        tokio::process::Command::new(program)
            .arg(&example)
            .arg(&base)
            .arg("--cursor")
            .arg(&cursor)
            .arg("--store")
            .arg(&store)
            .args(["--max-reports", &reports.to_string()])
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("run {}: {e}", program.display()))
    };
    let mut first = run(4);
    eventually(30, "the example positioned on this archive", || async {
        (saved_cursor(&cursor)["cursor"] == 3).then_some(())
    })
    .await;
    for n in 4..=5 {
        relay.push_to("/cq_eew", cq_frame(n).as_bytes()).await;
        tokio::time::sleep(Duration::from_millis(400)).await;
    }
    eventually(30, "two reports stored", || async {
        (stored_ids(&store).len() == 2).then_some(())
    })
    .await;

    // The server restarts under it (same archive, same address): the example retries, backing off, and
    // resumes from its cursor.
    let mut server = server;
    server.stop().await;
    let address = server
        .base
        .trim_start_matches("http://")
        .trim_end_matches("/api/v1")
        .to_owned();
    let server = support::launch(server.into_dir(), &relay.url(), EXAMPLE_SERVER_ARGS)
        .listen(address)
        .start()
        .unwrap_or_else(|e| panic!("{e:#}"))
        .removing_dir();
    for path in fake_relay::channel_paths() {
        assert!(
            relay.wait_connected(path, 1, Duration::from_secs(20)).await,
            "the restarted server never connected {path}"
        );
    }
    for n in 6..=7 {
        relay.push_to("/cq_eew", cq_frame(n).as_bytes()).await;
        tokio::time::sleep(Duration::from_millis(400)).await;
    }
    let status = tokio::time::timeout(Duration::from_secs(60), first.wait())
        .await
        .expect("the example stored four reports")
        .unwrap();
    assert!(status.success());
    assert_eq!(stored_ids(&store), [4, 5, 6, 7]);
    let archive_id = get_json(&server.url("/status")).await["archiveId"].clone();
    assert_eq!(
        saved_cursor(&cursor),
        serde_json::json!({ "cursor": 7, "archiveId": archive_id })
    );

    // Started again, it resumes after the last report it stored: nothing repeated, nothing skipped.
    push_and_wait(&relay, &server, 8..=9).await;
    let status = tokio::time::timeout(Duration::from_secs(60), run(2).wait())
        .await
        .expect("the example stored two more")
        .unwrap();
    assert!(status.success());
    assert_eq!(stored_ids(&store), [4, 5, 6, 7, 8, 9]);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_python_example_follows_resumes_and_recovers_from_a_cursor_of_another_archive() {
    // The Python of the conformance test's virtual environment, which the project's setup installs.
    let python = support::schemathesis().with_file_name("python3");
    an_example_follows_resumes_and_recovers(&python, "follow.py").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_node_example_follows_resumes_and_recovers_from_a_cursor_of_another_archive() {
    let installed = std::process::Command::new("bash")
        .arg(support::tests_dir().join("../.ci/install-node"))
        .status()
        .expect("run .ci/install-node");
    assert!(installed.success(), ".ci/install-node failed");
    an_example_follows_resumes_and_recovers(std::path::Path::new("node"), "follow.mjs").await;
}

fn sc_frame(n: u32) -> String {
    format!(
        r#"{{"type":"sc_eew","ID":{n},"EventID":"2026091011{n:04}.0001_1","ReportTime":"2026-09-10 11:00:00","ReportNum":1,"OriginTime":"2026-09-10 10:59:50","HypoCenter":"四川内江市隆昌市","Latitude":29.239,"Longitude":105.227,"Magunitude":4.2,"Depth":10,"MaxIntensity":5.0}}"#
    )
}

/// Pushes one frame and waits until it is report `id`, so ids alternate between channels as pushed.
async fn push_as(relay: &FakeRelay, server: &Server, path: &str, frame: String, id: i64) {
    relay.push_to(path, frame.as_bytes()).await;
    eventually(60, "the report archived", || async {
        (get_json(&server.url("/reports?limit=1")).await["highWater"] == id).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_source_filter_follows_some_channels_on_the_global_cursor() {
    let (relay, server) = start_connected(RelayConfig::default(), &[]).await;
    // Odd ids are cq reports, even ids sc reports.
    for n in 1..=3 {
        push_as(
            &relay,
            &server,
            "/cq_eew",
            cq_frame(n),
            2 * i64::from(n) - 1,
        )
        .await;
        push_as(&relay, &server, "/sc_eew", sc_frame(n), 2 * i64::from(n)).await;
    }
    let page = async |query: &str| get_json(&server.url(&format!("/reports?{query}"))).await;
    let sc = page("source=sc").await;
    assert_eq!(page_ids(&sc), [2, 4, 6]);
    assert!(
        sc["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["source"] == "sc")
    );
    assert_eq!(sc["nextCursor"], 6);
    let first = page("source=sc&limit=2").await;
    assert_eq!(
        (page_ids(&first), first["nextCursor"].clone()),
        (vec![2, 4], 4.into())
    );
    // Not full: everything up to the horizon was looked at.
    let rest = page("source=cq&after=5&limit=2").await;
    assert_eq!(
        (page_ids(&rest), rest["nextCursor"].clone()),
        (vec![], 6.into())
    );
    assert_eq!(
        page_ids(&page("source=cq,sc&after=1").await),
        [2, 3, 4, 5, 6]
    );
    let refused = reqwest::get(server.url("/reports?source=sc,zz"))
        .await
        .unwrap();
    assert_eq!(refused.status(), 400);

    // The backlog replayed, filtered; then new reports pushed by the hub, filtered.
    let mut sse = SseClient::connect(&server.url("/stream?source=sc&after=0"), None)
        .await
        .unwrap();
    let (mut ws, _) = tokio_tungstenite::connect_async(ws_url(&server, "?source=cq&after=0"))
        .await
        .unwrap();
    let mut next_sse = async || loop {
        let event = sse.next_event().await.expect("the stream goes on");
        if event.event.as_deref() == Some("report") {
            break event.id.unwrap().parse::<i64>().unwrap();
        }
    };
    for id in [2, 4, 6] {
        assert_eq!(next_sse().await, id);
    }
    let mut ws_ids = Vec::new();
    while ws_ids.len() < 3 {
        let message = ws_next(&mut ws).await.expect("the socket stays open");
        if message["type"] == "report" {
            ws_ids.push(message["id"].as_i64().unwrap());
        }
    }
    assert_eq!(ws_ids, [1, 3, 5]);
    // (A filter's event total is counted once per horizon, and the list's validator is the horizon's: a new
    // event is in the next total, and the old validator no longer matches.)
    let cq_events = async || get_json(&server.url("/events?source=cq")).await["total"].clone();
    let revalidate = async |etag: &str| {
        let response = reqwest::Client::new()
            .get(server.url("/events?source=cq"))
            .header("If-None-Match", etag)
            .send()
            .await
            .unwrap();
        let etag = response.headers()["etag"].to_str().unwrap().to_owned();
        (response.status().as_u16(), etag)
    };
    // A text search's matches are kept per horizon too: the new event is found, and the newest comes first.
    let first_and_total = async |query: &str| {
        let page = get_json(&server.url(&format!("/events?{query}&limit=1"))).await;
        (page["total"].clone(), page["items"][0]["id"].clone())
    };
    // Every cq event here is at 荣昌.
    let searched = async || {
        let found = first_and_total("q=%E8%8D%A3%E6%98%8C").await;
        assert_eq!(found, first_and_total("source=cq").await);
        found.0
    };
    assert_eq!(cq_events().await, 3);
    assert_eq!(searched().await, 3);
    let (_, etag) = revalidate("\"none\"").await;
    assert_eq!(revalidate(&etag).await, (304, etag.clone()));
    assert_eq!(cq_events().await, 3);
    push_as(&relay, &server, "/cq_eew", cq_frame(4), 7).await;
    assert_eq!(cq_events().await, 4);
    assert_eq!(searched().await, 4);
    let (status, newer) = revalidate(&etag).await;
    assert_eq!(status, 200, "a new event: the list changed");
    assert_ne!(newer, etag);
    push_as(&relay, &server, "/sc_eew", sc_frame(4), 8).await;
    assert_eq!(next_sse().await, 8, "the cq report is passed over");
    let next = loop {
        let message = ws_next(&mut ws).await.unwrap();
        if message["type"] == "report" {
            break message;
        }
    };
    assert_eq!(
        (next["id"].clone(), next["data"]["source"].clone()),
        (7.into(), "cq".into())
    );

    let refused = SseClient::connect(&server.url("/stream?source=zz"), None).await;
    assert_eq!(refused.err().map(|(status, _)| status), Some(400));
    let refused = tokio_tungstenite::connect_async(ws_url(&server, "?source=")).await;
    assert!(
        refused.is_err(),
        "an empty filter is refused before the upgrade"
    );
}
