//! Reads of events: the filtered `/events` pages and their kept lists, one event with every version, the
//! latest event of a channel, the months.

use super::place::{Order, PlaceFilter};
use crate::counts::{Listed, MatchList};
use crate::db::{Columns, ReadPool};
use crate::rows::{EventRow, EventVersions, MonthRow, VersionRow};
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
    /// Origin time, box, circle, depth and magnitude (the same filters as the self-sensing list).
    pub place: PlaceFilter,
    pub order: Order,
    pub page: i64,
    pub limit: i64,
}

impl EventFilter {
    /// What identifies the filter's total and its list of matches: everything but the page and the order.
    fn count_key(&self) -> String {
        format!(
            "{:?}|{:?}|{:?}|{:?}|{}",
            self.source,
            self.from_ms,
            self.to_ms,
            self.q,
            self.place.key()
        )
    }
}

/// Versions after a kept list's horizon up to which it is caught up instead of read again (each changed event
/// is one row to hand over; a whole list is one).
const CATCH_UP_VERSIONS: i64 = 4096;

/// One page of events and how many match the filter.
pub struct EventPage {
    pub items: Vec<EventRow>,
    pub total: i64,
}

/// The filter's condition on `e` (`1 = 1` for none) and the values of its `?`s.
pub(crate) fn filter_sql(filter: &EventFilter) -> (String, Vec<Bind>) {
    let mut clauses: Vec<String> = Vec::new();
    let mut binds: Vec<Bind> = Vec::new();
    if let Some(source) = &filter.source {
        clauses.push("e.source = ?".to_string());
        binds.push(source.clone().into());
    }
    if let Some(from) = filter.from_ms {
        clauses.push("e.origin_ms >= ?".to_string());
        binds.push(from.into());
    }
    if let Some(to) = filter.to_ms {
        clauses.push("e.origin_ms < ?".to_string());
        binds.push(to.into());
    }
    filter
        .place
        .conditions("e.", "updated_ms", &mut clauses, &mut binds);
    if let Some(q) = &filter.q {
        clauses.push(
            "(e.epicenter LIKE ? ESCAPE '\\' OR e.source_event_id LIKE ? ESCAPE '\\' \
             OR e.upstream_ids LIKE ? ESCAPE '\\')"
                .to_string(),
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
        "SELECT e.{key} AS rid, e.sort_ms, e.last_report_id, e.magnitude, CASE WHEN {matches_sql} THEN 1 ELSE 0 END AS matches \
         FROM events e WHERE e.id IN (SELECT event_key FROM reports WHERE id > ? AND id <= ?)",
        key = db.event_key_column()
    )
}

/// A page of the events `where_sql` selects, by `LIMIT ? OFFSET ?`: the page's keys first, from an index that
/// holds every filtered column in list order (a deep OFFSET skips index entries, not rows); then their columns.
/// On SQLite CROSS JOIN keeps that order of the loops: left to itself, SQLite 3.46 walked the whole list index
/// to save sorting 100 rows, looking up every event's text (200-600 ms a page without a channel filter).
fn offset_page_sql(db: &ReadPool, where_sql: &str, order: Order) -> String {
    let order = order.sql("e.", "e.sort_ms", "e.last_report_id");
    format!(
        "SELECT {EVENT_COLUMNS} FROM (SELECT e.{key} AS rid FROM events e {where_sql} \
         ORDER BY {order} LIMIT ? OFFSET ?) page \
         {join} events e ON e.{key} = page.rid {join} report_texts t ON t.id = e.latest_report_id \
         ORDER BY {order}",
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

/// `%` and `_` in user text match themselves in a LIKE pattern escaped with `\`.
pub(crate) fn like_pattern(text: &str) -> String {
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
    /// A page of events and the filter's total. `horizon` is [`Store::high_water`], read by the caller before
    /// (a total is kept for the horizon it is known to be current at).
    pub async fn events(&self, filter: &EventFilter, horizon: i64) -> anyhow::Result<EventPage> {
        let (matches_sql, binds) = filter_sql(filter);
        let key = filter.count_key();
        // A kept list is in time order, read either way, and sorted by magnitude when a page asks for it.
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
        let mut list = Statements::one(&offset_page_sql(&self.db, &where_sql, filter.order));
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
        let rowid = |event: &Listed| event.rowid;
        let page: Vec<i64> = match filter.order {
            Order::Newest => list
                .events
                .iter()
                .skip(offset)
                .take(limit)
                .map(rowid)
                .collect(),
            Order::Oldest => list
                .events
                .iter()
                .rev()
                .skip(offset)
                .take(limit)
                .map(rowid)
                .collect(),
            Order::Largest | Order::Smallest => list
                .by_magnitude(filter.order == Order::Largest)
                .iter()
                .skip(offset)
                .take(limit)
                .copied()
                .collect(),
        };
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
    /// each): `rowid,sort_ms,last_report_id,magnitude` of each (an unknown magnitude empty), joined by commas.
    async fn read_list(
        &self,
        horizon: i64,
        matches_sql: &str,
        binds: &[Bind],
    ) -> anyhow::Result<MatchList> {
        let sql = format!(
            "SELECT string_agg(CAST(rid AS TEXT) || ',' || CAST(sort_ms AS TEXT) || ',' || CAST(last_id AS TEXT) \
             || ',' || COALESCE(CAST(magnitude AS TEXT), ''), ',' ORDER BY sort_ms DESC, last_id DESC) AS list FROM \
             (SELECT e.{} AS rid, e.sort_ms, e.last_report_id AS last_id, e.magnitude FROM events e \
             WHERE {matches_sql}) AS matching",
            self.db.event_key_column()
        );
        let mut query = Statements::one(&sql);
        for bind in binds {
            query.bind(bind.clone());
        }
        let found = self
            .db
            .one(query, |r| r.opt_text("list"))
            .await?
            .unwrap_or_default();
        let fields: Vec<&str> = if found.is_empty() {
            Vec::new()
        } else {
            found.split(',').collect()
        };
        anyhow::ensure!(
            fields.len().is_multiple_of(4),
            "an event list came back cut short"
        );
        let events = fields
            .chunks_exact(4)
            .map(|n| {
                anyhow::Ok(Listed {
                    rowid: n[0].parse()?,
                    sort_ms: n[1].parse()?,
                    last_id: n[2].parse()?,
                    magnitude: (!n[3].is_empty()).then(|| n[3].parse()).transpose()?,
                })
            })
            .collect::<anyhow::Result<Vec<Listed>>>()?;
        Ok(MatchList::new(horizon, events))
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
                        magnitude: row.opt_real("magnitude"),
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
}

#[cfg(test)]
#[path = "events_tests.rs"]
mod tests;
