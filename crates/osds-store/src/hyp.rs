//! Storage of the self-sensing (`hyp`) family: append-only reports kept as the shaper's exact payload, event
//! summaries with the visibility rule, event-level station peaks, and the detector/recorder state.

use crate::store::Store;
use crate::writer::Writer;
use crate::writer::begin;
use anyhow::Context;
use serde::Deserialize;
use sha2::{Digest, Sha256};
use sqlx::Row;

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
    pub status: String,
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
    pub status: String,
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
    pub from_ms: i64,
    pub to_ms: Option<i64>,
    pub page: i64,
    pub limit: i64,
}

/// Only events that left `candidate` and that no operator hid are public.
const PUBLIC: &str = "public = 1 AND hidden = 0";

fn event_row(row: &sqlx::sqlite::SqliteRow) -> HypEventRow {
    HypEventRow {
        id: row.get("id"),
        first_at: row.get("first_at"),
        updated_at: row.get("updated_at"),
        status: row.get("status"),
        region: row.get("region"),
        latest_number: row.get("latest_number"),
    }
}

impl Writer {
    /// Appends one report in a durable transaction. Report numbers run from 1 without gaps; a number that is
    /// taken, or that skips one, is refused (reports are never replaced).
    pub async fn append_hyp_report(&mut self, input: &HypReportInput) -> anyhow::Result<String> {
        anyhow::ensure!(
            hyp_core::STATUSES.contains(&input.status.as_str()),
            "unknown status `{}`",
            input.status
        );
        let sha256 = hex::encode(Sha256::digest(&input.payload));
        self.settled = false;
        let mut tx = begin(&mut self.conn, &self.options).await?;
        let latest: Option<i64> =
            sqlx::query_scalar("SELECT latest_number FROM hyp_events WHERE id = ?")
                .bind(&input.event_id)
                .fetch_optional(&mut *tx)
                .await?;
        let expected = latest.unwrap_or(0) + 1;
        anyhow::ensure!(
            input.number == expected,
            "report {} of {}: the next report number is {expected}",
            input.number,
            input.event_id
        );
        let leaves_candidate = input.status != "candidate";
        match latest {
            None => {
                sqlx::query(
                    "INSERT INTO hyp_events (id, first_at, updated_at, status, region, public, latest_number) \
                     VALUES (?, ?, ?, ?, ?, ?, ?)",
                )
                .bind(&input.event_id)
                .bind(input.first_at)
                .bind(input.reported_at)
                .bind(&input.status)
                .bind(input.region.clone().unwrap_or_default())
                .bind(leaves_candidate)
                .bind(input.number)
                .execute(&mut *tx)
                .await?;
            }
            Some(_) => {
                sqlx::query(
                    "UPDATE hyp_events SET updated_at = MAX(updated_at, ?), status = ?, latest_number = ?, \
                     public = MAX(public, ?), region = COALESCE(?, region) WHERE id = ?",
                )
                .bind(input.reported_at)
                .bind(&input.status)
                .bind(input.number)
                .bind(leaves_candidate)
                .bind(&input.region)
                .bind(&input.event_id)
                .execute(&mut *tx)
                .await?;
            }
        }
        sqlx::query(
            "INSERT INTO hyp_reports (event_id, number, payload, sha256, status, reported_at, recorded_at, shaper, solution) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(&input.event_id)
        .bind(input.number)
        .bind(&input.payload)
        .bind(&sha256)
        .bind(&input.status)
        .bind(input.reported_at)
        .bind(input.recorded_at)
        .bind(&input.shaper)
        .bind(&input.solution)
        .execute(&mut *tx)
        .await?;
        store_metrics(&mut tx, &input.event_id, &input.metrics).await?;
        tx.commit().await.context("commit hyp report")?;
        self.checkpoints.committed(1);
        Ok(sha256)
    }

    /// Adds station peaks recovered later from the image archive to an event (reports are never touched).
    /// Returns how many peaks were added or raised; an unknown event is an error.
    pub async fn add_hyp_station_metrics(
        &mut self,
        event_id: &str,
        metrics: &[StationMetric],
    ) -> anyhow::Result<u64> {
        self.settled = false;
        let mut tx = begin(&mut self.conn, &self.options).await?;
        let known: Option<i64> = sqlx::query_scalar("SELECT 1 FROM hyp_events WHERE id = ?")
            .bind(event_id)
            .fetch_optional(&mut *tx)
            .await?;
        anyhow::ensure!(known.is_some(), "no hyp event `{event_id}`");
        let changed = store_metrics(&mut tx, event_id, metrics).await?;
        tx.commit()
            .await
            .context("commit recovered station peaks")?;
        Ok(changed)
    }

    /// Withdraws an event from the public API (or brings it back). Returns false when there is no such event.
    pub async fn set_hyp_hidden(&mut self, event_id: &str, hidden: bool) -> anyhow::Result<bool> {
        let done = sqlx::query("UPDATE hyp_events SET hidden = ? WHERE id = ?")
            .bind(hidden)
            .bind(event_id)
            .execute(&mut self.conn)
            .await?;
        Ok(done.rows_affected() > 0)
    }

    /// Records the latest state of the detector or the recorder.
    pub async fn set_hyp_state(
        &mut self,
        name: &str,
        at: i64,
        state: &serde_json::Value,
    ) -> anyhow::Result<()> {
        sqlx::query(
            "INSERT INTO hyp_state (name, updated_at, state) VALUES (?, ?, ?) \
             ON CONFLICT (name) DO UPDATE SET updated_at = excluded.updated_at, state = excluded.state",
        )
        .bind(name)
        .bind(at)
        .bind(state.to_string())
        .execute(&mut self.conn)
        .await?;
        Ok(())
    }
}

/// Adds station peaks to an event: the station joins it, and an event-level peak only grows. Returns how many
/// peaks were added or raised.
async fn store_metrics(
    tx: &mut sqlx::Transaction<'_, sqlx::Sqlite>,
    event_id: &str,
    metrics: &[StationMetric],
) -> anyhow::Result<u64> {
    let mut changed = 0;
    for metric in metrics {
        sqlx::query(
                "INSERT INTO hyp_stations (event_id, code, name, latitude, longitude) VALUES (?, ?, ?, ?, ?) \
                 ON CONFLICT (event_id, code) DO UPDATE SET name = COALESCE(excluded.name, name)",
            )
            .bind(event_id)
            .bind(&metric.station)
            .bind(&metric.name)
            .bind(metric.latitude)
            .bind(metric.longitude)
            .execute(&mut **tx)
            .await?;
        // The event-level peak only grows.
        changed += sqlx::query(
                "INSERT INTO hyp_station_metrics (event_id, station, metric, peak, source_at, received_at, recovered) \
                 VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (event_id, station, metric) DO UPDATE SET \
                 peak = excluded.peak, source_at = excluded.source_at, received_at = excluded.received_at, \
                 recovered = excluded.recovered WHERE excluded.peak > peak",
            )
            .bind(event_id)
            .bind(&metric.station)
            .bind(&metric.metric)
            .bind(metric.peak)
            .bind(metric.source_at)
            .bind(metric.received_at)
            .bind(metric.recovered)
            .execute(&mut **tx)
            .await?
            .rows_affected();
    }
    Ok(changed)
}

impl Store {
    /// Public events, newest first detection first, and how many match.
    pub async fn hyp_events(&self, filter: &HypFilter) -> anyhow::Result<(Vec<HypEventRow>, i64)> {
        let pattern = filter.q.as_deref().map(super::read::like_pattern);
        let clause = format!(
            "{PUBLIC} AND first_at >= ?1 AND (?2 IS NULL OR first_at < ?2) AND (?3 IS NULL OR id LIKE ?3 ESCAPE '\\')"
        );
        let total: i64 =
            sqlx::query_scalar(&format!("SELECT COUNT(*) FROM hyp_events WHERE {clause}"))
                .bind(filter.from_ms)
                .bind(filter.to_ms)
                .bind(&pattern)
                .fetch_one(self.db.sqlite()?)
                .await?;
        let rows = sqlx::query(&format!(
            "SELECT * FROM hyp_events WHERE {clause} ORDER BY first_at DESC, id LIMIT ?4 OFFSET ?5"
        ))
        .bind(filter.from_ms)
        .bind(filter.to_ms)
        .bind(&pattern)
        .bind(filter.limit)
        .bind((filter.page - 1).saturating_mul(filter.limit))
        .fetch_all(self.db.sqlite()?)
        .await?;
        Ok((rows.iter().map(event_row).collect(), total))
    }

    /// A public event; hidden, candidate-only and missing events are all `None`.
    pub async fn hyp_event(&self, id: &str) -> anyhow::Result<Option<HypEventRow>> {
        let row = sqlx::query(&format!(
            "SELECT * FROM hyp_events WHERE id = ? AND {PUBLIC}"
        ))
        .bind(id)
        .fetch_optional(self.db.sqlite()?)
        .await?;
        Ok(row.as_ref().map(event_row))
    }

    /// Every report of an event, by number.
    pub async fn hyp_reports(&self, id: &str) -> anyhow::Result<Vec<HypReportRow>> {
        let rows = sqlx::query(
            "SELECT number, payload, sha256 FROM hyp_reports WHERE event_id = ? ORDER BY number",
        )
        .bind(id)
        .fetch_all(self.db.sqlite()?)
        .await?;
        Ok(rows
            .iter()
            .map(|r| HypReportRow {
                number: r.get("number"),
                payload: r.get("payload"),
                sha256: r.get("sha256"),
            })
            .collect())
    }

    /// One report of an event.
    pub async fn hyp_report(&self, id: &str, number: i64) -> anyhow::Result<Option<HypReportRow>> {
        let row = sqlx::query(
            "SELECT number, payload, sha256 FROM hyp_reports WHERE event_id = ? AND number = ?",
        )
        .bind(id)
        .bind(number)
        .fetch_optional(self.db.sqlite()?)
        .await?;
        Ok(row.map(|r| HypReportRow {
            number: r.get("number"),
            payload: r.get("payload"),
            sha256: r.get("sha256"),
        }))
    }

    /// The stations the algorithm associated with an event, with their peaks.
    pub async fn hyp_stations(&self, id: &str) -> anyhow::Result<Vec<HypStationRow>> {
        let stations = sqlx::query("SELECT * FROM hyp_stations WHERE event_id = ? ORDER BY code")
            .bind(id)
            .fetch_all(self.db.sqlite()?)
            .await?;
        let metrics = sqlx::query(
            "SELECT * FROM hyp_station_metrics WHERE event_id = ? ORDER BY station, metric",
        )
        .bind(id)
        .fetch_all(self.db.sqlite()?)
        .await?;
        Ok(stations
            .iter()
            .map(|s| {
                let code: String = s.get("code");
                let latitude: f64 = s.get("latitude");
                let longitude: f64 = s.get("longitude");
                HypStationRow {
                    metrics: metrics
                        .iter()
                        .filter(|m| m.get::<String, _>("station") == code)
                        .map(|m| StationMetric {
                            station: code.clone(),
                            name: None,
                            latitude,
                            longitude,
                            metric: m.get("metric"),
                            peak: m.get("peak"),
                            source_at: m.get("source_at"),
                            received_at: m.get("received_at"),
                            recovered: m.get("recovered"),
                        })
                        .collect(),
                    name: s.get("name"),
                    code,
                    latitude,
                    longitude,
                }
            })
            .collect())
    }

    /// The latest state recorded under `name` (`detector`, `recorder`).
    pub async fn hyp_state(&self, name: &str) -> anyhow::Result<Option<HypStateRow>> {
        let row = sqlx::query("SELECT state, updated_at FROM hyp_state WHERE name = ?")
            .bind(name)
            .fetch_optional(self.db.sqlite()?)
            .await?;
        Ok(row.and_then(|row| {
            let state = serde_json::from_str(row.get::<&str, _>("state")).ok()?;
            Some(HypStateRow {
                state,
                updated_at: row.get("updated_at"),
            })
        }))
    }

    /// The algorithm of the most recent report, if any.
    pub async fn hyp_latest_algorithm(&self) -> anyhow::Result<Option<String>> {
        let payload: Option<Vec<u8>> =
            sqlx::query_scalar("SELECT payload FROM hyp_reports ORDER BY recorded_at DESC LIMIT 1")
                .fetch_optional(self.db.sqlite()?)
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
        let rows = sqlx::query(
            "SELECT event_id, number, solution, payload FROM hyp_reports ORDER BY recorded_at DESC LIMIT ?",
        )
        .bind(limit)
        .fetch_all(self.db.sqlite()?)
        .await?;
        Ok(rows
            .iter()
            .map(|r| {
                let label = format!(
                    "{} report {}",
                    r.get::<String, _>("event_id"),
                    r.get::<i64, _>("number")
                );
                (label, r.get("solution"), r.get("payload"))
            })
            .collect())
    }

    /// The solution of each event's latest report, for events the latest report left open (`preliminary`,
    /// `tracking`): what a restarted detector must close as `interrupted`.
    pub async fn hyp_open_solutions(&self) -> anyhow::Result<Vec<Vec<u8>>> {
        Ok(sqlx::query_scalar(
            "SELECT r.solution FROM hyp_events e JOIN hyp_reports r ON r.event_id = e.id AND r.number = e.latest_number \
             WHERE e.status IN ('preliminary', 'tracking') ORDER BY e.first_at",
        )
        .fetch_all(self.db.sqlite()?)
        .await?)
    }

    /// The solution of an event's latest report.
    pub async fn hyp_latest_solution(&self, id: &str) -> anyhow::Result<Option<Vec<u8>>> {
        Ok(sqlx::query_scalar(
            "SELECT r.solution FROM hyp_events e JOIN hyp_reports r ON r.event_id = e.id AND r.number = e.latest_number \
             WHERE e.id = ?",
        )
        .bind(id)
        .fetch_optional(self.db.sqlite()?)
        .await?)
    }

    /// Events, public events and reports in the hyp archive.
    pub async fn hyp_counts(&self) -> anyhow::Result<(i64, i64, i64)> {
        let row = sqlx::query(&format!(
            "SELECT (SELECT COUNT(*) FROM hyp_events) AS events, \
             (SELECT COUNT(*) FROM hyp_events WHERE {PUBLIC}) AS public, \
             (SELECT COUNT(*) FROM hyp_reports) AS reports"
        ))
        .fetch_one(self.db.sqlite()?)
        .await?;
        Ok((row.get("events"), row.get("public"), row.get("reports")))
    }
}
