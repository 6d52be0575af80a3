//! A report version in its served form: the `EewReport` JSON text of the API, rendered once when the version
//! is archived and kept beside it (`report_texts`), so a page of versions is a concatenation of stored text.
//! [`SERVED_FORMAT`] names the form; an archive whose texts were rendered in another form is re-rendered when
//! opened (see [`refresh`]).

use crate::rows::ReportRow;
use osds_contract::eew::{DecoderRef, EewReport, raw_url};
use serde::Deserialize;
use serde_json::value::RawValue;
use sqlx::{Row, SqliteConnection};

/// The form of the stored texts. Bump it whenever what [`EewReport`] serialises changes: every archive is then
/// re-rendered on its next open.
pub const SERVED_FORMAT: i64 = 1;

/// The version's `EewReport` JSON text.
pub fn served_json(row: &ReportRow) -> String {
    // Serialising borrowed strings and raw JSON text cannot fail.
    serde_json::to_string(&report(row)).unwrap_or_default()
}

/// The decoded fields as the writer stored them, borrowed as the exact text serde wrote; a field absent or
/// `null` is served as `null`, a stored text that is not an object as all `null`.
#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Decoded<'a> {
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

fn flag(raw: Option<&RawValue>) -> bool {
    raw.is_some_and(|r| r.get() == "true")
}

/// The version's `EewReport`, borrowing its row.
pub fn report(row: &ReportRow) -> EewReport<'_> {
    let decoded: Decoded = serde_json::from_str(&row.decoded).unwrap_or_default();
    EewReport {
        id: row.id,
        event_key: &row.event_key,
        source: &row.source,
        event_id: decoded.event_id,
        upstream_event_id: decoded.upstream_event_id,
        revision: decoded.revision,
        issued_at: decoded.issued_at,
        origin_at: decoded.origin_at,
        received_at: &row.received_at,
        epicenter: decoded.epicenter,
        latitude: decoded.latitude,
        longitude: decoded.longitude,
        depth_km: decoded.depth_km,
        magnitude: decoded.magnitude,
        max_intensity: decoded.max_intensity,
        is_final: flag(decoded.is_final),
        is_cancelled: flag(decoded.is_cancelled),
        is_test: flag(decoded.is_test),
        delivery_id: row.delivery_id,
        raw_url: raw_url(row.delivery_id),
        decoder: DecoderRef {
            name: &row.decoder_name,
            sha256: &row.decoder_sha256,
        },
        raw_text: None,
    }
}

/// Versions rendered per transaction when an archive's texts are written again.
const REFRESH_BATCH: i64 = 5_000;

/// Texts written by one statement of [`refresh`] (three parameters each, well under SQLite's limit).
const ROWS_PER_INSERT: usize = 256;

/// Renders the texts of every version again when the archive's are not in [`SERVED_FORMAT`] (an archive from
/// before the texts, or from a release that served another form), logging progress. Texts are replaced, never
/// deleted first, so no version is ever without one; the format is recorded last, so an interrupted run is
/// begun again on the next open.
pub(crate) async fn refresh(conn: &mut SqliteConnection) -> anyhow::Result<()> {
    let format: i64 = sqlx::query_scalar("SELECT served_format FROM archive")
        .fetch_one(&mut *conn)
        .await?;
    if format == SERVED_FORMAT {
        return Ok(());
    }
    let total: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM reports")
        .fetch_one(&mut *conn)
        .await?;
    if total > 0 {
        tracing::info!(
            versions = total,
            from = format,
            to = SERVED_FORMAT,
            "writing the served text of every report version (once, after an upgrade)"
        );
    }
    let started = std::time::Instant::now();
    let mut last_log = started;
    let (mut after, mut done) = (0_i64, 0_i64);
    loop {
        let rows = sqlx::query(&format!(
            "SELECT {} FROM reports r WHERE r.id > ? ORDER BY r.id LIMIT ?",
            crate::rows::REPORT_COLUMNS
        ))
        .bind(after)
        .bind(REFRESH_BATCH)
        .fetch_all(&mut *conn)
        .await?;
        let Some(last) = rows.last() else { break };
        after = last.get("id");
        let mut tx = sqlx::Connection::begin(&mut *conn).await?;
        // Many rows per statement: one statement a row cost a round trip to sqlx's worker thread each.
        for chunk in rows.chunks(ROWS_PER_INSERT) {
            let mut insert = crate::statements::Statements::default();
            let values = vec!["(?, ?, ?)"; chunk.len()].join(", ");
            insert.push(&format!(
                "INSERT OR REPLACE INTO report_texts (id, source, json) VALUES {values}"
            ));
            for row in chunk {
                let row = crate::rows::report_row(row);
                insert
                    .bind(row.id)
                    .bind(row.source.clone())
                    .bind(served_json(&row));
            }
            insert.execute(&mut tx).await?;
        }
        tx.commit().await?;
        done += rows.len() as i64;
        if last_log.elapsed().as_secs() >= 10 {
            last_log = std::time::Instant::now();
            tracing::info!(done, versions = total, "writing served texts");
        }
    }
    sqlx::query("UPDATE archive SET served_format = ?")
        .bind(SERVED_FORMAT)
        .execute(&mut *conn)
        .await?;
    if total > 0 {
        tracing::info!(
            versions = done,
            seconds = started.elapsed().as_secs_f64(),
            "served texts written"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{DeliveryId, ReportId};
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
                id: ReportId(n as i64 + 1),
                event_key: "cq:2024-1".into(),
                source: "cq".into(),
                received_at: "2024-01-01T00:00:06.123Z".into(),
                delivery_id: DeliveryId(n as i64 + 100),
                decoded: decoded.to_string(),
                decoder_name: "cq \"decoder\"".into(),
                decoder_sha256: "ab12".into(),
            };
            assert_eq!(served_json(&row), by_value(&row), "stored: {decoded}");
        }
    }
}

#[cfg(test)]
mod archive_tests {
    use super::*;
    use crate::ids::ReportId;
    use crate::rows::{REPORT_COLUMNS, report_row};
    use crate::test_archive::archive;
    use sqlx::ConnectOptions;
    use std::str::FromStr;

    /// Every version's stored text next to its rendering from the version's columns, and whether its
    /// delivery is the one that brought it.
    async fn texts(url: &str) -> Vec<(i64, String, String, bool)> {
        let mut conn = sqlx::sqlite::SqliteConnectOptions::from_str(url)
            .unwrap()
            .connect()
            .await
            .unwrap();
        let rows = sqlx::query(&format!(
            "SELECT {REPORT_COLUMNS}, t.json AS text, \
             (SELECT report_id FROM deliveries WHERE id = r.delivery_id) = r.id AS own_delivery \
             FROM reports r LEFT JOIN report_texts t ON t.id = r.id ORDER BY r.id"
        ))
        .fetch_all(&mut conn)
        .await
        .unwrap();
        sqlx::Connection::close(conn).await.unwrap();
        rows.iter()
            .map(|row| {
                let text: Option<String> = row.get("text");
                (
                    row.get("id"),
                    text.unwrap_or_default(),
                    served_json(&report_row(row)),
                    row.get("own_delivery"),
                )
            })
            .collect()
    }

    #[tokio::test]
    async fn versions_are_stored_as_served_and_an_older_archive_is_rendered_when_opened() {
        let (store, writer, dir) = archive("served-texts", 1_200).await;
        let url = format!("sqlite://{}/osds.db", dir.display());
        let check = |texts: Vec<(i64, String, String, bool)>| {
            assert_eq!(texts.len(), 1_200);
            for (id, stored, rendered, own_delivery) in texts {
                assert_eq!(stored, rendered, "version {id}");
                assert!(
                    own_delivery,
                    "version {id} names the delivery that brought it"
                );
            }
        };
        check(texts(&url).await);
        let served = store.served_between(0, 1_200, 1_000).await.unwrap();
        assert_eq!(served.len(), 1_000);
        assert!(
            served
                .iter()
                .zip(1..)
                .all(|(s, id)| s.id == ReportId(id) && &*s.source == "cq")
        );
        // (Not `Writer::close`: its complete checkpoint would race the pool's connections closing.)
        drop(writer);
        drop(store);

        // As an archive from before the texts (or in another form) looks: the texts go on the next open.
        let mut conn = sqlx::sqlite::SqliteConnectOptions::from_str(&url)
            .unwrap()
            .connect()
            .await
            .unwrap();
        sqlx::query(
            "DELETE FROM report_texts WHERE id % 7 <> 0; UPDATE archive SET served_format = 0",
        )
        .execute(&mut conn)
        .await
        .unwrap();
        sqlx::Connection::close(conn).await.unwrap();
        let (_store, _writer) = crate::open(&url).await.unwrap();
        check(texts(&url).await);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
