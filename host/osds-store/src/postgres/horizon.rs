//! The horizon across processes: a commit that archived versions notifies it (`LISTEN/NOTIFY`), and followers
//! in any process wake on it.

use crate::ids::{POSTGRES_HORIZON as HORIZON, raise_horizon};
use anyhow::Context;
use sqlx::postgres::{PgConnection, PgListener, PgPoolOptions};

/// The channel a commit that archived versions notifies, with the new horizon as its payload.
const HORIZON_CHANNEL: &str = "osds_horizon";

/// The follower's connection as `pg_stat_activity` names it, for an operator (and a test) to find it.
pub(super) const FOLLOWER_NAME: &str = "osds horizon follower";

/// A pause before listening again after the server could not be reached.
const LISTEN_RETRY: std::time::Duration = std::time::Duration::from_secs(1);

/// Follows the archive's horizon as any ingester's commits move it, from any process: the receiver holds the
/// highest report id known committed. Notifications only wake: what a follower sends it reads from the
/// archive, in id order up to this horizon, so a late or lost notification never reorders or skips a report.
/// One lost with the connection is made up for by reading the horizon once the listener is back.
pub async fn watch_horizon(url: &str) -> anyhow::Result<tokio::sync::watch::Receiver<i64>> {
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .connect_with(super::connect_options(url)?.application_name(FOLLOWER_NAME))
        .await
        .with_context(|| format!("open database {url}"))?;
    let mut listener = PgListener::connect_with(&pool).await?;
    listener.listen(HORIZON_CHANNEL).await?;
    // Read once listening: a commit before this is in the read, one after it is notified.
    let (sender, receiver) = tokio::sync::watch::channel(read_horizon(&mut listener).await?);
    tokio::spawn(async move {
        // Notifications may have been lost with the connection: the horizon is to be read again.
        let mut stale = false;
        loop {
            if stale {
                // Read through the listener: it connects and listens again first, so whatever commits after
                // the read is notified.
                match read_horizon(&mut listener).await {
                    Ok(horizon) => {
                        raise_horizon(&sender, horizon);
                        stale = false;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot read the horizon; trying again");
                        tokio::time::sleep(LISTEN_RETRY).await;
                        continue;
                    }
                }
            }
            let next = tokio::select! {
                next = listener.try_recv() => next,
                () = sender.closed() => return,
            };
            match next {
                Ok(Some(notification)) => match notification.payload().parse() {
                    Ok(horizon) => raise_horizon(&sender, horizon),
                    Err(_) => tracing::warn!(
                        payload = notification.payload(),
                        "a horizon notification that is not a report id"
                    ),
                },
                // The connection was lost (and is back, or not yet).
                Ok(None) => stale = true,
                Err(e) => {
                    tracing::warn!(error = %e, "lost the horizon notifications; listening again");
                    stale = true;
                    tokio::time::sleep(LISTEN_RETRY).await;
                }
            }
        }
    });
    Ok(receiver)
}

async fn read_horizon(listener: &mut PgListener) -> anyhow::Result<i64> {
    Ok(sqlx::query_scalar(&format!("SELECT {HORIZON}"))
        .fetch_one(listener)
        .await?)
}

/// Adds the notification of a commit that archived versions up to `last` (delivered when it commits, in commit
/// order; see [`watch_horizon`]).
pub(super) async fn notify_horizon(
    conn: &mut PgConnection,
    last: Option<i64>,
) -> anyhow::Result<()> {
    if let Some(last) = last {
        sqlx::query("SELECT pg_notify($1, $2)")
            .bind(HORIZON_CHANNEL)
            .bind(last.to_string())
            .execute(conn)
            .await?;
    }
    Ok(())
}
