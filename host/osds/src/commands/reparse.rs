//! `osds reparse`: the command line over `osds_server::reparse` — re-decodes archived payloads that are still
//! unparsed, and ignored ones of a `type` a decoder now claims, with the decoders a server on the archive runs
//! (the start-up ones and those installed since), with a progress bar and a summary.

use anyhow::Context;
use osds_runtime::DecoderSet;
use osds_runtime::{Limits, Runtime};
use osds_server::hot_swap::installed_decoders;
use osds_server::reparse::{Reparse, Scope};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

#[derive(Debug, clap::Args)]
pub struct ReparseArgs {
    /// The archive.
    #[arg(
        long,
        env = "OSDS_DATABASE_URL",
        default_value = osds_store::DEFAULT_DATABASE_URL
    )]
    pub database_url: String,
    /// Decoder components (`*.wasm`) a server on this archive starts with, instead of the built-in ones (what
    /// was installed on the archive since is used either way).
    #[arg(long, env = "OSDS_COMPONENTS_DIR", value_name = "DIR")]
    pub components_dir: Option<PathBuf>,
    /// Only deliveries of this channel (`source`).
    #[arg(long)]
    pub source: Option<String>,
    /// Only deliveries received at or after this time (RFC 3339, e.g. 2026-11-01T00:00:00Z).
    #[arg(long, value_name = "TIME")]
    pub since: Option<String>,
    /// Only deliveries received before this time (RFC 3339).
    #[arg(long, value_name = "TIME")]
    pub until: Option<String>,
    /// Decode and report what would be recovered, without writing anything.
    #[arg(long)]
    pub dry_run: bool,
}

fn rfc3339(flag: &str, value: &Option<String>) -> anyhow::Result<Option<String>> {
    match value {
        None => Ok(None),
        Some(text) => {
            let at = chrono::DateTime::parse_from_rfc3339(text).with_context(|| {
                format!("--{flag} must be an RFC 3339 time, e.g. 2026-11-01T00:00:00Z")
            })?;
            Ok(Some(osds_time::rfc3339(at.with_timezone(&chrono::Utc))))
        }
    }
}

pub fn run(args: ReparseArgs) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(reparse(args))
}

/// A progress bar on a terminal, a line every few seconds otherwise.
struct Progress {
    total: i64,
    done: i64,
    terminal: bool,
    last: Instant,
}

impl Progress {
    fn show(&mut self, force: bool) {
        if !force
            && self.last.elapsed() < Duration::from_millis(if self.terminal { 100 } else { 2000 })
        {
            return;
        }
        self.last = Instant::now();
        let share = if self.total == 0 {
            1.0
        } else {
            self.done as f64 / self.total as f64
        };
        let mut err = std::io::stderr();
        if self.terminal {
            let filled = (share * 30.0).round() as usize;
            let _ = write!(
                err,
                "\rreparse [{}{}] {}/{} ({:.0}%)",
                "#".repeat(filled),
                ".".repeat(30 - filled.min(30)),
                self.done,
                self.total,
                share * 100.0
            );
            if force {
                let _ = writeln!(err);
            }
        } else {
            let _ = writeln!(
                err,
                "reparse: {}/{} ({:.0}%)",
                self.done,
                self.total,
                share * 100.0
            );
        }
    }
}

async fn reparse(args: ReparseArgs) -> anyhow::Result<ExitCode> {
    let (store, mut writer) = osds_store::open_existing(&args.database_url).await?;
    let wasm = Runtime::new(Limits::default())?;
    // What a server on this archive runs: its start-up decoders, then what was installed on it since.
    let started_with = DecoderSet::load(&wasm, args.components_dir.as_deref())?;
    let decoders = installed_decoders(&wasm, started_with, &store).await?.set;
    for decoder in decoders.decoders() {
        let info = decoder.info();
        eprintln!(
            "reparse: `{}` decodes `{}` ({})",
            info.name,
            info.source,
            info.claims.join(", ")
        );
    }
    let scope = Scope {
        source: args.source.clone(),
        since: rfc3339("since", &args.since)?,
        until: rfc3339("until", &args.until)?,
    };
    let reparse = Reparse::plan(&store, decoders, scope).await?;
    eprintln!(
        "reparse: {} deliveries to go through (unparsed, or ignored of a type a decoder now claims) in {}{}",
        reparse.total(),
        args.database_url,
        if args.dry_run {
            " (dry run: nothing is written)"
        } else {
            ""
        }
    );
    let mut progress = Progress {
        total: reparse.total(),
        done: 0,
        terminal: std::io::stderr().is_terminal(),
        last: Instant::now(),
    };
    let writer = (!args.dry_run).then_some(&mut writer);
    let summary = reparse
        .run(&store, writer, |done| {
            progress.done = done;
            progress.show(false);
        })
        .await?;
    progress.show(true);
    let still: Vec<String> = summary
        .failing
        .iter()
        .map(|(k, n)| format!("{n} {k}"))
        .collect();
    let still = if still.is_empty() {
        "none".to_string()
    } else {
        still.join(", ")
    };
    if args.dry_run {
        println!(
            "reparse (dry run): {} examined, {} would be recovered, still failing: {still}",
            summary.examined, summary.recoverable
        );
    } else {
        println!(
            "reparse: {} examined, {} recovered ({} new versions, {} already archived), still failing: {still}",
            summary.examined, summary.recoverable, summary.new_versions, summary.duplicates
        );
    }
    Ok(ExitCode::SUCCESS)
}
