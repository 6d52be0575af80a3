//! `osds reparse`: re-decodes archived payloads that are still unparsed, and ignored ones of a `type` a decoder
//! now claims, with the decoders a server on the archive runs (the start-up ones and those installed since), and
//! appends the versions they yield (never editing what is stored). Safe while `osds serve` runs on the same database:
//! SQLite serialises the writers, and the server notices the new versions.

use anyhow::Context;
use osds_runtime::DecoderSet;
use osds_runtime::decoding::{self, Fallback, Outcome};
use osds_runtime::units;
use osds_runtime::{Limits, Runtime};
use osds_server::hot_swap::installed_decoders;
use osds_store::{self, ArchivedUnit, Recovered, UnparsedFilter};
use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// Deliveries read and committed per step.
const BATCH: i64 = 200;

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

/// What became of one unparsed delivery.
enum Fate {
    Recovered(Box<Recovered>),
    Failing(String),
}

fn decode_unit(decoders: &DecoderSet, unit: &ArchivedUnit) -> Fate {
    let Some(piece) = units::split(&unit.frame)
        .into_iter()
        .nth(unit.unit_index as usize)
    else {
        return Fate::Failing("unit-missing".into());
    };
    let fallback = unit
        .source
        .as_deref()
        .map_or(Fallback::None, Fallback::Source);
    match decoding::decode_unit(decoders, &piece, fallback) {
        Outcome::Report {
            report,
            identity,
            decoder,
        } => {
            let info = decoder.info();
            Fate::Recovered(Box::new(Recovered {
                delivery_id: unit.delivery_id,
                received_at: unit.received_at.clone(),
                source: info.source.clone(),
                identity,
                report,
                decoder_name: info.name.clone(),
                decoder_sha256: info.sha256.clone(),
            }))
        }
        other => Fate::Failing(
            other
                .failure()
                .map_or("unknown", |(kind, _)| kind.as_str())
                .into(),
        ),
    }
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
    // Frames archived as ignored before their channel's decoder was installed are gone through too.
    let ignored_tags = decoders
        .decoders()
        .iter()
        .filter(|d| args.source.as_ref().is_none_or(|s| *s == d.info().source))
        .flat_map(|d| d.info().claims.clone())
        .collect();
    let filter = UnparsedFilter {
        ignored_tags,
        source: args.source.clone(),
        since: rfc3339("since", &args.since)?,
        until: rfc3339("until", &args.until)?,
    };
    let total = store.count_unparsed(&filter).await?;
    eprintln!(
        "reparse: {total} deliveries to go through (unparsed, or ignored of a type a decoder now claims) in {}{}",
        args.database_url,
        if args.dry_run {
            " (dry run: nothing is written)"
        } else {
            ""
        }
    );
    let mut progress = Progress {
        total,
        done: 0,
        terminal: std::io::stderr().is_terminal(),
        last: Instant::now(),
    };
    let mut after = 0;
    let mut recoverable = 0usize;
    let mut new_versions = 0usize;
    let mut duplicates = 0usize;
    let mut failing: BTreeMap<String, usize> = BTreeMap::new();
    loop {
        let units = store.unparsed_deliveries(&filter, after, BATCH).await?;
        let Some(last) = units.last() else { break };
        after = last.delivery_id;
        progress.done += units.len() as i64;
        let decoders = decoders.clone();
        let fates = tokio::task::spawn_blocking(move || {
            units
                .iter()
                .map(|unit| decode_unit(&decoders, unit))
                .collect::<Vec<_>>()
        })
        .await
        .context("decoding failed")?;
        let mut recovered = Vec::new();
        for fate in fates {
            match fate {
                Fate::Recovered(item) => recovered.push(*item),
                Fate::Failing(kind) => *failing.entry(kind).or_default() += 1,
            }
        }
        recoverable += recovered.len();
        if !args.dry_run && !recovered.is_empty() {
            let summary = writer.recover(&recovered).await?;
            new_versions += summary.new_versions.len();
            duplicates += summary.duplicates;
        }
        progress.show(false);
    }
    progress.show(true);
    let still: Vec<String> = failing.iter().map(|(k, n)| format!("{n} {k}")).collect();
    let still = if still.is_empty() {
        "none".to_string()
    } else {
        still.join(", ")
    };
    if args.dry_run {
        println!(
            "reparse (dry run): {} examined, {recoverable} would be recovered, still failing: {still}",
            progress.done
        );
    } else {
        println!(
            "reparse: {} examined, {recoverable} recovered ({new_versions} new versions, {duplicates} already archived), still failing: {still}",
            progress.done
        );
    }
    Ok(ExitCode::SUCCESS)
}
