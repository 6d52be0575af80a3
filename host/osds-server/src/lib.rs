//! The running service: ingestion from the upstream relay into the archive ([`ingest`]), the decoder and
//! shaper hot-swap manager ([`hot_swap`]) with its admin listener ([`admin`]), the self-sensing detector at
//! work ([`hyp`]: frame sources, the runner that archives its reports, the recorder's backfill), the
//! operator's Prometheus metrics ([`prometheus`]), and the whole of it wired and run from one configuration
//! ([`service`]).

pub mod admin;
pub mod hot_swap;
pub mod hyp;
pub mod ingest;
pub mod prometheus;
pub mod reparse;
pub mod service;
pub mod systemd;
