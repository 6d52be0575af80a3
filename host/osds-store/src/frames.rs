//! The recorder's image archive: the monitor images the detector fetched, one row per layer and observation
//! second, kept for a bounded time. It is its own SQLite file (default `data/osds-frames.db`) so that hours of
//! images never weigh on the report archive or its backups. Images are re-fetchable source data, so commits
//! are not fsynced one by one.

use anyhow::Context;
use sqlx::sqlite::{SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Row, SqlitePool};
use std::time::Duration;

/// Where recorded images go when none is configured.
pub const DEFAULT_FRAMES_URL: &str = "sqlite://data/osds-frames.db";

const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS frames (
    at           INTEGER NOT NULL,   -- observation second, Unix ms
    layer        TEXT NOT NULL,      -- jma_s, acmap_b, ...
    received_at  INTEGER NOT NULL,   -- Unix ms the image arrived
    recovered    INTEGER NOT NULL,   -- 1: fetched later by a backfill, not seen live
    image        BLOB NOT NULL,      -- the GIF exactly as served
    PRIMARY KEY (at, layer)
) WITHOUT ROWID";

/// What the archive holds, for `/hyp/status`.
#[derive(Debug, Clone, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FrameArchiveSummary {
    pub images: i64,
    pub file_bytes: i64,
    pub oldest_at: Option<i64>,
    pub newest_at: Option<i64>,
}

/// One stored image: a layer's GIF of one observation second.
#[derive(Debug, Clone)]
pub struct FrameImage {
    /// Observation second, Unix ms.
    pub at_ms: i64,
    /// The layer's name (`jma_s`, `acmap_b`, ...).
    pub layer: String,
    /// When it arrived, Unix ms.
    pub received_at: i64,
    /// The GIF exactly as served.
    pub image: Vec<u8>,
}

#[derive(Clone)]
pub struct FrameArchive {
    pool: SqlitePool,
}

impl FrameArchive {
    /// Opens (creating when missing) the image archive at `url`.
    pub async fn open(url: &str) -> anyhow::Result<FrameArchive> {
        let options = crate::store::sqlite_options("frame archive url", url)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(Duration::from_secs(10));
        if let Some(parent) = options
            .get_filename()
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
        {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("create directory {}", parent.display()))?;
        }
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .connect_with(options)
            .await
            .with_context(|| format!("open frame archive {url}"))?;
        sqlx::query(SCHEMA).execute(&pool).await?;
        Ok(FrameArchive { pool })
    }

    /// Stores the images (layer name, GIF) of observation second `at_ms`, received at `received_at`; an image
    /// already stored for that second and layer is kept as it is.
    pub async fn record(
        &self,
        at_ms: i64,
        received_at: i64,
        images: &[(String, &[u8])],
        recovered: bool,
    ) -> anyhow::Result<usize> {
        let mut tx = self.pool.begin().await?;
        let mut stored = 0;
        for (layer, image) in images {
            stored += sqlx::query(
                "INSERT OR IGNORE INTO frames (at, layer, received_at, recovered, image) VALUES (?, ?, ?, ?, ?)",
            )
            .bind(at_ms)
            .bind(layer)
            .bind(received_at)
            .bind(recovered)
            .bind(*image)
            .execute(&mut *tx)
            .await?
            .rows_affected() as usize;
        }
        tx.commit().await?;
        Ok(stored)
    }

    /// Deletes images observed before `before_ms`; returns how many went.
    pub async fn prune(&self, before_ms: i64) -> anyhow::Result<u64> {
        Ok(sqlx::query("DELETE FROM frames WHERE at < ?")
            .bind(before_ms)
            .execute(&self.pool)
            .await?
            .rows_affected())
    }

    /// The images of up to `seconds` recorded seconds in `from_ms..=to_ms`, by second, then layer name.
    pub async fn frames(
        &self,
        from_ms: i64,
        to_ms: i64,
        seconds: i64,
    ) -> anyhow::Result<Vec<FrameImage>> {
        let rows = sqlx::query(
            "SELECT at, layer, received_at, image FROM frames
             WHERE at IN (SELECT DISTINCT at FROM frames WHERE at >= ? AND at <= ? ORDER BY at LIMIT ?)
             ORDER BY at, layer",
        )
        .bind(from_ms)
        .bind(to_ms)
        .bind(seconds)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .iter()
            .map(|row| FrameImage {
                at_ms: row.get("at"),
                layer: row.get("layer"),
                received_at: row.get("received_at"),
                image: row.get("image"),
            })
            .collect())
    }

    /// The seconds in `from_ms..=to_ms` that have an image of the layer named `layer`.
    pub async fn recorded_seconds(
        &self,
        layer: &str,
        from_ms: i64,
        to_ms: i64,
    ) -> anyhow::Result<Vec<i64>> {
        Ok(sqlx::query_scalar(
            "SELECT at FROM frames WHERE layer = ? AND at >= ? AND at <= ? ORDER BY at",
        )
        .bind(layer)
        .bind(from_ms)
        .bind(to_ms)
        .fetch_all(&self.pool)
        .await?)
    }

    pub async fn summary(&self) -> anyhow::Result<FrameArchiveSummary> {
        let row = sqlx::query(
            "SELECT COUNT(*) AS images, MIN(at) AS oldest, MAX(at) AS newest FROM frames",
        )
        .fetch_one(&self.pool)
        .await?;
        let pages: i64 = sqlx::query_scalar("PRAGMA page_count")
            .fetch_one(&self.pool)
            .await?;
        let page_size: i64 = sqlx::query_scalar("PRAGMA page_size")
            .fetch_one(&self.pool)
            .await?;
        Ok(FrameArchiveSummary {
            images: row.get("images"),
            file_bytes: pages * page_size,
            oldest_at: row.get("oldest"),
            newest_at: row.get("newest"),
        })
    }
}
