//! The detector on the real network (the shipped K-NET/KiK-net table), scenario by scenario: behaviours a
//! consumer relies on, pinned on the in-model synthetic quakes (the detector's own model) and on the
//! independent truth model. Deterministic: seeded frames, the feed's deliveries drawn from the seed, no clock.

use crate::feed::Feed;
use crate::scenario::{Report, Scenario, Setting, Source, run, shape_natively};
use osds_detector::geo::distance_km;
use osds_detector::stations::Network;
use osds_detector::synthetic::{Faults, Quake};
use osds_detector::traveltime::Model;
use std::sync::Arc;

/// The real network (the shipped K-NET/KiK-net table) with every station's timing offset (±0.3 s) and site
/// term, 2 % dropouts: one scenario's reports, values fed directly (the image path has its own tests).
fn on_the_network(quakes: Vec<Quake>, seconds: u64, seed: u64) -> Vec<Report> {
    let network = Network::shipped();
    let faults = Faults {
        dropout: 0.02,
        ..Faults::default()
    }
    .station_terms(network.stations.len(), 0.3, 0.25, seed);
    let scenario = Scenario {
        name: "test".into(),
        settings: vec![Setting::Inland; quakes.len()],
        source: Source::InModel { quakes, faults },
        seconds,
        feed: Feed::perfect(),
        seed,
    };
    run_on(&scenario, &network, false)
}

fn run_on(scenario: &Scenario, network: &Network, images: bool) -> Vec<Report> {
    let earth = crate::Options::default().earth(network);
    run(
        scenario,
        network,
        &earth,
        &Arc::new(Model::jma2001()),
        images,
        0,
        &shape_natively,
    )
    .reports
}

/// The public events of a run, each with its reports in order.
fn events(reports: &[Report]) -> Vec<Vec<&Report>> {
    let mut events: Vec<Vec<&Report>> = Vec::new();
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

/// A magnitude is reported once it can be estimated well, within seconds of the first report: from S peaks
/// (`Mw-SM99`), or before two stations have them from stations settled in their P window (`Mw-SM99-P`); never a
/// guess from stations whose P wave is still building (`null` until then).
#[test]
fn the_magnitude_comes_once_it_can_be_estimated() {
    let truth = Quake::at(32.742, 130.808, 11.0, 6.2, 10.0);
    let reports = on_the_network(vec![truth], 120, 15);
    let first = reports
        .iter()
        .find(|r| r.magnitude.is_some())
        .expect("a magnitude");
    assert!(
        first.reported_at_ms - reports[0].reported_at_ms <= 5_000,
        "{first:?}"
    );
    assert!(
        (first.magnitude.unwrap() - truth.mw).abs() <= 0.5,
        "{first:?}"
    );
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
        settings: Vec::new(),
        source: Source::InModel {
            quakes: Vec::new(),
            faults,
        },
        seconds: 120,
        feed: Feed::perfect(),
        seed: 17,
    };
    assert!(run_on(&scenario, &network, true).is_empty());
}

/// The options of a draw of the truth and the feed (`--world=N`; 0 is the recorded one).
fn world(world: u64) -> crate::Options {
    crate::Options {
        world,
        ..crate::Options::default()
    }
}

/// A scenario of the independent matrix (or of the foreshock mixes beside it) on a draw of the truth and the
/// feed, run through monitor images as the benchmark runs it, scored.
fn independent_in(name: &str, world: u64) -> crate::score::Score {
    independent_with(name, &self::world(world))
}

/// [`independent_in`] on the truth and the feed `options` ask for.
fn independent_with(name: &str, options: &crate::Options) -> crate::score::Score {
    crate::score::score(&independent_run(name, options).1)
}

/// [`independent_with`]'s scenario and its run, unscored.
fn independent_run(name: &str, options: &crate::Options) -> (Scenario, crate::scenario::Run) {
    let network = Network::shipped();
    let mut scenarios = crate::matrix::independent(&network);
    scenarios.extend(crate::matrix::foreshocks(&network));
    let scenario = options
        .select(scenarios)
        .into_iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no scenario {name}"));
    let earth = options.earth(&network);
    let run = run(
        &scenario,
        &network,
        &earth,
        &Arc::new(Model::jma2001()),
        true,
        options.lead_in_s,
        &shape_natively,
    );
    (scenario, run)
}

fn assert_found_and_nothing_else(name: &str) -> crate::score::Score {
    assert_found_and_nothing_else_in(name, 0)
}

/// [`independent_in`], asserting that it published no false event.
fn assert_nothing_false_in(name: &str, world: u64) -> crate::score::Score {
    assert_nothing_false_with(name, &self::world(world))
}

fn assert_nothing_false_with(name: &str, options: &crate::Options) -> crate::score::Score {
    nothing_false(name, options, independent_with(name, options))
}

/// Asserts that `score` (of `name` run with `options`) has no false event.
fn nothing_false(
    name: &str,
    options: &crate::Options,
    score: crate::score::Score,
) -> crate::score::Score {
    assert!(
        score.false_event_ids.is_empty(),
        "{name} on world {} {}: false events {:?}",
        options.world,
        options.departures.describe(),
        score.false_event_ids
    );
    score
}

fn assert_found_and_nothing_else_in(name: &str, world: u64) -> crate::score::Score {
    assert_found_and_nothing_else_with(name, &self::world(world))
}

fn assert_found_and_nothing_else_with(name: &str, options: &crate::Options) -> crate::score::Score {
    found_and_nothing_else(name, options, independent_with(name, options))
}

/// Asserts that `score` (of `name` run with `options`) found every quake it must and has no false event.
fn found_and_nothing_else(
    name: &str,
    options: &crate::Options,
    score: crate::score::Score,
) -> crate::score::Score {
    let score = nothing_false(name, options, score);
    for outcome in score
        .outcomes
        .iter()
        .filter(|o| crate::score::must_find(&o.quake))
    {
        assert!(
            outcome.event_id.is_some(),
            "{name}: missed {:?}",
            outcome.quake
        );
    }
    score
}

/// Twice the truth's frame noise, after a minute's quiet lead-in, on `world`: the noisy draws the tests below
/// were traced on.
fn noisy_after_a_lead_in(world: u64) -> crate::Options {
    crate::Options::from_args(
        ["--noise=2", "--lead-in=60", &format!("--world={world}")].map(String::from),
    )
    .expect("valid arguments")
}

/// On a network twice as noisy as recorded some station triggers on its noise every second or so, and chance
/// picks fit a source: ten within six seconds under Chugoku as a 690 km deep M7.0 (before the Kumamoto quake),
/// seven in a line towards Boso over 36 s and a station the Iwate quake shook 800 km away as an M9 under Boso.
/// A cluster's picks must be far more than the network's background of picks gives its solution.
#[test]
fn chance_picks_on_a_noisy_network_fit_no_quake() {
    let options = noisy_after_a_lead_in(0);
    assert_found_and_nothing_else_with("kumamoto-m7.0", &options);
    assert_found_and_nothing_else_with("iwate-miyagi-m6.9", &options);
}

/// A deep candidate of chance picks explains no real quake's picks. On a noisy network chance picks fitted a
/// source 500-700 km deep under Fukushima, whose P wave reaches every station within seconds; open for a
/// minute, that candidate took in the first of two quakes at once for half a minute (published 40 s after its
/// third P arrival), and a false 312 km deep event was published beside them.
#[test]
fn a_chance_cluster_takes_in_no_quake() {
    let options = noisy_after_a_lead_in(0);
    assert_found_and_nothing_else_with("two-at-once-150km", &options);
}

/// Chance picks joined by a far quake's P wave make no quake of their own. On a noisy network (world 0, after a
/// minute's lead-in) three chance picks on the Oki islands, too weak to be published, were joined by three
/// picks of the Hyuga-nada M6.8's P wave 515 km away, a second or two before its predicted arrival: neither
/// half was most of the picks, and the six were published as a quake at the Oki islands.
#[test]
fn chance_picks_and_a_far_quakes_wavefront_make_no_quake_together() {
    let options = noisy_after_a_lead_in(0);
    assert_found_and_nothing_else_with("hyuganada-m6.8", &options);
}

/// Every event is first published `preliminary`, then `tracking`, then closed, never the other way, however
/// long it waited as a candidate. On this noisy draw (world 5, after a minute's lead-in) one of two quakes at
/// once, 300 km apart, waits as a candidate with its position steady for more than the five seconds tracking
/// asks: it was once first published `tracking`.
#[test]
fn an_event_is_first_published_preliminary_however_long_it_waited() {
    let options = noisy_after_a_lead_in(5);
    let (_, run) = independent_run("two-at-once-300km", &options);
    let stage = |status: &str| match status {
        "preliminary" => 0,
        "tracking" => 1,
        "finalized" | "retracted" | "interrupted" => 2,
        other => panic!("a public report with status {other}"),
    };
    let events = events(&run.reports);
    assert!(events.len() >= 2, "both quakes published: {events:?}");
    for event in events {
        assert_eq!(event[0].status, "preliminary", "{:?}", event[0]);
        for pair in event.windows(2) {
            assert!(
                stage(&pair[0].status) <= stage(&pair[1].status),
                "{:?} after {:?}",
                pair[1],
                pair[0]
            );
        }
    }
}

/// Bursts on a few neighbouring stations at once (no moveout) are not earthquakes, however they fit: on other
/// draws of the truth one fitted a 137 km deep M4 under Osaka (world 8) and one a 60 km deep M4 under Sapporo
/// (world 1), and the quiet stations beside them, as near such a source as the burst's own, say otherwise.
/// Ten stations under Osaka picked in one frame were published as a 75-116 km deep M4 before those stations were
/// due to show it (worlds 7 and 9): such a cluster waits until they are.
#[test]
fn bursts_on_neighbouring_stations_make_no_event() {
    assert_found_and_nothing_else("bursts");
    assert_found_and_nothing_else_in("bursts", 8);
    assert_found_and_nothing_else_in("bursts", 1);
    assert_found_and_nothing_else_in("bursts", 7);
    assert_found_and_nothing_else_in("bursts", 9);
}

/// The weak wavefront of a distant great earthquake crossing the whole network makes no local event, nor does
/// a Kuril-trench quake whose waves reach only the network's edge at first.
#[test]
fn a_distant_great_earthquakes_wavefront_makes_no_event() {
    assert_found_and_nothing_else("kamchatka-m8.8");
    assert_found_and_nothing_else("kurils-m8.3");
}

/// A distant great quake's later waves, minutes after its P, re-trigger stations that have shaken ever since;
/// no located event explains that shaking. On this draw of the truth they once made an M6.5 under the Nemuro
/// peninsula 160 s after Kamchatka's first P: they are no new quake.
#[test]
fn a_distant_great_quakes_later_waves_make_no_event() {
    assert_found_and_nothing_else_in("kamchatka-m8.8", 1);
}

/// A distant great quake located loosely from one side still explains its wavefront reaching the far side of
/// the country a minute or two later: its predicted arrivals there are only as good as its epicentre. On this
/// draw of the truth the Kuril quake's wavefront crossing Fukushima once made an event of its own.
#[test]
fn a_distant_great_quakes_wavefront_across_the_country_is_its_own() {
    assert_found_and_nothing_else_in("kurils-m8.3", 3);
}

/// The stations a distant quake's candidate holds (located outside the network, never published) still test a
/// cluster that its wavefront forms inside: on these draws they shake sooner than a 600 km deep M7 under
/// Sanriku, or a shallow quake in Hokkaido, could make them, and that is what they must say.
#[test]
fn a_distant_candidates_stations_still_test_a_cluster_inside_the_network() {
    assert_found_and_nothing_else_in("kurils-m8.3", 5);
    assert_found_and_nothing_else_in("kurils-m8.3", 9);
    assert_found_and_nothing_else_in("kamchatka-m8.8", 3);
}

/// An aftershock 60 s after and 20 km from its mainshock is detected on the mainshock's stations, not swallowed
/// by the mainshock's event.
#[test]
fn an_aftershock_on_the_mainshocks_stations_is_its_own_event() {
    let score = assert_found_and_nothing_else("aftershock-60s-20km");
    let ids: Vec<_> = score.outcomes.iter().map(|o| o.event_id.clone()).collect();
    assert_ne!(ids[0], ids[1]);
}

/// An aftershock 25 s after its mainshock is seen by its S wave on the mainshock's shaking stations and located
/// a few seconds late; its S wave then sweeping the stations 100 km and more away, after the mainshock's S
/// wave and inside its shaking, made quakes of its own on these draws of the truth (an M5.7 under the Kii
/// peninsula and an M4.2 in Hyogo on world 2, an M6.4 in Hyogo on world 4).
#[test]
fn an_aftershocks_s_wave_across_the_mainshocks_shaking_makes_no_event() {
    assert_found_and_nothing_else_in("aftershock-25s-25km", 2);
    assert_found_and_nothing_else_in("aftershock-25s-25km", 4);
}

/// A quake's S wave arrives far away seconds before the detector's tables predict it from its solution (the
/// truth's travel times are not the detector's): on this draw of the truth the Gifu M4.5's S wave 120 km away
/// once made a quake of its own 25 s later.
#[test]
fn a_quakes_early_s_wave_far_away_is_its_own() {
    assert_found_and_nothing_else_in("gifu-m4.5", 10);
}

/// After a feed outage every station the P wave reached meanwhile is picked at once, on the first image after
/// it, seconds after its arrival: that ring of simultaneous picks fits a source far below the quake. On this
/// draw of the truth the Gifu M4.5's made an M6.7 700 km under it, published and finalized.
#[test]
fn the_stations_an_outage_hid_a_quakes_p_wave_from_are_its_own() {
    assert_found_and_nothing_else_in("gifu-m4.5", 4);
}

/// The Philippine quake's P wave, 1,800 km away, does not trigger the Sakishima islands; its S wave three
/// minutes later crosses their five stations (no other within 300 km to test them) and fits a quake 55-124 km
/// below them, its level read as a P wave's. On these draws of the truth (and world 6) it was published as an
/// M4.1-4.8, retracted once its S-window magnitude (M2.7-3.6) showed no S wave: such an isolated cluster
/// waits for its own S wave to bear out its P-window magnitude.
#[test]
fn a_distant_quakes_s_wave_across_an_island_group_is_no_quake_there() {
    assert_found_and_nothing_else_in("philippines-m7.6", 4);
    assert_found_and_nothing_else_in("philippines-m7.6", 19);
}

/// A reported quake's waves reaching stations far away sooner than its solution predicts (another Earth's
/// mantle; the Kushiro M7.0, 100 km deep, located 50-80 km deep) fit quakes of their own there: on these draws
/// of the truth the Kushiro M7.0 made published satellites 230-350 km away (worlds 3 and 8), and the Gifu
/// M4.5's stations 110-130 km out, picking their weak P late, one 130 km away (world 1). Most picks about when
/// the reported quake's P or S wave was due, shaking no harder than it explains, are its wavefront.
#[test]
fn a_quakes_waves_arriving_sooner_than_its_solution_predicts_make_no_other_quake() {
    assert_found_and_nothing_else_in("kushiro-m7.0-100km", 3);
    assert_found_and_nothing_else_in("kushiro-m7.0-100km", 8);
    assert_found_and_nothing_else_in("gifu-m4.5", 1);
}

/// Where the truth's stations are delayed twice as much as recorded (sd 0.8 s over regions, within hyp.md's
/// ±0.5-1 s), a reported quake's P wave reaches stations 250-600 km away 3-9 s before its solution predicts:
/// the Noto M7.5's (world 0) made a cluster 250 km north-east, published as a deep M8 (its own magnitude, read
/// 0.6 high, had widened its aftershock zone over those stations), and the Kushiro M7.0's (world 3, its
/// solution 30 km off) one 330 km north. Most picks just before a reported quake's P wave was due are that wave.
#[test]
fn a_quakes_p_wave_arriving_before_its_solution_predicts_makes_no_other_quake() {
    let delayed = |world| crate::Options {
        world,
        departures: crate::truth::Departures {
            delay_sd: 0.8,
            ..Default::default()
        },
        ..Default::default()
    };
    assert_found_and_nothing_else_with("noto-m7.5", &delayed(0));
    assert_found_and_nothing_else_with("kushiro-m7.0-100km", &delayed(3));
}

/// A great quake's fault breaks on for a minute: the Tokachi-oki M8.0's, 190 km south-west of its epicentre,
/// shakes stations there at 6.3-6.7, beyond what its point source explains, as its S wave passes. On this draw
/// of the truth those five picks, their level read as a P wave's, made a published M9.5 (the magnitude scale's
/// top) beside the M7.9 it was reported as. An aftershock is smaller than its mainshock: a candidate no
/// smaller, made of picks that quake's waves reach, is its rupture.
#[test]
fn a_great_quakes_fault_breaking_on_is_no_bigger_quake_beside_it() {
    assert_found_and_nothing_else_in("tokachi-oki-m8.0", 14);
}

/// A larger quake 25 s after a smaller one 25 km away (one of the exploratory foreshock mixes) is an event of
/// its own, not more of the first one's shaking, and nothing else is published. Each event is scored as the
/// quake it lies at (both fit either within 100 km and 30 s).
#[test]
fn a_larger_quake_soon_after_a_smaller_one_beside_it_is_its_own_event() {
    let score = assert_found_and_nothing_else("foreshock-25s-25km");
    let events: std::collections::BTreeSet<_> = score
        .outcomes
        .iter()
        .filter_map(|o| o.event_id.as_ref())
        .collect();
    assert_eq!(events.len(), 2, "{events:?}");
    for outcome in &score.outcomes {
        let km = outcome.final_km;
        assert!(
            km.is_some_and(|km| km <= 15.0),
            "{:?}: {km:?}",
            outcome.quake
        );
    }
}

/// An offshore M7.4 forty seconds after an M6.8 beside it (a foreshock mix) raises the M6.8's event's
/// magnitude, and sends its P wave across the country 40-50 s after the M6.8's, past the P coda that the
/// M6.8's first magnitude allows: on these draws of the truth it made quakes of their own 750-900 km away (two
/// on world 1, three on world 3). A quake whose magnitude kept rising counts its P coda for as long as it rose.
#[test]
fn a_second_larger_ruptures_wavefront_is_no_quake_far_away() {
    assert_found_and_nothing_else_in("foreshock-40s-30km-off", 3);
    assert_nothing_false_in("foreshock-40s-30km-off", 1);
}

/// Inside a reported quake's shaking, after its S wave, a second quake's P wave need not rise above that
/// shaking; its S wave does. Read as P arrivals, those S onsets placed the M5.8 twenty-five seconds after its
/// M6.5 26 km off (world 10) or not at all (world 12), and the offshore M7.4 forty seconds after an M6.8 beside
/// it at 0 km with its origin 26 s late, a false event (world 18). Read as S onsets where they came, they place
/// both; the S waves of a great quake's own rupture ending 200 km from its epicentre, which fit a quake there
/// as well, are not read so (a false M8.2 under Iwate on world 14).
#[test]
fn a_quake_seen_by_its_s_onsets_inside_anothers_shaking_is_placed_by_them() {
    for (name, world) in [
        ("aftershock-25s-25km", 10),
        ("aftershock-25s-25km", 12),
        ("foreshock-40s-30km-off", 18),
    ] {
        let score = assert_found_and_nothing_else_in(name, world);
        let km = score.outcomes[1].final_km;
        assert!(
            km.is_some_and(|km| km <= 10.0),
            "{name} on world {world}: the second quake's final epicentre {km:?} km off"
        );
    }
    assert_nothing_false_in("tokachi-oki-m8.0", 14);
}

/// Beside a large inland fault the attenuation relation saturates (the predicted intensity hardly grows with
/// the magnitude), so the first stations' peaks, half a unit above it on these draws of the truth (soft sites,
/// another intensity relation), made an M6.9, an M7.0 and an M6.8 each an M9.5 (the top of the search) in the
/// first report with a magnitude. Those stations do not measure the magnitude: it waits for stations farther
/// out.
#[test]
fn a_large_quakes_stations_beside_its_fault_make_no_great_quake_of_it() {
    for (name, world) in [
        ("iwate-miyagi-m6.9", 4),
        ("kumamoto-m7.0", 3),
        ("aftershock-60s-20km", 1),
    ] {
        let score = independent_in(name, world);
        let first = score.outcomes[0].first_dm;
        assert!(
            first.is_some_and(|dm| dm.abs() <= 1.0),
            "{name} on world {world}: first magnitude off by {first:?}"
        );
    }
}

/// A second quake striking while a great offshore one's waves cross its region is its own event, and the
/// great one's wavefront makes no other.
#[test]
fn a_quake_inside_anothers_wavefront_is_its_own_event() {
    assert_found_and_nothing_else("second-in-wavefront");
}

/// A deep quake seen from one side is one event at depth, not a shallow one made of its late S arrivals.
#[test]
fn a_deep_quake_seen_from_one_side_is_one_event() {
    let score = assert_found_and_nothing_else("japan-sea-m6.0-450km");
    let depth = score.outcomes[0].median_depth_km();
    assert!(depth.is_some_and(|d| d <= 150.0), "{depth:?}");
}

/// The same deep quake on other draws of the truth: its weak P wave picked in clusters hundreds of km apart,
/// too few each to be located deep. Together they are one event at depth (world 4: before, missed, and its S
/// wave a false shallow quake), and its S wave no quake of its own even when it is not found (world 1).
#[test]
fn a_deep_quakes_p_wave_in_clusters_far_apart_is_one_deep_event() {
    let score = assert_found_and_nothing_else_in("japan-sea-m6.0-450km", 4);
    let depth = score.outcomes[0].median_depth_km();
    assert!(depth.is_some_and(|d| d <= 40.0), "{depth:?}");
    assert_nothing_false_in("japan-sea-m6.0-450km", 1);
}

/// The same deep quake's S wave reaching the Noto stations from the west, on a draw of the truth where its P
/// wave made no event: 35 picks, all on one side, as good anywhere along a trough out to sea as far as the
/// solution's uncertainty is looked for (300 km), once published as a shallow M5.4 140 km beyond the nearest
/// of them. Picks that fix no epicentre are no event.
#[test]
fn a_deep_quakes_s_wave_seen_from_one_side_fixes_no_epicentre() {
    assert_nothing_false_in("japan-sea-m6.0-450km", 5);
}

/// A deep quake's depth trades against its distance while only P arrivals locate it: on this draw its P
/// stations fit a source 587 km deep and 150 km off (published, counted false, the quake missed). The S onsets
/// on the same stations, 50 s later, fix the distance.
#[test]
fn a_deep_quakes_s_onsets_locate_it() {
    let score = assert_found_and_nothing_else_in("japan-sea-m6.0-450km", 19);
    let depth = score.outcomes[0].median_depth_km();
    assert!(depth.is_some_and(|d| d <= 40.0), "{depth:?}");
}

/// The same deep quake on draws where its weak P wave, a minute on through the mantle, was picked on a few
/// stations seconds apart and made no event: its S wave, picked on 40 stations 250-600 km from its epicentre,
/// read as P onsets fits a shallower source out at sea, outside the network and more than a minute late (no
/// event; the quake missed). Read as S onsets, with the stations that picked when its P wave was due there,
/// it is found and placed.
#[test]
fn a_deep_quake_far_at_sea_is_found_by_its_s_wave() {
    for world in [1, 3, 9, 10] {
        let score = assert_found_and_nothing_else_in("japan-sea-m6.0-450km", world);
        let outcome = &score.outcomes[0];
        let (km, depth) = (outcome.final_km, outcome.median_depth_km());
        assert!(
            km.is_some_and(|km| km <= 25.0) && depth.is_some_and(|d| d <= 40.0),
            "world {world}: final epicentre {km:?} km off, median depth {depth:?} km off"
        );
    }
}

/// A stuck station near a deep quake's epicentre, read silent while 270 stations showed the quake (world 5:
/// one of four silent stations where the neighbourhood test allows two), held the Japan Sea quake back for
/// good. A station the trigger knows is stuck says nothing, whatever its neighbours do meanwhile.
#[test]
fn a_stuck_station_does_not_hold_a_deep_quake_back() {
    assert_found_and_nothing_else_in("japan-sea-m6.0-450km", 5);
}

/// A distant great quake's P wavefront crosses every station: its S wave, read as a deep quake's S onsets, put
/// that deep source's P arrival where a dozen of those picks were (world 11: an M5.9 published 600 km under
/// the Sanriku coast). The picks an event located outside the network took are that quake's.
#[test]
fn a_distant_quakes_p_wavefront_is_no_deep_quakes_p_wave() {
    assert_nothing_false_in("kurils-m8.3", 11);
}

/// Images published 1-2 s late, some lost, and an outage of seconds while the event is under way: the event
/// goes on, not interrupted, and its reports carry when they would have been published.
#[test]
fn a_late_lossy_feed_with_an_outage_does_not_interrupt_the_event() {
    let score = assert_found_and_nothing_else("iwate-miyagi-m6.9");
    let outcome = &score.outcomes[0];
    assert!(!outcome.interrupted_mid_run, "{outcome:?}");
    assert!(outcome.latency_s.is_some_and(|l| l >= 1.0), "{outcome:?}");
}

#[test]
fn another_world_draws_the_same_scenarios_from_other_seeds() {
    let args = |a: &[&str]| crate::Options::from_args(a.iter().map(|s| s.to_string()));
    let options =
        args(&["--independent", "--world=3", "--bench", "kushiro"]).expect("valid arguments");
    assert_eq!(options.world, 3);
    assert!(options.only_independent);
    assert_eq!(options.only, vec!["kushiro".to_string()]);
    let error = args(&["--world=three"]).expect_err("not a number");
    assert!(error.contains("--world=three"), "{error}");

    let network = Network::shipped();
    let recorded = args(&["kushiro"])
        .expect("valid")
        .select(crate::matrix::independent(&network));
    let other = options.select(crate::matrix::independent(&network));
    assert_eq!(recorded.len(), 1);
    assert_eq!(other.len(), 1);
    assert_eq!(recorded[0].name, other[0].name);
    assert_eq!(recorded[0].settings, other[0].settings);
    assert_eq!(recorded[0].feed, other[0].feed);
    assert_eq!(recorded[0].seconds, other[0].seconds);
    assert_ne!(recorded[0].seed, other[0].seed);
}

#[test]
fn a_truth_that_departs_further_changes_only_what_was_asked() {
    let args = |a: &[&str]| crate::Options::from_args(a.iter().map(|s| s.to_string()));
    let recorded = args(&[]).expect("valid");
    assert_eq!(recorded.departures, crate::truth::Departures::default());
    assert_eq!(recorded.departures.describe(), "");
    let options = args(&["--delays=0.8", "--sites=-0.15"]).expect("valid arguments");
    assert_eq!(options.departures.delay_sd, 0.8);
    assert_eq!(options.departures.site_log_pgv, -0.15);
    assert_eq!(
        options.departures.describe(),
        "station delays sd 0.8 s, sites -0.15 log10 PGV"
    );
    for bad in ["--delays=much", "--noise=", "--p-rise=NaN", "--delays=-0.4"] {
        let error = args(&[bad]).expect_err("not a number");
        assert!(error.contains(bad), "{error}");
    }

    // The same draw: the delays spread twice as wide (the stations' own 0.12 s aside), every site moves by
    // the offset, and the rest stays.
    let network = Network::shipped();
    let (before, after) = (recorded.earth(&network), options.earth(&network));
    let spread = |earth: &crate::truth::Earth| {
        let n = earth.terms.len() as f64;
        let mean = earth.terms.iter().map(|t| t.delay_s).sum::<f64>() / n;
        (earth
            .terms
            .iter()
            .map(|t| (t.delay_s - mean).powi(2))
            .sum::<f64>()
            / n)
            .sqrt()
    };
    let ratio = spread(&after) / spread(&before);
    assert!((1.8..2.0).contains(&ratio), "{ratio}");
    for (b, a) in before.terms.iter().zip(&after.terms) {
        assert!((a.site_log_pgv - (b.site_log_pgv - 0.15)).abs() < 1e-9);
        assert_eq!(
            (a.noise_sd, a.p_contrast, a.p_rise_s),
            (b.noise_sd, b.p_contrast, b.p_rise_s)
        );
    }
}

/// `--lead-in=S` runs each scenario after S seconds of quiet network (a detector that has been running): the
/// lead-in makes no event, and the quake after it is found as without it.
#[test]
fn a_lead_in_of_quiet_network_makes_no_event_and_the_quake_after_it_is_found() {
    let args = |a: &[&str]| crate::Options::from_args(a.iter().map(|s| s.to_string()));
    assert_eq!(args(&[]).expect("valid").lead_in_s, 0);
    let options = args(&["--lead-in=30"]).expect("valid arguments");
    assert_eq!(options.lead_in_s, 30);
    for bad in ["--lead-in=soon", "--lead-in=-5", "--lead-in=1.5"] {
        let error = args(&[bad]).expect_err("not whole seconds");
        assert!(error.contains(bad), "{error}");
    }
    let (gifu, run) = independent_run("gifu-m4.5", &options);
    assert_eq!(
        run.fed_frames + run.lost_frames,
        (options.lead_in_s + gifu.seconds) as usize,
        "the lead-in's frames reach the detector before the scenario's"
    );
    found_and_nothing_else("gifu-m4.5", &options, crate::score::score(&run));
}

/// A lead-in starts the detector with it, so what the detector publishes in its own first seconds falls in the
/// lead-in: those false events are counted apart from the ones of the running detector the lead-in stands for.
#[test]
fn false_events_first_published_during_a_lead_in_are_counted_apart() {
    let start = crate::scenario::START_MS;
    let report = |event: &str, frame_at_ms: i64| Report {
        event_id: event.to_string(),
        status: "preliminary".to_string(),
        reported_at_ms: frame_at_ms + 1_500,
        frame_at_ms,
        latitude: 36.0,
        longitude: 138.0,
        depth_km: 10.0,
        origin_at_ms: frame_at_ms - 5_000,
        magnitude: None,
        magnitude_type: None,
        grade: "C".to_string(),
        station_count: 5,
        rms_seconds: None,
        gap_degrees: None,
        uncertainty_km: None,
        unused_stations: 0,
        farthest_station_km: 50.0,
    };
    let run = crate::scenario::Run {
        quakes: Vec::new(),
        // Two events published first in the lead-in (one of them again after it), one only after it.
        reports: vec![
            report("hyp:lead-in", start - 40_000),
            report("hyp:start", start - 55_000),
            report("hyp:lead-in", start + 2_000),
            report("hyp:running", start + 30_000),
        ],
        fed_frames: 120,
        lost_frames: 0,
        last_frame_ms: start + 60_000,
    };
    let score = crate::score::score(&run);
    assert_eq!(
        score.false_event_ids,
        ["hyp:lead-in", "hyp:start", "hyp:running"]
    );
    assert_eq!(score.false_in_lead_in, 2);
}
