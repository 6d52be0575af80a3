//! Triggering on realtime intensity, per station: a net rise over the last 10 s of at least 1.1, confirmed by
//! neighbours (up to 15 nearest within 60 km: at least min(n, max(n/3, 4)) of them rising by 0.5, more where
//! their noise alone would give that many, see [`needed_neighbours`]; a station without neighbours needs a rise
//! of 2). A station at 3 or more whose neighbours are all at least 3 lower
//! and that is not rising is faulty (stuck) and ignored until its reading moves. The pick is the observation second at
//! which the station's own rise began to qualify, not the later one at which its neighbours confirmed it.
//!
//! A noisy station (everyday noise near roads and towns, a poor site) would cross those fixed rises on its noise
//! alone, so each station's rises are scaled by its own frame-to-frame noise, learnt while it is quiet: a
//! station noisier than [`QUIET_NOISE`] needs proportionally more to trigger and to confirm a neighbour, and no
//! station ever needs less than the rises above.
//!
//! Windows are kept by observation time, not by frame count, so a lost frame shortens a window instead of
//! shifting every pick. A triggered station re-arms once its rise has died away for a few seconds: a later rise
//! (an aftershock's waves on a mainshock's stations) triggers it again, and the detector decides whose it is.

use crate::geo::distance_km;
use std::collections::VecDeque;

const WINDOW_MS: i64 = 10_000;
const RISE: f64 = 1.1;
const NEIGHBOUR_RISE: f64 = 0.5;
const LONE_RISE: f64 = 2.0;
const MAX_NEIGHBOURS: usize = 15;
const NEIGHBOUR_RADIUS_KM: f64 = 60.0;
const STUCK_LEVEL: f64 = 3.0;
const STUCK_MARGIN: f64 = 3.0;
const REFRACTORY_MS: i64 = 60_000;
/// A triggered station re-arms after its rise has stayed under its neighbour rise this long.
const REARM_MS: i64 = 3_000;
/// The frame-to-frame noise (σ, intensity) the fixed rises are made for: they sit 4.4 σ (a trigger) and 2 σ (a
/// confirming neighbour) above it. A noisier station's rises grow with its noise.
const QUIET_NOISE: f64 = 0.25;
/// Steps a station's noise is learnt from before it counts: until then its rises are the fixed ones.
const NOISE_LEARNT: f64 = 8.0;
/// How old a step is before it is learnt as noise.
const NOISE_DELAY_MS: i64 = 2_000;
/// A step this many times the mean so far is learnt as only this (a spike, an onset not yet seen as one).
const NOISE_CLIP: f64 = 4.0;
/// Frames the noise is averaged over once learnt (a slowly changing noise, such as a town's day and night).
const NOISE_FRAMES: f64 = 300.0;
/// How often frame-to-frame Gaussian noise alone lifts a station's latest frame k σ above the lowest of the ten
/// before it (its rise over the window), for k = 0, 0.25, ..., 8: integrated numerically once.
#[rustfmt::skip]
const CHANCE_RISE: [f64; 33] = [
    0.9091, 0.8676, 0.8148, 0.7508, 0.6768, 0.5954, 0.5099, 0.4243, 0.3424, 0.2676, 0.2023, 0.1479, 0.1044,
    0.0712, 0.0469, 0.0298, 0.0183, 0.0108, 0.0062, 0.0034, 0.0018, 9.41e-4, 4.70e-4, 2.27e-4, 1.06e-4, 4.80e-5,
    2.10e-5, 8.92e-6, 3.67e-6, 1.46e-6, 5.65e-7, 2.12e-7, 7.68e-8,
];
/// How unlikely a trigger's rise and its neighbours' confirmations must be together on their noise alone, where
/// that noise could confirm it (see [`needed_neighbours`]).
const CHANCE_ALPHA: f64 = 1e-6;
/// Neighbours whose noise alone gives this share of the fixed count of confirmations or more are counted
/// against their chance.
const CHANCE_SHARE: f64 = 0.7;
/// The noise a station is taken to have for that chance until it has learnt its own.
const CHANCE_PRIOR_NOISE: f64 = QUIET_NOISE;

/// [`CHANCE_RISE`] at a rise of `k` σ.
fn chance_of_rise(k: f64) -> f64 {
    let at = (k / 0.25).clamp(0.0, (CHANCE_RISE.len() - 1) as f64);
    let (low, high) = (at.floor() as usize, at.ceil() as usize);
    CHANCE_RISE[low] + (CHANCE_RISE[high] - CHANCE_RISE[low]) * (at - low as f64)
}

/// How many confirming neighbours a trigger needs: min(n, max(n/3, 4)) of its n neighbours; and where their
/// noise alone gives [`CHANCE_SHARE`] of that or more (`chances`: each one's chance of confirming on its noise),
/// as many as make the trigger's own rise (`alone`: its chance on its noise) and that many confirmations by
/// chance unlikely together, at most [`CHANCE_ALPHA`]. A noisy neighbourhood's small rise needs more of them.
fn needed_neighbours(alone: f64, chances: &[f64]) -> usize {
    let n = chances.len();
    let fixed = n.min((n / 3).max(4));
    if chances.iter().sum::<f64>() < CHANCE_SHARE * fixed as f64 {
        return fixed;
    }
    // exactly[m]: the chance that exactly m neighbours confirm on their noise (a Poisson binomial).
    let mut exactly = vec![0.0; n + 1];
    exactly[0] = 1.0;
    for (count, p) in chances.iter().enumerate() {
        for m in (1..=count + 1).rev() {
            exactly[m] = exactly[m] * (1.0 - p) + exactly[m - 1] * p;
        }
        exactly[0] *= 1.0 - p;
    }
    (fixed..=n)
        .find(|&m| alone * exactly[m..].iter().sum::<f64>() <= CHANCE_ALPHA)
        .unwrap_or(n)
}

/// The monitor's frames are a second apart: picks a frame apart, and a station observed the frame before its
/// rise went unobserved for no time.
pub const FRAME_MS: i64 = 1_000;

/// Where a station is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StationPosition {
    pub latitude: f64,
    pub longitude: f64,
}

/// A station that just triggered, with the observation time (Unix ms) its qualifying rise began.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Triggered {
    pub station: usize,
    pub onset_ms: i64,
    /// How much earlier than its observation second the rise may have begun: the time the station went
    /// unobserved before it (lost frames, an outage, a dropout), 0 when the second before was observed.
    pub unseen_ms: i64,
    /// It had triggered before and re-armed: a new rise on a station that is shaking or has shaken.
    pub again: bool,
}

pub struct Trigger {
    neighbours: Vec<Vec<usize>>,
    /// Per station: (observation ms, value) within the window, oldest first.
    history: Vec<VecDeque<(i64, f64)>>,
    /// Per station: the observation ms its qualifying rise began, and the ms unobserved before it.
    onset: Vec<Option<(i64, i64)>>,
    triggered: Vec<bool>,
    /// Triggered once since its last reset: a new trigger is a re-trigger.
    fired_before: Vec<bool>,
    /// Since when a triggered station's rise has stayed low (it re-arms after [`REARM_MS`]).
    calm_since: Vec<Option<i64>>,
    faulty: Vec<bool>,
    /// A station reset after an event may not trigger again before this time (its coda is not a new quake).
    refractory_until: Vec<i64>,
    noise: Vec<Noise>,
    now_ms: i64,
}

/// A station's frame-to-frame noise, learnt from consecutive frames while it is quiet.
#[derive(Debug, Clone, Copy)]
struct Noise {
    /// Mean |change| between consecutive frames.
    mean_step: f64,
    /// How many it is the mean of, up to [`NOISE_FRAMES`].
    frames: f64,
}

impl Noise {
    /// For Gaussian noise of σ, consecutive frames differ by 2σ/√π on average.
    const STEP_PER_SIGMA: f64 = std::f64::consts::FRAC_2_SQRT_PI;
    /// One |step|'s standard deviation over its mean (√(π/2 − 1)): a mean of n steps is off by this over √n.
    const STEP_SPREAD: f64 = 0.76;

    fn new() -> Noise {
        Noise {
            mean_step: 0.0,
            frames: 0.0,
        }
    }

    fn learn(&mut self, step: f64) {
        let mut step = step.abs();
        if self.frames >= NOISE_LEARNT {
            step = step.min(NOISE_CLIP * self.mean_step);
        }
        self.frames = (self.frames + 1.0).min(NOISE_FRAMES);
        self.mean_step += (step - self.mean_step) / self.frames;
    }

    /// σ as measured, once learnt from [`NOISE_LEARNT`] steps.
    fn learnt(&self) -> Option<f64> {
        (self.frames >= NOISE_LEARNT).then(|| self.mean_step / Noise::STEP_PER_SIGMA)
    }

    /// The noise as measured (no standard errors off), or [`CHANCE_PRIOR_NOISE`] before it is learnt.
    fn sigma(&self) -> f64 {
        self.learnt()
            .map_or(CHANCE_PRIOR_NOISE, |sigma| sigma.max(1e-3))
    }

    /// What the station's rises are multiplied by: 1 up to [`QUIET_NOISE`], its noise over that above.
    fn scale(&self) -> f64 {
        // Learnt from a few frames, a quiet station may seem noisy: its noise is taken two standard errors
        // lower, so only a station surely noisier is scaled.
        let sigma = self.learnt().map_or(0.0, |sigma| {
            sigma * (1.0 - 2.0 * Noise::STEP_SPREAD / self.frames.sqrt())
        });
        (sigma / QUIET_NOISE).max(1.0)
    }
}

impl Trigger {
    pub fn new(stations: &[StationPosition]) -> Trigger {
        let neighbours = stations
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let mut near: Vec<(f64, usize)> = stations
                    .iter()
                    .enumerate()
                    .filter(|(j, _)| *j != i)
                    .map(|(j, o)| {
                        (
                            distance_km(s.latitude, s.longitude, o.latitude, o.longitude),
                            j,
                        )
                    })
                    .filter(|(d, _)| *d <= NEIGHBOUR_RADIUS_KM)
                    .collect();
                near.sort_by(|a, b| a.0.total_cmp(&b.0));
                near.into_iter()
                    .take(MAX_NEIGHBOURS)
                    .map(|(_, j)| j)
                    .collect()
            })
            .collect();
        let n = stations.len();
        Trigger {
            neighbours,
            history: vec![VecDeque::new(); n],
            onset: vec![None; n],
            triggered: vec![false; n],
            fired_before: vec![false; n],
            calm_since: vec![None; n],
            faulty: vec![false; n],
            refractory_until: vec![i64::MIN; n],
            noise: vec![Noise::new(); n],
            now_ms: i64::MIN,
        }
    }

    /// Net rise over the window: the latest value minus the lowest (missing values are skipped).
    pub fn rise(&self, i: usize) -> f64 {
        let h = &self.history[i];
        match (h.back(), h.iter().map(|(_, v)| *v).reduce(f64::min)) {
            (Some((_, last)), Some(low)) => last - low,
            _ => 0.0,
        }
    }

    /// The lowest value in the window: the station's level before whatever it is showing now.
    pub fn floor(&self, i: usize) -> Option<f64> {
        self.history[i].iter().map(|(_, v)| *v).reduce(f64::min)
    }

    pub fn is_faulty(&self, station: usize) -> bool {
        self.faulty[station]
    }

    /// Every station's [`Trigger::is_faulty`].
    pub fn faulty(&self) -> &[bool] {
        &self.faulty
    }

    /// Rising, though not (yet) confirmed: its silence is no evidence against an arrival.
    pub fn is_rising(&self, station: usize) -> bool {
        self.rise(station) >= self.neighbour_rise(station)
    }

    /// The rise with which `station` confirms a neighbour, for its noise.
    fn neighbour_rise(&self, station: usize) -> f64 {
        NEIGHBOUR_RISE * self.noise[station].scale()
    }

    pub fn is_triggered(&self, station: usize) -> bool {
        self.triggered[station]
    }

    /// Lets a station trigger again (its association expired), after a refractory minute.
    pub fn reset(&mut self, station: usize) {
        self.triggered[station] = false;
        self.fired_before[station] = false;
        self.onset[station] = None;
        self.calm_since[station] = None;
        self.refractory_until[station] = self.now_ms + REFRACTORY_MS;
    }

    /// Lets a station trigger again at once, without the refractory minute: the event it belonged to cannot
    /// explain what it shows now (a second quake's waves reaching a station the first one's waves had
    /// triggered). Its rise is looked at afresh from the next frame.
    pub fn release(&mut self, station: usize) {
        self.triggered[station] = false;
        self.onset[station] = None;
        self.calm_since[station] = None;
        self.refractory_until[station] = i64::MIN;
    }

    /// Frames stopped for a while: values from before the gap say nothing about a rise now (a station reached
    /// during the gap would read as rising), so every window starts again empty.
    pub fn forget_history(&mut self) {
        for (history, onset) in self.history.iter_mut().zip(&mut self.onset) {
            history.clear();
            *onset = None;
        }
    }

    /// Takes the frame observed at `at_ms` (a value or no data per station) and returns the stations that
    /// trigger on it.
    pub fn step(&mut self, at_ms: i64, values: &[Option<f64>]) -> Vec<Triggered> {
        self.now_ms = at_ms;
        for (i, value) in values.iter().enumerate() {
            let h = &mut self.history[i];
            while h.front().is_some_and(|(t, _)| *t < at_ms - WINDOW_MS) {
                h.pop_front();
            }
            if let Some(v) = *value {
                h.push_back((at_ms, v));
            }
            // Noise is learnt from a step a few frames old between consecutive frames (a lost frame doubles a
            // step), while the station is not rising: a quake's arrival keeps it risen for longer than that, and
            // a distant quake's slow wavefront too, so their steps are not taken for noise (the wavefront's
            // stations would grow deaf to it). A coda's slow decay is, harmlessly.
            let at = |t: i64| h.iter().find(|(s, _)| *s == t).map(|(_, v)| *v);
            let old = at_ms - NOISE_DELAY_MS;
            if let (Some(before), Some(after)) = (at(old - FRAME_MS), at(old))
                && value.is_some()
                && !self.faulty[i]
                && self.rise(i) < self.neighbour_rise(i)
            {
                self.noise[i].learn(after - before);
            }
        }
        let rises: Vec<f64> = (0..values.len()).map(|i| self.rise(i)).collect();
        let scales: Vec<f64> = self.noise.iter().map(Noise::scale).collect();
        // The same rises as `neighbour_rise`, from the scales just computed.
        let neighbour_rises: Vec<f64> = scales.iter().map(|s| NEIGHBOUR_RISE * s).collect();
        let latest: Vec<Option<f64>> = self
            .history
            .iter()
            .map(|h| h.back().filter(|(t, _)| *t == at_ms).map(|(_, v)| *v))
            .collect();
        let mut fired = Vec::new();
        for i in 0..values.len() {
            let neighbours = &self.neighbours[i];
            let unmoved = {
                let h = &self.history[i];
                h.len() >= 2 && h[h.len() - 1].1 == h[h.len() - 2].1
            };
            self.faulty[i] = match latest[i] {
                // Stuck stays stuck until the reading moves: a quake's shaking lifts its neighbours toward the
                // stuck level, and a station that did not move with them is no less stuck.
                Some(_) if self.faulty[i] && unmoved => true,
                // Not observed: nothing says it has recovered.
                None => self.faulty[i],
                Some(level)
                    if level >= STUCK_LEVEL
                        && rises[i] < neighbour_rises[i]
                        && !neighbours.is_empty() =>
                {
                    neighbours
                        .iter()
                        .all(|&j| latest[j].is_none_or(|n| n <= level - STUCK_MARGIN))
                }
                _ => false,
            };
            if self.triggered[i] {
                // Re-arms once the rise that triggered it has died away for a while.
                if rises[i] < neighbour_rises[i] {
                    let since = *self.calm_since[i].get_or_insert(at_ms);
                    if at_ms - since >= REARM_MS {
                        self.triggered[i] = false;
                        self.calm_since[i] = None;
                    }
                } else {
                    self.calm_since[i] = None;
                }
                if self.triggered[i] {
                    continue;
                }
            }
            if rises[i] < RISE * scales[i] {
                self.onset[i] = None;
                continue;
            }
            let history = &self.history[i];
            let (onset, unseen_ms) = *self.onset[i].get_or_insert_with(|| {
                let before = history
                    .iter()
                    .rev()
                    .map(|(t, _)| *t)
                    .find(|t| *t < at_ms)
                    .unwrap_or(at_ms);
                (at_ms, (at_ms - before - FRAME_MS).max(0))
            });
            if self.faulty[i] || at_ms < self.refractory_until[i] {
                continue;
            }
            let confirmed = if neighbours.is_empty() {
                rises[i] >= LONE_RISE * scales[i]
            } else {
                let alone = chance_of_rise(rises[i] / self.noise[i].sigma());
                // How likely each neighbour is to confirm on its noise alone: asked only here, where a station
                // has risen enough to trigger, not for every station every frame.
                let chances: Vec<f64> = neighbours
                    .iter()
                    .map(|&j| chance_of_rise(neighbour_rises[j] / self.noise[j].sigma()))
                    .collect();
                let needed = needed_neighbours(alone, &chances);
                neighbours
                    .iter()
                    .filter(|&&j| rises[j] >= neighbour_rises[j])
                    .count()
                    >= needed
            };
            if confirmed {
                self.triggered[i] = true;
                fired.push(Triggered {
                    station: i,
                    onset_ms: onset,
                    unseen_ms,
                    again: std::mem::replace(&mut self.fired_before[i], true),
                });
            }
        }
        fired
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Five stations 5 km apart, each the others' neighbour.
    fn cluster() -> Vec<StationPosition> {
        (0..5)
            .map(|i| StationPosition {
                latitude: 35.0 + 0.045 * f64::from(i),
                longitude: 135.0,
            })
            .collect()
    }

    #[test]
    fn a_pick_is_the_observation_second_its_rise_began_even_across_a_lost_frame() {
        let mut trigger = Trigger::new(&cluster());
        for t in 0..5 {
            assert!(trigger.step(t * 1000, &[Some(-2.0); 5]).is_empty());
        }
        // Frame 5 never came; at 6 s every station stands 2 above its floor. The rise may have begun in the
        // lost second: each pick says so.
        let fired = trigger.step(6_000, &[Some(0.0); 5]);
        assert_eq!(fired.len(), 5);
        assert!(
            fired
                .iter()
                .all(|f| f.onset_ms == 6_000 && !f.again && f.unseen_ms == 1_000)
        );
    }

    #[test]
    fn a_pick_says_how_long_its_station_went_unobserved_before_it() {
        let mut trigger = Trigger::new(&cluster());
        for t in 0..5 {
            assert!(trigger.step(t * 1000, &[Some(-2.0); 5]).is_empty());
        }
        // Station 0 shows no reading for 4 s while the others stay quiet; then all five have risen.
        for t in 5..9 {
            let mut frame = [Some(-2.0); 5];
            frame[0] = None;
            assert!(trigger.step(t * 1000, &frame).is_empty());
        }
        let fired = trigger.step(9_000, &[Some(0.0); 5]);
        assert_eq!(fired.len(), 5);
        for f in fired {
            let unseen = if f.station == 0 { 4_000 } else { 0 };
            assert_eq!((f.station, f.unseen_ms), (f.station, unseen));
        }
    }

    #[test]
    fn a_stuck_station_stays_faulty_while_a_quake_lifts_its_neighbours_until_its_reading_moves() {
        let mut trigger = Trigger::new(&cluster());
        let frame = |others: f64, stuck: Option<f64>| {
            let mut frame = [Some(others); 5];
            frame[0] = stuck;
            frame
        };
        for t in 0..5 {
            trigger.step(t * 1000, &frame(-2.0, Some(4.0)));
        }
        assert!(trigger.is_faulty(0), "4.0 among neighbours at -2.0");
        // A quake lifts the neighbours to 1.5 (within 3 of the stuck level) and a frame from the stuck
        // station is lost: it has not moved, it is still stuck.
        trigger.step(5_000, &frame(1.5, Some(4.0)));
        trigger.step(6_000, &frame(1.5, None));
        trigger.step(7_000, &frame(1.5, Some(4.0)));
        assert!(trigger.is_faulty(0));
        assert_eq!(trigger.faulty(), &[true, false, false, false, false]);
        // Its reading moves: it is a station again.
        trigger.step(8_000, &frame(1.5, Some(3.9)));
        assert!(!trigger.is_faulty(0));
    }

    #[test]
    fn a_noisy_neighbourhood_does_not_trigger_on_its_noise_but_does_on_strong_shaking() {
        let mut trigger = Trigger::new(&cluster());
        // Everyday noise: a jolt of 1.6 every 5 s, which the fixed rises (1.1, confirmed by 0.5) take for an
        // arrival each time the stations have re-armed. The first seconds teach the stations their noise.
        let noise = |t: i64| if t % 5 == 1 { -1.0 } else { -2.6 };
        for t in 0..20 {
            trigger.step(t * 1000, &[Some(noise(t)); 5]);
        }
        for t in 20..60 {
            assert!(
                trigger.step(t * 1000, &[Some(noise(t)); 5]).is_empty(),
                "noise at {t} s"
            );
        }
        // Strong shaking stands far above that noise.
        assert_eq!(trigger.step(60_000, &[Some(4.0); 5]).len(), 5);
    }

    /// Sixteen stations within a few km of one another: each has the other fifteen as neighbours.
    fn crowd() -> Vec<StationPosition> {
        (0..16)
            .map(|i| StationPosition {
                latitude: 35.0 + 0.01 * f64::from(i % 4),
                longitude: 135.0 + 0.01 * f64::from(i / 4),
            })
            .collect()
    }

    /// Whether station 0 triggers on a rise of 1.3 that five of its fifteen neighbours confirm by 0.6, after
    /// half a minute of noise that steps by `step` every frame (σ = step / 1.128).
    fn small_rise_confirmed_by_five(step: f64) -> bool {
        let mut trigger = Trigger::new(&crowd());
        let quiet = |t: i64| -2.0 + if t % 2 == 0 { 0.0 } else { step };
        for t in 0..30 {
            assert!(trigger.step(t * 1000, &[Some(quiet(t)); 16]).is_empty());
        }
        let mut frame = [Some(quiet(30)); 16];
        frame[0] = Some(-2.0 + 1.3);
        for neighbour in frame.iter_mut().skip(1).take(5) {
            *neighbour = Some(-2.0 + 0.6);
        }
        trigger.step(30_000, &frame).iter().any(|f| f.station == 0)
    }

    #[test]
    fn a_small_rise_needs_more_neighbours_where_they_rise_that_much_by_chance() {
        // σ 0.09: a rise of 1.3 is far beyond chance, five neighbours confirm it.
        assert!(small_rise_confirmed_by_five(0.1));
        // σ 0.30: 1.3 is 4.3 σ, and each neighbour reaches its confirming rise (0.5) by chance in nearly half
        // the frames: five of fifteen are what the noise gives, not a confirmation.
        assert!(!small_rise_confirmed_by_five(0.34));
    }

    #[test]
    fn a_station_re_arms_once_calm_and_triggers_again_on_a_new_rise() {
        let mut trigger = Trigger::new(&cluster());
        let mut t = 0;
        let mut step = |level: f64, trigger: &mut Trigger| {
            t += 1000;
            trigger.step(t, &[Some(level); 5])
        };
        step(-2.0, &mut trigger);
        assert_eq!(step(0.0, &mut trigger).len(), 5, "the first rise");
        // Still shaking, then settling: no new trigger while the rise lasts.
        for _ in 0..14 {
            assert!(step(0.0, &mut trigger).is_empty());
        }
        let again = step(2.0, &mut trigger);
        assert_eq!(again.len(), 5, "a new rise after a calm spell");
        assert!(again.iter().all(|f| f.again));
    }
}
