//! Printing a matrix's results: one row per quake, the false events, then the figures the targets are about
//! as p50, p90 and worst, each with its target and the floor the method imposes.

use crate::scenario::{Run, START_MS, Scenario, Setting};
use crate::score::{Outcome, Score, percentile};

fn cell(value: Option<f64>, digits: usize) -> String {
    value.map_or("-".into(), |v| format!("{v:.digits$}"))
}

/// One scenario's result.
pub struct Result {
    pub scenario: Scenario,
    pub run: Run,
    pub score: Score,
    /// Seconds of wall clock it took.
    pub seconds: f64,
}

const HEADER: &str = "scenario               set    M depth |  first median  final |    dZ |   dM1   dMf | lat s floor | final       grd best | false |  x rt";

fn setting_label(setting: Setting) -> &'static str {
    match setting {
        Setting::Inland => "in",
        Setting::Offshore => "off",
        Setting::Outside => "far",
    }
}

/// The earliest a report could have been published after the quake's 3rd P arrival: the delivery of the first
/// frame at or after it.
fn latency_floor(result: &Result, third_p: f64) -> Option<f64> {
    let deliveries = result
        .scenario
        .feed
        .deliveries(result.scenario.seconds, result.scenario.seed);
    let from = third_p.max(0.0).ceil() as usize;
    deliveries.iter().skip(from).find_map(|d| match d {
        crate::feed::Delivery::At(at) => Some(at - third_p),
        crate::feed::Delivery::Lost => None,
    })
}

pub fn print_rows(results: &[Result]) {
    println!("\n{HEADER}");
    for result in results {
        let speed = result.scenario.seconds as f64 / result.seconds;
        let false_events = result.score.false_event_ids.len();
        if result.score.outcomes.is_empty() {
            println!(
                "{:<22} {:>3} {:>4} {:>5} | {:>6} {:>6} {:>6} | {:>5} | {:>5} {:>5} | {:>5} {:>5} | {:<11} {:>3} {:>4} | {:>5} | {:>5.0}",
                result.scenario.name,
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
                "-",
                false_events,
                speed
            );
        }
        for outcome in &result.score.outcomes {
            let q = &outcome.quake;
            let status = match (&outcome.final_status, outcome.interrupted_mid_run) {
                (None, _) if q.setting == Setting::Outside => "not found".to_string(),
                (None, _) => "MISSED".to_string(),
                (Some(_), true) => "CUT".to_string(),
                (Some(s), false) => s.clone(),
            };
            println!(
                "{:<22} {:>3} {:>4.1} {:>5.0} | {:>6} {:>6} {:>6} | {:>5} | {:>5} {:>5} | {:>5} {:>5} | {:<11} {:>3} {:>4} | {:>5} | {:>5.0}",
                result.scenario.name,
                setting_label(q.setting),
                q.mw,
                q.depth_km,
                cell(outcome.first_km, 1),
                cell(outcome.median_km(), 1),
                cell(outcome.final_km, 1),
                cell(outcome.median_depth_km(), 0),
                cell(outcome.first_dm, 2),
                cell(outcome.final_dm, 2),
                cell(outcome.latency_s, 1),
                cell(latency_floor(result, q.third_p), 1),
                status,
                outcome.final_grade.as_deref().unwrap_or("-"),
                outcome.best_grade.as_deref().unwrap_or("-"),
                false_events,
                speed
            );
        }
        if !result.score.false_event_ids.is_empty() {
            println!(
                "{:<22} false events: {}",
                "",
                result.score.false_event_ids.join(", ")
            );
            for id in &result.score.false_event_ids {
                let reports: Vec<_> = result
                    .run
                    .reports
                    .iter()
                    .filter(|r| r.event_id == *id)
                    .collect();
                if let Some(last) = reports.last() {
                    println!(
                        "{:<22}   {id}: {} reports, last {} at t={} {:.2}N {:.2}E {:.0} km M{} grade {}",
                        "",
                        reports.len(),
                        last.status,
                        (last.frame_at_ms - START_MS) / 1000,
                        last.latitude,
                        last.longitude,
                        last.depth_km,
                        cell(last.magnitude, 1),
                        last.grade
                    );
                }
            }
        }
    }
}

/// A figure over the matrix: p50, p90, worst and how many values, beside its target and floor.
fn figure(label: &str, mut values: Vec<f64>, target: &str, floor: &str) {
    let n = values.len();
    let p50 = percentile(&mut values, 0.5);
    let p90 = percentile(&mut values, 0.9);
    let worst = values.last().copied();
    println!(
        "  {label:<56} {:>7} {:>7} {:>7} {n:>5}  {target:<22} {floor}",
        cell(p50, 2),
        cell(p90, 2),
        cell(worst, 2),
    );
}

/// `lead_in`: the scenarios ran after a lead-in, and the false events it made are counted apart.
pub fn print_summary(results: &[Result], lead_in: bool) {
    let outcomes: Vec<&Outcome> = results.iter().flat_map(|r| &r.score.outcomes).collect();
    let required = |o: &&&Outcome| o.quake.setting != Setting::Outside;
    let in_setting = |setting: Setting| {
        outcomes
            .iter()
            .filter(move |o| o.quake.setting == setting)
            .flat_map(|o| o.errors_km.iter().copied())
            .collect::<Vec<f64>>()
    };
    let depths = |deep: bool| {
        outcomes
            .iter()
            .filter(|o| (o.quake.depth_km > 150.0) == deep)
            .flat_map(|o| o.depth_errors_km.iter().copied())
            .collect::<Vec<f64>>()
    };
    let per_quake = |value: &dyn Fn(&Outcome) -> Option<f64>| {
        outcomes
            .iter()
            .filter(required)
            .filter_map(|o| value(o))
            .collect::<Vec<f64>>()
    };
    println!(
        "\n  {:<56} {:>7} {:>7} {:>7} {:>5}  {:<22} floor",
        "figure", "p50", "p90", "worst", "n", "target"
    );
    figure(
        "epicentre error from the 3rd report, inland (km)",
        in_setting(Setting::Inland),
        "p50 <= 10, p90 <= 30",
        "grid 0.04 deg: ~1.7 km",
    );
    figure(
        "epicentre error from the 3rd report, offshore (km)",
        in_setting(Setting::Offshore),
        "p50 <= 25, p90 <= 60",
        "grid 0.04 deg: ~1.7 km",
    );
    figure(
        "depth error from the 3rd report, quakes above 150 km (km)",
        depths(false),
        "p50 <= 15",
        "depth step 2.5 km",
    );
    figure(
        "depth error from the 3rd report, quakes below 150 km (km)",
        depths(true),
        "p50 <= 40",
        "depth step 6.25 km",
    );
    figure(
        "|dM| of the first report with a magnitude",
        per_quake(&|o| o.first_dm.map(f64::abs)),
        "p50 <= 0.5",
        "-",
    );
    figure(
        "s from the first report to the first with a magnitude",
        per_quake(&|o| o.magnitude_wait_s),
        "-",
        "-",
    );
    figure(
        "|dM| of the final report",
        per_quake(&|o| o.final_dm.map(f64::abs)),
        "p50 <= 0.3",
        "-",
    );
    let latency = |deep: bool| {
        outcomes
            .iter()
            .filter(required)
            .filter(|o| (o.quake.depth_km > 300.0) == deep)
            .filter_map(|o| o.latency_s)
            .collect::<Vec<f64>>()
    };
    let floors = |deep: bool| {
        let mut floors: Vec<f64> = results
            .iter()
            .flat_map(|r| {
                r.score
                    .outcomes
                    .iter()
                    .filter(|o| o.quake.setting != Setting::Outside)
                    .filter(|o| (o.quake.depth_km > 300.0) == deep)
                    .filter_map(|o| latency_floor(r, o.quake.third_p))
            })
            .collect();
        format!(
            "first frame after it: p50 {}",
            cell(percentile(&mut floors, 0.5), 1)
        )
    };
    figure(
        "s from the 3rd P arrival to publication, to 300 km deep",
        latency(false),
        "<= 3",
        &floors(false),
    );
    figure(
        "s from the 3rd P arrival to publication, deeper",
        latency(true),
        "<= 6",
        &floors(true),
    );
    let required_count = outcomes.iter().filter(required).count();
    let found = outcomes
        .iter()
        .filter(required)
        .filter(|o| o.event_id.is_some())
        .count();
    let false_events: usize = results.iter().map(|r| r.score.false_event_ids.len()).sum();
    let in_lead_in: usize = results.iter().map(|r| r.score.false_in_lead_in).sum();
    let cut = outcomes.iter().filter(|o| o.interrupted_mid_run).count();
    println!("  quakes found (within 100 km and 30 s): {found} of {required_count}  [all]");
    let of_lead_in = if lead_in {
        format!(", of which {in_lead_in} first published during the lead-in")
    } else {
        String::new()
    };
    println!("  false public events: {false_events}  [0]{of_lead_in}");
    println!("  events interrupted while frames still came: {cut}  [0]");
    print_grades(results);
}

/// The grade against the error it stands for: per grade, how many reports and their epicentre errors; and how
/// often the error lies within the report's own uncertainty.
fn print_grades(results: &[Result]) {
    let graded: Vec<_> = results.iter().flat_map(|r| &r.score.graded).collect();
    println!(
        "\n  {:<5} {:>7} {:>9} {:>9} {:>9} {:>12} {:>11} {:>14}",
        "grade", "reports", "p50 km", "p90 km", "worst", "<= 10 km", "own p50 km", "within own km"
    );
    for grade in ["S", "A", "B", "C", "D"] {
        let of: Vec<_> = graded.iter().filter(|g| g.grade == grade).collect();
        if of.is_empty() {
            continue;
        }
        let mut errors: Vec<f64> = of.iter().map(|g| g.error_km).collect();
        let within_10 = errors.iter().filter(|e| **e <= 10.0).count();
        let with_own: Vec<_> = of
            .iter()
            .filter_map(|g| Some((g.error_km, g.uncertainty_km?)))
            .collect();
        let within_own = with_own.iter().filter(|(e, u)| e <= u).count();
        let mut own: Vec<f64> = with_own.iter().map(|(_, u)| *u).collect();
        println!(
            "  {:<5} {:>7} {:>9} {:>9} {:>9} {:>11.0}% {:>11} {:>13}",
            grade,
            of.len(),
            cell(percentile(&mut errors, 0.5), 1),
            cell(percentile(&mut errors, 0.9), 1),
            cell(errors.last().copied(), 1),
            100.0 * within_10 as f64 / of.len() as f64,
            cell(percentile(&mut own, 0.5), 1),
            if with_own.is_empty() {
                "-".to_string()
            } else {
                format!("{:.0}%", 100.0 * within_own as f64 / with_own.len() as f64)
            }
        );
    }
}
