//! Tells the build scripts of the crates that depend on this one where its sources are
//! (`DEP_SLICE_TRACE_FORMAT_ROOT`): slice-trace-recorder's build script builds the shims, which
//! use this crate too, against the same sources when it is built from a package rather than
//! from the workspace (see tracer/build.rs).
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if let Some(dir) = std::env::var_os("CARGO_MANIFEST_DIR") {
        println!("cargo:root={}", std::path::Path::new(&dir).display());
    }
}
