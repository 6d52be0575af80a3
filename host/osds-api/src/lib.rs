//! The public HTTP surface under `/api/v1`: the [`router`] with the [`gateway`]'s layers, the handlers of the
//! archive ([`eew`]) and of self-sensing ([`hyp`]) and their response bodies ([`response`]), live delivery
//! ([`live`]) over the shared [`wire`] format, the rendered report versions ([`reports`]: items and the page
//! cache; the live ring is [`live::recent`]), the connections it accepts ([`net`]: listeners, sockets, TLS)
//! and the loop that serves them ([`server`]).

pub mod describe;
mod eew;
pub mod error;
pub mod fdsn;
pub mod gateway;
pub mod health;
mod hyp;
pub mod live;
mod map;
pub mod net;
pub mod params;
mod place;
pub mod reports;
pub mod response;
pub mod router;
pub mod scorecard;
pub mod server;
pub mod sources;
pub mod state;
pub mod upstream;
pub mod wire;

pub use router::router;
pub use state::AppState;
