//! Backups end to end: the real `osds serve` takes periodic backups while it archives frames from the fake
//! relay, `osds backup` takes one on demand while the service runs, old backups are rotated, and a backup
//! restored as the database of a second service serves the same reports and the same raw bytes.

mod support;

use fake_relay::RelayConfig;
use serde_json::Value;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use support::{
    Server, all_reports, eventually, get_json, osds, page_ids, start_connected, start_server_in,
    tempdir,
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

/// Names of the entries of `dir`, sorted.
fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Backup file names in `dir` (`osds-*.db`), sorted.
fn backup_names(dir: &Path) -> Vec<String> {
    entries(dir)
        .into_iter()
        .filter(|name| name.starts_with("osds-") && name.ends_with(".db"))
        .collect()
}

/// `/status`'s `backups`, after checking the whole `/status` body against `schemas/openapi.yaml` (the
/// contract test in `tests/api.rs` only sees a service without backups).
async fn backups_status(server: &Server) -> Value {
    let status = get_json(&server.url("/status")).await;
    let text =
        std::fs::read_to_string(support::tests_dir().join("../schemas/openapi.yaml")).unwrap();
    let mut root: Value = serde_norway::from_str(&text).unwrap();
    root["$ref"] = "#/components/schemas/Status".into();
    let validator = jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .should_validate_formats(true)
        .build(&root)
        .unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&status)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "/status does not match Status: {errors:?}\n{status}"
    );
    status["backups"].clone()
}

async fn raw(server: &Server, delivery_id: &Value) -> Vec<u8> {
    let response = reqwest::get(server.url(&format!("/deliveries/{delivery_id}/raw")))
        .await
        .unwrap();
    assert_eq!(
        response.status(),
        200,
        "raw bytes of delivery {delivery_id}"
    );
    response.bytes().await.unwrap().to_vec()
}

/// `osds backup` against `db_path` into `dir`; returns its output.
fn run_backup(db_path: &Path, dir: &Path, keep: &str) -> std::process::Output {
    osds()
        .arg("backup")
        .arg("--database-url")
        .arg(format!("sqlite://{}", db_path.display()))
        .arg("--backup-dir")
        .arg(dir)
        .args(["--backup-keep", keep])
        .output()
        .expect("run osds backup")
}

/// The summary line of `osds backup`: (path, size, removed).
fn summary(output: &std::process::Output) -> (PathBuf, u64, usize) {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "osds backup failed: {}\nstdout: {stdout}\nstderr: {stderr}",
        output.status
    );
    let mut lines = stdout.lines();
    assert!(
        lines
            .next()
            .is_some_and(|line| line.starts_with("osds: backing up ")),
        "progress line first: {stdout}"
    );
    let line = lines
        .find_map(|line| line.strip_prefix("osds: backup "))
        .unwrap_or_else(|| panic!("no summary line: {stdout}"));
    let (path, rest) = line.split_once(" (").expect("path (");
    let size = rest.split_once(" bytes").expect("bytes").0.parse().unwrap();
    let removed = rest
        .rsplit_once("; ")
        .and_then(|(_, tail)| tail.strip_suffix(" old backup(s) removed"))
        .expect("removed count")
        .parse()
        .unwrap();
    (PathBuf::from(path), size, removed)
}

#[tokio::test(flavor = "multi_thread")]
async fn backups_are_taken_while_serving_rotated_and_restore_the_archive() {
    let backup_dir = tempdir("backups");
    let backup_dir_text = backup_dir.to_str().unwrap();
    let (relay, mut server) = start_connected(
        RelayConfig::default(),
        &[
            "--backup-dir",
            backup_dir_text,
            "--backup-every-secs",
            "1",
            "--backup-keep",
            "2",
        ],
    )
    .await;

    for revision in 1..=3 {
        relay
            .push("sc_eew", sc_frame("202608281313", revision, 5.0).as_bytes())
            .await;
    }
    relay
        .push("cq_eew", cq_frame("CQ20260910", 1).as_bytes())
        .await;
    eventually(20, "four versions archived", || async {
        (get_json(&server.url("/status")).await["archive"]["versions"] == 4).then_some(())
    })
    .await;

    // A backup already listed, or in progress now, may predate those commits. The service takes one backup
    // at a time, so the second one to appear from here on was started after they were committed.
    let mut seen: HashSet<String> = backup_names(&backup_dir).into_iter().collect();
    for nth in ["first", "second"] {
        let last = eventually(30, &format!("the {nth} new periodic backup"), || async {
            let last = backups_status(&server).await["last"].clone();
            let path = last["path"].as_str()?.to_string();
            (!seen.contains(&path)).then_some(last)
        })
        .await;
        seen.insert(last["path"].as_str().unwrap().to_string());
        assert!(last["sizeBytes"].as_u64().unwrap() > 0, "{last}");
        let created_at = last["createdAt"].as_str().unwrap();
        assert!(
            created_at.ends_with('Z') && created_at.len() == "2026-08-28T05:13:56.000Z".len(),
            "{last}"
        );
    }
    let status = backups_status(&server).await;
    // Names, not where they are on the server.
    assert_eq!(
        status["directory"],
        backup_dir.file_name().unwrap().to_str().unwrap()
    );
    let last = status["last"]["path"].as_str().unwrap();
    assert!(
        !last.contains('/') && backup_dir.join(last).is_file(),
        "{status}"
    );
    assert_eq!(status["everySeconds"], 1);
    assert_eq!(status["keep"], 2);
    assert!(status["count"].as_u64().unwrap() >= 1, "{status}");
    assert_eq!(
        status["note"],
        "backups are kept on the same server; they are not off-site disaster recovery"
    );

    // On demand, while the service runs and takes its own.
    let output = run_backup(&server.db_path, &backup_dir, "2");
    let (path, size, _removed) = summary(&output);
    assert_eq!(path.parent(), Some(backup_dir.as_path()));
    let name = path.file_name().unwrap().to_str().unwrap();
    assert!(
        name.starts_with("osds-") && name.ends_with(".db"),
        "backup name {name}"
    );
    assert_eq!(std::fs::metadata(&path).unwrap().len(), size);

    // What the service serves, to compare with the restored copy.
    let original = all_reports(&server).await;
    assert_eq!(original.len(), 4);
    let mut original_raw = Vec::new();
    for report in &original {
        original_raw.push(raw(&server, &report["deliveryId"]).await);
    }

    // Rotation: once the service has stopped, at most two backups remain and no temporary file.
    server.stop().await;
    let remaining = backup_names(&backup_dir);
    assert!(
        (1..=2).contains(&remaining.len()),
        "rotation keeps at most 2: {remaining:?}"
    );
    assert_eq!(
        entries(&backup_dir),
        remaining,
        "only backups in the directory"
    );

    // Restore the newest backup as the database of a second service.
    let newest = newest_backup(&backup_dir);
    let restore_dir = tempdir("restored");
    std::fs::copy(&newest, restore_dir.join("osds.db")).unwrap();
    let restored_backups = restore_dir.join("backups");
    let restored_server = start_server_in(
        restore_dir,
        "ws://127.0.0.1:9",
        &[
            "--no-ingest",
            "--backup-every-secs",
            "0",
            "--backup-dir",
            restored_backups.to_str().unwrap(),
        ],
    );
    let restored = all_reports(&restored_server).await;
    // Every backup here was started after the four versions were committed.
    assert_eq!(
        restored.len(),
        original.len(),
        "restored from {}",
        newest.display()
    );
    assert_eq!(restored, original[..restored.len()]);
    for (report, bytes) in restored.iter().zip(&original_raw) {
        assert_eq!(&raw(&restored_server, &report["deliveryId"]).await, bytes);
    }
    let status = backups_status(&restored_server).await;
    assert_eq!(status["everySeconds"], Value::Null);
    assert_eq!(status["last"], Value::Null);
    assert_eq!(status["count"], 0);

    // Rotation on demand, with nothing else writing: exactly `keep` backups remain.
    let before = backup_names(&backup_dir).len();
    let (path, _, removed) = summary(&run_backup(&server.db_path, &backup_dir, "1"));
    assert_eq!(removed, before);
    assert_eq!(
        backup_names(&backup_dir),
        [path.file_name().unwrap().to_str().unwrap()]
    );
}

/// The newest backup in `dir`: by time in the name, then by counter suffix.
fn newest_backup(dir: &Path) -> PathBuf {
    let key = |name: &str| {
        let rest = &name["osds-".len()..name.len() - ".db".len()];
        let (stamp, counter) = rest.split_once('-').unwrap_or((rest, "0"));
        (stamp.to_string(), counter.parse::<u64>().unwrap())
    };
    let newest = backup_names(dir)
        .into_iter()
        .max_by_key(|name| key(name))
        .expect("a backup");
    dir.join(newest)
}

#[test]
fn a_missing_database_is_refused_not_created() {
    let dir = tempdir("backup-missing");
    let db_path = dir.join("missing.db");
    let backup_dir = dir.join("backups");
    let output = run_backup(&db_path, &backup_dir, "7");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("does not exist"), "stderr: {stderr}");
    assert!(!db_path.exists(), "no database was created");
    assert!(!backup_dir.exists(), "no backup directory was created");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_clean_stop_leaves_every_report_in_the_database_file_alone() {
    let (relay, mut server) = start_connected(RelayConfig::default(), &[]).await;
    for revision in 1..=3 {
        relay
            .push("sc_eew", sc_frame("202608281314", revision, 5.0).as_bytes())
            .await;
    }
    eventually(20, "three versions archived", || async {
        (get_json(&server.url("/status")).await["archive"]["versions"] == 3).then_some(())
    })
    .await;
    let served = all_reports(&server).await;
    server.stop().await;

    // An orderly stop: the last line says so, and nothing was worth a warning.
    assert_eq!(
        server.stdout().last().map(String::as_str),
        Some("osds: stopped"),
        "stdout: {:?}",
        server.stdout()
    );
    let log = server.log();
    assert!(
        !log.contains("WARN") && !log.contains("ERROR"),
        "an orderly stop logged a warning or an error:\n{log}"
    );

    // The database file copied alone (no -wal, no -shm) serves every report.
    let copy = tempdir("clean-stop-copy");
    std::fs::copy(&server.db_path, copy.join("osds.db")).unwrap();
    let reopened = start_server_in(copy.clone(), "ws://127.0.0.1:9", &["--no-ingest"]);
    assert_eq!(all_reports(&reopened).await, served);
    drop(reopened);
    let _ = std::fs::remove_dir_all(copy);
}

/// `osds restore BACKUP --database-url URL`.
fn run_restore(backup: &Path, db_path: &Path) -> std::process::Output {
    osds()
        .arg("restore")
        .arg(backup)
        .arg("--database-url")
        .arg(format!("sqlite://{}", db_path.display()))
        .output()
        .expect("run osds restore")
}

/// The status and JSON body of a GET.
async fn get(server: &Server, path: &str) -> (u16, Value) {
    let response = reqwest::get(server.url(path)).await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_restore_never_reuses_a_cursor_and_refuses_cursors_of_the_replaced_archive() {
    let (relay, mut server) = start_connected(RelayConfig::default(), &[]).await;
    let push = |event: &'static str, revision: i64| {
        let relay = &relay;
        async move {
            relay
                .push("cq_eew", cq_frame(event, revision).as_bytes())
                .await
        }
    };
    let versions = |n: i64| {
        let server = &server;
        async move {
            eventually(20, &format!("{n} versions archived"), || async {
                (get_json(&server.url("/status")).await["archive"]["versions"] == n).then_some(())
            })
            .await
        }
    };
    for revision in 1..=3 {
        push("CQ20260101", revision).await;
    }
    versions(3).await;
    let old_archive = get_json(&server.url("/status")).await["archiveId"].clone();
    let backup_dir = tempdir("restore-backups");
    let (backup, _, _) = summary(&run_backup(&server.db_path, &backup_dir, "1"));

    // After the backup the old archive hands out ids 4 and 5; a consumer keeps cursor 5.
    for revision in 4..=5 {
        push("CQ20260101", revision).await;
    }
    versions(5).await;
    let cursor = all_reports(&server).await.last().unwrap()["id"]
        .as_i64()
        .unwrap();
    assert_eq!(cursor, 5);

    // Not under a running service.
    let refused = run_restore(&backup, &server.db_path);
    assert!(!refused.status.success());
    let message = String::from_utf8_lossy(&refused.stderr);
    assert!(message.contains("osds serve is running"), "{message}");

    server.stop().await;
    let restored = run_restore(&backup, &server.db_path);
    let stdout = String::from_utf8_lossy(&restored.stdout);
    assert!(
        restored.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&restored.stderr)
    );
    assert!(stdout.contains("new report ids start after 5"), "{stdout}");

    let server = start_server_in(server.into_dir(), &relay.url(), &[]).removing_dir();
    let status = eventually(20, "every channel connected again", || async {
        let status = get_json(&server.url("/status")).await;
        (status["healthy"] == true).then_some(status)
    })
    .await;
    assert_ne!(
        status["archiveId"], old_archive,
        "a restore is a new archive"
    );
    assert_eq!(status["archive"]["versions"], 3, "what the backup held");
    assert_eq!(status["archive"]["highWater"], 5, "ids continue above 5");

    // New reports after the restore: the consumer resuming from its cursor gets every one of them.
    for revision in 6..=7 {
        push("CQ20260102", revision).await;
    }
    eventually(20, "two new versions", || async {
        (get_json(&server.url("/status")).await["archive"]["versions"] == 5).then_some(())
    })
    .await;
    let (status, page) = get(&server, &format!("/reports?after={cursor}")).await;
    assert_eq!(status, 200);
    let ids = page_ids(&page);
    assert_eq!(ids, [6, 7], "the new reports, under ids never used before");
    assert_eq!(
        page["archiveId"],
        get_json(&server.url("/status")).await["archiveId"]
    );
    let mut sse =
        support::live::SseClient::connect(&server.url(&format!("/stream?after={cursor}")), None)
            .await
            .unwrap();
    let ready = sse.next_event().await.unwrap().json();
    assert_eq!(ready["archiveId"], page["archiveId"]);

    // A cursor beyond anything this archive handed out is refused, never silently accepted.
    for path in ["/reports?after=999", "/stream?after=999", "/ws?after=999"] {
        let (status, body) = get(&server, path).await;
        assert_eq!(status, 409, "GET {path}: {body}");
        assert_eq!(body["code"], "cursor_ahead_of_archive", "GET {path}");
    }
}
