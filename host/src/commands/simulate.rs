//! `osds simulate SCENARIO`: a synthetic earthquake with known truth, run end to end through the detector, the
//! shaper component and the archive, printing each report as it is issued. The scenarios are modelled on the
//! anchor earthquakes of `../shared/hyp.md`; frames are values on the monitor's 0.1 scale (the kmoni image path
//! comes with the fetcher).

use crate::hyp::detector::{Detection, Detector, DetectorConfig, Station};
use crate::hyp::synthetic::{Faults, Quake, frames, grid_network};
use crate::store::{self, HypReportInput, StationMetric};
use crate::wasm::{Limits, Runtime, ShaperComponent};
use anyhow::Context;
use serde_json::json;
use std::process::ExitCode;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Scenario {
    /// 2024 Noto: 37.495N 137.270E, 16 km, Mj 7.6.
    Noto,
    /// 2018 Iburi: 42.690N 142.007E, 37 km, Mj 6.7.
    Iburi,
    /// 2016 Kumamoto foreshock: 32.742N 130.808E, 11 km, Mj 6.5.
    Kumamoto,
    /// 2022 Fukushima-oki: 37.7N 141.6E, 57 km, Mj 7.4, seen only from land (one-sided).
    FukushimaOki,
    /// Two moderate earthquakes 300 km apart at the same time.
    TwoEvents,
    /// No earthquake: a stuck station, a lone spike and dropouts.
    Quiet,
    /// An earthquake whose frames stop for 20 s mid-event.
    Gap,
}

#[derive(Debug, clap::Args)]
pub struct SimulateArgs {
    pub scenario: Scenario,
    /// The archive the reports go to.
    #[arg(
        long,
        env = "OSDS_DATABASE_URL",
        default_value = crate::store::DEFAULT_DATABASE_URL
    )]
    pub database_url: String,
    /// Seconds of frames to run.
    #[arg(long, default_value_t = 150)]
    pub seconds: u64,
    /// Seed of the noise and dropouts.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
}

/// Unix ms of the anchor's origin (JST wall clock as given in hyp.md).
fn jst_ms(text: &str) -> i64 {
    chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S%.f")
        .map(|t| t.and_utc().timestamp_millis() - 9 * 3_600_000)
        .unwrap_or(0)
}

/// The quakes (origin in seconds after the first frame), the network, the faults, the clock of frame 0 and
/// the frames to drop (a gap).
struct Setup {
    quakes: Vec<Quake>,
    stations: Vec<Station>,
    faults: Faults,
    start_ms: i64,
    gap: Option<std::ops::Range<u64>>,
}

fn setup(scenario: Scenario) -> Setup {
    let quake = |lat, lon, depth, mw| Quake {
        latitude: lat,
        longitude: lon,
        depth_km: depth,
        mw,
        origin: 5.0,
    };
    let (quakes, centre, keep_land, start): (Vec<Quake>, (f64, f64), bool, &str) = match scenario {
        Scenario::Noto => (
            vec![quake(37.495, 137.270, 16.0, 7.4)],
            (37.2, 137.4),
            false,
            "2024-01-01 16:10:17.5",
        ),
        Scenario::Iburi => (
            vec![quake(42.690, 142.007, 37.0, 6.5)],
            (42.9, 142.2),
            false,
            "2018-09-06 03:07:54.3",
        ),
        Scenario::Kumamoto => (
            vec![quake(32.742, 130.808, 11.0, 6.3)],
            (32.9, 130.7),
            false,
            "2016-04-14 21:26:29.4",
        ),
        Scenario::FukushimaOki => (
            vec![quake(37.7, 141.6, 57.0, 7.2)],
            (37.7, 140.4),
            true,
            "2022-03-16 23:35:55.0",
        ),
        Scenario::TwoEvents => (
            vec![quake(35.0, 135.0, 10.0, 6.0), quake(35.0, 138.3, 10.0, 6.0)],
            (35.0, 136.65),
            false,
            "2026-11-22 10:00:00.0",
        ),
        Scenario::Quiet => (Vec::new(), (35.0, 135.0), false, "2026-11-22 10:00:00.0"),
        Scenario::Gap => (
            vec![quake(35.0, 135.0, 10.0, 6.0)],
            (35.0, 135.1),
            false,
            "2026-11-22 10:00:00.0",
        ),
    };
    let radius = if scenario == Scenario::TwoEvents {
        260.0
    } else {
        200.0
    };
    let positions = grid_network(centre.0, centre.1, radius, 20.0, |_, lon| {
        !keep_land || lon < 141.0
    });
    let stations = positions
        .iter()
        .enumerate()
        .map(|(i, p)| Station {
            code: format!("SYN{i:04}"),
            name: Some(format!("synthetic {i}")),
            latitude: p.latitude,
            longitude: p.longitude,
        })
        .collect();
    let faults = match scenario {
        Scenario::Quiet => Faults {
            stuck: Some((3, 4.0)),
            spike: Some((40, 20, 5.0)),
            dropout: 0.05,
        },
        _ => Faults {
            dropout: 0.02,
            ..Faults::default()
        },
    };
    Setup {
        quakes,
        stations,
        faults,
        start_ms: jst_ms(start),
        gap: (scenario == Scenario::Gap).then_some(25..45),
    }
}

pub fn run(args: SimulateArgs) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(simulate(args))
}

async fn simulate(args: SimulateArgs) -> anyhow::Result<ExitCode> {
    let setup = setup(args.scenario);
    let wasm = Runtime::new(Limits::default())?;
    let shaper = ShaperComponent::embedded(&wasm)?;
    let (_, mut writer) = store::open(&args.database_url).await?;
    let positions: Vec<_> = setup
        .stations
        .iter()
        .map(|s| crate::hyp::trigger::StationPosition {
            latitude: s.latitude,
            longitude: s.longitude,
        })
        .collect();
    let frames = frames(
        &setup.quakes,
        &positions,
        args.seconds,
        &setup.faults,
        args.seed,
    );
    let mut detector = Detector::new(setup.stations.clone(), DetectorConfig::default());
    eprintln!(
        "simulate {:?}: {} stations, {} frames, algorithm {}",
        args.scenario,
        setup.stations.len(),
        frames.len(),
        detector.algorithm()
    );
    let mut reports = 0usize;
    for (n, frame) in frames.iter().enumerate() {
        if setup
            .gap
            .as_ref()
            .is_some_and(|gap| gap.contains(&(n as u64)))
        {
            continue;
        }
        let at_ms = setup.start_ms + n as i64 * 1000;
        for detection in detector.step(at_ms, frame) {
            archive(&mut writer, &shaper, &detection).await?;
            reports += 1;
        }
    }
    let state = json!({
        "algorithm": detector.algorithm(),
        "source": format!("synthetic:{:?}", args.scenario),
        "frames": frames.len(),
        "stations": setup.stations.len(),
        "openEvents": detector.open_events().iter().map(|(id, status, n)| json!({ "id": id, "status": status, "stations": n })).collect::<Vec<_>>(),
        "sources": [{ "source": "synthetic", "health": "ok" }],
        "errors": [],
    });
    writer
        .set_hyp_state(
            "detector",
            setup.start_ms + frames.len() as i64 * 1000,
            &state,
        )
        .await?;
    println!("osds: simulate: {reports} reports archived");
    Ok(ExitCode::SUCCESS)
}

/// Shapes a detection through the component and appends it, with its stations' peaks.
async fn archive(
    writer: &mut store::Writer,
    shaper: &ShaperComponent,
    detection: &Detection,
) -> anyhow::Result<()> {
    let solution = &detection.solution;
    let solution_bytes = serde_json::to_vec(solution)?;
    let payload = shaper.shape(&solution_bytes)?;
    let report: serde_json::Value =
        serde_json::from_slice(&payload).context("the shaper returned no JSON")?;
    let metrics = detection
        .peaks
        .iter()
        .map(|(station, peak, at)| StationMetric {
            station: station.code.clone(),
            name: station.name.clone(),
            latitude: station.latitude,
            longitude: station.longitude,
            metric: "surface:intensity".into(),
            peak: *peak,
            source_at: *at,
            // Frames arrive 1–3 s behind the observation second.
            received_at: at + 1_500,
            recovered: false,
        })
        .collect();
    let input = HypReportInput {
        event_id: solution.event_id.clone(),
        number: i64::from(solution.report_number),
        status: solution.status.clone(),
        first_at: solution.first_detected_at,
        reported_at: solution.reported_at,
        recorded_at: solution.recorded_at,
        region: solution.region.clone(),
        payload,
        shaper: shaper.info().identity(),
        solution: solution_bytes,
        metrics,
    };
    let sha256 = writer.append_hyp_report(&input).await?;
    let h = &report["event"]["hypEstimate"];
    println!(
        "{} report {} {:<11} grade {} {:.3}N {:.3}E {:>5.1} km M{} stations {} sha256 {}",
        solution.event_id,
        solution.report_number,
        solution.status,
        report["quality"]["grade"].as_str().unwrap_or("?"),
        h["latitude"].as_f64().unwrap_or_default(),
        h["longitude"].as_f64().unwrap_or_default(),
        h["depthKm"].as_f64().unwrap_or_default(),
        report["event"]["magnitude"]
            .as_f64()
            .map_or("-".to_string(), |m| format!("{m:.1}")),
        report["quality"]["stationCount"],
        &sha256[..12]
    );
    Ok(())
}
