//! Record which CPython version the shim is compiled against (the ABI is version-specific),
//! so `trace run` can refuse to load it into another version.

fn main() {
    let cfg = pyo3_build_config::get();
    println!("cargo:rustc-env=SLICETRACE_PY_VERSION={}.{}", cfg.version().major, cfg.version().minor);
    println!("cargo:rerun-if-env-changed=PYO3_PYTHON");
}
