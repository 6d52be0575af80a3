//! The self-sensing detector's accuracy benchmark, in two matrices printed side by side: the in-model
//! regression matrix (frames made with the detector's own tables: self-consistency) and the independent
//! matrix (the [`truth`] model and a misbehaving [`feed`]: accuracy in a world that is not the detector's).
//! See [`matrix`] for what each holds and BENCHMARKS.md for the recorded runs.
//!
//! `cargo bench -p osds-accuracy --bench accuracy` shapes the solutions with `hyp-core` natively (a quick loop
//! while working on the detector); `cargo run --release -p osds-bench --bin osds-accuracy` shapes them through
//! the real hyp shaper component, as the service does.

pub mod feed;
pub mod matrix;
pub mod scenario;
pub mod score;
pub mod table;
pub mod truth;

use hyp_core::Solution;
use osds_detector::stations::Network;
use osds_detector::traveltime::Model;
use scenario::Scenario;
use serde_json::Value;
use std::sync::Arc;
use std::time::Instant;
use table::Result;

/// The seed of the truth's Earth (the stations' delays and sites): one world for every scenario.
pub const EARTH_SEED: u64 = 20_261_126;
/// How far apart the scenarios' seeds of two worlds are (more than any matrix's own seeds span).
const WORLD_STRIDE: u64 = 1_000_003;

/// Which matrices to run and how to show them.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Feed the quantised values straight to the detector instead of rendering and decoding images.
    pub values: bool,
    /// Print every report as it was issued.
    pub reports: bool,
    /// Only the in-model matrix, or only the independent one.
    pub only_in_model: bool,
    pub only_independent: bool,
    /// Only the foreshock mixes ([`matrix::foreshocks`]), which neither matrix includes.
    pub foreshocks: bool,
    /// Only the scenarios whose names contain one of these.
    pub only: Vec<String>,
    /// Another draw of the same truth and feed (0 is the recorded one): the stations' delays, sites and noise,
    /// the shaking's scatter and the feed's delays and losses come from other seeds; the scenarios stay.
    pub world: u64,
    /// How far the truth's Earth departs from the detector's model (the recorded tables: the default).
    pub departures: truth::Departures,
    /// Seconds of quiet network fed to the detector before each scenario begins (the recorded tables: none;
    /// every scenario starts 10 s before its first quake, as if the service had just started).
    pub lead_in_s: u64,
}

impl Options {
    /// `[--values] [--reports] [--in-model | --independent | --foreshocks] [--world=N] [--delays=S]
    /// [--sites=L] [--contrast=C] [--p-rise=X] [--noise=X] [--lead-in=S] [NAME...]` (`--delays` to `--noise`:
    /// [`truth::Departures`]);
    /// other flags (a bench harness's `--bench`) are ignored. An error names an argument it cannot read.
    pub fn from_args(
        args: impl IntoIterator<Item = String>,
    ) -> std::result::Result<Options, String> {
        let mut options = Options::default();
        for arg in args {
            match arg.as_str() {
                "--values" => options.values = true,
                "--reports" => options.reports = true,
                "--in-model" => options.only_in_model = true,
                "--independent" => options.only_independent = true,
                "--foreshocks" => options.foreshocks = true,
                a if a.starts_with("--world=") => options.world = whole(a)?,
                a if a.starts_with("--lead-in=") => options.lead_in_s = whole(a)?,
                a if a.starts_with("--delays=") => options.departures.delay_sd = at_least_0(a)?,
                a if a.starts_with("--sites=") => options.departures.site_log_pgv = number(a)?,
                a if a.starts_with("--contrast=") => options.departures.p_contrast = number(a)?,
                a if a.starts_with("--p-rise=") => options.departures.p_rise_scale = at_least_0(a)?,
                a if a.starts_with("--noise=") => options.departures.noise_scale = at_least_0(a)?,
                a if a.starts_with("--") => {}
                _ => options.only.push(arg),
            }
        }
        Ok(options)
    }

    /// The truth's Earth for the world and departures asked for.
    pub fn earth(&self, network: &Network) -> truth::Earth {
        truth::Earth::new(
            &network.positions(),
            EARTH_SEED + self.world,
            &self.departures,
        )
    }

    /// The scenarios asked for (by name), with their seeds moved to the world asked for.
    pub fn select(&self, all: Vec<Scenario>) -> Vec<Scenario> {
        all.into_iter()
            .filter(|s| {
                self.only.is_empty() || self.only.iter().any(|o| s.name.contains(o.as_str()))
            })
            .map(|mut s| {
                s.seed += WORLD_STRIDE * self.world;
                s
            })
            .collect()
    }
}

/// The number after the `=` of `--name=number`.
fn number(arg: &str) -> std::result::Result<f64, String> {
    arg.split_once('=')
        .and_then(|(_, v)| v.parse::<f64>().ok())
        .filter(|v| v.is_finite())
        .ok_or_else(|| format!("`{arg}` takes a number"))
}

/// The whole number after the `=` of `--name=number` (a world, seconds).
fn whole(arg: &str) -> std::result::Result<u64, String> {
    arg.split_once('=')
        .and_then(|(_, v)| v.parse::<u64>().ok())
        .ok_or_else(|| format!("`{arg}` takes a whole number"))
}

/// [`number`], not below zero (a spread, a scale).
fn at_least_0(arg: &str) -> std::result::Result<f64, String> {
    let value = number(arg)?;
    if value < 0.0 {
        return Err(format!("`{arg}` takes a number not below zero"));
    }
    Ok(value)
}

/// Runs scenarios on two threads (the machine's cores).
fn run_all(
    scenarios: Vec<Scenario>,
    network: &Network,
    options: &Options,
    shape: &(dyn Fn(&Solution) -> Value + Sync),
) -> Vec<Result> {
    let travel_times = Arc::new(Model::jma2001());
    let earth = options.earth(network);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let out = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(scenario) = scenarios.get(i) else {
                        break;
                    };
                    let started = Instant::now();
                    let run = scenario::run(
                        scenario,
                        network,
                        &earth,
                        &travel_times,
                        !options.values,
                        options.lead_in_s,
                        shape,
                    );
                    if options.reports {
                        for r in &run.reports {
                            println!(
                                "{} {} t={:>4} pub={:>6.1} {:<11} {:.3} {:.3} {:>5.1} km M{} {:?} {} n={} rms={} gap={} unc={}",
                                scenario.name,
                                r.event_id,
                                (r.frame_at_ms - scenario::START_MS) / 1000,
                                (r.reported_at_ms - scenario::START_MS) as f64 / 1000.0,
                                r.status,
                                r.latitude,
                                r.longitude,
                                r.depth_km,
                                r.magnitude.map_or("-".into(), |m| format!("{m:.2}")),
                                r.magnitude_type,
                                r.grade,
                                r.station_count,
                                r.rms_seconds.map_or("-".into(), |v| format!("{v:.2}")),
                                r.gap_degrees.map_or("-".into(), |v| format!("{v:.0}")),
                                r.uncertainty_km.map_or("-".into(), |v| format!("{v:.1}")),
                            );
                        }
                    }
                    let score = score::score(&run);
                    let seconds = started.elapsed().as_secs_f64();
                    out.lock().expect("no worker panicked").push((
                        i,
                        Result {
                            scenario: scenario.clone(),
                            run,
                            score,
                            seconds,
                        },
                    ));
                }
            });
        }
    });
    let mut out = out.into_inner().expect("no worker panicked");
    out.sort_by_key(|(i, _)| *i);
    out.into_iter().map(|(_, r)| r).collect()
}

/// A matrix to print: its title, what it is, whether it was asked for, whether its frames come from the
/// truth's Earth (the in-model matrix's come from the detector's own tables), and its scenarios.
type Matrix = (
    &'static str,
    &'static str,
    bool,
    bool,
    fn(&Network) -> Vec<Scenario>,
);

/// Runs the matrices the options ask for and prints their tables; `shaper` names what shapes the solutions.
pub fn run_matrices(options: &Options, shaper: &str, shape: &(dyn Fn(&Solution) -> Value + Sync)) {
    let network = Network::shipped();
    let how = if options.values {
        "values fed directly"
    } else {
        "through monitor images"
    };
    let matrices: [Matrix; 3] = [
        (
            "IN-MODEL MATRIX (regression check)",
            "frames made with the detector's own travel times (JMA2001), attenuation (Si & Midorikawa 1999) and P/S contrast, every frame delivered at the end of its second: self-consistency, not accuracy",
            !options.only_independent && !options.foreshocks,
            false,
            matrix::in_model,
        ),
        (
            "INDEPENDENT MATRIX (accuracy)",
            "frames made by the truth model (ak135 + correlated station delays, Kanno et al. 2006 + site terms, finite faults, emergent P, P/S contrast by station), published 1-2 s late with 2 % lost, 1 % repeated and outages of 4-6 s, disturbances and quake mixes",
            !options.only_in_model && !options.foreshocks,
            true,
            matrix::independent,
        ),
        (
            "FORESHOCK MIXES (exploratory, outside both matrices)",
            "a larger quake seconds after a smaller one beside it, on the independent truth model and feed",
            options.foreshocks,
            true,
            matrix::foreshocks,
        ),
    ];
    for (title, what, wanted, on_truth, make) in matrices {
        if !wanted {
            continue;
        }
        let scenarios = options.select(make(&network));
        if scenarios.is_empty() {
            continue;
        }
        println!(
            "\n== {title}: {} scenarios, {} stations (shipped K-NET/KiK-net table), detector travel times JMA2001, {how}, shaped by {shaper}{}\n   {what}",
            scenarios.len(),
            network.stations.len(),
            if options.world == 0 {
                String::new()
            } else {
                format!(", world {}", options.world)
            },
        );
        if options.lead_in_s > 0 {
            println!(
                "   each scenario after {} s of quiet network: a detector that has been running (it starts with the lead-in, whose false events are counted apart)",
                options.lead_in_s
            );
        }
        let departures = options.departures.describe();
        if !departures.is_empty() && on_truth {
            println!("   the truth departs further than recorded: {departures}");
        }
        let started = Instant::now();
        let results = run_all(scenarios, &network, options, shape);
        table::print_rows(&results);
        table::print_summary(&results, options.lead_in_s > 0);
        let simulated: u64 = results.iter().map(|r| r.scenario.seconds).sum();
        println!(
            "  {simulated} s of frames in {:.0} s wall clock ({:.1}x real time on two threads)",
            started.elapsed().as_secs_f64(),
            simulated as f64 / started.elapsed().as_secs_f64()
        );
    }
}

#[cfg(test)]
mod tests;
