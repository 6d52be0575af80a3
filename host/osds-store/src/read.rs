//! Read queries of the archive, returning typed rows (`rows.rs`).

use crate::counts::{ArchiveCounts, Listed, MatchList};
use crate::db::{Columns, ReadPool};
use crate::ids::{DeliveryId, ReportId};
use crate::rows::{
    DeliveryRow, EventRow, EventVersions, IngesterRow, MonthRow, OpenSocket, OutageRow,
    ServedReport, SessionRow, VersionRow,
};
use crate::rows::{REPORT_COLUMNS, report_row};
use crate::statements::{Statements, Value as Bind};
use crate::store::Store;

/// Filters of `/events`, already validated.
#[derive(Debug, Default, Clone)]
pub struct EventFilter {
    pub source: Option<String>,
    /// Inclusive lower bound on origin time, Unix ms.
    pub from_ms: Option<i64>,
    /// Exclusive upper bound on origin time, Unix ms.
    pub to_ms: Option<i64>,
    pub q: Option<String>,
    pub min_magnitude: Option<f64>,
    pub page: i64,
    pub limit: i64,
}

impl EventFilter {
    /// What identifies the filter's total: everything but the page.
    fn count_key(&self) -> String {
        format!(
            "{:?}|{:?}|{:?}|{:?}|{:?}",
            self.source,
            self.from_ms,
            self.to_ms,
            self.q,
            self.min_magnitude.map(f64::to_bits)
        )
    }
}

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

/// Versions after a kept list's horizon up to which it is caught up instead of read again (each changed event
/// is one row to hand over; a whole list is one).
const CATCH_UP_VERSIONS: i64 = 4096;

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

/// One page of events and how many match the filter.
pub struct EventPage {
    pub items: Vec<EventRow>,
    pub total: i64,
}

/// Reception records of an event and the cursor after the last.
pub struct DeliveryPage {
    pub items: Vec<DeliveryRow>,
    pub next_cursor: DeliveryId,
}

/// The filter's condition on `e` (`1 = 1` for none) and the values of its `?`s.
pub(crate) fn filter_sql(filter: &EventFilter) -> (String, Vec<Bind>) {
    let mut clauses: Vec<&str> = Vec::new();
    let mut binds: Vec<Bind> = Vec::new();
    if let Some(source) = &filter.source {
        clauses.push("e.source = ?");
        binds.push(source.clone().into());
    }
    if let Some(from) = filter.from_ms {
        clauses.push("e.origin_ms >= ?");
        binds.push(from.into());
    }
    if let Some(to) = filter.to_ms {
        clauses.push("e.origin_ms < ?");
        binds.push(to.into());
    }
    if let Some(min) = filter.min_magnitude {
        clauses.push("e.magnitude >= ?");
        binds.push(Some(min).into());
    }
    if let Some(q) = &filter.q {
        clauses.push(
            "(e.epicenter LIKE ? ESCAPE '\\' OR e.source_event_id LIKE ? ESCAPE '\\' \
             OR e.upstream_ids LIKE ? ESCAPE '\\')",
        );
        let pattern = like_pattern(q);
        binds.extend([
            pattern.clone().into(),
            pattern.clone().into(),
            pattern.into(),
        ]);
    }
    if clauses.is_empty() {
        ("1 = 1".to_string(), binds)
    } else {
        (clauses.join(" AND "), binds)
    }
}

/// An event's columns and its latest version's served text (`report_texts` joined as `t`).
const EVENT_COLUMNS: &str = "e.id AS e_id, e.source AS e_source, e.source_event_id, e.origin_at AS e_origin_at, e.report_count, \
     e.missing_revisions, t.json AS latest_json";

/// The events versions in (`?`, `?`] changed (found from the versions by id, never by walking events), each
/// with whether it matches `matches_sql` now; the condition's own `?` come first.
fn changed_events_sql(db: &ReadPool, matches_sql: &str) -> String {
    format!(
        "SELECT e.{key} AS rid, e.sort_ms, e.last_report_id, CASE WHEN {matches_sql} THEN 1 ELSE 0 END AS matches \
         FROM events e WHERE e.id IN (SELECT event_key FROM reports WHERE id > ? AND id <= ?)",
        key = db.event_key_column()
    )
}

/// A page of the events `where_sql` selects, by `LIMIT ? OFFSET ?`: the page's keys first, from an index that
/// holds every filtered column in list order (a deep OFFSET skips index entries, not rows); then their columns.
/// On SQLite CROSS JOIN keeps that order of the loops: left to itself, SQLite 3.46 walked the whole list index
/// to save sorting 100 rows, looking up every event's text (200-600 ms a page without a channel filter).
fn offset_page_sql(db: &ReadPool, where_sql: &str) -> String {
    format!(
        "SELECT {EVENT_COLUMNS} FROM (SELECT e.{key} AS rid FROM events e {where_sql} \
         ORDER BY e.sort_ms DESC, e.last_report_id DESC LIMIT ? OFFSET ?) page \
         {join} events e ON e.{key} = page.rid {join} report_texts t ON t.id = e.latest_report_id \
         ORDER BY e.sort_ms DESC, e.last_report_id DESC",
        key = db.event_key_column(),
        join = db.ordered_join()
    )
}

/// The events whose keys a JSON array lists, in its order (a slice of a kept list).
fn listed_page_sql(db: &ReadPool) -> String {
    format!(
        "SELECT {EVENT_COLUMNS} FROM {page} {join} events e ON e.{column} = CAST(page.value AS BIGINT) \
         {join} report_texts t ON t.id = e.latest_report_id ORDER BY page.key",
        page = db.json_elements("page"),
        column = db.event_key_column(),
        join = db.ordered_join()
    )
}

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
        items.push(ServedReport {
            id: ReportId(id.parse()?),
            source: source.to_string(),
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

/// An `events` row joined with its latest version's text (`EVENT_COLUMNS`).
fn event_row(row: &dyn Columns) -> EventRow {
    EventRow {
        id: row.text("e_id"),
        source: row.text("e_source"),
        source_event_id: row.text("source_event_id"),
        origin_at: row.opt_text("e_origin_at"),
        report_count: row.int("report_count"),
        missing_revisions: serde_json::from_str(&row.text("missing_revisions")).unwrap_or_default(),
        latest: row.text("latest_json").into(),
    }
}

/// The columns [`outage_row`] reads.
const OUTAGE_COLUMNS: &str = "source, started_at, ended_at, reason";

fn outage_row(row: &dyn Columns) -> OutageRow {
    OutageRow {
        source: row.text("source"),
        started_at: row.text("started_at"),
        ended_at: row.opt_text("ended_at"),
        reason: row.text("reason"),
    }
}

/// `%` and `_` in user text match themselves in a LIKE pattern escaped with `\`.
pub(super) fn like_pattern(text: &str) -> String {
    let mut pattern = String::from("%");
    for c in text.chars() {
        if matches!(c, '%' | '_' | '\\') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push('%');
    pattern
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

    /// A page of events and the filter's total. `horizon` is [`Store::high_water`], read by the caller before
    /// (a total is kept for the horizon it is known to be current at).
    pub async fn events(&self, filter: &EventFilter, horizon: i64) -> anyhow::Result<EventPage> {
        let (matches_sql, binds) = filter_sql(filter);
        let key = filter.count_key();
        if let Some(page) = self
            .listed_events(filter, horizon, &key, &matches_sql, &binds)
            .await?
        {
            return Ok(page);
        }
        self.offset_events(filter, horizon, &matches_sql, &binds)
            .await
    }

    /// [`Store::events`] without a kept list (one too long to keep): the total counted (kept for the horizon)
    /// and the page read by offset.
    pub(crate) async fn offset_events(
        &self,
        filter: &EventFilter,
        horizon: i64,
        matches_sql: &str,
        binds: &[Bind],
    ) -> anyhow::Result<EventPage> {
        let key = filter.count_key();
        let where_sql = format!("WHERE {matches_sql}");
        let kept = self
            .event_totals
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(horizon, &key);
        let total = match kept {
            Some(total) => total,
            None => {
                let mut count = Statements::one(&format!(
                    "SELECT COUNT(*) AS total FROM events e {where_sql}"
                ));
                for bind in binds {
                    count.bind(bind.clone());
                }
                let total = self.db.one(count, |r| r.int("total")).await?;
                self.event_totals
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .keep(horizon, key, total);
                total
            }
        };
        let mut list = Statements::one(&offset_page_sql(&self.db, &where_sql));
        for bind in binds {
            list.bind(bind.clone());
        }
        let offset = (filter.page - 1).saturating_mul(filter.limit);
        list.bind(filter.limit).bind(offset);
        Ok(EventPage {
            items: self.db.rows(list, event_row).await?,
            total,
        })
    }

    /// [`Store::events`] from the filter's list of matching events, kept (see `EventMatches`): the total is
    /// its length and a page a slice of it. A list kept at an older horizon is caught up from the events the
    /// versions since then changed; with none kept, or too many versions since, the list is read in full.
    /// `None` when the list is too long to keep (the caller counts and pages by offset). `matches_sql` is the
    /// filter's condition on `e` (`binds` fill its `?`).
    async fn listed_events(
        &self,
        filter: &EventFilter,
        horizon: i64,
        key: &str,
        matches_sql: &str,
        binds: &[Bind],
    ) -> anyhow::Result<Option<EventPage>> {
        let lock = || {
            self.event_matches
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        };
        // A list kept at a newer horizon than the caller read is as exact and newer.
        let current = |lists: &crate::counts::EventMatches| match lists.get(key) {
            Some(list) if list.horizon >= horizon => Ok(Some(list)),
            _ if lists.too_long(horizon, key) => Err(()),
            kept => Ok(kept),
        };
        let update = {
            let mut lists = lock();
            match current(&lists) {
                Err(()) => return Ok(None),
                Ok(Some(list)) if list.horizon >= horizon => Ok(list),
                Ok(_) => Err(lists.update(key, horizon)),
            }
        };
        let (horizon, update) = match update {
            Ok(list) => return self.list_page(filter, &list).await,
            Err(update) => update,
        };
        let list = update
            .get_or_try_init(|| async {
                // Another update may have finished since this one was handed out.
                let kept = match current(&lock()) {
                    Err(()) => return Ok(None),
                    Ok(kept) => kept,
                };
                anyhow::Ok(match kept {
                    Some(list) if list.horizon >= horizon => Some(list),
                    Some(list) if horizon - list.horizon <= CATCH_UP_VERSIONS => {
                        let changed = self
                            .events_changed(list.horizon, horizon, matches_sql, binds)
                            .await?;
                        self.keep_list(key, list.caught_up(horizon, &changed))
                    }
                    _ => {
                        let list = self.read_list(horizon, matches_sql, binds).await?;
                        self.keep_list(key, list)
                    }
                })
            })
            .await?
            .clone();
        match list {
            Some(list) => self.list_page(filter, &list).await,
            None => Ok(None),
        }
    }

    /// The filter's page of a kept list.
    async fn list_page(
        &self,
        filter: &EventFilter,
        list: &MatchList,
    ) -> anyhow::Result<Option<EventPage>> {
        let offset =
            usize::try_from((filter.page - 1).saturating_mul(filter.limit)).unwrap_or(usize::MAX);
        let limit = usize::try_from(filter.limit).unwrap_or(0);
        let page: Vec<i64> = list
            .events
            .iter()
            .skip(offset)
            .take(limit)
            .map(|event| event.rowid)
            .collect();
        let items = if page.is_empty() {
            Vec::new()
        } else {
            let mut query = Statements::one(&listed_page_sql(&self.db));
            query.bind(serde_json::to_string(&page)?);
            self.db.rows(query, event_row).await?
        };
        Ok(Some(EventPage {
            items,
            total: list.events.len() as i64,
        }))
    }

    /// Keeps `list` as the filter's; `None` when it is too long to keep.
    fn keep_list(&self, key: &str, list: MatchList) -> Option<MatchList> {
        let mut lists = self
            .event_matches
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        lists.keep(key.to_string(), list.clone());
        (!lists.too_long(list.horizon, key)).then_some(list)
    }

    /// Every event matching `matches_sql`, in list order, in one row (sqlx hands rows over one by one, ~4 us
    /// each): `rowid,sort_ms,last_report_id` of each, joined by commas.
    async fn read_list(
        &self,
        horizon: i64,
        matches_sql: &str,
        binds: &[Bind],
    ) -> anyhow::Result<MatchList> {
        let sql = format!(
            "SELECT string_agg(CAST(rid AS TEXT) || ',' || CAST(sort_ms AS TEXT) || ',' || CAST(last_id AS TEXT), \
             ',' ORDER BY sort_ms DESC, last_id DESC) AS list FROM \
             (SELECT e.{} AS rid, e.sort_ms, e.last_report_id AS last_id FROM events e WHERE {matches_sql}) AS matching",
            self.db.event_key_column()
        );
        let mut query = Statements::one(&sql);
        for bind in binds {
            query.bind(bind.clone());
        }
        let found = self.db.one(query, |r| r.opt_text("list")).await?;
        let numbers: Vec<i64> = found
            .unwrap_or_default()
            .split(',')
            .filter(|n| !n.is_empty())
            .map(str::parse)
            .collect::<Result<_, _>>()?;
        anyhow::ensure!(
            numbers.len().is_multiple_of(3),
            "an event list came back cut short"
        );
        let events = numbers
            .chunks_exact(3)
            .map(|n| Listed {
                rowid: n[0],
                sort_ms: n[1],
                last_id: n[2],
            })
            .collect();
        Ok(MatchList {
            horizon,
            events: std::sync::Arc::new(events),
        })
    }

    /// The events that versions in (`after`, `horizon`] changed, each with whether it matches now.
    async fn events_changed(
        &self,
        after: i64,
        horizon: i64,
        matches_sql: &str,
        binds: &[Bind],
    ) -> anyhow::Result<Vec<(Listed, bool)>> {
        let mut query = Statements::one(&changed_events_sql(&self.db, matches_sql));
        for bind in binds {
            query.bind(bind.clone());
        }
        query.bind(after).bind(horizon);
        self.db
            .rows(query, |row| {
                (
                    Listed {
                        rowid: row.int("rid"),
                        sort_ms: row.int("sort_ms"),
                        last_id: row.int("last_report_id"),
                    },
                    row.int("matches") == 1,
                )
            })
            .await
    }

    /// The event with every stored version in revision order (several versions of one revision by id), each
    /// with the raw bytes of the delivery that first brought it.
    pub async fn event(&self, id: &str) -> anyhow::Result<Option<EventVersions>> {
        let mut query = Statements::one(&format!(
            "SELECT {EVENT_COLUMNS} FROM events e JOIN report_texts t ON t.id = e.latest_report_id WHERE e.id = ?"
        ));
        query.bind(id);
        let Some(event) = self.db.row(query, event_row).await? else {
            return Ok(None);
        };
        let mut query = Statements::one(&format!(
            "SELECT {REPORT_COLUMNS}, p.bytes FROM reports r JOIN deliveries d ON d.id = r.delivery_id \
             JOIN raw_payloads p ON p.sha256 = d.raw_sha256 WHERE r.event_key = ? ORDER BY r.revision, r.id"
        ));
        query.bind(id);
        let versions = self
            .db
            .rows(query, |row| VersionRow {
                report: report_row(row),
                raw: row.bytes("bytes"),
            })
            .await?;
        Ok(Some(EventVersions { event, versions }))
    }

    pub async fn event_exists(&self, id: &str) -> anyhow::Result<bool> {
        let mut query = Statements::one("SELECT 1 AS found FROM events WHERE id = ?");
        query.bind(id);
        Ok(self.db.row(query, |_| ()).await?.is_some())
    }

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
            .rows(query, |row| DeliveryRow {
                id: DeliveryId(row.int("id")),
                received_at: row.text("received_at"),
                source: row.opt_text("source"),
                type_tag: row.opt_text("type_tag"),
                marker: row.text("marker"),
                outcome: row.text("outcome"),
                report_id: row.opt_int("report_id").map(ReportId),
                session_id: row.int("session_id"),
                path: row.text("path"),
                role: row.text("role"),
                ingester: row.opt_text("ingester"),
                unit_index: row.int("unit_index"),
                raw_sha256: row.text("raw_sha256"),
                size: row.int("size"),
            })
            .await?;
        let next_cursor = items.last().map_or(after, |d| d.id);
        Ok(DeliveryPage { items, next_cursor })
    }

    /// The exact stored bytes of a delivery and their SHA-256 (lowercase hex).
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

    /// The most recently archived event of `source`.
    pub async fn latest_event(&self, source: &str) -> anyhow::Result<Option<EventRow>> {
        let mut query = Statements::one(&format!(
            "SELECT {EVENT_COLUMNS} FROM events e JOIN report_texts t ON t.id = e.latest_report_id WHERE e.source = ? \
             ORDER BY e.last_report_id DESC LIMIT 1"
        ));
        query.bind(source);
        self.db.row(query, event_row).await
    }

    /// Months (Beijing time) with archived events, newest first, with event counts.
    pub async fn months(&self, source: Option<&str>) -> anyhow::Result<Vec<MonthRow>> {
        let mut query = Statements::one(
            "SELECT month, COUNT(*) AS events FROM events WHERE (? IS NULL OR source = ?) \
             GROUP BY month ORDER BY month DESC",
        );
        query
            .bind(source.map(str::to_owned))
            .bind(source.map(str::to_owned));
        self.db
            .rows(query, |r| MonthRow {
                month: r.text("month"),
                events: r.int("events"),
            })
            .await
    }

    pub async fn archive_counts(&self) -> anyhow::Result<ArchiveCounts> {
        // Nothing counted here is ever updated or deleted, so the newest ids decide every count: three index
        // lookups say whether the last counts still hold, instead of scanning every table on each call.
        let key: (i64, i64, i64) = self
            .db
            .one(
                Statements::one(
                    "SELECT (SELECT COALESCE(MAX(id), 0) FROM deliveries) AS d, \
                     (SELECT COALESCE(MAX(id), 0) FROM reparses) AS p, \
                     (SELECT COALESCE(MAX(id), 0) FROM reports) AS r",
                ),
                |row| (row.int("d"), row.int("p"), row.int("r")),
            )
            .await?;
        if let Some((at, counts)) = self.counts.lock().ok().and_then(|c| c.clone())
            && at == key
        {
            return Ok(counts);
        }
        let sql = format!(
            "SELECT (SELECT COUNT(*) FROM events) AS events, (SELECT COUNT(*) FROM reports) AS versions, \
             {} AS high_water, \
             (SELECT COUNT(*) FROM deliveries) AS deliveries, (SELECT COUNT(*) FROM raw_payloads) AS raw_payloads, \
             (SELECT COUNT(*) FROM deliveries d WHERE outcome = 'unparsed' \
                AND NOT EXISTS (SELECT 1 FROM reparses r WHERE r.delivery_id = d.id)) AS unparsed, \
             (SELECT COUNT(*) FROM reparses) AS recovered, \
             (SELECT COUNT(*) FROM deliveries WHERE outcome = 'ignored') AS ignored, \
             (SELECT COUNT(*) FROM deliveries WHERE outcome = 'duplicate') AS duplicates",
            self.db.horizon()
        );
        let mut counts = self
            .db
            .one(Statements::one(&sql), |row| ArchiveCounts {
                events: row.int("events"),
                versions: row.int("versions"),
                deliveries: row.int("deliveries"),
                raw_payloads: row.int("raw_payloads"),
                unparsed: row.int("unparsed"),
                unparsed_by_reason: Default::default(),
                recovered: row.int("recovered"),
                ignored: row.int("ignored"),
                duplicates: row.int("duplicates"),
                high_water: row.int("high_water"),
            })
            .await?;
        counts.unparsed_by_reason = self
            .db
            .rows(
                Statements::one(
                    "SELECT COALESCE(error_kind, 'unknown') AS reason, COUNT(*) AS n FROM deliveries d \
                     WHERE outcome = 'unparsed' \
                     AND NOT EXISTS (SELECT 1 FROM reparses r WHERE r.delivery_id = d.id) \
                     GROUP BY COALESCE(error_kind, 'unknown')",
                ),
                |row| (row.text("reason"), row.int("n")),
            )
            .await?
            .into_iter()
            .collect();
        if let Ok(mut cached) = self.counts.lock() {
            *cached = Some((key, counts.clone()));
        }
        Ok(counts)
    }

    /// The most recent connection sessions.
    pub async fn recent_sessions(&self, limit: i64) -> anyhow::Result<Vec<SessionRow>> {
        let mut query = Statements::one(&format!(
            "SELECT id, {} AS ingester, path, role, started_at, connected_at, ended_at, end_reason FROM sessions \
             ORDER BY id DESC LIMIT ?",
            self.db.session_ingester("sessions")
        ));
        query.bind(limit);
        self.db
            .rows(query, |r| SessionRow {
                id: r.int("id"),
                ingester: r.opt_text("ingester"),
                path: r.text("path"),
                role: r.text("role"),
                started_at: r.text("started_at"),
                connected_at: r.opt_text("connected_at"),
                ended_at: r.opt_text("ended_at"),
                end_reason: r.opt_text("end_reason"),
            })
            .await
    }

    /// The ingesters that have archived into a PostgreSQL archive, by name, with what each has now; none on
    /// SQLite (the process serving it is its one ingester).
    pub async fn ingesters(&self) -> anyhow::Result<Vec<IngesterRow>> {
        if !self.db.is_postgres() {
            return Ok(Vec::new());
        }
        let query = Statements::one(&format!(
            "SELECT i.name, CASE WHEN {} THEN 1::bigint ELSE 0 END AS running, \
             COALESCE((SELECT string_agg(h.source, ',' ORDER BY h.source) FROM channel_holders h \
             WHERE h.ingester = i.number), '') AS channels \
             FROM ingesters i ORDER BY i.name",
            crate::db::ingester_runs("i.number")
        ));
        let mut ingesters = self
            .db
            .rows(query, |r| IngesterRow {
                name: r.text("name"),
                running: r.int("running") == 1,
                channels: r
                    .text("channels")
                    .split(',')
                    .filter(|c| !c.is_empty())
                    .map(str::to_owned)
                    .collect(),
                sockets: Vec::new(),
            })
            .await?;
        let open = Statements::one(
            "SELECT ingester, id, path, role, connected_at FROM sessions \
             WHERE ended_at IS NULL AND connected_at IS NOT NULL ORDER BY ingester, path, id",
        );
        let sockets = self
            .db
            .rows(open, |r| {
                (
                    r.text("ingester"),
                    OpenSocket {
                        session_id: r.int("id"),
                        path: r.text("path"),
                        role: r.text("role"),
                        connected_at: r.text("connected_at"),
                    },
                )
            })
            .await?;
        for (name, socket) in sockets {
            if let Some(ingester) = ingesters.iter_mut().find(|i| i.name == name) {
                ingester.sockets.push(socket);
            }
        }
        Ok(ingesters)
    }

    /// Outage intervals, newest first; `endedAt: null` is an outage in progress.
    pub async fn outages(&self, limit: i64) -> anyhow::Result<Vec<OutageRow>> {
        let mut query = Statements::one(&format!(
            "SELECT {OUTAGE_COLUMNS} FROM outages ORDER BY id DESC LIMIT ?"
        ));
        query.bind(limit);
        self.db.rows(query, outage_row).await
    }

    /// The outages in progress, however old (at most one per source).
    pub async fn open_outages(&self) -> anyhow::Result<Vec<OutageRow>> {
        let query = Statements::one(&format!(
            "SELECT {OUTAGE_COLUMNS} FROM outages WHERE ended_at IS NULL ORDER BY id"
        ));
        self.db.rows(query, outage_row).await
    }

    /// What a previous run of ingester `ingester` (`None` on SQLite) left when it stopped without closing its
    /// sessions: when it was last known alive, and the sessions still open and connected, as (path,
    /// connected_at).
    pub async fn last_alive(
        &self,
        ingester: Option<&str>,
    ) -> anyhow::Result<(Option<String>, Vec<(String, String)>)> {
        let mut alive = Statements::one("SELECT alive_at FROM liveness WHERE ingester = ?");
        alive.bind(ingester.unwrap_or_default());
        let alive_at = self
            .db
            .rows(alive, |r| r.text("alive_at"))
            .await?
            .into_iter()
            .next();
        let mut open = Statements::one(&format!(
            "SELECT path, connected_at FROM sessions WHERE ended_at IS NULL AND connected_at IS NOT NULL \
             AND COALESCE({}, '') = ? ORDER BY id",
            self.db.session_ingester("sessions")
        ));
        open.bind(ingester.unwrap_or_default());
        let sessions = self
            .db
            .rows(open, |r| (r.text("path"), r.text("connected_at")))
            .await?;
        Ok((alive_at, sessions))
    }

    /// Time of the last archived reception of each source.
    pub async fn last_receptions(&self) -> anyhow::Result<Vec<(String, String)>> {
        let query = Statements::one(
            "SELECT source, MAX(received_at) AS at FROM deliveries WHERE source IS NOT NULL GROUP BY source",
        );
        self.db
            .rows(query, |r| (r.text("source"), r.text("at")))
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

    pub async fn counter(&self, name: &str) -> anyhow::Result<i64> {
        let mut query = Statements::one(
            "SELECT COALESCE((SELECT value FROM counters WHERE name = ?), 0) AS value",
        );
        query.bind(name);
        self.db.one(query, |r| r.int("value")).await
    }
}

#[cfg(test)]
mod plan_tests {
    use super::*;
    use crate::test_archive::archive;
    use sqlx::Row;

    /// The steps of SQLite's plan for `sql` (its own version, the one built into the binary).
    async fn plan(store: &Store, sql: &str, binds: Vec<Bind>) -> Vec<String> {
        let mut query = Statements::one(&format!("EXPLAIN QUERY PLAN {sql}"));
        for bind in binds {
            query.bind(bind);
        }
        query
            .sqlite_rows(store.db.sqlite().unwrap())
            .await
            .unwrap()
            .iter()
            .map(|row| row.get::<String, _>(3))
            .collect()
    }

    #[tokio::test]
    async fn an_event_page_looks_up_its_own_events_only() {
        let (store, _writer, dir) = archive("event-plans", 30).await;
        let db = &store.db;
        let pages: [(String, Vec<Bind>); 4] = [
            (offset_page_sql(db, ""), vec![100.into(), 200.into()]),
            (
                offset_page_sql(db, "WHERE e.origin_ms >= ? AND e.magnitude >= ?"),
                vec![0.into(), Some(3.0).into(), 100.into(), 200.into()],
            ),
            (
                offset_page_sql(db, "WHERE e.source = ?"),
                vec!["cq".into(), 100.into(), 200.into()],
            ),
            (listed_page_sql(db), vec!["[3,1,2]".into()]),
        ];
        for (sql, binds) in pages {
            let steps = plan(&store, &sql, binds).await;
            assert!(
                steps
                    .iter()
                    .any(|s| s == "SEARCH e USING INTEGER PRIMARY KEY (rowid=?)")
                    && !steps.iter().any(|s| s.starts_with("SCAN e USING INDEX")),
                "events are looked up by the page's rowids, never walked: {steps:?}"
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn a_kept_list_is_caught_up_from_the_new_versions_without_walking_events() {
        let (store, _writer, dir) = archive("catch-up-plan", 30).await;
        let sql = changed_events_sql(&store.db, "e.source = ? AND e.magnitude >= ?");
        let steps = plan(
            &store,
            &sql,
            vec!["cq".into(), Some(4.0).into(), 10.into(), 20.into()],
        )
        .await;
        assert!(
            steps
                .iter()
                .any(|s| s.starts_with("SEARCH reports USING INTEGER PRIMARY KEY"))
                && !steps.iter().any(|s| s.starts_with("SCAN")),
            "versions by id, their events by key: {steps:?}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[cfg(test)]
mod listed_events_tests {
    use super::*;
    use crate::test_archive::archive;
    use crate::{Incoming, UnitKind, UnitRecord};
    use sqlx::Row;
    use wolfx_core::Report;

    /// A version of `event` ("channel/event id") on its channel; `n` makes it distinct.
    fn version(
        session: i64,
        n: i64,
        event: &str,
        revision: i64,
        origin_at: Option<&str>,
        epicenter: &str,
        magnitude: f64,
    ) -> Incoming {
        let (source, event) = event.split_once('/').unwrap();
        Incoming {
            session_id: session,
            reception: None,
            received_at: format!("2025-06-01T00:{:02}:{:02}Z", n / 60, n % 60),
            frame: format!("{{\"type\":\"{source}_eew\",\"n\":{n}}}").into_bytes(),
            marker: crate::Marker::PrimaryPush,
            units: vec![UnitRecord {
                unit_index: 0,
                type_tag: Some(format!("{source}_eew")),
                kind: UnitKind::Report {
                    source: source.into(),
                    identity: format!("{n:064}"),
                    report: Box::new(Report {
                        event_id: format!("{source}:{event}"),
                        upstream_event_id: event.into(),
                        revision,
                        issued_at: None,
                        origin_at: origin_at.map(str::to_string),
                        epicenter: Some(epicenter.into()),
                        latitude: None,
                        longitude: None,
                        depth_km: None,
                        magnitude: Some(magnitude),
                        max_intensity: None,
                        is_final: false,
                        is_cancelled: false,
                        is_test: false,
                    }),
                    decoder_name: "test".into(),
                    decoder_sha256: "0".repeat(64),
                },
            }],
        }
    }

    fn filters() -> Vec<EventFilter> {
        let filter =
            |source: Option<&str>, q: Option<&str>, min: Option<f64>, from: Option<i64>| {
                EventFilter {
                    source: source.map(str::to_string),
                    from_ms: from,
                    to_ms: None,
                    q: q.map(str::to_string),
                    min_magnitude: min,
                    page: 1,
                    limit: 1000,
                }
            };
        vec![
            filter(None, None, None, None),
            filter(Some("sc"), None, Some(4.0), None),
            filter(None, Some("四川"), None, None),
            filter(None, None, Some(5.0), None),
            filter(
                None,
                None,
                None,
                osds_time::parse_ms("2025-01-01T00:00:00Z"),
            ),
        ]
    }

    /// What the filter lists, by plain SQL: ids in list order.
    async fn expected(store: &Store, filter: &EventFilter) -> Vec<String> {
        let mut sql = String::from("SELECT id FROM events WHERE 1");
        let mut binds: Vec<Bind> = Vec::new();
        if let Some(source) = &filter.source {
            sql.push_str(" AND source = ?");
            binds.push(source.clone().into());
        }
        if let Some(from) = filter.from_ms {
            sql.push_str(" AND origin_ms >= ?");
            binds.push(from.into());
        }
        if let Some(min) = filter.min_magnitude {
            sql.push_str(" AND magnitude >= ?");
            binds.push(Some(min).into());
        }
        if let Some(q) = &filter.q {
            sql.push_str(" AND instr(epicenter, ?) > 0");
            binds.push(q.clone().into());
        }
        sql.push_str(" ORDER BY sort_ms DESC, last_report_id DESC");
        let mut query = Statements::one(&sql);
        for bind in binds {
            query.bind(bind);
        }
        let rows = query.sqlite_rows(store.db.sqlite().unwrap()).await.unwrap();
        rows.iter().map(|row| row.get(0)).collect()
    }

    async fn check_every_filter(store: &Store, round: &str) {
        let horizon = store.high_water().await.unwrap();
        for filter in filters() {
            let page = store.events(&filter, horizon).await.unwrap();
            let listed: Vec<String> = page.items.iter().map(|e| e.id.clone()).collect();
            let want = expected(store, &filter).await;
            assert_eq!(listed, want, "{round}: {}", filter.count_key());
            assert_eq!(
                page.total,
                want.len() as i64,
                "{round}: {}",
                filter.count_key()
            );
        }
    }

    /// Lists kept by earlier requests and caught up from the versions since are what a full read gives: new
    /// events in their places, events that moved (an origin time learnt later) moved, events that stopped
    /// matching (a lower magnitude, a new epicentre) gone, and others' places kept.
    #[tokio::test]
    async fn kept_lists_caught_up_after_new_versions_list_what_a_full_read_lists() {
        let (store, mut writer, dir) = archive("listed-catch-up", 0).await;
        let session = writer
            .open_session(
                "/all_eew",
                crate::SocketRole::Redundant,
                "ws://test.invalid/all_eew",
            )
            .await
            .unwrap();
        let t = |s: &str| Some(format!("2025-05-0{s}T00:00:00Z"));
        let first = vec![
            version(session, 1, "sc/a", 1, t("1").as_deref(), "四川泸定", 5.5),
            version(session, 2, "sc/b", 1, None, "四川雅安", 4.2),
            version(session, 3, "cq/c", 1, t("3").as_deref(), "重庆荣昌", 3.9),
            version(session, 4, "sc/d", 1, t("2").as_deref(), "四川宜宾", 6.1),
            version(session, 5, "cea/e", 1, t("4").as_deref(), "云南大理", 5.0),
        ];
        writer.ingest(&first).await.unwrap();
        check_every_filter(&store, "first read").await;

        let rounds = [
            // b learns its origin time (it moves), a falls below 5 and 4.0 stays, c is revised in place.
            vec![
                version(session, 6, "sc/b", 2, t("5").as_deref(), "四川雅安", 4.2),
                version(session, 7, "sc/a", 2, t("1").as_deref(), "四川泸定", 4.8),
                version(session, 8, "cq/c", 2, t("3").as_deref(), "重庆荣昌", 4.0),
            ],
            // A new event that sorts in the middle; d's new epicentre is no longer in 四川.
            vec![
                version(session, 9, "sc/f", 1, t("3").as_deref(), "四川甘孜", 5.2),
                version(session, 10, "sc/d", 2, t("2").as_deref(), "云南昭通", 6.0),
            ],
            // An older revision arriving late does not become the latest, but the event changed.
            vec![version(
                session,
                11,
                "sc/f",
                0,
                t("3").as_deref(),
                "四川甘孜",
                3.0,
            )],
        ];
        for (index, round) in rounds.iter().enumerate() {
            writer.ingest(round).await.unwrap();
            check_every_filter(&store, &format!("after round {}", index + 1)).await;
        }

        // The last answers came from caught-up lists, not from reading each list again: a marker kept in one
        // list at the current horizon is still in it after one more version.
        let horizon = store.high_water().await.unwrap();
        let everything = filters().remove(0);
        let key = everything.count_key();
        let mut marked = store.event_matches.lock().unwrap().get(&key).unwrap();
        assert_eq!(marked.horizon, horizon);
        let mut events = marked.events.as_ref().clone();
        events.push(Listed {
            sort_ms: i64::MIN,
            last_id: 0,
            rowid: i64::MAX,
        });
        marked.events = std::sync::Arc::new(events);
        store
            .event_matches
            .lock()
            .unwrap()
            .keep(key.clone(), marked);
        writer
            .ingest(&[version(
                session,
                12,
                "cq/g",
                1,
                t("6").as_deref(),
                "重庆",
                4.4,
            )])
            .await
            .unwrap();
        let horizon = store.high_water().await.unwrap();
        let page = store.events(&everything, horizon).await.unwrap();
        assert_eq!(
            page.total,
            expected(&store, &everything).await.len() as i64 + 1,
            "the list was caught up from the kept one"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
