//! Lines per test: a pytest run where two tests exercise one function through different lines,
//! the later one failing. Every line a test ran is reported inside that test's boundaries, even
//! a line an earlier test ran first (the recorder re-arms its line events at each test's start:
//! `sys.monitoring` from 3.12, the trace function of `--lines` before), and `slice` names the
//! line that only the failing test ran as the one going with failure (the line spectrum,
//! `docs/prompts.md`, "Tests"). Under CPython 3.11 and 3.12 from `$(pyenv root)/versions/`,
//! each with pytest from PyPI in a venv under `target/`.

use serde_json::Value;
use slice_trace_e2e::{cmd, pyenv_python, pyenv_root, run, run_ok, scratch, texts, venv_with, PYTEST};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

const SHAPES: &str = "\
def normalize(n):
    return abs(n)


def classify(n):
    n = normalize(n)
    label = \"small\"
    if n > 10:
        label = \"large\"
    return label
";

const TESTS: &str = "\
from shapes import classify


def test_a_small():
    assert classify(3) == \"small\"
    assert classify(-4) == \"small\"


def test_b_big():
    assert classify(30) == \"big\"
";

/// Line of `shapes.py` (1-based) whose text, trimmed, is `text`.
fn line_of(text: &str) -> u32 {
    let i = SHAPES.lines().position(|l| l.trim() == text).unwrap_or_else(|| panic!("no line {text:?} in shapes.py"));
    i as u32 + 1
}

/// The pytest interpreter of a venv made from CPython 3.`minor`.
fn pytest_python(minor: u32) -> PathBuf {
    let py = pyenv_python(minor).unwrap_or_else(|| {
        panic!("no CPython 3.{minor} under {}/versions (install it with `pyenv install 3.{minor}`)", pyenv_root().display())
    });
    venv_with(&format!("pytest9-py3{minor}-venv"), py.to_str().expect("a UTF-8 path"), PYTEST).join("bin/python")
}

/// For each test of the main thread's stream, in order: the (function, line) pairs of the line
/// events between its boundary calls, for functions of `shapes.py`.
fn lines_per_test(dump: &str) -> Vec<BTreeSet<(String, u32)>> {
    let mut tests: Vec<BTreeSet<(String, u32)>> = Vec::new();
    let mut open = false;
    for e in dump.lines().map(|l| serde_json::from_str::<Value>(l).expect("a JSON event")) {
        let name = e["name"].as_str().unwrap_or_default();
        match e["kind"].as_str() {
            Some("call") if name == "_slicetrace_test_begin" => {
                tests.push(BTreeSet::new());
                open = true;
            }
            Some("call") if name == "_slicetrace_test_end" => open = false,
            Some("line") if open && e["at"].as_str().is_some_and(|a| a.contains("/shapes.py:")) => {
                let at = e["at"].as_str().unwrap_or_default();
                let line = at.rsplit(':').next().and_then(|l| l.parse::<u32>().ok()).unwrap_or_else(|| panic!("a line number: {e}"));
                tests.last_mut().expect("a test").insert((name.to_string(), line));
            }
            _ => {}
        }
    }
    tests
}

/// The example project's two tests run under `trace run EXTRA` by CPython 3.`minor`: the scratch
/// directory (kept alive) and the trace.
fn record(minor: u32, extra: &[&str]) -> (tempfile::TempDir, PathBuf) {
    let d = scratch();
    let proj = d.path().join("proj");
    std::fs::create_dir_all(&proj).unwrap();
    std::fs::write(proj.join("shapes.py"), SHAPES).unwrap();
    std::fs::write(proj.join("test_shapes.py"), TESTS).unwrap();
    let out = d.path().join("t.d");
    let o = run(cmd("trace")
        .current_dir(&proj)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .args(["run", "-q", "-o"])
        .arg(&out)
        .args(extra)
        .arg("--")
        .arg(pytest_python(minor))
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", "test_shapes.py"]));
    assert_eq!(o.status.code(), Some(1), "3.{minor}: pytest fails one test: {:?}", texts(&o));
    (d, out)
}

fn check(minor: u32, extra: &[&str]) {
    let (_d, out) = record(minor, extra);
    let t: &Path = &out;

    // Each test's own lines, also those the earlier test ran first.
    let dump = run_ok(cmd("trace").arg("dump").arg(t));
    let tests = lines_per_test(&dump);
    assert_eq!(tests.len(), 2, "3.{minor}: two tests in the stream");
    let l = |f: &str, text: &str| (f.to_string(), line_of(text));
    let common = [l("classify", "n = normalize(n)"), l("classify", "label = \"small\""), l("normalize", "return abs(n)")];
    for c in &common {
        assert!(tests[0].contains(c), "3.{minor}: the first test ran {c:?}: {:?}", tests[0]);
        assert!(tests[1].contains(c), "3.{minor}: the second test reports {c:?} again, which the first ran first: {:?}", tests[1]);
    }
    let only_failing = l("classify", "label = \"large\"");
    assert!(tests[1].contains(&only_failing) && !tests[0].contains(&only_failing), "3.{minor}: {tests:?}");
    let proc_json: Value = std::fs::read_dir(t)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with('p'))
        .find_map(|e| std::fs::read_to_string(e.path().join("proc.json")).ok())
        .map(|s| serde_json::from_str(&s).unwrap())
        .expect("a proc.json");
    assert_eq!(proc_json["lines_per_test"], true, "3.{minor}: {proc_json}");

    // The failing test's prompt names the line only it ran as the one going with failure.
    let prompt = run_ok(cmd("slice").args(["from-trace", "-q", "why does test_b_big fail"]).arg(t).args(["--test", "failed"]));
    let want = format!("line {} ran in 1 of 1 failing test, 0 of 1 passing (Ochiai 1.00)", only_failing.1);
    assert!(prompt.contains(&want), "3.{minor}: the prompt says {want:?}:\n{prompt}");
    let json: Value = serde_json::from_str(&run_ok(cmd("slice").args(["tests"]).arg(t).args(["--format", "json"]))).unwrap();
    assert_eq!(json["tests"][1]["outcome"], "failed", "3.{minor}");

    // The two tests of the one run diffed: the lines each ran are compared (not the run's,
    // which both share), and the line only the failing test ran is named.
    let diff =
        run_ok(cmd("slice").arg("diff").arg(t).arg(t).args(["--test-a", "test_a_small", "--test-b", "test_b_big", "--color", "never"]));
    assert!(!diff.contains("Lines are recorded per run"), "3.{minor}: {diff}");
    let want = format!(
        "# functions both runs reached whose lines ran differently: 1\n#   classify (shapes.py:5): only in B: {}\n",
        only_failing.1
    );
    assert!(diff.contains(&want), "3.{minor}: the diff says {want:?}:\n{diff}");
}

#[test]
fn lines_are_reported_per_test_under_sys_monitoring() {
    check(12, &["--lines-per-test"]);
}

#[test]
fn lines_are_reported_per_test_by_the_trace_function_before_3_12() {
    check(11, &["--lines-per-test"]);
}

/// Without `--lines-per-test` a line is reported once per process, as before: the second test
/// does not report the lines the first ran, and the trace does not claim lines per test.
#[test]
fn without_the_flag_lines_are_reported_once_per_process() {
    let (_d, out) = record(12, &[]);
    let tests = lines_per_test(&run_ok(cmd("trace").arg("dump").arg(&out)));
    assert_eq!(tests.len(), 2, "two tests in the stream");
    let common = ("classify".to_string(), line_of("n = normalize(n)"));
    assert!(tests[0].contains(&common) && !tests[1].contains(&common), "reported once, in the first test: {tests:?}");
    let proc_json = std::fs::read_dir(&out)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with('p'))
        .find_map(|e| std::fs::read_to_string(e.path().join("proc.json")).ok())
        .expect("a proc.json");
    assert!(!proc_json.contains("lines_per_test"), "{proc_json}");
}
