//! Triggering on realtime intensity, per station: a net rise over the last 10 s of at least 1.1, confirmed by
//! neighbours (up to 15 nearest within 60 km: at least min(n, max(n/3, 4)) of them rising by 0.5; a station
//! without neighbours needs a rise of 2). A station at 3 or more whose neighbours are all at least 3 lower
//! and that is not rising is faulty (stuck) and ignored while that holds. The pick is the frame at which the
//! station's own rise began to qualify, not the later frame at which its neighbours confirmed it.

use crate::geo::distance_km;
use std::collections::VecDeque;

const WINDOW_FRAMES: usize = 10;
const RISE: f64 = 1.1;
const NEIGHBOUR_RISE: f64 = 0.5;
const LONE_RISE: f64 = 2.0;
const MAX_NEIGHBOURS: usize = 15;
const NEIGHBOUR_RADIUS_KM: f64 = 60.0;
const STUCK_LEVEL: f64 = 3.0;
const STUCK_MARGIN: f64 = 3.0;
const REFRACTORY_FRAMES: u64 = 60;

/// Where a station is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StationPosition {
    pub latitude: f64,
    pub longitude: f64,
}

/// A station that just triggered, with the frame (counted from 0) its qualifying rise began.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Triggered {
    pub station: usize,
    pub onset_frame: u64,
}

pub struct Trigger {
    neighbours: Vec<Vec<usize>>,
    history: Vec<VecDeque<f64>>,
    onset: Vec<Option<u64>>,
    triggered: Vec<bool>,
    faulty: Vec<bool>,
    /// A station released by an event may not trigger again before this frame (its coda is not a new quake).
    refractory_until: Vec<u64>,
    frame: u64,
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
        Trigger {
            neighbours,
            history: vec![VecDeque::with_capacity(WINDOW_FRAMES + 1); stations.len()],
            onset: vec![None; stations.len()],
            triggered: vec![false; stations.len()],
            faulty: vec![false; stations.len()],
            refractory_until: vec![0; stations.len()],
            frame: 0,
        }
    }

    /// Net rise over the window: the latest value minus the lowest (missing values are skipped).
    fn rise(&self, i: usize) -> f64 {
        let h = &self.history[i];
        match (h.back(), h.iter().copied().reduce(f64::min)) {
            (Some(last), Some(low)) => last - low,
            _ => 0.0,
        }
    }

    pub fn is_faulty(&self, station: usize) -> bool {
        self.faulty[station]
    }

    /// Rising, though not (yet) confirmed: its silence is no evidence against an arrival.
    pub fn is_rising(&self, station: usize) -> bool {
        self.rise(station) >= NEIGHBOUR_RISE
    }

    pub fn is_triggered(&self, station: usize) -> bool {
        self.triggered[station]
    }

    /// Lets a station trigger again (its association expired), after a refractory minute.
    pub fn reset(&mut self, station: usize) {
        self.triggered[station] = false;
        self.onset[station] = None;
        self.refractory_until[station] = self.frame + REFRACTORY_FRAMES;
    }

    /// Lets a station trigger again at once, without the refractory minute: the event it belonged to cannot
    /// explain what it shows now (a second quake's waves reaching a station the first one's waves had
    /// triggered). Its rise is looked at afresh from the next frame.
    pub fn release(&mut self, station: usize) {
        self.triggered[station] = false;
        self.onset[station] = None;
        self.refractory_until[station] = 0;
    }

    /// Frames stopped for a while: values from before the gap say nothing about a rise now (a station reached
    /// during the gap would read as rising), so every window starts again empty.
    pub fn forget_history(&mut self) {
        for (history, onset) in self.history.iter_mut().zip(&mut self.onset) {
            history.clear();
            *onset = None;
        }
    }

    /// Takes one frame (a value or no data per station) and returns the stations that trigger on it.
    pub fn step(&mut self, values: &[Option<f64>]) -> Vec<Triggered> {
        let frame = self.frame;
        self.frame += 1;
        for (i, value) in values.iter().enumerate() {
            if let Some(v) = value {
                let h = &mut self.history[i];
                h.push_back(*v);
                if h.len() > WINDOW_FRAMES + 1 {
                    h.pop_front();
                }
            }
        }
        let rises: Vec<f64> = (0..values.len()).map(|i| self.rise(i)).collect();
        let latest: Vec<Option<f64>> = self.history.iter().map(|h| h.back().copied()).collect();
        let mut fired = Vec::new();
        for i in 0..values.len() {
            let neighbours = &self.neighbours[i];
            self.faulty[i] = match latest[i] {
                Some(level)
                    if level >= STUCK_LEVEL
                        && rises[i] < NEIGHBOUR_RISE
                        && !neighbours.is_empty() =>
                {
                    neighbours
                        .iter()
                        .all(|&j| latest[j].is_none_or(|n| n <= level - STUCK_MARGIN))
                }
                _ => false,
            };
            if rises[i] < RISE {
                self.onset[i] = None;
                continue;
            }
            let onset = *self.onset[i].get_or_insert(frame);
            if self.triggered[i] || self.faulty[i] || frame < self.refractory_until[i] {
                continue;
            }
            let confirmed = if neighbours.is_empty() {
                rises[i] >= LONE_RISE
            } else {
                let n = neighbours.len();
                let needed = n.min((n / 3).max(4));
                neighbours
                    .iter()
                    .filter(|&&j| rises[j] >= NEIGHBOUR_RISE)
                    .count()
                    >= needed
            };
            if confirmed {
                self.triggered[i] = true;
                fired.push(Triggered {
                    station: i,
                    onset_frame: onset,
                });
            }
        }
        fired
    }
}
