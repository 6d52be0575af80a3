//! `osds restore BACKUP`: puts a backup back as the archive, with the service stopped (a PostgreSQL archive is
//! put back with `pg_restore`, then marked restored with `osds restore --ids-above N`). The restored archive
//! gets a new `archiveId`, and its report ids continue above every id the replaced archive can have handed
//! out, so a consumer's cursor never names two different reports.

use osds_store::backup;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct RestoreArgs {
    /// The backup file (`osds-YYYYMMDDTHHMMSSZ.db`, as `osds backup` and the service write them). Not for a
    /// PostgreSQL archive, restored with `pg_restore` before this command runs (see --ids-above).
    #[arg(value_name = "BACKUP")]
    pub backup: Option<PathBuf>,
    /// The highest report id the replaced archive may have handed out (its last `highWater` anyone saw); new
    /// ids continue above it and above the restored archive's. Required for PostgreSQL (after `pg_restore`),
    /// and for SQLite when the database and its id reservation (`<database>-ids`) are both lost; otherwise
    /// SQLite knows how far ids went, and this only raises the floor.
    #[arg(long, value_name = "ID", value_parser = clap::value_parser!(i64).range(0..))]
    pub ids_above: Option<i64>,
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
    let outcome = if osds_store::is_postgres_url(&args.database_url) {
        let (None, Some(ids_above)) = (&args.backup, args.ids_above) else {
            anyhow::bail!(
                "a PostgreSQL archive is restored with pg_restore, then `osds restore --database-url URL \
                 --ids-above N` (no BACKUP file; N: the replaced archive's last highWater)"
            );
        };
        println!("osds: marking {} as restored", args.database_url);
        runtime.block_on(backup::restore_postgres(&args.database_url, ids_above))?
    } else {
        let Some(backup) = &args.backup else {
            anyhow::bail!("a SQLite archive is restored from a BACKUP file: `osds restore BACKUP`");
        };
        println!(
            "osds: restoring {} into {}",
            backup.display(),
            args.database_url
        );
        runtime.block_on(backup::restore(backup, &args.database_url, args.ids_above))?
    };
    println!(
        "osds: restored {} (reports up to id {}); archiveId {}; new report ids start after {}",
        outcome.database, outcome.backup_high_water, outcome.archive_id, outcome.id_floor
    );
    Ok(ExitCode::SUCCESS)
}
