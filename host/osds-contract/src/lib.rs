//! The JSON contract of `schemas/openapi.yaml`, as types: one type per schema, serialised and nothing else.
//! The store renders a report version's `EewReport` once when it archives it; the API builds the other bodies
//! from the store's rows (`osds_api::response`) and serialises them. Both use these types, so the contract is
//! written once, below both. Nothing here reads a database or a socket.

pub mod codes;
pub mod eew;
pub mod geojson;
pub mod hyp;
mod ids;
pub mod scorecard;
pub mod status;
pub mod upstream;

pub use codes::FailureCode;
pub use ids::{DeliveryId, ReportId};
