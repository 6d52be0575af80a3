//! Operating a running server: hot-swapping a decoder under a steady stream of frames, refusing broken and
//! hostile components, rolling back, recovering what a broken decoder left unparsed with `osds reparse`, and
//! adding an agency without a rebuild. Every command is the real `osds` binary talking to the admin socket.

mod support;

use fake_relay::RelayConfig;
use serde_json::Value;
use std::path::Path;
use std::process::Output;
use std::time::Duration;
use support::contract::{Contract, encode};
use support::live::SseClient;
use support::{
    Server, all_reports, eventually, get_json, guest_component, osds, start_connected,
    start_server_in,
};

const TEST_DECODERS: &str = "test-decoders";

fn sc_frame(n: u32) -> String {
    format!(
        r#"{{"type":"sc_eew","ID":{n},"EventID":"2026112210{n:04}.0001_1","ReportTime":"2026-11-22 10:00:00","ReportNum":1,"OriginTime":"2026-11-22 09:59:50","HypoCenter":"四川内江市隆昌市","Latitude":29.239,"Longitude":105.227,"Magunitude":4.2,"Depth":10,"MaxIntensity":5.0}}"#
    )
}

fn cwa_frame(n: u32) -> String {
    format!(
        r#"{{"type":"cwa_eew","ID":"c{n}","EventID":"20261122{n:04}_1","ReportTime":"2026-11-22 10:00:00","ReportNum":1,"OriginTime":"2026-11-22 09:59:50","HypoCenter":"花蓮縣近海","Latitude":23.9,"Longitude":121.6,"Magnitude":5.0,"Depth":10,"MaxIntensity":4}}"#
    )
}

/// Runs the real `osds` with `args` (off the async threads) and returns its output.
async fn run_osds(args: Vec<String>) -> Output {
    tokio::task::spawn_blocking(move || osds().args(&args).output().expect("run osds"))
        .await
        .unwrap()
}

/// `osds components --admin-socket <server's> ARGS...`
async fn components(server: &Server, args: &[&str]) -> Output {
    let mut all = vec![
        "components".to_string(),
        "--admin-socket".to_string(),
        server.dir.join("admin.sock").display().to_string(),
    ];
    all.extend(args.iter().map(|a| a.to_string()));
    run_osds(all).await
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn path_arg(path: &Path) -> &str {
    path.to_str().unwrap()
}

async fn archive(server: &Server) -> Value {
    get_json(&server.url("/status")).await["archive"].clone()
}

/// The decoder serving `source`, per `/status`.
async fn decoder_of(server: &Server, source: &str) -> Value {
    get_json(&server.url("/status")).await["decoders"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["source"] == source)
        .cloned()
        .unwrap_or(Value::Null)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_decoder_swapped_under_a_steady_stream_decodes_every_frame_exactly_once() {
    let v2 = guest_component(TEST_DECODERS, "test_decoder_sc_v2.wasm");
    let (relay, server) = start_connected(RelayConfig::default(), &[]).await;
    // The stream goes on until 50 frames after the install returned, however long the install takes (it
    // compiles the component: slow in a debug build on a busy machine).
    let installed_flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let done = installed_flag.clone();
    let pusher = tokio::spawn(async move {
        let (mut n, mut after_install) = (0u32, 0u32);
        while after_install < 50 && n < 5_000 {
            n += 1;
            relay.push_to("/sc_eew", sc_frame(n).as_bytes()).await;
            tokio::time::sleep(Duration::from_millis(10)).await;
            if done.load(std::sync::atomic::Ordering::SeqCst) {
                after_install += 1;
            }
        }
        (relay, n)
    });
    eventually(30, "a part of the stream archived", || async {
        (archive(&server).await["versions"].as_i64().unwrap() >= 30).then_some(())
    })
    .await;
    let installed = components(&server, &["install", "sc", path_arg(&v2)]).await;
    assert!(installed.status.success(), "{}", text(&installed));
    assert!(
        text(&installed).contains("installed `wolfx-sc-v2`"),
        "{}",
        text(&installed)
    );
    installed_flag.store(true, std::sync::atomic::Ordering::SeqCst);
    let (_relay, frames) = pusher.await.unwrap();

    let counts = eventually(30, "every frame archived", || async {
        let counts = archive(&server).await;
        (counts["deliveries"] == frames).then_some(counts)
    })
    .await;
    assert_eq!(
        counts["versions"], frames,
        "none dropped, none decoded twice"
    );
    assert_eq!(counts["unparsed"], 0);
    let names: Vec<String> = all_reports(&server)
        .await
        .iter()
        .map(|r| r["decoder"]["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names.len(), frames as usize);
    let switch = names
        .iter()
        .position(|n| n == "wolfx-sc-v2")
        .expect("the new decoder decoded part of the stream");
    assert!(switch > 0, "the old decoder decoded the first part");
    assert!(names[..switch].iter().all(|n| n == "wolfx-sc"));
    assert!(
        names[switch..].iter().all(|n| n == "wolfx-sc-v2"),
        "one switch, in commit order"
    );
    let serving = decoder_of(&server, "sc").await;
    assert_eq!(serving["name"], "wolfx-sc-v2");
    assert!(serving["installedAt"].is_string());
}

#[tokio::test(flavor = "multi_thread")]
async fn broken_hostile_and_foreign_components_are_refused() {
    let broken = guest_component(TEST_DECODERS, "test_decoder_sc_broken.wasm");
    let v2 = guest_component(TEST_DECODERS, "test_decoder_sc_v2.wasm");
    let hostile = guest_component("hostile-decoder", "hostile_decoder.wasm");
    let (relay, server) = start_connected(RelayConfig::default(), &[]).await;
    for n in 1..=3 {
        relay.push_to("/sc_eew", sc_frame(n).as_bytes()).await;
    }
    relay
        .push_to("/all_eew", br#"{"type":"hostile_eew","do":"loop"}"#)
        .await;
    eventually(20, "frames archived", || async {
        (archive(&server).await["deliveries"] == 4).then_some(())
    })
    .await;

    // A decoder that cannot decode what the current one decodes is refused, with the canary's differences.
    let refused = components(&server, &["install", "sc", path_arg(&broken)]).await;
    assert!(!refused.status.success(), "{}", text(&refused));
    assert!(text(&refused).contains("refused"), "{}", text(&refused));
    assert!(
        text(&refused).contains("\"newErrors\": 3"),
        "{}",
        text(&refused)
    );
    // A component that loops on an archived frame of its channel: the canary runs it under the limits.
    let hostile_refused = components(&server, &["install", "hostile", path_arg(&hostile)]).await;
    assert!(
        !hostile_refused.status.success(),
        "{}",
        text(&hostile_refused)
    );
    assert!(
        text(&hostile_refused).contains("timeout"),
        "{}",
        text(&hostile_refused)
    );
    // `check` fails for what `install` would refuse.
    let checked_broken = components(&server, &["check", path_arg(&broken)]).await;
    assert!(
        !checked_broken.status.success(),
        "{}",
        text(&checked_broken)
    );
    assert!(
        text(&checked_broken).contains("an install would be refused"),
        "{}",
        text(&checked_broken)
    );
    // Not a component at all, and not WebAssembly at all: one sentence each, on stderr.
    let junk = server.dir.join("junk.wasm");
    std::fs::write(&junk, b"\0asm not really").unwrap();
    let readme = support::tests_dir().join("../README.md");
    for (file, sentence) in [
        (junk.as_path(), "the file is not a WebAssembly component"),
        (readme.as_path(), "the file is not a WebAssembly component"),
    ] {
        let refused = components(&server, &["install", "sc", path_arg(file)]).await;
        assert!(!refused.status.success(), "{}", text(&refused));
        assert!(refused.stdout.is_empty(), "{}", text(&refused));
        assert_eq!(
            String::from_utf8_lossy(&refused.stderr).trim(),
            format!("osds: {sentence}")
        );
    }
    // A decoder of another channel: one sentence naming the channel it decodes.
    let wrong_channel = components(&server, &["install", "fj", path_arg(&v2)]).await;
    assert!(!wrong_channel.status.success());
    assert!(wrong_channel.stdout.is_empty(), "{}", text(&wrong_channel));
    assert!(
        text(&wrong_channel).contains("decodes channel `sc`, not `fj`"),
        "{}",
        text(&wrong_channel)
    );
    // The socket may follow the action, and --json answers with one JSON object on stdout.
    let listed = run_osds(vec![
        "components".into(),
        "list".into(),
        "--json".into(),
        "--admin-socket".into(),
        server.dir.join("admin.sock").display().to_string(),
    ])
    .await;
    assert!(listed.status.success(), "{}", text(&listed));
    let answer: Value = serde_json::from_slice(&listed.stdout)
        .unwrap_or_else(|e| panic!("not one JSON object ({e}): {}", text(&listed)));
    assert_eq!(answer["ok"], true);
    assert!(answer["message"].is_string());
    assert!(answer["details"].is_object() || answer["details"].is_array());

    assert_eq!(
        decoder_of(&server, "sc").await["name"],
        "wolfx-sc",
        "nothing was swapped"
    );
    assert!(decoder_of(&server, "hostile").await.is_null());

    // check validates and runs the canary without installing.
    let checked = components(&server, &["check", path_arg(&v2)]).await;
    assert!(checked.status.success(), "{}", text(&checked));
    assert!(text(&checked).contains("3 unchanged"), "{}", text(&checked));
    assert_eq!(decoder_of(&server, "sc").await["name"], "wolfx-sc");
    let listed = components(&server, &["list"]).await;
    assert!(listed.status.success());
    assert!(text(&listed).contains("wolfx-cea"), "{}", text(&listed));
    // Which WIT versions the host accepts, in the list and in /status.
    assert!(
        text(&listed).contains("\"accepts\": \"osds:eew@1.x up to 1.0.0\""),
        "{}",
        text(&listed)
    );
    let status = get_json(&server.url("/status")).await;
    assert_eq!(
        status["acceptedWorlds"],
        serde_json::json!([
            "osds:eew/decoder@1.0.0",
            "osds:hyp/shaper@1.0.0",
            "osds:reference/reference@1.0.0"
        ])
    );
}

/// `components check FILE --fixtures DIR` asks no server: it gives the verdict a running server's check gives
/// when its canary has the same fixtures and nothing archived, word for word, and the same exit status.
#[tokio::test(flavor = "multi_thread")]
async fn a_component_is_checked_offline_as_a_running_server_would_check_it() {
    // The built-in decoder again (nothing changes) and one that fails most fixtures.
    let same = guest_component("../components/guests", "decoder_sc.wasm");
    let broken = guest_component(TEST_DECODERS, "test_decoder_sc_broken.wasm");
    let fixtures = support::tests_dir().join("fixtures");
    let fixtures = fixtures.display().to_string();
    let (_relay, server) = start_connected(
        RelayConfig::default(),
        &["--canary-fixtures", &fixtures, "--canary-recent", "0"],
    )
    .await;
    let offline = |file: &Path, fixtures: &str| {
        run_osds(
            [
                "components",
                "check",
                path_arg(file),
                "--fixtures",
                fixtures,
                "--admin-socket",
                "/nonexistent/admin.sock",
                "--json",
            ]
            .map(String::from)
            .to_vec(),
        )
    };
    let answer = |output: &Output| -> Value {
        serde_json::from_slice(&output.stdout)
            .unwrap_or_else(|e| panic!("not one JSON object ({e}): {}", text(output)))
    };
    for (file, accepted) in [(&same, true), (&broken, false)] {
        let online = components(&server, &["check", path_arg(file), "--json"]).await;
        let alone = offline(file, &fixtures).await;
        assert_eq!(online.status.success(), accepted, "{}", text(&online));
        assert_eq!(alone.status.success(), accepted, "{}", text(&alone));
        let (online, alone) = (answer(&online), answer(&alone));
        assert_eq!(alone["ok"], accepted);
        assert_eq!(alone["message"], online["message"]);
        assert_eq!(alone["details"], online["details"]);
        assert!(
            alone["message"].as_str().unwrap().contains(" payloads, "),
            "{alone}"
        );
    }
    // A folder without the channel's frames is refused, saying where they were looked for.
    let empty = support::tempdir("no-fixtures");
    let refused = offline(&same, &empty.display().to_string()).await;
    assert!(!refused.status.success());
    assert!(
        text(&refused).contains("no fixtures of `sc` in"),
        "{}",
        text(&refused)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn rollback_restores_the_previous_decoder() {
    let v2 = guest_component(TEST_DECODERS, "test_decoder_sc_v2.wasm");
    let (_relay, server) = start_connected(RelayConfig::default(), &[]).await;
    let none_yet = components(&server, &["rollback", "sc"]).await;
    assert!(!none_yet.status.success());
    assert!(
        components(&server, &["install", "sc", path_arg(&v2)])
            .await
            .status
            .success()
    );
    assert_eq!(decoder_of(&server, "sc").await["name"], "wolfx-sc-v2");
    let back = components(&server, &["rollback", "sc"]).await;
    assert!(back.status.success(), "{}", text(&back));
    assert_eq!(decoder_of(&server, "sc").await["name"], "wolfx-sc");
    // The rolled-back decoder is kept in turn: a second rollback undoes the first.
    assert!(
        components(&server, &["rollback", "sc"])
            .await
            .status
            .success()
    );
    assert_eq!(decoder_of(&server, "sc").await["name"], "wolfx-sc-v2");
    let installed_at = decoder_of(&server, "sc").await["installedAt"].clone();

    // A restart puts back what was in service, with its install time, and the rollback target.
    let mut server = server;
    server.stop().await;
    let server =
        start_server_in(server.into_dir(), "ws://127.0.0.1:9", &["--no-ingest"]).removing_dir();
    let sc = decoder_of(&server, "sc").await;
    assert_eq!(
        sc["name"], "wolfx-sc-v2",
        "the installed decoder survives a restart"
    );
    assert_eq!(sc["installedAt"], installed_at);
    let back = components(&server, &["rollback", "sc"]).await;
    assert!(back.status.success(), "{}", text(&back));
    assert_eq!(decoder_of(&server, "sc").await["name"], "wolfx-sc");
}

#[tokio::test(flavor = "multi_thread")]
async fn reparse_recovers_what_a_broken_decoder_left_unparsed() {
    let broken = guest_component(TEST_DECODERS, "test_decoder_sc_broken.wasm");
    let (relay, server) = start_connected(RelayConfig::default(), &[]).await;
    let forced = components(&server, &["install", "sc", path_arg(&broken), "--force"]).await;
    assert!(forced.status.success(), "{}", text(&forced));
    let frames: Vec<String> = (1..=5).map(sc_frame).collect();
    for frame in &frames {
        relay.push_to("/sc_eew", frame.as_bytes()).await;
    }
    eventually(20, "five unparsed", || async {
        (archive(&server).await["unparsed"] == 5).then_some(())
    })
    .await;
    assert_eq!(archive(&server).await["versions"], 0);
    assert!(
        components(&server, &["rollback", "sc"])
            .await
            .status
            .success()
    );
    let mut live = SseClient::connect(&server.url("/stream"), None)
        .await
        .unwrap();
    assert_eq!(live.next_event().await.unwrap().json()["cursor"], 0);

    let database = support::database::url_for(&server.dir);
    let dry = run_osds(vec![
        "reparse".into(),
        "--database-url".into(),
        database.clone(),
        "--dry-run".into(),
    ])
    .await;
    assert!(dry.status.success(), "{}", text(&dry));
    assert!(
        text(&dry).contains("5 would be recovered"),
        "{}",
        text(&dry)
    );
    assert_eq!(
        archive(&server).await["unparsed"],
        5,
        "a dry run writes nothing"
    );

    // While the server runs on the same database.
    let done = run_osds(vec![
        "reparse".into(),
        "--database-url".into(),
        database.clone(),
    ])
    .await;
    assert!(done.status.success(), "{}", text(&done));
    assert!(
        text(&done).contains("5 recovered (5 new versions"),
        "{}",
        text(&done)
    );
    let counts = archive(&server).await;
    assert_eq!(counts["unparsed"], 0);
    assert_eq!(counts["recovered"], 5);
    assert_eq!(counts["versions"], 5);
    assert_eq!(
        counts["deliveries"], 5,
        "deliveries are never rewritten or added by a reparse"
    );

    let reports = all_reports(&server).await;
    assert_eq!(reports.len(), 5);
    for report in &reports {
        assert_eq!(report["decoder"]["name"], "wolfx-sc");
        let raw = reqwest::get(server.url(&format!("/deliveries/{}/raw", report["deliveryId"])))
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        assert!(frames.iter().any(|f| f.as_bytes() == raw.as_ref()));
    }
    // Live subscribers hear of versions another process appended.
    let mut seen = Vec::new();
    while seen.len() < 5 {
        let event = live.next_event().await.unwrap();
        if event.event.as_deref() == Some("report") {
            seen.push(event.json()["id"].as_i64().unwrap());
        }
    }
    assert_eq!(seen, [1, 2, 3, 4, 5]);
    // A second run finds nothing left.
    let again = run_osds(vec!["reparse".into(), "--database-url".into(), database]).await;
    assert!(text(&again).contains("0 examined"), "{}", text(&again));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_new_agency_is_added_while_the_server_runs() {
    let cwa = guest_component(TEST_DECODERS, "test_decoder_cwa.wasm");
    let (relay, server) = start_connected(RelayConfig::default(), &[]).await;
    // Before: frames of the unknown agency are only counted as ignored.
    relay.push_to("/all_eew", cwa_frame(1).as_bytes()).await;
    eventually(20, "an ignored frame", || async {
        (archive(&server).await["ignored"] == 1).then_some(())
    })
    .await;
    let sources = |status: &Value| -> Vec<String> {
        status["sources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["source"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        sources(&get_json(&server.url("/status")).await),
        ["cea", "sc", "fj", "cq"]
    );
    let bad_source = reqwest::get(server.url("/events?source=cwa"))
        .await
        .unwrap();
    assert_eq!(bad_source.status(), 400);

    let installed = components(&server, &["install", "cwa", path_arg(&cwa)]).await;
    assert!(installed.status.success(), "{}", text(&installed));
    assert!(text(&installed).contains("1 fixed"), "{}", text(&installed));
    assert!(
        relay
            .wait_connected("/cwa_eew", 1, Duration::from_secs(20))
            .await,
        "the new channel's own socket"
    );
    relay.push_to("/cwa_eew", cwa_frame(2).as_bytes()).await;
    relay.push_to("/all_eew", cwa_frame(3).as_bytes()).await;
    eventually(20, "two cwa versions", || async {
        (archive(&server).await["versions"] == 2).then_some(())
    })
    .await;
    let status = get_json(&server.url("/status")).await;
    assert_eq!(sources(&status), ["cea", "sc", "fj", "cq", "cwa"]);
    let events = get_json(&server.url("/events?source=cwa")).await;
    assert_eq!(events["total"], 2);
    assert_eq!(events["items"][0]["latest"]["source"], "cwa");

    // The served document keeps the plugin promise: every answer that carries the new channel is valid
    // against it, as a strict generated client would check.
    let contract = Contract::load();
    let id = events["items"][0]["id"].as_str().unwrap().to_string();
    let event = format!("/events/{}", encode(&id));
    for (template, path) in [
        ("/status", "/status".to_string()),
        ("/events", "/events?source=cwa".to_string()),
        ("/events/{id}", event.clone()),
        ("/events/{id}/export", format!("{event}/export")),
        ("/events/{id}/deliveries", format!("{event}/deliveries")),
        ("/latest", "/latest".to_string()),
        ("/months", "/months?source=cwa".to_string()),
        ("/reports", "/reports?source=cwa,sc".to_string()),
    ] {
        let body = contract.get(&server, template, &path, 200).await;
        // (Months are counts of the channel's events; everything else names it.)
        if template != "/months" {
            assert!(body.to_string().contains("\"cwa\""), "{path}: {body}");
        }
    }

    // Reparse decodes with what the server runs: the frame ignored before the install is recovered, as the
    // canary's "1 fixed" said.
    let reparsed = run_osds(vec![
        "reparse".into(),
        "--database-url".into(),
        support::database::url_for(&server.dir),
    ])
    .await;
    assert!(reparsed.status.success(), "{}", text(&reparsed));
    assert!(
        text(&reparsed).contains("1 recovered (1 new versions"),
        "{}",
        text(&reparsed)
    );
    eventually(20, "the recovered cwa version", || async {
        (archive(&server).await["versions"] == 3).then_some(())
    })
    .await;

    // After a restart the new agency is still a channel: `source=cwa` is valid and its frames are archived.
    let mut server = server;
    server.stop().await;
    let server = start_server_in(server.into_dir(), &relay.url(), &[]).removing_dir();
    eventually(20, "the cwa channel connected again", || async {
        let status = get_json(&server.url("/status")).await;
        (sources(&status) == ["cea", "sc", "fj", "cq", "cwa"] && status["healthy"] == true)
            .then_some(())
    })
    .await;
    relay.push_to("/cwa_eew", cwa_frame(4).as_bytes()).await;
    eventually(20, "a fourth cwa version", || async {
        (archive(&server).await["versions"] == 4).then_some(())
    })
    .await;
    let events = get_json(&server.url("/events?source=cwa")).await;
    assert_eq!(events["total"], 4);
}

#[tokio::test(flavor = "multi_thread")]
async fn sighup_installs_a_component_dropped_into_the_components_directory() {
    let dir = support::tempdir("components");
    for channel in ["cea", "sc", "fj", "cq"] {
        let wasm = guest_component("../components/guests", &format!("decoder_{channel}.wasm"));
        std::fs::copy(&wasm, dir.join(format!("decoder_{channel}.wasm"))).unwrap();
    }
    let (_relay, server) = start_connected(
        RelayConfig::default(),
        &["--components-dir", path_arg(&dir)],
    )
    .await;
    assert_eq!(decoder_of(&server, "sc").await["name"], "wolfx-sc");

    // The operator replaces the sc file and sends SIGHUP.
    std::fs::remove_file(dir.join("decoder_sc.wasm")).unwrap();
    std::fs::copy(
        guest_component(TEST_DECODERS, "test_decoder_sc_v2.wasm"),
        dir.join("decoder_sc.wasm"),
    )
    .unwrap();
    let hangup = std::process::Command::new("kill")
        .args(["-HUP", &server.child.id().to_string()])
        .status()
        .unwrap();
    assert!(hangup.success());
    eventually(30, "the new sc decoder in service", || async {
        (decoder_of(&server, "sc").await["name"] == "wolfx-sc-v2").then_some(())
    })
    .await;
    assert_eq!(
        decoder_of(&server, "cea").await["name"],
        "wolfx-cea",
        "unchanged files stay as they are"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn logs_are_json_on_request_with_each_request_routed_timed_and_uncoloured() {
    let relay = fake_relay::FakeRelay::start(RelayConfig::default())
        .await
        .unwrap();
    let server = support::start_server(
        &relay.url(),
        &["--log", "info,osds_api=debug", "--log-format", "json"],
    );
    get_json(&server.url("/events?limit=1")).await;
    let log = eventually(20, "the request's log line", || async {
        let log = server.log();
        log.contains("\"route\":\"/api/v1/events\"").then_some(log)
    })
    .await;
    assert!(!log.contains('\u{1b}'), "no colour codes in a file");
    let mut lines = 0;
    for line in log.lines().filter(|l| !l.trim().is_empty()) {
        let entry: Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        lines += 1;
        if entry["fields"]["route"] == "/api/v1/events" {
            assert_eq!(entry["fields"]["status"], 200, "{line}");
            assert!(entry["fields"]["latency_ms"].as_f64().is_some(), "{line}");
            assert_eq!(entry["level"], "DEBUG", "{line}");
        }
    }
    assert!(lines > 1);
    // A filter that is not one is refused, like any other bad setting.
    let refused = support::osds()
        .args(["--log", "osds=loud", "backup"])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("is not a log filter"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
}

/// The series of the Metrics table in docs/operating.md.
fn documented_series() -> Vec<String> {
    let page = std::fs::read_to_string(support::tests_dir().join("../docs/operating.md")).unwrap();
    let names: Vec<String> = page
        .lines()
        .filter_map(|line| line.strip_prefix("| `osds_"))
        .flat_map(|line| {
            let cell = line.split(" |").next().unwrap();
            format!("`osds_{cell}")
                .split(", ")
                .map(|name| name.trim_matches('`').to_string())
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(names.len() > 30, "{names:?}");
    names
}

/// The `osds_*` series a PromQL text names (a histogram's `_bucket`, `_sum` and `_count` as the histogram).
fn series_named(promql: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = promql;
    while let Some(at) = rest.find("osds_") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        let name = &tail[..end];
        let name = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|suffix| name.strip_suffix(suffix))
            .unwrap_or(name);
        names.push(name.to_string());
        rest = &tail[end..];
    }
    names
}

/// The alert rules and the dashboard in `deploy/` are valid for Prometheus itself (`promtool check rules`, the
/// rules' own unit tests, each dashboard query parsed as a recording rule) and name only documented series.
#[test]
fn the_alert_rules_and_the_dashboard_are_valid_and_name_documented_series() {
    let promtool = support::promtool();
    let deploy = support::tests_dir().join("../deploy");
    let run = |dir: &Path, args: &[&str]| {
        let output = std::process::Command::new(&promtool)
            .current_dir(dir)
            .args(args)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "promtool {args:?}: {}",
            text(&output)
        );
    };
    let rules_dir = deploy.join("prometheus");
    run(&rules_dir, &["check", "rules", "osds-alerts.yml"]);
    run(&rules_dir, &["test", "rules", "osds-alerts.test.yml"]);

    let dashboard: Value = serde_json::from_str(
        &std::fs::read_to_string(deploy.join("grafana/osds-dashboard.json")).unwrap(),
    )
    .unwrap();
    let queries: Vec<String> = dashboard["panels"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|panel| panel["targets"].as_array().cloned().unwrap_or_default())
        .map(|target| target["expr"].as_str().unwrap().to_string())
        .collect();
    assert!(queries.len() >= 20, "{queries:?}");
    // Grafana's variables as Prometheus would get them.
    let rules: Vec<String> = queries
        .iter()
        .enumerate()
        .map(|(n, query)| {
            let query = query
                .replace("$__rate_interval", "5m")
                .replace("$instance", ".*");
            format!(
                "      - record: dashboard:query_{n}\n        expr: {}\n",
                serde_json::to_string(&query).unwrap()
            )
        })
        .collect();
    let dir = support::tempdir("dashboard-queries");
    std::fs::write(
        dir.join("queries.yml"),
        format!(
            "groups:\n  - name: dashboard\n    rules:\n{}",
            rules.concat()
        ),
    )
    .unwrap();
    run(&dir, &["check", "rules", "queries.yml"]);

    let documented = documented_series();
    let alerts = std::fs::read_to_string(rules_dir.join("osds-alerts.yml")).unwrap();
    let mut named = series_named(&alerts);
    named.extend(queries.iter().flat_map(|q| series_named(q)));
    assert!(named.len() > 30, "{named:?}");
    let undocumented: Vec<&String> = named.iter().filter(|n| !documented.contains(n)).collect();
    assert!(
        undocumented.is_empty(),
        "not in the Metrics table of docs/operating.md: {undocumented:?}"
    );
    // Each documented series is on the dashboard or in an alert.
    let unwatched: Vec<&String> = documented.iter().filter(|d| !named.contains(d)).collect();
    assert!(
        unwatched.is_empty(),
        "not on the dashboard or in an alert: {unwatched:?}"
    );
}

/// The value of the sample `name{labels…}` in Prometheus text (labels in any order), if there is one.
fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let (series_name, rest) = series.split_once('{').unwrap_or((series, "}"));
            let found: Vec<(&str, &str)> = rest
                .trim_end_matches('}')
                .split("\",")
                .filter(|pair| !pair.is_empty())
                .filter_map(|pair| {
                    let (key, value) = pair.split_once("=\"")?;
                    Some((key, value.trim_end_matches('"')))
                })
                .collect();
            (series_name == name && labels.iter().all(|label| found.contains(label)))
                .then(|| value.parse().unwrap())
        })
}

#[tokio::test(flavor = "multi_thread")]
async fn prometheus_metrics_are_served_on_their_own_listener() {
    use futures_util::StreamExt;
    // Timestamps are Unix seconds, at or after this (the text keeps milliseconds).
    let began = osds_time::now_ms() as f64 / 1000.0 - 0.001;
    let (relay, server) = start_connected(
        RelayConfig::default(),
        &[
            "--metrics-listen",
            "127.0.0.1:0",
            // Six requests, then 429s: no token comes back during the test.
            "--rate-limit-burst",
            "6",
            "--rate-limit-per-sec",
            "0.0001",
        ],
    )
    .await;
    let metrics_url = support::metrics_url(&server);
    let scrape = || async {
        let response = reqwest::get(&metrics_url).await.unwrap();
        assert_eq!(response.status(), 200);
        assert!(
            response.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/plain; version=0.0.4")
        );
        response.text().await.unwrap()
    };

    // Requests 1 and 2: a consumer of each protocol.
    let mut sse = SseClient::connect(&server.url("/stream"), None)
        .await
        .unwrap();
    let (mut ws, _) = tokio_tungstenite::connect_async(support::live::ws_url(&server, ""))
        .await
        .unwrap();
    for n in 1..=3 {
        relay.push_to("/sc_eew", sc_frame(n).as_bytes()).await;
    }
    relay.push_to("/sc_eew", sc_frame(1).as_bytes()).await;
    relay
        .push_to("/sc_eew", br#"{"type":"sc_eew","ID":"x"}"#)
        .await;
    let mut reports = 0;
    while reports < 3 {
        let event = sse.next_event().await.expect("the stream goes on");
        reports += usize::from(event.event.as_deref() == Some("report"));
    }
    let mut reports = 0;
    while reports < 3 {
        let message = support::live::ws_next(&mut ws)
            .await
            .expect("the socket stays open");
        reports += usize::from(message["type"] == "report");
    }
    // Requests 3 and 4; then the rest of the burst, and one more is refused.
    get_json(&server.url("/events?limit=1")).await;
    let public_root = server.url("").replace("/api/v1", "");
    let public = reqwest::get(format!("{public_root}/metrics"))
        .await
        .unwrap();
    assert_eq!(public.status(), 404, "not on the public port");
    let mut limited = false;
    for _ in 0..10 {
        if reqwest::get(server.url("/status")).await.unwrap().status() == 429 {
            limited = true;
            break;
        }
    }
    assert!(limited);

    let sc = [("source", "sc")];
    let scraped = eventually(
        20,
        "the duplicate and the unparsed frame counted",
        || async {
            let text = scrape().await;
            let counted = |outcome| {
                sample(
                    &text,
                    "osds_ingest_units_total",
                    &[sc[0], ("outcome", outcome)],
                )
            };
            (counted("duplicate") == Some(1.0) && counted("unparsed") == Some(1.0)).then_some(text)
        },
    )
    .await;
    let value = |name: &str, labels: &[(&str, &str)]| {
        sample(&scraped, name, labels)
            .unwrap_or_else(|| panic!("no {name} {labels:?} in\n{scraped}"))
    };
    assert_eq!(
        value(
            "osds_upstream_frames_received_total",
            &[("socket", "/sc_eew"), ("source", "sc")]
        ),
        5.0
    );
    assert_eq!(
        value("osds_ingest_units_total", &[sc[0], ("outcome", "archived")]),
        3.0
    );
    assert!(value("osds_commit_duration_seconds_count", &[]) >= 1.0);
    assert!(value("osds_commit_duration_seconds_bucket", &[("le", "+Inf")]) >= 1.0);
    assert_eq!(
        value("osds_upstream_connected", &[("socket", "/sc_eew")]),
        1.0
    );
    assert_eq!(value("osds_archive_writable", &[]), 1.0);
    assert_eq!(value("osds_ingest_queued_frames", &[]), 0.0);
    for protocol in ["sse", "ws"] {
        let of = [("protocol", protocol)];
        assert_eq!(value("osds_live_subscribers", &of), 1.0, "{protocol}");
        assert_eq!(value("osds_live_deliveries_total", &of), 3.0, "{protocol}");
        assert_eq!(
            value("osds_live_replay_backlog_reports", &of),
            0.0,
            "{protocol}"
        );
    }
    assert_eq!(
        value(
            "osds_http_requests_total",
            &[("route", "/api/v1/events"), ("status", "200")]
        ),
        1.0
    );
    assert_eq!(
        value(
            "osds_http_requests_total",
            &[("route", "(none)"), ("status", "404")]
        ),
        1.0
    );
    assert!(
        value(
            "osds_http_request_duration_seconds_count",
            &[("route", "/api/v1/events")]
        ) >= 1.0
    );
    assert_eq!(
        value("osds_http_rate_limited_total", &[("limit", "rate")]),
        1.0
    );
    assert!(
        value(
            "osds_wasm_calls_total",
            &[("component", "wolfx-sc"), ("outcome", "ok")]
        ) >= 5.0
    );
    assert!(
        scraped.contains("# HELP osds_ingest_units_total "),
        "{scraped}"
    );
    // Staleness: when each socket and channel last heard from the relay, when a version was last archived;
    // and the version.
    let now = osds_time::now_ms() as f64 / 1000.0 + 0.001;
    for (name, labels) in [
        (
            "osds_upstream_last_message_timestamp_seconds",
            &[("socket", "/sc_eew")][..],
        ),
        ("osds_source_last_received_timestamp_seconds", &sc[..]),
        ("osds_archive_last_commit_timestamp_seconds", &[][..]),
    ] {
        let at = value(name, labels);
        assert!(
            began <= at && at <= now,
            "{name} {at} not in {began}..{now}"
        );
    }
    assert_eq!(
        value("osds_build_info", &[("version", env!("CARGO_PKG_VERSION"))]),
        1.0
    );

    // A consumer that leaves is counted out, with why.
    ws.close(None).await.unwrap();
    while ws.next().await.is_some() {}
    eventually(20, "the WebSocket consumer counted out", || async {
        let text = scrape().await;
        let ws = [("protocol", "ws")];
        (sample(&text, "osds_live_subscribers", &ws) == Some(0.0)
            && sample(
                &text,
                "osds_live_disconnects_total",
                &[ws[0], ("reason", "client_gone")],
            ) == Some(1.0))
        .then_some(())
    })
    .await;
    drop(sse);

    // After this traffic every series docs/operating.md lists is there (`# TYPE` comes with the first sample), but
    // the scorecard's median, which comes with the first matched quake (tests/detector.rs checks it).
    let scraped = scrape().await;
    let missing: Vec<String> = documented_series()
        .into_iter()
        .filter(|name| name != "osds_hyp_scorecard_median_epicentre_km")
        .filter(|name| !scraped.contains(&format!("# TYPE {name} ")))
        .collect();
    assert!(missing.is_empty(), "not exported: {missing:?}\n{scraped}");
    // Series known at start are there at zero before anything happened.
    for (name, labels) in [
        ("osds_ingest_dropped_frames_total", &[("source", "cq")][..]),
        (
            "osds_http_rate_limited_total",
            &[("limit", "concurrent")][..],
        ),
        ("osds_hyp_frames_total", &[][..]),
        ("osds_hyp_reports_total", &[("outcome", "failed")][..]),
        ("osds_hyp_scorecard_ours_unmatched", &[][..]),
        (
            "osds_live_disconnects_total",
            &[("protocol", "sse"), ("reason", "slow_consumer")][..],
        ),
    ] {
        assert_eq!(
            sample(&scraped, name, labels),
            Some(0.0),
            "{name} {labels:?}"
        );
    }
    // Every disconnect reason the Metrics table lists is a series of both protocols, and no other.
    let page = std::fs::read_to_string(support::tests_dir().join("../docs/operating.md")).unwrap();
    let row = page
        .lines()
        .find(|line| line.starts_with("| `osds_live_disconnects_total`"))
        .unwrap();
    let mut documented: Vec<&str> = row
        .trim_end_matches(" |")
        .rsplit(" | ")
        .next()
        .unwrap()
        .split(", ")
        .map(|reason| reason.trim_matches('`'))
        .collect();
    documented.sort();
    assert!(documented.len() >= 7, "{documented:?}");
    for protocol in ["sse", "ws"] {
        let mut exported: Vec<&str> = scraped
            .lines()
            .filter(|line| line.starts_with("osds_live_disconnects_total{"))
            .filter(|line| line.contains(&format!("protocol=\"{protocol}\"")))
            .filter_map(|line| line.split("reason=\"").nth(1)?.split('"').next())
            .collect();
        exported.sort();
        assert_eq!(exported, documented, "{protocol}");
    }

    // The public address is refused for metrics.
    let refused = run_osds(
        [
            "serve",
            "--listen",
            "127.0.0.1:9",
            "--metrics-listen",
            "127.0.0.1:9",
        ]
        .map(String::from)
        .to_vec(),
    )
    .await;
    assert!(!refused.status.success());
    assert!(
        text(&refused).contains("metrics need a listener of their own"),
        "{}",
        text(&refused)
    );
}

/// The canary and ingestion take a payload through the same decode step: what the canary says the current
/// decoder does with an archived frame is what ingestion archived, and what it says the new one does is what
/// ingestion archives once the new one is in service.
#[tokio::test(flavor = "multi_thread")]
async fn the_canary_and_ingestion_agree_on_a_frame_one_version_rejects_and_the_next_accepts() {
    let broken = guest_component(TEST_DECODERS, "test_decoder_sc_broken.wasm");
    let v2 = guest_component(TEST_DECODERS, "test_decoder_sc_v2.wasm");
    let (relay, server) = start_connected(RelayConfig::default(), &[]).await;
    let forced = components(&server, &["install", "sc", path_arg(&broken), "--force"]).await;
    assert!(forced.status.success(), "{}", text(&forced));
    let frame = sc_frame(7);
    relay.push_to("/sc_eew", frame.as_bytes()).await;
    let counts = eventually(20, "one unparsed", || async {
        let counts = archive(&server).await;
        (counts["unparsed"] == 1).then_some(counts)
    })
    .await;
    assert_eq!(
        counts["unparsedByReason"],
        serde_json::json!({"malformed": 1})
    );

    let checked = components(&server, &["--json", "check", path_arg(&v2)]).await;
    assert!(checked.status.success(), "{}", text(&checked));
    let answer: Value = serde_json::from_slice(&checked.stdout).unwrap();
    let canary = &answer["details"]["canary"];
    assert_eq!(canary["fixed"], 1, "{answer}");
    let difference = &canary["differences"][0];
    assert_eq!(difference["before"]["result"], "error", "{difference}");
    assert_eq!(
        difference["before"]["kind"], "malformed",
        "the canary names the failure as ingestion stored it"
    );
    assert_eq!(difference["after"]["result"], "report", "{difference}");

    let installed = components(&server, &["install", "sc", path_arg(&v2)]).await;
    assert!(installed.status.success(), "{}", text(&installed));
    relay.push_to("/sc_eew", frame.as_bytes()).await;
    let reports = eventually(20, "the frame archived as a version", || async {
        let reports = all_reports(&server).await;
        (!reports.is_empty()).then_some(reports)
    })
    .await;
    let predicted = &difference["after"]["report"];
    for field in [
        "eventId",
        "upstreamEventId",
        "revision",
        "magnitude",
        "originAt",
    ] {
        assert_eq!(
            reports[0][field], predicted[field],
            "{field}: {}",
            reports[0]
        );
    }
}
