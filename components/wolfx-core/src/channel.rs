/// One Wolfx channel the service archives, with everything the host and its decoder need to know of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Channel {
    /// Top-level `type` of the channel's frames.
    pub type_tag: &'static str,
    /// The public API's `source` value.
    pub source: &'static str,
    /// The channel's own upstream WebSocket path.
    pub upstream_path: &'static str,
    /// Text command asking the upstream for the channel's latest report.
    pub query_command: &'static str,
    /// The channel sends `Depth: 0` when the depth is not determined.
    pub zero_depth_is_unknown: bool,
}

pub const CEA: Channel = Channel {
    type_tag: "cenc_eew",
    source: "cea",
    upstream_path: "/cenc_eew",
    query_command: "query_cenceew",
    zero_depth_is_unknown: false,
};

pub const SC: Channel = Channel {
    type_tag: "sc_eew",
    source: "sc",
    upstream_path: "/sc_eew",
    query_command: "query_sceew",
    zero_depth_is_unknown: true,
};

pub const FJ: Channel = Channel {
    type_tag: "fj_eew",
    source: "fj",
    upstream_path: "/fj_eew",
    query_command: "query_fjeew",
    zero_depth_is_unknown: false,
};

pub const CQ: Channel = Channel {
    type_tag: "cq_eew",
    source: "cq",
    upstream_path: "/cq_eew",
    query_command: "query_cqeew",
    zero_depth_is_unknown: false,
};

/// The spec's four channels, in the order the API lists them.
pub const CHANNELS: [Channel; 4] = [CEA, SC, FJ, CQ];
