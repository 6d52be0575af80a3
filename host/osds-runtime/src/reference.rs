//! The loaded reference decoder: the `osds:reference/reference` world (an official agency's own warnings and
//! earthquake list, read to score the self-sensing detector), pre-instantiated and called in warm instances
//! under the same limits as the channel decoders. It is swapped as a whole, like them, without a restart.

use crate::engine::{CallState, Runtime, WarmInstances};
use anyhow::Context;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use wolfx_core::jma::{Determination, Kind};

mod bindings {
    wasmtime::component::bindgen!({ world: "reference", path: "../../wit/reference/v1.0.0" });
}

use bindings::osds::reference::types as wit;

/// What a reference decoder says about itself, plus the identity of its `.wasm`.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReferenceInfo {
    pub name: String,
    pub version: String,
    pub agency: String,
    pub claims: Vec<String>,
    /// Lowercase hex SHA-256 of the component's `.wasm` bytes.
    pub sha256: String,
}

/// The reference decoder in service, replaced as a whole on a hot swap.
pub type SharedReference = Arc<arc_swap::ArcSwap<ReferenceComponent>>;

/// A `.wasm` in a components directory is a reference decoder when its name says so: `reference_<agency>.wasm`.
pub fn is_reference_file(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("reference_") && n.ends_with(".wasm"))
}

pub struct ReferenceComponent {
    runtime: Arc<Runtime>,
    pre: bindings::ReferencePre<CallState>,
    warm: WarmInstances<bindings::Reference>,
    info: ReferenceInfo,
    wasm: Arc<[u8]>,
}

impl ReferenceComponent {
    /// Compiles, type-checks against the reference world and asks the component for its `info()`.
    pub fn load(runtime: &Arc<Runtime>, wasm: &[u8]) -> anyhow::Result<ReferenceComponent> {
        let (pre, info, sha256) = runtime.load(
            wasm,
            crate::worlds::REFERENCE,
            bindings::ReferencePre::new,
            |pre, store| pre.instantiate(&mut *store)?.call_info(store),
        )?;
        Ok(ReferenceComponent {
            runtime: runtime.clone(),
            pre,
            warm: WarmInstances::new(info.name.clone()),
            wasm: wasm.into(),
            info: ReferenceInfo {
                name: info.name,
                version: info.version,
                agency: info.agency,
                claims: info.claims,
                sha256,
            },
        })
    }

    /// The JMA reference decoder built into the binary from `components/guests/jma`.
    pub fn embedded(runtime: &Arc<Runtime>) -> anyhow::Result<ReferenceComponent> {
        ReferenceComponent::load(runtime, crate::embedded::EMBEDDED_REFERENCE)
            .context("embedded JMA reference decoder")
    }

    /// The `reference_*.wasm` of a components directory, if it has one (the first by name), else `None`.
    pub fn from_dir(
        runtime: &Arc<Runtime>,
        dir: &Path,
    ) -> anyhow::Result<Option<ReferenceComponent>> {
        let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
            .with_context(|| format!("read components directory {}", dir.display()))?
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .filter(|p| is_reference_file(p))
            .collect();
        paths.sort();
        let Some(path) = paths.first() else {
            return Ok(None);
        };
        let wasm = std::fs::read(path).with_context(|| format!("read {}", path.display()))?;
        ReferenceComponent::load(runtime, &wasm)
            .with_context(|| format!("load {}", path.display()))
            .map(Some)
    }

    pub fn info(&self) -> &ReferenceInfo {
        &self.info
    }

    /// The `.wasm` bytes it was loaded from.
    pub fn wasm(&self) -> &[u8] {
        &self.wasm
    }

    /// Reads one frame, under the runtime's limits.
    pub fn decode(&self, payload: &[u8]) -> anyhow::Result<Vec<Determination>> {
        let returned = self.warm.call(
            &self.runtime,
            |store| self.pre.instantiate(store),
            |instance, store| instance.call_decode(store, payload),
        )?;
        let determinations =
            returned.map_err(|e| anyhow::anyhow!("{:?}: {}", e.kind, e.message))?;
        Ok(determinations.into_iter().map(from_wit).collect())
    }
}

fn from_wit(d: wit::Determination) -> Determination {
    Determination {
        kind: match d.kind {
            wit::Kind::Warning => Kind::Warning,
            wit::Kind::Catalogue => Kind::Catalogue,
        },
        event_id: d.event_id,
        serial: d.serial,
        issued_at: d.issued_at,
        origin_at: d.origin_at,
        place: d.place,
        latitude: d.latitude,
        longitude: d.longitude,
        depth_km: d.depth_km,
        magnitude: d.magnitude,
        is_final: d.is_final,
        is_cancelled: d.is_cancelled,
        is_test: d.is_test,
        is_assumed: d.is_assumed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Limits;

    #[test]
    fn the_embedded_jma_reference_decodes_a_warning_in_its_sandbox() {
        let runtime = Runtime::new(Limits::default()).unwrap();
        let reference = ReferenceComponent::embedded(&runtime).unwrap();
        assert_eq!(reference.info().agency, "jma");
        assert!(reference.info().claims.contains(&"jma_eew".to_string()));
        let frame = r#"{"type":"jma_eew","EventID":"20160414212634","Serial":1,"AnnouncedTime":"2016/04/14 21:26:43","OriginTime":"2016/04/14 21:26:34","Hypocenter":"熊本県熊本地方","Latitude":32.7,"Longitude":130.8,"Magunitude":5.7,"Depth":10,"isFinal":false,"isCancel":false,"isTraining":false,"isAssumption":false}"#;
        let d = reference.decode(frame.as_bytes()).unwrap();
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].origin_at.as_deref(), Some("2016-04-14T12:26:34Z"));
        assert!(reference.decode(b"not json").is_err());
    }
}
