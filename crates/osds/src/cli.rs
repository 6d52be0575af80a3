//! The `osds` command line.

use crate::commands;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Parser)]
#[command(name = "osds", version, about = "Open Seismic Data Service: a public, read-only seismic data API", long_about = None)]
pub struct Cli {
    /// TOML file of settings: keys are the long flag names (e.g. `database-url = "sqlite://..."`).
    /// Flags beat environment variables (OSDS_*), which beat the file.
    #[arg(long, global = true, env = "OSDS_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Log filter (tracing `EnvFilter` syntax), e.g. `info` or `osds=debug`; `osds_api=debug` logs every HTTP
    /// request with its route, status and latency.
    #[arg(long, global = true, env = "OSDS_LOG", default_value = "info")]
    pub log: String,

    /// Log lines as text (coloured only when stderr is a terminal) or as one JSON object each.
    #[arg(
        long,
        global = true,
        env = "OSDS_LOG_FORMAT",
        value_enum,
        default_value = "text"
    )]
    pub log_format: LogFormat,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the service: ingest from the upstream relay, archive, and serve the API.
    Serve(Box<commands::serve::ServeArgs>),
    /// Decode upstream frames from files through the loaded decoder components and print them as JSON.
    Decode(commands::decode::DecodeArgs),
    /// Operate the decoders of a running server: list, check, install (hot swap) or roll back a component.
    Components(commands::components::ComponentsArgs),
    /// Re-decode archived payloads that are still unparsed with the current decoders (appends, never edits).
    Reparse(commands::reparse::ReparseArgs),
    /// The self-sensing archive: import detector solutions, hide or unhide an event.
    Hyp(commands::hyp::HypArgs),
    /// Run a synthetic earthquake end to end through the detector into the archive, printing each report.
    Simulate(commands::simulate::SimulateArgs),
    /// Take a consistent backup of the archive now (safe while `osds serve` runs) and rotate old backups.
    Backup(commands::backup::BackupArgs),
    /// Restore a backup as the archive (the service stopped): a new archiveId, report ids never reused.
    Restore(commands::restore::RestoreArgs),
}

pub fn main() -> ExitCode {
    let args: Vec<_> = std::env::args_os().collect();
    let command = Cli::command();
    let configured =
        crate::config::check_environment(&command, std::env::vars_os().map(|(name, _)| name))
            .and_then(|()| crate::config::with_file(command, &args));
    let (command, file_keys) = match configured {
        Ok(configured) => configured,
        Err(e) => {
            eprintln!("osds: {e:#}");
            return ExitCode::from(2);
        }
    };
    let root = command.clone();
    let matches = command.get_matches_from(args.clone());
    let mut path = Vec::new();
    let mut current = &matches;
    while let Some((name, sub)) = current.subcommand() {
        path.push(name.to_string());
        current = sub;
    }
    if let Err(e) = crate::config::check_applicable(&root, &path, &file_keys) {
        eprintln!("osds: {e:#}");
        return ExitCode::from(2);
    }
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    if let Err(e) = init_logging(&cli.log, cli.log_format) {
        eprintln!("osds: {e:#}");
        return ExitCode::from(2);
    }
    let result = match cli.command {
        Command::Serve(args) => commands::serve::run(*args),
        Command::Decode(args) => commands::decode::run(args),
        Command::Components(args) => commands::components::run(args),
        Command::Reparse(args) => commands::reparse::run(args),
        Command::Hyp(args) => commands::hyp::run(args),
        Command::Simulate(args) => commands::simulate::run(args),
        Command::Backup(args) => commands::backup::run(args),
        Command::Restore(args) => commands::restore::run(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("osds: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn init_logging(filter: &str, format: LogFormat) -> anyhow::Result<()> {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_new(filter)
        .map_err(|e| anyhow::anyhow!("--log `{filter}` is not a log filter: {e}"))?;
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => logs.with_ansi(std::io::stderr().is_terminal()).init(),
        LogFormat::Json => logs.json().init(),
    }
    Ok(())
}
