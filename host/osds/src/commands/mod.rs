//! One module per `osds` subcommand.

pub mod backup;
pub mod components;
pub mod decode;
pub mod detector_args;
pub mod hyp;
pub mod limits_args;
pub mod reparse;
pub mod restore;
pub mod serve;
pub mod simulate;
