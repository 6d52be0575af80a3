//! The filters `/events` and `/hyp/events` share (`osds_store::PlaceFilter`), read from the query: `start` and
//! `end` (RFC 3339 instants, on the origin time), a box (`minLatitude`, `maxLatitude`, `minLongitude`,
//! `maxLongitude`), a circle (`latitude`, `longitude`, `maxRadiusKm`, `minRadiusKm`), `minDepthKm`/`maxDepthKm`,
//! `minMagnitude`/`maxMagnitude`, and `order`. Each bound is checked; a contradiction (a minimum above its
//! maximum, an end before the start) is a 400 with code `invalid_range`.

use crate::error::{ApiError, ErrorCode};
use crate::params::Params;
use osds_store::{Circle, GeoBox, Order, PlaceFilter};

/// Half the Earth's circumference: no two points are farther apart.
const MAX_RADIUS_KM: f64 = 20_016.0;

pub fn place_params(params: &mut Params) -> Result<(PlaceFilter, Order), ApiError> {
    let start_ms = instant(params, "start")?;
    let end_ms = instant(params, "end")?;
    ordered(start_ms, end_ms, "`end` is before `start`")?;

    let min_latitude = params.number("minLatitude", -90.0..=90.0)?;
    let max_latitude = params.number("maxLatitude", -90.0..=90.0)?;
    let min_longitude = params.number("minLongitude", -180.0..=180.0)?;
    let max_longitude = params.number("maxLongitude", -180.0..=180.0)?;
    ordered(
        min_latitude,
        max_latitude,
        "`minLatitude` is above `maxLatitude`",
    )?;
    let area = GeoBox::of_sides(min_latitude, max_latitude, min_longitude, max_longitude);

    let latitude = params.number("latitude", -90.0..=90.0)?;
    let longitude = params.number("longitude", -180.0..=180.0)?;
    let max_km = params.number("maxRadiusKm", 0.0..=MAX_RADIUS_KM)?;
    let min_km = params.number("minRadiusKm", 0.0..=MAX_RADIUS_KM)?;
    ordered(min_km, max_km, "`minRadiusKm` is above `maxRadiusKm`")?;
    let circle = match (latitude, longitude, max_km, min_km) {
        (None, None, None, None) => None,
        (Some(latitude), Some(longitude), max_km, min_km) if max_km.or(min_km).is_some() => {
            Some(Circle {
                latitude,
                longitude,
                min_km: min_km.unwrap_or(0.0),
                max_km: max_km.unwrap_or(MAX_RADIUS_KM),
            })
        }
        _ => {
            return Err(ApiError::bad_request(
                ErrorCode::InvalidParameter,
                "a circle takes `latitude`, `longitude` and `maxRadiusKm` (or `minRadiusKm`) together",
            ));
        }
    };

    let min_depth_km = params.number("minDepthKm", -10.0..=1000.0)?;
    let max_depth_km = params.number("maxDepthKm", -10.0..=1000.0)?;
    ordered(
        min_depth_km,
        max_depth_km,
        "`minDepthKm` is above `maxDepthKm`",
    )?;
    let min_magnitude = params.number("minMagnitude", -2.0..=10.0)?;
    let max_magnitude = params.number("maxMagnitude", -2.0..=10.0)?;
    ordered(
        min_magnitude,
        max_magnitude,
        "`minMagnitude` is above `maxMagnitude`",
    )?;

    let order = order_param(params, "order")?;
    Ok((
        PlaceFilter {
            start_ms,
            end_ms,
            area,
            circle,
            min_depth_km,
            max_depth_km,
            min_magnitude,
            max_magnitude,
            updated_after_ms: None,
        },
        order,
    ))
}

/// An RFC 3339 instant (`2026-11-26T10:00:00Z`, any offset) as Unix ms.
fn instant(params: &mut Params, name: &str) -> Result<Option<i64>, ApiError> {
    let Some(text) = params.take(name) else {
        return Ok(None);
    };
    chrono::DateTime::parse_from_rfc3339(&text)
        .map(|t| Some(t.timestamp_millis()))
        .map_err(|_| {
            ApiError::bad_request(
                ErrorCode::InvalidParameter,
                format!("`{name}` must be an RFC 3339 instant such as 2026-11-26T10:00:00Z"),
            )
        })
}

/// The order the parameter `name` names ([`Order::named`]); newest first without it.
pub(crate) fn order_param(params: &mut Params, name: &str) -> Result<Order, ApiError> {
    match params.take(name) {
        None => Ok(Order::Newest),
        Some(text) => Order::named(&text).ok_or_else(|| {
            ApiError::bad_request(
                ErrorCode::InvalidParameter,
                format!(
                    "`{name}` may be `time`, `time-asc`, `magnitude` or `magnitude-asc`, not `{text}`"
                ),
            )
        }),
    }
}

/// A 400 `invalid_range` when both bounds are given and the first is above the second.
pub(crate) fn ordered<T: PartialOrd>(
    low: Option<T>,
    high: Option<T>,
    message: &str,
) -> Result<(), ApiError> {
    match (low, high) {
        (Some(low), Some(high)) if low > high => {
            Err(ApiError::bad_request(ErrorCode::InvalidRange, message))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(query: &str) -> Result<(PlaceFilter, Order), ApiError> {
        let mut params = Params::parse(Some(query)).unwrap();
        let parsed = place_params(&mut params);
        if parsed.is_ok() {
            params.finish().unwrap();
        }
        parsed
    }

    #[test]
    fn every_bound_reaches_the_filter() {
        let (filter, order) = parsed(
            "start=2026-01-01T00:00:00Z&end=2026-01-01T09:00:00%2B09:00&minLatitude=30&maxLongitude=146\
             &latitude=35&longitude=139&maxRadiusKm=300&minDepthKm=0&maxDepthKm=60&maxMagnitude=7&order=magnitude",
        )
        .unwrap();
        assert_eq!(filter.start_ms, Some(1_767_225_600_000));
        assert_eq!(
            filter.end_ms,
            Some(1_767_225_600_000),
            "the offset is honoured"
        );
        let area = filter.area.unwrap();
        assert_eq!(
            (
                area.min_latitude,
                area.max_latitude,
                area.min_longitude,
                area.max_longitude
            ),
            (30.0, 90.0, -180.0, 146.0)
        );
        assert_eq!(
            filter.circle,
            Some(Circle {
                latitude: 35.0,
                longitude: 139.0,
                min_km: 0.0,
                max_km: 300.0
            })
        );
        assert_eq!(
            (filter.min_depth_km, filter.max_depth_km),
            (Some(0.0), Some(60.0))
        );
        assert_eq!(filter.max_magnitude, Some(7.0));
        assert_eq!(order, Order::Largest);
        assert_eq!(parsed("").unwrap(), (PlaceFilter::default(), Order::Newest));
    }

    #[test]
    fn contradictions_and_half_circles_are_refused() {
        for query in [
            "start=2026-01-02T00:00:00Z&end=2026-01-01T00:00:00Z",
            "minLatitude=10&maxLatitude=5",
            "minDepthKm=100&maxDepthKm=10",
            "minMagnitude=6&maxMagnitude=5",
            "latitude=35&longitude=139&minRadiusKm=300&maxRadiusKm=100",
        ] {
            assert_eq!(
                parsed(query).unwrap_err().code,
                ErrorCode::InvalidRange,
                "{query}"
            );
        }
        for query in [
            "start=yesterday",
            "start=2026-01-01",
            "latitude=35&maxRadiusKm=300",
            "maxRadiusKm=300",
            "latitude=35&longitude=139",
            "order=depth",
        ] {
            assert_eq!(
                parsed(query).unwrap_err().code,
                ErrorCode::InvalidParameter,
                "{query}"
            );
        }
        assert_eq!(
            parsed("maxRadiusKm=30000").unwrap_err().code,
            ErrorCode::OutOfRange
        );
    }
}
