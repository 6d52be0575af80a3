//! `osds`: the command line of the Open Seismic Data Service. Each subcommand lives in `commands/`; the
//! service itself is the `osds-server` crate.

mod cli;
mod commands;
mod config;

/// mimalloc rather than glibc's allocator: a `/reports` page allocates and frees ~600 kB of text per answer,
/// and glibc spent about a quarter of the server's time in `malloc`/`free` and their arena locks under load
/// (BENCHMARKS.md, issue 25).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    cli::main()
}
