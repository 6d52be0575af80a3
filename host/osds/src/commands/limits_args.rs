//! The limits of every call into a component, as flags shared by the commands that run components.

use osds_runtime::Limits;
use std::time::Duration;

#[derive(Debug, Clone, clap::Args)]
pub struct LimitsArgs {
    /// Wall-clock budget of one call into a component, in milliseconds.
    #[arg(long, env = "OSDS_COMPONENT_DEADLINE_MS", default_value_t = 250, value_parser = clap::value_parser!(u64).range(1..=600_000))]
    pub component_deadline_ms: u64,
    /// Linear memory one component instance may grow to, in MiB.
    #[arg(long, env = "OSDS_COMPONENT_MEMORY_MIB", default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub component_memory_mib: u64,
}

impl LimitsArgs {
    pub fn limits(&self) -> Limits {
        Limits {
            memory_bytes: (self.component_memory_mib as usize) << 20,
            deadline: Duration::from_millis(self.component_deadline_ms),
        }
    }
}
