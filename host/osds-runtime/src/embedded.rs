//! The components built into the binary from `components/guests` by this crate's `build.rs`: every decoder
//! guest (`EMBEDDED_COMPONENTS`, by crate name), the hyp report shaper (`EMBEDDED_SHAPER`) and the JMA
//! reference decoder (`EMBEDDED_REFERENCE`).

include!(concat!(env!("OUT_DIR"), "/embedded_components.rs"));
