//! A `reports` row rendered once as the spec's EEW report JSON text, without building a JSON tree: the stored
//! decoded fields are spliced in as the exact text serde wrote, so the output equals parsing and re-serialising
//! them (pinned by the test below).

use serde::Deserialize;
use serde_json::value::RawValue;
use sha2::{Digest, Sha256};
use sqlx::Row;
use sqlx::sqlite::SqliteRow;
use std::fmt::Write as _;
use std::sync::Arc;

/// One report version, rendered.
#[derive(Debug, Clone)]
pub struct ReportItem {
    pub id: i64,
    pub json: Arc<str>,
    /// The first 8 bytes of the SHA-256 of `json`, so a page's validator is computed from 8 bytes per item.
    pub digest: [u8; 8],
}

/// The decoded fields as stored in `reports.report_json`; a field absent or `null` renders as `null`.
#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct StoredReport<'a> {
    #[serde(borrow)]
    event_id: Option<&'a RawValue>,
    #[serde(borrow)]
    upstream_event_id: Option<&'a RawValue>,
    #[serde(borrow)]
    revision: Option<&'a RawValue>,
    #[serde(borrow)]
    issued_at: Option<&'a RawValue>,
    #[serde(borrow)]
    origin_at: Option<&'a RawValue>,
    #[serde(borrow)]
    epicenter: Option<&'a RawValue>,
    #[serde(borrow)]
    latitude: Option<&'a RawValue>,
    #[serde(borrow)]
    longitude: Option<&'a RawValue>,
    #[serde(borrow)]
    depth_km: Option<&'a RawValue>,
    #[serde(borrow)]
    magnitude: Option<&'a RawValue>,
    #[serde(borrow)]
    max_intensity: Option<&'a RawValue>,
    #[serde(borrow)]
    is_final: Option<&'a RawValue>,
    #[serde(borrow)]
    is_cancelled: Option<&'a RawValue>,
    #[serde(borrow)]
    is_test: Option<&'a RawValue>,
}

/// Renders a `reports` row (the `REPORT_COLUMNS` of `read.rs`), with its digest.
pub fn render(row: &SqliteRow) -> ReportItem {
    let json = render_json(row);
    let digest = Sha256::digest(json.as_bytes());
    ReportItem {
        id: row.get("id"),
        digest: digest[..8].try_into().unwrap_or_default(),
        json: json.into(),
    }
}

/// The row's report JSON text alone.
pub fn render_json(row: &SqliteRow) -> String {
    let id: i64 = row.get("id");
    let delivery_id: i64 = row.get("delivery_id");
    let stored: StoredReport =
        serde_json::from_str(row.get::<&str, _>("report_json")).unwrap_or_default();

    let mut out = String::with_capacity(640);
    let _ = write!(out, "{{\"id\":{id},\"eventKey\":");
    push_string(&mut out, row.get("event_key"));
    out.push_str(",\"source\":");
    push_string(&mut out, row.get("source"));
    push_fields(
        &mut out,
        [
            ("eventId", stored.event_id),
            ("upstreamEventId", stored.upstream_event_id),
            ("revision", stored.revision),
            ("issuedAt", stored.issued_at),
            ("originAt", stored.origin_at),
        ],
    );
    out.push_str(",\"receivedAt\":");
    push_string(&mut out, row.get("received_at"));
    push_fields(
        &mut out,
        [
            ("epicenter", stored.epicenter),
            ("latitude", stored.latitude),
            ("longitude", stored.longitude),
            ("depthKm", stored.depth_km),
            ("magnitude", stored.magnitude),
            ("maxIntensity", stored.max_intensity),
        ],
    );
    for (name, raw) in [
        ("isFinal", stored.is_final),
        ("isCancelled", stored.is_cancelled),
        ("isTest", stored.is_test),
    ] {
        let _ = write!(
            out,
            ",\"{name}\":{}",
            raw.is_some_and(|r| r.get() == "true")
        );
    }
    let _ = write!(
        out,
        ",\"deliveryId\":{delivery_id},\"rawUrl\":\"/api/v1/deliveries/{delivery_id}/raw\",\"decoder\":{{\"name\":"
    );
    push_string(&mut out, row.get("decoder_name"));
    out.push_str(",\"sha256\":");
    push_string(&mut out, row.get("decoder_sha256"));
    out.push_str("}}");
    out
}

/// Writes `,"name":value` for each stored field as serde wrote it, `null` when it is absent.
fn push_fields<const N: usize>(out: &mut String, fields: [(&str, Option<&RawValue>); N]) {
    for (name, raw) in fields {
        let _ = write!(out, ",\"{name}\":{}", raw.map_or("null", RawValue::get));
    }
}

fn push_string(out: &mut String, text: &str) {
    // Serialising a string cannot fail.
    if let Ok(quoted) = serde_json::to_string(text) {
        out.push_str(&quoted);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Map, Value, json};

    /// The rendering before `render` was written: parse, pick, re-serialise. `render` must match it exactly.
    fn by_value(row: &SqliteRow) -> String {
        let id: i64 = row.get("id");
        let delivery_id: i64 = row.get("delivery_id");
        let decoded: Map<String, Value> =
            serde_json::from_str(row.get::<&str, _>("report_json")).unwrap_or_default();
        let field = |name: &str| decoded.get(name).cloned().unwrap_or(Value::Null);
        let flag = |name: &str| decoded.get(name).and_then(Value::as_bool).unwrap_or(false);
        json!({
            "id": id,
            "eventKey": row.get::<String, _>("event_key"),
            "source": row.get::<String, _>("source"),
            "eventId": field("eventId"),
            "upstreamEventId": field("upstreamEventId"),
            "revision": field("revision"),
            "issuedAt": field("issuedAt"),
            "originAt": field("originAt"),
            "receivedAt": row.get::<String, _>("received_at"),
            "epicenter": field("epicenter"),
            "latitude": field("latitude"),
            "longitude": field("longitude"),
            "depthKm": field("depthKm"),
            "magnitude": field("magnitude"),
            "maxIntensity": field("maxIntensity"),
            "isFinal": flag("isFinal"),
            "isCancelled": flag("isCancelled"),
            "isTest": flag("isTest"),
            "deliveryId": delivery_id,
            "rawUrl": format!("/api/v1/deliveries/{delivery_id}/raw"),
            "decoder": { "name": row.get::<String, _>("decoder_name"), "sha256": row.get::<String, _>("decoder_sha256") },
        })
        .to_string()
    }

    #[tokio::test]
    async fn text_rendering_equals_parse_and_reserialise() {
        let pool = sqlx::SqlitePool::connect("sqlite::memory:").await.unwrap();
        let stored = [
            // As the writer stores a full report (serde's own output of `wolfx_core::Report`).
            r#"{"eventId":"cq:2024-1","upstreamEventId":"2024-1","revision":3,"issuedAt":"2024-01-01T00:00:05Z","originAt":"2024-01-01T00:00:00Z","epicenter":"四川宜宾市\"珙县\"","latitude":28.17,"longitude":104.81,"depthKm":null,"magnitude":4.5,"maxIntensity":{"number":5.5},"isFinal":true,"isCancelled":false,"isTest":false}"#,
            r#"{"eventId":null,"upstreamEventId":"x","revision":1,"issuedAt":"t","originAt":null,"epicenter":"\u0001tab\t","latitude":-0.0,"longitude":1e-7,"depthKm":0.0,"magnitude":7,"maxIntensity":{"text":"VI+"},"isFinal":false,"isCancelled":true,"isTest":true}"#,
            // Fields missing, and not JSON at all: every decoded field is null, every flag false.
            r#"{"revision":2}"#,
            "not json",
        ];
        for (n, report_json) in stored.iter().enumerate() {
            let row = sqlx::query(
                "SELECT ? AS id, 'cq:2024-1' AS event_key, 'cq' AS source, '2024-01-01T00:00:06.123Z' AS received_at, \
                 ? AS delivery_id, ? AS report_json, 'cq \"decoder\"' AS decoder_name, 'ab12' AS decoder_sha256",
            )
            .bind(n as i64 + 1)
            .bind(n as i64 + 100)
            .bind(*report_json)
            .fetch_one(&pool)
            .await
            .unwrap();
            let item = render(&row);
            assert_eq!(&*item.json, by_value(&row), "stored: {report_json}");
            assert_eq!(item.id, n as i64 + 1);
        }
    }
}
