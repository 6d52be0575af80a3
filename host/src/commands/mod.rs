//! One module per `osds` subcommand.

pub mod decode;
pub mod serve;
