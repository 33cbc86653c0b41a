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
    // The names dladdr gave during the run, and the static function's from the symbol table
    // when the run ended (sources.json); no source from the new build.
    assert_eq!(p.func("main").name, "main");
    assert_eq!(p.func("twice").name, "twice");
    assert!(p.funcs.iter().all(|f| f.file.is_none() && f.name != "padding"), "{:?}", p.funcs);
}

/// An ordinary build recorded by entry patching (no names recorded during the run), rebuilt
/// after it: the old trace's tree names its functions by the symbols `trace run` read when the
/// run ended, its note says the program was rebuilt (not that it lacks debug information), and
/// its diff against a run of the new build lines the same functions up.
#[test]
fn a_program_rebuilt_after_its_run_keeps_its_functions_names_and_lines_up_with_the_new_run() {
    let s = scratch();
    let d = s.path();
    let src = "#include <stdio.h>\n#include <stdlib.h>\n\
               __attribute__((noinline)) int square(int x) { return x * x; }\n\
               __attribute__((noinline)) int total(int n) { int s = 0; for (int i = 0; i < n; i++) s += square(i); return s; }\n\
               int main(int argc, char **argv) { printf(\"%d\\n\", total(argc > 1 ? atoi(argv[1]) : 3)); return 0; }\n";
    std::fs::write(d.join("p.c"), src).unwrap();
    let prog = d.join("p");
    compile("gcc", &["-g", "-O1"], &prog, &d.join("p.c"), &[]);
    let (a, b) = (d.join("a.d"), d.join("b.d"));
    assert!(trace(&a, &prog, &["4"]).status.success());
    std::fs::write(d.join("p.c"), src.replace("return x * x;", "return x * x + 1;")).unwrap();
    compile("gcc", &["-g", "-O1"], &prog, &d.join("p.c"), &[]);
    let prompt = slice_trace_e2e::run_ok(slice_trace_e2e::cmd("slice").arg("from-trace").arg(&a).args(["-q", "What does it sum?"]));
    assert!(prompt.contains("```text\nmain  (p)\n  total  (p)\n    square  (p) ×4\n```"), "{prompt}");
    assert!(
        prompt.contains("No source for 3 functions of `p` (") && prompt.contains("it was rebuilt or replaced after the run ("),
        "{prompt}"
    );
    assert!(!prompt.contains("debug information that maps its code to source lines is missing"), "{prompt}");
    assert!(trace(&b, &prog, &["4"]).status.success());
    let diff = slice_trace_e2e::run_ok(slice_trace_e2e::cmd("slice").arg("diff").arg(&a).arg(&b));
    assert!(diff.contains("# functions only in A (0): none\n# functions only in B (0): none\n"), "{diff}");
}

/// A large object's fingerprint in sources.json comes from the per-user cache while the file is
/// unchanged (the cache's entry is what answers: a wrong hash planted there comes back), and
/// from the file itself once it is rewritten, even with its old size and modification time;
/// and an unchanged object recorded again still gets its true hash.
#[test]
fn a_large_object_s_fingerprint_is_cached_while_it_is_unchanged() {
    let s = scratch();
    let d = s.path();
    let cache = d.join("cache");
    // 200 kB of initialized data: past the size from which hashes are cached.
    let src = SRC.replace("int main(void)\n{\n", "static volatile char big[200000] = {1};\n\nint main(void)\n{\n    big[1] = big[0];\n");
    std::fs::write(d.join("prog.c"), &src).unwrap();
    sh(Command::new("cc").current_dir(d).args(["-finstrument-functions", "-O0", "-g", "-o", "prog", "prog.c"]));
    let prog = d.join("prog");
    let sha = |p: &Path| slice_trace_e2e::run_ok(Command::new("sha256sum").arg(p)).split_whitespace().next().unwrap().to_string();
    let recorded = |t: &Path| -> String {
        let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(t.join("sources.json")).unwrap()).unwrap();
        let files = doc["files"].as_array().unwrap();
        let f = files.iter().find(|f| f["path"].as_str() == Some(prog.to_str().unwrap())).expect("the program's fingerprint");
        f["sha256"].as_str().unwrap().to_string()
    };
    let run = |t: &Path| {
        let mut c = slice_trace_e2e::cmd("trace");
        c.env("XDG_CACHE_HOME", &cache).arg("run").arg("-q").arg("-o").arg(t).arg("--").arg(&prog);
        let out = slice_trace_e2e::run(&mut c);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    };
    // A file changed less than 2 s ago is hashed but not cached (it could change again
    // within its timestamps' granularity).
    std::thread::sleep(std::time::Duration::from_millis(2100));
    run(&d.join("t1.d"));
    assert_eq!(recorded(&d.join("t1.d")), sha(&prog));
    let entries: Vec<_> = std::fs::read_dir(cache.join("slice-trace/fingerprints")).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(std::fs::read_to_string(&entries[0]).unwrap(), sha(&prog));
    run(&d.join("t2.d"));
    assert_eq!(recorded(&d.join("t2.d")), sha(&prog));
    // The entry answers while the file is unchanged.
    let planted = "0".repeat(64);
    std::fs::write(&entries[0], &planted).unwrap();
    run(&d.join("t3.d"));
    assert_eq!(recorded(&d.join("t3.d")), planted);
    // Rewritten with the same size and its modification time put back: hashed again.
    let old = std::fs::metadata(&prog).unwrap().modified().unwrap();
    let mut bytes = std::fs::read(&prog).unwrap();
    let at = bytes.len() - 1;
    bytes[at] ^= 0x55;
    std::fs::write(&prog, &bytes).unwrap();
    std::fs::File::options().write(true).open(&prog).unwrap().set_modified(old).unwrap();
    run(&d.join("t4.d"));
    assert_eq!(recorded(&d.join("t4.d")), sha(&prog));
    assert_ne!(recorded(&d.join("t4.d")), planted);
}
