//! `ReportCache::reports_after` across cache blocks: every page equals the same range read straight from the archive,
//! cold and warm, with a budget that holds everything and one that holds a single block.

use crate::reports::item::ReportItem;
use crate::reports::pages::{BLOCK_IDS, ReportCache, rendered_between};
use crate::wire::Rendered;
use osds_store::test_archive::archive;

const VERSIONS: i64 = 5 * BLOCK_IDS + 100;

fn ids_and_text(items: &[ReportItem]) -> Vec<(i64, String)> {
    items
        .iter()
        .map(|item| (item.id.0, item.json.to_string()))
        .collect()
}

#[tokio::test]
async fn pages_equal_the_archive_across_blocks_cold_and_warm() {
    let (store, _writer, dir) = archive("report-pages", VERSIONS).await;
    let high_water = store.high_water().await.unwrap();
    assert_eq!(high_water, VERSIONS);
    let cache = ReportCache::default();
    let one_block = cache.reports_after(&store, 0, BLOCK_IDS - 1).await.unwrap();
    let one_block_bytes = cache.bytes();
    assert_eq!(
        one_block.items.len() as i64,
        BLOCK_IDS - 1,
        "block 0 holds ids 1..BLOCK_IDS (no id 0)"
    );
    for budget in [usize::MAX, one_block_bytes, 0] {
        cache.set_budget(0);
        cache.set_budget(budget);
        for pass in ["cold", "warm"] {
            for after in [
                0,
                1,
                BLOCK_IDS - 2,
                BLOCK_IDS - 1,
                BLOCK_IDS,
                BLOCK_IDS * 3 / 2,
                2 * BLOCK_IDS - 1,
                2 * BLOCK_IDS,
                4 * BLOCK_IDS + 1,
                VERSIONS - 1,
                VERSIONS,
                VERSIONS + 5,
            ] {
                for limit in [1, 7, 1000] {
                    let page = cache.reports_after(&store, after, limit).await.unwrap();
                    let expected = rendered_between(&store, after, high_water, limit)
                        .await
                        .unwrap();
                    assert_eq!(
                        ids_and_text(&page.items),
                        ids_and_text(&expected),
                        "after {after}, limit {limit}, budget {budget}, {pass}"
                    );
                    let last = expected.last().map_or(after, |item| item.id.0);
                    assert_eq!(page.next_cursor, last);
                    assert_eq!(page.high_water, high_water);
                }
            }
            assert!(cache.bytes() <= budget);
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// What live consumers replay equals the archive's own range, framed, across blocks and into the horizon's block.
#[tokio::test]
async fn live_pages_equal_the_archive_and_are_framed_from_it() {
    let (store, _writer, dir) = archive("live-pages", VERSIONS).await;
    let cache = ReportCache::default();
    // A horizon inside a block: that block is read for the caller, the full ones before it are shared.
    let horizon = 3 * BLOCK_IDS + 17;
    for after in [
        0,
        1,
        BLOCK_IDS - 1,
        BLOCK_IDS,
        3 * BLOCK_IDS - 1,
        3 * BLOCK_IDS,
        horizon - 1,
        horizon,
    ] {
        for limit in [1, 10, 1000] {
            let page = cache
                .live_after(&store, after, horizon, limit)
                .await
                .unwrap();
            let expected = rendered_between(&store, after, horizon, limit as i64)
                .await
                .unwrap();
            let ids: Vec<i64> = page.reports.iter().map(|r| r.id).collect();
            let expected_ids: Vec<i64> = expected.iter().map(|item| item.id.0).collect();
            assert_eq!(ids, expected_ids, "after {after}, limit {limit}");
            for (report, item) in page.reports.iter().zip(&expected) {
                let framed = Rendered::from(item.clone());
                assert_eq!(report.ws_text, framed.ws_text);
                assert_eq!(report.sse_event, framed.sse_event);
            }
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// A storm of consumers replaying the same range at once reads each block from the archive once, not once each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumers_replaying_one_range_at_once_read_the_archive_once() {
    let (store, _writer, dir) = archive("live-storm", VERSIONS).await;
    let cache = std::sync::Arc::new(ReportCache::default());
    let horizon = 2 * BLOCK_IDS - 1;
    let mut consumers = tokio::task::JoinSet::new();
    for _ in 0..200 {
        let (cache, store) = (cache.clone(), store.clone());
        consumers.spawn(async move {
            // Each replays block 1 in batches of 10, as a paced backlog does.
            let mut cursor = BLOCK_IDS - 1;
            let mut reads = 0;
            let mut seen = Vec::new();
            while cursor < horizon {
                let page = cache.live_after(&store, cursor, horizon, 10).await.unwrap();
                reads += page.archive_reads;
                seen.extend(page.reports.iter().map(|r| r.id));
                cursor = page.reports.last().unwrap().id;
            }
            (reads, seen)
        });
    }
    let mut total_reads = 0;
    while let Some(done) = consumers.join_next().await {
        let (reads, seen) = done.unwrap();
        total_reads += reads;
        assert_eq!(
            seen,
            (BLOCK_IDS..=horizon).collect::<Vec<_>>(),
            "in order, no gap, no duplicate"
        );
    }
    assert_eq!(total_reads, 1, "one read of block 1 for 200 consumers");
    let _ = std::fs::remove_dir_all(dir);
}
