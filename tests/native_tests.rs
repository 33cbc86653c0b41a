//! End-to-end: native test binaries' tests recorded as tests, the user's command unchanged.
//!
//! Rust (libtest, analyzer/src/testrun/libtest.rs) with `trace run -- cargo test`: the example
//! `examples/rust/calc` (one planted bug: the mean divides by one too many) is built inside
//! the run (the Rust toolchain itself is left alone, not recorded), each test thread is one
//! test with libtest's name and outcome (a `#[should_panic]` test that panicked passed), and
//! the failing test's prompt starts with its failure and holds the code it ran.
//!
//! GoogleTest (analyzer/src/testrun/gtest.rs): `examples/cpp/gtest` built against Debian's
//! `libgtest-dev` (`.ci/run` installs it), each test cut out at the runner's events and named,
//! judged and explained by GoogleTest's own report.

use serde_json::Value;
use slice_trace_e2e::{cmd, root, run, run_ok, scratch, texts};
use std::path::Path;

fn copy_dir(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).unwrap();
    for e in std::fs::read_dir(src).unwrap().flatten() {
        let to = dst.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            if e.file_name() != "target" {
                copy_dir(&e.path(), &to);
            }
        } else {
            std::fs::copy(e.path(), &to).unwrap();
        }
    }
}

/// `slice tests`' tests of a trace, (id, outcome) in its order, and the whole answer.
fn tests_of(t: &Path) -> (Vec<(String, String)>, Value) {
    let json: Value = serde_json::from_str(&texts(&run(cmd("slice").args(["tests", "--format", "json"]).arg(t))).0).unwrap();
    let got = json["tests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| (x["id"].as_str().unwrap().to_string(), x["outcome"].as_str().unwrap().to_string()))
        .collect();
    (got, json)
}

/// The prompt of the failing tests, for the question both examples' bug answers.
fn failing_prompt(t: &Path) -> String {
    texts(&run(cmd("slice").args(["from-trace", "--test", "failed", "-q", "Why is the mean of 2 and 4 not 3?"]).arg(t))).0
}

#[test]
fn cargo_test_records_each_rust_test_as_a_test() {
    let s = scratch();
    let proj = s.path().join("calc");
    copy_dir(&root().join("examples/rust/calc"), &proj);
    let t = s.path().join("calc.d");
    let o = run(cmd("trace")
        .current_dir(&proj)
        .env("CARGO_TARGET_DIR", s.path().join("target"))
        // A panic's backtrace runs the standard library's own dependencies (gimli,
        // miniz_oxide), which its build leaves without debug information.
        .env("RUST_BACKTRACE", "1")
        .env_remove("CARGO_BUILD_TARGET_DIR")
        .arg("run")
        .arg("-o")
        .arg(&t)
        .args(["--", "cargo", "test", "--no-fail-fast"]));
    let (out, err) = texts(&o);
    assert_eq!(o.status.code(), Some(101), "cargo test's status (a test failed) passes through: {out}\n{err}");
    assert!(
        out.contains("test result: FAILED. 2 passed; 1 failed; 1 ignored"),
        "the build and the tests ran as without trace: {out}\n{err}"
    );

    // Only the test binaries are recorded: not cargo, rustc or the linker.
    let info = texts(&run(cmd("trace").arg("info").arg(&t))).0;
    let argvs: Vec<&str> = info.lines().filter_map(|l| l.trim_start().strip_prefix("argv:")).map(str::trim).collect();
    assert_eq!(argvs.len(), 2, "{info}");
    assert!(argvs.iter().all(|a| a.contains("/deps/") && (a.contains("calc-") || a.contains("totals-"))), "{argvs:?}");

    let (mut got, json) = tests_of(&t);
    got.sort();
    let want = [
        ("tests::largest_of_nothing_panics", "passed"),
        ("tests::means_of_two", "failed"),
        ("tests::parses_a_list", "passed"),
        // `#[ignore]`: no thread, named by libtest's output (`test tests::slow ... ignored`).
        ("tests::slow", "ignored"),
        ("totals_add_up", "passed"),
    ];
    assert_eq!(got, want.map(|(a, b)| (a.to_string(), b.to_string())), "{json}");

    let table = texts(&run(cmd("slice").arg("tests").arg(&t))).0;
    assert!(table.contains("  tests::means_of_two: assertion `left == right` failed at src/lib.rs:37\n"), "the panic's message:\n{table}");

    let prompt = failing_prompt(&t);
    let outcome = prompt.find("FAILED tests::means_of_two").unwrap_or_else(|| panic!("the failure is named:\n{prompt}"));
    let tree = prompt.find("### Call tree").expect("a call tree");
    assert!(outcome < tree, "the failure comes first:\n{prompt}");
    // libtest's own report of the panic: where, and assert_eq!'s comparison.
    assert!(
        prompt.contains("at src/lib.rs:37\nthread 'tests::means_of_two' ")
            && prompt.contains("panicked at src/lib.rs:37:9:\nassertion `left == right` failed\n  left: 2\n right: 3\n"),
        "{prompt}"
    );
    assert!(prompt.contains("The run failed: exit status 101"), "{prompt}");
    for f in ["calc::tests::means_of_two", "calc::mean", "calc::total", "calc::parse"] {
        assert!(prompt.contains(&format!("#### `{f}` (src/lib.rs:")), "{f}'s source is in the prompt:\n{prompt}");
    }
    assert!(prompt.contains("    total(xs) / (xs.len() as i64 + 1)\n"), "the buggy line, whole:\n{prompt}");
    // Neither the other tests' code nor the panic's reporting (the hook, backtraces).
    for absent in ["calc::largest", "largest_of_nothing_panics", "panic_with_hook", "gimli", "miniz_oxide"] {
        assert!(!prompt.contains(absent), "{absent} is not in the failing test's prompt:\n{prompt}");
    }

    // The whole run's prompt: the `main` rustc generated for the harness, declared at line 1
    // of lib.rs, is not shown as the code there (which is another function's), and that
    // function keeps its own block; code the binary's debug information does not describe is
    // not blamed on a build without debug information.
    let whole = run_ok(cmd("slice").args(["from-trace", "-q", "Why is the mean of 2 and 4 not 3?"]).arg(&t));
    assert!(!whole.contains("#### `calc::main`"), "{whole}");
    for f in ["calc::tests::means_of_two", "calc::mean", "calc::total", "calc::parse"] {
        assert!(whole.contains(&format!("#### `{f}` (src/lib.rs:")), "{f}'s source is in the prompt:\n{whole}");
    }
    for note in whole.lines().filter(|l| l.starts_with("> No source for ")) {
        assert!(note.contains("its debug information describes the others but not"), "{note}");
    }
    // The backtrace's crates ran, and they are the standard library's: hidden with it.
    let all = run_ok(cmd("slice").args(["tree", "--stdlib", "--color", "never"]).arg(&t));
    assert!(all.contains("miniz_oxide::inflate") && all.contains("gimli::read"), "the backtrace ran:\n{all}");
    for absent in ["gimli", "miniz_oxide", "addr2line"] {
        assert!(!whole.contains(absent), "{absent} is the standard library's, hidden with it:\n{whole}");
    }
}

#[test]
fn a_googletest_binary_records_each_test_as_a_test() {
    let s = scratch();
    let src = root().join("examples/cpp/gtest");
    let exe = s.path().join("calc_test");
    let o = run(std::process::Command::new("g++")
        .args(["-g", "-O0", "-o"])
        .arg(&exe)
        .arg(src.join("calc_test.cc"))
        .arg(src.join("calc.cc"))
        .args(["-lgtest", "-lgtest_main", "-pthread"]));
    assert!(o.status.success(), "building the GoogleTest example needs libgtest-dev (apt-get install libgtest-dev): {:?}", texts(&o));
    let plain = run(std::process::Command::new(&exe).current_dir(s.path()).env_remove("GTEST_OUTPUT"));
    let t = s.path().join("gt.d");
    let o = run(cmd("trace").current_dir(s.path()).env_remove("GTEST_OUTPUT").arg("run").arg("-o").arg(&t).arg("--").arg(&exe));
    assert_eq!((o.status.code(), plain.status.code()), (Some(1), Some(1)), "a failing suite's status passes through: {:?}", texts(&o));
    // The same tests ran with the same verdicts (GoogleTest's summary lines; times differ).
    let verdicts =
        |out: &str| -> Vec<String> { out.lines().filter(|l| l.starts_with("[  ") && !l.contains(" ms")).map(str::to_string).collect() };
    assert_eq!(verdicts(&texts(&o).0), verdicts(&texts(&plain).0));
    assert!(!s.path().join("test_detail.json").exists(), "GoogleTest's report went into the trace, not the working directory");

    let (got, json) = tests_of(&t);
    let want = [
        ("Parse.SkipsWords", "passed"),
        ("Stats.MeanOfTwo", "failed"),
        ("Stats.Skipped", "skipped"),
        ("Small/Totals.CountsUp/0", "passed"),
        ("Small/Totals.CountsUp/1", "passed"),
        // Disabled (`DISABLED_`): GoogleTest reports it NOTRUN; listed after the tests that ran.
        ("Stats.DISABLED_Slow", "disabled"),
    ];
    assert_eq!(got, want.map(|(a, b)| (a.to_string(), b.to_string())), "in the order they ran: {json}");

    let prompt = failing_prompt(&t);
    let outcome = prompt.find("FAILED Stats.MeanOfTwo").unwrap_or_else(|| panic!("the failure is named:\n{prompt}"));
    assert!(outcome < prompt.find("### Call tree").expect("a tree"), "{prompt}");
    assert!(
        prompt.contains("Expected equality of these values:\n  mean(parse(\"2,4\"))\n    Which is: 2\n  3\n"),
        "GoogleTest's comparison, as it reports it:\n{prompt}"
    );
    assert!(prompt.contains("#### test Stats.MeanOfTwo\n"), "{prompt}");
    for f in ["`mean(", "`total(", "`parse("] {
        assert!(prompt.contains(&format!("#### {f}")), "{f}'s source:\n{prompt}");
    }
    assert!(prompt.contains("  return total(xs) / (long)(xs.size() + 1);\n"), "the buggy line:\n{prompt}");
    // The runner is plumbing; the other tests' bodies are not this test's.
    for absent in ["testing::internal::", "PrettyUnitTestResultPrinter", "Parse_SkipsWords_Test", "Totals_CountsUp_Test"] {
        assert!(!prompt.contains(absent), "{absent} is not in the failing test's prompt:\n{prompt}");
    }
}
