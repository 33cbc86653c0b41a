//! End-to-end tests of executed-line recording (trace format v3: line events and
//! `funcs.jsonl`'s `code_lines`) on `examples/python/shipping.py`, under the pyenv CPythons:
//! on by default from 3.12 (`sys.monitoring`), opt-in before (`--lines`, a C trace function),
//! off everywhere with `--no-lines` (the last of the two flags wins). An interpreter that is not installed fails the test unless `SLICE_TEST_OPT_OUT` names it.

use serde_json::Value;
use slice_trace_e2e::{cmd, pyenv_python, root, run_ok, scratch};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The example's source lines, 1-based, so that expected line numbers follow its text.
fn example_lines() -> Vec<String> {
    std::fs::read_to_string(example()).unwrap().lines().map(str::to_string).collect()
}

fn example() -> PathBuf {
    root().join("examples/python/shipping.py")
}

/// Line number of the (first) line whose text, trimmed, is `text`, after line `after`.
fn line_of(text: &str, after: usize) -> u32 {
    let lines = example_lines();
    let i = lines.iter().enumerate().skip(after).find(|(_, l)| l.trim() == text).map(|(i, _)| i);
    (i.unwrap_or_else(|| panic!("no line {text:?} in shipping.py")) + 1) as u32
}

/// `shipping_cost`'s statements: (the ones that run, the ones that do not). Every call is an
/// express parcel of positive weight.
fn shipping_cost_lines() -> (BTreeSet<u32>, BTreeSet<u32>) {
    let def = line_of("def shipping_cost(weight_kg, express):", 0) as usize;
    let at = |t: &str| line_of(t, def);
    let ran = [at("if weight_kg <= 0:"), at("if express:"), at("return EXPRESS_FEE + weight_kg")];
    let not_ran = [
        at("raise ValueError(\"a parcel weighs something\")"),
        at("cost = 5"),
        at("if weight_kg > 10:"),
        at("cost += weight_kg // 2"),
        at("return cost"),
    ];
    (ran.into(), not_ran.into())
}

/// `total`'s statements (run in the worker thread, all of them).
fn total_lines() -> BTreeSet<u32> {
    let def = line_of("def total(quotes, out):", 0) as usize;
    ["s = 0", "for q in quotes:", "s += q", "out.append(s)"].iter().map(|t| line_of(t, def)).collect()
}

/// A recorded run of the example.
struct Run {
    /// `trace dump --funcs`: the function records.
    funcs: Vec<Value>,
    /// `trace dump`: the events.
    events: Vec<Value>,
}

fn record(dir: &Path, python: &Path, flags: &[&str], args: &[&str]) -> Run {
    let mut c = cmd("trace");
    c.args(["run", "-q", "-o"]).arg(dir).args(flags).arg("--").arg(python).arg(example()).args(args);
    run_ok(&mut c);
    let json = |extra: &[&str]| -> Vec<Value> {
        run_ok(cmd("trace").arg("dump").args(extra).arg(dir)).lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    };
    Run { funcs: json(&["--funcs"]), events: json(&[]) }
}

impl Run {
    /// The records of the example's function `qualname`, one per process.
    fn funcs_named(&self, qualname: &str) -> Vec<&Value> {
        let file = example().to_string_lossy().into_owned();
        self.funcs.iter().filter(|f| f["qualname"] == qualname && f["file"] == file.as_str()).collect()
    }

    /// The one record of `qualname` in the process `pid` (any process if `None`).
    fn func(&self, qualname: &str, pid: Option<u64>) -> &Value {
        let found: Vec<_> = self.funcs_named(qualname).into_iter().filter(|f| pid.is_none_or(|p| f["pid"] == p)).collect();
        assert_eq!(found.len(), 1, "{qualname} in pid {pid:?}: {found:?}");
        found[0]
    }

    /// Line events of function record `f`: line -> how many events, and the threads they came from.
    fn line_events(&self, f: &Value) -> (BTreeMap<u32, usize>, BTreeSet<u64>) {
        let (mut lines, mut tids) = (BTreeMap::new(), BTreeSet::new());
        for e in self.events.iter().filter(|e| e["kind"] == "line" && e["pid"] == f["pid"] && e["func"] == f["id"]) {
            let at = e["at"].as_str().unwrap();
            let (file, line) = at.rsplit_once(':').unwrap();
            assert_eq!(file, f["file"].as_str().unwrap(), "a line event names its function's file: {e}");
            *lines.entry(line.parse().unwrap()).or_insert(0) += 1;
            tids.insert(e["tid"].as_u64().unwrap());
        }
        (lines, tids)
    }

    fn line_event_count(&self) -> usize {
        self.events.iter().filter(|e| e["kind"] == "line").count()
    }

    fn code_lines(f: &Value) -> Option<BTreeSet<u32>> {
        f.get("code_lines").map(|v| v.as_array().unwrap().iter().map(|l| l.as_u64().unwrap() as u32).collect())
    }
}

fn interpreter(minor: u32) -> Option<PathBuf> {
    let p = pyenv_python(minor);
    if p.is_none() {
        slice_trace_e2e::missing(&format!("python3.{minor}"), &format!("no CPython 3.{minor} under $(pyenv root)/versions"));
    }
    p
}

/// What every run that records lines must show: `shipping_cost` ran exactly its express path,
/// the statements it skipped are code lines without a line event, `total` reported its lines
/// from the worker thread. `once`: each (function, line) has exactly one event.
fn check_lines(run: &Run, pid: Option<u64>, once: bool, what: &str) {
    let (ran, not_ran) = shipping_cost_lines();
    let cost = run.func("shipping_cost", pid);
    let (lines, _) = run.line_events(cost);
    assert_eq!(lines.keys().copied().collect::<BTreeSet<_>>(), ran, "{what}: the executed lines of shipping_cost");
    let code = Run::code_lines(cost).unwrap_or_else(|| panic!("{what}: shipping_cost has no code_lines: {cost}"));
    assert_eq!(code, &ran | &not_ran, "{what}: shipping_cost's code lines are its statements, not its def line");
    if once {
        assert!(lines.values().all(|&n| n == 1), "{what}: each line of shipping_cost once: {lines:?}");
    }
    if pid.is_some() {
        return; // the forked child starts no thread
    }
    let tot = run.func("total", None);
    let (lines, tids) = run.line_events(tot);
    assert_eq!(lines.keys().copied().collect::<BTreeSet<_>>(), total_lines(), "{what}: total's lines");
    assert_eq!(Run::code_lines(tot), Some(total_lines()), "{what}: total's code lines");
    let main_pid = tot["pid"].as_u64().unwrap();
    assert!(!tids.is_empty() && !tids.contains(&main_pid), "{what}: total ran in the worker thread only, got tids {tids:?}");
    if once {
        assert!(lines.values().all(|&n| n == 1), "{what}: each line of total once (the loop header too): {lines:?}");
    }
}

#[test]
fn cpython_3_12_and_3_13_record_executed_lines_by_default() {
    for minor in [12, 13] {
        let Some(py) = interpreter(minor) else { continue };
        let d = scratch();
        let run = record(&d.path().join("t.d"), &py, &[], &[]);
        // sys.monitoring reports each line *location* once: a loop header has two.
        check_lines(&run, None, false, &format!("3.{minor} default"));
        let (lines, _) = run.line_events(run.func("shipping_cost", None));
        assert!(lines.values().all(|&n| n == 1), "3.{minor}: straight-line code reports once (DISABLE took effect): {lines:?}");
    }
}

#[test]
fn no_lines_turns_line_recording_off_on_3_12() {
    let Some(py) = interpreter(12) else { return };
    for flags in [&["--no-lines"][..], &["--lines", "--no-lines"][..]] {
        let d = scratch();
        let run = record(&d.path().join("t.d"), &py, flags, &[]);
        assert_eq!(run.line_event_count(), 0, "{flags:?}: no line event");
        assert!(run.funcs.iter().all(|f| f.get("code_lines").is_none()), "{flags:?}: no code_lines");
        // The calls are recorded as ever.
        assert_eq!(run.funcs_named("shipping_cost").len(), 1);
    }
}

#[test]
fn the_profile_hook_on_3_12_still_records_lines_through_sys_monitoring() {
    let Some(py) = interpreter(12) else { return };
    let d = scratch();
    let run = record(&d.path().join("t.d"), &py, &["--python-hook", "profile"], &[]);
    check_lines(&run, None, false, "3.12 --python-hook profile");
}

#[test]
fn before_3_12_lines_are_opt_in_and_written_once() {
    for minor in [9, 10, 11] {
        let Some(py) = interpreter(minor) else { continue };
        let d = scratch();
        let run = record(&d.path().join("t.d"), &py, &["--lines"], &[]);
        check_lines(&run, None, true, &format!("3.{minor} --lines"));
        // Every (function, line) of the whole process once: the trace function deduplicates.
        let mut seen = BTreeSet::new();
        for e in run.events.iter().filter(|e| e["kind"] == "line") {
            assert!(seen.insert((e["pid"].as_u64(), e["func"].as_u64(), e["at"].as_str())), "3.{minor}: {e} twice");
        }
    }
    // With the profile hook and C calls (the profile function and the trace function side by side).
    if let Some(py) = interpreter(11) {
        for flags in [&["--lines", "--python-hook", "profile"][..], &["--lines", "--c-calls"][..]] {
            let d = scratch();
            let run = record(&d.path().join("t.d"), &py, flags, &[]);
            check_lines(&run, None, true, &format!("3.11 {flags:?}"));
        }
    }
}

#[test]
fn cpython_3_11_records_no_lines_by_default() {
    let Some(py) = interpreter(11) else { return };
    let d = scratch();
    let run = record(&d.path().join("t.d"), &py, &[], &[]);
    assert_eq!(run.line_event_count(), 0, "3.11 default: no line event");
    assert!(run.funcs.iter().all(|f| f.get("code_lines").is_none()), "3.11 default: no code_lines");
    assert_eq!(run.funcs_named("shipping_cost").len(), 1);
}

#[test]
fn a_forked_child_reports_the_lines_its_parent_already_ran() {
    // 3.12: the parent's DISABLE would hide shipping_cost's lines from the child; 3.11: the
    // child's line sets start empty.
    for (minor, flags) in [(12, &[][..]), (11, &["--lines"][..])] {
        let Some(py) = interpreter(minor) else { continue };
        let d = scratch();
        let run = record(&d.path().join("t.d"), &py, flags, &["--fork"]);
        let pids: BTreeSet<u64> = run.funcs_named("shipping_cost").iter().map(|f| f["pid"].as_u64().unwrap()).collect();
        assert_eq!(pids.len(), 2, "3.{minor}: shipping_cost in the parent and in the child: {pids:?}");
        for pid in pids {
            check_lines(&run, Some(pid), minor < 12, &format!("3.{minor} --fork, pid {pid}"));
        }
    }
}

/// 3.12+: once every code line of a function has been reported, its LINE events are turned off
/// (which also removes the line starts CPython never reports, such as a one-line loop jumping
/// back to its own line, that would cost on every execution); a function with a line not run
/// keeps them, so that a later call can still report it, for at most 256 entries: then its
/// unreported lines are given up (a line event with line 0) and its LINE events turned off.
/// A frame still running 20,000 entries after its function's last entry is given up too.
/// Module and class bodies are not watched at all (no `code_lines`, LINE never on).
#[test]
fn a_function_whose_lines_all_ran_stops_line_events_on_3_12() {
    let Some(py) = interpreter(12) else { return };
    let d = scratch();
    let script = d.path().join("local.py");
    std::fs::write(
        &script,
        "import sys\n\
         def full(xs):\n    return sum([x for x in xs])\n\
         def partial(x):\n    if x:\n        return 1\n    return 2\n\
         def hot(x):\n    if x:\n        return 1\n    return 2\n\
         def helper():\n    return 0\n\
         def long_loop(n):\n    if n < 0:\n        return -1\n    for _ in range(n):\n        helper()\n    return m.get_local_events(3, sys._getframe().f_code)\n\
         for _ in range(3):\n    full([1, 2])\n    partial(1)\n\
         for _ in range(300):\n    hot(1)\n\
         m = sys.monitoring\n\
         print(m.get_tool(3), m.get_local_events(3, full.__code__), m.get_local_events(3, partial.__code__), m.events.LINE, m.get_local_events(3, hot.__code__), m.get_local_events(3, sys._getframe().f_code), long_loop(30000))\n",
    )
    .unwrap();
    let t = d.path().join("t.d");
    let out = run_ok(cmd("trace").args(["run", "-q", "-o"]).arg(&t).arg("--").arg(&py).arg(&script));
    let line = out.trim().to_string();
    let fields: Vec<&str> = line.split(' ').collect();
    assert_eq!(fields.len(), 7, "{line}");
    assert_eq!(fields[0], "slicetrace", "our tool id: {line}");
    assert_eq!(fields[1], "0", "full: every line ran, LINE turned off: {line}");
    assert_eq!(fields[2], fields[3], "partial: `return 2` never ran, LINE kept: {line}");
    assert_eq!(fields[4], "0", "hot: entered 300 times with `return 2` not run, LINE given up: {line}");
    assert_eq!(fields[5], "0", "the module body: never watched: {line}");
    assert_eq!(fields[6], "0", "long_loop: still running 20,000 entries after its entry, given up: {line}");
    // The give-up is in the trace (line 0), for hot only.
    let dump = run_ok(cmd("trace").arg("dump").arg(&t));
    let given_up: Vec<&str> = dump.lines().filter(|l| l.contains("\"kind\":\"line\"") && l.contains("local.py:0\"")).collect();
    let mut names: Vec<&str> = given_up.iter().filter_map(|l| l.split("\"name\":\"").nth(1)?.split('"').next()).collect();
    names.sort();
    assert_eq!(names, ["hot", "long_loop"], "{given_up:?}");
    // Module bodies get no code_lines (they are never shown with code elided); functions do.
    let mut modules = 0;
    for entry in std::fs::read_dir(&t).unwrap().flatten().filter(|e| e.file_name().to_string_lossy().starts_with('p')) {
        for rec in std::fs::read_to_string(entry.path().join("funcs.jsonl")).unwrap().lines() {
            let v: Value = serde_json::from_str(rec).unwrap();
            if v["file"].as_str().is_some_and(|f| f.ends_with("local.py")) {
                let module = v["qualname"] == "<module>";
                modules += module as usize;
                assert_eq!(v.get("code_lines").is_some(), !module, "{v}");
            }
        }
    }
    assert_eq!(modules, 1);
}
