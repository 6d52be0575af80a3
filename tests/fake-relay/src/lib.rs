//! placeholder, replaced by the fake relay implementation
