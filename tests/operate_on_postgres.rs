//! `operate.rs` on a PostgreSQL archive: the same tests, each service on a database of its own on a throwaway
//! cluster (see `support::database`).

#[path = "operate.rs"]
mod operate;
