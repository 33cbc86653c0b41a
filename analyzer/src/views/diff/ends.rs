//! How each run of a diff ended: the one rule behind the prompt's section "How each run ended"
//! and the lines at the top of the tree view. Each run's exit status
//! ([`crate::testrun::exit_words`]), then the tests its end names
//! ([`PreparedTrace::ended_tests`]: with `--test` the tests compared, else the failing ones),
//! at most [`OUTCOMES_SHOWN`] of them and the rest counted: a run with 300 failing tests says
//! how it ended in a few lines.

use crate::analysis::PreparedTrace;
use crate::prompt::fence_for;
use crate::testrun::{clean_text, exit_words, outcome_counts, outcome_line, plural};
use std::path::Path;
use trace_format::{escape, ExitStatus, TestRun};

/// At most this many of a run's outcome blocks (the prompt) or tests (the tree view) are
/// shown; the rest are counted.
pub const OUTCOMES_SHOWN: usize = 3;

/// The prompt's section: each run's outcome blocks (the failure of a failed run, each test's
/// outcome with `--test`; [`PreparedTrace::outcome`]), else its exit status.
pub fn section(traces: &[PreparedTrace]) -> String {
    let mut s = String::from("\n## How each run ended\n");
    for (t, name) in traces.iter().zip(["A", "B"]) {
        if t.outcome.is_empty() {
            // A run that recorded tests says how many and how they ended, as a failed run's
            // block does (`exit status 0 (1 test: 1 passed)`).
            s.push_str(&format!("\nRun {name}: {}{}.\n", exit_words(t.meta.exit.as_ref()), test_counts(&t.tests)));
            continue;
        }
        s.push_str(&format!("\nRun {name}:\n"));
        for block in t.outcome.iter().take(OUTCOMES_SHOWN) {
            let text = clean_text(block);
            let fence = fence_for(&[text.as_str()]);
            s.push_str(&format!("\n{fence}text\n{}\n{fence}\n", text.trim_end()));
        }
        if t.outcome.len() > OUTCOMES_SHOWN {
            s.push_str(&format!("\n({} more not shown)\n", t.outcome.len() - OUTCOMES_SHOWN));
        }
    }
    s
}

/// ` (3 tests: 1 failed, 2 passed)` of a run's recorded tests; empty without tests.
fn test_counts(tests: &[(u32, TestRun)]) -> String {
    if tests.is_empty() {
        return String::new();
    }
    format!(" ({}: {})", plural(tests.len(), "test"), outcome_counts(tests.iter().map(|(_, x)| x)))
}

/// The tree view's lines for run `name` (`A` or `B`), without the `# ` the view puts first:
/// `run B ended: exit status 1 (87 tests: 2 failed, 85 passed); failing:`, then one line per
/// test its end names, as `slice tests` lists failures ([`outcome_line`]), at most
/// [`OUTCOMES_SHOWN`], then how many more and where to see them all.
pub fn lines(t: &PreparedTrace, name: &str) -> Vec<String> {
    let list = t.front.list_tests(&[t.dir.display().to_string()]);
    end_lines(name, t.meta.exit.as_ref(), &t.tests, &t.ended_tests, t.tests_shown, &t.cwd, &list)
}

/// [`lines`] of a run that ended with `exit`, recorded `tests`, names `named` of them (indices;
/// `compared`: they are the tests compared, else its failing ones) and whose tests `list`
/// lists; places relative to the run's directory `cwd`.
fn end_lines(
    name: &str,
    exit: Option<&ExitStatus>,
    tests: &[(u32, TestRun)],
    named: &[usize],
    compared: bool,
    cwd: &Path,
    list: &str,
) -> Vec<String> {
    let counts = test_counts(tests);
    let which = match (named.is_empty(), compared) {
        (true, _) => "",
        (false, true) => "; compared here:",
        (false, false) => "; failing:",
    };
    let mut out = vec![escape::line(&format!("run {name} ended: {}{counts}{which}", exit_words(exit))).into_owned()];
    out.extend(named.iter().take(OUTCOMES_SHOWN).filter_map(|&i| tests.get(i)).map(|(_, x)| format!("  {}", outcome_line(x, cwd))));
    if named.len() > OUTCOMES_SHOWN {
        let more = named.len() - OUTCOMES_SHOWN;
        let what = if compared { "" } else { "failing " };
        let tests = if more == 1 { "test" } else { "tests" };
        out.push(escape::line(&format!("  and {more} more {what}{tests} (`{list}` lists them)")).into_owned());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use trace_format::{TestFailure, TestOutcome};

    fn failing(i: usize) -> (u32, TestRun) {
        let mut t = crate::testrun::test_run(&format!("tests/test_x.py::test_{i}"), TestOutcome::Failed);
        t.failure = Some(TestFailure {
            message: Some(format!("AssertionError: {i} != 0\nmore")),
            file: Some("tests/test_x.py".into()),
            line: Some(i as u32 + 10),
            ..Default::default()
        });
        (1, t)
    }

    const FAILED: ExitStatus = ExitStatus { code: Some(1), signal: None, core_dumped: false };

    /// A run's end: its exit status and counts, then its failing tests as `slice tests` lists
    /// them, a few and the rest counted; a passing run and one without tests in one line.
    #[test]
    fn a_run_says_how_it_ended_in_a_few_lines() {
        let cwd = Path::new("/p");
        let mut tests: Vec<(u32, TestRun)> = (0..300).map(failing).collect();
        tests.push((1, crate::testrun::test_run("tests/test_x.py::test_ok", TestOutcome::Passed)));
        let named: Vec<usize> = (0..300).collect();
        assert_eq!(
            end_lines("B", Some(&FAILED), &tests, &named, false, cwd, "slice tests b.d"),
            [
                "run B ended: exit status 1 (301 tests: 300 failed, 1 passed); failing:",
                "  tests/test_x.py::test_0: AssertionError: 0 != 0 at tests/test_x.py:10",
                "  tests/test_x.py::test_1: AssertionError: 1 != 0 at tests/test_x.py:11",
                "  tests/test_x.py::test_2: AssertionError: 2 != 0 at tests/test_x.py:12",
                "  and 297 more failing tests (`slice tests b.d` lists them)",
            ]
        );
        // The tests compared (`--test`): each with its outcome, a passing one too.
        assert_eq!(
            end_lines("A", Some(&FAILED), &tests, &[300, 1], true, cwd, "slice tests b.d"),
            [
                "run A ended: exit status 1 (301 tests: 300 failed, 1 passed); compared here:",
                "  tests/test_x.py::test_ok: passed",
                "  tests/test_x.py::test_1: AssertionError: 1 != 0 at tests/test_x.py:11",
            ]
        );
        let ok = ExitStatus { code: Some(0), ..FAILED };
        assert_eq!(end_lines("A", Some(&ok), &[], &[], false, cwd, ""), ["run A ended: exit status 0"]);
        assert_eq!(end_lines("A", None, &[], &[], false, cwd, ""), ["run A ended: no exit status recorded"]);
        let killed = ExitStatus { code: None, signal: Some(9), core_dumped: false };
        assert_eq!(
            end_lines("B", Some(&killed), &tests[..1], &[0], false, cwd, "x")[0],
            "run B ended: killed by signal 9 (1 test: 1 failed); failing:"
        );
    }
}
