//! The accuracy benchmark's matrix of synthetic earthquakes on the real K-NET/KiK-net network (the shipped
//! station table) with the default JMA2001 travel times: inland and offshore, 10 to 600 km deep, M4 to M8, with
//! per-station timing offsets (±0.3 s) and site terms, dropouts, spikes, stuck stations, frame gaps and two
//! overlapping quakes, and three shapes of the shaking. Every frame is rendered as a monitor image and decoded at
//! the stations' pixels; every solution is shaped and graded by the shaper the caller passes. Prints, per
//! scenario and overall: epicentre error (first report, median from the 3rd report on, final), the final
//! report's distance from the median tracking position, depth error, ΔM (first report with a magnitude, final),
//! seconds from the 3rd P arrival to the first public report, grades, and false public events; then the
//! targets. Asserts nothing.
//!
//! Run it with `cargo run --release -p osds-bench --bin osds-accuracy` (the real hyp shaper component) or, while
//! working on the detector, `cargo bench -p osds-detector --bench accuracy` (its `hyp-core` code, natively).

use crate::scenario::{Outcome, Scenario, Setting, median, run, score};
use crate::stations::Network;
use crate::synthetic::{Envelope, Faults, Quake};
use crate::traveltime::Model;
use hyp_core::Solution;
use serde_json::Value;
use std::sync::Arc;
use std::time::Instant;

/// The matrix. Hypocentres of named scenarios follow the JMA catalogue's for those earthquakes; the others
/// place events where Japan has them (slab events, offshore sequences).
pub fn matrix(network: &Network) -> Vec<Scenario> {
    use Setting::*;
    let n = network.stations.len();
    let singles: Vec<(&str, Setting, Quake)> = vec![
        (
            "noto-m7.5",
            Inland,
            Quake::at(37.495, 137.270, 16.0, 7.5, 10.0),
        ),
        (
            "kumamoto-m6.2",
            Inland,
            Quake::at(32.742, 130.808, 11.0, 6.2, 10.0),
        ),
        (
            "iburi-m6.6",
            Inland,
            Quake::at(42.690, 142.007, 37.0, 6.6, 10.0),
        ),
        (
            "tottori-m6.6",
            Inland,
            Quake::at(35.274, 133.349, 9.0, 6.6, 10.0),
        ),
        (
            "chuetsu-m6.6",
            Inland,
            Quake::at(37.292, 138.867, 13.0, 6.6, 10.0),
        ),
        (
            "osaka-m5.6",
            Inland,
            Quake::at(34.844, 135.622, 13.0, 5.6, 10.0),
        ),
        (
            "iwate-miyagi-m6.9",
            Inland,
            Quake::at(39.028, 140.881, 8.0, 6.9, 10.0),
        ),
        (
            "gifu-m4.0",
            Inland,
            Quake::at(35.900, 137.300, 10.0, 4.0, 10.0),
        ),
        (
            "chiba-m4.8-50km",
            Inland,
            Quake::at(35.800, 140.100, 50.0, 4.8, 10.0),
        ),
        (
            "sapporo-m5.5",
            Inland,
            Quake::at(43.060, 141.350, 10.0, 5.5, 10.0),
        ),
        (
            "shikoku-m5.0-40km",
            Inland,
            Quake::at(33.800, 133.500, 40.0, 5.0, 10.0),
        ),
        (
            "fukushima-oki-m7.3",
            Offshore,
            Quake::at(37.700, 141.600, 57.0, 7.3, 10.0),
        ),
        (
            "tohoku-oki-m8.0",
            Offshore,
            Quake::at(38.100, 142.860, 24.0, 8.0, 10.0),
        ),
        (
            "tokachi-oki-m8.0",
            Offshore,
            Quake::at(41.780, 144.080, 42.0, 8.0, 10.0),
        ),
        (
            "miyagi-oki-m6.9",
            Offshore,
            Quake::at(38.450, 141.650, 60.0, 6.9, 10.0),
        ),
        (
            "kii-oki-m7.1",
            Offshore,
            Quake::at(33.030, 136.800, 38.0, 7.1, 10.0),
        ),
        (
            "hyuganada-m6.8",
            Offshore,
            Quake::at(31.700, 131.700, 30.0, 6.8, 10.0),
        ),
        (
            "ibaraki-oki-m5.5",
            Offshore,
            Quake::at(36.400, 141.200, 40.0, 5.5, 10.0),
        ),
        (
            "kushiro-oki-m6.5",
            Offshore,
            Quake::at(42.600, 144.900, 50.0, 6.5, 10.0),
        ),
        (
            "izu-oshima-m5.0",
            Offshore,
            Quake::at(34.600, 139.300, 10.0, 5.0, 10.0),
        ),
        (
            "kanto-m5.5-80km",
            Deep,
            Quake::at(36.200, 139.900, 80.0, 5.5, 10.0),
        ),
        (
            "kushiro-m7.0-100km",
            Deep,
            Quake::at(42.900, 144.400, 100.0, 7.0, 10.0),
        ),
        (
            "tokai-m6.3-380km",
            Deep,
            Quake::at(34.000, 138.100, 380.0, 6.3, 10.0),
        ),
        (
            "japan-sea-m6.0-450km",
            Deep,
            Quake::at(38.800, 134.500, 450.0, 6.0, 10.0),
        ),
        (
            "bonin-m7.0-600km",
            Deep,
            Quake::at(32.500, 138.500, 600.0, 7.0, 10.0),
        ),
    ];
    let mut scenarios: Vec<Scenario> = singles
        .into_iter()
        .enumerate()
        .map(|(i, (name, setting, q))| {
            let seed = 1000 + i as u64;
            Scenario {
                name: name.to_string(),
                setting,
                seconds: if q.mw >= 7.0 { 300 } else { 240 },
                quakes: vec![q],
                faults: imperfect(n, seed),
                gap: None,
                seed,
            }
        })
        .collect();
    scenarios.push(Scenario {
        name: "two-at-once-300km".into(),
        setting: Inland,
        quakes: vec![
            Quake::at(35.0, 135.0, 10.0, 6.0, 10.0),
            Quake::at(35.0, 138.3, 10.0, 6.0, 10.0),
        ],
        seconds: 240,
        faults: imperfect(n, 2001),
        gap: None,
        seed: 2001,
    });
    // The second quake strikes while the first one's P wave is crossing its region (P there at ~90 s, S at
    // ~160 s) but is inconsistent with its travel times and far stronger there than it can explain.
    scenarios.push(Scenario {
        name: "second-in-wavefront".into(),
        setting: Offshore,
        quakes: vec![
            Quake::at(38.000, 142.000, 40.0, 7.0, 10.0),
            Quake::at(35.000, 136.500, 10.0, 6.0, 110.0),
        ],
        seconds: 300,
        faults: imperfect(n, 2002),
        gap: None,
        seed: 2002,
    });
    scenarios.push(Scenario {
        name: "gap-3s-m6.5".into(),
        setting: Inland,
        quakes: vec![Quake::at(36.000, 138.000, 10.0, 6.5, 10.0)],
        seconds: 240,
        faults: imperfect(n, 2003),
        gap: Some(24..27),
        seed: 2003,
    });
    scenarios.push(Scenario {
        name: "gap-20s-m6.0".into(),
        setting: Inland,
        quakes: vec![Quake::at(35.000, 135.100, 10.0, 6.0, 10.0)],
        seconds: 240,
        faults: imperfect(n, 2004),
        gap: Some(30..50),
        seed: 2004,
    });
    scenarios.push(Scenario {
        name: "quiet".into(),
        setting: Quiet,
        quakes: Vec::new(),
        seconds: 240,
        faults: Faults {
            dropout: 0.05,
            ..imperfect(n, 2005)
        },
        gap: None,
        seed: 2005,
    });
    scenarios
}

/// The network's imperfections every scenario has: timing offsets within ±0.3 s, site terms (σ 0.25
/// intensity), 2 % dropouts, two stuck stations and three lone spikes at stations chosen by the seed; and one
/// of three shapes of the shaking by the seed (see [`envelope`]).
fn imperfect(stations: usize, seed: u64) -> Faults {
    let pick = |k: u64| ((seed * 7919 + k * 104_729) % stations as u64) as usize;
    Faults {
        stuck: vec![(pick(1), 4.0), (pick(2), 3.2)],
        spike: vec![(pick(3), 40, 5.0), (pick(4), 70, 4.0), (pick(5), 95, 5.5)],
        dropout: 0.02,
        envelope: envelope(seed).1,
        ..Faults::default()
    }
    .station_terms(stations, 0.3, 0.25, seed)
}

/// The shape of the shaking, by seed: `s` the detector's own assumption (P window 1.5 below the S peak, an
/// immediate step), `g` gradual (2.0 below, P reached over 2 s, S over 5 s, slow decay), `a` abrupt (1.0 below,
/// S over 2 s, fast decay).
fn envelope(seed: u64) -> (char, Envelope) {
    match seed % 3 {
        0 => ('s', Envelope::default()),
        1 => (
            'g',
            Envelope {
                p_contrast: 2.0,
                p_rise_s: 2.0,
                s_rise_s: 5.0,
                decay_per_s: 0.1,
            },
        ),
        _ => (
            'a',
            Envelope {
                p_contrast: 1.0,
                p_rise_s: 0.0,
                s_rise_s: 2.0,
                decay_per_s: 0.3,
            },
        ),
    }
}

fn cell(value: Option<f64>, digits: usize) -> String {
    value.map_or("-".into(), |v| format!("{v:.digits$}"))
}

/// What to run and how to show it.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Feed the quantised values straight to the detector instead of rendering and decoding images.
    pub values: bool,
    /// Print every report as it was issued.
    pub reports: bool,
    /// Only the scenarios whose names contain one of these.
    pub only: Vec<String>,
}

impl Options {
    /// `[--values] [--reports] [NAME...]`; other flags (a bench harness's `--bench`) are ignored.
    pub fn from_args(args: impl IntoIterator<Item = String>) -> Options {
        let mut options = Options::default();
        for arg in args {
            match arg.as_str() {
                "--values" => options.values = true,
                "--reports" => options.reports = true,
                a if a.starts_with("--") => {}
                _ => options.only.push(arg),
            }
        }
        options
    }
}

/// Runs the matrix on two threads (the machine's cores) and prints the table and the targets; `shaper` names
/// what shapes the solutions and `shape` shapes one.
pub fn run_matrix(options: &Options, shaper: &str, shape: &(dyn Fn(&Solution) -> Value + Sync)) {
    let images = !options.values;
    let verbose = options.reports;
    let only = &options.only;
    let network = Network::shipped();
    let travel_times = Arc::new(Model::jma2001());
    let scenarios: Vec<Scenario> = matrix(&network)
        .into_iter()
        .filter(|s| only.is_empty() || only.iter().any(|o| s.name.contains(o.as_str())))
        .collect();
    println!(
        "accuracy benchmark: {} scenarios, {} stations (shipped K-NET/KiK-net table), travel times {}, {}, shaped by {shaper}",
        scenarios.len(),
        network.stations.len(),
        travel_times.name(),
        if images {
            "through monitor images"
        } else {
            "values fed directly"
        }
    );
    let started = Instant::now();
    // Two workers (the machine's cores); each scenario is independent and deterministic.
    let results: Vec<(Scenario, crate::scenario::Score, f64, usize)> = {
        let next = std::sync::atomic::AtomicUsize::new(0);
        let out = std::sync::Mutex::new(Vec::new());
        std::thread::scope(|scope| {
            for _ in 0..2 {
                scope.spawn(|| loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(scenario) = scenarios.get(i) else { break };
                    let t = Instant::now();
                    let reports = run(scenario, &network, &travel_times, images, shape);
                    if verbose {
                        for r in &reports {
                            println!(
                                "{} {} t={:>4} {:<11} {:.3} {:.3} {:>5.1} km M{} {:?} {} n={} rms={} gap={}",
                                scenario.name,
                                r.event_id,
                                (r.reported_at_ms - crate::scenario::START_MS) / 1000,
                                r.status,
                                r.latitude,
                                r.longitude,
                                r.depth_km,
                                cell(r.magnitude, 2),
                                r.magnitude_type,
                                r.grade,
                                r.station_count,
                                cell(r.rms_seconds, 2),
                                cell(r.gap_degrees, 0)
                            );
                        }
                    }
                    let scored = score(scenario, &network, &travel_times, &reports);
                    let seconds = t.elapsed().as_secs_f64();
                    out.lock().unwrap().push((i, (scenario.clone(), scored, seconds, reports.len())));
                });
            }
        });
        let mut out = out.into_inner().unwrap();
        out.sort_by_key(|(i, _)| *i);
        out.into_iter().map(|(_, r)| r).collect()
    };
    println!(
        "\n{:<22} {:>3} {:>4} {:>5} | {:>6} {:>6} {:>6} {:>6} | {:>5} | {:>5} {:>5} | {:>5} | {:<10} {:>3} {:>4} | {:>5} | {:>5}",
        "scenario",
        "env",
        "M",
        "depth",
        "first",
        "median",
        "final",
        "f-trk",
        "dZ",
        "dM1",
        "dMf",
        "lat s",
        "final",
        "grd",
        "best",
        "false",
        "x rt"
    );
    let mut all: Vec<(Setting, Scenario, Outcome)> = Vec::new();
    let mut false_events = 0;
    for (scenario, scored, seconds, _) in &results {
        false_events += scored.false_events;
        let speed = scenario.seconds as f64 / seconds;
        if scenario.quakes.is_empty() {
            println!(
                "{:<22} {:>3} {:>4} {:>5} | {:>6} {:>6} {:>6} {:>6} | {:>5} | {:>5} {:>5} | {:>5} | {:<10} {:>3} {:>4} | {:>5} | {:>5.0}",
                scenario.name,
                envelope(scenario.seed).0,
                "-",
                "-",
                "-",
                "-",
                "-",
                "-",
                "-",
                "-",
                "-",
                "-",
                "-",
                "-",
                "-",
                scored.false_events,
                speed
            );
        }
        for (quake, outcome) in scenario.quakes.iter().zip(&scored.outcomes) {
            println!(
                "{:<22} {:>3} {:>4.1} {:>5.0} | {:>6} {:>6} {:>6} {:>6} | {:>5} | {:>5} {:>5} | {:>5} | {:<10} {:>3} {:>4} | {:>5} | {:>5.0}",
                scenario.name,
                envelope(scenario.seed).0,
                quake.mw,
                quake.depth_km,
                cell(outcome.first_km, 1),
                cell(outcome.median_km, 1),
                cell(outcome.final_km, 1),
                cell(outcome.final_from_tracking_km, 1),
                cell(outcome.depth_km, 0),
                cell(outcome.first_dm, 2),
                cell(outcome.final_dm, 2),
                cell(outcome.latency_s, 1),
                outcome.final_status.as_deref().unwrap_or("MISSED"),
                outcome.final_grade.as_deref().unwrap_or("-"),
                outcome.best_grade.as_deref().unwrap_or("-"),
                scored.false_events,
                speed
            );
            let setting = if quake.depth_km > 60.0 {
                Setting::Deep
            } else {
                scenario.setting
            };
            all.push((setting, scenario.clone(), outcome.clone()));
        }
        if !scored.false_event_ids.is_empty() {
            println!(
                "{:<22} false events: {}",
                "",
                scored.false_event_ids.join(", ")
            );
        }
    }
    println!("\nover the matrix (medians over quakes; targets in brackets):");
    let collect = |filter: &dyn Fn(&Setting) -> bool, value: &dyn Fn(&Outcome) -> Option<f64>| {
        let mut v: Vec<f64> = all
            .iter()
            .filter(|(s, ..)| filter(s))
            .filter_map(|(_, _, o)| value(o))
            .collect();
        (median(&mut v), v.len())
    };
    let line = |label: &str, (m, n): (Option<f64>, usize), target: &str| {
        println!("  {label:<58} {:>7} over {n:>2}  [{target}]", cell(m, 2));
    };
    let inland = |s: &Setting| *s == Setting::Inland;
    let offshore = |s: &Setting| *s == Setting::Offshore;
    let deep = |s: &Setting| *s == Setting::Deep;
    let shallow = |s: &Setting| *s != Setting::Deep;
    let any = |_: &Setting| true;
    type Filter<'a> = &'a dyn Fn(&Setting) -> bool;
    type Metric<'a> = &'a dyn Fn(&Outcome) -> Option<f64>;
    let rows: [(&str, Filter, Metric, &str); 11] = [
        (
            "epicentre error from the 3rd report, inland (km)",
            &inland,
            &|o| o.median_km,
            "<= 10",
        ),
        (
            "epicentre error from the 3rd report, offshore (km)",
            &offshore,
            &|o| o.median_km,
            "<= 25",
        ),
        (
            "epicentre error from the 3rd report, deep (km)",
            &deep,
            &|o| o.median_km,
            "-",
        ),
        (
            "epicentre error of the first report, all (km)",
            &any,
            &|o| o.first_km,
            "-",
        ),
        (
            "epicentre error of the final report, all (km)",
            &any,
            &|o| o.final_km,
            "-",
        ),
        (
            "final report from the median tracking position (km)",
            &any,
            &|o| o.final_from_tracking_km,
            "<= 5",
        ),
        (
            "depth error, events above 60 km (km)",
            &shallow,
            &|o| o.depth_km,
            "<= 15",
        ),
        (
            "depth error, events below 60 km (km)",
            &deep,
            &|o| o.depth_km,
            "<= 40",
        ),
        (
            "|dM| of the first report with a magnitude",
            &any,
            &|o| o.first_dm.map(f64::abs),
            "<= 0.5",
        ),
        (
            "|dM| of the final report",
            &any,
            &|o| o.final_dm.map(f64::abs),
            "<= 0.3",
        ),
        (
            "seconds from the 3rd P arrival to the first public report",
            &any,
            &|o| o.latency_s,
            "<= 3",
        ),
    ];
    for (label, filter, value, target) in rows {
        line(label, collect(filter, value), target);
    }
    let missed = all.iter().filter(|(_, _, o)| o.event_id.is_none()).count();
    let worst_final = all
        .iter()
        .filter_map(|(_, _, o)| o.final_from_tracking_km)
        .fold(0.0, f64::max);
    let top_inland = all
        .iter()
        .filter(|(s, _, o)| {
            *s == Setting::Inland && matches!(o.best_grade.as_deref(), Some("S" | "A"))
        })
        .count();
    let inland_count = all.iter().filter(|(s, _, _)| *s == Setting::Inland).count();
    println!("  quakes without a public event: {missed} of {}", all.len());
    println!("  false public events: {false_events}  [0]");
    println!("  worst final report from the median tracking position: {worst_final:.1} km");
    println!(
        "  inland quakes reaching grade A or S: {top_inland} of {inland_count}  [a well-recorded one]"
    );
    let simulated: u64 = results.iter().map(|(s, ..)| s.seconds).sum();
    println!(
        "  {simulated} s of frames in {:.0} s wall clock ({:.1}x real time on two threads)",
        started.elapsed().as_secs_f64(),
        simulated as f64 / started.elapsed().as_secs_f64()
    );
}
