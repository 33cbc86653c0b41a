//! Tests of a Rust test binary (libtest: what `cargo test` builds), read from the recorded
//! tree: no runner plugin exists to write `tests.jsonl`, and none is needed. libtest runs each
//! test in a thread of its own, through `test::__rust_begin_short_backtrace`, which calls the
//! test function (its closure first). So a native thread whose tree holds that call is one
//! test: its id is the test function's path without the crate (libtest's name: `tests::means`),
//! and it failed when it panicked there (a call of the panic machinery below the test function),
//! or, for a `#[should_panic]` test, when it did not.
//!
//! What the tree cannot tell comes from libtest's own output, which the native shim copies
//! into the process directory for a libtest binary (`output.log`, shims/native/src/output.rs):
//! a failing test's panic (`thread 'tests::means' panicked at src/lib.rs:30:9:` and the message,
//! `assertion `left == right` failed` with both sides) and the tests it ignored (`test
//! tests::slow ... ignored`; libtest names them only without `-q`). Without the log (a trace
//! recorded before it existed) the failure says where it panicked and no more. Filtered-out
//! tests run nothing and are not listed.

use crate::calltree::{CallTree, Keep, NodeId};
use crate::fold::ProcessTrees;
use crate::pathclass::Origin;
use std::collections::HashMap;
use trace_format::testrun::{TestFailure, TestFrame, TestOutcome, TestPhase, TestRun, NO_TREE};

/// The shim's copy of the program's output, in the process directory.
pub const OUTPUT_LOG: &str = "output.log";
/// Most of it read (the shim writes at most 16 MiB).
const MAX_LOG: u64 = 16 << 20;
/// Most lines of one panic's message kept.
const MAX_MESSAGE_LINES: usize = 40;

/// A test's panic as libtest printed it: where (`src/lib.rs`, 30), and the whole text (the
/// `thread '...' panicked at ...:` line and the message).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Panic {
    file: Option<String>,
    line: Option<u32>,
    text: String,
}

/// What libtest's output tells of the tests: each panic by test name (the thread's name is
/// the test's), and the ignored tests with their reasons, in order.
#[derive(Debug, Default, PartialEq, Eq)]
struct Printed {
    panics: HashMap<String, Panic>,
    ignored: Vec<(String, Option<String>)>,
}

/// `src/lib.rs:30:9` as (file, line).
fn location(loc: &str) -> (Option<String>, Option<u32>) {
    let mut parts = loc.rsplitn(3, ':');
    let (col, line, file) = (parts.next(), parts.next(), parts.next());
    match (file, line.and_then(|l| l.parse().ok()), col.and_then(|c| c.parse::<u32>().ok())) {
        (Some(f), Some(l), Some(_)) => (Some(f.to_string()), Some(l)),
        _ => (None, None),
    }
}

/// Read libtest's output: `thread 'NAME' panicked at LOC:` then the message up to a blank
/// line, a `note:` or a backtrace (Rust 1.73 and later; before, `panicked at 'MSG', LOC` on
/// one line), and `test NAME ... ignored[, REASON]`.
fn read_printed(text: &str) -> Printed {
    let mut out = Printed::default();
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let l = lines[i];
        i += 1;
        if let Some(rest) = l.strip_prefix("test ") {
            if let Some((name, verdict)) = rest.split_once(" ... ") {
                if let Some(reason) = verdict.strip_prefix("ignored") {
                    let reason = reason.strip_prefix(", ").map(str::to_string).filter(|r| !r.trim().is_empty());
                    out.ignored.push((name.to_string(), reason));
                }
            }
            continue;
        }
        let Some(rest) = l.strip_prefix("thread '") else { continue };
        // Rust 1.84 and later put the thread's id after its name: `thread 'x' (1234) panicked at`.
        let Some((name, after)) = rest.split_once("' ") else { continue };
        let after = match after.strip_prefix('(').and_then(|a| a.split_once(") ")) {
            Some((id, a)) if id.chars().all(|c| c.is_ascii_digit()) => a,
            _ => after,
        };
        let Some(after) = after.strip_prefix("panicked at ") else { continue };
        let mut text = String::from(l);
        let (file, line) = if let Some(loc) = after.strip_suffix(':') {
            for m in lines[i..].iter().take(MAX_MESSAGE_LINES) {
                if m.trim().is_empty() || m.starts_with("note: ") || m.starts_with("stack backtrace:") || m.starts_with("---- ") {
                    break;
                }
                text.push('\n');
                text.push_str(m);
                i += 1;
            }
            location(loc)
        } else {
            location(after.rsplit_once(", ").map_or("", |(_, loc)| loc))
        };
        out.panics.entry(name.to_string()).or_insert(Panic { file, line, text });
    }
    out
}

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
        function: None,
    })
}

/// Read the libtest tests of a native process from its threads' trees, when no runner wrote
/// `tests.jsonl`: each test thread gets its tree as its one test tree.
pub fn read_from_trees(dir: &std::path::Path, p: &mut ProcessTrees) {
    if !p.tests.is_empty() || p.meta.kind != "native" {
        return;
    }
    let printed = crate::source::read_regular_file(&dir.join(OUTPUT_LOG), MAX_LOG)
        .map(|b| read_printed(&String::from_utf8_lossy(&b)))
        .unwrap_or_default();
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
                let called_from = last.as_ref().and_then(|f| f.message.clone()).unwrap_or_else(|| path.clone());
                // libtest's own words when its output was copied: the panic's location and
                // message (the comparison of `assert_eq!`).
                let printed_panic = printed.panics.get(libtest_id(&path));
                Some(TestFailure {
                    phase: Some("call".into()),
                    exception: Some("panic".into()),
                    message: Some(match printed_panic {
                        // The panic's own message first (`slice tests` shows its first line).
                        Some(pn) => match pn.text.split_once('\n') {
                            Some((_, msg)) if !msg.trim().is_empty() => format!("{msg}\n(it panicked in {entry}, called from {called_from})"),
                            _ => format!("it panicked ({entry}, called from {called_from})"),
                        },
                        None => format!(
                            "it panicked ({entry}, called from {called_from}); its message was not recorded (no copy of libtest's output in the trace)"
                        ),
                    }),
                    file: printed_panic.and_then(|pn| pn.file.clone()).or_else(|| last.as_ref().map(|f| f.file.clone())),
                    line: printed_panic.and_then(|pn| pn.line).or_else(|| last.as_ref().and_then(|f| f.line)),
                    frames,
                    report: printed_panic.map(|pn| pn.text.clone()),
                    params: Vec::new(),
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
                params: Vec::new(),
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
            parent: None,
            subtests: Vec::new(),
            subtests_dropped: 0,
        });
    }
    found.sort_by(|a, b| a.id.cmp(&b.id));
    let tid = p.threads.iter().find(|t| t.is_main).or(p.threads.first()).map_or(0, |t| t.tid);
    let ran: std::collections::HashSet<String> = found.iter().map(|t| t.id.clone()).collect();
    found.extend(printed.ignored.into_iter().filter(|(id, _)| !ran.contains(id)).map(|(id, reason)| TestRun {
        id,
        runner: "libtest".into(),
        tid,
        seq: NO_TREE,
        file: None,
        line: None,
        fixtures: Vec::new(),
        outcome: TestOutcome::Ignored,
        phases: Vec::new(),
        duration_ns: None,
        failure: reason.map(|r| TestFailure { message: Some(r), ..TestFailure::default() }),
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
    fn libtest_s_output_gives_panics_and_ignored_tests() {
        let out = "running 4 tests\ntest tests::slow ... ignored\ntest tests::net ... ignored, needs the network\ntest tests::means_of_two ... FAILED\n\nfailures:\n\n---- tests::means_of_two stdout ----\n\nthread 'tests::means_of_two' panicked at src/lib.rs:37:9:\nassertion `left == right` failed\n  left: 2\n right: 3\nnote: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n\n---- old stdout ----\nthread 'old' panicked at 'boom', src/a.rs:3:5\n---- new stdout ----\nthread 'new' (4242) panicked at src/b.rs:5:1:\nboom\nstack backtrace:\n   0: x\n\nfailures:\n    tests::means_of_two\n";
        let p = read_printed(out);
        assert_eq!(p.ignored, vec![("tests::slow".into(), None), ("tests::net".into(), Some("needs the network".into()))]);
        let m = &p.panics["tests::means_of_two"];
        assert_eq!((m.file.as_deref(), m.line), (Some("src/lib.rs"), Some(37)));
        assert_eq!(
            m.text,
            "thread 'tests::means_of_two' panicked at src/lib.rs:37:9:\nassertion `left == right` failed\n  left: 2\n right: 3"
        );
        let o = &p.panics["old"];
        assert_eq!(
            (o.file.as_deref(), o.line, o.text.as_str()),
            (Some("src/a.rs"), Some(3), "thread 'old' panicked at 'boom', src/a.rs:3:5")
        );
        let n = &p.panics["new"];
        assert_eq!((n.line, n.text.as_str()), (Some(5), "thread 'new' (4242) panicked at src/b.rs:5:1:\nboom"));
        assert_eq!(read_printed("no tests\n"), Printed::default());
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
