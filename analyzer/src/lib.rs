//! The analyzer: everything after recording. Reading a trace into call trees ([`fold`],
//! [`calltree`]), pruning and selecting ([`prune`], [`select`]), extracting sources
//! ([`source`]), and building prompts ([`prompt`]) for the `slice` CLI ([`cli`]).

pub mod analysis;
pub mod calltree;
pub mod cli;
pub mod coverage;
pub mod empty;
pub mod fold;
pub mod inlined;
pub mod mcp;
pub mod pathclass;
pub mod plumbing;
pub mod prompt;
pub mod prune;
pub mod py_stdlib;
pub mod select;
pub mod source;
pub mod symbolize;
pub mod symbols;
pub mod testrun;
pub mod testutil;
pub mod tokens;
pub mod values;
pub mod views;
