//! The components built into the binary from `components/guests` by this crate's `build.rs`: every decoder
//! guest (`EMBEDDED_COMPONENTS`, by crate name) and the hyp report shaper (`EMBEDDED_SHAPER`).

include!(concat!(env!("OUT_DIR"), "/embedded_components.rs"));
