//! A property of ingestion: whatever the relay sends, the same frames, decoded by the real decoders and
//! archived by the real archive task, give the same archive on SQLite and on PostgreSQL, every frame's bytes
//! are kept, and the writes never stop. The frames are generated (proptest's strategies, a fixed seed, so a
//! failure repeats) from real frames of every channel: NUL characters, lone surrogates, control and
//! right-to-left characters, ids of thousands of bytes, numbers out of range, bytes that are not UTF-8, raw NULs,
//! truncations, JSON nested thousands deep, arrays of all of these.

use super::pipeline;
use osds_runtime::{DecoderSet, Limits, Runtime, units};
use osds_store::test_postgres::Cluster;
use osds_store::{Incoming, WriterTask};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use sha2::{Digest, Sha256};
use sqlx::{Connection, PgConnection, SqliteConnection};
use std::sync::Arc;

/// Real frames of each channel (the decoders' fixtures).
const FRAMES: [&str; 4] = [
    include_str!("../../../../tests/fixtures/cq/typical.json"),
    include_str!("../../../../tests/fixtures/sc/depth-0-integer.json"),
    include_str!("../../../../tests/fixtures/fj/final-report.json"),
    include_str!("../../../../tests/fixtures/cea/depth-zero-kept.json"),
];

fn hostile_text() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("\u{0}".to_string()),
        "[a-z]{0,3}\u{0}[a-z]{0,3}",
        "[\\x00-\\x1f]{1,5}",
        "\\PC{0,12}",
        Just("\u{202e}é\u{FEFF}😀".to_string()),
        (1025usize..6000).prop_map(|n| "9".repeat(n)),
    ]
}

/// One frame's bytes: a real frame with one field made hostile, or its bytes broken.
fn hostile_frame() -> impl Strategy<Value = Vec<u8>> {
    let base = (0..FRAMES.len()).prop_map(|i| FRAMES[i].trim().to_string());
    let fields = prop_oneof![
        Just("EventID"),
        Just("HypoCenter"),
        Just("OriginTime"),
        Just("ReportTime"),
        Just("type"),
        Just("ID"),
    ];
    let numbers = prop_oneof![
        Just("1e400"),
        Just("-0"),
        Just("123456789012345678901234567890"),
        Just("NaN"),
        Just("\"\\ud800\""),
        Just("\"\\udc00x\""),
        Just("{}"),
    ];
    let number_fields = prop_oneof![
        Just("Latitude"),
        Just("Magnitude"),
        Just("Magunitude"),
        Just("Depth"),
        Just("ReportNum"),
        Just("EventID"),
    ];
    prop_oneof![
        // A text field holding hostile text (valid JSON: NUL and controls escaped).
        (base.clone(), fields, hostile_text()).prop_map(|(frame, field, text)| {
            let mut value: serde_json::Value = serde_json::from_str(&frame).unwrap();
            value[field] = serde_json::Value::String(text);
            serde_json::to_vec(&value).unwrap()
        }),
        // A field holding a number or escape no decoder can take as it is.
        (base.clone(), number_fields, numbers).prop_map(|(frame, field, raw)| {
            let mut value: serde_json::Value = serde_json::from_str(&frame).unwrap();
            value[field] = serde_json::Value::String("@".into());
            serde_json::to_string(&value)
                .unwrap()
                .replace("\"@\"", raw)
                .into_bytes()
        }),
        // Bytes that are not UTF-8, or a raw NUL, somewhere in the frame.
        (
            base.clone(),
            any::<prop::sample::Index>(),
            prop_oneof![
                Just(vec![0xffu8]),
                Just(vec![0xc0, 0x80]),
                Just(vec![0xed, 0xa0, 0x80]),
                Just(vec![0]),
            ]
        )
            .prop_map(|(frame, at, bytes)| {
                let mut frame = frame.into_bytes();
                let at = at.index(frame.len() + 1);
                frame.splice(at..at, bytes);
                frame
            }),
        // Cut short.
        (base.clone(), any::<prop::sample::Index>()).prop_map(|(frame, at)| {
            let frame = frame.into_bytes();
            frame[..at.index(frame.len())].to_vec()
        }),
        // Nested deep.
        (base.clone(), 100usize..5000).prop_map(|(frame, depth)| {
            format!("{}{frame}{}", "[".repeat(depth), "]".repeat(depth)).into_bytes()
        }),
        // The same frame (a duplicate, or a version again).
        base.clone().prop_map(String::into_bytes),
    ]
}

/// A frame of one unit, or an array of several (some hostile).
fn frames() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => hostile_frame(),
        1 => prop::collection::vec(hostile_frame(), 2..5).prop_map(|units| {
            let mut out = b"[".to_vec();
            out.extend(units.join(&b","[..]));
            out.push(b']');
            out
        }),
    ]
}

/// The generated frames, the same on every run.
fn corpus(count: usize) -> Vec<Vec<u8>> {
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::deterministic_rng(RngAlgorithm::ChaCha),
    );
    let strategy = frames();
    (0..count)
        .map(|_| strategy.new_tree(&mut runner).unwrap().current())
        .collect()
}

/// Each frame as the ingest pipeline hands it to the archive, received on a channel's own socket (every
/// third on `/all_eew`, without a channel).
fn prepared(
    decoders: &osds_runtime::SharedDecoders,
    session: i64,
    frames: &[Vec<u8>],
) -> Vec<Incoming> {
    frames
        .iter()
        .enumerate()
        .map(|(i, frame)| {
            let own = (i % 3 != 0).then_some("cq_eew");
            pipeline::prepare(
                decoders,
                frame.clone(),
                units::split(frame),
                own,
                pipeline::Received {
                    session_id: session,
                    reception: i as i64 + 1,
                    received_at: format!("2026-09-10T10:10:{:02}.{:03}Z", i / 1000 % 60, i % 1000),
                    marker: osds_store::Marker::PrimaryPush,
                },
            )
        })
        .collect()
}

/// Archives `frames` through an archive task on `url` and waits until all are committed.
async fn archive_all(
    url: &str,
    decoders: &osds_runtime::SharedDecoders,
    frames: &[Vec<u8>],
) -> WriterTask {
    let (_, mut writer) = osds_store::open(url).await.unwrap();
    writer.register_ingester("hostile").await.unwrap();
    let task = WriterTask::spawn(writer, osds_store::DEFAULT_QUEUE_BYTES, None, None).unwrap();
    let session = task.open_session(
        "/cq_eew",
        osds_store::SocketRole::Primary,
        "ws://relay.invalid/cq_eew",
    );
    task.session_connected(session);
    for incoming in prepared(decoders, session, frames) {
        task.ingest(incoming);
    }
    task.flush().await;
    task
}

type Text = Option<String>;

/// Reads the same columns from both archives and compares them.
macro_rules! same_rows {
    ($lite:expr, $pg:expr, $row:ty, $sql:expr) => {{
        let lite: Vec<$row> = sqlx::query_as($sql).fetch_all(&mut $lite).await.unwrap();
        let pg: Vec<$row> = sqlx::query_as($sql).fetch_all(&mut $pg).await.unwrap();
        assert_eq!(lite.len(), pg.len(), "{}", $sql);
        for (l, p) in lite.iter().zip(&pg) {
            assert_eq!(l, p, "{}", $sql);
        }
        lite
    }};
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_frames_archive_alike_on_both_databases_and_nothing_stops() {
    let runtime = Runtime::new(Limits::default()).unwrap();
    let decoders: osds_runtime::SharedDecoders = Arc::new(arc_swap::ArcSwap::from_pointee(
        DecoderSet::embedded(&runtime).unwrap(),
    ));
    let frames = corpus(400);

    let dir = std::env::temp_dir().join(format!(
        "osds-hostile-{}-{}",
        std::process::id(),
        osds_time::now_ms()
    ));
    let lite_url = format!("sqlite://{}/osds.db", dir.display());
    let cluster = Cluster::start("hostile");
    let pg_url = cluster.database("osds").await;
    let lite_task = archive_all(&lite_url, &decoders, &frames).await;
    let pg_task = archive_all(&pg_url, &decoders, &frames).await;
    for task in [&lite_task, &pg_task] {
        let health = task.monitor().health();
        assert_eq!(health.failure, None, "the archive writes");
        assert_eq!(health.queued_frames, 0);
        assert!(health.dropped.is_empty(), "{:?}", health.dropped);
    }
    lite_task.close().await.unwrap();
    pg_task.close().await.unwrap();

    let mut lite = SqliteConnection::connect(&format!("{lite_url}?mode=ro"))
        .await
        .unwrap();
    let mut pg = PgConnection::connect(&pg_url).await.unwrap();
    let payloads = same_rows!(
        lite,
        pg,
        (String, Vec<u8>, i64),
        "SELECT sha256, bytes, size FROM raw_payloads ORDER BY sha256"
    );
    for frame in &frames {
        let sha = hex::encode(Sha256::digest(frame));
        assert!(
            payloads
                .iter()
                .any(|(s, bytes, _)| *s == sha && bytes == frame),
            "every frame's bytes are kept"
        );
    }
    let deliveries = same_rows!(
        lite,
        pg,
        (
            i64,
            String,
            String,
            i64,
            Text,
            Text,
            String,
            Option<i64>,
            Text
        ),
        "SELECT id, received_at, raw_sha256, unit_index, type_tag, source, outcome, report_id, event_key \
         FROM deliveries ORDER BY id"
    );
    let units: usize = frames.iter().map(|f| units::split(f).len()).sum();
    assert_eq!(deliveries.len(), units, "one delivery per unit");
    same_rows!(
        lite,
        pg,
        (i64, Text, Text, Text),
        "SELECT id, decoder, error_kind, error_message FROM deliveries ORDER BY id"
    );
    let reports = same_rows!(
        lite,
        pg,
        (i64, String, String, String, i64, String, String, String),
        "SELECT id, event_key, source, identity_sha256, delivery_id, received_at, event_id, upstream_event_id \
         FROM reports ORDER BY id"
    );
    same_rows!(
        lite,
        pg,
        (i64, i64, Text, Text, Text, Option<f64>, String),
        "SELECT id, revision, issued_at, origin_at, epicenter, magnitude, report_json FROM reports ORDER BY id"
    );
    same_rows!(
        lite,
        pg,
        (i64, String, String),
        "SELECT id, source, json FROM report_texts ORDER BY id"
    );
    same_rows!(
        lite,
        pg,
        (
            String,
            String,
            String,
            Text,
            Option<i64>,
            i64,
            String,
            i64,
            i64,
            String
        ),
        "SELECT id, source, source_event_id, origin_at, origin_ms, sort_ms, month, latest_report_id, \
         report_count, upstream_ids FROM events ORDER BY id"
    );
    let ids: Vec<i64> = reports.iter().map(|r| r.0).collect();
    assert_eq!(
        ids,
        (1..=ids.len() as i64).collect::<Vec<_>>(),
        "ids gap-free"
    );
    // The corpus did reach what it is for: versions, unstorable reports, undecodable frames.
    let kinds: std::collections::BTreeSet<Option<String>> =
        sqlx::query_scalar("SELECT DISTINCT error_kind FROM deliveries")
            .fetch_all(&mut pg)
            .await
            .unwrap()
            .into_iter()
            .collect();
    assert!(!reports.is_empty(), "some frames are reports");
    for kind in ["unstorable", "malformed"] {
        assert!(
            kinds.contains(&Some(kind.to_string())),
            "{kind} in {kinds:?}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
