//! `slice tests`' table and the MCP `tests` tool's answer: every recorded test of some traces,
//! the failures, and the functions ranked by the spectrum.

use super::{duration, failed_exit, function_kinds, outcome_counts, Spectrum, TestFilter};
use rustc_hash::FxHashMap as HashMap;
use std::fmt::Write as _;
use trace_format::escape;
use trace_format::TestRun;

/// One recorded test, as `slice tests` and the MCP `tests` tool list it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TestRow {
    /// The trace directory it was recorded in.
    pub trace: String,
    pub pid: u32,
    /// Calls in its tree of the test's own work (the test, its fixtures, the code under test,
    /// what they called of the standard library; not the runner's: a failing test's report
    /// formatting is pytest's, [`super::spectrum::counted_nodes`]); 0 for a subtest (its calls
    /// are its test's: it ran inside it).
    pub calls: u64,
    /// The directory the run ran in: the failure's place is shown relative to it
    /// ([`super::place`]).
    #[serde(skip)]
    pub cwd: std::path::PathBuf,
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

/// Which functions the ranking leaves out, as a prompt does by default: the standard library
/// (the selection's origin rule, [`crate::select::Selection::hides_by_origin`]) and framework
/// plumbing ([`crate::plumbing::Plumbing`]: a framework's functions, unless a test calls the
/// framework directly). `Default` leaves nothing out.
#[derive(Debug, Clone, Default)]
pub struct RankRule {
    pub selection: crate::select::Selection,
    pub plumbing: crate::plumbing::Plumbing,
}

impl RankRule {
    /// A prompt's default rule (no question), less what `stdlib` and `show_plumbing` show.
    pub fn prompt_default(stdlib: bool, show_plumbing: bool) -> RankRule {
        let selection = crate::select::Selection { hide_stdlib: !stdlib, ..Default::default() };
        let plumbing =
            if show_plumbing { crate::plumbing::Plumbing::default() } else { crate::plumbing::Plumbing::for_prompt("", &[], &selection) };
        RankRule { selection, plumbing }
    }
}

/// Functions the ranking left out ([`RankRule`]), by why.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct LeftOut {
    pub stdlib: usize,
    pub plumbing: usize,
}

/// Why [`RankRule`] leaves a function out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LeftOutAs {
    Stdlib,
    Plumbing,
}

/// The first `rank` functions of `ranked` (most suspicious first) that the rule keeps, and
/// what it left out on the way: those ranked above the last one kept (all of them when fewer
/// than `rank` are kept).
fn fill_ranking(ranked: impl IntoIterator<Item = (RankedFunction, Option<LeftOutAs>)>, rank: usize) -> (Vec<RankedFunction>, LeftOut) {
    let (mut kept, mut left_out) = (Vec::new(), LeftOut::default());
    for (f, why) in ranked {
        if kept.len() == rank {
            break;
        }
        match why {
            Some(LeftOutAs::Stdlib) => left_out.stdlib += 1,
            Some(LeftOutAs::Plumbing) => left_out.plumbing += 1,
            None => kept.push(f),
        }
    }
    (kept, left_out)
}

/// The tests of several traces (the shards of one suite), and their spectrum.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct TestTable {
    pub tests: Vec<TestRow>,
    /// `exit status 1` per trace whose run failed.
    pub failed_runs: Vec<String>,
    pub failed_total: u32,
    pub passed_total: u32,
    /// Most suspicious first (empty without both failing and passing tests), less what a
    /// prompt leaves out ([`RankRule`]).
    pub ranking: Vec<RankedFunction>,
    /// What the rule left out of `ranking`: the functions it passed over while filling it.
    pub ranking_left_out: LeftOut,
    /// How the options that show them are spelt (`--stdlib`, `--show-plumbing`).
    #[serde(skip)]
    show_hints: (String, String),
    /// Tests the traces recorded, before the filter.
    #[serde(skip)]
    pub recorded: usize,
    /// Per trace without tests whose run's command and status say why: `t.d: the trace
    /// recorded no tests; why`
    /// ([`super::why_no_tests`]).
    #[serde(skip)]
    no_tests_why: Vec<String>,
}

impl TestTable {
    /// Load the tests of `dirs`; `filter` keeps some; `rank` functions ranked (0: none), less
    /// those `rule` leaves out; `front` reads the errors and the hints.
    pub fn load(
        dirs: &[std::path::PathBuf],
        filter: Option<&TestFilter>,
        rank: usize,
        rule: &RankRule,
        front: crate::frontend::FrontEnd,
    ) -> Result<(TestTable, Vec<String>), crate::fold::LoadError> {
        use crate::frontend::Opt;
        let mut table = TestTable { show_hints: (front.on(Opt::Stdlib), front.on(Opt::ShowPlumbing)), ..Default::default() };
        let mut warnings = Vec::new();
        let mut spectrum = Spectrum::default();
        // Per function: its name, file and line, and whether the standard-library rule hides it.
        let mut where_: HashMap<crate::symbols::FuncId, (String, Option<String>, Option<u32>, bool)> = HashMap::default();
        // Per function: whether it was framework plumbing in every test's tree it ran in (a
        // test that calls the framework directly makes it the code under test).
        let mut plumbing: HashMap<crate::symbols::FuncId, bool> = HashMap::default();
        let mut interner = crate::symbols::Interner::default();
        for d in dirs {
            let t = crate::fold::load_trace(d, &mut interner, front)?;
            warnings.extend(t.warnings.iter().cloned());
            if let Some(how) = failed_exit(t.meta.exit.as_ref()) {
                table.failed_runs.push(format!("{}: {how}", d.display()));
            }
            if t.processes.iter().all(|p| p.tests.is_empty()) {
                if let Some(why) = super::why_no_tests(&t.meta.argv, t.meta.exit.as_ref()) {
                    table.no_tests_why.push(format!("{}: the trace recorded no tests; {why}", d.display()));
                }
            }
            let cwd = std::path::PathBuf::from(&t.meta.cwd);
            for p in &t.processes {
                let kinds = function_kinds(&p.funcs, &cwd);
                let facts = (rank > 0 && !rule.plumbing.is_off()).then(|| rule.plumbing.facts(&p.funcs, &cwd));
                table.recorded += p.tests.len();
                for test in &p.tests {
                    let tree = p.test_tree(test);
                    if let Some(tree) = tree {
                        spectrum.add(test.outcome, tree, &kinds);
                        if rank > 0 {
                            for (i, f) in tree.funcs.iter().enumerate() {
                                where_.entry(tree.id_of(i as u32)).or_insert_with(|| {
                                    let file = f.file.as_deref().map(|p| crate::analysis::display_path(p, &cwd));
                                    (f.qualname.clone(), file, f.first_line, rule.selection.hides_by_origin(f, &cwd))
                                });
                            }
                        }
                        if let Some(facts) = &facts {
                            // As a test's prompt has it: the tree of a test has no entry script.
                            let exempt = facts.exempt(tree, &Default::default());
                            for node in tree.nodes.iter().skip(1) {
                                let is = facts.plumbing(node.func, &exempt).is_some();
                                *plumbing.entry(tree.id_of(node.func)).or_insert(true) &= is;
                            }
                        }
                    }
                    // The test, then the subtests the filter picks (all without one).
                    let subs: Vec<&TestRun> = match filter {
                        Some(f) => match f.pick(test) {
                            Some(subs) => subs,
                            None => continue,
                        },
                        None => test.subtests.iter().collect(),
                    };
                    // The calls of the test's own work: not the runner's (a failing test's
                    // report formatting would count tens of thousands).
                    let calls = tree.map_or(0, |t| {
                        let counted = super::spectrum::counted_nodes(t, &kinds);
                        t.preorder().into_iter().filter(|&n| counted[n as usize]).map(|n| t.node(n).count).sum()
                    });
                    let row = |test: TestRun, calls: u64| TestRow {
                        trace: d.display().to_string(),
                        pid: p.meta.pid,
                        calls,
                        cwd: cwd.clone(),
                        test,
                    };
                    let mut own = test.clone();
                    own.subtests.clear();
                    table.tests.push(row(own, calls));
                    table.tests.extend(subs.into_iter().map(|s| row(s.clone(), 0)));
                }
            }
        }
        let interner = std::sync::Arc::new(interner);
        spectrum.set_interner(interner.clone());
        let interner = &*interner;
        table.failed_total = spectrum.failed_total;
        table.passed_total = spectrum.passed_total;
        if rank > 0 && spectrum.informative() {
            // (function, its key, why the rule leaves it out)
            let mut r: Vec<(RankedFunction, &str, Option<LeftOutAs>)> = spectrum
                .counts
                .iter()
                .filter(|(_, c)| c.0 > 0)
                .map(|(&k, &(ef, ep))| {
                    let key = interner.key(k).unwrap_or_default();
                    let (function, file, line, stdlib) = where_.get(&k).cloned().unwrap_or_else(|| (key.to_string(), None, None, false));
                    let left_out = if stdlib {
                        Some(LeftOutAs::Stdlib)
                    } else if plumbing.get(&k) == Some(&true) {
                        Some(LeftOutAs::Plumbing)
                    } else {
                        None
                    };
                    (RankedFunction { function, file, line, ochiai: spectrum.ochiai(k), failed: ef, passed: ep }, key, left_out)
                })
                .collect();
            // Equal names last by key: one order, whatever the map's.
            r.sort_by(|(a, ka, _), (b, kb, _)| {
                b.ochiai.total_cmp(&a.ochiai).then(a.passed.cmp(&b.passed)).then(a.function.cmp(&b.function)).then(ka.cmp(kb))
            });
            (table.ranking, table.ranking_left_out) = fill_ranking(r.into_iter().map(|(f, _, why)| (f, why)), rank);
        }
        Ok((table, warnings))
    }

    /// Why there is no test to list, or None: the traces recorded none, or none matches
    /// `test`. An error for `slice tests` (exit status 1) and the tests tool (`isError`) alike,
    /// as `--test` on the same traces is; the options named as `front` spells them.
    pub fn nothing_to_list(&self, traces: &[std::path::PathBuf], test: Option<&str>, front: crate::frontend::FrontEnd) -> Option<String> {
        if !self.tests.is_empty() {
            return None;
        }
        let names: Vec<String> = traces.iter().map(|d| d.display().to_string()).collect();
        Some(if self.recorded == 0 && !self.no_tests_why.is_empty() {
            self.no_tests_why.join("; ")
        } else if self.recorded == 0 {
            format!(
                "{}: {} no tests ({} lists the tests of a run of pytest, unittest, `cargo test` or a GoogleTest binary: `{}`)",
                names.join(", "),
                if traces.len() == 1 { "the trace recorded" } else { "the traces recorded" },
                front.tests_command(),
                front.record_tests()
            )
        } else {
            format!(
                "no recorded test matches {:?} ({}); `{}` lists them",
                test.unwrap_or_default(),
                super::plural(self.recorded, "test"),
                front.list_tests(&names)
            )
        })
    }

    /// The table for a terminal: one line per test, the failures, the counts, the ranking.
    /// Every text from the trace goes through [`escape::line`] (one line each).
    pub fn text(&self) -> String {
        // Sections: the table, the failures, the counts, the ranking; a blank line between
        // two, none before the first.
        let mut sections: Vec<Vec<String>> = vec![self.table_lines()];
        let failures = self.failure_lines();
        if !failures.is_empty() {
            sections.push(std::iter::once("failures:".to_string()).chain(failures).collect());
        }
        sections.push(vec![self.summary()]);
        sections.push(self.ranking_lines());
        let mut s = String::new();
        for section in sections.iter().filter(|l| !l.is_empty()) {
            if !s.is_empty() {
                s.push('\n');
            }
            for l in section {
                s.push_str(l);
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

    /// `3 failed, 458 passed; run failed: t.d: exit status 1`. Only a table with tests is
    /// shown: both front ends answer one without tests with [`TestTable::nothing_to_list`]'s
    /// error first.
    pub fn summary(&self) -> String {
        let mut s = outcome_counts(self.tests.iter().map(|r| &r.test).filter(|t| t.parent.is_none()));
        if self.tests.iter().any(|r| r.test.parent.is_some()) {
            let _ = write!(s, "; subtests: {}", outcome_counts(self.tests.iter().map(|r| &r.test).filter(|t| t.parent.is_some())));
        }
        // The recorder keeps a test's first subtests and counts the rest (docs/trace-format.md):
        // the runner's own count is the sum, and the table says so.
        let dropped: u64 = self.tests.iter().filter(|r| r.test.parent.is_none()).map(|r| u64::from(r.test.subtests_dropped)).sum();
        if dropped > 0 {
            let _ = write!(
                s,
                "{} {dropped} more not recorded (a trace keeps a test's first subtests and counts the rest)",
                if self.tests.iter().any(|r| r.test.parent.is_some()) { "," } else { "; subtests:" },
            );
        }
        if !self.failed_runs.is_empty() {
            let _ = write!(s, "; run failed: {}", escape::line(&self.failed_runs.join(", ")));
        }
        s
    }

    /// A header, then one line per test: outcome, duration, calls, id; a subtest's id indented
    /// under its test's, with no calls of its own.
    pub fn table_lines(&self) -> Vec<String> {
        if self.tests.is_empty() {
            return Vec::new();
        }
        let mut out = vec![format!("{:<11} {:>9} {:>9}  test", "outcome", "duration", "calls")];
        for r in &self.tests {
            let t = &r.test;
            let sub = t.parent.is_some();
            out.push(format!(
                "{:<11} {:>9} {:>9}  {}{}",
                t.outcome.name(),
                super::test_duration(t).map(duration).unwrap_or_else(|| "-".into()),
                if sub { "-".to_string() } else { r.calls.to_string() },
                if sub { "  " } else { "" },
                escape::line(&t.id)
            ));
        }
        out
    }

    /// One line per failing test: its id, the first line of its failure, where
    /// ([`super::outcome_line`]).
    pub fn failure_lines(&self) -> Vec<String> {
        self.tests.iter().filter(|r| r.test.outcome.is_failure()).map(|r| format!("  {}", super::outcome_line(&r.test, &r.cwd))).collect()
    }

    /// The ranking, with its header, then what it left out and how to show it (empty without
    /// either).
    pub fn ranking_lines(&self) -> Vec<String> {
        if self.ranking.is_empty() && self.ranking_left_out == LeftOut::default() {
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
                escape::line(&f.function),
                f.file
                    .as_deref()
                    .map(|p| format!("  ({}{})", escape::line(p), f.line.map(|l| format!(":{l}")).unwrap_or_default()))
                    .unwrap_or_default()
            ));
        }
        out.extend(self.left_out_line());
        out
    }

    /// What the ranking left out ([`RankRule`]), and the options that show it.
    fn left_out_line(&self) -> Option<String> {
        let LeftOut { stdlib, plumbing } = self.ranking_left_out;
        let (show_stdlib, show_plumbing) = &self.show_hints;
        let mut parts = Vec::new();
        if stdlib > 0 {
            parts.push(format!("{} of the standard library (`{show_stdlib}` shows them)", super::plural(stdlib, "function")));
        }
        if plumbing > 0 {
            parts.push(format!("{} of framework plumbing (`{show_plumbing}` shows them)", super::plural(plumbing, "function")));
        }
        (!parts.is_empty()).then(|| format!("  left out, as a prompt leaves them out: {}", parts.join("; ")))
    }
}

#[cfg(test)]
mod tests {
    /// The ranking keeps the first N functions the rule keeps and counts what it passed over
    /// on the way (not what ranks below the last one kept); the text says how many and which
    /// option shows them.
    #[test]
    fn the_ranking_leaves_out_the_standard_library_and_plumbing_and_says_so() {
        use super::{fill_ranking, LeftOut, LeftOutAs};
        let f = |name: &str, ochiai: f64| super::RankedFunction {
            function: name.into(),
            file: Some("pkg/m.py".into()),
            line: Some(3),
            ochiai,
            failed: 2,
            passed: 1,
        };
        let ranked = || {
            vec![
                (f("test_it", 1.0), None),
                (f("monthrange", 0.8), Some(LeftOutAs::Stdlib)),
                (f("Command.main", 0.8), Some(LeftOutAs::Plumbing)),
                (f("last_day", 0.7), None),
                (f("weekday", 0.5), Some(LeftOutAs::Stdlib)),
            ]
        };
        let names = |v: &[super::RankedFunction]| v.iter().map(|f| f.function.clone()).collect::<Vec<_>>();
        let (kept, left_out) = fill_ranking(ranked(), 2);
        assert_eq!((names(&kept), left_out), (vec!["test_it".to_string(), "last_day".into()], LeftOut { stdlib: 1, plumbing: 1 }));
        let (kept, left_out) = fill_ranking(ranked(), 10);
        assert_eq!((kept.len(), left_out), (2, LeftOut { stdlib: 2, plumbing: 1 }));
        let (kept, left_out) = fill_ranking(ranked(), 1);
        assert_eq!((kept.len(), left_out), (1, LeftOut::default()));
        let t = super::TestTable {
            ranking: kept,
            ranking_left_out: LeftOut { stdlib: 2, plumbing: 1 },
            show_hints: ("--stdlib".into(), "--show-plumbing".into()),
            failed_total: 2,
            passed_total: 1,
            ..Default::default()
        };
        assert_eq!(
            t.ranking_lines(),
            [
                "functions that go with failure (Ochiai over 2 failing and 1 passing tests; docs/prompts.md):",
                "  1.000  failing   2  passing     1  test_it  (pkg/m.py:3)",
                "  left out, as a prompt leaves them out: 2 functions of the standard library (`--stdlib` shows them); 1 function \
                 of framework plumbing (`--show-plumbing` shows them)",
            ]
        );
        // Everything left out: the header and the count.
        let t = super::TestTable { ranking: Vec::new(), ranking_left_out: LeftOut { stdlib: 1, plumbing: 0 }, ..t };
        assert_eq!(t.ranking_lines().len(), 2);
        assert!(super::TestTable::default().ranking_lines().is_empty());
    }

    /// The text's sections are parted by one blank line, and nothing comes before the first.
    #[test]
    fn no_blank_line_before_the_first_section() {
        let mut test = crate::testrun::test_run("t::passed", trace_format::TestOutcome::Passed);
        test.duration_ns = None;
        let t = super::TestTable {
            tests: vec![super::TestRow { trace: "t.d".into(), pid: 1, calls: 2, test, cwd: "/p".into() }],
            ..Default::default()
        };
        let text = t.text();
        assert!(text.starts_with("outcome ") && text.contains(" t::passed\n\n1 passed\n") && !text.contains("\n\n\n"), "{text:?}");
    }

    /// `slice tests` and the tests tool on a trace without tests name every kind of run they
    /// read tests from, as `--test` does (`cargo test` and GoogleTest binaries are recorded as
    /// programs), and how to record one as the front end spells it.
    #[test]
    fn no_tests_names_every_runner_tests_are_read_from() {
        use crate::frontend::FrontEnd;
        let traces = [std::path::PathBuf::from("t.d")];
        for front in [FrontEnd::Cli, FrontEnd::Mcp] {
            let s = super::TestTable::default().nothing_to_list(&traces, None, front).expect("nothing to list");
            assert!(s.starts_with("t.d: the trace recorded no tests"), "{s}");
            for runner in ["pytest", "unittest", "`cargo test`", "GoogleTest", front.record_tests()] {
                assert!(s.contains(runner), "{runner}: {s}");
            }
        }
    }
    /// A subtest's row follows its test's, indented, with no calls of its own; the counts
    /// keep tests and subtests apart.
    #[test]
    fn subtests_are_rows_under_their_test_and_counted_apart() {
        use trace_format::TestOutcome;
        let mut test = crate::testrun::test_run("t.py::test_x", TestOutcome::Failed);
        let mut sub = crate::testrun::test_run("t.py::test_x (i=1)", TestOutcome::Failed);
        sub.parent = Some(test.id.clone());
        sub.duration_ns = None;
        sub.failure = Some(trace_format::TestFailure { message: Some("assert 1 == 2".into()), ..Default::default() });
        test.failure = Some(trace_format::TestFailure { message: Some("contains 1 failed subtest".into()), ..Default::default() });
        let row = |test, calls| super::TestRow { trace: "t.d".into(), pid: 1, calls, test, cwd: "/p".into() };
        let t = super::TestTable { tests: vec![row(test, 40), row(sub, 0)], ..Default::default() };
        assert_eq!(
            t.text(),
            "outcome      duration     calls  test\n\
             failed          12 ms        40  t.py::test_x\n\
             failed              -         -    t.py::test_x (i=1)\n\
             \n\
             failures:\n\
             \x20 t.py::test_x: contains 1 failed subtest\n\
             \x20 t.py::test_x (i=1): assert 1 == 2\n\
             \n\
             1 failed; subtests: 1 failed\n"
        );
        // Subtests past what the recorder keeps are counted, as the runner counts them.
        let (mut many, sub) = (t.tests[0].test.clone(), t.tests[1].test.clone());
        many.subtests_dropped = 1600;
        let t = super::TestTable { tests: vec![row(many.clone(), 40), row(sub, 0), row(many, 7)], ..Default::default() };
        assert_eq!(
            t.summary(),
            "2 failed; subtests: 1 failed, 3200 more not recorded (a trace keeps a test's first subtests and counts the rest)"
        );
    }
}
