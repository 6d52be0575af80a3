//! The detector's accuracy benchmark with its solutions shaped by `hyp-core` natively, for quick runs while
//! working on the detector; the recorded runs shape through the real hyp shaper component
//! (`cargo run --release -p osds-bench --bin osds-accuracy`). See `osds_detector::accuracy`.
//!
//! `cargo bench -p osds-detector --bench accuracy [-- [--values] [--reports] [NAME...]]`: `--values` skips the
//! images, `--reports` prints every report, names pick scenarios.

fn main() {
    let options = osds_detector::accuracy::Options::from_args(std::env::args().skip(1));
    osds_detector::accuracy::run_matrix(
        &options,
        "hyp-core (native)",
        &osds_detector::scenario::shape_natively,
    );
}
