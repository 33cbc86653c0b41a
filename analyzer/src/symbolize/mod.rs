//! Symbolization of native addresses (Python code objects carry their own names).

pub mod demangle;
pub mod native;
pub mod source_span;
