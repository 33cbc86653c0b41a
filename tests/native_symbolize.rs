//! End-to-end: symbolization of recorded native traces when the debug information is not in
//! the binary (a separate debug file through `.gnu_debuglink`), is missing (built without
//! `-g`), or the object itself is gone.

mod native_support;

use native_support::*;
use slice_trace_e2e::scratch;
use std::path::Path;
use std::process::Command;

const SRC: &str = "#include <stdio.h>\n\
\n\
static int\n\
twice(int x)\n\
{\n\
    return 2 * x;\n\
}\n\
\n\
int main(void)\n\
{\n\
    printf(\"%d\\n\", twice(21));\n\
    return 0;\n\
}\n";

fn sh(c: &mut Command) {
    let out = c.output().unwrap_or_else(|e| panic!("cannot run {c:?}: {e}"));
    assert!(out.status.success(), "{c:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// Build `prog` from SRC in `dir` with `flags`, and record it.
fn build_and_trace(dir: &Path, flags: &[&str]) -> std::path::PathBuf {
    std::fs::write(dir.join("prog.c"), SRC).unwrap();
    sh(Command::new("cc").current_dir(dir).args(["-finstrument-functions", "-O0", "-o", "prog", "prog.c"]).args(flags));
    let t = dir.join("t.d");
    let out = trace(&t, &dir.join("prog"), &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "42\n");
    t
}

#[test]
fn separate_debug_file_through_gnu_debuglink() {
    let s = scratch();
    let d = s.path();
    std::fs::write(d.join("prog.c"), SRC).unwrap();
    sh(Command::new("cc").current_dir(d).args(["-finstrument-functions", "-g", "-O0", "-o", "prog", "prog.c"]));
    // Move the DWARF into prog.debug, next to the stripped program.
    sh(Command::new("objcopy").current_dir(d).args(["--only-keep-debug", "prog", "prog.debug"]));
    sh(Command::new("objcopy").current_dir(d).args(["--strip-debug", "--add-gnu-debuglink=prog.debug", "prog"]));
    let t = d.join("t.d");
    let out = trace(&t, &d.join("prog"), &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let p = &load(&t)[0];
    assert!(p.warnings.is_empty(), "{:?}", p.warnings);
    let f = p.func("twice");
    assert_eq!(f.file.as_deref(), Some(d.join("prog.c").as_path()));
    // `static int` on the line before the name is part of the function.
    assert_eq!((f.first_line, f.last_line), (Some(3), Some(7)));
    assert_eq!((p.func("main").first_line, p.func("main").last_line), (Some(9), Some(13)));
    assert_eq!(p.sequence(0), ["1:main", "2:twice"]);
}

#[test]
fn missing_debug_info_degrades_to_symbol_names_with_a_warning() {
    let s = scratch();
    let t = build_and_trace(s.path(), &[]);
    let p = &load(&t)[0];
    assert_eq!(p.sequence(0), ["1:main", "2:twice"], "names from the symbol table");
    assert!(p.funcs.iter().all(|f| f.file.is_none() && f.first_line.is_none()));
    assert_eq!(p.warnings.len(), 1, "{:?}", p.warnings);
    let w = &p.warnings[0];
    assert!(w.contains("no debug information") && w.contains("-g") && w.contains("prog"), "{w}");
}

#[test]
fn deleted_object_degrades_to_recorded_symbols_with_a_warning() {
    let s = scratch();
    // -rdynamic exports main to the dynamic symbol table, which dladdr reads during the run.
    let t = build_and_trace(s.path(), &["-g", "-rdynamic"]);
    std::fs::remove_file(s.path().join("prog")).unwrap();
    let p = &load(&t)[0];
    assert_eq!(p.warnings.len(), 1, "{:?}", p.warnings);
    assert!(p.warnings[0].contains("cannot read this object") && p.warnings[0].contains("moved or deleted"), "{}", p.warnings[0]);
    // main is exported (dladdr named it during the run); static twice is named by address.
    assert_eq!(p.func("main").name, "main");
    let seq = p.sequence(0);
    assert_eq!(seq[0], "1:main");
    assert!(seq[1].starts_with("2:0x"), "{seq:?}");
}

/// A program rebuilt after the run would name other functions at the recorded addresses: its
/// fingerprint (sources.json) no longer matches, so the recorded symbol names are kept, with a
/// warning; an object only touched (same content, new modification time) is still trusted.
#[test]
fn rebuilt_object_keeps_the_recorded_names_with_a_warning() {
    let s = scratch();
    let d = s.path();
    let t = build_and_trace(d, &["-g", "-rdynamic"]);
    // Touched: the content hash still matches.
    let prog = d.join("prog");
    let f = std::fs::File::options().append(true).open(&prog).unwrap();
    f.set_modified(std::time::SystemTime::now() + std::time::Duration::from_secs(5)).unwrap();
    drop(f);
    let p = &load(&t)[0];
    assert!(p.warnings.is_empty(), "{:?}", p.warnings);
    assert_eq!(p.func("twice").first_line, Some(3));

    // Rebuilt with a function in front of twice: twice's recorded address now falls in it.
    let moved = SRC.replace("static int\ntwice", "int\npadding(int x)\n{\n    return x * x * x + 7 * x - 1;\n}\n\nstatic int\ntwice");
    std::fs::write(d.join("prog.c"), moved).unwrap();
    sh(Command::new("cc").current_dir(d).args(["-finstrument-functions", "-O0", "-g", "-rdynamic", "-o", "prog", "prog.c"]));
    let p = &load(&t)[0];
    assert_eq!(p.warnings.len(), 1, "{:?}", p.warnings);
    let w = &p.warnings[0];
    assert!(w.contains("was rebuilt or replaced after the run") && w.contains("record the trace again"), "{w}");
    // The names dladdr gave during the run; no source from the new build.
    assert_eq!(p.func("main").name, "main");
    assert!(p.funcs.iter().all(|f| f.file.is_none() && f.name != "padding"), "{:?}", p.funcs);
}
