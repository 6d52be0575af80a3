//! The self-sensing detector's settings, shared by `osds serve` (which runs it) and `osds hyp backfill`
//! (which reads the same images and station table).

use anyhow::Context;
use osds_detector::detector::DetectorConfig;
use osds_detector::kmoni::{self, Layer, SURFACE_INTENSITY};
use osds_detector::stations;
use osds_detector::stations::Network;
use osds_detector::traveltime::Model;
use osds_server::hyp::source::{KmoniFetcher, Schedule};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum HypSource {
    /// No detector runs.
    Off,
    /// Follow the strong-motion monitor images in real time (--kmoni-url).
    Kmoni,
    /// Replay the images the recorder archived (--replay-from/--replay-to), then stop.
    Replay,
}

/// Where the images come from and which stations are read.
#[derive(Debug, Clone, clap::Args)]
pub struct ImageArgs {
    /// Station table: CSV with network, code, name, region, suspended, lat, lon, img_x, img_y [default: the
    /// shipped NIED K-NET/KiK-net table with its monitor pixels].
    #[arg(long, env = "OSDS_STATIONS", value_name = "FILE")]
    pub stations: Option<PathBuf>,
    /// Base URL of the strong-motion monitor image server.
    #[arg(long, env = "OSDS_KMONI_URL", default_value = kmoni::DEFAULT_BASE_URL, value_name = "URL")]
    pub kmoni_url: String,
    /// Image layers fetched each second (jma|acmap|vcmap|dcmap _s|_b); the detector triggers on jma_s.
    #[arg(
        long,
        env = "OSDS_KMONI_LAYERS",
        value_delimiter = ',',
        default_value = "jma_s,jma_b,acmap_s,acmap_b",
        value_parser = Layer::parse
    )]
    pub kmoni_layers: Vec<Layer>,
    /// The recorder's image archive (its own SQLite file).
    #[arg(long, env = "OSDS_HYP_FRAMES_URL", default_value = osds_store::DEFAULT_FRAMES_URL, value_name = "URL")]
    pub hyp_frames_url: String,
}

impl ImageArgs {
    /// The usable stations of the operator's table, or of the shipped one (an error when none is usable).
    pub fn network(&self) -> anyhow::Result<Network> {
        let (name, table) = match &self.stations {
            Some(path) => (path.display().to_string(), stations::load(path)?),
            None => ("shipped K-NET/KiK-net".to_string(), stations::shipped()),
        };
        let network = Network::from_table(&table);
        anyhow::ensure!(
            !network.stations.is_empty(),
            "{name}: no usable station (in service, with img_x/img_y)"
        );
        tracing::info!(table = %name, rows = table.len(), usable = network.stations.len(), "station table loaded");
        Ok(network)
    }

    pub fn fetcher(&self, schedule: Schedule) -> anyhow::Result<KmoniFetcher> {
        KmoniFetcher::new(
            &self.kmoni_url,
            self.kmoni_layers.clone(),
            SURFACE_INTENSITY,
            schedule,
        )
    }
}

/// `osds serve`'s detector settings.
#[derive(Debug, Clone, clap::Args)]
pub struct DetectorArgs {
    /// Run the self-sensing detector on this source.
    #[arg(long, env = "OSDS_HYP_SOURCE", value_enum, default_value_t = HypSource::Off)]
    pub hyp_source: HypSource,
    #[command(flatten)]
    pub images: ImageArgs,
    /// Seconds behind this machine's clock an observation second's images are asked for while the monitor
    /// does not tell the time of its latest image (it is followed when it does).
    #[arg(long, env = "OSDS_KMONI_DELAY_SECS", default_value_t = 1.5)]
    pub kmoni_delay_secs: f64,
    /// Further seconds a late, missing or repeated image is asked for again (once a second) before the second
    /// is a gap.
    #[arg(long, env = "OSDS_KMONI_PATIENCE_SECS", default_value_t = 5.0)]
    pub kmoni_patience_secs: f64,
    /// Hours of fetched images the recorder keeps; 0: record nothing.
    #[arg(long, env = "OSDS_HYP_RECORD_HOURS", default_value_t = 6.0)]
    pub hyp_record_hours: f64,
    /// Travel times to locate with: a table (CSV with depth_km, distance_km, p_ms, s_ms on a full grid), or
    /// `homogeneous` for straight rays at Vp 6.0 / Vs 3.5 km/s [default: the shipped JMA2001 table].
    #[arg(long, env = "OSDS_TRAVEL_TIMES", value_name = "FILE|homogeneous")]
    pub travel_times: Option<PathBuf>,
    /// First observation time replayed (RFC 3339), with --hyp-source replay.
    #[arg(long, env = "OSDS_REPLAY_FROM", value_name = "TIME", value_parser = parse_time)]
    pub replay_from: Option<i64>,
    /// Last observation time replayed (RFC 3339), with --hyp-source replay.
    #[arg(long, env = "OSDS_REPLAY_TO", value_name = "TIME", value_parser = parse_time)]
    pub replay_to: Option<i64>,
}

fn parse_time(text: &str) -> Result<i64, String> {
    osds_time::parse_ms(text)
        .ok_or_else(|| format!("`{text}` is not an RFC 3339 time like 2024-01-01T07:10:00Z"))
}

impl DetectorArgs {
    /// The detector's settings: the defaults with the travel times chosen here.
    pub fn detector_config(&self) -> anyhow::Result<DetectorConfig> {
        let mut config = DetectorConfig::default();
        if let Some(argument) = &self.travel_times {
            config.travel_times = Arc::new(Model::from_argument(argument)?);
        }
        Ok(config)
    }

    pub fn live_schedule(&self) -> anyhow::Result<Schedule> {
        let seconds = |name: &str, value: f64| {
            Duration::try_from_secs_f64(value)
                .ok()
                .with_context(|| format!("--{name} must be a number of seconds ≥ 0"))
        };
        Ok(Schedule::Live {
            fallback_delay: seconds("kmoni-delay-secs", self.kmoni_delay_secs)?,
            patience: seconds("kmoni-patience-secs", self.kmoni_patience_secs)?,
        })
    }

    /// How long recorded images are kept, or `None` when the recorder is off.
    pub fn retention(&self) -> anyhow::Result<Option<Duration>> {
        anyhow::ensure!(
            self.hyp_record_hours.is_finite() && self.hyp_record_hours >= 0.0,
            "--hyp-record-hours must be a number of hours ≥ 0"
        );
        Ok((self.hyp_record_hours > 0.0)
            .then(|| Duration::from_secs_f64(self.hyp_record_hours * 3600.0)))
    }
}
