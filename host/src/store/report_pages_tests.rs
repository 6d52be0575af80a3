//! `Store::reports_after` across cache blocks: every page equals the same range read straight from the archive,
//! cold and warm, with a budget that holds everything and one that holds a single block.

use super::report_cache::BLOCK_IDS;
use super::{Incoming, ReportItem, Store, UnitKind, UnitRecord, open};
use wolfx_core::Report;

const VERSIONS: i64 = 2 * BLOCK_IDS + 500;

async fn archive() -> (Store, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!(
        "osds-report-pages-{}-{}",
        std::process::id(),
        crate::time::now_ms()
    ));
    let (store, mut writer) = open(&format!("sqlite://{}/osds.db", dir.display()))
        .await
        .unwrap();
    let session = writer
        .open_session("/cq_eew", "channel", "ws://test.invalid/cq_eew")
        .await
        .unwrap();
    let frames: Vec<Incoming> = (1..=VERSIONS)
        .map(|n| {
            let event = n / 3;
            let report = Report {
                event_id: format!("cq:{event}"),
                upstream_event_id: event.to_string(),
                revision: n % 3 + 1,
                issued_at: Some(format!("2024-01-01T00:00:{:02}Z", n % 60)),
                origin_at: None,
                epicenter: Some(format!("epicentre {n}")),
                latitude: Some(30.0 + n as f64 / 1000.0),
                longitude: Some(104.5),
                depth_km: None,
                magnitude: Some(4.0),
                max_intensity: None,
                is_final: false,
                is_cancelled: false,
                is_test: false,
            };
            Incoming {
                session_id: session,
                received_at: crate::time::now_rfc3339(),
                frame: format!("{{\"type\":\"cq_eew\",\"n\":{n}}}").into_bytes(),
                marker: "websocket-push",
                units: vec![UnitRecord {
                    unit_index: 0,
                    type_tag: Some("cq_eew".into()),
                    kind: UnitKind::Report {
                        source: "cq".into(),
                        identity: format!("{n:064}"),
                        report: Box::new(report),
                        decoder_name: "test".into(),
                        decoder_sha256: "0".repeat(64),
                    },
                }],
            }
        })
        .collect();
    for batch in frames.chunks(500) {
        writer.ingest(batch).await.unwrap();
    }
    (store, dir)
}

fn ids_and_text(items: &[ReportItem]) -> Vec<(i64, String)> {
    items
        .iter()
        .map(|item| (item.id, item.json.to_string()))
        .collect()
}

#[tokio::test]
async fn pages_equal_the_archive_across_blocks_cold_and_warm() {
    let (store, dir) = archive().await;
    let high_water = store.high_water().await.unwrap();
    assert_eq!(high_water, VERSIONS);
    let one_block = store.reports_after(0, BLOCK_IDS - 1).await.unwrap();
    let one_block_bytes = store.report_cache().bytes();
    assert_eq!(
        one_block.items.len() as i64,
        BLOCK_IDS - 1,
        "block 0 holds ids 1..=1023 (no id 0)"
    );
    for budget in [usize::MAX, one_block_bytes, 0] {
        store.report_cache().set_budget(0);
        store.report_cache().set_budget(budget);
        for pass in ["cold", "warm"] {
            for after in [
                0,
                1,
                1022,
                1023,
                1024,
                1500,
                2047,
                2048,
                2500,
                VERSIONS - 1,
                VERSIONS,
                VERSIONS + 5,
            ] {
                for limit in [1, 7, 1000] {
                    let page = store.reports_after(after, limit).await.unwrap();
                    let expected = store
                        .reports_between(after, high_water, limit)
                        .await
                        .unwrap();
                    assert_eq!(
                        ids_and_text(&page.items),
                        ids_and_text(&expected),
                        "after {after}, limit {limit}, budget {budget}, {pass}"
                    );
                    let last = expected.last().map_or(after, |item| item.id);
                    assert_eq!(page.next_cursor, last);
                    assert_eq!(page.high_water, high_water);
                }
            }
            assert!(store.report_cache().bytes() <= budget);
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}
