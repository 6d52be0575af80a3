//! The loaded hyp report shaper: the `osds:hyp/shaper` world, pre-instantiated, called in warm instances
//! under the same limits as the decoders.

use crate::engine::{CallState, Runtime, WarmInstances};
use anyhow::Context;
use std::sync::Arc;

mod bindings {
    wasmtime::component::bindgen!({ world: "shaper", path: "../../wit/hyp/v1.0.0" });
}

/// What a shaper says about itself, plus the identity of its `.wasm`.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ShaperInfo {
    pub name: String,
    pub version: String,
    /// Lowercase hex SHA-256 of the component's `.wasm` bytes.
    pub sha256: String,
}

impl ShaperInfo {
    /// `name@sha256`, as stored with every report it shaped.
    pub fn identity(&self) -> String {
        format!("{}@{}", self.name, self.sha256)
    }
}

/// The shaper in service, replaced as a whole on a hot swap.
pub type SharedShaper = Arc<arc_swap::ArcSwap<ShaperComponent>>;

pub struct ShaperComponent {
    runtime: Arc<Runtime>,
    pre: bindings::ShaperPre<CallState>,
    warm: WarmInstances<bindings::Shaper>,
    info: ShaperInfo,
    /// The `.wasm` bytes it was loaded from (for `osds components export` and the install record).
    wasm: Arc<[u8]>,
}

impl ShaperComponent {
    /// Compiles, type-checks against the shaper world and asks the component for its `info()`.
    pub fn load(runtime: &Arc<Runtime>, wasm: &[u8]) -> anyhow::Result<ShaperComponent> {
        let (pre, info, sha256) = runtime.load(
            wasm,
            crate::worlds::SHAPER,
            bindings::ShaperPre::new,
            |pre, store| pre.instantiate(&mut *store)?.call_info(store),
        )?;
        Ok(ShaperComponent {
            runtime: runtime.clone(),
            pre,
            warm: WarmInstances::new(info.name.clone()),
            wasm: wasm.into(),
            info: ShaperInfo {
                name: info.name,
                version: info.version,
                sha256,
            },
        })
    }

    /// The shaper built into the binary from `components/guests/hyp-shaper`.
    pub fn embedded(runtime: &Arc<Runtime>) -> anyhow::Result<ShaperComponent> {
        ShaperComponent::load(runtime, crate::embedded::EMBEDDED_SHAPER)
            .context("embedded hyp shaper")
    }

    /// The `.wasm` bytes it was loaded from.
    pub fn wasm(&self) -> &[u8] {
        &self.wasm
    }

    pub fn info(&self) -> &ShaperInfo {
        &self.info
    }

    /// Shapes one solution (JSON) into the report payload (JSON), under the runtime's limits.
    pub fn shape(&self, solution: &[u8]) -> anyhow::Result<Vec<u8>> {
        let returned = self.warm.call(
            &self.runtime,
            |store| self.pre.instantiate(store),
            |instance, store| instance.call_shape(store, solution),
        )?;
        returned.map_err(|e| anyhow::anyhow!("the shaper refused the solution: {}", e.message))
    }
}
