//! Report ids are cursors that consumers keep, so one is never served twice for different reports, not even
//! after a backup is restored. Two guards:
//!
//! - the archive's `id_floor` (`archive` table): new versions get ids above it, and the horizon
//!   ([`HORIZON`]) never drops below it. `osds restore` sets it past every id the replaced archive can have
//!   handed out;
//! - the id reservation beside the database file (`<database>-ids`, outside every backup): before a commit
//!   hands out ids above the reserved mark, the mark moves a block further and is synced. A restore over a
//!   lost or damaged database still knows how far ids went.

use anyhow::Context;
use std::io::Write;
use std::path::{Path, PathBuf};

pub use osds_contract::{DeliveryId, ReportId};

/// The commit horizon in SQL: the highest report id, or the archive's id floor when that is higher.
pub(crate) const HORIZON: &str =
    "MAX((SELECT COALESCE(MAX(id), 0) FROM reports), (SELECT id_floor FROM archive))";

/// [`HORIZON`] in PostgreSQL's SQL.
pub(crate) const POSTGRES_HORIZON: &str =
    "GREATEST((SELECT COALESCE(MAX(id), 0) FROM reports), (SELECT id_floor FROM archive))";

/// Publishes `horizon` in `known` unless a higher one is there already: horizons of several writers'
/// commits arrive in any order, and a published one never goes back.
pub(crate) fn raise_horizon(known: &tokio::sync::watch::Sender<i64>, horizon: i64) {
    known.send_if_modified(|current| {
        let higher = horizon > *current;
        *current = (*current).max(horizon);
        higher
    });
}

/// Ids reserved at once: one synced write per 1,024 report versions.
const BLOCK: i64 = 1024;

/// The reservation file of the database at `database`.
fn reservation_path(database: &Path) -> PathBuf {
    crate::beside::beside(database, "-ids")
}

/// The highest id reserved for the database at `database` (0 when nothing was reserved).
pub fn reserved(database: &Path) -> i64 {
    std::fs::read_to_string(reservation_path(database))
        .ok()
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(0)
}

/// The reservation a writer keeps.
pub(crate) struct IdReservation {
    database: PathBuf,
    reserved: i64,
}

impl IdReservation {
    pub(crate) fn open(database: &Path) -> IdReservation {
        IdReservation {
            database: database.to_path_buf(),
            reserved: reserved(database),
        }
    }

    /// Makes sure `id` is reserved, moving the mark a block past it (and syncing it) when it is not. Called
    /// inside the write transaction, so two processes writing the archive never interleave here.
    pub(crate) fn cover(&mut self, id: i64) -> anyhow::Result<()> {
        if id <= self.reserved {
            return Ok(());
        }
        // Another process may have moved the mark meanwhile: never move it back.
        let mark = reserved(&self.database).max(id + BLOCK);
        let path = reservation_path(&self.database);
        let temporary = path.with_extension("ids-new");
        let mut file = std::fs::File::create(&temporary)
            .with_context(|| format!("write {}", temporary.display()))?;
        writeln!(file, "{mark}")?;
        file.sync_all()?;
        std::fs::rename(&temporary, &path)
            .with_context(|| format!("replace {}", path.display()))?;
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::File::open(parent)?.sync_all()?;
        }
        self.reserved = mark;
        Ok(())
    }
}
