//! Symbolization of native addresses (Python code objects carry their own names).

pub mod demangle;
pub mod dwarf;
pub mod functions;
pub mod native;
pub mod source_span;

#[cfg(test)]
mod tests;
