//! Picks come by chance, too. On a noisy network some station triggers on its noise every second or so, and a
//! cluster finds such picks that fit it: a source very deep below the network (whose P wave reaches every
//! station within a few seconds of the others), or a shallow one whose cluster has stayed open for a minute
//! (its P wave's ring, hundreds of km wide by then, crosses a chance pick every few seconds). Before a cluster
//! is published, its picks must be far more than the network's own background of picks gives the solution in
//! the time and the stations its waves have had: the picks per station and second of the network's last
//! quiet minutes, times the seconds each station's P arrival window has been open.

use std::collections::VecDeque;

/// A cluster is published only when chance gives its solution as many picks as it has at most this often.
pub const ALPHA: f64 = 1e-6;

/// Quiet seconds the background is measured over: three minutes.
const QUIET_FRAMES: usize = 180;
/// Before the background is measured, it is taken as one pick on the network a minute: a prior of that one
/// pick over this many seconds is added to what was seen. (One pick over the few seconds seen so far would ask
/// a quake in a detector's first seconds for picks no quiet network gives by chance.)
const PRIOR_SECONDS: f64 = 60.0;

/// The network's background of picks: those of its last [`QUIET_FRAMES`] quiet frames, with their stations.
/// A frame is quiet when no reported quake's waves are about: their picks are no chance, and while they pass
/// neither their picks nor their seconds are counted (counting the seconds alone read a background ten times
/// too low after a quake that swept the network).
#[derive(Debug, Default)]
pub struct Background {
    /// The quiet frames' times (ms), oldest first.
    frames: VecDeque<i64>,
    /// (frame time, station) of every pick in them.
    picks: VecDeque<(i64, usize)>,
}

impl Background {
    /// Takes the frame at `at_ms` and the stations that picked in it; only a `quiet` one counts.
    pub fn step(&mut self, at_ms: i64, quiet: bool, picked: impl IntoIterator<Item = usize>) {
        if !quiet {
            return;
        }
        self.frames.push_back(at_ms);
        self.picks
            .extend(picked.into_iter().map(|station| (at_ms, station)));
        while self.frames.len() > QUIET_FRAMES {
            self.frames.pop_front();
        }
        let oldest = self.frames.front().copied().unwrap_or(at_ms);
        while self.picks.front().is_some_and(|&(t, _)| t < oldest) {
            self.picks.pop_front();
        }
    }

    /// Picks per station and second on `stations` stations, not counting those of the stations `except` names
    /// (a cluster's own).
    pub fn rate(&self, stations: usize, except: impl Fn(usize) -> bool) -> f64 {
        let picks = self.picks.iter().filter(|&&(_, s)| !except(s)).count();
        rate(picks, self.frames.len() as f64, stations)
    }
}

/// Picks per station and second, from `background` picks seen over `seconds` on `stations` stations and the
/// prior's one pick over [`PRIOR_SECONDS`].
pub fn rate(background: usize, seconds: f64, stations: usize) -> f64 {
    (background + 1) as f64 / ((seconds + PRIOR_SECONDS) * stations.max(1) as f64)
}

/// The chance that a Poisson count with mean `expected` is `k` or more.
pub fn at_least(expected: f64, k: usize) -> f64 {
    let mut term = (-expected).exp();
    let mut below = 0.0;
    for j in 0..k {
        below += term;
        term *= expected / (j + 1) as f64;
    }
    (1.0 - below).max(0.0)
}

/// Whether `picks` picks are beyond chance where chance gives `expected`.
pub fn beyond_chance(picks: usize, expected: f64) -> bool {
    at_least(expected, picks) <= ALPHA
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_poisson_tail_matches_its_closed_forms() {
        assert!((at_least(2.0, 0) - 1.0).abs() < 1e-12);
        assert!((at_least(2.0, 1) - (1.0 - (-2.0f64).exp())).abs() < 1e-12);
        // P(X >= 3) for a mean of 0.5: 1 - e^-0.5 (1 + 0.5 + 0.125).
        let expected = 1.0 - (-0.5f64).exp() * 1.625;
        assert!((at_least(0.5, 3) - expected).abs() < 1e-12);
    }

    #[test]
    fn the_background_counts_quiet_frames_only_and_forgets_the_oldest() {
        let mut background = Background::default();
        // Two quiet frames with a pick each, then a quake's frame full of picks: not counted.
        background.step(0, true, [3]);
        background.step(1_000, true, [4]);
        background.step(2_000, false, [5, 6, 7, 8]);
        assert_eq!(background.rate(10, |_| false), rate(2, 2.0, 10));
        // A cluster's own stations are not its background.
        assert_eq!(background.rate(10, |s| s == 4), rate(1, 2.0, 10));
        // Three minutes of quiet frames later, those picks are forgotten.
        for n in 0..QUIET_FRAMES as i64 {
            background.step(3_000 + n * 1_000, true, []);
        }
        assert_eq!(background.rate(10, |_| false), rate(0, 180.0, 10));
    }

    #[test]
    fn a_quiet_network_publishes_from_a_few_picks_and_a_noisy_one_needs_many_more() {
        // 1,366 stations, three minutes. A local quake's first seconds: 15 stations' windows of 5 s open.
        let quiet = rate(0, 180.0, 1366);
        let noisy = rate(300, 180.0, 1366);
        assert!(beyond_chance(3, quiet * 15.0 * 5.0));
        assert!(!beyond_chance(3, noisy * 15.0 * 5.0));
        assert!(beyond_chance(5, noisy * 15.0 * 5.0));
        // A source 690 km deep, a minute and a half after its origin: every station within 1,000 km reached,
        // its window 10 s wide. Eleven picks within six seconds are what such a network gives it by chance.
        assert!(!beyond_chance(11, noisy * 1000.0 * 10.0));
        assert!(beyond_chance(11, quiet * 1000.0 * 10.0));
    }
}
