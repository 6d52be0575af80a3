//! What a service starts with: the components last installed or rolled back to on its archive, and what a
//! rollback of each would put back.

use super::SHAPER_CHANNEL;
use super::slot::Component;
use anyhow::Context;
use osds_runtime::decoder_set::DecoderSet;
use osds_runtime::{DecoderComponent, Runtime, ShaperComponent};
use osds_store::Store;
use std::collections::BTreeMap;
use std::sync::Arc;

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
