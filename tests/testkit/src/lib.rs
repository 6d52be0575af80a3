//! What the end-to-end tests (`tests/`) and the benchmarks (`bench/`) share to run and talk to a real `osds`:
//! the server runner ([`server`]), the live wire format as a client reads it ([`sse`]), and the documentation's command
//! lines that each program's tests check ([`readme`]). The fake Wolfx relay they use is its own crate
//! (`tests/fake-relay`), a binary as well.

pub mod readme;
pub mod server;
pub mod sse;
