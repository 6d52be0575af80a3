//! What `/status`, `/sources` and the live `status` messages show of the upstream relay: each socket's state
//! and each channel's health.

use serde::Serialize;

/// One upstream socket's state.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConnectionState {
    pub path: String,
    pub role: &'static str,
    pub connected: bool,
    pub session_id: Option<i64>,
    pub connected_since: Option<String>,
    pub last_message_at: Option<String>,
    /// Why the last connection ended or failed (a reason code), cleared on connect.
    pub last_error: Option<&'static str>,
    pub reconnects: u64,
    /// Frames over the size limit this socket refused.
    pub refused_frames: u64,
}

/// One channel's state as `/status` and the live `status` messages show it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SourceState {
    pub source: String,
    /// `ok`: its own socket and `/all_eew` are connected; `degraded`: one of them is; `down`: neither (an outage).
    pub health: &'static str,
    pub connected: bool,
    pub primary_connected: bool,
    pub redundant_connected: bool,
    pub last_received_at: Option<String>,
}
