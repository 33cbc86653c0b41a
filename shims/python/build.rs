//! Checks the committed layout of CPython 3.11's internal frame against that version's headers.
//!
//! The stable-ABI shim reads no CPython struct, except in one place: on 3.11 the
//! frame-evaluation hook receives a `_PyInterpreterFrame` (internal, no accessor function) and
//! reads its code object, position and owner, and the code object's flags. Those offsets live
//! in `src/layout311.rs`, committed (as py-spy keeps its per-version bindings), so every build
//! has the fast hook for 3.11, with or without the headers. They are not written by hand: where
//! the 3.11 headers exist, this script compiles and runs a probe against them and fails the
//! build when its output differs from the committed file (`SLICETRACE_BLESS_LAYOUT311=1`
//! writes it instead). The layout is that of 64-bit targets; the shim refuses the hook on others.
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

/// The committed file's constant lines (its comments are not the probe's).
fn constants(text: &str) -> Vec<&str> {
    text.lines().map(str::trim).filter(|l| l.starts_with("pub const ")).collect()
}

fn main() {
    println!("cargo:rerun-if-env-changed=SLICETRACE_PY311_INCLUDE");
    println!("cargo:rerun-if-env-changed=SLICETRACE_BLESS_LAYOUT311");
    println!("cargo:rerun-if-env-changed=PYENV_ROOT");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=src/layout311.rs");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let committed_path = manifest.join("src/layout311.rs");
    let committed = std::fs::read_to_string(&committed_path).expect("src/layout311.rs is part of the crate");
    if std::env::var("CARGO_CFG_TARGET_POINTER_WIDTH").as_deref() != Ok("64") {
        return; // the committed layout is not this target's: the shim refuses the 3.11 hook
    }
    for include in candidates() {
        let Ok(probed) = probe(&include, &out) else { continue };
        if constants(&probed) == constants(&committed) {
            return;
        }
        if std::env::var_os("SLICETRACE_BLESS_LAYOUT311").is_some_and(|v| v == "1") {
            let header: String = committed.lines().take_while(|l| l.starts_with("//")).map(|l| format!("{l}\n")).collect();
            std::fs::write(&committed_path, header + &probed).expect("write src/layout311.rs");
            println!("cargo:warning=wrote {} from {}", committed_path.display(), include.display());
            return;
        }
        panic!(
            "CPython 3.11's frame layout in {} differs from what its headers in {} give:\n{}\nThe 3.11 frame-evaluation hook would read the wrong fields. If these headers are right, \
             rebuild with SLICETRACE_BLESS_LAYOUT311=1 to rewrite the file, and commit it.",
            committed_path.display(),
            include.display(),
            probed
        );
    }
}
