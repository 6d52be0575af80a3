//! The monitor feed as it behaves (hyp.md): each second's image is published 1–2 s after its second, some
//! later still, some never; a second's address sometimes first serves the previous second's image again; the
//! server stops publishing for seconds at a time. The fetcher (the host's `hyp/source.rs`) asks for a second
//! once the server's clock says it should be there, asks again while it is missing or repeats the previous
//! image (every quarter second at first, then every second), gives up after a few seconds, and hands the
//! detector its frames in order. This module models both, so a benchmark's reports carry the time they would
//! have been published.

use osds_detector::kmoni;
use osds_detector::rng::Rng;
use std::ops::Range;

/// Seconds after the server's latest image the fetcher asks for the next one: the lag its clock shows.
pub const FETCH_LAG_S: f64 = 1.2;
/// Seconds past that the fetcher keeps asking for a missing image.
pub const PATIENCE_S: f64 = 5.0;

/// A stretch of seconds the server publishes nothing for; their images come just after it ends, or never.
#[derive(Debug, Clone, PartialEq)]
pub struct Outage {
    pub frames: Range<u64>,
    /// Share of the outage's images published after it ends.
    pub recovered: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Feed {
    /// An image is published this many seconds after its second, uniformly in the range.
    pub delay_s: Range<f64>,
    /// Share of images published up to 3 s later still.
    pub late: f64,
    /// Share of images never published.
    pub lost: f64,
    /// Share of seconds whose address first serves the previous second's image (the right one a second later).
    pub repeated: f64,
    pub outages: Vec<Outage>,
}

/// When a frame reaches the detector: seconds on the scenario clock, or never.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Delivery {
    At(f64),
    Lost,
}

impl Feed {
    /// Every image at the end of its second, none lost: the in-model matrix's feed (its reports then carry
    /// their frame's time, as its figures always have).
    pub fn perfect() -> Feed {
        Feed {
            delay_s: 0.0..0.0,
            late: 0.0,
            lost: 0.0,
            repeated: 0.0,
            outages: Vec::new(),
        }
    }

    /// Published 1–2 s late, 5 % up to 3 s later still, 2 % never, 1 % repeated first.
    pub fn realistic() -> Feed {
        Feed {
            delay_s: 1.0..2.0,
            late: 0.05,
            lost: 0.02,
            repeated: 0.01,
            outages: Vec::new(),
        }
    }

    pub fn with_outage(mut self, frames: Range<u64>, recovered: f64) -> Feed {
        self.outages.push(Outage { frames, recovered });
        self
    }

    fn is_perfect(&self) -> bool {
        self.delay_s.end <= 0.0 && self.late == 0.0 && self.repeated == 0.0
    }

    /// When each of `seconds` frames reaches the detector.
    pub fn deliveries(&self, seconds: u64, seed: u64) -> Vec<Delivery> {
        let mut rng = Rng::new(seed ^ 0xFEED);
        // When each image is published (seconds on the scenario clock), or never.
        let published: Vec<Option<f64>> = (0..seconds)
            .map(|n| {
                let t = n as f64;
                let delay = self.delay_s.start
                    + (self.delay_s.end - self.delay_s.start) * rng.uniform()
                    + if rng.uniform() < self.late {
                        3.0 * rng.uniform()
                    } else {
                        0.0
                    }
                    + if rng.uniform() < self.repeated {
                        1.0
                    } else {
                        0.0
                    };
                let lost = rng.uniform() < self.lost;
                let outage = self.outages.iter().find(|o| o.frames.contains(&n));
                match outage {
                    Some(o) if rng.uniform() < o.recovered => {
                        Some(o.frames.end as f64 + rng.uniform())
                    }
                    Some(_) => None,
                    None => (!lost).then_some(t + delay),
                }
            })
            .collect();
        if self.is_perfect() {
            return published
                .into_iter()
                .enumerate()
                .map(|(n, at)| at.map_or(Delivery::Lost, |_| Delivery::At(n as f64)))
                .collect();
        }
        // The fetcher: asks for second n at n + lag (or once n − 1 is settled), again as
        // `kmoni::retry_in_ms` says until n + lag + patience.
        let mut settled = f64::NEG_INFINITY;
        published
            .into_iter()
            .enumerate()
            .map(|(n, published)| {
                let due = n as f64 + FETCH_LAG_S;
                let first = due.max(settled);
                let asks = asks(first, (due + PATIENCE_S).max(first));
                let delivery = published
                    .and_then(|at| asks.iter().copied().find(|&asked| asked >= at))
                    .map_or(Delivery::Lost, Delivery::At);
                settled = match delivery {
                    Delivery::At(at) => at,
                    Delivery::Lost => asks.last().copied().unwrap_or(first),
                };
                delivery
            })
            .collect()
    }
}

/// When the fetcher asks for an image first asked for at `first` (seconds), giving up at `give_up`.
fn asks(first: f64, give_up: f64) -> Vec<f64> {
    let mut asks = vec![first];
    loop {
        let last = asks[asks.len() - 1];
        let next =
            last + kmoni::retry_in_ms(((last - first) * 1000.0).round() as i64) as f64 / 1000.0;
        if next > give_up {
            return asks;
        }
        asks.push(next);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_perfect_feed_delivers_every_frame_at_its_second() {
        let d = Feed::perfect().deliveries(5, 1);
        assert_eq!(d[3], Delivery::At(3.0));
    }

    #[test]
    fn a_late_image_is_asked_for_every_quarter_second_then_every_second() {
        assert_eq!(
            asks(10.0, 15.0),
            [10.0, 10.25, 10.5, 10.75, 11.0, 12.0, 13.0, 14.0, 15.0]
        );
    }

    #[test]
    fn a_realistic_feed_is_late_in_order_and_loses_some() {
        let d = Feed::realistic()
            .with_outage(100..106, 0.0)
            .deliveries(600, 7);
        let mut last = f64::NEG_INFINITY;
        for (n, delivery) in d.iter().enumerate() {
            if let Delivery::At(at) = delivery {
                assert!(*at >= n as f64 + 1.0, "published at least 1 s late");
                assert!(*at >= last, "in order");
                last = *at;
            }
        }
        assert!((100..106).all(|n| d[n] == Delivery::Lost));
        let lost = d.iter().filter(|x| **x == Delivery::Lost).count();
        assert!((6..40).contains(&lost), "{lost}");
    }
}
