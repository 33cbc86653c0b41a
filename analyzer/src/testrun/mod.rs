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
pub mod invocations;
pub mod libtest;
mod pick;
mod spectrum;
mod table;

pub use earlier::built_earlier;
pub use pick::{cap_tests, id_words};
pub use spectrum::{counted_ids, function_kind, function_kinds, runner_work, FuncKind, Spectrum};
pub use table::{LeftOut, RankRule, RankedFunction, TestRow, TestTable};

use regex::Regex;
use std::fmt::Write as _;
use std::path::Path;
use trace_format::{ExitStatus, TestOutcome, TestRun};

/// Which tests `--test` selects.
#[derive(Debug, Clone)]
pub enum TestFilter {
    /// Every failing test (failed, error, interrupted).
    Failed,
    /// An id: exact, a glob (`*`, `?`), or the end of an id after a `::`, `.` or `/` (a
    /// parametrized test's name takes all its instances). A glob, like a name, may match the
    /// whole id or its end after one of those separators: `test_sub*` takes
    /// `tests/test_x.py::test_subtract`.
    Pattern { text: String, glob: Option<Regex> },
    /// These ids exactly (`slice diff pass.d fail.d --test failed`: in the run where they
    /// passed, the tests that failed in the other).
    Ids(Vec<String>),
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
            // The whole id, or its end after a separator (as a plain name matches).
            let mut re = String::from(r"^(?:.*(?:::|\.|/))?");
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

    /// The filter as it was given (`failed`, an id or a glob).
    pub fn text(&self) -> String {
        match self {
            TestFilter::Failed => "failed".to_string(),
            TestFilter::Pattern { text, .. } => text.clone(),
            TestFilter::Ids(ids) => ids.join(" "),
        }
    }

    /// What the filter picks of a test and its subtests (which run inside the test and share its
    /// tree): `None` when neither the test nor any subtest matches; else the subtests to show
    /// with it: those that match, and when the test itself matches, its failing ones too (what
    /// made it fail).
    pub fn pick<'a>(&self, t: &'a TestRun) -> Option<Vec<&'a TestRun>> {
        let own = self.matches(t);
        let subs: Vec<&TestRun> = t.subtests.iter().filter(|s| self.matches(s) || (own && s.outcome.is_failure())).collect();
        (own || !subs.is_empty()).then_some(subs)
    }

    pub fn matches(&self, t: &TestRun) -> bool {
        match self {
            TestFilter::Failed => t.outcome.is_failure(),
            TestFilter::Pattern { glob: Some(re), .. } => re.is_match(&t.id),
            // (Two runs from different directories name a test's file from each one.)
            TestFilter::Ids(ids) => ids.iter().any(|id| {
                let (long, short) = if id.len() >= t.id.len() { (id.as_str(), t.id.as_str()) } else { (t.id.as_str(), id.as_str()) };
                long == short || long.strip_suffix(short).is_some_and(|head| head.ends_with('/'))
            }),
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

/// `1 body`, `2 bodies`: [`plural`] of a word whose plural is not its `-s` form.
pub fn plural_of(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
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

/// Why a run of a test runner recorded no test, when its command and exit status tell: a
/// pytest or unittest command that ended with one of the runner's own statuses (pytest's 5: it
/// collected or selected none; 2: collection errors or an interrupt; 4: a usage error such as a
/// path that does not exist; unittest's 5, or 0 before Python 3.12: it found none). None when the command is not a test runner's, or the status says
/// nothing of it (see docs/trace-format.md, "tests.jsonl", for how the runner is recorded).
pub fn why_no_tests(argv: &[String], exit: Option<&ExitStatus>) -> Option<String> {
    let runner = test_runner_of(argv)?;
    let code = exit.and_then(|e| if e.signal.is_none() { e.code } else { None });
    let why = match (runner, code) {
        ("pytest", Some(5)) => "pytest collected no tests, or its options (`-k`, `-m`, a node id) selected none",
        ("pytest", Some(2)) => "pytest stopped before running tests: errors while collecting them, or an interrupt (its output names them)",
        ("pytest", Some(4)) => "pytest refused its command line: a usage error, or a path that does not exist (its output names it)",
        ("pytest", Some(3)) => "pytest failed inside itself (an internal error; its output shows it)",
        ("unittest", Some(5)) => "unittest found no tests to run",
        // Before Python 3.12 unittest ends with 0 when it ran none (`Ran 0 tests`).
        ("unittest", Some(0)) => "unittest found no tests to run (its output says `Ran 0 tests`; before Python 3.12 it exits 0 then)",
        _ => return None,
    };
    let command = argv.iter().map(|a| trace_format::escape::line(a)).collect::<Vec<_>>().join(" ");
    Some(format!("`{command}` ended with exit status {}: {why}", code.unwrap_or_default()))
}

/// `pytest` or `unittest` when `argv` runs that test runner (`pytest ...`, `py.test ...`,
/// `python -m pytest ...`, `python3.12 -m unittest ...`).
fn test_runner_of(argv: &[String]) -> Option<&'static str> {
    let name = |a: &str| match a {
        "pytest" | "py.test" => Some("pytest"),
        "unittest" => Some("unittest"),
        _ => None,
    };
    let base = |a: &String| Path::new(a).file_name().and_then(|n| n.to_str()).map(str::to_string).unwrap_or_default();
    if let Some(r) = argv.first().and_then(|a| name(&base(a))) {
        return Some(r);
    }
    if !argv.first().map(base).is_some_and(|b| b.starts_with("python")) {
        return None;
    }
    // The interpreter's options up to `-m` (`-X dev`, `-W error` take a value); a script or
    // `-c` before it runs something else.
    let mut args = argv.iter().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "-m" => return args.next().and_then(|m| name(m)),
            "-X" | "-W" => {
                args.next();
            }
            o if o.starts_with('-') && o != "-c" => {}
            _ => return None,
        }
    }
    None
}

/// Whether the tests a trace's runner recorded (`tests.jsonl`) include a failing one, read
/// without folding the streams: None when it recorded none (a Rust or GoogleTest binary's tests
/// are read from the tree, so only the fold can tell) or the trace cannot be read.
pub fn recorded_failures(dir: &Path) -> Option<bool> {
    let td = trace_format::reader::TraceDir::open_with(dir, trace_format::reader::FuncTables::Count).ok()?;
    let mut any = false;
    for p in &td.processes {
        let doc = trace_format::testrun::read_tests(&p.dir).ok()?;
        any |= !doc.tests.is_empty();
        if doc.tests.iter().any(|t| t.outcome.is_failure() || t.subtests.iter().any(|s| s.outcome.is_failure())) {
            return Some(true);
        }
    }
    any.then_some(false)
}

/// How a run ended, in words, whatever the status: [`failed_exit`]'s words for a failure,
/// `exit status 0`, or `no exit status recorded` (killed with `trace`, or copied while running).
pub fn exit_words(exit: Option<&ExitStatus>) -> String {
    match exit {
        Some(e) => failed_exit(Some(e)).unwrap_or_else(|| format!("exit status {}", e.code.unwrap_or(0))),
        None => "no exit status recorded".to_string(),
    }
}

/// One line of a test for a list of them, as `slice tests` lists its failures: the id, then for
/// a failing test the first line of its failure and where (its [`place`] under the run's
/// directory `cwd`), else its outcome. Escaped to one line ([`escape::line`]).
pub fn outcome_line(t: &TestRun, cwd: &Path) -> String {
    use trace_format::escape;
    if !t.outcome.is_failure() {
        return format!("{}: {}", escape::line(&t.id), t.outcome.name());
    }
    let f = t.failure.as_ref();
    let head = failure_head(t).unwrap_or_else(|| "(no failure recorded: the process ended inside the test)".into());
    let at = f.and_then(failure_place).map(|(file, line)| format!(" at {}", place(&file, line, cwd))).unwrap_or_default();
    format!("{}: {}{}", escape::line(&t.id), escape::line(&head), escape::line(&at))
}

/// Where a failure happened (file as the runner gives it, line): the place the runner
/// recorded, except for a doctest run by unittest (`DocTestCase`), whose recorded place is
/// doctest's own `raise` (`stdlib/doctest.py:2247`) while its message names the first failing
/// example's: `File "/p/m/more.py", line 1929, in m.more.divide` after a line of dashes.
pub fn failure_place(f: &trace_format::TestFailure) -> Option<(String, Option<u32>)> {
    doctest_example(f).map(|(file, line)| (file, Some(line))).or_else(|| Some((f.file.clone()?, f.line)))
}

/// The place of a failed doctest's first failing example, from its message ([`failure_place`]).
fn doctest_example(f: &trace_format::TestFailure) -> Option<(String, u32)> {
    let message = f.message.as_deref().filter(|m| m.starts_with("Failed doctest test for "))?;
    let mut lines = message.lines();
    while let Some(l) = lines.next() {
        if !(l.len() >= 10 && l.bytes().all(|b| b == b'-')) {
            continue;
        }
        let example = lines.next().and_then(|l| l.trim().strip_prefix("File \"")).and_then(|r| r.split_once("\", line "));
        if let Some((file, rest)) = example {
            if let Some(line) = rest.split(|c: char| !c.is_ascii_digit()).next().and_then(|n| n.parse().ok()) {
                return Some((file.to_string(), line));
            }
        }
    }
    None
}

/// The first line of a test's failure (None without one): its message's (else the report's),
/// for Python's runners named by its exception type as pytest names it (`KeyError: 2`;
/// unittest's message is the bare `2`). libtest's `panic` is a kind, not a type: its message
/// is as libtest prints it.
pub fn failure_head(t: &TestRun) -> Option<String> {
    let f = t.failure.as_ref()?;
    let head = f.message.as_deref().or(f.report.as_deref()).and_then(|m| m.lines().find(|l| !l.trim().is_empty())).unwrap_or("").trim();
    // (A subtest, recorded inside its Python test, names no runner.)
    let python = matches!(t.runner.as_str(), "pytest" | "unittest" | "");
    Some(match f.exception.as_deref().map(str::trim).filter(|e| python && !e.is_empty()) {
        Some(e) if head.is_empty() => e.to_string(),
        // `AssertionError: ...`, `E   KeyError ...`, `builtins.KeyError: 2`, a report line.
        Some(e) if !head.contains(e.rsplit('.').next().unwrap_or(e)) && f.message.is_some() => format!("{e}: {head}"),
        _ => head.to_string(),
    })
}

/// Counts of outcomes, `3 failed, 458 passed, 2 xfailed`, most serious first.
pub fn outcome_counts<'a>(tests: impl IntoIterator<Item = &'a TestRun>) -> String {
    let mut counts: std::collections::BTreeMap<TestOutcome, usize> = Default::default();
    for t in tests {
        *counts.entry(t.outcome).or_default() += 1;
    }
    counts.iter().map(|(o, n)| format!("{n} {}", o.name())).collect::<Vec<_>>().join(", ")
}

/// Subtests of one test whose blocks a prompt shows (each a block of its own, after its
/// test's): past these, the test's block says how many were picked.
pub const SHOWN_SUBTESTS: usize = 5;

/// The failing subtests of a test, for the prompt of a whole run ([`outcome_texts`] shows at
/// most [`SHOWN_SUBTESTS`] of them).
pub fn failing_subtests(t: &TestRun) -> Vec<&TestRun> {
    t.subtests.iter().filter(|s| s.outcome.is_failure()).collect()
}

/// What a prompt says of a test and the subtests shown with it ([`TestFilter::pick`],
/// [`failing_subtests`]): the test's [`outcome_text`], then each subtest's, at most
/// [`SHOWN_SUBTESTS`] of them (the test's block counts the rest).
pub fn outcome_texts(t: &TestRun, subs: &[&TestRun], cwd: &Path) -> Vec<String> {
    let mut head = outcome_text(t, cwd);
    if subs.len() > SHOWN_SUBTESTS {
        // Before the captured output, beside the subtests' counts.
        let note = format!("\n({SHOWN_SUBTESTS} of the {} subtests picked are shown)", subs.len());
        let at = head.find("\n--- ").unwrap_or(head.len());
        head.insert_str(at, &note);
    }
    let mut out = vec![head];
    out.extend(subs.iter().take(SHOWN_SUBTESTS).map(|s| outcome_text(s, cwd)));
    out
}

/// The failures a prompt has shown, to say a repeated one in a line: tests that fail alike (one
/// bug under a parametrized test) have the same place, report and traceback, and a prompt of
/// five of them repeated one block four times (about 100 tokens each).
#[derive(Default)]
pub struct ShownFailures {
    /// (what follows the first line of an [`outcome_text`], the test's id).
    seen: Vec<(String, String)>,
}

impl ShownFailures {
    /// `text` (the [`outcome_text`] of test `id`), or its first line and a line naming the test
    /// above whose failure reads the same.
    pub fn say(&mut self, id: &str, text: String) -> String {
        let Some((head, body)) = text.split_once('\n') else { return text };
        if body.trim().is_empty() {
            return text;
        }
        if let Some((_, earlier)) = self.seen.iter().find(|(b, _)| b == body) {
            return format!("{head}\nFailed as {earlier} above: the same place, report and traceback.");
        }
        self.seen.push((body.to_string(), id.to_string()));
        text
    }
}

/// The traceback frames of a failing test (file as the runner gives it, line), for the
/// ranking ([`crate::analysis::PreparedTrace::failure_frames`]); none for other outcomes.
pub fn failure_frames(t: &TestRun) -> Vec<(String, u32)> {
    match (&t.failure, t.outcome.is_failure()) {
        (Some(f), true) => {
            let mut frames: Vec<(String, u32)> = f.frames.iter().filter_map(|fr| Some((fr.file.clone(), fr.line?))).collect();
            // A doctest's failing example, in the docstring of the function it documents, is
            // where it failed: the innermost frame.
            frames.extend(doctest_example(f));
            frames
        }
        _ => Vec::new(),
    }
}

/// How long a test took: as its runner measured it where it did (pytest's setup, call and
/// teardown phases, what `pytest --durations` reports), else the recorder's time from the
/// test's start to its end, which also holds the runner's own work inside it (under tracing,
/// formatting a failure's report can take longer than the test).
pub fn test_duration(t: &TestRun) -> Option<u64> {
    let phases: u64 = t.phases.iter().map(|p| p.duration_ns).sum();
    if phases > 0 {
        Some(phases)
    } else {
        t.duration_ns
    }
}

/// A place a runner reported (a failure's file and line, a traceback frame's), as the rest of a
/// prompt shows paths ([`crate::analysis::display_path`]'s rule, unescaped: the caller escapes
/// the whole text): pytest gives paths relative to the directory it ran in, unittest absolute
/// ones; both read `tests/test_x.py:4` for a file under the run's directory `cwd`.
pub fn place(file: &str, line: Option<u32>, cwd: &Path) -> String {
    let path = cwd.join(file); // (an absolute `file` stays itself)
    format!("{}{}", crate::analysis::shortened_path(&path, cwd), line.map(|l| format!(":{l}")).unwrap_or_default())
}

/// What a prompt says first about a test: its outcome, and for a failure where it failed (its
/// [`place`] under the run's directory `cwd`), the runner's report of the failing statement and
/// the comparison, the traceback, its subtests' counts and the tail of its output. Plain text
/// (the template fences it).
pub fn outcome_text(t: &TestRun, cwd: &Path) -> String {
    let mut s = String::new();
    let _ = write!(s, "{} {}", t.outcome.name().to_uppercase(), t.id);
    let phase = t.failure.as_ref().and_then(|f| f.phase.as_deref()).filter(|p| *p != "call" && t.outcome.is_failure());
    if let Some(p) = phase {
        let _ = write!(s, " (in {p})");
    }
    if let Some(d) = test_duration(t) {
        let _ = write!(s, ", {}", duration(d));
    }
    s.push('\n');
    if t.outcome == TestOutcome::Interrupted {
        s.push_str("The test never finished: its process ended inside it (a crash, os._exit, a kill or a timeout).\n");
    }
    if let Some(f) = &t.failure {
        if let Some((file, line)) = failure_place(f) {
            let _ = writeln!(s, "at {}", place(&file, line, cwd));
        }
        if let Some(p) = params_line(&f.params) {
            s.push_str(&p);
            s.push('\n');
        }
        // A doctest's report quotes doctest's own `raise`; its message is the examples'.
        let report = f.report.as_ref().filter(|_| doctest_example(f).is_none());
        match (report, &f.message) {
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
                let _ = writeln!(s, "  {}{}", place(&fr.file, fr.line, cwd), frame_note(fr));
            }
        }
    }
    if !t.subtests.is_empty() || t.subtests_dropped > 0 {
        let n = t.subtests.len() + t.subtests_dropped as usize;
        let _ = write!(s, "{}: {}", plural(n, "subtest"), outcome_counts(&t.subtests));
        if t.subtests_dropped > 0 {
            let _ = write!(s, ", {} not recorded", t.subtests_dropped);
        }
        s.push('\n');
    }
    for (name, text) in &t.output {
        let text = text.trim_end();
        if !text.is_empty() {
            let _ = writeln!(s, "--- {name} ---\n{text}");
        }
    }
    s.trim_end().to_string()
}

/// How a failure's text gives a parametrized test's parameters (one line, never cut by
/// [`shorten_outcome`]): `with start=datetime.date(2096, 2, 29), duration=Duration(...)`. The
/// test's id names its instance (`test_calc_date[start4-duration4-expectation4]`) but not the
/// values it failed with, which the code under test computed from.
const PARAMS_HEAD: &str = "with parameters ";

fn params_line(params: &[(String, String)]) -> Option<String> {
    if params.is_empty() {
        return None;
    }
    let list: Vec<String> = params.iter().map(|(n, v)| format!("{n}={}", v.trim().replace('\n', " "))).collect();
    Some(format!("{PARAMS_HEAD}{}", list.join(", ")))
}

/// What a traceback line says after `file:line`: the runner's text of the frame (pytest: `in f`
/// for most frames, the exception for the innermost), with the function named when that text
/// leaves it out (` (in f: TypeError)`); empty when neither is known.
fn frame_note(fr: &trace_format::testrun::TestFrame) -> String {
    let message = fr.message.as_deref().and_then(|m| m.lines().next()).filter(|m| !m.trim().is_empty());
    let function = fr.function.as_deref().filter(|f| !f.is_empty());
    match (function, message) {
        (Some(f), Some(m)) if !m.trim_start().starts_with("in ") && m.trim() != f => format!(" (in {f}: {m})"),
        (Some(f), None) => format!(" (in {f})"),
        (_, Some(m)) => format!(" ({m})"),
        (None, None) => String::new(),
    }
}

/// Share of a prompt's budget (tokens) that a shown test's failure may take under a budget
/// ([`outcome_chars`]): the failure says what to look for, the code is the answer, and at
/// 4,000 tokens a failure with a long comparison (unittest's list diff repeating the test's
/// input, pytest's `+  where` lines repeating a repr) took 330 of them.
pub const OUTCOME_BUDGET_SHARE: usize = 20;

/// Characters per token assumed when sizing the failure ([`outcome_chars`]).
const CHARS_PER_TOKEN: usize = 7; // halves: 3.5

/// The characters a test's failure keeps in a prompt of `budget` tokens: 1/[`OUTCOME_BUDGET_SHARE`]
/// of the budget, at 3.5 characters a token (700 at 4,000 tokens, 3,500 at 20,000).
pub fn outcome_chars(budget: usize) -> usize {
    budget * CHARS_PER_TOKEN / 2 / OUTCOME_BUDGET_SHARE
}

/// A failure's text ([`outcome_text`]) cut to about `max` characters, keeping what says what
/// failed: the outcome line and its place, the exception and message, the failing statement
/// (`>`), the comparison's first and last lines, the test's own frame and the innermost. Cut
/// in this order, each only while the text is still over: the captured output; pytest's
/// `+  where` lines (they repeat a value already shown); the traceback's middle frames; each
/// report line past a width; the report's middle lines (unittest's diffs, a message quoting the
/// test's input). Every cut is marked in place (`[… N lines cut]`). Text within `max` is
/// returned unchanged; the outcome line, its place and the first report line are never cut, so
/// the result can stay over `max`.
pub fn shorten_outcome(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    // Sections: the head (outcome line, `at`, interruption note), the report, the traceback,
    // the captured outputs.
    let mut head: Vec<String> = Vec::new();
    let mut report: Vec<String> = Vec::new();
    let mut frames: Vec<String> = Vec::new();
    let mut outputs: Vec<String> = Vec::new();
    #[derive(PartialEq)]
    enum Part {
        Head,
        Report,
        Frames,
        Output,
    }
    let mut part = Part::Head;
    for (i, line) in text.lines().enumerate() {
        if line.starts_with("--- ") && line.ends_with(" ---") {
            part = Part::Output;
        } else if part != Part::Output && line == "traceback (innermost last):" {
            part = Part::Frames;
            continue;
        } else if part == Part::Head
            && i > 0
            && !line.starts_with("at ")
            && !line.starts_with(PARAMS_HEAD)
            && !line.starts_with("The test never finished")
        {
            part = Part::Report;
        }
        match part {
            Part::Head => head.push(line.to_string()),
            Part::Report => report.push(line.to_string()),
            Part::Frames => frames.push(line.to_string()),
            Part::Output => outputs.push(line.to_string()),
        }
    }
    let join = |head: &[String], report: &[String], frames: &[String], outputs: &[String]| -> String {
        let mut s = head.join("\n");
        for l in report {
            s.push('\n');
            s.push_str(l);
        }
        if !frames.is_empty() {
            s.push_str("\ntraceback (innermost last):");
            for l in frames {
                s.push('\n');
                s.push_str(l);
            }
        }
        for l in outputs {
            s.push('\n');
            s.push_str(l);
        }
        s
    };
    let fits = |r: &[String], f: &[String], o: &[String]| join(&head, r, f, o).len() <= max;
    // 1. Captured output.
    if !outputs.is_empty() && !fits(&report, &frames, &outputs) {
        let n = outputs.iter().filter(|l| !(l.starts_with("--- ") && l.ends_with(" ---"))).count();
        outputs = vec![format!("[… captured output cut: {}]", plural(n, "line"))];
    }
    // 2. pytest's `+  where` explanations (`E        +  where X = f()`, `E        +    where ...`).
    if !fits(&report, &frames, &outputs) {
        let is_where = |l: &str| {
            l.strip_prefix('E').is_some_and(|r| r.trim_start().strip_prefix('+').is_some_and(|w| w.trim_start().starts_with("where ")))
        };
        let n = report.iter().filter(|l| is_where(l)).count();
        if n > 0 {
            report.retain(|l| !is_where(l));
            report.push(format!("E   [… {} of pytest's `where` explanation cut]", plural(n, "line")));
        }
    }
    // 3. The traceback's middle frames: the test's own (first) and the innermost stay.
    if frames.len() > 2 && !fits(&report, &frames, &outputs) {
        let n = frames.len() - 2;
        let last = frames.pop().unwrap_or_default();
        frames.truncate(1);
        frames.push(format!("  [… {} cut]", plural(n, "frame")));
        frames.push(last);
    }
    // 4. Long report lines, past a width (a long repr), cut in the middle.
    if !fits(&report, &frames, &outputs) {
        let width = (max / 4).max(80);
        for l in report.iter_mut() {
            let chars = l.chars().count();
            if chars > width + 20 {
                let keep_head: String = l.chars().take(width * 2 / 3).collect();
                let keep_tail: String = l.chars().skip(chars - width / 3).collect();
                *l = format!("{keep_head}[… {} chars cut]{keep_tail}", chars - keep_head.chars().count() - keep_tail.chars().count());
            }
        }
    }
    // 5. The report's middle lines: its first lines (the statement, the exception) and its last
    // (where a message says what it got) stay, as many as fit.
    if report.len() > 3 && !fits(&report, &frames, &outputs) {
        let full = report.clone();
        let (mut a, mut b) = (1usize, 1usize);
        let cut = |a: usize, b: usize| -> Vec<String> {
            let n = full.len() - a - b;
            let mut r: Vec<String> = full[..a].to_vec();
            // `E` marks the runner's error lines: a cut of the statement's source lines is not one.
            let prefix = if full[a..full.len() - b].iter().all(|l| l.starts_with('E')) { "E" } else { " " };
            r.push(format!("{prefix}   [… {} cut]", plural(n, "line")));
            r.extend(full[full.len() - b..].iter().cloned());
            r
        };
        // Grow from the head and the tail alternately while the result fits.
        loop {
            let grow_head = a <= b;
            let (na, nb) = if grow_head { (a + 1, b) } else { (a, b + 1) };
            if na + nb >= full.len() || !fits(&cut(na, nb), &frames, &outputs) {
                break;
            }
            (a, b) = (na, nb);
        }
        if a + b < full.len() {
            report = cut(a, b);
        }
    }
    join(&head, &report, &frames, &outputs)
}

/// A pytest test of 12 ms with `outcome` and nothing else recorded, for tests.
#[cfg(test)]
pub(crate) fn test_run(id: &str, outcome: TestOutcome) -> TestRun {
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
        parent: None,
        subtests: Vec::new(),
        subtests_dropped: 0,
    }
}

#[cfg(test)]
mod tests {
    /// A pytest test's duration is its phases' (what pytest measured), not the recorder's time
    /// from its start to its end, which holds the report's formatting; without phases
    /// (unittest), the latter.
    #[test]
    fn a_tests_duration_is_the_runners_where_it_measured_one() {
        let mut t = super::test_run("t.py::test_x", trace_format::TestOutcome::Failed);
        t.duration_ns = Some(375_000_000);
        assert_eq!(super::test_duration(&t), Some(375_000_000));
        t.phases = ["setup", "call", "teardown"]
            .iter()
            .zip([1_000_000, 2_000_000, 500_000])
            .map(|(w, d)| trace_format::testrun::TestPhase { when: w.to_string(), outcome: "passed".into(), duration_ns: d })
            .collect();
        assert_eq!(super::test_duration(&t), Some(3_500_000));
        let text = super::outcome_text(&t, std::path::Path::new("/p"));
        assert_eq!(text, format!("FAILED t.py::test_x, {}", super::duration(3_500_000)));
    }

    /// A doctest that unittest ran failed at its first failing example, which its message
    /// names, not at doctest's own `raise`; other failures are where the runner put them.
    #[test]
    fn a_doctest_fails_at_its_first_failing_example() {
        let mut t = super::test_run("m.more.divide", trace_format::TestOutcome::Failed);
        let message = "Failed doctest test for m.more.divide\n  File \"/p/m/more.py\", line 1915, in divide\n\n\
                       ----------------------------------------------------------------------\n\
                       File \"/p/m/more.py\", line 1929, in m.more.divide\nFailed example:\n    divide(3, x)\n";
        t.failure = Some(trace_format::TestFailure {
            exception: Some("AssertionError".into()),
            message: Some(message.into()),
            file: Some("/usr/lib/python3.12/doctest.py".into()),
            line: Some(2247),
            frames: vec![trace_format::testrun::TestFrame {
                file: "/usr/lib/python3.12/doctest.py".into(),
                line: Some(2247),
                message: Some("runTest".into()),
                function: None,
            }],
            ..Default::default()
        });
        let cwd = std::path::Path::new("/p");
        assert_eq!(super::outcome_line(&t, cwd), "m.more.divide: AssertionError: Failed doctest test for m.more.divide at m/more.py:1929");
        if let Some(f) = t.failure.as_mut() {
            f.report = Some(">   raise self.failureException(self.format_failure(new.getvalue()))\nE   AssertionError: Failed".into());
        }
        let text = super::outcome_text(&t, cwd);
        assert!(
            text.contains("\nat m/more.py:1929\nAssertionError: Failed doctest test for m.more.divide\n") && !text.contains("raise"),
            "{text}"
        );
        assert_eq!(super::failure_frames(&t), [("/usr/lib/python3.12/doctest.py".to_string(), 2247), ("/p/m/more.py".to_string(), 1929)]);
        // Not a doctest's message: the recorded place.
        if let Some(f) = t.failure.as_mut() {
            f.message = Some(message.replace("Failed doctest test for", "Failed test for"));
        }
        assert_eq!(super::failure_place(t.failure.as_ref().unwrap()), Some(("/usr/lib/python3.12/doctest.py".into(), Some(2247))));
    }

    use super::*;

    fn run(id: &str, outcome: TestOutcome) -> TestRun {
        test_run(id, outcome)
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
        // A glob, as a name, matches the id's end after a separator, never inside a word.
        assert!(m("test_case*", &a) && m("test_case*", &c) && !m("test_case*", &b));
        assert!(m("TestR::test_c?se", &a) && m("test_compact[*", &b) && !m("est_case*", &a));
        assert!(m("failed", &a) && !m("failed", &b));
        let ids = TestFilter::Ids(vec!["examples/p/tests/test_f.py::TestR::test_case".into()]);
        assert!(ids.matches(&a) && !ids.matches(&c));
        assert!(TestFilter::parse(" ").is_err());
    }

    /// A test runner's run that recorded no test says why when its status tells: pytest's
    /// "no tests collected" (5) is not a missing recorder; a program's status is nobody's.
    #[test]
    fn a_failure_that_reads_as_one_shown_above_is_said_in_a_line() {
        let mut shown = super::ShownFailures::default();
        let a = "FAILED t.py::test_calc[a], 2 ms\nat pkg/duration.py:175\nE   ValueError: day is out of range".to_string();
        let b = "FAILED t.py::test_calc[b], 3 ms\nat pkg/duration.py:175\nE   ValueError: day is out of range".to_string();
        let c = "FAILED t.py::test_sub[c], 1 ms\nat pkg/duration.py:190\nE   ValueError: day is out of range".to_string();
        assert_eq!(shown.say("t.py::test_calc[a]", a.clone()), a);
        assert_eq!(
            shown.say("t.py::test_calc[b]", b),
            "FAILED t.py::test_calc[b], 3 ms\nFailed as t.py::test_calc[a] above: the same place, report and traceback."
        );
        assert_eq!(shown.say("t.py::test_sub[c]", c.clone()), c);
        // A passing test's one line stays.
        assert_eq!(shown.say("t.py::ok", "PASSED t.py::ok, 1 ms\n".into()), "PASSED t.py::ok, 1 ms\n");
    }

    #[test]
    fn a_runners_status_says_why_it_recorded_no_tests() {
        let argv = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
        let exit = |code| ExitStatus { code: Some(code), signal: None, core_dumped: false };
        let why = super::why_no_tests(&argv("python3 -m pytest -k nomatch"), Some(&exit(5))).expect("pytest's 5");
        assert_eq!(why, "`python3 -m pytest -k nomatch` ended with exit status 5: pytest collected no tests, or its options (`-k`, `-m`, a node id) selected none");
        assert!(super::why_no_tests(&argv("/venv/bin/pytest tests/nope.py"), Some(&exit(4))).is_some_and(|w| w.contains("usage error")));
        assert!(super::why_no_tests(&argv("py.test"), Some(&exit(2))).is_some_and(|w| w.contains("collecting")));
        assert!(super::why_no_tests(&argv("python3.12 -m unittest discover"), Some(&exit(5)))
            .is_some_and(|w| w.contains("unittest found no tests")));
        assert!(super::why_no_tests(&argv("python3.11 -m unittest"), Some(&exit(0))).is_some_and(|w| w.contains("`Ran 0 tests`")));
        // Not a runner's status, or not a runner.
        assert_eq!(super::why_no_tests(&argv("python3 -m pytest"), Some(&exit(1))), None);
        assert_eq!(super::why_no_tests(&argv("python3 -m pytest"), None), None);
        assert_eq!(super::why_no_tests(&argv("./app -m pytest"), Some(&exit(5))), None);
        assert_eq!(super::why_no_tests(&argv("python3 app.py -m pytest"), Some(&exit(5))), None);
        assert_eq!(super::why_no_tests(&argv("python3 -c pass -m pytest"), Some(&exit(5))), None);
        assert!(super::why_no_tests(&argv("python3 -X dev -B -m pytest"), Some(&exit(5))).is_some());
        assert_eq!(super::why_no_tests(&argv("python3 app.py"), Some(&exit(5))), None);
    }

    #[test]
    fn a_failures_first_line_names_its_exception() {
        let with = |runner: &str, exception: Option<&str>, message: Option<&str>| {
            let mut t = run("t.py::test_x", TestOutcome::Failed);
            t.runner = runner.into();
            t.failure = Some(trace_format::TestFailure {
                exception: exception.map(str::to_string),
                message: message.map(str::to_string),
                ..Default::default()
            });
            failure_head(&t).unwrap_or_default()
        };
        let f = |exception: Option<&str>, message: Option<&str>| with("unittest", exception, message);
        // libtest's panic is a kind, not a type.
        assert_eq!(with("libtest", Some("panic"), Some("assertion failed")), "assertion failed");
        assert_eq!(with("pytest", Some("KeyError"), Some("2")), "KeyError: 2");
        assert_eq!(f(Some("KeyError"), Some("2")), "KeyError: 2");
        assert_eq!(f(Some("KeyError"), Some("KeyError: 2\nmore")), "KeyError: 2");
        assert_eq!(f(Some("AssertionError"), Some("assert 1 == 2")), "AssertionError: assert 1 == 2");
        assert_eq!(f(Some("KeyError"), Some("")), "KeyError");
        assert_eq!(f(None, Some("boom")), "boom");
        assert_eq!(f(Some("x.Err"), Some("x.Err: bad")), "x.Err: bad");
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
            frames: vec![trace_format::testrun::TestFrame {
                file: "t.py".into(),
                line: Some(4),
                message: Some("AssertionError".into()),
                function: None,
            }],
            report: Some(">       assert f() == 2\nE       assert 1 == 2".into()),
            params: Vec::new(),
        });
        t.output.insert("Captured stdout call".into(), "hello\n".into());
        assert_eq!(
            outcome_text(&t, Path::new("/q")),
            "FAILED t.py::test_x, 12 ms\nat /p/t.py:4\n>       assert f() == 2\nE       assert 1 == 2\n--- Captured stdout call ---\nhello"
        );
        let mut e = run("t.py::test_y", TestOutcome::Error);
        e.failure = Some(trace_format::TestFailure {
            phase: Some("setup".into()),
            message: Some("boom".into()),
            exception: Some("KeyError".into()),
            ..Default::default()
        });
        assert_eq!(outcome_text(&e, Path::new("/q")), "ERROR t.py::test_y (in setup), 12 ms\nKeyError: boom");
        assert_eq!(failed_exit(Some(&ExitStatus { code: Some(1), signal: None, core_dumped: false })).unwrap(), "exit status 1");
        assert_eq!(failed_exit(Some(&ExitStatus { code: Some(0), signal: None, core_dumped: false })), None);
        assert_eq!(outcome_counts([&t, &e, &run("a", TestOutcome::Passed)]), "1 failed, 1 error, 1 passed");
    }

    #[test]
    fn a_traceback_frame_names_its_function_where_the_runners_text_leaves_it_out() {
        use trace_format::testrun::TestFrame;
        let fr = |message: Option<&str>, function: Option<&str>| TestFrame {
            file: "pkg/a.py".into(),
            line: Some(3),
            message: message.map(Into::into),
            function: function.map(Into::into),
        };
        let mut t = run("t.py::test_x", TestOutcome::Failed);
        t.failure = Some(trace_format::TestFailure {
            phase: Some("call".into()),
            message: Some("TypeError: unhashable type: 'list'".into()),
            frames: vec![
                fr(Some(""), Some("test_x")),
                fr(Some("in f"), Some("f")),
                fr(Some("in g"), None),
                fr(Some("TypeError"), Some("check")),
                fr(Some("TypeError"), None),
            ],
            ..Default::default()
        });
        let text = outcome_text(&t, Path::new("/p"));
        let tb = text.split_once("traceback (innermost last):\n").map(|x| x.1).unwrap_or_default();
        assert_eq!(
            tb,
            "  pkg/a.py:3 (in test_x)\n  pkg/a.py:3 (in f)\n  pkg/a.py:3 (in g)\n  pkg/a.py:3 (in check: TypeError)\n  pkg/a.py:3 (TypeError)"
        );
    }

    #[test]
    fn a_failure_place_reads_as_the_prompts_paths_whatever_the_runner_gave() {
        let cwd = Path::new("/home/u/proj");
        // pytest: relative to the directory it ran in; unittest: absolute.
        assert_eq!(place("tests/test_x.py", Some(4), cwd), "tests/test_x.py:4");
        assert_eq!(place("/home/u/proj/tests/test_x.py", Some(4), cwd), "tests/test_x.py:4");
        assert_eq!(place("/usr/lib/python3.12/json/decoder.py", Some(355), cwd), "stdlib/json/decoder.py:355");
        assert_eq!(place("/v/lib/python3.12/site-packages/click/core.py", None, cwd), "site-packages/click/core.py");
        assert_eq!(place("/opt/other/x.py", Some(1), cwd), "/opt/other/x.py:1");
        assert_eq!(place("<string>", Some(1), cwd), "<string>:1");
        // A unittest failure: the place and every frame as the prompt shows paths.
        let mut t = run("test_calc.CalcTest.test_add", TestOutcome::Failed);
        t.runner = "unittest".into();
        t.failure = Some(trace_format::TestFailure {
            phase: Some("call".into()),
            exception: Some("AssertionError".into()),
            message: Some("3 != 4".into()),
            file: Some("/home/u/proj/tests/test_calc.py".into()),
            line: Some(8),
            frames: vec![
                trace_format::testrun::TestFrame {
                    file: "/home/u/proj/tests/test_calc.py".into(),
                    line: Some(8),
                    message: Some("test_add".into()),
                    function: None,
                },
                trace_format::testrun::TestFrame {
                    file: "/home/u/proj/calc.py".into(),
                    line: Some(2),
                    message: Some("add".into()),
                    function: None,
                },
            ],
            report: Some(">   self.assertEqual(add(1, 2), 4)\nE   AssertionError: 3 != 4".into()),
            params: Vec::new(),
        });
        assert_eq!(
            outcome_text(&t, cwd),
            "FAILED test_calc.CalcTest.test_add, 12 ms\nat tests/test_calc.py:8\n>   self.assertEqual(add(1, 2), 4)\nE   AssertionError: 3 != 4\n\
             traceback (innermost last):\n  tests/test_calc.py:8 (test_add)\n  calc.py:2 (add)"
        );
    }

    #[test]
    fn a_failure_over_its_share_is_cut_in_order_and_marked_and_one_within_is_unchanged() {
        let report = [
            ">       assert \"default: name\" in result.output".to_string(),
            format!("E       AssertionError: assert 'default: name' in '{}'", "Usage: cli foo ".repeat(20)),
            format!("E        +  where '{}' = <Result okay>.output", "Usage: cli foo ".repeat(20)),
        ]
        .join("\n");
        let text = format!(
            "FAILED t.py::test_x, 12 ms\nat t.py:9\n{report}\ntraceback (innermost last):\n  t.py:9\n  pkg/a.py:3 (in f)\n  pkg/b.py:4 (in g)\n  pkg/c.py:5 (in h)\n--- Captured stdout call ---\n{}",
            "out\n".repeat(30)
        );
        assert_eq!(shorten_outcome(&text, text.len()), text, "within its share: unchanged");
        let short = shorten_outcome(&text, 400);
        assert!(short.len() < 520, "{} chars:\n{short}", short.len());
        // Kept: the outcome line, the place, the statement, the exception's head, the test's
        // own frame and the innermost one.
        for kept in ["FAILED t.py::test_x, 12 ms\nat t.py:9\n>       assert \"default: name\" in result.output\nE       AssertionError: assert 'default: name' in 'Usage", "  t.py:9\n", "  pkg/c.py:5 (in h)"] {
            assert!(short.contains(kept), "{kept:?} missing:\n{short}");
        }
        // Cut, and marked: the output, the `where` line, the middle frames, the long repr.
        for cut in
            ["[… captured output cut: 30 lines]", "[… 1 line of pytest's `where` explanation cut]", "  [… 2 frames cut]", "chars cut]"]
        {
            assert!(short.contains(cut), "{cut:?} missing:\n{short}");
        }
        assert!(!short.contains("pkg/a.py") && !short.contains("+  where") && !short.contains("out\nout"), "{short}");
        // A unittest message quoting the test's input: its first and last lines stay.
        let msg = format!(
            "E   AssertionError: Lists differ: [A] != []\n{}E   but got:\nE   (none):4:7: undefined name 'a'",
            "E       a: int\n".repeat(40)
        );
        let t = format!("FAILED t.py::T::test_y, 1 ms\nat h.py:27\n{msg}\ntraceback (innermost last):\n  t.py:5\n  h.py:27 (in flakes)");
        let short = shorten_outcome(&t, 300);
        assert!(short.len() <= 300, "{} chars:\n{short}", short.len());
        assert!(short.contains("Lists differ") && short.contains("undefined name 'a'") && short.contains("lines cut]"), "{short}");
        assert!(short.ends_with("  t.py:5\n  h.py:27 (in flakes)"), "{short}");
        // The failing statement's own lines cut: marked without the `E` of the runner's error
        // lines.
        let t = "FAILED t.py::test_z, 1 ms\nat d.py:175\n>           newdt = other.replace(\n                year=int(newyear),\n                month=int(newmonth),\n                day=int(newday),\n            )\nE           ValueError: day is out of range for month\ntraceback (innermost last):\n  t.py:5\n  d.py:175 (in __add__: ValueError)";
        let short = shorten_outcome(t, 260);
        assert!(short.contains("\n    [… 3 lines cut]\n") && !short.contains("E   […"), "{short}");
    }

    #[test]
    fn a_parametrized_failure_gives_its_parameters_in_its_head_which_no_cut_takes() {
        let mut t = run("t.py::test_half[m1-3]", TestOutcome::Failed);
        t.failure = Some(trace_format::TestFailure {
            phase: Some("call".into()),
            file: Some("t.py".into()),
            line: Some(7),
            report: Some(format!(">       assert half(m) == want\n{}E       assert 2 == 3", "E         detail\n".repeat(30))),
            params: vec![("m".into(), "Money(5)".into()), ("want".into(), "3\n".into())],
            ..Default::default()
        });
        let text = outcome_text(&t, Path::new("/w"));
        assert!(
            text.starts_with("FAILED t.py::test_half[m1-3], 12 ms\nat t.py:7\nwith parameters m=Money(5), want=3\n>       assert"),
            "{text}"
        );
        let short = shorten_outcome(&text, 150);
        assert!(short.contains("\nwith parameters m=Money(5), want=3\n>       assert half(m) == want\n"), "{short}");
        assert!(short.contains("lines cut]"), "{short}");
    }

    #[test]
    fn a_failures_share_follows_the_budget() {
        assert_eq!(outcome_chars(4000), 700);
        assert_eq!(outcome_chars(20_000), 3500);
        assert!(outcome_chars(2000) < outcome_chars(8000));
    }
    /// A test with three subtests, the second failing (`contains 1 failed subtest`).
    fn with_subtests() -> TestRun {
        let mut t = run("t.py::T::test_x", TestOutcome::Failed);
        t.failure = Some(trace_format::TestFailure {
            phase: Some("call".into()),
            message: Some("contains 1 failed subtest".into()),
            ..Default::default()
        });
        t.output.insert("Captured stdout call".into(), "out\n".into());
        for (i, outcome) in [TestOutcome::Passed, TestOutcome::Failed, TestOutcome::Passed].into_iter().enumerate() {
            let mut s = run(&format!("t.py::T::test_x (i={i})"), outcome);
            s.parent = Some(t.id.clone());
            s.duration_ns = None;
            if outcome == TestOutcome::Failed {
                s.failure = Some(trace_format::TestFailure {
                    phase: Some("call".into()),
                    file: Some("t.py".into()),
                    line: Some(9),
                    report: Some(">   assert f(i)\nE   assert False".into()),
                    ..Default::default()
                });
            }
            t.subtests.push(s);
        }
        t
    }

    #[test]
    fn a_filter_picks_a_test_with_the_subtests_that_match_or_made_it_fail() {
        let t = with_subtests();
        let ids = |f: &str| TestFilter::parse(f).unwrap().pick(&t).map(|v| v.iter().map(|s| s.id.clone()).collect::<Vec<_>>());
        // Its failure: the failing subtest with it.
        assert_eq!(ids("failed"), Some(vec!["t.py::T::test_x (i=1)".to_string()]));
        assert_eq!(ids("test_x"), Some(vec!["t.py::T::test_x (i=1)".to_string()]));
        // A subtest by its id (passing or not): the test, with that subtest only.
        assert_eq!(ids("t.py::T::test_x (i=2)"), Some(vec!["t.py::T::test_x (i=2)".to_string()]));
        assert_eq!(ids("*(i=?)"), Some(t.subtests.iter().map(|s| s.id.clone()).collect()));
        assert_eq!(ids("test_y"), None);
        // A passing test whose subtests all passed: not picked by `failed`.
        let mut ok = with_subtests();
        ok.outcome = TestOutcome::Passed;
        ok.subtests[1].outcome = TestOutcome::Passed;
        assert!(TestFilter::Failed.pick(&ok).is_none());
    }

    #[test]
    fn a_tests_text_counts_its_subtests_before_its_output_and_each_picked_subtest_follows() {
        let t = with_subtests();
        let picked: Vec<&TestRun> = t.subtests.iter().filter(|s| s.outcome.is_failure()).collect();
        assert_eq!(
            outcome_texts(&t, &picked, Path::new("/p")),
            [
                "FAILED t.py::T::test_x, 12 ms\ncontains 1 failed subtest\n3 subtests: 1 failed, 2 passed\n--- Captured stdout call ---\nout",
                "FAILED t.py::T::test_x (i=1)\nat t.py:9\n>   assert f(i)\nE   assert False",
            ]
        );
        // Past SHOWN_SUBTESTS picked: the first ones, and the test's text says so.
        let mut many = with_subtests();
        many.subtests_dropped = 4;
        let all: Vec<&TestRun> = std::iter::repeat_n(&t.subtests[1], SHOWN_SUBTESTS + 2).collect();
        let texts = outcome_texts(&many, &all, Path::new("/p"));
        assert_eq!(texts.len(), SHOWN_SUBTESTS + 1);
        assert!(
            texts[0].ends_with(&format!(
                "7 subtests: 1 failed, 2 passed, 4 not recorded\n({SHOWN_SUBTESTS} of the {} subtests picked are shown)\n--- Captured stdout call ---\nout",
                SHOWN_SUBTESTS + 2
            )),
            "{}",
            texts[0]
        );
    }
}
