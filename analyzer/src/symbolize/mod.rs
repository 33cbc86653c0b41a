//! Symbolization of native addresses (Python code objects carry their own names).

pub mod native;
