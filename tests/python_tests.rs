//! Test suites recorded as tests: `trace run` of pytest and unittest on the bundled
//! `examples/python/invoice` project (one planted bug, a session fixture, a parametrized test,
//! an xfail, a skip, a unittest-style class), then `slice tests` and `slice from-trace --test`.
//!
//! pytest comes from PyPI at a pinned version into a venv under `target/` (like rich-cli in the
//! other tests). The prompt of the failing test is compared with `tests/golden/invoice_failed.md`
//! (durations and the counts that depend on the Python version normalised);
//! `SLICE_BLESS=1 cargo test --test python_tests` rewrites it.

use slice_trace_e2e::{cmd, run, run_ok, scratch, texts};
use std::path::{Path, PathBuf};

fn venv_python() -> PathBuf {
    slice_trace_e2e::pytest_python()
}

fn project(dir: &Path) -> PathBuf {
    slice_trace_e2e::invoice_project(dir)
}

/// A project in `dir`: the package `pkg` holding one module (`module`: its file name and text)
/// and, beside it, one test file.
fn pkg_project(dir: &Path, module: (&str, &str), test: (&str, &str)) -> PathBuf {
    std::fs::create_dir_all(dir.join("pkg")).unwrap();
    std::fs::write(dir.join("pkg/__init__.py"), "").unwrap();
    std::fs::write(dir.join("pkg").join(module.0), module.1).unwrap();
    std::fs::write(dir.join(test.0), test.1).unwrap();
    dir.to_path_buf()
}

/// Record `args` (after `trace run -o DIR --`) in `cwd` into `cwd/../name`; returns the trace
/// directory and the exit code `trace` passed through.
fn record(cwd: &Path, name: &str, args: &[&str]) -> (PathBuf, i32) {
    let out = cwd.parent().expect("a directory inside the scratch directory").join(name);
    let o = run(cmd("trace").current_dir(cwd).env("PYTHONDONTWRITEBYTECODE", "1").arg("run").arg("-o").arg(&out).arg("--").args(args));
    let (_, err) = texts(&o);
    assert!(out.join("meta.json").is_file(), "no trace: {err}");
    (out, o.status.code().unwrap_or(-1))
}

fn suite(dir: &Path) -> (PathBuf, PathBuf) {
    let proj = project(dir);
    let py = venv_python();
    let (t, code) = record(&proj, "suite.d", &[py.to_str().unwrap(), "-m", "pytest", "-q", "-p", "no:cacheprovider"]);
    assert_eq!(code, 1, "pytest's exit status (tests failed) passes through");
    (proj, t)
}

/// The example suite's tests and outcomes, in pytest's order.
const SUITE: &[(&str, &str)] = &[
    ("tests/test_totals.py::test_line_total[pen-1-100]", "passed"),
    ("tests/test_totals.py::test_line_total[pen-3-300]", "passed"),
    ("tests/test_totals.py::test_line_total[book-2-2400]", "passed"),
    ("tests/test_totals.py::test_bulk_discount_above_ten", "passed"),
    ("tests/test_totals.py::test_bulk_discount_starts_at_ten", "failed"),
    ("tests/test_totals.py::test_format_cents", "passed"),
    ("tests/test_totals.py::test_unknown_product", "passed"),
    ("tests/test_totals.py::test_currency", "xfailed"),
    ("tests/test_totals.py::test_tax", "skipped"),
    ("tests/test_unit_format.py::FormatTest::test_bulk_lamps", "failed"),
    ("tests/test_unit_format.py::FormatTest::test_lamp", "passed"),
];

/// (id, outcome) of each test of `slice tests --format json`, in its order.
fn ids_and_outcomes(json: &serde_json::Value) -> Vec<(String, String)> {
    json["tests"]
        .as_array()
        .expect("a tests array")
        .iter()
        .map(|x| (x["id"].as_str().unwrap_or_default().to_string(), x["outcome"].as_str().unwrap_or_default().to_string()))
        .collect()
}

fn slice(args: &[&str]) -> String {
    run_ok(cmd("slice").args(args))
}

#[test]
fn every_test_is_recorded_with_its_outcome_phases_and_failure() {
    let d = scratch();
    let (_, t) = suite(d.path());
    let t = t.to_str().unwrap();
    let json: serde_json::Value = serde_json::from_str(&slice(&["tests", t, "--format", "json", "--rank", "20"])).unwrap();
    let tests = json["tests"].as_array().unwrap();
    assert_eq!(ids_and_outcomes(&json), SUITE.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect::<Vec<_>>());
    let failed = &tests[4];
    let phases: Vec<&str> = failed["phases"].as_array().unwrap().iter().map(|p| p["when"].as_str().unwrap()).collect();
    assert_eq!(phases, ["setup", "call", "teardown"]);
    assert_eq!(failed["failure"]["exception"], "AssertionError");
    assert_eq!(failed["failure"]["phase"], "call");
    assert_eq!(failed["failure"]["line"], 17);
    let report = failed["failure"]["report"].as_str().unwrap();
    assert!(
        report.contains(">       assert line_total(\"pen\", 10) == 900") && report.contains("E       AssertionError: assert 1000 == 900"),
        "{report}"
    );
    assert!(failed["duration_ns"].as_u64().unwrap() > 0 && failed["calls"].as_u64().unwrap() > 0);
    // Its calls are its own work, as many as the passing test's beside it that runs the same
    // code: pytest's formatting of the failure is the runner's.
    assert_eq!(failed["calls"], tests[3]["calls"], "{:?}", (&failed["calls"], &tests[3]));
    assert_eq!(tests[0]["fixtures"], serde_json::json!(["prices", "sku", "quantity", "cents"]));
    assert_eq!(tests[8]["failure"]["message"], "Skipped: taxes come later");
    // The spectrum: of the code under test, bulk_discount goes most with failure (it ran in
    // both failing tests and in 5 of 7 passing ones); the runner and what it calls are not
    // in it.
    let ranking = json["ranking"].as_array().unwrap();
    let names: Vec<&str> = ranking.iter().map(|f| f["function"].as_str().unwrap()).collect();
    let first_code = names.iter().find(|n| !n.contains("test_")).unwrap();
    assert_eq!(*first_code, "bulk_discount", "{names:?}");
    let bd = ranking.iter().find(|f| f["function"] == "bulk_discount").unwrap();
    assert_eq!((bd["failed"].as_u64(), bd["passed"].as_u64()), (Some(2), Some(5)));
    assert!(
        ranking
            .iter()
            .all(|f| !f["file"].as_str().unwrap_or("").contains("_pytest") && !f["file"].as_str().unwrap_or("").starts_with("stdlib/")),
        "{names:?}"
    );
    assert_eq!((json["failed_total"].as_u64(), json["passed_total"].as_u64()), (Some(2), Some(7)));
    // The text table says the same.
    let text = slice(&["tests", t, "--rank", "0"]);
    assert!(
        text.contains("failed    ")
            && text.ends_with(&format!("2 failed, 7 passed, 1 skipped, 1 xfailed; run failed: {t}: exit status 1\n")),
        "{text}"
    );
}

/// Durations and the counts of notes that depend on the interpreter's standard library.
fn normalise(prompt: &str) -> String {
    let dur = regex::Regex::new(r", \d+(\.\d)? (ms|µs|s)\n").unwrap();
    let num = regex::Regex::new(r"\d+").unwrap();
    prompt
        .lines()
        .map(|l| {
            if l.starts_with("> The standard library is hidden") || l.starts_with("> Framework plumbing collapsed") {
                num.replace_all(l, "N").into_owned()
            } else {
                l.to_string()
            }
        })
        .map(|l| dur.replace_all(&(l + "\n"), ", <duration>\n").into_owned())
        .collect()
}

#[test]
fn a_failing_tests_prompt_starts_with_its_failure_then_the_code_it_ran() {
    let d = scratch();
    let (_, t) = suite(d.path());
    let t = t.to_str().unwrap();
    let prompt = slice(&["from-trace", t, "--test", "test_bulk_discount_starts_at_ten", "-q", "Why is there no discount on 10 pens?"]);
    // The venv's interpreter is under this checkout's target directory.
    let actual = normalise(&prompt).replace(venv_python().to_str().unwrap(), "python");
    let path = slice_trace_e2e::root().join("tests/golden/invoice_failed.md");
    if std::env::var_os("SLICE_BLESS").is_some() {
        std::fs::write(&path, &actual).unwrap();
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e} (SLICE_BLESS=1 writes it)", path.display()));
    assert_eq!(actual, expected, "{} differs (SLICE_BLESS=1 rewrites it)", path.display());
    // What the golden file holds, said outright: the failure before the tree, the buggy
    // function whole, the cached prices' builder reachable, no source of the runner.
    let (failure, tree) = (prompt.find("E       AssertionError: assert 1000 == 900").unwrap(), prompt.find("### Call tree").unwrap());
    assert!(failure < tree && prompt.contains("The run failed: exit status 1 (11 tests: 2 failed, 7 passed, 1 skipped, 1 xfailed)."));
    assert!(prompt.contains("    if quantity > BULK_QUANTITY:\n        return BULK_PERCENT\n    return 0\n"));
    assert!(prompt.contains("#### built earlier, in test tests/test_totals.py::test_line_total[pen-1-100]"));
    assert!(prompt.contains("#### `parse_cents` (invoice/catalogue.py:8-10)"));
    for heading in prompt.lines().filter(|l| l.starts_with("#### `")) {
        assert!(!heading.contains("site-packages/"), "runner source in a test prompt: {heading}");
    }
}

#[test]
fn tests_are_chosen_by_id_name_glob_or_failure() {
    let d = scratch();
    let (_, t) = suite(d.path());
    let t = t.to_str().unwrap();
    let labels = |sel: &str| -> Vec<String> {
        slice(&["from-trace", t, "--test", sel, "-q", "q"]).lines().filter(|l| l.starts_with("#### test ")).map(str::to_string).collect()
    };
    assert_eq!(
        labels("test_line_total"),
        [
            "#### test tests/test_totals.py::test_line_total[pen-1-100]",
            "#### test tests/test_totals.py::test_line_total[pen-3-300]",
            "#### test tests/test_totals.py::test_line_total[book-2-2400]"
        ]
    );
    assert_eq!(
        labels("failed"),
        [
            "#### test tests/test_totals.py::test_bulk_discount_starts_at_ten",
            "#### test tests/test_unit_format.py::FormatTest::test_bulk_lamps"
        ]
    );
    assert_eq!(labels("*::FormatTest::*").len(), 2);
    // A glob matches an id's end after a separator, as a name does.
    assert_eq!(labels("test_line_t*").len(), 3);
    assert_eq!(labels("FormatTest::test_bulk*"), ["#### test tests/test_unit_format.py::FormatTest::test_bulk_lamps"]);
    // A view of a test starts at the test, as its prompt does: the runner is spliced out,
    // and the failing test function keeps its time (pytest's hook caller, re-entered from
    // the failing assertion, takes only its own).
    let tree = slice(&["tree", t, "--test", "test_bulk_discount_starts_at_ten", "--color", "never"]);
    // First, as in its prompt, how the run ended and the test's failure.
    let (outcome, trees) = tree.split_once("\n── ").unwrap_or_default();
    assert_eq!(
        // (the test's duration, after its id, varies)
        outcome.lines().skip(1).map(|l| if l.starts_with("FAILED") { l.split(", ").next().unwrap_or(l) } else { l }).collect::<Vec<_>>(),
        [
            "The run failed: exit status 1 (11 tests: 2 failed, 7 passed, 1 skipped, 1 xfailed).",
            "FAILED tests/test_totals.py::test_bulk_discount_starts_at_ten",
            "at tests/test_totals.py:17",
            ">       assert line_total(\"pen\", 10) == 900",
            "E       AssertionError: assert 1000 == 900",
            "E        +  where 1000 = line_total('pen', 10)",
        ],
        "{tree}"
    );
    // The function column: after the call count (`×1  `), up to the end of the first tree.
    let calls: Vec<&str> = trees
        .lines()
        .skip(2)
        .take_while(|l| !l.is_empty())
        .map(|l| l.split_once('×').and_then(|(_, r)| r.split_once("  ")).map_or(l, |(_, f)| f))
        .collect();
    assert_eq!(
        calls,
        [
            "test_bulk_discount_starts_at_ten  (tests/test_totals.py:16)",
            "└─ line_total  (invoice/totals.py:16)",
            "   ├─ unit_price  (invoice/catalogue.py:20)",
            "   │  └─ load_prices  (invoice/catalogue.py:13)",
            "   └─ bulk_discount  (invoice/totals.py:9)",
        ],
        "{tree}"
    );
    // Each tree is named: the test's, and the earlier test's part that built state it used.
    let heads: Vec<&str> = tree.lines().filter(|l| l.starts_with("── ")).map(|l| l.split(": process ").next().unwrap_or(l)).collect();
    assert_eq!(
        heads,
        [
            "── test tests/test_totals.py::test_bulk_discount_starts_at_ten",
            "── built earlier, in test tests/test_totals.py::test_line_total[pen-1-100]"
        ],
        "{tree}"
    );
    let test_line = trees.lines().nth(2).unwrap_or_default();
    assert!(!test_line.trim_start().starts_with("0 ns"), "{tree}");
    // The second failing test made the same calls as the first: the reference names the
    // first test's tree, which this prompt shows.
    let p = slice(&["from-trace", t, "--test", "failed", "-q", "q"]);
    let second = p.split("#### test tests/test_unit_format.py::FormatTest::test_bulk_lamps\n\n```text\n").nth(1).unwrap_or_default();
    assert!(
        second.starts_with(
            "FormatTest.setUp [same calls as `test_bulk_discount_starts_at_ten`, in `test tests/test_totals.py::test_bulk_discount_starts_at_ten`]\nFormatTest.test_bulk_lamps\n  line_total [same calls as above, in `test tests/test_totals.py::test_bulk_discount_starts_at_ten`]\n"
        ),
        "{p}"
    );
    // A later instance reused the session fixture the first computed: named, and its code kept.
    let p = slice(&["from-trace", t, "--test", "test_line_total[pen-3-300]", "-q", "q"]);
    assert!(p.contains("`call_fixture_func` → `prices`"), "{p}");
    assert!(p.contains("#### `prices` (conftest.py:6-8)"), "{p}");
    let o = run(cmd("slice").args(["from-trace", t, "--test", "test_nothing", "-q", "q"]));
    let (_, err) = texts(&o);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        err.contains("no recorded test matches \"test_nothing\" (11 tests: 2 failed, 7 passed, 1 skipped, 1 xfailed); `slice tests"),
        "{err}"
    );
}

#[test]
fn the_whole_runs_prompt_collapses_the_runner_and_says_the_run_failed() {
    let d = scratch();
    let (_, t) = suite(d.path());
    let p = slice(&["from-trace", t.to_str().unwrap(), "-q", "Why does a test fail?"]);
    assert!(p.contains("The run failed: exit status 1 (11 tests:"), "{p}");
    // What failed, before the tree: the failing tests' failures (the first three).
    let (failure, tree) = (p.find("E       AssertionError: assert 1000 == 900").expect("the failure"), p.find("### Call tree").unwrap());
    assert!(failure < tree && p.contains("FAILED tests/test_unit_format.py::FormatTest::test_bulk_lamps"), "{p}");
    assert!(p.contains("This run ran 11 tests (2 failed, 7 passed, 1 skipped, 1 xfailed); failing: tests/test_totals.py::test_bulk_discount_starts_at_ten, tests/test_unit_format.py::FormatTest::test_bulk_lamps. `--test failed`"));
    let headings: Vec<&str> = p.lines().filter(|l| l.starts_with("#### `")).collect();
    assert!(headings.iter().any(|h| h.contains("`bulk_discount`")), "{headings:?}");
    assert!(headings.iter().all(|h| !h.contains("site-packages/")), "{headings:?}");
    // `--no-site-packages` hides installed packages, not the code under test (pytest is the
    // `-m` entry, not the program).
    let p = slice(&["from-trace", t.to_str().unwrap(), "--no-site-packages", "-q", "q"]);
    assert!(p.contains("#### `bulk_discount`") && !p.contains("runtestprotocol"), "{p}");
}

#[test]
fn unittest_and_the_pytest_console_script_are_recorded_as_tests() {
    let d = scratch();
    let proj = project(d.path());
    let py = venv_python();
    let (t, code) = record(&proj, "unit.d", &[py.to_str().unwrap(), "-m", "unittest", "discover", "-s", "tests", "-p", "test_unit*.py"]);
    assert_eq!(code, 1);
    let json: serde_json::Value = serde_json::from_str(&slice(&["tests", t.to_str().unwrap(), "--format", "json"])).unwrap();
    let tests = json["tests"].as_array().unwrap();
    let got: Vec<(&str, &str, &str)> =
        tests.iter().map(|x| (x["id"].as_str().unwrap(), x["outcome"].as_str().unwrap(), x["runner"].as_str().unwrap())).collect();
    assert_eq!(
        got,
        [
            ("test_unit_format.FormatTest.test_bulk_lamps", "failed", "unittest"),
            ("test_unit_format.FormatTest.test_lamp", "passed", "unittest")
        ]
    );
    assert_eq!(tests[0]["failure"]["exception"], "AssertionError");
    assert!(tests[0]["failure"]["message"].as_str().unwrap().starts_with("'305.00' != '274.50'"));
    // unittest's message is the bare value: the listing names the exception, as pytest's does.
    let table = slice(&["tests", t.to_str().unwrap()]);
    assert!(table.contains("  test_unit_format.FormatTest.test_bulk_lamps: AssertionError: '305.00' != '274.50' at "), "{table}");
    let p = slice(&["from-trace", t.to_str().unwrap(), "--test", "failed", "-q", "q"]);
    assert!(p.contains("FAILED test_unit_format.FormatTest.test_bulk_lamps") && p.contains("#### `FormatTest.setUp`"), "{p}");
    // The console script, and a test that ends its process: interrupted, and still readable.
    std::fs::write(proj.join("tests/test_exit.py"), "import os\n\ndef test_exit():\n    os._exit(3)\n").unwrap();
    let pytest = py.parent().unwrap().join("pytest");
    let (t, code) = record(&proj, "exit.d", &[pytest.to_str().unwrap(), "-q", "-p", "no:cacheprovider", "tests/test_exit.py"]);
    assert_eq!(code, 3);
    let text = slice(&["tests", t.to_str().unwrap()]);
    assert!(
        text.contains("interrupted")
            && text.contains("tests/test_exit.py::test_exit: (no failure recorded: the process ended inside the test)"),
        "{text}"
    );
    let p = slice(&["from-trace", t.to_str().unwrap(), "--test", "failed", "-q", "q"]);
    assert!(p.contains("INTERRUPTED tests/test_exit.py::test_exit") && p.contains("#### `test_exit`"), "{p}");
}

#[test]
fn a_failed_run_says_so_without_tests() {
    let d = scratch();
    let cwd = d.path().join("prog");
    std::fs::create_dir_all(&cwd).unwrap();
    let script = cwd.join("fails.py");
    std::fs::write(&script, "import sys\n\ndef main():\n    sys.exit(3)\n\nmain()\n").unwrap();
    let (t, code) = record(&cwd, "fails.d", &[&slice_trace_e2e::python(), script.to_str().unwrap()]);
    assert_eq!(code, 3);
    let p = slice(&["from-trace", t.to_str().unwrap(), "-q", "Why does it exit?"]);
    assert!(p.contains("### Outcome\n\n```text\nThe run failed: exit status 3.\n```"), "{p}");
    let o = run(cmd("slice").args(["from-trace", t.to_str().unwrap(), "--test", "failed", "-q", "q"]));
    assert_eq!(o.status.code(), Some(1));
    assert!(texts(&o).1.contains("the trace recorded no tests"), "{:?}", texts(&o));
}

/// pytest that selected no test (`-k` matching nothing, exit status 5) is not a run without the
/// recorder: `slice tests` and `--test` say what pytest's status means and do not tell the user
/// to record the pytest run they recorded.
#[test]
fn a_pytest_run_that_selected_no_test_says_so() {
    let d = scratch();
    let proj = project(d.path());
    let py = venv_python();
    let (t, code) = record(&proj, "none.d", &[py.to_str().unwrap(), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "nomatch"]);
    assert_eq!(code, 5, "pytest's exit status (no tests collected) passes through");
    let why = format!(
        "none.d: the trace recorded no tests; `{} -m pytest -q -p no:cacheprovider -k nomatch` ended with exit status 5: pytest \
         collected no tests, or its options (`-k`, `-m`, a node id) selected none",
        py.display()
    );
    for args in [vec!["tests", t.to_str().unwrap()], vec!["from-trace", t.to_str().unwrap(), "--test", "failed", "-q", "q"]] {
        let o = run(cmd("slice").args(&args));
        let (out, err) = texts(&o);
        assert_eq!((o.status.code(), out.as_str()), (Some(1), ""), "{args:?}: {err}");
        assert!(err.contains(&why) && !err.contains("trace run -- python -m pytest"), "{args:?}: {err}");
    }
}

#[test]
fn a_traceback_names_the_function_of_every_frame_pytest_shows() {
    // pytest's long-style entries (the test's frame, the innermost one) say no function name:
    // the innermost says the exception. The recorder adds the function from pytest's own
    // traceback, so the prompt's traceback names where it was raised.
    let d = scratch();
    let cwd = pkg_project(
        &d.path().join("tb"),
        ("check.py", "BANNED = {'x'}\n\n\ndef is_banned(item):\n    return item in BANNED\n\n\ndef check_all(items):\n    found = []\n    for i in items:\n        found.append(is_banned(i))\n    return found\n"),
        ("test_check.py", "from pkg.check import check_all\n\n\ndef test_lists():\n    assert check_all([['a']]) == [False]\n"),
    );
    let py = venv_python();
    let (t, code) = record(&cwd, "tb.d", &[py.to_str().unwrap(), "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_check.py"]);
    assert_eq!(code, 1);
    let p = slice(&["from-trace", t.to_str().unwrap(), "--test", "failed", "-q", "Why does a list fail?"]);
    let tb = p.split_once("traceback (innermost last):\n").map(|x| x.1).unwrap_or_default();
    let tb = tb.split("\n```").next().unwrap_or_default();
    assert_eq!(
        tb, "  test_check.py:5 (in test_lists)\n  pkg/check.py:11 (in check_all)\n  pkg/check.py:5 (in is_banned: TypeError)",
        "{p}"
    );
}

#[test]
fn a_failing_parametrized_test_says_the_values_it_failed_with() {
    // The id names the instance (`[m1-3]`), not the values: the recorder keeps pytest's
    // parameters of a failing test, bounded reprs taken after its end boundary, so that the
    // values' `__repr__` is no call of the test's.
    let d = scratch();
    let cwd = pkg_project(
        &d.path().join("params"),
        ("money.py", "class Money:\n    def __init__(self, cents):\n        self.cents = cents\n\n    def __repr__(self):\n        return 'Money(%d)' % self.cents\n\n\ndef half(m):\n    return m.cents // 2\n"),
        (
            "test_money.py",
            "import pytest\nfrom pkg.money import Money, half\n\n\n@pytest.mark.parametrize('m, want', [(Money(4), 2), (Money(5), 3)])\ndef test_half(m, want):\n    assert half(m) == want\n\n\n@pytest.mark.parametrize('s', ['x' * 500])\ndef test_long(s):\n    assert not s\n",
        ),
    );
    let py = venv_python();
    let (t, code) = record(&cwd, "params.d", &[py.to_str().unwrap(), "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_money.py"]);
    assert_eq!(code, 1);
    let json: serde_json::Value = serde_json::from_str(&slice(&["tests", t.to_str().unwrap(), "--format", "json"])).unwrap();
    let tests = json["tests"].as_array().unwrap();
    let by_id = |id: &str| tests.iter().find(|x| x["id"] == id).unwrap_or_else(|| panic!("{id}: {json}"));
    assert_eq!(by_id("test_money.py::test_half[m1-3]")["failure"]["params"], serde_json::json!([["m", "Money(5)"], ["want", "3"]]));
    assert_eq!(by_id("test_money.py::test_half[m0-2]")["outcome"], "passed");
    assert!(by_id("test_money.py::test_half[m0-2]").get("failure").is_none_or(|f| f.get("params").is_none()), "{json}");
    // reprlib bounds a long value.
    let long = tests.iter().find(|x| x["id"].as_str().is_some_and(|i| i.starts_with("test_money.py::test_long["))).unwrap()["failure"]
        ["params"][0][1]
        .as_str()
        .unwrap()
        .to_string();
    assert!(long.len() <= 160 && long.starts_with("'xxx") && long.contains("..."), "{long}");
    let p = slice(&["from-trace", t.to_str().unwrap(), "--test", "test_half[m1-3]", "-q", "Why is half of 5 cents wrong?"]);
    assert!(p.contains("FAILED test_money.py::test_half[m1-3]") && p.contains("\nwith parameters m=Money(5), want=3\n"), "{p}");
    let tree = slice(&["tree", t.to_str().unwrap(), "--test", "test_half[m1-3]"]);
    assert!(tree.contains("half") && !tree.contains("__repr__"), "{tree}");
}

#[test]
fn two_tests_are_diffed_by_the_code_under_test_within_a_budget() {
    let d = scratch();
    let (_, t) = suite(d.path());
    let t = t.to_str().unwrap();
    let o = run(cmd("slice").args([
        "diff",
        t,
        t,
        "--test-a",
        "test_line_total[pen-1-100]",
        "--test-b",
        "test_line_total[pen-3-300]",
        "--color",
        "never",
    ]));
    let (out, err) = texts(&o);
    assert!(o.status.success(), "{err}");
    // The first instance computed the session fixture (which filled the price cache), the
    // second reused it; the paths start at the code under test (no runner line, no test
    // function, no fixture of a test file), so line_total's calls, the same in both, meet.
    // How each run ended, at the top: the run's exit status and counts, then the test compared.
    let ends = "# run A ended: exit status 1 (11 tests: 2 failed, 7 passed, 1 skipped, 1 xfailed); compared here:\n\
                #   tests/test_totals.py::test_line_total[pen-1-100]: passed\n\
                # run B ended: exit status 1 (11 tests: 2 failed, 7 passed, 1 skipped, 1 xfailed); compared here:\n\
                #   tests/test_totals.py::test_line_total[pen-3-300]: passed\n\
                # functions only in A ";
    assert_eq!(out.lines().nth(2), Some(ends.lines().next().unwrap_or_default()), "{out}");
    assert!(out.contains(ends), "{out}");
    // A failing test compared: its failure, as `slice tests` lists it.
    let o = run(cmd("slice").args(["diff", t, t, "--test-a", "test_line_total[pen-1-100]", "--test-b", "failed", "--color", "never"]));
    let (failed, err) = texts(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        failed.contains(
            "compared here:\n\
             #   tests/test_totals.py::test_bulk_discount_starts_at_ten: AssertionError: assert 1000 == 900 at tests/test_totals.py:17\n\
             #   tests/test_unit_format.py::FormatTest::test_bulk_lamps: AssertionError: "
        ),
        "{failed}"
    );
    let paths: Vec<&str> = out.lines().filter(|l| !l.starts_with("---") && !l.starts_with("+++") && !l.starts_with('#')).collect();
    assert_eq!(paths, ["- load_prices  (invoice/catalogue.py:13)", "-   parse_cents  (invoice/catalogue.py:8) ×3"], "{out}");
    assert!(out.contains("# functions only in A (1): parse_cents (invoice/catalogue.py:8)\n# functions only in B (0): none\n"), "{out}");
    // The venv's CPython recorded no lines: that is what the note says (not that they are the
    // run's rather than a test's).
    assert!(out.contains("\n# Neither run recorded the lines that ran (") && !out.contains("per run, not per test"), "{out}");
    // A prompt within a budget: sources dropped (said), never over it; too small is an error.
    let q = "Why does the first test take longer?";
    let prompt = |extra: &[&str]| {
        let base = ["diff", t, t, "--test-a", "test_line_total[pen-1-100]", "--test-b", "failed", "--format", "prompt", "-q", q];
        run(cmd("slice").args(base).args(extra))
    };
    let o = prompt(&[]);
    let (full, _) = texts(&o);
    assert!(o.status.success());
    assert!(full.contains("Two parts of one recorded run are compared (run A and run B below): `"), "{full}");
    let full_tokens = analyzer::tokens::Tokenizer::O200kBase.count(&full);
    // (How each run ended, the failure among it, is never cut: the budget leaves room for it.)
    let budget = (full_tokens * 5 / 6).to_string();
    let o = prompt(&["--budget", &budget]);
    let (cut, err) = texts(&o);
    assert!(o.status.success(), "{err}");
    assert!(analyzer::tokens::Tokenizer::O200kBase.count(&cut) <= full_tokens * 5 / 6);
    assert!(cut.contains("To fit the budget, the source of "), "{cut}");
    let o = run(cmd("slice").args(["diff", t, t, "--format", "prompt", "-q", q, "--budget", "50"]));
    assert_eq!(o.status.code(), Some(1));
    assert!(texts(&o).1.contains("--budget 50 is too small for this diff"), "{:?}", texts(&o));
    let o = run(cmd("slice").args(["diff", t, t, "--budget", "50"]));
    assert_eq!(o.status.code(), Some(2), "--budget needs --format prompt");
}

/// Two whole runs of the suite, the bug fixed in A (the fix calls a helper the bug did not):
/// the diff's paths start at the tests and what only one run did is the code under test, not
/// pytest's assertion rewriting and failure reporting; every hint names an option `slice diff`
/// has.
#[test]
fn whole_runs_are_diffed_without_the_runner() {
    let d = scratch();
    let (_, fail) = suite(d.path());
    let fixed = d.path().join("fixed");
    std::fs::create_dir_all(&fixed).unwrap();
    let proj = project(&fixed);
    let totals = proj.join("invoice/totals.py");
    let text = std::fs::read_to_string(&totals).unwrap();
    let text = text.replace("    if quantity > BULK_QUANTITY:\n", "    if at_least(quantity, BULK_QUANTITY):\n")
        + "\n\ndef at_least(quantity, minimum):\n    return quantity >= minimum\n";
    std::fs::write(&totals, text).unwrap();
    let py = venv_python();
    let (pass, code) = record(&proj, "pass.d", &[py.to_str().unwrap(), "-m", "pytest", "-q", "-p", "no:cacheprovider"]);
    assert_eq!(code, 0, "the fix makes the suite pass");
    // `--test failed` of the passing run and the failing one: in the passing run, the tests
    // that failed in the other.
    let o = run(cmd("slice").args(["diff", pass.to_str().unwrap(), fail.to_str().unwrap(), "--test", "failed", "--color", "never"]));
    let (out, err) = texts(&o);
    assert!(o.status.success(), "{err}");
    let compared: Vec<&str> = out.lines().skip_while(|l| !l.starts_with("# run A ended")).skip(1).take(2).collect();
    assert_eq!(
        compared,
        [
            "#   tests/test_totals.py::test_bulk_discount_starts_at_ten: passed",
            "#   tests/test_unit_format.py::FormatTest::test_bulk_lamps: passed"
        ],
        "{out}"
    );
    assert!(out.contains("# functions only in A (1): at_least (invoice/totals.py:26)\n"), "{out}");
    assert!(out.lines().any(|l| l.starts_with('-') && l.contains(" at_least  (invoice/totals.py:26)")), "{out}");
    let o = run(cmd("slice").args(["diff", pass.to_str().unwrap(), fail.to_str().unwrap(), "--color", "never"]));
    let (out, err) = texts(&o);
    assert!(o.status.success(), "{err}");
    let lines: Vec<&str> = out.lines().collect();
    // How each run ended comes first: the fixed run passed; the failing one's failures are
    // listed as `slice tests` lists them.
    let failures: Vec<String> = slice(&["tests", fail.to_str().unwrap()])
        .lines()
        .skip_while(|l| *l != "failures:")
        .skip(1)
        .take(2)
        .map(|l| format!("# {l}"))
        .collect();
    assert_eq!(
        failures,
        [
            "#   tests/test_totals.py::test_bulk_discount_starts_at_ten: AssertionError: assert 1000 == 900 at tests/test_totals.py:17",
            "#   tests/test_unit_format.py::FormatTest::test_bulk_lamps: AssertionError: '305.00' != '274.50' at tests/test_unit_format.py:14",
        ]
    );
    assert_eq!(
        lines[2..6],
        [
            "# run A ended: exit status 0 (11 tests: 9 passed, 1 skipped, 1 xfailed)",
            "# run B ended: exit status 1 (11 tests: 2 failed, 7 passed, 1 skipped, 1 xfailed); failing:",
            failures[0].as_str(),
            failures[1].as_str(),
        ],
        "{out}"
    );
    assert_eq!(lines[6], "# functions only in A (1): at_least (invoice/totals.py:26)", "{out}");
    // Only in B: nothing of the runner. (unittest's failure message builds difflib's named
    // tuples, whose `__new__` is code generated in `<string>`, with the Pythons that do so.)
    assert!(matches!(lines[7], "# functions only in B (0): none" | "# functions only in B (1): <lambda> (<string>:1)"), "{out}");
    let tree: Vec<&str> = lines[9..].iter().copied().filter(|l| !l.contains("(<string>:") && !l.starts_with('#')).collect();
    assert_eq!(
        tree,
        [
            "  FormatTest.setUp  (tests/test_unit_format.py:7)",
            "    line_total  (invoice/totals.py:16)",
            "      bulk_discount  (invoice/totals.py:9)",
            "-       at_least  (invoice/totals.py:26) ×2",
            "  FormatTest.test_bulk_lamps  (tests/test_unit_format.py:13)",
            "    line_total  (invoice/totals.py:16)",
            "      bulk_discount  (invoice/totals.py:9)",
            "-       at_least  (invoice/totals.py:26)",
            "  test_line_total  (tests/test_totals.py:6)",
            "    line_total  (invoice/totals.py:16)",
            "      bulk_discount  (invoice/totals.py:9)",
            "-       at_least  (invoice/totals.py:26) ×3",
            "  test_bulk_discount_above_ten  (tests/test_totals.py:12)",
            "    line_total  (invoice/totals.py:16)",
            "      bulk_discount  (invoice/totals.py:9)",
            "-       at_least  (invoice/totals.py:26)",
            "  test_bulk_discount_starts_at_ten  (tests/test_totals.py:16)",
            "    line_total  (invoice/totals.py:16)",
            "      bulk_discount  (invoice/totals.py:9)",
            "-       at_least  (invoice/totals.py:26)",
        ],
        "{out}"
    );
    assert!(!err.contains("`--test failed`") && err.contains("`--test-a ID --test-b ID`"), "{err}");
    assert!(err.contains("The test runner (_pytest, execnet, pluggy, pytest, xdist) is left out of the tree"), "{err}");
    // `--show-plumbing` keeps the runner.
    let o = run(cmd("slice").args(["diff", pass.to_str().unwrap(), fail.to_str().unwrap(), "--show-plumbing", "--color", "never"]));
    let (out, _) = texts(&o);
    assert!(out.contains("_call_reprcompare"), "{out}");
    // A trace without tests: the option in the error is the one given.
    let cwd = d.path().join("prog");
    std::fs::create_dir_all(&cwd).unwrap();
    std::fs::write(cwd.join("ok.py"), "def main():\n    return 1\n\nmain()\n").unwrap();
    let (plain, code) = record(&cwd, "plain.d", &[&slice_trace_e2e::python(), "ok.py"]);
    assert_eq!(code, 0);
    let o = run(cmd("slice").args(["diff", fail.to_str().unwrap(), plain.to_str().unwrap(), "--test-a", "failed", "--test-b", "main"]));
    assert_eq!(o.status.code(), Some(1));
    assert!(texts(&o).1.contains("plain.d: the trace recorded no tests; `--test-b` needs a run of pytest"), "{:?}", texts(&o));
    // `slice tests` on it: an error, as `--test` is, and nothing on standard output.
    let o = run(cmd("slice").args(["tests", plain.to_str().unwrap()]));
    let (out, err) = texts(&o);
    assert_eq!((o.status.code(), out.as_str()), (Some(1), ""), "{err}");
    assert!(err.contains("plain.d: the trace recorded no tests (`slice tests` lists the tests of a run of pytest"), "{err}");
    let o = run(cmd("slice").args(["tests", fail.to_str().unwrap(), "--test", "test_nothing"]));
    let (out, err) = texts(&o);
    assert_eq!((o.status.code(), out.as_str()), (Some(1), ""), "{err}");
    assert!(err.contains("no recorded test matches \"test_nothing\" (11 tests); `slice tests"), "{err}");
}

const CHUNKS: &str =
    "def last_chunk(items, n):\n    rest = len(items) % n\n    if rest == 0:\n        return items[-n:]\n    return items[-rest:]\n";

/// A test that passes, then fails after an edit that changes no call (an off-by-one in a
/// comparison): the two runs reach the same functions, and the diff tells them apart by the
/// lines only one ran, listed and marked in the function's source (shown as the failing run
/// ran it, the note naming the run whose copy differs), after how each run ended. Two runs
/// that ran the same lines differ in values only: their functions' source is shown.
#[test]
fn a_diff_of_runs_that_call_the_same_functions_shows_the_lines_only_one_ran() {
    let d = scratch();
    let proj = pkg_project(
        &d.path().join("proj"),
        ("chunks.py", CHUNKS),
        ("test_chunks.py", "from pkg.chunks import last_chunk\n\n\ndef test_even():\n    assert last_chunk([1, 2, 3, 4], 2) == [3, 4]\n"),
    );
    let py = venv_python();
    let rec = |name: &str| {
        let out = d.path().join(name);
        let args = [
            "run",
            "--lines",
            "-q",
            "-o",
            out.to_str().unwrap(),
            "--",
            py.to_str().unwrap(),
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
        ];
        let o = run(cmd("trace").current_dir(&proj).env("PYTHONDONTWRITEBYTECODE", "1").args(args));
        (out, o.status.code())
    };
    let (pass, code) = rec("pass.d");
    assert_eq!(code, Some(0));
    std::fs::write(proj.join("pkg/chunks.py"), CHUNKS.replace("rest == 0", "rest == 1")).unwrap();
    let (fail, code) = rec("fail.d");
    assert_eq!(code, Some(1));
    let (pass, fail) = (pass.to_str().unwrap(), fail.to_str().unwrap());
    let o = run(cmd("slice").args(["diff", pass, fail, "--color", "never"]));
    let (out, err) = texts(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        out.contains(
            "# both runs reached exactly the same call paths\n# pkg/chunks.py: its content differs between the runs (the \
             fingerprints each run took), but run A's copy is neither on disk nor in git, so whether the functions in it both runs \
             reached changed cannot be told: last_chunk.\n# functions both runs reached whose lines ran differently: 1\n\
             #   last_chunk (pkg/chunks.py:1): only in A: 4; only in B: 5\n"
        ),
        "{out}"
    );
    let o =
        run(cmd("slice").args(["diff", pass, fail, "--format", "prompt", "--no-budget", "-q", "Why does the last chunk hold every item?"]));
    let (p, err) = texts(&o);
    assert!(o.status.success(), "{err}");
    let note = format!("> pkg/chunks.py: shown as `{fail}` ran it; the file changed since `{pass}` ran\n");
    assert!(p.contains(&note), "{p}");
    let ends =
        "## How each run ended\n\nRun A: exit status 0 (1 test: 1 passed).\n\nRun B:\n\n```text\nThe run failed: exit status 1 (1 test: 1 failed).\n```\n";
    assert!(p.contains(ends), "{p}");
    assert!(p.contains("```text\nFAILED test_chunks.py::test_even, "), "{p}");
    let lines = "## Lines that ran in only one run\n\nFunctions both runs reached whose lines ran differently (line numbers of run B's \
                 copy of the file):\n- `last_chunk` (pkg/chunks.py:1): only in run A: line 4; only in run B: line 5\n";
    assert!(p.contains(lines), "{p}");
    let code =
        "#### `last_chunk` (pkg/chunks.py:1-5): both runs; its lines ran differently\n\n_over both runs' tests: ran in 1 of 1 failing test, 1 of 1 passing \
                (Ochiai 0.71)_\n\n```python\ndef last_chunk(items, n):\n    \
                rest = len(items) % n\n    if rest == 1:\n        return items[-n:]  # <- ran only in run A\n    return items[-rest:]  \
                # <- ran only in run B\n```\n";
    assert!(p.contains(code), "{p}");
    // The edit undone: the file is run A's copy again, which is shown, and the note says so.
    std::fs::write(proj.join("pkg/chunks.py"), CHUNKS).unwrap();
    let o = run(cmd("slice").args(["diff", pass, fail, "--format", "prompt", "--no-budget", "-q", "q"]));
    let (p, _) = texts(&o);
    let note = format!("> pkg/chunks.py: shown as `{pass}` ran it; the file changed since `{fail}` ran\n");
    assert!(p.contains(&note) && p.contains("    if rest == 0:\n        return items[-n:]  # <- ran only in run A\n"), "{p}");
    std::fs::write(proj.join("pkg/chunks.py"), CHUNKS.replace("rest == 0", "rest == 1")).unwrap();
    // The failing run against itself: the same paths and lines; the code both ran is shown.
    let o = run(cmd("slice").args(["diff", fail, fail, "--format", "prompt", "--no-budget", "-q", "q"]));
    let (p, _) = texts(&o);
    assert!(p.contains("The runs took the same paths through the same lines: they differ in the values computed"), "{p}");
    assert!(p.contains("#### `last_chunk` (pkg/chunks.py:1-5): both runs, the same lines\n"), "{p}");
}

/// Two checkouts of `pkg/sizes.py` (`source` of its comparison operator) with one test file,
/// `fixed` (`<=`, the test passes) and `buggy` (`<`, it fails), each recorded by pytest: their
/// traces.
fn fixed_and_buggy(dir: &Path, source: &dyn Fn(&str) -> String, test: &str) -> (PathBuf, PathBuf) {
    let py = venv_python();
    let mut traces = Vec::new();
    for (name, op) in [("fixed", "<="), ("buggy", "<")] {
        let proj = pkg_project(&dir.join(name), ("sizes.py", &source(op)), ("test_sizes.py", test));
        let (t, code) = record(&proj, &format!("{name}.d"), &[py.to_str().unwrap(), "-m", "pytest", "-q", "-p", "no:cacheprovider"]);
        assert_eq!(code, if op == "<=" { 0 } else { 1 });
        traces.push(t);
    }
    let b = traces.pop().unwrap();
    (traces.pop().unwrap(), b)
}

/// Two releases of a package, each in its own checkout (the fixed one passes, the buggy one
/// fails): the fix changed a comparison, not which lines run, so only the functions' text tells
/// the runs apart. The diff lists the function as changed and keeps its source first, ahead of
/// the functions both runs ran alike.
#[test]
fn a_diff_of_two_checkouts_lists_the_function_whose_text_differs() {
    let d = scratch();
    let source = |op: &str| {
        format!(
            "def describe(items):\n    words = [str(i) for i in items]\n    return ', '.join(words)\n\n\n\
             def is_small(n):\n    limit = 2\n    return n {op} limit\n"
        )
    };
    let test = "from pkg.sizes import describe, is_small\n\n\ndef test_two_is_small():\n    assert describe([1, 2]) == '1, 2'\n    \
                assert is_small(2)\n";
    let (a, b) = fixed_and_buggy(d.path(), &source, test);
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    // The summary counts it as a function whose source differs, not one that ran other lines.
    let (_, err) = texts(&run(cmd("slice").args(["diff", a, b])));
    assert!(err.contains("; 1 function both reached has different source\n") && !err.contains("ran different lines"), "{err}");
    let o = run(cmd("slice").args(["diff", a, b, "--format", "prompt", "--no-budget", "-q", "Why is 2 not small?"]));
    let (p, err) = texts(&o);
    assert!(o.status.success(), "{err}");
    // (The venv's CPython records no lines by default: only the text is compared.)
    let lines = "Functions both runs reached whose source differs between the runs (line numbers of run B's copy of the file):\n\
                 - `is_small` (pkg/sizes.py:6): its source differs between the runs (3 lines in run A, 3 in run B): not compared line by line\n";
    assert!(p.contains(lines), "{p}");
    let heading = "#### `is_small` (pkg/sizes.py:6-8): both runs; its source differs between the runs (shown as run A ran it)\n";
    let at = p.find(heading).unwrap_or_else(|| panic!("{p}"));
    // `describe`, which both ran alike, is not shown.
    assert!(!p.contains("#### `describe`"), "{p}");
    assert!(p[at..].contains("def is_small(n):\n    limit = 2\n    return n <= limit\n"), "run A's copy: {p}");
    // What changed, as a unified diff of the two copies.
    let edit = "How run B's copy differs from run A's (`-` run A's lines, `+` run B's):\n\n```diff\n@@ run B's line 7 @@\n     \
                limit = 2\n-    return n <= limit\n+    return n < limit\n```\n";
    assert!(p[at..].contains(edit), "{p}");
    // A budget a few tokens short of the whole prompt: the sources stay, the edit goes first,
    // and a note says so.
    let tokens = |text: &str| -> usize {
        let f = d.path().join("prompt.md");
        std::fs::write(&f, text).unwrap();
        run_ok(cmd("slice").arg("tokens").arg(&f)).trim().parse().unwrap()
    };
    let budget = (tokens(&p) - 5).to_string();
    let o = run(cmd("slice").args(["diff", a, b, "--format", "prompt", "--budget", &budget, "-q", "Why is 2 not small?"]));
    let (cut, err) = texts(&o);
    assert!(o.status.success(), "{err}");
    assert!(cut.contains(heading) && !cut.contains("```diff"), "{cut}");
    assert!(cut.contains("How run B's copy differs from run A's is left out to fit the budget for 1 function."), "{cut}");
    let o = run(cmd("slice").args(["diff", a, b, "--color", "never"]));
    let (out, _) = texts(&o);
    assert!(
        out.contains(
            "# functions both runs reached whose source differs: 1 (`--format prompt` shows how their source differs)\n#   is_small \
             (pkg/sizes.py:6): source differs (3 lines in A, 3 in B)\n"
        ),
        "{out}"
    );
}

/// A diff whose runs part ways below a caller, where the function that decides the way changed
/// between the checkouts: that function's source comes first, ahead of its caller and of what
/// each run then called, which follow in call order.
#[test]
fn a_diff_prompt_leads_with_the_function_whose_source_changed() {
    let d = scratch();
    let source = |op: &str| {
        format!(
            "def label(n):\n    if is_small(n):\n        return small_name()\n    return big_name()\n\n\n\
             def is_small(n):\n    return n {op} 2\n\n\n\
             def small_name():\n    return 'small'\n\n\n\
             def big_name():\n    return 'big'\n"
        )
    };
    let test = "from pkg.sizes import label\n\n\ndef test_two_is_small():\n    assert label(2) == 'small'\n";
    let (a, b) = fixed_and_buggy(d.path(), &source, test);
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let o = run(cmd("slice").args(["diff", a, b, "--format", "prompt", "--no-budget", "-q", "Why is 2 not small?"]));
    let (p, err) = texts(&o);
    assert!(o.status.success(), "{err}");
    let headings: Vec<&str> = p.lines().filter(|l| l.starts_with("#### ")).collect();
    assert_eq!(
        headings,
        [
            "#### `is_small` (pkg/sizes.py:7-8): both runs; its source differs between the runs (shown as run A ran it)",
            "#### `test_two_is_small` (test_sizes.py:4-5): both runs; it calls where they part ways",
            "#### `label` (pkg/sizes.py:1-4): both runs; from here they call different functions",
            "#### `small_name` (pkg/sizes.py:11-12): only run A reached it here",
            "#### `big_name` (pkg/sizes.py:15-16): only run B reached it here",
        ],
        "{p}"
    );
    assert!(p.contains(", in call order, except that the function whose source differs between the runs comes first.\n"), "{p}");
    // The counts pool both runs' tests, and say so.
    assert!(
        p.contains("only run B reached it here\n\n_over both runs' tests: ran in 1 of 1 failing test, 0 of 1 passing (Ochiai 1.00)_\n"),
        "{p}"
    );
}

/// Doctests that unittest runs (a test module's `load_tests` adds them): a failing one is
/// placed at its first failing example, in the docstring of the function it documents, and its
/// prompt shows the examples' report, the function's source, and no other doctest's code as
/// state built earlier.
#[test]
fn a_failing_doctest_is_placed_at_its_example() {
    let d = scratch();
    // (unittest runs a module's doctests by name: `double`'s, then the failing `halve`'s.)
    let module = "def double(x):\n    \"\"\"Twice x.\n\n    >>> double(2)\n    4\n    \"\"\"\n    return x + x\n\n\n\
                  def halve(x):\n    \"\"\"Half x.\n\n    >>> halve(4)\n    2\n    \"\"\"\n    return x // 2 + 1\n";
    let test = "import doctest\nimport pkg.calc\n\n\ndef load_tests(loader, tests, ignore):\n    \
                tests.addTests(doctest.DocTestSuite(pkg.calc))\n    return tests\n";
    let proj = pkg_project(&d.path().join("proj"), ("calc.py", module), ("test_calc.py", test));
    let py = venv_python();
    let (t, code) = record(&proj, "doc.d", &[py.to_str().unwrap(), "-m", "unittest", "test_calc"]);
    assert_eq!(code, 1);
    let t = t.to_str().unwrap();
    let table = slice(&["tests", t]);
    assert!(table.contains("  pkg.calc.halve: AssertionError: Failed doctest test for pkg.calc.halve at pkg/calc.py:13\n"), "{table}");
    let o = run(cmd("slice").current_dir(&proj).args(["from-trace", t, "--test", "pkg.calc.halve", "-q", "Why is halve(4) 3?"]));
    let (p, err) = texts(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        p.contains("FAILED pkg.calc.halve, ")
            && p.contains("\nat pkg/calc.py:13\nAssertionError: Failed doctest test for pkg.calc.halve\n"),
        "{p}"
    );
    assert!(
        p.contains("Failed example:\n    halve(4)\nExpected:\n    2\nGot:\n    3\n") && !p.contains("raise self.failureException"),
        "{p}"
    );
    assert!(p.contains("#### `halve` (pkg/calc.py:10-16)") && !p.contains("built earlier") && !p.contains("`double`"), "{p}");
}

/// One checkout outside git, edited between a passing and a failing run: neither copy can be
/// shown as the other run ran it, but the fingerprints each run took say the file differs. The
/// diff says so (text and prompt) and claims neither the same lines nor per-test lines when no
/// run recorded lines.
#[test]
fn a_file_edited_between_runs_outside_git_is_named_as_differing() {
    let d = scratch();
    let source = |op: &str| format!("def is_small(n):\n    limit = 2\n    return n {op} limit\n");
    let test = "from pkg.sizes import is_small\n\n\ndef test_two():\n    assert is_small(2)\n\n\ndef test_one():\n    assert is_small(1)\n";
    let proj = pkg_project(&d.path().join("proj"), ("sizes.py", &source("<=")), ("test_sizes.py", test));
    let py = venv_python();
    let args = |name: &str| {
        vec![
            "--no-lines".to_string(),
            "--".into(),
            py.display().to_string(),
            "-m".into(),
            "pytest".into(),
            "-q".into(),
            "-p".into(),
            "no:cacheprovider".into(),
            format!("--basetemp={}", d.path().join(name).display()),
        ]
    };
    let rec = |name: &str| {
        let out = d.path().join(name);
        let o = run(cmd("trace").current_dir(&proj).env("PYTHONDONTWRITEBYTECODE", "1").arg("run").arg("-o").arg(&out).args(args(name)));
        (out, o.status.code())
    };
    let (pass, code) = rec("pass.d");
    assert_eq!(code, Some(0));
    std::fs::write(proj.join("pkg/sizes.py"), source("<")).unwrap();
    let (fail, code) = rec("fail.d");
    assert_eq!(code, Some(1));
    let (pass, fail) = (pass.to_str().unwrap(), fail.to_str().unwrap());
    let o = run(cmd("slice").args(["diff", pass, fail, "--test", "failed", "--color", "never"]));
    let (out, err) = texts(&o);
    assert!(o.status.success(), "{err}");
    let sentence = "pkg/sizes.py: its content differs between the runs (the fingerprints each run took), but run A's copy is neither \
                    on disk nor in git, so whether the functions in it both runs reached changed cannot be told: is_small.";
    assert!(out.contains(&format!("\n# {sentence}\n")), "{out}");
    assert!(
        out.contains("\n# Neither run recorded the lines that ran") && !out.contains("Lines are recorded per run, not per test"),
        "{out}"
    );
    let o =
        run(cmd("slice").args(["diff", pass, fail, "--test", "failed", "--format", "prompt", "--no-budget", "-q", "Why is 2 not small?"]));
    let (p, err) = texts(&o);
    assert!(o.status.success(), "{err}");
    assert!(p.contains(&format!("\n> {sentence}\n")), "{p}");
    assert!(p.contains("#### `is_small` (pkg/sizes.py:1-3): both runs, the same calls\n") && !p.contains("the same lines"), "{p}");
}

/// `slice tests`' ranking leaves out what a prompt leaves out: the standard library (what the
/// code under test called of it: `calendar.monthrange`) and framework plumbing (a framework on
/// the list, installed in a site-packages directory, that the code under test calls and no test
/// calls directly), each counted, and shown with `--stdlib` and `--show-plumbing`.
#[test]
fn the_ranking_leaves_out_the_standard_library_and_plumbing_as_a_prompt_does() {
    let d = scratch();
    let days = "import calendar\nimport fire\n\n\ndef last_day(year, month):\n    return fire.dispatch(_last, year, month)\n\n\n\
                def _last(year, month):\n    return calendar.monthrange(year, month)[1]\n";
    let test = "from pkg.days import last_day\n\n\ndef test_january():\n    assert last_day(2023, 1) == 31\n\n\n\
                def test_february():\n    assert last_day(2024, 2) == 28\n";
    let proj = pkg_project(&d.path().join("proj"), ("days.py", days), ("test_days.py", test));
    let fire = d.path().join("vendor/site-packages/fire");
    std::fs::create_dir_all(&fire).unwrap();
    std::fs::write(
        fire.join("__init__.py"),
        "def dispatch(fn, *args):\n    return _call(fn, args)\n\n\ndef _call(fn, args):\n    return fn(*args)\n",
    )
    .unwrap();
    let out = d.path().join("days.d");
    let py = venv_python();
    let o = run(cmd("trace")
        .current_dir(&proj)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("PYTHONPATH", d.path().join("vendor/site-packages"))
        .args(["run", "-q", "-o", out.to_str().unwrap(), "--", py.to_str().unwrap(), "-m", "pytest", "-q", "-p", "no:cacheprovider"]));
    assert_eq!(o.status.code(), Some(1), "{:?}", texts(&o));
    let t = out.to_str().unwrap();
    let ranking = |extra: &[&str]| -> Vec<String> {
        let text = slice(&[&["tests", t, "--rank", "50"], extra].concat());
        text.lines().skip_while(|l| !l.starts_with("functions that go with failure")).skip(1).map(str::to_string).collect()
    };
    let all = ranking(&["--stdlib", "--show-plumbing"]);
    let stdlib = all.iter().filter(|l| l.contains("  (stdlib/")).count();
    assert!(stdlib > 0 && all.iter().any(|l| l.contains("  monthrange  (stdlib/calendar.py:")), "{all:?}");
    assert_eq!(
        all.iter().filter(|l| l.contains("(site-packages/fire/")).map(|l| l.trim()).collect::<Vec<_>>(),
        [
            "0.707  failing   1  passing     1  _call  (site-packages/fire/__init__.py:5)",
            "0.707  failing   1  passing     1  dispatch  (site-packages/fire/__init__.py:1)",
        ],
        "{all:?}"
    );
    // By default: the same ranking without them, and how many were left out.
    let mut want: Vec<String> = all.iter().filter(|l| !l.contains("  (stdlib/") && !l.contains("(site-packages/fire/")).cloned().collect();
    assert_eq!(
        want,
        [
            "  1.000  failing   1  passing     0  test_february  (test_days.py:8)",
            "  0.707  failing   1  passing     1  _last  (pkg/days.py:9)",
            "  0.707  failing   1  passing     1  last_day  (pkg/days.py:5)",
        ]
    );
    want.push(format!(
        "  left out, as a prompt leaves them out: {stdlib} functions of the standard library (`--stdlib` shows them); 2 functions of \
         framework plumbing (`--show-plumbing` shows them)"
    ));
    assert_eq!(ranking(&[]), want);
    let json: serde_json::Value = serde_json::from_str(&slice(&["tests", t, "--format", "json", "--rank", "50", "--stdlib"])).unwrap();
    assert_eq!(json["ranking_left_out"], serde_json::json!({"stdlib": 0, "plumbing": 2}));
    assert_eq!(json["ranking"].as_array().map(Vec::len), Some(all.len() - 2), "{json}");
}

/// A project whose `addopts` turn pytest's colour on: a failing string comparison has pytest
/// colour its diff with pygments (pytest's own dependency), in the failing test only. That is
/// the runner's work: no pygments function in the test's prompt, in its tree or in the
/// spectrum, and no terminal escapes in the failure the prompt shows.
#[test]
fn the_runners_coloured_report_is_its_own_work_not_the_tests() {
    let d = scratch();
    let module = "def ordinal(n):\n    if n % 100 in (11, 12):\n        return f\"{n}th\"\n    \
                  return f\"{n}\" + {1: \"st\", 2: \"nd\", 3: \"rd\"}.get(n % 10, \"th\")\n";
    let test = "from pkg.ordinal import ordinal\n\n\ndef test_eleven():\n    assert ordinal(11) == \"11th\"\n\n\n\
                def test_thirteen():\n    assert ordinal(13) == \"13th\"\n";
    let proj = pkg_project(&d.path().join("proj"), ("ordinal.py", module), ("test_ordinal.py", test));
    std::fs::write(proj.join("pytest.ini"), "[pytest]\naddopts = --color=yes\n").unwrap();
    let py = venv_python();
    let (t, code) = record(&proj, "colour.d", &[py.to_str().unwrap(), "-m", "pytest", "-q", "-p", "no:cacheprovider"]);
    assert_eq!(code, 1);
    let t = t.to_str().unwrap();
    let q = "ordinal(13) gives 13rd instead of 13th. Why?";
    // pygments did run, in the failing test (`--show-plumbing` shows the runner's work).
    let all = slice(&["from-trace", t, "--test", "failed", "--show-plumbing", "-q", q]);
    assert!(all.contains("pygments"), "{all}");
    let prompt = slice(&["from-trace", t, "--test", "failed", "-q", q]);
    assert!(!prompt.contains("pygments") && !prompt.contains("\x1b") && !prompt.contains('\u{1b}'), "{prompt}");
    assert!(prompt.contains("E         - 13th\nE         + 13rd\n"), "{prompt}");
    let tree = prompt.split("### Call tree").nth(1).and_then(|t| t.split("### Source code").next()).unwrap_or_default();
    assert_eq!(
        tree.lines().filter(|l| !l.trim().is_empty() && !l.starts_with('#') && !l.starts_with("```")).collect::<Vec<_>>(),
        ["test_thirteen", "  ordinal"],
        "{prompt}"
    );
    assert!(prompt.contains("    return f\"{n}\" + {1: \"st\", 2: \"nd\", 3: \"rd\"}.get(n % 10, \"th\")\n"), "{prompt}");
    let ranking = slice(&["tests", t, "--rank", "50"]);
    let ranked: Vec<&str> =
        ranking.lines().skip_while(|l| !l.starts_with("functions that go with failure")).skip(1).map(str::trim).collect();
    assert_eq!(
        ranked,
        [
            "1.000  failing   1  passing     0  test_thirteen  (test_ordinal.py:8)",
            "0.707  failing   1  passing     1  ordinal  (pkg/ordinal.py:1)",
        ],
        "{ranking}"
    );
}

/// The spectrum query of docs/views.md, run by DuckDB (its PyPI wheel) over two shards'
/// Parquet rows, gives `slice tests`' ranking of the same two traces (with the standard library
/// and framework plumbing, which the query does not leave out).
#[test]
fn shards_exported_as_parquet_rank_in_duckdb_as_slice_does() {
    let d = scratch();
    let proj = project(d.path());
    let py = venv_python();
    let (s1, _) =
        record(&proj, "shard1.d", &[py.to_str().unwrap(), "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_totals.py"]);
    let (s2, _) =
        record(&proj, "shard2.d", &[py.to_str().unwrap(), "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_unit_format.py"]);
    let shards = d.path().join("shards");
    std::fs::create_dir_all(&shards).unwrap();
    for (i, s) in [&s1, &s2].iter().enumerate() {
        let out = shards.join(format!("shard{}.parquet", i + 1));
        run_ok(cmd("slice").args(["export", s.to_str().unwrap(), "--format", "parquet", "-o", out.to_str().unwrap()]));
    }
    let ours: serde_json::Value = serde_json::from_str(&slice(&[
        "tests",
        s1.to_str().unwrap(),
        s2.to_str().unwrap(),
        "--format",
        "json",
        "--rank",
        "1000",
        "--stdlib",
        "--show-plumbing",
    ]))
    .unwrap();
    let ours: Vec<(String, u64, u64, String)> = ours["ranking"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["function"].as_str().unwrap().to_string(),
                f["failed"].as_u64().unwrap(),
                f["passed"].as_u64().unwrap(),
                format!("{:.6}", f["ochiai"].as_f64().unwrap()),
            )
        })
        .collect();
    assert!(ours.len() > 5 && ours.iter().any(|f| f.0 == "bulk_discount"), "{ours:?}");
    // The query, exactly as the documentation prints it.
    let doc = std::fs::read_to_string(slice_trace_e2e::root().join("docs/views.md")).unwrap();
    let start = doc.find("```sql\n-- spectrum").expect("the spectrum query in docs/views.md") + "```sql\n".len();
    let query = &doc[start..start + doc[start..].find("```").unwrap()];
    let query = query.replace("shards/*.parquet", &format!("{}/*.parquet", shards.display()));
    let duck = slice_trace_e2e::venv_with("duckdb-venv", &slice_trace_e2e::python(), &["duckdb==2.0.1"]).join("bin/python");
    let script = "import duckdb, json, sys\nrows = duckdb.sql(sys.stdin.read()).fetchall()\nprint(json.dumps([[r[0], r[3], r[4], '%.6f' % r[5]] for r in rows]))\n";
    let mut child = std::process::Command::new(&duck)
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        child.stdin.take().unwrap().write_all(query.as_bytes()).unwrap();
    }
    let o = child.wait_with_output().unwrap();
    let (out, err) = texts(&o);
    assert!(o.status.success(), "duckdb: {err}");
    let theirs: Vec<(String, u64, u64, String)> = serde_json::from_str(&out).unwrap();
    assert_eq!(theirs, ours);
}

/// pytest-xdist: the workers (recorded processes of their own) record the tests they ran; the
/// controller, which only relays their reports, records none.
#[test]
fn xdist_workers_keep_their_tests_and_the_controller_records_none() {
    let d = scratch();
    let proj = project(d.path());
    let py = venv_python();
    let (t, code) = record(&proj, "xdist.d", &[py.to_str().unwrap(), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2"]);
    assert_eq!(code, 1);
    let json: serde_json::Value = serde_json::from_str(&slice(&["tests", t.to_str().unwrap(), "--format", "json"])).unwrap();
    let tests = json["tests"].as_array().unwrap();
    // Each test once (the workers' order is theirs).
    let mut got = ids_and_outcomes(&json);
    got.sort();
    let mut want: Vec<(String, String)> = SUITE.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect();
    want.sort();
    assert_eq!(got, want);
    let pids: std::collections::BTreeSet<u64> = tests.iter().map(|x| x["pid"].as_u64().unwrap()).collect();
    assert!(!pids.is_empty() && pids.len() <= 2, "tests come from the workers: {pids:?}");
    let p = slice(&["from-trace", t.to_str().unwrap(), "--test", "failed", "-q", "q"]);
    assert!(p.contains("E       AssertionError: assert 1000 == 900") && p.contains("#### `bulk_discount`"), "{p}");
}

const CALC: &str = "def add(a, b):\n    return a + b + (1 if a == 2 else 0)\n\n\ndef div(a, b):\n    return a / b\n";

const CALC_TEST: &str = r#"import unittest

from calc import add, div


class CalcTest(unittest.TestCase):
    def test_add(self):
        self.assertEqual(add(2, 2),
                         4)

    def test_div(self):
        self.assertEqual(div(1, 0), 1)

    def test_ok(self):
        self.assertEqual(add(1, 1), 2)
"#;

/// `dir/proj`: [`CALC`] and its unittest tests, `tests/test_calc.py` ([`CALC_TEST`]).
fn calc_project(dir: &Path) -> PathBuf {
    let proj = dir.join("proj");
    std::fs::create_dir_all(proj.join("tests")).unwrap();
    std::fs::write(proj.join("calc.py"), CALC).unwrap();
    std::fs::write(proj.join("tests/__init__.py"), "").unwrap();
    std::fs::write(proj.join("tests/test_calc.py"), CALC_TEST).unwrap();
    proj
}

/// The failure blocks of a prompt's outcome (`FAILED ...`/`ERROR ...` up to the fence), the
/// duration replaced by `<duration>`.
fn failure_blocks(prompt: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur: Option<Vec<String>> = None;
    for l in prompt.lines() {
        match &mut cur {
            None if l.starts_with("FAILED ") || l.starts_with("ERROR ") => {
                let head = l.rsplit_once(", ").map_or(l, |(h, _)| h);
                cur = Some(vec![format!("{head}, <duration>")]);
            }
            Some(b) if l.starts_with("```") => {
                out.push(b.join("\n"));
                cur = None;
            }
            Some(b) => b.push(l.to_string()),
            None => {}
        }
    }
    out
}

/// A `python -m unittest` failure reads as pytest's does: the place relative to the run's
/// directory, the failing statement (the test file's innermost frame) whole, over the lines it
/// spans, the exception and its message; an error raised in the code under test likewise,
/// with its traceback. Module and discovery runs, CPython 3.11 and 3.12; and the same project
/// under pytest, whose statement is kept whole too.
#[test]
fn a_unittest_failure_shows_the_place_the_statement_and_the_exception_as_pytests_does() {
    let want_failed = "FAILED tests.test_calc.CalcTest.test_add, <duration>\nat tests/test_calc.py:8\n>   self.assertEqual(add(2, 2),\n                     4)\nE   AssertionError: 5 != 4";
    let want_error = "ERROR tests.test_calc.CalcTest.test_div, <duration>\nat tests/test_calc.py:12\n>   self.assertEqual(div(1, 0), 1)\n\
                      E   ZeroDivisionError: division by zero\ntraceback (innermost last):\n  tests/test_calc.py:12 (test_div)\n  calc.py:6 (div)";
    for minor in [11, 12] {
        let py = slice_trace_e2e::pyenv_python(minor).unwrap_or_else(|| panic!("no CPython 3.{minor} under $(pyenv root)/versions"));
        let d = scratch();
        let proj = calc_project(d.path());
        for (name, args) in [
            ("module.d", &["-m", "unittest", "tests.test_calc"][..]),
            ("discover.d", &["-m", "unittest", "discover", "-s", "tests", "-t", "."][..]),
        ] {
            let mut argv = vec![py.to_str().unwrap()];
            argv.extend_from_slice(args);
            let (t, code) = record(&proj, name, &argv);
            assert_eq!(code, 1, "3.{minor} {name}");
            let p = slice(&["from-trace", t.to_str().unwrap(), "--test", "failed", "-q", "Why do they fail?"]);
            assert_eq!(failure_blocks(&p), [want_failed, want_error], "3.{minor} {name}:\n{p}");
            let table = slice(&["tests", t.to_str().unwrap()]);
            assert!(
                table.contains("  tests.test_calc.CalcTest.test_add: AssertionError: 5 != 4 at tests/test_calc.py:8\n"),
                "3.{minor} {name}:\n{table}"
            );
        }
    }
    // pytest prints the failing statement whole, its first line marked (and, on CPython 3.11
    // and later, the failing part of an expression marked below it): the prompt keeps it so.
    let d = scratch();
    let proj = calc_project(d.path());
    let py = venv_python();
    let (t, code) = record(&proj, "pytest.d", &[py.to_str().unwrap(), "-m", "pytest", "-q", "-p", "no:cacheprovider"]);
    assert_eq!(code, 1);
    let p = slice(&["from-trace", t.to_str().unwrap(), "--test", "failed", "-q", "Why do they fail?"]);
    let want_pytest = [
        "FAILED tests/test_calc.py::CalcTest::test_add, <duration>\nat tests/test_calc.py:8\n>       self.assertEqual(add(2, 2),\n                         4)\nE       AssertionError: 5 != 4",
        "FAILED tests/test_calc.py::CalcTest::test_div, <duration>\nat calc.py:6\n>       return a / b\n               ^^^^^\nE       ZeroDivisionError: division by zero\n\
         traceback (innermost last):\n  tests/test_calc.py:12 (in test_div)\n  calc.py:6 (in div: ZeroDivisionError)",
    ];
    assert_eq!(failure_blocks(&p), want_pytest, "pytest:\n{p}");
}

const EVEN: &str = "def is_even(n):\n    return n % 2 == 0 or n == 3\n";

/// unittest-style tests with subtests: one failing (an assertion), one erroring, one skipped.
const SUBTEST_TEST: &str = r#"import unittest

from calc import is_even


class EvenTest(unittest.TestCase):
    def test_evens(self):
        for n in [0, 2, 3, 4]:
            with self.subTest("even", n=n):
                self.assertEqual(is_even(n), n % 2 == 0)

    def test_plain(self):
        self.assertTrue(is_even(2))


class KindsTest(unittest.TestCase):
    def test_kinds(self):
        with self.subTest(kind="error"):
            {}["missing"]
        with self.subTest(kind="skip"):
            self.skipTest("not today")
        with self.subTest():
            self.assertTrue(is_even(4))
"#;

/// pytest's own `subtests` fixture (pytest 9).
const SUBTEST_FIXTURE_TEST: &str = r#"from calc import is_even


def test_odds(subtests):
    for n in [1, 3, 5]:
        with subtests.test(n=n):
            assert not is_even(n)
"#;

/// A project of [`EVEN`] and `tests/test_sub.py` ([`SUBTEST_TEST`]), and with `fixture`
/// `tests/test_fix.py` ([`SUBTEST_FIXTURE_TEST`]).
fn subtest_project(dir: &Path, fixture: bool) -> PathBuf {
    let proj = dir.join("proj");
    std::fs::create_dir_all(proj.join("tests")).unwrap();
    std::fs::write(proj.join("calc.py"), EVEN).unwrap();
    std::fs::write(proj.join("tests/__init__.py"), "").unwrap();
    std::fs::write(proj.join("tests/test_sub.py"), SUBTEST_TEST).unwrap();
    if fixture {
        std::fs::write(proj.join("tests/test_fix.py"), SUBTEST_FIXTURE_TEST).unwrap();
    }
    proj
}

/// The fenced blocks of a prompt's `### Outcome` section, a duration at the end of a block's
/// first line replaced by `<duration>`.
fn outcome_blocks(prompt: &str) -> Vec<String> {
    let dur = regex::Regex::new(r", \d+(\.\d)? (ms|µs|s)$").unwrap();
    let section = prompt.split_once("### Outcome\n").map_or("", |x| x.1);
    let section = section.split_once("\n### ").map_or(section, |x| x.0);
    let mut out = Vec::new();
    let mut cur: Option<Vec<String>> = None;
    for l in section.lines() {
        match &mut cur {
            None if l.starts_with("```") => cur = Some(Vec::new()),
            Some(b) if l.starts_with("```") => {
                out.push(b.join("\n"));
                cur = None;
            }
            Some(b) if b.is_empty() => b.push(dur.replace(l, ", <duration>").into_owned()),
            Some(b) => b.push(l.to_string()),
            None => {}
        }
    }
    out
}

/// A row of `slice tests`: id, outcome, parent (empty for a test).
type Row = (String, String, String);

/// (id, outcome, parent) of each row of `slice tests --format json`, sorted (3.9 and 3.10
/// report a skipped subtest before the others, as their unittest does), and the spectrum's
/// failing and passing totals.
fn rows_and_totals(t: &Path) -> (Vec<Row>, (u64, u64)) {
    let json: serde_json::Value = serde_json::from_str(&slice(&["tests", t.to_str().unwrap(), "--format", "json"])).unwrap();
    let mut rows: Vec<(String, String, String)> = json["tests"]
        .as_array()
        .expect("a tests array")
        .iter()
        .map(|x| {
            let s = |k: &str| x[k].as_str().unwrap_or_default().to_string();
            (s("id"), s("outcome"), s("parent"))
        })
        .collect();
    rows.sort();
    (rows, (json["failed_total"].as_u64().unwrap_or(99), json["passed_total"].as_u64().unwrap_or(99)))
}

/// unittest's `self.subTest(...)` under `python -m unittest`, on every CPython the shim claims
/// (their unittest hands subtests to the result differently: 3.9 and 3.10 all at the test's
/// end, 3.11+ as each ends): each subtest is recorded under its test with its id, outcome and
/// failure; a test with a failing subtest fails (an erroring one: errs), once in the spectrum;
/// `--test failed` and the whole run's prompt show the test, then the failing subtest's
/// statement and exception.
#[test]
fn unittest_subtests_are_recorded_under_their_test_on_every_cpython() {
    let want_rows = {
        let t = |s: &str| format!("tests.test_sub.{s}");
        let mut v: Vec<(String, String, String)> = [
            (t("EvenTest.test_evens"), "failed", String::new()),
            (t("EvenTest.test_evens [even] (n=0)"), "passed", t("EvenTest.test_evens")),
            (t("EvenTest.test_evens [even] (n=2)"), "passed", t("EvenTest.test_evens")),
            (t("EvenTest.test_evens [even] (n=3)"), "failed", t("EvenTest.test_evens")),
            (t("EvenTest.test_evens [even] (n=4)"), "passed", t("EvenTest.test_evens")),
            (t("EvenTest.test_plain"), "passed", String::new()),
            (t("KindsTest.test_kinds"), "error", String::new()),
            (t("KindsTest.test_kinds (kind='error')"), "error", t("KindsTest.test_kinds")),
            (t("KindsTest.test_kinds (kind='skip')"), "skipped", t("KindsTest.test_kinds")),
            (t("KindsTest.test_kinds (<subtest>)"), "passed", t("KindsTest.test_kinds")),
        ]
        .into_iter()
        .map(|(a, b, c)| (a, b.to_string(), c))
        .collect();
        v.sort();
        v
    };
    let want_blocks = [
        "The run failed: exit status 1 (3 tests: 1 failed, 1 error, 1 passed).",
        "FAILED tests.test_sub.EvenTest.test_evens, <duration>\ncontains 1 failed subtest\n4 subtests: 1 failed, 3 passed",
        "FAILED tests.test_sub.EvenTest.test_evens [even] (n=3)\nat tests/test_sub.py:10\n>   self.assertEqual(is_even(n), n % 2 == 0)\nE   AssertionError: True != False",
        "ERROR tests.test_sub.KindsTest.test_kinds, <duration>\ncontains 1 failed subtest\n3 subtests: 1 error, 1 passed, 1 skipped",
        "ERROR tests.test_sub.KindsTest.test_kinds (kind='error')\nat tests/test_sub.py:19\n>   {}[\"missing\"]\nE   KeyError: 'missing'",
    ];
    for minor in 9..=13 {
        let py = slice_trace_e2e::pyenv_python(minor).unwrap_or_else(|| panic!("no CPython 3.{minor} under $(pyenv root)/versions"));
        let d = scratch();
        let proj = subtest_project(d.path(), false);
        let (t, code) = record(&proj, "unit.d", &[py.to_str().unwrap(), "-m", "unittest", "tests.test_sub"]);
        assert_eq!(code, 1, "3.{minor}");
        assert_eq!(rows_and_totals(&t), (want_rows.clone(), (2, 1)), "3.{minor}: each test counted once, a subtest's failure its test's");
        let p = slice(&["from-trace", t.to_str().unwrap(), "--test", "failed", "-q", "Why do they fail?"]);
        assert_eq!(outcome_blocks(&p), want_blocks, "3.{minor}:\n{p}");
        // The whole run's prompt says the same of its failing tests.
        let whole = slice(&["from-trace", t.to_str().unwrap(), "-q", "Why does the run fail?"]);
        assert_eq!(outcome_blocks(&whole), want_blocks, "3.{minor}:\n{whole}");
        // The failing subtest's tree is its test's.
        assert!(
            p.contains("#### test tests.test_sub.EvenTest.test_evens\n") && p.contains("#### `is_even` (calc.py:1-2)"),
            "3.{minor}:\n{p}"
        );
        // A subtest by its id: its test's tree, its own failure.
        let one = slice(&["from-trace", t.to_str().unwrap(), "--test", "tests.test_sub.EvenTest.test_evens [even] (n=3)", "-q", "q"]);
        assert_eq!(outcome_blocks(&one)[1..], want_blocks[1..3], "3.{minor}:\n{one}");
        let table = slice(&["tests", t.to_str().unwrap(), "--rank", "0"]);
        assert!(
            table.contains("-    tests.test_sub.EvenTest.test_evens [even] (n=3)\n")
                && table
                    .contains("  tests.test_sub.EvenTest.test_evens [even] (n=3): AssertionError: True != False at tests/test_sub.py:10\n")
                && table.contains("1 failed, 1 error, 1 passed; subtests: 1 failed, 1 error, 4 passed, 1 skipped; run failed: "),
            "3.{minor}:\n{table}"
        );
    }
}

/// pytest 9 reports subtests itself, of unittest's `subTest` and of its `subtests` fixture: each
/// is recorded under its test as pytest names it (`SUBFAILED(n=3) tests/test_fix.py::test_odds`),
/// its test failing "contains 1 failed subtest" as pytest says, once in the spectrum.
#[test]
fn pytest_subtests_of_unittest_and_of_the_fixture_are_recorded_under_their_test() {
    let d = scratch();
    let proj = subtest_project(d.path(), true);
    let py = venv_python();
    let (t, code) = record(&proj, "pytest.d", &[py.to_str().unwrap(), "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"]);
    assert_eq!(code, 1);
    let (rows, totals) = rows_and_totals(&t);
    let names: Vec<(&str, &str, &str)> = rows.iter().map(|(a, b, c)| (a.as_str(), b.as_str(), c.as_str())).collect();
    let (odds, evens, kinds) =
        ("tests/test_fix.py::test_odds", "tests/test_sub.py::EvenTest::test_evens", "tests/test_sub.py::KindsTest::test_kinds");
    assert_eq!(
        names,
        [
            (odds, "failed", ""),
            ("tests/test_fix.py::test_odds (n=1)", "passed", odds),
            ("tests/test_fix.py::test_odds (n=3)", "failed", odds),
            ("tests/test_fix.py::test_odds (n=5)", "passed", odds),
            (evens, "failed", ""),
            ("tests/test_sub.py::EvenTest::test_evens [even] (n=0)", "passed", evens),
            ("tests/test_sub.py::EvenTest::test_evens [even] (n=2)", "passed", evens),
            ("tests/test_sub.py::EvenTest::test_evens [even] (n=3)", "failed", evens),
            ("tests/test_sub.py::EvenTest::test_evens [even] (n=4)", "passed", evens),
            ("tests/test_sub.py::EvenTest::test_plain", "passed", ""),
            (kinds, "failed", ""),
            ("tests/test_sub.py::KindsTest::test_kinds (<subtest>)", "passed", kinds),
            ("tests/test_sub.py::KindsTest::test_kinds (kind='error')", "failed", kinds),
            ("tests/test_sub.py::KindsTest::test_kinds (kind='skip')", "skipped", kinds),
        ]
    );
    assert_eq!(totals, (3, 1), "each test counted once");
    let p = slice(&["from-trace", t.to_str().unwrap(), "--test", "test_odds", "-q", "Why?"]);
    assert_eq!(
        outcome_blocks(&p),
        [
            "The run failed: exit status 1 (4 tests: 3 failed, 1 passed).",
            "FAILED tests/test_fix.py::test_odds, <duration>\ncontains 1 failed subtest\n3 subtests: 1 failed, 2 passed",
            "FAILED tests/test_fix.py::test_odds (n=3), <duration>\nat tests/test_fix.py:7\n>               assert not is_even(n)\nE               assert not True\nE                +  where True = is_even(3)",
        ],
        "{p}"
    );
    assert!(p.contains("#### test tests/test_fix.py::test_odds\n") && p.contains("#### `is_even` (calc.py:1-2)"), "{p}");
    let p = slice(&["from-trace", t.to_str().unwrap(), "--test", "tests/test_sub.py::EvenTest::test_evens [even] (n=3)", "-q", "Why?"]);
    assert_eq!(
        outcome_blocks(&p)[2],
        "FAILED tests/test_sub.py::EvenTest::test_evens [even] (n=3)\nat tests/test_sub.py:10\n>               self.assertEqual(is_even(n), n % 2 == 0)\nE               AssertionError: True != False",
        "{p}"
    );
}

/// A bug that breaks most of a suite: `--test failed`'s prompt shows a few of the failing
/// tests, one per way of failing first, and names the others, instead of going past its budget.
#[test]
fn a_prompt_of_many_failing_tests_shows_a_few_and_names_the_rest() {
    let d = scratch();
    let mut tests = String::from("from pkg.calc import double, halve, quadruple\n");
    for i in 0..8 {
        // test_double_6 reaches double through quadruple: code no other test ran.
        let call = if i == 6 { format!("quadruple({i}) // 2") } else { format!("double({i})") };
        tests.push_str(&format!("\ndef test_double_{i}():\n    assert {call} == {}\n", 2 * i));
    }
    tests.push_str("\ndef test_halve():\n    assert halve(None) == 0\n");
    let proj = pkg_project(
        &d.path().join("proj"),
        (
            "calc.py",
            "def double(x):\n    return x + x + 1\n\n\ndef quadruple(x):\n    return double(double(x))\n\n\ndef halve(x):\n    return x // 2\n",
        ),
        ("test_calc.py", &tests),
    );
    let py = venv_python();
    let (t, code) = record(&proj, "many.d", &[py.to_str().unwrap(), "-m", "pytest", "-q", "-p", "no:cacheprovider"]);
    assert_eq!(code, 1);
    let t = t.to_str().unwrap();
    let p = slice(&["from-trace", t, "--test", "failed", "-q", "Why is double wrong?"]);
    let shown: Vec<&str> = p.lines().filter_map(|l| l.strip_prefix("#### test test_calc.py::")).collect();
    // The first of the AssertionErrors and the TypeError (another way of failing), then the
    // test that ran code those did not (quadruple), then the next in run order.
    assert_eq!(shown, ["test_double_0", "test_double_1", "test_double_2", "test_double_6", "test_halve"], "{p}");
    assert!(
        p.contains("> 9 tests of the run match --test failed; this prompt shows 5 (")
            && p.contains(
                "Not shown: test_calc.py::test_double_3 (failed), test_calc.py::test_double_4 (failed), test_calc.py::test_double_5 (failed), \
                 test_calc.py::test_double_7 (failed). --test ID gives another's prompt"
            ),
        "{p}"
    );
    assert!(p.contains("    return x + x + 1\n"), "{p}");
    // A small budget shows fewer (one per 2,000 tokens): room is left for the code.
    let o = run(cmd("slice").args(["from-trace", t, "--test", "failed", "-q", "Why is double wrong?", "--budget", "4000"]));
    let (p, err) = texts(&o);
    let shown: Vec<&str> = p.lines().filter_map(|l| l.strip_prefix("#### test test_calc.py::")).collect();
    assert_eq!(shown, ["test_double_0", "test_halve"], "{p}");
    assert!(p.contains("> 9 tests of the run match --test failed; this prompt shows 2 (") && p.contains("    return x + x + 1\n"), "{p}");
    // What the two tests ran fits: stderr does not say that everything does.
    assert!(
        err.contains(
            "slice: budget 4000: what is shown fits whole, but 7 tests that --test chose are left out (a prompt shows one test per 2000 tokens of budget, and names the others)\n"
        ),
        "{err}"
    );
}
