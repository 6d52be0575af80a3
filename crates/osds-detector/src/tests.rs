//! The stages together on synthetic earthquakes with known truth (the method: `docs/self-sensing.md`):
//! epicentre within 20 km inland and 50 km offshore, depth within 20 km once 5 stations, |ΔM| ≤ 0.5; a stuck
//! station and a lone spike trigger nothing; the same seed gives the same frames, and the same frames the same
//! solutions.

use crate::geo::distance_km;
use crate::locate::{Hypocentre, Pick, Quiet, locate};
use crate::magnitude::{Estimate, PeakAtStation, Wave, estimate};
use crate::synthetic::{Faults, Quake, frames, grid_network};
use crate::traveltime::{Model, hypocentral_km};
use crate::trigger::{StationPosition, Trigger};

/// Runs trigger → location → magnitude over `count` frames; returns the picks' stations, the hypocentre and
/// the magnitude as of the last frame.
fn detect(
    quakes: &[Quake],
    stations: &[StationPosition],
    count: u64,
    faults: &Faults,
) -> (Vec<usize>, Option<Hypocentre>, Option<Estimate>, Trigger) {
    let model = Model::jma2001();
    let frames = frames(&model, quakes, stations, count, faults, 42);
    let mut trigger = Trigger::new(stations);
    let mut picks: Vec<(usize, Pick)> = Vec::new();
    let mut peaks = vec![f64::NEG_INFINITY; stations.len()];
    for frame in &frames {
        for fired in trigger.step(frame) {
            let s = stations[fired.station];
            picks.push((
                fired.station,
                Pick {
                    latitude: s.latitude,
                    longitude: s.longitude,
                    // A 1-second frame: the arrival lies within the second before it.
                    at: fired.onset_frame as f64 - 0.5,
                },
            ));
        }
        for (peak, value) in peaks.iter_mut().zip(frame) {
            if let Some(v) = value {
                *peak = peak.max(*v);
            }
        }
    }
    let now = (count - 1) as f64;
    let quiet: Vec<Quiet> = stations
        .iter()
        .enumerate()
        .filter(|(i, _)| !trigger.is_triggered(*i) && !trigger.is_faulty(*i))
        .map(|(_, s)| Quiet {
            latitude: s.latitude,
            longitude: s.longitude,
        })
        .collect();
    let only_picks: Vec<Pick> = picks.iter().map(|(_, p)| *p).collect();
    let hypocentre = locate(&model, &only_picks, &quiet, now);
    let magnitude = hypocentre.as_ref().and_then(|h| {
        let at_stations: Vec<PeakAtStation> = picks
            .iter()
            .map(|(i, p)| {
                let d = distance_km(h.latitude, h.longitude, p.latitude, p.longitude);
                PeakAtStation {
                    peak_intensity: peaks[*i],
                    hypocentral_km: hypocentral_km(d, h.depth_km),
                    // Peaks before the S wave are biased low: only stations it has reached.
                    wave: if now - h.origin > model.s(d, h.depth_km) + 3.0 {
                        Wave::S
                    } else {
                        Wave::Neither
                    },
                }
            })
            .collect();
        estimate(&at_stations, h.depth_km)
    });
    (
        picks.iter().map(|(i, _)| *i).collect(),
        hypocentre,
        magnitude,
        trigger,
    )
}

#[test]
fn an_inland_shallow_earthquake_is_located_and_sized() {
    // Modelled on the 2016 Kumamoto foreshock: 32.742N 130.808E, 11 km, Mj 6.5 (Mw ≈ 6.3).
    let quake = Quake {
        latitude: 32.742,
        longitude: 130.808,
        depth_km: 11.0,
        mw: 6.3,
        origin: 5.0,
    };
    let stations = grid_network(32.9, 130.7, 150.0, 20.0, |_, _| true);
    let (picked, hypocentre, magnitude, _) = detect(&[quake], &stations, 40, &Faults::default());
    let h = hypocentre.expect("a hypocentre");
    assert!(picked.len() >= 20, "{} picks", picked.len());
    let error = distance_km(h.latitude, h.longitude, quake.latitude, quake.longitude);
    assert!(error <= 20.0, "epicentre off by {error:.1} km: {h:?}");
    assert!(
        (h.depth_km - quake.depth_km).abs() <= 20.0,
        "depth {}",
        h.depth_km
    );
    assert!(
        (h.origin - quake.origin).abs() <= 2.0,
        "origin {}",
        h.origin
    );
    let m = magnitude.expect("a magnitude");
    assert!(
        (m.mw - quake.mw).abs() <= 0.5,
        "Mw {} vs {}",
        m.mw,
        quake.mw
    );
}

#[test]
fn an_offshore_earthquake_seen_from_one_side_stays_within_50_km() {
    // Modelled on 2022 Fukushima-oki: ≈37.7N 141.6E, 57 km, Mj 7.4; stations only on land (west of 141.0E).
    let quake = Quake {
        latitude: 37.7,
        longitude: 141.6,
        depth_km: 57.0,
        mw: 7.2,
        origin: 5.0,
    };
    let stations = grid_network(37.7, 140.4, 180.0, 20.0, |_, lon| lon < 141.0);
    let (_, hypocentre, magnitude, _) = detect(&[quake], &stations, 60, &Faults::default());
    let h = hypocentre.expect("a hypocentre");
    let error = distance_km(h.latitude, h.longitude, quake.latitude, quake.longitude);
    assert!(error <= 50.0, "epicentre off by {error:.1} km: {h:?}");
    let m = magnitude.expect("a magnitude");
    assert!(
        (m.mw - quake.mw).abs() <= 0.5,
        "Mw {} vs {}",
        m.mw,
        quake.mw
    );
}

#[test]
fn a_stuck_station_and_a_lone_spike_trigger_nothing() {
    let stations = grid_network(35.0, 135.0, 100.0, 20.0, |_, _| true);
    let faults = Faults {
        stuck: vec![(3, 4.0)],
        spike: vec![(10, 15, 5.0)],
        dropout: 0.05,
        ..Faults::default()
    };
    let (picked, hypocentre, _, trigger) = detect(&[], &stations, 40, &faults);
    assert!(picked.is_empty(), "false triggers: {picked:?}");
    assert!(hypocentre.is_none());
    assert!(trigger.is_faulty(3), "the stuck station is recognised");
}

#[test]
fn the_same_seed_gives_the_same_frames() {
    let stations = grid_network(35.0, 135.0, 60.0, 20.0, |_, _| true);
    let quake = Quake {
        latitude: 35.0,
        longitude: 135.0,
        depth_km: 10.0,
        mw: 5.5,
        origin: 3.0,
    };
    let faults = Faults {
        dropout: 0.1,
        ..Faults::default()
    };
    let a = frames(&Model::jma2001(), &[quake], &stations, 20, &faults, 9);
    let b = frames(&Model::jma2001(), &[quake], &stations, 20, &faults, 9);
    assert_eq!(a, b);
    assert_ne!(
        a,
        frames(&Model::jma2001(), &[quake], &stations, 20, &faults, 10)
    );
}

/// The whole detector is deterministic: the same frames give byte-identical solutions, so a replay of the
/// recorded images reproduces the archive's reports.
#[test]
fn the_detector_gives_the_same_solutions_for_the_same_frames() {
    use crate::detector::{Detector, DetectorConfig, Station};
    let positions = grid_network(35.0, 135.0, 150.0, 20.0, |_, _| true);
    let stations: Vec<Station> = positions
        .iter()
        .enumerate()
        .map(|(i, p)| Station {
            code: format!("S{i}"),
            name: None,
            latitude: p.latitude,
            longitude: p.longitude,
        })
        .collect();
    let quake = Quake {
        latitude: 35.1,
        longitude: 135.2,
        depth_km: 12.0,
        mw: 6.2,
        origin: 5.0,
    };
    let faults = Faults {
        dropout: 0.03,
        ..Faults::default()
    };
    let frames = frames(&Model::jma2001(), &[quake], &positions, 90, &faults, 5);
    let run = || {
        let mut detector = Detector::new(stations.clone(), DetectorConfig::default());
        let mut solutions = Vec::new();
        for (n, frame) in frames.iter().enumerate() {
            for detection in detector.step(1_600_000_000_000 + n as i64 * 1000, frame) {
                solutions.push(serde_json::to_string(&detection.solution).unwrap());
            }
        }
        solutions
    };
    let first = run();
    assert!(first.len() >= 3, "the quake is reported");
    assert_eq!(first, run());
}

/// The real network (the shipped K-NET/KiK-net table) with every station's timing offset (±0.3 s) and site
/// term, 2 % dropouts: one scenario's reports, values fed directly (the image path has its own tests).
fn on_the_network(quakes: Vec<Quake>, seconds: u64, seed: u64) -> Vec<crate::scenario::Report> {
    use crate::scenario::{Scenario, Setting, run};
    use crate::stations::Network;
    let network = Network::shipped();
    let faults = Faults {
        dropout: 0.02,
        ..Faults::default()
    }
    .station_terms(network.stations.len(), 0.3, 0.25, seed);
    let scenario = Scenario {
        name: "test".into(),
        setting: Setting::Inland,
        quakes,
        seconds,
        faults,
        gap: None,
        seed,
    };
    run(
        &scenario,
        &network,
        &std::sync::Arc::new(Model::jma2001()),
        false,
        &crate::scenario::shape_natively,
    )
}

/// The public events of a run, each with its reports in order.
fn events(reports: &[crate::scenario::Report]) -> Vec<Vec<&crate::scenario::Report>> {
    let mut events: Vec<Vec<&crate::scenario::Report>> = Vec::new();
    for report in reports {
        match events.iter_mut().find(|e| e[0].event_id == report.event_id) {
            Some(event) => event.push(report),
            None => events.push(vec![report]),
        }
    }
    events
}

/// The final report is the event's best solution: when its last frames carry only stations that are late
/// (the wavefront far away, S onsets) or decaying, closing the event does not relocate it from them.
#[test]
fn the_final_report_is_the_best_solution_not_a_relocation_from_late_stations() {
    // An M6.6 inland quake (Tottori 2000): its waves go on triggering stations hundreds of km away long after
    // the near stations that located it have peaked.
    let truth = Quake::at(35.274, 133.349, 9.0, 6.6, 10.0);
    let reports = on_the_network(vec![truth], 240, 11);
    let events = events(&reports);
    assert_eq!(events.len(), 1, "one event");
    let event = &events[0];
    let last = event.last().unwrap();
    assert_eq!(last.status, "finalized");
    // Its last frames: late and far stations the location does not use.
    assert!(last.unused_stations >= 10, "{last:?}");
    assert!(last.farthest_station_km >= 300.0, "{last:?}");
    let before = event[event.len() - 2];
    assert_eq!(
        (last.latitude, last.longitude, last.depth_km),
        (before.latitude, before.longitude, before.depth_km),
        "closing relocated the event"
    );
    let error = distance_km(
        last.latitude,
        last.longitude,
        truth.latitude,
        truth.longitude,
    );
    assert!(error <= 5.0, "final report {error:.1} km off");
}

/// A large quake's P and S waves crossing the country trigger stations 1,000 km away: their picks are
/// explained by its predicted arrivals, so they are that event's, never an event of their own.
#[test]
fn a_large_quakes_wavefront_crossing_the_country_is_one_event() {
    let truth = Quake::at(37.495, 137.270, 16.0, 7.5, 10.0);
    let reports = on_the_network(vec![truth], 300, 12);
    let events = events(&reports);
    assert_eq!(
        events.len(),
        1,
        "{:?}",
        events.iter().map(|e| e[0]).collect::<Vec<_>>()
    );
    let farthest = reports
        .iter()
        .map(|r| r.farthest_station_km)
        .fold(0.0, f64::max);
    assert!(
        farthest >= 500.0,
        "the wavefront's far stations joined: {farthest:.0} km"
    );
}

/// A second quake striking while the first one's P wave is crossing its region is inconsistent with the first
/// one's travel times and shakes far more than the first can explain there: two events, each where it is.
#[test]
fn a_second_quake_inside_the_first_ones_wavefront_is_its_own_event() {
    let first = Quake::at(38.0, 142.0, 40.0, 7.0, 10.0);
    let second = Quake::at(35.0, 136.5, 10.0, 6.0, 110.0);
    let reports = on_the_network(vec![first, second], 300, 13);
    let events = events(&reports);
    assert_eq!(events.len(), 2, "{events:?}");
    for truth in [first, second] {
        let found = events.iter().any(|e| {
            let last = e.last().unwrap();
            distance_km(
                last.latitude,
                last.longitude,
                truth.latitude,
                truth.longitude,
            ) <= 20.0
        });
        assert!(found, "no event at {truth:?}");
    }
}

/// A deep slab event is located at its depth once enough stations constrain it, not at a shallow cap.
#[test]
fn a_deep_quake_is_located_at_its_depth() {
    let truth = Quake::at(34.0, 138.1, 380.0, 6.3, 10.0);
    let reports = on_the_network(vec![truth], 240, 14);
    let events = events(&reports);
    assert_eq!(events.len(), 1);
    let tracking: Vec<_> = events[0]
        .iter()
        .filter(|r| r.status == "tracking")
        .collect();
    assert!(!tracking.is_empty());
    for r in tracking {
        assert!((r.depth_km - truth.depth_km).abs() <= 40.0, "{r:?}");
        let error = distance_km(r.latitude, r.longitude, truth.latitude, truth.longitude);
        assert!(error <= 30.0, "{error:.1} km: {r:?}");
    }
}

/// The first public report already has a magnitude, from the P window (`Mw-SM99-P`) when the S wave has not
/// reached two stations yet; the S estimate replaces it.
#[test]
fn the_first_public_report_has_a_magnitude() {
    let truth = Quake::at(32.742, 130.808, 11.0, 6.2, 10.0);
    let reports = on_the_network(vec![truth], 120, 15);
    let first = &reports[0];
    let m = first.magnitude.expect("a magnitude in the first report");
    assert!((m - truth.mw).abs() <= 0.5, "{first:?}");
    assert_eq!(first.magnitude_type.as_deref(), Some("Mw-SM99-P"));
    let last = reports.last().unwrap();
    assert_eq!(last.magnitude_type.as_deref(), Some("Mw-SM99"));
    assert!(
        (last.magnitude.unwrap() - truth.mw).abs() <= 0.3,
        "{last:?}"
    );
}

/// A well-recorded inland quake reaches grade A or S: picks that are S onsets or far off are not counted in
/// its RMS, so the RMS reflects the 1-second picks.
#[test]
fn a_well_recorded_inland_quake_reaches_grade_a_or_s() {
    let truth = Quake::at(36.0, 138.0, 10.0, 6.5, 10.0);
    let reports = on_the_network(vec![truth], 120, 16);
    let best = reports
        .iter()
        .filter(|r| r.grade == "S" || r.grade == "A")
        .count();
    assert!(best > 0, "{:?}", reports.last());
    let tracking = reports.iter().find(|r| r.status == "tracking").unwrap();
    assert!(tracking.rms_seconds.unwrap() <= 0.8, "{tracking:?}");
}

/// No quake on the whole network: stuck stations, lone spikes and dropouts make no event.
#[test]
fn no_quake_on_the_network_no_event_despite_stuck_stations_and_spikes() {
    use crate::scenario::{Scenario, Setting, run};
    use crate::stations::Network;
    let network = Network::shipped();
    let faults = Faults {
        stuck: vec![(100, 4.0), (700, 3.2)],
        spike: vec![(200, 30, 5.0), (900, 60, 5.5), (1200, 90, 4.0)],
        dropout: 0.05,
        ..Faults::default()
    }
    .station_terms(network.stations.len(), 0.3, 0.25, 17);
    let scenario = Scenario {
        name: "quiet".into(),
        setting: Setting::Quiet,
        quakes: Vec::new(),
        seconds: 120,
        faults,
        gap: None,
        seed: 17,
    };
    assert!(
        run(
            &scenario,
            &network,
            &std::sync::Arc::new(Model::jma2001()),
            true,
            &crate::scenario::shape_natively
        )
        .is_empty()
    );
}
