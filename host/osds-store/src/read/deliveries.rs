//! Reads of reception records: an event's deliveries, a delivery's raw bytes, and the archived units
//! `osds reparse` and the canary go through.

use crate::codes::{Code, DeliveryOutcome, Marker, SocketRole};
use crate::db::{Columns, ReadPool};
use crate::ids::{DeliveryId, ReportId};
use crate::rows::DeliveryRow;
use crate::statements::Statements;
use crate::store::Store;

/// One decodable unit of an archived frame, with the delivery that brought it.
#[derive(Debug, Clone)]
pub struct ArchivedUnit {
    pub delivery_id: i64,
    pub received_at: String,
    pub unit_index: i64,
    pub type_tag: Option<String>,
    pub source: Option<String>,
    /// The whole frame's bytes, as received.
    pub frame: Vec<u8>,
}

fn archived_unit(row: &dyn Columns) -> ArchivedUnit {
    ArchivedUnit {
        delivery_id: row.int("id"),
        received_at: row.text("received_at"),
        unit_index: row.int("unit_index"),
        type_tag: row.opt_text("type_tag"),
        source: row.opt_text("source"),
        frame: row.bytes("bytes"),
    }
}

/// Unparsed deliveries, and ignored ones of the given `type` tags, that no later decoder recovered, of an
/// optional source and reception-time range (binds, by [`bind_unparsed`]: the tags as a JSON array, source
/// twice, since twice, until twice). An ignored delivery has no source: the tags given are the source's.
fn still_unparsed(db: &ReadPool) -> String {
    format!(
        "(d.outcome = 'unparsed' OR (d.outcome = 'ignored' AND d.type_tag IN (SELECT tag.value FROM {tags}))) \
         AND NOT EXISTS (SELECT 1 FROM reparses r WHERE r.delivery_id = d.id) \
         AND (? IS NULL OR d.source = ? OR d.outcome = 'ignored') \
         AND (? IS NULL OR d.received_at >= ?) AND (? IS NULL OR d.received_at < ?)",
        tags = db.json_elements("tag")
    )
}

/// Binds [`still_unparsed`]'s values.
fn bind_unparsed(query: &mut Statements, filter: &UnparsedFilter) -> anyhow::Result<()> {
    query
        .bind(serde_json::to_string(&filter.ignored_tags)?)
        .bind(filter.source.clone())
        .bind(filter.source.clone())
        .bind(filter.since.clone())
        .bind(filter.since.clone())
        .bind(filter.until.clone())
        .bind(filter.until.clone());
    Ok(())
}

/// Which unparsed deliveries `osds reparse` goes through.
#[derive(Debug, Default, Clone)]
pub struct UnparsedFilter {
    /// Ignored deliveries of these `type` tags are gone through too: a decoder claims them now.
    pub ignored_tags: Vec<String>,
    pub source: Option<String>,
    pub since: Option<String>,
    pub until: Option<String>,
}

/// Reception records of an event and the cursor after the last.
pub struct DeliveryPage {
    pub items: Vec<DeliveryRow>,
    pub next_cursor: DeliveryId,
}

impl Store {
    /// Reception records of an event, duplicates included, by increasing id.
    pub async fn deliveries(
        &self,
        event_id: &str,
        after: DeliveryId,
        limit: i64,
    ) -> anyhow::Result<DeliveryPage> {
        let mut query = Statements::one(&format!(
            "SELECT d.id, d.received_at, d.source, d.type_tag, d.marker, d.outcome, d.report_id, d.session_id, \
             d.unit_index, d.raw_sha256, s.path, s.role, {} AS ingester, p.size \
             FROM deliveries d JOIN sessions s ON s.id = d.session_id \
             JOIN raw_payloads p ON p.sha256 = d.raw_sha256 \
             WHERE (d.event_key = ? OR d.id IN (SELECT delivery_id FROM reparses WHERE event_key = ?)) \
             AND d.id > ? ORDER BY d.id LIMIT ?",
            self.db.session_ingester("s")
        ));
        query.bind(event_id).bind(event_id).bind(after).bind(limit);
        let items: Vec<DeliveryRow> = self
            .db
            .try_rows(query, |row| {
                Ok(DeliveryRow {
                    id: DeliveryId(row.int("id")),
                    received_at: row.text("received_at"),
                    source: row.opt_text("source"),
                    type_tag: row.opt_text("type_tag"),
                    marker: Marker::stored(&row.text("marker"))?,
                    outcome: DeliveryOutcome::stored(&row.text("outcome"))?,
                    report_id: row.opt_int("report_id").map(ReportId),
                    session_id: row.int("session_id"),
                    path: row.text("path"),
                    role: SocketRole::stored(&row.text("role"))?,
                    ingester: row.opt_text("ingester"),
                    unit_index: row.int("unit_index"),
                    raw_sha256: row.text("raw_sha256"),
                    size: row.int("size"),
                })
            })
            .await?;
        let next_cursor = items.last().map_or(after, |d| d.id);
        Ok(DeliveryPage { items, next_cursor })
    }

    /// The exact stored bytes of a delivery and their SHA-256 (lowercase hex). It takes a delivery's id, and a
    /// report's is refused (the two numberings are apart):
    ///
    /// ```compile_fail
    /// async fn raw_of(store: &osds_store::Store, report: osds_store::ReportId) {
    ///     let _ = store.raw(report).await;
    /// }
    /// ```
    pub async fn raw(&self, delivery_id: DeliveryId) -> anyhow::Result<Option<(Vec<u8>, String)>> {
        let mut query = Statements::one(
            "SELECT p.bytes, p.sha256 FROM deliveries d JOIN raw_payloads p ON p.sha256 = d.raw_sha256 \
             WHERE d.id = ?",
        );
        query.bind(delivery_id);
        self.db
            .row(query, |row| (row.bytes("bytes"), row.text("sha256")))
            .await
    }

    /// The most recent distinct payloads of a channel (its `source`, or one of the `type` tags it claims, so a
    /// channel about to be added has the frames archived as ignored), for a decoder's canary.
    pub async fn canary_payloads(
        &self,
        source: &str,
        claims: &[String],
        limit: i64,
    ) -> anyhow::Result<Vec<ArchivedUnit>> {
        let placeholders = vec!["?"; claims.len().max(1)].join(", ");
        let mut query = Statements::one(&format!(
            "SELECT d.id, d.received_at, d.unit_index, d.type_tag, d.source, p.bytes FROM deliveries d \
             JOIN raw_payloads p ON p.sha256 = d.raw_sha256 \
             WHERE d.id IN (SELECT MAX(id) FROM deliveries WHERE source = ? OR type_tag IN ({placeholders}) \
                            GROUP BY raw_sha256, unit_index) \
             ORDER BY d.id DESC LIMIT ?"
        ));
        query.bind(source);
        if claims.is_empty() {
            query.bind(None::<String>);
        }
        for claim in claims {
            query.bind(claim.as_str());
        }
        query.bind(limit);
        self.db.rows(query, archived_unit).await
    }

    /// Unparsed deliveries not yet recovered, by increasing id after `after`, optionally of one source and
    /// within a reception-time range (RFC 3339, inclusive start, exclusive end).
    pub async fn unparsed_deliveries(
        &self,
        filter: &UnparsedFilter,
        after: i64,
        limit: i64,
    ) -> anyhow::Result<Vec<ArchivedUnit>> {
        let mut query = Statements::one(&format!(
            "SELECT d.id, d.received_at, d.unit_index, d.type_tag, d.source, p.bytes FROM deliveries d \
             JOIN raw_payloads p ON p.sha256 = d.raw_sha256 \
             WHERE d.id > ? AND {} ORDER BY d.id LIMIT ?",
            still_unparsed(&self.db)
        ));
        query.bind(after);
        bind_unparsed(&mut query, filter)?;
        query.bind(limit);
        self.db.rows(query, archived_unit).await
    }

    /// How many deliveries [`Store::unparsed_deliveries`] would go through.
    pub async fn count_unparsed(&self, filter: &UnparsedFilter) -> anyhow::Result<i64> {
        let mut query = Statements::one(&format!(
            "SELECT COUNT(*) AS unparsed FROM deliveries d WHERE {}",
            still_unparsed(&self.db)
        ));
        bind_unparsed(&mut query, filter)?;
        self.db.one(query, |r| r.int("unparsed")).await
    }
}
