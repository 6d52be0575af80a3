//! What the host reads of a frame before handing it to a decoder: its top-level `type`, and whether it is a
//! JSON array of frames (tolerated on `/all_eew`), which is split into its elements.

use serde_json::Value;

/// Upstream `type` tags of transport frames (liveness only, never archived); every decoder recognises them.
pub const CONTROL_TAGS: [&str; 2] = ["heartbeat", "pong"];

/// Whether `tag` is a transport frame's `type`.
pub fn is_control_tag(tag: &str) -> bool {
    CONTROL_TAGS.contains(&tag)
}

/// One decodable unit of a frame.
#[derive(Debug, Clone, PartialEq)]
pub struct Unit {
    /// The unit's top-level `type`, when it has a string one.
    pub type_tag: Option<String>,
    /// The bytes to decode: the frame itself, or one array element re-serialised.
    pub bytes: Vec<u8>,
}

impl Unit {
    /// Whether the unit is a heartbeat or pong.
    pub fn is_control(&self) -> bool {
        self.type_tag.as_deref().is_some_and(is_control_tag)
    }
}

/// Whether a frame split into `units` is only a heartbeat or pong.
pub fn is_control_frame(units: &[Unit]) -> bool {
    matches!(units, [only] if only.is_control())
}

/// Splits a frame into units. Anything that is not a JSON array is one unit with the frame's exact bytes.
pub fn split(frame: &[u8]) -> Vec<Unit> {
    let whole = || {
        vec![Unit {
            type_tag: read_type(frame),
            bytes: frame.to_vec(),
        }]
    };
    // Only an array is parsed whole; of anything else only `type` is read, so a frame of many megabytes is
    // scanned, not copied into a tree.
    if frame.trim_ascii_start().first() != Some(&b'[') {
        return whole();
    }
    match serde_json::from_slice::<Value>(frame) {
        Ok(Value::Array(items)) if !items.is_empty() => items
            .into_iter()
            .map(|item| Unit {
                type_tag: type_tag(&item),
                bytes: serde_json::to_vec(&item).unwrap_or_default(),
            })
            .collect(),
        _ => whole(),
    }
}

/// The top-level `type` of a JSON object, when it is a string; every other field is skipped unread.
fn read_type(frame: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Tagged<'a> {
        #[serde(rename = "type", borrow, default)]
        type_tag: Option<std::borrow::Cow<'a, str>>,
    }
    serde_json::from_slice::<Tagged>(frame)
        .ok()?
        .type_tag
        .map(|tag| tag.into_owned())
}

fn type_tag(value: &Value) -> Option<String> {
    value
        .get("type")
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// Canonical JSON of a payload without its top-level `type`: object keys sorted, no insignificant white
/// space, numbers and strings as serde_json writes them. Two deliveries with equal canonical forms are the
/// same report version. `None` for bytes that are not JSON.
pub fn canonical_without_type(payload: &[u8]) -> Option<Vec<u8>> {
    let mut value: Value = serde_json::from_slice(payload).ok()?;
    if let Value::Object(object) = &mut value {
        object.shift_remove("type");
    }
    let mut out = Vec::with_capacity(payload.len());
    write_canonical(&value, &mut out);
    Some(out)
}

fn write_canonical(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Object(object) => {
            let mut entries: Vec<_> = object.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push(b'{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                out.extend(serde_json::to_vec(key).unwrap_or_default());
                out.push(b':');
                write_canonical(item, out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(item, out);
            }
            out.push(b']');
        }
        scalar => out.extend(serde_json::to_vec(scalar).unwrap_or_default()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_object_is_one_unit_with_its_exact_bytes() {
        let frame = br#"{ "type" : "sc_eew", "A":1 }"#;
        assert_eq!(
            split(frame),
            vec![Unit {
                type_tag: Some("sc_eew".into()),
                bytes: frame.to_vec()
            }]
        );
    }

    #[test]
    fn an_array_is_split_into_its_elements() {
        let split = split(br#"[{"type":"sc_eew","A":1},{"type":"fj_eew"}]"#);
        assert_eq!(split.len(), 2);
        assert_eq!(split[0].bytes, br#"{"type":"sc_eew","A":1}"#);
        assert_eq!(split[1].type_tag.as_deref(), Some("fj_eew"));
    }

    #[test]
    fn garbage_is_one_untyped_unit() {
        assert_eq!(
            split(b"\xff{"),
            vec![Unit {
                type_tag: None,
                bytes: b"\xff{".to_vec()
            }]
        );
    }

    #[test]
    fn canonical_form_ignores_type_key_order_and_spacing_only() {
        let a = canonical_without_type(br#"{"type":"sc_eew","B":1.5,"A":"x"}"#);
        let b = canonical_without_type(br#"{ "A" : "x", "B": 1.5, "type":"all"}"#);
        assert_eq!(a, b);
        assert_eq!(a.as_deref(), Some(br#"{"A":"x","B":1.5}"#.as_slice()));
        assert_ne!(a, canonical_without_type(br#"{"A":"x","B":1.6}"#));
        assert_eq!(canonical_without_type(b"nope"), None);
    }
}
