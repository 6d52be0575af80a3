//! The self-sensing family end to end: detector solutions appended through the real shaper component with
//! `osds hyp import`, then every `/hyp` endpoint and bound of the real server checked against the spec and
//! `schemas/openapi.yaml`: grades by the table, `sha256` of the stored payload, the visibility rule, and hidden
//! and missing events answering the same 404.

mod support;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::process::Output;
use support::contract::{Contract, encode};
use support::{get_json, osds, start_server_in, tempdir};

const ALGORITHM: &str = "osds-hyp/1:test";
const NOTO: &str = "hyp:20240101T071022:1";
const CANDIDATE_ONLY: &str = "hyp:20240102T000000:1";
const TO_HIDE: &str = "hyp:20240103T000000:1";
const T0: i64 = 1_704_060_622_500; // 2024-01-01 16:10:22.5 JST

/// `n` used stations evenly spread in azimuth around the epicentre, each with the same residual.
fn stations(n: usize, residual: f64, first_pick: i64) -> Vec<Value> {
    (0..n)
        .map(|i| {
            let azimuth = 360.0 * i as f64 / n as f64;
            json!({
                "code": format!("ISK{i:03}"),
                "name": format!("station {i}"),
                "latitude": 37.5 + 0.3 * azimuth.to_radians().cos(),
                "longitude": 137.3 + 0.3 * azimuth.to_radians().sin(),
                "distanceKm": 30.0 + i as f64,
                "azimuthDegrees": azimuth,
                "pickAt": first_pick + 1000 * i as i64,
                "residualSeconds": if i % 2 == 0 { residual } else { -residual },
                "used": true,
                "sWaveReached": i < n / 2,
                "peaks": { "surface:intensity": 5.0 - 0.1 * i as f64, "surface:pgaGal": 400.0 - i as f64 },
                "magnitude": if i < n / 2 { json!(7.4) } else { Value::Null },
            })
        })
        .collect()
}

fn solution(
    event: &str,
    number: u32,
    status: &str,
    stations: Vec<Value>,
    magnitude: Option<f64>,
) -> Value {
    let used = stations.iter().filter(|s| s["used"] == true).count();
    json!({
        "eventId": event,
        "reportNumber": number,
        "status": status,
        "firstDetectedAt": T0 + 4_000,
        "reportedAt": T0 + 4_000 + 1_000 * number as i64,
        "recordedAt": T0 + 4_200 + 1_000 * number as i64,
        "algorithm": ALGORITHM,
        "epicenter": "石川県能登地方",
        "region": "hokuriku",
        "hypocentre": {
            "latitude": 37.5, "longitude": 137.27, "depthKm": 16.0, "originAt": T0,
            "calculatedAt": T0 + 4_100 + 1_000 * number as i64, "score": 0.9, "bestScore": 0.92,
            "depthFixed": used < 3, "quietStationCount": 2, "sLikeStationCount": used / 2,
        },
        "magnitude": {
            "value": magnitude, "type": magnitude.map(|_| "Mw"), "stationCount": if magnitude.is_some() { used / 2 } else { 0 },
            "uncertainty": 0.2, "calculatedAt": T0 + 4_100 + 1_000 * number as i64, "retained": false,
        },
        "selection": { "windowStart": T0 + 3_000, "selectedAt": T0 + 4_000, "candidateCount": 3 },
        "stations": stations,
    })
}

fn metric(station: &str, key: &str, peak: f64, at: i64) -> Value {
    json!({ "station": station, "name": "station", "latitude": 37.4, "longitude": 137.2, "metric": key,
            "peak": peak, "sourceAt": at, "receivedAt": at + 1_800, "recovered": false })
}

/// A new, empty archive in `dir`, created as an operator creates one: `osds serve` starts on it and stops
/// (every other command refuses a database that does not exist). Its URL.
async fn new_archive(dir: &std::path::Path) -> String {
    let mut server = start_server_in(dir.to_path_buf(), "ws://127.0.0.1:9", &["--no-ingest"]);
    server.stop().await;
    support::database::url_for(dir)
}

fn run(args: &[&str]) -> Output {
    osds().args(args).output().expect("run osds")
}

/// Writes `lines` as the JSON-lines file `name` in `dir` and runs `osds hyp import` of it into `database`.
fn import_solutions(dir: &std::path::Path, database: &str, name: &str, lines: &[Value]) -> Output {
    let file = dir.join(name);
    let jsonl: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&file, jsonl).unwrap();
    run(&[
        "hyp",
        "import",
        "--database-url",
        database,
        file.to_str().unwrap(),
    ])
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// The report as stored: the served object without the `sha256` the response adds.
fn stored_payload(report: &Value) -> Vec<u8> {
    let mut report = report.clone();
    report.as_object_mut().unwrap().remove("sha256");
    serde_json::to_vec(&report).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_hyp_family_serves_graded_append_only_reports_by_the_spec() {
    let contract = Contract::load();
    let dir = tempdir("hyp");
    let database = new_archive(&dir).await;

    // The Noto event grows from 2 to 22 stations; one candidate never confirmed; one event to hide.
    let mut last = stations(22, 0.4, T0 + 4_000);
    last.push(json!({
        "code": "FAR001", "latitude": 36.0, "longitude": 139.0, "distanceKm": 250.0, "azimuthDegrees": 130.0,
        "pickAt": null, "residualSeconds": 9.0, "used": false, "sWaveReached": false, "peaks": {}, "magnitude": null,
    }));
    let lines = [
        json!({ "solution": solution(NOTO, 1, "candidate", stations(2, 0.3, T0 + 4_000), None),
                "stationMetrics": [metric("ISK000", "surface:intensity", 4.1, T0 + 5_000)] }),
        json!({ "solution": solution(NOTO, 2, "preliminary", stations(4, 0.3, T0 + 4_000), None),
                "stationMetrics": [metric("ISK000", "surface:intensity", 5.2, T0 + 6_000),
                                   metric("ISK000", "underground:intensity", 3.9, T0 + 6_000)] }),
        json!({ "solution": solution(NOTO, 3, "tracking", stations(12, 0.6, T0 + 4_000), Some(7.3)),
                "stationMetrics": [metric("ISK000", "surface:intensity", 4.8, T0 + 7_000),
                                   metric("ISK001", "surface:pgaGal", 812.5, T0 + 7_000)] }),
        json!({ "solution": solution(NOTO, 4, "finalized", last, Some(7.5)) }),
        json!({ "solution": solution(CANDIDATE_ONLY, 1, "candidate", stations(2, 0.3, T0), None) }),
        solution(TO_HIDE, 1, "preliminary", stations(5, 0.5, T0), None),
    ];
    let imported = import_solutions(&dir, &database, "solutions.jsonl", &lines);
    assert!(imported.status.success(), "{}", text(&imported));
    assert!(
        text(&imported).contains("6 reports appended, 0 refused"),
        "{}",
        text(&imported)
    );

    // Append-only: a report number that is taken, or skips one, is refused.
    let refused = import_solutions(
        &dir,
        &database,
        "again.jsonl",
        &[
            solution(NOTO, 2, "tracking", stations(4, 0.3, T0), None),
            solution(NOTO, 9, "tracking", stations(4, 0.3, T0), None),
        ],
    );
    assert!(!refused.status.success());
    assert!(
        text(&refused).contains("0 reports appended, 2 refused"),
        "{}",
        text(&refused)
    );
    let hidden = run(&["hyp", "hide", "--database-url", &database, TO_HIDE]);
    assert!(hidden.status.success(), "{}", text(&hidden));

    let server = start_server_in(dir.clone(), "ws://127.0.0.1:9", &["--no-ingest"]);

    // Status: no detector has run, and the spec's constants.
    let status = contract
        .get(&server, "/hyp/status", "/hyp/status", 200)
        .await;
    assert_eq!(status["officialEewTakeover"], false);
    assert_eq!(status["stationScope"], "algorithm-associated");
    assert_eq!(
        status["detector"],
        Value::Null,
        "nothing invented while no detector runs"
    );
    assert_eq!(status["algorithm"], ALGORITHM);
    assert_eq!(status["archive"]["reports"], 6);
    assert_eq!(status["archive"]["publicEvents"], 1);

    // The list: only the public event, no `pages`, the latest report summarised.
    let page = contract
        .get(&server, "/hyp/events", "/hyp/events", 200)
        .await;
    assert_eq!(page["total"], 1);
    assert!(page.get("pages").is_none());
    let item = &page["items"][0];
    assert_eq!(item["id"], NOTO);
    assert_eq!(item["status"], "finalized");
    assert_eq!(item["region"], "hokuriku");
    assert_eq!(item["first_at"], T0 + 4_000);
    assert_eq!(item["latest"]["reportNumber"], 4);
    assert!(item["latest"].get("stations").is_none());
    let first_at = T0 + 4_000;
    for (query, total) in [
        ("q=20240101".to_string(), 1),
        ("q=osaka".to_string(), 0),
        (format!("from={first_at}"), 1),
        (format!("from={}", first_at + 1), 0),
        (format!("to={first_at}"), 0),
        (format!("to={}", first_at + 1), 1),
        ("page=2".to_string(), 1),
        // The place filters, on the latest report (37.5 N, 137.27 E, 16 km, M7.5, origin T0).
        (
            "latitude=37.5&longitude=137.3&maxRadiusKm=10".to_string(),
            1,
        ),
        ("latitude=35&longitude=135&maxRadiusKm=100".to_string(), 0),
        (
            "minLatitude=37&maxLatitude=38&minLongitude=137&maxLongitude=138".to_string(),
            1,
        ),
        ("minDepthKm=10&maxDepthKm=20".to_string(), 1),
        ("maxDepthKm=10".to_string(), 0),
        (
            "minMagnitude=7&maxMagnitude=8&order=magnitude".to_string(),
            1,
        ),
        ("maxMagnitude=7".to_string(), 0),
        (
            format!("start={}", osds_time::rfc3339_ms(T0).replace('+', "%2B")),
            1,
        ),
        (format!("start={}", osds_time::rfc3339_ms(T0 + 1)), 0),
        (format!("end={}", osds_time::rfc3339_ms(T0)), 0),
    ] {
        let page = contract
            .get(&server, "/hyp/events", &format!("/hyp/events?{query}"), 200)
            .await;
        assert_eq!(page["total"], total, "{query}");
    }

    // The full event: every report, graded by the table, with the hash of its stored payload.
    let encoded = NOTO.replace(':', "%3A");
    let event = contract
        .get(
            &server,
            "/hyp/events/{id}",
            &format!("/hyp/events/{encoded}"),
            200,
        )
        .await;
    let reports = event["reports"].as_array().unwrap();
    let grades: Vec<&str> = reports
        .iter()
        .map(|r| r["quality"]["grade"].as_str().unwrap())
        .collect();
    // 2 stations: D; 4 stations (gap 90, rms 0.3): C; 12 (gap 30, rms 0.6): A; 22 (rms 0.4; the unused far
    // station does not count): S. Never worse as stations accrue.
    assert_eq!(grades, ["D", "C", "A", "S"]);
    assert_eq!(reports[3]["quality"]["stationCount"], 22);
    assert_eq!(reports[2]["quality"]["azimuthGapDegrees"], 30.0);
    assert_eq!(
        reports[1]["event"]["magnitude"],
        Value::Null,
        "null: not estimable yet"
    );
    assert_eq!(reports[3]["event"]["magnitude"], 7.5);
    assert!(
        reports[3]["event"].get("latitude").is_none(),
        "position only in hypEstimate"
    );
    assert_eq!(reports[3]["event"]["hypEstimate"]["originAt"], T0);
    for report in reports {
        let digest = hex::encode(Sha256::digest(stored_payload(report)));
        assert_eq!(
            report["sha256"],
            digest.as_str(),
            "sha256 is the stored payload's hash"
        );
    }
    let stations = event["stations"].as_array().unwrap();
    let isk000 = stations.iter().find(|s| s["code"] == "ISK000").unwrap();
    assert_eq!(
        isk000["metrics"]["surface:intensity"]["peak"], 5.2,
        "the event-level peak only grows"
    );
    assert_eq!(
        isk000["metrics"]["surface:intensity"]["sourceAt"],
        T0 + 6_000
    );
    assert_eq!(
        isk000["metrics"]["underground:intensity"]["recovered"],
        false
    );

    let plain = contract
        .get(
            &server,
            "/hyp/events/{id}",
            &format!("/hyp/events/{NOTO}"),
            200,
        )
        .await;
    assert_eq!(plain, event, "unencoded colons reach the same event");
    let summary = contract
        .get(
            &server,
            "/hyp/events/{id}",
            &format!("/hyp/events/{encoded}?view=summary"),
            200,
        )
        .await;
    for report in summary["reports"].as_array().unwrap() {
        assert!(report.get("stations").is_none() && report.get("sourceFrames").is_none());
        assert!(report["event"].get("evidence").is_none());
        assert!(
            report["event"]["hypEstimate"].is_object(),
            "main parameters stay"
        );
        assert!(report["quality"]["grade"].is_string());
    }
    assert_eq!(
        summary["stations"], event["stations"],
        "event-level peaks stay"
    );

    // GeoJSON: the list and the summary as Features at the latest report's hypocentre, by `format` or `Accept`.
    let features = contract
        .get(&server, "/hyp/events", "/hyp/events?format=geojson", 200)
        .await;
    support::geojson::check("FeatureCollection", &features);
    assert_eq!(features["total"], page["total"]);
    assert!(features.get("pages").is_none());
    let item = &page["items"][0];
    support::geojson::assert_feature_of(
        &features["features"][0],
        item,
        &item["latest"]["event"]["hypEstimate"],
        &item["latest"]["event"]["magnitude"],
    );
    assert_eq!(features["features"][0]["properties"]["magnitude"], 7.5);
    let accepted = reqwest::Client::new()
        .get(server.url(&format!("/hyp/events/{encoded}?view=summary")))
        .header("accept", "application/geo+json")
        .send()
        .await
        .unwrap();
    assert_eq!(accepted.headers()["content-type"], "application/geo+json");
    let feature: Value = accepted.json().await.unwrap();
    support::geojson::check("Feature", &feature);
    let latest = &summary["reports"][3]["event"];
    support::geojson::assert_feature_of(
        &feature,
        &summary,
        &latest["hypEstimate"],
        &latest["magnitude"],
    );
    let by_format = contract
        .get(
            &server,
            "/hyp/events/{id}",
            &format!("/hyp/events/{encoded}?view=summary&format=geojson"),
            200,
        )
        .await;
    assert_eq!(by_format, feature);

    // The FDSN event service, read by ObsPy's FDSN client: the public event (never the hidden one or a
    // candidate), at its latest report, with one origin per report when asked; the EEW catalogue is empty.
    let root = server.base.trim_end_matches("/api/v1").to_string();
    let queries = json!([
        {"catalog": "osds-hyp"},
        {"contributor": "osds-hyp", "latitude": 37.5, "longitude": 137.3, "maxradius": 0.5, "includeallorigins": true},
        {"eventid": NOTO},
        {"catalog": "osds-eew"},
        {"contributor": "osds-hyp", "latitude": 35.0, "longitude": 135.0, "maxradius": 0.5},
    ]);
    let parsed = tokio::task::spawn_blocking(move || support::obspy_get_events(&root, &queries))
        .await
        .unwrap();
    let latest = &event["reports"][3]["event"];
    for (index, origins) in [(0, 1), (1, 4), (2, 1)] {
        let events = parsed[index]
            .as_array()
            .unwrap_or_else(|| panic!("{index}: {}", parsed[index]));
        assert_eq!(events.len(), 1, "{index}: {events:?}");
        let got = &events[0];
        assert_eq!(
            got["id"],
            format!("smi:osds/event/{}", NOTO.replace(':', "."))
        );
        assert_eq!(got["origins"], origins, "{index}");
        assert_eq!(got["latitude"], latest["hypEstimate"]["latitude"]);
        assert_eq!(got["longitude"], latest["hypEstimate"]["longitude"]);
        assert_eq!(got["depthKm"], latest["hypEstimate"]["depthKm"]);
        assert_eq!(got["magnitude"], latest["magnitude"]);
        assert_eq!(
            osds_time::parse_ms(got["time"].as_str().unwrap()),
            Some(T0),
            "{got}"
        );
        assert_eq!(got["evaluationStatus"], "final", "a finalized event");
    }
    // Every report an origin; the one without a magnitude has none.
    let with_magnitude = event["reports"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["event"]["magnitude"].is_number())
        .count();
    assert_eq!(parsed[1][0]["magnitudes"], with_magnitude);
    assert_eq!(parsed[3], "nodata");
    assert_eq!(parsed[4], "nodata");

    // One report, and the export.
    let third = contract
        .get(
            &server,
            "/hyp/events/{id}/reports/{number}",
            &format!("/hyp/events/{encoded}/reports/3"),
            200,
        )
        .await;
    assert_eq!(third, reports[2]);
    assert!(!third["event"]["evidence"].as_array().unwrap().is_empty());
    let export = contract
        .get(
            &server,
            "/hyp/events/{id}/export",
            &format!("/hyp/events/{encoded}/export"),
            200,
        )
        .await;
    assert_eq!(export["reports"], event["reports"]);
    assert!(export["exportedAt"].is_i64());
    // `view=summary` does not change an export: it is always the full event.
    let summary_export = contract
        .get(
            &server,
            "/hyp/events/{id}/export",
            &format!("/hyp/events/{encoded}/export?view=summary"),
            200,
        )
        .await;
    assert_eq!(summary_export["reports"], event["reports"]);

    // Hidden, never-confirmed and missing events are the same 404.
    let mut bodies = Vec::new();
    for id in [TO_HIDE, CANDIDATE_ONLY, "hyp:19990101T000000:9"] {
        let id = encode(id);
        for (template, path) in [
            ("/hyp/events/{id}", format!("/hyp/events/{id}")),
            (
                "/hyp/events/{id}/export",
                format!("/hyp/events/{id}/export"),
            ),
            (
                "/hyp/events/{id}/reports/{number}",
                format!("/hyp/events/{id}/reports/1"),
            ),
        ] {
            let body = contract.get(&server, template, &path, 404).await;
            bodies.push((template, body["code"].clone()));
        }
    }
    assert!(bodies.iter().all(|(_, code)| code == "not_found"));
    let listed = get_json(&server.url("/hyp/events?q=20240103")).await;
    assert_eq!(listed["total"], 0, "a hidden event is not listed");

    // Bad input: 400 with the error body.
    for (template, path) in [
        (
            "/hyp/events/{id}",
            format!("/hyp/events/{encoded}?view=full"),
        ),
        (
            "/hyp/events/{id}",
            format!("/hyp/events/{encoded}?view=summary&view=summary"),
        ),
        (
            "/hyp/events/{id}/reports/{number}",
            format!("/hyp/events/{encoded}/reports/0"),
        ),
        (
            "/hyp/events/{id}/reports/{number}",
            format!("/hyp/events/{encoded}/reports/x"),
        ),
        (
            "/hyp/events/{id}/export",
            format!("/hyp/events/{encoded}/export?view=full"),
        ),
        ("/hyp/events", "/hyp/events?from=10&to=5".to_string()),
        ("/hyp/status", "/hyp/status?x=1".to_string()),
    ] {
        contract.get(&server, template, &path, 400).await;
    }
    let missing_report = contract
        .get(
            &server,
            "/hyp/events/{id}/reports/{number}",
            &format!("/hyp/events/{encoded}/reports/5"),
            404,
        )
        .await;
    assert_eq!(missing_report["code"], "not_found");

    // Every documented bound of the hyp query parameters, read from the document.
    let templates: Vec<String> = contract.doc["paths"]
        .as_object()
        .unwrap()
        .keys()
        .filter(|t| t.starts_with("/hyp/"))
        .cloned()
        .collect();
    for template in &templates {
        let concrete = template.replace("{id}", &encoded).replace("{number}", "1");
        for parameter in contract.query_parameters(template) {
            let name = parameter["name"].as_str().unwrap();
            let (good, bad) = contract.probe_values(&parameter, template);
            let with = contract.companions(&parameter);
            for value in good {
                let path = format!("{concrete}?{name}={}{with}", encode(&value));
                // A live cursor above the archive's six reports is well formed, and refused as another
                // archive's.
                let ahead = name == "after" && value.parse::<i64>().is_ok_and(|after| after > 6);
                match template.as_str() {
                    _ if ahead => {
                        let body = contract.get(&server, template, &path, 409).await;
                        assert_eq!(body["code"], "cursor_ahead_of_archive");
                    }
                    // A stream never ends: its head is the answer.
                    "/hyp/stream" => {
                        let response = reqwest::get(server.url(&path)).await.unwrap();
                        assert_eq!(response.status(), 200, "GET {path}");
                        assert_eq!(response.headers()["content-type"], "text/event-stream");
                        contract
                            .covered
                            .lock()
                            .unwrap()
                            .insert((template.clone(), 200));
                    }
                    // Without an upgrade a good cursor can only be refused for the missing upgrade.
                    "/hyp/ws" => {
                        let body = contract.get(&server, template, &path, 400).await;
                        assert_eq!(body["code"], "websocket_upgrade_required");
                    }
                    _ => {
                        contract.get(&server, template, &path, 200).await;
                    }
                }
            }
            for value in bad {
                let path = format!("{concrete}?{name}={}{with}", encode(&value));
                contract.get(&server, template, &path, 400).await;
            }
        }
    }
    contract.assert_covered(&templates, &["200", "400", "404"]);
}

/// `(cursor, event id, report number)` of a live report message's `id` and `data`.
fn live_report(id: &str, data: &Value) -> (i64, String, i64) {
    (
        id.parse().unwrap(),
        data["eventId"].as_str().unwrap().to_string(),
        data["report"]["reportNumber"].as_i64().unwrap(),
    )
}

/// The next `report` of a self-sensing SSE stream, as [`live_report`] reads it (status messages skipped).
async fn next_live_report(stream: &mut support::live::SseClient) -> (i64, String, i64) {
    loop {
        let event = stream.next_event().await.expect("the stream goes on");
        if event.event.as_deref() == Some("report") {
            let data: Value = serde_json::from_str(&event.data).unwrap();
            return live_report(event.id.as_deref().unwrap(), &data);
        }
        assert_eq!(event.event.as_deref(), Some("status"), "{event:?}");
    }
}

/// Live self-sensing: the published reports (not a candidate's, not a hidden event's) replayed from a cursor over
/// SSE and WebSocket, new ones pushed as `osds hyp import` archives them, and a consumer that reconnects after a
/// restart with its last cursor gets exactly what it missed.
#[tokio::test(flavor = "multi_thread")]
async fn live_self_sensing_reports_resume_by_cursor_across_a_restart() {
    const LATER: &str = "hyp:20240105T000000:1";
    let dir = tempdir("hyp-live");
    let database = new_archive(&dir).await;
    let import = |name: &str, lines: &[Value]| {
        let imported = import_solutions(&dir, &database, name, lines);
        assert!(imported.status.success(), "{}", text(&imported));
    };
    // Cursors 1-6: Noto's candidate, preliminary, tracking and finalized reports; a candidate-only event; an
    // event that is then hidden.
    import(
        "first.jsonl",
        &[
            solution(NOTO, 1, "candidate", stations(2, 0.3, T0), None),
            solution(NOTO, 2, "preliminary", stations(4, 0.3, T0), None),
            solution(NOTO, 3, "tracking", stations(12, 0.6, T0), Some(7.3)),
            solution(NOTO, 4, "finalized", stations(22, 0.4, T0), Some(7.5)),
            solution(CANDIDATE_ONLY, 1, "candidate", stations(2, 0.3, T0), None),
            solution(TO_HIDE, 1, "preliminary", stations(5, 0.5, T0), None),
        ],
    );
    let hidden = run(&["hyp", "hide", "--database-url", &database, TO_HIDE]);
    assert!(hidden.status.success(), "{}", text(&hidden));
    let mut server = start_server_in(dir.clone(), "ws://127.0.0.1:9", &["--no-ingest"]);
    let served = get_json(&server.url(&format!("/hyp/events/{}", NOTO.replace(':', "%3A")))).await;

    let mut stream = support::live::SseClient::connect(&server.url("/hyp/stream?after=0"), None)
        .await
        .unwrap();
    let ready = stream.next_event().await.unwrap();
    assert_eq!(ready.event.as_deref(), Some("ready"));
    let ready: Value = serde_json::from_str(&ready.data).unwrap();
    assert_eq!(
        (ready["cursor"].as_i64(), ready["highWater"].as_i64()),
        (Some(0), Some(6))
    );
    let noto = |n: i64, cursor: i64| (cursor, NOTO.to_string(), n);
    for expected in [noto(2, 2), noto(3, 3), noto(4, 4)] {
        assert_eq!(next_live_report(&mut stream).await, expected);
    }

    // The WebSocket: the same reports, each as the report endpoint serves it; `ping` is answered.
    let (mut ws, _) = tokio_tungstenite::connect_async(server.ws_url("/hyp/ws?after=0"))
        .await
        .unwrap();
    let ready = support::live::ws_next(&mut ws).await.unwrap();
    assert_eq!(
        (ready["type"].as_str(), ready["cursor"].as_i64()),
        (Some("ready"), Some(0))
    );
    for expected in [noto(2, 2), noto(3, 3), noto(4, 4)] {
        let message = support::live::ws_next(&mut ws).await.unwrap();
        assert_eq!(message["type"], "report");
        let got = live_report(&message["id"].to_string(), &message["data"]);
        assert_eq!(got, expected);
        assert_eq!(
            message["data"]["report"],
            served["reports"][(got.2 - 1) as usize]
        );
    }
    use futures_util::SinkExt;
    ws.send(tokio_tungstenite::tungstenite::Message::Text("ping".into()))
        .await
        .unwrap();
    assert_eq!(
        support::live::ws_next(&mut ws).await.unwrap()["type"],
        "pong"
    );

    // Archived while the stream is open (by another process): pushed, in order.
    import(
        "later.jsonl",
        &[
            solution(LATER, 1, "preliminary", stations(5, 0.5, T0), None),
            solution(LATER, 2, "tracking", stations(9, 0.5, T0), Some(5.1)),
        ],
    );
    let later = |n: i64, cursor: i64| (cursor, LATER.to_string(), n);
    assert_eq!(next_live_report(&mut stream).await, later(1, 7));
    assert_eq!(next_live_report(&mut stream).await, later(2, 8));
    drop(stream);
    drop(ws);

    // The service restarts; one report is archived meanwhile; the consumer comes back with its last cursor.
    server.stop().await;
    import(
        "while-down.jsonl",
        &[solution(
            LATER,
            3,
            "finalized",
            stations(9, 0.5, T0),
            Some(5.2),
        )],
    );
    let server = start_server_in(dir.clone(), "ws://127.0.0.1:9", &["--no-ingest"]);
    let mut stream = support::live::SseClient::connect(&server.url("/hyp/stream"), Some("8"))
        .await
        .unwrap();
    let ready: Value = serde_json::from_str(&stream.next_event().await.unwrap().data).unwrap();
    assert_eq!(
        (ready["cursor"].as_i64(), ready["highWater"].as_i64()),
        (Some(8), Some(9))
    );
    assert_eq!(next_live_report(&mut stream).await, later(3, 9));
    // A cursor from another archive is refused.
    let ahead = support::live::SseClient::connect(&server.url("/hyp/stream?after=10"), None).await;
    assert_eq!(ahead.err().map(|(status, _)| status), Some(409));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_shaper_is_hot_swapped_through_the_admin_socket_with_a_canary() {
    let dir = tempdir("hyp-shaper");
    let database = new_archive(&dir).await;
    let imported = import_solutions(
        &dir,
        &database,
        "solutions.jsonl",
        &[
            solution(NOTO, 1, "preliminary", stations(4, 0.3, T0), None),
            solution(NOTO, 2, "tracking", stations(12, 0.6, T0), Some(7.3)),
        ],
    );
    assert!(imported.status.success(), "{}", text(&imported));
    let server = start_server_in(dir.clone(), "ws://127.0.0.1:9", &["--no-ingest"]);
    let shaper_name =
        || async { get_json(&server.url("/hyp/status")).await["shaper"]["name"].clone() };
    assert_eq!(shaper_name().await, "hyp-shaper");
    let socket = dir.join("admin.sock");
    let components = |args: &[&str]| {
        let mut all = vec!["components", "--admin-socket", socket.to_str().unwrap()];
        all.extend_from_slice(args);
        run(&all)
    };

    // A shaper that cannot shape the stored solutions is refused.
    let broken = support::guest_component("test-decoders", "test_shaper_broken.wasm");
    let refused = components(&["install", "hyp", broken.to_str().unwrap()]);
    assert!(!refused.status.success(), "{}", text(&refused));
    assert!(
        text(&refused).contains("cannot shape"),
        "{}",
        text(&refused)
    );
    assert_eq!(shaper_name().await, "hyp-shaper");

    // A good one reshapes them identically and is swapped in; a rollback puts the old one back.
    let v2 = support::guest_component("test-decoders", "test_shaper_v2.wasm");
    let checked = components(&["check", v2.to_str().unwrap()]);
    assert!(checked.status.success(), "{}", text(&checked));
    assert!(
        text(&checked).contains("canary: 2 payloads, 2 unchanged"),
        "{}",
        text(&checked)
    );
    let installed = components(&["install", "hyp", v2.to_str().unwrap()]);
    assert!(installed.status.success(), "{}", text(&installed));
    assert_eq!(shaper_name().await, "hyp-shaper-v2");
    let back = components(&["rollback", "hyp"]);
    assert!(back.status.success(), "{}", text(&back));
    assert_eq!(shaper_name().await, "hyp-shaper");

    // An installed shaper survives a restart, and so does its rollback target.
    let installed = components(&["install", "hyp", v2.to_str().unwrap()]);
    assert!(installed.status.success(), "{}", text(&installed));
    let mut server = server;
    server.stop().await;
    let server = start_server_in(server.into_dir(), "ws://127.0.0.1:9", &["--no-ingest"]);
    let shaper_name =
        || async { get_json(&server.url("/hyp/status")).await["shaper"]["name"].clone() };
    assert_eq!(shaper_name().await, "hyp-shaper-v2");

    // Export writes what is in service, the shaper included.
    let exported = dir.join("exported");
    let export = components(&["export", exported.to_str().unwrap()]);
    assert!(export.status.success(), "{}", text(&export));
    let shaper_sha = get_json(&server.url("/hyp/status")).await["shaper"]["sha256"].clone();
    let bytes = std::fs::read(exported.join("hyp_shaper.wasm")).unwrap();
    assert_eq!(hex::encode(Sha256::digest(&bytes)), shaper_sha);
    for channel in ["cea", "sc", "fj", "cq"] {
        assert!(exported.join(format!("decoder_{channel}.wasm")).is_file());
    }

    let back = components(&["rollback", "hyp"]);
    assert!(back.status.success(), "{}", text(&back));
    assert_eq!(shaper_name().await, "hyp-shaper");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_detector_that_stopped_writing_its_state_is_shown_stale_not_ok() {
    let dir = tempdir("hyp-stale");
    let database = new_archive(&dir).await;
    // The last state a detector wrote a minute ago, claiming to run with a healthy source, then died.
    let written_at = osds_time::now_ms() - 60_000;
    let (_store, mut writer) = osds_store::open(&database).await.unwrap();
    let running = json!({
        "state": "running",
        "algorithm": ALGORITHM,
        "sources": [{ "source": "kmoni", "health": "ok" }],
        "errors": [],
    });
    writer
        .set_hyp_state("detector", written_at, &running)
        .await
        .unwrap();
    drop(writer);

    let server = start_server_in(dir, "ws://127.0.0.1:9", &["--no-ingest"]).removing_dir();
    let status = get_json(&server.url("/hyp/status")).await;
    assert_eq!(status["detector"]["state"], "stale", "{status}");
    assert_eq!(status["detector"]["updatedAt"], written_at);
    assert_eq!(status["sources"][0]["health"], "stale", "{status}");
    assert!(
        status["sources"][0]["detail"]
            .as_str()
            .unwrap()
            .contains("no state for"),
        "{status}"
    );
    Contract::load().check("HypStatus", &status, "/hyp/status");
}
