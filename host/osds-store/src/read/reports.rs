//! Reads of report versions' served texts by id: the horizon, and the versions between two ids (pages, the
//! live ring, catching up).

use crate::ids::ReportId;
use crate::rows::ServedReport;
use crate::statements::Statements;
use crate::store::Store;
use std::sync::Arc;

/// Served texts from their aggregates: comma lists of ids, channels and byte lengths, and the texts end to end.
/// The four are built in one pass over the same rows, so they agree item by item; the items are put in id order
/// here rather than relying on the order SQLite aggregates in.
fn split_served(
    ids: &str,
    sources: &str,
    lengths: &str,
    texts: &str,
) -> anyhow::Result<Vec<ServedReport>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut items = Vec::new();
    let mut rest = texts;
    // One shared name per channel in the batch: a cache of a million versions holds a few names, not a million.
    let mut names: Vec<Arc<str>> = Vec::new();
    for ((id, source), length) in ids
        .split(',')
        .zip(sources.split(','))
        .zip(lengths.split(','))
    {
        let length: usize = length.parse()?;
        anyhow::ensure!(
            rest.is_char_boundary(length),
            "a served text's length does not match the texts read"
        );
        let (json, after) = rest.split_at(length);
        rest = after;
        let source = match names.iter().find(|name| &***name == source) {
            Some(name) => name.clone(),
            None => {
                names.push(source.into());
                names[names.len() - 1].clone()
            }
        };
        items.push(ServedReport {
            id: ReportId(id.parse()?),
            source,
            json: json.into(),
        });
    }
    anyhow::ensure!(
        rest.is_empty(),
        "served texts left over after their lengths"
    );
    if !items.is_sorted_by_key(|item| item.id) {
        items.sort_unstable_by_key(|item| item.id);
    }
    Ok(items)
}

impl Store {
    pub async fn high_water(&self) -> anyhow::Result<i64> {
        let sql = format!("SELECT {} AS horizon", self.db.horizon());
        self.db
            .one(Statements::one(&sql), |r| r.int("horizon"))
            .await
    }

    /// The served texts of versions with `after < id <= upto`, in id order, at most `limit`. `upto` must be a
    /// committed horizon (from the writer), or the range may have holes that later commits fill.
    pub async fn served_between(
        &self,
        after: i64,
        upto: i64,
        limit: i64,
    ) -> anyhow::Result<Vec<ServedReport>> {
        self.served(
            "SELECT id, source, json FROM report_texts WHERE id > ? AND id <= ? ORDER BY id LIMIT ?",
            None,
            after,
            upto,
            limit,
        )
        .await
    }

    /// [`Store::served_between`] of one channel (found by the channel's index of `reports`).
    pub async fn source_served_between(
        &self,
        source: &str,
        after: i64,
        upto: i64,
        limit: i64,
    ) -> anyhow::Result<Vec<ServedReport>> {
        self.served(
            "SELECT t.id, t.source, t.json FROM reports r JOIN report_texts t ON t.id = r.id \
             WHERE r.source = ? AND r.id > ? AND r.id <= ? ORDER BY r.id LIMIT ?",
            Some(source),
            after,
            upto,
            limit,
        )
        .await
    }

    /// The texts `rows` selects, fetched as one row of four aggregates (ids, channels, byte lengths and the
    /// texts end to end) and split here: sqlx hands rows over one by one between threads, about 4 us each, so
    /// 1,000 rows cost ~5 ms where SQLite's own work is ~1 ms (BENCHMARKS.md, issue 25).
    async fn served(
        &self,
        rows: &str,
        source: Option<&str>,
        after: i64,
        upto: i64,
        limit: i64,
    ) -> anyhow::Result<Vec<ServedReport>> {
        // (`string_agg` is SQLite's `group_concat` by the name both databases know.)
        let sql = format!(
            "SELECT string_agg(CAST(id AS TEXT), ',') AS ids, string_agg(source, ',') AS sources, \
             string_agg(CAST(octet_length(json) AS TEXT), ',') AS lengths, string_agg(json, '') AS texts \
             FROM ({rows}) AS page"
        );
        let mut query = Statements::one(&sql);
        if let Some(source) = source {
            query.bind(source);
        }
        query.bind(after).bind(upto).bind(limit);
        let (ids, sources, lengths, texts) = self
            .db
            .one(query, |r| {
                (
                    r.opt_text("ids"),
                    r.opt_text("sources"),
                    r.opt_text("lengths"),
                    r.opt_text("texts"),
                )
            })
            .await?;
        split_served(
            &ids.unwrap_or_default(),
            &sources.unwrap_or_default(),
            &lengths.unwrap_or_default(),
            &texts.unwrap_or_default(),
        )
    }
}
