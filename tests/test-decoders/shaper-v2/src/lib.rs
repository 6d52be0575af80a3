//! A second build of the hyp report shaper: the same rules under another name, so its `.wasm` differs.

struct ShaperV2;

impl osds_shaper_sdk::Shaper for ShaperV2 {
    fn name() -> String {
        "hyp-shaper-v2".into()
    }

    fn version() -> String {
        "2.0.0".into()
    }

    fn shape(solution: &[u8]) -> Result<Vec<u8>, String> {
        hyp_core::shape_bytes(solution).map_err(|e| e.message)
    }
}

osds_shaper_sdk::export_shaper!(ShaperV2);
