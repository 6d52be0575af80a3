//! A report version rendered once as `EewReport` JSON text, with a digest, for the caches and pages that serve
//! it many times; and a `/reports` page written from such items.

use crate::response::eew::EewReport;
use osds_store::ReportRow;
use sha2::{Digest, Sha256};
use std::sync::Arc;

/// One report version, rendered.
#[derive(Debug, Clone)]
pub struct ReportItem {
    pub id: i64,
    /// Its channel, for the `source` filter.
    pub source: &'static str,
    pub json: Arc<str>,
    /// The first 8 bytes of the SHA-256 of `json`, so a page's validator is computed from 8 bytes per item.
    pub digest: [u8; 8],
}

impl ReportItem {
    pub fn render(row: &ReportRow) -> ReportItem {
        // Serialising borrowed strings and raw JSON text cannot fail.
        let json = serde_json::to_string(&EewReport::from_row(row)).unwrap_or_default();
        let digest = Sha256::digest(json.as_bytes());
        ReportItem {
            id: row.id,
            source: crate::sources::intern(&row.source),
            digest: digest[..8].try_into().unwrap_or_default(),
            json: json.into(),
        }
    }
}

/// A `/reports` page: report versions with ids after a cursor, the cursor after the last and the horizon.
pub struct ReportPage {
    pub items: Vec<ReportItem>,
    pub next_cursor: i64,
    pub high_water: i64,
    pub archive_id: String,
}

impl ReportPage {
    /// The `ReportPage` body, written from the items' ready text, and a validator derived from the items'
    /// digests (rather than from hashing the whole body, up to ~600 kB, on every answer).
    pub fn to_json(&self) -> (String, [u8; 16]) {
        let text_bytes: usize = self.items.iter().map(|item| item.json.len() + 1).sum();
        let mut body = String::with_capacity(text_bytes + 64);
        body.push_str("{\"items\":[");
        let mut validator = Sha256::new();
        for (n, item) in self.items.iter().enumerate() {
            if n > 0 {
                body.push(',');
            }
            body.push_str(&item.json);
            validator.update(item.digest);
        }
        let tail = format!(
            "],\"nextCursor\":{},\"highWater\":{},\"archiveId\":\"{}\"}}",
            self.next_cursor, self.high_water, self.archive_id
        );
        body.push_str(&tail);
        validator.update(tail.as_bytes());
        let digest = validator.finalize();
        let mut short = [0; 16];
        short.copy_from_slice(&digest[..16]);
        (body, short)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Map, Value, json};

    /// The rendering by value: parse the stored fields, pick, re-serialise. The typed rendering must match
    /// it byte for byte.
    fn by_value(row: &ReportRow) -> String {
        let decoded: Map<String, Value> = serde_json::from_str(&row.decoded).unwrap_or_default();
        let field = |name: &str| decoded.get(name).cloned().unwrap_or(Value::Null);
        let flag = |name: &str| decoded.get(name).and_then(Value::as_bool).unwrap_or(false);
        json!({
            "id": row.id,
            "eventKey": row.event_key,
            "source": row.source,
            "eventId": field("eventId"),
            "upstreamEventId": field("upstreamEventId"),
            "revision": field("revision"),
            "issuedAt": field("issuedAt"),
            "originAt": field("originAt"),
            "receivedAt": row.received_at,
            "epicenter": field("epicenter"),
            "latitude": field("latitude"),
            "longitude": field("longitude"),
            "depthKm": field("depthKm"),
            "magnitude": field("magnitude"),
            "maxIntensity": field("maxIntensity"),
            "isFinal": flag("isFinal"),
            "isCancelled": flag("isCancelled"),
            "isTest": flag("isTest"),
            "deliveryId": row.delivery_id,
            "rawUrl": format!("/api/v1/deliveries/{}/raw", row.delivery_id),
            "decoder": { "name": row.decoder_name, "sha256": row.decoder_sha256 },
        })
        .to_string()
    }

    #[test]
    fn typed_rendering_equals_parse_and_reserialise() {
        let stored = [
            // As the writer stores a full report (serde's own output of `wolfx_core::Report`).
            r#"{"eventId":"cq:2024-1","upstreamEventId":"2024-1","revision":3,"issuedAt":"2024-01-01T00:00:05Z","originAt":"2024-01-01T00:00:00Z","epicenter":"四川宜宾市\"珙县\"","latitude":28.17,"longitude":104.81,"depthKm":null,"magnitude":4.5,"maxIntensity":{"number":5.5},"isFinal":true,"isCancelled":false,"isTest":false}"#,
            r#"{"eventId":null,"upstreamEventId":"x","revision":1,"issuedAt":"t","originAt":null,"epicenter":"\u0001tab\t","latitude":-0.0,"longitude":1e-7,"depthKm":0.0,"magnitude":7,"maxIntensity":{"text":"VI+"},"isFinal":false,"isCancelled":true,"isTest":true}"#,
            // Fields missing, and not JSON at all: every decoded field is null, every flag false.
            r#"{"revision":2}"#,
            "not json",
        ];
        for (n, decoded) in stored.iter().enumerate() {
            let row = ReportRow {
                id: n as i64 + 1,
                event_key: "cq:2024-1".into(),
                source: "cq".into(),
                received_at: "2024-01-01T00:00:06.123Z".into(),
                delivery_id: n as i64 + 100,
                decoded: decoded.to_string(),
                decoder_name: "cq \"decoder\"".into(),
                decoder_sha256: "ab12".into(),
            };
            let item = ReportItem::render(&row);
            assert_eq!(&*item.json, by_value(&row), "stored: {decoded}");
            assert_eq!(item.id, n as i64 + 1);
        }
    }
}
