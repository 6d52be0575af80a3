//! The reports committed lately, read from the archive once and rendered once for every live consumer. Without
//! it each of N subscribers ran its own query and re-serialised the same report after every commit; with it a
//! commit costs one read, and each consumer copies the ready text. Only committed reports enter (the reader
//! never reads past the published horizon), in id order, and the ring knows exactly which id range it covers,
//! so a consumer whose cursor lies inside that range gets every later report from it, gap-free; one whose
//! cursor is older reads the archive as before.

use crate::store::{ReportItem, Store};
use axum::extract::ws::Utf8Bytes;
use std::collections::VecDeque;
use std::sync::{Arc, RwLock};

/// Reports kept: enough for any consumer that keeps up, small enough to be cheap (~2 kB each).
const CAPACITY: usize = 4096;
/// Reports read per query while filling.
const READ_BATCH: i64 = 1000;

/// One committed report, ready to send.
#[derive(Debug)]
pub struct Rendered {
    pub id: i64,
    /// The report as JSON text (an SSE `report` event's data).
    pub text: Arc<str>,
    /// The WebSocket `report` message (shared, not copied, per socket).
    pub ws_text: Utf8Bytes,
}

impl Rendered {
    pub fn new(report: ReportItem) -> Rendered {
        let ws_text = format!(
            "{{\"type\":\"report\",\"id\":{},\"data\":{}}}",
            report.id, report.json
        );
        Rendered {
            id: report.id,
            text: report.json,
            ws_text: ws_text.into(),
        }
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
    /// One filler at a time; the others wait for it and then find the ring filled.
    filling: tokio::sync::Mutex<()>,
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
        }
    }

    /// Up to `limit` reports after `cursor`, or `None` when the ring does not cover the cursor (the caller
    /// reads the archive). Reads the archive once up to `horizon` first, for every consumer at once.
    pub async fn after(
        &self,
        cursor: i64,
        horizon: i64,
        limit: usize,
    ) -> anyhow::Result<Option<Vec<Arc<Rendered>>>> {
        if self.read().covered_after > cursor {
            return Ok(None);
        }
        if self.read().upto < horizon {
            self.fill(horizon).await?;
        }
        let ring = self.read();
        if ring.covered_after > cursor {
            return Ok(None);
        }
        let start = ring.entries.partition_point(|r| r.id <= cursor);
        Ok(Some(
            ring.entries.range(start..).take(limit).cloned().collect(),
        ))
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Ring> {
        self.ring
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    async fn fill(&self, horizon: i64) -> anyhow::Result<()> {
        let _filling = self.filling.lock().await;
        loop {
            let upto = self.read().upto;
            if upto >= horizon {
                return Ok(());
            }
            let page = self.store.reports_after(upto, READ_BATCH).await?;
            let rendered: Vec<Arc<Rendered>> = page
                .items
                .into_iter()
                .map(|r| Arc::new(Rendered::new(r)))
                .collect();
            let mut ring = self.ring.write().unwrap_or_else(|p| p.into_inner());
            // The page is complete up to its last id, or to the horizon it was read under when it is short.
            let reached = match rendered.last() {
                Some(last) if rendered.len() as i64 == READ_BATCH => last.id,
                _ => page.high_water.max(upto),
            };
            ring.entries.extend(rendered);
            ring.upto = reached;
            while ring.entries.len() > CAPACITY {
                if let Some(gone) = ring.entries.pop_front() {
                    ring.covered_after = gone.id;
                }
            }
            if reached == upto {
                // Nothing more is committed yet than what the ring holds.
                return Ok(());
            }
        }
    }
}
