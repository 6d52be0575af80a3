//! The files that live beside the database file, named after it.

use std::path::{Path, PathBuf};

/// A file beside the database file `database`, named after it with `suffix` (`-wal`, `-ids`, `-lock`, ...).
pub(crate) fn beside(database: &Path, suffix: &str) -> PathBuf {
    let mut name = database.as_os_str().to_owned();
    name.push(suffix);
    name.into()
}
