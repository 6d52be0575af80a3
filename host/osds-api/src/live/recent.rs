//! The reports committed lately, read from the archive once and rendered once for every live consumer. Without
//! it each of N subscribers ran its own query and re-serialised the same report after every commit; with it a
//! commit costs one read, and each consumer copies the ready text. Only committed reports enter (the reader
//! never reads past the published horizon), in id order, and the ring knows exactly which id range it covers,
//! so a consumer whose cursor lies inside that range gets every later report from it, gap-free; one whose
//! cursor is older reads the archive as before.

use crate::wire::Rendered;
use osds_store::{ServedReport, Store};
use std::collections::VecDeque;
use std::sync::{Arc, RwLock};
use tokio::sync::watch;

/// Reports kept: enough for any consumer that keeps up, small enough to be cheap (~2 kB each).
const CAPACITY: usize = 4096;
/// Reports read per query while filling.
const READ_BATCH: i64 = 1000;

/// Queries live delivery made to the archive (`osds_live_archive_reads_total`): a reconnect storm should cost
/// one per distinct range, not one per consumer.
pub(crate) fn count_archive_reads(reads: u64) {
    if reads > 0 {
        metrics::counter!("osds_live_archive_reads_total").increment(reads);
    }
}

#[derive(Default)]
struct Ring {
    /// Every committed report with `covered_after < id <= upto` is in `entries`, in id order.
    covered_after: i64,
    upto: i64,
    entries: VecDeque<Arc<Rendered>>,
}

pub struct RecentReports {
    store: Store,
    ring: RwLock<Ring>,
    /// Held by the one consumer that reads the archive into the ring.
    filling: tokio::sync::Mutex<()>,
    /// Counts finished fills (successful or not), so consumers that found a fill under way all wake at once
    /// when it ends instead of queueing on `filling` one after another.
    fills_done: watch::Sender<u64>,
}

impl RecentReports {
    /// An empty ring that starts covering at `high_water` (the horizon at start: later commits enter).
    pub fn new(store: Store, high_water: i64) -> RecentReports {
        RecentReports {
            store,
            ring: RwLock::new(Ring {
                covered_after: high_water,
                upto: high_water,
                entries: VecDeque::new(),
            }),
            filling: tokio::sync::Mutex::new(()),
            fills_done: watch::Sender::new(0),
        }
    }

    /// Reads the last reports before the horizon the ring started at, so consumers that come back after a
    /// restart a few reports behind (all of them at once, after a restart during a quake) are served from
    /// memory instead of each reading the archive. Once, before serving; commits offered meanwhile stay.
    pub async fn warm(&self) -> anyhow::Result<()> {
        let start = self.read().covered_after;
        let from = (start - CAPACITY as i64).max(0);
        let items = self
            .store
            .served_between(from, start, CAPACITY as i64)
            .await?;
        count_archive_reads(1);
        let mut ring = self.ring.write().unwrap_or_else(|p| p.into_inner());
        // The ring dropped its oldest entries meanwhile: it has moved on beyond what was read.
        if ring.covered_after != start {
            return Ok(());
        }
        let later = std::mem::take(&mut ring.entries);
        ring.entries = items
            .into_iter()
            .map(|row| Arc::new(Rendered::from(row)))
            .chain(later)
            .collect();
        ring.covered_after = from;
        ring.trim();
        Ok(())
    }

    /// Up to `limit` reports after `cursor`, or `None` when the ring does not cover the cursor (the caller
    /// reads the archive). `horizon` is a committed horizon; the ring is filled up to it first, by one consumer
    /// for all.
    pub async fn after(
        &self,
        cursor: i64,
        horizon: i64,
        limit: usize,
    ) -> anyhow::Result<Option<Vec<Arc<Rendered>>>> {
        if self.read().covered_after > cursor {
            return Ok(None);
        }
        self.fill(horizon).await?;
        let ring = self.read();
        if ring.covered_after > cursor {
            return Ok(None);
        }
        let start = ring.entries.partition_point(|r| r.id <= cursor);
        Ok(Some(
            ring.entries.range(start..).take(limit).cloned().collect(),
        ))
    }

    /// Takes the versions of a commit just made (from the archive task, before it publishes their horizon), so
    /// the consumers it wakes find them here instead of one of them reading them back. Taken only when they
    /// continue the ring exactly (consecutive ids from `upto + 1`); anything else is left to the next fill.
    pub fn offer(&self, committed: &[ServedReport]) {
        let Some(first) = committed.first() else {
            return;
        };
        if !committed
            .windows(2)
            .all(|pair| pair[1].id.0 == pair[0].id.0 + 1)
        {
            return;
        }
        let rendered: Vec<_> = committed
            .iter()
            .map(|served| Arc::new(Rendered::from(served.clone())))
            .collect();
        let mut ring = self.ring.write().unwrap_or_else(|p| p.into_inner());
        if first.id.0 != ring.upto + 1 {
            return;
        }
        ring.append(rendered, first.id.0 + committed.len() as i64 - 1);
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Ring> {
        self.ring
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Makes the ring reach `horizon`: reads the archive if no one else is, else waits for that reader.
    async fn fill(&self, horizon: i64) -> anyhow::Result<()> {
        if self.read().upto >= horizon {
            return Ok(());
        }
        loop {
            // Subscribed before looking, so a fill that ends from here on wakes this consumer.
            let mut done = self.fills_done.subscribe();
            if self.read().upto >= horizon {
                return Ok(());
            }
            match self.filling.try_lock() {
                Ok(guard) => {
                    let filled = self.read_into_ring(horizon).await;
                    drop(guard);
                    self.fills_done.send_modify(|n| *n = n.wrapping_add(1));
                    return filled;
                }
                Err(_) => {
                    // The sender lives as long as `self`.
                    let _ = done.changed().await;
                }
            }
        }
    }

    async fn read_into_ring(&self, horizon: i64) -> anyhow::Result<()> {
        loop {
            let upto = self.read().upto;
            if upto >= horizon {
                return Ok(());
            }
            let items = self.store.served_between(upto, horizon, READ_BATCH).await?;
            count_archive_reads(1);
            // Everything up to the horizon was read, unless the batch was full.
            let reached = match items.last() {
                Some(last) if items.len() as i64 == READ_BATCH => last.id.0,
                _ => horizon,
            };
            let rendered = items
                .into_iter()
                .map(|row| Arc::new(Rendered::from(row)))
                .collect();
            let mut ring = self.ring.write().unwrap_or_else(|p| p.into_inner());
            // A commit offered meanwhile moved the ring on: read again from where it is now.
            if ring.upto == upto {
                ring.append(rendered, reached);
            }
        }
    }
}

impl Ring {
    /// Appends `rendered`, which continue the ring and cover every id up to `upto`.
    fn append(&mut self, rendered: Vec<Arc<Rendered>>, upto: i64) {
        self.entries.extend(rendered);
        self.upto = upto;
        self.trim();
    }

    /// Drops the oldest entries beyond the capacity.
    fn trim(&mut self) {
        while self.entries.len() > CAPACITY {
            if let Some(gone) = self.entries.pop_front() {
                self.covered_after = gone.id;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use osds_store::test_archive::archive;

    fn text(id: i64) -> ServedReport {
        ServedReport {
            id: osds_store::ReportId(id),
            source: "cq".into(),
            json: format!("{{\"id\":{id},\"offered\":true}}").into(),
        }
    }

    #[tokio::test]
    async fn a_warmed_ring_serves_the_reports_before_the_start_and_keeps_later_commits() {
        let (store, _writer, dir) = archive("recent-warm", 10).await;
        let recent = RecentReports::new(store.clone(), 10);
        assert!(recent.after(7, 10, 100).await.unwrap().is_none(), "cold");
        recent.offer(&[text(11), text(12)]);
        recent.warm().await.unwrap();
        let served = recent.after(7, 12, 100).await.unwrap().unwrap();
        let ids: Vec<i64> = served.iter().map(|r| r.id).collect();
        assert_eq!(ids, [8, 9, 10, 11, 12]);
        let from_start = recent.after(0, 12, 100).await.unwrap().unwrap();
        assert_eq!(from_start.len(), 12, "ids 1..=12, from the first");
        let archived = store.served_between(7, 10, 100).await.unwrap();
        for (served, row) in served.iter().zip(&archived) {
            assert_eq!(served.id, row.id.0);
            assert!(
                served.ws_text.contains(&*row.json),
                "the archive's own text"
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn a_commit_offered_in_order_is_served_without_reading_it_back() {
        let (store, _writer, dir) = archive("recent-offer", 3).await;
        let recent = RecentReports::new(store, 3);
        // Neither continues the ring exactly: one leaves out id 4, the other is not consecutive.
        recent.offer(&[text(5)]);
        recent.offer(&[text(4), text(6)]);
        recent.offer(&[text(4), text(5)]);
        // Ids 4 and 5 are not in the archive: only the offered texts can answer.
        let served = recent.after(3, 5, 10).await.unwrap().unwrap();
        let ids: Vec<i64> = served.iter().map(|r| r.id).collect();
        assert_eq!(ids, [4, 5]);
        assert!(
            served
                .iter()
                .all(|r| r.ws_text.contains("\"offered\":true"))
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
