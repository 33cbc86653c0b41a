//! Tests of a GoogleTest binary. The native shim asks GoogleTest for its JSON report
//! (`GTEST_OUTPUT`, into the process directory: shims/native/src/objects.rs) and the fold cuts a
//! tree per test at the runner's `OnTestStart`/`OnTestEnd` events ([`crate::fold::fold_class`]).
//! Here the two are joined: the `seq`-th test tree of a thread is the test whose `TestBody`
//! (`Suite_Name_Test::TestBody()`) it ran, matched to the report's entries of that class in the
//! report's order; its id, outcome, time and failure (file, line and GoogleTest's own text,
//! "Expected equality of these values: ...") come from the report.
//!
//! Without a report (the process died, or the user's own `GTEST_OUTPUT` sent it elsewhere) the
//! tests are still listed, from the trees alone: the id from the class name (`Suite.Name`,
//! ambiguous when a name holds `_`), failed when an assertion failed (GoogleTest's
//! `AssertHelper` ran), the last one of a process that died interrupted. Disabled tests
//! (`DISABLED_`) run no code: they are listed from the report (`NOTRUN`) as disabled, after the
//! tests that ran, without a tree.

use crate::calltree::CallTree;
use crate::fold::ProcessTrees;
use serde::Deserialize;
use std::path::Path;
use trace_format::testrun::{TestFailure, TestOutcome, TestPhase, TestRun};

/// The report's file in a process directory (written by GoogleTest).
pub const REPORT: &str = "gtest.json";
/// Largest report read (a suite of a hundred thousand tests is far below it).
const MAX_REPORT: u64 = 256 << 20;

/// The runner's per-test events, by demangled name: where a test's tree starts and ends.
pub const TEST_START: &str = "testing::internal::TestEventRepeater::OnTestStart(";
pub const TEST_END: &str = "testing::internal::TestEventRepeater::OnTestEnd(";

#[derive(Deserialize)]
struct Report {
    #[serde(default)]
    testsuites: Vec<Suite>,
}

#[derive(Deserialize)]
struct Suite {
    name: String,
    #[serde(default)]
    testsuite: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    name: String,
    #[serde(default)]
    file: Option<String>,
    #[serde(default)]
    line: Option<u32>,
    #[serde(default)]
    status: String,
    #[serde(default)]
    result: String,
    #[serde(default)]
    time: String,
    #[serde(default)]
    failures: Vec<Failure>,
}

#[derive(Deserialize)]
struct Failure {
    failure: String,
}

/// `Suite_Name_Test`: the class `TEST(Suite, Name)` and `TEST_P` define (a parametrized
/// suite's instantiation prefix `Prefix/` and index `/N` are not part of it).
fn class_of(suite: &str, name: &str) -> String {
    let suite = suite.rsplit('/').next().unwrap_or(suite);
    let name = name.split('/').next().unwrap_or(name);
    format!("{suite}_{name}_Test")
}

/// The class of the `TestBody` a test tree ran, if it ran one.
fn test_body_class(tree: &CallTree) -> Option<String> {
    tree.preorder().into_iter().find_map(|n| {
        let q = &tree.func(n)?.qualname;
        let q = q.strip_suffix("()").unwrap_or(q);
        q.strip_suffix("::TestBody").map(str::to_string)
    })
}

/// GoogleTest's `time` ("0.004s") in nanoseconds.
fn seconds(t: &str) -> Option<u64> {
    t.strip_suffix('s')?.parse::<f64>().ok().filter(|s| s.is_finite() && *s >= 0.0).map(|s| (s * 1e9) as u64)
}

/// A failure's text: `file:line` on its first line, then GoogleTest's explanation.
fn failure(case: &Case) -> TestFailure {
    let mut f = TestFailure { phase: Some("call".into()), ..TestFailure::default() };
    let mut report = String::new();
    for x in &case.failures {
        let (head, rest) = x.failure.split_once('\n').unwrap_or((&x.failure, ""));
        if let Some((file, line)) = head.rsplit_once(':').and_then(|(a, b)| Some((a, b.trim().parse::<u32>().ok()?))) {
            if f.file.is_none() {
                f.file = Some(file.to_string());
                f.line = Some(line);
            }
            report.push_str(&format!("{head}\n"));
        } else {
            report.push_str(&format!("{head}\n"));
        }
        report.push_str(rest.trim_end());
        report.push('\n');
    }
    f.report = Some(report.trim_end().to_string());
    f
}

fn read_report(dir: &Path) -> Option<Report> {
    let bytes = crate::source::read_regular_file(&dir.join(REPORT), MAX_REPORT).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Read the GoogleTest tests of a native process (`dir`: its directory), when no runner wrote
/// `tests.jsonl` and its threads' trees were cut at GoogleTest's test events.
pub fn read(dir: &Path, p: &mut ProcessTrees, warnings: &mut Vec<String>) {
    if !p.tests.is_empty() || p.meta.kind != "native" || p.threads.iter().all(|t| t.tests.is_empty()) {
        return;
    }
    let report = read_report(dir);
    if report.is_none() {
        warnings.push(format!(
            "{}: GoogleTest's report is missing or unreadable (the process died, or GTEST_OUTPUT sent it elsewhere): tests are named by their classes and judged from the tree",
            dir.join(REPORT).display()
        ));
    }
    // (id, class, entry, used), in the report's order.
    let entries = || report.iter().flat_map(|r| r.testsuites.iter()).flat_map(|s| s.testsuite.iter().map(move |c| (s, c)));
    let mut cases: Vec<(String, String, &Case, bool)> = entries()
        .filter(|(_, c)| c.status != "NOTRUN")
        .map(|(s, c)| (format!("{}.{}", s.name, c.name), class_of(&s.name, &c.name), c, false))
        .collect();
    let died = p.threads.iter().any(|t| t.info.open_at_end > 0);
    let mut found = Vec::new();
    for th in &p.threads {
        let last = th.tests.len().saturating_sub(1);
        for (seq, tree) in th.tests.iter().enumerate() {
            let class = test_body_class(tree);
            // The report's entry of the class this test ran, first unused in the report's
            // order; without a TestBody (its fixture's SetUp failed) the next unused one.
            let pick = cases
                .iter()
                .position(|(_, k, _, used)| !used && class.as_deref().is_none_or(|c| c == k))
                .or_else(|| cases.iter().position(|(_, _, _, used)| !used));
            let root = tree.node(crate::calltree::ROOT);
            let duration: u64 = root.children.iter().map(|&n| tree.node(n).time_ns).sum();
            let run = match pick {
                Some(i) if report.is_some() => {
                    cases[i].3 = true;
                    let (id, _, c, _) = &cases[i];
                    let outcome = if !c.failures.is_empty() {
                        TestOutcome::Failed
                    } else if c.result == "SKIPPED" {
                        TestOutcome::Skipped
                    } else {
                        TestOutcome::Passed
                    };
                    TestRun {
                        id: id.clone(),
                        runner: "gtest".into(),
                        tid: th.tid,
                        seq: seq as u32,
                        file: c.file.clone(),
                        line: c.line,
                        fixtures: Vec::new(),
                        outcome,
                        phases: Vec::new(),
                        duration_ns: seconds(&c.time).filter(|&d| d > 0).or(Some(duration)),
                        failure: (!c.failures.is_empty()).then(|| failure(c)),
                        output: Default::default(),
                        parent: None,
                        subtests: Vec::new(),
                        subtests_dropped: 0,
                    }
                }
                _ => {
                    let id = class
                        .as_deref()
                        .map(|k| k.strip_suffix("_Test").unwrap_or(k).replacen('_', ".", 1))
                        .unwrap_or_else(|| format!("test #{seq}"));
                    let asserted = tree
                        .preorder()
                        .into_iter()
                        .any(|n| tree.func(n).is_some_and(|f| f.qualname.starts_with("testing::internal::AssertHelper::operator=")));
                    let outcome = if died && seq == last {
                        TestOutcome::Interrupted
                    } else if asserted {
                        TestOutcome::Failed
                    } else {
                        TestOutcome::Passed
                    };
                    TestRun {
                        id,
                        runner: "gtest".into(),
                        tid: th.tid,
                        seq: seq as u32,
                        file: None,
                        line: None,
                        fixtures: Vec::new(),
                        outcome,
                        phases: vec![TestPhase { when: "call".into(), outcome: outcome.name().into(), duration_ns: duration }],
                        duration_ns: Some(duration),
                        failure: None,
                        output: Default::default(),
                        parent: None,
                        subtests: Vec::new(),
                        subtests_dropped: 0,
                    }
                }
            };
            found.push(run);
        }
    }
    let tid = p.threads.iter().find(|t| t.is_main).or(p.threads.first()).map_or(0, |t| t.tid);
    found.extend(entries().filter(|(_, c)| c.status == "NOTRUN").map(|(s, c)| TestRun {
        id: format!("{}.{}", s.name, c.name),
        runner: "gtest".into(),
        tid,
        seq: trace_format::testrun::NO_TREE,
        file: c.file.clone(),
        line: c.line,
        fixtures: Vec::new(),
        outcome: TestOutcome::Disabled,
        phases: Vec::new(),
        duration_ns: None,
        failure: None,
        output: Default::default(),
        parent: None,
        subtests: Vec::new(),
        subtests_dropped: 0,
    }));
    p.tests = found;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_and_times_are_gtest_s() {
        assert_eq!(class_of("Stats", "MeanOfTwo"), "Stats_MeanOfTwo_Test");
        assert_eq!(class_of("Small/Totals", "CountsUp/1"), "Totals_CountsUp_Test");
        assert_eq!(seconds("0.004s"), Some(4_000_000));
        assert_eq!(seconds("x"), None);
        let c = Case {
            name: "MeanOfTwo".into(),
            file: None,
            line: None,
            status: "RUN".into(),
            result: "COMPLETED".into(),
            time: "0s".into(),
            failures: vec![Failure {
                failure: "calc_test.cc:4\nExpected equality of these values:\n  mean(v)\n    Which is: 2\n  3".into(),
            }],
        };
        let f = failure(&c);
        assert_eq!((f.file.as_deref(), f.line), (Some("calc_test.cc"), Some(4)));
        assert_eq!(f.report.as_deref(), Some("calc_test.cc:4\nExpected equality of these values:\n  mean(v)\n    Which is: 2\n  3"));
    }
}
