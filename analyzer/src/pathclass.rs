//! Where a function's code comes from: the program, the standard library, or installed
//! third-party packages; and the module name used by `--module`.

use crate::symbols::{Function, Language};
use std::path::Path;

/// Origin of a function's code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// The program's own code (anything not below).
    Program,
    /// Python's standard library (`.../lib/python3.X/...` outside `site-packages`, frozen
    /// modules), or for native code the C/C++ runtime (`/usr/include/...`, system libraries)
    /// and Rust's `std`/`core`/`alloc` (see [`native_origin`]).
    Stdlib,
    /// Installed packages: `site-packages` or `dist-packages`; for Rust, cargo's registry and
    /// git checkouts.
    SitePackages,
}

/// Classify a Python source path.
pub fn python_origin(path: &str) -> Origin {
    if path.starts_with("<frozen ") {
        return Origin::Stdlib;
    }
    if packages_dir_end(path).is_some() {
        return Origin::SitePackages;
    }
    if stdlib_dir_end(path).is_some() {
        return Origin::Stdlib;
    }
    Origin::Program
}

/// Classify a native function by its source file, its object, and (for code without a
/// source file) its name.
///
/// - **Stdlib**: the C/C++ runtime and system headers (`/usr/include/...`, `/usr/lib/gcc/...`:
///   libstdc++'s templates instantiated in the program count as the library's code), the
///   system's libraries (objects under `/lib...` or `/usr/lib...`, whatever their source), the Rust
///   standard library (`/rustc/<commit>/library/...` as rustup's prebuilt `std` records it, the
///   same under a toolchain's `lib/rustlib/src/rust/library/`, and `/rust/deps/...`, the crates
///   `std` vendors), and Rust functions without a source file whose crate is `std`, `core`, `alloc` or the
///   allocator shims rustc generates (`__rustc::__rust_alloc`).
/// - **SitePackages**: Rust dependencies from cargo's registry or git checkouts
///   (`$CARGO_HOME/registry/src/...`, `$CARGO_HOME/git/checkouts/...`), the analogue of
///   Python's installed packages.
pub fn native_origin(file: Option<&str>, object: Option<&str>) -> Origin {
    if let Some(f) = file {
        if f.starts_with("/usr/include/") || f.starts_with("/usr/lib/gcc/") || rust_library_end(f).is_some() {
            return Origin::Stdlib;
        }
        if cargo_package_end(f).is_some() {
            return Origin::SitePackages;
        }
    }
    // A system library is the standard library even when its debug information (a
    // distribution's -dbgsym package) names its build tree's files.
    match object {
        Some(o) if o.starts_with("/lib") || o.starts_with("/usr/lib") => Origin::Stdlib,
        _ => Origin::Program,
    }
}

/// Classify a native function without a source file by its (demangled) name: the Rust
/// standard library's crates and rustc's generated allocator shims are the standard library,
/// and so are methods of primitive types (`<[u8]>::starts_with`, `<str>::find`) and trait
/// impls whose trait and self type are both the standard library's or primitive
/// (`<u8 as core::fmt::Display>::fmt`, not `<std::ffi::OsStr as clap_lex::ext::OsStrExt>::find`).
pub fn native_name_origin(qualname: &str) -> Option<Origin> {
    let std_path = |p: &str| {
        const STD_CRATES: [&str; 6] = ["std::", "core::", "alloc::", "__rustc::", "std_detect::", "panic_unwind::"];
        let p = p.trim_start_matches(['&', '*']).trim_start_matches("mut ").trim_start_matches("const ");
        STD_CRATES.iter().any(|c| p.starts_with(c))
    };
    let primitive = |p: &str| {
        let p = p.trim_start_matches(['&', '*']).trim_start_matches("mut ").trim_start_matches("const ");
        const PRIMS: [&str; 17] =
            ["u8", "u16", "u32", "u64", "u128", "usize", "i8", "i16", "i32", "i64", "i128", "isize", "f32", "f64", "bool", "char", "str"];
        p.starts_with('[') || p.starts_with('(') || PRIMS.contains(&p)
    };
    let Some(inner) = qualname.strip_prefix('<') else {
        return std_path(qualname).then_some(Origin::Stdlib);
    };
    // `<SELF>::m` or `<SELF as TRAIT>::m`: find the closing `>` of the qualified path.
    let mut depth = 1i32;
    let mut end = None;
    for (i, c) in inner.char_indices() {
        match c {
            '<' => depth += 1,
            '>' if !inner[..i].ends_with('-') => {
                depth -= 1;
                if depth == 0 {
                    end = Some(i);
                    break;
                }
            }
            _ => {}
        }
    }
    let qpath = &inner[..end?];
    let (self_ty, trait_path) = match split_as(qpath) {
        Some((s, t)) => (s, Some(t)),
        None => (qpath, None),
    };
    let self_std = std_path(self_ty) || primitive(self_ty);
    let std = match trait_path {
        None => self_std,
        Some(t) => self_std && std_path(t),
    };
    std.then_some(Origin::Stdlib)
}

/// Split a qualified path's inside at its top-level ` as `.
fn split_as(q: &str) -> Option<(&str, &str)> {
    let mut depth = 0i32;
    let b = q.as_bytes();
    for i in 0..b.len() {
        match b[i] {
            b'<' | b'(' | b'[' => depth += 1,
            b'>' | b')' | b']' if !(b[i] == b'>' && i > 0 && b[i - 1] == b'-') => depth -= 1,
            b' ' if depth == 0 && q[i..].starts_with(" as ") => return Some((&q[..i], &q[i + 4..])),
            _ => {}
        }
    }
    None
}

/// Where the path inside the Rust standard library's source starts (`std/src/...`): under
/// `/rustc/<commit>/library/` (rustup's prebuilt `std`), a toolchain's
/// `lib/rustlib/src/rust/library/`, or `/rust/deps/` (the crates `std` vendors).
pub(crate) fn rust_library_end(s: &str) -> Option<usize> {
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

/// Where the path inside a cargo package starts (`clap-4.5.20/src/...`): cargo's registry
/// (`.../registry/src/<index>/`) or git checkouts (`.../git/checkouts/<repo>/`), recognized by
/// the shape cargo gives them, whatever `CARGO_HOME` is called: the index or repository
/// directory is `<name>-<16 hex digits>` (`index.crates.io-1949cf8c6b5b557f`), and a registry
/// package's directory `<crate>-<version>`. Under a home named `cargo` or `.cargo` the shape is
/// not required (older cargos hashed differently).
pub(crate) fn cargo_package_end(s: &str) -> Option<usize> {
    /// `<name>-<16 hex digits>`.
    fn hashed(seg: &str) -> bool {
        seg.rsplit_once('-').is_some_and(|(n, h)| !n.is_empty() && h.len() == 16 && h.bytes().all(|b| b.is_ascii_hexdigit()))
    }
    for marker in ["/registry/src/", "/git/checkouts/"] {
        let Some(i) = s.find(marker) else { continue };
        let home_name = s[..i].rsplit('/').next().unwrap_or("");
        let rest = &s[i + marker.len()..];
        let index = rest.find('/')?;
        let shaped = hashed(&rest[..index])
            && (marker == "/git/checkouts/" || rest[index + 1..].split('/').next().is_some_and(|pkg| crate_name_of(pkg).is_some()));
        if home_name != ".cargo" && home_name != "cargo" && !shaped {
            continue;
        }
        return Some(i + marker.len() + index + 1);
    }
    None
}

/// The crate of a registry package directory `<crate>-<version>`, with `-` as `_`: the
/// version starts at the first `-` followed by a digit (`pico-args-0.5.0`).
fn crate_name_of(dir: &str) -> Option<String> {
    let b = dir.as_bytes();
    let cut = (1..b.len()).find(|&k| b[k - 1] == b'-' && b[k].is_ascii_digit())?;
    Some(dir[..cut - 1].replace('-', "_"))
}

/// The crate a source file from cargo's registry belongs to, with `-` as `_`
/// (`.../registry/src/<index>/clap_builder-4.5.20/src/derive.rs` -> `clap_builder`); `None`
/// elsewhere (git checkouts name a repository, not a crate).
pub fn cargo_crate(s: &str) -> Option<String> {
    if s.contains("/git/checkouts/") {
        return None;
    }
    let i = cargo_package_end(s)?;
    crate_name_of(s[i..].split('/').next()?)
}

/// A short display form of a Rust library or dependency path: `rust-library/std/src/path.rs`,
/// `cargo-registry/clap_builder-4.5.20/src/derive.rs` (the full paths repeat a long prefix on
/// every tree line).
pub fn native_display_path(s: &str) -> Option<String> {
    if let Some(i) = rust_library_end(s) {
        return Some(format!("rust-library/{}", &s[i..]));
    }
    let i = cargo_package_end(s)?;
    let kind = if s.contains("/git/checkouts/") { "cargo-git" } else { "cargo-registry" };
    Some(format!("{kind}/{}", &s[i..]))
}

/// Whether a Python function is one of the methods the standard library's `dataclasses`
/// generates (`__init__`, `__eq__`, `__setattr__`... compiled from a string inside a function
/// named `__create_fn__`, so `<string>` is their file and `__create_fn__.<locals>.__init__`
/// their qualified name, whatever the class): the standard library's code, not the program's.
/// Shown as the program's, they filled trees with lines such as `__create_fn__.<locals>.__init__
/// ×334` that name no class and have no source (black: 9 of 65 tree lines).
pub fn is_dataclass_generated(f: &Function) -> bool {
    f.language == Language::Python
        && f.file.as_deref().is_some_and(|p| p.as_os_str() == "<string>")
        && (f.qualname == "__create_fn__" || f.qualname.starts_with("__create_fn__.<locals>."))
}

/// Origin of a function.
pub fn origin(f: &Function) -> Origin {
    let file = f.file.as_deref().map(|p| p.to_string_lossy().into_owned());
    match f.language {
        Language::Python if is_dataclass_generated(f) => Origin::Stdlib,
        Language::Python => file.as_deref().map(python_origin).unwrap_or(Origin::Program),
        // A C function of an installed package (mypyc-compiled black's `main`, Cython, numpy)
        // is the package's code, not the standard library's.
        Language::Builtin => match f.object.as_deref() {
            Some(m) if !m.is_empty() && !crate::py_stdlib::is_stdlib_module(m) => Origin::SitePackages,
            _ => Origin::Stdlib,
        },
        // GoogleTest (linked into the test binary, built with the program or from Debian's
        // libgtest.a) is an installed test runner, wherever its source is.
        Language::Native if crate::plumbing::native_package(f).as_deref() == Some(crate::plumbing::GOOGLETEST) => Origin::SitePackages,
        Language::Native => match (&file, native_name_origin(&f.qualname)) {
            (None, Some(o)) => o,
            _ => native_origin(file.as_deref(), f.object.as_deref()),
        },
    }
}

/// The module a function belongs to: the dotted Python module name derived from its file
/// (relative to `site-packages`, the standard library directory, or `cwd`), or for native
/// code the file name of its object.
pub fn module_name(f: &Function, cwd: &Path) -> String {
    if f.language != Language::Python {
        let o = f.object.as_deref().unwrap_or("");
        return o.rsplit('/').next().unwrap_or(o).to_string();
    }
    let Some(file) = f.file.as_deref() else { return String::new() };
    let s = file.to_string_lossy();
    if let Some(inner) = s.strip_prefix("<frozen ").and_then(|r| r.strip_suffix('>')) {
        return inner.to_string();
    }
    let rel: &str = if let Some((_, i)) = packages_dir_end(&s) {
        &s[i..]
    } else if let Some(i) = stdlib_dir_end(&s) {
        &s[i..]
    } else {
        return package_module(file).unwrap_or_else(|| match file.strip_prefix(cwd) {
            Ok(r) => dotted(&r.to_string_lossy()),
            Err(_) => dotted(s.rsplit('/').next().unwrap_or(&s)),
        });
    };
    dotted(rel)
}

/// The dotted module name of a program file from its package directories (those with an
/// `__init__.py`), as Python would import it: `.../shop/pricing.py` -> `shop.pricing`.
fn package_module(file: &Path) -> Option<String> {
    let stem = file.file_stem()?.to_string_lossy().into_owned();
    let mut parts = if stem == "__init__" { Vec::new() } else { vec![stem] };
    let mut dir = file.parent();
    let mut in_package = false;
    while let Some(d) = dir {
        if !d.join("__init__.py").exists() {
            break;
        }
        in_package = true;
        parts.push(d.file_name()?.to_string_lossy().into_owned());
        dir = d.parent();
    }
    if !in_package {
        return None; // not inside a package: the caller falls back to the path
    }
    parts.reverse();
    Some(parts.join("."))
}

/// The installed-packages directory of a path: its name (`site-packages` or `dist-packages`)
/// and where the path inside it starts.
pub(crate) fn packages_dir_end(s: &str) -> Option<(&'static str, usize)> {
    ["site-packages", "dist-packages"].into_iter().find_map(|name| s.rfind(&format!("/{name}/")).map(|i| (name, i + name.len() + 2)))
}

/// Where the path inside the Python standard library directory starts (`/usr/lib/python3.11/`,
/// `/usr/local/lib/python3.12/`, `~/.pyenv/versions/3.11.7/lib/python3.11/`...).
pub(crate) fn stdlib_dir_end(s: &str) -> Option<usize> {
    let mut off = 0;
    let parts: Vec<&str> = s.split('/').collect();
    for w in parts.windows(2) {
        off += w[0].len() + 1;
        if w[0].starts_with("lib") && w[1].starts_with("python3") {
            return Some((off + w[1].len() + 1).min(s.len()));
        }
    }
    None
}

fn dotted(rel: &str) -> String {
    let rel = rel.strip_suffix(".py").unwrap_or(rel);
    let rel = rel.strip_suffix("/__init__").unwrap_or(rel);
    rel.trim_start_matches('/').replace('/', ".")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn pyf(file: &str) -> Function {
        Function {
            language: Language::Python,
            name: "f".into(),
            qualname: "f".into(),
            file: Some(PathBuf::from(file)),
            first_line: Some(1),
            last_line: Some(2),
            object: None,
            inlined: false,
        }
    }

    #[test]
    fn origins() {
        assert_eq!(python_origin("/usr/lib/python3.11/json/decoder.py"), Origin::Stdlib);
        assert_eq!(python_origin("/root/.pyenv/versions/3.11.7/lib/python3.11/re/__init__.py"), Origin::Stdlib);
        assert_eq!(python_origin("<frozen runpy>"), Origin::Stdlib);
        assert_eq!(python_origin("/usr/local/lib/python3.11/dist-packages/rich/table.py"), Origin::SitePackages);
        assert_eq!(python_origin("/home/u/.local/lib/python3.11/site-packages/rich/table.py"), Origin::SitePackages);
        assert_eq!(python_origin("/home/u/proj/app.py"), Origin::Program);
        assert_eq!(native_origin(Some("/usr/include/c++/12/bits/stl_vector.h"), None), Origin::Stdlib);
        assert_eq!(native_origin(None, Some("/usr/lib/x86_64-linux-gnu/libc.so.6")), Origin::Stdlib);
        assert_eq!(native_origin(Some("/home/u/x.c"), Some("/home/u/x")), Origin::Program);
        // libstdc++ with its debug symbols installed: its build tree's files, a system object.
        let libstdcxx = Some("/usr/lib/x86_64-linux-gnu/libstdc++.so.6");
        assert_eq!(native_origin(Some("/build/gcc-12/libstdc++-v3/src/c++11/string-inst.cc"), libstdcxx), Origin::Stdlib);
        assert_eq!(native_origin(Some("/opt/app/src/x.c"), Some("/opt/app/libx.so")), Origin::Program);
    }

    #[test]
    fn c_functions_belong_to_their_module() {
        let c = |module: Option<&str>| Function {
            language: Language::Builtin,
            name: "main".into(),
            qualname: "main".into(),
            file: None,
            first_line: None,
            last_line: None,
            object: module.map(String::from),
            inlined: false,
        };
        assert_eq!(origin(&c(Some("builtins"))), Origin::Stdlib);
        assert_eq!(origin(&c(Some("os.path"))), Origin::Stdlib);
        assert_eq!(origin(&c(None)), Origin::Stdlib);
        // black's mypyc-compiled `main`.
        assert_eq!(origin(&c(Some("black"))), Origin::SitePackages);
    }

    #[test]
    fn dataclass_generated_methods_are_the_standard_library() {
        let mut f = pyf("<string>");
        f.qualname = "__create_fn__.<locals>.__init__".into();
        assert_eq!(origin(&f), Origin::Stdlib);
        f.qualname = "__create_fn__".into();
        assert_eq!(origin(&f), Origin::Stdlib);
        // Other code compiled from a string is the program's (an `exec` the program ran).
        f.qualname = "<lambda>".into();
        assert_eq!(origin(&f), Origin::Program);
        f.qualname = "make.<locals>.__init__".into();
        assert_eq!(origin(&f), Origin::Program);
        // A program's own function of that name in a real file stays the program's.
        let mut g = pyf("/home/u/proj/gen.py");
        g.qualname = "__create_fn__.<locals>.__init__".into();
        assert_eq!(origin(&g), Origin::Program);
    }

    #[test]
    fn rust_origins() {
        let std = "/rustc/59807616e1fa2540724bfbac14d7976d7e4a3860/library/alloc/src/raw_vec/mod.rs";
        assert_eq!(native_origin(Some(std), Some("/p/hexyl")), Origin::Stdlib);
        assert_eq!(native_origin(Some("/rust/deps/gimli-0.32.3/src/read/unit.rs"), None), Origin::Stdlib);
        let rustup = "/root/.rustup/toolchains/stable-x86_64-unknown-linux-gnu/lib/rustlib/src/rust/library/core/src/fmt/mod.rs";
        assert_eq!(native_origin(Some(rustup), None), Origin::Stdlib);
        let dep = "/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/clap_builder-4.5.20/src/derive.rs";
        assert_eq!(native_origin(Some(dep), None), Origin::SitePackages);
        assert_eq!(native_origin(Some("/usr/local/cargo/git/checkouts/foo-0123abcd/4f1e2d3/src/lib.rs"), None), Origin::SitePackages);
        // Look-alikes are the program's.
        assert_eq!(native_origin(Some("/home/u/rustc/src/main.rs"), None), Origin::Program);
        assert_eq!(native_origin(Some("/rustc/notahash/library/std/src/lib.rs"), None), Origin::Program);
        assert_eq!(native_origin(Some("/home/u/registry/src/x/y.rs"), None), Origin::Program);
        assert_eq!(native_origin(Some("/home/u/proj/library/std/src/x.rs"), None), Origin::Program);
        // Without a source file: the name decides.
        let f = |q: &str| Function {
            language: Language::Native,
            name: q.into(),
            qualname: q.into(),
            file: None,
            first_line: None,
            last_line: None,
            object: Some("/p/hexyl".into()),
            inlined: false,
        };
        assert_eq!(origin(&f("__rustc::__rust_alloc")), Origin::Stdlib);
        assert_eq!(origin(&f("<core::fmt::Arguments as core::fmt::Display>::fmt")), Origin::Stdlib);
        assert_eq!(origin(&f("main")), Origin::Program);
        assert_eq!(origin(&f("<[u8]>::starts_with")), Origin::Stdlib);
        assert_eq!(origin(&f("<str>::find::<char>")), Origin::Stdlib);
        assert_eq!(origin(&f("<u8 as core::fmt::Display>::fmt")), Origin::Stdlib);
        assert_eq!(origin(&f("<&alloc::vec::Vec<u8> as core::fmt::Debug>::fmt")), Origin::Stdlib);
        assert_eq!(origin(&f("<std::ffi::os_str::OsStr as clap_lex::ext::OsStrExt>::find")), Origin::Program);
        assert_eq!(origin(&f("<app::Opt as core::default::Default>::default")), Origin::Program);
        assert_eq!(origin(&f("<app::Wrapper<u8>>::get")), Origin::Program);
        assert_eq!(origin(&f("standalone::run")), Origin::Program);
        assert_eq!(native_display_path(std).as_deref(), Some("rust-library/alloc/src/raw_vec/mod.rs"));
        assert_eq!(native_display_path(dep).as_deref(), Some("cargo-registry/clap_builder-4.5.20/src/derive.rs"));
        assert_eq!(cargo_crate(dep).as_deref(), Some("clap_builder"));
        assert_eq!(
            cargo_crate("/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/pico-args-0.5.0/src/lib.rs").as_deref(),
            Some("pico_args")
        );
        assert_eq!(cargo_crate("/root/.cargo/git/checkouts/clap-0d2c1b/5a1c2e3/src/lib.rs"), None);
        assert_eq!(cargo_crate("/home/u/proj/src/main.rs"), None);
        assert_eq!(native_display_path("/home/u/x.rs"), None);
        // A CARGO_HOME of any name: recognized by the registry's shape.
        let elsewhere = "/opt/rust-deps/registry/src/index.crates.io-1949cf8c6b5b557f/memchr-2.7.4/src/lib.rs";
        assert_eq!(cargo_crate(elsewhere).as_deref(), Some("memchr"));
        assert_eq!(native_display_path(elsewhere).as_deref(), Some("cargo-registry/memchr-2.7.4/src/lib.rs"));
        assert_eq!(
            native_display_path("/srv/ch/git/checkouts/clap-0d2c1b8f3a5e7d91/5a1c2e3/src/lib.rs").as_deref(),
            Some("cargo-git/5a1c2e3/src/lib.rs")
        );
        // The user's own folders named `registry/src` are not cargo's.
        assert_eq!(cargo_crate("/home/u/app/registry/src/server/handler.rs"), None);
        assert_eq!(cargo_crate("/home/u/app/registry/src/v1-aaaa/x-1.0/lib.rs"), None);
    }

    #[test]
    fn module_names() {
        let cwd = Path::new("/home/u/proj");
        assert_eq!(module_name(&pyf("/usr/local/lib/python3.11/dist-packages/rich/table.py"), cwd), "rich.table");
        assert_eq!(module_name(&pyf("/usr/local/lib/python3.11/site-packages/rich/__init__.py"), cwd), "rich");
        assert_eq!(module_name(&pyf("/usr/lib/python3.11/json/decoder.py"), cwd), "json.decoder");
        assert_eq!(module_name(&pyf("/home/u/proj/pkg/util.py"), cwd), "pkg.util");
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("shop")).unwrap();
        std::fs::write(d.path().join("shop/__init__.py"), "").unwrap();
        let f = d.path().join("shop/pricing.py");
        assert_eq!(module_name(&pyf(f.to_str().unwrap()), cwd), "shop.pricing");
        let f = d.path().join("shop/__init__.py");
        assert_eq!(module_name(&pyf(f.to_str().unwrap()), cwd), "shop");
        assert_eq!(module_name(&pyf("<frozen runpy>"), cwd), "runpy");
    }
}
