//! The filters both event lists share: an origin-time window, a box, a circle around a point, a depth and a
//! magnitude range, and the order of the list. Each is a condition on the event row's own columns, which the
//! writers keep at the latest report (`crate::positions`), so the EEW and self-sensing lists filter alike.

use crate::positions::{EARTH_RADIUS_KM, unit_vector};
use crate::statements::Value as Bind;

/// Latitude and longitude bounds (degrees). A `min_longitude` above `max_longitude` crosses the antimeridian.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GeoBox {
    pub min_latitude: f64,
    pub max_latitude: f64,
    pub min_longitude: f64,
    pub max_longitude: f64,
}

impl GeoBox {
    /// The box of whichever sides are given (a missing one is the globe's edge); none without any side.
    pub fn of_sides(
        min_latitude: Option<f64>,
        max_latitude: Option<f64>,
        min_longitude: Option<f64>,
        max_longitude: Option<f64>,
    ) -> Option<GeoBox> {
        [min_latitude, max_latitude, min_longitude, max_longitude]
            .iter()
            .any(Option::is_some)
            .then(|| GeoBox {
                min_latitude: min_latitude.unwrap_or(-90.0),
                max_latitude: max_latitude.unwrap_or(90.0),
                min_longitude: min_longitude.unwrap_or(-180.0),
                max_longitude: max_longitude.unwrap_or(180.0),
            })
    }
}

/// Events between `min_km` and `max_km` (great-circle, on a sphere of [`EARTH_RADIUS_KM`]) from a point.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Circle {
    pub latitude: f64,
    pub longitude: f64,
    pub min_km: f64,
    pub max_km: f64,
}

/// The shared filters; `None` matches everything, and an event whose value a bound needs is unknown does not
/// match it (an unknown depth is not between 0 and 10 km).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct PlaceFilter {
    /// Origin time at or after this (Unix ms).
    pub start_ms: Option<i64>,
    /// Origin time before this (Unix ms).
    pub end_ms: Option<i64>,
    pub area: Option<GeoBox>,
    pub circle: Option<Circle>,
    pub min_depth_km: Option<f64>,
    pub max_depth_km: Option<f64>,
    pub min_magnitude: Option<f64>,
    pub max_magnitude: Option<f64>,
    /// Changed (a new version or report) after this (Unix ms).
    pub updated_after_ms: Option<i64>,
}

/// The order of a list.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// Newest first (the list's own time: origin for EEW, first detection for self-sensing).
    #[default]
    Newest,
    Oldest,
    /// Largest magnitude first, unknown last.
    Largest,
    /// Smallest magnitude first, unknown last.
    Smallest,
}

/// Slack on the distance test: the cosine of a circle through an event's own point must still include it.
const COSINE_SLACK: f64 = 1e-12;

impl PlaceFilter {
    /// Appends this filter's conditions on the columns of `table` (`e.` or empty; `updated` names its column of
    /// the last change) and their values.
    pub(crate) fn conditions(
        &self,
        table: &str,
        updated: &str,
        clauses: &mut Vec<String>,
        binds: &mut Vec<Bind>,
    ) {
        let mut add = |clause: String, values: &[Bind]| {
            clauses.push(clause);
            binds.extend_from_slice(values);
        };
        if let Some(start) = self.start_ms {
            add(format!("{table}origin_ms >= ?"), &[start.into()]);
        }
        if let Some(end) = self.end_ms {
            add(format!("{table}origin_ms < ?"), &[end.into()]);
        }
        if let Some(after) = self.updated_after_ms {
            add(format!("{table}{updated} > ?"), &[after.into()]);
        }
        if let Some(area) = self.area {
            add(
                format!("{table}latitude BETWEEN ? AND ?"),
                &[
                    Some(area.min_latitude).into(),
                    Some(area.max_latitude).into(),
                ],
            );
            let (west, east) = (Some(area.min_longitude), Some(area.max_longitude));
            if area.min_longitude <= area.max_longitude {
                add(
                    format!("{table}longitude BETWEEN ? AND ?"),
                    &[west.into(), east.into()],
                );
            } else {
                add(
                    format!("({table}longitude >= ? OR {table}longitude <= ?)"),
                    &[west.into(), east.into()],
                );
            }
        }
        if let Some(circle) = self.circle {
            let [x, y, z] = unit_vector(circle.latitude, circle.longitude);
            let dot = format!("({table}ux * ? + {table}uy * ? + {table}uz * ?)");
            let centre = [Some(x).into(), Some(y).into(), Some(z).into()];
            // A latitude band first: an index on latitude can narrow what the distance test reads.
            let band = (circle.max_km / EARTH_RADIUS_KM).to_degrees() + 1e-9;
            add(
                format!("{table}latitude BETWEEN ? AND ?"),
                &[
                    Some(circle.latitude - band).into(),
                    Some(circle.latitude + band).into(),
                ],
            );
            let within = (circle.max_km / EARTH_RADIUS_KM)
                .min(std::f64::consts::PI)
                .cos();
            let mut values = centre.to_vec();
            values.push(Some(within - COSINE_SLACK).into());
            add(format!("{dot} >= ?"), &values);
            if circle.min_km > 0.0 {
                let beyond = (circle.min_km / EARTH_RADIUS_KM)
                    .min(std::f64::consts::PI)
                    .cos();
                let mut values = centre.to_vec();
                values.push(Some(beyond + COSINE_SLACK).into());
                add(format!("{dot} <= ?"), &values);
            }
        }
        for (column, op, bound) in [
            ("depth_km", ">=", self.min_depth_km),
            ("depth_km", "<=", self.max_depth_km),
            ("magnitude", ">=", self.min_magnitude),
            ("magnitude", "<=", self.max_magnitude),
        ] {
            if let Some(bound) = bound {
                add(format!("{table}{column} {op} ?"), &[Some(bound).into()]);
            }
        }
    }

    /// What identifies the filter (for kept totals and lists): its every bound, exactly.
    pub(crate) fn key(&self) -> String {
        format!("{self:?}")
    }

    /// Whether any bound is set.
    pub fn is_empty(&self) -> bool {
        *self == PlaceFilter::default()
    }
}

impl Order {
    /// The order a query names (`time`, `time-asc`, `magnitude`, `magnitude-asc`), as both the service's
    /// `order` and FDSN's `orderby` spell them.
    pub fn named(name: &str) -> Option<Order> {
        match name {
            "time" => Some(Order::Newest),
            "time-asc" => Some(Order::Oldest),
            "magnitude" => Some(Order::Largest),
            "magnitude-asc" => Some(Order::Smallest),
            _ => None,
        }
    }

    /// How two magnitudes compare in a magnitude order, unknown last either way (`Equal` in a time order).
    pub fn by_magnitude(self, a: Option<f64>, b: Option<f64>) -> std::cmp::Ordering {
        match (self, a, b) {
            (Order::Newest | Order::Oldest, ..) => std::cmp::Ordering::Equal,
            (Order::Largest, Some(a), Some(b)) => b.total_cmp(&a),
            (Order::Smallest, Some(a), Some(b)) => a.total_cmp(&b),
            (_, a, b) => a.is_none().cmp(&b.is_none()),
        }
    }

    /// The `ORDER BY` terms for a list whose time columns are `time` (then `tiebreak`, both with their table).
    pub(crate) fn sql(self, table: &str, time: &str, tiebreak: &str) -> String {
        match self {
            Order::Newest => format!("{time} DESC, {tiebreak} DESC"),
            Order::Oldest => format!("{time} ASC, {tiebreak} ASC"),
            Order::Largest => {
                format!("{table}magnitude DESC NULLS LAST, {time} DESC, {tiebreak} DESC")
            }
            Order::Smallest => {
                format!("{table}magnitude ASC NULLS LAST, {time} DESC, {tiebreak} DESC")
            }
        }
    }
}
