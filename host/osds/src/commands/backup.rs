//! `osds backup`: takes a consistent backup of the archive now, also while `osds serve` writes to it, and
//! rotates old backups. Backups stay on the same server: they are not off-site disaster recovery.

use osds_store::backup;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct BackupArgs {
    /// Database to back up. It must exist: a backup never creates or migrates one.
    #[arg(
        long,
        env = "OSDS_DATABASE_URL",
        default_value = osds_store::DEFAULT_DATABASE_URL
    )]
    pub database_url: String,
    /// Directory the backup (`osds-YYYYMMDDTHHMMSSZ.db`) is written to; created when missing.
    #[arg(
        long,
        env = "OSDS_BACKUP_DIR",
        value_name = "DIR",
        default_value = "data/backups"
    )]
    pub backup_dir: PathBuf,
    /// Backups kept in --backup-dir; older ones are deleted after this backup.
    #[arg(long, env = "OSDS_BACKUP_KEEP", default_value_t = 7, value_parser = clap::value_parser!(u32).range(1..))]
    pub backup_keep: u32,
}

pub fn run(args: BackupArgs) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    println!(
        "osds: backing up {} into {}",
        args.database_url,
        args.backup_dir.display()
    );
    let outcome = runtime.block_on(async {
        tokio::select! {
            outcome = backup::backup(&args.database_url, &args.backup_dir, args.backup_keep as usize) => outcome,
            // Dropping the backup removes its temporary file, so an interrupted run leaves nothing behind.
            _ = tokio::signal::ctrl_c() => Err(anyhow::anyhow!("interrupted; no backup was written")),
        }
    })?;
    for error in &outcome.rotation_errors {
        eprintln!("osds: {error}");
    }
    println!(
        "osds: backup {} ({} bytes, created {}); {} old backup(s) removed",
        outcome.backup.path.display(),
        outcome.backup.size_bytes,
        outcome.backup.created_at,
        outcome.removed.len()
    );
    // The backup is complete, but old ones piling up will fill the disk: make that visible to a scheduler.
    Ok(if outcome.rotation_errors.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
