//! `osds hyp import | hide | unhide | backfill`: the operator's side of the self-sensing archive. `import`
//! appends detector solutions (JSON lines) through the shaper component, exactly as the detector does; `hide`
//! withdraws an event from the public API; `backfill` adds station peaks recovered from the image archive.

use super::detector_args::ImageArgs;
use anyhow::Context;
use hyp_core::EventStatus;
use osds_runtime::{Limits, Runtime, ShaperComponent};
use osds_server::hyp::backfill::{self, Refetch};
use osds_server::hyp::source::Schedule;
use osds_store::{self, HypReportInput, StationMetric};
use serde::Deserialize;
use serde_json::Value;
use std::io::BufRead;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct HypArgs {
    /// The archive.
    #[arg(
        long,
        global = true,
        env = "OSDS_DATABASE_URL",
        default_value = osds_store::DEFAULT_DATABASE_URL
    )]
    pub database_url: String,
    #[command(subcommand)]
    pub action: HypAction,
}

#[derive(Debug, clap::Subcommand)]
pub enum HypAction {
    /// Append detector solutions from JSON-lines files (`-` for standard input). Each line is a solution, or
    /// `{"solution": {...}, "stationMetrics": [...]}` with the event-level station peaks.
    Import {
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Shape with this shaper component instead of the one a server on the archive shapes with (the
        /// built-in one, or the one installed with `osds components install hyp`).
        #[arg(long, value_name = "FILE")]
        shaper: Option<PathBuf>,
    },
    /// Withdraw an event from the public API (it answers 404 like a missing one).
    Hide { event_id: String },
    /// Publish a hidden event again.
    Unhide { event_id: String },
    /// Add the peaks of an event's stations recovered later from the recorder's image archive, marked
    /// `recovered` (reports are never rewritten). With --refetch, images of the event's window that the live
    /// fetch missed are first asked for again from --kmoni-url.
    Backfill {
        event_id: String,
        #[command(flatten)]
        images: ImageArgs,
        /// Ask the image server again for the window's images that the archive lacks.
        #[arg(long)]
        refetch: bool,
    },
}

pub fn run(args: HypArgs) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(hyp(args))
}

fn field_i64(solution: &Value, name: &str) -> anyhow::Result<i64> {
    solution[name]
        .as_i64()
        .with_context(|| format!("`{name}` must be an integer (Unix ms or a number)"))
}

/// The report to append for one input line: the solution shaped by the component, and its station peaks.
fn prepare(shaper: &ShaperComponent, line: &str) -> anyhow::Result<HypReportInput> {
    let value: Value = serde_json::from_str(line).context("not JSON")?;
    let (solution, metrics) = match value.get("solution") {
        Some(solution) => (solution.clone(), value.get("stationMetrics").cloned()),
        None => (value, None),
    };
    let metrics: Vec<StationMetric> = match metrics {
        Some(metrics) => serde_json::from_value(metrics).context("`stationMetrics`")?,
        None => Vec::new(),
    };
    let solution_bytes = solution.to_string().into_bytes();
    let payload = shaper.shape(&solution_bytes)?;
    Ok(HypReportInput {
        event_id: solution["eventId"]
            .as_str()
            .context("`eventId` must be a string")?
            .to_string(),
        number: field_i64(&solution, "reportNumber")?,
        status: EventStatus::deserialize(&solution["status"]).context("`status`")?,
        first_at: field_i64(&solution, "firstDetectedAt")?,
        reported_at: field_i64(&solution, "reportedAt")?,
        recorded_at: field_i64(&solution, "recordedAt")?,
        region: solution["region"].as_str().map(str::to_string),
        payload,
        shaper: shaper.info().identity(),
        solution: solution_bytes,
        metrics,
    })
}

async fn hyp(args: HypArgs) -> anyhow::Result<ExitCode> {
    let (store, mut writer) = osds_store::open_existing(&args.database_url).await?;
    match args.action {
        HypAction::Backfill {
            event_id,
            images,
            refetch,
        } => {
            let network = images.network()?;
            let archive = osds_store::FrameArchive::open(&images.hyp_frames_url).await?;
            let refetch = if refetch {
                Some(Refetch {
                    // The range is chosen per missing image; the schedule is not used.
                    fetcher: images.fetcher(Schedule::Range {
                        from_ms: 0,
                        to_ms: 0,
                    })?,
                    layers: images.kmoni_layers.clone(),
                })
            } else {
                None
            };
            let summary =
                backfill::backfill(&store, &mut writer, &archive, &network, &event_id, refetch)
                    .await?;
            println!(
                "osds: hyp backfill {event_id}: {} seconds read, {} images recovered from the server, {} station peaks added or raised",
                summary.frames_read, summary.fetched_images, summary.peaks_added
            );
            Ok(ExitCode::SUCCESS)
        }
        HypAction::Hide { event_id } => {
            anyhow::ensure!(
                writer.set_hyp_hidden(&event_id, true).await?,
                "no event `{event_id}`"
            );
            println!("osds: `{event_id}` is hidden from the public API");
            Ok(ExitCode::SUCCESS)
        }
        HypAction::Unhide { event_id } => {
            anyhow::ensure!(
                writer.set_hyp_hidden(&event_id, false).await?,
                "no event `{event_id}`"
            );
            println!("osds: `{event_id}` is public again (if it ever left `candidate`)");
            Ok(ExitCode::SUCCESS)
        }
        HypAction::Import { files, shaper } => {
            let wasm = Runtime::new(Limits::default())?;
            let shaper = match shaper {
                Some(path) => {
                    let bytes =
                        std::fs::read(&path).with_context(|| format!("read {}", path.display()))?;
                    std::sync::Arc::new(ShaperComponent::load(&wasm, &bytes)?)
                }
                // What a server on this archive shapes with: the built-in shaper, or the one installed since.
                None => {
                    osds_server::hot_swap::installed_shaper(&wasm, &store)
                        .await?
                        .0
                }
            };
            let (mut imported, mut failed) = (0usize, 0usize);
            for file in files {
                let reader: Box<dyn BufRead> = if file.as_os_str() == "-" {
                    Box::new(std::io::stdin().lock())
                } else {
                    Box::new(std::io::BufReader::new(
                        std::fs::File::open(&file)
                            .with_context(|| format!("open {}", file.display()))?,
                    ))
                };
                for (index, line) in reader.lines().enumerate() {
                    let line = line.with_context(|| format!("read {}", file.display()))?;
                    if line.trim().is_empty() {
                        continue;
                    }
                    let appended = match prepare(&shaper, &line) {
                        Ok(input) => writer
                            .append_hyp_report(&input)
                            .await
                            .map(|sha| (input, sha))
                            .map_err(anyhow::Error::from),
                        Err(e) => Err(e),
                    };
                    match appended {
                        Ok((input, sha256)) => {
                            imported += 1;
                            eprintln!(
                                "hyp import: {} report {} ({}) sha256 {sha256}",
                                input.event_id, input.number, input.status
                            );
                        }
                        Err(e) => {
                            failed += 1;
                            eprintln!("hyp import: {}:{}: {e:#}", file.display(), index + 1);
                        }
                    }
                }
            }
            println!("osds: hyp import: {imported} reports appended, {failed} refused");
            Ok(if failed == 0 {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
    }
}
