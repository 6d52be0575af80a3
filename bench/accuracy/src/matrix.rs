//! The two matrices.
//!
//! - [`in_model`]: frames made with the detector's own travel times, attenuation and P/S contrast, delivered at
//!   the end of their second. It measures self-consistency only (every figure sits near the grid's floors) and
//!   is kept as a regression check.
//! - [`independent`]: frames made by the independent truth model ([`crate::truth`]), delivered by a feed that is
//!   1–2 s late, loses and repeats images and has outages ([`crate::feed`]), with disturbances that must never
//!   become events and mixes of quakes. Its figures are the ones that say how the detector does in a world
//!   that is not its own.

use crate::feed::Feed;
use crate::scenario::{Scenario, Setting, Source};
use crate::truth::{Disturbance, Rupture, Truth, TruthQuake, travel::Ak135};
use osds_detector::geo::distance_km;
use osds_detector::stations::Network;
use osds_detector::synthetic::{Envelope, Faults, Quake};

/// The in-model matrix (issue 19's). Hypocentres of named scenarios follow the JMA catalogue's for those
/// earthquakes; the others place events where Japan has them (slab events, offshore sequences).
pub fn in_model(network: &Network) -> Vec<Scenario> {
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
            Inland,
            Quake::at(36.200, 139.900, 80.0, 5.5, 10.0),
        ),
        (
            "kushiro-m7.0-100km",
            Inland,
            Quake::at(42.900, 144.400, 100.0, 7.0, 10.0),
        ),
        (
            "tokai-m6.3-380km",
            Offshore,
            Quake::at(34.000, 138.100, 380.0, 6.3, 10.0),
        ),
        (
            "japan-sea-m6.0-450km",
            Offshore,
            Quake::at(38.800, 134.500, 450.0, 6.0, 10.0),
        ),
        (
            "bonin-m7.0-600km",
            Offshore,
            Quake::at(32.500, 138.500, 600.0, 7.0, 10.0),
        ),
    ];
    let in_model =
        |name: &str, settings: Vec<Setting>, quakes: Vec<Quake>, seconds, seed| Scenario {
            name: name.to_string(),
            settings,
            source: Source::InModel {
                quakes,
                faults: imperfect(n, seed),
            },
            seconds,
            feed: Feed::perfect(),
            seed,
        };
    let mut scenarios: Vec<Scenario> = singles
        .into_iter()
        .enumerate()
        .map(|(i, (name, setting, q))| {
            let seconds = if q.mw >= 7.0 { 300 } else { 240 };
            in_model(name, vec![setting], vec![q], seconds, 1000 + i as u64)
        })
        .collect();
    scenarios.push(in_model(
        "two-at-once-300km",
        vec![Inland, Inland],
        vec![
            Quake::at(35.0, 135.0, 10.0, 6.0, 10.0),
            Quake::at(35.0, 138.3, 10.0, 6.0, 10.0),
        ],
        240,
        2001,
    ));
    // The second quake strikes while the first one's P wave is crossing its region (P there at ~90 s, S at
    // ~160 s) but is inconsistent with its travel times and far stronger there than it can explain.
    scenarios.push(in_model(
        "second-in-wavefront",
        vec![Offshore, Inland],
        vec![
            Quake::at(38.000, 142.000, 40.0, 7.0, 10.0),
            Quake::at(35.000, 136.500, 10.0, 6.0, 110.0),
        ],
        300,
        2002,
    ));
    let mut gap_3s = in_model(
        "gap-3s-m6.5",
        vec![Inland],
        vec![Quake::at(36.000, 138.000, 10.0, 6.5, 10.0)],
        240,
        2003,
    );
    gap_3s.feed = Feed::perfect().with_outage(24..27, 0.0);
    scenarios.push(gap_3s);
    let mut gap_20s = in_model(
        "gap-20s-m6.0",
        vec![Inland],
        vec![Quake::at(35.000, 135.100, 10.0, 6.0, 10.0)],
        240,
        2004,
    );
    gap_20s.feed = Feed::perfect().with_outage(30..50, 0.0);
    scenarios.push(gap_20s);
    let mut quiet = in_model("quiet", Vec::new(), Vec::new(), 240, 2005);
    if let Source::InModel { faults, .. } = &mut quiet.source {
        faults.dropout = 0.05;
    }
    scenarios.push(quiet);
    scenarios
}

/// The network's imperfections every in-model scenario has: timing offsets within ±0.3 s, site terms (σ 0.25
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

/// The shape of the in-model shaking, by seed: `s` the detector's own assumption (P window 1.5 below the S
/// peak, an immediate step), `g` gradual (2.0 below, P reached over 2 s, S over 5 s, slow decay), `a` abrupt
/// (1.0 below, S over 2 s, fast decay).
pub fn envelope(seed: u64) -> (char, Envelope) {
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

/// The origin (scenario seconds) that brings a distant quake's first P arrival to the network at `at` seconds.
fn first_p_at(network: &Network, latitude: f64, longitude: f64, depth_km: f64, at: f64) -> f64 {
    let ak135 = Ak135::get();
    let first = network
        .stations
        .iter()
        .map(|s| {
            ak135.p(
                distance_km(latitude, longitude, s.latitude, s.longitude),
                depth_km,
            )
        })
        .fold(f64::INFINITY, f64::min);
    at - first
}

/// The independent matrix: the truth model's quakes (mechanisms, ruptures and depths like Japan's), its
/// disturbances, and mixes of quakes; every scenario with the realistic feed, some with an outage of a few
/// seconds while an event is under way, and every one with two stuck stations, three spikes and 2 % dropouts.
pub fn independent(network: &Network) -> Vec<Scenario> {
    use Rupture::*;
    use Setting::*;
    let n = network.stations.len();
    let q = TruthQuake::at;
    let singles: Vec<(&str, Setting, TruthQuake)> = vec![
        // Inland crustal quakes (Kanno's shallow form).
        (
            "kumamoto-m7.0",
            Inland,
            q(32.755, 130.763, 12.0, 7.0, 10.0).fault(45.0, 70.0, Unilateral),
        ),
        (
            "noto-m7.5",
            Inland,
            q(37.495, 137.270, 16.0, 7.5, 10.0).fault(55.0, 45.0, Bilateral),
        ),
        (
            "iwate-miyagi-m6.9",
            Inland,
            q(39.028, 140.881, 8.0, 6.9, 10.0).fault(200.0, 40.0, Unilateral),
        ),
        (
            "tottori-m6.2",
            Inland,
            q(35.274, 133.349, 9.0, 6.2, 10.0).fault(160.0, 85.0, Bilateral),
        ),
        (
            "chuetsu-m6.6",
            Inland,
            q(37.292, 138.867, 13.0, 6.6, 10.0).fault(210.0, 55.0, Unilateral),
        ),
        ("osaka-m5.6", Inland, q(34.844, 135.622, 13.0, 5.6, 10.0)),
        ("sapporo-m5.5", Inland, q(43.060, 141.350, 10.0, 5.5, 10.0)),
        ("gifu-m4.5", Inland, q(35.900, 137.300, 10.0, 4.5, 10.0)),
        (
            "chiba-m4.8-50km",
            Inland,
            q(35.800, 140.100, 50.0, 4.8, 10.0),
        ),
        (
            "kanto-m6.0-80km",
            Inland,
            q(36.200, 139.900, 80.0, 6.0, 10.0).fault(10.0, 60.0, Bilateral),
        ),
        (
            "kushiro-m7.0-100km",
            Inland,
            q(42.900, 144.400, 100.0, 7.0, 10.0).fault(60.0, 30.0, Bilateral),
        ),
        // Offshore: interplate and intraslab quakes seen from one side.
        (
            "fukushima-oki-m7.3",
            Offshore,
            q(37.700, 141.600, 57.0, 7.3, 10.0).fault(20.0, 40.0, Bilateral),
        ),
        (
            "miyagi-oki-m7.0",
            Offshore,
            q(38.450, 141.650, 50.0, 7.0, 10.0).fault(200.0, 25.0, Unilateral),
        ),
        (
            "tokachi-oki-m8.0",
            Offshore,
            q(41.780, 144.080, 42.0, 8.0, 10.0).fault(230.0, 20.0, Unilateral),
        ),
        (
            "kii-oki-m7.1",
            Offshore,
            q(33.030, 136.800, 38.0, 7.1, 10.0).fault(250.0, 15.0, Bilateral),
        ),
        (
            "hyuganada-m6.8",
            Offshore,
            q(31.700, 131.700, 30.0, 6.8, 10.0).fault(210.0, 20.0, Bilateral),
        ),
        (
            "ibaraki-oki-m5.5",
            Offshore,
            q(36.400, 141.200, 40.0, 5.5, 10.0),
        ),
        (
            "izu-oshima-m5.0",
            Offshore,
            q(34.600, 139.300, 10.0, 5.0, 10.0),
        ),
        (
            "sanriku-oki-m6.5",
            Offshore,
            q(39.800, 142.600, 30.0, 6.5, 10.0).fault(190.0, 20.0, Unilateral),
        ),
        // Deep slab events.
        (
            "tokai-m6.3-380km",
            Offshore,
            q(34.000, 138.100, 380.0, 6.3, 10.0),
        ),
        (
            "japan-sea-m6.0-450km",
            Offshore,
            q(38.800, 134.500, 450.0, 6.0, 10.0),
        ),
    ];
    let scenario =
        |name: &str,
         settings: Vec<Setting>,
         quakes: Vec<TruthQuake>,
         extra: Vec<Disturbance>,
         seconds: u64,
         seed: u64| { truth_scenario(n, name, settings, quakes, extra, seconds, seed) };
    let mut scenarios: Vec<Scenario> = singles
        .into_iter()
        .enumerate()
        .map(|(i, (name, setting, quake))| {
            let seconds = if quake.mw >= 7.0 { 300 } else { 240 };
            let seed = 5000 + i as u64;
            let mut s = scenario(name, vec![setting], vec![quake], Vec::new(), seconds, seed);
            // Every third quake loses 4–6 s of frames to an outage while its event is under way.
            if i % 3 == 1 {
                let from = 26 + (i as u64 % 4);
                s.feed = s.feed.with_outage(from..from + 4 + (i as u64 % 3), 0.5);
            }
            s
        })
        .collect();
    // Mixes of quakes.
    scenarios.push(scenario(
        "aftershock-60s-20km",
        vec![Inland, Inland],
        vec![
            q(36.500, 138.200, 10.0, 6.8, 10.0).fault(30.0, 50.0, Bilateral),
            q(36.650, 138.320, 8.0, 5.5, 70.0),
        ],
        Vec::new(),
        300,
        6001,
    ));
    scenarios.push(scenario(
        "aftershock-25s-25km",
        vec![Inland, Inland],
        vec![
            q(34.900, 135.800, 12.0, 6.5, 10.0).fault(60.0, 60.0, Unilateral),
            q(35.050, 136.000, 10.0, 5.8, 35.0),
        ],
        Vec::new(),
        240,
        6002,
    ));
    scenarios.push(scenario(
        "two-at-once-300km",
        vec![Inland, Inland],
        vec![
            q(35.0, 135.0, 10.0, 6.0, 10.0),
            q(35.0, 138.3, 10.0, 6.2, 11.0),
        ],
        Vec::new(),
        240,
        6003,
    ));
    scenarios.push(scenario(
        "two-at-once-150km",
        vec![Inland, Inland],
        vec![
            q(36.0, 137.0, 10.0, 5.8, 10.0),
            q(36.9, 138.3, 10.0, 6.0, 13.0),
        ],
        Vec::new(),
        240,
        6004,
    ));
    // An inland M6.0 strikes while an offshore M7.8's P wave crosses its region.
    scenarios.push(scenario(
        "second-in-wavefront",
        vec![Offshore, Inland],
        vec![
            q(41.800, 144.500, 30.0, 7.8, 10.0).fault(230.0, 20.0, Unilateral),
            q(35.000, 135.800, 10.0, 6.0, 120.0),
        ],
        Vec::new(),
        300,
        6005,
    ));
    // Distant great earthquakes: their weak wavefronts cross the whole network.
    let (lat, lon, depth) = (52.5, 160.3, 20.0);
    scenarios.push(scenario(
        "kamchatka-m8.8",
        vec![Outside],
        vec![
            q(
                lat,
                lon,
                depth,
                8.8,
                first_p_at(network, lat, lon, depth, 20.0),
            )
            .fault(220.0, 20.0, Bilateral),
        ],
        Vec::new(),
        300,
        6006,
    ));
    let (lat, lon, depth) = (8.5, 126.4, 30.0);
    scenarios.push(scenario(
        "philippines-m7.6",
        vec![Outside],
        vec![
            q(
                lat,
                lon,
                depth,
                7.6,
                first_p_at(network, lat, lon, depth, 20.0),
            )
            .fault(160.0, 30.0, Bilateral),
        ],
        Vec::new(),
        300,
        6007,
    ));
    let (lat, lon, depth) = (46.6, 153.3, 10.0);
    scenarios.push(scenario(
        "kurils-m8.3",
        vec![Outside],
        vec![
            q(
                lat,
                lon,
                depth,
                8.3,
                first_p_at(network, lat, lon, depth, 20.0),
            )
            .fault(215.0, 20.0, Bilateral),
        ],
        Vec::new(),
        300,
        6008,
    ));
    // No earthquake: what must never become one.
    scenarios.push(scenario(
        "bursts",
        Vec::new(),
        Vec::new(),
        vec![
            Disturbance::Burst {
                latitude: 35.69,
                longitude: 139.69,
                stations: 6,
                from: 30,
                seconds: 8,
                rise: 2.5,
            },
            Disturbance::Burst {
                latitude: 34.69,
                longitude: 135.50,
                stations: 10,
                from: 90,
                seconds: 20,
                rise: 1.8,
            },
            Disturbance::Burst {
                latitude: 43.06,
                longitude: 141.35,
                stations: 4,
                from: 150,
                seconds: 3,
                rise: 3.5,
            },
        ],
        240,
        6009,
    ));
    let pick = |k: u64| ((6010 * 7919 + k * 104_729) % n as u64) as usize;
    scenarios.push(scenario(
        "flapping",
        Vec::new(),
        Vec::new(),
        vec![
            Disturbance::Flapping {
                station: pick(11),
                period: 1,
                level: None,
            },
            Disturbance::Flapping {
                station: pick(12),
                period: 3,
                level: Some(3.0),
            },
            Disturbance::Flapping {
                station: pick(13),
                period: 2,
                level: Some(4.5),
            },
            Disturbance::Flapping {
                station: pick(14),
                period: 5,
                level: Some(2.0),
            },
        ],
        240,
        6010,
    ));
    let mut quiet = scenario("quiet", Vec::new(), Vec::new(), Vec::new(), 240, 6011);
    if let Source::Truth(truth) = &mut quiet.source {
        truth.dropout = 0.05;
    }
    scenarios.push(quiet);
    scenarios
}

/// A scenario of the truth model with the realistic feed: its own disturbances, and on `stations` stations
/// two stuck stations, three spikes and 2 % dropouts.
fn truth_scenario(
    stations: usize,
    name: &str,
    settings: Vec<Setting>,
    quakes: Vec<TruthQuake>,
    extra: Vec<Disturbance>,
    seconds: u64,
    seed: u64,
) -> Scenario {
    let pick = |k: u64| ((seed * 7919 + k * 104_729) % stations as u64) as usize;
    let mut disturbances = vec![
        Disturbance::Stuck {
            station: pick(1),
            level: 4.0,
        },
        Disturbance::Stuck {
            station: pick(2),
            level: 3.2,
        },
        Disturbance::Spike {
            station: pick(3),
            frame: 40,
            level: 5.0,
        },
        Disturbance::Spike {
            station: pick(4),
            frame: 70,
            level: 4.0,
        },
        Disturbance::Spike {
            station: pick(5),
            frame: 95,
            level: 5.5,
        },
    ];
    disturbances.extend(extra);
    Scenario {
        name: name.to_string(),
        settings,
        source: Source::Truth(Truth {
            quakes,
            disturbances,
            dropout: 0.02,
        }),
        seconds,
        feed: Feed::realistic(),
        seed,
    }
}

/// Foreshock mixes, outside the independent matrix (its targets are read without them): a larger quake
/// seconds after a smaller one beside it, on the independent truth and feed. Exploratory: one rule of the
/// detector was made on the third (a rising magnitude's P coda), and BENCHMARKS.md says how it fares on all.
pub fn foreshocks(network: &Network) -> Vec<Scenario> {
    use Rupture::*;
    use Setting::*;
    let q = TruthQuake::at;
    // (name, setting of both, foreshock, mainshock, seconds, seed)
    let mixes = [
        (
            "foreshock-25s-25km",
            Inland,
            q(34.900, 135.800, 12.0, 5.8, 10.0),
            q(35.050, 136.000, 10.0, 6.5, 35.0).fault(60.0, 60.0, Unilateral),
            240,
            6097,
        ),
        (
            "foreshock-10s-15km",
            Inland,
            q(36.500, 138.200, 10.0, 6.0, 10.0),
            q(36.600, 138.300, 8.0, 6.9, 20.0).fault(30.0, 50.0, Bilateral),
            240,
            6098,
        ),
        (
            "foreshock-40s-30km-off",
            Offshore,
            q(38.300, 142.400, 30.0, 6.8, 10.0),
            q(38.050, 142.600, 25.0, 7.4, 50.0).fault(30.0, 90.0, Bilateral),
            300,
            6099,
        ),
    ];
    mixes
        .into_iter()
        .map(|(name, setting, foreshock, mainshock, seconds, seed)| {
            truth_scenario(
                network.stations.len(),
                name,
                vec![setting, setting],
                vec![foreshock, mainshock],
                Vec::new(),
                seconds,
                seed,
            )
        })
        .collect()
}
