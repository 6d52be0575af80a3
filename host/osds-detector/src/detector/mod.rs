//! The detector: frames in, solutions out. Its stages are `association` (which event a triggered station
//! belongs to), `events` (the lifecycle, and when an event may be published) and `solution` (location,
//! magnitude, the solution handed to the shaper); the types and tolerances they share are here.
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
use crate::locate::{Arrival, Hypocentre, Pick, Quiet, locate_near, residuals};
use crate::magnitude::{PeakAtStation, Wave, estimate, predicted_intensity};
use crate::traveltime::{Model, hypocentral_km};
use crate::trigger::{FRAME_MS, StationPosition, Trigger};
use hyp_core::{
    EventStatus, Hypocentre as SolutionHypocentre, MagnitudeEstimate, Solution, StationPick,
};
use std::collections::BTreeMap;
use std::sync::Arc;

mod association;
mod events;
mod solution;

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
/// An event this deep is located with its S onsets too, tracks within half its own uncertainty and ends only
/// after its S wave has crossed its stations; young clusters whose picks together fit a source this deep are
/// one deep quake's P wave…
const DEEP_KM: f64 = 200.0;
/// …and at most this deep (few of Japan's deep quakes lie deeper; a great shallow quake's first clusters fit a
/// source 650-700 km deep far out at sea)…
const DEEP_FRONT_MAX_KM: f64 = 600.0;
/// …when there are this many of them (two shallow quakes at once fit a deep source between them at first)…
const DEEP_FRONT_CLUSTERS: usize = 3;
/// …and most of each one's picks lie this close (seconds) to the joint solution's P arrivals.
const DEEP_FRONT_RESIDUAL_S: f64 = 2.0;
/// A re-trigger on a P member of an event this deep is its S onset when the time since the P pick is within
/// this share of the S-P time its solution predicts there (a deep solution seen from one side trades depth
/// against distance, and so errs on S-P by tens of percent).
const S_ONSET_SHARE: f64 = 0.35;
/// How many times a deep front's search may move on from its edge.
const DEEP_FRONT_STEPS: usize = 4;
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
/// At least this share of a cluster's picks in its first frame: it shows (almost) no moveout.
const SIMULTANEOUS: f64 = 0.8;
/// …unless this many stations picked it over two frames (a burst touches a few neighbouring stations).
const WIDE_PICKS: usize = 20;
/// A cluster seen in one frame only is published from this many picks that show moveout, and one more than
/// its azimuthal gap asks for (fewer wait for the next frame to confirm them).
const FIRST_FRAME_PICKS: usize = 5;
/// A solution whose picks all lie on one side and this far away is seen from afar.
const ONE_SIDED_KM: f64 = 50.0;
/// The smallest magnitude published: smaller events shake too few stations too weakly to be told from a
/// disturbance on a few neighbouring stations.
const MIN_PUBLISHED_MW: f64 = 3.0;
/// An isolated candidate's S-window magnitude may lie this far below its P-window one: a real quake's P/S
/// contrast differs from the assumed one by a few tenths across its stations, a distant quake's S wave read as
/// P by the whole contrast (1.5 units).
const S_BEARS_OUT: f64 = 1.0;
/// A candidate most of whose picks came within this many times the early side of a reported quake's P or S
/// window of its predicted arrival, shaking no harder than it explains, is that quake's wavefront.
const WAVEFRONT_EARLY: f64 = 2.0;
/// How far above its first magnitude an event's magnitude must rise to say its fault is still breaking.
const STILL_BREAKING_RISE: f64 = 0.3;
/// A member stays at least this long after its predicted S arrival, whatever its peak so far.
const S_STAY_S: f64 = 10.0;
/// A station at or below this intensity has stopped shaking, whatever its peak.
const DECAYED_LEVEL: f64 = -1.0;
/// Beyond this distance from a solution, its predicted P arrival is uncertain by its epicentre's own
/// uncertainty over the P wave's apparent speed there.
const FAR_STATION_KM: f64 = 600.0;
const FAR_APPARENT_KM_S: f64 = 8.0;
/// A candidate whose every station is farther than this from its epicentre is located outside the network.
const OUTSIDE_KM: f64 = 300.0;
/// A station standing above its quiet level this long before its pick was shaking already (see `publishable`).
const SHAKING_BEFORE_MS: i64 = 10_000;
/// An event read by its S onsets ([`Event::onsets`]) locates with those of its stations within this distance
/// beyond its nearest: farther, the tables' S travel times err by seconds (see [`s_window`]), and a rise inside
/// another quake's shaking is as likely that quake's own later waves (an M6.5's S wave from the far end of its
/// fault, 120-140 km from its M5.8 aftershock, as the aftershock's S onsets came on its nearest stations).
const S_ONSET_SPAN_KM: f64 = 100.0;
/// An event located from its P picks outside the network (no pick within [`COVERAGE_KM`] or its depth of its
/// epicentre) may be a deep quake far out at sea whose P wave, 60 s on through the mantle, rose on a few
/// stations only (their picks, seconds apart where the tables say they arrive together, made clusters of their
/// own or none) and its S wave on many: read as P, those S onsets fit a shallower source farther out, its
/// origin a minute late. Its picks are read as S onsets too, and so taken when that places the quake inside the
/// network, fits as well as P, and at least this many stations picked when that source's P wave was due.
const FAR_P_PICKS: usize = 3;
/// How long every pick is remembered for that: longer than a deep quake's S-P time across the network.
const RECENT_PICKS_MS: i64 = 180_000;
/// Silent stations this close to an event's centre count against trial points that would have reached them.
const SILENT_STATION_KM: f64 = 200.0;

/// How far a pick may sit before and after a predicted P arrival `travel` seconds after the origin and still
/// be that P arrival: the 1-second frames; station delays and a travel-time model that err by seconds far
/// away (3-D structure, a different Earth than the table's); and, late only, emergent onsets that reach the
/// trigger's rise a few seconds after they begin.
pub(crate) fn p_window(travel: f64) -> (f64, f64) {
    (2.0 + 0.03 * travel, 3.0 + 0.03 * travel)
}

/// The same for an S arrival `travel` seconds after the origin: earlier by twice as much per second of travel,
/// for the S wave's speed errs by the P wave's error and the spread of the P/S speed ratio besides (an
/// M7.0's S wave 300 km away came 5–10 s before its solution's prediction).
fn s_window(travel: f64) -> (f64, f64) {
    let (early, late) = p_window(travel);
    (early + 0.03 * travel, late)
}

/// How far a pick may sit before and after a predicted arrival of `wave`, `travel` seconds after the origin.
fn arrival_window(wave: Arrival, travel: f64) -> (f64, f64) {
    match wave {
        Arrival::P => p_window(travel),
        Arrival::S => s_window(travel),
    }
}

/// Whether a pick `off` seconds after a predicted arrival of `wave` `travel` seconds after the origin is that
/// arrival, its station unobserved for `unseen` seconds before it (the arrival may have come any time then).
fn is_arrival(wave: Arrival, off: f64, travel: f64, unseen: f64) -> bool {
    let (early, late) = arrival_window(wave, travel);
    (-early..=late + unseen).contains(&off)
}

/// The length (km) of the fault of an event of `mw` (Utsu).
fn fault_length_km(mw: f64) -> f64 {
    10f64.powf(0.5 * mw - 1.85)
}

/// How fast a fault breaks (km/s).
const RUPTURE_KM_S: f64 = 2.5;

/// Seconds the fault of an event of `mw` takes to break (its length at [`RUPTURE_KM_S`]).
fn rupture_seconds(mw: f64) -> f64 {
    fault_length_km(mw) / RUPTURE_KM_S
}

/// How far from a quake's epicentre its aftershocks start: twice its fault's length (Utsu), at least 50 km.
fn aftershock_km(mw: Option<f64>) -> f64 {
    mw.map_or(0.0, |m| 2.0 * fault_length_km(m)).max(50.0)
}

/// Whether `h` lies where the aftershocks of a quake at `source` of `mw` would ([`aftershock_km`]).
fn in_aftershock_zone(source: &Hypocentre, mw: Option<f64>, h: &Hypocentre) -> bool {
    distance_km(source.latitude, source.longitude, h.latitude, h.longitude) <= aftershock_km(mw)
}

/// Seconds after the predicted S arrival that still count as an event's shaking at a station: the S wave's
/// build-up and coda, and a large event's fault still breaking.
fn coda_seconds(s_travel: f64, mw: Option<f64>) -> f64 {
    10.0 + 0.15 * s_travel + mw.map_or(0.0, rupture_seconds)
}

/// How much more a station `d` km from an event may shake than the event's magnitude predicts there and still
/// be that event's: the attenuation relation's own error (about an intensity unit near the source) and the
/// spread between published relations, which grows with distance.
pub(crate) fn level_margin(d: f64) -> f64 {
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
         min(n,max(n/3,4)) (where neighbours' chance to confirm on Gaussian noise of their sigma, 0.25 unlearnt, sums >= 0.7 of it: \
         the least m with P(own rise) x P(>= m by chance) <= 1e-6), lone 2, re-armed after 3 s calm; all x max(1, noise sigma / 0.25), sigma = mean \
         quiet step 2 s late while not rising over 300 frames / 1.128 less two standard errors, after 8 steps; stuck >=3 with neighbours 3 lower, until its reading moves; expiry \
         10/15/30/60/90 s and not before S + 10 s; association by predicted P of reported events and of candidates <= 150 km deep, outside the network or beyond chance (-2 s -3 %, +3 s +3 %; beyond \
         600 km +- uncertainty / 8 km/s; a pick after an unobserved spell: later phase if P came during it), P coda \
         for the rupture's duration, S (-2 s -6 %)..S+coda (10 s + 15 % + rupture) within level +1.5 + d/500 (max 3), else \
         cluster 60 km, young < 8 picks; >= 3 young clusters of fresh picks fitting \
         one source 200-600 km deep together (2 s, not within 100 km of a reported one) are one; from 200 km \
         deep, a P member's re-trigger at S-P +-35 % is its S onset, located with S times (not when only an unobserved spell makes it fit), and the event \
         tracks within max(10 km, half its uncertainty) and ends after its S crossed its stations; release beyond 100 km above that level; aftermath 240 s; same quake \
         100 km 10 s; new stations within 300 km keep an event open; grid 0.4/0.1/0.04 deg within 2 deg, \
         weights floor 20 km, depth 10 fixed <3, cap 130 <5, 150 <8, else 700, and at most 4x the picks' \
         aperture (60 km floor); 25 nearest + 15 spread to 600 km P picks; non-arrival inside reach while < \
         20 picks, cap 2 s; picks on stations shaking 10 s before them after a reported event's S: also \
         located as S onsets (within 100 km beyond the nearest), kept when no larger share set aside and rms \
         over the picks both use 0.25 s better (hysteresis), in its aftershock zone and after its rupture front at 2.5 km/s could \
         reach; else an event located outside the network also located with every pick an S onset, taken when \
         inside it, rms within 0.25 s of P's, and >= 3 stations' picks of the last 180 s (not a reported or \
         outside event's) at its P arrival, those joining, then picks at its P arrival P onsets, the rest S; \
         pick t-0.5 s; publish: 3/5/7 picks by gap 180/270, rms <= 1 s + 1 % of travel, \
         not at the cap or the search's edge or with a 300 km uncertainty, a pick within 150 km (or the depth), 2 locations agreeing \
         within max(10 km, 10 %/20 km, half their uncertainty) (3 within 10 km one-sided), or >= 5 picks \
         shallow, seen in one frame: max(5, 1 more than by gap) picks spread >= 1.5 s, else 2 frames, picks spread >= 1.5 s (1 s from 20) or 4 s after the last, 80 % in one frame: not before \
         the stations within 1.15x its own stations' reach are due, M >= 3.0 above 150 km, not \
         most picks shaking 10 s before them with no other reported event or aftermath or after one's S \
         (unless within 2x its Utsu fault length, 50 km floor), the \
         neighbourhood test (300 km, margin 0.8, stations within 1.15x its own stations' reach expected, stations of unpublished candidates outside the network (all > 300 km) unclaimed, stuck ones untested, silent <= max(1, expected/3) and <= max(2, tested/4), \
         unexplained <= max(2, picks used/3)); picks used beyond chance: Poisson P(>= used) <= 1e-6 at (picks \
         of the last 180 frames with no reported quake or aftermath about, not its stations', + 1) / ((those \
         frames + 60) x observed stations) x the seconds observed stations' P windows were open; < 8 picks and no other station within 300 km: S-window M >= \
         P-window M - 1.0; under half the picks a reported quake's wavefront, counting those within its P or S window (early side x2, codas; its \
         P coda until its M last rose >= 0.3 above its first, less the S time to its nearest station, at P level) at a level it explains, unless within 2x its Utsu fault length (50 km floor), \
         and those up to 2x P's early side + uncertainty / 8 km/s before its P at a level it explains, wherever; not M9.5 (the top) \
         beside a reported quake with most picks within its windows at any level; Si-Midorikawa 1999 PGV (depth term held at 150 km), \
         I=2.68+1.72logPGV, intensity-median of stations growing >= 0.5 per Mw there (none if they saturate); S (ts+3 s) else P (tp+3..ts-1.5, +1.5) else none (any reached \
         only for M >= 3 before publication); \
         nearest 30; tracking (once published preliminary) >=8 stations stable 10 km 5 s; final = best solution";
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
    /// The arrival of the wave the event is located with ([`Event::onsets`]: its P wave, or its S wave).
    Onset,
    /// A later part of the event's shaking (an S onset, its coda): evidence and magnitude, not location.
    Later,
}

#[derive(Debug, Clone)]
struct Member {
    station: usize,
    pick_ms: i64,
    /// How long the station went unobserved before its pick (see [`crate::trigger::Triggered::unseen_ms`]).
    unseen_ms: i64,
    phase: Phase,
    peak: f64,
    peak_at_ms: i64,
    expires_ms: i64,
    /// Still a member: its membership has not expired. An expired member's pick stays evidence.
    active: bool,
    /// A deep event's S onset at this station (a P member), which locates it with the P pick.
    s_pick_ms: Option<i64>,
    /// The S onset of a deep quake far away (see [`Reading::FarS`]): not picked with its P wave.
    far_s: bool,
    /// Picked on a station shaking long before, after a reported quake's S wave had reached it: inside that
    /// quake's shaking, where another quake's P wave need not rise above it (see [`Reading::S`]).
    inside: bool,
}

impl Member {
    /// The wave its pick is the onset of, for an event read as `reading`.
    fn wave(&self, reading: Reading) -> Arrival {
        let s = match reading {
            Reading::P => false,
            Reading::S => self.inside,
            Reading::FarS => self.far_s,
        };
        if s { Arrival::S } else { Arrival::P }
    }
}

/// How an event's picks are read: which wave each is the onset of ([`Member::wave`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reading {
    /// Every pick a P onset.
    P,
    /// The picks inside another quake's shaking ([`Member::inside`]) S onsets, the rest P onsets: a quake
    /// whose P wave did not rise above that shaking where its S wave did.
    S,
    /// A deep quake far outside the network (see [`FAR_P_PICKS`]): the picks that came with its P wave P
    /// onsets, the rest S onsets ([`Member::far_s`]).
    FarS,
}

/// Whether a solution is inside the network: its nearest station (`nearest_km` from its epicentre, see
/// [`nearest_km`]) within [`COVERAGE_KM`], or within its depth (farther outside, picks fix no epicentre).
fn covered(h: &Hypocentre, nearest_km: f64) -> bool {
    nearest_km <= COVERAGE_KM.max(h.depth_km)
}

/// The epicentral distance (km) from `h` of the nearest of `stations` (latitude, longitude).
fn nearest_km(h: &Hypocentre, stations: impl Iterator<Item = (f64, f64)>) -> f64 {
    stations
        .map(|(lat, lon)| distance_km(h.latitude, h.longitude, lat, lon))
        .fold(f64::INFINITY, f64::min)
}

/// When an event's S wave has passed a station: its predicted arrival plus [`S_STAY_S`] (Unix ms).
fn s_due_ms(model: &Model, h: &Hypocentre, station: &StationPosition) -> i64 {
    let d = distance_km(h.latitude, h.longitude, station.latitude, station.longitude);
    ((h.origin + model.s(d, h.depth_km) + S_STAY_S) * 1000.0) as i64
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
    /// How many arrivals (P picks and S onsets) the event had at its latest location: a new location is due
    /// when more came.
    located_arrivals: usize,
    /// What the last report said, to report only changes.
    last_reported: Option<ReportKey>,
    /// The latest P-window magnitude of a candidate: what its S wave must bear out (see `publishable`).
    p_window_mw: Option<f64>,
    /// Whether a candidate's latest location was made from more picks than chance gives it (see
    /// [`crate::chance`]): it is published only then, and explains other picks (see
    /// `Detector::explains_others`).
    beyond_chance: bool,
    /// How its latest location read its picks (see [`Detector::readings_to_try`]).
    reading: Reading,
    /// Its first magnitude, and when its magnitude last rose while [`STILL_BREAKING_RISE`] or more above
    /// that: a great fault breaking on, or a second rupture beside it, keeps raising it for longer than the
    /// first magnitude's rupture lasts.
    first_mw: Option<f64>,
    rose_at_ms: Option<i64>,
    done: bool,
}

/// What a consumer cares about in a report: status, stations located with, magnitude, position (0.1°).
type ReportKey = (EventStatus, usize, Option<i64>, i64, i64);

/// What an event predicts at a station: its waves' arrival windows and the level of its shaking.
struct Prediction<'a> {
    h: &'a Hypocentre,
    magnitude: Option<f64>,
    /// Seconds after the origin its fault has been seen breaking, where that is known: as long as its
    /// magnitude kept rising (see `Event::rose_at_ms`).
    breaking_s: Option<f64>,
    /// How its picks are read (see `Event::reading`).
    reading: Reading,
}

/// A pick, whichever event it went to.
#[derive(Debug, Clone, Copy)]
struct RecentPick {
    station: usize,
    pick_ms: i64,
    /// How long the station went unobserved before it (its wave may have come any time in between).
    unseen_ms: i64,
}

/// A closed event whose waves may still be passing.
#[derive(Debug, Clone)]
struct Aftermath {
    h: Hypocentre,
    magnitude: Option<f64>,
    until_ms: i64,
}

pub struct Detector {
    stations: Vec<Station>,
    positions: Vec<StationPosition>,
    trigger: Trigger,
    events: Vec<Event>,
    config: DetectorConfig,
    algorithm: String,
    last_frame_ms: Option<i64>,
    /// The picks of the network's last quiet minutes (see [`crate::chance`]).
    background: crate::chance::Background,
    latest: Vec<Option<f64>>,
    next_sequence: usize,
    /// Every pick of the last [`RECENT_PICKS_MS`], oldest first, whichever event it went to (see
    /// [`FAR_P_PICKS`]).
    recent_picks: std::collections::VecDeque<RecentPick>,
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
            background: crate::chance::Background::default(),
            next_sequence: 1,
            recent_picks: std::collections::VecDeque::new(),
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
        while self
            .recent_picks
            .front()
            .is_some_and(|p| p.pick_ms < at_ms - RECENT_PICKS_MS)
        {
            self.recent_picks.pop_front();
        }
        // A quiet frame has no reported quake or aftermath about, judged before its picks are associated (a quake
        // first published in this frame makes the next one not quiet).
        let quiet = self.reported_sources(None).next().is_none();
        let fired = self.trigger.step(at_ms, values);
        self.background
            .step(at_ms, quiet, fired.iter().map(|f| f.station));
        for fired in fired {
            let pick_ms = fired.onset_ms - 500;
            self.recent_picks.push_back(RecentPick {
                station: fired.station,
                pick_ms,
                unseen_ms: fired.unseen_ms,
            });
            self.associate(fired.station, pick_ms, fired.unseen_ms, at_ms);
        }
        self.merge_events(at_ms);
        self.join_deep_front(at_ms);
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
}
