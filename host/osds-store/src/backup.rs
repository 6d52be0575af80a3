//! Online backups of the archive: consistent copies of the live SQLite database, taken while the service keeps
//! writing, kept in one directory on the same server (they are not off-site disaster recovery).
//!
//! A backup is `VACUUM INTO`: SQLite copies the database as seen by one read transaction, so in WAL mode it
//! neither blocks the writer nor sees half of a commit, and the copy is compact and self-contained (no `-wal`).
//! It is written under a temporary name and only gets its final name `osds-YYYYMMDDTHHMMSSZ.db` when complete
//! and synced, so a file with a final name is always a whole backup. The name is the UTC time the snapshot was
//! started; it orders backups and gives their `createdAt`.

use anyhow::Context;
use chrono::{DateTime, NaiveDateTime, Utc};
use osds_time::rfc3339;
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{ConnectOptions, Connection};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::sync::watch;

const PREFIX: &str = "osds-";
const SUFFIX: &str = ".db";
const STAMP_FORMAT: &str = "%Y%m%dT%H%M%SZ";

/// Where backups go, how often the service takes them and how many are kept: what `/status` reports.
#[derive(Debug, Clone)]
pub struct BackupSettings {
    pub directory: PathBuf,
    /// `None`: the service takes no periodic backups (`osds backup` still can).
    pub every: Option<Duration>,
    pub keep: usize,
}

/// One complete backup file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackupFile {
    pub path: PathBuf,
    pub size_bytes: u64,
    /// RFC 3339 UTC time the snapshot was started (from the file name, to the second).
    pub created_at: String,
}

/// What one backup did.
#[derive(Debug)]
pub struct BackupOutcome {
    pub backup: BackupFile,
    /// Older backups deleted by the rotation.
    pub removed: Vec<PathBuf>,
    /// Older backups the rotation should have deleted but could not (the backup itself is complete).
    pub rotation_errors: Vec<String>,
}

/// Backups here copy a SQLite file; a PostgreSQL archive is backed up and restored with PostgreSQL's tools.
fn refuse_postgres(database_url: &str) -> anyhow::Result<()> {
    anyhow::ensure!(
        !crate::db::is_postgres_url(database_url),
        "`{database_url}` is a PostgreSQL database: back it up with pg_dump and restore it with pg_restore, \
         then run `osds restore --database-url URL --ids-above N` (docs/operating.md, \"Running on several machines\"); \
         `osds backup` and `osds restore BACKUP` copy SQLite files"
    );
    Ok(())
}

/// `osds restore` after a `pg_restore` into the PostgreSQL database at `database_url` (see
/// [`crate::postgres::mark_restored`]): the same rules as [`restore`], with the replaced archive's highest id
/// given by the operator.
pub async fn restore_postgres(
    database_url: &str,
    ids_above: i64,
) -> anyhow::Result<RestoreOutcome> {
    let (archive_id, backup_high_water, id_floor) =
        crate::postgres::mark_restored(database_url, ids_above).await?;
    Ok(RestoreOutcome {
        database: database_url.to_owned(),
        archive_id,
        backup_high_water,
        id_floor,
    })
}

/// Takes a backup of the SQLite database at `database_url` into `directory` (created when missing), then
/// deletes all but the newest `keep` backups there. Safe while `osds serve` writes to the same database.
///
/// The database must exist: a backup never creates or migrates one (an empty backup of a mistyped path
/// would look like a success).
pub async fn backup(
    database_url: &str,
    directory: &Path,
    keep: usize,
) -> anyhow::Result<BackupOutcome> {
    anyhow::ensure!(keep >= 1, "at least one backup must be kept");
    // No journal mode is set: the database's own (WAL) stays, and this connection only reads it.
    refuse_postgres(database_url)?;
    let options = crate::store::sqlite_options("database url", database_url)?
        .create_if_missing(false)
        .busy_timeout(Duration::from_secs(30))
        .disable_statement_logging();
    let database = options.get_filename().to_path_buf();
    if !database.is_file() {
        anyhow::bail!(
            "database {} does not exist (is --database-url right?); nothing to back up",
            database.display()
        );
    }
    std::fs::create_dir_all(directory)
        .with_context(|| format!("create backup directory {}", directory.display()))?;
    // Absolute, so SQLite cannot read the name as a `file:` URI.
    let directory = std::path::absolute(directory)
        .with_context(|| format!("backup directory {}", directory.display()))?;

    let started = Utc::now();
    let stamp = started.format(STAMP_FORMAT).to_string();
    static NEXT: AtomicU64 = AtomicU64::new(0);
    // Starts with a dot, so it never matches `osds-*.db` and is never listed or rotated as a backup.
    let temp = TempFile(directory.join(format!(
        ".osds-{stamp}-{}-{}.tmp",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )));
    let target = sql_path(&temp.0)?.to_string();
    // `VACUUM INTO` refuses an existing non-empty file; a leftover of this exact name can only be ours.
    let _ = std::fs::remove_file(&temp.0);

    let mut conn = options
        .connect()
        .await
        .with_context(|| format!("open database {database_url}"))?;
    // The path is a bound parameter, not spliced into the SQL text, so no file name can change the statement.
    sqlx::query("VACUUM INTO ?")
        .bind(target)
        .execute(&mut conn)
        .await
        .with_context(|| format!("copy {} with VACUUM INTO", database.display()))?;
    conn.close().await.context("close database")?;

    // Syncing, naming and rotating run to the end even if the caller stops waiting: a backup either gets its
    // final name with the rotation done, or leaves nothing behind.
    tokio::task::spawn_blocking(move || finish(temp, &directory, started, keep))
        .await
        .context("backup task")?
}

/// Every backup in `directory` (names `osds-YYYYMMDDTHHMMSSZ[-N].db` only), newest first. A missing directory
/// has none.
pub fn list(directory: &Path) -> std::io::Result<Vec<BackupFile>> {
    let entries = match std::fs::read_dir(directory) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut found = Vec::new();
    for entry in entries {
        let entry = entry?;
        let Some((at, counter)) = entry.file_name().to_str().and_then(parse_name) else {
            continue;
        };
        // Symbolic links and directories are not ours; a file deleted meanwhile is skipped.
        let Ok(meta) = entry.metadata() else { continue };
        if !meta.is_file() {
            continue;
        }
        found.push((
            (at, counter),
            BackupFile {
                path: directory.join(entry.file_name()),
                size_bytes: meta.len(),
                created_at: rfc3339(at),
            },
        ));
    }
    found.sort_by_key(|(key, _)| std::cmp::Reverse(*key));
    Ok(found.into_iter().map(|(_, file)| file).collect())
}

/// The backups in the settings' directory, newest first (an unreadable directory is logged and lists none).
/// It reads the directory, so backups taken by `osds backup` show too.
pub async fn files(settings: &BackupSettings) -> Vec<BackupFile> {
    let directory = settings.directory.clone();
    match tokio::task::spawn_blocking(move || list(&directory)).await {
        Ok(Ok(files)) => files,
        Ok(Err(e)) => {
            tracing::warn!(directory = %settings.directory.display(), error = %e, "cannot list backups");
            Vec::new()
        }
        Err(e) => {
            tracing::warn!(error = %e, "backup listing task failed");
            Vec::new()
        }
    }
}

/// The service's periodic backups: one every `settings.every` (the first after one interval, not at
/// start-up), until `shutdown` becomes true. Failures are logged and the next interval tries again.
pub async fn periodic(
    database_url: String,
    settings: Arc<BackupSettings>,
    mut shutdown: watch::Receiver<bool>,
) {
    let Some(every) = settings.every else {
        return;
    };
    let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    // After a long backup, wait a whole interval again rather than taking the missed ones back to back.
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = shutdown.wait_for(|stopping| *stopping) => return,
        }
        tokio::select! {
            result = backup(&database_url, &settings.directory, settings.keep) => match result {
                Ok(outcome) => {
                    tracing::info!(
                        path = %outcome.backup.path.display(),
                        size_bytes = outcome.backup.size_bytes,
                        removed = outcome.removed.len(),
                        "backup taken"
                    );
                    for error in &outcome.rotation_errors {
                        tracing::error!(%error, "backup rotation");
                    }
                }
                Err(e) => tracing::error!(directory = %settings.directory.display(), error = format!("{e:#}"), "backup failed"),
            },
            // A backup in progress is abandoned (its temporary file removed) so stopping does not wait on it.
            _ = shutdown.wait_for(|stopping| *stopping) => {
                tracing::info!("backup abandoned: the service is stopping");
                return;
            }
        }
    }
}

/// The temporary file of a backup in progress, removed when dropped (after success it no longer exists).
struct TempFile(PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn finish(
    temp: TempFile,
    directory: &Path,
    started: DateTime<Utc>,
    keep: usize,
) -> anyhow::Result<BackupOutcome> {
    // `VACUUM INTO` does not sync its output; a backup must survive a power cut once it has its name.
    std::fs::File::open(&temp.0)
        .and_then(|file| file.sync_all())
        .with_context(|| format!("sync {}", temp.0.display()))?;
    let path = publish(
        &temp.0,
        directory,
        &started.format(STAMP_FORMAT).to_string(),
    )?;
    drop(temp);
    sync_directory(directory);
    let size_bytes = std::fs::metadata(&path)
        .with_context(|| format!("read {}", path.display()))?
        .len();
    let (removed, rotation_errors) = rotate(directory, keep, &path);
    let created_at = parse_name(&path.file_name().unwrap_or_default().to_string_lossy())
        .map_or_else(|| rfc3339(started), |(at, _)| rfc3339(at));
    Ok(BackupOutcome {
        backup: BackupFile {
            path,
            size_bytes,
            created_at,
        },
        removed,
        rotation_errors,
    })
}

/// Gives the complete temporary file its final name, never replacing another backup: a hard link fails when
/// the name exists (another backup in the same second, e.g. `osds backup` while the service takes one), and
/// then the next counter suffix is tried.
fn publish(temp: &Path, directory: &Path, stamp: &str) -> anyhow::Result<PathBuf> {
    for counter in 0..10_000u32 {
        let name = if counter == 0 {
            format!("{PREFIX}{stamp}{SUFFIX}")
        } else {
            format!("{PREFIX}{stamp}-{counter}{SUFFIX}")
        };
        let candidate = directory.join(name);
        match std::fs::hard_link(temp, &candidate) {
            Ok(()) => return Ok(candidate),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            // A file system without hard links: rename (only a backup in the same instant could collide).
            Err(_) if !candidate.exists() => {
                std::fs::rename(temp, &candidate)
                    .with_context(|| format!("rename backup to {}", candidate.display()))?;
                return Ok(candidate);
            }
            Err(e) => {
                return Err(e).with_context(|| format!("name backup {}", candidate.display()));
            }
        }
    }
    anyhow::bail!("no free backup name for {stamp} in {}", directory.display())
}

/// Deletes all but the newest `keep` backups, never the one just taken (even if the clock went back).
fn rotate(directory: &Path, keep: usize, newest: &Path) -> (Vec<PathBuf>, Vec<String>) {
    let files = match list(directory) {
        Ok(files) => files,
        Err(e) => {
            return (
                Vec::new(),
                vec![format!("list backups in {}: {e}", directory.display())],
            );
        }
    };
    let mut kept = 1;
    let mut removed = Vec::new();
    let mut errors = Vec::new();
    for file in files.into_iter().filter(|file| file.path != newest) {
        if kept < keep {
            kept += 1;
            continue;
        }
        match std::fs::remove_file(&file.path) {
            Ok(()) => removed.push(file.path),
            // Another backup's rotation got there first.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => errors.push(format!("remove old backup {}: {e}", file.path.display())),
        }
    }
    (removed, errors)
}

#[cfg(unix)]
fn sync_directory(directory: &Path) {
    // Makes the new name durable; a failure only weakens durability, so it is logged, not fatal.
    if let Err(e) = std::fs::File::open(directory).and_then(|dir| dir.sync_all()) {
        tracing::warn!(directory = %directory.display(), error = %e, "cannot sync backup directory");
    }
}

#[cfg(not(unix))]
fn sync_directory(_directory: &Path) {}

/// The path as SQL text: UTF-8 without NUL (SQLite would cut the name at a NUL and write somewhere else).
fn sql_path(path: &Path) -> anyhow::Result<&str> {
    let text = path
        .to_str()
        .with_context(|| format!("backup path {} is not valid UTF-8", path.display()))?;
    anyhow::ensure!(
        !text.contains('\0'),
        "backup path {} contains a NUL character",
        path.display()
    );
    Ok(text)
}

/// `osds-YYYYMMDDTHHMMSSZ.db` or `osds-YYYYMMDDTHHMMSSZ-N.db` → (time, N). Other names are not backups of
/// ours, so the rotation never deletes them.
fn parse_name(name: &str) -> Option<(DateTime<Utc>, u32)> {
    let rest = name.strip_prefix(PREFIX)?.strip_suffix(SUFFIX)?;
    let (stamp, counter) = match rest.split_once('-') {
        Some((stamp, counter)) => {
            let n: u32 = counter.parse().ok()?;
            // Exactly as `publish` writes it: no sign, no leading zero, no `-0`.
            if n == 0 || n.to_string() != counter {
                return None;
            }
            (stamp, n)
        }
        None => (rest, 0),
    };
    let at = NaiveDateTime::parse_from_str(stamp, STAMP_FORMAT)
        .ok()?
        .and_utc();
    (at.format(STAMP_FORMAT).to_string() == stamp).then_some((at, counter))
}

/// What a restore did.
#[derive(Debug, Clone)]
pub struct RestoreOutcome {
    /// The database the backup now is (a SQLite file's path, or a PostgreSQL URL).
    pub database: String,
    /// The restored archive's new identity.
    pub archive_id: String,
    /// The backup's own horizon: the reports it holds end there.
    pub backup_high_water: i64,
    /// New report versions get ids above this.
    pub id_floor: i64,
}

/// Restores `backup_file` as the database at `database_url`: refuses while a service runs on it, copies the
/// backup in (the old database, its WAL and shared-memory files are replaced), gives the archive a new identity
/// and moves report ids past every id the replaced archive can have handed out (its horizon when it can be
/// read, else the id reservation beside it; see `ids.rs`), so no cursor ever names two reports.
///
/// New ids continue above every id the replaced archive can have handed out: its own horizon when it can be
/// read, else its id reservation, and above `ids_above` when given. When the database and its reservation are
/// both lost, nothing here knows how far ids went, so the restore is refused unless `ids_above` says it (the
/// last `highWater` any consumer may have seen): a restore must never hand out an id a consumer holds.
pub async fn restore(
    backup_file: &Path,
    database_url: &str,
    ids_above: Option<i64>,
) -> anyhow::Result<RestoreOutcome> {
    refuse_postgres(database_url)?;
    let database = crate::database_path(database_url)?;
    let _lock = crate::ArchiveLock::acquire(&database)?;
    anyhow::ensure!(
        backup_file.is_file(),
        "backup {} does not exist",
        backup_file.display()
    );
    let backup_high_water = horizon_of(backup_file)
        .await
        .with_context(|| format!("{} is not an osds archive", backup_file.display()))?;
    // The replaced archive's own horizon when it can be read; else the reservation, which is at or above every
    // id it handed out.
    let replaced = if database.is_file() {
        horizon_of(&database).await.map_err(|e| {
            tracing::warn!(database = %database.display(), error = format!("{e:#}"), "the database being replaced cannot be read; ids continue after its id reservation");
        })
    } else {
        Err(())
    };
    let reserved = crate::ids::reserved(&database);
    let known = match (replaced, reserved, ids_above) {
        (Ok(horizon), _, _) => horizon,
        (Err(()), reserved, _) if reserved > 0 => reserved,
        (Err(()), _, Some(_)) => 0,
        (Err(()), _, None) => anyhow::bail!(
            "{} cannot be read and its id reservation ({}) is gone: nothing says how far report ids went, and \
             a consumer may hold a cursor above the backup's {backup_high_water}. Give --ids-above N, N at least \
             the last highWater anyone may have seen (your monitoring's, a consumer's cursor); new ids start above it",
            database.display(),
            crate::beside::beside(&database, "-ids").display()
        ),
    };
    let floor = backup_high_water.max(known).max(ids_above.unwrap_or(0));

    // The copy gets its final name only when complete and synced.
    let temporary = crate::beside::beside(&database, "-restoring");
    std::fs::copy(backup_file, &temporary)
        .with_context(|| format!("copy {} to {}", backup_file.display(), temporary.display()))?;
    std::fs::File::open(&temporary)?.sync_all()?;
    for suffix in ["-wal", "-shm"] {
        match std::fs::remove_file(crate::beside::beside(&database, suffix)) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).context("remove the replaced database's WAL"),
        }
    }
    std::fs::rename(&temporary, &database)
        .with_context(|| format!("move the restored database to {}", database.display()))?;
    if let Some(parent) = database.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::File::open(parent)?.sync_all()?;
    }

    let (store, mut writer) = crate::open(database_url).await?;
    let archive_id = writer.mark_restored(floor).await?;
    drop(store);
    writer.close().await?;
    Ok(RestoreOutcome {
        database: database.display().to_string(),
        archive_id,
        backup_high_water,
        id_floor: floor,
    })
}

/// The report horizon of the archive file at `path`, read without writing to it.
async fn horizon_of(path: &Path) -> anyhow::Result<i64> {
    let mut conn = SqliteConnectOptions::new()
        .filename(path)
        .read_only(true)
        .disable_statement_logging()
        .connect()
        .await?;
    let highest: i64 = sqlx::query_scalar("SELECT COALESCE(MAX(id), 0) FROM reports")
        .fetch_one(&mut conn)
        .await?;
    // Archives from before the id floor have no `archive` table.
    let floor: i64 = sqlx::query_scalar(
        "SELECT COALESCE((SELECT id_floor FROM archive), 0) WHERE EXISTS \
         (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'archive')",
    )
    .fetch_optional(&mut conn)
    .await
    .unwrap_or(None)
    .unwrap_or(0);
    conn.close().await?;
    Ok(highest.max(floor))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_parsed_strictly_and_ordered_by_time_then_counter() {
        let (at, n) = parse_name("osds-20260828T051356Z.db").unwrap();
        assert_eq!((rfc3339(at).as_str(), n), ("2026-08-28T05:13:56.000Z", 0));
        assert_eq!(parse_name("osds-20260828T051356Z-12.db").unwrap().1, 12);
        for other in [
            "osds.db",
            "osds-20260828T051356Z.db-wal",
            "osds-20260828T051356Z-0.db",
            "osds-20260828T051356Z-01.db",
            "osds-20260828T051356Z--1.db",
            "osds-2026082T051356Z.db",
            "osds-20261328T051356Z.db",
            "osds-old.db",
            ".osds-20260828T051356Z-1-0.tmp",
        ] {
            assert_eq!(parse_name(other), None, "{other}");
        }
        let mut keys = [
            parse_name("osds-20260828T051356Z-10.db").unwrap(),
            parse_name("osds-20260828T051357Z.db").unwrap(),
            parse_name("osds-20260828T051356Z-2.db").unwrap(),
            parse_name("osds-20260828T051356Z.db").unwrap(),
        ];
        keys.sort();
        assert_eq!(keys.iter().map(|k| k.1).collect::<Vec<_>>(), [0, 2, 10, 0]);
    }

    #[test]
    fn a_path_with_nul_is_refused() {
        assert!(sql_path(Path::new("/tmp/a\0b.db")).is_err());
        assert_eq!(sql_path(Path::new("/tmp/it's.db")).unwrap(), "/tmp/it's.db");
    }
    /// A restore over a database that is gone (a lost disk partition, a deleted file) still moves report ids
    /// past every id it handed out: the reservation beside it knows how far they went.
    #[tokio::test(flavor = "multi_thread")]
    async fn a_restore_over_a_lost_database_continues_above_its_id_reservation() {
        use crate::test_archive::{archive, frames};
        let (_store, mut writer, dir) = archive("restore-lost", 5).await;
        let url = format!("sqlite://{}/osds.db", dir.display());
        let backup = backup(&url, &dir.join("backups"), 1)
            .await
            .unwrap()
            .backup
            .path;
        let session = crate::test_archive::cq_session(&mut writer).await;
        writer.ingest(&frames(session, 6..=8)).await.unwrap();
        assert_eq!(writer.high_water(), 8);
        drop(writer);
        for name in ["osds.db", "osds.db-wal", "osds.db-shm"] {
            let _ = std::fs::remove_file(dir.join(name));
        }

        let outcome = restore(&backup, &url, None).await.unwrap();
        assert_eq!(outcome.backup_high_water, 5);
        assert!(outcome.id_floor >= 8, "{outcome:?}");
        let (store, mut writer) = crate::open(&url).await.unwrap();
        assert_eq!(store.archive_id(), outcome.archive_id);
        assert_eq!(store.high_water().await.unwrap(), outcome.id_floor);
        let session = crate::test_archive::cq_session(&mut writer).await;
        let summary = writer.ingest(&frames(session, 100..=100)).await.unwrap();
        let ids: Vec<i64> = summary.new_versions.iter().map(|v| v.id.0).collect();
        assert_eq!(ids, [outcome.id_floor + 1]);
        let _ = std::fs::remove_dir_all(dir);
    }

    /// Every loss a restore can meet: what survives decides the floor, and when nothing says how far ids went
    /// the restore is refused unless `--ids-above` says it. In no case does a new id repeat one handed out.
    #[tokio::test(flavor = "multi_thread")]
    async fn a_restore_never_reuses_an_id_whatever_was_lost() {
        use crate::test_archive::{archive, frames};
        #[derive(Debug, Clone, Copy)]
        enum Loss {
            Nothing,
            Database,
            Reservation,
            Both,
            DamagedAndReservation,
        }
        for (loss, ids_above, expected_floor) in [
            (Loss::Nothing, None, Some(8..=8)),
            (Loss::Database, None, Some(8..=8 + 1024)),
            (Loss::Reservation, None, Some(8..=8)),
            (Loss::Both, None, None),
            (Loss::DamagedAndReservation, None, None),
            (Loss::Both, Some(8), Some(8..=8)),
            (Loss::DamagedAndReservation, Some(20), Some(20..=20)),
            (Loss::Nothing, Some(30), Some(30..=30)),
        ] {
            let what = format!("{loss:?} lost, --ids-above {ids_above:?}");
            let (_store, mut writer, dir) = archive("restore-loss", 5).await;
            let url = format!("sqlite://{}/osds.db", dir.display());
            let backup = backup(&url, &dir.join("backups"), 1)
                .await
                .unwrap()
                .backup
                .path;
            let session = crate::test_archive::cq_session(&mut writer).await;
            writer.ingest(&frames(session, 6..=8)).await.unwrap();
            assert_eq!(writer.high_water(), 8, "a consumer may hold cursor 8");
            writer.close().await.unwrap();
            let remove = |name: &str| {
                let _ = std::fs::remove_file(dir.join(name));
            };
            if matches!(loss, Loss::Database | Loss::Both) {
                ["osds.db", "osds.db-wal", "osds.db-shm"]
                    .into_iter()
                    .for_each(remove);
            }
            if matches!(loss, Loss::DamagedAndReservation) {
                std::fs::write(dir.join("osds.db"), b"not a database").unwrap();
            }
            if matches!(
                loss,
                Loss::Reservation | Loss::Both | Loss::DamagedAndReservation
            ) {
                remove("osds.db-ids");
            }
            let outcome = restore(&backup, &url, ids_above).await;
            match expected_floor {
                None => {
                    let error = format!("{:#}", outcome.unwrap_err());
                    assert!(error.contains("--ids-above"), "{what}: {error}");
                }
                Some(floor) => {
                    let outcome = outcome.unwrap_or_else(|e| panic!("{what}: {e:#}"));
                    assert!(floor.contains(&outcome.id_floor), "{what}: {outcome:?}");
                    let (_, mut writer) = crate::open(&url).await.unwrap();
                    let session = crate::test_archive::cq_session(&mut writer).await;
                    let summary = writer.ingest(&frames(session, 100..=100)).await.unwrap();
                    assert_eq!(summary.new_versions[0].id.0, outcome.id_floor + 1, "{what}");
                    writer.close().await.unwrap();
                }
            }
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}
