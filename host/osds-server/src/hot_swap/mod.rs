//! Replacing a component while the service runs: validate (compile and type-check against the WIT world) →
//! canary (`canary`: the channel's recent inputs through the current and the new component under production
//! limits, compared) → swap (`slot`: recorded in the archive, then one atomic pointer store, so a frame is
//! decoded by exactly one of the two) → keep the previous component for rollback. Decoders and the hyp report
//! shaper go through the same slot; a decoder for an agency the host does not know yet adds that channel.
//! `restart` puts back at start what was last installed on the archive.

mod canary;
mod restart;
mod slot;

pub use canary::{CanaryReport, Difference};
pub use restart::{InstalledDecoders, installed_decoders, installed_shaper};

use crate::ingest::{ChannelSpec, Ingester};
use anyhow::Context;
use osds_runtime::SharedShaper;
use osds_runtime::decoder_set::{DecoderSet, SharedDecoders, wasm_files};
use osds_runtime::{
    DecoderComponent, DecoderInfo, ReferenceComponent, Runtime, ShaperComponent, ShaperInfo,
    SharedReference,
};
use osds_store::{ComponentAction, Store, WriterTask};
use serde::Serialize;
use serde_json::{Value, json};
use slot::{Change, Component, Slot};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

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
    /// The decoders in service, one per channel.
    decoders: Slot<DecoderComponent, SharedDecoders>,
    /// The hyp report shaper in service, under the channel name `hyp`.
    shaper: Slot<ShaperComponent, SharedShaper>,
    store: Store,
    /// Records every install and rollback, so a restart puts back what ran.
    writer: WriterTask,
    /// New channels get their upstream connection from the ingester (none with `--no-ingest`).
    ingester: Option<Arc<Ingester>>,
    canary_fixtures: Option<PathBuf>,
    canary_recent: i64,
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
        let shaper_target = in_service
            .previous_shaper
            .map(|p| (SHAPER_CHANNEL.to_string(), p));
        Arc::new(ComponentManager {
            runtime,
            decoders: Slot::new(in_service.decoders, in_service.previous_decoders),
            shaper: Slot::new(in_service.shaper, shaper_target.into_iter().collect()),
            store,
            writer,
            ingester,
            canary_fixtures: canary.fixtures,
            canary_recent: canary.recent.max(0),
            reference: in_service.reference,
        })
    }

    /// Validates a shaper (the `osds:hyp/shaper` world) and reshapes the most recent stored solutions with the
    /// current and the new one, comparing the payloads.
    pub async fn check_shaper(
        &self,
        wasm: Vec<u8>,
    ) -> anyhow::Result<(Arc<ShaperComponent>, ShaperVerdict)> {
        let candidate = Arc::new(self.load::<ShaperComponent>(wasm).await?);
        let current = self.shaper.serving.load_full();
        let solutions = self.store.hyp_recent_solutions(self.canary_recent).await?;
        let solutions = solutions
            .into_iter()
            .map(|(label, solution, _)| (label, solution))
            .collect();
        let (new, old) = (candidate.clone(), current.clone());
        let canary = tokio::task::spawn_blocking(move || canary::shapers(&old, &new, solutions))
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
        let mut targets = self.shaper.lock().await;
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
        let change = Change::Made(ComponentAction::Install);
        self.shaper
            .put(
                &mut targets,
                &self.writer,
                SHAPER_CHANNEL,
                change,
                candidate,
            )
            .await
            .map_err(Refusal::from)?;
        tracing::info!(name = %verdict.shaper.name, sha256 = %verdict.shaper.sha256, "shaper installed");
        Ok(verdict)
    }

    /// Puts the previous shaper back (a second rollback undoes the first).
    pub async fn rollback_shaper(&self) -> anyhow::Result<ShaperInfo> {
        let restored = self.shaper.rollback(&self.writer, SHAPER_CHANNEL).await?;
        Ok(restored.info().clone())
    }

    /// The loaded decoders, when each was installed, and which channels can be rolled back.
    pub async fn list(&self) -> Value {
        let set = self.decoders.serving.load_full();
        let mut decoders = Vec::new();
        for decoder in set.decoders() {
            let info = decoder.info();
            decoders.push(json!({
                "name": info.name,
                "version": info.version,
                "source": info.source,
                "claims": info.claims,
                "sha256": info.sha256,
                "installedAt": set.installed_at(&info.sha256),
                "rollbackTo": self.decoders.rollback_target(&info.source).await,
            }));
        }
        let shaper = self.shaper.serving.load();
        let accepted: Vec<Value> = osds_runtime::worlds::ALL
            .iter()
            .map(|w| json!({"world": w.id(), "accepts": w.accepts()}))
            .collect();
        json!({
            "acceptedWorlds": accepted,
            "decoders": decoders,
            "shaper": {
                "name": shaper.info().name,
                "version": shaper.info().version,
                "sha256": shaper.info().sha256,
                "rollbackTo": self.shaper.rollback_target(SHAPER_CHANNEL).await,
            },
        })
    }

    /// Validates `wasm` and runs the canary against the decoder of the channel it claims, without installing.
    pub async fn check(&self, wasm: Vec<u8>) -> anyhow::Result<(Arc<DecoderComponent>, Verdict)> {
        let candidate = Arc::new(self.load::<DecoderComponent>(wasm).await?);
        let set = self.decoders.serving.load_full();
        let info = candidate.info();
        validate_decoder(&set, &candidate)?;
        let archived = Some((&self.store, self.canary_recent));
        let fixtures = self.canary_fixtures.as_deref();
        let payloads = canary::decoder_payloads(fixtures, archived, info).await?;
        let verdict = decoder_verdict(&set, candidate.clone(), payloads).await?;
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
        let mut targets = self.decoders.lock().await;
        let (candidate, verdict) = self.check(wasm).await.map_err(Refusal::from)?;
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
        let change = Change::Made(ComponentAction::Install);
        self.put_decoder(&mut targets, channel, change, candidate)
            .await
            .map_err(Refusal::from)?;
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
        let restored = self.decoders.rollback(&self.writer, channel).await?;
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
                    if let Err(e) = manager.apply_recorded(id, &change).await {
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

    /// Puts change `id`, recorded by another process, in service here, unless it runs already or a later
    /// change of its channel runs here already.
    async fn apply_recorded(
        &self,
        id: i64,
        change: &osds_store::ChannelComponent,
    ) -> anyhow::Result<()> {
        let channel = change.channel.as_str();
        let recorded = Change::Recorded {
            changed_at: &change.changed_at,
        };
        // Asked under the channel's lock: a change this process made after the batch was read (its own
        // install, followed back, then rolled back here meanwhile) is recorded by now and in service, and
        // putting the older one back would undo it — and make it the next rollback's target. (Another
        // process's later changes, not in service here yet, follow in order as before.)
        let superseded = |serving: String| async move {
            let last = self.store.last_component_change_of(channel).await?;
            anyhow::Ok(last.is_some_and(|(last, sha256)| last > id && sha256 == serving))
        };
        if channel == SHAPER_CHANNEL {
            let mut targets = self.shaper.lock().await;
            let serving = self.shaper.serving.load().info().sha256.clone();
            if serving == change.sha256 || superseded(serving).await? {
                return Ok(());
            }
            let wasm = change.wasm.clone().context("its .wasm is not stored")?;
            let (candidate, verdict) = self.check_shaper(wasm).await?;
            if verdict.canary.new_errors > 0 {
                tracing::warn!(new_errors = verdict.canary.new_errors, name = %verdict.shaper.name, "the canary of a shaper another process installed found new errors here");
            }
            self.shaper
                .put(&mut targets, &self.writer, channel, recorded, candidate)
                .await?;
            tracing::info!(name = %verdict.shaper.name, sha256 = %change.sha256, "shaper installed by another process put in service");
            return Ok(());
        }
        let mut targets = self.decoders.lock().await;
        let current = self.decoders.serving.load().for_source(channel);
        let serving = current.map(|c| c.info().sha256.clone()).unwrap_or_default();
        if serving == change.sha256 || superseded(serving).await? {
            return Ok(());
        }
        let wasm = change.wasm.clone().context("its .wasm is not stored")?;
        let (candidate, verdict) = self.check(wasm).await?;
        anyhow::ensure!(
            verdict.decoder.source == channel,
            "component `{}` decodes channel `{}`, not `{channel}`",
            verdict.decoder.name,
            verdict.decoder.source,
        );
        if verdict.canary.new_errors > 0 {
            tracing::warn!(channel, new_errors = verdict.canary.new_errors, name = %verdict.decoder.name, "the canary of a decoder another process installed found new errors here");
        }
        self.put_decoder(&mut targets, channel, recorded, candidate)
            .await?;
        tracing::info!(channel, name = %verdict.decoder.name, sha256 = %change.sha256, "decoder installed by another process put in service");
        Ok(())
    }

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
                .serving
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
            .serving
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
        let shaper = self.shaper.serving.load();
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

    /// Loads (compiles and type-checks) a component off the async threads.
    async fn load<C: Component>(&self, wasm: Vec<u8>) -> anyhow::Result<C> {
        let runtime = self.runtime.clone();
        tokio::task::spawn_blocking(move || C::load(&runtime, &wasm))
            .await
            .context("loading the component failed")?
    }

    /// Puts `decoder` in service on `channel` through the decoders' slot; a channel's first decoder opens its
    /// upstream connections.
    async fn put_decoder(
        &self,
        targets: &mut slot::Targets<DecoderComponent>,
        channel: &str,
        change: Change<'_>,
        decoder: Arc<DecoderComponent>,
    ) -> anyhow::Result<()> {
        let replaced = self
            .decoders
            .put(targets, &self.writer, channel, change, decoder.clone())
            .await?;
        if replaced.is_none() {
            self.add_channels(decoder.info());
        }
        Ok(())
    }

    /// Opens the upstream connections of a channel its first decoder brought.
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
}

/// A decoder can serve beside the decoders of `set`: it claims an upstream type, names its source and path, and
/// claims no type another channel's decoder serves.
fn validate_decoder(set: &DecoderSet, candidate: &Arc<DecoderComponent>) -> anyhow::Result<()> {
    let info = candidate.info();
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
    set.with_decoder(candidate.clone())?;
    Ok(())
}

/// The canary of `candidate` over `payloads`, against `set`'s decoder of the same channel.
async fn decoder_verdict(
    set: &DecoderSet,
    candidate: Arc<DecoderComponent>,
    payloads: Vec<(String, Vec<u8>)>,
) -> anyhow::Result<Verdict> {
    let info = candidate.info().clone();
    let current = set.for_source(&info.source);
    let old = current.clone();
    let canary = tokio::task::spawn_blocking(move || canary::decoders(old, candidate, payloads))
        .await
        .context("the canary failed to run")?;
    Ok(Verdict {
        decoder: info,
        replaces: current.map(|c| c.info().clone()),
        canary,
    })
}

/// `osds components check` without a running service: `wasm` is validated as an install would validate it and
/// canaried over the channel's fixture files (`<fixtures>/<source>/*`) against `set`'s decoder of that channel
/// (the built-in decoders, or a components directory's).
pub async fn check_offline(
    runtime: &Arc<Runtime>,
    set: &DecoderSet,
    wasm: Vec<u8>,
    fixtures: &Path,
) -> anyhow::Result<Verdict> {
    let loading = runtime.clone();
    let candidate = tokio::task::spawn_blocking(move || DecoderComponent::load(&loading, &wasm))
        .await
        .context("loading the component failed")??;
    let candidate = Arc::new(candidate);
    validate_decoder(set, &candidate)?;
    let payloads = canary::decoder_payloads(Some(fixtures), None, candidate.info()).await?;
    anyhow::ensure!(
        !payloads.is_empty(),
        "no fixtures of `{}` in {}: the canary needs the channel's frames there, one per file",
        candidate.info().source,
        fixtures.join(&candidate.info().source).display()
    );
    decoder_verdict(set, candidate, payloads).await
}

impl Verdict {
    /// What `check` answers: whether an install would go ahead (without `--force`), and the sentence.
    pub fn summary(&self) -> (bool, String) {
        let counts = self.canary.counts();
        if self.canary.new_errors > 0 {
            let sentence = format!(
                "`{}` ({}) is a valid decoder for `{}`, but an install would be refused: the canary found {} \
                 payload(s) it cannot decode that the current decoder could; canary: {counts}",
                self.decoder.name, self.decoder.sha256, self.decoder.source, self.canary.new_errors
            );
            return (false, sentence);
        }
        let sentence = format!(
            "`{}` ({}) is a valid decoder for `{}`; canary: {counts}",
            self.decoder.name, self.decoder.sha256, self.decoder.source
        );
        (true, sentence)
    }
}
