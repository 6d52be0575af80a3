//! The detector's accuracy benchmark (`osds_accuracy`: the in-model regression matrix and the independent
//! truth model, side by side) with every solution shaped and graded by the real hyp shaper component, run by
//! the host's Wasm runtime as `osds serve` runs it.
//!
//! `cargo run --release -p osds-bench --bin osds-accuracy [-- [--values] [--reports] [--in-model |
//! --independent | --foreshocks] [--world=N] [--lead-in=S] [NAME...]]`: `--values` feeds the values without
//! images, `--reports` prints every report, `--foreshocks` runs only the exploratory foreshock mixes (outside
//! both matrices), `--world=N` draws the truth's stations, scatter and noise and the feed's delays and losses
//! again from other seeds (the scenarios stay; 0 is the recorded draw), `--lead-in=S` feeds S seconds of quiet
//! network before each scenario (a detector that has been running; none in the recorded tables), names pick
//! scenarios. Results are recorded in BENCHMARKS.md.

use anyhow::Context;
use osds_accuracy::{Options, run_matrices};
use osds_runtime::{Limits, Runtime, ShaperComponent};

fn main() -> anyhow::Result<()> {
    let options = Options::from_args(std::env::args().skip(1)).map_err(anyhow::Error::msg)?;
    let runtime = Runtime::new(Limits::default())?;
    let shaper = ShaperComponent::embedded(&runtime)?;
    let name = shaper.info().identity();
    let shape = |solution: &hyp_core::Solution| -> serde_json::Value {
        let bytes = serde_json::to_vec(solution).expect("a solution serialises");
        shaper
            .shape(&bytes)
            .and_then(|report| serde_json::from_slice(&report).context("the shaper's report"))
            .expect("the shaper shapes a detector solution")
    };
    run_matrices(&options, &format!("the Wasm component {name}"), &shape);
    Ok(())
}
