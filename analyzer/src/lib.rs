//! The analyzer: everything after recording. See `docs/ARCHITECTURE.md`.

pub mod symbolize;
pub mod symbols;
