//! Rendered report versions: one version's served text ([`item`]) and the cache of blocks of them that
//! `/reports` pages and catching-up live consumers read from ([`pages`]).

pub mod item;
pub mod pages;
#[cfg(test)]
mod pages_tests;
