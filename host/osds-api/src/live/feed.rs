//! [`Feed`]: the reports after a cursor, in id order, the mechanism under `/stream`, `/ws` and the hub.

use crate::live::recent::{RecentReports, count_archive_reads};
use crate::net::socket::{Kind, Tap};
use crate::reports::pages::ReportCache;
use crate::sources::{self, SourceFilter};
use crate::wire::Rendered;
use osds_store::Store;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::{Instant, sleep_until};

/// Most reports read in one query once the backlog is replayed.
const LIVE_BATCH: i64 = 1000;

/// The reports after one consumer's cursor, in id order: from the shared ring of recent reports when it covers
/// the cursor, else from the database.
pub struct Feed {
    store: Store,
    report_cache: Arc<ReportCache>,
    recent: Arc<RecentReports>,
    high_water: watch::Receiver<i64>,
    cursor: i64,
    /// Ids up to here existed when the consumer connected: they are the backlog, replayed at the paced rate.
    replay_until: i64,
    batch: i64,
    pace: Duration,
    next_batch_at: Instant,
    /// The cursor before the batch last returned.
    before_batch: i64,
    /// The consumer's socket, lent to the hub whenever the feed is caught up.
    lend: Option<(Arc<Tap>, Kind)>,
    /// The channels the consumer follows (none: all). The cursor moves over the others' reports too.
    filter: Option<SourceFilter>,
}

impl Feed {
    pub fn new(
        store: Store,
        report_cache: Arc<ReportCache>,
        recent: Arc<RecentReports>,
        mut high_water: watch::Receiver<i64>,
        after: Option<i64>,
        replay_rate: f64,
        filter: Option<SourceFilter>,
    ) -> Feed {
        let horizon = *high_water.borrow_and_update();
        let rate = replay_rate.max(1.0);
        // Ten batches a second keep the pace smooth without a query per report.
        let batch = (rate / 10.0).ceil().max(1.0);
        let cursor = after.unwrap_or(horizon);
        Feed {
            store,
            report_cache,
            recent,
            high_water,
            cursor,
            replay_until: horizon,
            batch: batch as i64,
            pace: Duration::from_secs_f64(batch / rate),
            next_batch_at: Instant::now(),
            before_batch: cursor,
            lend: None,
            filter,
        }
    }

    /// Lends the consumer's socket, registered with the hub, to the hub whenever the feed is caught up (see
    /// `net/socket.rs`): the reports the hub writes move the cursor without passing through [`Feed::next`].
    pub fn lend_when_caught_up(&mut self, tap: Arc<Tap>, kind: Kind) {
        self.lend = Some((tap, kind));
    }

    /// The last report id sent: returned by [`Feed::next`] or written by the hub.
    pub fn cursor(&self) -> i64 {
        self.cursor
    }

    /// The cursor before the batch [`Feed::next`] returned last.
    pub fn before_batch(&self) -> i64 {
        self.before_batch
    }

    pub fn horizon(&self) -> i64 {
        *self.high_water.borrow()
    }

    pub fn replaying(&self) -> bool {
        self.cursor < self.replay_until
    }

    /// Reports of the backlog not replayed yet.
    pub fn backlog(&self) -> i64 {
        (self.replay_until - self.cursor).max(0)
    }

    /// The next reports after the cursor of the channels followed, waiting for a commit when there are none.
    /// Cancel-safe: the cursor moves only when a batch is returned, or over reports none of which are followed.
    pub async fn next(&mut self) -> anyhow::Result<Vec<Arc<Rendered>>> {
        loop {
            let horizon = *self.high_water.borrow_and_update();
            if self.cursor < horizon {
                let replaying = self.replaying();
                if replaying {
                    sleep_until(self.next_batch_at).await;
                }
                let limit = if replaying { self.batch } else { LIVE_BATCH };
                let page = match self
                    .recent
                    .after(self.cursor, horizon, limit as usize)
                    .await?
                {
                    Some(page) => page,
                    None => {
                        // Older than the ring: from the blocks every replaying consumer shares.
                        let page = self
                            .report_cache
                            .live_after(&self.store, self.cursor, horizon, limit as usize)
                            .await?;
                        count_archive_reads(page.archive_reads);
                        page.reports
                    }
                };
                if replaying {
                    self.next_batch_at = Instant::now() + self.pace;
                }
                if let Some(last) = page.last() {
                    self.before_batch = self.cursor;
                    self.cursor = last.id;
                    let mut page = page;
                    page.retain(|report| sources::accepts(self.filter.as_ref(), &report.source));
                    if !page.is_empty() {
                        return Ok(page);
                    }
                    continue;
                }
            }
            if let Some((tap, kind)) = &self.lend
                && tap.lend(*kind, self.cursor, self.filter.as_ref())
            {
                let lent = Lent {
                    tap,
                    from: self.cursor,
                    cursor: &mut self.cursor,
                };
                // A commit published before the socket was lent may have been passed over by the hub.
                if *self.high_water.borrow() <= lent.from {
                    std::future::poll_fn(|cx| tap.poll_given_back(cx)).await;
                }
                continue;
            }
            if self.high_water.changed().await.is_err() {
                // The archive writer is gone: nothing new can commit.
                std::future::pending::<()>().await;
            }
        }
    }
}

/// A socket lent to the hub for as long as this lives (a cancelled wait takes it back too); the cursor moves
/// past what the hub wrote when it comes back.
struct Lent<'a> {
    tap: &'a Tap,
    cursor: &'a mut i64,
    from: i64,
}

impl Drop for Lent<'_> {
    fn drop(&mut self) {
        *self.cursor = (*self.cursor).max(self.tap.take_back());
    }
}
