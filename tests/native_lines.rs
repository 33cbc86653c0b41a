//! End-to-end: lines that ran, for native code (`trace run --lines`, docs/native-recording.md,
//! "Lines that ran"). `examples/c/branches.c` built `gcc -g` at -O0 and -O1: `classify` takes
//! one branch of its `if`; with `--lines` the prompt elides the other branch's lines as Python
//! prompts elide code that did not run, and without `--lines` it shows the function whole. The
//! program's output and exit status are the same with and without the probes. One probe per
//! basic block: a row reached only by falling through from the row before it has no probe of
//! its own, and is marked ran when its block's probe fires.

mod native_support;

use native_support::*;
use slice_trace_e2e::{cmd, run, run_ok, scratch, source_block as block, texts};
use std::path::Path;

/// `trace run [--lines] -- exe args`: the program's stdout and exit code.
fn trace(dir: &Path, exe: &Path, lines: bool, args: &[&str]) -> (String, Option<i32>) {
    let mut c = cmd("trace");
    c.env_remove("SLICE_TRACE_PATCH").env_remove("SLICE_TRACE_INLINE").arg("run").arg("-q").arg("-o").arg(dir);
    if lines {
        c.arg("--lines");
    }
    let out = run(c.arg("--").arg(exe).args(args));
    (texts(&out).0, out.status.code())
}

fn prompt(dir: &Path, not_run: &str) -> String {
    run_ok(cmd("slice").arg("from-trace").arg(dir).args(["-q", "How is x classified?", "--not-run", not_run]))
}

#[test]
fn the_branch_not_taken_is_elided_with_lines_and_shown_without() {
    let s = scratch();
    let src = example("c/branches.c");
    let text = std::fs::read_to_string(&src).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    // classify: lines 6-19; its `if` branch: lines 9-12, its `else` branch: lines 14-16.
    let whole = lines[5..19].join("\n");
    let cut = |from: usize, to: usize| {
        let mut v: Vec<String> = lines[5..from - 1].iter().map(|l| l.to_string()).collect();
        v.push(format!("    // ...  {} lines not run", to - from + 1));
        v.extend(lines[to..19].iter().map(|l| l.to_string()));
        v.join("\n")
    };
    let elided = cut(9, 12);
    for opt in ["-O0", "-O1"] {
        let exe = s.path().join(format!("branches{opt}"));
        compile("gcc", &["-g", opt], &exe, &src, &[]);
        let plain = run(std::process::Command::new(&exe).arg("42"));
        assert_eq!((texts(&plain).0.as_str(), plain.status.code()), ("small: 40\n80\n", Some(3)));

        let with = s.path().join(format!("with{opt}.d"));
        assert_eq!(trace(&with, &exe, true, &["42"]), ("small: 40\n80\n".to_string(), Some(3)), "{opt}: output and status unchanged");
        assert!(with.join("line-probes.json").is_file(), "{opt}");
        let p = prompt(&with, "hide");
        assert_eq!(block(&p, "classify"), Some(elided.as_str()), "{opt}:\n{p}");
        assert!(p.contains("In native code (C, C++, Rust) a run is marked `// ...  N lines not run`."), "{opt}: {p}");
        // `auto` keeps the program's own functions exact, as for Python.
        assert_eq!(block(&prompt(&with, "auto"), "classify"), Some(whole.as_str()), "{opt}");

        // The other branch: its lines ran, the first branch's did not.
        let big = s.path().join(format!("big{opt}.d"));
        assert_eq!(trace(&big, &exe, true, &["5000"]).1, Some(0));
        let p = prompt(&big, "hide");
        assert_eq!(block(&p, "classify"), Some(cut(14, 16).as_str()), "{opt}:\n{p}");

        let without = s.path().join(format!("without{opt}.d"));
        assert_eq!(trace(&without, &exe, false, &["42"]), ("small: 40\n80\n".to_string(), Some(3)), "{opt}");
        assert!(!without.join("line-probes.json").exists(), "{opt}: no line probes without --lines");
        let p = prompt(&without, "hide");
        assert_eq!(block(&p, "classify"), Some(whole.as_str()), "{opt}: whole without --lines:\n{p}");
    }
}

#[test]
fn each_process_saves_its_lines_and_patch_json_counts_the_probes() {
    let s = scratch();
    let exe = s.path().join("branches");
    compile("gcc", &["-g", "-O0"], &exe, &example("c/branches.c"), &[]);
    let t = s.path().join("t.d");
    trace(&t, &exe, true, &["7"]);
    let list: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(t.join("line-probes.json")).unwrap()).unwrap();
    let listed = list["offsets"].as_array().map_or(0, Vec::len);
    let p =
        std::fs::read_dir(&t).unwrap().filter_map(Result::ok).map(|e| e.path()).find(|p| p.join("proc.json").is_file()).expect("a process");
    let bytes = std::fs::read(p.join("lines.bin")).expect("lines.bin");
    assert_eq!(bytes.len(), listed);
    assert!(bytes.iter().all(|&b| b <= 4), "{bytes:?}");
    let ran = bytes.iter().filter(|&&b| b == 2).count();
    let armed = bytes.iter().filter(|&&b| b == 1).count();
    assert!(ran > 0 && armed > 0, "some lines ran, the large branch's did not: {bytes:?}");
    let patch: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(p.join("patch.json")).unwrap()).unwrap();
    let objects = patch["objects"].as_array().cloned().unwrap_or_default();
    let lp = &objects.iter().find(|o| o.get("line_probes").is_some()).unwrap_or_else(|| panic!("{patch}"))["line_probes"];
    assert_eq!(lp["listed"].as_u64(), Some(listed as u64), "{patch}");
    assert_eq!(
        lp["planted"].as_u64().unwrap()
            + lp["at_entry"].as_u64().unwrap()
            + lp["unprobed"].as_u64().unwrap()
            + lp["covered"].as_u64().unwrap_or(0),
        listed as u64,
        "{patch}"
    );
}

/// One probe per basic block (tracer/src/blocks.rs). In `classify` built at -O0, `r += x / 3;`
/// (line 10) falls through from `r = x * 2;` (line 9), with no branch, call or branch target
/// between them: line 9's probe stands for it, and when it fires line 10's row says "ran by its
/// block" (4). `r -= 7;` (line 12) follows the call of `printf`, which might not return: it
/// keeps a probe of its own, which fires (2). `r -= 3;` (line 14), the `else` branch's first
/// row, is reached by a jump: a probe of its own, armed (1) in a run that took the other
/// branch, and the row of `printf` after it (line 15), which its probe stands for, says armed
/// too; the prompt elides lines 14-16 and shows lines 9-12.
#[test]
fn a_blocks_first_probe_marks_its_later_rows_and_a_row_after_a_branch_keeps_its_own() {
    let s = scratch();
    let src = example("c/branches.c");
    let exe = s.path().join("branches");
    compile("gcc", &["-g", "-O0"], &exe, &src, &[]);
    let t = s.path().join("big.d");
    assert_eq!(trace(&t, &exe, true, &["5000"]).1, Some(0));
    let list: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(t.join("line-probes.json")).unwrap()).unwrap();
    let num = |v: &serde_json::Value| {
        v.as_array().map(|a| a.iter().filter_map(serde_json::Value::as_u64).collect::<Vec<u64>>()).unwrap_or_default()
    };
    let offsets = num(&list["offsets"]);
    let covers = num(&list["covers"]);
    assert_eq!(covers.len(), offsets.len(), "every row says what its probe stands for: {list}");
    // Each row's line (one row per address at -O0, so addr2line's answer is the row's).
    let out = run(std::process::Command::new("addr2line").arg("-e").arg(&exe).args(offsets.iter().map(|o| format!("{o:#x}"))));
    let lines: Vec<u32> = texts(&out)
        .0
        .lines()
        .map(|l| l.rsplit(':').next().and_then(|x| x.split_whitespace().next()).and_then(|x| x.parse().ok()).unwrap_or(0))
        .collect();
    assert_eq!(lines.len(), offsets.len());
    let row = |line: u32| lines.iter().position(|&l| l == line).unwrap_or_else(|| panic!("a row of line {line}: {lines:?}"));
    // The row whose probe stands for row `k`, if not its own.
    let leader = |k: usize| (0..k).rev().find(|&j| j as u64 + covers[j] >= k as u64);
    let p =
        std::fs::read_dir(&t).unwrap().filter_map(Result::ok).map(|e| e.path()).find(|p| p.join("proc.json").is_file()).expect("a process");
    let bytes = std::fs::read(p.join("lines.bin")).expect("lines.bin");
    let (r9, r10, r12, r14, r15) = (row(9), row(10), row(12), row(14), row(15));
    assert_eq!(leader(r9), None, "line 9 follows the `if`'s branch: {covers:?}");
    assert_eq!(leader(r10).map(|j| lines[j]), Some(9), "line 10 falls through from line 9: {covers:?}");
    assert_eq!((bytes[r9], bytes[r10]), (2, 4), "line 9 fired, line 10 ran with its block: {bytes:?}");
    assert_eq!(leader(r12), None, "line 12 follows a call: {covers:?}");
    assert_eq!(bytes[r12], 2, "{bytes:?}");
    assert_eq!(leader(r14), None, "line 14 is a jump's target: {covers:?}");
    assert_eq!(leader(r15).map(|j| lines[j]), Some(14), "line 15 falls through from line 14: {covers:?}");
    assert_eq!((bytes[r14], bytes[r15]), (1, 1), "the branch not taken: armed, its covered row too: {bytes:?}");
    let text = std::fs::read_to_string(&src).unwrap();
    let src_lines: Vec<&str> = text.lines().collect();
    let mut want: Vec<String> = src_lines[5..13].iter().map(|l| l.to_string()).collect();
    want.push("    // ...  3 lines not run".to_string());
    want.extend(src_lines[16..19].iter().map(|l| l.to_string()));
    assert_eq!(block(&prompt(&t, "hide"), "classify"), Some(want.join("\n").as_str()));
}

/// A crash inside a block: `poke`, built at -O0, is one basic block (no branch, no call), so the
/// probe at its entry stands for its later rows. Run normally, its lines ran; with an argument it
/// dereferences a null pointer on line 5 and the process dies by SIGSEGV: the rows after the
/// fault never ran, and the analyzer, which cannot tell where in the block the thread stopped,
/// says they may have run instead of ran (never shown as run, never elided).
#[test]
fn rows_after_a_crash_inside_their_block_may_have_run_not_ran() {
    use analyzer::coverage::LineState::{MayHaveRun, Ran};
    let s = scratch();
    let src = s.path().join("poke.c");
    std::fs::write(
        &src,
        "#include <stddef.h>\nstatic volatile int sink;\n__attribute__((noinline)) static int poke(volatile int *p) {\n  int r = sink;\n  r += *p;\n  r *= 3;\n  sink = r;\n  return r;\n}\nint main(int argc, char **argv) {\n  (void)argv;\n  int x = argc;\n  return poke(argc > 1 ? NULL : &x) & 1;\n}\n",
    )
    .unwrap();
    let exe = s.path().join("poke");
    compile("gcc", &["-g", "-O0"], &exe, &src, &[]);
    let states = |dir: &Path| {
        let loaded = analyzer::fold::load_trace(dir, &mut analyzer::symbols::Interner::default(), Default::default()).expect("a trace");
        loaded.coverage.states(&trace_format::normalize_path(&src), 6, 3)
    };
    let ok = s.path().join("ok.d");
    assert_eq!(trace(&ok, &exe, true, &[]).1, Some(1));
    let list = std::fs::read_to_string(ok.join("line-probes.json")).unwrap();
    assert!(list.contains("\"covers\""), "poke's later rows are covered by its first: {list}");
    assert_eq!(states(&ok), Some(vec![Ran, Ran, Ran]), "lines 6-8 ran");
    let crash = s.path().join("crash.d");
    assert_ne!(trace(&crash, &exe, true, &["x"]).1, Some(0), "the program crashed");
    assert_eq!(states(&crash), Some(vec![MayHaveRun, MayHaveRun, MayHaveRun]), "lines 6-8 after the fault on line 5");
}

/// Two runs of one binary with different inputs take the two branches of `classify`: they
/// reach the same functions, and `slice diff` tells them apart by the lines only one ran, with
/// those lines marked in the prompt's source in C's comment syntax.
#[test]
fn a_diff_of_two_inputs_shows_the_branch_each_took() {
    let s = scratch();
    let src = example("c/branches.c");
    let exe = s.path().join("branches");
    compile("gcc", &["-g", "-O0"], &exe, &src, &[]);
    let (small, large) = (s.path().join("small.d"), s.path().join("large.d"));
    assert_eq!(trace(&small, &exe, true, &["42"]).1, Some(3));
    assert_eq!(trace(&large, &exe, true, &["5000"]).1, Some(0));
    let out = run_ok(cmd("slice").arg("diff").arg(&small).arg(&large).args(["--color", "never"]));
    assert!(
        out.contains("# functions both runs reached whose lines ran differently: 1\n#   classify (examples/c/branches.c:6): only in A: 14-16; only in B: 9-12\n"),
        "{out}"
    );
    let p =
        run_ok(cmd("slice").arg("diff").arg(&small).arg(&large).args(["--format", "prompt", "--no-budget", "-q", "Why is 5000 large?"]));
    assert!(
        p.contains("## How each run ended\n\nRun A:\n\n```text\nThe run failed: exit status 3.\n```\n\nRun B: exit status 0.\n"),
        "{p}"
    );
    assert!(p.contains("- `classify` (examples/c/branches.c:6): only in run A: lines 14-16; only in run B: lines 9-12\n"), "{p}");
    assert!(p.contains("    r = x * 2;  // <- ran only in run B\n") && p.contains("    r *= 2;  // <- ran only in run A\n"), "{p}");
}
