//! Whose code an object (an executable or a shared library) is: the program's, or the system's,
//! the C runtime's, the Rust toolchain's. One rule, read by `trace` (which programs it records
//! as native), by the native shim (which objects it patches by default) and by `slice` (which
//! functions are the program's and which the standard library's), so the three agree.
//!
//! A distribution often puts a program's own code in a library of its own (Debian's `jq` is a
//! `main` over `libjq.so.1`, `sqlite3` a shell over `libsqlite3.so.0`): a library named after
//! the program (`lib<program>.so...`) is the program's own code wherever it is installed.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Libraries of the C runtime, by file name, wherever they are installed.
const RUNTIME: [&str; 10] =
    ["libc.so", "libm.so", "ld-linux", "ld64.so", "libstdc++.so", "libgcc_s.so", "libpthread.so", "libdl.so", "librt.so", "libslicetrace"];

/// Directories of the system's libraries.
const SYSTEM_LIBRARY_DIRS: [&str; 5] = ["/lib/", "/lib64/", "/usr/lib/", "/usr/lib64/", "/usr/libexec/"];

/// Directories of the system's programs: the shells, `env`, `make` and compilers a recorded
/// program starts (pyenv's `python3` is a bash script running a dozen more bash processes;
/// each was recorded with bash's own functions). `/usr/local` and home directories are the
/// user's own.
const SYSTEM_PROGRAM_DIRS: [&str; 4] = ["/usr/bin/", "/bin/", "/usr/sbin/", "/sbin/"];

/// The rustup proxies (`~/.cargo/bin/cargo` is rustup itself under another name).
const RUSTUP_PROXIES: [&str; 12] = [
    "cargo",
    "rustc",
    "rustup",
    "rustdoc",
    "rustfmt",
    "cargo-fmt",
    "cargo-clippy",
    "clippy-driver",
    "rust-gdb",
    "rust-lldb",
    "rust-analyzer",
    "cargo-miri",
];

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Where the path inside the Rust standard library's source starts (`std/src/...`): under
/// `/rustc/<commit>/library/` (rustup's prebuilt `std`), a toolchain's
/// `lib/rustlib/src/rust/library/`, or `/rust/deps/` (the crates `std` vendors).
pub fn rust_library_end(s: &str) -> Option<usize> {
    if let Some(rest) = s.strip_prefix("/rustc/") {
        let hash_len = rest.find('/')?;
        let hex = &rest[..hash_len];
        if hex.len() >= 7 && hex.bytes().all(|b| b.is_ascii_hexdigit()) && rest[hash_len..].starts_with("/library/") {
            return Some("/rustc/".len() + hash_len + "/library/".len());
        }
        return None;
    }
    if let Some(rest) = s.strip_prefix("/rust/deps/") {
        return (!rest.is_empty()).then_some("/rust/deps/".len());
    }
    const RUSTLIB: &str = "/lib/rustlib/src/rust/library/";
    s.find(RUSTLIB).map(|i| i + RUSTLIB.len())
}

/// Whether `path` is the Rust toolchain: rustup's toolchains (`cargo`, `rustc` and
/// `librustc_driver`: a program recorded with `trace run -- cargo test` builds itself first,
/// and rustc patched whole failed its allocations) or one of its proxies. Programs installed
/// with `cargo install` into the same `bin/` are the user's own.
fn rust_toolchain(path: &str) -> bool {
    let file = file_name(path);
    let rustup_home = std::env::var("RUSTUP_HOME").ok().filter(|h| h.starts_with('/'));
    if path.contains("/.rustup/toolchains/")
        || rustup_home.is_some_and(|h| path.starts_with(&format!("{}/toolchains/", h.trim_end_matches('/'))))
    {
        return true;
    }
    let cargo_bin = std::env::var("CARGO_HOME").ok().filter(|h| h.starts_with('/')).map(|h| format!("{}/bin/", h.trim_end_matches('/')));
    let in_cargo_bin = path.contains("/.cargo/bin/") || cargo_bin.is_some_and(|b| path.starts_with(&b));
    in_cargo_bin && RUSTUP_PROXIES.contains(&file)
}

/// Whether the library file (or soname) `library` is the program `program`'s own: named after
/// it, `lib<name>.so...` or `lib<name>-<version>.so...` (`jq` and `libjq.so.1`, `sqlite3` and
/// `libsqlite3.so.0`). `program` and `library` may be paths; only their file names count.
pub fn own_library(program: &str, library: &str) -> bool {
    let name = file_name(program);
    let lib = file_name(library);
    if name.is_empty() || !lib.contains(".so") {
        return false;
    }
    let Some(rest) = lib.strip_prefix("lib").and_then(|l| l.strip_prefix(name)) else { return false };
    rest.starts_with(".so") || rest.strip_prefix('-').is_some_and(|v| v.starts_with(|c: char| c.is_ascii_digit()))
}

/// Whether `path` (absolute, links resolved) is in one of the system's program directories.
pub fn system_program(path: &str) -> bool {
    SYSTEM_PROGRAM_DIRS.iter().any(|d| path.starts_with(d))
}

/// Why the object at `path` (absolute, links resolved) is not the program's own code, if it is
/// not, when `program` (the process's executable) runs: the C runtime, the Rust toolchain, a
/// system program, a system library. A library named after the program is its own
/// ([`own_library`]), wherever it is installed.
pub fn not_the_programs(path: &str, program: Option<&str>) -> Option<&'static str> {
    let file = file_name(path);
    if RUNTIME.iter().any(|r| file.starts_with(r)) {
        return Some("the C runtime");
    }
    if rust_toolchain(path) {
        return Some("the Rust toolchain");
    }
    if program.is_some_and(|p| p != path && own_library(p, path)) {
        return None;
    }
    if system_program(path) {
        return Some("a system program");
    }
    SYSTEM_LIBRARY_DIRS.iter().any(|d| path.starts_with(d)).then_some("a system library")
}

/// The libraries among `needed` (an ELF file's `DT_NEEDED` sonames) that are the program at
/// `program`'s own ([`own_library`]).
pub fn own_libraries<'a>(program: &Path, needed: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    let program = program.to_string_lossy();
    needed.into_iter().filter(|n| own_library(&program, n)).collect()
}

/// Where the separate debug file of the object at `path` may be, in the order gdb looks: by
/// its build-id (`/usr/lib/debug/.build-id/ab/cdef....debug`, where Debian's `-dbgsym` and
/// Fedora's `-debuginfo` packages put them, then the debuginfod client's cache, where gdb,
/// `debuginfod-find` and other elfutils clients keep what they downloaded:
/// [`debuginfod_cache`]), then by its `.gnu_debuglink` name beside the object, in a `.debug/`
/// directory beside it, and under `/usr/lib/debug/` + the object's directory.
/// Read by the native shim (the symbol table of a stripped library: its static functions can
/// then be patched) and by `slice` (the DWARF: names, files and lines).
pub fn debug_file_candidates(path: &Path, build_id: Option<&[u8]>, debuglink: Option<&[u8]>) -> Vec<PathBuf> {
    debug_file_candidates_in(path, build_id, debuglink, debuginfod_cache(|k| std::env::var_os(k)))
}

/// The debuginfod client's cache directory, as elfutils' `debuginfod-client.c` finds it:
/// `$DEBUGINFOD_CACHE_PATH`, else `$XDG_CACHE_HOME/debuginfod_client`, else
/// `$HOME/.cache/debuginfod_client` (each only when absolute). A debug file is
/// `<cache>/<build-id in hex>/debuginfo` there.
pub fn debuginfod_cache(var: impl Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
    let abs = |k: &str| var(k).map(PathBuf::from).filter(|p| p.is_absolute());
    abs("DEBUGINFOD_CACHE_PATH")
        .or_else(|| abs("XDG_CACHE_HOME").map(|x| x.join("debuginfod_client")))
        .or_else(|| abs("HOME").map(|h| h.join(".cache/debuginfod_client")))
}

/// [`debug_file_candidates`] with the debuginfod cache given.
fn debug_file_candidates_in(path: &Path, build_id: Option<&[u8]>, debuglink: Option<&[u8]>, debuginfod: Option<PathBuf>) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(id) = build_id.filter(|id| id.len() >= 2) {
        let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
        out.push(PathBuf::from(format!("/usr/lib/debug/.build-id/{}/{}.debug", &hex[..2], &hex[2..])));
        if let Some(cache) = debuginfod {
            out.push(cache.join(&hex).join("debuginfo"));
        }
    }
    if let Some(name) = debuglink.filter(|n| !n.is_empty() && !n.contains(&b'/')) {
        let name = String::from_utf8_lossy(name).into_owned();
        let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        if let Some(dir) = real.parent() {
            out.push(dir.join(&name));
            out.push(dir.join(".debug").join(&name));
            let rel = dir.strip_prefix("/").unwrap_or(dir);
            out.push(Path::new("/usr/lib/debug").join(rel).join(&name));
        }
    }
    out.retain(|c| c.as_path() != path);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_libraries_and_the_c_runtime_are_told_apart() {
        let t = |p| not_the_programs(p, None);
        assert_eq!(t("/usr/lib/x86_64-linux-gnu/libz.so.1.2.13"), Some("a system library"));
        assert_eq!(t("/lib/x86_64-linux-gnu/libc.so.6"), Some("the C runtime"));
        assert_eq!(t("/opt/gcc/lib64/libstdc++.so.6.0.30"), Some("the C runtime"));
        assert_eq!(t("/home/u/app/build/libshapes.so"), None);
        assert_eq!(t("/home/u/app/build/app"), None);
        assert_eq!(t("/usr/bin/bash"), Some("a system program"));
        assert_eq!(t("/usr/local/bin/mytool"), None);
        assert_eq!(t("/root/.cargo/bin/cargo"), Some("the Rust toolchain"));
        assert_eq!(t("/home/u/.cargo/bin/rg"), None, "cargo install's programs are the user's");
        assert_eq!(t("/home/u/.rustup/toolchains/stable-x86_64-unknown-linux-gnu/lib/librustc_driver-1a2b.so"), Some("the Rust toolchain"));
    }

    #[test]
    fn a_library_named_after_the_program_is_its_own() {
        let jq = Some("/usr/bin/jq");
        assert_eq!(not_the_programs("/usr/lib/x86_64-linux-gnu/libjq.so.1.0.4", jq), None);
        assert_eq!(not_the_programs("/usr/lib/x86_64-linux-gnu/libonig.so.5.3.0", jq), Some("a system library"));
        assert_eq!(not_the_programs("/usr/lib/x86_64-linux-gnu/libc.so.6", jq), Some("the C runtime"));
        assert_eq!(not_the_programs("/usr/bin/jq", jq), Some("a system program"), "the stripped launcher itself");
        assert_eq!(not_the_programs("/usr/lib/x86_64-linux-gnu/libjq.so.1.0.4", Some("/usr/bin/python3.11")), Some("a system library"));
        assert!(own_library("/usr/bin/sqlite3", "libsqlite3.so.0"));
        assert!(own_library("app", "/opt/app/lib/libapp-2.1.so"));
        assert!(!own_library("/usr/bin/jq", "libjqx.so.1"));
        assert!(!own_library("/usr/bin/jq", "libjq-dev.so"), "a version starts with a digit");
        assert!(!own_library("/usr/bin/sqlite3", "libsqlite3.a"));
        assert!(!own_library("/usr/bin/c", "libcrypto.so.3"));
        assert_eq!(own_libraries(Path::new("/usr/bin/jq"), ["libjq.so.1", "libc.so.6", "libonig.so.5"]), vec!["libjq.so.1"]);
    }

    #[test]
    fn debug_files_are_looked_for_where_gdb_looks() {
        let cache = Some(PathBuf::from("/home/u/.cache/debuginfod_client"));
        let c = debug_file_candidates_in(Path::new("/nonexistent/lib/libx.so.1"), Some(&[0xab, 0xcd, 0xef]), Some(b"libx.debug"), cache);
        let c: Vec<String> = c.iter().map(|p| p.display().to_string()).collect();
        assert_eq!(
            c,
            [
                "/usr/lib/debug/.build-id/ab/cdef.debug",
                "/home/u/.cache/debuginfod_client/abcdef/debuginfo",
                "/nonexistent/lib/libx.debug",
                "/nonexistent/lib/.debug/libx.debug",
                "/usr/lib/debug/nonexistent/lib/libx.debug"
            ]
        );
        assert!(debug_file_candidates(Path::new("/l/x"), None, Some(b"../../etc/passwd")).is_empty(), "a link is a file name");
        assert!(debug_file_candidates(Path::new("/l/x"), Some(&[1]), None).is_empty());
    }

    #[test]
    fn the_debuginfod_cache_is_found_as_elfutils_finds_it() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |k: &str| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| OsString::from(v))
        };
        const ALL: &[(&str, &str)] = &[("DEBUGINFOD_CACHE_PATH", "/c"), ("XDG_CACHE_HOME", "/x"), ("HOME", "/h")];
        assert_eq!(debuginfod_cache(env(ALL)), Some(PathBuf::from("/c")));
        assert_eq!(debuginfod_cache(env(&ALL[1..])), Some(PathBuf::from("/x/debuginfod_client")));
        assert_eq!(debuginfod_cache(env(&ALL[2..])), Some(PathBuf::from("/h/.cache/debuginfod_client")));
        assert_eq!(
            debuginfod_cache(env(&[("DEBUGINFOD_CACHE_PATH", "rel"), ("HOME", "/h")])),
            Some(PathBuf::from("/h/.cache/debuginfod_client"))
        );
        assert_eq!(debuginfod_cache(env(&[])), None);
    }
}
