//! A broken sc decoder: it claims the sc channel and rejects every payload as malformed.

use osds_decoder_sdk::wolfx::SC;
use osds_decoder_sdk::{DecodeError, Decoded, Decoder, ErrorKind, Info};

struct Broken;

impl Decoder for Broken {
    fn info() -> Info {
        Info::of_channel(&SC, "wolfx-sc-broken", "0.0.1")
    }

    fn decode(_payload: &[u8]) -> Result<Decoded, DecodeError> {
        Err(DecodeError::new(
            ErrorKind::Malformed,
            "this decoder is broken on purpose",
        ))
    }
}

osds_decoder_sdk::export_decoder!(Broken);
