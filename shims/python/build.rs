//! Build-time layout of CPython 3.11's internal frame, read from that version's own headers.
//!
//! The stable-ABI shim reads no CPython struct, except in one place: on 3.11 the
//! frame-evaluation hook receives a `_PyInterpreterFrame` (internal, no accessor function) and
//! reads its code object, position and owner, and the code object's flags. Those offsets are
//! not written by hand: this script compiles and runs a probe against the 3.11 headers
//! (`Py_BUILD_CORE`, `internal/pycore_frame.h`) and writes them into `layout311.rs`. Without
//! the headers, the build goes on without it (`cfg(layout311)` unset) and 3.11 is recorded
//! through the profile hook instead.
//!
//! Headers are looked for in `$SLICETRACE_PY311_INCLUDE`, `$(pyenv root)/versions/3.11.*/`,
//! `/usr/include/python3.11` and `/usr/local/include/python3.11`.

use std::path::{Path, PathBuf};
use std::process::Command;

const PROBE: &str = r#"
#define Py_BUILD_CORE 1
#include <Python.h>
#include <internal/pycore_frame.h>
#include <stddef.h>
#include <stdio.h>
#if PY_MAJOR_VERSION != 3 || PY_MINOR_VERSION != 11
#error "not the CPython 3.11 headers"
#endif
int main(void) {
    printf("pub const FRAME_CODE: usize = %zu;\n", offsetof(_PyInterpreterFrame, f_code));
    printf("pub const FRAME_PREV_INSTR: usize = %zu;\n", offsetof(_PyInterpreterFrame, prev_instr));
    printf("pub const FRAME_OWNER: usize = %zu;\n", offsetof(_PyInterpreterFrame, owner));
    printf("pub const FRAME_OWNED_BY_THREAD: u8 = %d;\n", (int)FRAME_OWNED_BY_THREAD);
    printf("pub const CODE_FLAGS: usize = %zu;\n", offsetof(PyCodeObject, co_flags));
    printf("pub const CODE_UNITS: usize = %zu;\n", offsetof(PyCodeObject, co_code_adaptive));
    return 0;
}
"#;

fn candidates() -> Vec<PathBuf> {
    let mut v = Vec::new();
    if let Some(d) = std::env::var_os("SLICETRACE_PY311_INCLUDE").filter(|d| !d.is_empty()) {
        v.push(PathBuf::from(d));
    }
    let pyenv =
        std::env::var_os("PYENV_ROOT").map(PathBuf::from).or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".pyenv")));
    if let Some(root) = pyenv {
        let mut found: Vec<PathBuf> = std::fs::read_dir(root.join("versions"))
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("3.11."))
            .map(|e| e.path().join("include/python3.11"))
            .collect();
        found.sort();
        v.extend(found.into_iter().rev());
    }
    v.push(PathBuf::from("/usr/include/python3.11"));
    v.push(PathBuf::from("/usr/local/include/python3.11"));
    v
}

fn probe(include: &Path, out: &Path) -> Result<String, String> {
    if !include.join("internal/pycore_frame.h").is_file() {
        return Err("no internal/pycore_frame.h".into());
    }
    let src = out.join("layout311.c");
    let exe = out.join("layout311-probe");
    std::fs::write(&src, PROBE).map_err(|e| e.to_string())?;
    let compiler = cc::Build::new().cargo_metadata(false).opt_level(0).get_compiler();
    let mut c = compiler.to_command();
    c.arg("-I").arg(include).arg(&src).arg("-o").arg(&exe);
    let o = c.output().map_err(|e| format!("cannot run the C compiler: {e}"))?;
    if !o.status.success() {
        return Err(String::from_utf8_lossy(&o.stderr).lines().take(3).collect::<Vec<_>>().join(" / "));
    }
    let o = Command::new(&exe).output().map_err(|e| e.to_string())?;
    if !o.status.success() {
        return Err("the probe failed".into());
    }
    String::from_utf8(o.stdout).map_err(|e| e.to_string())
}

fn main() {
    println!("cargo:rustc-check-cfg=cfg(layout311)");
    println!("cargo:rerun-if-env-changed=SLICETRACE_PY311_INCLUDE");
    println!("cargo:rerun-if-env-changed=PYENV_ROOT");
    println!("cargo:rerun-if-changed=build.rs");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let mut tried = Vec::new();
    for include in candidates() {
        match probe(&include, &out) {
            Ok(text) => {
                std::fs::write(out.join("layout311.rs"), text).expect("write layout311.rs");
                println!("cargo:rustc-cfg=layout311");
                return;
            }
            Err(e) => tried.push(format!("{} ({e})", include.display())),
        }
    }
    println!(
        "cargo:warning=CPython 3.11 headers not found (tried: {}); 3.11 will be recorded through the profile hook. Set SLICETRACE_PY311_INCLUDE to a 3.11 include directory for the faster frame-evaluation hook.",
        tried.join("; ")
    );
}
