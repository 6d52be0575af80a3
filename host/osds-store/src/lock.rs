//! One running service per archive, and no restore under it: `osds serve` holds an exclusive lock on
//! `<database>-lock` for as long as it runs (the system releases it when the process ends, even killed), and
//! `osds restore` takes the same lock before it replaces the database.

use anyhow::Context;
use std::fs::{File, TryLockError};
use std::path::Path;

/// The lock, held while this value lives.
pub struct ArchiveLock {
    _file: File,
}

impl ArchiveLock {
    /// Takes the lock of the database file `database`, or says that a service holds it.
    pub fn acquire(database: &Path) -> anyhow::Result<ArchiveLock> {
        let path = crate::beside::beside(database, "-lock");
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("create directory {}", parent.display()))?;
        }
        let file = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .with_context(|| format!("open the lock file {}", path.display()))?;
        match file.try_lock() {
            Ok(()) => Ok(ArchiveLock { _file: file }),
            Err(TryLockError::WouldBlock) => anyhow::bail!(
                "an osds serve is running on {} (it holds {}): stop it first",
                database.display(),
                path.display()
            ),
            Err(TryLockError::Error(e)) => {
                Err(e).with_context(|| format!("lock {}", path.display()))
            }
        }
    }
}
