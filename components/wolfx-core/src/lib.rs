//! Decoding of Wolfx EEW relay frames into the public API's normalised report.
//!
//! This is the logic behind the four decoder components (one per channel). It is plain Rust so it can be
//! unit-tested natively; the components are thin wrappers built with the decoder SDK (`components/decoder-sdk`),
//! which maps these types onto the WIT contract in `wit/eew/v1.0.0/decoder.wit`.
//!
//! Rules (from `upstream/wolfx.md`): Beijing wall-clock times become RFC 3339 UTC; `eventId` is `EventID`
//! without a trailing `_<digits>`; both magnitude spellings are read on every channel; numbers sent as strings
//! are accepted; a field that is absent or null stays `None` — never 0. On `sc`, a depth of exactly 0 is how the
//! channel says "not determined", so it decodes to `None` (the spec: an unknown depth is never 0 km).

mod channel;
pub mod fields;
pub mod jma;
mod time;

pub use channel::{CEA, CHANNELS, CQ, Channel, FJ, SC};
pub use time::{beijing_to_utc_rfc3339, japan_to_utc_rfc3339};

use serde::Serialize;
use serde_json::{Map, Value};

/// A maximum intensity as the upstream expressed it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Intensity {
    Number(f64),
    Text(String),
}

/// The payload-derived fields of the spec's EEW report.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub event_id: String,
    pub upstream_event_id: String,
    pub revision: i64,
    pub issued_at: Option<String>,
    pub origin_at: Option<String>,
    pub epicenter: Option<String>,
    pub latitude: Option<f64>,
    pub longitude: Option<f64>,
    pub depth_km: Option<f64>,
    pub magnitude: Option<f64>,
    pub max_intensity: Option<Intensity>,
    pub is_final: bool,
    pub is_cancelled: bool,
    pub is_test: bool,
}

/// Transport frames: they keep a connection alive and are never archived.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase", tag = "kind", content = "timestamp")]
pub enum Control {
    Heartbeat(Option<i64>),
    Pong(Option<i64>),
}

#[derive(Debug, Clone, PartialEq)]
pub enum Decoded {
    Report(Report),
    Control(Control),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ErrorKind {
    Malformed,
    Unsupported,
    MissingField,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DecodeError {
    pub kind: ErrorKind,
    pub message: String,
}

impl DecodeError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        DecodeError {
            kind,
            message: message.into(),
        }
    }
}

/// Decodes one frame for `channel`. A frame without `type` is decoded as the channel's own.
pub fn decode(channel: &Channel, payload: &[u8]) -> Result<Decoded, DecodeError> {
    let object = fields::object(payload)?;
    if let Some(control) = fields::control(&object)? {
        return Ok(Decoded::Control(control));
    }
    match object.get("type").and_then(Value::as_str) {
        Some(tag) if tag != channel.type_tag => Err(DecodeError::new(
            ErrorKind::Unsupported,
            format!(
                "type `{tag}` is not decoded by the {} decoder (it decodes `{}`)",
                channel.source, channel.type_tag
            ),
        )),
        _ => decode_report(channel, &object).map(Decoded::Report),
    }
}

fn decode_report(channel: &Channel, object: &Map<String, Value>) -> Result<Report, DecodeError> {
    let upstream_event_id = fields::required_id(object, "EventID")?;
    let revision = fields::required_integer(object, "ReportNum")?;
    let depth_km = match fields::number(object, "Depth")? {
        Some(depth) if channel.zero_depth_is_unknown && depth == 0.0 => None,
        depth => depth,
    };
    Ok(Report {
        event_id: strip_revision_suffix(&upstream_event_id).to_string(),
        upstream_event_id,
        revision,
        issued_at: fields::time(object, "ReportTime")?,
        origin_at: fields::time(object, "OriginTime")?,
        epicenter: fields::text(object, "HypoCenter")?,
        latitude: fields::number(object, "Latitude")?,
        longitude: fields::number(object, "Longitude")?,
        depth_km,
        magnitude: match fields::number(object, "Magnitude")? {
            Some(magnitude) => Some(magnitude),
            None => fields::number(object, "Magunitude")?,
        },
        max_intensity: fields::intensity(object, "MaxIntensity")?,
        is_final: fields::flag(object, &["isFinal"])?,
        is_cancelled: fields::flag(object, &["isCancel", "isCancelled"])?,
        is_test: fields::flag(object, &["isTraining", "isTest"])?,
    })
}

/// `202608281313.0001_2` → `202608281313.0001`; an id without a `_<digits>` tail is returned whole.
pub fn strip_revision_suffix(event_id: &str) -> &str {
    match event_id.rsplit_once('_') {
        Some((head, tail))
            if !head.is_empty() && !tail.is_empty() && tail.bytes().all(|b| b.is_ascii_digit()) =>
        {
            head
        }
        _ => event_id,
    }
}

#[cfg(test)]
mod tests;
