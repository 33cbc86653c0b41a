//! Tests as units of slicing: which recorded tests a `--test` filter names, what a prompt says
//! of a failure, and the spectrum (which functions go with failing tests).
//!
//! The recorder writes each test's id, phases, outcome and failure into `tests.jsonl`
//! ([`trace_format::testrun`]) and marks its boundaries in the thread's stream, where the fold
//! cuts out a tree per test ([`crate::fold::fold_events_with_tests`]).

use crate::calltree::CallTree;
use regex::Regex;
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
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
/// terminal: control characters other than newline and tab are written `\u{..}`.
pub fn clean_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if (c.is_control() && c != '\n' && c != '\t') || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}') {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        } else {
            out.push(c);
        }
    }
    out
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
                    fr.message.as_deref().map(|m| format!(" ({})", m.lines().next().unwrap_or(""))).unwrap_or_default()
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

/// What the spectrum needs to know of a function ([`Spectrum::add`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FuncKind {
    /// The test runner's own code ([`crate::plumbing::is_test_runner`]).
    Runner,
    Stdlib,
    Other,
}

/// [`FuncKind`] of each function of a table.
pub fn function_kinds(funcs: &[crate::symbols::Function], cwd: &std::path::Path) -> Vec<FuncKind> {
    use crate::pathclass::{module_name, origin, Origin};
    funcs
        .iter()
        .map(|f| match origin(f) {
            // unittest is a test runner too (its assertion helpers report failures: difflib).
            Origin::Stdlib if module_name(f, cwd).split('.').next() == Some("unittest") => FuncKind::Runner,
            Origin::Stdlib => FuncKind::Stdlib,
            Origin::SitePackages if crate::plumbing::is_test_runner(module_name(f, cwd).split('.').next().unwrap_or_default()) => {
                FuncKind::Runner
            }
            _ => FuncKind::Other,
        })
        .collect()
}

/// The functions of a test's tree that the spectrum counts, by key, once each: not the test
/// runner's, not code without a file (`<string>`), and standard-library code only where code
/// that is counted called it (see [`Spectrum::add`]).
pub fn counted_keys(tree: &CallTree, kinds: &[FuncKind]) -> Vec<String> {
    let kind = |n: crate::calltree::NodeId| kinds.get(tree.node(n).func as usize).copied().unwrap_or(FuncKind::Other);
    // Pre-order: a parent's verdict is known before its children's.
    let mut counted = vec![false; tree.nodes.len()];
    let mut seen: HashSet<u32> = HashSet::default();
    let mut seen_keys: HashSet<String> = HashSet::default();
    let mut out = Vec::new();
    for n in tree.preorder() {
        let parent = tree.node(n).parent;
        let parent_counted = parent != crate::calltree::ROOT && counted[parent as usize];
        let c = match kind(n) {
            FuncKind::Runner => false,
            FuncKind::Stdlib => parent_counted,
            FuncKind::Other => true,
        };
        counted[n as usize] = c;
        if !c || !seen.insert(tree.node(n).func) {
            continue;
        }
        // Functions sharing a key are one function.
        let key = tree.func_key(n);
        if !key.starts_with('<') && seen_keys.insert(key.clone()) {
            out.push(key);
        }
    }
    out
}

/// How often each function ran in failing and in passing tests, over every test of the traces
/// given (several traces: the shards of one suite). Functions are their keys
/// ([`crate::symbols::Function::key`]).
#[derive(Debug, Clone, Default)]
pub struct Spectrum {
    pub failed_total: u32,
    pub passed_total: u32,
    /// key -> (failing tests it ran in, passing tests it ran in).
    pub counts: HashMap<String, (u32, u32)>,
}

impl Spectrum {
    /// Add one test's tree (skipped, xfailed tests count as neither and are not added).
    /// `kinds[i]`: what function `i` of the tree's table is ([`function_kinds`]): the test
    /// runner's own code is not counted, nor standard-library code that the runner called (it
    /// runs in failing tests to report them: difflib, traceback); what the code under test
    /// calls in the standard library is.
    pub fn add(&mut self, outcome: TestOutcome, tree: &CallTree, kinds: &[FuncKind]) {
        let failed = outcome.is_failure();
        if !failed && !outcome.is_pass() {
            return;
        }
        if failed {
            self.failed_total += 1;
        } else {
            self.passed_total += 1;
        }
        for key in counted_keys(tree, kinds) {
            let e = self.counts.entry(key).or_default();
            if failed {
                e.0 += 1;
            } else {
                e.1 += 1;
            }
        }
    }

    /// Whether it can tell anything: at least one failing and one passing test.
    pub fn informative(&self) -> bool {
        self.failed_total > 0 && self.passed_total > 0
    }

    /// The Ochiai score of a function: `ef / sqrt(F × (ef + ep))` (`ef`, `ep`: failing and
    /// passing tests it ran in; `F`: failing tests). 1 for code that ran in every failing test
    /// and no passing one; 0 for code no failing test ran.
    pub fn ochiai(&self, key: &str) -> f64 {
        let Some(&(ef, ep)) = self.counts.get(key) else { return 0.0 };
        if ef == 0 || self.failed_total == 0 {
            return 0.0;
        }
        ef as f64 / ((self.failed_total as f64) * (ef + ep) as f64).sqrt()
    }

    /// What a prompt says of a function: `ran in 3 of 3 failing tests, 2 of 461 passing`.
    pub fn describe(&self, key: &str) -> Option<String> {
        let &(ef, ep) = self.counts.get(key)?;
        Some(format!(
            "ran in {ef} of {} failing test{}, {ep} of {} passing (Ochiai {:.2})",
            self.failed_total,
            if self.failed_total == 1 { "" } else { "s" },
            self.passed_total,
            self.ochiai(key)
        ))
    }
}

/// Most earlier tests a test's prompt shows reused state from, and most functions per test.
const EARLIER_TESTS: usize = 3;
const EARLIER_FUNCTIONS: usize = 20;

/// State a test reused that an earlier test of its thread built: a cache filled on first use
/// (a lexer, a table of prices), a session or module fixture computed once. Found as a call
/// `F → G` that a function this test also ran made in one earlier test only, and not in this
/// one, where `G` is code under test (not the runner, not the standard library, not a test
/// file) and that earlier test was the first to run `F` (the first use filled the cache); or
/// where `G` is a fixture this test requested that the runner computed in one earlier test
/// only. Per earlier test (first builder first, at most [`EARLIER_TESTS`]): its `seq`, the
/// calls found, and the part of its tree that holds them (those calls with everything under
/// them, under their callers).
pub fn built_earlier(p: &crate::fold::ProcessTrees, test: &TestRun, kinds: &[FuncKind]) -> Vec<(usize, Vec<String>, CallTree)> {
    let Some(th) = p.threads.iter().find(|th| th.tid == test.tid) else { return Vec::new() };
    let Some(tree) = th.tests.get(test.seq as usize) else { return Vec::new() };
    let in_test: HashSet<u32> = tree.nodes.iter().skip(1).map(|n| n.func).collect();
    let kind = |f: u32| kinds.get(f as usize).copied().unwrap_or(FuncKind::Other);
    // Over the thread's tests: the first test each function ran in, and in how many tests
    // each call (caller, callee) was made.
    let mut first_seen: HashMap<u32, usize> = HashMap::default();
    let mut edge_tests: HashMap<(u32, u32), u32> = HashMap::default();
    for (j, t) in th.tests.iter().enumerate() {
        let mut edges: HashSet<(u32, u32)> = HashSet::default();
        for node in t.nodes.iter().skip(1) {
            first_seen.entry(node.func).or_insert(j);
            if node.parent != crate::calltree::ROOT && in_test.contains(&t.nodes[node.parent as usize].func) {
                edges.insert((t.nodes[node.parent as usize].func, node.func));
            }
        }
        for e in edges {
            *edge_tests.entry(e).or_default() += 1;
        }
    }
    let mut flagged_funcs: HashSet<u32> = HashSet::default();
    let mut out = Vec::new();
    for (j, earlier) in th.tests.iter().enumerate().take(test.seq as usize) {
        if out.len() >= EARLIER_TESTS || flagged_funcs.len() >= EARLIER_FUNCTIONS {
            break;
        }
        let n = earlier.nodes.len();
        let mut flagged = vec![false; n];
        let mut names = Vec::new();
        for (m, node) in earlier.nodes.iter().enumerate().skip(1) {
            if node.parent == crate::calltree::ROOT || flagged_funcs.len() >= EARLIER_FUNCTIONS {
                continue;
            }
            let (f, g) = (earlier.nodes[node.parent as usize].func, node.func);
            if !in_test.contains(&f) || in_test.contains(&g) || flagged_funcs.contains(&g) || edge_tests.get(&(f, g)) != Some(&1) {
                continue;
            }
            let Some(gf) = earlier.function(g) else { continue };
            let test_code = gf.file.as_deref().is_some_and(crate::plumbing::is_test_file);
            let reused = match kind(g) {
                FuncKind::Other if !test_code => first_seen.get(&f) == Some(&j),
                // A fixture this test requested, computed once by an earlier test.
                FuncKind::Other => kind(f) == FuncKind::Runner && test.fixtures.contains(&gf.name),
                _ => false,
            };
            if reused {
                flagged[m] = true;
                flagged_funcs.insert(g);
                let caller = earlier.function(f).map(|x| x.qualname.as_str()).unwrap_or("?");
                names.push(format!("`{caller}` → `{}`", gf.qualname));
            }
        }
        if names.is_empty() {
            continue;
        }
        // Pre-order: whether a node is inside a flagged call, and the callers to keep.
        let mut inside = vec![false; n];
        let mut keep_caller = vec![false; n];
        let mut on_path = vec![false; n];
        for m in earlier.preorder() {
            let m = m as usize;
            let parent = earlier.nodes[m].parent as usize;
            inside[m] = flagged[m] || (m != 0 && parent != 0 && inside[parent]);
            if flagged[m] {
                keep_caller[parent] = true;
                let mut a = earlier.nodes[parent].parent as usize;
                while a != 0 && !on_path[a] {
                    on_path[a] = true;
                    a = earlier.nodes[a].parent as usize;
                }
            }
        }
        let part = earlier.rebuild(|_, id| {
            let i = id as usize;
            if inside[i] || keep_caller[i] {
                crate::calltree::Keep::Keep
            } else if on_path[i] {
                crate::calltree::Keep::Splice
            } else {
                crate::calltree::Keep::Drop
            }
        });
        out.push((j, names, part));
    }
    out
}

/// One recorded test, as `slice tests` and the MCP `tests` tool list it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TestRow {
    /// The trace directory it was recorded in.
    pub trace: String,
    pub pid: u32,
    /// Calls in its tree (every call of the test, its fixtures and the code under test).
    pub calls: u64,
    #[serde(flatten)]
    pub test: TestRun,
}

/// A function by how strongly it goes with failure ([`Spectrum::ochiai`]).
#[derive(Debug, Clone, serde::Serialize)]
pub struct RankedFunction {
    pub function: String,
    pub file: Option<String>,
    pub line: Option<u32>,
    pub ochiai: f64,
    pub failed: u32,
    pub passed: u32,
}

/// The tests of several traces (the shards of one suite), and their spectrum.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct TestTable {
    pub tests: Vec<TestRow>,
    /// `exit status 1` per trace whose run failed.
    pub failed_runs: Vec<String>,
    pub failed_total: u32,
    pub passed_total: u32,
    /// Most suspicious first (empty without both failing and passing tests).
    pub ranking: Vec<RankedFunction>,
}

impl TestTable {
    /// Load the tests of `dirs`; `filter` keeps some; `rank` functions ranked (0: none).
    pub fn load(
        dirs: &[std::path::PathBuf],
        filter: Option<&TestFilter>,
        rank: usize,
    ) -> Result<(TestTable, Vec<String>), crate::fold::LoadError> {
        let mut table = TestTable::default();
        let mut warnings = Vec::new();
        let mut spectrum = Spectrum::default();
        let mut where_: HashMap<String, (String, Option<String>, Option<u32>)> = HashMap::default();
        for d in dirs {
            let t = crate::fold::load_trace(d)?;
            warnings.extend(t.warnings.iter().cloned());
            if let Some(how) = failed_exit(t.meta.exit.as_ref()) {
                table.failed_runs.push(format!("{}: {how}", d.display()));
            }
            let cwd = std::path::PathBuf::from(&t.meta.cwd);
            for p in &t.processes {
                let kinds = function_kinds(&p.funcs, &cwd);
                for test in &p.tests {
                    let tree = p.test_tree(test);
                    if let Some(tree) = tree {
                        spectrum.add(test.outcome, tree, &kinds);
                        if rank > 0 {
                            for f in tree.funcs.iter() {
                                where_.entry(f.key()).or_insert_with(|| {
                                    (f.qualname.clone(), f.file.as_deref().map(|p| crate::analysis::display_path(p, &cwd)), f.first_line)
                                });
                            }
                        }
                    }
                    if filter.is_some_and(|f| !f.matches(test)) {
                        continue;
                    }
                    let calls = tree.map_or(0, |t| t.nodes.iter().skip(1).map(|n| n.count).sum());
                    table.tests.push(TestRow { trace: d.display().to_string(), pid: p.meta.pid, calls, test: test.clone() });
                }
            }
        }
        table.failed_total = spectrum.failed_total;
        table.passed_total = spectrum.passed_total;
        if rank > 0 && spectrum.informative() {
            let mut r: Vec<RankedFunction> = spectrum
                .counts
                .iter()
                .filter(|(_, c)| c.0 > 0)
                .map(|(k, &(ef, ep))| {
                    let (function, file, line) = where_.get(k).cloned().unwrap_or_else(|| (k.clone(), None, None));
                    RankedFunction { function, file, line, ochiai: spectrum.ochiai(k), failed: ef, passed: ep }
                })
                .collect();
            r.sort_by(|a, b| b.ochiai.total_cmp(&a.ochiai).then(a.passed.cmp(&b.passed)).then(a.function.cmp(&b.function)));
            r.truncate(rank);
            table.ranking = r;
        }
        Ok((table, warnings))
    }

    /// The table for a terminal: one line per test, the failures, the counts, the ranking.
    /// Every text from the trace goes through [`clean_text`].
    pub fn text(&self) -> String {
        let mut s = String::new();
        for l in self.table_lines() {
            s.push_str(&l);
            s.push('\n');
        }
        let failures = self.failure_lines();
        if !failures.is_empty() {
            s.push_str("\nfailures:\n");
            for l in failures {
                s.push_str(&l);
                s.push('\n');
            }
        }
        let _ = writeln!(s, "\n{}", self.summary());
        let ranking = self.ranking_lines();
        if !ranking.is_empty() {
            s.push('\n');
            for l in ranking {
                s.push_str(&l);
                s.push('\n');
            }
        }
        s
    }

    /// For an agent, what matters first first: the counts, the failures, the ranking, then
    /// every test.
    pub fn agent_lines(&self) -> Vec<String> {
        let mut out = vec![self.summary()];
        let failures = self.failure_lines();
        if !failures.is_empty() {
            out.push("failures:".into());
            out.extend(failures);
        }
        out.extend(self.ranking_lines());
        out.push("tests:".into());
        out.extend(self.table_lines());
        out
    }

    /// `3 failed, 458 passed; run failed: t.d: exit status 1`.
    pub fn summary(&self) -> String {
        let mut s = if self.tests.is_empty() {
            "no recorded tests (record a run of pytest or unittest: `trace run -- python -m pytest ...`)".to_string()
        } else {
            outcome_counts(self.tests.iter().map(|r| &r.test))
        };
        if !self.failed_runs.is_empty() {
            let _ = write!(s, "; run failed: {}", clean_text(&self.failed_runs.join(", ")));
        }
        s
    }

    /// A header, then one line per test: outcome, duration, calls, id.
    pub fn table_lines(&self) -> Vec<String> {
        if self.tests.is_empty() {
            return Vec::new();
        }
        let mut out = vec![format!("{:<11} {:>9} {:>9}  test", "outcome", "duration", "calls")];
        for r in &self.tests {
            let t = &r.test;
            out.push(format!(
                "{:<11} {:>9} {:>9}  {}",
                t.outcome.name(),
                t.duration_ns.map(duration).unwrap_or_else(|| "-".into()),
                r.calls,
                clean_text(&t.id).replace('\n', "\\n")
            ));
        }
        out
    }

    /// One line per failing test: its id, the first line of its failure, where.
    pub fn failure_lines(&self) -> Vec<String> {
        self.tests
            .iter()
            .filter(|r| r.test.outcome.is_failure())
            .map(|r| {
                let f = r.test.failure.as_ref();
                let head = f
                    .and_then(|f| f.message.as_deref().or(f.report.as_deref()))
                    .map(|m| m.lines().find(|l| !l.trim().is_empty()).unwrap_or("").trim().to_string())
                    .unwrap_or_else(|| "(no failure recorded: the process ended inside the test)".into());
                let at = f
                    .and_then(|f| {
                        f.file.as_deref().map(|file| format!(" at {file}{}", f.line.map(|l| format!(":{l}")).unwrap_or_default()))
                    })
                    .unwrap_or_default();
                format!("  {}: {}{}", clean_text(&r.test.id), clean_text(&head), clean_text(&at))
            })
            .collect()
    }

    /// The ranking, with its header (empty without one).
    pub fn ranking_lines(&self) -> Vec<String> {
        if self.ranking.is_empty() {
            return Vec::new();
        }
        let mut out = vec![format!(
            "functions that go with failure (Ochiai over {} failing and {} passing tests; docs/prompts.md):",
            self.failed_total, self.passed_total
        )];
        for f in &self.ranking {
            out.push(format!(
                "  {:.3}  failing {:>3}  passing {:>5}  {}{}",
                f.ochiai,
                f.failed,
                f.passed,
                clean_text(&f.function),
                f.file
                    .as_deref()
                    .map(|p| format!("  ({}{})", clean_text(p), f.line.map(|l| format!(":{l}")).unwrap_or_default()))
                    .unwrap_or_default()
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calltree::{TreeBuilder, ROOT};
    use crate::testutil::py_funcs;
    use std::sync::Arc;

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
    fn ochiai_ranks_what_only_failing_tests_ran_first() {
        let funcs = Arc::new(py_funcs(&["test", "common", "buggy"]));
        let tree = |ids: &[u32]| {
            let mut b = TreeBuilder::new(funcs.clone());
            let t = b.child(ROOT, ids[0]);
            for &i in &ids[1..] {
                b.child(t, i);
            }
            b.finish()
        };
        let mut s = Spectrum::default();
        s.add(TestOutcome::Failed, &tree(&[0, 1, 2]), &[]);
        s.add(TestOutcome::Failed, &tree(&[0, 1, 2]), &[]);
        s.add(TestOutcome::Passed, &tree(&[0, 1]), &[]);
        s.add(TestOutcome::Passed, &tree(&[0, 1, 2]), &[]);
        s.add(TestOutcome::Skipped, &tree(&[0, 2]), &[]);
        // common is the runner's: not counted; buggy in the standard library is counted only
        // where counted code called it.
        let mut ignoring = Spectrum::default();
        ignoring.add(TestOutcome::Failed, &tree(&[0, 1, 2]), &[FuncKind::Other, FuncKind::Runner, FuncKind::Stdlib]);
        assert!(!ignoring.counts.contains_key(&funcs[1].key()) && ignoring.counts.contains_key(&funcs[2].key()));
        let mut b = TreeBuilder::new(funcs.clone());
        let runner = b.child(ROOT, 1);
        b.child(runner, 2);
        let mut under_runner = Spectrum::default();
        under_runner.add(TestOutcome::Failed, &b.finish(), &[FuncKind::Other, FuncKind::Runner, FuncKind::Stdlib]);
        assert!(under_runner.counts.is_empty(), "{:?}", under_runner.counts);
        let key = |i: usize| funcs[i].key();
        assert_eq!((s.failed_total, s.passed_total), (2, 2));
        assert!(s.informative());
        // buggy: 2 / sqrt(2 * 3); common: 2 / sqrt(2 * 4).
        assert!((s.ochiai(&key(2)) - 2.0 / 6f64.sqrt()).abs() < 1e-9);
        assert!((s.ochiai(&key(1)) - 0.5f64.sqrt()).abs() < 1e-9);
        assert!(s.ochiai(&key(2)) > s.ochiai(&key(1)));
        assert_eq!(s.ochiai("nothing"), 0.0);
        assert_eq!(s.describe(&key(2)).unwrap(), "ran in 2 of 2 failing tests, 1 of 2 passing (Ochiai 0.82)");
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
