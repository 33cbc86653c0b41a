//! End-to-end: lines that ran in a program's own shared library (`trace run --lines`,
//! docs/native-recording.md, "Lines that ran"). `examples/c/liblines/fields.c` built `gcc -g
//! -O1 -fPIC -shared` into `libfields.so`, whose `lib_fields` refuses a line starting with '-'
//! in a branch of its own, and `counter.c` linked to it: the library gets a line list of its
//! own, its states are saved per process in a file of its own, and the prompt condenses the
//! branch of `lib_fields` that did not run, as a program's; the other way round for the other
//! input.

mod native_support;

use analyzer::coverage::LineState::{self, NotRun, Ran, Unknown};
use native_support::*;
use slice_trace_e2e::{cmd, run, run_ok, scratch, source_block as block, texts};
use std::path::Path;

/// `trace run -q --lines -o dir -- exe arg`: the program's stdout, stderr and exit code.
fn trace_lines(dir: &Path, exe: &Path, arg: &str) -> (String, String, Option<i32>) {
    let mut c = cmd("trace");
    c.env_remove("SLICE_TRACE_PATCH").env_remove("SLICE_TRACE_INLINE").args(["run", "-q", "--lines", "-o"]).arg(dir);
    let out = run(c.arg("--").arg(exe).arg(arg));
    let (o, e) = texts(&out);
    (o, e, out.status.code())
}

/// The states of lines 9-21 (`lib_fields`) of `src` in the trace at `dir`, as `slice` reads them.
fn states(dir: &Path, src: &Path) -> Option<Vec<LineState>> {
    let loaded = analyzer::fold::load_trace(dir, &mut analyzer::symbols::Interner::default(), Default::default()).expect("a trace");
    loaded.coverage.states(&trace_format::normalize_path(src), 9, 13)
}

#[test]
fn a_shared_librarys_branch_that_did_not_run_is_condensed_as_a_programs() {
    let s = scratch();
    let dir = example("c/liblines");
    let (_, exe) = build_with_library(s.path(), &dir.join("fields.c"), "fields", &dir.join("counter.c"), "counter");
    let src = dir.join("fields.c");
    let text = std::fs::read_to_string(&src).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    // lib_fields: lines 9-21; the refusal: lines 12-15; the count: lines 17-20.
    let cut = |from: usize, to: usize, indent: &str| {
        let mut v: Vec<String> = lines[8..from - 1].iter().map(|l| l.to_string()).collect();
        v.push(format!("{indent}// ...  {} lines not run", to - from + 1));
        v.extend(lines[to..21].iter().map(|l| l.to_string()));
        v.join("\n")
    };
    let prompt = |t: &Path| run_ok(cmd("slice").arg("from-trace").arg(t).args(["-q", "How are the fields counted?", "--not-run", "hide"]));

    // A line with fields: the refusal did not run.
    let t = s.path().join("ok.d");
    assert_eq!(trace_lines(&t, &exe, "a,b,c"), ("fields: 3\n".to_string(), String::new(), Some(0)));
    assert!(t.join("line-probes-libs.json").is_file(), "the library's line list");
    let pdir = std::fs::read_dir(&t).unwrap().map(|e| e.unwrap().path()).find(|p| p.join("proc.json").exists()).expect("a process");
    let libs: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(t.join("line-probes-libs.json")).unwrap()).unwrap();
    let listed = libs[0]["offsets"].as_array().map_or(0, Vec::len);
    assert!(libs[0]["object"].as_str().is_some_and(|o| o.ends_with("/libfields.so")), "{libs}");
    assert_eq!(std::fs::read(pdir.join("lines-lib-0.bin")).map(|b| b.len()).ok(), Some(listed), "one byte per listed row");
    // patch.json counts the library's line probes: every row probed, those inside lib_fields
    // (entry-patched) planted at its first call.
    let patch: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(pdir.join("patch.json")).unwrap()).unwrap();
    let obj = patch["objects"].as_array().unwrap().iter().find(|o| o["path"].as_str().is_some_and(|p| p.ends_with("/libfields.so")));
    let lp = &obj.unwrap_or_else(|| panic!("{patch}"))["line_probes"];
    let n = |k: &str| lp[k].as_u64().unwrap_or_else(|| panic!("{patch}"));
    // Rows an earlier row's probe stands for (the rest of its basic block) get none.
    let covered = lp["covered"].as_u64().unwrap_or(0);
    assert!(n("listed") == listed as u64 && n("unprobed") == 0 && n("planted") + n("at_entry") + covered == n("listed"), "{patch}");
    assert_eq!(n("deferred"), n("planted"), "{patch}");
    // Lines 9-21: the opening line ran (its row is in the moved entry bytes, marked ran with
    // the first call), the `if` ran, the refusal did not, the count and its `return` ran;
    // closing braces hold no row.
    let want = [Ran, Ran, Ran, NotRun, NotRun, NotRun, NotRun, Unknown, Ran, Ran, Ran, Ran, Unknown];
    assert_eq!(states(&t, &src), Some(want.to_vec()));
    let p = prompt(&t);
    assert_eq!(block(&p, "lib_fields"), Some(cut(12, 15, "        ").as_str()), "{p}");
    assert!(p.contains("In native code (C, C++, Rust) a run is marked `// ...  N lines not run`."), "{p}");

    // A refused line: the count did not run, the refusal did. Line 20's one row is the
    // `mov` of the result before the epilogue, which the refusal's `return n` jumps to (gcc
    // merges the two returns): it ran, so only lines 17-19 are condensed.
    let t = s.path().join("refused.d");
    assert_eq!(trace_lines(&t, &exe, "-x"), (String::new(), "refused: -x\n".to_string(), Some(1)));
    let want = [Ran, Ran, Ran, Ran, Ran, Ran, Ran, Unknown, NotRun, NotRun, NotRun, Ran, Unknown];
    assert_eq!(states(&t, &src), Some(want.to_vec()));
    let p = prompt(&t);
    assert_eq!(block(&p, "lib_fields"), Some(cut(17, 19, "    ").as_str()), "{p}");

    // Without --lines: no list, the function whole.
    let t = s.path().join("plain.d");
    let out = run(cmd("trace").env_remove("SLICE_TRACE_PATCH").args(["run", "-q", "-o"]).arg(&t).arg("--").arg(&exe).arg("a,b,c"));
    assert!(out.status.success(), "{:?}", texts(&out));
    assert!(!t.join("line-probes-libs.json").exists());
    assert_eq!(states(&t, &src), None);
    assert_eq!(block(&prompt(&t), "lib_fields"), Some(lines[8..21].join("\n").as_str()));
}
