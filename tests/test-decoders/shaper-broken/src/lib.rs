//! A broken hyp report shaper: it refuses every solution.
wit_bindgen::generate!({ world: "shaper", path: "../../../wit/hyp" });

struct Broken;

impl Guest for Broken {
    fn info() -> ShaperInfo {
        ShaperInfo {
            name: "hyp-shaper-broken".into(),
            version: "0.0.1".into(),
        }
    }

    fn shape(_solution: Vec<u8>) -> Result<Vec<u8>, ShapeError> {
        Err(ShapeError {
            message: "this shaper is broken on purpose".into(),
        })
    }
}

export!(Broken);
