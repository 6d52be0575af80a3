//! The timing of live delivery, set by `osds serve` flags.

use std::time::Duration;

/// Timing of live delivery (the spec's values are the defaults).
#[derive(Debug, Clone)]
pub struct LiveConfig {
    /// Reports per second while a backlog is replayed.
    pub replay_rate: f64,
    /// Interval of `status` messages.
    pub status_interval: Duration,
    /// Interval of SSE keep-alive comments and WebSocket protocol pings.
    pub keepalive_interval: Duration,
    /// The SSE `retry:` a browser waits before reconnecting.
    pub retry: Duration,
    /// A WebSocket consumer that takes no message for this long is disconnected (an SSE stream goes at its
    /// reader's pace).
    pub slow_consumer: Duration,
    /// Connections are closed after this long (the client resumes from its cursor); `None`: never.
    pub max_connection: Option<Duration>,
}

impl Default for LiveConfig {
    fn default() -> Self {
        LiveConfig {
            replay_rate: 100.0,
            status_interval: Duration::from_secs(15),
            keepalive_interval: Duration::from_secs(15),
            retry: Duration::from_secs(3),
            slow_consumer: Duration::from_secs(30),
            max_connection: None,
        }
    }
}
