//! A decoder for an agency the host does not know (`cwa_eew` → source `cwa`), read with the Wolfx rules.
const CWA: wolfx_core::Channel = wolfx_core::Channel {
    type_tag: "cwa_eew",
    source: "cwa",
    upstream_path: "/cwa_eew",
    query_command: "query_cwaeew",
    zero_depth_is_unknown: false,
};

wolfx_core::export_decoder!(CWA, "wolfx-cwa");
