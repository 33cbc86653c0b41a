//! Native symbolization: the one DWARF and ELF reader of slice-trace, used by the recorder
//! (`trace`) and by the analyzer (`slice`).
//!
//! - [`functions`]: which function holds an address of an object ([`functions::ObjectFile`]):
//!   DWARF (the object's, or a separate debug file's), else the symbol table; demangled name,
//!   language, file, first and last line, and the functions inlined at the address;
//! - [`dwarf`]: the walk over the DIEs behind it (subprograms, their scopes, their lines, the
//!   `DW_TAG_inlined_subroutine`s holding a wanted address);
//! - [`inlined`]: where a program's inlined code starts, for `trace run`'s inline probes
//!   (every `DW_TAG_inlined_subroutine`, grouped by its chain of inlined functions);
//! - [`lines`]: the statement rows of a line table (file, line, address), for `trace run
//!   --lines`' line probes and the lines they saw run;
//! - [`files`]: the source files an object was built from, as its line tables name them;
//! - [`units`]: what the walks share: the DWARF sections an object carries, the table of units
//!   for references into another unit, the chase along `DW_AT_abstract_origin` and
//!   `DW_AT_specification`, a unit's file paths and a DIE's address ranges;
//! - [`calls`]: the direct calls a function's machine code makes, and where (x86-64), so that a
//!   call made by inlined code can be placed under the inlined function;
//! - [`demangle`]: C++ and Rust names, their scope and short name.
//!
//! What a program's functions mean to a prompt (which are the standard library, how Rust's
//! generic instances become one function, how far a span reaches in the source text) is the
//! analyzer's; which inlined code gets a probe is the recorder's.

pub mod calls;
pub mod demangle;
pub mod dwarf;
pub mod files;
pub mod functions;
pub mod inlined;
pub mod lines;
pub mod units;

#[cfg(test)]
mod tests;
