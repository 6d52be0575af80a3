//! The archive's read side, [`Store`] (reads through a pool), and how SQLite URLs are read.

use crate::counts::{CountedAt, EventMatches, EventTotals};
use crate::db::ReadPool;
use anyhow::Context;
use sqlx::sqlite::SqliteConnectOptions;

/// The archive when none is configured: a file under `./data/`, created with its folder on first use.
pub const DEFAULT_DATABASE_URL: &str = "sqlite://data/osds.db";

/// Read access to the archive.
#[derive(Clone)]
pub struct Store {
    pub(crate) db: ReadPool,
    /// The last archive counts and the newest ids they were counted at (see `Store::archive_counts`).
    pub(crate) counts: std::sync::Arc<std::sync::Mutex<Option<CountedAt>>>,
    /// Totals of `/events` filters at the horizon they were counted at (see `Store::events`).
    pub(crate) event_totals: std::sync::Arc<std::sync::Mutex<EventTotals>>,
    /// The events each `/events` filter lists, at the horizon they were found at (see `Store::events`).
    pub(crate) event_matches: std::sync::Arc<std::sync::Mutex<EventMatches>>,
    /// The archive's identity (see `ids.rs`); only `osds restore` changes it, never under a running store.
    archive_id: std::sync::Arc<str>,
}

impl Store {
    /// The store reading through `db`, of the archive `archive_id`.
    pub(crate) fn new(db: ReadPool, archive_id: String) -> Store {
        Store {
            db,
            counts: Default::default(),
            event_totals: Default::default(),
            event_matches: Default::default(),
            archive_id: archive_id.into(),
        }
    }

    /// The archive's identity, `archiveId` in the API.
    pub fn archive_id(&self) -> &str {
        &self.archive_id
    }
}

/// The options of a SQLite URL (`what` names it in errors), where only SQLite will do (a frame archive, a
/// backup). Anything else is refused rather than taken as a file name (`postgres://host/db` would otherwise
/// quietly make a SQLite file under `postgres:/`).
pub(crate) fn sqlite_options(what: &str, url: &str) -> anyhow::Result<SqliteConnectOptions> {
    anyhow::ensure!(
        !crate::db::is_postgres_url(url),
        "{what} `{url}` is a PostgreSQL database; only a SQLite one (`sqlite:`) is taken here"
    );
    anyhow::ensure!(
        url.starts_with("sqlite:"),
        "{what} `{url}` is not a SQLite URL (one begins with `sqlite:`, e.g. `{DEFAULT_DATABASE_URL}`)"
    );
    <SqliteConnectOptions as std::str::FromStr>::from_str(url)
        .with_context(|| format!("{what} `{url}`"))
}

/// The database file a SQLite URL names.
pub fn database_path(url: &str) -> anyhow::Result<std::path::PathBuf> {
    Ok(sqlite_options("database url", url)?
        .get_filename()
        .to_path_buf())
}
