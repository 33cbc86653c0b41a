//! Tests as units of slicing: which recorded tests a `--test` filter names, what a prompt says
//! of a failure, and the spectrum (which functions go with failing tests).
//!
//! The recorder writes each test's id, phases, outcome and failure into `tests.jsonl`
//! ([`trace_format::testrun`]) and marks its boundaries in the thread's stream, where the fold
//! cuts out a tree per test ([`crate::fold::fold_events_with_tests`]). Here: `--test` filters
//! and what a prompt says of a test (this file), the spectrum ([`spectrum`]), state built by
//! earlier tests ([`earlier`]), and `slice tests`' table ([`table`]); Rust test binaries' tests, read from the tree
//! ([`libtest`]), and GoogleTest binaries' ([`gtest`]).

mod earlier;
pub mod gtest;
pub mod libtest;
mod spectrum;
mod table;

pub use earlier::built_earlier;
pub use spectrum::{counted_ids, function_kinds, FuncKind, Spectrum};
pub use table::{RankedFunction, TestRow, TestTable};

use regex::Regex;
use std::fmt::Write as _;
use trace_format::{ExitStatus, TestOutcome, TestRun};

/// Which tests `--test` selects.
#[derive(Debug, Clone)]
pub enum TestFilter {
    /// Every failing test (failed, error, interrupted).
    Failed,
    /// An id: exact, a glob (`*`, `?`), or the end of an id after a `::` or `.` (a parametrized
    /// test's name takes all its instances).
    Pattern { text: String, glob: Option<Regex> },
}

impl TestFilter {
    pub fn parse(s: &str) -> Result<TestFilter, String> {
        let s = s.trim();
        if s.is_empty() {
            return Err("an empty test id: give an id, a glob such as 'tests/test_x.py::*', or `failed`".into());
        }
        if s == "failed" {
            return Ok(TestFilter::Failed);
        }
        let glob = if s.contains(['*', '?']) {
            let mut re = String::from("^");
            for c in s.chars() {
                match c {
                    '*' => re.push_str(".*"),
                    '?' => re.push('.'),
                    c => re.push_str(&regex::escape(&c.to_string())),
                }
            }
            re.push('$');
            Some(Regex::new(&re).map_err(|e| format!("bad test pattern {s:?}: {e}"))?)
        } else {
            None
        };
        Ok(TestFilter::Pattern { text: s.to_string(), glob })
    }

    pub fn matches(&self, t: &TestRun) -> bool {
        match self {
            TestFilter::Failed => t.outcome.is_failure(),
            TestFilter::Pattern { glob: Some(re), .. } => re.is_match(&t.id),
            TestFilter::Pattern { text, glob: None } => {
                let id = t.id.as_str();
                // `name[param]` instances of a parametrized `name`.
                let base = id.split_once('[').map_or(id, |(b, _)| b);
                [id, base].iter().any(|s| {
                    *s == text
                        || s.strip_suffix(text.as_str())
                            .is_some_and(|head| head.ends_with("::") || head.ends_with('.') || head.ends_with('/'))
                })
            }
        }
    }
}

/// Text from a trace (a test's message, its captured output) made safe for a prompt or a
/// terminal: [`trace_format::escape::block`] (control characters other than newline and tab
/// written as visible escapes).
pub fn clean_text(s: &str) -> String {
    trace_format::escape::block(s).into_owned()
}

/// `1 test`, `3 tests`.
pub fn plural(n: usize, word: &str) -> String {
    format!("{n} {word}{}", if n == 1 { "" } else { "s" })
}

/// A duration for people: `12 ms`, `1.4 s`.
pub fn duration(ns: u64) -> String {
    if ns >= 1_000_000_000 {
        format!("{:.1} s", ns as f64 / 1e9)
    } else if ns >= 1_000_000 {
        format!("{} ms", ns / 1_000_000)
    } else {
        format!("{} µs", ns / 1000)
    }
}

/// The run's exit status in words, when it did not end with 0.
pub fn failed_exit(exit: Option<&ExitStatus>) -> Option<String> {
    let e = exit?;
    match (e.code, e.signal) {
        (_, Some(sig)) => Some(format!("killed by signal {sig}{}", if e.core_dumped { " (core dumped)" } else { "" })),
        (Some(c), None) if c != 0 => Some(format!("exit status {c}")),
        _ => None,
    }
}

/// Counts of outcomes, `3 failed, 458 passed, 2 xfailed`, most serious first.
pub fn outcome_counts<'a>(tests: impl IntoIterator<Item = &'a TestRun>) -> String {
    let mut counts: std::collections::BTreeMap<TestOutcome, usize> = Default::default();
    for t in tests {
        *counts.entry(t.outcome).or_default() += 1;
    }
    counts.iter().map(|(o, n)| format!("{n} {}", o.name())).collect::<Vec<_>>().join(", ")
}

/// The traceback frames of a failing test (file as the runner gives it, line), for the
/// ranking ([`crate::analysis::PreparedTrace::failure_frames`]); none for other outcomes.
pub fn failure_frames(t: &TestRun) -> Vec<(String, u32)> {
    match (&t.failure, t.outcome.is_failure()) {
        (Some(f), true) => f.frames.iter().filter_map(|fr| Some((fr.file.clone(), fr.line?))).collect(),
        _ => Vec::new(),
    }
}

/// What a prompt says first about a test: its outcome, and for a failure where it failed, the
/// runner's report of the comparison, the traceback and the tail of its output. Plain text
/// (the template fences it).
pub fn outcome_text(t: &TestRun) -> String {
    let mut s = String::new();
    let _ = write!(s, "{} {}", t.outcome.name().to_uppercase(), t.id);
    let phase = t.failure.as_ref().and_then(|f| f.phase.as_deref()).filter(|p| *p != "call" && t.outcome.is_failure());
    if let Some(p) = phase {
        let _ = write!(s, " (in {p})");
    }
    if let Some(d) = t.duration_ns {
        let _ = write!(s, ", {}", duration(d));
    }
    s.push('\n');
    if t.outcome == TestOutcome::Interrupted {
        s.push_str("The test never finished: its process ended inside it (a crash, os._exit, a kill or a timeout).\n");
    }
    if let Some(f) = &t.failure {
        if let Some(file) = &f.file {
            let _ = writeln!(s, "at {file}{}", f.line.map(|l| format!(":{l}")).unwrap_or_default());
        }
        match (&f.report, &f.message) {
            (Some(r), _) => {
                s.push_str(r.trim_end());
                s.push('\n');
            }
            (None, Some(m)) => {
                if let Some(e) = f.exception.as_deref().filter(|e| !m.starts_with(e)) {
                    let _ = write!(s, "{e}: ");
                }
                s.push_str(m.trim_end());
                s.push('\n');
            }
            _ => {}
        }
        if f.frames.len() > 1 || (f.frames.len() == 1 && f.report.is_none()) {
            s.push_str("traceback (innermost last):\n");
            for fr in &f.frames {
                let _ = writeln!(
                    s,
                    "  {}{}{}",
                    fr.file,
                    fr.line.map(|l| format!(":{l}")).unwrap_or_default(),
                    fr.message
                        .as_deref()
                        .and_then(|m| m.lines().next())
                        .filter(|m| !m.trim().is_empty())
                        .map(|m| format!(" ({m})"))
                        .unwrap_or_default()
                );
            }
        }
    }
    for (name, text) in &t.output {
        let text = text.trim_end();
        if !text.is_empty() {
            let _ = writeln!(s, "--- {name} ---\n{text}");
        }
    }
    s.trim_end().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(id: &str, outcome: TestOutcome) -> TestRun {
        TestRun {
            id: id.into(),
            runner: "pytest".into(),
            tid: 1,
            seq: 0,
            file: None,
            line: None,
            fixtures: Vec::new(),
            outcome,
            phases: Vec::new(),
            duration_ns: Some(12_000_000),
            failure: None,
            output: Default::default(),
        }
    }

    #[test]
    fn filters_take_ids_globs_name_ends_and_failures() {
        let a = run("tests/test_f.py::TestR::test_case", TestOutcome::Failed);
        let b = run("tests/test_f.py::test_compact[case when-x]", TestOutcome::Passed);
        let c = run("tests/test_f.py::TestR::test_case2", TestOutcome::Passed);
        let m = |f: &str, t: &TestRun| TestFilter::parse(f).unwrap().matches(t);
        assert!(m("tests/test_f.py::TestR::test_case", &a) && !m("tests/test_f.py::TestR::test_case", &c));
        assert!(m("TestR::test_case", &a) && m("test_case", &a) && !m("est_case", &a));
        assert!(m("test_compact", &b) && m("test_compact[case when-x]", &b) && !m("test_comp", &b));
        assert!(m("*::TestR::*", &a) && m("*::TestR::*", &c) && !m("*::TestR::*", &b));
        assert!(m("failed", &a) && !m("failed", &b));
        assert!(TestFilter::parse(" ").is_err());
    }

    #[test]
    fn a_failure_reads_outcome_place_report_and_output() {
        let mut t = run("t.py::test_x", TestOutcome::Failed);
        t.failure = Some(trace_format::TestFailure {
            phase: Some("call".into()),
            exception: Some("AssertionError".into()),
            message: Some("AssertionError: assert 1 == 2".into()),
            file: Some("/p/t.py".into()),
            line: Some(4),
            frames: vec![trace_format::testrun::TestFrame { file: "t.py".into(), line: Some(4), message: Some("AssertionError".into()) }],
            report: Some(">       assert f() == 2\nE       assert 1 == 2".into()),
        });
        t.output.insert("Captured stdout call".into(), "hello\n".into());
        assert_eq!(
            outcome_text(&t),
            "FAILED t.py::test_x, 12 ms\nat /p/t.py:4\n>       assert f() == 2\nE       assert 1 == 2\n--- Captured stdout call ---\nhello"
        );
        let mut e = run("t.py::test_y", TestOutcome::Error);
        e.failure = Some(trace_format::TestFailure {
            phase: Some("setup".into()),
            message: Some("boom".into()),
            exception: Some("KeyError".into()),
            ..Default::default()
        });
        assert_eq!(outcome_text(&e), "ERROR t.py::test_y (in setup), 12 ms\nKeyError: boom");
        assert_eq!(failed_exit(Some(&ExitStatus { code: Some(1), signal: None, core_dumped: false })).unwrap(), "exit status 1");
        assert_eq!(failed_exit(Some(&ExitStatus { code: Some(0), signal: None, core_dumped: false })), None);
        assert_eq!(outcome_counts([&t, &e, &run("a", TestOutcome::Passed)]), "1 failed, 1 error, 1 passed");
    }
}
