//! Rendered report versions in blocks of consecutive ids, kept under a byte budget; the least recently used
//! block goes first. A report version never changes once committed, so a block that lies wholly at or below the
//! commit horizon stays valid forever; the block the horizon lies in is never cached (the caller reads it).
//!
//! A block missing from the cache is read once however many readers want it at the same moment (a reconnect
//! storm brings thousands of live consumers back with almost the same cursor), and live consumers share each
//! block's reports framed for their sockets, made once per block.

use crate::reports::item::{ReportItem, ReportPage};
use crate::sources::SourceFilter;
use crate::wire::Rendered;
use osds_store::Store;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use tokio::sync::OnceCell;

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
    /// The same reports framed for live sockets, made on a live consumer's first use.
    rendered: OnceLock<Vec<Arc<Rendered>>>,
    /// What the block costs: its texts, and its framed reports once made.
    bytes: AtomicUsize,
}

impl Block {
    pub fn new(items: Vec<ReportItem>) -> Block {
        let bytes = items
            .iter()
            .map(|item| item.json.len() + ITEM_OVERHEAD_BYTES)
            .sum();
        Block {
            items,
            rendered: OnceLock::new(),
            bytes: AtomicUsize::new(bytes),
        }
    }

    fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
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
    /// Blocks being read now, by number: a second reader waits for the first one's read instead of its own.
    loading: Mutex<HashMap<i64, Arc<OnceCell<Arc<Block>>>>>,
}

/// A stretch of what [`ReportCache::walk`] found: part of a cached block, or the horizon's block as read.
enum Piece {
    Block {
        number: i64,
        block: Arc<Block>,
        range: std::ops::Range<usize>,
    },
    Horizon(Vec<ReportItem>),
}

/// What [`ReportCache::live_after`] returns: the reports, and how many archive reads it took to find them.
pub struct LivePage {
    pub reports: Vec<Arc<Rendered>>,
    pub archive_reads: u64,
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
            loading: Mutex::default(),
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
        if block.bytes() > self.budget.load(Ordering::Relaxed) {
            return block;
        }
        let mut lru = self.lock();
        lru.clock += 1;
        let clock = lru.clock;
        if let Some((old, _)) = lru.blocks.insert(number, (block.clone(), clock)) {
            lru.bytes -= old.bytes();
        }
        lru.bytes += block.bytes();
        self.evict(&mut lru);
        block
    }

    /// Block `number` (wholly at or below the commit horizon): from the cache, else read from the archive by
    /// the first reader that wants it while the others wait for that read. Also says whether this call read.
    async fn block(&self, store: &Store, number: i64) -> anyhow::Result<(Arc<Block>, bool)> {
        if let Some(block) = self.get(number) {
            return Ok((block, false));
        }
        let cell = self
            .loading
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(number)
            .or_default()
            .clone();
        let mut read = false;
        let loaded = cell
            .get_or_try_init(|| async {
                read = true;
                // Cached meanwhile by a read that had just finished.
                if let Some(block) = self.get(number) {
                    return Ok(block);
                }
                let first = number * BLOCK_IDS - 1;
                let rows = rendered_between(store, first, first + BLOCK_IDS, BLOCK_IDS).await?;
                Ok::<_, anyhow::Error>(self.insert(number, Block::new(rows)))
            })
            .await
            .cloned();
        if read {
            // Done (or failed, for the next reader to try again): later readers find it in the cache.
            let mut loading = self.loading.lock().unwrap_or_else(PoisonError::into_inner);
            if loading.get(&number).is_some_and(|c| Arc::ptr_eq(c, &cell)) {
                loading.remove(&number);
            }
        }
        Ok((loaded?, read))
    }

    /// A block's reports framed for live sockets, made once per block; their size joins the block's cost.
    fn rendered<'b>(&self, number: i64, block: &'b Arc<Block>) -> &'b [Arc<Rendered>] {
        let mut made = false;
        let rendered = block.rendered.get_or_init(|| {
            made = true;
            block
                .items
                .iter()
                .cloned()
                .map(|item| Arc::new(Rendered::from(item)))
                .collect()
        });
        if made {
            let extra: usize = rendered.iter().map(|r| r.bytes()).sum();
            // Under the lock, so an eviction never takes away more than the cache counted.
            let mut lru = self.lock();
            block.bytes.fetch_add(extra, Ordering::Relaxed);
            if lru
                .blocks
                .get(&number)
                .is_some_and(|(b, _)| Arc::ptr_eq(b, block))
            {
                lru.bytes += extra;
                self.evict(&mut lru);
            }
        }
        rendered
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
        let (pieces, _) = self.walk(store, after, high_water, wanted).await?;
        let items: Vec<ReportItem> = pieces
            .into_iter()
            .flat_map(|piece| match piece {
                Piece::Block { block, range, .. } => block.items[range].to_vec(),
                Piece::Horizon(rows) => rows,
            })
            .collect();
        let next_cursor = items.last().map_or(after, |item| item.id.0);
        Ok(ReportPage {
            items,
            next_cursor,
            high_water,
            archive_id: store.archive_id().to_string(),
        })
    }

    /// What a live consumer replays: up to `limit` reports with `after < id <= horizon` (a committed horizon
    /// the caller already knows, so no query asks for it), framed for sockets and shared with every other
    /// consumer replaying the same blocks. The horizon's own block is read for this caller alone (the ring of
    /// recent reports covers it for everyone else).
    pub async fn live_after(
        &self,
        store: &Store,
        after: i64,
        horizon: i64,
        limit: usize,
    ) -> anyhow::Result<LivePage> {
        let (pieces, archive_reads) = self.walk(store, after, horizon, limit).await?;
        let reports = pieces
            .into_iter()
            .flat_map(|piece| match piece {
                Piece::Block {
                    number,
                    block,
                    range,
                } => self.rendered(number, &block)[range].to_vec(),
                Piece::Horizon(rows) => rows
                    .into_iter()
                    .map(|item| Arc::new(Rendered::from(item)))
                    .collect(),
            })
            .collect();
        Ok(LivePage {
            reports,
            archive_reads,
        })
    }

    /// Where up to `limit` versions with `after < id <= horizon` lie, in id order: stretches of blocks wholly at
    /// or below the horizon (from the cache), then the horizon's own block read for this caller; and how many
    /// archive reads finding them took.
    async fn walk(
        &self,
        store: &Store,
        after: i64,
        horizon: i64,
        limit: usize,
    ) -> anyhow::Result<(Vec<Piece>, u64)> {
        let (mut pieces, mut reads, mut found, mut cursor) = (Vec::new(), 0, 0, after);
        while found < limit && cursor < horizon {
            let number = (cursor + 1).div_euclid(BLOCK_IDS);
            let block_end = (number + 1) * BLOCK_IDS - 1;
            let rest = limit - found;
            if block_end > horizon {
                let rows = rendered_between(store, cursor, horizon, rest as i64).await?;
                reads += 1;
                pieces.push(Piece::Horizon(rows));
                break;
            }
            let (block, read) = self.block(store, number).await?;
            reads += u64::from(read);
            let start = block.items.partition_point(|item| item.id.0 <= cursor);
            let end = (start + rest).min(block.items.len());
            found += end - start;
            pieces.push(Piece::Block {
                number,
                block,
                range: start..end,
            });
            cursor = block_end;
        }
        Ok((pieces, reads))
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
                lru.bytes -= gone.bytes();
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
        let one = block(10..20).bytes();
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
