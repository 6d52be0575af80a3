//! The self-sensing report shaper component (`wit/hyp/shaper.wit`): all logic lives in `hyp-core`.

wit_bindgen::generate!({ world: "shaper", path: "../../../wit/hyp" });

// The world `use`s `shaper-info` and `shape-error`, so the bindings bring `ShaperInfo` and `ShapeError` into scope.

struct Component;

impl Guest for Component {
    fn info() -> ShaperInfo {
        ShaperInfo {
            name: "hyp-shaper".to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
        }
    }

    fn shape(solution: Vec<u8>) -> Result<Vec<u8>, ShapeError> {
        hyp_core::shape_bytes(&solution).map_err(|e| ShapeError { message: e.message })
    }
}

export!(Component);
