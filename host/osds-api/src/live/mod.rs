//! Live delivery: `/stream` (SSE, [`sse`]) and `/ws` (WebSocket, [`mod@ws`]) over one mechanism, [`Feed`]: subscribe
//! to the commit notifications first, then read every report after the cursor from the database up to the
//! commit horizon, paced while a backlog is replayed, pushed at once after that. Notifications only wake a feed;
//! what it sends always comes from the database in id order, so every consumer sees the same ids as `/reports`.
//! A caught-up feed lends its consumer's socket to the [`hub`], whose own feeds write the next reports to
//! every lent socket at once ([`crate::net::socket`]); the consumer's feed goes on from wherever the hub stopped.

pub mod config;
mod consumer;
pub mod feed;
pub mod hub;
pub mod hyp;
pub mod hyp_horizon;
pub mod recent;
pub mod sse;
pub mod state;
pub mod ws;

pub use config::LiveConfig;
pub use consumer::DisconnectReason;
pub use feed::Feed;
pub use sse::stream;
pub use state::LiveState;
pub use ws::ws;
