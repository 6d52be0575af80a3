//! The response bodies of `schemas/openapi.yaml` (the types of `osds_contract`, one per schema), built from the
//! store's rows. Handlers serialise these and nothing else (errors are `crate::error`).

pub mod eew;
pub mod hyp;
pub mod status;

use axum::response::{IntoResponse, Json};

/// The JSON answer of a response body. Bodies borrow the rows they were built from, so a handler serialises
/// them before returning.
pub fn json<T: serde::Serialize>(body: &T) -> crate::error::ApiResult {
    Ok(Json(body).into_response())
}
