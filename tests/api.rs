//! The EEW REST API, every response (happy and error paths) validated against `schemas/openapi.yaml` so the
//! document cannot drift from the code. One end-to-end test runs the real binary fed through the fake relay and
//! reads every endpoint, the live channels included. The edge cases are named tests run in-process against the
//! router of the real service (`support::in_process`), each on a copy of one archive that the service ingested
//! from the fake relay once per test run. schemathesis fuzzes the real binary on a copy of that archive.

mod support;

use fake_relay::{FakeRelay, RelayConfig};
use futures_util::SinkExt;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;
use support::contract::{Contract, Target, encode};
use support::database::{Snapshot, copy_into, snapshot};
use support::in_process::{InProcess, config};
use support::live::{SseClient, ws_next, ws_url};
use support::{eventually, page_ids, start_connected, tempdir, wait_queries_done};

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

/// The second version of sc revision 2.
fn sc_revised() -> String {
    sc_frame(2, 5.25)
}

const FJ_FRAME: &str = r#"{"type":"fj_eew","EventID":"20241027182139_1","ReportTime":"2024-10-27 18:22:09","ReportNum":1,"OriginTime":"2024-10-27 18:21:43","HypoCenter":"台湾花莲县附近海域","Latitude":23.92,"Longitude":121.8,"Magunitude":5.8,"isFinal":true}"#;

/// The archive every test reads, pushed through the relay: cea events on both sides of Beijing-date and month
/// edges; sc revisions 1, 2 and 4 (3 missing), a second version of revision 2 and a duplicate delivery (revision
/// 1, 2 and 4 arrive on `/sc_eew` and `/all_eew`); a final fj report without depth and intensity; one cq frame
/// that is not JSON. 8 report versions of 5 events, 12 deliveries, 1 unparsed.
async fn push_archive(relay: &FakeRelay) {
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
    for frame in [sc_frame(1, 5.0), sc_frame(2, 5.2), sc_frame(4, 5.3)] {
        relay.push("sc_eew", frame.as_bytes()).await;
    }
    relay.push_to("/sc_eew", sc_revised().as_bytes()).await;
    relay.push_to("/fj_eew", FJ_FRAME.as_bytes()).await;
    relay.push_to("/cq_eew", b"not json at all").await;
}

/// Whether the whole of [`push_archive`] is archived.
async fn archived(target: &impl Target) -> bool {
    let (_, _, body) = target.fetch("/status").await;
    let status: Value = serde_json::from_slice(&body).unwrap_or_default();
    status["archive"]["versions"] == 8 && status["archive"]["unparsed"] == 1
}

/// The archive, ingested once per test binary by the real service (in-process, on a runtime of its own) from the
/// fake relay.
fn archive() -> &'static Snapshot {
    static ARCHIVE: OnceLock<Snapshot> = OnceLock::new();
    ARCHIVE.get_or_init(|| {
        std::thread::spawn(|| {
            tokio::runtime::Runtime::new()
                .unwrap()
                .block_on(ingest_archive())
        })
        .join()
        .expect("the archive was ingested")
    })
}

async fn ingest_archive() -> Snapshot {
    let relay = FakeRelay::start(RelayConfig::default()).await.unwrap();
    let dir = tempdir("api-archive");
    let service = InProcess::start(config(&dir, Some(&relay.url())), dir.clone()).await;
    for path in fake_relay::channel_paths() {
        assert!(
            relay
                .wait_connected(path, 1, std::time::Duration::from_secs(20))
                .await,
            "the service never connected {path}"
        );
    }
    wait_queries_done(&relay).await;
    push_archive(&relay).await;
    eventually(20, "everything archived", || async {
        archived(&service).await.then_some(())
    })
    .await;
    service.stop().await;
    // Each test serves a copy of it.
    snapshot(&dir).await
}

/// A test's own service on a copy of the archive, and the document to check its answers against.
async fn api() -> (InProcess, Contract) {
    (InProcess::on_copy_of(archive()).await, Contract::load())
}

fn ids_of(page: &Value) -> Vec<String> {
    page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["sourceEventId"].as_str().unwrap().to_string())
        .collect()
}

/// The sc event's id (revisions 1, 2, 2 and 4).
async fn sc_event_id(api: &InProcess, contract: &Contract) -> String {
    let page = contract.get(api, "/events", "/events?source=sc", 200).await;
    page["items"][0]["id"].as_str().unwrap().to_string()
}

/// The ids of the sc event's deliveries, in order.
async fn sc_delivery_ids(api: &InProcess, contract: &Contract, sc_id: &str) -> Vec<i64> {
    let every = contract
        .get(
            api,
            "/events/{id}/deliveries",
            &format!("/events/{sc_id}/deliveries"),
            200,
        )
        .await;
    every["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["id"].as_i64().unwrap())
        .collect()
}

/// The EEW family's paths of the document (tests/hyp.rs covers /hyp/..., the about test below the rest).
fn eew_templates(contract: &Contract) -> Vec<String> {
    contract.doc["paths"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, item)| item["get"]["tags"][0] == "eew")
        .map(|(template, _)| template.clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_real_binary_serves_every_eew_endpoint_and_live_message_as_documented() {
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
    push_archive(&relay).await;
    eventually(20, "everything archived", || async {
        archived(&server).await.then_some(())
    })
    .await;

    let status = contract.get(&server, "/status", "/status", 200).await;
    assert_eq!(status["archive"]["deliveries"], 12);
    let all = contract.get(&server, "/events", "/events", 200).await;
    assert_eq!(all["total"], 5);
    contract.get(&server, "/months", "/months", 200).await;
    contract.get(&server, "/latest", "/latest", 200).await;
    let reports = contract
        .get(&server, "/reports", "/reports?limit=1000", 200)
        .await;
    assert_eq!(reports["items"].as_array().unwrap().len(), 8);
    let sc = all["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["source"] == "sc")
        .unwrap();
    let sc_id = sc["id"].as_str().unwrap();
    contract
        .get(&server, "/events/{id}", &format!("/events/{sc_id}"), 200)
        .await;
    contract
        .get(
            &server,
            "/events/{id}/export",
            &format!("/events/{sc_id}/export"),
            200,
        )
        .await;
    let deliveries = contract
        .get(
            &server,
            "/events/{id}/deliveries",
            &format!("/events/{sc_id}/deliveries"),
            200,
        )
        .await;
    let first = deliveries["items"][0]["id"].as_i64().unwrap();
    let raw = reqwest::get(server.url(&format!("/deliveries/{first}/raw")))
        .await
        .unwrap();
    assert_eq!(raw.status(), 200);
    assert_eq!(
        raw.bytes().await.unwrap().as_ref(),
        sc_frame(1, 5.0).as_bytes()
    );
    contract
        .covered
        .lock()
        .unwrap()
        .insert(("/deliveries/{id}/raw".into(), 200));

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

    // Every path of the document answered a 200 from the real binary.
    contract.assert_covered(&eew_templates(&contract), &["200"]);
    drop(relay);
}

#[tokio::test(flavor = "multi_thread")]
async fn status_counts_the_archive_and_lists_every_channel() {
    let (api, contract) = api().await;
    let status = contract.get(&api, "/status", "/status", 200).await;
    assert_eq!(status["version"], 1);
    assert_eq!(status["archive"]["events"], 5);
    assert_eq!(status["archive"]["versions"], 8);
    assert_eq!(status["archive"]["unparsed"], 1);
    assert_eq!(status["archive"]["deliveries"], 12);
    assert_eq!(status["archive"]["highWater"], 8);
    assert_eq!(status["decoders"].as_array().unwrap().len(), 4);
    let sources: Vec<&str> = status["sources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["source"].as_str().unwrap())
        .collect();
    assert_eq!(sources, ["cea", "sc", "fj", "cq"]);
    // Not ingesting: no channel is connected, and the stop of the ingesting service left an outage open.
    assert_eq!(status["healthy"], false);
    for source in status["sources"].as_array().unwrap() {
        assert_eq!(source["connected"], false);
        assert!(source["currentOutage"]["startedAt"].is_string());
        assert!(source["currentOutage"]["endedAt"].is_null());
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn events_are_newest_origin_first_and_list_items_carry_no_reports() {
    let (api, contract) = api().await;
    let all = contract.get(&api, "/events", "/events", 200).await;
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
    for item in all["items"].as_array().unwrap() {
        assert!(item.get("reports").is_none(), "list items carry no reports");
    }
    let sc = &all["items"][0];
    assert_eq!(sc["source"], "sc");
    assert_eq!(sc["reportCount"], 4);
    assert_eq!(sc["missingRevisions"], json!([3]));
    assert_eq!(sc["latest"]["revision"], 4);
    assert_eq!(sc["latest"]["depthKm"], 12.0);
}

#[tokio::test(flavor = "multi_thread")]
async fn event_dates_are_beijing_days() {
    let (api, contract) = api().await;
    let day = |from: &str, to: &str| format!("/events?source=cea&from={from}&to={to}");
    let first = contract
        .get(&api, "/events", &day("2026-01-01", "2026-01-01"), 200)
        .await;
    assert_eq!(ids_of(&first), ["202601012359.0001"]);
    assert_eq!(
        first["items"][0]["originAt"], "2026-01-01T15:59:59Z",
        "origin converted from Beijing time"
    );
    let second = contract
        .get(&api, "/events", &day("2026-01-02", "2026-01-02"), 200)
        .await;
    assert_eq!(ids_of(&second), ["202601020000.0001"]);
    assert_eq!(second["items"][0]["originAt"], "2026-01-01T16:00:00Z");
    let both = contract
        .get(&api, "/events", &day("2026-01-01", "2026-01-02"), 200)
        .await;
    assert_eq!(both["total"], 2);
    let january_on = contract
        .get(&api, "/events", "/events?from=2026-01-01", 200)
        .await;
    assert_eq!(january_on["total"], 4, "`from` alone is open-ended");
    let until = contract
        .get(&api, "/events", "/events?to=2026-01-31", 200)
        .await;
    assert_eq!(
        until["total"], 3,
        "1 February 00:00 Beijing is outside `to=2026-01-31`"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn events_filter_by_latest_magnitude_and_by_literal_text() {
    let (api, contract) = api().await;
    let big = contract
        .get(&api, "/events", "/events?minMagnitude=5.25", 200)
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
            &api,
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
        .get(&api, "/events", "/events?q=202608281313.0001_2", 200)
        .await;
    assert_eq!(
        ids_of(&by_upstream),
        ["202608281313.0001"],
        "q matches an upstream event number"
    );
    // As LIKE wildcards `%` would match everything and `2024102718213_` the fj event; as text they match none.
    for literal in ["%25", "2024102718213_"] {
        let page = contract
            .get(&api, "/events", &format!("/events?q={literal}"), 200)
            .await;
        assert_eq!(page["total"], 0, "`{literal}` is literal text");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn events_filter_by_place_time_depth_and_magnitude_range_in_any_order() {
    let (api, contract) = api().await;
    let listed = |query: &'static str| {
        let (api, contract) = (&api, &contract);
        async move {
            ids_of(
                &contract
                    .get(api, "/events", &format!("/events?{query}"), 200)
                    .await,
            )
        }
    };
    let (sc, fj) = ("202608281313.0001", "20241027182139");
    let (day1, day2, feb) = (
        "202601012359.0001",
        "202601020000.0001",
        "202602010000.0001",
    );
    // Within 100 km of a point near the sc epicentre (29.239 N, 105.227 E); an annulus that leaves it out.
    assert_eq!(
        listed("latitude=29.5&longitude=105&maxRadiusKm=100").await,
        [sc]
    );
    assert!(
        listed("latitude=29.5&longitude=105&minRadiusKm=100&maxRadiusKm=500")
            .await
            .is_empty()
    );
    // A box; one across the antimeridian (from 120 E eastward to 170 W).
    assert_eq!(listed("minLongitude=100").await, [sc, fj]);
    assert_eq!(
        listed("minLongitude=120&maxLongitude=-170&maxLatitude=30").await,
        [fj]
    );
    // Only sc carries a depth: an unknown depth matches no depth bound.
    assert_eq!(listed("minDepthKm=0").await, [sc]);
    assert!(listed("maxDepthKm=10").await.is_empty());
    assert_eq!(listed("maxMagnitude=5").await, [feb, day1]);
    // UTC instants: `start` inclusive (day1 is one second before it), `end` exclusive.
    assert_eq!(
        listed("start=2026-01-01T16:00:00Z&end=2026-02-01T00:00:00Z").await,
        [feb, day2]
    );
    assert_eq!(
        listed("start=2026-01-02T00:00:00%2B08:00&end=2026-01-31T16:00:00Z").await,
        [day2]
    );
    // Orders: largest magnitude first, and the others.
    assert_eq!(listed("order=magnitude").await, [fj, day2, sc, day1, feb]);
    assert_eq!(
        listed("order=magnitude-asc").await,
        [feb, day1, sc, day2, fj]
    );
    assert_eq!(listed("order=time-asc").await, [fj, day1, day2, feb, sc]);
    let second = contract
        .get(
            &api,
            "/events",
            "/events?order=magnitude&limit=2&page=2",
            200,
        )
        .await;
    assert_eq!(ids_of(&second), [sc, day1]);
    assert_eq!(second["total"], 5);
    assert_eq!(
        listed("order=time-asc&source=cea&limit=2&page=2").await,
        [feb]
    );
    // Contradictions are refused, naming the parameters.
    for query in [
        "minMagnitude=6&maxMagnitude=5",
        "minLatitude=40&maxLatitude=30",
        "start=2026-02-01T00:00:00Z&end=2026-01-01T00:00:00Z",
    ] {
        let refused = contract
            .get(&api, "/events", &format!("/events?{query}"), 400)
            .await;
        assert_eq!(refused["code"], "invalid_range", "{query}");
    }
    let half = contract
        .get(&api, "/events", "/events?latitude=29.5&longitude=105", 400)
        .await;
    assert!(half["error"].as_str().unwrap().contains("maxRadiusKm"));
}

#[tokio::test(flavor = "multi_thread")]
async fn events_page_by_number_and_a_page_beyond_is_empty() {
    let (api, contract) = api().await;
    let all = contract.get(&api, "/events", "/events", 200).await;
    let paged = contract
        .get(&api, "/events", "/events?limit=2&page=2", 200)
        .await;
    assert_eq!(paged["pages"], 3);
    assert_eq!(paged["page"], 2);
    assert_eq!(
        ids_of(&paged),
        ids_of(&all)[2..4].to_vec(),
        "page 2 continues page 1"
    );
    let beyond = contract
        .get(&api, "/events", "/events?page=1000000", 200)
        .await;
    assert_eq!(beyond["items"], json!([]));
    assert_eq!(beyond["total"], 5);
}

#[tokio::test(flavor = "multi_thread")]
async fn months_are_beijing_months_with_event_counts() {
    let (api, contract) = api().await;
    let months = contract
        .get(&api, "/months", "/months?source=cea", 200)
        .await;
    assert_eq!(
        months["items"],
        json!([{"month": "2026-02", "events": 1}, {"month": "2026-01", "events": 2}])
    );
    let all_months = contract.get(&api, "/months", "/months", 200).await;
    assert_eq!(all_months["items"].as_array().unwrap().len(), 4);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_event_has_every_version_in_revision_order_and_its_export_every_raw_text() {
    let (api, contract) = api().await;
    let sc_id = sc_event_id(&api, &contract).await;
    let detail = contract
        .get(&api, "/events/{id}", &format!("/events/{sc_id}"), 200)
        .await;
    let revisions: Vec<i64> = detail["reports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["revision"].as_i64().unwrap())
        .collect();
    assert_eq!(revisions, [1, 2, 2, 4]);
    assert!(
        detail["reports"][0].get("rawText").is_none(),
        "only an export carries raw texts"
    );
    let export = contract
        .get(
            &api,
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
            sc_revised(),
            sc_frame(4, 5.3)
        ]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn events_in_geojson_are_features_at_their_latest_position_with_the_json_answer_as_properties()
 {
    let (api, contract) = api().await;
    let listed = contract.get(&api, "/events", "/events", 200).await;
    let page = contract
        .get(&api, "/events", "/events?format=geojson", 200)
        .await;
    support::geojson::check("FeatureCollection", &page);
    assert_eq!(page["type"], "FeatureCollection");
    for field in ["total", "page", "limit", "pages"] {
        assert_eq!(page[field], listed[field], "{field} beside the features");
    }
    let features = page["features"].as_array().unwrap();
    let items = listed["items"].as_array().unwrap();
    assert_eq!(features.len(), items.len(), "one feature per event");
    for (feature, item) in features.iter().zip(items) {
        support::geojson::assert_feature_of(
            feature,
            item,
            &item["latest"],
            &item["latest"]["magnitude"],
        );
    }
    // The cea events and the fj one carry no depth: null, never 0; sc's is 12 km.
    let depths: Vec<&Value> = features
        .iter()
        .map(|f| &f["properties"]["depthKm"])
        .collect();
    assert_eq!(depths.iter().filter(|d| d.is_null()).count(), 4);
    assert!(depths.contains(&&json!(12.0)));
    assert!(features.iter().all(|f| f["geometry"].is_object()));

    // `Accept: application/geo+json` asks for the same; the answer says it varies with `Accept`, and its
    // validator is not the JSON answer's (a cache must not hand one for the other).
    let accepted = api
        .get_with("/events", &[("accept", "application/geo+json")])
        .await;
    assert_eq!(accepted.status, 200);
    assert_eq!(accepted.headers["content-type"], "application/geo+json");
    let vary: Vec<&str> = accepted
        .headers
        .get_all("vary")
        .iter()
        .map(|v| v.to_str().unwrap())
        .collect();
    assert!(
        vary.iter().any(|v| v.eq_ignore_ascii_case("accept")),
        "{vary:?}"
    );
    assert_eq!(
        serde_json::from_slice::<Value>(&accepted.body).unwrap(),
        page
    );
    let as_json = api.get("/events").await;
    assert_eq!(as_json.headers["content-type"], "application/json");
    assert_ne!(as_json.headers["etag"], accepted.headers["etag"]);
    // `format` wins over `Accept`.
    let json_asked = api
        .get_with("/events?format=json", &[("accept", "application/geo+json")])
        .await;
    assert_eq!(json_asked.headers["content-type"], "application/json");

    // The detail: one Feature whose properties are the event with every version.
    let sc_id = sc_event_id(&api, &contract).await;
    let detail = contract
        .get(&api, "/events/{id}", &format!("/events/{sc_id}"), 200)
        .await;
    let feature = contract
        .get(
            &api,
            "/events/{id}",
            &format!("/events/{sc_id}?format=geojson"),
            200,
        )
        .await;
    support::geojson::check("Feature", &feature);
    support::geojson::assert_feature_of(
        &feature,
        &detail,
        &detail["latest"],
        &detail["latest"]["magnitude"],
    );
    assert_eq!(feature["geometry"]["coordinates"], json!([105.227, 29.239]));
    assert_eq!(feature["properties"]["magnitude"], 5.3);

    // Errors stay JSON, and another format is refused.
    let refused = contract
        .get(&api, "/events", "/events?format=geojson&page=0", 400)
        .await;
    assert_eq!(refused["code"], "out_of_range");
    let unknown = contract
        .get(&api, "/events", "/events?format=kml", 400)
        .await;
    assert!(unknown["error"].as_str().unwrap().contains("format"));
}

#[tokio::test(flavor = "multi_thread")]
async fn deliveries_include_duplicates_and_page_by_cursor() {
    let (api, contract) = api().await;
    let sc_id = sc_event_id(&api, &contract).await;
    let deliveries_path = format!("/events/{sc_id}/deliveries");
    let delivery_ids = sc_delivery_ids(&api, &contract, &sc_id).await;
    assert_eq!(
        delivery_ids.len(),
        7,
        "3 pushes on two sockets and one on one"
    );
    assert!(delivery_ids.windows(2).all(|w| w[0] < w[1]));
    let every = contract
        .get(&api, "/events/{id}/deliveries", &deliveries_path, 200)
        .await;
    assert_eq!(every["nextCursor"], delivery_ids[6]);
    let page1 = contract
        .get(
            &api,
            "/events/{id}/deliveries",
            &format!("{deliveries_path}?limit=3"),
            200,
        )
        .await;
    let page2 = contract
        .get(
            &api,
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
            &api,
            "/events/{id}/deliveries",
            &format!("{deliveries_path}?after=9007199254740991"),
            200,
        )
        .await;
    assert_eq!(empty["items"], json!([]));
    assert_eq!(empty["nextCursor"], 9007199254740991_i64);
}

#[tokio::test(flavor = "multi_thread")]
async fn raw_is_the_exact_bytes_with_their_lowercase_sha256() {
    let (api, contract) = api().await;
    let sc_id = sc_event_id(&api, &contract).await;
    let first = sc_delivery_ids(&api, &contract, &sc_id).await[0];
    let raw = api.get(&format!("/deliveries/{first}/raw")).await;
    assert_eq!(raw.status, 200);
    assert_eq!(raw.headers["content-type"], "application/octet-stream");
    assert_eq!(raw.body, sc_frame(1, 5.0).as_bytes());
    let hash = raw.headers["x-content-sha256"].to_str().unwrap();
    assert_eq!(hash, hex::encode(Sha256::digest(&raw.body)));
    assert_eq!(raw.headers["etag"].to_str().unwrap(), format!("\"{hash}\""));
    let hash_pattern = contract.doc["paths"]["/deliveries/{id}/raw"]["get"]["responses"]["200"]
        ["headers"]["X-Content-SHA256"]["schema"]["pattern"]
        .as_str()
        .expect("the hash header is documented with a pattern");
    assert_eq!(hash_pattern, "^[a-f0-9]{64}$");
}

#[tokio::test(flavor = "multi_thread")]
async fn reports_page_by_cursor_up_to_the_high_water() {
    let (api, contract) = api().await;
    let reports = contract
        .get(&api, "/reports", "/reports?limit=3", 200)
        .await;
    let ids = page_ids(&reports);
    assert_eq!(ids, [1, 2, 3]);
    assert_eq!(reports["nextCursor"], 3);
    assert_eq!(reports["highWater"], 8);
    let rest = contract
        .get(&api, "/reports", "/reports?after=3&limit=1000", 200)
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
        .get(&api, "/reports", "/reports?after=8", 200)
        .await;
    assert_eq!(done["items"], json!([]));
    assert_eq!(done["nextCursor"], 8, "an empty page keeps the cursor");
}

#[tokio::test(flavor = "multi_thread")]
async fn latest_is_the_newest_event_of_each_channel_with_a_note() {
    let (api, contract) = api().await;
    let latest = contract.get(&api, "/latest", "/latest", 200).await;
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
}

#[tokio::test(flavor = "multi_thread")]
async fn every_documented_error_is_a_400_404_or_409_with_the_documented_body() {
    let (api, contract) = api().await;
    let sc_id = sc_event_id(&api, &contract).await;
    let deliveries_path = format!("/events/{sc_id}/deliveries");
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
            "/events",
            "/events?q=%FF%FE".into(),
            400,
            "invalid_parameter",
        ),
        ("/events", "/events?%C0=1".into(), 400, "invalid_parameter"),
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
        ("/stream", "/stream?after=-1".into(), 400, "out_of_range"),
        ("/stream", "/stream?from=1".into(), 400, "unknown_parameter"),
        ("/ws", "/ws?after=x".into(), 400, "invalid_parameter"),
        ("/ws", "/ws".into(), 400, "websocket_upgrade_required"),
        // Cursors above the horizon (8) belong to another archive.
        (
            "/reports",
            "/reports?after=9".into(),
            409,
            "cursor_ahead_of_archive",
        ),
        (
            "/stream",
            "/stream?after=9".into(),
            409,
            "cursor_ahead_of_archive",
        ),
        ("/ws", "/ws?after=9".into(), 409, "cursor_ahead_of_archive"),
    ];
    for (template, path, status, code) in errors {
        let body = contract.get(&api, template, &path, status).await;
        assert_eq!(body["code"], code, "GET {path}");
    }
    let nowhere = api.get("/no/such/thing").await;
    assert_eq!(nowhere.status, 404);
    let body: Value = serde_json::from_slice(&nowhere.body).unwrap();
    assert_eq!(body["code"], "not_found");
    contract.check("Error", &body, "an unknown path");

    // Every documented 400, 404 and 409 of the family was met.
    contract.assert_covered(&eew_templates(&contract), &["400", "404", "409"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn every_documented_parameter_bound_is_accepted_and_one_step_beyond_refused() {
    // The bounds are read from the document itself: the edges are accepted and one step beyond is refused with
    // a 400.
    let (api, contract) = api().await;
    let sc_id = sc_event_id(&api, &contract).await;
    let first_delivery = sc_delivery_ids(&api, &contract, &sc_id).await[0];
    let concrete = |template: &str| {
        template
            .replace("/events/{id}", &format!("/events/{sc_id}"))
            .replace("/deliveries/{id}", &format!("/deliveries/{first_delivery}"))
    };
    for template in &eew_templates(&contract) {
        for parameter in contract.query_parameters(template) {
            let name = parameter["name"].as_str().unwrap();
            let (good, bad) = contract.probe_values(&parameter, template);
            let with = contract.companions(&parameter);
            for value in good {
                let path = format!("{}?{name}={}{with}", concrete(template), encode(&value));
                // A report cursor above the archive's horizon (8) is well formed, and refused as a cursor of
                // another archive.
                let report_cursor =
                    name == "after" && matches!(template.as_str(), "/reports" | "/stream" | "/ws");
                if report_cursor && value.parse::<i64>().is_ok_and(|after| after > 8) {
                    let body = contract.get(&api, template, &path, 409).await;
                    assert_eq!(body["code"], "cursor_ahead_of_archive");
                    continue;
                }
                match template.as_str() {
                    // A stream never ends: its headers are the answer.
                    "/stream" => {
                        let response = api.get(&path).await;
                        assert_eq!(response.status, 200, "GET {path}");
                        assert_eq!(response.headers["content-type"], "text/event-stream");
                    }
                    // Without an upgrade a good cursor can only be refused for the missing upgrade.
                    "/ws" => {
                        let body = contract.get(&api, template, &path, 400).await;
                        assert_eq!(body["code"], "websocket_upgrade_required");
                    }
                    _ => {
                        contract.get(&api, template, &path, 200).await;
                    }
                }
            }
            for value in bad {
                let path = format!("{}?{name}={}{with}", concrete(template), encode(&value));
                contract.get(&api, template, &path, 400).await;
            }
        }
    }
}

/// What ObsPy parsed for one event is the JSON API's event: the same id, origin time, place, depth (null when
/// unknown) and magnitude of its latest report, and a preliminary or final automatic origin.
fn assert_obspy_event_is(parsed: &Value, event: &Value) {
    let latest = &event["latest"];
    let id = event["id"].as_str().unwrap();
    assert_eq!(parsed["id"], format!("smi:osds/event/{id}"));
    let origin = osds_time::parse_ms(latest["originAt"].as_str().unwrap()).unwrap();
    let parsed_time = osds_time::parse_ms(parsed["time"].as_str().unwrap()).unwrap();
    assert_eq!(parsed_time, origin, "{parsed}");
    assert_eq!(parsed["latitude"], latest["latitude"]);
    assert_eq!(parsed["longitude"], latest["longitude"]);
    assert_eq!(parsed["depthKm"], latest["depthKm"]);
    assert_eq!(parsed["magnitude"], latest["magnitude"]);
    assert_eq!(parsed["description"], latest["epicenter"]);
    assert_eq!(parsed["evaluationMode"], "automatic");
    let status = if latest["isFinal"] == true {
        "final"
    } else {
        "preliminary"
    };
    assert_eq!(parsed["evaluationStatus"], status);
    assert_eq!(parsed["type"], "earthquake");
}

/// The FDSN event service, read by the real ObsPy FDSN client (which checks every request against the WADL):
/// each filter, order and page gives the events the JSON API gives for the same question, in the same order.
#[tokio::test(flavor = "multi_thread")]
async fn obspys_fdsn_client_reads_the_events_the_json_api_gives() {
    let (api, contract) = api().await;
    let dir = tempdir("fdsn");
    copy_into(archive(), &dir);
    let server = support::launch(dir.clone(), "ws://127.0.0.1:9", &["--no-ingest"])
        .start()
        .unwrap_or_else(|e| panic!("{e:#}"))
        .removing_dir();
    let root = server.base.trim_end_matches("/api/v1").to_string();
    let sc_id = sc_event_id(&api, &contract).await;
    let queries = json!([
        {},
        {"starttime": "2026-01-01T16:00:00", "endtime": "2026-01-31T16:00:00"},
        {"minlatitude": 20, "maxlatitude": 30, "minlongitude": 100, "maxlongitude": 125},
        {"latitude": 29.5, "longitude": 105.0, "maxradius": 1.0},
        {"minmagnitude": 5.25, "orderby": "magnitude"},
        {"mindepth": 0, "maxdepth": 20},
        {"orderby": "time-asc", "limit": 2, "offset": 2},
        {"contributor": "fj"},
        {"eventid": sc_id, "includeallorigins": true},
        {"minmagnitude": 9},
        {"catalog": "osds-hyp"},
    ]);
    let parsed = tokio::task::spawn_blocking({
        let root = root.clone();
        move || support::obspy_get_events(&root, &queries)
    })
    .await
    .unwrap();
    // The same questions of the JSON API (FDSN's end time is inclusive; a degree is 111.19 km on the sphere).
    let same = [
        "",
        "start=2026-01-01T16:00:00Z&end=2026-01-31T16:00:00.001Z",
        "minLatitude=20&maxLatitude=30&minLongitude=100&maxLongitude=125",
        "latitude=29.5&longitude=105&maxRadiusKm=111.19",
        "minMagnitude=5.25&order=magnitude",
        "minDepthKm=0&maxDepthKm=20",
        "order=time-asc",
        "source=fj",
    ];
    for (index, query) in same.iter().enumerate() {
        let page = contract
            .get(&api, "/events", &format!("/events?{query}"), 200)
            .await;
        let mut events: Vec<Value> = page["items"].as_array().unwrap().clone();
        if index == 6 {
            events = events[1..3].to_vec();
        }
        let got = parsed[index]
            .as_array()
            .unwrap_or_else(|| panic!("{index}: {}", parsed[index]));
        assert_eq!(got.len(), events.len(), "query {index} ({query}): {got:?}");
        assert!(!events.is_empty(), "query {index} selects something");
        for (parsed, event) in got.iter().zip(&events) {
            assert_obspy_event_is(parsed, event);
        }
    }
    // One event with every version as an origin, each with its magnitude.
    let detail = contract
        .get(&api, "/events/{id}", &format!("/events/{sc_id}"), 200)
        .await;
    let sc = &parsed[8][0];
    assert_obspy_event_is(sc, &detail);
    assert_eq!(sc["origins"], 4);
    assert_eq!(sc["magnitudes"], 4);
    // No event: ObsPy's own no-data answer (204), for a filter and for a catalogue without events.
    assert_eq!(parsed[9], "nodata");
    assert_eq!(parsed[10], "nodata");

    // The text format, the small documents and an error in the FDSN form, naming the parameter.
    let get = |path: &str| {
        let url = format!("{root}/fdsnws/event/1/{path}");
        async move {
            let response = reqwest::get(&url).await.unwrap();
            let status = response.status().as_u16();
            (status, response.text().await.unwrap())
        }
    };
    let (status, text) = get("query?format=text&orderby=time-asc&limit=2").await;
    assert_eq!(status, 200);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("#EventID|Time|Latitude|Longitude|Depth/km|"));
    assert_eq!(lines.len(), 3, "{text}");
    assert_eq!(
        lines[1].split('|').nth(7),
        Some("fj"),
        "oldest first: {text}"
    );
    assert_eq!(get("version").await, (200, "1.2.0".to_string()));
    let (_, catalogs) = get("catalogs").await;
    assert!(
        catalogs.contains("<Catalog>osds-eew</Catalog>")
            && catalogs.contains("<Catalog>osds-hyp</Catalog>")
    );
    let (_, contributors) = get("contributors").await;
    for name in ["cea", "sc", "fj", "cq", "osds-hyp"] {
        assert!(
            contributors.contains(&format!("<Contributor>{name}</Contributor>")),
            "{contributors}"
        );
    }
    let (status, error) = get("query?minlatitude=91").await;
    assert_eq!(status, 400);
    assert!(
        error.starts_with("Error 400: Bad Request") && error.contains("minlatitude"),
        "{error}"
    );
    let (status, error) = get("query?magnitudetype=mb").await;
    assert_eq!(status, 400);
    assert!(error.contains("magnitudetype"), "{error}");
    let (status, _) = get("query?minmagnitude=9&nodata=404").await;
    assert_eq!(status, 404);
    let (status, _) = get("query?minmagnitude=9").await;
    assert_eq!(status, 204);
    // `updatedafter`: every event changed since it was archived (now), none after.
    let (status, text) = get("query?format=text&updatedafter=2000-01-01").await;
    assert_eq!((status, text.lines().count()), (200, 6), "{text}");
    let (status, _) = get("query?updatedafter=2100-01-01T00:00:00").await;
    assert_eq!(status, 204);

    // Hostile input: NUL, invalid UTF-8, a control character, a huge value. Each is a 400 in the FDSN form
    // naming what is wrong, never a 500 or an answer that ignores it.
    let huge = "9".repeat(60_000);
    for (path, names) in [
        ("query?minlatitude=%00".to_string(), "minlatitude"),
        (
            "query?starttime=2026-01-01T00:00:00%00".to_string(),
            "starttime",
        ),
        (
            "query?contributor=%FF%FE".to_string(),
            "`contributor` is not UTF-8",
        ),
        ("query?eventid=%FF".to_string(), "`eventid` is not UTF-8"),
        ("query?catalog=osds-eew%00".to_string(), "catalog"),
        ("query?format=text%0A".to_string(), "format"),
        (format!("query?maxdepth={huge}"), "maxdepth"),
        ("query?%FF=1".to_string(), "name is not UTF-8"),
    ] {
        let (status, error) = get(&path).await;
        assert_eq!(status, 400, "{path:.80}: {error}");
        assert!(
            error.starts_with("Error 400: Bad Request") && error.contains(names),
            "{path:.80}: {error}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn schemathesis_finds_no_failure_in_the_real_server() {
    let st = support::schemathesis();
    let dir = tempdir("schemathesis");
    copy_into(archive(), &dir);
    let server = support::launch(dir.clone(), "ws://127.0.0.1:9", &["--no-ingest"])
        .start()
        .unwrap_or_else(|e| panic!("{e:#}"))
        .removing_dir();
    // Every check on every operation, a bounded number of examples each, from a fixed seed. Left out, with
    // their reasons: /stream and /ws, whose bodies never end (tests/live.rs checks every live message against
    // the document); and the check that every schema-valid request is accepted, since `from` after `to` is a
    // documented 400 that a schema cannot express.
    let output = tokio::process::Command::new(&st)
        .current_dir(&dir)
        .args(["run", "--url", &server.base])
        .arg(support::tests_dir().join("../schemas/openapi.yaml"))
        .args(["--max-examples", "10", "--seed", "1", "--checks", "all"])
        .args(["--exclude-checks", "positive_data_acceptance"])
        .args(["--exclude-path", "/stream", "--exclude-path", "/ws"])
        .args(["--exclude-path", "/hyp/stream", "--exclude-path", "/hyp/ws"])
        .env("NO_COLOR", "1")
        .output()
        .await
        .expect("run schemathesis");
    assert!(
        output.status.success(),
        "schemathesis found failures:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_service_serves_its_index_its_document_and_a_reference_page() {
    let (api, contract) = api().await;
    let index = contract.get(&api, "/", "", 200).await;
    let slash = contract.get(&api, "/", "/", 200).await;
    assert_eq!(index, slash);
    let documented: Vec<String> = contract.doc["paths"]
        .as_object()
        .unwrap()
        .keys()
        .map(|p| format!("/api/v1{p}"))
        .collect();
    let listed: Vec<String> = index["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["path"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(listed, documented);
    // The served document is the one these tests validate against, as JSON and as written.
    let served = contract
        .get(&api, "/openapi.json", "/openapi.json", 200)
        .await;
    assert_eq!(served, contract.doc);
    let yaml = api.get("/openapi.yaml").await;
    assert_eq!(yaml.status, 200);
    assert!(
        yaml.headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/yaml")
    );
    let written = std::fs::read(support::tests_dir().join("../schemas/openapi.yaml")).unwrap();
    assert_eq!(yaml.body, written);
    // The page names every path, and loads nothing from elsewhere.
    let docs = api.get("/docs").await;
    assert_eq!(docs.status, 200);
    assert_eq!(docs.headers["content-type"], "text/html; charset=utf-8");
    let page = String::from_utf8(docs.body).unwrap();
    for template in contract.doc["paths"].as_object().unwrap().keys() {
        assert!(
            page.contains(&format!(
                "data-path=\"{}\"",
                template.replace('"', "&quot;")
            )),
            "{template} is not on the page"
        );
    }
    assert!(!page.contains("http://") && !page.contains("https://") && !page.contains("<script"));
    for template in ["/", "/openapi.json", "/openapi.yaml", "/docs"] {
        let body = contract
            .get(&api, template, &format!("{template}?x=1"), 400)
            .await;
        assert_eq!(body["code"], "unknown_parameter");
    }
}
