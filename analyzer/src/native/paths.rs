//! Where native code comes from: the C/C++ runtime and system headers, Rust's standard library,
//! cargo's registry and git checkouts (by path shape), or the program; crate names and short
//! display paths. The language-neutral dispatch is [`crate::pathclass`].

use crate::pathclass::Origin;
use trace_format::objects::rust_library_end;

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
///   CPython's C API headers (`<prefix>/include/python3.N/...`: their `static inline` functions,
///   `Py_TYPE`, `Py_SIZE`, are compiled into an extension module, as functions at `-O0`) are the
///   standard library too.
/// - **SitePackages**: Python extension modules installed in a `site-packages` or
///   `dist-packages` directory, whatever their source (as the Python files there are), and Rust dependencies from cargo's registry or git checkouts
///   (`$CARGO_HOME/registry/src/...`, `$CARGO_HOME/git/checkouts/...`) or vendored by `cargo
///   vendor` (`vendor/<crate>/` holding `.cargo-checksum.json`), the analogue of Python's
///   installed packages.
pub fn native_origin(file: Option<&str>, object: Option<&str>) -> Origin {
    if let Some(f) = file {
        if f.starts_with("/usr/include/") || f.starts_with("/usr/lib/gcc/") || rust_library_end(f).is_some() || cpython_header(f) {
            return Origin::Stdlib;
        }
        if cargo_package_end(f).is_some() {
            return Origin::SitePackages;
        }
    }
    // A system library is the standard library even when its debug information (a
    // distribution's -dbgsym package) names its build tree's files.
    match object {
        Some(o) if (o.contains("/site-packages/") || o.contains("/dist-packages/")) && trace_format::patching::is_extension_module(o) => {
            Origin::SitePackages
        }
        Some(o) if o.starts_with("/lib") || o.starts_with("/usr/lib") => Origin::Stdlib,
        _ => Origin::Program,
    }
}

/// mypyc's runtime library (`lib-rt`, compiled into every mypyc extension module:
/// `CPyStr_Build`, `CPy_AddTraceback`, `CPyArg_ParseStackAndKeywords`...) and the wrappers that
/// unpack a call from Python (`CPyPy_<module>___<function>`) are the standard library's
/// plumbing; the compiled Python functions themselves (`CPyDef_<module>___<function>`) are not.
/// So are the type slots the garbage collector and the interpreter call, mypyc's and Cython's
/// (`linegen___LineGenerator_traverse`, `..._clear`, `..._dealloc`, `__pyx_tp_traverse_...`),
/// and in mypyc's shared module (`<hash>__mypyc.cpython-...so`) everything but `CPyDef_`
/// (attribute getters and setters, `..._new`, environment set-up, CPython's code it carries).
/// So are the methods mypyc writes for a generator's class around its body
/// (`CPyDef_..._gen_____next__`, `__iter__`, `send`, `throw`, `close`, `__await__`: they run the
/// `..._gen_____mypyc_generator_helper__`, which is the body) and a callable class's `__get__`
/// (`CPyDef_..._obj_____get__`, binding a nested function or lambda).
/// Only in a Python extension module (`object`).
pub fn extension_plumbing(qualname: &str, object: Option<&str>) -> bool {
    let mypyc_lib = object.is_some_and(|o| o.rsplit('/').next().unwrap_or(o).split('.').next().is_some_and(|s| s.ends_with("__mypyc")));
    const GENERATED: [&str; 7] =
        ["_gen_____next__", "_gen_____iter__", "_gen___send", "_gen___throw", "_gen___close", "_gen_____await__", "_obj_____get__"];
    let generated = qualname.starts_with("CPyDef_") && GENERATED.iter().any(|s| qualname.ends_with(s));
    let runtime = (qualname.starts_with("CPy") || mypyc_lib) && (!qualname.starts_with("CPyDef_") || generated);
    let slot = ["_traverse", "_clear", "_dealloc", "_finalize"].iter().any(|s| qualname.ends_with(s)) || qualname.starts_with("__pyx_tp_");
    (runtime || slot) && object.is_some_and(trace_format::patching::is_extension_module)
}

/// A CPython C API header: a file under an `include/python3.N/` directory (pyenv's, a venv's
/// base prefix, `/usr/local/include/python3.12/...`).
fn cpython_header(f: &str) -> bool {
    f.match_indices("/include/python3.").any(|(i, m)| {
        let rest = &f[i + m.len()..];
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        digits > 0 && rest[digits..].trim_start_matches(['t', 'd', 'm']).starts_with('/')
    })
}

/// Classify a native function without a source file by its (demangled) name: the Rust
/// standard library's crates and rustc's generated allocator shims are the standard library,
/// and so are methods of primitive types (`<[u8]>::starts_with`, `<str>::find`) and trait
/// impls whose trait and self type are both the standard library's, primitive or generic
/// (`<u8 as core::fmt::Display>::fmt`, `<T as core::any::Any>::type_id`, not
/// `<std::ffi::OsStr as clap_lex::ext::OsStrExt>::find`). Any other name: `None` (the
/// crates of a Rust program without debug information are told apart by [`rust_name_origin`]
/// once the program's crate is known).
pub fn native_name_origin(qualname: &str) -> Option<Origin> {
    rust_name_origin(qualname, &[]).filter(|o| *o == Origin::Stdlib)
}

/// The crates of the Rust standard library (and rustc's generated shims) as the first segment
/// of a demangled name.
const STD_CRATES: [&str; 8] = ["std", "core", "alloc", "__rustc", "std_detect", "panic_unwind", "panic_abort", "proc_macro"];

/// The crates the Rust standard library links for its own use (a panic's backtrace: reading
/// the executable's debug information and decompressing it; its hash map), as the first
/// segment of a demangled name. Their code in a program's executable has no source file: the
/// standard library's build leaves it without debug information.
pub const STD_OWN_DEPENDENCIES: [&str; 9] =
    ["miniz_oxide", "adler", "adler2", "gimli", "addr2line", "object", "rustc_demangle", "memchr", "hashbrown"];

/// Whether a demangled Rust name is of [`STD_OWN_DEPENDENCIES`] (and the standard library's
/// crates) only: `<gimli::read::unit::Unit<R> as core::clone::Clone>::clone`.
pub fn is_std_own_dependency(qualname: &str) -> bool {
    name_crates(qualname).is_some_and(|crates| {
        crates.iter().any(|c| STD_OWN_DEPENDENCIES.contains(c))
            && crates.iter().all(|c| STD_OWN_DEPENDENCIES.contains(c) || STD_CRATES.contains(c))
    })
}

/// The origin of a Rust function by the crate(s) of its demangled name, for code without a
/// source file (a binary built without debug information, as `cargo install` builds by
/// default): the rule that stands in for the path shapes of [`native_origin`].
///
/// The crates of a name: its first path segment (`clap_builder::parser::Parser::react`,
/// `regex_automata::meta::regex::Builder::build::{{closure}}`, legacy impl paths such as
/// `hexyl::_<impl serde::Serialize for hexyl::Cfg>::serialize` and
/// `core::fmt::num::imp::<impl core::fmt::Display for u32>::fmt` are their first segment's);
/// for a qualified path `<SELF>::m` or `<SELF as TRAIT>::m` both the self type's crate and the
/// trait's, because the orphan rule puts the impl in one of the two (a generic parameter `T`,
/// a primitive, a slice or a tuple has no crate: `<P as clap_builder::...::AnyValueParser>::parse_ref_`
/// is clap_builder's). A reference, pointer, `dyn` or `impl` counts as the type it names.
///
/// Then: a crate of the program's (`program_crates`, the crate of the program's `main`) makes
/// it the program's (`<hexyl::Squeezer as core::iter::Iterator>::next`, an impl the program
/// wrote for a dependency's trait); else a crate neither the program's nor the standard
/// library's makes it a dependency's, shown as installed packages are
/// (`<hashbrown::raw::RawTable<T,A> as core::ops::drop::Drop>::drop`); else a standard library
/// crate makes it the standard library's, and so does a method of a primitive type
/// (`<[u8]>::starts_with`, `<str>::find`: no crate at all). `None`: not a Rust path (a C
/// function, `main`, `<unknown #3>`).
///
/// Limits: a workspace's other crates (ripgrep's `ignore`, `grep_searcher`) cannot be told
/// from dependencies by name and are dependencies here; crates the standard library itself
/// links (`hashbrown`, `rustc_demangle`) are dependencies when their code is instantiated
/// without a source file.
pub fn rust_name_origin(qualname: &str, program_crates: &[&str]) -> Option<Origin> {
    let crates = name_crates(qualname)?;
    if crates.iter().any(|c| program_crates.contains(c)) {
        return Some(Origin::Program);
    }
    if crates.iter().any(|c| !STD_CRATES.contains(c)) {
        return Some(Origin::SitePackages);
    }
    Some(Origin::Stdlib)
}

/// The dependency a function without a source file belongs to by its name
/// ([`rust_name_origin`]): the first of its name's crates that is not the standard library's
/// (`clap_builder` for `<P as clap_builder::builder::value_parser::AnyValueParser>::parse_ref_`).
pub fn rust_name_crate(qualname: &str) -> Option<String> {
    name_crates(qualname)?.into_iter().find(|c| !STD_CRATES.contains(c)).map(str::to_string)
}

/// The crates of a demangled Rust name ([`rust_name_origin`]); `None` when it is no Rust path.
fn name_crates(qualname: &str) -> Option<Vec<&str>> {
    let Some(inner) = qualname.strip_prefix('<') else {
        return Some(vec![path_crate(qualname)?]);
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
    let end = end?;
    if !inner[end + 1..].starts_with("::") {
        return None;
    }
    let qpath = &inner[..end];
    let (self_ty, trait_path) = match split_as(qpath) {
        Some((s, t)) => (s, Some(t)),
        None => (qpath, None),
    };
    Some([Some(self_ty), trait_path].into_iter().flatten().filter_map(type_crate).collect())
}

/// The crate of a type or trait inside a qualified path: its path's first segment, through
/// `&`, `*const`, `*mut`, `dyn`, `impl`; `None` for a primitive, a generic parameter, a slice,
/// an array or a tuple.
fn type_crate(ty: &str) -> Option<&str> {
    let mut t = ty.trim();
    loop {
        let before = t;
        t = t.trim_start_matches(['&', '*']).trim_start();
        for p in ["mut ", "const ", "dyn ", "impl "] {
            t = t.strip_prefix(p).unwrap_or(t).trim_start();
        }
        // A lifetime (`&'a T`).
        if t.starts_with('\'') {
            t = t.split_once(' ').map_or("", |(_, r)| r);
        }
        if t == before {
            break;
        }
    }
    if t.starts_with(['[', '(', '<']) {
        // `<X as Y>::Assoc` as a type: its crates are X's and Y's; the first is enough here.
        return t.strip_prefix('<').and_then(type_crate);
    }
    path_crate(t)
}

/// The first segment of a path `krate::a::b`, when it is an identifier followed by `::`.
fn path_crate(p: &str) -> Option<&str> {
    let (first, _) = p.split_once("::")?;
    (!first.is_empty() && first.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') && !first.starts_with(|c: char| c.is_ascii_digit()))
        .then_some(first)
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

/// Where the path inside a cargo package starts (`clap-4.5.20/src/...`): cargo's registry
/// (`.../registry/src/<index>/`) or git checkouts (`.../git/checkouts/<repo>/`), recognized by
/// the shape cargo gives them, whatever `CARGO_HOME` is called: the index or repository
/// directory is `<name>-<16 hex digits>` (`index.crates.io-1949cf8c6b5b557f`; the name is empty
/// for a registry that replaces crates.io under no name), a registry package's directory
/// `<crate>-<version>`, and a checkout's directory the commit's short hash. Under a home named
/// `cargo` or `.cargo` the shape is not required (older cargos hashed differently). Vendored
/// packages (`cargo vendor`) start after `vendor/` ([`vendored_package_end`]).
pub(crate) fn cargo_package_end(s: &str) -> Option<usize> {
    /// `<name>-<16 hex digits>`.
    fn hashed(seg: &str) -> bool {
        seg.rsplit_once('-').is_some_and(|(_, h)| h.len() == 16 && h.bytes().all(|b| b.is_ascii_hexdigit()))
    }
    /// A git commit's short hash, as cargo names a checkout (7 hex digits or more).
    fn revision(seg: &str) -> bool {
        seg.len() >= 7 && seg.bytes().all(|b| b.is_ascii_hexdigit())
    }
    for marker in ["/registry/src/", "/git/checkouts/"] {
        let Some(i) = s.find(marker) else { continue };
        let home_name = s[..i].rsplit('/').next().unwrap_or("");
        let rest = &s[i + marker.len()..];
        let index = rest.find('/')?;
        let next = rest[index + 1..].split('/').next();
        let shaped = hashed(&rest[..index])
            && next.is_some_and(|pkg| if marker == "/git/checkouts/" { revision(pkg) } else { crate_name_of(pkg).is_some() });
        if home_name != ".cargo" && home_name != "cargo" && !shaped {
            continue;
        }
        return Some(i + marker.len() + index + 1);
    }
    vendored_package_end(s)
}

/// Where the path of a vendored package starts (`.../vendor/memchr/src/lib.rs` ->
/// `memchr/src/lib.rs`): a directory `vendor/<crate>[-<version>]/` that holds the
/// `.cargo-checksum.json` `cargo vendor` writes (checked on disk, once per directory), so a
/// project's own `vendor/` folder of C sources is not taken for crates.
pub(crate) fn vendored_package_end(s: &str) -> Option<usize> {
    thread_local! {
        static SEEN: std::cell::RefCell<rustc_hash::FxHashMap<String, bool>> = Default::default();
    }
    const MARKER: &str = "/vendor/";
    let mut from = 0;
    while let Some(k) = s[from..].find(MARKER) {
        let start = from + k + MARKER.len();
        from = start;
        let Some(len) = s[start..].find('/') else { break };
        let dir = &s[..start + len];
        let vendored = SEEN.with(|m| {
            *m.borrow_mut().entry(dir.to_string()).or_insert_with(|| std::path::Path::new(dir).join(".cargo-checksum.json").is_file())
        });
        if vendored {
            return Some(start);
        }
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
    let dir = s[i..].split('/').next()?;
    if vendored_package_end(s) == Some(i) {
        // `cargo vendor` names a directory by the crate, adding the version only when two
        // versions of a crate are vendored.
        return Some(crate_name_of(dir).unwrap_or_else(|| dir.replace('-', "_")));
    }
    crate_name_of(dir)
}

/// The directory of the registry package a file is in (`.../registry/src/<index>/ignore-0.4.29/`,
/// with its `/`); `None` outside cargo's registry (a git checkout names a repository, a vendored
/// directory is read as any other).
pub(crate) fn registry_package_dir(file: &str) -> Option<&str> {
    if file.contains("/git/checkouts/") {
        return None;
    }
    let i = cargo_package_end(file)?;
    if vendored_package_end(file) == Some(i) {
        return None;
    }
    let dir = file[i..].split('/').next()?;
    (!dir.is_empty() && file.len() > i + dir.len()).then(|| &file[..i + dir.len() + 1])
}

/// The directory of the cargo package that holds a Rust program's own code, read off the
/// program's `main` function: a program that `cargo install` builds from cargo's registry (or
/// from a git checkout, `cargo install --git`; or vendored) has its source there beside its
/// dependencies', and is told apart from them by its `main`. `qualname` and `file`: a function's
/// demangled name and source file; `exe_name`: the file name of the process's executable. The
/// function is the program's `main` when its name is `<crate>::main` with `<crate>` the
/// executable's name (cargo names a binary's crate after its target, `-` as `_`: ripgrep's `rg`)
/// or, in the package's `src/main.rs` or `src/bin/`, its package's crate (a renamed
/// executable); then the package directory
/// (`.../registry/src/<index>/hexyl-0.16.0/`, a checkout's `.../git/checkouts/<repo>/<rev>/`: the
/// whole repository, a workspace's crates included; `vendor/<crate>/`) is returned. `None` for
/// any other function, and for a `main` that is not in a cargo package (the program's own
/// source tree is the program anyway).
pub fn program_crate_root<'a>(qualname: &str, file: &'a str, exe_name: &str) -> Option<&'a str> {
    let krate = qualname.strip_suffix("::main")?;
    if krate.is_empty() || !krate.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return None;
    }
    let i = cargo_package_end(file)?;
    let dir = file[i..].split('/').next()?;
    if dir.is_empty() || file.len() == i + dir.len() {
        return None;
    }
    let package = if file.contains("/git/checkouts/") {
        None
    } else if vendored_package_end(file) == Some(i) {
        Some(crate_name_of(dir).unwrap_or_else(|| dir.replace('-', "_")))
    } else {
        crate_name_of(dir)
    };
    let root = &file[..i + dir.len() + 1];
    let rel = &file[root.len()..];
    // A renamed executable is matched by the package's crate only in a binary's source file,
    // so that a library's root-level `pub fn main` is not taken for the program's.
    let binary_file = rel == "src/main.rs" || rel.starts_with("src/bin/");
    (krate == exe_name.replace('-', "_") || (binary_file && package.as_deref() == Some(krate))).then_some(root)
}

/// The `repository` of a cargo package's manifest (the text of its `Cargo.toml`): the
/// `[package]` table's `repository = "..."` line, as a published package's normalized manifest
/// writes it; without a trailing `/` or `.git`.
pub fn package_repository(manifest: &str) -> Option<String> {
    let mut in_package = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_package = line == "[package]";
            continue;
        }
        let Some(rest) = line.strip_prefix("repository").map(str::trim_start) else { continue };
        let Some(value) = rest.strip_prefix('=').map(str::trim) else { continue };
        if !in_package {
            continue;
        }
        let url = value.strip_prefix('"')?.split('"').next()?;
        let url = url.trim_end_matches('/');
        let url = url.strip_suffix(".git").unwrap_or(url);
        return (!url.is_empty()).then(|| url.to_string());
    }
    None
}

/// Whether a package whose repository is `repo` is part of the program whose own package's
/// repository is `program`: the same repository, or a directory inside it (ripgrep's
/// `https://github.com/BurntSushi/ripgrep/tree/master/crates/ignore` inside
/// `https://github.com/BurntSushi/ripgrep`: a project that publishes its workspace's crates
/// one by one). The program's repository must name one (a host and two path segments at
/// least), not just a host or an owner.
pub fn same_repository(program: &str, repo: &str) -> bool {
    let after_host = program.split_once("://").map_or(program, |(_, r)| r);
    if after_host.split('/').filter(|s| !s.is_empty()).count() < 3 {
        return false;
    }
    let (p, r) = (program.to_ascii_lowercase(), repo.to_ascii_lowercase());
    r == p || r.strip_prefix(&p).is_some_and(|rest| rest.starts_with('/'))
}

/// The Rust module a source file defines, as a path (`.../library/alloc/src/raw_vec/mod.rs` ->
/// `alloc::raw_vec`, `.../clap_builder-4.5.20/src/builder/command.rs` ->
/// `clap_builder::builder::command`, `<package>/src/lib.rs` -> the package's library crate):
/// the crate from the path's shape (the standard library's `library/<crate>/src/`, a registry
/// or vendored package's directory) or, elsewhere, from the `Cargo.toml` of the package whose
/// `src/` holds the file (its `[lib]` name, else its package name; `src/bin/<name>.rs` is the
/// binary `<name>`); then a directory per module, `mod.rs`, `lib.rs` and `main.rs` naming none.
/// `None` for a file outside a `src/` directory, or whose package cannot be read. It names an
/// inlined function that line-tables-only DWARF gives only a bare name
/// ([`crate::native::resolve`]): the module, not the `impl` block, which no DIE tells.
pub fn rust_module_path(file: &str) -> Option<String> {
    let (krate, inside) = if let Some(i) = rust_library_end(file) {
        let rest = &file[i..];
        let (pkg, inside) = rest.split_once("/src/")?;
        let krate = if file[..i].ends_with("/rust/deps/") { crate_name_of(pkg)? } else { pkg.replace('-', "_") };
        (krate, inside)
    } else if let Some(krate) = cargo_crate(file) {
        let i = cargo_package_end(file)?;
        let inside = file[i..].split_once('/')?.1.strip_prefix("src/")?;
        (krate, inside)
    } else {
        let k = file.rfind("/src/")?;
        let inside = &file[k + "/src/".len()..];
        if let Some(bin) = inside.strip_prefix("bin/") {
            let name = bin.split('/').next()?.trim_end_matches(".rs");
            return Some(name.replace('-', "_"));
        }
        (package_crate_name(&file[..k])?, inside)
    };
    let inside = inside.strip_suffix(".rs")?;
    let mut parts: Vec<&str> = inside.split('/').collect();
    if matches!(parts.last(), Some(&"mod") | Some(&"lib") | Some(&"main")) {
        parts.pop();
    }
    let ident = |p: &str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if !parts.iter().all(|p| ident(p)) || !ident(&krate) {
        return None;
    }
    Some(std::iter::once(krate.as_str()).chain(parts).collect::<Vec<_>>().join("::"))
}

/// The library crate of the package at `dir` (its `Cargo.toml`'s `[lib]` name, else its
/// `[package]` name, `-` as `_`), read once per directory.
fn package_crate_name(dir: &str) -> Option<String> {
    thread_local! {
        static SEEN: std::cell::RefCell<rustc_hash::FxHashMap<String, Option<String>>> = Default::default();
    }
    SEEN.with(|m| {
        m.borrow_mut()
            .entry(dir.to_string())
            .or_insert_with(|| {
                let text = std::fs::read_to_string(std::path::Path::new(dir).join("Cargo.toml")).ok()?;
                manifest_crate_name(&text)
            })
            .clone()
    })
}

/// [`package_crate_name`] of a manifest's text: the `name` of its `[lib]` table, else of its
/// `[package]` table.
fn manifest_crate_name(text: &str) -> Option<String> {
    let (mut section, mut lib, mut package) = ("", None, None);
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line;
            continue;
        }
        let Some((key, value)) = line.split_once('=') else { continue };
        if key.trim() != "name" {
            continue;
        }
        let value = value.trim().trim_matches('"').replace('-', "_");
        match section {
            "[lib]" => lib = Some(value),
            "[package]" => package = Some(value),
            _ => {}
        }
    }
    lib.or(package)
}

/// A short display form of a Rust library or dependency path: `rust-library/std/src/path.rs`,
/// `cargo-registry/clap_builder-4.5.20/src/derive.rs` (the full paths repeat a long prefix on
/// every tree line).
pub fn native_display_path(s: &str) -> Option<String> {
    if let Some(i) = rust_library_end(s) {
        return Some(format!("rust-library/{}", &s[i..]));
    }
    let i = cargo_package_end(s)?;
    let kind = if vendored_package_end(s) == Some(i) {
        "cargo-vendor"
    } else if s.contains("/git/checkouts/") {
        "cargo-git"
    } else {
        "cargo-registry"
    };
    Some(format!("{kind}/{}", &s[i..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The module a Rust file defines, which names an inlined function that line-tables-only
    /// DWARF gives a bare name.
    #[test]
    fn a_rust_files_module_path() {
        let rustc = "/rustc/59807616e1fa2540724bfbac14d7976d7e4a3860/library/";
        assert_eq!(rust_module_path(&format!("{rustc}alloc/src/raw_vec/mod.rs")).as_deref(), Some("alloc::raw_vec"));
        assert_eq!(rust_module_path(&format!("{rustc}core/src/slice/index.rs")).as_deref(), Some("core::slice::index"));
        assert_eq!(rust_module_path(&format!("{rustc}std/src/lib.rs")).as_deref(), Some("std"));
        assert_eq!(rust_module_path("/rust/deps/hashbrown-0.15.2/src/raw/mod.rs").as_deref(), Some("hashbrown::raw"));
    }

    #[test]
    fn the_standard_librarys_own_dependencies_are_told_by_name() {
        assert!(is_std_own_dependency("miniz_oxide::inflate::core::decompress"));
        assert!(is_std_own_dependency("<gimli::read::abbrev::Attributes>::push"));
        assert!(is_std_own_dependency("<gimli::read::abbrev::Attributes as core::ops::deref::Deref>::deref"));
        assert!(!is_std_own_dependency("<calc::Stats as core::fmt::Debug>::fmt"));
        assert!(!is_std_own_dependency("<regex::Regex as gimli::Reader>::read"));
        assert!(!is_std_own_dependency("core::fmt::write") && !is_std_own_dependency("main"));
        let reg = "/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/";
        assert_eq!(
            rust_module_path(&format!("{reg}clap_builder-4.5.20/src/builder/command.rs")).as_deref(),
            Some("clap_builder::builder::command")
        );
        assert_eq!(rust_module_path(&format!("{reg}anstyle-parse-1.0.0/src/lib.rs")).as_deref(), Some("anstyle_parse"));
        assert_eq!(rust_module_path(&format!("{reg}clap_builder-4.5.20/build.rs")), None, "outside src/");
        assert_eq!(rust_module_path("/home/u/app/src/bin/my-tool.rs").as_deref(), Some("my_tool"));
        assert_eq!(rust_module_path("/nowhere/at/all/src/x.rs"), None, "no Cargo.toml to name the crate");
        // A workspace member: named by its manifest's library.
        let d = tempfile::tempdir().expect("tempdir");
        let pkg = d.path().join("analyzer");
        std::fs::create_dir_all(pkg.join("src/cli")).expect("mkdir");
        std::fs::write(pkg.join("Cargo.toml"), "[package]\nname = \"slice-trace-analyzer\"\n\n[lib]\nname = \"analyzer\"\n")
            .expect("write");
        let file = pkg.join("src/cli/mod.rs");
        assert_eq!(rust_module_path(&file.to_string_lossy()).as_deref(), Some("analyzer::cli"));
        assert_eq!(manifest_crate_name("[package]\nname = \"my-app\"\nversion = \"1\"\n").as_deref(), Some("my_app"));
    }
}
