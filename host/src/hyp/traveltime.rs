//! The project's own 1-D travel-time model: straight rays at Vp 6.0 and Vs 3.5 km/s from the hypocentre,
//! adequate within about 150 km. (An operator-configured JMA2001 table is a later addition.)

pub const VP_KM_S: f64 = 6.0;
pub const VS_KM_S: f64 = 3.5;

/// Hypocentral distance in km from epicentral distance and depth.
pub fn hypocentral_km(epicentral_km: f64, depth_km: f64) -> f64 {
    (epicentral_km * epicentral_km + depth_km * depth_km).sqrt()
}

/// P travel time in seconds.
pub fn p_seconds(epicentral_km: f64, depth_km: f64) -> f64 {
    hypocentral_km(epicentral_km, depth_km) / VP_KM_S
}

/// S travel time in seconds.
pub fn s_seconds(epicentral_km: f64, depth_km: f64) -> f64 {
    hypocentral_km(epicentral_km, depth_km) / VS_KM_S
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s_arrives_after_p_and_both_grow_with_distance() {
        assert!((p_seconds(60.0, 0.0) - 10.0).abs() < 1e-12);
        assert!(s_seconds(60.0, 10.0) > p_seconds(60.0, 10.0));
        assert!(p_seconds(100.0, 10.0) > p_seconds(50.0, 10.0));
    }
}
