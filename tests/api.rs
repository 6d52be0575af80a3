//! The EEW REST API end to end: the real server fed through the fake relay, every endpoint and parameter edge,
//! and every response (happy and error paths) validated against `schemas/openapi.yaml`, so the document cannot
//! drift from the code.

mod support;

use fake_relay::RelayConfig;
use futures_util::SinkExt;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use support::contract::{Contract, encode};
use support::live::{SseClient, ws_next, ws_url};
use support::{eventually, get_json, start_connected, wait_queries_done};

/// A cea frame at Beijing wall-clock `origin` (`YYYY-MM-DD HH:mm:ss`).
fn cea_frame(event: &str, origin: &str, epicenter: &str, magnitude: f64) -> String {
    format!(
        r#"{{"type":"cenc_eew","ID":"id{event}","EventID":"{event}.0001","ReportTime":"{origin}","ReportNum":1,"OriginTime":"{origin}","HypoCenter":"{epicenter}","Latitude":42.2,"Longitude":80.502,"Magnitude":{magnitude},"Depth":null,"MaxIntensity":5.1}}"#
    )
}

fn sc_frame(revision: i64, magnitude: f64) -> String {
    format!(
        r#"{{"type":"sc_eew","ID":81{revision},"EventID":"202608281313.0001_{revision}","ReportTime":"2026-08-28 13:14:0{revision}","ReportNum":{revision},"OriginTime":"2026-08-28 13:13:34","HypoCenter":"四川内江市隆昌市","Latitude":29.239,"Longitude":105.227,"Magunitude":{magnitude},"Depth":12,"MaxIntensity":7.1}}"#
    )
}

const FJ_FRAME: &str = r#"{"type":"fj_eew","EventID":"20241027182139_1","ReportTime":"2024-10-27 18:22:09","ReportNum":1,"OriginTime":"2024-10-27 18:21:43","HypoCenter":"台湾花莲县附近海域","Latitude":23.92,"Longitude":121.8,"Magunitude":5.8,"isFinal":true}"#;

fn event_of<'a>(page: &'a Value, source: &str) -> Vec<&'a Value> {
    page["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["source"] == source)
        .collect()
}

fn ids_of(page: &Value) -> Vec<String> {
    page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["sourceEventId"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn every_eew_endpoint_and_parameter_edge_matches_the_spec_and_openapi() {
    let contract = Contract::load();
    let (relay, server) = start_connected(
        RelayConfig::default(),
        &[
            "--upstream-query-window-secs",
            "0.3",
            "--live-status-secs",
            "0.3",
        ],
    )
    .await;
    wait_queries_done(&relay).await;

    // Beijing-date edges: 23:59:59 on 1 January is 15:59:59Z; midnight on 2 January is 16:00:00Z; midnight on
    // 1 February opens the February month bucket although it is still 31 January in UTC.
    let day1 = cea_frame(
        "202601012359",
        "2026-01-01 23:59:59",
        "新疆阿克苏地区温宿县",
        4.0,
    );
    let day2 = cea_frame(
        "202601020000",
        "2026-01-02 00:00:00",
        "西藏日喀则市定日县",
        5.5,
    );
    let feb = cea_frame(
        "202602010000",
        "2026-02-01 00:00:00",
        "云南大理州漾濞县",
        3.1,
    );
    for frame in [&day1, &day2, &feb] {
        relay.push_to("/cenc_eew", frame.as_bytes()).await;
    }
    // sc: revisions 1, 2 and 4 (3 missing), a second version of revision 2, and a duplicate delivery.
    for frame in [sc_frame(1, 5.0), sc_frame(2, 5.2), sc_frame(4, 5.3)] {
        relay.push("sc_eew", frame.as_bytes()).await;
    }
    let revised = sc_frame(2, 5.25);
    relay.push_to("/sc_eew", revised.as_bytes()).await;
    relay.push_to("/fj_eew", FJ_FRAME.as_bytes()).await;
    relay.push_to("/cq_eew", b"not json at all").await;
    eventually(20, "everything archived", || async {
        let archive = get_json(&server.url("/status")).await["archive"].clone();
        (archive["versions"] == 8 && archive["unparsed"] == 1).then_some(())
    })
    .await;

    // /status
    let status = contract.get(&server, "/status", "/status", 200).await;
    assert_eq!(status["version"], 1);
    assert_eq!(status["archive"]["events"], 5);
    assert_eq!(status["archive"]["versions"], 8);
    assert_eq!(status["archive"]["unparsed"], 1);
    assert_eq!(status["archive"]["deliveries"], 12);
    assert_eq!(status["decoders"].as_array().unwrap().len(), 4);
    let sources: Vec<&str> = status["sources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["source"].as_str().unwrap())
        .collect();
    assert_eq!(sources, ["cea", "sc", "fj", "cq"]);

    // /events: newest origin first, filters, paging.
    let all = contract.get(&server, "/events", "/events", 200).await;
    assert_eq!(all["total"], 5);
    assert_eq!(all["pages"], 1);
    assert_eq!(all["limit"], 30);
    assert_eq!(
        ids_of(&all),
        [
            "202608281313.0001",
            "202602010000.0001",
            "202601020000.0001",
            "202601012359.0001",
            "20241027182139"
        ],
        "newest origin first"
    );
    let origins: Vec<&str> = all["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["originAt"].as_str().unwrap())
        .collect();
    let mut sorted = origins.clone();
    sorted.sort_by(|a, b| b.cmp(a));
    assert_eq!(origins, sorted, "newest origin first");
    for item in all["items"].as_array().unwrap() {
        assert!(item.get("reports").is_none(), "list items carry no reports");
    }
    let sc = event_of(&all, "sc")[0].clone();
    assert_eq!(sc["reportCount"], 4);
    assert_eq!(sc["missingRevisions"], json!([3]));
    assert_eq!(sc["latest"]["revision"], 4);
    assert_eq!(sc["latest"]["depthKm"], 12.0);

    let day = |from: &str, to: &str| format!("/events?source=cea&from={from}&to={to}");
    let first = contract
        .get(&server, "/events", &day("2026-01-01", "2026-01-01"), 200)
        .await;
    assert_eq!(ids_of(&first), ["202601012359.0001"]);
    assert_eq!(
        first["items"][0]["originAt"], "2026-01-01T15:59:59Z",
        "origin converted from Beijing time"
    );
    let second = contract
        .get(&server, "/events", &day("2026-01-02", "2026-01-02"), 200)
        .await;
    assert_eq!(ids_of(&second), ["202601020000.0001"]);
    assert_eq!(second["items"][0]["originAt"], "2026-01-01T16:00:00Z");
    let both = contract
        .get(&server, "/events", &day("2026-01-01", "2026-01-02"), 200)
        .await;
    assert_eq!(both["total"], 2);
    let january_on = contract
        .get(&server, "/events", "/events?from=2026-01-01", 200)
        .await;
    assert_eq!(january_on["total"], 4, "`from` alone is open-ended");
    let until = contract
        .get(&server, "/events", "/events?to=2026-01-31", 200)
        .await;
    assert_eq!(
        until["total"], 3,
        "1 February 00:00 Beijing is outside `to=2026-01-31`"
    );

    let big = contract
        .get(&server, "/events", "/events?minMagnitude=5.25", 200)
        .await;
    let mut big_ids = ids_of(&big);
    big_ids.sort();
    assert_eq!(
        big_ids,
        ["20241027182139", "202601020000.0001", "202608281313.0001"],
        "the latest magnitude counts"
    );
    let named = contract
        .get(
            &server,
            "/events",
            "/events?q=%E9%98%BF%E5%85%8B%E8%8B%8F",
            200,
        )
        .await;
    assert_eq!(
        ids_of(&named),
        ["202601012359.0001"],
        "q matches a part of the epicentre"
    );
    let by_upstream = contract
        .get(&server, "/events", "/events?q=202608281313.0001_2", 200)
        .await;
    assert_eq!(
        ids_of(&by_upstream),
        ["202608281313.0001"],
        "q matches an upstream event number"
    );
    let wildcard = contract.get(&server, "/events", "/events?q=%25", 200).await;
    assert_eq!(wildcard["total"], 0, "`%` is a literal, not a wildcard");
    let paged = contract
        .get(&server, "/events", "/events?limit=2&page=2", 200)
        .await;
    assert_eq!(paged["pages"], 3);
    assert_eq!(paged["page"], 2);
    assert_eq!(
        ids_of(&paged),
        ids_of(&all)[2..4].to_vec(),
        "page 2 continues page 1"
    );
    let beyond = contract
        .get(&server, "/events", "/events?page=1000000", 200)
        .await;
    assert_eq!(beyond["items"], json!([]));
    assert_eq!(beyond["total"], 5);

    // /months: Beijing months with counts.
    let months = contract
        .get(&server, "/months", "/months?source=cea", 200)
        .await;
    assert_eq!(
        months["items"],
        json!([{"month": "2026-02", "events": 1}, {"month": "2026-01", "events": 2}])
    );
    let all_months = contract.get(&server, "/months", "/months", 200).await;
    assert_eq!(all_months["items"].as_array().unwrap().len(), 4);

    // /events/{id} and /export: every version in revision order, raw text of each version.
    let sc_id = sc["id"].as_str().unwrap().to_string();
    let detail = contract
        .get(&server, "/events/{id}", &format!("/events/{sc_id}"), 200)
        .await;
    let revisions: Vec<i64> = detail["reports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["revision"].as_i64().unwrap())
        .collect();
    assert_eq!(revisions, [1, 2, 2, 4]);
    let export = contract
        .get(
            &server,
            "/events/{id}/export",
            &format!("/events/{sc_id}/export"),
            200,
        )
        .await;
    assert!(export["exportedAt"].is_string());
    let raw_texts: Vec<&str> = export["reports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["rawText"].as_str().unwrap())
        .collect();
    assert_eq!(
        raw_texts,
        [
            sc_frame(1, 5.0),
            sc_frame(2, 5.2),
            revised.clone(),
            sc_frame(4, 5.3)
        ]
    );

    // /events/{id}/deliveries: duplicates included, cursor paging.
    let deliveries_path = format!("/events/{sc_id}/deliveries");
    let every = contract
        .get(&server, "/events/{id}/deliveries", &deliveries_path, 200)
        .await;
    let delivery_ids: Vec<i64> = every["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["id"].as_i64().unwrap())
        .collect();
    assert_eq!(
        delivery_ids.len(),
        7,
        "3 pushes on two sockets and one on one"
    );
    assert!(delivery_ids.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(every["nextCursor"], delivery_ids[6]);
    let page1 = contract
        .get(
            &server,
            "/events/{id}/deliveries",
            &format!("{deliveries_path}?limit=3"),
            200,
        )
        .await;
    let page2 = contract
        .get(
            &server,
            "/events/{id}/deliveries",
            &format!("{deliveries_path}?limit=1000&after={}", page1["nextCursor"]),
            200,
        )
        .await;
    assert_eq!(
        page1["items"].as_array().unwrap().len() + page2["items"].as_array().unwrap().len(),
        7
    );
    assert_eq!(page2["items"][0]["id"], delivery_ids[3]);
    let empty = contract
        .get(
            &server,
            "/events/{id}/deliveries",
            &format!("{deliveries_path}?after=9007199254740991"),
            200,
        )
        .await;
    assert_eq!(empty["items"], json!([]));
    assert_eq!(empty["nextCursor"], 9007199254740991_i64);

    // /deliveries/{id}/raw: the exact bytes and their lowercase hex SHA-256.
    let raw = reqwest::get(server.url(&format!("/deliveries/{}/raw", delivery_ids[0])))
        .await
        .unwrap();
    assert_eq!(raw.status(), 200);
    assert_eq!(raw.headers()["content-type"], "application/octet-stream");
    let hash = raw.headers()["x-content-sha256"]
        .to_str()
        .unwrap()
        .to_string();
    let bytes = raw.bytes().await.unwrap();
    assert_eq!(bytes.as_ref(), sc_frame(1, 5.0).as_bytes());
    assert_eq!(hash, hex::encode(Sha256::digest(&bytes)));
    let hash_pattern = contract.doc["paths"]["/deliveries/{id}/raw"]["get"]["responses"]["200"]
        ["headers"]["X-Content-SHA256"]["schema"]["pattern"]
        .as_str()
        .expect("the hash header is documented with a pattern");
    assert_eq!(hash_pattern, "^[a-f0-9]{64}$");
    contract
        .covered
        .lock()
        .unwrap()
        .insert(("/deliveries/{id}/raw".into(), 200));

    // /reports: increasing ids, cursor paging, highWater.
    let reports = contract
        .get(&server, "/reports", "/reports?limit=3", 200)
        .await;
    let ids: Vec<i64> = reports["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, [1, 2, 3]);
    assert_eq!(reports["nextCursor"], 3);
    assert_eq!(reports["highWater"], 8);
    let rest = contract
        .get(&server, "/reports", "/reports?after=3&limit=1000", 200)
        .await;
    assert_eq!(rest["items"].as_array().unwrap().len(), 5);
    assert_eq!(rest["nextCursor"], 8);
    let fj = reports["items"]
        .as_array()
        .unwrap()
        .iter()
        .chain(rest["items"].as_array().unwrap())
        .find(|r| r["source"] == "fj")
        .expect("the fj report is on one of the two pages");
    assert_eq!(fj["isFinal"], true);
    for field in ["depthKm", "maxIntensity"] {
        assert!(fj[field].is_null(), "{field} is present and null on fj");
    }
    let done = contract
        .get(&server, "/reports", "/reports?after=8", 200)
        .await;
    assert_eq!(done["items"], json!([]));
    assert_eq!(done["nextCursor"], 8, "an empty page keeps the cursor");

    // /latest: the most recently archived event of each channel that has one.
    let latest = contract.get(&server, "/latest", "/latest", 200).await;
    let latest_ids: BTreeMap<&str, &str> = latest["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["source"].as_str().unwrap(),
                e["sourceEventId"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        latest_ids,
        BTreeMap::from([
            ("cea", "202602010000.0001"),
            ("fj", "20241027182139"),
            ("sc", "202608281313.0001")
        ])
    );
    assert!(
        latest["note"]
            .as_str()
            .unwrap()
            .contains("not a list of warnings")
    );

    // Live channels: every message shape is the documented one.
    let mut sse = SseClient::connect(&server.url("/stream?after=6"), None)
        .await
        .unwrap();
    let mut kinds = BTreeSet::new();
    while kinds.len() < 3 {
        let event = sse.next_event().await.expect("stream open");
        let kind = event.event.clone().unwrap();
        let component = match kind.as_str() {
            "ready" => "LiveReady",
            "report" => "EewReport",
            "status" => "LiveStatus",
            other => panic!("undocumented SSE event `{other}`"),
        };
        contract.check(component, &event.json(), &format!("SSE `{kind}`"));
        kinds.insert(kind);
    }
    contract
        .covered
        .lock()
        .unwrap()
        .insert(("/stream".into(), 200));
    let (mut ws, _) = tokio_tungstenite::connect_async(ws_url(&server, "?after=6"))
        .await
        .unwrap();
    ws.send(tokio_tungstenite::tungstenite::Message::text("ping"))
        .await
        .unwrap();
    let mut kinds = BTreeSet::new();
    while kinds.len() < 4 {
        let message = ws_next(&mut ws).await.expect("socket open");
        let kind = message["type"].as_str().unwrap().to_string();
        let component = match kind.as_str() {
            "ready" => "LiveReady",
            "report" => "WsReport",
            "status" => "LiveStatus",
            "pong" => "WsPong",
            other => panic!("undocumented WebSocket message `{other}`"),
        };
        contract.check(component, &message, &format!("WebSocket `{kind}`"));
        kinds.insert(kind);
    }

    // Error paths: a 400 or 404 with the documented body, never a 5xx.
    let unknown_event = "0123456789abcdef0123456789abcdef";
    let errors: Vec<(&str, String, u16, &str)> = vec![
        (
            "/status",
            "/status?verbose=1".into(),
            400,
            "unknown_parameter",
        ),
        (
            "/events",
            "/events?limit=10&limit=20".into(),
            400,
            "repeated_parameter",
        ),
        (
            "/events",
            "/events?from=2026-01-02&to=2026-01-01".into(),
            400,
            "invalid_range",
        ),
        (
            "/events",
            "/events?from=2026-1-1".into(),
            400,
            "invalid_parameter",
        ),
        (
            "/events",
            "/events?from=2026-02-30".into(),
            400,
            "invalid_parameter",
        ),
        (
            "/events",
            "/events?minMagnitude=abc".into(),
            400,
            "invalid_parameter",
        ),
        (
            "/events",
            "/events?minMagnitude=NaN".into(),
            400,
            "invalid_parameter",
        ),
        (
            "/events",
            "/events?page=1.5".into(),
            400,
            "invalid_parameter",
        ),
        (
            "/events/{id}",
            "/events/ABCDEF0123456789abcdef0123456789".into(),
            400,
            "invalid_event_id",
        ),
        (
            "/events/{id}",
            "/events/202601012359.0001".into(),
            400,
            "invalid_event_id",
        ),
        ("/events/{id}", "/events/%FF%FE".into(), 400, "invalid_path"),
        (
            "/events/{id}",
            format!("/events/{unknown_event}"),
            404,
            "not_found",
        ),
        (
            "/events/{id}",
            format!("/events/{sc_id}?view=summary"),
            400,
            "unknown_parameter",
        ),
        (
            "/events/{id}/export",
            format!("/events/{unknown_event}/export"),
            404,
            "not_found",
        ),
        (
            "/events/{id}/export",
            "/events/x/export".into(),
            400,
            "invalid_event_id",
        ),
        (
            "/events/{id}/deliveries",
            format!("/events/{unknown_event}/deliveries"),
            404,
            "not_found",
        ),
        (
            "/events/{id}/deliveries",
            "/events/x/deliveries".into(),
            400,
            "invalid_event_id",
        ),
        (
            "/events/{id}/deliveries",
            format!("{deliveries_path}?after=-1"),
            400,
            "out_of_range",
        ),
        (
            "/deliveries/{id}/raw",
            "/deliveries/0/raw".into(),
            400,
            "out_of_range",
        ),
        (
            "/deliveries/{id}/raw",
            "/deliveries/abc/raw".into(),
            400,
            "invalid_parameter",
        ),
        (
            "/deliveries/{id}/raw",
            "/deliveries/99999999/raw".into(),
            404,
            "not_found",
        ),
        (
            "/deliveries/{id}/raw",
            "/deliveries/9007199254740992/raw".into(),
            400,
            "out_of_range",
        ),
        (
            "/latest",
            "/latest?source=sc".into(),
            400,
            "unknown_parameter",
        ),
        (
            "/months",
            "/months?source=jma".into(),
            400,
            "invalid_parameter",
        ),
        (
            "/reports",
            "/reports?after=abc".into(),
            400,
            "invalid_parameter",
        ),
        (
            "/reports",
            "/reports?cursor=5".into(),
            400,
            "unknown_parameter",
        ),
    ];
    for (template, path, status, code) in errors {
        let body = contract.get(&server, template, &path, status).await;
        assert_eq!(body["code"], code, "GET {path}");
    }
    let nowhere = reqwest::get(server.url("/no/such/thing")).await.unwrap();
    assert_eq!(nowhere.status(), 404);
    let body: Value = nowhere.json().await.unwrap();
    assert_eq!(body["code"], "not_found");

    // Every documented query-parameter bound, read from the document itself: the edges are accepted and one
    // step beyond is refused with a 400.
    let concrete = |template: &str| {
        template
            .replace("/events/{id}", &format!("/events/{sc_id}"))
            .replace(
                "/deliveries/{id}",
                &format!("/deliveries/{}", delivery_ids[0]),
            )
    };
    // The EEW family's paths (tests/hyp.rs covers /hyp/...).
    let templates: Vec<String> = contract.doc["paths"]
        .as_object()
        .unwrap()
        .keys()
        .filter(|t| !t.starts_with("/hyp/"))
        .cloned()
        .collect();
    for template in &templates {
        for parameter in contract.query_parameters(template) {
            let name = parameter["name"].as_str().unwrap();
            let (good, bad) = contract.probe_values(&parameter, template);
            for value in good {
                let path = format!("{}?{name}={}", concrete(template), encode(&value));
                match template.as_str() {
                    // A stream never ends: its headers are the answer.
                    "/stream" => {
                        let response = reqwest::get(server.url(&path)).await.unwrap();
                        assert_eq!(response.status(), 200, "GET {path}");
                        assert_eq!(response.headers()["content-type"], "text/event-stream");
                    }
                    // Without an upgrade a good cursor can only be refused for the missing upgrade.
                    "/ws" => {
                        let body = contract.get(&server, template, &path, 400).await;
                        assert_eq!(body["code"], "websocket_upgrade_required");
                    }
                    _ => {
                        contract.get(&server, template, &path, 200).await;
                    }
                }
            }
            for value in bad {
                let path = format!("{}?{name}={}", concrete(template), encode(&value));
                contract.get(&server, template, &path, 400).await;
            }
        }
    }

    // Every path of the document was exercised with a 200, and every declared 400 and 404 too.
    contract.assert_covered(&templates);
    drop(relay);
}
