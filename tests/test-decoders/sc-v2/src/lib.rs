//! A second build of the sc decoder: the same rules under another name, so its `.wasm` differs.
osds_decoder_sdk::export_channel_decoder!(osds_decoder_sdk::wolfx::SC, "wolfx-sc-v2");
