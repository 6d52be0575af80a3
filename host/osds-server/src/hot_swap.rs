//! Replacing a decoder while the service runs: validate (compile and type-check against the WIT world) →
//! canary (decode the channel's fixtures and recent archived payloads with the current and the new decoder
//! under production limits, and compare) → swap (one atomic pointer store: a frame is decoded by exactly one
//! of the two) → keep the previous decoder for rollback. A component for an agency the host does not know
//! yet adds that channel.

use crate::ingest::{ChannelSpec, Ingester};
use anyhow::Context;
use osds_runtime::SharedShaper;
use osds_runtime::decoder_set::{DecoderSet, SharedDecoders, wasm_files};
use osds_runtime::decoding;
use osds_runtime::units;
use osds_runtime::units::Unit;
use osds_runtime::{
    DecoderComponent, DecoderInfo, ReferenceComponent, Runtime, ShaperComponent, ShaperInfo,
    SharedReference,
};
use osds_store::{ComponentChange, Store, WriterTask};
use serde::Serialize;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Differences listed in a canary report at most (the counts are always complete).
const DIFFERENCES_SHOWN: usize = 20;

/// How a decoder handled one payload, as a canary report shows it.
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
    fn of(decoder: Option<Arc<DecoderComponent>>, payload: &[u8]) -> Outcome {
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

/// One payload the two decoders disagree on.
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
    /// Payloads the current decoder could not decode and the new one can.
    pub fixed: usize,
    pub changed: usize,
    pub new_errors: usize,
    pub differences: Vec<Difference>,
}

/// The result of a shaper's check and install.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ShaperVerdict {
    pub shaper: ShaperInfo,
    pub replaces: ShaperInfo,
    pub canary: CanaryReport,
}

/// The result of `check` and `install`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Verdict {
    pub decoder: DecoderInfo,
    pub replaces: Option<DecoderInfo>,
    pub canary: CanaryReport,
}

/// Why an install did not happen, with the canary's findings when the component itself was valid.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct Refusal {
    pub message: String,
    pub verdict: Option<Verdict>,
}

impl From<anyhow::Error> for Refusal {
    fn from(error: anyhow::Error) -> Self {
        Refusal {
            message: format!("{error:#}"),
            verdict: None,
        }
    }
}

pub struct ComponentManager {
    runtime: Arc<Runtime>,
    decoders: SharedDecoders,
    store: Store,
    /// Records every install and rollback, so a restart puts back what ran.
    writer: WriterTask,
    /// New channels get their upstream connection from the ingester (none with `--no-ingest`).
    ingester: Option<Arc<Ingester>>,
    canary_fixtures: Option<PathBuf>,
    canary_recent: i64,
    /// The decoder each channel had before its last install; also serialises installs.
    previous: tokio::sync::Mutex<BTreeMap<String, Arc<DecoderComponent>>>,
    /// The hyp report shaper in service, swapped like a decoder (channel `hyp`).
    shaper: SharedShaper,
    previous_shaper: tokio::sync::Mutex<Option<Arc<ShaperComponent>>>,
    /// The reference decoder that reads JMA's frames for the scorecard, swapped from the components
    /// directory's `reference_<agency>.wasm`.
    reference: SharedReference,
}

/// A component in service, as `osds components export` writes it.
#[derive(Debug, Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExportedComponent {
    /// The file name to write it under.
    pub file: String,
    pub name: String,
    pub sha256: String,
    pub wasm_hex: String,
}

/// The channel name under which the hyp report shaper is installed and rolled back.
pub const SHAPER_CHANNEL: &str = "hyp";

/// The components in service at start, and what each would roll back to.
pub struct InService {
    pub decoders: SharedDecoders,
    /// Per channel, the decoder before its last install.
    pub previous_decoders: BTreeMap<String, Arc<DecoderComponent>>,
    pub shaper: SharedShaper,
    pub previous_shaper: Option<Arc<ShaperComponent>>,
    pub reference: SharedReference,
}

/// Where the canary finds what to decode: a fixture folder (`--canary-fixtures`), and how many of the
/// archive's recent payloads per channel (`--canary-recent`).
pub struct CanarySources {
    pub fixtures: Option<PathBuf>,
    pub recent: i64,
}

impl ComponentManager {
    /// The manager of `in_service`, recording each change through `writer`; new channels get their upstream
    /// connection from `ingester` (none with `--no-ingest`).
    pub fn new(
        runtime: Arc<Runtime>,
        in_service: InService,
        canary: CanarySources,
        store: Store,
        writer: WriterTask,
        ingester: Option<Arc<Ingester>>,
    ) -> Arc<ComponentManager> {
        Arc::new(ComponentManager {
            runtime,
            decoders: in_service.decoders,
            store,
            writer,
            ingester,
            canary_fixtures: canary.fixtures,
            canary_recent: canary.recent.max(0),
            previous: tokio::sync::Mutex::new(in_service.previous_decoders),
            shaper: in_service.shaper,
            previous_shaper: tokio::sync::Mutex::new(in_service.previous_shaper),
            reference: in_service.reference,
        })
    }

    /// Validates a shaper (the `osds:hyp/shaper` world) and reshapes the most recent stored solutions with the
    /// current and the new one, comparing the payloads.
    pub async fn check_shaper(
        &self,
        wasm: Vec<u8>,
    ) -> anyhow::Result<(Arc<ShaperComponent>, ShaperVerdict)> {
        let runtime = self.runtime.clone();
        let candidate = tokio::task::spawn_blocking(move || ShaperComponent::load(&runtime, &wasm))
            .await
            .context("loading the component failed")??;
        let candidate = Arc::new(candidate);
        let current = self.shaper.load_full();
        let solutions = self.store.hyp_recent_solutions(self.canary_recent).await?;
        let (new, old) = (candidate.clone(), current.clone());
        let canary = tokio::task::spawn_blocking(move || {
            let mut report = CanaryReport::default();
            for (label, solution, _) in solutions {
                report.payloads += 1;
                let shaped = |shaper: &ShaperComponent| match shaper.shape(&solution) {
                    Ok(payload) => Outcome::Report {
                        report: serde_json::from_slice(&payload).unwrap_or(Value::Null),
                    },
                    Err(e) => Outcome::Error {
                        kind: "refused".into(),
                        message: format!("{e:#}"),
                    },
                };
                report.record(label, shaped(&old), shaped(&new));
            }
            report
        })
        .await
        .context("the canary failed to run")?;
        let verdict = ShaperVerdict {
            shaper: candidate.info().clone(),
            replaces: current.info().clone(),
            canary,
        };
        Ok((candidate, verdict))
    }

    /// Installs a shaper: validate → canary → swap, like a decoder.
    pub async fn install_shaper(
        &self,
        wasm: Vec<u8>,
        force: bool,
    ) -> Result<ShaperVerdict, Refusal> {
        let mut previous = self.previous_shaper.lock().await;
        let (candidate, verdict) = self.check_shaper(wasm).await.map_err(Refusal::from)?;
        if verdict.canary.new_errors > 0 && !force {
            return Err(Refusal {
                message: format!(
                    "refused: the canary found {} stored solution(s) that `{}` cannot shape; install with --force to override",
                    verdict.canary.new_errors, verdict.shaper.name
                ),
                verdict: None,
            });
        }
        self.record(ComponentChange {
            channel: SHAPER_CHANNEL.to_string(),
            action: "install",
            sha256: verdict.shaper.sha256.clone(),
            wasm: Some(candidate.wasm().to_vec()),
            previous: Some(verdict.replaces.sha256.clone()),
            changed_at: osds_time::now_rfc3339(),
        })
        .await
        .map_err(Refusal::from)?;
        *previous = Some(self.shaper.swap(candidate));
        tracing::info!(name = %verdict.shaper.name, sha256 = %verdict.shaper.sha256, "shaper installed");
        Ok(verdict)
    }

    /// Puts the previous shaper back (a second rollback undoes the first).
    pub async fn rollback_shaper(&self) -> anyhow::Result<ShaperInfo> {
        let mut previous = self.previous_shaper.lock().await;
        let restored = previous
            .take()
            .context("no previous shaper to roll back to")?;
        let info = restored.info().clone();
        let recorded = self
            .record(ComponentChange {
                channel: SHAPER_CHANNEL.to_string(),
                action: "rollback",
                sha256: info.sha256.clone(),
                wasm: Some(restored.wasm().to_vec()),
                previous: Some(self.shaper.load().info().sha256.clone()),
                changed_at: osds_time::now_rfc3339(),
            })
            .await;
        if let Err(e) = recorded {
            *previous = Some(restored);
            return Err(e);
        }
        *previous = Some(self.shaper.swap(restored));
        tracing::info!(name = %info.name, sha256 = %info.sha256, "shaper rolled back");
        Ok(info)
    }

    /// The loaded decoders, when each was installed, and which channels can be rolled back.
    pub async fn list(&self) -> Value {
        let set = self.decoders.load_full();
        let previous = self.previous.lock().await;
        let decoders: Vec<Value> = set
            .decoders()
            .iter()
            .map(|d| {
                let info = d.info();
                json!({
                    "name": info.name,
                    "version": info.version,
                    "source": info.source,
                    "claims": info.claims,
                    "sha256": info.sha256,
                    "installedAt": set.installed_at(&info.sha256),
                    "rollbackTo": previous.get(&info.source).map(|p| format!("{}@{}", p.info().name, p.info().sha256)),
                })
            })
            .collect();
        let shaper = self.shaper.load();
        json!({
            "decoders": decoders,
            "shaper": {
                "name": shaper.info().name,
                "version": shaper.info().version,
                "sha256": shaper.info().sha256,
                "rollbackTo": self.previous_shaper.lock().await.as_ref().map(|p| p.info().identity()),
            },
        })
    }

    /// Validates `wasm` and runs the canary against the decoder of the channel it claims, without installing.
    pub async fn check(&self, wasm: Vec<u8>) -> anyhow::Result<(Arc<DecoderComponent>, Verdict)> {
        let runtime = self.runtime.clone();
        let candidate =
            tokio::task::spawn_blocking(move || DecoderComponent::load(&runtime, &wasm))
                .await
                .context("loading the component failed")??;
        let info = candidate.info().clone();
        anyhow::ensure!(
            !info.claims.is_empty(),
            "component `{}` claims no upstream `type`",
            info.name
        );
        anyhow::ensure!(
            !info.source.is_empty() && info.upstream_path.starts_with('/'),
            "component `{}` names no source or no upstream path (`{}`)",
            info.name,
            info.upstream_path
        );
        let candidate = Arc::new(candidate);
        let set = self.decoders.load_full();
        let current = set.for_source(&info.source);
        // Fails early when it claims a type another channel's decoder serves.
        set.with_decoder(candidate.clone())?;
        let payloads = self.canary_payloads(&info).await?;
        let (new, old) = (candidate.clone(), current.clone());
        let canary = tokio::task::spawn_blocking(move || run_canary(old, new, payloads))
            .await
            .context("the canary failed to run")?;
        let verdict = Verdict {
            decoder: info,
            replaces: current.map(|c| c.info().clone()),
            canary,
        };
        Ok((candidate, verdict))
    }

    /// Installs `wasm` as the decoder of `channel`: validate → canary → swap. Refused when the canary finds
    /// payloads the current decoder decodes and the new one does not, unless `force`.
    pub async fn install(
        &self,
        channel: &str,
        wasm: Vec<u8>,
        force: bool,
    ) -> Result<Verdict, Refusal> {
        let mut previous = self.previous.lock().await;
        let (candidate, verdict) = self.check(wasm.clone()).await.map_err(Refusal::from)?;
        if verdict.decoder.source != channel {
            // Nothing to compare: the canary ran against another channel's decoder.
            return Err(Refusal {
                message: format!(
                    "component `{}` decodes channel `{}`, not `{channel}`: install it as `{}`",
                    verdict.decoder.name, verdict.decoder.source, verdict.decoder.source
                ),
                verdict: None,
            });
        }
        if verdict.canary.new_errors > 0 && !force {
            return Err(Refusal {
                message: format!(
                    "refused: the canary found {} payload(s) that `{}` cannot decode but the current decoder \
                     could (or that no decoder handled before); see the differences, or install with --force",
                    verdict.canary.new_errors, verdict.decoder.name
                ),
                verdict: Some(verdict),
            });
        }
        let set = self.decoders.load_full();
        let old = set.for_source(channel);
        let next = set.with_decoder(candidate.clone()).map_err(Refusal::from)?;
        // Recorded before the swap: what serves is always what a restart puts back.
        self.record(ComponentChange {
            channel: channel.to_string(),
            action: "install",
            sha256: verdict.decoder.sha256.clone(),
            wasm: Some(wasm),
            previous: old.as_ref().map(|old| old.info().sha256.clone()),
            changed_at: stamped(&next, &verdict.decoder.sha256),
        })
        .await
        .map_err(Refusal::from)?;
        self.decoders.store(Arc::new(next));
        match old {
            Some(old) => {
                previous.insert(channel.to_string(), old);
            }
            None => self.add_channels(candidate.info()),
        }
        tracing::info!(
            channel,
            name = %verdict.decoder.name,
            sha256 = %verdict.decoder.sha256,
            replaces = ?verdict.replaces.as_ref().map(|r| &r.name),
            "decoder installed"
        );
        Ok(verdict)
    }

    /// Puts the decoder `channel` had before its last install back in service (the replaced one becomes the
    /// rollback target, so a second rollback undoes the first).
    pub async fn rollback(&self, channel: &str) -> anyhow::Result<DecoderInfo> {
        let mut previous = self.previous.lock().await;
        let restored = previous
            .remove(channel)
            .with_context(|| format!("no previous decoder of `{channel}` to roll back to"))?;
        let set = self.decoders.load_full();
        let replaced = set.for_source(channel);
        let next = set.with_decoder(restored.clone())?;
        let recorded = self
            .record(ComponentChange {
                channel: channel.to_string(),
                action: "rollback",
                sha256: restored.info().sha256.clone(),
                wasm: Some(restored.wasm().to_vec()),
                previous: replaced.as_ref().map(|r| r.info().sha256.clone()),
                changed_at: stamped(&next, &restored.info().sha256),
            })
            .await;
        if let Err(e) = recorded {
            // Nothing changed: the rollback target stays.
            previous.insert(channel.to_string(), restored);
            return Err(e);
        }
        self.decoders.store(Arc::new(next));
        if let Some(replaced) = replaced {
            previous.insert(channel.to_string(), replaced);
        }
        tracing::info!(channel, name = %restored.info().name, sha256 = %restored.info().sha256, "decoder rolled back");
        Ok(restored.info().clone())
    }

    /// Follows the installs and rollbacks the other processes of this archive record (several processes on one
    /// PostgreSQL archive: the database is the signal). Every `every`, each change recorded after change
    /// `since` that this process does not run yet is validated (loaded), canaried here as an install would be,
    /// and put in service with its rollback target, until `shutdown`. A canary that finds new errors is logged,
    /// not a refusal: the process that recorded the change decided (`--force` or not), and processes that
    /// decode one channel differently would archive it differently.
    pub fn follow_changes(
        self: &Arc<Self>,
        since: i64,
        every: std::time::Duration,
        mut shutdown: tokio::sync::watch::Receiver<bool>,
    ) {
        let manager = self.clone();
        tokio::spawn(async move {
            let mut seen = since;
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = shutdown.changed() => return,
                }
                let changes = match manager.store.component_changes_after(seen).await {
                    Ok(changes) => changes,
                    Err(e) => {
                        tracing::warn!(error = %format!("{e:#}"), "reading the components other processes installed failed");
                        continue;
                    }
                };
                for (id, change) in changes {
                    seen = id;
                    if let Err(e) = manager.apply_recorded(&change).await {
                        tracing::error!(
                            channel = %change.channel,
                            sha256 = %change.sha256,
                            error = %format!("{e:#}"),
                            "a component another process installed cannot be put in service here; this process keeps its own"
                        );
                    }
                }
            }
        });
    }

    /// Puts a change another process recorded in service here, unless it runs already.
    async fn apply_recorded(&self, change: &osds_store::ChannelComponent) -> anyhow::Result<()> {
        if change.channel == SHAPER_CHANNEL {
            let mut previous = self.previous_shaper.lock().await;
            if self.shaper.load().info().sha256 == change.sha256 {
                return Ok(());
            }
            let wasm = change.wasm.clone().context("its .wasm is not stored")?;
            let (candidate, verdict) = self.check_shaper(wasm).await?;
            if verdict.canary.new_errors > 0 {
                tracing::warn!(new_errors = verdict.canary.new_errors, name = %verdict.shaper.name, "the canary of a shaper another process installed found new errors here");
            }
            *previous = Some(self.shaper.swap(candidate));
            tracing::info!(name = %verdict.shaper.name, sha256 = %change.sha256, "shaper installed by another process put in service");
            return Ok(());
        }
        let mut previous = self.previous.lock().await;
        let set = self.decoders.load_full();
        let old = set.for_source(&change.channel);
        if old.as_ref().map(|o| o.info().sha256.as_str()) == Some(change.sha256.as_str()) {
            return Ok(());
        }
        let wasm = change.wasm.clone().context("its .wasm is not stored")?;
        let (candidate, verdict) = self.check(wasm).await?;
        anyhow::ensure!(
            verdict.decoder.source == change.channel,
            "component `{}` decodes channel `{}`, not `{}`",
            verdict.decoder.name,
            verdict.decoder.source,
            change.channel
        );
        if verdict.canary.new_errors > 0 {
            tracing::warn!(channel = %change.channel, new_errors = verdict.canary.new_errors, name = %verdict.decoder.name, "the canary of a decoder another process installed found new errors here");
        }
        let mut next = set.with_decoder(candidate.clone())?;
        next.set_installed_at(&change.sha256, &change.changed_at);
        self.decoders.store(Arc::new(next));
        match old {
            Some(old) => {
                previous.insert(change.channel.clone(), old);
            }
            None => self.add_channels(candidate.info()),
        }
        tracing::info!(channel = %change.channel, name = %verdict.decoder.name, sha256 = %change.sha256, "decoder installed by another process put in service");
        Ok(())
    }

    /// Installs every `.wasm` in `dir` that is not loaded yet (SIGHUP, or a file dropped into the directory).
    /// Returns one line per file that was looked at.
    pub async fn reload_dir(&self, dir: &Path) -> Vec<String> {
        let paths = match wasm_files(dir) {
            Ok(paths) => paths,
            Err(e) => return vec![format!("cannot read {}: {e}", dir.display())],
        };
        let mut lines = Vec::new();
        for path in paths {
            let wasm = match std::fs::read(&path) {
                Ok(wasm) => wasm,
                Err(e) => {
                    lines.push(format!("{}: cannot read: {e}", path.display()));
                    continue;
                }
            };
            let sha256 = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&wasm));
            let loaded = self
                .decoders
                .load()
                .decoders()
                .iter()
                .any(|d| d.info().sha256 == sha256);
            if loaded {
                continue;
            }
            let source = match self.check(wasm.clone()).await {
                Ok((_, verdict)) => verdict.decoder.source,
                Err(e) => {
                    lines.push(format!("{}: refused: {e:#}", path.display()));
                    continue;
                }
            };
            match self.install(&source, wasm, false).await {
                Ok(verdict) => lines.push(format!(
                    "{}: installed `{}` for `{source}`",
                    path.display(),
                    verdict.decoder.name
                )),
                Err(refusal) => lines.push(format!("{}: {}", path.display(), refusal.message)),
            }
        }
        lines.extend(self.reload_reference(dir));
        for line in &lines {
            tracing::info!("{line}");
        }
        lines
    }

    /// Puts the directory's `reference_<agency>.wasm` in service when it is not already.
    fn reload_reference(&self, dir: &Path) -> Option<String> {
        let candidate = match ReferenceComponent::from_dir(&self.runtime, dir) {
            Ok(candidate) => candidate?,
            Err(e) => return Some(format!("reference decoder refused: {e:#}")),
        };
        if candidate.info().sha256 == self.reference.load().info().sha256 {
            return None;
        }
        let line = format!(
            "reference decoder `{}` for `{}` in service ({})",
            candidate.info().name,
            candidate.info().agency,
            candidate.info().sha256
        );
        self.reference.store(Arc::new(candidate));
        Some(line)
    }

    /// Every component in service as a file: each decoder as `decoder_<source>.wasm` (a directory of them is a
    /// `--components-dir`), the shaper as `hyp_shaper.wasm`, the reference decoder as `reference_<agency>.wasm`.
    pub fn export(&self) -> Vec<ExportedComponent> {
        let mut files: Vec<ExportedComponent> = self
            .decoders
            .load()
            .decoders()
            .iter()
            .map(|d| ExportedComponent {
                file: format!("decoder_{}.wasm", d.info().source),
                name: d.info().name.clone(),
                sha256: d.info().sha256.clone(),
                wasm_hex: hex::encode(d.wasm()),
            })
            .collect();
        let shaper = self.shaper.load();
        files.push(ExportedComponent {
            file: "hyp_shaper.wasm".into(),
            name: shaper.info().name.clone(),
            sha256: shaper.info().sha256.clone(),
            wasm_hex: hex::encode(shaper.wasm()),
        });
        let reference = self.reference.load();
        files.push(ExportedComponent {
            file: format!("reference_{}.wasm", reference.info().agency),
            name: reference.info().name.clone(),
            sha256: reference.info().sha256.clone(),
            wasm_hex: hex::encode(reference.wasm()),
        });
        files
    }

    async fn record(&self, change: ComponentChange) -> anyhow::Result<()> {
        self.writer
            .record_component(change)
            .await
            .context("the change could not be recorded in the archive, so it was not made")
    }

    fn add_channels(&self, info: &DecoderInfo) {
        let Some(ingester) = &self.ingester else {
            return;
        };
        for tag in &info.claims {
            ingester.add_channel(ChannelSpec {
                source: info.source.clone(),
                type_tag: tag.clone(),
                path: info.upstream_path.clone(),
                query_command: info.query_command.clone(),
            });
        }
    }

    /// The channel's fixture files and its most recent archived payloads, each with a label.
    async fn canary_payloads(&self, info: &DecoderInfo) -> anyhow::Result<Vec<(String, Vec<u8>)>> {
        let mut payloads = Vec::new();
        if let Some(dir) = &self.canary_fixtures {
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
        let archived = self
            .store
            .canary_payloads(&info.source, &info.claims, self.canary_recent)
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
}

/// The install time `set` gave the decoder with this SHA-256 when it put it in service: what the change records,
/// so the time shown before and after a restart is one clock reading.
fn stamped(set: &DecoderSet, sha256: &str) -> String {
    set.installed_at(sha256)
        .map_or_else(osds_time::now_rfc3339, str::to_owned)
}

/// Decodes every payload with both decoders (frames of the transport, heartbeats and pongs, are skipped).
fn run_canary(
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
            Outcome::of(current.clone(), &payload),
            Outcome::of(Some(candidate.clone()), &payload),
        );
    }
    report
}

impl CanaryReport {
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

/// The decoders a service starts with: `started_with` (built-in or `--components-dir`), then each channel's
/// last recorded install or rollback on this archive, and what a rollback of each channel would put back.
pub struct InstalledDecoders {
    pub set: DecoderSet,
    pub previous: BTreeMap<String, Arc<DecoderComponent>>,
}

/// Puts back what was installed on the archive `store` (see `osds_store::ChannelComponent`). A component that
/// cannot be found or loaded any more is skipped with a warning: the channel keeps its start-up decoder.
pub async fn installed_decoders(
    runtime: &Arc<Runtime>,
    started_with: DecoderSet,
    store: &Store,
) -> anyhow::Result<InstalledDecoders> {
    let known = started_with.decoders();
    let mut set = started_with;
    let mut previous = BTreeMap::new();
    for change in store.installed_components().await? {
        if change.channel == SHAPER_CHANNEL {
            continue;
        }
        let component = match find(runtime, &known, store, &change.sha256, change.wasm).await {
            Ok(component) => component,
            Err(e) => {
                tracing::warn!(channel = %change.channel, sha256 = %change.sha256, error = format!("{e:#}"), "an installed decoder cannot be put back; the channel keeps its start-up decoder");
                continue;
            }
        };
        if set
            .for_source(&change.channel)
            .map(|d| d.info().sha256.clone())
            != Some(change.sha256.clone())
        {
            set = set.with_decoder(component.clone())?;
        }
        set.set_installed_at(&change.sha256, &change.changed_at);
        tracing::info!(channel = %change.channel, name = %component.info().name, sha256 = %change.sha256, installed_at = %change.changed_at, "installed decoder put back");
        if let Some(sha256) = &change.previous_sha256 {
            match find(runtime, &known, store, sha256, None).await {
                Ok(target) => {
                    previous.insert(change.channel.clone(), target);
                }
                Err(e) => {
                    tracing::warn!(channel = %change.channel, sha256 = %sha256, error = format!("{e:#}"), "the rollback target cannot be put back")
                }
            }
        }
    }
    Ok(InstalledDecoders { set, previous })
}

/// What is put back after a restart: a decoder or the shaper.
trait Component: Sized + Send + 'static {
    fn load(runtime: &Arc<Runtime>, wasm: &[u8]) -> anyhow::Result<Self>;
    fn sha256(&self) -> &str;
}

impl Component for DecoderComponent {
    fn load(runtime: &Arc<Runtime>, wasm: &[u8]) -> anyhow::Result<Self> {
        DecoderComponent::load(runtime, wasm)
    }
    fn sha256(&self) -> &str {
        &self.info().sha256
    }
}

impl Component for ShaperComponent {
    fn load(runtime: &Arc<Runtime>, wasm: &[u8]) -> anyhow::Result<Self> {
        ShaperComponent::load(runtime, wasm)
    }
    fn sha256(&self) -> &str {
        &self.info().sha256
    }
}

/// The component with this SHA-256: one of `known` (loaded at start), else loaded from `wasm` or the bytes
/// stored when it was installed.
async fn find<C: Component>(
    runtime: &Arc<Runtime>,
    known: &[Arc<C>],
    store: &Store,
    sha256: &str,
    wasm: Option<Vec<u8>>,
) -> anyhow::Result<Arc<C>> {
    if let Some(component) = known.iter().find(|c| c.sha256() == sha256) {
        return Ok(component.clone());
    }
    let wasm = match wasm {
        Some(wasm) => wasm,
        None => store
            .component_file(sha256)
            .await?
            .context("its .wasm is neither built in nor stored")?,
    };
    let runtime = runtime.clone();
    let component = tokio::task::spawn_blocking(move || C::load(&runtime, &wasm))
        .await
        .context("loading the component failed")??;
    Ok(Arc::new(component))
}

/// The hyp report shaper a service starts with: the built-in one, or the one last installed (or rolled back to)
/// on this archive, and what a rollback would put back.
pub async fn installed_shaper(
    runtime: &Arc<Runtime>,
    store: &Store,
) -> anyhow::Result<(Arc<ShaperComponent>, Option<Arc<ShaperComponent>>)> {
    let built_in = Arc::new(ShaperComponent::embedded(runtime)?);
    let Some(change) = store
        .installed_components()
        .await?
        .into_iter()
        .find(|c| c.channel == SHAPER_CHANNEL)
    else {
        return Ok((built_in, None));
    };
    let known = [built_in.clone()];
    let current = match find(runtime, &known, store, &change.sha256, change.wasm).await {
        Ok(current) => current,
        Err(e) => {
            tracing::warn!(sha256 = %change.sha256, error = format!("{e:#}"), "the installed shaper cannot be put back; the built-in one shapes");
            return Ok((built_in, None));
        }
    };
    tracing::info!(name = %current.info().name, sha256 = %change.sha256, "installed shaper put back");
    let previous = match change.previous_sha256 {
        Some(sha256) => find(runtime, &known, store, &sha256, None).await.ok(),
        None => None,
    };
    Ok((current, previous))
}
