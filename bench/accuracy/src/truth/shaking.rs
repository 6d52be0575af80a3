//! The truth's shaking: published relations the detector does not use.
//!
//! - Peak ground velocity: Kanno, Narita, Morikawa, Fujiwara & Fukushima (2006), BSSA 96(3):879–897, eq. (5)
//!   for sources 30 km deep or shallower and eq. (6) deeper, with the PGV coefficients of their Tables 3 and 4,
//!   at the closest distance to the ruptured fault, and their site correction (eq. 8, Table 5:
//!   G = −0.7057 log Vs30 + 1.765). Kanno et al. regress surface records of K-NET/KiK-net, so their base
//!   model carries the network's mean site amplification (the detector's Si & Midorikawa 1999 relation is for
//!   Vs = 600 m/s bedrock and is used without amplification).
//! - Intensity from PGV: Midorikawa, Fujimoto & Muramatsu (1999), I = 2.165 + 2.262 log PGV, their relation
//!   for intensities 4 to 7, used where it gives 4 or more; below, their relation for the whole range,
//!   I = 2.68 + 1.72 log PGV.
//! - Fault size: Wells & Coppersmith (1994), BSSA 84(4):974–1002, all slip types: subsurface rupture length
//!   log L = −2.44 + 0.59 M, downdip width log W = −1.01 + 0.32 M.

/// log10 PGV (cm/s) at the average K-NET/KiK-net site, `x_km` from the ruptured fault of an event of `mw` whose
/// hypocentre is `depth_km` deep.
pub fn log_pgv(mw: f64, depth_km: f64, x_km: f64) -> f64 {
    if depth_km <= 30.0 {
        0.702 * mw - 0.000925 * x_km - (x_km + 0.00217 * 10f64.powf(0.5 * mw)).log10() - 1.93
    } else {
        // Eq. (6) has no near-source saturation term; a station is never nearer a deep fault than a few km.
        let x = x_km.max(5.0);
        0.552 * mw - 0.00324 * x - x.log10() - 0.571
    }
}

/// Kanno et al.'s site correction (log10 PGV) for a site of `vs30` m/s.
pub fn site_log_pgv(vs30: f64) -> f64 {
    -0.7057 * vs30.log10() + 1.765
}

/// JMA intensity of a PGV (cm/s) by Midorikawa et al. (1999).
pub fn intensity(log_pgv: f64) -> f64 {
    let strong = 2.165 + 2.262 * log_pgv;
    if strong >= 4.0 {
        strong
    } else {
        2.68 + 1.72 * log_pgv
    }
}

/// Subsurface rupture length and downdip width (km) of an event of `mw`.
pub fn fault_size_km(mw: f64) -> (f64, f64) {
    (10f64.powf(-2.44 + 0.59 * mw), 10f64.powf(-1.01 + 0.32 * mw))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shaking_decays_with_distance_and_grows_with_magnitude() {
        for depth in [10.0, 60.0] {
            assert!(log_pgv(6.0, depth, 20.0) > log_pgv(6.0, depth, 80.0));
            assert!(log_pgv(7.0, depth, 50.0) > log_pgv(6.0, depth, 50.0));
        }
        // Kanno et al.'s eq. (5) at M7, 50 km: about 10 cm/s, intensity about 4.4.
        let pgv = 10f64.powf(log_pgv(7.0, 10.0, 50.0));
        assert!((5.0..20.0).contains(&pgv), "{pgv}");
        assert!((intensity(pgv.log10()) - 4.4).abs() < 0.5);
    }

    #[test]
    fn the_two_intensity_relations_meet_near_4() {
        let at_4 = (4.0 - 2.165) / 2.262;
        assert!((intensity(at_4) - 4.0).abs() < 1e-9);
        assert!((intensity(at_4 - 1e-9) - 4.07).abs() < 0.01);
    }

    #[test]
    fn a_magnitude_7_fault_is_tens_of_km_long() {
        let (length, width) = fault_size_km(7.0);
        assert!((40.0..60.0).contains(&length), "{length}");
        assert!((12.0..22.0).contains(&width), "{width}");
    }
}
