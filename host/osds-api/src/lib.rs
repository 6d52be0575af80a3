//! The public HTTP surface under `/api/v1`: the [`router`] with the [`gateway`]'s layers, the handlers of the
//! archive ([`eew`]) and of self-sensing ([`hyp`]), live delivery ([`live`]) over the shared [`wire`] format and
//! the rendered report versions ([`reports`]: items and the page cache; the live ring is [`live::recent`]), the response
//! bodies ([`response`]), and the connections it accepts ([`listener`], [`socket`], [`tls`]).

pub mod describe;
mod eew;
pub mod error;
pub mod gateway;
pub mod health;
mod hyp;
pub mod listener;
pub mod live;
pub mod params;
pub mod parse_errors;
pub mod reports;
pub mod response;
pub mod router;
pub mod scorecard;
pub mod server;
pub mod socket;
pub mod sources;
pub mod state;
pub mod tls;
pub mod upstream;
pub mod wire;

pub use router::router;
pub use state::AppState;
