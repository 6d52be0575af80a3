//! `osds decode` through the real decoder components, pinned by snapshots of every fixture.

mod support;

use serde_json::Value;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::OnceLock;
use support::{json_lines, osds, tests_dir, type_tag_of_channel};

/// Every fixture decoded by one `osds decode --type <channel's tag>` run per channel folder.
fn decoded_fixtures() -> &'static HashMap<PathBuf, Value> {
    static DECODED: OnceLock<HashMap<PathBuf, Value>> = OnceLock::new();
    DECODED.get_or_init(|| {
        let mut all = HashMap::new();
        for channel in ["cea", "sc", "fj", "cq"] {
            let dir = tests_dir().join("fixtures").join(channel);
            let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
            files.sort();
            assert!(
                files.len() >= 8,
                "{channel} has only {} fixtures",
                files.len()
            );
            let output = osds()
                .arg("decode")
                .arg("--type")
                .arg(type_tag_of_channel(channel))
                .args(&files)
                .output()
                .unwrap();
            let lines = json_lines(&output);
            assert_eq!(
                lines.len(),
                files.len(),
                "one line per file; stderr: {}",
                String::from_utf8_lossy(&output.stderr)
            );
            for (file, line) in files.into_iter().zip(lines) {
                all.insert(file.canonicalize().unwrap(), line);
            }
        }
        all
    })
}

#[test]
fn every_fixture_decodes_as_snapshotted() {
    insta::glob!("fixtures/*/*.json", |path| {
        let decoded = &decoded_fixtures()[&path.canonicalize().unwrap()];
        insta::assert_json_snapshot!(decoded);
    });
}

#[test]
fn real_frames_map_to_the_spec_fields() {
    let sc = &decoded_fixtures()[&tests_dir()
        .join("fixtures/sc/real-report2-depth-0.0.json")
        .canonicalize()
        .unwrap()];
    assert_eq!(sc["source"], "sc");
    assert_eq!(sc["eventId"], "202608281313.0001");
    assert_eq!(sc["upstreamEventId"], "202608281313.0001_2");
    assert_eq!(sc["revision"], 2);
    assert_eq!(sc["issuedAt"], "2026-08-28T05:13:56Z");
    assert_eq!(sc["originAt"], "2026-08-28T05:13:34Z");
    assert_eq!(
        sc["depthKm"],
        Value::Null,
        "an sc depth of 0 is unknown, never 0 km"
    );
    assert_eq!(sc["magnitude"], 5.2);
    let fj = &decoded_fixtures()[&tests_dir()
        .join("fixtures/fj/real-report1-no-id.json")
        .canonicalize()
        .unwrap()];
    assert_eq!(fj["maxIntensity"], Value::Null);
    assert_eq!(fj["depthKm"], Value::Null);
    assert_eq!(fj["isFinal"], false);
}

#[test]
fn exit_status_says_whether_every_file_decoded() {
    let fixtures = tests_dir().join("fixtures");
    let good = osds()
        .arg("decode")
        .arg(fixtures.join("sc/depth-null.json"))
        .arg(fixtures.join("cea/real-heartbeat.json"))
        .output()
        .unwrap();
    assert!(
        good.status.success(),
        "{}",
        String::from_utf8_lossy(&good.stderr)
    );
    let bad = osds()
        .arg("decode")
        .arg(fixtures.join("sc/depth-null.json"))
        .arg(fixtures.join("cea/truncated.json"))
        .output()
        .unwrap();
    assert!(!bad.status.success());
    let lines = json_lines(&bad);
    assert_eq!(lines[1]["kind"], "malformed");
}

#[test]
fn frames_route_by_their_own_type_without_a_flag() {
    let fixtures = tests_dir().join("fixtures");
    let output = osds()
        .arg("decode")
        .arg(fixtures.join("cq/typical.json"))
        .arg(fixtures.join("sc/other-channel-type.json"))
        .output()
        .unwrap();
    let lines = json_lines(&output);
    assert_eq!(lines[0]["source"], "cq");
    assert_eq!(
        lines[1]["kind"], "unrouted",
        "no archived channel claims jma_eew"
    );
    assert!(!output.status.success());
}
