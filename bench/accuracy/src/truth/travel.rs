//! The truth's travel times: first-arriving P and S of the ak135 Earth model (Kennett, Engdahl & Buland 1995)
//! for sources 0–700 km deep and distances 0–4,000 km, computed once with ObsPy's TauP
//! (`data/ak135-traveltimes.py`) and read bilinearly. The detector locates with JMA2001 and never reads this.

use std::sync::LazyLock;

const TABLE: &str = include_str!("../../data/ak135-traveltimes.csv");
const DEPTH_STEP_KM: f64 = 10.0;
const DISTANCE_STEP_KM: f64 = 10.0;

pub struct Ak135 {
    depths: usize,
    distances: usize,
    /// Seconds, `[depth * distances + distance]`.
    p: Vec<f64>,
    s: Vec<f64>,
}

static AK135: LazyLock<Ak135> = LazyLock::new(|| {
    let mut rows: Vec<[f64; 4]> = Vec::new();
    for line in TABLE.lines().skip(1).filter(|l| !l.is_empty()) {
        let mut cells = line.split(',').map(|c| c.parse::<f64>().expect("a number"));
        rows.push(std::array::from_fn(|_| cells.next().expect("four columns")));
    }
    let depths = rows.iter().map(|r| r[0]).fold(0.0, f64::max) / DEPTH_STEP_KM + 1.0;
    let distances = rows.iter().map(|r| r[1]).fold(0.0, f64::max) / DISTANCE_STEP_KM + 1.0;
    let (depths, distances) = (depths as usize, distances as usize);
    assert_eq!(rows.len(), depths * distances, "a full grid");
    let mut p = vec![0.0; rows.len()];
    let mut s = vec![0.0; rows.len()];
    for [depth, distance, tp, ts] in rows {
        let at =
            (depth / DEPTH_STEP_KM) as usize * distances + (distance / DISTANCE_STEP_KM) as usize;
        p[at] = tp / 1000.0;
        s[at] = ts / 1000.0;
    }
    Ak135 {
        depths,
        distances,
        p,
        s,
    }
});

impl Ak135 {
    pub fn get() -> &'static Ak135 {
        &AK135
    }

    /// P travel time (s) to a station `epicentral_km` away from a source `depth_km` deep.
    pub fn p(&self, epicentral_km: f64, depth_km: f64) -> f64 {
        self.read(&self.p, epicentral_km, depth_km)
    }

    /// S travel time (s).
    pub fn s(&self, epicentral_km: f64, depth_km: f64) -> f64 {
        self.read(&self.s, epicentral_km, depth_km)
    }

    fn read(&self, grid: &[f64], distance: f64, depth: f64) -> f64 {
        let axis = |x: f64, step: f64, n: usize| {
            let x = (x / step).clamp(0.0, (n - 1) as f64);
            let i = (x.floor() as usize).min(n - 2);
            (i, x - i as f64)
        };
        let (i, fi) = axis(depth, DEPTH_STEP_KM, self.depths);
        let (j, fj) = axis(distance, DISTANCE_STEP_KM, self.distances);
        let at = |a: usize, b: usize| grid[a * self.distances + b];
        let near = at(i, j) * (1.0 - fj) + at(i, j + 1) * fj;
        let far = at(i + 1, j) * (1.0 - fj) + at(i + 1, j + 1) * fj;
        near * (1.0 - fi) + far * fi
    }
}
