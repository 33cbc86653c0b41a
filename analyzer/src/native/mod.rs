//! Native code's own rules, apart from the language-neutral pipeline (fold, calltree, prune,
//! select, render): turning recorded addresses into functions, names, files and line spans
//! (`symbolize`: DWARF through gimli/addr2line, symbol tables, demangling, inlined frames), and
//! where native code comes from (`paths`: the C/C++ runtime, Rust's standard library, cargo's
//! registry), and which native functions did the work of a run (`work`: the ranking's native
//! signals). Its test runners (libtest, GoogleTest) are in `crate::testrun`, beside pytest's.

pub mod inlined;
pub mod lines;
pub mod paths;
pub mod symbolize;
pub mod work;
