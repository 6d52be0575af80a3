//! Rendered report versions in blocks of consecutive ids, kept under a byte budget; the least recently used
//! block goes first. A report version never changes once committed, so a block that lies wholly at or below the
//! commit horizon stays valid forever; the block the horizon lies in is never cached (the caller reads it).

use crate::reports::item::{ReportItem, ReportPage};
use crate::sources::SourceFilter;
use osds_store::Store;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// Ids per block: small, so a page read cold reads little more than itself (a 1,000-report page touches five
/// blocks at most, 1,280 ids; with blocks of 1,024 it read up to 2,048).
pub const BLOCK_IDS: i64 = 256;
/// The budget when none is configured.
pub const DEFAULT_BUDGET_BYTES: usize = 256 << 20;
/// What one cached item costs besides its text (id, digest, the `Arc`'s counters and pointer).
const ITEM_OVERHEAD_BYTES: usize = 48;

pub struct Block {
    /// The block's reports in id order (ids may be missing; none is after the block's end).
    pub items: Vec<ReportItem>,
    bytes: usize,
}

impl Block {
    pub fn new(items: Vec<ReportItem>) -> Block {
        let bytes = items
            .iter()
            .map(|item| item.json.len() + ITEM_OVERHEAD_BYTES)
            .sum();
        Block { items, bytes }
    }
}

#[derive(Default)]
struct Lru {
    /// Block number → the block and when it was last used.
    blocks: HashMap<i64, (Arc<Block>, u64)>,
    clock: u64,
    bytes: usize,
}

pub struct ReportCache {
    budget: AtomicUsize,
    lru: Mutex<Lru>,
}

impl Default for ReportCache {
    fn default() -> Self {
        ReportCache::new(DEFAULT_BUDGET_BYTES)
    }
}

impl ReportCache {
    pub fn new(budget_bytes: usize) -> ReportCache {
        ReportCache {
            budget: AtomicUsize::new(budget_bytes),
            lru: Mutex::new(Lru::default()),
        }
    }

    /// Changes the budget (0 turns caching off), dropping blocks at once when it shrank.
    pub fn set_budget(&self, bytes: usize) {
        self.budget.store(bytes, Ordering::Relaxed);
        self.evict(&mut self.lock());
    }

    /// Bytes held now.
    pub fn bytes(&self) -> usize {
        self.lock().bytes
    }

    /// The cached block `number`, marked as just used.
    pub fn get(&self, number: i64) -> Option<Arc<Block>> {
        let mut lru = self.lock();
        lru.clock += 1;
        let clock = lru.clock;
        let (block, used) = lru.blocks.get_mut(&number)?;
        *used = clock;
        Some(block.clone())
    }

    /// Keeps `block` as block `number` (unless it alone exceeds the budget) and returns it.
    pub fn insert(&self, number: i64, block: Block) -> Arc<Block> {
        let block = Arc::new(block);
        if block.bytes > self.budget.load(Ordering::Relaxed) {
            return block;
        }
        let mut lru = self.lock();
        lru.clock += 1;
        let clock = lru.clock;
        if let Some((old, _)) = lru.blocks.insert(number, (block.clone(), clock)) {
            lru.bytes -= old.bytes;
        }
        lru.bytes += block.bytes;
        self.evict(&mut lru);
        block
    }

    /// Report versions with `id > after`, in id order, rendered. Blocks wholly below the horizon come from the
    /// cache (reading and rendering them once); the horizon's own block is read each time.
    pub async fn reports_after(
        &self,
        store: &Store,
        after: i64,
        limit: i64,
    ) -> anyhow::Result<ReportPage> {
        // Read the horizon first: every id at or below it is committed, so the page never skips one.
        let high_water = store.high_water().await?;
        let wanted = usize::try_from(limit).unwrap_or(0);
        let mut items: Vec<ReportItem> = Vec::with_capacity(wanted.min(1000));
        let mut cursor = after;
        while items.len() < wanted && cursor < high_water {
            let number = (cursor + 1).div_euclid(BLOCK_IDS);
            let block_end = (number + 1) * BLOCK_IDS - 1;
            if block_end > high_water {
                let rest = (wanted - items.len()) as i64;
                items.extend(rendered_between(store, cursor, high_water, rest).await?);
                break;
            }
            let block = match self.get(number) {
                Some(block) => block,
                None => {
                    let rows =
                        rendered_between(store, number * BLOCK_IDS - 1, block_end, BLOCK_IDS)
                            .await?;
                    self.insert(number, Block::new(rows))
                }
            };
            let start = block.items.partition_point(|item| item.id.0 <= cursor);
            let rest = wanted - items.len();
            items.extend(block.items[start..].iter().take(rest).cloned());
            cursor = block_end;
        }
        let next_cursor = items.last().map_or(after, |item| item.id.0);
        Ok(ReportPage {
            items,
            next_cursor,
            high_water,
            archive_id: store.archive_id().to_string(),
        })
    }

    fn evict(&self, lru: &mut Lru) {
        let budget = self.budget.load(Ordering::Relaxed);
        while lru.bytes > budget {
            let Some(oldest) = lru
                .blocks
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(number, _)| *number)
            else {
                break;
            };
            if let Some((gone, _)) = lru.blocks.remove(&oldest) {
                lru.bytes -= gone.bytes;
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Lru> {
        self.lru.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Reports with `after < id <= upto` (a committed horizon), at most `limit`, as served.
pub async fn rendered_between(
    store: &Store,
    after: i64,
    upto: i64,
    limit: i64,
) -> anyhow::Result<Vec<ReportItem>> {
    let rows = store.served_between(after, upto, limit).await?;
    Ok(rows.into_iter().map(ReportItem::from).collect())
}

/// A `/reports` page of the channels of `filter`: read by each channel's index (not through the cache of every
/// channel's blocks) and merged in id order. A page that is not full has looked at every id up to the horizon,
/// so its `next_cursor` is the horizon: a consumer of a quiet channel does not read the same ids again.
pub async fn source_reports_after(
    store: &Store,
    after: i64,
    limit: i64,
    filter: &SourceFilter,
) -> anyhow::Result<ReportPage> {
    let high_water = store.high_water().await?;
    let mut rows = Vec::new();
    for source in filter.sources() {
        rows.extend(
            store
                .source_served_between(source, after, high_water, limit)
                .await?,
        );
    }
    rows.sort_unstable_by_key(|row| row.id);
    rows.truncate(usize::try_from(limit).unwrap_or(0));
    let items: Vec<ReportItem> = rows.into_iter().map(ReportItem::from).collect();
    let next_cursor = match items.last() {
        Some(last) if items.len() as i64 == limit => last.id.0,
        _ => high_water.max(after),
    };
    Ok(ReportPage {
        items,
        next_cursor,
        high_water,
        archive_id: store.archive_id().to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(ids: std::ops::Range<i64>) -> Block {
        Block::new(
            ids.map(|id| ReportItem {
                id: osds_store::ReportId(id),
                source: "sc".into(),
                json: format!("{{\"id\":{id}}}").into(),
            })
            .collect(),
        )
    }

    #[test]
    fn the_least_recently_used_block_goes_first_when_over_budget() {
        let one = block(10..20).bytes;
        let cache = ReportCache::new(one * 2);
        cache.insert(0, block(0..10));
        cache.insert(1, block(10..20));
        assert!(cache.get(0).is_some());
        cache.insert(2, block(20..30));
        assert!(
            cache.get(1).is_none(),
            "block 1 was the least recently used"
        );
        assert!(cache.get(0).is_some() && cache.get(2).is_some());
        assert!(cache.bytes() <= one * 2);
        cache.set_budget(0);
        assert_eq!(cache.bytes(), 0);
        assert!(cache.get(0).is_none());
    }
}
