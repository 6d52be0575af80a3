//! The self-sensing report shaper component (`osds:hyp/shaper`): all logic lives in `hyp-core`.

struct Component;

impl osds_shaper_sdk::Shaper for Component {
    fn name() -> String {
        "hyp-shaper".to_string()
    }

    fn version() -> String {
        env!("CARGO_PKG_VERSION").to_string()
    }

    fn shape(solution: &[u8]) -> Result<Vec<u8>, String> {
        hyp_core::shape_bytes(solution).map_err(|e| e.message)
    }
}

osds_shaper_sdk::export_shaper!(Component);
