//! The hub: writes each new report to every caught-up live consumer's socket from one loop per core, the way
//! an event-loop server does, instead of waking a task per consumer. A consumer lends its socket
//! ([`Tap::lend`]) while it waits for reports; the hub writes the pre-framed report to those it can fill at once
//! and hands the others back, so everything else (backlogs, slow readers, status, pings, closing) stays with
//! the consumer's own code.

use super::feed::Feed;
use crate::live::recent::RecentReports;
use crate::net::socket::{Tap, Written};
use crate::reports::pages::ReportCache;
use osds_store::Store;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::watch;

/// Sockets written between two yields, so a round over thousands of consumers does not hold a worker thread.
const WRITES_PER_TURN: usize = 256;

pub struct Hub {
    shards: Vec<Arc<Shard>>,
    next: AtomicUsize,
}

#[derive(Default)]
struct Shard {
    /// Registered since the shard's last round.
    joining: Mutex<Vec<Arc<Tap>>>,
}

impl Hub {
    /// One shard per worker thread, each following the commits with a feed of its own.
    pub fn start(
        store: &Store,
        report_cache: &Arc<ReportCache>,
        recent: &Arc<RecentReports>,
        high_water: &watch::Receiver<i64>,
        shards: usize,
    ) -> Arc<Hub> {
        let shards: Vec<Arc<Shard>> = (0..shards.max(1)).map(|_| Arc::default()).collect();
        for shard in &shards {
            let feed = Feed::new(
                store.clone(),
                report_cache.clone(),
                recent.clone(),
                high_water.clone(),
                None,
                1.0,
                None,
            );
            tokio::spawn(run(shard.clone(), feed));
        }
        Arc::new(Hub {
            shards,
            next: AtomicUsize::new(0),
        })
    }

    /// Adds a connection's socket to a shard (once per connection).
    pub fn register(&self, tap: &Arc<Tap>) {
        if !tap.first_registration() {
            return;
        }
        let index = self.next.fetch_add(1, Ordering::Relaxed) % self.shards.len();
        self.shards[index]
            .joining
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(tap.clone());
    }
}

async fn run(shard: Arc<Shard>, mut feed: Feed) {
    let mut taps: Vec<Arc<Tap>> = Vec::new();
    loop {
        let previous = feed.cursor();
        let reports = match feed.next().await {
            Ok(reports) => reports,
            Err(e) => {
                tracing::warn!(error = %format!("{e:#}"), "the live hub cannot read the archive; consumers read for themselves");
                for tap in &taps {
                    if let Some(waker) = tap.give_back() {
                        waker.wake();
                    }
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        taps.append(&mut shard.joining.lock().unwrap_or_else(PoisonError::into_inner));
        taps.retain(|tap| !tap.abandoned());
        let mut written = Written::default();
        for (index, tap) in taps.iter().enumerate() {
            if let Some(waker) = tap.deliver(&reports, previous, &mut written) {
                waker.wake();
            }
            if index % WRITES_PER_TURN == WRITES_PER_TURN - 1 {
                tokio::task::yield_now().await;
            }
        }
        // Once per round, not per socket: a metric's lookup for each of thousands of sockets would show.
        metrics::counter!("osds_live_deliveries_total", "protocol" => "sse").increment(written.sse);
        metrics::counter!("osds_live_deliveries_total", "protocol" => "ws").increment(written.ws);
    }
}
