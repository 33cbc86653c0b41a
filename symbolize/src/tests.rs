//! The symbolizer on small programs built by the test: C at `-O2` (a static function inlined
//! into its caller, a stripped copy) and C++ (a function split into hot and cold parts).

use crate::demangle::Lang;
use crate::functions::{DebugInfo, FoundIn, ObjectFile};
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
        .find(|s| s.name().is_ok_and(|n| crate::demangle::demangle(n, Lang::Unknown) == name))
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

/// A unit whose paths were mapped to a relative directory (`-fdebug-prefix-map=DIR=./sub`, as
/// Debian builds its libc: `./csu`): the compilation directory and the line table's directory 0
/// are both `./sub`, one directory, not `sub/sub`.
#[test]
fn a_relative_compilation_directory_is_not_doubled() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("prog.c"), C_SRC).unwrap();
    let map = format!("-fdebug-prefix-map={}=./sub", d.path().display());
    sh(Command::new("cc").current_dir(d.path()).args(["-g", "-gdwarf-5", "-O2", &map, "-o", "prog", "prog.c"]));
    let exe = d.path().join("prog");
    let (compute, _) = symbol(&exe, "compute");
    let found = ObjectFile::open(&exe).unwrap().functions_at(&exe, &[compute]);
    let f = found.funcs[0].as_ref().unwrap();
    assert_eq!(f.file.as_deref(), Some(Path::new("sub/prog.c")));
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

const COLD_CALL_SRC: &str = "#include <cstdio>
#include <stdexcept>
__attribute__((noinline)) void log_line(const char *what, long v) { std::printf(\"%s %ld\\n\", what, v); }
__attribute__((noinline)) int parse(const char *s)
{
    if (*s == '!')
        throw std::runtime_error(s);
    return *s;
}
static void summary(int total, int n)
{
    log_line(\"total\", total);
    log_line(\"items\", n);
}
int main(int argc, char **argv)
{
    int total = 0;
    for (int i = 1; i < argc; i++) {
        try {
            total += parse(argv[i]);
        } catch (const std::exception &e) {
            log_line(e.what(), i);
        }
    }
    summary(total, argc - 1);
    return 0;
}
";

#[test]
fn the_calls_of_a_function_include_those_of_its_cold_part() {
    // main's handler calls log_line from main.cold, outside main's symbol: without that site,
    // every site of log_line in main would be in `summary`'s inlined code, and the handler's
    // call would be placed under `summary`.
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("cold.cpp"), COLD_CALL_SRC).unwrap();
    sh(Command::new("c++").current_dir(d.path()).args(["-g", "-O2", "-o", "cold", "cold.cpp"]));
    let exe = d.path().join("cold");
    let (main, _) = symbol(&exe, "main");
    let (log_line, _) = symbol(&exe, "log_line(char const*, long)");
    let (cold, cold_size) = symbol(&exe, "main.cold");
    let calls = ObjectFile::open(&exe).unwrap().direct_calls(&[main]);
    let sites: Vec<u64> = calls[0].iter().filter(|c| c.target == log_line && !c.taken).map(|c| c.site).collect();
    assert!(sites.iter().any(|s| (cold..cold + cold_size).contains(s)), "no call in main.cold ({cold:#x}): {sites:x?}");
    assert!(sites.iter().any(|&s| s >= main), "the calls in main's own extent: {sites:x?}");
}

const LTO_HELPER: &str = "int helper(int x)
{
    int s = 0;
    for (int i = 0; i < x; i++)
        s += i ^ x;
    return s;
}
";

const LTO_MAIN: &str = "#include <stdio.h>
#include <stdlib.h>
int helper(int x);
int main(int argc, char **argv)
{
    printf(\"%d\\n\", helper(atoi(argv[argc - 1])));
    return 0;
}
";

/// gcc's link-time optimization describes the code it generates in a unit of its own, whose
/// DIEs refer to their origins in each source file's unit (`DW_FORM_ref_addr`): names, files
/// and lines are found only by following those references into the other units, for the
/// analyzer's lookup and for the recorder's inline probes alike.
#[test]
fn an_lto_build_is_described_through_references_into_other_units() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("a.c"), LTO_HELPER).unwrap();
    std::fs::write(d.path().join("b.c"), LTO_MAIN).unwrap();
    sh(Command::new("cc").current_dir(d.path()).args(["-g", "-O2", "-flto", "-o", "prog", "a.c", "b.c"]));
    let exe = d.path().join("prog");
    let (a_c, b_c) = (d.path().join("a.c"), d.path().join("b.c"));
    let (main, size) = symbol(&exe, "main");
    let addrs: Vec<u64> = (main..main + size).collect();
    let found = ObjectFile::open(&exe).unwrap().functions_at(&exe, &addrs);
    for f in &found.funcs {
        let f = f.as_ref().expect("inside main");
        assert_eq!((f.qualname.as_str(), f.file.as_deref(), f.first_line), ("main", Some(b_c.as_path()), Some(4)));
    }
    // helper (and glibc's inline atoi) are inlined into main.
    let outer: Vec<_> = found.funcs.iter().flatten().filter_map(|f| f.inlined_at.first()).collect();
    let helper: Vec<_> = outer.iter().filter(|i| i.qualname == "helper").collect();
    assert!(!helper.is_empty(), "helper is inlined into main: {outer:?}");
    for h in helper {
        assert_eq!((h.qualname.as_str(), h.file.as_deref(), h.first_line), ("helper", Some(a_c.as_path()), Some(1)));
        assert_eq!((h.call_file.as_deref(), h.call_line), (Some(b_c.as_path()), Some(6)));
    }

    // The inline probes' walk sees helper's declaration file, in the other unit.
    let data = std::fs::read(&exe).unwrap();
    let obj = object::File::parse(&*data).unwrap();
    let mut seen = Vec::new();
    let all = crate::inlined::instance_starts(
        &obj,
        |f| {
            seen.push(f.to_path_buf());
            true
        },
        1000,
    )
    .unwrap();
    assert!(seen.contains(&a_c), "{seen:?}");
    let without_helper = crate::inlined::instance_starts(&obj, |f| f != a_c, 1000).unwrap();
    assert!(without_helper.len() < all.len(), "{without_helper:?} {all:?}");
}

/// gcc 12 at `-O1` gives `digits`, inlined first thing into `process`, a `DW_AT_entry_pc` at
/// `process`'s own first instruction, before the range that holds `digits`' code. Every start
/// listed for a probe must be where the symbolizer finds inlined code; a probe at that entry
/// named `process` as inlined into itself (`process [inlined]` under `process`).
#[test]
fn every_inline_probe_start_is_inside_inlined_code() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(
        d.path().join("p.c"),
        "#include <stdio.h>\nstatic int digits(unsigned v) {\n  int n = 0;\n  do { n++; v /= 10; } while (v);\n  return n;\n}\n\
         static int never(unsigned x) {\n  int s = 0;\n  while (x) { s += x % 7; x /= 7; }\n  return s;\n}\n\
         __attribute__((noinline)) int process(unsigned v, int flag) {\n  int r = digits(v);\n  if (flag) r += never(v);\n  return r;\n}\n\
         int main(int argc, char **argv) {\n  (void)argv;\n  int s = 0;\n  for (unsigned i = 0; i < 5; i++) s += process(i * 12345u, argc > 5);\n  printf(\"%d\\n\", s);\n  return 0;\n}\n",
    )
    .unwrap();
    sh(Command::new("cc").current_dir(d.path()).args(["-g", "-O1", "-o", "p", "p.c"]));
    let exe = d.path().join("p");
    let data = std::fs::read(&exe).unwrap();
    let obj = object::File::parse(&*data).unwrap();
    let starts = crate::inlined::instance_starts(&obj, |_| true, 1000).unwrap();
    assert!(!starts.is_empty(), "digits is inlined into process");
    let addrs: Vec<u64> = starts.iter().map(|s| s.addr).collect();
    let found = ObjectFile::open(&exe).unwrap().functions_at(&exe, &addrs);
    for (s, f) in starts.iter().zip(&found.funcs) {
        let f = f.as_ref().expect("a start is inside a function");
        assert!(!f.inlined_at.is_empty(), "{:#x} ({s:?}) is in {} with no inlined code there", s.addr, f.qualname);
    }
}

/// A Rust library built with line tables only (`-C debuginfo=line-tables-only`, cargo's
/// `debug = "line-tables-only"`): its DIEs name a function by a bare `DW_AT_name`
/// (`size<u32>`, no namespace, no linkage name, no declaration file or line), so two methods
/// of one name in two modules look alike. Their file and lines come from the line table over
/// each one's own code: an inlined one's from its instance, an out-of-line one's from its
/// ranges (its name from the symbol table). (A generic function is built where it is
/// instantiated: `run` instantiates `pick` inside the library.)
const RUST_LIB: &str = "pub mod a;
pub mod b;

#[inline(never)]
pub fn pick<F: Fn(u64) -> bool>(f: F, x: u64) -> u64 {
    if f(x) {
        a::W(x as u32).size()
    } else {
        b::V(x as u16).size()
    }
}

#[inline(never)]
pub fn run(x: u64) -> u64 {
    pick(|v| v > 1, x) + pick(|v| v > 2, x)
}
";
const RUST_A: &str = "pub struct W<T>(pub T);

impl<T: Copy + Into<u64>> W<T> {
    #[inline(always)]
    pub fn size(&self) -> u64 {
        let v: u64 = self.0.into();
        v + 1
    }
}
";
const RUST_B: &str = "pub struct V<T>(pub T);

impl<T: Copy + Into<u64>> V<T> {
    #[inline(always)]
    pub fn size(&self) -> u64 {
        let v: u64 = self.0.into();
        v * 2
    }
}
";

#[test]
fn line_tables_only_functions_take_their_file_and_lines_from_the_line_table() {
    let d = tempfile::tempdir().unwrap();
    let src = d.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    for (name, text) in [("lib.rs", RUST_LIB), ("a.rs", RUST_A), ("b.rs", RUST_B)] {
        std::fs::write(src.join(name), text).unwrap();
    }
    std::fs::write(d.path().join("main.rs"), "fn main() {\n    println!(\"{}\", dep::run(3));\n}\n").unwrap();
    sh(Command::new("rustc").current_dir(d.path()).args([
        "--edition=2021",
        "--crate-type=rlib",
        "--crate-name=dep",
        "-Cdebuginfo=line-tables-only",
        "-o",
        "libdep.rlib",
        "src/lib.rs",
    ]));
    sh(Command::new("rustc").current_dir(d.path()).args([
        "--edition=2021",
        "-Cdebuginfo=0",
        "--extern",
        "dep=libdep.rlib",
        "-o",
        "prog",
        "main.rs",
    ]));
    let exe = d.path().join("prog");
    let data = std::fs::read(&exe).unwrap();
    let obj = object::File::parse(&*data).unwrap();
    let starts = crate::inlined::instance_starts(&obj, |_| true, 100_000).unwrap();
    let addrs: Vec<u64> = starts.iter().map(|s| s.addr).collect();
    let found = ObjectFile::open(&exe).unwrap().functions_at(&exe, &addrs);
    // The inlined `size` methods, each at its own file and lines (the body's code, from the
    // line after its `fn` line to its closing brace), told apart by them though their names
    // are alike.
    let mut sizes: Vec<(String, PathBuf, Option<u32>, Option<u32>)> = found
        .funcs
        .iter()
        .flatten()
        .filter(|f| f.qualname == "dep::pick")
        .flat_map(|f| f.inlined_at.iter())
        .filter(|i| i.qualname.starts_with("size<"))
        .map(|i| {
            assert!(i.from_line_table, "{i:?}");
            (i.qualname.clone(), i.file.clone().expect("a file from the line table"), i.first_line, i.last_line)
        })
        .collect();
    sizes.sort();
    sizes.dedup();
    assert_eq!(
        sizes,
        vec![("size<u16>".to_string(), src.join("b.rs"), Some(6), Some(8)), ("size<u32>".to_string(), src.join("a.rs"), Some(6), Some(8)),]
    );
    // `pick` itself (out of line, two instances): named by its symbol, its file and first
    // line those of its entry.
    let picks: Vec<_> = found.funcs.iter().flatten().filter(|f| f.qualname == "dep::pick").collect();
    assert!(!picks.is_empty(), "{:?}", found.funcs);
    for p in picks {
        assert_eq!((p.file.as_deref(), p.first_line, p.from_line_table), (Some(src.join("lib.rs").as_path()), Some(5), true), "{p:?}");
        assert!(p.last_line.is_some_and(|l| l >= 10), "{p:?}");
    }
    // `run`, whether or not a subprogram DIE describes it (a unit with nothing inlined has
    // none): its file and lines from the line table, its name from the symbol table.
    let (run, _) = symbol(&exe, "dep::run");
    let found = ObjectFile::open(&exe).unwrap().functions_at(&exe, &[run]);
    let f = found.funcs[0].as_ref().expect("run");
    assert_eq!(
        (f.qualname.as_str(), f.file.as_deref(), f.first_line, f.last_line, f.from_line_table),
        ("dep::run", Some(src.join("lib.rs").as_path()), Some(14), Some(16), true),
        "{f:?}"
    );
}

/// `main` calls `compute` directly (`call rel32`): the call is listed, its site inside main's
/// code; an entry listed twice is read once; a function no symbol sizes lists nothing.
#[test]
fn direct_calls_list_mains_call_of_compute_once() {
    let d = tempfile::tempdir().unwrap();
    let exe = build_c(d.path());
    let obj = ObjectFile::open(&exe).unwrap();
    let (main, size) = symbol(&exe, "main");
    let (compute, _) = symbol(&exe, "compute");
    let calls = obj.direct_calls(&[main, main, main + 1]);
    let to_compute: Vec<_> = calls[0].iter().filter(|c| c.target == compute).collect();
    assert_eq!(to_compute.len(), 1, "{calls:?}");
    assert!((main..main + size).contains(&to_compute[0].site), "{calls:?}");
    assert!(calls[1].is_empty() && calls[2].is_empty(), "{calls:?}");
}

/// A unit whose code holds no wanted address is not walked (`dwarf::misses`): of a program built
/// from two files, the unit of `a.c` holds `helper` and not `main`, and a lookup of both still
/// finds each in its own file.
#[test]
fn a_unit_whose_code_holds_no_wanted_address_is_skipped_and_the_others_are_walked() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("a.c"), "__attribute__((noinline)) int helper(int x)\n{\n    return x * 7;\n}\n").unwrap();
    std::fs::write(
        d.path().join("b.c"),
        "int helper(int);\nint main(int argc, char **argv)\n{\n    (void)argv;\n    return helper(argc);\n}\n",
    )
    .unwrap();
    sh(Command::new("cc").current_dir(d.path()).args(["-g", "-O2", "-o", "prog", "a.c", "b.c"]));
    let exe = d.path().join("prog");
    let (main, _) = symbol(&exe, "main");
    let (helper, _) = symbol(&exe, "helper");
    let data = std::fs::read(&exe).unwrap();
    let obj = object::File::parse(&*data).unwrap();
    let sections = crate::units::Sections::of(&obj);
    let dwarf = sections.dwarf();
    let mut units = dwarf.units();
    let mut seen = Vec::new();
    while let Ok(Some(h)) = units.next() {
        let unit = dwarf.unit(h).unwrap();
        let unit = unit.unit_ref(&dwarf);
        let name = unit.name.map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if name.ends_with("a.c") || name.ends_with("b.c") {
            seen.push((
                name.rsplit('/').next().unwrap_or_default().to_string(),
                crate::dwarf::misses(&unit, &[main]),
                crate::dwarf::misses(&unit, &[helper]),
            ));
        }
    }
    seen.sort();
    assert_eq!(seen, [("a.c".to_string(), true, false), ("b.c".to_string(), false, true)]);
    let found = ObjectFile::open(&exe).unwrap().functions_at(&exe, &[helper.min(main), helper.max(main)]);
    let names: Vec<(&str, String)> = found
        .funcs
        .iter()
        .flatten()
        .map(|f| {
            (f.qualname.as_str(), f.file.as_deref().and_then(Path::file_name).map(|n| n.to_string_lossy().into_owned()).unwrap_or_default())
        })
        .collect();
    let mut names = names;
    names.sort();
    assert_eq!(names, [("helper", "a.c".to_string()), ("main", "b.c".to_string())]);
}

/// The call sites of the inlined code at a set of addresses, from the light walk
/// (`ObjectFile::inlined_call_sites`), are those the full lookup's inlined frames name: every
/// address of a C program's `main` at -O2, with a helper inlined into it (two files, so that
/// one unit is skipped), and of an LTO build, whose frames reach into the other unit.
#[test]
fn inlined_call_sites_are_those_of_the_full_lookups_frames() {
    for lto in [false, true] {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("a.c"), LTO_HELPER).unwrap();
        std::fs::write(d.path().join("b.c"), LTO_MAIN).unwrap();
        let mut c = Command::new("cc");
        c.current_dir(d.path()).args(["-g", "-O2", "-o", "prog", "a.c", "b.c"]);
        if lto {
            c.arg("-flto");
        }
        sh(&mut c);
        let exe = d.path().join("prog");
        let (main, size) = symbol(&exe, "main");
        let addrs: Vec<u64> = (main..main + size).collect();
        let obj = ObjectFile::open(&exe).unwrap();
        let want = |addrs: &[u64]| {
            let mut w: Vec<(PathBuf, u32)> = obj
                .functions_at(&exe, addrs)
                .funcs
                .into_iter()
                .flatten()
                .flat_map(|f| f.inlined_at.into_iter().filter_map(|i| Some((i.call_file?, i.call_line?))))
                .collect();
            w.sort_unstable();
            w.dedup();
            w
        };
        assert!(!want(&addrs).is_empty(), "lto {lto}: inlined code in main");
        assert_eq!(obj.inlined_call_sites(&exe, &addrs), want(&addrs), "lto {lto}");
        // Address by address: inside inlined code and outside it (main's own first bytes).
        assert!(want(&[main]).is_empty(), "lto {lto}");
        for &a in &addrs {
            assert_eq!(obj.inlined_call_sites(&exe, &[a]), want(&[a]), "lto {lto}, {a:#x}");
        }
        assert_eq!(obj.inlined_call_sites(&exe, &[]), Vec::<(PathBuf, u32)>::new());
    }
}
