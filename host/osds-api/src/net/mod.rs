//! The connections the service accepts: the listeners (plain TCP as [`LiveSocket`]s a live consumer can lend
//! to the hub, and TLS), what a request knows of its connection ([`Peer`]), and hyper's own answers to what is
//! not HTTP given the service's error body ([`parse_errors`]). The loop that serves them, with the gateway's
//! per-address cap, is `server.rs` beside this folder.
//!
//! [`LiveSocket`]: socket::LiveSocket
//! [`Peer`]: listener::Peer

pub mod listener;
pub mod parse_errors;
pub mod socket;
pub mod tls;
