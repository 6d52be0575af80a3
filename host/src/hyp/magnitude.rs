//! Magnitude from peaks: invert Si & Midorikawa (1999) PGV attenuation for Mw per station (peak intensity →
//! PGV by I = 2.68 + 1.72 log10 PGV), only for stations the S wave has reached; the median over stations, the
//! median absolute deviation as uncertainty, nothing below two stations.

/// Surface PGV (cm/s) predicted at hypocentral distance `r_km` from an event of `mw` at `depth_km` (crustal,
/// d = 0, site amplification 1).
pub fn pgv_cm_s(mw: f64, depth_km: f64, r_km: f64) -> f64 {
    let fault_length = 10f64.powf(0.5 * mw - 1.85);
    let x = (r_km - fault_length / 2.0).max(3.0);
    let log_pgv = 0.58 * mw + 0.0038 * depth_km
        - (x + 0.0028 * 10f64.powf(0.5 * mw)).log10()
        - 0.002 * x
        - 1.29;
    10f64.powf(log_pgv)
}

/// Realtime intensity of a PGV.
pub fn intensity_of_pgv(pgv: f64) -> f64 {
    2.68 + 1.72 * pgv.log10()
}

/// PGV of a realtime intensity.
pub fn pgv_of_intensity(intensity: f64) -> f64 {
    10f64.powf((intensity - 2.68) / 1.72)
}

/// The Mw whose predicted intensity at this distance and depth equals `intensity` (bisection; the prediction
/// grows with Mw).
pub fn invert(intensity: f64, depth_km: f64, r_km: f64) -> f64 {
    let target = pgv_of_intensity(intensity);
    let (mut low, mut high) = (0.0_f64, 9.5_f64);
    for _ in 0..60 {
        let mid = (low + high) / 2.0;
        if pgv_cm_s(mid, depth_km, r_km) < target {
            low = mid;
        } else {
            high = mid;
        }
    }
    (low + high) / 2.0
}

/// One station's contribution.
#[derive(Debug, Clone, Copy)]
pub struct PeakAtStation {
    pub peak_intensity: f64,
    pub hypocentral_km: f64,
    pub s_arrived: bool,
}

/// The estimate: median Mw, MAD, stations used.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    pub mw: f64,
    pub uncertainty: f64,
    pub stations: usize,
}

/// Median over S-reached stations; `None` below two of them (a magnitude cannot be estimated yet).
pub fn estimate(peaks: &[PeakAtStation], depth_km: f64) -> Option<Estimate> {
    let mut values: Vec<f64> = peaks
        .iter()
        .filter(|p| p.s_arrived)
        .map(|p| invert(p.peak_intensity, depth_km, p.hypocentral_km))
        .collect();
    if values.len() < 2 {
        return None;
    }
    let mw = median(&mut values);
    let mut deviations: Vec<f64> = values.iter().map(|v| (v - mw).abs()).collect();
    Some(Estimate {
        mw,
        uncertainty: median(&mut deviations),
        stations: values.len(),
    })
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(|a, b| a.total_cmp(b));
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inversion_recovers_the_magnitude_that_produced_the_peak() {
        for mw in [4.5, 5.5, 6.5, 7.4] {
            for r in [20.0, 60.0, 150.0] {
                let i = intensity_of_pgv(pgv_cm_s(mw, 10.0, r));
                assert!((invert(i, 10.0, r) - mw).abs() < 1e-6, "mw {mw} r {r}");
            }
        }
    }

    #[test]
    fn fewer_than_two_s_reached_stations_give_no_magnitude() {
        let p = |s| PeakAtStation {
            peak_intensity: 4.0,
            hypocentral_km: 50.0,
            s_arrived: s,
        };
        assert_eq!(estimate(&[p(true), p(false), p(false)], 10.0), None);
        assert!(estimate(&[p(true), p(true)], 10.0).is_some());
    }

    #[test]
    fn the_median_resists_one_outlier_and_the_mad_reports_the_spread() {
        let at = |i: f64| PeakAtStation {
            peak_intensity: i,
            hypocentral_km: 40.0,
            s_arrived: true,
        };
        let mw = |i: f64| invert(i, 10.0, 40.0);
        let e = estimate(&[at(4.0), at(4.1), at(3.9), at(6.9)], 10.0).unwrap();
        assert!((e.mw - (mw(4.0) + mw(4.1)) / 2.0).abs() < 1e-9);
        assert!(e.uncertainty < 0.2);
        assert_eq!(e.stations, 4);
    }
}
