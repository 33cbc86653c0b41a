//! Resolution on a small Rust program built by the test (generic instances and a closure, v0
//! names). The symbolizer's own tests, on C and C++, are in the `symbolize` crate.

use super::{resolve, NativeAddr};
use object::{Object, ObjectSymbol};
use std::collections::HashMap;
use std::path::Path;
use std::process::Command;
use symbolize::demangle::{demangle, Lang};
use symbolize::functions::ObjectFile;

/// The addresses of a program's symbols, by demangled name.
fn addresses(exe: &Path) -> HashMap<String, u64> {
    let data = std::fs::read(exe).unwrap();
    let obj = object::File::parse(&*data).unwrap();
    obj.symbols().filter_map(|s| Some((demangle(s.name().ok()?, Lang::Unknown), s.address()))).collect()
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
    let out =
        Command::new("rustc").current_dir(d.path()).args(["-g", "-C", "symbol-mangling-version=v0", "-o", "prog", "prog.rs"]).output();
    assert!(out.as_ref().is_ok_and(|o| o.status.success()), "rustc: {out:?}");
    let exe = d.path().join("prog");
    let src = d.path().join("prog.rs");
    let names = ["prog::parse::<u8>", "prog::parse::<u64>", "prog::main", "prog::main::{closure#0}"];
    let symbols = addresses(&exe);
    let addrs: Vec<u64> = names.iter().map(|n| symbols.get(*n).copied().unwrap_or_else(|| panic!("no symbol {n}"))).collect();

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

#[test]
fn extension_modules_without_debug_information_are_one_warning() {
    assert_eq!(super::extensions_without_debug(&[]), None);
    let modules = [
        ("/v/site-packages/black/linegen.cpython-311-x86_64-linux-gnu.so", 1),
        ("/v/site-packages/30fc__mypyc.cpython-311-x86_64-linux-gnu.so", 880),
        ("/v/site-packages/black/mode.cpython-311-x86_64-linux-gnu.so", 2),
        ("/v/site-packages/blib2to3/pytree.cpython-311-x86_64-linux-gnu.so", 1),
        ("/v/site-packages/blib2to3/parse.cpython-311-x86_64-linux-gnu.so", 1),
    ];
    let w = super::extensions_without_debug(&modules).unwrap_or_default();
    assert!(
        w.starts_with(
            "5 Python extension module(s) have no debug information (linegen.cpython-311-x86_64-linux-gnu.so, \
             30fc__mypyc.cpython-311-x86_64-linux-gnu.so, mode.cpython-311-x86_64-linux-gnu.so and 2 more): their 885 \
             function(s) are shown by symbol name"
        ),
        "{w}"
    );
    assert!(!w.contains('\n') && w.contains("`-g`"), "{w}");
}

#[test]
fn a_python_extension_module_without_debug_information_is_said_once_for_all() {
    // Two extension modules and a plain library, none with debug information: two warnings,
    // the library's own and one for both extension modules.
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let src = dir.path().join("m.c");
    std::fs::write(&src, "int f(int x) { return x + 1; }\n").unwrap_or_else(|e| panic!("{e}"));
    let mut paths = Vec::new();
    for name in ["a.cpython-312-x86_64-linux-gnu.so", "b.abi3.so", "libplain.so"] {
        let out = dir.path().join(name);
        let ok = std::process::Command::new("gcc")
            .args(["-shared", "-fPIC", "-O1", "-o"])
            .arg(&out)
            .arg(&src)
            .status()
            .unwrap_or_else(|e| panic!("gcc: {e}"))
            .success();
        assert!(ok, "gcc failed");
        paths.push(out.to_string_lossy().into_owned());
    }
    let addrs: Vec<NativeAddr> =
        paths.iter().map(|p| NativeAddr { id: 0, addr: 0x1000, module: p.clone(), base: 0, symbol: None, inlined: false }).collect();
    let (_, warnings) = resolve(&addrs, None);
    assert_eq!(warnings.len(), 2, "{warnings:#?}");
    assert!(warnings.iter().any(|w| w.starts_with("2 Python extension module(s) have no debug information")), "{warnings:#?}");
    assert!(warnings.iter().any(|w| w.contains("libplain.so: no debug information")), "{warnings:#?}");
}
