//! What the API shows of the upstream relay: each socket's state and each channel's health. Ingestion keeps
//! the board (it implements [`Upstream`]); `/status`, `/sources` and the live `status` messages read it.

pub use osds_contract::upstream::{ConnectionState, SourceState};

/// The board of upstream connections, read by the handlers.
pub trait Upstream: Send + Sync {
    /// Each archived channel's `source`, in channel order.
    fn sources(&self) -> Vec<String>;
    /// Every upstream socket.
    fn connections(&self) -> Vec<ConnectionState>;
    /// Every channel's health.
    fn source_states(&self) -> Vec<SourceState>;
}
