//! Storage of the self-sensing (`hyp`) family: append-only reports kept as the shaper's exact payload, event
//! summaries with the visibility rule, event-level station peaks, and the detector/recorder state.

use crate::db::{Columns, WriteConn};
use crate::statements::Statements;
use crate::store::Store;
use anyhow::Context;
use hyp_core::EventStatus;
use serde::Deserialize;
use sha2::{Digest, Sha256};

/// A peak of one station for one layered metric (`surface:pgaGal`, `underground:intensity`, ...).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StationMetric {
    pub station: String,
    #[serde(default)]
    pub name: Option<String>,
    pub latitude: f64,
    pub longitude: f64,
    pub metric: String,
    pub peak: f64,
    /// Observation time (Unix ms) of the frame that carried the peak.
    pub source_at: i64,
    /// When that frame was received (Unix ms).
    pub received_at: i64,
    /// Filled in later from the image archive rather than seen live.
    #[serde(default)]
    pub recovered: bool,
}

/// One shaped report to append.
#[derive(Debug, Clone)]
pub struct HypReportInput {
    pub event_id: String,
    pub number: i64,
    pub status: EventStatus,
    pub first_at: i64,
    pub reported_at: i64,
    pub recorded_at: i64,
    pub region: Option<String>,
    /// The report exactly as the shaper produced it.
    pub payload: Vec<u8>,
    /// name@sha256 of the shaper component.
    pub shaper: String,
    /// The detector solution (JSON) the payload was shaped from.
    pub solution: Vec<u8>,
    pub metrics: Vec<StationMetric>,
}

/// An event row as the API needs it.
#[derive(Debug, Clone)]
pub struct HypEventRow {
    pub id: String,
    pub first_at: i64,
    pub updated_at: i64,
    pub status: EventStatus,
    pub region: String,
    pub latest_number: i64,
}

/// A stored report: the exact payload and its SHA-256.
#[derive(Debug, Clone)]
pub struct HypReportRow {
    pub number: i64,
    pub payload: Vec<u8>,
    pub sha256: String,
}

/// A published report with its place in the live channel.
#[derive(Debug, Clone)]
pub struct HypLiveRow {
    pub seq: i64,
    pub event_id: String,
    pub report: HypReportRow,
}

/// A station of an event with its metrics.
#[derive(Debug, Clone)]
pub struct HypStationRow {
    pub code: String,
    pub name: Option<String>,
    pub latitude: f64,
    pub longitude: f64,
    pub metrics: Vec<StationMetric>,
}

/// The latest state a detection or recording process wrote (its own document) and when (Unix ms).
#[derive(Debug, Clone)]
pub struct HypStateRow {
    pub state: serde_json::Value,
    pub updated_at: i64,
}

/// Filters of `/hyp/events`, already validated.
#[derive(Debug, Clone, Default)]
pub struct HypFilter {
    pub q: Option<String>,
    /// First detection at or after this (Unix ms).
    pub from_ms: i64,
    /// First detection before this (Unix ms).
    pub to_ms: Option<i64>,
    /// Origin time, box, circle, depth and magnitude of the latest report (as the EEW list).
    pub place: crate::PlaceFilter,
    pub order: crate::Order,
    pub page: i64,
    pub limit: i64,
}

/// Only events that left `candidate` and that no operator hid are public.
const PUBLIC: &str = "public = 1 AND hidden = 0";

fn event_row(row: &dyn Columns) -> anyhow::Result<HypEventRow> {
    let status = row.text("status");
    Ok(HypEventRow {
        id: row.text("id"),
        first_at: row.int("first_at"),
        updated_at: row.int("updated_at"),
        status: EventStatus::parse(&status).with_context(|| {
            format!("the archive holds `{status}` as a self-sensing event status, which is not one")
        })?,
        region: row.text("region"),
        latest_number: row.int("latest_number"),
    })
}

/// The columns [`event_row`] reads.
const EVENT_COLUMNS: &str = "id, first_at, updated_at, status, region, latest_number";

fn report_row(row: &dyn Columns) -> HypReportRow {
    HypReportRow {
        number: row.int("number"),
        payload: row.bytes("payload"),
        sha256: row.text("sha256"),
    }
}

/// [`Writer::append_hyp_report`] inside the caller's transaction, on either backend.
pub(crate) async fn append_report<C: WriteConn>(
    conn: &mut C,
    input: &HypReportInput,
) -> anyhow::Result<String> {
    let sha256 = hex::encode(Sha256::digest(&input.payload));
    let mut query = Statements::one("SELECT latest_number FROM hyp_events WHERE id = ?");
    query.bind(input.event_id.as_str());
    let latest: Option<i64> = conn
        .rows(query, |r| r.int("latest_number"))
        .await?
        .into_iter()
        .next();
    let expected = latest.unwrap_or(0) + 1;
    anyhow::ensure!(
        input.number == expected,
        "report {} of {}: the next report number is {expected}",
        input.number,
        input.event_id
    );
    let leaves_candidate = input.status != EventStatus::Candidate;
    let position = crate::positions::Position::of_hyp_payload(&input.payload);
    let mut writes = Statements::default();
    match latest {
        None => {
            writes
                .push(
                    "INSERT INTO hyp_events (id, first_at, updated_at, status, region, public, latest_number, \
                     latitude, longitude, depth_km, ux, uy, uz, magnitude, origin_ms) \
                     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                )
                .bind(input.event_id.as_str())
                .bind(input.first_at)
                .bind(input.reported_at)
                .bind(input.status.as_str())
                .bind(input.region.clone().unwrap_or_default())
                .bind(i64::from(leaves_candidate))
                .bind(input.number);
            for value in position.binds() {
                writes.bind(value);
            }
            writes.bind(position.magnitude).bind(position.origin_ms);
        }
        Some(_) => {
            writes
                .push(
                    "UPDATE hyp_events SET updated_at = CASE WHEN updated_at > ? THEN updated_at ELSE ? END, \
                     status = ?, latest_number = ?, public = CASE WHEN ? THEN 1 ELSE public END, \
                     region = COALESCE(?, region), latitude = ?, longitude = ?, depth_km = ?, ux = ?, uy = ?, \
                     uz = ?, magnitude = ?, origin_ms = ? WHERE id = ?",
                )
                .bind(input.reported_at)
                .bind(input.reported_at)
                .bind(input.status.as_str())
                .bind(input.number)
                .bind(leaves_candidate)
                .bind(input.region.clone());
            // Report numbers only grow: the new report is the latest, and the event is where it says.
            for value in position.binds() {
                writes.bind(value);
            }
            writes
                .bind(position.magnitude)
                .bind(position.origin_ms)
                .bind(input.event_id.as_str());
        }
    }
    writes
        .push(
            // `seq`: the live channel's cursor, the next in archive order (one detector writes at a time).
            "INSERT INTO hyp_reports (event_id, number, payload, sha256, status, reported_at, recorded_at, shaper, \
             solution, seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM hyp_reports))",
        )
        .bind(input.event_id.as_str())
        .bind(input.number)
        .bind(input.payload.clone())
        .bind(sha256.as_str())
        .bind(input.status.as_str())
        .bind(input.reported_at)
        .bind(input.recorded_at)
        .bind(input.shaper.as_str())
        .bind(input.solution.clone());
    conn.run(writes).await?;
    store_metrics(conn, &input.event_id, &input.metrics).await?;
    Ok(sha256)
}

/// [`Writer::add_hyp_station_metrics`] inside the caller's transaction, on either backend.
pub(crate) async fn add_metrics<C: WriteConn>(
    conn: &mut C,
    event_id: &str,
    metrics: &[StationMetric],
) -> anyhow::Result<u64> {
    let mut query = Statements::one("SELECT 1 AS known FROM hyp_events WHERE id = ?");
    query.bind(event_id);
    let known = conn.rows(query, |_| ()).await?;
    anyhow::ensure!(!known.is_empty(), "no hyp event `{event_id}`");
    store_metrics(conn, event_id, metrics).await
}

pub(crate) fn set_hidden(event_id: &str, hidden: bool) -> Statements {
    let mut s = Statements::one("UPDATE hyp_events SET hidden = ? WHERE id = ?");
    s.bind(i64::from(hidden)).bind(event_id);
    s
}

pub(crate) fn set_state(name: &str, at: i64, state: &serde_json::Value) -> Statements {
    let mut s = Statements::one(
        "INSERT INTO hyp_state (name, updated_at, state) VALUES (?, ?, ?) \
         ON CONFLICT (name) DO UPDATE SET updated_at = excluded.updated_at, state = excluded.state",
    );
    s.bind(name).bind(at).bind(state.to_string());
    s
}

/// Adds station peaks to an event: the station joins it, and an event-level peak only grows. Returns how many
/// peaks were added or raised.
async fn store_metrics<C: WriteConn>(
    conn: &mut C,
    event_id: &str,
    metrics: &[StationMetric],
) -> anyhow::Result<u64> {
    let mut changed = 0;
    for metric in metrics {
        let mut station = Statements::one(
            "INSERT INTO hyp_stations (event_id, code, name, latitude, longitude) VALUES (?, ?, ?, ?, ?) \
             ON CONFLICT (event_id, code) DO UPDATE SET name = COALESCE(excluded.name, hyp_stations.name)",
        );
        station
            .bind(event_id)
            .bind(metric.station.as_str())
            .bind(metric.name.clone())
            .bind(Some(metric.latitude))
            .bind(Some(metric.longitude));
        conn.run(station).await?;
        // The event-level peak only grows.
        let mut peak = Statements::one(
            "INSERT INTO hyp_station_metrics (event_id, station, metric, peak, source_at, received_at, recovered) \
             VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (event_id, station, metric) DO UPDATE SET \
             peak = excluded.peak, source_at = excluded.source_at, received_at = excluded.received_at, \
             recovered = excluded.recovered WHERE excluded.peak > hyp_station_metrics.peak",
        );
        peak.bind(event_id)
            .bind(metric.station.as_str())
            .bind(metric.metric.as_str())
            .bind(Some(metric.peak))
            .bind(metric.source_at)
            .bind(metric.received_at)
            .bind(i64::from(metric.recovered));
        changed += conn.run(peak).await?;
    }
    Ok(changed)
}

impl Store {
    /// Public events, newest first detection first, and how many match.
    pub async fn hyp_events(&self, filter: &HypFilter) -> anyhow::Result<(Vec<HypEventRow>, i64)> {
        let pattern = filter.q.as_deref().map(crate::read::like_pattern);
        let mut clauses = vec![
            PUBLIC.to_string(),
            "first_at >= ?".to_string(),
            "(? IS NULL OR first_at < ?)".to_string(),
            "(? IS NULL OR id LIKE ? ESCAPE '\\')".to_string(),
        ];
        let mut binds: Vec<crate::statements::Value> = vec![
            filter.from_ms.into(),
            filter.to_ms.into(),
            filter.to_ms.into(),
            pattern.clone().into(),
            pattern.into(),
        ];
        filter
            .place
            .conditions("", "updated_at", &mut clauses, &mut binds);
        let clause = clauses.join(" AND ");
        let filtered = |sql: &str| {
            let mut query = Statements::one(sql);
            for bind in &binds {
                query.bind(bind.clone());
            }
            query
        };
        let total = self
            .db
            .one(
                filtered(&format!(
                    "SELECT COUNT(*) AS total FROM hyp_events WHERE {clause}"
                )),
                |r| r.int("total"),
            )
            .await?;
        let mut page = filtered(&format!(
            "SELECT {EVENT_COLUMNS} FROM hyp_events WHERE {clause} ORDER BY {} LIMIT ? OFFSET ?",
            filter.order.sql("", "first_at", "id")
        ));
        page.bind(filter.limit)
            .bind((filter.page - 1).saturating_mul(filter.limit));
        Ok((self.db.try_rows(page, event_row).await?, total))
    }

    /// A public event; hidden, candidate-only and missing events are all `None`.
    pub async fn hyp_event(&self, id: &str) -> anyhow::Result<Option<HypEventRow>> {
        let mut query = Statements::one(&format!(
            "SELECT {EVENT_COLUMNS} FROM hyp_events WHERE id = ? AND {PUBLIC}"
        ));
        query.bind(id);
        self.db.row(query, event_row).await?.transpose()
    }

    /// Every report of an event, by number.
    pub async fn hyp_reports(&self, id: &str) -> anyhow::Result<Vec<HypReportRow>> {
        let mut query = Statements::one(
            "SELECT number, payload, sha256 FROM hyp_reports WHERE event_id = ? ORDER BY number",
        );
        query.bind(id);
        self.db.rows(query, report_row).await
    }

    /// One report of an event.
    pub async fn hyp_report(&self, id: &str, number: i64) -> anyhow::Result<Option<HypReportRow>> {
        let mut query = Statements::one(
            "SELECT number, payload, sha256 FROM hyp_reports WHERE event_id = ? AND number = ?",
        );
        query.bind(id).bind(number);
        self.db.row(query, report_row).await
    }

    /// The live self-sensing channel's horizon: the last report archived (0 for none).
    pub async fn hyp_high_water(&self) -> anyhow::Result<i64> {
        self.db
            .one(
                Statements::one("SELECT COALESCE(MAX(seq), 0) AS high FROM hyp_reports"),
                |r| r.int("high"),
            )
            .await
    }

    /// The published reports archived in (`after`, `until`], in archive order: those no longer `candidate`, of
    /// events an operator has not hidden. (A report's status never changes, so a live consumer and one
    /// replaying later get the same reports; hiding an event stops its reports from then on.)
    pub async fn hyp_published(&self, after: i64, until: i64) -> anyhow::Result<Vec<HypLiveRow>> {
        let mut query = Statements::one(
            "SELECT r.seq, r.event_id, r.number, r.payload, r.sha256 FROM hyp_reports r \
             JOIN hyp_events e ON e.id = r.event_id \
             WHERE r.seq > ? AND r.seq <= ? AND r.status <> 'candidate' AND e.hidden = 0 ORDER BY r.seq",
        );
        query.bind(after).bind(until);
        self.db
            .rows(query, |row| HypLiveRow {
                seq: row.int("seq"),
                event_id: row.text("event_id"),
                report: report_row(row),
            })
            .await
    }

    /// The stations the algorithm associated with an event, with their peaks.
    pub async fn hyp_stations(&self, id: &str) -> anyhow::Result<Vec<HypStationRow>> {
        let mut query = Statements::one(
            "SELECT code, name, latitude, longitude FROM hyp_stations WHERE event_id = ? ORDER BY code",
        );
        query.bind(id);
        let mut stations = self
            .db
            .rows(query, |s| HypStationRow {
                code: s.text("code"),
                name: s.opt_text("name"),
                latitude: s.real("latitude"),
                longitude: s.real("longitude"),
                metrics: Vec::new(),
            })
            .await?;
        let mut query = Statements::one(
            "SELECT station, metric, peak, source_at, received_at, recovered FROM hyp_station_metrics \
             WHERE event_id = ? ORDER BY station, metric",
        );
        query.bind(id);
        let metrics = self
            .db
            .rows(query, |m| StationMetric {
                station: m.text("station"),
                name: None,
                latitude: 0.0,
                longitude: 0.0,
                metric: m.text("metric"),
                peak: m.real("peak"),
                source_at: m.int("source_at"),
                received_at: m.int("received_at"),
                recovered: m.int("recovered") != 0,
            })
            .await?;
        for station in &mut stations {
            station.metrics = metrics
                .iter()
                .filter(|m| m.station == station.code)
                .map(|m| StationMetric {
                    latitude: station.latitude,
                    longitude: station.longitude,
                    ..m.clone()
                })
                .collect();
        }
        Ok(stations)
    }

    /// The latest state recorded under `name` (`detector`, `recorder`).
    pub async fn hyp_state(&self, name: &str) -> anyhow::Result<Option<HypStateRow>> {
        let mut query = Statements::one("SELECT state, updated_at FROM hyp_state WHERE name = ?");
        query.bind(name);
        let row = self
            .db
            .row(query, |r| (r.text("state"), r.int("updated_at")))
            .await?;
        Ok(row.and_then(|(state, updated_at)| {
            Some(HypStateRow {
                state: serde_json::from_str(&state).ok()?,
                updated_at,
            })
        }))
    }

    /// The algorithm of the most recent report, if any.
    pub async fn hyp_latest_algorithm(&self) -> anyhow::Result<Option<String>> {
        let payload = self
            .db
            .row(
                Statements::one(
                    "SELECT payload FROM hyp_reports ORDER BY recorded_at DESC LIMIT 1",
                ),
                |r| r.bytes("payload"),
            )
            .await?;
        Ok(payload
            .and_then(|p| serde_json::from_slice::<serde_json::Value>(&p).ok())
            .and_then(|v| v["algorithm"].as_str().map(str::to_string)))
    }

    /// The most recent solutions with the payload each was shaped into, newest first (a shaper's canary).
    pub async fn hyp_recent_solutions(
        &self,
        limit: i64,
    ) -> anyhow::Result<Vec<(String, Vec<u8>, Vec<u8>)>> {
        let mut query = Statements::one(
            "SELECT event_id, number, solution, payload FROM hyp_reports ORDER BY recorded_at DESC LIMIT ?",
        );
        query.bind(limit);
        self.db
            .rows(query, |r| {
                let label = format!("{} report {}", r.text("event_id"), r.int("number"));
                (label, r.bytes("solution"), r.bytes("payload"))
            })
            .await
    }

    /// The solution of each event's latest report, for events the latest report left open (`preliminary`,
    /// `tracking`): what a restarted detector must close as `interrupted`.
    pub async fn hyp_open_solutions(&self) -> anyhow::Result<Vec<Vec<u8>>> {
        let query = Statements::one(
            "SELECT r.solution FROM hyp_events e JOIN hyp_reports r ON r.event_id = e.id AND r.number = e.latest_number \
             WHERE e.status IN ('preliminary', 'tracking') ORDER BY e.first_at",
        );
        self.db.rows(query, |r| r.bytes("solution")).await
    }

    /// The solution of an event's latest report.
    pub async fn hyp_latest_solution(&self, id: &str) -> anyhow::Result<Option<Vec<u8>>> {
        let mut query = Statements::one(
            "SELECT r.solution FROM hyp_events e JOIN hyp_reports r ON r.event_id = e.id AND r.number = e.latest_number \
             WHERE e.id = ?",
        );
        query.bind(id);
        self.db.row(query, |r| r.bytes("solution")).await
    }

    /// Events, public events and reports in the hyp archive.
    pub async fn hyp_counts(&self) -> anyhow::Result<(i64, i64, i64)> {
        let query = Statements::one(&format!(
            "SELECT (SELECT COUNT(*) FROM hyp_events) AS events, \
             (SELECT COUNT(*) FROM hyp_events WHERE {PUBLIC}) AS public, \
             (SELECT COUNT(*) FROM hyp_reports) AS reports"
        ));
        self.db
            .one(query, |r| {
                (r.int("events"), r.int("public"), r.int("reports"))
            })
            .await
    }
}
