//! The canary: what a candidate component would do to what its channel has seen, beside what the component
//! in service does. Decoders decode the channel's fixtures and recent archived payloads; shapers reshape the
//! most recent stored solutions. Both are counted the same way.

use osds_runtime::decoding;
use osds_runtime::units;
use osds_runtime::units::Unit;
use osds_runtime::{DecoderComponent, DecoderInfo, ShaperComponent};
use osds_store::Store;
use serde::Serialize;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Differences listed in a canary report at most (the counts are always complete).
const DIFFERENCES_SHOWN: usize = 20;

/// How a component handled one payload, as a canary report shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase", tag = "result")]
enum Outcome {
    Report {
        report: Value,
    },
    Error {
        kind: String,
        message: String,
    },
    /// There is no decoder for this channel yet.
    NoDecoder,
}

impl Outcome {
    /// The payload through the one decode step (`osds_runtime::decoding`), as ingestion would see it with
    /// `decoder` in service: the same report, or the same failure kind.
    fn decoded(decoder: Option<Arc<DecoderComponent>>, payload: &[u8]) -> Outcome {
        let Some(decoder) = decoder else {
            return Outcome::NoDecoder;
        };
        match decoding::decode_with(decoder, payload) {
            decoding::Outcome::Report { report, .. } => Outcome::Report {
                report: serde_json::to_value(report).unwrap_or(Value::Null),
            },
            other => {
                let (kind, message) = other.failure().expect("not a report");
                Outcome::Error {
                    kind: kind.as_str().into(),
                    message,
                }
            }
        }
    }

    /// The stored solution as `shaper` shapes it.
    fn shaped(shaper: &ShaperComponent, solution: &[u8]) -> Outcome {
        match shaper.shape(solution) {
            Ok(payload) => Outcome::Report {
                report: serde_json::from_slice(&payload).unwrap_or(Value::Null),
            },
            Err(e) => Outcome::Error {
                kind: "refused".into(),
                message: format!("{e:#}"),
            },
        }
    }

    fn is_report(&self) -> bool {
        matches!(self, Outcome::Report { .. })
    }

    /// Two errors of the same kind count as the same outcome, whatever their messages.
    fn same_as(&self, other: &Outcome) -> bool {
        match (self, other) {
            (Outcome::Error { kind: a, .. }, Outcome::Error { kind: b, .. }) => a == b,
            _ => self == other,
        }
    }
}

/// One payload the two components disagree on.
#[derive(Debug, Clone, Serialize)]
pub struct Difference {
    /// Where the payload came from: `delivery 12`, `fixture sc/x.json`.
    pub payload: String,
    pub before: Value,
    pub after: Value,
}

/// What the canary found.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CanaryReport {
    pub payloads: usize,
    pub unchanged: usize,
    /// Payloads the current component could not handle and the new one can.
    pub fixed: usize,
    pub changed: usize,
    pub new_errors: usize,
    pub differences: Vec<Difference>,
}

impl CanaryReport {
    /// `N payloads, N unchanged, N fixed, N changed, N new errors`.
    pub fn counts(&self) -> String {
        format!(
            "{} payloads, {} unchanged, {} fixed, {} changed, {} new errors",
            self.payloads, self.unchanged, self.fixed, self.changed, self.new_errors
        )
    }

    /// Counts one payload by how the two outcomes compare, keeping the first differences.
    fn record(&mut self, label: String, before: Outcome, after: Outcome) {
        if before.same_as(&after) {
            self.unchanged += 1;
            return;
        }
        match (before.is_report(), after.is_report()) {
            (false, true) => self.fixed += 1,
            (_, false) => self.new_errors += 1,
            (true, true) => self.changed += 1,
        }
        if self.differences.len() < DIFFERENCES_SHOWN {
            self.differences.push(Difference {
                payload: label,
                before: serde_json::to_value(&before).unwrap_or(Value::Null),
                after: serde_json::to_value(&after).unwrap_or(Value::Null),
            });
        }
    }
}

/// Decodes every payload with both decoders (frames of the transport, heartbeats and pongs, are skipped).
pub(super) fn decoders(
    current: Option<Arc<DecoderComponent>>,
    candidate: Arc<DecoderComponent>,
    payloads: Vec<(String, Vec<u8>)>,
) -> CanaryReport {
    let mut report = CanaryReport::default();
    for (label, payload) in payloads {
        let is_transport = units::split(&payload).first().is_some_and(Unit::is_control);
        if is_transport {
            continue;
        }
        report.payloads += 1;
        report.record(
            label,
            Outcome::decoded(current.clone(), &payload),
            Outcome::decoded(Some(candidate.clone()), &payload),
        );
    }
    report
}

/// Shapes every stored solution with both shapers.
pub(super) fn shapers(
    current: &ShaperComponent,
    candidate: &ShaperComponent,
    solutions: Vec<(String, Vec<u8>)>,
) -> CanaryReport {
    let mut report = CanaryReport::default();
    for (label, solution) in solutions {
        report.payloads += 1;
        report.record(
            label,
            Outcome::shaped(current, &solution),
            Outcome::shaped(candidate, &solution),
        );
    }
    report
}

/// The channel's fixture files (`<fixtures>/<source>/*`) and, with an archive, its `recent` most recent
/// archived payloads, each with a label.
pub(super) async fn decoder_payloads(
    fixtures: Option<&Path>,
    archived: Option<(&Store, i64)>,
    info: &DecoderInfo,
) -> anyhow::Result<Vec<(String, Vec<u8>)>> {
    let mut payloads = Vec::new();
    if let Some(dir) = fixtures {
        let dir = dir.join(&info.source);
        if let Ok(entries) = std::fs::read_dir(&dir) {
            let mut files: Vec<PathBuf> =
                entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
            files.sort();
            for file in files {
                if let Ok(bytes) = std::fs::read(&file) {
                    let name = file.file_name().map(|n| n.to_string_lossy().to_string());
                    payloads.push((
                        format!("fixture {}/{}", info.source, name.unwrap_or_default()),
                        bytes,
                    ));
                }
            }
        }
    }
    let Some((store, recent)) = archived else {
        return Ok(payloads);
    };
    let archived = store
        .canary_payloads(&info.source, &info.claims, recent)
        .await?;
    for unit in archived {
        let Some(bytes) = units::split(&unit.frame)
            .into_iter()
            .nth(unit.unit_index as usize)
            .filter(|u| {
                u.type_tag
                    .as_deref()
                    .is_none_or(|t| info.claims.iter().any(|c| c == t))
            })
            .map(|u| u.bytes)
        else {
            continue;
        };
        payloads.push((format!("delivery {}", unit.delivery_id), bytes));
    }
    Ok(payloads)
}
