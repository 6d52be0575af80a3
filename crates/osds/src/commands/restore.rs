//! `osds restore BACKUP`: puts a backup back as the archive, with the service stopped. The restored archive
//! gets a new `archiveId`, and its report ids continue above every id the replaced archive can have handed
//! out, so a consumer's cursor never names two different reports.

use osds_store::backup;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct RestoreArgs {
    /// The backup file (`osds-YYYYMMDDTHHMMSSZ.db`, as `osds backup` and the service write them).
    #[arg(value_name = "BACKUP")]
    pub backup: PathBuf,
    /// The archive to replace. Refused while an `osds serve` runs on it.
    #[arg(
        long,
        env = "OSDS_DATABASE_URL",
        default_value = osds_store::DEFAULT_DATABASE_URL
    )]
    pub database_url: String,
}

pub fn run(args: RestoreArgs) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    println!(
        "osds: restoring {} into {}",
        args.backup.display(),
        args.database_url
    );
    let outcome = runtime.block_on(backup::restore(&args.backup, &args.database_url))?;
    println!(
        "osds: restored {} (reports up to id {}); archiveId {}; new report ids start after {}",
        outcome.database.display(),
        outcome.backup_high_water,
        outcome.archive_id,
        outcome.id_floor
    );
    Ok(ExitCode::SUCCESS)
}
