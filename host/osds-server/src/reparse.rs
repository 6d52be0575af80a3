//! Re-decoding archived deliveries that are still unparsed, and ignored ones of a `type` a decoder now claims,
//! and appending the versions they yield (never editing what is stored): the work behind `osds reparse`. Safe
//! while `osds serve` runs on the same database: SQLite serialises the writers, and the server notices the new
//! versions.

use anyhow::Context;
use osds_runtime::DecoderSet;
use osds_runtime::decoding::{self, Fallback, Outcome};
use osds_runtime::units;
use osds_store::{ArchivedUnit, Recovered, Store, UnparsedFilter, Writer};
use std::collections::BTreeMap;

/// Deliveries read and committed per step.
const BATCH: i64 = 200;

/// A reparse of one archive with one set of decoders, and how many deliveries it goes through.
pub struct Reparse {
    decoders: DecoderSet,
    filter: UnparsedFilter,
    total: i64,
}

/// What a reparse found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ReparseSummary {
    pub examined: i64,
    /// Deliveries a decoder now turns into a report.
    pub recoverable: usize,
    /// Of those, versions the archive did not hold yet (none on a dry run).
    pub new_versions: usize,
    pub duplicates: usize,
    /// The others, by failure kind.
    pub failing: BTreeMap<String, usize>,
}

/// Where the deliveries a reparse goes through came from.
#[derive(Debug, Default, Clone)]
pub struct Scope {
    /// Only this channel's deliveries.
    pub source: Option<String>,
    /// Received at or after this time (RFC 3339).
    pub since: Option<String>,
    /// Received before this time (RFC 3339).
    pub until: Option<String>,
}

impl Reparse {
    /// The deliveries of `scope` in `store` that `decoders` could turn into reports: the unparsed ones, and the
    /// ignored ones of a `type` one of them claims (archived before its channel's decoder was installed).
    pub async fn plan(
        store: &Store,
        decoders: DecoderSet,
        scope: Scope,
    ) -> anyhow::Result<Reparse> {
        let ignored_tags = decoders
            .decoders()
            .iter()
            .filter(|d| scope.source.as_ref().is_none_or(|s| *s == d.info().source))
            .flat_map(|d| d.info().claims.clone())
            .collect();
        let filter = UnparsedFilter {
            ignored_tags,
            source: scope.source,
            since: scope.since,
            until: scope.until,
        };
        let total = store.count_unparsed(&filter).await?;
        Ok(Reparse {
            decoders,
            filter,
            total,
        })
    }

    /// How many deliveries it goes through.
    pub fn total(&self) -> i64 {
        self.total
    }

    /// Goes through them in batches; with `writer`, appends what each batch recovered before the next (a dry
    /// run without). `progress` hears how many were examined so far after each batch.
    pub async fn run(
        &self,
        store: &Store,
        mut writer: Option<&mut Writer>,
        mut progress: impl FnMut(i64),
    ) -> anyhow::Result<ReparseSummary> {
        let mut summary = ReparseSummary::default();
        let mut after = 0;
        loop {
            let units = store
                .unparsed_deliveries(&self.filter, after, BATCH)
                .await?;
            let Some(last) = units.last() else { break };
            after = last.delivery_id;
            summary.examined += units.len() as i64;
            let decoders = self.decoders.clone();
            let fates = tokio::task::spawn_blocking(move || {
                units
                    .iter()
                    .map(|unit| decode_unit(&decoders, unit))
                    .collect::<Vec<_>>()
            })
            .await
            .context("decoding failed")?;
            let mut recovered = Vec::new();
            for fate in fates {
                match fate {
                    Fate::Recovered(item) => recovered.push(*item),
                    Fate::Failing(kind) => *summary.failing.entry(kind).or_default() += 1,
                }
            }
            summary.recoverable += recovered.len();
            if let Some(writer) = writer.as_deref_mut()
                && !recovered.is_empty()
            {
                let written = writer.recover(&recovered).await?;
                summary.new_versions += written.new_versions.len();
                summary.duplicates += written.duplicates;
            }
            progress(summary.examined);
        }
        Ok(summary)
    }
}

/// What became of one unparsed delivery.
enum Fate {
    Recovered(Box<Recovered>),
    Failing(String),
}

fn decode_unit(decoders: &DecoderSet, unit: &ArchivedUnit) -> Fate {
    let Some(piece) = units::split(&unit.frame)
        .into_iter()
        .nth(unit.unit_index as usize)
    else {
        return Fate::Failing("unit-missing".into());
    };
    let fallback = unit
        .source
        .as_deref()
        .map_or(Fallback::None, Fallback::Source);
    match decoding::decode_unit(decoders, &piece, fallback) {
        Outcome::Report {
            report,
            identity,
            decoder,
        } => {
            let info = decoder.info();
            Fate::Recovered(Box::new(Recovered {
                delivery_id: unit.delivery_id,
                received_at: unit.received_at.clone(),
                source: info.source.clone(),
                identity,
                report,
                decoder_name: info.name.clone(),
                decoder_sha256: info.sha256.clone(),
            }))
        }
        other => Fate::Failing(
            other
                .failure()
                .map_or("unknown", |(kind, _)| kind.as_str())
                .into(),
        ),
    }
}
