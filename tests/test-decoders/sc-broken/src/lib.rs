//! A broken sc decoder: it claims the sc channel and rejects every payload as malformed.
wit_bindgen::generate!({ world: "decoder", path: "../../../wit/eew" });

use osds::eew::types::ErrorKind;

struct Broken;

impl Guest for Broken {
    fn info() -> DecoderInfo {
        DecoderInfo {
            name: "wolfx-sc-broken".into(),
            version: "0.0.1".into(),
            source: "sc".into(),
            claims: vec!["sc_eew".into()],
            upstream_path: "/sc_eew".into(),
            query_command: "query_sceew".into(),
        }
    }

    fn decode(_payload: Vec<u8>) -> Result<Decoded, DecodeError> {
        Err(DecodeError {
            kind: ErrorKind::Malformed,
            message: "this decoder is broken on purpose".into(),
        })
    }
}

export!(Broken);
