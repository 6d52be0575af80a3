//! `osds simulate SCENARIO`: a synthetic earthquake with known truth, run end to end. The scenario's frames
//! are rendered as monitor-layout GIFs and served over a local HTTP server in the kmoni layout; the real
//! fetcher reads them, the detector runs, the shaper component shapes, the archive stores, and each report is
//! printed as it is issued. With `--serve-images` it is only the image server, in real time, for an
//! `osds serve --hyp-source kmoni` to follow. The scenarios, the rendering and the image server are
//! `osds_server::hyp::simulation`; this is the command line over them.

use anyhow::Context;
use osds_detector::detector::DetectorConfig;
use osds_detector::kmoni::{Layer, SURFACE_INTENSITY};
use osds_detector::stations::Network;
use osds_runtime::{Limits, Runtime, ShaperComponent};
use osds_server::hyp::runner::Runner;
use osds_server::hyp::simulation::{
    LAYERS, Publication, Scenario, image_server, network, render_images, schedule_images, setup,
    station_table,
};
use osds_server::hyp::source::Schedule;
use osds_store as store;
use osds_time::now_ms;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

/// A scenario as the command line names it (the table is `osds_server::hyp::simulation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScenarioArg(pub Scenario);

impl clap::ValueEnum for ScenarioArg {
    fn value_variants<'a>() -> &'a [Self] {
        const ALL: [ScenarioArg; 7] = [
            ScenarioArg(Scenario::ALL[0]),
            ScenarioArg(Scenario::ALL[1]),
            ScenarioArg(Scenario::ALL[2]),
            ScenarioArg(Scenario::ALL[3]),
            ScenarioArg(Scenario::ALL[4]),
            ScenarioArg(Scenario::ALL[5]),
            ScenarioArg(Scenario::ALL[6]),
        ];
        &ALL
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(clap::builder::PossibleValue::new(self.0.name()).help(self.0.about()))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SimulatedNetwork {
    /// A 20 km grid of synthetic stations around the scenario.
    Synthetic,
    /// The shipped K-NET/KiK-net stations with their monitor pixels.
    Shipped,
}

#[derive(Debug, clap::Args)]
pub struct SimulateArgs {
    pub scenario: ScenarioArg,
    /// The archive the reports go to; created when missing (unlike every other command but `serve`, a
    /// simulation may start an archive of its own).
    #[arg(
        long,
        env = "OSDS_DATABASE_URL",
        default_value = osds_store::DEFAULT_DATABASE_URL
    )]
    pub database_url: String,
    /// Seconds of frames to run.
    #[arg(long, default_value_t = 150)]
    pub seconds: u64,
    /// Seed of the noise and dropouts.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Do not run the detector: serve the scenario's images at this address in real time (frame n is the
    /// observation second n seconds after start, available one second later), until stopped.
    #[arg(long, value_name = "ADDR")]
    pub serve_images: Option<SocketAddr>,
    /// The stations the scenario is observed by: a synthetic 20 km grid around it, or the shipped K-NET/KiK-net
    /// table at its real monitor pixels (what `osds serve` reads by default).
    #[arg(long, value_enum, default_value_t = SimulatedNetwork::Synthetic)]
    pub network: SimulatedNetwork,
    /// Write the scenario's station table (the CSV `--stations` reads) to this file.
    #[arg(long, value_name = "FILE")]
    pub write_stations: Option<PathBuf>,
    /// With --serve-images: the images of LAYER become available SECONDS late (LAYER=SECONDS, repeatable),
    /// as when the live fetch misses them and a backfill finds them later.
    #[arg(long, value_name = "LAYER=SECONDS", value_parser = parse_late)]
    pub late: Vec<(Layer, u64)>,
    /// With --serve-images: seconds from start until the scenario's first observation second.
    #[arg(long, default_value_t = 10)]
    pub lead_secs: u64,
    #[command(flatten)]
    pub publication: PublicationArgs,
}

/// How the served images are published (with --serve-images), the way the real monitor does: late by a second
/// or two with spread, some never, some first as the previous second's image, none during an outage; and the
/// time of its latest image at `webservice/server/pros/latest.json`.
#[derive(Debug, Clone, clap::Args)]
pub struct PublicationArgs {
    /// Seconds after its observation second an image is published.
    #[arg(long, default_value_t = 1.0, value_name = "SECONDS")]
    pub publish_delay_secs: f64,
    /// Up to this many seconds more, drawn per second from the seed.
    #[arg(long, default_value_t = 0.0, value_name = "SECONDS")]
    pub publish_spread_secs: f64,
    /// Share of seconds whose images are never published.
    #[arg(long, default_value_t = 0.0, value_name = "SHARE")]
    pub lose: f64,
    /// Share of seconds whose address serves the previous second's image for their first 3 s.
    #[arg(long, default_value_t = 0.0, value_name = "SHARE")]
    pub repeat: f64,
    /// Frames FROM..TO (seconds from the first) are published only when the outage ends.
    #[arg(long, value_name = "FROM..TO", value_parser = parse_frames)]
    pub outage: Option<std::ops::Range<u64>>,
    /// Do not serve the latest image's time (a follower falls back to its own clock).
    #[arg(long)]
    pub no_clock: bool,
}

impl From<&PublicationArgs> for Publication {
    fn from(args: &PublicationArgs) -> Publication {
        Publication {
            publish_delay_secs: args.publish_delay_secs,
            publish_spread_secs: args.publish_spread_secs,
            lose: args.lose,
            repeat: args.repeat,
            outage: args.outage.clone(),
            no_clock: args.no_clock,
        }
    }
}

fn parse_frames(text: &str) -> Result<std::ops::Range<u64>, String> {
    let (from, to) = text
        .split_once("..")
        .ok_or_else(|| format!("`{text}`: expected FROM..TO, e.g. 24..30"))?;
    let number = |n: &str| {
        n.parse::<u64>()
            .map_err(|_| format!("`{n}` is not a frame number"))
    };
    let (from, to) = (number(from)?, number(to)?);
    if from >= to {
        return Err(format!("`{text}`: FROM must come before TO"));
    }
    Ok(from..to)
}

fn parse_late(text: &str) -> Result<(Layer, u64), String> {
    let (layer, seconds) = text
        .split_once('=')
        .ok_or_else(|| format!("`{text}`: expected LAYER=SECONDS, e.g. acmap_s=30"))?;
    let seconds = seconds
        .parse()
        .map_err(|_| format!("`{seconds}` is not a number of seconds"))?;
    Ok((Layer::parse(layer)?, seconds))
}

pub fn run(args: SimulateArgs) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(simulate(args))
}

async fn simulate(args: SimulateArgs) -> anyhow::Result<ExitCode> {
    let scenario = args.scenario.0;
    let setup = setup(scenario);
    let network = match args.network {
        SimulatedNetwork::Synthetic => network(&setup.stations),
        SimulatedNetwork::Shipped => Network::shipped(),
    };
    if let Some(path) = &args.write_stations {
        std::fs::write(path, station_table(&network))
            .with_context(|| format!("write {}", path.display()))?;
    }
    let rendered = render_images(&setup, &network, args.seconds, args.seed);
    if let Some(address) = args.serve_images {
        // Real time: frame 0 is observed --lead-secs from now, so a follower can start first.
        let start_ms = (now_ms() / 1000 + 1) * 1000 + args.lead_secs as i64 * 1000;
        let images = schedule_images(
            rendered,
            start_ms,
            &args.late,
            &Publication::from(&args.publication),
            args.seed,
        );
        let base = image_server(address, images).await?;
        println!("osds: simulate {}: images at {base}", scenario.name());
        eprintln!(
            "simulate {}: {} stations, {} s of frames from {}; Ctrl-C stops",
            scenario.name(),
            network.stations.len(),
            args.seconds,
            osds_time::rfc3339(
                chrono::DateTime::from_timestamp_millis(start_ms).unwrap_or_default()
            )
        );
        tokio::signal::ctrl_c().await?;
        return Ok(ExitCode::SUCCESS);
    }

    let images = schedule_images(
        rendered,
        setup.start_ms,
        &[],
        &Publication {
            publish_delay_secs: 1.0,
            publish_spread_secs: 0.0,
            lose: 0.0,
            repeat: 0.0,
            outage: None,
            no_clock: true,
        },
        args.seed,
    );
    let base = image_server("127.0.0.1:0".parse()?, images).await?;
    let wasm = Runtime::new(Limits::default())?;
    let shaper = Arc::new(arc_swap::ArcSwap::from_pointee(ShaperComponent::embedded(
        &wasm,
    )?));
    let (store, writer) = store::open(&args.database_url).await?;
    let layers = LAYERS
        .map(|l| Layer::parse(l).expect("a known layer"))
        .to_vec();
    let fetcher = osds_server::hyp::source::KmoniFetcher::new(
        &base,
        layers,
        SURFACE_INTENSITY,
        Schedule::Range {
            from_ms: setup.start_ms,
            to_ms: setup.start_ms + args.seconds as i64 * 1000,
        },
    )?;
    eprintln!(
        "simulate {}: {} stations, {} s of frames served at {base}",
        scenario.name(),
        network.stations.len(),
        args.seconds,
    );
    let (_running, shutdown) = tokio::sync::watch::channel(false);
    let reports = Runner::new(
        network,
        DetectorConfig::default(),
        store,
        writer,
        shaper,
        None,
    )
    .print_reports()
    .run(fetcher, shutdown)
    .await?;
    println!("osds: simulate: {reports} reports archived");
    Ok(ExitCode::SUCCESS)
}
