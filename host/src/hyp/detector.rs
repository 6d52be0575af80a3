//! The detector: frames in, solutions out. Each frame goes through the trigger; triggered stations join the
//! nearest event within 250 km (or start one); membership expires after a time set by the station's peak;
//! every event is located and sized again when its evidence changes, moves through the lifecycle
//! (`candidate` → `preliminary` → `tracking` → `finalized`, or `retracted`, or `interrupted` on a frame gap),
//! and yields a solution for the shaper when something a consumer cares about changed. Nothing is invented: an
//! event cut off by a gap ends `interrupted`, never with a made-up final report.

use super::geo::{azimuth_degrees, distance_km};
use super::locate::{Hypocentre, Pick, Quiet, locate_near, residuals};
use super::magnitude::{PeakAtStation, estimate};
use super::traveltime::{hypocentral_km, s_seconds};
use super::trigger::{StationPosition, Trigger};
use hyp_core::{Hypocentre as SolutionHypocentre, MagnitudeEstimate, Solution, StationPick};
use std::collections::BTreeMap;

/// A cluster not located yet joins an event with a station this close to one of its own.
const CLUSTER_KM: f64 = 60.0;

/// Once tracking, a new pick more than this far off the current solution is not used.
const CONSISTENT_S: f64 = 3.0;

/// Which picks agree (within `CONSISTENT_S`) with a solution.
fn agreeing(picks: &[Pick], h: &Hypocentre) -> Vec<bool> {
    residuals(picks, h.latitude, h.longitude, h.depth_km, h.origin)
        .iter()
        .map(|r| r.abs() <= CONSISTENT_S)
        .collect()
}

/// After an event is interrupted its waves keep arriving: for this long a trigger that its P…S window explains
/// is that event's, not a new one.
const AFTERMATH_MS: i64 = 180_000;
/// Seconds after the S arrival that still count as the interrupted event's shaking.
const AFTERMATH_CODA_S: f64 = 20.0;

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
    /// A gap between frames longer than this interrupts every open event.
    pub gap_ms: i64,
    /// A tracked event without a new station for this long, and with its peaks decayed, is finalized.
    pub finalize_after_ms: i64,
    /// Events whose stations lie within this distance are one event.
    pub merge_km: f64,
    /// The fingerprint reported with every solution.
    pub algorithm: String,
}

impl Default for DetectorConfig {
    fn default() -> Self {
        DetectorConfig {
            gap_ms: 10_000,
            finalize_after_ms: 30_000,
            merge_km: 250.0,
            algorithm: algorithm_fingerprint(),
        }
    }
}

/// `osds-hyp/1:` and a hash of the parameters that decide results, so a change of any shows in `/hyp/status`.
pub fn algorithm_fingerprint() -> String {
    use sha2::{Digest, Sha256};
    let parameters = format!(
        "trigger rise 1.1/10s, neighbours 15 within 60 km rising 0.5 min(n,max(n/3,4)), lone 2; \
         stuck >=3 with neighbours 3 lower; merge 250 km; expiry 10/15/30/60/90 s; \
         grid 0.4deg/10,50,90,130 km then 0.1deg/+-20 km, depth 10 fixed <3, cap 130 <5 else 150; \
         {}; pick t-0.5 s; Si-Midorikawa 1999 PGV, I=2.68+1.72logPGV, S-gated, median/MAD; \
         tracking >=8 stations stable 10 km 5 s",
        super::traveltime::model_name()
    );
    let digest = Sha256::digest(parameters.as_bytes());
    format!("osds-hyp/1:{}", hex::encode(&digest[..6]))
}

#[derive(Debug, Clone)]
struct Member {
    station: usize,
    pick_ms: i64,
    peak: f64,
    peak_at_ms: i64,
    expires_ms: i64,
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

#[derive(Debug, Clone)]
struct Event {
    id: String,
    first_at_ms: i64,
    members: Vec<Member>,
    /// Stations that ever belonged, kept for the station snapshot after their membership expired.
    status: &'static str,
    reports: u32,
    frames: u32,
    last_new_station_ms: i64,
    positions: Vec<(i64, f64, f64, f64)>,
    stable_since_ms: Option<i64>,
    magnitude: Option<(f64, f64, usize, i64)>,
    /// The latest location; once tracking, new picks far off it (S onsets read as P at distant stations) are
    /// not allowed to drag it away.
    last: Option<Hypocentre>,
    /// The most picks any location of this event used.
    best_used: usize,
    /// What the last report said, to report only changes.
    last_reported: Option<(&'static str, usize, Option<i64>)>,
    done: bool,
}

pub struct Detector {
    stations: Vec<Station>,
    positions: Vec<StationPosition>,
    trigger: Trigger,
    events: Vec<Event>,
    config: DetectorConfig,
    last_frame_ms: Option<i64>,
    frame_index: u64,
    latest: Vec<Option<f64>>,
    next_sequence: usize,
    /// Where recently interrupted events were, and until when their waves explain new triggers.
    aftermaths: Vec<(Hypocentre, i64)>,
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
            stations,
            positions,
            events: Vec::new(),
            config,
            last_frame_ms: None,
            frame_index: 0,
            next_sequence: 1,
            aftermaths: Vec::new(),
        }
    }

    pub fn algorithm(&self) -> &str {
        &self.config.algorithm
    }

    /// Open events and how many stations each has, for the detector's state.
    pub fn open_events(&self) -> Vec<(String, &'static str, usize)> {
        self.events
            .iter()
            .filter(|e| !e.done)
            .map(|e| (e.id.clone(), e.status, e.members.len()))
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
        let frame = self.frame_index;
        self.frame_index += 1;
        self.latest = values.to_vec();

        self.aftermaths.retain(|(_, until)| *until > at_ms);
        for fired in self.trigger.step(values) {
            let pick_ms = at_ms - (frame - fired.onset_frame) as i64 * 1000 - 500;
            if self.in_aftermath(fired.station, pick_ms) {
                self.trigger.reset(fired.station);
                continue;
            }
            self.associate(fired.station, pick_ms, at_ms);
        }
        self.merge_events();
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

    /// Whether an interrupted event's waves explain a trigger: the pick lies between that event's P arrival
    /// (less 3 s) and its S arrival plus the coda at this station.
    fn in_aftermath(&self, station: usize, pick_ms: i64) -> bool {
        let here = &self.positions[station];
        let pick = pick_ms as f64 / 1000.0;
        self.aftermaths.iter().any(|(h, _)| {
            let d = distance_km(h.latitude, h.longitude, here.latitude, here.longitude);
            let p = h.origin + super::traveltime::p_seconds(d, h.depth_km);
            let s = h.origin + s_seconds(d, h.depth_km);
            pick >= p - 3.0 && pick <= s + AFTERMATH_CODA_S
        })
    }

    fn associate(&mut self, station: usize, pick_ms: i64, now_ms: i64) {
        let here = &self.positions[station];
        let nearest = self
            .events
            .iter()
            .enumerate()
            .filter(|(_, e)| !e.done)
            .filter_map(|(i, e)| {
                e.members
                    .iter()
                    .map(|m| {
                        let p = &self.positions[m.station];
                        distance_km(here.latitude, here.longitude, p.latitude, p.longitude)
                    })
                    .reduce(f64::min)
                    .map(|d| (i, d))
            })
            .filter(|(_, d)| *d <= self.config.merge_km)
            .min_by(|a, b| a.1.total_cmp(&b.1));
        let member = Member {
            station,
            pick_ms,
            // The bottom of the scale when the triggering frame has no reading for it (a dropout).
            peak: self.latest[station].unwrap_or(-3.0),
            peak_at_ms: now_ms,
            expires_ms: now_ms + membership_ms(self.latest[station].unwrap_or(-3.0)),
        };
        match nearest {
            Some((i, _)) => {
                self.events[i].members.push(member);
                self.events[i].last_new_station_ms = now_ms;
            }
            None => {
                let stamp = chrono::DateTime::from_timestamp_millis(pick_ms)
                    .map(|t| t.format("%Y%m%dT%H%M%S").to_string())
                    .unwrap_or_default();
                let sequence = self.next_sequence;
                self.next_sequence += 1;
                self.events.push(Event {
                    id: format!("hyp:{stamp}:{sequence}"),
                    first_at_ms: now_ms,
                    members: vec![member],
                    status: "candidate",
                    reports: 0,
                    frames: 0,
                    last_new_station_ms: now_ms,
                    positions: Vec::new(),
                    stable_since_ms: None,
                    magnitude: None,
                    last: None,
                    best_used: 0,
                    last_reported: None,
                    done: false,
                });
            }
        }
    }

    /// Events whose stations come within the merge distance become one (the older keeps its id).
    fn merge_events(&mut self) {
        let mut i = 0;
        while i < self.events.len() {
            let mut j = i + 1;
            while j < self.events.len() {
                let (a, b) = (&self.events[i], &self.events[j]);
                // Located events are one when their epicentres are within the merge distance; a cluster not
                // located yet joins one whose stations are its neighbours.
                let close = !a.done
                    && !b.done
                    && match (&a.last, &b.last) {
                        (Some(x), Some(y)) => {
                            distance_km(x.latitude, x.longitude, y.latitude, y.longitude)
                                <= self.config.merge_km
                        }
                        _ => a.members.iter().any(|m| {
                            b.members.iter().any(|n| {
                                let (p, q) =
                                    (&self.positions[m.station], &self.positions[n.station]);
                                distance_km(p.latitude, p.longitude, q.latitude, q.longitude)
                                    <= CLUSTER_KM
                            })
                        }),
                    };
                if close && self.events[j].reports == 0 {
                    let absorbed = self.events.remove(j);
                    self.events[i].members.extend(absorbed.members);
                } else {
                    j += 1;
                }
            }
            i += 1;
        }
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
            let closing =
                (event.reports > 0 && event.status != "candidate").then_some("interrupted");
            if let Some(h) = &event.last {
                self.aftermaths.push((h.clone(), last_ms + AFTERMATH_MS));
            }
            out.extend(self.close(index, last_ms, closing));
        }
        out
    }

    /// Ends an event with a last report in `status` (when it was ever public), and frees its stations.
    fn close(
        &mut self,
        index: usize,
        now_ms: i64,
        status: Option<&'static str>,
    ) -> Option<Detection> {
        let detection = status.and_then(|status| {
            self.events[index].status = status;
            self.solution(index, now_ms, true)
        });
        self.events[index].done = true;
        for member in std::mem::take(&mut self.events[index].members) {
            self.trigger.reset(member.station);
        }
        detection
    }

    fn update(&mut self, index: usize, now_ms: i64) -> Option<Detection> {
        // Peaks grow; memberships expire by the peak reached.
        let latest = self.latest.clone();
        let event = &mut self.events[index];
        event.frames += 1;
        for member in &mut event.members {
            if let Some(v) = latest[member.station]
                && v > member.peak
            {
                member.peak = v;
                member.peak_at_ms = now_ms;
                member.expires_ms = now_ms + membership_ms(v);
            }
        }
        if event.members.iter().all(|m| m.expires_ms <= now_ms) {
            // Collapsed before it was confirmed: retracted; after tracking: its shaking is over.
            let closing = match event.status {
                "preliminary" => Some("retracted"),
                "tracking" => Some("finalized"),
                _ => None,
            };
            return self.close(index, now_ms, closing);
        }
        let (kept, expired): (Vec<Member>, Vec<Member>) =
            event.members.drain(..).partition(|m| m.expires_ms > now_ms);
        event.members = kept;
        for member in expired {
            self.trigger.reset(member.station);
        }
        let event = &self.events[index];
        if event.status == "tracking"
            && let Some(last) = &event.last
        {
            // Most of the evidence that located it has expired: the event is over. (Letting the distant
            // stations that remain relocate it would drag it towards them.)
            let consistent = agreeing(&self.picks(index), last)
                .iter()
                .filter(|a| **a)
                .count();
            if consistent * 2 < event.best_used {
                return self.close(index, now_ms, Some("finalized"));
            }
        }
        let stations = event.members.len();
        let mut status = event.status;
        if let Some(h) = self.hypocentre(index, now_ms) {
            let event = &mut self.events[index];
            event.best_used = event.best_used.max(h.used.iter().filter(|u| **u).count());
            // The grid has converged when two successive locations agree.
            let converged = event.positions.last().is_some_and(|(_, lat, lon, depth)| {
                distance_km(*lat, *lon, h.latitude, h.longitude) <= 10.0
                    && (depth - h.depth_km).abs() <= 20.0
            });
            if status == "candidate" && stations >= 3 && event.frames >= 2 && converged {
                status = "preliminary";
            }
            event.last = Some(h.clone());
            event
                .positions
                .push((now_ms, h.latitude, h.longitude, h.depth_km));
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
            if status == "preliminary" && stations >= 8 && stable_for >= 5_000 {
                status = "tracking";
            }
            let decayed = event
                .members
                .iter()
                .all(|m| latest[m.station].is_none_or(|v| v <= m.peak - 1.0));
            if status == "tracking"
                && now_ms - event.last_new_station_ms >= self.config.finalize_after_ms
                && decayed
            {
                return self.close(index, now_ms, Some("finalized"));
            }
        }
        self.events[index].status = status;
        self.solution(index, now_ms, false)
    }

    fn picks(&self, index: usize) -> Vec<Pick> {
        self.events[index]
            .members
            .iter()
            .map(|m| Pick {
                latitude: self.positions[m.station].latitude,
                longitude: self.positions[m.station].longitude,
                at: m.pick_ms as f64 / 1000.0,
            })
            .collect()
    }

    fn hypocentre(&self, index: usize, now_ms: i64) -> Option<Hypocentre> {
        let picks = self.picks(index);
        let first = *picks.iter().min_by(|a, b| a.at.total_cmp(&b.at))?;
        // Silent stations near the event (within 200 km of its first station) count against trial points.
        let quiet: Vec<Quiet> = self
            .positions
            .iter()
            .enumerate()
            .filter(|(i, p)| {
                !self.trigger.is_triggered(*i)
                    && !self.trigger.is_faulty(*i)
                    && !self.trigger.is_rising(*i)
                    && self.latest[*i].is_some()
                    && distance_km(p.latitude, p.longitude, first.latitude, first.longitude)
                        <= 200.0
            })
            .map(|(_, p)| Quiet {
                latitude: p.latitude,
                longitude: p.longitude,
            })
            .collect();
        let event = &self.events[index];
        // Once tracking (and in the report that closes a tracked event) the position is held by the picks
        // that agree with it.
        let held = matches!(event.status, "tracking" | "finalized" | "interrupted");
        let consistent: Vec<bool> = match &event.last {
            Some(last) if held => agreeing(&picks, last),
            _ => vec![true; picks.len()],
        };
        let subset: Vec<Pick> = picks
            .iter()
            .zip(&consistent)
            .filter(|(_, c)| **c)
            .map(|(p, _)| *p)
            .collect();
        let now = now_ms as f64 / 1000.0;
        let center = event.last.as_ref().map(|h| (h.latitude, h.longitude));
        let thinning = held && subset.len() * 2 < event.best_used;
        let h = if subset.len() == picks.len() && !thinning {
            return locate_near(&picks, &quiet, now, center);
        } else if subset.len() < 3 || thinning {
            // The stations that located it have gone quiet (most of the evidence expired): keep the position
            // they gave rather than let the distant stations that remain pull it away.
            event.last.clone()?
        } else {
            locate_near(&subset, &quiet, now, center)?
        };
        let kept_used: Vec<bool> = if subset.len() < 3 || thinning {
            vec![true; subset.len()]
        } else {
            h.used.clone()
        };
        let mut used_in_subset = kept_used.iter();
        let used = consistent
            .iter()
            .map(|c| *c && *used_in_subset.next().unwrap_or(&false))
            .collect();
        let residuals = residuals(&picks, h.latitude, h.longitude, h.depth_km, h.origin);
        Some(Hypocentre {
            residuals,
            used,
            ..h
        })
    }

    /// The solution for an event's current state, or `None` when nothing a consumer cares about changed
    /// (unless `force`).
    fn solution(&mut self, index: usize, now_ms: i64, force: bool) -> Option<Detection> {
        let h = self.hypocentre(index, now_ms)?;
        let now = now_ms as f64 / 1000.0;
        let peaks: Vec<PeakAtStation> = self.events[index]
            .members
            .iter()
            .map(|m| {
                let p = &self.positions[m.station];
                let d = distance_km(h.latitude, h.longitude, p.latitude, p.longitude);
                PeakAtStation {
                    peak_intensity: m.peak,
                    hypocentral_km: hypocentral_km(d, h.depth_km),
                    s_arrived: now - h.origin > s_seconds(d, h.depth_km) + 3.0,
                }
            })
            .collect();
        let fresh = estimate(&peaks, h.depth_km);
        let event = &mut self.events[index];
        let retained = fresh.is_none() && event.magnitude.is_some();
        if let Some(m) = fresh {
            event.magnitude = Some((m.mw, m.uncertainty, m.stations, now_ms));
        }
        let key = (
            event.status,
            event.members.len(),
            event.magnitude.map(|(m, ..)| (m * 10.0).round() as i64),
        );
        if !force && event.last_reported == Some(key) {
            return None;
        }
        // A candidate's solution is not converged: it is not reported (its first report is preliminary).
        if event.status == "candidate" {
            return None;
        }
        event.last_reported = Some(key);
        event.reports += 1;
        let (mw, uncertainty, magnitude_stations, magnitude_at) = event
            .magnitude
            .map_or((None, 0.0, 0, now_ms), |(m, u, n, at)| (Some(m), u, n, at));
        let stations: Vec<StationPick> = event
            .members
            .iter()
            .zip(h.residuals.iter().zip(&h.used))
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
                    s_wave_reached: now - h.origin > s_seconds(d, h.depth_km),
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
            status: event.status.to_string(),
            first_detected_at: event.first_at_ms,
            reported_at: now_ms,
            recorded_at: now_ms,
            algorithm: self.config.algorithm.clone(),
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
            },
            magnitude: MagnitudeEstimate {
                value: mw,
                kind: mw.map(|_| "Mw-SM99".to_string()),
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
