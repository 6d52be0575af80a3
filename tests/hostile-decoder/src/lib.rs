//! Exports the decoder world but misbehaves on purpose: `{"do":"loop"}` spins forever, `{"do":"alloc"}`
//! allocates until it is stopped, `{"do":"panic"}` panics, `{"do":"keep"}` keeps 12 MiB for good and answers;
//! anything else decodes to a pong.

use osds_decoder_sdk::{Control, DecodeError, Decoded, Decoder, Info};

struct Hostile;

impl Decoder for Hostile {
    fn info() -> Info {
        Info {
            name: "hostile".into(),
            version: "0.1.0".into(),
            source: "hostile".into(),
            claims: vec!["hostile_eew".into()],
            upstream_path: "/hostile_eew".into(),
            query_command: "query_hostile".into(),
        }
    }

    fn decode(payload: &[u8]) -> Result<Decoded, DecodeError> {
        let text = String::from_utf8_lossy(payload);
        if text.contains("\"loop\"") {
            let mut n = 0u64;
            loop {
                n = std::hint::black_box(n.wrapping_add(1));
            }
        }
        if text.contains("\"alloc\"") {
            let mut hoard: Vec<Vec<u8>> = Vec::new();
            loop {
                hoard.push(vec![7u8; 1 << 20]);
                std::hint::black_box(&hoard);
            }
        }
        if text.contains("\"keep\"") {
            let kept = vec![7u8; 12 << 20];
            std::mem::forget(std::hint::black_box(kept));
        }
        if text.contains("\"panic\"") {
            panic!("hostile decoder panics on purpose");
        }
        Ok(Decoded::Control(Control::Pong(Some(1))))
    }
}

osds_decoder_sdk::export_decoder!(Hostile);
