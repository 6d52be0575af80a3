//! What the end-to-end tests (`tests/`) and the benchmarks (`bench/`) share to talk to a running `osds`.
//! The fake Wolfx relay they both use is its own crate (`tests/fake-relay`), a binary as well.

pub mod sse;
