//! Where a test's archive lives. A suite runs on SQLite (a file in the service's directory) and, built again as
//! a test binary whose name ends in `_on_postgres` (`api_on_postgres` runs `api.rs`), on PostgreSQL: a database
//! of its own for each service directory, on one throwaway cluster per test binary.

use osds_store::test_postgres::Cluster;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

/// Whether this test binary runs its suite on PostgreSQL.
pub fn on_postgres() -> bool {
    env!("CARGO_CRATE_NAME").ends_with("_on_postgres")
}

/// The cluster of this test binary, made on first use and gone once the binary has ended.
fn cluster() -> &'static Cluster {
    static CLUSTER: OnceLock<Cluster> = OnceLock::new();
    CLUSTER.get_or_init(|| {
        let cluster = Cluster::start(env!("CARGO_CRATE_NAME"));
        cluster.stop_when_this_process_ends();
        cluster
    })
}

/// The databases made so far (a restarted service finds its own again).
fn made() -> &'static Mutex<BTreeSet<String>> {
    static MADE: OnceLock<Mutex<BTreeSet<String>>> = OnceLock::new();
    MADE.get_or_init(Default::default)
}

/// The PostgreSQL database of the service in `dir`, named after the directory (unique per test run).
fn database_name(dir: &Path) -> String {
    let name: String = dir
        .file_name()
        .expect("a service directory has a name")
        .to_string_lossy()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect();
    // PostgreSQL keeps 63 bytes of a name: the end (process id and counter) is what tells them apart.
    format!("t_{}", &name[name.len().saturating_sub(60)..])
}

/// The archive URL of the service in `dir` (on PostgreSQL, its database is made empty on first use).
pub fn url_for(dir: &Path) -> String {
    if !on_postgres() {
        return format!("sqlite://{}", dir.join("osds.db").display());
    }
    let name = database_name(dir);
    let mut made = made().lock().unwrap_or_else(|e| e.into_inner());
    if made.insert(name.clone()) {
        cluster().create_database(&name, None)
    } else {
        cluster().url_of(&name)
    }
}

/// A stopped service's archive, kept to copy from.
pub enum Snapshot {
    /// A SQLite backup file (one self-contained file, unlike the live database with its WAL).
    File(PathBuf),
    /// A PostgreSQL database nothing is connected to (copied as a template).
    Database(String),
}

/// The archive of the stopped service in `dir`, to copy from.
pub async fn snapshot(dir: &Path) -> Snapshot {
    if on_postgres() {
        return Snapshot::Database(database_name(dir));
    }
    let outcome = osds_store::backup::backup(&url_for(dir), &dir.join("snapshot"), 1)
        .await
        .expect("back the archive up");
    Snapshot::File(outcome.backup.path)
}

/// Makes a copy of `snapshot` the archive of the service in `dir`.
pub fn copy_into(snapshot: &Snapshot, dir: &Path) {
    match snapshot {
        Snapshot::File(file) => {
            std::fs::copy(file, dir.join("osds.db")).expect("copy the archive");
        }
        Snapshot::Database(template) => {
            let name = database_name(dir);
            // Held while copying: one copy of a template at a time.
            let mut made = made().lock().unwrap_or_else(|e| e.into_inner());
            cluster().create_database(&name, Some(template));
            made.insert(name);
        }
    }
}
