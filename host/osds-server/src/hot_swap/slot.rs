//! One slot of hot-swappable components, whatever their kind (the decoders, the hyp shaper): which component
//! serves each channel, which one a rollback puts back, and the order every change keeps: recorded in the
//! archive first, then made, so what serves is always what a restart puts back.

use anyhow::Context;
use osds_runtime::decoder_set::{DecoderSet, SharedDecoders};
use osds_runtime::{DecoderComponent, Runtime, ShaperComponent, SharedShaper};
use osds_store::{ComponentAction, ComponentChange, WriterTask};
use std::collections::BTreeMap;
use std::sync::Arc;

/// A component that can be swapped in and put back after a restart.
pub(super) trait Component: Sized + Send + Sync + 'static {
    /// What it is called in messages: `decoder`, `shaper`.
    const KIND: &'static str;
    fn load(runtime: &Arc<Runtime>, wasm: &[u8]) -> anyhow::Result<Self>;
    fn name(&self) -> &str;
    fn sha256(&self) -> &str;
    fn wasm(&self) -> &[u8];
    /// `name@sha256`.
    fn identity(&self) -> String {
        format!("{}@{}", self.name(), self.sha256())
    }
}

impl Component for DecoderComponent {
    const KIND: &'static str = "decoder";
    fn load(runtime: &Arc<Runtime>, wasm: &[u8]) -> anyhow::Result<Self> {
        DecoderComponent::load(runtime, wasm)
    }
    fn name(&self) -> &str {
        &self.info().name
    }
    fn sha256(&self) -> &str {
        &self.info().sha256
    }
    fn wasm(&self) -> &[u8] {
        DecoderComponent::wasm(self)
    }
}

impl Component for ShaperComponent {
    const KIND: &'static str = "shaper";
    fn load(runtime: &Arc<Runtime>, wasm: &[u8]) -> anyhow::Result<Self> {
        ShaperComponent::load(runtime, wasm)
    }
    fn name(&self) -> &str {
        &self.info().name
    }
    fn sha256(&self) -> &str {
        &self.info().sha256
    }
    fn wasm(&self) -> &[u8] {
        ShaperComponent::wasm(self)
    }
}

/// Where the components of one kind serve.
pub(super) trait Serving<C>: Send + Sync {
    /// What serves once a change is made, prepared before it is recorded.
    type Next: Send;
    /// The component serving `channel`, if any.
    fn current(&self, channel: &str) -> Option<Arc<C>>;
    /// What serves with `component` in, and the install time it shows (`installed_at` when another process
    /// recorded the change): prepared, not made. Fails when `component` cannot serve beside the others.
    fn prepare(
        &self,
        component: &Arc<C>,
        installed_at: Option<&str>,
    ) -> anyhow::Result<(Self::Next, String)>;
    /// Makes the prepared change: one atomic pointer store, so a unit is handled by exactly one of the two.
    fn commit(&self, next: Self::Next);
}

impl Serving<DecoderComponent> for SharedDecoders {
    type Next = DecoderSet;

    fn current(&self, channel: &str) -> Option<Arc<DecoderComponent>> {
        self.load().for_source(channel)
    }

    fn prepare(
        &self,
        component: &Arc<DecoderComponent>,
        installed_at: Option<&str>,
    ) -> anyhow::Result<(DecoderSet, String)> {
        let mut next = self.load().with_decoder(component.clone())?;
        let sha256 = &component.info().sha256;
        if let Some(at) = installed_at {
            next.set_installed_at(sha256, at);
        }
        // The time the set gave it: what the change records, so the time shown before and after a restart is
        // one clock reading.
        let stamp = next
            .installed_at(sha256)
            .map_or_else(osds_time::now_rfc3339, str::to_owned);
        Ok((next, stamp))
    }

    fn commit(&self, next: DecoderSet) {
        self.store(Arc::new(next));
    }
}

/// The shaper serves every solution, whatever the channel it is named by.
impl Serving<ShaperComponent> for SharedShaper {
    type Next = Arc<ShaperComponent>;

    fn current(&self, _channel: &str) -> Option<Arc<ShaperComponent>> {
        Some(self.load_full())
    }

    fn prepare(
        &self,
        component: &Arc<ShaperComponent>,
        installed_at: Option<&str>,
    ) -> anyhow::Result<(Arc<ShaperComponent>, String)> {
        let stamp = installed_at.map_or_else(osds_time::now_rfc3339, str::to_owned);
        Ok((component.clone(), stamp))
    }

    fn commit(&self, next: Arc<ShaperComponent>) {
        self.store(next);
    }
}

/// How a change came.
#[derive(Debug, Clone, Copy)]
pub(super) enum Change<'a> {
    /// Made here, recorded before it is made.
    Made(ComponentAction),
    /// Recorded by another process of this archive at `changed_at`: made here without recording it again.
    Recorded { changed_at: &'a str },
}

/// The rollback targets of a slot, by channel. Held for the whole of a change: changes to one slot are
/// serialised, so a change prepared from what serves is never made over another.
pub(super) type Targets<C> = BTreeMap<String, Arc<C>>;

/// The components of one kind in service, and what a rollback of each channel would put back.
pub(super) struct Slot<C, S> {
    pub serving: S,
    targets: tokio::sync::Mutex<Targets<C>>,
}

impl<C: Component, S: Serving<C>> Slot<C, S> {
    pub fn new(serving: S, targets: Targets<C>) -> Self {
        Slot {
            serving,
            targets: tokio::sync::Mutex::new(targets),
        }
    }

    /// The rollback targets, locked for a change.
    pub async fn lock(&self) -> tokio::sync::MutexGuard<'_, Targets<C>> {
        self.targets.lock().await
    }

    /// `name@sha256` of what a rollback of `channel` would put back.
    pub async fn rollback_target(&self, channel: &str) -> Option<String> {
        self.targets.lock().await.get(channel).map(|c| c.identity())
    }

    /// Puts `component` in service on `channel` (recorded first unless another process recorded it); the one
    /// it replaces becomes the channel's rollback target. Returns the replaced one. `targets` is this slot's,
    /// from [`Slot::lock`].
    pub async fn put(
        &self,
        targets: &mut Targets<C>,
        writer: &WriterTask,
        channel: &str,
        change: Change<'_>,
        component: Arc<C>,
    ) -> anyhow::Result<Option<Arc<C>>> {
        let replaced = self.serving.current(channel);
        let recorded_at = match change {
            Change::Made(_) => None,
            Change::Recorded { changed_at } => Some(changed_at),
        };
        let (next, installed_at) = self.serving.prepare(&component, recorded_at)?;
        if let Change::Made(action) = change {
            writer
                .record_component(ComponentChange {
                    channel: channel.to_string(),
                    action,
                    sha256: component.sha256().to_string(),
                    wasm: Some(component.wasm().to_vec()),
                    previous: replaced.as_ref().map(|r| r.sha256().to_string()),
                    changed_at: installed_at,
                })
                .await
                .context("the change could not be recorded in the archive, so it was not made")?;
        }
        self.serving.commit(next);
        if let Some(replaced) = &replaced {
            targets.insert(channel.to_string(), replaced.clone());
        }
        Ok(replaced)
    }

    /// Puts back what `channel` had before its last change; the replaced one becomes the rollback target, so a
    /// second rollback undoes the first. Returns the restored component.
    pub async fn rollback(&self, writer: &WriterTask, channel: &str) -> anyhow::Result<Arc<C>> {
        let mut targets = self.lock().await;
        let restored = targets
            .remove(channel)
            .with_context(|| format!("no previous {} of `{channel}` to roll back to", C::KIND))?;
        let change = Change::Made(ComponentAction::Rollback);
        if let Err(e) = self
            .put(&mut targets, writer, channel, change, restored.clone())
            .await
        {
            // Nothing changed: the rollback target stays.
            targets.insert(channel.to_string(), restored);
            return Err(e);
        }
        tracing::info!(
            channel,
            name = %restored.name(),
            sha256 = %restored.sha256(),
            "{} rolled back",
            C::KIND
        );
        Ok(restored)
    }
}
