//! Decoding of Wolfx EEW relay frames into the public API's normalised report.
//!
//! This is the logic behind the four decoder components (one per channel). It is plain Rust so it can be
//! unit-tested natively; the components are thin wrappers that map these types onto the WIT contract in
//! `wit/eew/decoder.wit` (see [`export_decoder!`]).
//!
//! Rules (from `upstream/wolfx.md`): Beijing wall-clock times become RFC 3339 UTC; `eventId` is `EventID`
//! without a trailing `_<digits>`; both magnitude spellings are read on every channel; numbers sent as strings
//! are accepted; a field that is absent or null stays `None` — never 0. On `sc`, a depth of exactly 0 is how the
//! channel says "not determined", so it decodes to `None` (the spec: an unknown depth is never 0 km).

mod channel;
mod fields;
mod time;

pub use channel::{CEA, CHANNELS, CQ, Channel, FJ, SC};
pub use time::beijing_to_utc_rfc3339;

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
    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        DecodeError {
            kind,
            message: message.into(),
        }
    }
}

/// Decodes one frame for `channel`. A frame without `type` is decoded as the channel's own.
pub fn decode(channel: &Channel, payload: &[u8]) -> Result<Decoded, DecodeError> {
    let text = std::str::from_utf8(payload).map_err(|e| {
        DecodeError::new(
            ErrorKind::Malformed,
            format!(
                "payload is not UTF-8: invalid byte at offset {}",
                e.valid_up_to()
            ),
        )
    })?;
    let value: Value = serde_json::from_str(text)
        .map_err(|e| DecodeError::new(ErrorKind::Malformed, format!("payload is not JSON: {e}")))?;
    let object = match value {
        Value::Object(object) => object,
        Value::Array(items) => {
            return Err(DecodeError::new(
                ErrorKind::Unsupported,
                format!(
                    "a JSON array of {} frames is not one report; the host splits arrays before decoding",
                    items.len()
                ),
            ));
        }
        other => {
            return Err(DecodeError::new(
                ErrorKind::Malformed,
                format!(
                    "payload is a JSON {}, not an object",
                    fields::kind_of(&other)
                ),
            ));
        }
    };
    match object.get("type") {
        None => decode_report(channel, &object).map(Decoded::Report),
        Some(Value::String(tag)) => match tag.as_str() {
            "heartbeat" => Ok(Decoded::Control(Control::Heartbeat(fields::timestamp(
                &object,
            )))),
            "pong" => Ok(Decoded::Control(Control::Pong(fields::timestamp(&object)))),
            tag if channel.type_tag == tag => decode_report(channel, &object).map(Decoded::Report),
            tag => Err(DecodeError::new(
                ErrorKind::Unsupported,
                format!(
                    "type `{tag}` is not decoded by the {} decoder (it decodes `{}`)",
                    channel.source, channel.type_tag
                ),
            )),
        },
        Some(other) => Err(DecodeError::new(
            ErrorKind::Malformed,
            format!("`type` is a {}, not a string", fields::kind_of(other)),
        )),
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

/// Exports the `osds:eew/decoder` world for one [`Channel`] from a guest crate (which depends on
/// `wit-bindgen` and sits at `components/guests/<name>/`).
#[macro_export]
macro_rules! export_decoder {
    ($channel:expr, $name:expr) => {
        wit_bindgen::generate!({ world: "decoder", path: "../../../wit/eew" });

        use osds::eew::types as wit;

        struct Component;

        impl Guest for Component {
            fn info() -> wit::DecoderInfo {
                let channel: &$crate::Channel = &$channel;
                wit::DecoderInfo {
                    name: $name.to_string(),
                    version: env!("CARGO_PKG_VERSION").to_string(),
                    source: channel.source.to_string(),
                    claims: vec![channel.type_tag.to_string()],
                    upstream_path: channel.upstream_path.to_string(),
                    query_command: channel.query_command.to_string(),
                }
            }

            fn decode(payload: Vec<u8>) -> Result<wit::Decoded, wit::DecodeError> {
                match $crate::decode(&$channel, &payload) {
                    Ok($crate::Decoded::Report(r)) => Ok(wit::Decoded::Report(wit::Report {
                        event_id: r.event_id,
                        upstream_event_id: r.upstream_event_id,
                        revision: r.revision,
                        issued_at: r.issued_at,
                        origin_at: r.origin_at,
                        epicenter: r.epicenter,
                        latitude: r.latitude,
                        longitude: r.longitude,
                        depth_km: r.depth_km,
                        magnitude: r.magnitude,
                        max_intensity: r.max_intensity.map(|i| match i {
                            $crate::Intensity::Number(n) => wit::Intensity::Number(n),
                            $crate::Intensity::Text(t) => wit::Intensity::Text(t),
                        }),
                        is_final: r.is_final,
                        is_cancelled: r.is_cancelled,
                        is_test: r.is_test,
                    })),
                    Ok($crate::Decoded::Control($crate::Control::Heartbeat(t))) => {
                        Ok(wit::Decoded::Control(wit::Control::Heartbeat(t)))
                    }
                    Ok($crate::Decoded::Control($crate::Control::Pong(t))) => Ok(wit::Decoded::Control(wit::Control::Pong(t))),
                    Err(e) => Err(wit::DecodeError {
                        kind: match e.kind {
                            $crate::ErrorKind::Malformed => wit::ErrorKind::Malformed,
                            $crate::ErrorKind::Unsupported => wit::ErrorKind::Unsupported,
                            $crate::ErrorKind::MissingField => wit::ErrorKind::MissingField,
                        },
                        message: e.message,
                    }),
                }
            }
        }

        export!(Component);
    };
}

#[cfg(test)]
mod tests;
