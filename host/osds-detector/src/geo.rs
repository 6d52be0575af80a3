//! Distances and azimuths on a spherical Earth: enough for station–epicentre geometry within Japan.

const EARTH_RADIUS_KM: f64 = 6371.0;

/// Great-circle distance in km.
pub fn distance_km(lat1: f64, lon1: f64, lat2: f64, lon2: f64) -> f64 {
    let (p1, p2) = (lat1.to_radians(), lat2.to_radians());
    let dp = p2 - p1;
    let dl = (lon2 - lon1).to_radians();
    let a = (dp / 2.0).sin().powi(2) + p1.cos() * p2.cos() * (dl / 2.0).sin().powi(2);
    2.0 * EARTH_RADIUS_KM * a.sqrt().asin()
}

/// Azimuth from the first point to the second, degrees clockwise from north in [0, 360).
pub fn azimuth_degrees(lat1: f64, lon1: f64, lat2: f64, lon2: f64) -> f64 {
    let (p1, p2) = (lat1.to_radians(), lat2.to_radians());
    let dl = (lon2 - lon1).to_radians();
    let y = dl.sin() * p2.cos();
    let x = p1.cos() * p2.sin() - p1.sin() * p2.cos() * dl.cos();
    y.atan2(x).to_degrees().rem_euclid(360.0)
}

/// The point `distance_km` away from a start point along `azimuth_degrees`.
pub fn destination(lat: f64, lon: f64, azimuth_degrees: f64, distance_km: f64) -> (f64, f64) {
    let d = distance_km / EARTH_RADIUS_KM;
    let (p1, l1, b) = (
        lat.to_radians(),
        lon.to_radians(),
        azimuth_degrees.to_radians(),
    );
    let p2 = (p1.sin() * d.cos() + p1.cos() * d.sin() * b.cos()).asin();
    let l2 = l1 + (b.sin() * d.sin() * p1.cos()).atan2(d.cos() - p1.sin() * p2.sin());
    (p2.to_degrees(), l2.to_degrees())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_degree_of_latitude_is_about_111_km_and_points_north() {
        assert!((distance_km(37.0, 137.0, 38.0, 137.0) - 111.2).abs() < 0.5);
        assert!(azimuth_degrees(37.0, 137.0, 38.0, 137.0) < 1e-9);
        assert!((azimuth_degrees(37.0, 137.0, 37.0, 138.0) - 90.0).abs() < 1.0);
    }

    #[test]
    fn destination_inverts_distance_and_azimuth() {
        let (lat, lon) = destination(37.495, 137.27, 123.0, 80.0);
        assert!((distance_km(37.495, 137.27, lat, lon) - 80.0).abs() < 1e-6);
        assert!((azimuth_degrees(37.495, 137.27, lat, lon) - 123.0).abs() < 1e-6);
    }
}
