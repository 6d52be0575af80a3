//! A decoder for an agency the host does not know (`cwa_eew` → source `cwa`), read with the Wolfx rules.
const CWA: osds_decoder_sdk::wolfx::Channel = osds_decoder_sdk::wolfx::Channel {
    type_tag: "cwa_eew",
    source: "cwa",
    upstream_path: "/cwa_eew",
    query_command: "query_cwaeew",
    zero_depth_is_unknown: false,
};

osds_decoder_sdk::export_channel_decoder!(CWA, "wolfx-cwa");
