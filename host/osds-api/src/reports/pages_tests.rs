//! `ReportCache::reports_after` across cache blocks: every page equals the same range read straight from the archive,
//! cold and warm, with a budget that holds everything and one that holds a single block.

use crate::reports::item::ReportItem;
use crate::reports::pages::{BLOCK_IDS, ReportCache, rendered_between};
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
