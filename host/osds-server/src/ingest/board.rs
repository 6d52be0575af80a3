//! Live connection state: which upstream sockets are up, when each channel last received, and the outage
//! transitions that follow (a channel is out while neither its own socket nor `/all_eew` is connected).

use osds_api::upstream::{ConnectionState, SourceState, Upstream};
use osds_runtime::DecoderSet;
use osds_store::Code;
use osds_time::now_rfc3339;
use std::collections::BTreeMap;
use std::sync::Mutex;

/// The redundant all-channel socket.
pub const REDUNDANT_PATH: &str = "/all_eew";

/// An archived channel: its `source`, `type` tag, own upstream path and query command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelSpec {
    pub source: String,
    pub type_tag: String,
    pub path: String,
    pub query_command: String,
}

impl ChannelSpec {
    /// One channel per claimed type tag of the loaded decoders.
    pub fn from_decoders(decoders: &DecoderSet) -> Vec<ChannelSpec> {
        let mut channels: Vec<ChannelSpec> = decoders
            .decoders()
            .iter()
            .flat_map(|d| {
                let info = d.info();
                info.claims.iter().map(|tag| ChannelSpec {
                    source: info.source.clone(),
                    type_tag: tag.clone(),
                    path: info.upstream_path.clone(),
                    query_command: info.query_command.clone(),
                })
            })
            .collect();
        // The spec's channels in its order, then any other agency's by name.
        let order = |source: &str| {
            wolfx_core::CHANNELS
                .iter()
                .position(|c| c.source == source)
                .unwrap_or(usize::MAX)
        };
        channels.sort_by(|a, b| {
            order(&a.source)
                .cmp(&order(&b.source))
                .then(a.source.cmp(&b.source))
        });
        channels
    }
}

#[derive(Default)]
struct Inner {
    /// Grows when a component for a new agency is installed.
    channels: Vec<ChannelSpec>,
    connections: BTreeMap<String, ConnectionState>,
    last_received: BTreeMap<String, String>,
}

/// Shared between the connection tasks and the API.
pub struct UpstreamBoard {
    inner: Mutex<Inner>,
}

impl UpstreamBoard {
    pub fn new(channels: Vec<ChannelSpec>) -> UpstreamBoard {
        let state = UpstreamBoard {
            inner: Mutex::new(Inner::default()),
        };
        state.add_connection(REDUNDANT_PATH, osds_store::SocketRole::Redundant);
        for channel in channels {
            state.add_channel(channel);
        }
        state
    }

    fn add_connection(&self, path: &str, role: osds_store::SocketRole) {
        self.lock()
            .connections
            .entry(path.to_string())
            .or_insert_with(|| ConnectionState {
                path: path.to_string(),
                role: role.as_str(),
                ..Default::default()
            });
    }

    /// Adds a channel (a component for a new agency was installed). Returns false when its `type` is known.
    pub fn add_channel(&self, channel: ChannelSpec) -> bool {
        let path = channel.path.clone();
        {
            let mut inner = self.lock();
            if inner
                .channels
                .iter()
                .any(|c| c.type_tag == channel.type_tag)
            {
                return false;
            }
            inner.channels.push(channel);
        }
        self.add_connection(&path, osds_store::SocketRole::Primary);
        true
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn channels(&self) -> Vec<ChannelSpec> {
        self.lock().channels.clone()
    }

    pub fn sources(&self) -> Vec<String> {
        sources_of(&self.lock().channels)
    }

    pub fn channel_for_path(&self, path: &str) -> Option<ChannelSpec> {
        self.lock()
            .channels
            .iter()
            .find(|c| c.path == path)
            .cloned()
    }

    /// Seeds the last reception times from the archive at start-up.
    pub fn seed_last_received(&self, receptions: Vec<(String, String)>) {
        self.lock().last_received.extend(receptions);
    }

    pub fn received(&self, path: &str, source: Option<&str>, at: &str) {
        let mut inner = self.lock();
        if let Some(source) = source {
            inner
                .last_received
                .insert(source.to_string(), at.to_string());
        }
        if let Some(connection) = inner.connections.get_mut(path) {
            connection.last_message_at = Some(at.to_string());
        }
    }

    pub fn message(&self, path: &str) {
        if let Some(connection) = self.lock().connections.get_mut(path) {
            connection.last_message_at = Some(now_rfc3339());
        }
    }

    /// Counts a frame `path` refused for its size.
    pub fn refused(&self, path: &str) {
        if let Some(connection) = self.lock().connections.get_mut(path) {
            connection.refused_frames += 1;
        }
    }

    /// Marks `path` connected or not and returns the sources whose up/down state changed: (source, now_up).
    pub fn set_connected(
        &self,
        path: &str,
        connected: bool,
        session_id: Option<i64>,
        error: Option<osds_store::EndReason>,
    ) -> Vec<(String, bool)> {
        let before = self.source_up();
        let mut inner = self.lock();
        if let Some(connection) = inner.connections.get_mut(path) {
            if connected && !connection.connected {
                connection.connected_since = Some(now_rfc3339());
                connection.reconnects += u64::from(connection.session_id.is_some());
            }
            connection.connected = connected;
            if connected {
                connection.session_id = session_id;
            } else {
                connection.connected_since = None;
            }
            if error.is_some() || connected {
                connection.last_error = error.map(osds_store::EndReason::as_str);
            }
        }
        drop(inner);
        let after = self.source_up();
        after
            .into_iter()
            .zip(before)
            .filter(|(a, b)| a.1 != b.1)
            .map(|(a, _)| a)
            .collect()
    }

    fn source_up(&self) -> Vec<(String, bool)> {
        self.source_states()
            .into_iter()
            .map(|s| (s.source, s.connected))
            .collect()
    }

    pub fn connections(&self) -> Vec<ConnectionState> {
        self.lock().connections.values().cloned().collect()
    }

    pub fn source_states(&self) -> Vec<SourceState> {
        let inner = self.lock();
        let up = |path: &str| inner.connections.get(path).is_some_and(|c| c.connected);
        let redundant = up(REDUNDANT_PATH);
        sources_of(&inner.channels)
            .into_iter()
            .map(|source| {
                let primary = inner
                    .channels
                    .iter()
                    .filter(|c| c.source == source)
                    .any(|c| up(&c.path));
                let health = match (primary, redundant) {
                    (true, true) => "ok",
                    (false, false) => "down",
                    _ => "degraded",
                };
                SourceState {
                    last_received_at: inner.last_received.get(&source).cloned(),
                    source,
                    health,
                    connected: primary || redundant,
                    primary_connected: primary,
                    redundant_connected: redundant,
                }
            })
            .collect()
    }
}

impl Upstream for UpstreamBoard {
    fn sources(&self) -> Vec<String> {
        UpstreamBoard::sources(self)
    }

    fn connections(&self) -> Vec<ConnectionState> {
        UpstreamBoard::connections(self)
    }

    fn source_states(&self) -> Vec<SourceState> {
        UpstreamBoard::source_states(self)
    }
}

/// Each channel's `source` once, in channel order.
fn sources_of(channels: &[ChannelSpec]) -> Vec<String> {
    let mut sources: Vec<String> = Vec::new();
    for channel in channels {
        if !sources.contains(&channel.source) {
            sources.push(channel.source.clone());
        }
    }
    sources
}
