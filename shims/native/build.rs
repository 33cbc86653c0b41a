//! Compiles the hot path (src/hot.c) with the machine's C compiler.
//!
//! hot.c encodes events with the constants of `trace_format::event` (tags, the inline range,
//! varints, the largest event), which this script writes into `$OUT_DIR/slt_format.h` from
//! `trace_format::event::c_header`: the encoding is defined once, in tracer/format.
//!
//! The flags are this file's alone: the environment's `CFLAGS` (and `CFLAGS_<target>`,
//! `TARGET_CFLAGS`, `HOST_CFLAGS`) are dropped, since `CFLAGS=-finstrument-functions cargo
//! build` would make the hook call itself; `-fno-instrument-functions` says so explicitly,
//! and `-fvisibility=hidden` keeps hot.c's internal symbols out of the library's dynamic
//! symbol table (tests/native_symbols.rs checks what is exported).
fn main() {
    println!("cargo:rerun-if-changed=src/hot.c");
    println!("cargo:rerun-if-changed=hidden.map");
    // hooks.rs's slow paths must be #[no_mangle] for hot.c to call them, and rustc exports
    // every #[no_mangle] function of a cdylib; this version script makes them local.
    if std::env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux") {
        let map = std::path::Path::new(&std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default()).join("hidden.map");
        println!("cargo:rustc-cdylib-link-arg=-Wl,--version-script={}", map.display());
    }
    let flag_vars: Vec<_> = std::env::vars_os()
        .map(|(k, _)| k)
        .filter(|k| k.to_str().is_some_and(|k| k.ends_with("CFLAGS") || k.starts_with("CFLAGS_")))
        .collect();
    for k in flag_vars {
        println!("cargo:rerun-if-env-changed={}", k.to_string_lossy());
        // Build scripts are single-threaded: nothing reads the environment concurrently.
        std::env::remove_var(k);
    }
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR for build scripts"));
    std::fs::write(out.join("slt_format.h"), trace_format::event::c_header()).unwrap_or_else(|e| panic!("{}: {e}", out.display()));
    cc::Build::new()
        .file("src/hot.c")
        .include(&out)
        // The hot path is optimised in every profile (tests run debug builds of the shim too).
        .opt_level(2)
        .flag("-fno-instrument-functions")
        // No frame pointer: the fast paths are leaf code (cc adds -fno-omit-frame-pointer).
        .flag("-fomit-frame-pointer")
        .flag("-fvisibility=hidden")
        .flag_if_supported("-fno-plt")
        // Each hook starts a 64-byte line of its own: its first fetch brings a whole block of
        // its fast path (bench/run --only native,patch, 3 runs of 7 each way: c-callheavy CPU
        // ns/event ratio to uftrace 0.18-0.19 against 0.20-0.21 without, c-fptrs 0.21-0.24
        // against 0.23-0.24).
        .flag("-falign-functions=64")
        .warnings(true)
        .extra_warnings(true)
        .compile("slicetrace_hot");
}
