//! Earthquakes as the truth makes them: a point source below magnitude 6, a rupturing fault from 6 up. The fault
//! (Wells & Coppersmith's length and width, a strike and a dip) is cut into patches that break one after
//! another, 2.5 km/s outward from the hypocentre (bilateral, or one way along strike); each patch's waves
//! travel by ak135 to each station. A station's shaking at a moment is that of the part of the fault whose S
//! waves have reached it (the moment of the broken area, Mw − (2/3)·log10 of the unbroken share), at its
//! distance from the nearest broken patch, so a large quake's shaking grows for tens of seconds and is
//! strongest near the fault, not only near the hypocentre.

use super::shaking::fault_size_km;
use super::travel::Ak135;
use osds_detector::geo::{destination, distance_km};
use osds_detector::trigger::StationPosition;

const RUPTURE_KM_S: f64 = 2.5;
const PATCH_KM: f64 = 4.0;
const MAX_PATCHES_ALONG: usize = 60;
const MAX_PATCHES_DOWN: usize = 12;
/// Below this magnitude the source is a point.
const FINITE_FROM_MW: f64 = 6.0;

/// Which way a fault breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rupture {
    /// Outward both ways from the hypocentre.
    Bilateral,
    /// From the hypocentre towards the strike's direction.
    Unilateral,
}

/// An earthquake of the truth. `origin` is in seconds on the scenario clock (frame n is at n seconds).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TruthQuake {
    pub latitude: f64,
    pub longitude: f64,
    pub depth_km: f64,
    pub mw: f64,
    pub origin: f64,
    pub strike_degrees: f64,
    pub dip_degrees: f64,
    pub rupture: Rupture,
}

impl TruthQuake {
    /// A quake breaking bilaterally on a fault striking N30°E and dipping 45°.
    pub fn at(latitude: f64, longitude: f64, depth_km: f64, mw: f64, origin: f64) -> TruthQuake {
        TruthQuake {
            latitude,
            longitude,
            depth_km,
            mw,
            origin,
            strike_degrees: 30.0,
            dip_degrees: 45.0,
            rupture: Rupture::Bilateral,
        }
    }

    pub fn fault(self, strike_degrees: f64, dip_degrees: f64, rupture: Rupture) -> TruthQuake {
        TruthQuake {
            strike_degrees,
            dip_degrees,
            rupture,
            ..self
        }
    }

    /// The fault's patches: (latitude, longitude, depth km, seconds after the origin it breaks).
    pub fn patches(&self) -> Vec<(f64, f64, f64, f64)> {
        if self.mw < FINITE_FROM_MW {
            return vec![(self.latitude, self.longitude, self.depth_km, 0.0)];
        }
        let (length, width) = fault_size_km(self.mw);
        let along = ((length / PATCH_KM).ceil() as usize).clamp(1, MAX_PATCHES_ALONG);
        let down = ((width / PATCH_KM).ceil() as usize).clamp(1, MAX_PATCHES_DOWN);
        let dip = self.dip_degrees.to_radians();
        // Along strike from the hypocentre: centred, or mostly ahead of it.
        let (from, to) = match self.rupture {
            Rupture::Bilateral => (-length / 2.0, length / 2.0),
            Rupture::Unilateral => (-0.1 * length, 0.9 * length),
        };
        // Down dip: centred on the hypocentre, moved down where the fault would break the surface.
        let mut top = -width / 2.0;
        let shallowest = self.depth_km + top * dip.sin();
        if shallowest < 1.0 {
            top += (1.0 - shallowest) / dip.sin().max(0.1);
        }
        let mut patches = Vec::with_capacity(along * down);
        for a in 0..along {
            let x = from + (to - from) * (a as f64 + 0.5) / along as f64;
            for b in 0..down {
                let y = top + width * (b as f64 + 0.5) / down as f64;
                let (lat, lon) = destination(self.latitude, self.longitude, self.strike_degrees, x);
                let (lat, lon) = destination(lat, lon, self.strike_degrees + 90.0, y * dip.cos());
                let depth = (self.depth_km + y * dip.sin()).max(0.5);
                let from_hypocentre = (x * x + y * y).sqrt();
                patches.push((lat, lon, depth, from_hypocentre / RUPTURE_KM_S));
            }
        }
        patches
    }
}

/// When a quake's waves reach one station, patch by patch, in order of arrival: the arrival times (seconds on
/// the scenario clock) and the nearest distance (km) of the patches arrived so far.
#[derive(Debug, Clone, Default)]
pub struct Arrivals {
    pub times: Vec<f64>,
    pub nearest_km: Vec<f64>,
}

impl Arrivals {
    /// How many patches have arrived by `t`, and the nearest of them (km).
    pub fn by(&self, t: f64) -> Option<(usize, f64)> {
        let k = self.times.partition_point(|&a| a <= t);
        (k > 0).then(|| (k, self.nearest_km[k - 1]))
    }

    pub fn first(&self) -> f64 {
        self.times.first().copied().unwrap_or(f64::INFINITY)
    }

    pub fn last(&self) -> f64 {
        self.times.last().copied().unwrap_or(f64::INFINITY)
    }
}

/// The P and S arrivals of `quake`'s patches at a station, its P delay `delay_s` included.
pub fn arrivals(
    quake: &TruthQuake,
    patches: &[(f64, f64, f64, f64)],
    station: &StationPosition,
    delay_s: f64,
) -> (Arrivals, Arrivals) {
    let ak135 = Ak135::get();
    let mut p: Vec<(f64, f64)> = Vec::with_capacity(patches.len());
    let mut s: Vec<(f64, f64)> = Vec::with_capacity(patches.len());
    for &(lat, lon, depth, breaks) in patches {
        let d = distance_km(lat, lon, station.latitude, station.longitude);
        let r = (d * d + depth * depth).sqrt();
        let at = quake.origin + breaks;
        p.push((at + ak135.p(d, depth) + delay_s, r));
        s.push((at + ak135.s(d, depth) + 1.7 * delay_s, r));
    }
    let order = |mut list: Vec<(f64, f64)>| {
        list.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut nearest = f64::INFINITY;
        let (times, nearest_km) = list
            .into_iter()
            .map(|(t, r)| {
                nearest = nearest.min(r);
                (t, nearest)
            })
            .unzip();
        Arrivals { times, nearest_km }
    };
    (order(p), order(s))
}
