//! A loaded decoder component: the `osds:eew/decoder` world, pre-instantiated, called in warm instances.

use crate::engine::{CallError, CallState, Runtime, WarmInstances};
use std::sync::Arc;
use wolfx_core::{Control, DecodeError, Decoded, ErrorKind, Intensity, Report};

mod bindings {
    wasmtime::component::bindgen!({ world: "decoder", path: "../../wit/eew/v1.0.0" });
}

use bindings::osds::eew::types as wit;

/// What a decoder says about itself, plus the identity of its `.wasm`.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DecoderInfo {
    pub name: String,
    pub version: String,
    pub source: String,
    pub claims: Vec<String>,
    pub upstream_path: String,
    pub query_command: String,
    /// Lowercase hex SHA-256 of the component's `.wasm` bytes.
    pub sha256: String,
}

/// Why a payload produced no decoded value.
#[derive(Debug, thiserror::Error)]
pub enum DecodeFailure {
    /// The decoder ran and said no.
    #[error("{}", .0.message)]
    Rejected(DecodeError),
    /// The decoder did not return (trap, timeout, memory limit).
    #[error(transparent)]
    Call(#[from] CallError),
}

pub struct DecoderComponent {
    runtime: Arc<Runtime>,
    pre: bindings::DecoderPre<CallState>,
    warm: WarmInstances<bindings::Decoder>,
    info: DecoderInfo,
    /// The `.wasm` bytes it was loaded from (for `osds components export` and the install record).
    wasm: Arc<[u8]>,
}

impl DecoderComponent {
    /// Compiles, type-checks against the decoder world and asks the component for its `info()`.
    pub fn load(runtime: &Arc<Runtime>, wasm: &[u8]) -> anyhow::Result<DecoderComponent> {
        let (pre, info, sha256) = runtime.load(
            wasm,
            crate::worlds::DECODER,
            bindings::DecoderPre::new,
            |pre, store| pre.instantiate(&mut *store)?.call_info(store),
        )?;
        Ok(DecoderComponent {
            runtime: runtime.clone(),
            pre,
            warm: WarmInstances::new(info.name.clone()),
            wasm: wasm.into(),
            info: DecoderInfo {
                name: info.name,
                version: info.version,
                source: info.source,
                claims: info.claims,
                upstream_path: info.upstream_path,
                query_command: info.query_command,
                sha256,
            },
        })
    }

    /// The `.wasm` bytes it was loaded from.
    pub fn wasm(&self) -> &[u8] {
        &self.wasm
    }

    pub fn info(&self) -> &DecoderInfo {
        &self.info
    }

    /// Decodes one payload under the runtime's limits. Blocks for at most the deadline.
    pub fn decode(&self, payload: &[u8]) -> Result<Decoded, DecodeFailure> {
        let returned = self.warm.call(
            &self.runtime,
            |store| self.pre.instantiate(store),
            |instance, store| instance.call_decode(store, payload),
        )?;
        match returned {
            Ok(decoded) => Ok(from_wit(decoded)),
            Err(e) => Err(DecodeFailure::Rejected(DecodeError {
                kind: match e.kind {
                    wit::ErrorKind::Malformed => ErrorKind::Malformed,
                    wit::ErrorKind::Unsupported => ErrorKind::Unsupported,
                    wit::ErrorKind::MissingField => ErrorKind::MissingField,
                },
                message: e.message,
            })),
        }
    }
}

fn from_wit(decoded: wit::Decoded) -> Decoded {
    match decoded {
        wit::Decoded::Report(r) => Decoded::Report(Report {
            event_id: r.event_id,
            upstream_event_id: r.upstream_event_id,
            revision: r.revision,
            issued_at: r.issued_at,
            origin_at: r.origin_at,
            epicenter: r.epicenter,
            latitude: r.latitude,
            longitude: r.longitude,
            depth_km: r.depth_km,
            magnitude: r.magnitude,
            max_intensity: r.max_intensity.map(|i| match i {
                wit::Intensity::Number(n) => Intensity::Number(n),
                wit::Intensity::Text(t) => Intensity::Text(t),
            }),
            is_final: r.is_final,
            is_cancelled: r.is_cancelled,
            is_test: r.is_test,
        }),
        wit::Decoded::Control(wit::Control::Heartbeat(t)) => {
            Decoded::Control(Control::Heartbeat(t))
        }
        wit::Decoded::Control(wit::Control::Pong(t)) => Decoded::Control(Control::Pong(t)),
    }
}
