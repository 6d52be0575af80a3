//! `osds serve`: the service.

use crate::decoders::DecoderSet;
use crate::wasm::{Limits, Runtime};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Load decoder components (`*.wasm`) from this directory instead of the built-in ones.
    #[arg(long, env = "OSDS_COMPONENTS_DIR", value_name = "DIR")]
    pub components_dir: Option<PathBuf>,
}

pub fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let runtime = Runtime::new(Limits::default())?;
    let decoders = DecoderSet::load(&runtime, args.components_dir.as_deref())?;
    for decoder in decoders.decoders() {
        let info = decoder.info();
        tracing::info!(name = %info.name, version = %info.version, source = %info.source, claims = ?info.claims, sha256 = %info.sha256, "decoder loaded");
    }
    Ok(ExitCode::SUCCESS)
}
