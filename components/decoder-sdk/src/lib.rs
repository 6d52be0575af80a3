//! Write a decoder component for `osds`: implement [`Decoder`] for a type and export it with
//! [`export_decoder!`]. Build the crate (`crate-type = ["cdylib"]`) for `wasm32-wasip2`; the `.wasm` is a
//! component of the `osds:eew/decoder@1.0.0` world that `osds decode --components-dir` and
//! `osds components install` load.
//!
//! A decoder gets the exact bytes of one upstream frame and answers with a [`Report`], a [`Control`] frame
//! (heartbeat or pong) or a typed [`DecodeError`]. It has no network, files, clock or environment, and must not
//! keep state from one frame to the next. The [`fields`] readers parse a frame ([`fields::object`]), recognise
//! transport frames ([`fields::control`]) and read loosely typed fields the way the built-in decoders do:
//! numbers sent as strings are numbers, null is absent (never 0), Beijing times become RFC 3339 UTC.
//!
//! A decoder for a Wolfx channel (the built-in four, or another agency on the same relay) is one line:
//! [`export_channel_decoder!`].

pub use serde_json;
pub use wolfx_core::fields;
pub use wolfx_core::{
    Control, DecodeError, Decoded, ErrorKind, Intensity, Report, beijing_to_utc_rfc3339,
    strip_revision_suffix,
};

/// The Wolfx channels and their decoding rules.
pub mod wolfx {
    pub use wolfx_core::{CEA, CHANNELS, CQ, Channel, FJ, SC, decode};
}

/// The bindings of the `osds:eew/decoder@1.0.0` world, generated here so a decoder crate needs no WIT files.
pub mod bindings {
    wit_bindgen::generate!({
        world: "decoder",
        path: "wit",
        default_bindings_module: "osds_decoder_sdk::bindings",
        pub_export_macro: true,
        export_macro_name: "export_decoder_world",
    });
}

/// What a decoder says about itself; the host routes frames to it by `claims`.
#[derive(Debug, Clone, PartialEq)]
pub struct Info {
    /// Stable decoder name, e.g. `wolfx-sc`.
    pub name: String,
    /// The decoder's own version (semver).
    pub version: String,
    /// The API's `source` value of its reports: `cea`, `sc`, `fj`, `cq`, or a new agency's.
    pub source: String,
    /// Top-level upstream `type` tags it decodes, e.g. `["sc_eew"]`.
    pub claims: Vec<String>,
    /// Upstream WebSocket path of the channel's own socket, e.g. `/sc_eew`.
    pub upstream_path: String,
    /// Text command that asks the upstream for the channel's latest report, e.g. `query_sceew`.
    pub query_command: String,
}

impl Info {
    /// The info of a decoder named `name` (at `version`) for a Wolfx channel.
    pub fn of_channel(channel: &wolfx::Channel, name: &str, version: &str) -> Info {
        Info {
            name: name.to_string(),
            version: version.to_string(),
            source: channel.source.to_string(),
            claims: vec![channel.type_tag.to_string()],
            upstream_path: channel.upstream_path.to_string(),
            query_command: channel.query_command.to_string(),
        }
    }
}

/// A decoder: its info, and the decoding of one frame's exact bytes.
pub trait Decoder {
    fn info() -> Info;
    fn decode(payload: &[u8]) -> Result<Decoded, DecodeError>;
}

/// Exports a type implementing [`Decoder`] as the component's `osds:eew/decoder` world. Use once per crate.
#[macro_export]
macro_rules! export_decoder {
    ($decoder:ty) => {
        struct OsdsDecoderExport;

        impl $crate::bindings::Guest for OsdsDecoderExport {
            fn info() -> $crate::bindings::osds::eew::types::DecoderInfo {
                $crate::wit::info(<$decoder as $crate::Decoder>::info())
            }

            fn decode(
                payload: ::std::vec::Vec<u8>,
            ) -> ::std::result::Result<
                $crate::bindings::osds::eew::types::Decoded,
                $crate::bindings::osds::eew::types::DecodeError,
            > {
                $crate::wit::decoded(<$decoder as $crate::Decoder>::decode(&payload))
            }
        }

        $crate::bindings::export_decoder_world!(OsdsDecoderExport);
    };
}

/// Exports the decoder of a Wolfx channel (a [`wolfx::Channel`]) named `name`, versioned as its crate.
#[macro_export]
macro_rules! export_channel_decoder {
    ($channel:expr, $name:expr) => {
        struct WolfxChannelDecoder;

        impl $crate::Decoder for WolfxChannelDecoder {
            fn info() -> $crate::Info {
                $crate::Info::of_channel(&$channel, $name, env!("CARGO_PKG_VERSION"))
            }

            fn decode(
                payload: &[u8],
            ) -> ::std::result::Result<$crate::Decoded, $crate::DecodeError> {
                $crate::wolfx::decode(&$channel, payload)
            }
        }

        $crate::export_decoder!(WolfxChannelDecoder);
    };
}

/// The conversions from the SDK's types to the world's, used by [`export_decoder!`].
#[doc(hidden)]
pub mod wit {
    use crate::bindings::osds::eew::types as world;
    use crate::{Control, DecodeError, Decoded, ErrorKind, Info, Intensity};

    pub fn info(info: Info) -> world::DecoderInfo {
        world::DecoderInfo {
            name: info.name,
            version: info.version,
            source: info.source,
            claims: info.claims,
            upstream_path: info.upstream_path,
            query_command: info.query_command,
        }
    }

    pub fn decoded(
        result: Result<Decoded, DecodeError>,
    ) -> Result<world::Decoded, world::DecodeError> {
        match result {
            Ok(Decoded::Report(r)) => Ok(world::Decoded::Report(world::Report {
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
                    Intensity::Number(n) => world::Intensity::Number(n),
                    Intensity::Text(t) => world::Intensity::Text(t),
                }),
                is_final: r.is_final,
                is_cancelled: r.is_cancelled,
                is_test: r.is_test,
            })),
            Ok(Decoded::Control(Control::Heartbeat(t))) => {
                Ok(world::Decoded::Control(world::Control::Heartbeat(t)))
            }
            Ok(Decoded::Control(Control::Pong(t))) => {
                Ok(world::Decoded::Control(world::Control::Pong(t)))
            }
            Err(e) => Err(world::DecodeError {
                kind: match e.kind {
                    ErrorKind::Malformed => world::ErrorKind::Malformed,
                    ErrorKind::Unsupported => world::ErrorKind::Unsupported,
                    ErrorKind::MissingField => world::ErrorKind::MissingField,
                },
                message: e.message,
            }),
        }
    }
}
