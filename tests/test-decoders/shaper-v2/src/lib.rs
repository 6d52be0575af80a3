//! A second build of the hyp report shaper: the same rules under another name, so its `.wasm` differs.
wit_bindgen::generate!({ world: "shaper", path: "../../../wit/hyp" });

struct ShaperV2;

impl Guest for ShaperV2 {
    fn info() -> ShaperInfo {
        ShaperInfo {
            name: "hyp-shaper-v2".into(),
            version: "2.0.0".into(),
        }
    }

    fn shape(solution: Vec<u8>) -> Result<Vec<u8>, ShapeError> {
        hyp_core::shape_bytes(&solution).map_err(|e| ShapeError { message: e.message })
    }
}

export!(ShaperV2);
