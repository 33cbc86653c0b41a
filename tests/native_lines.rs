//! End-to-end: lines that ran, for native code (`trace run --lines`, docs/native-recording.md,
//! "Lines that ran"). `examples/c/branches.c` built `gcc -g` at -O0 and -O1: `classify` takes
//! one branch of its `if`; with `--lines` the prompt elides the other branch's lines as Python
//! prompts elide code that did not run, and without `--lines` it shows the function whole. The
//! program's output and exit status are the same with and without the probes.

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
        let o = run(std::process::Command::new("gcc").args(["-g", opt, "-o"]).arg(&exe).arg(&src));
        assert!(o.status.success(), "gcc failed: {:?}", texts(&o));
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
    let o = run(std::process::Command::new("gcc").args(["-g", "-O0", "-o"]).arg(&exe).arg(example("c/branches.c")));
    assert!(o.status.success(), "gcc failed: {:?}", texts(&o));
    let t = s.path().join("t.d");
    trace(&t, &exe, true, &["7"]);
    let list: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(t.join("line-probes.json")).unwrap()).unwrap();
    let listed = list["offsets"].as_array().map_or(0, Vec::len);
    let p =
        std::fs::read_dir(&t).unwrap().filter_map(Result::ok).map(|e| e.path()).find(|p| p.join("proc.json").is_file()).expect("a process");
    let bytes = std::fs::read(p.join("lines.bin")).expect("lines.bin");
    assert_eq!(bytes.len(), listed);
    assert!(bytes.iter().all(|&b| b <= 3), "{bytes:?}");
    let ran = bytes.iter().filter(|&&b| b == 2).count();
    let armed = bytes.iter().filter(|&&b| b == 1).count();
    assert!(ran > 0 && armed > 0, "some lines ran, the large branch's did not: {bytes:?}");
    let patch: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(p.join("patch.json")).unwrap()).unwrap();
    let objects = patch["objects"].as_array().cloned().unwrap_or_default();
    let lp = &objects.iter().find(|o| o.get("line_probes").is_some()).unwrap_or_else(|| panic!("{patch}"))["line_probes"];
    assert_eq!(lp["listed"].as_u64(), Some(listed as u64), "{patch}");
    assert_eq!(
        lp["planted"].as_u64().unwrap() + lp["at_entry"].as_u64().unwrap() + lp["unprobed"].as_u64().unwrap(),
        listed as u64,
        "{patch}"
    );
}
