//! What the end-to-end tests (`tests/`) and the benchmarks (`bench/`) share to run and talk to a real `osds`:
//! the server runner ([`server`]) and the live wire format as a client reads it ([`sse`]). The fake Wolfx relay
//! they both use is its own crate (`tests/fake-relay`), a binary as well.

pub mod server;
pub mod sse;
