//! The archive's self-sensing horizon, followed by one task per server for the live self-sensing channels
//! (`live/hyp.rs`): a report another process archived reaches every consumer too.

use osds_store::Store;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{OnceCell, watch};

/// How often the horizon is read from the archive.
const FOLLOW_EVERY: Duration = Duration::from_millis(200);

/// The archive's self-sensing horizon (the last report's `seq`), followed by one task per server, started by
/// the first consumer.
#[derive(Default)]
pub struct HypHorizon {
    followed: OnceCell<watch::Receiver<i64>>,
}

impl HypHorizon {
    pub fn new() -> Arc<HypHorizon> {
        Arc::default()
    }

    pub(super) async fn follow(
        &self,
        store: &Store,
        shutdown: &watch::Receiver<bool>,
    ) -> anyhow::Result<watch::Receiver<i64>> {
        let followed = self
            .followed
            .get_or_try_init(|| async {
                let (sender, receiver) = watch::channel(store.hyp_high_water().await?);
                let (store, mut shutdown) = (store.clone(), shutdown.clone());
                tokio::spawn(async move {
                    let mut tick = tokio::time::interval(FOLLOW_EVERY);
                    loop {
                        tokio::select! {
                            _ = tick.tick() => {}
                            _ = shutdown.wait_for(|stop| *stop) => return,
                        }
                        match store.hyp_high_water().await {
                            Ok(high) => {
                                sender.send_if_modified(|now| {
                                    let newer = high > *now;
                                    if newer {
                                        *now = high;
                                    }
                                    newer
                                });
                            }
                            Err(error) => tracing::warn!(
                                error = %format!("{error:#}"),
                                "the self-sensing horizon cannot be read; live consumers wait"
                            ),
                        }
                    }
                });
                anyhow::Ok(receiver)
            })
            .await?;
        Ok(followed.clone())
    }
}
