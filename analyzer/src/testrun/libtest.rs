//! Tests of a Rust test binary (libtest: what `cargo test` builds), read from the recorded
//! tree: no runner plugin exists to write `tests.jsonl`, and none is needed. libtest runs each
//! test in a thread of its own, through `test::__rust_begin_short_backtrace`, which calls the
//! test function (its closure first). So a native thread whose tree holds that call is one
//! test: its id is the test function's path without the crate (libtest's name: `tests::means`),
//! and it failed when it panicked there (a call of the panic machinery below the test function),
//! or, for a `#[should_panic]` test, when it did not.
//!
//! What the tree cannot tell is left unsaid rather than guessed: the panic's message (libtest
//! prints it; `trace` does not record the program's output), and ignored or filtered-out tests
//! (they run no thread).

use crate::calltree::{CallTree, Keep, NodeId};
use crate::fold::ProcessTrees;
use crate::pathclass::Origin;
use trace_format::testrun::{TestFailure, TestFrame, TestOutcome, TestPhase, TestRun};

/// The function libtest calls each test through.
const BOUNDARY: &str = "test::__rust_begin_short_backtrace";

/// Functions a panic starts with (the first one reached from the test's code): `panic!`,
/// `assert!`/`assert_eq!`, `unwrap`/`expect` on `None`/`Err`, arithmetic and index checks.
const PANIC_ENTRIES: &[&str] = &[
    "core::panicking::",
    "std::panicking::begin_panic",
    "std::panicking::panic_handler",
    "std::panicking::rust_panic_with_hook",
    "std::panicking::panic_with_hook",
    "__rustc::rust_begin_unwind",
    "rust_begin_unwind",
    "core::option::unwrap_failed",
    "core::option::expect_failed",
    "core::result::unwrap_failed",
];

fn is_panic(qualname: &str) -> bool {
    PANIC_ENTRIES.iter().any(|p| qualname.starts_with(p))
}

/// The test function's path (`calc::tests::means`) from the first function of the program
/// under the boundary (its closure `calc::tests::means::{{closure}}`, or the function itself).
fn test_path(qualname: &str) -> &str {
    let mut s = qualname;
    while let Some(t) = s.strip_suffix("::{{closure}}").or_else(|| s.strip_suffix("::{closure#0}")) {
        s = t;
    }
    s
}

/// libtest's name for a test: its path without the crate (`tests::means`; an integration
/// test's top-level function: its bare name).
fn libtest_id(path: &str) -> &str {
    path.split_once("::").map(|(_, rest)| rest).unwrap_or(path)
}

/// Whether the test function whose code starts at `file:line` is marked `#[should_panic]`:
/// its attributes are the lines above its `fn` line (the debug info's first line of a test is
/// its `#[test]` attribute, or the `fn` line itself).
fn should_panic(file: Option<&std::path::Path>, line: Option<u32>) -> bool {
    let (Some(file), Some(line)) = (file, line) else { return false };
    let Ok(bytes) = crate::source::read_regular_file(file, 16 << 20) else { return false };
    let text = String::from_utf8_lossy(&bytes);
    let lines: Vec<&str> = text.lines().collect();
    let at = (line as usize).saturating_sub(1);
    let is_fn = |l: &str| {
        let t = l.trim_start();
        t.starts_with("fn ") || t.starts_with("pub fn ") || t.starts_with("async fn ") || t.starts_with("pub(crate) fn ")
    };
    let Some(fn_line) = (at..lines.len().min(at + 12)).find(|&i| is_fn(lines[i])) else { return false };
    lines[fn_line.saturating_sub(12)..fn_line]
        .iter()
        .rev()
        .take_while(|l| {
            let t = l.trim_start();
            t.starts_with("#[") || t.starts_with("//") || t.is_empty() || t.starts_with(')') || t.starts_with('"')
        })
        .any(|l| l.trim_start().starts_with("#[should_panic"))
}

/// The test a thread's tree ran, if it is a libtest test thread: the boundary node and the
/// test function's node below it.
fn find_test(tree: &CallTree) -> Option<(NodeId, NodeId)> {
    let order = tree.preorder();
    let boundary = order.iter().copied().find(|&n| tree.func(n).is_some_and(|f| f.qualname.starts_with(BOUNDARY)))?;
    let mut stack = vec![boundary];
    while let Some(n) = stack.pop() {
        if n != boundary && tree.func(n).is_some_and(|f| crate::pathclass::origin(f) == Origin::Program) {
            return Some((boundary, n));
        }
        stack.extend(tree.node(n).children.iter().rev().copied());
    }
    None
}

/// The first panic below `from`, and the program's frames on the way (outermost first).
fn panic_path(tree: &CallTree, from: NodeId) -> Option<(NodeId, Vec<NodeId>)> {
    let mut stack = vec![from];
    while let Some(n) = stack.pop() {
        if tree.func(n).is_some_and(|f| is_panic(&f.qualname)) {
            let frames = tree
                .path(n)
                .into_iter()
                .skip_while(|&p| p != from)
                .filter(|&p| tree.func(p).is_some_and(|f| crate::pathclass::origin(f) != Origin::Stdlib))
                .collect();
            return Some((n, frames));
        }
        stack.extend(tree.node(n).children.iter().rev().copied());
    }
    None
}

fn frame(tree: &CallTree, n: NodeId) -> Option<TestFrame> {
    let f = tree.func(n)?;
    Some(TestFrame {
        file: f.file.as_deref().map(|p| p.to_string_lossy().into_owned()).unwrap_or_else(|| "??".into()),
        line: f.first_line,
        message: Some(f.qualname.clone()),
    })
}

/// Read the libtest tests of a native process from its threads' trees, when no runner wrote
/// `tests.jsonl`: each test thread gets its tree as its one test tree.
pub fn read_from_trees(p: &mut ProcessTrees) {
    if !p.tests.is_empty() || p.meta.kind != "native" {
        return;
    }
    let mut found = Vec::new();
    for th in &mut p.threads {
        let Some((_, test)) = find_test(&th.tree) else { continue };
        let Some(f) = th.tree.func(test) else { continue };
        let path = test_path(&f.qualname).to_string();
        let (file, line) = (f.file.clone(), f.first_line);
        let panicked = panic_path(&th.tree, test);
        let expects_panic = should_panic(file.as_deref().map(|f| std::path::Path::new(&p.meta.cwd).join(f)).as_deref(), line);
        let outcome = match (&panicked, expects_panic) {
            (Some(_), false) | (None, true) => TestOutcome::Failed,
            _ => TestOutcome::Passed,
        };
        let failure = match (&panicked, outcome) {
            (Some((at, frames)), TestOutcome::Failed) => {
                let frames: Vec<TestFrame> = frames.iter().filter_map(|&n| frame(&th.tree, n)).collect();
                let entry = th.tree.func(*at).map(|f| f.qualname.clone()).unwrap_or_default();
                let last = frames.last().cloned();
                Some(TestFailure {
                    phase: Some("call".into()),
                    exception: Some("panic".into()),
                    message: Some(format!(
                        "it panicked ({entry}, called from {}); the panic's message is in the test binary's output, which `trace` does not record",
                        last.as_ref().and_then(|f| f.message.clone()).unwrap_or_else(|| path.clone())
                    )),
                    file: last.as_ref().map(|f| f.file.clone()),
                    line: last.as_ref().and_then(|f| f.line),
                    frames,
                    report: None,
                })
            }
            (None, TestOutcome::Failed) => Some(TestFailure {
                phase: Some("call".into()),
                exception: None,
                message: Some("it is marked #[should_panic] and did not panic".into()),
                file: file.as_deref().map(|p| p.to_string_lossy().into_owned()),
                line,
                frames: Vec::new(),
                report: None,
            }),
            _ => None,
        };
        let duration = th.tree.node(test).time_ns;
        // The test's tree is the thread's, without what the panic machinery ran after the
        // panic started (the hook printing the message and, with RUST_BACKTRACE, symbolizing
        // a backtrace): libtest's failure reporting, as pytest's is left out of a test's tree.
        let test_tree = match &panicked {
            Some((at, _)) => th.tree.rebuild(|t, n| if t.node(n).parent == *at { Keep::Drop } else { Keep::Keep }),
            None => th.tree.clone(),
        };
        th.tests = vec![test_tree];
        found.push(TestRun {
            id: libtest_id(&path).to_string(),
            runner: "libtest".into(),
            tid: th.tid,
            seq: 0,
            file: file.as_deref().map(|p| p.to_string_lossy().into_owned()),
            line,
            fixtures: Vec::new(),
            outcome,
            phases: vec![TestPhase { when: "call".into(), outcome: outcome.name().into(), duration_ns: duration }],
            duration_ns: Some(duration),
            failure,
            output: Default::default(),
        });
    }
    found.sort_by(|a, b| a.id.cmp(&b.id));
    p.tests = found;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_names_are_libtest_s() {
        assert_eq!(libtest_id(test_path("calc::tests::means::{{closure}}")), "tests::means");
        assert_eq!(libtest_id(test_path("calc::tests::means")), "tests::means");
        assert_eq!(libtest_id(test_path("integration::adds_up::{closure#0}")), "adds_up");
        assert!(is_panic("core::panicking::assert_failed::<i64, i64>"));
        assert!(is_panic("core::option::unwrap_failed"));
        assert!(!is_panic("std::panicking::panic_count::is_zero_slow_path"));
        assert!(!is_panic("calc::panicking_helper"));
    }

    #[test]
    fn should_panic_is_read_from_the_attributes_above() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("lib.rs");
        std::fs::write(&f, "#[test]\n#[should_panic(expected = \"x\")]\nfn boom() {}\n\n#[test]\nfn calm() {}\n").unwrap();
        // From the `fn` line, or from the `#[test]` line (what rustc's debug info gives).
        assert!(should_panic(Some(&f), Some(3)));
        assert!(should_panic(Some(&f), Some(1)));
        assert!(!should_panic(Some(&f), Some(6)));
        assert!(!should_panic(Some(&f), Some(5)));
        assert!(!should_panic(None, Some(3)));
    }
}
