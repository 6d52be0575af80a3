//! A broken hyp report shaper: it refuses every solution.

struct Broken;

impl osds_shaper_sdk::Shaper for Broken {
    fn name() -> String {
        "hyp-shaper-broken".into()
    }

    fn version() -> String {
        "0.0.1".into()
    }

    fn shape(_solution: &[u8]) -> Result<Vec<u8>, String> {
        Err("this shaper is broken on purpose".into())
    }
}

osds_shaper_sdk::export_shaper!(Broken);
