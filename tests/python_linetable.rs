//! The Python shim's line-table parsing and line set (`shims/python/src/linetable.rs`): plain
//! Rust compiled here so that its unit tests run (the shim is a cdylib that only links inside
//! an interpreter).

#[allow(dead_code)]
#[path = "../shims/python/src/linetable.rs"]
mod linetable;
