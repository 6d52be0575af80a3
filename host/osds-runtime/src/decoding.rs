//! The one decode step: route a unit to the decoder that claims it, decode it in that component, name the
//! version identity of a report and the kind of a failure. Ingestion, `osds reparse`, `osds decode`, an
//! install's canary and the benchmarks all take a unit through here, so they cannot disagree about a frame.

use crate::decoder::{DecodeFailure, DecoderComponent, DecoderInfo};
use crate::decoder_set::DecoderSet;
use crate::units::{self, Unit};
use sha2::{Digest, Sha256};
use std::sync::Arc;
use wolfx_core::{Control, Decoded, Report};

/// Where a unit goes when its own `type` cannot be read.
#[derive(Debug, Clone, Copy)]
pub enum Fallback<'a> {
    /// Nowhere: an untyped unit is not routed (a frame on `/all_eew`).
    None,
    /// To the decoder claiming this `type` (the channel of the socket the frame came on).
    Tag(&'a str),
    /// To the decoder of this channel (an archived unit whose channel was recorded).
    Source(&'a str),
}

/// Why a unit gave no report. The wire spelling (`as_str`) is what the archive stores and the tools print.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailureKind {
    /// Not readable as the channel's frame (not JSON, or not the shape the decoder knows).
    Malformed,
    /// A frame the decoder does not turn into a report (a control frame, a kind of message it leaves alone).
    Unsupported,
    /// A field the decoder needs is missing.
    MissingField,
    /// The decoder did not return in its time budget.
    Timeout,
    /// The decoder trapped (a bug in it, or its memory limit).
    Trap,
    /// No `type` to route by, or no decoder claims it.
    Unrouted,
}

impl FailureKind {
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::Malformed => "malformed",
            FailureKind::Unsupported => "unsupported",
            FailureKind::MissingField => "missing-field",
            FailureKind::Timeout => "timeout",
            FailureKind::Trap => "trap",
            FailureKind::Unrouted => "unrouted",
        }
    }
}

/// What became of a unit.
pub enum Outcome {
    /// A report, with its version identity (see [`version_identity`]), by `decoder`.
    Report {
        report: Box<Report>,
        identity: String,
        decoder: Arc<DecoderComponent>,
    },
    /// A control frame (a heartbeat, a pong), as the decoder read it.
    Control {
        control: Control,
        decoder: Arc<DecoderComponent>,
    },
    /// A `type` no loaded decoder claims: a channel this service does not archive.
    Unclaimed { tag: String },
    /// No report, and why; `decoder` when one was called.
    Failed {
        kind: FailureKind,
        message: String,
        decoder: Option<Arc<DecoderComponent>>,
    },
}

impl Outcome {
    /// The decoder that was called, if any.
    pub fn decoder(&self) -> Option<&DecoderInfo> {
        match self {
            Outcome::Report { decoder, .. } | Outcome::Control { decoder, .. } => {
                Some(decoder.info())
            }
            Outcome::Failed { decoder, .. } => decoder.as_deref().map(DecoderComponent::info),
            Outcome::Unclaimed { .. } => None,
        }
    }

    /// Why there is no report, where a report was wanted: a control frame is `unsupported`, an unclaimed
    /// `type` is `unrouted`. `None` for a report.
    pub fn failure(&self) -> Option<(FailureKind, String)> {
        match self {
            Outcome::Report { .. } => None,
            Outcome::Control { control, .. } => Some((
                FailureKind::Unsupported,
                format!("the decoder read a control frame ({control:?}), not a report"),
            )),
            Outcome::Unclaimed { tag } => Some((
                FailureKind::Unrouted,
                format!("no loaded decoder claims type `{tag}`"),
            )),
            Outcome::Failed { kind, message, .. } => Some((*kind, message.clone())),
        }
    }
}

/// The one decode step (see the module comment): `unit` goes to the decoder claiming its `type`, else to
/// `fallback`'s.
pub fn decode_unit(decoders: &DecoderSet, unit: &Unit, fallback: Fallback<'_>) -> Outcome {
    let decoder = match (unit.type_tag.as_deref(), fallback) {
        (Some(tag), _) | (None, Fallback::Tag(tag)) => match decoders.for_tag(tag) {
            Some(decoder) => decoder.clone(),
            None => return Outcome::Unclaimed { tag: tag.into() },
        },
        (None, Fallback::Source(source)) => match decoders.for_source(source) {
            Some(decoder) => decoder,
            None => {
                return Outcome::Failed {
                    kind: FailureKind::Unrouted,
                    message: format!("no loaded decoder decodes channel `{source}`"),
                    decoder: None,
                };
            }
        },
        (None, Fallback::None) => {
            let not_json = serde_json::from_slice::<serde::de::IgnoredAny>(&unit.bytes).is_err();
            return Outcome::Failed {
                kind: if not_json {
                    FailureKind::Malformed
                } else {
                    FailureKind::Unrouted
                },
                message: if not_json {
                    "the frame is not valid JSON, so it has no `type` to route by".into()
                } else {
                    "the frame has no top-level `type` to route by".into()
                },
                decoder: None,
            };
        }
    };
    decode_with(decoder, &unit.bytes)
}

/// Decodes `bytes` with `decoder` (routing decided by the caller: `osds decode --type`, a canary comparing
/// two decoders of one channel).
pub fn decode_with(decoder: Arc<DecoderComponent>, bytes: &[u8]) -> Outcome {
    match decoder.decode(bytes) {
        Ok(Decoded::Report(report)) => Outcome::Report {
            report: Box::new(report),
            identity: version_identity(bytes),
            decoder,
        },
        Ok(Decoded::Control(control)) => Outcome::Control { control, decoder },
        Err(failure) => Outcome::Failed {
            kind: failure_kind(&failure),
            message: failure.to_string(),
            decoder: Some(decoder),
        },
    }
}

fn failure_kind(failure: &DecodeFailure) -> FailureKind {
    use crate::engine::CallError;
    use wolfx_core::ErrorKind;
    match failure {
        DecodeFailure::Rejected(e) => match e.kind {
            ErrorKind::Malformed => FailureKind::Malformed,
            ErrorKind::Unsupported => FailureKind::Unsupported,
            ErrorKind::MissingField => FailureKind::MissingField,
        },
        DecodeFailure::Call(CallError::Timeout(_)) => FailureKind::Timeout,
        DecodeFailure::Call(CallError::Trap { .. }) => FailureKind::Trap,
    }
}

/// A report version's identity, the archive's de-duplication key: the SHA-256 (lowercase hex) of the unit's
/// canonical JSON without its `type` (`units::canonical_without_type`; the bytes themselves when not JSON).
/// Two deliveries with one identity in one channel are one version.
pub fn version_identity(unit_bytes: &[u8]) -> String {
    let canonical =
        units::canonical_without_type(unit_bytes).unwrap_or_else(|| unit_bytes.to_vec());
    hex::encode(Sha256::digest(&canonical))
}
