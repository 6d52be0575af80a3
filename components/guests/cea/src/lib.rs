//! The `cea` channel decoder component: all logic lives in `wolfx-core`, exported with the decoder SDK.
osds_decoder_sdk::export_channel_decoder!(osds_decoder_sdk::wolfx::CEA, "wolfx-cea");
