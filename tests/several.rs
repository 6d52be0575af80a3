//! A deployment of several processes on one PostgreSQL archive, each a real `osds serve` on its own socket: two
//! ingesters, each on its own relay (different network paths), and two API-only replicas with live consumers.
//! One ingester and one replica are killed (SIGKILL) while reports keep coming.

mod support;

use fake_relay::{FakeRelay, RelayConfig};
use futures_util::StreamExt;
use osds_store::test_postgres::Cluster;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::live::{SseClient, ws_next};
use support::{Server, all_reports, eventually, get_json, launch, page_ids, raw_bytes, tempdir};

fn cq_frame(n: u32) -> String {
    format!(
        r#"{{"type":"cq_eew","ID":"{n}","EventID":"2026091011{n:04}_1","ReportTime":"2026-09-10 11:10:25","ReportNum":1,"OriginTime":"2026-09-10 11:10:10","HypoCenter":"重庆荣昌区","Latitude":29.4,"Longitude":105.5,"Magnitude":4.1,"Depth":8,"MaxIntensity":5.9}}"#
    )
}

/// `osds serve` on the archive at `database`: an ingester named `name` on `relay`, or (no relay) an API
/// replica.
async fn serve(database: &str, name: &str, relay: Option<&FakeRelay>) -> Server {
    let upstream = relay.map_or("ws://127.0.0.1:9/unused".to_owned(), FakeRelay::url);
    let extra: &[&str] = match relay {
        Some(_) => &["--ingester-name", name],
        None => &["--no-ingest"],
    };
    let server = launch(tempdir(name), &upstream, extra)
        .database_url(database)
        .start()
        .unwrap_or_else(|e| panic!("{e:#}"))
        .removing_dir();
    if let Some(relay) = relay {
        for path in fake_relay::channel_paths() {
            assert!(
                relay.wait_connected(path, 1, Duration::from_secs(20)).await,
                "{name} never connected {path}; log:\n{}",
                server.log()
            );
        }
    }
    server
}

#[derive(Clone, Copy)]
enum Live {
    Sse,
    Ws,
}

/// A live consumer that reads report ids from the first replica in `replicas` until it has seen `last`,
/// resuming from its cursor on the next replica listed whenever its connection ends (a test removes a replica
/// from the list before killing it).
async fn consume(kind: Live, replicas: Arc<Mutex<Vec<String>>>, last: i64) -> Vec<i64> {
    let mut seen: Vec<i64> = Vec::new();
    let mut connections = 0;
    while seen.last() != Some(&last) {
        connections += 1;
        assert!(connections < 20, "{connections} connections and not done");
        let base = replicas.lock().unwrap()[0].clone();
        let cursor = seen.last().copied().unwrap_or(0);
        match kind {
            Live::Sse => {
                let url = format!("{base}/stream?after={cursor}");
                let Ok(mut stream) = SseClient::connect(&url, None).await else {
                    continue;
                };
                while let Some(event) = stream.next_event().await {
                    if event.event.as_deref() == Some("report") {
                        seen.push(event.json()["id"].as_i64().unwrap());
                        if seen.last() == Some(&last) {
                            break;
                        }
                    }
                }
            }
            Live::Ws => {
                let url = format!("{base}/ws?after={cursor}").replacen("http://", "ws://", 1);
                let Ok((mut ws, _)) = tokio_tungstenite::connect_async(&url).await else {
                    continue;
                };
                while let Some(message) = ws_next(&mut ws).await {
                    if message["type"] == "report" {
                        seen.push(message["id"].as_i64().unwrap());
                        if seen.last() == Some(&last) {
                            break;
                        }
                    }
                }
                let _ = ws.close(None).await;
                // Drain whatever the close leaves so the socket ends cleanly.
                while let Ok(Some(_)) =
                    tokio::time::timeout(Duration::from_secs(1), ws.next()).await
                {}
            }
        }
    }
    seen
}

async fn high_water(server: &Server) -> i64 {
    get_json(&server.url("/reports?after=0&limit=1")).await["highWater"]
        .as_i64()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn two_ingesters_and_two_replicas_keep_one_gap_free_cursor_through_kills() {
    let cluster = Cluster::start("several");
    let database = cluster.database("osds").await;
    let relay_a = FakeRelay::start(RelayConfig::default()).await.unwrap();
    let relay_b = FakeRelay::start(RelayConfig::default()).await.unwrap();
    let mut ingester_a = serve(&database, "a", Some(&relay_a)).await;
    let ingester_b = serve(&database, "b", Some(&relay_b)).await;
    let replica_1 = serve(&database, "replica-1", None).await;
    let mut replica_2 = serve(&database, "replica-2", None).await;

    const LAST: i64 = 100;
    // Each replica first in some consumers' list: those move to the other one when it goes.
    let on_1 = Arc::new(Mutex::new(vec![replica_1.base.clone()]));
    let on_2 = Arc::new(Mutex::new(vec![
        replica_2.base.clone(),
        replica_1.base.clone(),
    ]));
    let consumers: Vec<_> = [
        (Live::Sse, &on_1),
        (Live::Ws, &on_1),
        (Live::Sse, &on_2),
        (Live::Ws, &on_2),
    ]
    .into_iter()
    .map(|(kind, replicas)| tokio::spawn(consume(kind, replicas.clone(), LAST)))
    .collect();

    let mut frames = Vec::new();
    let mut push = async |n: u32, relays: &[&FakeRelay]| {
        let frame = cq_frame(n);
        for relay in relays {
            assert_eq!(relay.push_to("/cq_eew", frame.as_bytes()).await, 1);
        }
        frames.push(frame);
    };
    // Both ingesters receive 1-20; 21-30 reach only `a`, 31-40 only `b`.
    for n in 1..=20 {
        push(n, &[&relay_a, &relay_b]).await;
    }
    for n in 21..=30 {
        push(n, &[&relay_a]).await;
    }
    for n in 31..=40 {
        push(n, &[&relay_b]).await;
    }
    // What only `a` received is archived before it is killed (what it holds uncommitted is lost with it).
    eventually(60, "40 versions archived", || async {
        (high_water(&replica_1).await >= 40).then_some(())
    })
    .await;
    // The rest reaches both, and the kills come in the middle of it.
    for n in 41..=LAST as u32 {
        if n == 60 {
            ingester_a.kill();
            on_2.lock().unwrap().remove(0);
            replica_2.kill();
        }
        let relays: &[&FakeRelay] = if n < 60 {
            &[&relay_a, &relay_b]
        } else {
            &[&relay_b]
        };
        push(n, relays).await;
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    let mut seen = Vec::new();
    for consumer in consumers {
        seen.push(
            tokio::time::timeout(Duration::from_secs(120), consumer)
                .await
                .expect("a consumer saw every report")
                .unwrap(),
        );
    }
    let every: Vec<i64> = (1..=LAST).collect();
    for ids in &seen {
        assert_eq!(ids, &every, "each consumer sees every id once, in order");
    }

    // Every frame either ingester received is archived once, byte for byte.
    let reports = all_reports(&replica_1).await;
    assert_eq!(reports.len(), LAST as usize);
    let mut events: Vec<&str> = reports
        .iter()
        .map(|r| r["upstreamEventId"].as_str().unwrap())
        .collect();
    events.sort();
    events.dedup();
    assert_eq!(events.len(), LAST as usize, "no version twice");
    for report in &reports {
        let raw = raw_bytes(&replica_1, report["deliveryId"].as_i64().unwrap()).await;
        assert!(
            frames.iter().any(|f| f.as_bytes() == raw.as_ref()),
            "stored bytes are a pushed frame"
        );
    }

    // Each reception is kept under the ingester that received it.
    for report in &reports[..40] {
        let n: u32 = report["upstreamEventId"].as_str().unwrap()[10..14]
            .parse()
            .unwrap();
        let page = get_json(&replica_1.url(&format!(
            "/events/{}/deliveries",
            report["eventKey"].as_str().unwrap()
        )))
        .await;
        let mut by: Vec<&str> = page["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["connection"]["ingester"].as_str().unwrap())
            .collect();
        by.sort();
        let expected: &[&str] = match n {
            1..=20 => &["a", "b"],
            21..=30 => &["a"],
            _ => &["b"],
        };
        assert_eq!(by, expected, "frame {n}: {page}");
    }

    // A channel is out only while no running ingester has it: `b` has them all, so none is. (What the killed
    // `a` had is forgotten, and its sessions ended, at the next check of a running ingester, within a second
    // or so; `/status` reads its parts one query each, so a replica applying that check between them can show
    // the one without the other: wait for both.)
    let status = eventually(
        30,
        "a's channels forgotten and its sessions ended",
        || async {
            let status = get_json(&replica_1.url("/status")).await;
            let forgotten = status["ingesters"][0]["channels"] == serde_json::json!([]);
            let ended = status["connections"].as_array().is_some_and(|all| {
                all.iter()
                    .all(|c| c["ingester"] != "a" || !c["endReason"].is_null())
            });
            (forgotten && ended).then_some(status)
        },
    )
    .await;
    let sources: Vec<&str> = status["sources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["source"].as_str().unwrap())
        .collect();
    let mut held = sources.clone();
    held.sort();
    let ingesters = status["ingesters"].as_array().unwrap();
    assert_eq!(ingesters.len(), 2, "{status}");
    let mut every = fake_relay::channel_paths();
    every.sort();
    for (ingester, name, running, channels, open) in [
        // `a`'s sessions were ended by `b` when it found `a` dead (at `a`'s last sign of life).
        (&ingesters[0], "a", false, serde_json::json!([]), Vec::new()),
        (
            &ingesters[1],
            "b",
            true,
            serde_json::json!(held),
            every.clone(),
        ),
    ] {
        assert_eq!(ingester["name"], name);
        assert_eq!(ingester["running"], running, "{ingester}");
        assert_eq!(ingester["channels"], channels, "{ingester}");
        let mut paths: Vec<&str> = ingester["sockets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["path"].as_str().unwrap())
            .collect();
        paths.sort();
        assert_eq!(paths, open, "{ingester}");
    }
    let interrupted = status["connections"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["ingester"] == "a" && c["endReason"] == "interrupted")
        .count();
    assert!(interrupted >= every.len(), "{}", status["connections"]);
    assert!(
        status["sources"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["currentOutage"].is_null()),
        "{status}"
    );
    assert_eq!(
        status["healthy"], true,
        "a replica is healthy while an ingester has every channel"
    );
    let ingesters: std::collections::BTreeSet<&str> = status["connections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["ingester"].as_str().unwrap())
        .collect();
    assert_eq!(ingesters, ["a", "b"].into(), "sessions name their ingester");

    // Once the last one stops, every channel is out.
    let mut ingester_b = ingester_b;
    ingester_b.stop().await;
    let status = get_json(&replica_1.url("/status")).await;
    for source in &sources {
        let outage = status["sources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["source"] == *source)
            .unwrap()["currentOutage"]
            .clone();
        assert!(
            outage["startedAt"].is_string() && outage["endedAt"].is_null(),
            "{source}: {status}"
        );
    }
    assert_eq!(status["healthy"], false);
}

/// A cq report made `padding` bytes larger by a field the decoder does not read.
fn big_cq_frame(n: u32, padding: usize) -> String {
    let frame = cq_frame(n);
    format!(
        r#"{}, "Padding":"{}"}}"#,
        &frame[..frame.len() - 1],
        "x".repeat(padding)
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_database_restart_holds_frames_in_a_bounded_queue_and_replicas_answer_503_until_it_is_back()
 {
    let cluster = Cluster::start("restart");
    let database = cluster.database("osds").await;
    let relay = FakeRelay::start(RelayConfig::default()).await.unwrap();
    let ingester = launch(tempdir("ingester"), &relay.url(), &["--ingester-name", "a"])
        .args(["--ingest-queue-mib", "1"])
        .database_url(&database)
        .start()
        .unwrap_or_else(|e| panic!("{e:#}"))
        .removing_dir();
    for path in fake_relay::channel_paths() {
        assert!(relay.wait_connected(path, 1, Duration::from_secs(20)).await);
    }
    let replica = serve(&database, "replica", None).await;
    let consumer = tokio::spawn(consume(
        Live::Sse,
        Arc::new(Mutex::new(vec![replica.base.clone()])),
        12,
    ));
    let mut frames = Vec::new();
    for n in 1..=5 {
        frames.push(cq_frame(n));
        relay
            .push_to("/cq_eew", frames.last().unwrap().as_bytes())
            .await;
    }
    eventually(60, "5 versions archived", || async {
        (high_water(&replica).await >= 5).then_some(())
    })
    .await;

    cluster.stop();
    // Received while the database is gone: they wait in the ingester's queue (1 MiB)...
    for n in 6..=11 {
        frames.push(cq_frame(n));
        relay
            .push_to("/cq_eew", frames.last().unwrap().as_bytes())
            .await;
    }
    frames.push(big_cq_frame(12, 600 << 10));
    relay
        .push_to("/cq_eew", frames.last().unwrap().as_bytes())
        .await;
    // ...up to its bound: these two do not fit, and are dropped and counted.
    for n in 13..=14 {
        relay
            .push_to("/cq_eew", big_cq_frame(n, 600 << 10).as_bytes())
            .await;
    }
    // Neither process can serve reads: both are out of their load balancer, for the same reason.
    let ready = eventually(60, "the ingester not ready", || async {
        let response = reqwest::get(ingester.base.replace("/api/v1", "/readyz"))
            .await
            .unwrap();
        (response.status() == 503).then_some(response.json::<serde_json::Value>())
    })
    .await
    .await
    .unwrap();
    assert_eq!(
        ready["reasons"],
        serde_json::json!(["database_unreachable"]),
        "{ready}"
    );
    let replica_ready = reqwest::get(replica.base.replace("/api/v1", "/readyz"))
        .await
        .unwrap();
    assert_eq!(replica_ready.status(), 503);
    let replica_ready: serde_json::Value = replica_ready.json().await.unwrap();
    assert!(
        replica_ready["reasons"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r == "database_unreachable"),
        "{replica_ready}"
    );
    let unavailable = reqwest::get(replica.url("/reports?after=0")).await.unwrap();
    assert_eq!(unavailable.status(), 503);
    assert!(unavailable.headers().contains_key("retry-after"));
    let body: serde_json::Value = unavailable.json().await.unwrap();
    assert_eq!(body["code"], "unavailable", "{body}");

    cluster.resume();
    // Both recover without a restart: what was queued is archived in order, and served.
    eventually(60, "the queued frames archived", || async {
        let response = reqwest::get(replica.url("/reports?after=0&limit=1"))
            .await
            .ok()?;
        let page: serde_json::Value = response.json().await.ok()?;
        (page["highWater"].as_i64()? >= 12).then_some(())
    })
    .await;
    let seen = tokio::time::timeout(Duration::from_secs(120), consumer)
        .await
        .expect("the consumer saw every report")
        .unwrap();
    assert_eq!(seen, (1..=12).collect::<Vec<i64>>());
    let reports = all_reports(&replica).await;
    assert_eq!(reports.len(), 12);
    for (report, frame) in reports.iter().zip(&frames) {
        let raw = raw_bytes(&replica, report["deliveryId"].as_i64().unwrap()).await;
        assert_eq!(
            raw.as_ref(),
            frame.as_bytes(),
            "archived in the order received"
        );
    }
    let writes = get_json(&ingester.url("/status")).await["writes"].clone();
    assert_eq!(writes["writable"], true, "{writes}");
    assert_eq!(
        writes["dropped"],
        serde_json::json!([{ "source": "cq", "frames": 2 }]),
        "{writes}"
    );
}

/// Runs PostgreSQL's `program` on the cluster; it must succeed.
fn pg(cluster: &Cluster, program: &str, args: &[&str]) {
    let output = cluster.client(program).args(args).output().unwrap();
    assert!(
        output.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pg_dump_restored_gets_a_new_identity_and_ids_above_every_one_handed_out() {
    let cluster = Cluster::start("restore");
    let database = cluster.database("osds").await;
    let relay = FakeRelay::start(RelayConfig::default()).await.unwrap();
    let push_until = async |server: &Server, numbers: std::ops::RangeInclusive<u32>| {
        let last = *numbers.end() as i64;
        for n in numbers {
            relay.push_to("/cq_eew", cq_frame(n).as_bytes()).await;
        }
        eventually(60, "archived", || async {
            (high_water(server).await >= last).then_some(())
        })
        .await;
    };
    let dump = tempdir("dump").join("osds.dump");
    let mut server = serve(&database, "a", Some(&relay)).await;
    push_until(&server, 1..=5).await;
    let before = get_json(&server.url("/status")).await["archiveId"].clone();
    pg(
        &cluster,
        "pg_dump",
        &["-Fc", "-f", dump.to_str().unwrap(), "osds"],
    );
    // Handed out after the dump: lost with the restore, but consumers may hold these cursors.
    push_until(&server, 6..=8).await;

    pg(&cluster, "createdb", &["restored"]);
    pg(
        &cluster,
        "pg_restore",
        &["-d", "restored", dump.to_str().unwrap()],
    );
    let restored = database.replace("/osds?", "/restored?");
    let restore = |args: &[&str]| {
        support::osds()
            .args(["restore", "--database-url", &restored])
            .args(args)
            .output()
            .unwrap()
    };
    let refused = restore(&[]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--ids-above"));
    // Nothing may be connected to it meanwhile.
    let replica = serve(&restored, "replica", None).await;
    let busy = restore(&["--ids-above", "8"]);
    assert!(!busy.status.success());
    assert!(
        String::from_utf8_lossy(&busy.stderr).contains("stop every osds process"),
        "{}",
        String::from_utf8_lossy(&busy.stderr)
    );
    drop(replica);
    server.stop().await;
    let done = eventually(30, "the restore once nothing is connected", || async {
        let output = restore(&["--ids-above", "8"]);
        output.status.success().then_some(output)
    })
    .await;
    let stdout = String::from_utf8_lossy(&done.stdout);
    assert!(
        stdout.contains("reports up to id 5") && stdout.contains("new report ids start after 8"),
        "{stdout}"
    );

    let server = serve(&restored, "a", Some(&relay)).await;
    let status = get_json(&server.url("/status")).await;
    assert_ne!(status["archiveId"], before, "a new identity");
    assert_eq!(status["archive"]["highWater"], 8);
    // A cursor the replaced archive handed out resumes; one beyond it is refused.
    let ahead = reqwest::get(server.url("/reports?after=9")).await.unwrap();
    assert_eq!(ahead.status(), 409);
    push_until(&server, 9..=9).await;
    let page = get_json(&server.url("/reports?after=5")).await;
    let ids = page_ids(&page);
    assert_eq!(
        ids,
        [9],
        "the next version gets the id after every one handed out"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn processes_on_one_host_do_not_need_an_admin_socket_each() {
    let cluster = Cluster::start("admin");
    let database = cluster.database("osds").await;
    let relay = FakeRelay::start(RelayConfig::default()).await.unwrap();
    let dir = tempdir("one-host");
    // No --ingester-name: the host and port name it, here (a port the system picks) the process.
    let ingester = launch(dir.clone(), &relay.url(), &[])
        .database_url(&database)
        .start()
        .unwrap_or_else(|e| panic!("{e:#}"));
    let name = get_json(&ingester.url("/status")).await["ingesters"][0]["name"].clone();
    assert!(
        name.as_str()
            .unwrap()
            .ends_with(&format!(":pid{}", ingester.pid())),
        "{name}"
    );
    // The same admin socket path (here through a link from the replica's folder to the ingester's socket):
    // the replica serves without one, and says so.
    let replica_dir = tempdir("one-host-replica");
    std::os::unix::fs::symlink(dir.join("admin.sock"), replica_dir.join("admin.sock")).unwrap();
    let replica = launch(replica_dir, &relay.url(), &["--no-ingest"])
        .database_url(&database)
        .start()
        .unwrap_or_else(|e| panic!("{e:#}"));
    assert!(
        replica.log().contains("no admin socket for this process"),
        "{}",
        replica.log()
    );
    get_json(&replica.url("/status")).await;
    // The first keeps its socket, also once the second has stopped.
    let mut replica = replica;
    replica.stop().await;
    let listed = support::osds()
        .args(["components", "--admin-socket"])
        .arg(dir.join("admin.sock"))
        .arg("list")
        .output()
        .unwrap();
    assert!(
        listed.status.success(),
        "{}",
        String::from_utf8_lossy(&listed.stderr)
    );
    drop(ingester);
}

/// The decoder serving `source` on `server`, per `/status`.
async fn decoder_name(server: &Server, source: &str) -> String {
    get_json(&server.url("/status")).await["decoders"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["source"] == source)
        .map(|d| d["name"].as_str().unwrap().to_string())
        .unwrap_or_default()
}

/// `osds components --admin-socket <server's> ARGS...`, which must succeed.
fn components(server: &Server, args: &[&str]) {
    let output = support::osds()
        .arg("components")
        .arg("--admin-socket")
        .arg(server.dir.join("admin.sock"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_decoder_installed_on_one_process_is_put_in_service_by_every_other() {
    let cluster = Cluster::start("follow");
    let database = cluster.database("osds").await;
    let relay = FakeRelay::start(RelayConfig::default()).await.unwrap();
    let ingester = serve(&database, "a", Some(&relay)).await;
    let replica = serve(&database, "replica", None).await;
    assert_eq!(decoder_name(&replica, "sc").await, "wolfx-sc");
    let v2 = support::guest_component("test-decoders", "test_decoder_sc_v2.wasm");
    components(&ingester, &["install", "sc", v2.to_str().unwrap()]);
    assert_eq!(decoder_name(&ingester, "sc").await, "wolfx-sc-v2");
    eventually(60, "the replica took the install", || async {
        (decoder_name(&replica, "sc").await == "wolfx-sc-v2").then_some(())
    })
    .await;
    // And back the other way: a rollback on the replica reaches the ingester.
    components(&replica, &["rollback", "sc"]);
    eventually(60, "the ingester took the rollback", || async {
        (decoder_name(&ingester, "sc").await == "wolfx-sc").then_some(())
    })
    .await;
    assert_eq!(decoder_name(&replica, "sc").await, "wolfx-sc");
    // Frames archived after it are decoded by what both now run.
    relay
        .push_to("/sc_eew", br#"{"type":"sc_eew","ID":1,"EventID":"202611221000.0001_1","ReportTime":"2026-11-22 10:00:00","ReportNum":1,"OriginTime":"2026-11-22 09:59:50","HypoCenter":"x","Latitude":29.2,"Longitude":105.2,"Magunitude":4.2,"Depth":10,"MaxIntensity":5.0}"#)
        .await;
    let reports = eventually(60, "one report", || async {
        let reports = all_reports(&replica).await;
        (!reports.is_empty()).then_some(reports)
    })
    .await;
    assert_eq!(reports[0]["decoder"]["name"], "wolfx-sc", "{}", reports[0]);
}
