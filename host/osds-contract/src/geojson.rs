//! GeoJSON (RFC 7946) forms of the event lists and details (`format=geojson`, or `Accept:
//! application/geo+json`): one `Feature` per event at its latest position, whose `properties` are the JSON
//! answer's object as it is, plus `magnitude` and `depthKm` of the latest report repeated at the top for map
//! styling (`null` when unknown, never 0). An event without a position has a `null` geometry, as RFC 7946 allows.
//! A page is a `FeatureCollection` whose paging fields sit beside `features`.

use crate::eew::{EewEvent, EewPage};
use crate::hyp::{HypEvent, HypPage, HypPageItem, HypReport};
use serde::Serialize;
use serde_json::Value;

/// The media type of a GeoJSON answer.
pub const MEDIA_TYPE: &str = "application/geo+json";

/// Where an answer puts its event: the latest report's position, depth and magnitude, each `None` when unknown.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Whereabouts {
    pub latitude: Option<f64>,
    pub longitude: Option<f64>,
    pub depth_km: Option<f64>,
    pub magnitude: Option<f64>,
}

/// An answer that describes one event, placed on a map by its latest report.
pub trait Located: Serialize {
    fn event_id(&self) -> &str;
    fn whereabouts(&self) -> Whereabouts;
}

/// A GeoJSON `Point` (longitude first, as RFC 7946 orders them).
#[derive(Debug, Serialize)]
pub struct Point {
    #[serde(rename = "type")]
    kind: &'static str,
    coordinates: [f64; 2],
}

/// A `Feature` of one event.
#[derive(Serialize)]
pub struct Feature<'a, B: Located> {
    #[serde(rename = "type")]
    kind: &'static str,
    id: &'a str,
    geometry: Option<Point>,
    properties: Properties<'a, B>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Properties<'a, B> {
    #[serde(flatten)]
    body: &'a B,
    magnitude: Option<f64>,
    depth_km: Option<f64>,
}

impl<'a, B: Located> Feature<'a, B> {
    pub fn of(body: &'a B) -> Feature<'a, B> {
        let at = body.whereabouts();
        let geometry = match (at.longitude, at.latitude) {
            (Some(longitude), Some(latitude)) => Some(Point {
                kind: "Point",
                coordinates: [longitude, latitude],
            }),
            _ => None,
        };
        Feature {
            kind: "Feature",
            id: body.event_id(),
            geometry,
            properties: Properties {
                body,
                magnitude: at.magnitude,
                depth_km: at.depth_km,
            },
        }
    }
}

/// A `FeatureCollection` of a page, with the page's paging fields.
#[derive(Serialize)]
pub struct FeatureCollection<'a, B: Located> {
    #[serde(rename = "type")]
    kind: &'static str,
    features: Vec<Feature<'a, B>>,
    total: i64,
    page: i64,
    limit: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pages: Option<i64>,
}

/// An answer with a GeoJSON form.
pub trait AsGeoJson {
    fn geojson(&self) -> impl Serialize + '_;
}

impl<'a> AsGeoJson for EewPage<'a> {
    fn geojson(&self) -> impl Serialize + '_ {
        FeatureCollection::<EewEvent<'a>> {
            kind: "FeatureCollection",
            features: self.items.iter().map(Feature::of).collect(),
            total: self.total,
            page: self.page,
            limit: self.limit,
            pages: Some(self.pages),
        }
    }
}

impl<'a> AsGeoJson for HypPage<'a> {
    fn geojson(&self) -> impl Serialize + '_ {
        FeatureCollection::<HypPageItem<'a>> {
            kind: "FeatureCollection",
            features: self.items.iter().map(Feature::of).collect(),
            total: self.total,
            page: self.page,
            limit: self.limit,
            pages: None,
        }
    }
}

impl AsGeoJson for EewEvent<'_> {
    fn geojson(&self) -> impl Serialize + '_ {
        Feature::of(self)
    }
}

impl AsGeoJson for HypEvent<'_> {
    fn geojson(&self) -> impl Serialize + '_ {
        Feature::of(self)
    }
}

/// A finite number, or `None` (`null`, absent or not a number).
fn number(value: Option<&Value>) -> Option<f64> {
    value.and_then(Value::as_f64).filter(|n| n.is_finite())
}

impl Located for EewEvent<'_> {
    fn event_id(&self) -> &str {
        self.id
    }

    fn whereabouts(&self) -> Whereabouts {
        let latest: Value = serde_json::from_str(self.latest.get()).unwrap_or_default();
        Whereabouts {
            latitude: number(latest.get("latitude")),
            longitude: number(latest.get("longitude")),
            depth_km: number(latest.get("depthKm")),
            magnitude: number(latest.get("magnitude")),
        }
    }
}

/// A self-sensing report's hypocentre and magnitude.
fn report_whereabouts(report: Option<&HypReport>) -> Whereabouts {
    let Some(event) = report.and_then(|r| r.payload.get("event")) else {
        return Whereabouts::default();
    };
    let estimate = event.get("hypEstimate");
    Whereabouts {
        latitude: number(estimate.and_then(|e| e.get("latitude"))),
        longitude: number(estimate.and_then(|e| e.get("longitude"))),
        depth_km: number(estimate.and_then(|e| e.get("depthKm"))),
        magnitude: number(event.get("magnitude")),
    }
}

impl Located for HypPageItem<'_> {
    fn event_id(&self) -> &str {
        self.head.id
    }

    fn whereabouts(&self) -> Whereabouts {
        report_whereabouts(self.latest.as_ref())
    }
}

impl Located for HypEvent<'_> {
    fn event_id(&self) -> &str {
        self.head.id
    }

    fn whereabouts(&self) -> Whereabouts {
        report_whereabouts(self.reports.last())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hyp::HypEventHead;

    fn item(latest: Option<Value>) -> HypPageItem<'static> {
        HypPageItem {
            head: HypEventHead {
                id: "hyp:1",
                first_at: 1,
                updated_at: 2,
                status: "finalized",
                region: "",
            },
            latest: latest.map(|payload| HypReport {
                payload: payload.as_object().unwrap().clone(),
                sha256: "0".repeat(64),
            }),
        }
    }

    #[test]
    fn a_feature_is_at_the_latest_position_longitude_first_with_the_answer_as_properties() {
        let item = item(Some(serde_json::json!({
            "event": {"hypEstimate": {"latitude": 35.5, "longitude": 139.25, "depthKm": 0.0}, "magnitude": 5.1}
        })));
        let feature = serde_json::to_value(Feature::of(&item)).unwrap();
        assert_eq!(feature["type"], "Feature");
        assert_eq!(feature["id"], "hyp:1");
        assert_eq!(
            feature["geometry"],
            serde_json::json!({"type": "Point", "coordinates": [139.25, 35.5]})
        );
        assert_eq!(feature["properties"]["status"], "finalized");
        assert_eq!(feature["properties"]["latest"]["event"]["magnitude"], 5.1);
        assert_eq!(feature["properties"]["magnitude"], 5.1);
        // A depth of 0 is a depth; only an unknown one is null.
        assert_eq!(feature["properties"]["depthKm"], 0.0);
    }

    #[test]
    fn unknown_position_depth_and_magnitude_are_null_never_zero() {
        let none = item(None);
        let feature = serde_json::to_value(Feature::of(&none)).unwrap();
        assert!(feature["geometry"].is_null());
        assert!(feature["properties"]["magnitude"].is_null());
        assert!(feature["properties"]["depthKm"].is_null());
        let unmeasured = item(Some(serde_json::json!({
            "event": {"hypEstimate": {"latitude": 35.5, "longitude": 139.25}, "magnitude": null}
        })));
        let feature = serde_json::to_value(Feature::of(&unmeasured)).unwrap();
        assert!(feature["geometry"].is_object());
        assert!(feature["properties"]["magnitude"].is_null());
        assert!(feature["properties"]["depthKm"].is_null());
    }
}
