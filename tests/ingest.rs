//! Ingestion end to end: the real `osds serve` against the fake relay over real sockets, into a real SQLite file,
//! observed through the public API.

mod support;

use fake_relay::{FakeRelay, RelayConfig};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::time::Duration;
use support::{
    Server, all_reports, eventually, get_json, raw_bytes, start_connected, start_server,
    start_server_in, wait_queries_done,
};

fn sc_frame(origin: &str, revision: i64, magnitude: f64) -> String {
    format!(
        r#"{{"type":"sc_eew","ID":{revision},"EventID":"{origin}.0001_{revision}","ReportTime":"2026-08-28 13:13:5{revision}","ReportNum":{revision},"OriginTime":"2026-08-28 13:13:34","HypoCenter":"四川内江市隆昌市","Latitude":29.239,"Longitude":105.227,"Magunitude":{magnitude},"Depth":0.0,"MaxIntensity":7.1}}"#
    )
}

fn cq_frame(event: &str, revision: i64) -> String {
    format!(
        r#"{{"type":"cq_eew","ID":"{revision}","EventID":"{event}_{revision}","ReportTime":"2026-09-10 10:10:25","ReportNum":{revision},"OriginTime":"2026-09-10 10:10:10","HypoCenter":"重庆荣昌区","Latitude":29.4,"Longitude":105.5,"Magnitude":4.1,"Depth":8,"MaxIntensity":5.9}}"#
    )
}

async fn archive(server: &Server) -> Value {
    get_json(&server.url("/status")).await["archive"].clone()
}

async fn wait_archive(server: &Server, what: &str, check: impl Fn(&Value) -> bool) -> Value {
    eventually(20, what, || async {
        let archive = archive(server).await;
        check(&archive).then_some(archive)
    })
    .await
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

#[tokio::test(flavor = "multi_thread")]
async fn versions_are_deduplicated_across_sockets_and_raw_bytes_kept_exactly() {
    let (relay, server) = start_connected(
        RelayConfig::default(),
        &["--upstream-query-window-secs", "0.3"],
    )
    .await;
    wait_queries_done(&relay).await;
    let first = sc_frame("202608281313", 1, 5.2);

    // One push reaches /sc_eew and /all_eew: two deliveries, one version.
    assert_eq!(relay.push("sc_eew", first.as_bytes()).await, 2);
    wait_archive(&server, "two deliveries of one version", |a| {
        a["deliveries"] == 2 && a["versions"] == 1
    })
    .await;

    // The same bytes again on one socket, and the same content re-ordered on the other: duplicates only.
    relay.push_to("/sc_eew", first.as_bytes()).await;
    let reordered: Value = serde_json::from_str(&first).unwrap();
    let mut fields: Vec<(String, Value)> =
        reordered.as_object().unwrap().clone().into_iter().collect();
    fields.reverse();
    let reordered = serde_json::to_string(&serde_json::Map::from_iter(fields))
        .unwrap()
        .replace(",", ", ");
    assert_ne!(reordered, first);
    relay.push_to("/all_eew", reordered.as_bytes()).await;
    let counts = wait_archive(&server, "four deliveries", |a| a["deliveries"] == 4).await;
    assert_eq!(counts["versions"], 1);
    assert_eq!(counts["duplicates"], 3);
    assert_eq!(counts["rawPayloads"], 2, "two distinct byte sequences");

    // A new revision, a content change within revision 1, and revision 4 (leaving 3 missing).
    relay
        .push("sc_eew", sc_frame("202608281313", 2, 5.3).as_bytes())
        .await;
    let changed = sc_frame("202608281313", 1, 5.1);
    relay.push("sc_eew", changed.as_bytes()).await;
    relay
        .push("sc_eew", sc_frame("202608281313", 4, 5.4).as_bytes())
        .await;
    wait_archive(&server, "four versions", |a| {
        a["versions"] == 4 && a["deliveries"] == 10
    })
    .await;

    let reports = all_reports(&server).await;
    let ids: Vec<i64> = reports.iter().map(|r| r["id"].as_i64().unwrap()).collect();
    assert_eq!(
        ids,
        vec![1, 2, 3, 4],
        "cursor ids are gap-free in commit order"
    );
    for report in &reports {
        assert_eq!(report["source"], "sc");
        assert_eq!(report["depthKm"], Value::Null);
        let raw = reqwest::get(
            server.url(
                &report["rawUrl"]
                    .as_str()
                    .unwrap()
                    .replacen("/api/v1", "", 1),
            ),
        )
        .await
        .unwrap();
        assert_eq!(raw.headers()["content-type"], "application/octet-stream");
        let header_hash = raw.headers()["x-content-sha256"]
            .to_str()
            .unwrap()
            .to_string();
        let bytes = raw.bytes().await.unwrap();
        assert_eq!(header_hash, sha256_hex(&bytes));
    }
    let first_raw = raw_bytes(&server, reports[0]["deliveryId"].as_i64().unwrap()).await;
    assert_eq!(
        first_raw.as_ref(),
        first.as_bytes(),
        "raw bytes are exactly what the relay sent"
    );

    let event_id = reports[0]["eventKey"].as_str().unwrap().to_string();
    let event = get_json(&server.url(&format!("/events/{event_id}"))).await;
    assert_eq!(event["reportCount"], 4);
    assert_eq!(event["missingRevisions"], serde_json::json!([3]));
    let revisions: Vec<i64> = event["reports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["revision"].as_i64().unwrap())
        .collect();
    assert_eq!(
        revisions,
        vec![1, 1, 2, 4],
        "all versions in revision order, both versions of revision 1"
    );
    assert_eq!(event["latest"]["revision"], 4);

    let deliveries =
        get_json(&server.url(&format!("/events/{event_id}/deliveries?limit=1000"))).await;
    let items = deliveries["items"].as_array().unwrap();
    assert_eq!(items.len(), 10, "duplicates included");
    let markers: std::collections::BTreeSet<&str> = items
        .iter()
        .map(|d| d["marker"].as_str().unwrap())
        .collect();
    assert!(
        markers.contains("primary-websocket-push") && markers.contains("redundant-websocket-push"),
        "{markers:?}"
    );
    assert_eq!(
        items
            .iter()
            .filter(|d| d["outcome"] == "new-version")
            .count(),
        4
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn garbage_other_channels_arrays_and_heartbeats() {
    let config = RelayConfig {
        heartbeat_every: Some(Duration::from_millis(100)),
        ..RelayConfig::default()
    };
    let (relay, server) = start_connected(config, &[]).await;

    relay.push_to("/sc_eew", b"\xff\xfe not json").await;
    relay
        .push_to("/all_eew", br#"{"type":"sc_eew","EventID":"#)
        .await;
    relay
        .push_to(
            "/all_eew",
            br#"{"type":"jma_eew","EventID":"20260101000000","Serial":1}"#,
        )
        .await;
    let array = format!(
        "[{},{}]",
        cq_frame("20260910101010", 1),
        cq_frame("20260910101010", 2)
    );
    relay.push_to("/all_eew", array.as_bytes()).await;
    let counts = wait_archive(&server, "garbage, ignored and array frames", |a| {
        a["deliveries"] == 5
    })
    .await;
    assert_eq!(counts["unparsed"], 2);
    assert_eq!(counts["ignored"], 1);
    assert_eq!(
        counts["versions"], 2,
        "each element of an array frame is decoded"
    );
    // Heartbeats arrived every 100 ms on five sockets and none was archived.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(archive(&server).await["deliveries"], 5);

    let status = get_json(&server.url("/status")).await;
    assert_eq!(status["healthy"], true);
    let sc = status["sources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["source"] == "sc")
        .unwrap()
        .clone();
    assert_eq!(sc["health"], "ok");
    assert!(
        sc["lastReceivedAt"].is_string(),
        "garbage on /sc_eew still counts as a reception of sc"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn frames_the_archive_cannot_hold_as_decoded_are_kept_as_unstorable_and_nothing_waits() {
    let (relay, server) = start_connected(RelayConfig::default(), &[]).await;
    // Valid JSON a database cannot index or hold as text: a NUL in the event id (PostgreSQL refuses it in a
    // text column), an id of 5,000 bytes (over a B-tree entry's limit); then a text frame that is not UTF-8,
    // and a plain report after them all, on the same socket.
    let nul = cq_frame("2026091010\\u00001010", 1);
    let long = cq_frame(&"9".repeat(5000), 1);
    let not_utf8 = b"{\"type\":\"cq_eew\",\"EventID\":\"\xff\xfe\"}".to_vec();
    let plain = cq_frame("20260910101010", 1);
    assert!(nul.contains("\\u0000"));
    relay.push_to("/cq_eew", nul.as_bytes()).await;
    relay.push_to("/cq_eew", long.as_bytes()).await;
    assert_eq!(relay.push_text_to("/cq_eew", &not_utf8).await, 1);
    relay.push_to("/cq_eew", plain.as_bytes()).await;
    let counts = wait_archive(&server, "four deliveries, one version", |a| {
        a["deliveries"] == 4 && a["versions"] == 1
    })
    .await;
    assert_eq!(counts["unparsed"], 3);
    assert_eq!(
        counts["unparsedByReason"],
        serde_json::json!({"malformed": 1, "unstorable": 2})
    );
    for (delivery, sent) in [
        nul.as_bytes(),
        long.as_bytes(),
        not_utf8.as_slice(),
        plain.as_bytes(),
    ]
    .into_iter()
    .enumerate()
    {
        assert_eq!(
            raw_bytes(&server, delivery as i64 + 1).await.as_ref(),
            sent,
            "delivery {} kept byte for byte",
            delivery + 1
        );
    }
    let status = get_json(&server.url("/status")).await;
    assert_eq!(status["writes"]["failure"], Value::Null, "{status}");
    assert_eq!(status["writes"]["queuedFrames"], 0);
    assert_eq!(
        relay.connection_count("/cq_eew").await,
        1,
        "the text frame that is not UTF-8 did not drop the socket"
    );
    let reports = all_reports(&server).await;
    assert_eq!(reports.len(), 1);
    assert_eq!(reports[0]["deliveryId"], 4);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_query_reply_on_connect_is_marked_query_or_push() {
    let relay = FakeRelay::start(RelayConfig::default()).await.unwrap();
    let latest = r#"{"type":"fj_eew","EventID":"20241027182139_1","ReportTime":"2024-10-27 18:22:09","ReportNum":1,"OriginTime":"2024-10-27 18:21:43","HypoCenter":"台湾花莲县附近海域","Latitude":23.92,"Longitude":121.8,"Magunitude":5.8,"isFinal":false}"#;
    relay.set_latest("query_fjeew", latest.as_bytes()).await;
    let server = start_server(&relay.url(), &[]);
    let counts = wait_archive(&server, "the query replies from both sockets", |a| {
        a["deliveries"] == 2
    })
    .await;
    assert_eq!(counts["versions"], 1);
    let received = relay.received().await;
    assert!(
        received.contains(&("/fj_eew".to_string(), "query_fjeew".to_string())),
        "{received:?}"
    );
    assert!(
        received.contains(&("/all_eew".to_string(), "query_fjeew".to_string())),
        "{received:?}"
    );
    let reports = all_reports(&server).await;
    let deliveries = get_json(&server.url(&format!(
        "/events/{}/deliveries",
        reports[0]["eventKey"].as_str().unwrap()
    )))
    .await;
    for delivery in deliveries["items"].as_array().unwrap() {
        assert_eq!(
            delivery["marker"],
            "primary/redundant-websocket-query-or-push"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn silence_reconnects_and_a_refusing_upstream_is_an_outage() {
    // The relay also sends WebSocket protocol pings, several per silence timeout: they keep TCP alive, but
    // they are not messages.
    let config = RelayConfig {
        heartbeat_every: None,
        heartbeat_on_connect: false,
        protocol_pings_every: Some(Duration::from_millis(200)),
    };
    let (relay, server) = start_connected(config, &[]).await;

    // Pings keep a quiet connection alive: after several silence timeouts' worth, still one connection.
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(
        relay.connection_count("/sc_eew").await,
        1,
        "pongs keep the connection alive"
    );

    // A relay that sends no message (only protocol pings) is left after the silence timeout.
    relay.set_silent(true).await;
    eventually(20, "a reconnect after silence", || async {
        (relay.connection_count("/sc_eew").await >= 2).then_some(())
    })
    .await;
    relay.set_silent(false).await;

    // Every upgrade refused with 503 and every socket dropped: each channel is out.
    relay.refuse_upgrades(Some(503)).await;
    relay.close_all().await;
    let status = eventually(20, "all sources down", || async {
        let status = get_json(&server.url("/status")).await;
        let sources = status["sources"].as_array().unwrap();
        sources
            .iter()
            .all(|s| s["health"] == "down" && s["currentOutage"]["startedAt"].is_string())
            .then_some(status)
    })
    .await;
    assert_eq!(status["healthy"], false);
    // Reasons are codes, never a library's words.
    let sessions = status["connections"].to_string();
    assert!(sessions.contains("\"silence\""), "{sessions}");
    eventually(20, "every socket refused by status", || async {
        let status = get_json(&server.url("/status")).await;
        status["upstreamSockets"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["lastError"] == "upgrade_refused")
            .then_some(())
    })
    .await;
    let before = relay.connection_count("/sc_eew").await;

    // Upgrades accepted again: reconnected within the capped back-off, the outage closed.
    relay.refuse_upgrades(None).await;
    eventually(20, "sources back", || async {
        let status = get_json(&server.url("/status")).await;
        let sources = status["sources"].as_array().unwrap();
        sources
            .iter()
            .all(|s| s["health"] == "ok" && s["currentOutage"].is_null())
            .then_some(())
    })
    .await;
    assert!(relay.connection_count("/sc_eew").await > before);
    let status = get_json(&server.url("/status")).await;
    let closed = status["outages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["source"] == "sc" && o["endedAt"].is_string())
        .count();
    assert!(
        closed >= 2,
        "the start-up outage and the refusal outage are recorded and closed: {}",
        status["outages"]
    );
    // Each says why it began (newest first): the socket that carried the channel last and its end's code, and
    // first of all the start.
    let reasons: Vec<&str> = status["outages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["source"] == "sc")
        .map(|o| o["reason"].as_str().unwrap())
        .collect();
    let (first, later) = reasons.split_last().unwrap();
    assert_eq!(*first, "service started; not yet connected", "{reasons:?}");
    let codes = [
        "silence",
        "connection_lost",
        "closed_by_upstream",
        "upgrade_refused",
    ];
    assert!(
        later.iter().all(|r| {
            let (path, code) = r.split_once(": ").unwrap_or_default();
            ["/sc_eew", "/all_eew"].contains(&path) && codes.contains(&code)
        }),
        "{reasons:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_killed_server_keeps_every_committed_frame_intact_without_gaps_or_duplicates() {
    let (relay, mut server) = start_connected(RelayConfig::default(), &[]).await;
    let frames: Vec<String> = (1..=300)
        .map(|n| cq_frame(&format!("2026091010{n:04}"), 1))
        .collect();
    let pusher = {
        let frames = frames.clone();
        async move {
            for frame in &frames {
                relay.push("cq_eew", frame.as_bytes()).await;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            relay
        }
    };
    let pushing = tokio::spawn(pusher);
    eventually(30, "some versions archived", || async {
        (archive(&server).await["versions"].as_i64().unwrap() >= 40).then_some(())
    })
    .await;
    server.kill();
    let relay = pushing.await.unwrap();

    let server = start_server_in(server.into_dir(), &relay.url(), &[]);
    let reports = all_reports(&server).await;
    assert!(reports.len() >= 40, "{} versions survived", reports.len());
    let ids: Vec<i64> = reports.iter().map(|r| r["id"].as_i64().unwrap()).collect();
    assert_eq!(
        ids,
        (1..=reports.len() as i64).collect::<Vec<_>>(),
        "no gap in ids"
    );
    let mut seen = std::collections::HashSet::new();
    for report in &reports {
        assert!(
            seen.insert(report["upstreamEventId"].as_str().unwrap().to_string()),
            "duplicated version {report}"
        );
        let raw = reqwest::get(server.url(&format!("/deliveries/{}/raw", report["deliveryId"])))
            .await
            .unwrap();
        let hash = raw.headers()["x-content-sha256"]
            .to_str()
            .unwrap()
            .to_string();
        let bytes = raw.bytes().await.unwrap();
        assert_eq!(hash, sha256_hex(&bytes));
        assert!(
            frames.iter().any(|f| f.as_bytes() == bytes.as_ref()),
            "stored bytes are exactly a pushed frame"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_time_a_killed_service_was_down_is_an_outage_of_every_channel_it_held() {
    let launched_at = osds_time::now_rfc3339();
    let (relay, mut server) = start_connected(RelayConfig::default(), &[]).await;
    let sources = |status: &Value| status["sources"].as_array().unwrap().clone();
    let healthy = |server: &Server| {
        let url = server.url("/status");
        async move {
            eventually(20, "every channel up", || async {
                let status = get_json(&url).await;
                sources(&status)
                    .iter()
                    .all(|s| s["health"] == "ok")
                    .then_some(status)
            })
            .await
        }
    };
    healthy(&server).await;
    server.kill();
    let killed_at = osds_time::now_rfc3339();
    let server = start_server_in(server.into_dir(), &relay.url(), &[]);
    let status = healthy(&server).await;
    let outages = status["outages"].as_array().unwrap();
    for source in sources(&status) {
        let source = source["source"].as_str().unwrap();
        // The outage that covers the kill: begun while the killed process ran, ended since the restart.
        let covering: Vec<&Value> = outages
            .iter()
            .filter(|o| {
                o["source"] == source && o["startedAt"].as_str().unwrap() <= killed_at.as_str()
            })
            .filter(|o| {
                o["endedAt"]
                    .as_str()
                    .is_some_and(|end| end >= killed_at.as_str())
            })
            .collect();
        assert_eq!(covering.len(), 1, "{source}: {outages:?}");
        let started = covering[0]["startedAt"].as_str().unwrap();
        assert!(started >= launched_at.as_str(), "{source}: {started}");
    }
    // The killed process's sessions end when it was last alive, not at the restart.
    let connections = status["connections"].as_array().unwrap();
    let interrupted: Vec<&Value> = connections
        .iter()
        .filter(|c| c["endReason"] == "interrupted")
        .collect();
    assert!(!interrupted.is_empty(), "{connections:?}");
    for session in interrupted {
        assert!(
            session["endedAt"].as_str().unwrap() <= killed_at.as_str(),
            "{session}"
        );
    }
}

/// A cq report made `padding` bytes larger by a field the decoder does not read: more than the archive's WAL
/// holds, so archiving it must grow a file.
fn big_cq_frame(event: &str, revision: i64, padding: usize) -> String {
    let frame = cq_frame(event, revision);
    format!(
        r#"{},"Padding":"{}"}}"#,
        frame.trim_end_matches('}'),
        "x".repeat(padding)
    )
}

/// Fills the file system at `dir` (as the server's process sees it) with one file, until it is full.
fn fill(dir: &std::path::Path) -> std::path::PathBuf {
    use std::io::Write;
    let path = dir.join("filler");
    let mut file = std::fs::File::create(&path).unwrap();
    let block = vec![0u8; 64 << 10];
    loop {
        match file.write_all(&block) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(28) => return path,
            Err(e) => panic!("filling {}: {e}", dir.display()),
        }
    }
}

async fn writes(server: &Server) -> Value {
    get_json(&server.url("/status")).await["writes"].clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_full_disk_holds_frames_in_order_until_there_is_room_and_sigterm_still_stops() {
    if support::database::on_postgres() {
        // The disk under the SQLite file fills. On PostgreSQL the same holding of received frames is checked
        // with the database server stopped (tests/several.rs).
        return;
    }
    // The archive lives on a small tmpfs mounted in the server's own mount namespace (no privileges needed
    // beyond a user namespace); the test reaches it through /proc/PID/root.
    let relay = FakeRelay::start(RelayConfig::default()).await.unwrap();
    let dir = support::tempdir("full-disk");
    let disk = dir.join("disk");
    std::fs::create_dir_all(&disk).unwrap();
    let mount = format!(
        "mount -t tmpfs -o size=16m tmpfs '{}' && exec \"$0\" \"$@\"",
        disk.display()
    );
    let mut server = support::launch(dir.clone(), &relay.url(), &["--shutdown-grace-secs", "2"])
        .database(disk.join("osds.db"))
        .wrapped(
            "unshare",
            ["--user", "--map-root-user", "--mount", "sh", "-c", &mount],
        )
        .start()
        .unwrap_or_else(|e| panic!("{e:#}"));
    for path in fake_relay::channel_paths() {
        assert!(relay.wait_connected(path, 1, Duration::from_secs(20)).await);
    }
    wait_queries_done(&relay).await;
    let seen_disk =
        std::path::PathBuf::from(format!("/proc/{}/root{}", server.pid(), disk.display()));
    assert!(
        seen_disk.join("osds.db").exists(),
        "the archive is on the tmpfs"
    );
    assert_eq!(
        relay
            .push("cq_eew", cq_frame("2026091011", 1).as_bytes())
            .await,
        2
    );
    wait_archive(&server, "the first report", |a| a["versions"] == 1).await;

    // Full: a report that needs room waits, and so does everything received after it, in order.
    let filler = fill(&seen_disk);
    let big = big_cq_frame("2026091012", 1, 3 << 20);
    assert_eq!(relay.push_to("/cq_eew", big.as_bytes()).await, 1);
    let failing = eventually(30, "writes failing for lack of room", || async {
        let status = get_json(&server.url("/status")).await;
        (status["writes"]["writable"] == false).then_some(status)
    })
    .await;
    assert_eq!(failing["healthy"], false);
    assert_eq!(failing["writes"]["failure"]["code"], "disk_full");
    let root = server.base.trim_end_matches("/api/v1");
    // Reads still work: the process stays in its load balancer (/status and the metrics say the rest).
    let readyz = reqwest::get(format!("{root}/readyz")).await.unwrap();
    assert_eq!(readyz.status(), 200);
    for revision in 2..=3 {
        assert_eq!(
            relay
                .push("cq_eew", cq_frame("2026091011", revision).as_bytes())
                .await,
            2
        );
    }
    eventually(30, "five frames queued", || async {
        (writes(&server).await["queuedFrames"] == 5).then_some(())
    })
    .await;
    // Reads are served meanwhile.
    let page = get_json(&server.url("/reports?after=0")).await;
    assert_eq!(page["items"].as_array().unwrap().len(), 1);

    // Room again: everything that waited is archived, by itself, and the big frame byte for byte.
    std::fs::remove_file(&filler).unwrap();
    let archive = wait_archive(&server, "the queued reports", |a| a["versions"] == 4).await;
    assert_eq!(archive["deliveries"], 7);
    // The writer says it is writable again once it has seen its commit through (a reader may see the commit
    // first).
    let writes_now = eventually(20, "writable again", || async {
        let writes = writes(&server).await;
        (writes["writable"] == true).then_some(writes)
    })
    .await;
    assert_eq!(writes_now["queuedFrames"], 0);
    assert_eq!(writes_now["dropped"], serde_json::json!([]));
    let status = get_json(&server.url("/status")).await;
    assert_eq!(status["healthy"], true);
    let events = get_json(&server.url("/events?source=cq")).await;
    let event = events["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e.to_string().contains("2026091012_1"))
        .unwrap_or_else(|| panic!("the big report's event: {events}"));
    let id = event["id"].as_str().unwrap();
    let deliveries = get_json(&server.url(&format!("/events/{id}/deliveries"))).await;
    let delivery = deliveries["items"][0]["id"].as_i64().unwrap();
    let raw = raw_bytes(&server, delivery).await;
    assert_eq!(raw.as_ref(), big.as_bytes());

    // Full again, with a frame waiting: SIGTERM still stops the service, within the shutdown grace, and says
    // what it could not archive.
    let filler = fill(&seen_disk);
    let big = big_cq_frame("2026091013", 1, 3 << 20);
    relay.push_to("/cq_eew", big.as_bytes()).await;
    eventually(30, "writes failing again", || async {
        (writes(&server).await["writable"] == false).then_some(())
    })
    .await;
    server.stop().await;
    assert!(
        server
            .log()
            .contains("could not write within the shutdown grace"),
        "{}",
        server.log()
    );
    drop(filler);
    let _ = std::fs::remove_dir_all(&dir);
}

async fn socket_state(server: &Server, path: &str) -> Value {
    let status = get_json(&server.url("/status")).await;
    status["upstreamSockets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["path"] == path)
        .cloned()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_20_mb_frame_is_archived_whole_and_one_over_the_limit_is_refused_without_a_reconnect_loop()
 {
    let (relay, server) =
        start_connected(RelayConfig::default(), &["--upstream-max-frame-mib", "24"]).await;
    wait_queries_done(&relay).await;

    // 20 MB: archived byte for byte on the connection it came on (whether the decoder manages it within its
    // time budget or not: a frame it does not decode is kept as unparsed).
    let before = archive(&server).await["deliveries"].as_i64().unwrap();
    let big = big_cq_frame("2026091020", 1, 20 << 20);
    assert_eq!(relay.push_to("/cq_eew", big.as_bytes()).await, 1);
    let delivery = before + 1;
    wait_archive(&server, "the 20 MB frame", |a| a["deliveries"] == delivery).await;
    let raw = raw_bytes(&server, delivery).await;
    assert_eq!(raw.len(), big.len());
    assert!(raw.as_ref() == big.as_bytes(), "the raw bytes differ");
    assert_eq!(relay.connection_count("/cq_eew").await, 1);

    // 30 MB, over the limit, and also what the relay answers the channel's query with: refused once, the
    // connection re-established without asking for it again, and the channel keeps working.
    let huge = big_cq_frame("2026091021", 1, 30 << 20);
    relay
        .set_latest(
            fake_relay::query_command("cq_eew").unwrap(),
            huge.as_bytes(),
        )
        .await;
    assert_eq!(relay.push_to("/cq_eew", huge.as_bytes()).await, 1);
    // The relay sees the second connection, and only that one, open.
    eventually(20, "the refusal and a new connection", || async {
        let socket = socket_state(&server, "/cq_eew").await;
        (socket["refusedFrames"] == 1
            && socket["connected"] == true
            && relay.connection_count("/cq_eew").await == 2
            && relay.connected("/cq_eew").await == 1)
            .then_some(())
    })
    .await;
    assert_eq!(
        relay
            .push_to("/cq_eew", cq_frame("2026091022", 1).as_bytes())
            .await,
        1
    );
    wait_archive(&server, "a report after the refusal", |a| {
        a["deliveries"] == delivery + 1
    })
    .await;
    let socket = socket_state(&server, "/cq_eew").await;
    assert_eq!(socket["refusedFrames"], 1, "{socket}");
    assert_eq!(relay.connection_count("/cq_eew").await, 2);
    let sessions = get_json(&server.url("/status")).await["connections"].clone();
    assert!(
        sessions.to_string().contains("frame_too_large"),
        "the refusal is recorded: {sessions}"
    );
}
