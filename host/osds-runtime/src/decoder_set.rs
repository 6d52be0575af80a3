//! The set of loaded decoder components and the routing of a frame's `type` to one of them.

use crate::decoder::DecoderComponent;
use crate::embedded::EMBEDDED_COMPONENTS;
use crate::engine::Runtime;
use crate::units::is_control_tag;
use anyhow::Context;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The decoder set in use, replaced as a whole on a hot swap: a frame is decoded against one snapshot.
pub type SharedDecoders = Arc<arc_swap::ArcSwap<DecoderSet>>;

/// The decoders' `*.wasm` files in `dir`, in name order: every `.wasm` but the shaper's (`hyp_shaper.wasm`) and
/// a reference decoder's (`reference_<agency>.wasm`).
pub fn wasm_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "wasm"))
        .filter(|p| !crate::reference::is_reference_file(p))
        .filter(|p| p.file_name().is_none_or(|n| n != "hyp_shaper.wasm"))
        .collect();
    paths.sort();
    Ok(paths)
}

/// Decoders by the upstream `type` tag they claim.
#[derive(Clone, Default)]
pub struct DecoderSet {
    by_tag: BTreeMap<String, Arc<DecoderComponent>>,
    /// When each decoder (by the SHA-256 of its `.wasm`) was put in service.
    installed_at: BTreeMap<String, String>,
}

impl DecoderSet {
    /// The components built into the binary from `components/guests`.
    pub fn embedded(runtime: &Arc<Runtime>) -> anyhow::Result<DecoderSet> {
        let mut set = DecoderSet::default();
        for (name, wasm) in EMBEDDED_COMPONENTS {
            let decoder = DecoderComponent::load(runtime, wasm)
                .with_context(|| format!("embedded decoder `{name}`"))?;
            set.insert(Arc::new(decoder))?;
        }
        Ok(set)
    }

    /// Every `*.wasm` file in `dir`.
    pub fn from_dir(runtime: &Arc<Runtime>, dir: &Path) -> anyhow::Result<DecoderSet> {
        let paths = wasm_files(dir)
            .with_context(|| format!("read components directory {}", dir.display()))?;
        anyhow::ensure!(
            !paths.is_empty(),
            "no .wasm components in {}",
            dir.display()
        );
        let mut set = DecoderSet::default();
        for path in paths {
            let wasm = std::fs::read(&path).with_context(|| format!("read {}", path.display()))?;
            let decoder = DecoderComponent::load(runtime, &wasm)
                .with_context(|| format!("load {}", path.display()))?;
            set.insert(Arc::new(decoder))?;
        }
        Ok(set)
    }

    /// `--components-dir` when given, else the embedded components.
    pub fn load(runtime: &Arc<Runtime>, dir: Option<&Path>) -> anyhow::Result<DecoderSet> {
        match dir {
            Some(dir) => DecoderSet::from_dir(runtime, dir),
            None => DecoderSet::embedded(runtime),
        }
    }

    /// A copy of this set with `decoder` serving its `source` in place of the one that did (if any). Fails
    /// when it claims a `type` another source's decoder claims.
    pub fn with_decoder(&self, decoder: Arc<DecoderComponent>) -> anyhow::Result<DecoderSet> {
        let source = decoder.info().source.clone();
        let mut set = self.clone();
        set.by_tag.retain(|_, d| d.info().source != source);
        set.insert(decoder)?;
        let live: Vec<String> = set
            .by_tag
            .values()
            .map(|d| d.info().sha256.clone())
            .collect();
        set.installed_at.retain(|sha, _| live.contains(sha));
        Ok(set)
    }

    /// The decoder serving `source`.
    pub fn for_source(&self, source: &str) -> Option<Arc<DecoderComponent>> {
        self.by_tag
            .values()
            .find(|d| d.info().source == source)
            .cloned()
    }

    /// Records when the decoder with this SHA-256 was put in service (one put back after a restart keeps its
    /// install time).
    pub fn set_installed_at(&mut self, sha256: &str, at: &str) {
        if let Some(time) = self.installed_at.get_mut(sha256) {
            *time = at.to_string();
        }
    }

    /// When the decoder with this `.wasm` SHA-256 was put in service.
    pub fn installed_at(&self, sha256: &str) -> Option<&str> {
        self.installed_at.get(sha256).map(String::as_str)
    }

    fn insert(&mut self, decoder: Arc<DecoderComponent>) -> anyhow::Result<()> {
        self.installed_at
            .insert(decoder.info().sha256.clone(), osds_time::now_rfc3339());
        for tag in &decoder.info().claims {
            anyhow::ensure!(
                !is_control_tag(tag),
                "decoder `{}` claims the transport type `{tag}`",
                decoder.info().name
            );
            if let Some(other) = self.by_tag.get(tag) {
                anyhow::bail!(
                    "decoders `{}` and `{}` both claim type `{tag}`",
                    other.info().name,
                    decoder.info().name
                );
            }
            self.by_tag.insert(tag.clone(), decoder.clone());
        }
        Ok(())
    }

    /// The decoder claiming `tag`.
    pub fn for_tag(&self, tag: &str) -> Option<&Arc<DecoderComponent>> {
        self.by_tag.get(tag)
    }

    /// Each loaded decoder once, ordered by source.
    pub fn decoders(&self) -> Vec<Arc<DecoderComponent>> {
        let mut all: Vec<Arc<DecoderComponent>> = Vec::new();
        for decoder in self.by_tag.values() {
            if !all.iter().any(|d| Arc::ptr_eq(d, decoder)) {
                all.push(decoder.clone());
            }
        }
        all.sort_by(|a, b| a.info().source.cmp(&b.info().source));
        all
    }
}
