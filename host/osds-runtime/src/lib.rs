//! The sandboxed WebAssembly runtime of the service: the engine and its limits ([`engine`]), the bindings of
//! each component world ([`decoder`] for `osds:eew/decoder`, [`shaper`] for `osds:hyp/shaper`, [`reference`]
//! for `osds:reference/reference`), the set of
//! decoders in service ([`decoder_set`]), the components built into the binary ([`embedded`]), what the host
//! reads of an upstream frame before decoding it ([`units`]) and the one decode step every caller shares
//! ([`decoding`]).

pub mod decoder;
pub mod decoder_set;
pub mod decoding;
pub mod embedded;
pub mod engine;
pub mod reference;
pub mod shaper;
pub mod units;
pub mod worlds;

pub use decoder::{DecoderComponent, DecoderInfo};
pub use decoder_set::{DecoderSet, SharedDecoders};
pub use engine::{CallError, Limits, Runtime};
pub use reference::{ReferenceComponent, ReferenceInfo, SharedReference};
pub use shaper::{ShaperComponent, ShaperInfo, SharedShaper};
