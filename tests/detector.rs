//! The detector end to end: `osds simulate` renders synthetic earthquakes with known truth as monitor-layout
//! GIFs, serves them over HTTP, and runs them through the real fetcher, the detector, the shaper component and
//! the archive; the public hyp API of a real server then shows located, sized and graded events — and no event
//! where there was no earthquake. `osds serve --hyp-source kmoni` follows a real-time image server the same
//! way, and `osds hyp backfill` adds the peaks it missed.

mod support;

use serde_json::Value;
use support::{Server, get_json, osds, start_server, start_server_in, tempdir};

fn distance_km(lat1: f64, lon1: f64, lat2: f64, lon2: f64) -> f64 {
    let (p1, p2) = (lat1.to_radians(), lat2.to_radians());
    let a = ((p2 - p1) / 2.0).sin().powi(2)
        + p1.cos() * p2.cos() * ((lon2 - lon1).to_radians() / 2.0).sin().powi(2);
    2.0 * 6371.0 * a.sqrt().asin()
}

/// Runs the scenario into a fresh database and serves it; returns the server.
fn simulate(scenario: &str) -> Server {
    let dir = tempdir(&format!("simulate-{scenario}"));
    let database = support::database::url_for(&dir);
    let output = osds()
        .args(["simulate", scenario, "--database-url", &database])
        .output()
        .expect("run osds simulate");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    start_server_in(dir, "ws://127.0.0.1:9", &["--no-ingest"])
}

/// Every public event with all its reports.
async fn events(server: &Server) -> Vec<Value> {
    let page = get_json(&server.url("/hyp/events?limit=100")).await;
    let mut all = Vec::new();
    for item in page["items"].as_array().unwrap() {
        let id = item["id"].as_str().unwrap().replace(':', "%3A");
        all.push(get_json(&server.url(&format!("/hyp/events/{id}?view=summary"))).await);
    }
    all
}

fn position(report: &Value) -> (f64, f64, f64) {
    let h = &report["event"]["hypEstimate"];
    (
        h["latitude"].as_f64().unwrap(),
        h["longitude"].as_f64().unwrap(),
        h["depthKm"].as_f64().unwrap(),
    )
}

fn first_tracking(event: &Value) -> Value {
    event["reports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["event"]["status"] == "tracking")
        .cloned()
        .expect("the event reached tracking")
}

fn grade_rank(report: &Value) -> usize {
    ["S", "A", "B", "C", "D"]
        .iter()
        .position(|g| report["quality"]["grade"] == *g)
        .unwrap()
}

/// Truth: 32.742N 130.808E, 11 km, Mw 6.3 (Kumamoto 2016 foreshock).
#[tokio::test(flavor = "multi_thread")]
async fn an_inland_earthquake_is_located_sized_graded_and_finalized() {
    let server = simulate("kumamoto");
    let events = events(&server).await;
    assert_eq!(events.len(), 1, "one event, no false ones");
    let event = &events[0];
    assert_eq!(event["status"], "finalized");
    let reports = event["reports"].as_array().unwrap();
    let statuses: Vec<&str> = reports
        .iter()
        .map(|r| r["event"]["status"].as_str().unwrap())
        .collect();
    let first_tracking = statuses.iter().position(|s| *s == "tracking").unwrap();
    assert!(
        statuses[..first_tracking]
            .iter()
            .all(|s| *s == "preliminary")
    );
    assert_eq!(
        *statuses.last().unwrap(),
        "finalized",
        "one final report, at the end"
    );
    for report in reports {
        let (lat, lon, depth) = position(report);
        let stations = report["quality"]["stationCount"].as_u64().unwrap();
        if stations >= 5 {
            assert!(distance_km(lat, lon, 32.742, 130.808) <= 20.0, "{report}");
            assert!((depth - 11.0).abs() <= 20.0, "{report}");
        }
    }
    let last = reports.last().unwrap();
    let magnitude = last["event"]["magnitude"].as_f64().unwrap();
    assert!((magnitude - 6.3).abs() <= 0.5, "M {magnitude}");
    // Grades never get worse as stations accrue.
    for pair in reports.windows(2) {
        if pair[1]["quality"]["stationCount"].as_u64()
            >= pair[0]["quality"]["stationCount"].as_u64()
        {
            assert!(
                grade_rank(&pair[1]) <= grade_rank(&pair[0]),
                "{} then {}",
                pair[0]["quality"],
                pair[1]["quality"]
            );
        }
    }
    let status = get_json(&server.url("/hyp/status")).await;
    assert!(status["detector"].is_object());
    assert!(
        status["algorithm"]
            .as_str()
            .unwrap()
            .starts_with("osds-hyp/3:")
    );
    assert_eq!(status["algorithm"], last["algorithm"]);
}

/// Truth: ≈37.7N 141.6E, 57 km, Mw 7.2, seen only from land.
#[tokio::test(flavor = "multi_thread")]
async fn an_offshore_earthquake_seen_from_one_side_is_tracked_within_50_km() {
    let server = simulate("fukushima-oki");
    let events = events(&server).await;
    assert_eq!(events.len(), 1);
    let tracking = first_tracking(&events[0]);
    let (lat, lon, depth) = position(&tracking);
    assert!(distance_km(lat, lon, 37.7, 141.6) <= 50.0, "{tracking}");
    assert!((depth - 57.0).abs() <= 20.0, "{tracking}");
    let magnitude = tracking["event"]["magnitude"].as_f64().unwrap();
    assert!((magnitude - 7.2).abs() <= 0.5, "M {magnitude}");
    assert_ne!(
        tracking["quality"]["grade"], "S",
        "one-sided: a lower grade"
    );
}

/// Truth: two Mw 6.0 quakes at 35.0N 135.0E and 35.0N 138.3E (300 km apart), at the same time.
#[tokio::test(flavor = "multi_thread")]
async fn two_earthquakes_300_km_apart_are_kept_apart() {
    let server = simulate("two-events");
    let events = events(&server).await;
    let truths = [(35.0, 135.0), (35.0, 138.3)];
    for (lat0, lon0) in truths {
        let found = events.iter().any(|e| {
            e["reports"].as_array().unwrap().iter().any(|r| {
                let (lat, lon, _) = position(r);
                r["event"]["status"] == "tracking" && distance_km(lat, lon, lat0, lon0) <= 20.0
            })
        });
        assert!(found, "no tracked event near {lat0}N {lon0}E");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn no_earthquake_no_event_despite_a_stuck_station_and_a_spike() {
    let server = simulate("quiet");
    let page = get_json(&server.url("/hyp/events")).await;
    assert_eq!(page["total"], 0);
    let status = get_json(&server.url("/hyp/status")).await;
    assert_eq!(status["archive"]["reports"], 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_frame_gap_interrupts_the_event_without_inventing_a_final_report() {
    let server = simulate("gap");
    let events = events(&server).await;
    // The quake's waves keep arriving after the gap; they are not a second earthquake.
    assert_eq!(events.len(), 1, "one event, no ghost after the gap");
    let interrupted = events
        .iter()
        .find(|e| e["status"] == "interrupted")
        .expect("an interrupted event");
    let statuses: Vec<&str> = interrupted["reports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["event"]["status"].as_str().unwrap())
        .collect();
    assert_eq!(*statuses.last().unwrap(), "interrupted");
    assert!(!statuses.contains(&"finalized"), "{statuses:?}");
}

/// The images the simulator serves in real time.
struct ImageServer {
    child: std::process::Child,
    base: String,
}

impl Drop for ImageServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn image_server(scenario: &str, extra: &[&str]) -> ImageServer {
    use std::io::BufRead;
    let mut child = osds()
        .args(["simulate", scenario, "--serve-images", "127.0.0.1:0"])
        .args(extra)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start the image server");
    let stdout = child.stdout.take().expect("stdout");
    let line = std::io::BufReader::new(stdout)
        .lines()
        .next()
        .expect("a line")
        .expect("stdout");
    let base = line
        .split_once("images at ")
        .map(|(_, url)| url.to_string())
        .unwrap_or_else(|| panic!("unexpected first line: {line}"));
    ImageServer { child, base }
}

fn id_path(id: &str) -> String {
    id.replace(':', "%3A")
}

/// The newest public event with its reports and stations, once there is one.
async fn first_event(server: &Server) -> Option<serde_json::Value> {
    let page = get_json(&server.url("/hyp/events")).await;
    let id = page["items"].as_array()?.first()?["id"]
        .as_str()?
        .to_string();
    Some(get_json(&server.url(&format!("/hyp/events/{}", id_path(&id)))).await)
}

/// `osds serve --hyp-source kmoni` follows an image server in real time with its default tables (the shipped
/// K-NET/KiK-net stations and JMA2001, no `--stations` or `--travel-times`): the Kumamoto scenario, rendered at
/// the real stations' pixels, is located from the fetched GIFs within 20 km. The PGA layer arrives 30 s late,
/// so the live reports lack it; after the event, `osds hyp backfill --refetch` recovers those images and adds
/// the peaks marked `recovered`, and no report changes.
#[tokio::test(flavor = "multi_thread")]
async fn serve_follows_live_images_and_backfill_adds_the_late_layer() {
    let dir = tempdir("hyp-live");
    let images = image_server(
        "kumamoto",
        &[
            "--seconds",
            "50",
            "--late",
            "acmap_s=30",
            "--lead-secs",
            "30",
            "--network",
            "shipped",
        ],
    );
    let started = std::time::Instant::now();
    let frames_url = format!("sqlite://{}", dir.join("frames.db").display());
    let server = start_server_in(
        dir.clone(),
        "ws://127.0.0.1:9",
        &[
            "--no-ingest",
            "--hyp-source",
            "kmoni",
            "--kmoni-url",
            &images.base,
            "--kmoni-layers",
            "jma_s,acmap_s",
            "--hyp-frames-url",
            &frames_url,
        ],
    );
    // Generous: a debug build shares two cores with the other scenarios of this file.
    let event = support::eventually(180, "a tracked event", || async {
        let event = first_event(&server).await?;
        event["reports"]
            .as_array()?
            .iter()
            .any(|r| r["event"]["status"] == "tracking")
            .then_some(event)
    })
    .await;
    let id = event["id"].as_str().unwrap().to_string();
    let tracking = first_tracking(&event);
    let (lat, lon, _) = position(&tracking);
    assert!(distance_km(lat, lon, 32.742, 130.808) <= 20.0, "{tracking}");
    let status = get_json(&server.url("/hyp/status")).await;
    assert_eq!(status["detector"]["state"], "running", "{status}");
    assert!(
        status["detector"]["source"]
            .as_str()
            .unwrap()
            .contains(&images.base),
        "{status}"
    );
    assert!(
        status["recorder"]["recordedImages"].as_u64().unwrap() > 0,
        "{status}"
    );
    let stations_live = get_json(&server.url(&format!("/hyp/events/{}", id_path(&id)))).await;
    let has = |stations: &serde_json::Value, metric: &str| {
        stations["stations"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["metrics"].get(metric).is_some())
            .count()
    };
    assert!(
        has(&stations_live, "surface:intensity") >= 3,
        "{stations_live}"
    );
    assert_eq!(
        has(&stations_live, "surface:pgaGal"),
        0,
        "the PGA layer came too late"
    );
    let before = get_json(&server.url(&format!("/hyp/events/{}", id_path(&id)))).await;

    // Once every late image exists on the server (30 s lead, 50 s of frames, 30 s late), backfill.
    let all_served = std::time::Duration::from_secs(30 + 50 + 30 + 3);
    tokio::time::sleep(all_served.saturating_sub(started.elapsed())).await;
    let database = support::database::url_for(&server.dir);
    let output = osds()
        .args([
            "hyp",
            "backfill",
            &id,
            "--refetch",
            "--database-url",
            &database,
        ])
        .args(["--kmoni-url", &images.base])
        .args([
            "--kmoni-layers",
            "jma_s,acmap_s",
            "--hyp-frames-url",
            &frames_url,
        ])
        .output()
        .expect("run osds hyp backfill");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("station peaks added"), "{stdout}");

    let stations_after = get_json(&server.url(&format!("/hyp/events/{}", id_path(&id)))).await;
    let recovered: Vec<&serde_json::Value> = stations_after["stations"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["metrics"].get("surface:pgaGal"))
        .collect();
    assert!(!recovered.is_empty(), "{stations_after}");
    assert!(
        recovered.iter().all(|m| m["recovered"] == true),
        "{stations_after}"
    );
    // Reports are never rewritten: every report seen before is byte-identical.
    let after = get_json(&server.url(&format!("/hyp/events/{}", id_path(&id)))).await;
    for (old, new) in before["reports"]
        .as_array()
        .unwrap()
        .iter()
        .zip(after["reports"].as_array().unwrap())
    {
        assert_eq!(old["sha256"], new["sha256"]);
    }
    // The frames stopped 50 s in: the event ended (finalized, or interrupted by the silence), and nothing
    // followed its end.
    let statuses: Vec<&str> = after["reports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["event"]["status"].as_str().unwrap())
        .collect();
    let end = statuses
        .iter()
        .position(|s| *s == "finalized" || *s == "interrupted")
        .unwrap_or_else(|| panic!("the event never ended: {statuses:?}"));
    assert_eq!(end, statuses.len() - 1, "{statuses:?}");
    assert_eq!(after["status"], statuses[end]);

    // The recorded images replay into a fresh archive and give the same earthquake.
    let replay = start_server(
        "ws://127.0.0.1:9",
        &[
            "--no-ingest",
            "--hyp-source",
            "replay",
            "--replay-from",
            "2000-01-01T00:00:00Z",
            "--replay-to",
            "2100-01-01T00:00:00Z",
            "--hyp-frames-url",
            &frames_url,
            "--metrics-listen",
            "127.0.0.1:0",
        ],
    );
    let replayed = support::eventually(120, "the replayed event", || async {
        let status = get_json(&replay.url("/hyp/status")).await;
        (status["detector"]["state"] == "stopped").then_some(())?;
        first_event(&replay).await
    })
    .await;
    let (lat, lon, _) = position(&first_tracking(&replayed));
    assert!(distance_km(lat, lon, 32.742, 130.808) <= 20.0, "{replayed}");

    // The detector's series, once it stopped, say what it did: every frame, every report archived.
    let scraped = reqwest::get(support::metrics_url(&replay))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let series = |name: &str| -> u64 { support::metric(&scraped, name) };
    let status = get_json(&replay.url("/hyp/status")).await;
    let counters = &status["detector"]["counters"];
    let frames = counters["frames"].as_u64().unwrap();
    assert!(frames > 0, "{status}");
    assert_eq!(series("osds_hyp_frames_total"), frames);
    assert_eq!(
        series("osds_hyp_missing_images_total"),
        status["detector"]["sources"][0]["missingImages"]
            .as_u64()
            .unwrap_or(0)
    );
    assert_eq!(
        series("osds_hyp_undecodable_images_total"),
        counters["undecodableImages"].as_u64().unwrap()
    );
    let archived = status["archive"]["reports"].as_u64().unwrap();
    assert!(archived > 0, "{status}");
    assert_eq!(
        series("osds_hyp_reports_total{outcome=\"archived\"}"),
        archived
    );
    assert_eq!(
        series("osds_hyp_reports_total{outcome=\"failed\"}"),
        counters["failedReports"].as_u64().unwrap()
    );
}

/// An operator's travel-time table (e.g. JMA2001) replaces the built-in model and shows in the algorithm
/// fingerprint; a table with holes stops the service at start with the file named.
#[tokio::test(flavor = "multi_thread")]
async fn a_travel_time_table_is_named_in_the_algorithm_fingerprint() {
    let dir = tempdir("travel-times");
    let stations = dir.join("stations.csv");
    std::fs::write(
        &stations,
        "network,code,name,region,suspended,lat,lon,img_x,img_y\nSYN,A1,a,x,0,35.0,135.0,100,200\n",
    )
    .unwrap();
    let mut table = String::from("depth_km,distance_km,p_ms,s_ms\n");
    for depth in [0, 50, 100] {
        for distance in [0, 100, 200] {
            let r = f64::from(depth * depth + distance * distance).sqrt();
            table.push_str(&format!(
                "{depth},{distance},{},{}\n",
                r / 6.5 * 1000.0,
                r / 3.8 * 1000.0
            ));
        }
    }
    let table_path = dir.join("tt.csv");
    std::fs::write(&table_path, &table).unwrap();
    let frames_url = format!("sqlite://{}", dir.join("frames.db").display());
    let stations = stations.display().to_string();
    let replay = [
        "--no-ingest",
        "--hyp-source",
        "replay",
        "--replay-from",
        "2000-01-01T00:00:00Z",
        "--replay-to",
        "2000-01-01T00:01:00Z",
        "--stations",
        &stations,
        "--hyp-frames-url",
        &frames_url,
    ];
    let algorithm = |server: Server| async move {
        support::eventually(60, "the detector's state", || async {
            let status = get_json(&server.url("/hyp/status")).await;
            (status["detector"]["state"] == "stopped")
                .then(|| status["algorithm"].as_str().unwrap().to_string())
        })
        .await
    };
    let builtin = algorithm(start_server("ws://127.0.0.1:9", &replay)).await;
    let table_arg = table_path.display().to_string();
    let with_table: Vec<&str> = replay
        .iter()
        .copied()
        .chain(["--travel-times", &table_arg])
        .collect();
    let tabled = algorithm(start_server("ws://127.0.0.1:9", &with_table)).await;
    assert_ne!(builtin, tabled);
    assert!(tabled.starts_with("osds-hyp/3:"), "{tabled}");

    std::fs::write(
        &table_path,
        "depth_km,distance_km,p_ms,s_ms\n0,0,0,0\n0,10,1,2\n10,0,1,2\n",
    )
    .unwrap();
    let output = osds()
        .arg("serve")
        .args(with_table)
        .args(["--listen", "127.0.0.1:0"])
        .arg("--database-url")
        .arg(format!("sqlite://{}", dir.join("bad.db").display()))
        .arg("--admin-socket")
        .arg(dir.join("bad.sock"))
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("tt.csv") && stderr.contains("every depth"),
        "{stderr}"
    );
}

/// The monitor as it really behaves: images published 1–2 s late, some never, some first as the previous
/// second's image, and a 6 s outage while the quake is under way. `osds serve` follows the monitor's own clock,
/// asks again every second for what is late, missing or repeated whatever happened before, recovers from the
/// outage by itself, and the event goes on: located, not interrupted until the frames end. Every report says
/// when it was published (`reportedAt`), after the frame it was computed from (`hypEstimate.calculatedAt`).
#[tokio::test(flavor = "multi_thread")]
async fn serve_follows_a_late_lossy_monitor_through_an_outage() {
    let dir = tempdir("hyp-late-feed");
    let images = image_server(
        "kumamoto",
        &[
            "--seconds",
            "70",
            "--lead-secs",
            "20",
            "--network",
            "shipped",
            "--publish-delay-secs",
            "1",
            "--publish-spread-secs",
            "1",
            "--lose",
            "0.03",
            "--repeat",
            "0.05",
            "--outage",
            "24..30",
        ],
    );
    let started = std::time::Instant::now();
    let server = start_server_in(
        dir,
        "ws://127.0.0.1:9",
        &[
            "--no-ingest",
            "--hyp-source",
            "kmoni",
            "--kmoni-url",
            &images.base,
            "--kmoni-layers",
            "jma_s",
        ],
    );
    let event = support::eventually(180, "a tracked event", || async {
        let event = first_event(&server).await?;
        event["reports"]
            .as_array()?
            .iter()
            .any(|r| r["event"]["status"] == "tracking")
            .then_some(event)
    })
    .await;
    let (lat, lon, _) = position(&first_tracking(&event));
    assert!(distance_km(lat, lon, 32.742, 130.808) <= 20.0, "{event}");
    // Let the scenario's frames (20 s lead + 70 s) run out, and the detector notice.
    let all_served = std::time::Duration::from_secs(20 + 70 + 15);
    tokio::time::sleep(all_served.saturating_sub(started.elapsed())).await;
    let status = get_json(&server.url("/hyp/status")).await;
    let source = &status["detector"]["sources"][0];
    assert_eq!(source["clock"], "server", "{status}");
    assert!(source["lateImages"].as_u64().unwrap() > 0, "{status}");
    let id = event["id"].as_str().unwrap().to_string();
    let event = get_json(&server.url(&format!("/hyp/events/{}", id_path(&id)))).await;
    let reports = event["reports"].as_array().unwrap();
    // The quake starts at frame 5 and is first reported within frames 10–20; the outage is frames 24–29, the
    // frames end at 70. An interruption may only come once they have run out, never from the outage.
    let first_report = reports[0]["event"]["hypEstimate"]["calculatedAt"]
        .as_i64()
        .unwrap();
    for report in reports {
        let frame = report["event"]["hypEstimate"]["calculatedAt"]
            .as_i64()
            .unwrap();
        let published = report["reportedAt"].as_i64().unwrap();
        assert!(
            published >= frame + 1000,
            "published before its frame was: {report}"
        );
        if report["event"]["status"] == "interrupted" {
            assert!(
                frame >= first_report + 30_000,
                "cut by the outage: {report}"
            );
        }
    }
}

/// A JMA early-warning frame (JST times), as the relay sends it on `/all_eew`.
fn jma_warning(
    event_id: &str,
    serial: i64,
    announced: &str,
    origin: &str,
    at: (f64, f64, f64, f64),
) -> String {
    serde_json::json!({
        "type": "jma_eew", "Title": "緊急地震速報（予報）", "Issue": {"Source": "東京", "Status": "通常"},
        "EventID": event_id, "Serial": serial, "AnnouncedTime": announced, "OriginTime": origin,
        "Hypocenter": "熊本県熊本地方", "Latitude": at.0, "Longitude": at.1, "Magunitude": at.3, "Depth": at.2,
        "MaxIntensity": "5弱", "isSea": false, "isTraining": false, "isAssumption": false, "isWarn": false,
        "isFinal": false, "isCancel": false,
    })
    .to_string()
}

/// JMA's own warnings arrive on `/all_eew`, and its earthquake list when asked for there (both kept as ignored
/// deliveries, out of the EEW API); the reference decoder component reads them, and the scorecard sets each self-sensing event against JMA's determination of
/// the same quake (within 100 km and 30 s): per event in `/hyp/events/{id}` (`jma`), overall in `/hyp/status`
/// (`scorecard`). A cancelled warning and a drill are no quakes; a JMA quake inside the network that the
/// detector did not report is missed.
#[tokio::test(flavor = "multi_thread")]
async fn jma_warnings_score_the_self_sensing_events() {
    // The simulated Kumamoto quake: 21:26:34.4 JST on 2016-04-14, 32.742N 130.808E, 11 km, Mw 6.3.
    let dir = tempdir("scorecard");
    let database = support::database::url_for(&dir);
    let output = osds()
        .args(["simulate", "kumamoto", "--database-url", &database])
        .output()
        .expect("run osds simulate");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let relay = fake_relay::FakeRelay::start(fake_relay::RelayConfig::default())
        .await
        .unwrap();
    // JMA's earthquake list, asked for on `/all_eew`: its own determination of the quake, under another id.
    let list = serde_json::json!({
        "type": "jma_eqlist", "md5": "0",
        "No1": {"Title": "震源・震度情報", "EventID": "20160414212635", "time": "2016/04/14 21:26",
                "time_full": "2016/04/14 21:26:34", "location": "熊本県熊本地方", "magnitude": "6.5",
                "shindo": "7", "depth": "11km", "latitude": "32.742", "longitude": "130.808", "info": ""},
    });
    relay
        .set_latest("query_jmaeqlist", list.to_string().as_bytes())
        .await;
    let server = start_server_in(dir, &relay.url(), &["--metrics-listen", "127.0.0.1:0"]);
    assert!(
        relay
            .wait_connected("/all_eew", 1, std::time::Duration::from_secs(20))
            .await,
        "{}",
        server.log()
    );
    let kumamoto = (32.7, 130.8, 10.0, 6.4);
    let frames = [
        jma_warning(
            "20160414212634",
            1,
            "2016/04/14 21:26:43",
            "2016/04/14 21:26:34",
            (32.8, 130.9, 10.0, 5.7),
        ),
        jma_warning(
            "20160414212634",
            2,
            "2016/04/14 21:26:50",
            "2016/04/14 21:26:34",
            kumamoto,
        ),
        // Another quake inside the network that the detector never saw: missed.
        jma_warning(
            "20160414220000",
            1,
            "2016/04/14 22:00:12",
            "2016/04/14 22:00:00",
            (35.0, 135.0, 10.0, 4.5),
        ),
        // A cancelled warning and a drill: no quakes.
        jma_warning(
            "20160414223000",
            1,
            "2016/04/14 22:30:10",
            "2016/04/14 22:30:00",
            (36.0, 138.0, 10.0, 5.0),
        )
        .replace("\"isCancel\":false", "\"isCancel\":true"),
        jma_warning(
            "20160414224000",
            1,
            "2016/04/14 22:40:10",
            "2016/04/14 22:40:00",
            (36.5, 138.5, 10.0, 5.0),
        )
        .replace("\"isTraining\":false", "\"isTraining\":true"),
    ];
    for frame in &frames {
        relay.push_to("/all_eew", frame.as_bytes()).await;
    }
    let status = support::eventually(60, "the scorecard", || async {
        let status = get_json(&server.url("/hyp/status")).await;
        // Five warnings and the list's one entry read, the quake matched, the other one missed.
        let scorecard = &status["scorecard"];
        (scorecard["determinations"] == 6
            && scorecard["matched"] == 1
            && scorecard["agencyMissed"] == 1)
            .then_some(status)
    })
    .await;
    let scorecard = &status["scorecard"];
    assert_eq!(scorecard["agency"], "jma");
    assert!(
        scorecard["reference"]
            .as_str()
            .unwrap()
            .starts_with("jma-reference@"),
        "{scorecard}"
    );
    assert_eq!(scorecard["oursUnmatched"], 0, "{scorecard}");
    assert_eq!(
        scorecard["missedAgencyEventIds"],
        serde_json::json!(["20160414220000"])
    );
    assert!(
        scorecard["medianEpicentreKm"].as_f64().unwrap() <= 30.0,
        "{scorecard}"
    );
    // The same figures in the metrics, the median among them once a quake matched.
    let scraped = reqwest::get(support::metrics_url(&server))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let gauge = |name: &str| -> f64 { support::metric(&scraped, name) };
    assert_eq!(gauge("osds_hyp_scorecard_matched"), 1.0);
    assert_eq!(gauge("osds_hyp_scorecard_ours_unmatched"), 0.0);
    assert_eq!(gauge("osds_hyp_scorecard_agency_missed"), 1.0);
    assert_eq!(
        gauge("osds_hyp_scorecard_median_epicentre_km"),
        scorecard["medianEpicentreKm"].as_f64().unwrap()
    );

    let page = get_json(&server.url("/hyp/events")).await;
    let id = page["items"][0]["id"].as_str().unwrap().to_string();
    let event = get_json(&server.url(&format!("/hyp/events/{}?view=summary", id_path(&id)))).await;
    let jma = &event["jma"];
    assert_eq!(jma["eventId"], "20160414212635", "{jma}");
    assert_eq!(
        jma["determination"], "catalogue",
        "the list's entry over the warnings"
    );
    assert_eq!(jma["latitude"], 32.742);
    assert_eq!(jma["depthKm"], 11.0);
    assert_eq!(jma["originAt"], 1_460_636_794_000i64);
    assert_eq!(
        jma["firstWarningAt"], 1_460_636_803_000i64,
        "serial 1, 21:26:43 JST"
    );
    let (lat, lon, _) = position(event["reports"].as_array().unwrap().last().unwrap());
    let expected_km = distance_km(lat, lon, 32.742, 130.808);
    assert!(
        (jma["epicentreKm"].as_f64().unwrap() - expected_km).abs() < 0.1,
        "{jma}"
    );
    assert!(jma["leadSeconds"].is_number(), "{jma}");
    assert!(
        relay
            .received()
            .await
            .contains(&("/all_eew".to_string(), "query_jmaeqlist".to_string())),
        "the list is asked for on /all_eew"
    );
    // The warnings stay out of the EEW API.
    let reports = get_json(&server.url("/reports?limit=100")).await;
    assert!(
        !reports.to_string().contains("20160414212634"),
        "JMA's frames are not EEW reports: {reports}"
    );
}
