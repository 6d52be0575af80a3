//! Lenient readers for the upstream's loosely typed fields: accept what the relay is seen to send (numbers as
//! strings, null for absent), refuse what would need a guess. The built-in decoders read every field through
//! these, and so can a decoder written with the SDK for a frame of another shape: parse the payload with
//! [`object`], answer transport frames with [`control`], then read each field by its key.

use crate::{Control, DecodeError, ErrorKind, Intensity, beijing_to_utc_rfc3339};
use serde_json::{Map, Value};

/// A frame's top-level JSON object.
pub type Object = Map<String, Value>;

/// The payload as a JSON object: not UTF-8, not JSON or not an object is malformed; an array of frames is
/// unsupported (the host splits arrays before decoding).
pub fn object(payload: &[u8]) -> Result<Object, DecodeError> {
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
    match value {
        Value::Object(object) => Ok(object),
        Value::Array(items) => Err(DecodeError::new(
            ErrorKind::Unsupported,
            format!(
                "a JSON array of {} frames is not one report; the host splits arrays before decoding",
                items.len()
            ),
        )),
        other => Err(DecodeError::new(
            ErrorKind::Malformed,
            format!("payload is a JSON {}, not an object", kind_of(&other)),
        )),
    }
}

/// The transport frame `object` is (`type` `heartbeat` or `pong`, with its timestamp), if it is one; a `type`
/// that is not a string is malformed.
pub fn control(object: &Object) -> Result<Option<Control>, DecodeError> {
    match object.get("type") {
        None => Ok(None),
        Some(Value::String(tag)) => Ok(match tag.as_str() {
            "heartbeat" => Some(Control::Heartbeat(timestamp(object))),
            "pong" => Some(Control::Pong(timestamp(object))),
            _ => None,
        }),
        Some(other) => Err(DecodeError::new(
            ErrorKind::Malformed,
            format!("`type` is a {}, not a string", kind_of(other)),
        )),
    }
}

/// The JSON kind of `value`, for error messages.
pub fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn malformed(key: &str, what: &str, value: &Value) -> DecodeError {
    DecodeError::new(
        ErrorKind::Malformed,
        format!("`{key}` is not {what}: {value}"),
    )
}

/// The value of `key`, treating JSON null like absence.
fn present<'a>(object: &'a Object, key: &str) -> Option<&'a Value> {
    object.get(key).filter(|v| !v.is_null())
}

/// A number, or a string holding one; an empty string counts as absent.
pub fn number(object: &Object, key: &str) -> Result<Option<f64>, DecodeError> {
    let Some(value) = present(object, key) else {
        return Ok(None);
    };
    let parsed = match value {
        Value::Number(n) => n.as_f64(),
        Value::String(s) if s.trim().is_empty() => return Ok(None),
        Value::String(s) => s.trim().parse::<f64>().ok(),
        _ => None,
    };
    match parsed {
        Some(n) if n.is_finite() => Ok(Some(n)),
        _ => Err(malformed(key, "a number", value)),
    }
}

/// A whole number, or a string holding one. Absence is a missing-field error.
pub fn required_integer(object: &Object, key: &str) -> Result<i64, DecodeError> {
    let Some(value) = present(object, key) else {
        return Err(DecodeError::new(
            ErrorKind::MissingField,
            format!("`{key}` is missing"),
        ));
    };
    let parsed = match value {
        Value::Number(n) => n.as_i64().or_else(|| {
            n.as_f64()
                .filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15)
                .map(|f| f as i64)
        }),
        Value::String(s) => s.trim().parse::<i64>().ok(),
        _ => None,
    };
    parsed.ok_or_else(|| malformed(key, "a whole number", value))
}

/// An identifier: a non-empty string, or a number taken as its decimal text. Absence is a missing-field error.
pub fn required_id(object: &Object, key: &str) -> Result<String, DecodeError> {
    match present(object, key) {
        None => Err(DecodeError::new(
            ErrorKind::MissingField,
            format!("`{key}` is missing"),
        )),
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(s.trim().to_string()),
        Some(Value::Number(n)) => Ok(n.to_string()),
        Some(value) => Err(malformed(key, "an identifier", value)),
    }
}

/// A string (numbers are taken as their text); empty counts as absent.
pub fn text(object: &Object, key: &str) -> Result<Option<String>, DecodeError> {
    match present(object, key) {
        None => Ok(None),
        Some(Value::String(s)) if s.is_empty() => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(Value::Number(n)) => Ok(Some(n.to_string())),
        Some(value) => Err(malformed(key, "text", value)),
    }
}

/// A Beijing wall-clock time, returned as RFC 3339 UTC.
pub fn time(object: &Object, key: &str) -> Result<Option<String>, DecodeError> {
    match text(object, key)? {
        None => Ok(None),
        Some(s) => match beijing_to_utc_rfc3339(&s) {
            Some(utc) => Ok(Some(utc)),
            None => Err(malformed(
                key,
                "a `YYYY-MM-DD HH:mm:ss` time",
                &Value::String(s),
            )),
        },
    }
}

/// A number is kept as a number (also when sent as numeric text); other text is kept as a scale label.
pub fn intensity(object: &Object, key: &str) -> Result<Option<Intensity>, DecodeError> {
    match present(object, key) {
        None => Ok(None),
        Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
        Some(Value::String(s)) => Ok(Some(match s.trim().parse::<f64>() {
            Ok(n) if n.is_finite() => Intensity::Number(n),
            _ => Intensity::Text(s.trim().to_string()),
        })),
        Some(_) => number(object, key).map(|n| n.map(Intensity::Number)),
    }
}

/// True only when one of `keys` is sent as true (`true`, `"true"`, `1`); absent means false.
pub fn flag(object: &Object, keys: &[&str]) -> Result<bool, DecodeError> {
    for key in keys {
        let Some(value) = present(object, key) else {
            continue;
        };
        let set = match value {
            Value::Bool(b) => Some(*b),
            Value::String(s) => match s.trim().to_ascii_lowercase().as_str() {
                "true" | "1" => Some(true),
                "false" | "0" => Some(false),
                _ => None,
            },
            Value::Number(n) => match n.as_i64() {
                Some(1) => Some(true),
                Some(0) => Some(false),
                _ => None,
            },
            _ => None,
        };
        match set {
            Some(true) => return Ok(true),
            Some(false) => {}
            None => return Err(malformed(key, "a boolean", value)),
        }
    }
    Ok(false)
}

/// The `timestamp` of a heartbeat or pong, seen both as a number and as a string.
pub fn timestamp(object: &Object) -> Option<i64> {
    match present(object, "timestamp")? {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}
