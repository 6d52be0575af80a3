//! The query parameters of fdsnws-event 1.2, long and short names, read into the store's filters. Every
//! parameter is checked; an unknown or repeated one (or a long and a short name of one) is an error, as on the
//! service's own API.

use crate::error::{ApiError, ErrorCode};
use crate::params::Params;
use crate::place::{order_param, ordered};
use osds_store::{Circle, GeoBox, Order, PlaceFilter, positions::EARTH_RADIUS_KM};

/// The two catalogues: the relayed EEW reports, and the service's own detections.
pub const EEW_CATALOG: &str = "osds-eew";
pub const HYP_CATALOG: &str = "osds-hyp";
/// The contributor of the self-sensing events (the EEW channels contribute under their own names).
pub const HYP_CONTRIBUTOR: &str = "osds-hyp";

/// The most events one answer holds: a query that would give more without a `limit` is refused (413).
pub const MAX_EVENTS: i64 = 10_000;
/// How deep `offset` + `limit` may reach (both catalogues are merged in memory up to there).
pub const MAX_DEPTH: i64 = 20_000;
/// The most events an answer with every origin holds (each event's every version is read).
pub const MAX_EVENTS_ALL_ORIGINS: i64 = 1_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Xml,
    Text,
}

/// A query, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Query {
    pub place: PlaceFilter,
    pub order: Order,
    pub limit: Option<i64>,
    /// 1-based, as FDSN counts.
    pub offset: i64,
    pub event_id: Option<String>,
    pub catalog: Option<String>,
    pub contributor: Option<String>,
    pub all_origins: bool,
    pub all_magnitudes: bool,
    pub format: Format,
    /// The status of an answer with no event: 204 (the default) or 404.
    pub nodata: u16,
}

fn bad(message: impl Into<String>) -> ApiError {
    ApiError::bad_request(ErrorCode::InvalidParameter, message)
}

/// The value of a parameter given by its long or its short name (not both).
fn either(
    params: &mut Params,
    long: &str,
    short: Option<&str>,
) -> Result<Option<String>, ApiError> {
    let long_value = params.take(long);
    let short_value = short.and_then(|s| params.take(s));
    match (long_value, short_value) {
        (Some(_), Some(_)) => Err(bad(format!(
            "`{long}` is given twice (also as `{}`)",
            short.unwrap_or_default()
        ))),
        (value, None) | (None, value) => Ok(value),
    }
}

fn number(
    params: &mut Params,
    long: &str,
    short: Option<&str>,
    range: std::ops::RangeInclusive<f64>,
) -> Result<Option<f64>, ApiError> {
    let Some(text) = either(params, long, short)? else {
        return Ok(None);
    };
    match text.trim().parse::<f64>() {
        Ok(n) if range.contains(&n) => Ok(Some(n)),
        Ok(_) => Err(ApiError::bad_request(
            ErrorCode::OutOfRange,
            format!(
                "`{long}` must be in the range {} to {}",
                range.start(),
                range.end()
            ),
        )),
        Err(_) => Err(bad(format!("`{long}` must be a number, not `{text}`"))),
    }
}

/// An FDSN time: `YYYY-MM-DD`, or `YYYY-MM-DDThh:mm:ss` with up to six decimals, UTC (a trailing `Z` allowed).
pub fn fdsn_time(name: &str, text: &str) -> Result<i64, ApiError> {
    let text = text.trim().trim_end_matches('Z');
    let parsed = chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S%.f")
        .or_else(|_| {
            chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d")
                .map(|d| d.and_hms_opt(0, 0, 0).unwrap_or_default())
        })
        .map_err(|_| {
            bad(format!(
                "`{name}` must be a time YYYY-MM-DDThh:mm:ss[.ssssss] (UTC) or a date YYYY-MM-DD, not `{text}`"
            ))
        })?;
    Ok(parsed.and_utc().timestamp_millis())
}

fn time(params: &mut Params, long: &str, short: Option<&str>) -> Result<Option<i64>, ApiError> {
    either(params, long, short)?
        .map(|text| fdsn_time(long, &text))
        .transpose()
}

fn boolean(params: &mut Params, name: &str) -> Result<bool, ApiError> {
    match params.take(name).map(|v| v.to_ascii_lowercase()).as_deref() {
        None | Some("false") => Ok(false),
        Some("true") => Ok(true),
        Some(other) => Err(bad(format!(
            "`{name}` must be true or false, not `{other}`"
        ))),
    }
}

fn integer(
    params: &mut Params,
    name: &str,
    range: std::ops::RangeInclusive<i64>,
) -> Result<Option<i64>, ApiError> {
    params.int(name, range)
}

const KM_PER_DEGREE: f64 = EARTH_RADIUS_KM * std::f64::consts::PI / 180.0;

impl Query {
    pub fn parse(params: &mut Params) -> Result<Query, ApiError> {
        let start = time(params, "starttime", Some("start"))?;
        let end = time(params, "endtime", Some("end"))?;
        ordered(start, end, "`endtime` is before `starttime`")?;
        let updated_after = time(params, "updatedafter", None)?;

        let min_latitude = number(params, "minlatitude", Some("minlat"), -90.0..=90.0)?;
        let max_latitude = number(params, "maxlatitude", Some("maxlat"), -90.0..=90.0)?;
        let min_longitude = number(params, "minlongitude", Some("minlon"), -180.0..=180.0)?;
        let max_longitude = number(params, "maxlongitude", Some("maxlon"), -180.0..=180.0)?;
        ordered(
            min_latitude,
            max_latitude,
            "`minlatitude` is above `maxlatitude`",
        )?;
        let area = GeoBox::of_sides(min_latitude, max_latitude, min_longitude, max_longitude);

        let latitude = number(params, "latitude", Some("lat"), -90.0..=90.0)?;
        let longitude = number(params, "longitude", Some("lon"), -180.0..=180.0)?;
        let min_radius = number(params, "minradius", None, 0.0..=180.0)?;
        let max_radius = number(params, "maxradius", None, 0.0..=180.0)?;
        ordered(min_radius, max_radius, "`minradius` is above `maxradius`")?;
        // FDSN's centre defaults to 0, 0 and its radii to 0 and 180 degrees: a circle is asked for with any of them.
        let circle = [latitude, longitude, min_radius, max_radius]
            .iter()
            .any(Option::is_some)
            .then(|| Circle {
                latitude: latitude.unwrap_or(0.0),
                longitude: longitude.unwrap_or(0.0),
                min_km: min_radius.unwrap_or(0.0) * KM_PER_DEGREE,
                max_km: max_radius.unwrap_or(180.0) * KM_PER_DEGREE,
            });

        let min_depth = number(params, "mindepth", None, -10.0..=1000.0)?;
        let max_depth = number(params, "maxdepth", None, -10.0..=1000.0)?;
        ordered(min_depth, max_depth, "`mindepth` is above `maxdepth`")?;
        let min_magnitude = number(params, "minmagnitude", Some("minmag"), -10.0..=12.0)?;
        let max_magnitude = number(params, "maxmagnitude", Some("maxmag"), -10.0..=12.0)?;
        ordered(
            min_magnitude,
            max_magnitude,
            "`minmagnitude` is above `maxmagnitude`",
        )?;

        let order = order_param(params, "orderby")?;
        let limit = integer(params, "limit", 1..=MAX_EVENTS)?;
        let offset = integer(params, "offset", 1..=MAX_DEPTH)?.unwrap_or(1);
        if offset - 1 + limit.unwrap_or(0) > MAX_DEPTH {
            return Err(ApiError::bad_request(
                ErrorCode::OutOfRange,
                format!(
                    "`offset` + `limit` may reach {MAX_DEPTH} events at most; narrow the query by time"
                ),
            ));
        }
        let event_id = params.take("eventid").filter(|id| !id.is_empty());
        let catalog = params.take("catalog");
        if let Some(catalog) = &catalog
            && ![EEW_CATALOG, HYP_CATALOG].contains(&catalog.as_str())
        {
            return Err(bad(format!(
                "`catalog` may be {EEW_CATALOG} or {HYP_CATALOG}, not `{catalog}`"
            )));
        }
        let contributor = params.take("contributor");
        let all_origins = boolean(params, "includeallorigins")?;
        let all_magnitudes = boolean(params, "includeallmagnitudes")?;
        let format = match params.take("format").as_deref() {
            None | Some("xml") => Format::Xml,
            Some("text") => Format::Text,
            Some(other) => return Err(bad(format!("`format` may be xml or text, not `{other}`"))),
        };
        let nodata = match params.take("nodata").as_deref() {
            None | Some("204") => 204,
            Some("404") => 404,
            Some(other) => return Err(bad(format!("`nodata` may be 204 or 404, not `{other}`"))),
        };
        let place = PlaceFilter {
            start_ms: start,
            // FDSN's end time is inclusive; the filter's end is exclusive (at millisecond resolution).
            end_ms: end.map(|end| end + 1),
            area,
            circle,
            min_depth_km: min_depth,
            max_depth_km: max_depth,
            min_magnitude,
            max_magnitude,
            updated_after_ms: updated_after,
        };
        if event_id.is_some() && (!place.is_empty() || catalog.is_some() || contributor.is_some()) {
            return Err(bad(
                "`eventid` is combined with the include parameters and `format` only",
            ));
        }
        Ok(Query {
            place,
            order,
            limit,
            offset,
            event_id,
            catalog,
            contributor,
            all_origins,
            all_magnitudes,
            format,
            nodata,
        })
    }

    /// Whether the EEW catalogue (channel `source`, when a contributor names one) is asked for.
    pub fn wants_eew(&self) -> bool {
        self.catalog.as_deref().is_none_or(|c| c == EEW_CATALOG)
            && self.contributor.as_deref() != Some(HYP_CONTRIBUTOR)
    }

    pub fn wants_hyp(&self) -> bool {
        self.catalog.as_deref().is_none_or(|c| c == HYP_CATALOG)
            && self
                .contributor
                .as_deref()
                .is_none_or(|c| c == HYP_CONTRIBUTOR)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(query: &str) -> Result<Query, ApiError> {
        let mut params = Params::parse(Some(query)).unwrap();
        let query = Query::parse(&mut params)?;
        params.finish()?;
        Ok(query)
    }

    #[test]
    fn long_and_short_names_times_and_degrees_reach_the_filters() {
        let q = parsed(
            "start=2026-01-01&endtime=2026-01-02T00:00:00.5&minlat=30&maxlongitude=146&lat=35&lon=139\
             &maxradius=2&mindepth=0&maxmag=7&orderby=magnitude-asc&limit=5&offset=3&format=text&nodata=404",
        )
        .unwrap();
        assert_eq!(q.place.start_ms, Some(1_767_225_600_000));
        assert_eq!(q.place.end_ms, Some(1_767_312_000_501), "inclusive end");
        assert_eq!(q.place.area.unwrap().min_latitude, 30.0);
        let circle = q.place.circle.unwrap();
        assert!((circle.max_km - 222.39).abs() < 0.01, "{circle:?}");
        assert_eq!(q.place.min_depth_km, Some(0.0));
        assert_eq!(q.order, Order::Smallest);
        assert_eq!(
            (q.limit, q.offset, q.format, q.nodata),
            (Some(5), 3, Format::Text, 404)
        );
        assert!(q.wants_eew() && q.wants_hyp());
        let hyp = parsed("contributor=osds-hyp").unwrap();
        assert!(hyp.wants_hyp() && !hyp.wants_eew());
        let sc = parsed("contributor=sc").unwrap();
        assert!(sc.wants_eew() && !sc.wants_hyp());
    }

    #[test]
    fn bad_parameters_are_refused_naming_them() {
        for (query, name) in [
            ("starttime=yesterday", "starttime"),
            ("start=2026-01-01&starttime=2026-01-01", "starttime"),
            ("minlatitude=91", "minlatitude"),
            ("orderby=depth", "orderby"),
            ("format=json", "format"),
            ("nodata=200", "nodata"),
            ("catalog=usgs", "catalog"),
            ("includeallorigins=yes", "includeallorigins"),
            ("eventid=x&minmag=3", "eventid"),
            ("limit=10001", "limit"),
            ("mindepth=10&maxdepth=5", "mindepth"),
        ] {
            let error = parsed(query).unwrap_err();
            assert!(error.message.contains(name), "{query}: {}", error.message);
        }
        let unknown = parsed("magnitudetype=mb").unwrap_err();
        assert!(unknown.message.contains("magnitudetype"));
    }
}
