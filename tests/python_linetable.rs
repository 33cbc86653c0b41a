//! The Python shim's line-table parsing and line set (`shims/python/src/linetable.rs`), and which
//! functions' lines are reported per test (`testscope.rs`): plain
//! Rust compiled here so that its unit tests run (the shim is a cdylib that only links inside
//! an interpreter).

#[allow(dead_code)]
#[path = "../shims/python/src/linetable.rs"]
mod linetable;

// Which functions are re-armed for lines per test (`shims/python/src/testscope.rs`).
#[path = "../shims/python/src/testscope.rs"]
mod testscope;
