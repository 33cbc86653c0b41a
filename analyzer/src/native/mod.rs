//! Native code's own rules, apart from the language-neutral pipeline (fold, calltree, prune,
//! select, render): turning recorded addresses into the analyzer's functions (`resolve`, over
//! the `symbolize` crate, which reads DWARF and symbol tables, demangles, and finds inlined
//! frames; `source_span`: how far a function's source reaches), where native code comes from
//! (`paths`: the C/C++ runtime, Rust's standard library, cargo's registry), what a prompt says
//! about inlined code (`inlined`) and which inlined function made a recorded call (`callsites`), and which native functions did the work of a run (`work`:
//! the ranking's native signals). Its test runners (libtest, GoogleTest) are in
//! `crate::testrun`, beside pytest's.

pub mod callsites;
pub mod inlined;
pub mod lines;
pub mod paths;
pub mod resolve;
pub mod source_span;
pub mod work;
