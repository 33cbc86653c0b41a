//! Compiles the hot path (src/hot.c) with the machine's C compiler.
fn main() {
    println!("cargo:rerun-if-changed=src/hot.c");
    cc::Build::new()
        .file("src/hot.c")
        // The hot path is optimised in every profile (tests run debug builds of the shim too).
        .opt_level(2)
        .flag_if_supported("-fno-plt")
        .warnings(true)
        .extra_warnings(true)
        .compile("slicetrace_hot");
}
