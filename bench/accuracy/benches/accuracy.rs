//! The detector's accuracy benchmark with its solutions shaped by `hyp-core` natively, for quick runs while
//! working on the detector; the recorded runs shape through the real hyp shaper component
//! (`cargo run --release -p osds-bench --bin osds-accuracy`). See `osds_accuracy`.
//!
//! `cargo bench -p osds-accuracy --bench accuracy [-- [--values] [--reports] [--in-model|--independent|--foreshocks]
//! [--world=N] [NAME...]]`: `--values` skips the images, `--reports` prints every report, `--world=N` draws
//! the truth and the feed again from other seeds, names pick scenarios.

fn main() {
    let options = match osds_accuracy::Options::from_args(std::env::args().skip(1)) {
        Ok(options) => options,
        Err(error) => {
            eprintln!("{error}");
            std::process::exit(2);
        }
    };
    osds_accuracy::run_matrices(
        &options,
        "hyp-core (native)",
        &osds_accuracy::scenario::shape_natively,
    );
}
