//! The detector: frames in, solutions out.
//!
//! Each frame goes through the trigger. A triggered station is first offered to the events that are already
//! located: one whose predicted P arrival at that station explains the pick takes it as a P pick, however far
//! away the station is; one whose waves are passing the station (between its P arrival and the end of its S
//! coda) and whose magnitude explains the station's level takes it as a later-phase member, evidence that is
//! not located with. Recently closed events explain triggers the same way, and those are dropped. Only what no
//! event explains joins a cluster next to it or starts a new one, and a cluster whose stations another event's
//! waves explain is absorbed, never published: a large quake's wavefront crossing the country is one event.
//!
//! The tolerances are those of a model that is wrong by a second or two and an intensity unit, more far away
//! (another Earth's travel times, station delays, emergent onsets, another attenuation relation). A cluster is
//! published only when it is located from picks on more than one side (or has stopped moving), inside the
//! network, big enough to be told from a burst on a few stations (M 3.0), and plausible to its whole
//! neighbourhood: no station around it that its waves should have reached stays silent, and none shakes sooner
//! or harder than it explains ([`crate::consistency`]) — a distant great quake's wavefront fits a local source
//! on its first stations and fails there.
//!
//! An event keeps every pick it was ever given. Memberships expire by the peak the station reached (that
//! decides when an event is over), but a pick stays evidence, so an event is never relocated from a depleted
//! or late set of stations, and its final report is its best solution: the latest location from all its
//! P picks, not a new one. Events move through the lifecycle (`candidate` → `preliminary` → `tracking` →
//! `finalized`, or `retracted`, or `interrupted` on a frame gap) and yield a solution for the shaper when
//! something a consumer cares about changed. Nothing is invented: an event cut off by a gap ends
//! `interrupted`, never with a made-up final report.

use crate::geo::{azimuth_degrees, distance_km};
use crate::locate::{Hypocentre, Pick, Quiet, locate_near, residuals};
use crate::magnitude::{PeakAtStation, Wave, estimate, predicted_intensity};
use crate::traveltime::{Model, hypocentral_km};
use crate::trigger::{StationPosition, Trigger};
use hyp_core::{
    EventStatus, Hypocentre as SolutionHypocentre, MagnitudeEstimate, Solution, StationPick,
};
use std::collections::BTreeMap;
use std::sync::Arc;

/// A trigger next to a cluster's stations (within this distance of one) joins it when no located event
/// explains it.
const CLUSTER_KM: f64 = 60.0;
/// An event with fewer P picks than this is young: its location may still move, so a trigger next to its
/// stations joins it even when its travel times do not explain the pick yet.
const MATURE_PICKS: usize = 8;
/// A location uses at most this many P picks: the nearest `LOCATE_NEAR` to the previous solution, and the
/// rest spread over the distances out to `SPREAD_KM`.
const LOCATE_PICKS: usize = 40;
const LOCATE_NEAR: usize = 25;
const SPREAD_KM: f64 = 600.0;
/// A closed event's waves still explain triggers for this long.
const AFTERMATH_MS: i64 = 240_000;
/// Two located clusters this close, with origin times this close, are one quake located twice.
const SAME_QUAKE_KM: f64 = 100.0;
const SAME_QUAKE_S: f64 = 10.0;
/// Beyond this distance from an event, a member shaking more than the event explains is let go, free to
/// trigger for another quake.
const RELEASE_KM: f64 = 100.0;
/// New stations farther than this from an event keep it open no longer: its wavefront crossing the country
/// is not new evidence about it.
const NEW_STATION_KM: f64 = 300.0;
/// A cluster is published only when its picks agree with one another this well (rms, seconds), and this much
/// more per second of the picks' mean travel time.
const PUBLISH_RMS_S: f64 = 1.0;
const RMS_PER_TRAVEL: f64 = 0.01;
/// A shallow solution from five picks or more is published without waiting for a second location to agree;
/// a deeper one waits (a one-sided network can fit a shallow offshore quake with a deep one at first).
const SHALLOW_KM: f64 = 150.0;
/// A solution is published only with a used pick within this distance of its epicentre (or its depth, for
/// a deep one): farther outside the network the picks fix no epicentre.
const COVERAGE_KM: f64 = 150.0;
/// Picks spread over less than this show no moveout…
const NO_MOVEOUT_MS: i64 = 1_500;
/// …and such a cluster waits this long after its last pick for its neighbourhood to show what it is.
const NO_MOVEOUT_WAIT_MS: i64 = 4_000;
/// A solution whose picks all lie on one side and this far away is seen from afar.
const ONE_SIDED_KM: f64 = 50.0;
/// The smallest magnitude published: smaller events shake too few stations too weakly to be told from a
/// disturbance on a few neighbouring stations.
const MIN_PUBLISHED_MW: f64 = 3.0;
/// A member stays at least this long after its predicted S arrival, whatever its peak so far.
const S_STAY_S: f64 = 10.0;
/// A station at or below this intensity has stopped shaking, whatever its peak.
const DECAYED_LEVEL: f64 = -1.0;
/// Silent stations this close to an event's centre count against trial points that would have reached them.
const SILENT_STATION_KM: f64 = 200.0;

/// How far a pick may sit before and after a predicted P arrival `travel` seconds after the origin and still
/// be that P arrival: the 1-second frames; station delays and a travel-time model that err by seconds far
/// away (3-D structure, a different Earth than the table's); and, late only, emergent onsets that reach the
/// trigger's rise a few seconds after they begin.
fn p_window(travel: f64) -> (f64, f64) {
    (2.0 + 0.03 * travel, 3.0 + 0.03 * travel)
}

/// Whether a pick `off` seconds after a predicted P arrival `travel` seconds after the origin is that arrival.
fn is_p(off: f64, travel: f64) -> bool {
    let (early, late) = p_window(travel);
    (-early..=late).contains(&off)
}

/// Seconds the fault of an event of `mw` takes to break (Utsu's length at 2.5 km/s).
fn rupture_seconds(mw: f64) -> f64 {
    10f64.powf(0.5 * mw - 1.85) / 2.5
}

/// Seconds after the predicted S arrival that still count as an event's shaking at a station: the S wave's
/// build-up and coda, and a large event's fault still breaking.
fn coda_seconds(s_travel: f64, mw: Option<f64>) -> f64 {
    10.0 + 0.15 * s_travel + mw.map_or(0.0, rupture_seconds)
}

/// How much more a station `d` km from an event may shake than the event's magnitude predicts there and still
/// be that event's: the attenuation relation's own error (about an intensity unit near the source) and the
/// spread between published relations, which grows with distance.
fn level_margin(d: f64) -> f64 {
    (1.5 + d / 500.0).min(3.0)
}

/// A solution to report, with the event-level peaks of its stations (station, peak intensity, observed at).
#[derive(Debug, Clone)]
pub struct Detection {
    pub solution: Solution,
    pub peaks: Vec<(Station, f64, i64)>,
}

/// A station of the network.
#[derive(Debug, Clone, PartialEq)]
pub struct Station {
    pub code: String,
    pub name: Option<String>,
    pub latitude: f64,
    pub longitude: f64,
}

/// Settings of the detector (the defaults are the chosen parameters).
#[derive(Debug, Clone)]
pub struct DetectorConfig {
    /// Travel times of P and S (the shipped JMA2001 table unless an operator chose another).
    pub travel_times: Arc<Model>,
    /// A gap between frames longer than this interrupts every open event.
    pub gap_ms: i64,
    /// A tracked event without a new station for this long, and with its peaks decayed, is finalized.
    pub finalize_after_ms: i64,
}

impl Default for DetectorConfig {
    fn default() -> Self {
        DetectorConfig {
            travel_times: Arc::new(Model::jma2001()),
            gap_ms: 10_000,
            finalize_after_ms: 30_000,
        }
    }
}

/// `osds-hyp/3:` and a hash of the parameters that decide results, then the tables by name and digest
/// (`tt=` travel times, `st=` stations), so a change of any shows in every report and in `/hyp/status`.
pub fn algorithm_fingerprint(stations: &[Station], travel_times: &Model) -> String {
    use sha2::{Digest, Sha256};
    let parameters = "trigger rise 1.1/10s by observation time, neighbours 15 within 60 km rising 0.5 \
         min(n,max(n/3,4)), lone 2, re-armed after 3 s calm; stuck >=3 with neighbours 3 lower; expiry \
         10/15/30/60/90 s and not before S + 10 s; association by predicted P (-2 s -3 %, +3 s +3 %), P coda \
         for the rupture's duration, S..S+coda (10 s + 15 % + rupture) within level +1.5 + d/500 (max 3), else \
         cluster 60 km, young < 8 picks; release beyond 100 km above that level; aftermath 240 s; same quake \
         100 km 10 s; new stations within 300 km keep an event open; grid 0.4/0.1/0.04 deg within 2 deg, \
         weights floor 20 km, depth 10 fixed <3, cap 130 <5, 150 <8, else 700, and at most 4x the picks' \
         aperture (60 km floor); 25 nearest + 15 spread to 600 km P picks; non-arrival inside reach while < \
         20 picks, cap 2 s; pick t-0.5 s; publish: 3/5/7 picks by gap 180/270, rms <= 1 s + 1 % of travel, \
         not at the cap or the search's edge, a pick within 150 km (or the depth), 2 agreeing locations (3 \
         one-sided), or >= 5 picks shallow, picks spread >= 1.5 s or 4 s after the last, M >= 3.0 above 150 \
         km, the neighbourhood test (300 km, margin 0.8, silent <= max(1, expected/3) and <= max(2, \
         tested/4), unexplained <= max(2, members/3)); Si-Midorikawa 1999 PGV (depth term held at 150 km), \
         I=2.68+1.72logPGV, intensity-median; S (ts+3 s) else P (tp+3..ts-1.5, +1.5) else none (any reached \
         only for M >= 3 before publication); \
         nearest 30; tracking >=8 stations stable 10 km 5 s; final = best solution";
    let mut table = Sha256::new();
    for s in stations {
        table.update(format!("{},{},{};", s.code, s.latitude, s.longitude).as_bytes());
    }
    let digest = Sha256::digest(parameters.as_bytes());
    format!(
        "osds-hyp/3:{};tt={};st={}",
        hex::encode(&digest[..6]),
        travel_times.tag(),
        hex::encode(&table.finalize()[..6])
    )
}

/// The largest gap (degrees) between azimuths, the gap across north included; 360 for fewer than two.
fn azimuth_gap(azimuths: impl Iterator<Item = f64>) -> f64 {
    let mut azimuths: Vec<f64> = azimuths.collect();
    if azimuths.len() < 2 {
        return 360.0;
    }
    azimuths.sort_by(f64::total_cmp);
    let wrap = azimuths[0] + 360.0 - azimuths[azimuths.len() - 1];
    azimuths
        .windows(2)
        .map(|pair| pair[1] - pair[0])
        .fold(wrap, f64::max)
}

/// Which wave a member's pick is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// The P arrival: located with.
    P,
    /// A later part of the event's shaking (an S onset, its coda): evidence and magnitude, not location.
    Later,
}

#[derive(Debug, Clone)]
struct Member {
    station: usize,
    pick_ms: i64,
    phase: Phase,
    peak: f64,
    peak_at_ms: i64,
    expires_ms: i64,
    /// Still a member: its membership has not expired. An expired member's pick stays evidence.
    active: bool,
}

/// Membership lasts longer the stronger the station shook.
fn membership_ms(peak: f64) -> i64 {
    match peak {
        p if p > 4.5 => 90_000,
        p if p > 2.5 => 60_000,
        p if p > 0.5 => 30_000,
        p if p > -1.0 => 15_000,
        _ => 10_000,
    }
}

/// The latest magnitude: value, uncertainty, stations, when, which estimate.
#[derive(Debug, Clone, Copy)]
struct Magnitude {
    value: f64,
    uncertainty: f64,
    stations: usize,
    at_ms: i64,
    kind: &'static str,
}

#[derive(Debug, Clone)]
struct Event {
    id: String,
    first_at_ms: i64,
    /// Every station ever associated, in the order they came.
    members: Vec<Member>,
    status: EventStatus,
    reports: u32,
    frames: u32,
    last_new_station_ms: i64,
    positions: Vec<(i64, f64, f64, f64)>,
    stable_since_ms: Option<i64>,
    magnitude: Option<Magnitude>,
    /// The latest location (its residuals and `used` flags follow `located`).
    last: Option<Hypocentre>,
    /// Indices of the members the latest location used as picks.
    located: Vec<usize>,
    /// How many P picks the event had at its latest location: a new location is due when more came.
    located_p_picks: usize,
    /// What the last report said, to report only changes.
    last_reported: Option<ReportKey>,
    done: bool,
}

/// What a consumer cares about in a report: status, stations located with, magnitude, position (0.1°).
type ReportKey = (EventStatus, usize, Option<i64>, i64, i64);

impl Event {
    /// Adds a member; a station that was one already is merged into it instead (active again if the newcomer
    /// is, its first pick standing). Whether the station is new to the event.
    fn join(&mut self, member: Member) -> bool {
        match self
            .members
            .iter_mut()
            .find(|m| m.station == member.station)
        {
            Some(known) => {
                known.active |= member.active;
                known.peak = known.peak.max(member.peak);
                known.expires_ms = known.expires_ms.max(member.expires_ms);
                false
            }
            None => {
                self.members.push(member);
                true
            }
        }
    }

    fn p_picks(&self) -> usize {
        self.members.iter().filter(|m| m.phase == Phase::P).count()
    }

    fn active(&self) -> impl Iterator<Item = &Member> {
        self.members.iter().filter(|m| m.active)
    }
}

/// What an event predicts at a station: its waves' arrival windows and the level of its shaking.
struct Prediction<'a> {
    h: &'a Hypocentre,
    magnitude: Option<f64>,
}

impl Prediction<'_> {
    /// Whether the event explains a trigger at `station` picked at `pick` (seconds) with `level` shaking
    /// now: as its P arrival (with the pick's distance from it), or as its later shaking.
    fn explains(
        &self,
        model: &Model,
        station: &StationPosition,
        pick: f64,
        level: Option<f64>,
    ) -> Option<(Phase, f64)> {
        let h = self.h;
        let d = distance_km(h.latitude, h.longitude, station.latitude, station.longitude);
        let tp = model.p(d, h.depth_km);
        let ts = model.s(d, h.depth_km);
        let (early, late) = p_window(tp);
        let off_p = pick - (h.origin + tp);
        if is_p(off_p, tp) {
            return Some((Phase::P, off_p.abs()));
        }
        // Its P wave's coda while the fault still breaks, then its S wave and coda. In between, a station far
        // enough away for the two to part has nothing of this event that would make it rise.
        let rupture = self.magnitude.map_or(0.0, rupture_seconds);
        let off_s = pick - (h.origin + ts);
        let (early_s, late_s) = p_window(ts);
        let in_p_coda = off_p >= -early && off_p <= late + rupture;
        let in_s = off_s >= -early_s && off_s <= coda_seconds(ts, self.magnitude) + late_s;
        let within = in_p_coda || in_s;
        let level_fits = match (self.magnitude, level) {
            (Some(m), Some(level)) => !shakes_beyond(h, m, d, level),
            _ => true,
        };
        (within && level_fits).then_some((Phase::Later, off_p.abs()))
    }
}

/// Whether a station `d` km from an event's epicentre shakes at `level`, more than an event of `mw` there can
/// explain.
fn shakes_beyond(h: &Hypocentre, mw: f64, d: f64, level: f64) -> bool {
    level > predicted_intensity(mw, h.depth_km, hypocentral_km(d, h.depth_km)) + level_margin(d)
}

/// A closed event whose waves may still be passing.
#[derive(Debug, Clone)]
struct Aftermath {
    h: Hypocentre,
    magnitude: Option<f64>,
    until_ms: i64,
}

impl Aftermath {
    fn prediction(&self) -> Prediction<'_> {
        Prediction {
            h: &self.h,
            magnitude: self.magnitude,
        }
    }
}

pub struct Detector {
    stations: Vec<Station>,
    positions: Vec<StationPosition>,
    trigger: Trigger,
    events: Vec<Event>,
    config: DetectorConfig,
    algorithm: String,
    last_frame_ms: Option<i64>,
    latest: Vec<Option<f64>>,
    next_sequence: usize,
    aftermaths: Vec<Aftermath>,
    levels: crate::consistency::Levels,
}

impl Detector {
    pub fn new(stations: Vec<Station>, config: DetectorConfig) -> Detector {
        let positions: Vec<StationPosition> = stations
            .iter()
            .map(|s| StationPosition {
                latitude: s.latitude,
                longitude: s.longitude,
            })
            .collect();
        Detector {
            trigger: Trigger::new(&positions),
            latest: vec![None; stations.len()],
            levels: crate::consistency::Levels::new(stations.len()),
            algorithm: algorithm_fingerprint(&stations, &config.travel_times),
            stations,
            positions,
            events: Vec::new(),
            config,
            last_frame_ms: None,
            next_sequence: 1,
            aftermaths: Vec::new(),
        }
    }

    pub fn algorithm(&self) -> &str {
        &self.algorithm
    }

    /// Open events and how many stations each has now, for the detector's state.
    pub fn open_events(&self) -> Vec<(String, EventStatus, usize)> {
        self.events
            .iter()
            .filter(|e| !e.done)
            .map(|e| (e.id.clone(), e.status, e.active().count()))
            .collect()
    }

    /// Takes the frame observed at `at_ms` (one value or no data per station) and returns the solutions to
    /// report, in order.
    pub fn step(&mut self, at_ms: i64, values: &[Option<f64>]) -> Vec<Detection> {
        let mut out = Vec::new();
        if let Some(last) = self.last_frame_ms
            && at_ms - last > self.config.gap_ms
        {
            out.extend(self.interrupt_all(last));
            self.trigger.forget_history();
        }
        self.last_frame_ms = Some(at_ms);
        self.latest = values.to_vec();
        self.levels.step(at_ms, values);

        self.aftermaths.retain(|a| a.until_ms > at_ms);
        for fired in self.trigger.step(at_ms, values) {
            let pick_ms = fired.onset_ms - 500;
            self.associate(fired.station, pick_ms, at_ms);
        }
        self.merge_events(at_ms);
        for index in 0..self.events.len() {
            if self.events[index].done {
                continue;
            }
            if let Some(solution) = self.update(index, at_ms) {
                out.push(solution);
            }
        }
        self.events.retain(|e| !e.done);
        out
    }

    fn prediction(event: &Event) -> Option<Prediction<'_>> {
        event.last.as_ref().map(|h| Prediction {
            h,
            magnitude: event.magnitude.map(|m| m.value),
        })
    }

    /// Whether a recently closed event's waves explain a trigger.
    fn in_aftermath(&self, station: usize, pick_ms: i64) -> bool {
        let here = &self.positions[station];
        let level = self.latest[station];
        self.aftermaths.iter().any(|a| {
            a.prediction()
                .explains(
                    &self.config.travel_times,
                    here,
                    pick_ms as f64 / 1000.0,
                    level,
                )
                .is_some()
        })
    }

    fn member(&self, station: usize, pick_ms: i64, phase: Phase, now_ms: i64) -> Member {
        // The bottom of the scale when the triggering frame has no reading for it (a dropout).
        let level = self.latest[station].unwrap_or(-3.0);
        Member {
            station,
            pick_ms,
            phase,
            peak: level,
            peak_at_ms: now_ms,
            expires_ms: now_ms + membership_ms(level),
            active: true,
        }
    }

    fn associate(&mut self, station: usize, pick_ms: i64, now_ms: i64) {
        let here = self.positions[station];
        let pick = pick_ms as f64 / 1000.0;
        let level = self.latest[station];
        // 1. An open, located event that explains it: a P arrival before a later phase, the closest fit first.
        let explained = self
            .events
            .iter()
            .enumerate()
            .filter(|(_, e)| !e.done && e.p_picks() >= 3)
            .filter_map(|(i, e)| {
                let (phase, off) =
                    Self::prediction(e)?.explains(&self.config.travel_times, &here, pick, level)?;
                Some((i, phase, off))
            })
            .min_by(|a, b| {
                (a.1 != Phase::P, a.2)
                    .partial_cmp(&(b.1 != Phase::P, b.2))
                    .unwrap_or(std::cmp::Ordering::Equal)
            });
        if let Some((i, phase, _)) = explained {
            let member = self.member(station, pick_ms, phase, now_ms);
            let event = &mut self.events[i];
            let near = event.last.as_ref().is_none_or(|h| {
                distance_km(h.latitude, h.longitude, here.latitude, here.longitude)
                    <= NEW_STATION_KM
            });
            if event.join(member) && near {
                event.last_new_station_ms = now_ms;
            }
            return;
        }
        // 2. The waves of an event that just ended.
        if self.in_aftermath(station, pick_ms) {
            self.trigger.reset(station);
            return;
        }
        // 3. A cluster next to it whose location is not settled.
        let nearest = self
            .events
            .iter()
            .enumerate()
            .filter(|(_, e)| !e.done && (e.last.is_none() || e.p_picks() < MATURE_PICKS))
            .filter_map(|(i, e)| {
                e.active()
                    .map(|m| {
                        let p = &self.positions[m.station];
                        distance_km(here.latitude, here.longitude, p.latitude, p.longitude)
                    })
                    .reduce(f64::min)
                    .map(|d| (i, d))
            })
            .filter(|(_, d)| *d <= CLUSTER_KM)
            .min_by(|a, b| a.1.total_cmp(&b.1));
        let member = self.member(station, pick_ms, Phase::P, now_ms);
        match nearest {
            Some((i, _)) => {
                if self.events[i].join(member) {
                    self.events[i].last_new_station_ms = now_ms;
                }
            }
            None => {
                // 4. Something new.
                let stamp = chrono::DateTime::from_timestamp_millis(pick_ms)
                    .map(|t| t.format("%Y%m%dT%H%M%S").to_string())
                    .unwrap_or_default();
                let sequence = self.next_sequence;
                self.next_sequence += 1;
                self.events.push(Event {
                    id: format!("hyp:{stamp}:{sequence}"),
                    first_at_ms: now_ms,
                    members: vec![member],
                    status: EventStatus::Candidate,
                    reports: 0,
                    frames: 0,
                    last_new_station_ms: now_ms,
                    positions: Vec::new(),
                    stable_since_ms: None,
                    magnitude: None,
                    last: None,
                    located: Vec::new(),
                    located_p_picks: 0,
                    last_reported: None,
                    done: false,
                });
            }
        }
    }

    /// How many of `event`'s members `prediction` explains, and the phase of each.
    fn explained_members(&self, event: &Event, prediction: &Prediction) -> Vec<Option<Phase>> {
        event
            .members
            .iter()
            .map(|m| {
                prediction
                    .explains(
                        &self.config.travel_times,
                        &self.positions[m.station],
                        m.pick_ms as f64 / 1000.0,
                        Some(m.peak),
                    )
                    .map(|(phase, _)| phase)
            })
            .collect()
    }

    /// A cluster never reported is absorbed by an older event that explains most of its stations, by one next
    /// to it while either is unlocated, or by one that located the same quake; one that a closed event's waves
    /// explain is dropped. A reported event is never absorbed.
    fn merge_events(&mut self, now_ms: i64) {
        for j in 0..self.events.len() {
            if self.events[j].done || self.events[j].reports > 0 {
                continue;
            }
            let young = &self.events[j];
            let majority = |phases: &[Option<Phase>]| {
                phases.iter().filter(|p| p.is_some()).count() * 2 > phases.len()
            };
            let mut absorb: Option<(usize, Vec<Option<Phase>>)> = None;
            for i in 0..self.events.len() {
                let old = &self.events[i];
                if i == j || old.done || (old.reports == 0 && i > j) {
                    continue;
                }
                if let Some(prediction) = Self::prediction(old).filter(|_| old.p_picks() >= 3) {
                    let phases = self.explained_members(young, &prediction);
                    if majority(&phases) {
                        absorb = Some((i, phases));
                        break;
                    }
                }
                let settled = old.last.is_some() && old.p_picks() >= MATURE_PICKS;
                let together = match (&old.last, &young.last) {
                    (Some(x), Some(y)) => {
                        distance_km(x.latitude, x.longitude, y.latitude, y.longitude)
                            <= SAME_QUAKE_KM
                            && (x.origin - y.origin).abs() <= SAME_QUAKE_S
                    }
                    // Next to a settled event's stations is not enough: its travel times must explain it.
                    _ => {
                        !settled
                            && old.active().any(|m| {
                                young.active().any(|n| {
                                    let (p, q) =
                                        (&self.positions[m.station], &self.positions[n.station]);
                                    distance_km(p.latitude, p.longitude, q.latitude, q.longitude)
                                        <= CLUSTER_KM
                                })
                            })
                    }
                };
                if together {
                    absorb = Some((i, vec![Some(Phase::P); young.members.len()]));
                    break;
                }
            }
            if let Some((i, phases)) = absorb {
                let mut members = std::mem::take(&mut self.events[j].members);
                for (member, phase) in members.iter_mut().zip(phases) {
                    member.phase = phase.unwrap_or(Phase::Later);
                }
                for member in members {
                    self.events[i].join(member);
                }
                self.events[i].last_new_station_ms = now_ms;
                self.events[j].done = true;
                continue;
            }
            let young = &self.events[j];
            let echo = self
                .aftermaths
                .iter()
                .any(|a| majority(&self.explained_members(young, &a.prediction())));
            if echo {
                self.close(j, now_ms, None);
            }
        }
        self.events.retain(|e| !e.done);
    }

    /// No frame for `at_ms`: when the last one is older than the gap limit, the open events end
    /// `interrupted` (frames stopped), without waiting for the next frame.
    pub fn silent(&mut self, at_ms: i64) -> Vec<Detection> {
        match self.last_frame_ms {
            Some(last) if at_ms - last > self.config.gap_ms && !self.events.is_empty() => {
                self.stop()
            }
            _ => Vec::new(),
        }
    }

    /// The frames stop for good (the source ended, the service stops): every reported event still open ends
    /// `interrupted` at the last frame; nothing is finalized that was not.
    pub fn stop(&mut self) -> Vec<Detection> {
        let Some(last) = self.last_frame_ms else {
            return Vec::new();
        };
        let out = self.interrupt_all(last);
        self.events.retain(|e| !e.done);
        out
    }

    fn interrupt_all(&mut self, last_ms: i64) -> Vec<Detection> {
        let mut out = Vec::new();
        for index in 0..self.events.len() {
            if self.events[index].done {
                continue;
            }
            // An event nobody saw (never reported, or never public) just ends; a reported one is closed as
            // interrupted.
            let event = &self.events[index];
            let closing = (event.reports > 0 && event.status != EventStatus::Candidate)
                .then_some(EventStatus::Interrupted);
            out.extend(self.close(index, last_ms, closing));
        }
        out
    }

    /// Ends an event with a last report in `status` (when it was ever public), and frees its stations. A
    /// located event's waves go on explaining triggers for a while.
    fn close(
        &mut self,
        index: usize,
        now_ms: i64,
        status: Option<EventStatus>,
    ) -> Option<Detection> {
        let detection = status.and_then(|status| {
            self.events[index].status = status;
            self.solution(index, now_ms, true)
        });
        let event = &mut self.events[index];
        event.done = true;
        if let Some(h) = &event.last
            && event.reports > 0
            && event.status != EventStatus::Retracted
        {
            self.aftermaths.push(Aftermath {
                h: h.clone(),
                magnitude: event.magnitude.map(|m| m.value),
                until_ms: now_ms + AFTERMATH_MS,
            });
        }
        for member in std::mem::take(&mut self.events[index].members) {
            if member.active {
                self.trigger.reset(member.station);
            }
        }
        detection
    }

    fn update(&mut self, index: usize, now_ms: i64) -> Option<Detection> {
        // Peaks grow; memberships expire by the peak reached (the pick stays evidence).
        let latest = &self.latest;
        let event = &mut self.events[index];
        event.frames += 1;
        let mut expired = Vec::new();
        let mut released = Vec::new();
        let shaking = event.last.as_ref().zip(
            event
                .magnitude
                .filter(|m| m.kind == crate::magnitude::KIND_S),
        );
        for member in event.members.iter_mut().filter(|m| m.active) {
            if let Some(v) = latest[member.station]
                && v > member.peak
            {
                member.peak = v;
                member.peak_at_ms = now_ms;
                member.expires_ms = now_ms + membership_ms(v);
                // Far from the event, shaking well beyond what it can cause there is another quake's.
                if let Some((h, m)) = shaking {
                    let p = &self.positions[member.station];
                    let d = distance_km(h.latitude, h.longitude, p.latitude, p.longitude);
                    if d > RELEASE_KM && shakes_beyond(h, m.value, d, v) {
                        member.active = false;
                        released.push(member.station);
                        continue;
                    }
                }
            }
            // Its S wave has yet to come (a deep or distant event's come long after its P): it stays.
            let s_due = event.last.as_ref().map_or(i64::MIN, |h| {
                let p = &self.positions[member.station];
                let d = distance_km(h.latitude, h.longitude, p.latitude, p.longitude);
                let ts = h.origin + self.config.travel_times.s(d, h.depth_km);
                ((ts + S_STAY_S) * 1000.0) as i64
            });
            if member.expires_ms.max(s_due) <= now_ms {
                member.active = false;
                expired.push(member.station);
            }
        }
        // An expired or released station may trigger again at once: what it shows next is offered to the
        // events first, so the same event's shaking rejoins it and another quake's starts its own.
        for station in expired.into_iter().chain(released) {
            self.trigger.release(station);
        }
        let event = &self.events[index];
        if event.active().next().is_none() {
            // Collapsed before it was confirmed: retracted; after tracking: its shaking is over.
            let closing = match event.status {
                EventStatus::Preliminary => Some(EventStatus::Retracted),
                EventStatus::Tracking => Some(EventStatus::Finalized),
                _ => None,
            };
            return self.close(index, now_ms, closing);
        }
        let stations = event.active().count();
        let mut status = event.status;
        // A new location when P picks came (later phases do not move it), or while silent stations still count.
        let relocate = event.p_picks() != event.located_p_picks
            || event.p_picks() < crate::locate::NON_ARRIVAL_PICKS;
        if relocate && let Some((h, located)) = self.locate(index, now_ms) {
            let event = &mut self.events[index];
            event.located_p_picks = event.p_picks();
            event
                .positions
                .push((now_ms, h.latitude, h.longitude, h.depth_km));
            event.last = Some(h);
            event.located = located;
            self.classify(index);
        }
        if status == EventStatus::Candidate && self.publishable(index, now_ms) {
            status = EventStatus::Preliminary;
        }
        let event = &mut self.events[index];
        if let Some(h) = &event.last {
            let steady = event
                .positions
                .iter()
                .rev()
                .take_while(|(t, ..)| now_ms - t <= 5_000)
                .all(|(_, lat, lon, _)| distance_km(*lat, *lon, h.latitude, h.longitude) <= 10.0);
            if steady {
                event.stable_since_ms.get_or_insert(now_ms);
            } else {
                event.stable_since_ms = None;
            }
            let stable_for = event.stable_since_ms.map_or(0, |since| now_ms - since);
            if status == EventStatus::Preliminary && stations >= 8 && stable_for >= 5_000 {
                status = EventStatus::Tracking;
            }
            // Decayed: every station a unit below its peak, or back near the floor of the scale.
            let decayed = event.active().all(|m| {
                self.latest[m.station].is_none_or(|v| v <= (m.peak - 1.0).max(DECAYED_LEVEL))
            });
            if status == EventStatus::Tracking
                && now_ms - event.last_new_station_ms >= self.config.finalize_after_ms
                && decayed
            {
                return self.close(index, now_ms, Some(EventStatus::Finalized));
            }
        }
        self.events[index].status = status;
        self.solution(index, now_ms, false)
    }

    /// The magnitude an event's members give at hypocentre `h` now; `provisional` also before it can be
    /// reported (see [`crate::magnitude::provisional`]).
    fn magnitude_estimate(
        &self,
        event: &Event,
        h: &Hypocentre,
        now_ms: i64,
        provisional: bool,
    ) -> Option<crate::magnitude::Estimate> {
        let now = now_ms as f64 / 1000.0;
        let peaks: Vec<PeakAtStation> = event
            .members
            .iter()
            .map(|m| {
                let p = &self.positions[m.station];
                let d = distance_km(h.latitude, h.longitude, p.latitude, p.longitude);
                PeakAtStation {
                    peak_intensity: m.peak,
                    hypocentral_km: hypocentral_km(d, h.depth_km),
                    wave: Wave::at(
                        now - h.origin,
                        self.config.travel_times.p(d, h.depth_km),
                        self.config.travel_times.s(d, h.depth_km),
                    ),
                }
            })
            .collect();
        if provisional {
            crate::magnitude::provisional(&peaks, h.depth_km)
        } else {
            estimate(&peaks, h.depth_km)
        }
    }

    /// Whether a candidate's latest solution may be published: located from at least three picks over two
    /// frames that agree within [`PUBLISH_RMS_S`], not at the depth cap of so few picks, converged (two
    /// successive locations agree) or shallow from five picks, and plausible to the whole neighbourhood
    /// ([`crate::consistency`]).
    fn publishable(&self, index: usize, now_ms: i64) -> bool {
        let event = &self.events[index];
        let Some(h) = &event.last else {
            return false;
        };
        let used = h.used.iter().filter(|u| **u).count();
        let used_stations: Vec<&StationPosition> = event
            .located
            .iter()
            .zip(&h.used)
            .filter(|(_, used)| **used)
            .map(|(&i, _)| &self.positions[event.members[i].station])
            .collect();
        // The model errs more on long paths (a deep or distant quake's picks): the rms allowed grows with them.
        let mean_travel = used_stations
            .iter()
            .map(|p| {
                let d = distance_km(h.latitude, h.longitude, p.latitude, p.longitude);
                self.config.travel_times.p(d, h.depth_km)
            })
            .sum::<f64>()
            / used_stations.len().max(1) as f64;
        let nearest_pick = used_stations
            .iter()
            .map(|p| distance_km(h.latitude, h.longitude, p.latitude, p.longitude))
            .fold(f64::INFINITY, f64::min);
        // Seen from one side, a few picks fit a wide arc of epicentres: more are needed.
        let gap = azimuth_gap(
            used_stations
                .iter()
                .map(|p| azimuth_degrees(h.latitude, h.longitude, p.latitude, p.longitude)),
        );
        let needed = match gap {
            g if g <= 180.0 => 3,
            g if g <= 270.0 => 5,
            _ => 7,
        };
        // Seen from one side and from afar, the picks fit a wide arc of epicentres: the solution must have
        // stopped moving (a distant quake's wavefront drags it outward with every new pick).
        let one_sided = gap > 270.0 && nearest_pick > ONE_SIDED_KM;
        // The grid has converged when the last two locations agree (three, seen from one side).
        let agreeing = if one_sided { 3 } else { 2 };
        let converged = event.positions.len() >= agreeing
            && event.positions[event.positions.len() - agreeing..]
                .windows(2)
                .all(|pair| {
                    let ((_, lat0, lon0, depth0), (_, lat1, lon1, depth1)) = (pair[0], pair[1]);
                    distance_km(lat0, lon0, lat1, lon1) <= 10.0
                        && (depth0 - depth1).abs() <= (0.1 * depth1).max(20.0)
                });
        // Picks all within a second or so (no moveout) fit a source deep below them as well as a burst on a
        // few neighbouring stations: the stations around them must have had time to show which it is.
        let picked: Vec<i64> = event
            .located
            .iter()
            .zip(&h.used)
            .filter(|(_, used)| **used)
            .map(|(&i, _)| event.members[i].pick_ms)
            .collect();
        let (first_pick, last_pick) = (
            picked.iter().copied().min().unwrap_or(now_ms),
            picked.iter().copied().max().unwrap_or(now_ms),
        );
        let waited =
            last_pick - first_pick >= NO_MOVEOUT_MS || now_ms - last_pick >= NO_MOVEOUT_WAIT_MS;
        let basics = waited
            && used >= needed
            && event.frames >= 2
            && h.rms_seconds <= PUBLISH_RMS_S + RMS_PER_TRAVEL * mean_travel
            // A depth at the cap of few picks is the cap talking, not the picks.
            && (h.depth_fixed || h.depth_km < h.depth_cap - 0.5)
            && (converged || (!one_sided && used >= 5 && h.depth_km <= SHALLOW_KM))
            // Outside the network the picks fix no epicentre: on the search's edge, or far from every pick.
            && !h.at_edge
            && nearest_pick <= COVERAGE_KM.max(h.depth_km);
        if !basics {
            return false;
        }
        // Too small to tell from a burst on a few stations, and below what the service publishes. (A deep
        // solution needs picks spread wide instead, see `depth_cap`, and its weak shaking may give no
        // magnitude for a while.)
        let magnitude = self
            .magnitude_estimate(event, h, now_ms, true)
            .map(|m| m.mw);
        if h.depth_km <= SHALLOW_KM && magnitude.is_none_or(|m| m < MIN_PUBLISHED_MW) {
            return false;
        }
        let mut claimed = vec![false; self.stations.len()];
        for other in self.events.iter().filter(|e| !e.done) {
            let located = other.last.is_some() && other.p_picks() >= 3;
            if std::ptr::eq(other, event) || located {
                for m in &other.members {
                    claimed[m.station] = true;
                }
            }
        }
        let members: Vec<(usize, f64)> = event.active().map(|m| (m.station, m.peak)).collect();
        let candidate = crate::consistency::Candidate {
            latitude: h.latitude,
            longitude: h.longitude,
            depth_km: h.depth_km,
            origin: h.origin,
            magnitude,
            members: &members,
        };
        let around = crate::consistency::Neighbourhood {
            stations: &self.positions,
            levels: &self.levels,
            claimed: &claimed,
            model: &self.config.travel_times,
            window: p_window,
            margin: level_margin,
        };
        crate::consistency::check(&candidate, &around, now_ms as f64 / 1000.0)
            .plausible(members.len())
    }

    /// Locates an event from its P picks (all its picks while it is young), the nearest to its previous
    /// solution first. Returns the hypocentre and the members it located with.
    fn locate(&self, index: usize, now_ms: i64) -> Option<(Hypocentre, Vec<usize>)> {
        let event = &self.events[index];
        let young = event.p_picks() < MATURE_PICKS || event.last.is_none();
        let mut candidates: Vec<usize> = (0..event.members.len())
            .filter(|&i| young || event.members[i].phase == Phase::P)
            .collect();
        let first = candidates
            .iter()
            .min_by_key(|&&i| event.members[i].pick_ms)
            .map(|&i| self.positions[event.members[i].station])?;
        // A young event is searched around its first station (a lone pick fits anywhere; the search must not
        // wander off with it), a settled one around its previous solution.
        let previous = event.last.as_ref().filter(|_| !young);
        let (center_lat, center_lon) = previous.map_or((first.latitude, first.longitude), |h| {
            (h.latitude, h.longitude)
        });
        let from_center = |i: &usize| {
            let p = &self.positions[event.members[*i].station];
            distance_km(center_lat, center_lon, p.latitude, p.longitude)
        };
        candidates.sort_by(|a, b| from_center(a).total_cmp(&from_center(b)));
        // The nearest picks, and some spread over farther distances: near stations fix the epicentre, the
        // spread of distances fixes the depth (a deep event reaches near stations almost at once).
        if candidates.len() > LOCATE_PICKS {
            let (near, far) = candidates.split_at(LOCATE_NEAR);
            let far: Vec<usize> = far
                .iter()
                .copied()
                .filter(|i| from_center(i) <= SPREAD_KM)
                .collect();
            let take = LOCATE_PICKS - LOCATE_NEAR;
            let mut chosen = near.to_vec();
            if far.len() <= take {
                chosen.extend(far);
            } else {
                chosen.extend((0..take).map(|k| far[k * far.len() / take]));
            }
            candidates = chosen;
        }
        let picks: Vec<Pick> = candidates
            .iter()
            .map(|&i| {
                let m = &event.members[i];
                Pick {
                    latitude: self.positions[m.station].latitude,
                    longitude: self.positions[m.station].longitude,
                    at: m.pick_ms as f64 / 1000.0,
                }
            })
            .collect();
        // Silent stations near the event count against trial points that would have reached them.
        let members: std::collections::HashSet<usize> =
            event.members.iter().map(|m| m.station).collect();
        let quiet: Vec<Quiet> = self
            .positions
            .iter()
            .enumerate()
            .filter(|(i, p)| {
                !members.contains(i)
                    && !self.trigger.is_triggered(*i)
                    && !self.trigger.is_faulty(*i)
                    && !self.trigger.is_rising(*i)
                    && self.latest[*i].is_some()
                    && distance_km(p.latitude, p.longitude, center_lat, center_lon)
                        <= SILENT_STATION_KM
            })
            .map(|(_, p)| Quiet {
                latitude: p.latitude,
                longitude: p.longitude,
            })
            .collect();
        let center = previous.map(|h| (h.latitude, h.longitude));
        let h = locate_near(
            &self.config.travel_times,
            &picks,
            &quiet,
            now_ms as f64 / 1000.0,
            center,
        )?;
        Some((h, candidates))
    }

    /// Labels every member P or later phase by the latest location (a young event's stay P).
    fn classify(&mut self, index: usize) {
        let positions = &self.positions;
        let event = &mut self.events[index];
        let Some(h) = &event.last else { return };
        if event.members.len() < MATURE_PICKS {
            return;
        }
        for member in &mut event.members {
            let p = &positions[member.station];
            let tp = self.config.travel_times.p(
                distance_km(h.latitude, h.longitude, p.latitude, p.longitude),
                h.depth_km,
            );
            let off = member.pick_ms as f64 / 1000.0 - (h.origin + tp);
            member.phase = if is_p(off, tp) {
                Phase::P
            } else {
                Phase::Later
            };
        }
    }

    /// The solution for an event's current state, or `None` when nothing a consumer cares about changed
    /// (unless `force`). It reports the latest location as it is: closing an event never relocates it.
    fn solution(&mut self, index: usize, now_ms: i64, force: bool) -> Option<Detection> {
        let event = &self.events[index];
        // A candidate's solution is not converged: it is not reported (its first report is preliminary), and
        // nothing is estimated from it that a later report could carry forward.
        if event.status == EventStatus::Candidate {
            return None;
        }
        let h = event.last.clone()?;
        let now = now_ms as f64 / 1000.0;
        let fresh = self.magnitude_estimate(event, &h, now_ms, false);
        let event = &mut self.events[index];
        let retained = fresh.is_none() && event.magnitude.is_some();
        if let Some(m) = fresh {
            event.magnitude = Some(Magnitude {
                value: m.mw,
                uncertainty: m.uncertainty,
                stations: m.stations,
                at_ms: now_ms,
                kind: m.kind,
            });
        }
        // Per member: used in the location, and its residual against the predicted P arrival.
        let mut used = vec![false; event.members.len()];
        for (&i, &u) in event.located.iter().zip(&h.used) {
            used[i] = u;
        }
        let picks: Vec<Pick> = event
            .members
            .iter()
            .map(|m| Pick {
                latitude: self.positions[m.station].latitude,
                longitude: self.positions[m.station].longitude,
                at: m.pick_ms as f64 / 1000.0,
            })
            .collect();
        let residuals = residuals(
            &self.config.travel_times,
            &picks,
            h.latitude,
            h.longitude,
            h.depth_km,
            h.origin,
        );
        let key: ReportKey = (
            event.status,
            used.iter().filter(|u| **u).count(),
            event.magnitude.map(|m| (m.value * 10.0).round() as i64),
            (h.latitude * 10.0).round() as i64,
            (h.longitude * 10.0).round() as i64,
        );
        if !force && event.last_reported == Some(key) {
            return None;
        }
        event.last_reported = Some(key);
        event.reports += 1;
        let (mw, kind, uncertainty, magnitude_stations, magnitude_at) =
            event.magnitude.map_or((None, None, 0.0, 0, now_ms), |m| {
                (
                    Some(m.value),
                    Some(m.kind.to_string()),
                    m.uncertainty,
                    m.stations,
                    m.at_ms,
                )
            });
        let stations: Vec<StationPick> = event
            .members
            .iter()
            .zip(residuals.iter().zip(&used))
            .map(|(m, (residual, used))| {
                let s = &self.stations[m.station];
                let d = distance_km(h.latitude, h.longitude, s.latitude, s.longitude);
                let mut peaks = BTreeMap::new();
                peaks.insert("surface:intensity".to_string(), m.peak);
                StationPick {
                    code: s.code.clone(),
                    name: s.name.clone(),
                    latitude: s.latitude,
                    longitude: s.longitude,
                    distance_km: d,
                    azimuth_degrees: azimuth_degrees(
                        h.latitude,
                        h.longitude,
                        s.latitude,
                        s.longitude,
                    ),
                    pick_at: Some(m.pick_ms),
                    residual_seconds: Some(*residual),
                    used: *used,
                    s_wave_reached: now - h.origin > self.config.travel_times.s(d, h.depth_km),
                    peaks,
                    magnitude: None,
                }
            })
            .collect();
        let s_like = stations.iter().filter(|s| s.s_wave_reached).count() as u32;
        let peaks = event
            .members
            .iter()
            .map(|m| (self.stations[m.station].clone(), m.peak, m.peak_at_ms))
            .collect();
        let solution = Solution {
            event_id: event.id.clone(),
            report_number: event.reports,
            status: event.status,
            first_detected_at: event.first_at_ms,
            reported_at: now_ms,
            recorded_at: now_ms,
            algorithm: self.algorithm.clone(),
            epicenter: format!("{:.2}N {:.2}E", h.latitude, h.longitude),
            region: None,
            epicenter_region: None,
            hypocentre: SolutionHypocentre {
                latitude: h.latitude,
                longitude: h.longitude,
                depth_km: h.depth_km,
                origin_at: (h.origin * 1000.0).round() as i64,
                calculated_at: now_ms,
                score: h.score,
                best_score: h.score,
                depth_fixed: h.depth_fixed,
                quiet_station_count: 0,
                s_like_station_count: s_like,
                horizontal_uncertainty_km: Some(h.horizontal_uncertainty_km),
                depth_uncertainty_km: h.depth_uncertainty_km,
            },
            magnitude: MagnitudeEstimate {
                value: mw,
                kind,
                station_count: magnitude_stations as u32,
                uncertainty,
                calculated_at: magnitude_at,
                retained,
                estimate_location: None,
            },
            selection: None,
            completion: None,
            stations,
            source_frames: None,
        };
        Some(Detection { solution, peaks })
    }
}
