//! `SLICE_TRACE_PATCH`, the switch of entry patching (docs/native-recording.md), read in one
//! place by `trace` (which sets it for an ordinary native program) and by the native shim
//! (which patches as it says).

use std::ffi::OsStr;

/// The environment variable.
pub const ENV_PATCH: &str = "SLICE_TRACE_PATCH";

/// What the variable asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchMode {
    /// `0`: no entry patching (only `-finstrument-functions` builds are recorded).
    Off,
    /// `1` (or any other value): the program and its own libraries.
    Program,
    /// `all`: system libraries and the C runtime too.
    All,
    /// `ext` (`trace run --native-ext`): in a CPython process, only the Python extension
    /// modules it loads ([`is_extension_module`]); any other process (a native program the
    /// Python program starts) as with `1`.
    Ext,
}

/// Whether the object at `path` is a compiled Python extension module that `--native-ext`
/// patches: a file named `*.cpython-*.so` or `*.abi3.so` (what CPython's import system loads
/// through `dlopen`), not one of the standard library's own (`lib-dynload`). The interpreter,
/// libc and every other library are not.
pub fn is_extension_module(path: &str) -> bool {
    let file = path.rsplit('/').next().unwrap_or(path);
    let ext = (file.contains(".cpython-") && file.ends_with(".so")) || file.ends_with(".abi3.so");
    ext && !path.contains("/lib-dynload/")
}

impl PatchMode {
    /// The mode a value asks for.
    pub fn parse(value: &OsStr) -> PatchMode {
        if value == "0" {
            PatchMode::Off
        } else if value == "all" {
            PatchMode::All
        } else if value == "ext" {
            PatchMode::Ext
        } else {
            PatchMode::Program
        }
    }

    /// The mode the environment asks for, if the variable is set.
    pub fn from_env() -> Option<PatchMode> {
        std::env::var_os(ENV_PATCH).map(|v| PatchMode::parse(&v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_read_one_way() {
        assert_eq!(PatchMode::parse(OsStr::new("0")), PatchMode::Off);
        assert_eq!(PatchMode::parse(OsStr::new("1")), PatchMode::Program);
        assert_eq!(PatchMode::parse(OsStr::new("all")), PatchMode::All);
        assert_eq!(PatchMode::parse(OsStr::new("yes")), PatchMode::Program);
        assert_eq!(PatchMode::parse(OsStr::new("ext")), PatchMode::Ext);
    }

    #[test]
    fn extension_modules_are_told_by_their_file_names() {
        for yes in [
            "/v/lib/python3.12/site-packages/black/linegen.cpython-312-x86_64-linux-gnu.so",
            "/w/build/demo.cpython-311-x86_64-linux-gnu.so",
            "/v/site-packages/cryptography/hazmat/bindings/_rust.abi3.so",
        ] {
            assert!(is_extension_module(yes), "{yes}");
        }
        for no in [
            "/root/.pyenv/versions/3.12.1/lib/python3.12/lib-dynload/_json.cpython-312-x86_64-linux-gnu.so",
            "/root/.pyenv/versions/3.12.1/lib/libpython3.12.so.1.0",
            "/lib/x86_64-linux-gnu/libc.so.6",
            "/w/build/libdemo.so",
            "/usr/bin/python3.12",
        ] {
            assert!(!is_extension_module(no), "{no}");
        }
    }
}
