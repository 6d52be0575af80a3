//! Reads behind `/status`: the archive's counts, sessions, ingesters, outages, liveness, counters.

use crate::codes::{Code, SocketRole};
use crate::counts::ArchiveCounts;
use crate::db::Columns;
use crate::rows::{IngesterRow, OpenSocket, OutageRow, SessionRow};
use crate::statements::Statements;
use crate::store::Store;

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

impl Store {
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
            .try_rows(query, |r| {
                Ok(SessionRow {
                    id: r.int("id"),
                    ingester: r.opt_text("ingester"),
                    path: r.text("path"),
                    role: SocketRole::stored(&r.text("role"))?,
                    started_at: r.text("started_at"),
                    connected_at: r.opt_text("connected_at"),
                    ended_at: r.opt_text("ended_at"),
                    end_reason: r.opt_text("end_reason"),
                })
            })
            .await
    }

    /// The ingesters of a PostgreSQL archive that run now or were last alive (or first seen) at or after
    /// `seen_since` (RFC 3339), by name, with what each has now: not every name a rolling deploy ever used.
    /// None on SQLite (the process serving it is its one ingester).
    pub async fn ingesters(&self, seen_since: &str) -> anyhow::Result<Vec<IngesterRow>> {
        if !self.db.is_postgres() {
            return Ok(Vec::new());
        }
        let runs = crate::db::ingester_runs("i.number");
        let mut query = Statements::one(&format!(
            "SELECT i.name, CASE WHEN {runs} THEN 1::bigint ELSE 0 END AS running, \
             COALESCE((SELECT string_agg(h.source, ',' ORDER BY h.source) FROM channel_holders h \
             WHERE h.ingester = i.number), '') AS channels \
             FROM ingesters i LEFT JOIN liveness l ON l.ingester = i.name \
             WHERE {runs} OR COALESCE(l.alive_at, i.first_seen_at) >= ? ORDER BY i.name"
        ));
        query.bind(seen_since);
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
            .try_rows(open, |r| {
                let socket = OpenSocket {
                    session_id: r.int("id"),
                    path: r.text("path"),
                    role: SocketRole::stored(&r.text("role"))?,
                    connected_at: r.text("connected_at"),
                };
                Ok((r.text("ingester"), socket))
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

    pub async fn counter(&self, name: &str) -> anyhow::Result<i64> {
        let mut query = Statements::one(
            "SELECT COALESCE((SELECT value FROM counters WHERE name = ?), 0) AS value",
        );
        query.bind(name);
        self.db.one(query, |r| r.int("value")).await
    }
}
