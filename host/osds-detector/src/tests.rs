//! The stages together on synthetic earthquakes with known truth (the method: `docs/self-sensing.md`):
//! epicentre within 20 km inland and 50 km offshore, depth within 20 km once 5 stations, |ΔM| ≤ 0.5; a stuck
//! station and a lone spike trigger nothing; the same seed gives the same frames, and the same frames the same
//! solutions.

use crate::geo::distance_km;
use crate::locate::{Arrival, Hypocentre, Pick, Quiet, locate};
use crate::magnitude::{Estimate, PeakAtStation, Wave, estimate};
use crate::synthetic::{Faults, Quake, frames, grid_network, stations_at};
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
    for (n, frame) in frames.iter().enumerate() {
        // A station's first trigger is its P pick; a re-trigger (its S wave) is not.
        for fired in trigger
            .step(n as i64 * 1000, frame)
            .into_iter()
            .filter(|fired| !fired.again)
        {
            let s = stations[fired.station];
            picks.push((
                fired.station,
                Pick {
                    arrival: Arrival::P,
                    latitude: s.latitude,
                    longitude: s.longitude,
                    // A 1-second frame: the arrival lies within the second before it.
                    at: fired.onset_ms as f64 / 1000.0 - 0.5,
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
    use crate::detector::{Detector, DetectorConfig};
    let positions = grid_network(35.0, 135.0, 150.0, 20.0, |_, _| true);
    let stations = stations_at(&positions);
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
