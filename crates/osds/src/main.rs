//! `osds`: the command line of the Open Seismic Data Service. Each subcommand lives in `commands/`; the
//! service itself is the `osds-server` crate.

mod cli;
mod commands;
mod config;

fn main() -> std::process::ExitCode {
    cli::main()
}
