//! The Japan Meteorological Agency's own determinations as the relay carries them on `/all_eew`: its early
//! warnings (`jma_eew`, one frame per serial) and its earthquake list (`jma_eqlist`, the answer to
//! `query_jmaeqlist`: `No1`, `No2`, … with numbers as strings). They are not one of the four archived channels;
//! the `jma-reference` component reads them so the service can score its self-sensing detections against them
//! (`upstream/wolfx.md`, "JMA's own frames"). Times are Japan wall-clock time (UTC+9).

use crate::fields::{self, Object};
use crate::{DecodeError, ErrorKind, japan_to_utc_rfc3339};
use serde_json::Value;

/// The agency these determinations are of.
pub const AGENCY: &str = "jma";
/// The `type` tags read here.
pub const WARNING_TAG: &str = "jma_eew";
pub const LIST_TAG: &str = "jma_eqlist";
/// The text command that asks the relay for the earthquake list (on `/all_eew`).
pub const LIST_QUERY: &str = "query_jmaeqlist";

/// What kind of determination.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// One serial of an early warning.
    Warning,
    /// An entry of the earthquake list: the agency's determination after the fact.
    Catalogue,
}

/// One determination of one earthquake; an absent value stays `None`, never 0.
#[derive(Debug, Clone, PartialEq)]
pub struct Determination {
    pub kind: Kind,
    pub event_id: String,
    pub serial: Option<i64>,
    /// RFC 3339 UTC.
    pub issued_at: Option<String>,
    pub origin_at: Option<String>,
    pub place: Option<String>,
    pub latitude: Option<f64>,
    pub longitude: Option<f64>,
    pub depth_km: Option<f64>,
    pub magnitude: Option<f64>,
    pub is_final: bool,
    pub is_cancelled: bool,
    pub is_test: bool,
    /// Issued without a real hypocentre (a level or PLUM estimate).
    pub is_assumed: bool,
}

/// Reads one frame: a warning gives one determination, a list one per entry.
pub fn decode(payload: &[u8]) -> Result<Vec<Determination>, DecodeError> {
    let object = fields::object(payload)?;
    match object.get("type").and_then(Value::as_str) {
        Some(WARNING_TAG) => warning(&object).map(|d| vec![d]),
        Some(LIST_TAG) => list(&object),
        Some(other) => Err(DecodeError::new(
            ErrorKind::Unsupported,
            format!("type `{other}` is not a JMA frame (`{WARNING_TAG}` or `{LIST_TAG}`)"),
        )),
        None => Err(DecodeError::new(
            ErrorKind::Malformed,
            "the frame has no `type` string",
        )),
    }
}

/// A Japan wall-clock time as RFC 3339 UTC (`YYYY/MM/DD HH:MM:SS`, dashes accepted).
fn japan_time(object: &Object, key: &str) -> Result<Option<String>, DecodeError> {
    match fields::text(object, key)? {
        None => Ok(None),
        Some(text) => japan_to_utc_rfc3339(&text).map(Some).ok_or_else(|| {
            DecodeError::new(
                ErrorKind::Malformed,
                format!("`{key}` is not a `YYYY/MM/DD HH:MM:SS` time: {text:?}"),
            )
        }),
    }
}

fn warning(object: &Object) -> Result<Determination, DecodeError> {
    Ok(Determination {
        kind: Kind::Warning,
        event_id: fields::required_id(object, "EventID")?,
        serial: Some(fields::required_integer(object, "Serial")?),
        issued_at: japan_time(object, "AnnouncedTime")?,
        origin_at: japan_time(object, "OriginTime")?,
        place: fields::text(object, "Hypocenter")?,
        latitude: fields::number(object, "Latitude")?,
        longitude: fields::number(object, "Longitude")?,
        depth_km: fields::number(object, "Depth")?,
        magnitude: match fields::number(object, "Magnitude")? {
            Some(m) => Some(m),
            None => fields::number(object, "Magunitude")?,
        },
        is_final: fields::flag(object, &["isFinal"])?,
        is_cancelled: fields::flag(object, &["isCancel"])?,
        is_test: fields::flag(object, &["isTraining"])?,
        is_assumed: fields::flag(object, &["isAssumption"])?,
    })
}

/// `10km` → 10; `ごく浅い` (very shallow) → 0 is what the agency means, but a depth it only describes is kept
/// unknown rather than guessed; `不明` (unknown) → `None`.
fn list_depth(entry: &Object) -> Option<f64> {
    let text = fields::text(entry, "depth").ok()??;
    text.trim().trim_end_matches("km").trim().parse().ok()
}

fn list(object: &Object) -> Result<Vec<Determination>, DecodeError> {
    let mut entries: Vec<(u32, &Object)> = object
        .iter()
        .filter_map(|(key, value)| {
            let n = key.strip_prefix("No")?.parse().ok()?;
            Some((n, value.as_object()?))
        })
        .collect();
    entries.sort_by_key(|(n, _)| *n);
    entries
        .into_iter()
        .map(|(n, entry)| {
            let origin_at = match japan_time(entry, "time_full")? {
                Some(t) => Some(t),
                None => fields::text(entry, "time")?
                    .and_then(|t| japan_to_utc_rfc3339(&format!("{}:00", t.trim()))),
            };
            Ok(Determination {
                kind: Kind::Catalogue,
                event_id: fields::required_id(entry, "EventID")
                    .map_err(|e| DecodeError::new(e.kind, format!("No{n}: {}", e.message)))?,
                serial: None,
                issued_at: None,
                origin_at,
                place: fields::text(entry, "location")?,
                latitude: fields::number(entry, "latitude")?,
                longitude: fields::number(entry, "longitude")?,
                depth_km: list_depth(entry),
                magnitude: fields::number(entry, "magnitude")?,
                is_final: true,
                is_cancelled: false,
                is_test: false,
                is_assumed: false,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const WARNING: &str = r#"{"type":"jma_eew","Title":"緊急地震速報（予報）","Issue":{"Source":"東京","Status":"通常"},"EventID":"20240824093249","Serial":5,"AnnouncedTime":"2024/08/24 09:33:35","OriginTime":"2024/08/24 09:32:40","Hypocenter":"四国沖","Latitude":32.9,"Longitude":134.3,"Magunitude":4.0,"Depth":10,"MaxIntensity":"2","isSea":true,"isTraining":false,"isAssumption":false,"isWarn":false,"isFinal":false,"isCancel":false}"#;

    #[test]
    fn a_warning_serial_decodes_with_utc_times() {
        let d = decode(WARNING.as_bytes()).unwrap();
        assert_eq!(d.len(), 1);
        let d = &d[0];
        assert_eq!(d.kind, Kind::Warning);
        assert_eq!(d.event_id, "20240824093249");
        assert_eq!(d.serial, Some(5));
        assert_eq!(d.issued_at.as_deref(), Some("2024-08-24T00:33:35Z"));
        assert_eq!(d.origin_at.as_deref(), Some("2024-08-24T00:32:40Z"));
        assert_eq!((d.latitude, d.longitude), (Some(32.9), Some(134.3)));
        assert_eq!((d.depth_km, d.magnitude), (Some(10.0), Some(4.0)));
        assert!(!d.is_final && !d.is_cancelled && !d.is_test && !d.is_assumed);
    }

    #[test]
    fn cancel_training_and_assumed_flags_are_kept() {
        let frame = WARNING
            .replace("\"isCancel\":false", "\"isCancel\":true")
            .replace("\"isTraining\":false", "\"isTraining\":true")
            .replace("\"isAssumption\":false", "\"isAssumption\":true");
        let d = &decode(frame.as_bytes()).unwrap()[0];
        assert!(d.is_cancelled && d.is_test && d.is_assumed);
    }

    #[test]
    fn the_earthquake_list_gives_one_determination_per_entry_in_order() {
        let frame = r#"{"type":"jma_eqlist","md5":"x",
            "No2":{"Title":"震源・震度情報","EventID":"20260902200000","time":"2026/09/02 20:00","location":"不明","magnitude":"3.0","shindo":"1","depth":"不明","latitude":"35.0","longitude":"135.0"},
            "No1":{"Title":"震源・震度情報","EventID":"20260902225039","time":"2026/09/02 22:50","time_full":"2026/09/02 22:50:39","location":"陸奥湾","magnitude":"3.0","shindo":"2","depth":"10km","latitude":"41.1","longitude":"140.8"}}"#;
        let d = decode(frame.as_bytes()).unwrap();
        assert_eq!(d.len(), 2);
        assert_eq!(d[0].event_id, "20260902225039");
        assert_eq!(d[0].kind, Kind::Catalogue);
        assert_eq!(d[0].origin_at.as_deref(), Some("2026-09-02T13:50:39Z"));
        assert_eq!(d[0].depth_km, Some(10.0));
        assert_eq!((d[0].latitude, d[0].magnitude), (Some(41.1), Some(3.0)));
        assert_eq!(d[1].origin_at.as_deref(), Some("2026-09-02T11:00:00Z"));
        assert_eq!(d[1].depth_km, None, "不明 is unknown, never 0");
    }

    #[test]
    fn other_frames_and_garbage_are_refused_with_a_reason() {
        let error = decode(br#"{"type":"sc_eew","EventID":"1"}"#).unwrap_err();
        assert_eq!(error.kind, ErrorKind::Unsupported);
        assert_eq!(decode(b"\xff").unwrap_err().kind, ErrorKind::Malformed);
        let error = decode(br#"{"type":"jma_eew","Serial":1}"#).unwrap_err();
        assert_eq!(error.kind, ErrorKind::MissingField);
        let error = decode(br#"{"type":"jma_eew","EventID":"1","Serial":1,"OriginTime":"soon"}"#)
            .unwrap_err();
        assert!(error.message.contains("OriginTime"), "{}", error.message);
    }
}
