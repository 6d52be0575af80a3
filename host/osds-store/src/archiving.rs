//! What archiving a frame writes, decided once for both databases: its bytes, a delivery per unit, new
//! versions with their texts and events, and versions recovered later (`osds reparse`). Each backend runs these
//! writes inside its own archiving transaction (`sqlite.rs`, `postgres/`).

use crate::codes::{Code, DeliveryOutcome};
use crate::db::{Columns, WriteConn};
use crate::ids::{DeliveryId, ReportId};
use crate::positions::{self, Position};
use crate::rows::{ReportRow, ServedReport};
use crate::statements::Statements;
use osds_time::{beijing_month, now_rfc3339, parse_ms};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use wolfx_core::Report;

/// Revisions above this are not expanded into a missing-revisions list (a garbage `ReportNum` must not make a
/// list of millions).
const MISSING_REVISIONS_SCAN_LIMIT: i64 = 1000;

/// One received frame, routed and decoded, ready to archive.
#[derive(Debug, Clone)]
pub struct Incoming {
    pub session_id: i64,
    /// The frame's number on its session (from 1), so a commit retried after its acknowledgement was lost
    /// records it once; `None` for frames not received over a session (tools, tests).
    pub reception: Option<i64>,
    pub received_at: String,
    pub frame: Vec<u8>,
    pub marker: crate::Marker,
    pub units: Vec<UnitRecord>,
}

impl Incoming {
    /// The channel the frame belongs to: its first report's or unparsed unit's (`None` when it has none).
    pub fn source(&self) -> Option<&str> {
        self.units.iter().find_map(|u| match &u.kind {
            UnitKind::Report { source, .. } => Some(source.as_str()),
            UnitKind::Unparsed { source, .. } => source.as_deref(),
            UnitKind::Ignored => None,
        })
    }
}

/// One decodable unit of a frame (the frame itself, or an element of a JSON-array frame).
#[derive(Debug, Clone)]
pub struct UnitRecord {
    pub unit_index: i64,
    pub type_tag: Option<String>,
    pub kind: UnitKind,
}

#[derive(Debug, Clone)]
pub enum UnitKind {
    /// Decoded to a report. `identity` is the SHA-256 of the unit's canonical JSON without `type`.
    Report {
        source: String,
        identity: String,
        report: Box<Report>,
        decoder_name: String,
        decoder_sha256: String,
    },
    /// Could not be decoded; kept and counted as unparsed.
    Unparsed {
        source: Option<String>,
        decoder: Option<String>,
        error_kind: String,
        message: String,
    },
    /// A channel this service does not archive; kept and counted as ignored.
    Ignored,
}

impl Incoming {
    /// The frame as archived when the database refused what was decoded from it (see `writer_task.rs`): its
    /// bytes and reception, and one unparsed unit that says why.
    pub fn unstorable(self, reason: String) -> Incoming {
        let source = self.source().map(str::to_owned);
        Incoming {
            units: vec![UnitRecord {
                unit_index: 0,
                type_tag: None,
                kind: UnitKind::Unparsed {
                    source,
                    decoder: None,
                    error_kind: UNSTORABLE.into(),
                    message: reason,
                },
            }],
            ..self
        }
    }
}

/// The `error_kind` of a unit whose decoded report the archive cannot hold as decoded (its bytes are kept).
pub const UNSTORABLE: &str = "unstorable";

/// Longest event id, in bytes, the archive indexes (PostgreSQL's B-tree entries stop near 2,700 bytes; the
/// relay's ids are a few dozen).
const MAX_EVENT_ID_BYTES: usize = 1024;

/// Why `report` cannot be archived as decoded, on either database: text PostgreSQL cannot hold (NUL), an event
/// id too long to index, or a number that is not finite. Checked for both databases alike, so the same frames
/// give the same archive on each; such a unit is kept as unparsed with this reason.
pub fn unstorable_report(report: &Report) -> Option<String> {
    let texts = [
        ("eventId", Some(&report.event_id)),
        ("upstreamEventId", Some(&report.upstream_event_id)),
        ("issuedAt", report.issued_at.as_ref()),
        ("originAt", report.origin_at.as_ref()),
        ("epicenter", report.epicenter.as_ref()),
    ];
    for (field, text) in texts {
        if text.is_some_and(|t| t.contains('\0')) {
            return Some(format!(
                "the decoded `{field}` contains a NUL character, which a text column cannot hold"
            ));
        }
    }
    for (field, id) in [
        ("eventId", &report.event_id),
        ("upstreamEventId", &report.upstream_event_id),
    ] {
        if id.len() > MAX_EVENT_ID_BYTES {
            return Some(format!(
                "the decoded `{field}` is {} bytes long; the archive indexes ids up to {MAX_EVENT_ID_BYTES}",
                id.len()
            ));
        }
    }
    let numbers = [
        ("latitude", report.latitude),
        ("longitude", report.longitude),
        ("depthKm", report.depth_km),
        ("magnitude", report.magnitude),
    ];
    for (field, number) in numbers {
        if number.is_some_and(|n| !n.is_finite()) {
            return Some(format!("the decoded `{field}` is not a finite number"));
        }
    }
    None
}

/// `text` as a text column can hold it on either database: a NUL becomes U+FFFD. For what describes a unit
/// (its `type`, a decoder's error message), never for a report's own fields.
fn storable(text: String) -> String {
    if text.contains('\0') {
        text.replace('\0', "\u{FFFD}")
    } else {
        text
    }
}

/// What one ingest transaction did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct IngestSummary {
    /// The versions archived, in id order (consecutive ids), with their served texts.
    pub new_versions: Vec<ServedReport>,
    /// Units per (channel, outcome); a unit without a channel counts under its `type` (for the operator's
    /// metrics).
    pub units: BTreeMap<(String, DeliveryOutcome), u64>,
    /// Highest report id after the commit.
    pub high_water: i64,
}

impl IngestSummary {
    /// Adds what a later transaction of the same batch did.
    pub(crate) fn merge(&mut self, later: IngestSummary) {
        self.new_versions.extend(later.new_versions);
        for (key, units) in later.units {
            *self.units.entry(key).or_default() += units;
        }
        self.high_water = self.high_water.max(later.high_water);
    }

    fn tally(&mut self, unit: &UnitRecord, source: Option<&str>, outcome: DeliveryOutcome) {
        let channel = source
            .or(unit.type_tag.as_deref())
            .unwrap_or("unknown")
            .to_owned();
        *self.units.entry((channel, outcome)).or_default() += 1;
    }
}

/// An archived delivery that a later decoder turned into a report (see `osds reparse`).
#[derive(Debug, Clone)]
pub struct Recovered {
    pub delivery_id: i64,
    pub received_at: String,
    pub source: String,
    /// SHA-256 of the unit's canonical JSON without `type`.
    pub identity: String,
    pub report: Box<Report>,
    pub decoder_name: String,
    pub decoder_sha256: String,
}

/// What one recovery transaction did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RecoverySummary {
    pub new_versions: Vec<i64>,
    /// Recovered units whose version was archived already (from another delivery).
    pub duplicates: usize,
}

/// [`crate::Writer::recover`] inside the caller's archiving transaction, on either backend.
pub(crate) async fn recover_in<C: ReadContext + WriteConn>(
    conn: &mut C,
    items: &[Recovered],
) -> anyhow::Result<RecoverySummary> {
    let mut summary = RecoverySummary::default();
    let now = now_rfc3339();
    for item in items {
        if let Some(reason) = unstorable_report(&item.report) {
            // Still unparsed: its delivery says so already, and a later decoder may do better.
            tracing::warn!(delivery = item.delivery_id, %reason, "a recovered report cannot be archived as decoded");
            continue;
        }
        let mut done = Statements::one("SELECT 1 AS done FROM reparses WHERE delivery_id = ?");
        done.bind(item.delivery_id);
        if !conn.rows(done, |_| ()).await?.is_empty() {
            continue;
        }
        let event_key = event_key(&item.source, &item.report.event_id);
        let context = conn
            .version_context(
                Statements::default(),
                &item.source,
                &item.identity,
                &event_key,
            )
            .await?;
        let mut statements = Statements::default();
        let (report_id, outcome) = match context.existing {
            Some(id) => {
                summary.duplicates += 1;
                (id, DeliveryOutcome::Duplicate)
            }
            None => {
                let id = context.next_id;
                let _ = store_version(
                    &mut statements,
                    &context,
                    &NewVersion {
                        id,
                        delivery_id: item.delivery_id,
                        event_key: &event_key,
                        source: &item.source,
                        identity: &item.identity,
                        report: &item.report,
                        received_at: &item.received_at,
                        decoder_name: &item.decoder_name,
                        decoder_sha256: &item.decoder_sha256,
                    },
                )?;
                summary.new_versions.push(id);
                (id, DeliveryOutcome::NewVersion)
            }
        };
        statements
            .push(
                "INSERT INTO reparses (delivery_id, report_id, event_key, outcome, decoder, reparsed_at) \
                 VALUES (?, ?, ?, ?, ?, ?)",
            )
            .bind(item.delivery_id)
            .bind(report_id)
            .bind(event_key)
            .bind(outcome.as_str())
            .bind(format!("{}@{}", item.decoder_name, item.decoder_sha256))
            .bind(now.clone());
        conn.run(statements).await?;
    }
    Ok(summary)
}

/// Archives a batch of frames inside the caller's archiving transaction: their bytes, a delivery per unit, and
/// the new versions with their texts and events. Writes are added to `pending` (see [`archive_unit`]).
pub(crate) async fn archive_batch<C: ReadContext>(
    conn: &mut C,
    pending: &mut Statements,
    batch: &[Incoming],
    summary: &mut IngestSummary,
) -> anyhow::Result<()> {
    for incoming in batch {
        let raw_sha256 = hex::encode(Sha256::digest(&incoming.frame));
        pending
            .push(
                "INSERT INTO raw_payloads (sha256, bytes, size, first_seen_at) VALUES (?, ?, ?, ?) \
                 ON CONFLICT DO NOTHING",
            )
            .bind(raw_sha256.clone())
            .bind(incoming.frame.clone())
            .bind(incoming.frame.len() as i64)
            .bind(incoming.received_at.clone());
        for unit in &incoming.units {
            archive_unit(conn, pending, incoming, &raw_sha256, unit, summary).await?;
        }
    }
    Ok(())
}

/// Reads a unit's [`VersionContext`] inside the archiving transaction, each backend in its own SQL.
pub(crate) trait ReadContext {
    /// Runs `before` and then reads the context (on SQLite in one round trip).
    async fn version_context(
        &mut self,
        before: Statements,
        source: &str,
        identity: &str,
        event_key: &str,
    ) -> anyhow::Result<VersionContext>;
}

/// Archives one unit: what is still `pending` runs before its version's context is read, in the same round trip
/// (a unit without a version reads nothing); its own writes are added to `pending`.
async fn archive_unit<C: ReadContext>(
    conn: &mut C,
    pending: &mut Statements,
    incoming: &Incoming,
    raw_sha256: &str,
    unit: &UnitRecord,
    summary: &mut IngestSummary,
) -> anyhow::Result<()> {
    let delivery = |outcome: DeliveryOutcome| Delivery {
        id: None,
        incoming,
        raw_sha256,
        unit,
        outcome,
        source: None,
        report_id: None,
        event_key: None,
        decoder: None,
        error_kind: None,
        error_message: None,
    };
    match &unit.kind {
        UnitKind::Ignored => {
            delivery(DeliveryOutcome::Ignored).push(pending);
            summary.tally(unit, None, DeliveryOutcome::Ignored);
        }
        UnitKind::Unparsed {
            source,
            decoder,
            error_kind,
            message,
        } => {
            Delivery {
                source: source.clone(),
                decoder: decoder.clone(),
                error_kind: Some(error_kind.clone()),
                error_message: Some(message.clone()),
                ..delivery(DeliveryOutcome::Unparsed)
            }
            .push(pending);
            summary.tally(unit, source.as_deref(), DeliveryOutcome::Unparsed);
        }
        UnitKind::Report {
            source,
            decoder_name,
            decoder_sha256,
            report,
            ..
        } if unstorable_report(report).is_some() => {
            Delivery {
                source: Some(source.clone()),
                decoder: Some(format!("{decoder_name}@{decoder_sha256}")),
                error_kind: Some(UNSTORABLE.into()),
                error_message: unstorable_report(report),
                ..delivery(DeliveryOutcome::Unparsed)
            }
            .push(pending);
            summary.tally(unit, Some(source), DeliveryOutcome::Unparsed);
        }
        UnitKind::Report {
            source,
            identity,
            report,
            decoder_name,
            decoder_sha256,
        } => {
            let event_key = event_key(source, &report.event_id);
            let context = conn
                .version_context(std::mem::take(pending), source, identity, &event_key)
                .await?;
            let (outcome, report_id) = match context.existing {
                Some(id) => (DeliveryOutcome::Duplicate, id),
                None => (DeliveryOutcome::NewVersion, context.next_id),
            };
            Delivery {
                id: Some(context.next_delivery_id),
                source: Some(source.clone()),
                report_id: Some(report_id),
                event_key: Some(event_key.clone()),
                decoder: Some(format!("{decoder_name}@{decoder_sha256}")),
                ..delivery(outcome)
            }
            .push(pending);
            if context.existing.is_some() {
                summary.tally(unit, Some(source), DeliveryOutcome::Duplicate);
            } else {
                summary.tally(unit, Some(source), DeliveryOutcome::NewVersion);
                let served = store_version(
                    pending,
                    &context,
                    &NewVersion {
                        id: report_id,
                        delivery_id: context.next_delivery_id,
                        event_key: &event_key,
                        source,
                        identity,
                        report,
                        received_at: &incoming.received_at,
                        decoder_name,
                        decoder_sha256,
                    },
                )?;
                summary.new_versions.push(served);
            }
        }
    }
    Ok(())
}

/// A `deliveries` row: the frame's reception columns and what became of the unit.
struct Delivery<'a> {
    /// The row's id when it must be known before the insert (a new version's text names it); `None` lets
    /// SQLite choose.
    id: Option<i64>,
    incoming: &'a Incoming,
    raw_sha256: &'a str,
    unit: &'a UnitRecord,
    outcome: DeliveryOutcome,
    source: Option<String>,
    report_id: Option<i64>,
    event_key: Option<String>,
    decoder: Option<String>,
    error_kind: Option<String>,
    error_message: Option<String>,
}

impl Delivery<'_> {
    fn push(self, statements: &mut Statements) {
        const COLUMNS: &str = "session_id, reception, received_at, raw_sha256, unit_index, type_tag, source, \
             marker, outcome, report_id, event_key, decoder, error_kind, error_message";
        const VALUES: &str = "?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?";
        // A reception recorded already (its commit's acknowledgement was lost, and it is retried) is not again.
        match self.id {
            Some(id) => statements
                .push(&format!(
                    "INSERT INTO deliveries (id, {COLUMNS}) VALUES (?, {VALUES}) ON CONFLICT DO NOTHING"
                ))
                .bind(id),
            None => statements.push(&format!(
                "INSERT INTO deliveries ({COLUMNS}) VALUES ({VALUES}) ON CONFLICT DO NOTHING"
            )),
        };
        statements
            .bind(self.incoming.session_id)
            .bind(self.incoming.reception)
            .bind(self.incoming.received_at.clone())
            .bind(self.raw_sha256.to_string())
            .bind(self.unit.unit_index)
            .bind(self.unit.type_tag.clone().map(storable))
            .bind(self.source)
            .bind(self.incoming.marker.as_str())
            .bind(self.outcome.as_str())
            .bind(self.report_id)
            .bind(self.event_key)
            .bind(self.decoder)
            .bind(self.error_kind)
            .bind(self.error_message.map(storable));
    }
}

/// Stable event id: the first 16 bytes of SHA-256 of `<source>:<eventId>`, as 32 lowercase hex digits.
pub fn event_key(source: &str, event_id: &str) -> String {
    let digest = Sha256::digest(format!("{source}:{event_id}").as_bytes());
    hex::encode(&digest[..16])
}

/// A report version about to be stored.
struct NewVersion<'a> {
    id: i64,
    /// The delivery it came in (inserted just before it, or archived before for a recovery).
    delivery_id: i64,
    event_key: &'a str,
    source: &'a str,
    identity: &'a str,
    report: &'a Report,
    received_at: &'a str,
    decoder_name: &'a str,
    decoder_sha256: &'a str,
}

/// What the archive holds about a unit's version and its event, read in one query inside the write
/// transaction (so ids increase in commit order).
pub(crate) struct VersionContext {
    /// The version already archived with this identity in this channel, if any.
    existing: Option<i64>,
    /// The next cursor id.
    next_id: i64,
    /// The id the unit's `deliveries` row gets.
    next_delivery_id: i64,
    /// Revisions archived for the event so far.
    revisions: BTreeSet<i64>,
    /// The event's summary row, if the event is known.
    event: Option<EventRow>,
}

struct EventRow {
    latest_revision: i64,
    origin_at: Option<String>,
    sort_ms: i64,
    upstream_ids: String,
}

impl VersionContext {
    /// The context from the row of a backend's context query (`existing`, `next_id`, `next_delivery_id`,
    /// `revisions` as a comma-separated list, and the event's columns, `event_id` NULL when it is new).
    pub(crate) fn from_row(row: &dyn Columns) -> VersionContext {
        let revisions = row
            .opt_text("revisions")
            .unwrap_or_default()
            .split(',')
            .filter_map(|r| r.parse().ok())
            .collect();
        let event = row.opt_text("event_id").map(|_| EventRow {
            latest_revision: row.int("latest_revision"),
            origin_at: row.opt_text("origin_at"),
            sort_ms: row.int("sort_ms"),
            upstream_ids: row.text("upstream_ids"),
        });
        VersionContext {
            existing: row.opt_int("existing"),
            next_id: row.int("next_id"),
            next_delivery_id: row.int("next_delivery_id"),
            revisions,
            event,
        }
    }
}

/// Adds the version's insert, its served text's and its event's update to `statements`; returns the text.
fn store_version(
    statements: &mut Statements,
    context: &VersionContext,
    v: &NewVersion<'_>,
) -> anyhow::Result<ServedReport> {
    let row = ReportRow {
        id: ReportId(v.id),
        event_key: v.event_key.to_string(),
        source: v.source.to_string(),
        received_at: v.received_at.to_string(),
        delivery_id: DeliveryId(v.delivery_id),
        decoded: serde_json::to_string(v.report)?,
        decoder_name: v.decoder_name.to_string(),
        decoder_sha256: v.decoder_sha256.to_string(),
    };
    statements.push(
        "INSERT INTO reports (id, event_key, source, identity_sha256, delivery_id, received_at, event_id, upstream_event_id, \
         revision, issued_at, origin_at, epicenter, magnitude, report_json, decoder_name, decoder_sha256) \
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    );
    statements
        .bind(v.id)
        .bind(v.event_key.to_string())
        .bind(v.source.to_string())
        .bind(v.identity.to_string())
        .bind(v.delivery_id)
        .bind(v.received_at.to_string())
        .bind(v.report.event_id.clone())
        .bind(v.report.upstream_event_id.clone())
        .bind(v.report.revision)
        .bind(v.report.issued_at.clone())
        .bind(v.report.origin_at.clone())
        .bind(v.report.epicenter.clone())
        .bind(v.report.magnitude)
        .bind(row.decoded.clone())
        .bind(v.decoder_name.to_string())
        .bind(v.decoder_sha256.to_string());
    let served = ServedReport {
        id: ReportId(v.id),
        source: v.source.into(),
        json: crate::served::served_json(&row).into(),
    };
    statements
        .push("INSERT INTO report_texts (id, source, json) VALUES (?, ?, ?)")
        .bind(v.id)
        .bind(v.source.to_string())
        .bind(served.json.to_string());
    upsert_event(statements, context, v)?;
    Ok(served)
}

/// Brings the event's summary row up to date with a newly archived version.
fn upsert_event(
    statements: &mut Statements,
    context: &VersionContext,
    v: &NewVersion<'_>,
) -> anyhow::Result<()> {
    let report = v.report;
    let mut revisions = context.revisions.clone();
    revisions.insert(report.revision);
    let top = revisions.last().copied().unwrap_or(report.revision);
    let missing: Vec<i64> = (1..=top.min(MISSING_REVISIONS_SCAN_LIMIT))
        .filter(|r| !revisions.contains(r))
        .collect();
    let missing = serde_json::to_string(&missing)?;
    let position = Position::new(
        report.latitude,
        report.longitude,
        report.depth_km,
        None,
        None,
    );
    match &context.event {
        None => {
            let origin_ms = report.origin_at.as_deref().and_then(parse_ms);
            let sort_ms = origin_ms.or_else(|| parse_ms(v.received_at)).unwrap_or(0);
            statements
                .push(
                    "INSERT INTO events (id, source, source_event_id, origin_at, origin_ms, sort_ms, month, latest_report_id, \
                     latest_revision, report_count, missing_revisions, epicenter, magnitude, upstream_ids, first_report_id, last_report_id, \
                     updated_ms, latitude, longitude, depth_km, ux, uy, uz) \
                     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                )
                .bind(v.event_key.to_string())
                .bind(v.source.to_string())
                .bind(report.event_id.clone())
                .bind(report.origin_at.clone())
                .bind(origin_ms)
                .bind(sort_ms)
                .bind(beijing_month(sort_ms))
                .bind(v.id)
                .bind(report.revision)
                .bind(missing)
                .bind(report.epicenter.clone())
                .bind(report.magnitude)
                .bind(report.upstream_event_id.clone())
                .bind(v.id)
                .bind(v.id)
                .bind(parse_ms(v.received_at));
            for value in position.binds() {
                statements.bind(value);
            }
        }
        Some(event) => {
            let mut origin_at = event.origin_at.clone();
            let mut sort_ms = event.sort_ms;
            let mut upstream_ids = event.upstream_ids.clone();
            // The latest report is the highest revision; a new version of that revision supersedes the older one.
            let becomes_latest = report.revision >= event.latest_revision;
            if becomes_latest && report.origin_at.is_some()
                || origin_at.is_none() && report.origin_at.is_some()
            {
                origin_at = report.origin_at.clone();
                sort_ms = origin_at.as_deref().and_then(parse_ms).unwrap_or(sort_ms);
            }
            if !upstream_ids
                .split(' ')
                .any(|id| id == report.upstream_event_id)
            {
                upstream_ids.push(' ');
                upstream_ids.push_str(&report.upstream_event_id);
            }
            let origin_ms = origin_at.as_deref().and_then(parse_ms);
            statements
                .push(&format!(
                    "UPDATE events SET origin_at = ?, origin_ms = ?, sort_ms = ?, month = ?, report_count = report_count + 1, \
                     missing_revisions = ?, upstream_ids = ?, last_report_id = ?, updated_ms = ?, \
                     latest_report_id = CASE WHEN ? THEN ? ELSE latest_report_id END, \
                     latest_revision = CASE WHEN ? THEN ? ELSE latest_revision END, \
                     epicenter = CASE WHEN ? THEN ? ELSE epicenter END, \
                     magnitude = CASE WHEN ? THEN ? ELSE magnitude END, {} \
                     WHERE id = ?",
                    positions::SET_WHEN
                ))
                .bind(origin_at)
                .bind(origin_ms)
                .bind(sort_ms)
                .bind(beijing_month(sort_ms))
                .bind(missing)
                .bind(upstream_ids)
                .bind(v.id)
                .bind(parse_ms(v.received_at))
                .bind(becomes_latest)
                .bind(v.id)
                .bind(becomes_latest)
                .bind(report.revision)
                .bind(becomes_latest)
                .bind(report.epicenter.clone())
                .bind(becomes_latest)
                .bind(report.magnitude);
            positions::bind_set_when(statements, becomes_latest, &position);
            statements.bind(v.event_key.to_string());
        }
    }
    Ok(())
}
