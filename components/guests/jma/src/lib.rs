//! The JMA reference decoder component (`osds:reference/reference@1.0.0`): all logic lives in
//! `wolfx_core::jma`.

mod bindings {
    wit_bindgen::generate!({ world: "reference", path: "../../../wit/reference/v1.0.0" });
}

use bindings::osds::reference::types::{
    DecodeError, Determination, ErrorKind, Kind, ReferenceInfo,
};
use wolfx_core::jma;

struct Component;

impl bindings::Guest for Component {
    fn info() -> ReferenceInfo {
        ReferenceInfo {
            name: "jma-reference".to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            agency: jma::AGENCY.to_string(),
            claims: vec![jma::WARNING_TAG.to_string(), jma::LIST_TAG.to_string()],
        }
    }

    fn decode(payload: Vec<u8>) -> Result<Vec<Determination>, DecodeError> {
        let determinations = jma::decode(&payload).map_err(|e| DecodeError {
            kind: match e.kind {
                wolfx_core::ErrorKind::Malformed => ErrorKind::Malformed,
                wolfx_core::ErrorKind::Unsupported => ErrorKind::Unsupported,
                wolfx_core::ErrorKind::MissingField => ErrorKind::MissingField,
            },
            message: e.message,
        })?;
        Ok(determinations
            .into_iter()
            .map(|d| Determination {
                kind: match d.kind {
                    jma::Kind::Warning => Kind::Warning,
                    jma::Kind::Catalogue => Kind::Catalogue,
                },
                event_id: d.event_id,
                serial: d.serial,
                issued_at: d.issued_at,
                origin_at: d.origin_at,
                place: d.place,
                latitude: d.latitude,
                longitude: d.longitude,
                depth_km: d.depth_km,
                magnitude: d.magnitude,
                is_final: d.is_final,
                is_cancelled: d.is_cancelled,
                is_test: d.is_test,
                is_assumed: d.is_assumed,
            })
            .collect())
    }
}

bindings::export!(Component with_types_in bindings);
