//! Rendered report versions in blocks of consecutive ids, kept under a byte budget; the least recently used
//! block goes first. A report version never changes once committed, so a block that lies wholly at or below the
//! commit horizon stays valid forever; the block the horizon lies in is never cached (the caller reads it).

use crate::report_item::ReportItem;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// Ids per block: a 1,000-report page touches at most two.
pub const BLOCK_IDS: i64 = 1024;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn block(ids: std::ops::Range<i64>) -> Block {
        Block::new(
            ids.map(|id| ReportItem {
                id,
                json: format!("{{\"id\":{id}}}").into(),
                digest: [0; 8],
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
