//! One module per `osds` subcommand.

pub mod backup;
pub mod decode;
pub mod serve;
