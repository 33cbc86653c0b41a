//! The symbolizer on small programs built by the test: C at `-O2` (a static function inlined
//! into its caller, a stripped copy) and Rust (generic instances and a closure, v0 names).

use super::demangle::Lang;
use super::functions::{DebugInfo, FoundIn, ObjectFile};
use super::native::{resolve, NativeAddr};
use object::{Object, ObjectSymbol};
use std::path::{Path, PathBuf};
use std::process::Command;

fn sh(c: &mut Command) {
    let out = c.output().unwrap_or_else(|e| panic!("cannot run {c:?}: {e}"));
    assert!(out.status.success(), "{c:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// (address, size) of the function symbol whose demangled name is `name`.
fn symbol(exe: &Path, name: &str) -> (u64, u64) {
    let data = std::fs::read(exe).unwrap();
    let obj = object::File::parse(&*data).unwrap();
    let found = obj
        .symbols()
        .find(|s| s.name().is_ok_and(|n| super::demangle::demangle(n, Lang::Unknown) == name))
        .unwrap_or_else(|| panic!("no symbol {name} in {}", exe.display()));
    (found.address(), found.size())
}

const C_SRC: &str = "#include <stdio.h>
static int helper(int x)
{
    return x * 3 + putchar('.');
}

__attribute__((noinline)) int compute(int n)
{
    int s = 0;
    for (int i = 0; i < n; i++)
        s += helper(i);
    return s;
}

int main(int argc, char **argv)
{
    (void)argv;
    printf(\"%d\\n\", compute(argc + 5));
    return 0;
}
";

fn build_c(dir: &Path) -> PathBuf {
    std::fs::write(dir.join("prog.c"), C_SRC).unwrap();
    sh(Command::new("cc").current_dir(dir).args(["-g", "-O2", "-o", "prog", "prog.c"]));
    dir.join("prog")
}

#[test]
fn c_functions_lines_and_inlined_code_from_one_lookup() {
    let d = tempfile::tempdir().unwrap();
    let exe = build_c(d.path());
    let src = d.path().join("prog.c");
    let obj = ObjectFile::open(&exe).unwrap();
    let (compute, size) = symbol(&exe, "compute");
    let (main, _) = symbol(&exe, "main");
    // Every byte of compute is compute; at one of them, helper is inlined (called from line 11).
    let addrs: Vec<u64> = (compute..compute + size).chain([main, 1]).collect();
    let found = obj.functions_at(&exe, &addrs);
    assert_eq!(found.debug, DebugInfo::Itself);
    let n = size as usize;
    for f in &found.funcs[..n] {
        let f = f.as_ref().expect("inside compute");
        assert_eq!((f.qualname.as_str(), f.entry, f.found_in, f.lang), ("compute", compute, FoundIn::Dwarf, Lang::C));
        assert_eq!(f.file.as_deref(), Some(src.as_path()));
        // decl line to the last line of its own code (helper's lines 2-5 are not counted).
        assert_eq!((f.first_line, f.last_line), (Some(7), Some(13)));
    }
    let inlined: Vec<_> = found.funcs[..n].iter().flatten().filter(|f| !f.inlined_at.is_empty()).collect();
    assert!(!inlined.is_empty(), "helper is inlined into compute at -O2");
    for f in inlined {
        // Outermost first: helper (called at line 11), then what is inlined into helper
        // (glibc's inline `putchar`, called at line 4).
        assert_eq!(f.inlined_at[0].qualname, "helper");
        assert_eq!((f.inlined_at[0].call_file.as_deref(), f.inlined_at[0].call_line), (Some(src.as_path()), Some(11)));
        assert!(f.inlined_at[1..].iter().all(|i| i.call_line == Some(4)), "{:?}", f.inlined_at);
    }
    assert!(found.funcs[0].as_ref().is_some_and(|f| f.inlined_at.is_empty()), "nothing is inlined at an entry");
    let m = found.funcs[n].as_ref().unwrap();
    assert_eq!((m.qualname.as_str(), m.first_line, m.last_line), ("main", Some(15), Some(20)));
    assert!(found.funcs[n + 1].is_none(), "no function at address 1");

    // Without DWARF, the symbol table answers, by name only.
    sh(Command::new("strip").current_dir(d.path()).args(["--strip-debug", "-o", "bare", "prog"]));
    let bare = d.path().join("bare");
    let found = ObjectFile::open(&bare).unwrap().functions_at(&bare, &[compute + 2]);
    assert!(matches!(found.debug, DebugInfo::Missing(_)), "{:?}", found.debug);
    let f = found.funcs[0].as_ref().unwrap();
    assert_eq!(
        (f.qualname.as_str(), f.entry, f.found_in, f.file.as_ref(), f.first_line),
        ("compute", compute, FoundIn::SymbolTable, None, None)
    );
}

const RUST_SRC: &str = "#[inline(never)]
fn parse<T: std::str::FromStr + Default>(s: &str) -> T {
    s.parse().unwrap_or_default()
}

fn main() {
    let a: u8 = parse(\"7\");
    let b: u64 = parse(\"9\");
    let add = |x: u64| {
        x + a as u64
    };
    println!(\"{}\", add(b));
}
";

#[test]
fn rust_generic_instances_become_one_function_and_closures_keep_their_lines() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("prog.rs"), RUST_SRC).unwrap();
    // v0 names carry the generic arguments (`prog::parse::<u8>`), the harder case.
    sh(Command::new("rustc").current_dir(d.path()).args(["-g", "-C", "symbol-mangling-version=v0", "-o", "prog", "prog.rs"]));
    let exe = d.path().join("prog");
    let src = d.path().join("prog.rs");
    let names = ["prog::parse::<u8>", "prog::parse::<u64>", "prog::main", "prog::main::{closure#0}"];
    let addrs: Vec<u64> = names.iter().map(|n| symbol(&exe, n).0).collect();

    // The one lookup: each instance as DWARF describes it.
    let found = ObjectFile::open(&exe).unwrap().functions_at(&exe, &addrs);
    let f = found.funcs[0].as_ref().unwrap();
    assert_eq!((f.qualname.as_str(), f.lang, f.first_line, f.last_line), ("prog::parse::<u8>", Lang::Rust, Some(2), Some(4)));
    assert_eq!(f.file.as_deref(), Some(src.as_path()));

    // Symbolized for the analyzer (the executable is position-independent: link = run-time
    // address with base 0).
    let native: Vec<NativeAddr> = addrs
        .iter()
        .enumerate()
        .map(|(i, &addr)| NativeAddr { id: i as u32, addr, module: exe.display().to_string(), base: 0, symbol: None, inlined: false })
        .collect();
    let (funcs, warnings) = resolve(&native, None);
    assert!(warnings.is_empty(), "{warnings:?}");
    // Both instances are the one source function `prog::parse`, with its attribute line.
    assert_eq!(funcs[0], funcs[1]);
    assert_eq!((funcs[0].qualname.as_str(), funcs[0].name.as_str()), ("prog::parse", "parse"));
    assert_eq!((funcs[0].first_line, funcs[0].last_line), (Some(1), Some(4)));
    assert_eq!((funcs[2].qualname.as_str(), funcs[2].first_line, funcs[2].last_line), ("prog::main", Some(6), Some(13)));
    // The closure: its own lines, inside main's.
    assert_eq!((funcs[3].qualname.as_str(), funcs[3].first_line, funcs[3].last_line), ("prog::main::{closure#0}", Some(9), Some(11)));
}

const COLD_SRC: &str = "#include <stdexcept>
__attribute__((noinline)) int checked(int x)
{
    if (x < 0)
        throw std::runtime_error(\"negative\");
    return x * 2;
}

int main(int argc, char **argv)
{
    (void)argv;
    return checked(argc) == 2 ? 0 : 1;
}
";

#[test]
fn a_function_split_into_hot_and_cold_parts_is_named_by_its_entry() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("cold.cpp"), COLD_SRC).unwrap();
    sh(Command::new("c++").current_dir(d.path()).args(["-g", "-O2", "-o", "cold", "cold.cpp"]));
    let exe = d.path().join("cold");
    let (entry, _) = symbol(&exe, "checked(int)");
    let cold = symbol(&exe, "checked(int) [clone .cold]").0;
    assert!(cold < entry, "g++ puts the cold part first ({cold:#x}, {entry:#x})");
    let found = ObjectFile::open(&exe).unwrap().functions_at(&exe, &[entry, cold]);
    for f in &found.funcs {
        // Both parts are one function, named by its entry (not `checked(int) [clone .cold]`).
        let f = f.as_ref().unwrap();
        assert_eq!((f.qualname.as_str(), f.entry, f.first_line, f.last_line), ("checked(int)", entry, Some(2), Some(7)));
    }
}
