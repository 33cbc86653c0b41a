//! The analyzer: everything after recording. Reading a trace into call trees ([`fold`],
//! [`calltree`]), pruning and selecting ([`prune`], [`select`]), extracting sources
//! ([`source`]), and building prompts ([`prompt`]) for the `slice` CLI ([`cli`]).

pub mod analysis;
pub mod calltree;
pub mod cli;
pub mod coverage;
pub mod empty;
pub mod fold;
pub mod frontend;
pub mod mcp;
pub mod native;
pub mod pathclass;
pub mod plumbing;
pub mod prompt;
pub mod prune;
pub mod python;
pub mod select;
pub mod source;
pub mod symbols;
pub mod testrun;
pub mod testutil;
pub mod tokens;
pub mod views;
