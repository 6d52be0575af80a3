//! The Open Seismic Data Service host: networking, storage, the HTTP/SSE/WS surface and the Wasm runtime
//! that runs the per-channel decoder components.

pub mod admin;
pub mod api;
pub mod cli;
pub mod commands;
pub mod components;
pub mod config;
pub mod decoders;
pub mod frame;
pub mod hyp;
pub mod ingest;
pub mod listener;
pub mod store;
pub mod time;
pub mod tls;
pub mod wasm;
