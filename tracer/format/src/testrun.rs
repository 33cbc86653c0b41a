//! `p<pid>/tests.jsonl`: the tests a test runner ran in a process (docs/trace-format.md,
//! "tests.jsonl"). Written by the Python shim's test recorder (`tracer/src/slicetrace_tests.py`):
//! a `start` line when a test begins and a `finish` line when it ends, each a single `write(2)`.
//! Read here into one [`TestRun`] per test; a test with a start and no finish (its process died
//! inside it) is [`TestOutcome::Interrupted`]. A finish line lists the test's subtests
//! (unittest's `subTest`, pytest's `subtests` fixture): each is a [`TestRun`] of its own in
//! [`TestRun::subtests`], with the test's thread, `seq` (its tree) and place.
//!
//! The file is untrusted input: it is read line by line with a bounded line length and a
//! bounded number of tests, lines that do not parse are counted and skipped, and every text is
//! cut to a bounded length.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::Path;

/// The file name inside a process directory.
pub const TESTS_FILE: &str = "tests.jsonl";
/// Longest line read (longer lines are skipped as damaged).
pub const MAX_TEST_LINE: usize = 1 << 20;
/// Most tests read from one process (a suite of a million tests is far beyond any run here).
pub const MAX_TESTS: usize = 1 << 20;
/// Longest text kept of a message, a report or captured output.
const MAX_TEXT: usize = 16 << 10;

/// How a test ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TestOutcome {
    /// Its call failed (an assertion, an exception in the test body).
    Failed,
    /// Its setup or teardown failed (a fixture, `setUp`), or unittest's "error".
    Error,
    /// Its process died inside it (a crash, `os._exit`, a kill): no finish line.
    Interrupted,
    Passed,
    /// Marked expected to fail and passed.
    Xpassed,
    Skipped,
    /// Marked expected to fail, and failed.
    Xfailed,
    /// Not run because it is disabled in the source (GoogleTest's `DISABLED_` prefix: the
    /// runner reports it `NOTRUN`). No tree.
    Disabled,
    /// Not run because it is marked ignored (libtest's `#[ignore]`). No tree.
    Ignored,
}

impl TestOutcome {
    /// Whether the test counts as failing (for `--test failed` and the spectrum).
    pub fn is_failure(self) -> bool {
        matches!(self, TestOutcome::Failed | TestOutcome::Error | TestOutcome::Interrupted)
    }

    /// Whether it counts as passing (for the spectrum: skipped and xfailed tests count as neither).
    pub fn is_pass(self) -> bool {
        matches!(self, TestOutcome::Passed | TestOutcome::Xpassed)
    }

    pub fn name(self) -> &'static str {
        match self {
            TestOutcome::Failed => "failed",
            TestOutcome::Error => "error",
            TestOutcome::Interrupted => "interrupted",
            TestOutcome::Xpassed => "xpassed",
            TestOutcome::Passed => "passed",
            TestOutcome::Skipped => "skipped",
            TestOutcome::Xfailed => "xfailed",
            TestOutcome::Disabled => "disabled",
            TestOutcome::Ignored => "ignored",
        }
    }
}

/// One phase of a test (pytest: setup, call, teardown).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestPhase {
    pub when: String,
    pub outcome: String,
    #[serde(default)]
    pub duration_ns: u64,
}

/// A frame of a failure's traceback.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestFrame {
    pub file: String,
    #[serde(default)]
    pub line: Option<u32>,
    /// What the runner says of the frame (pytest: the exception; unittest: the function).
    #[serde(default)]
    pub message: Option<String>,
    /// The frame's function, when the runner's text leaves it out (pytest's long-style
    /// entries: the test's frame and the innermost one). Added within version 3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function: Option<String>,
}

/// Why a test failed (or was skipped), as the runner reported it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestFailure {
    /// The phase that failed: `setup`, `call`, `teardown`.
    #[serde(default)]
    pub phase: Option<String>,
    /// Exception type (`AssertionError`).
    #[serde(default)]
    pub exception: Option<String>,
    #[serde(default)]
    pub message: Option<String>,
    /// Where it failed (the innermost frame the runner shows).
    #[serde(default)]
    pub file: Option<String>,
    #[serde(default)]
    pub line: Option<u32>,
    /// Traceback, outermost first.
    #[serde(default)]
    pub frames: Vec<TestFrame>,
    /// The failing statement and the comparison, as the runner prints them (pytest's `>` and
    /// `E` lines).
    #[serde(default)]
    pub report: Option<String>,
    /// A parametrized test's parameters (pytest's `callspec.params`: name, bounded `repr` of
    /// the value, in the order pytest gives them), taken after the test ended. Added within
    /// version 3.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub params: Vec<(String, String)>,
}

/// Most parameters read of one failure.
pub const MAX_PARAMS: usize = 32;

/// Most characters of a parameter's value kept by a reader (the recorder keeps fewer).
pub const MAX_PARAM_TEXT: usize = 400;

/// The `seq` of a test that ran no code and so has no tree ([`TestOutcome::Disabled`],
/// [`TestOutcome::Ignored`]).
pub const NO_TREE: u32 = u32::MAX;

/// Most subtests read from one test.
pub const MAX_SUBTESTS: usize = 1000;

/// One test as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestRun {
    /// The runner's id: pytest's node id (with its parametrization), unittest's `id()`; a
    /// subtest's is its test's id, a space and its description (`[msg] (i=3)`).
    pub id: String,
    /// `pytest` or `unittest`.
    pub runner: String,
    /// The thread it ran in and its place among that thread's tests (0, 1, ...): the
    /// `seq`-th test boundary in that thread's stream; [`NO_TREE`] for a test that ran no
    /// code (disabled, ignored).
    pub tid: u64,
    pub seq: u32,
    /// Where the test is defined, as the runner gives it.
    pub file: Option<String>,
    pub line: Option<u32>,
    /// The fixtures it requested (pytest), by name.
    pub fixtures: Vec<String>,
    pub outcome: TestOutcome,
    pub phases: Vec<TestPhase>,
    pub duration_ns: Option<u64>,
    pub failure: Option<TestFailure>,
    /// Captured output (section name, its last part).
    pub output: BTreeMap<String, String>,
    /// For a subtest: the id of the test it ran in (whose tree, `tid` and `seq` it shares).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// The test's subtests, in the order the runner reported them (added within version 3).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subtests: Vec<TestRun>,
    /// Subtests the recorder left out past its bound (200 per test).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub subtests_dropped: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// A subtest of a finish line.
#[derive(Deserialize)]
struct SubLine {
    id: String,
    #[serde(default)]
    outcome: Option<TestOutcome>,
    #[serde(default)]
    duration_ns: Option<u64>,
    #[serde(default)]
    failure: Option<TestFailure>,
    #[serde(default)]
    output: BTreeMap<String, Option<String>>,
}

#[derive(Deserialize)]
struct Line {
    event: String,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    runner: Option<String>,
    tid: u64,
    seq: u32,
    #[serde(default)]
    file: Option<String>,
    #[serde(default)]
    line: Option<u32>,
    #[serde(default)]
    fixtures: Vec<String>,
    #[serde(default)]
    outcome: Option<TestOutcome>,
    #[serde(default)]
    phases: Vec<TestPhase>,
    #[serde(default)]
    duration_ns: Option<u64>,
    #[serde(default)]
    failure: Option<TestFailure>,
    #[serde(default)]
    output: BTreeMap<String, Option<String>>,
    /// Each read on its own: one that does not parse is skipped, not the whole line.
    #[serde(default)]
    subtests: Vec<serde_json::Value>,
    #[serde(default)]
    subtests_dropped: u32,
}

/// What [`read_tests`] found.
#[derive(Debug, Clone, Default)]
pub struct TestsDoc {
    /// In start order.
    pub tests: Vec<TestRun>,
    /// Lines that could not be read (damaged, too long, not the expected JSON).
    pub bad_lines: usize,
    /// Subtests of finish lines that could not be read (the rest of the line was).
    pub bad_subtests: usize,
}

/// `s` without the terminal's escape sequences: a runner run with colour (`pytest
/// --color=yes`, a project's `addopts`) writes them into its report and captured output, and
/// a model reads `\x1b[91m- 13th\x1b[39;49;00m` as text. Removed: CSI sequences (`ESC [`
/// parameters, a final byte: colours, cursor moves), OSC strings (`ESC ]` to BEL or `ESC \`:
/// titles, hyperlinks), character-set designations (`ESC ( B`) and other two-byte escapes.
pub fn strip_terminal_escapes(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.contains('\x1b') {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\x1b' {
            out.push(c);
            continue;
        }
        match chars.next() {
            // CSI: parameter and intermediate bytes (0x20-0x3f), then one final byte (0x40-0x7e).
            Some('[') => {
                while chars.next_if(|c| ('\x20'..='\x3f').contains(c)).is_some() {}
                chars.next_if(|c| ('\x40'..='\x7e').contains(c));
            }
            // OSC: to BEL or ST (`ESC \`).
            Some(']') => {
                while let Some(c) = chars.next() {
                    if c == '\x07' || (c == '\x1b' && chars.next_if_eq(&'\\').is_some()) {
                        break;
                    }
                }
            }
            // nF (`ESC ( B`: a character set): intermediate bytes, then one final byte.
            Some(c) if ('\x20'..='\x2f').contains(&c) => {
                while chars.next_if(|c| ('\x20'..='\x2f').contains(c)).is_some() {}
                chars.next_if(|c| ('\x30'..='\x7e').contains(c));
            }
            _ => {}
        }
    }
    std::borrow::Cow::Owned(out)
}

fn cut(s: &mut String) {
    cut_at(s, MAX_TEXT);
}

/// `s` without terminal escapes, cut to at most `max` bytes (at a character boundary) and then
/// marked `...`.
fn cut_at(s: &mut String, max: usize) {
    if let std::borrow::Cow::Owned(clean) = strip_terminal_escapes(s) {
        *s = clean;
    }
    if s.len() > max {
        let mut i = max;
        while !s.is_char_boundary(i) {
            i -= 1;
        }
        s.truncate(i);
        s.push_str("...");
    }
}

fn cut_opt(s: &mut Option<String>) {
    if let Some(s) = s {
        cut(s);
    }
}

fn cut_failure(f: &mut TestFailure) {
    cut_opt(&mut f.message);
    cut_opt(&mut f.report);
    cut_opt(&mut f.exception);
    cut_opt(&mut f.file);
    cut_opt(&mut f.phase);
    f.params.truncate(MAX_PARAMS);
    for (name, value) in &mut f.params {
        cut_at(name, 200);
        cut_at(value, MAX_PARAM_TEXT);
    }
    let skip = f.frames.len().saturating_sub(64);
    f.frames.drain(..skip);
    for fr in &mut f.frames {
        cut(&mut fr.file);
        cut_opt(&mut fr.message);
        cut_opt(&mut fr.function);
    }
}

fn read_output(output: BTreeMap<String, Option<String>>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for (k, v) in output.into_iter().take(16) {
        if let Some(mut v) = v {
            let mut k = k;
            cut(&mut k);
            cut(&mut v);
            out.insert(k, v);
        }
    }
    out
}

/// Read a process directory's `tests.jsonl` (missing: no tests).
pub fn read_tests(dir: &Path) -> std::io::Result<TestsDoc> {
    let path = dir.join(TESTS_FILE);
    let f = match crate::reader::open_regular(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(TestsDoc::default()),
        Err(e) => return Err(e),
    };
    let mut r = std::io::BufReader::new(f);
    let mut doc = TestsDoc::default();
    let mut index: std::collections::HashMap<(u64, u32), usize> = std::collections::HashMap::new();
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let n = std::io::Read::take(&mut r, MAX_TEST_LINE as u64 + 1).read_until(b'\n', &mut buf)?;
        if n == 0 {
            break;
        }
        if buf.last() != Some(&b'\n') {
            if n > MAX_TEST_LINE {
                // Skip the rest of an overlong line.
                doc.bad_lines += 1;
                let mut sink = Vec::new();
                r.read_until(b'\n', &mut sink)?;
                continue;
            }
            break; // a last line cut short (the process died while writing it)
        }
        let Ok(mut l) = serde_json::from_slice::<Line>(&buf) else {
            doc.bad_lines += 1;
            continue;
        };
        match l.event.as_str() {
            "start" => {
                if doc.tests.len() >= MAX_TESTS {
                    doc.bad_lines += 1;
                    continue;
                }
                let Some(mut id) = l.id.take() else {
                    doc.bad_lines += 1;
                    continue;
                };
                cut(&mut id);
                let mut file = l.file.take();
                cut_opt(&mut file);
                index.insert((l.tid, l.seq), doc.tests.len());
                doc.tests.push(TestRun {
                    id,
                    runner: l
                        .runner
                        .take()
                        .map(|mut r| {
                            r.truncate(32);
                            r
                        })
                        .unwrap_or_default(),
                    tid: l.tid,
                    seq: l.seq,
                    file,
                    line: l.line,
                    fixtures: {
                        l.fixtures.truncate(256);
                        l.fixtures.iter_mut().for_each(cut);
                        std::mem::take(&mut l.fixtures)
                    },
                    outcome: TestOutcome::Interrupted,
                    phases: Vec::new(),
                    duration_ns: None,
                    failure: None,
                    output: BTreeMap::new(),
                    parent: None,
                    subtests: Vec::new(),
                    subtests_dropped: 0,
                });
            }
            "finish" => {
                let Some(&i) = index.get(&(l.tid, l.seq)) else {
                    doc.bad_lines += 1;
                    continue;
                };
                let t = &mut doc.tests[i];
                t.outcome = l.outcome.unwrap_or(TestOutcome::Interrupted);
                l.phases.truncate(16);
                for p in &mut l.phases {
                    cut(&mut p.when);
                    cut(&mut p.outcome);
                }
                t.phases = l.phases;
                t.duration_ns = l.duration_ns;
                if let Some(mut f) = l.failure {
                    cut_failure(&mut f);
                    t.failure = Some(f);
                }
                t.output = read_output(l.output);
                t.subtests_dropped = l.subtests_dropped;
                for v in l.subtests {
                    if t.subtests.len() >= MAX_SUBTESTS {
                        t.subtests_dropped = t.subtests_dropped.saturating_add(1);
                        continue;
                    }
                    let Ok(sub) = serde_json::from_value::<SubLine>(v) else {
                        doc.bad_subtests += 1;
                        continue;
                    };
                    let mut id = sub.id;
                    cut(&mut id);
                    let failure = sub.failure.map(|mut f| {
                        cut_failure(&mut f);
                        f
                    });
                    t.subtests.push(TestRun {
                        id,
                        runner: t.runner.clone(),
                        tid: t.tid,
                        seq: t.seq,
                        file: t.file.clone(),
                        line: t.line,
                        fixtures: Vec::new(),
                        outcome: sub.outcome.unwrap_or(TestOutcome::Interrupted),
                        phases: Vec::new(),
                        duration_ns: sub.duration_ns,
                        failure,
                        output: read_output(sub.output),
                        parent: Some(t.id.clone()),
                        subtests: Vec::new(),
                        subtests_dropped: 0,
                    });
                }
            }
            _ => doc.bad_lines += 1,
        }
    }
    Ok(doc)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_and_finishes_merge_and_a_missing_finish_is_interrupted() {
        let d = tempfile::tempdir().unwrap();
        let text = concat!(
            r#"{"event":"start","id":"t.py::a","runner":"pytest","tid":7,"seq":0,"file":"t.py","line":3}"#,
            "\n",
            r#"{"event":"finish","id":"t.py::a","tid":7,"seq":0,"outcome":"failed","phases":[{"when":"call","outcome":"failed","duration_ns":5}],"duration_ns":9,"failure":{"phase":"call","exception":"AssertionError","message":"assert 1 == 2","file":"t.py","line":4,"frames":[{"file":"t.py","line":4}],"report":"E  assert 1 == 2"},"output":{"Captured stdout call":"hi\n","x":null}}"#,
            "\n",
            "not json\n",
            r#"{"event":"start","id":"t.py::b","runner":"pytest","tid":7,"seq":1}"#,
            "\n",
            r#"{"event":"finish","id":"t.py::b","tid":7,"se"#,
        );
        std::fs::write(d.path().join(TESTS_FILE), text).unwrap();
        let doc = read_tests(d.path()).unwrap();
        assert_eq!(doc.bad_lines, 1);
        assert_eq!(doc.tests.len(), 2);
        let a = &doc.tests[0];
        assert_eq!((a.id.as_str(), a.outcome, a.duration_ns, a.line), ("t.py::a", TestOutcome::Failed, Some(9), Some(3)));
        let f = a.failure.as_ref().unwrap();
        assert_eq!((f.exception.as_deref(), f.line, f.frames.len()), (Some("AssertionError"), Some(4), 1));
        assert_eq!(a.output.get("Captured stdout call").map(|s| s.as_str()), Some("hi\n"));
        assert_eq!(a.output.len(), 1);
        assert_eq!(doc.tests[1].outcome, TestOutcome::Interrupted);
        assert!(TestOutcome::Interrupted.is_failure() && !TestOutcome::Skipped.is_pass());
    }

    /// pytest's coloured report, as `--color=yes` writes it into tests.jsonl: the text a model
    /// reads has no escapes; a plain `[` and text after an OSC hyperlink stay.
    #[test]
    fn a_coloured_report_is_read_without_terminal_escapes() {
        let coloured = "E         \u{1b}[0m\u{1b}[91m- 13th\u{1b}[39;49;00m\u{1b}[90m\u{1b}[39;49;00m\nE  [x] \u{1b}]8;;file:///a\u{7}a.py\u{1b}]8;;\u{1b}\\ \u{1b}(B\u{1b}[1;2Hend";
        assert_eq!(strip_terminal_escapes(coloured), "E         - 13th\nE  [x] a.py end");
        assert!(matches!(strip_terminal_escapes("plain [0m"), std::borrow::Cow::Borrowed("plain [0m")));
        let d = tempfile::tempdir().unwrap();
        let line = serde_json::json!({"event": "finish", "id": "t.py::a", "runner": "pytest", "tid": 7, "seq": 0, "outcome": "failed",
            "failure": {"message": "assert '13rd' == '13th'", "report": coloured}, "output": {"Captured stdout call": "\u{1b}[32mok\u{1b}[0m\n"}});
        let start = serde_json::json!({"event": "start", "id": "t.py::a", "runner": "pytest", "tid": 7, "seq": 0});
        std::fs::write(d.path().join(TESTS_FILE), format!("{start}\n{line}\n")).unwrap();
        let doc = read_tests(d.path()).unwrap();
        let t = &doc.tests[0];
        assert_eq!(t.failure.as_ref().and_then(|f| f.report.as_deref()), Some("E         - 13th\nE  [x] a.py end"));
        assert_eq!(t.output.get("Captured stdout call").map(String::as_str), Some("ok\n"));
    }

    #[test]
    fn a_missing_file_is_no_tests_and_an_overlong_line_is_skipped() {
        let d = tempfile::tempdir().unwrap();
        assert!(read_tests(d.path()).unwrap().tests.is_empty());
        let mut text = format!("{{\"event\":\"start\",\"id\":\"{}\",\"tid\":1,\"seq\":0}}\n", "x".repeat(MAX_TEST_LINE));
        text.push_str("{\"event\":\"start\",\"id\":\"ok\",\"tid\":1,\"seq\":1}\n");
        std::fs::write(d.path().join(TESTS_FILE), text).unwrap();
        let doc = read_tests(d.path()).unwrap();
        assert_eq!((doc.bad_lines, doc.tests.len(), doc.tests[0].id.as_str()), (1, 1, "ok"));
    }
    #[test]
    fn subtests_are_tests_of_their_own_in_their_tests_tree_and_a_damaged_one_is_skipped_alone() {
        let d = tempfile::tempdir().unwrap();
        let text = concat!(
            r#"{"event":"start","id":"m.T.test_x","runner":"unittest","tid":7,"seq":3,"file":"/p/t.py","line":5}"#,
            "\n",
            r#"{"event":"finish","id":"m.T.test_x","tid":7,"seq":3,"outcome":"failed","failure":{"message":"contains 1 failed subtest"},"#,
            r#""subtests":[{"id":"m.T.test_x (i=0)","outcome":"passed"},{"id":"m.T.test_x (i=1)","outcome":"failed","duration_ns":4,"#,
            r#""failure":{"exception":"AssertionError","message":"1 != 2","file":"/p/t.py","line":7},"output":{"Captured stdout call":"hi"}},"#,
            r#"{"id":"m.T.test_x (i=2)","outcome":"exploded"},{"outcome":"passed"}],"subtests_dropped":3}"#,
            "\n",
        );
        std::fs::write(d.path().join(TESTS_FILE), text).unwrap();
        let doc = read_tests(d.path()).unwrap();
        assert_eq!((doc.bad_lines, doc.bad_subtests, doc.tests.len()), (0, 2, 1));
        let t = &doc.tests[0];
        assert_eq!((t.outcome, t.subtests.len(), t.subtests_dropped, t.parent.as_deref()), (TestOutcome::Failed, 2, 3, None));
        let s = &t.subtests[1];
        assert_eq!(
            (s.id.as_str(), s.outcome, s.tid, s.seq, s.parent.as_deref(), s.runner.as_str(), s.file.as_deref(), s.duration_ns),
            ("m.T.test_x (i=1)", TestOutcome::Failed, 7, 3, Some("m.T.test_x"), "unittest", Some("/p/t.py"), Some(4))
        );
        let f = s.failure.as_ref().unwrap();
        assert_eq!((f.message.as_deref(), f.line), (Some("1 != 2"), Some(7)));
        assert_eq!(s.output.get("Captured stdout call").map(|s| s.as_str()), Some("hi"));
        assert_eq!((t.subtests[0].outcome, t.subtests[0].failure.is_none()), (TestOutcome::Passed, true));
        // Written with its subtests, as `slice tests --format json` does: the nesting kept.
        let json = serde_json::to_value(t).unwrap();
        assert_eq!(json["subtests"][1]["parent"], "m.T.test_x");
        assert!(serde_json::to_value(&t.subtests[0]).unwrap().get("subtests").is_none());
    }
}
