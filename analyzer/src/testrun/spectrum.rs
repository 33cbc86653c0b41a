//! The spectrum: which functions ran in failing and in passing tests, and their Ochiai score
//! (`docs/prompts.md`, "Tests").

use crate::calltree::CallTree;
use crate::symbols::{FuncId, Function, Interner};
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::sync::Arc;
use trace_format::TestOutcome;

/// What the spectrum needs to know of a function ([`Spectrum::add`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FuncKind {
    /// The test runner's own code ([`crate::plumbing::is_test_runner`]).
    Runner,
    Stdlib,
    /// An installed package's code (site-packages, not the runner's): the code under test when
    /// the tests or the program reach it, the runner's own work when only the runner does
    /// (pytest's assertion report colours its diff with pygments: [`runner_work`]).
    Installed,
    /// The program's code (tests included).
    #[default]
    Other,
}

impl FuncKind {
    /// Code that is neither the runner's nor the standard library's.
    pub fn is_code(self) -> bool {
        matches!(self, FuncKind::Installed | FuncKind::Other)
    }
}

/// [`FuncKind`] of each function of a table.
pub fn function_kinds(funcs: &[crate::symbols::Function], cwd: &std::path::Path) -> Vec<FuncKind> {
    funcs.iter().map(|f| function_kind(f, cwd)).collect()
}

/// [`FuncKind`] of one function.
pub fn function_kind(f: &crate::symbols::Function, cwd: &std::path::Path) -> FuncKind {
    use crate::pathclass::{module_name, origin, Origin};
    match origin(f) {
        // unittest is a test runner too (its assertion helpers report failures: difflib).
        Origin::Stdlib if module_name(f, cwd).split('.').next() == Some("unittest") => FuncKind::Runner,
        Origin::Stdlib => FuncKind::Stdlib,
        Origin::SitePackages if f.language == crate::symbols::Language::Native => {
            if crate::plumbing::native_package(f).is_some_and(|p| crate::plumbing::is_test_runner(&p)) {
                FuncKind::Runner
            } else {
                FuncKind::Other
            }
        }
        Origin::SitePackages if crate::plumbing::is_test_runner(module_name(f, cwd).split('.').next().unwrap_or_default()) => {
            FuncKind::Runner
        }
        // Tests of an installed package (`pytest --pyargs pkg`) are tests, not what the runner
        // uses.
        Origin::SitePackages if f.file.as_deref().is_some_and(crate::plumbing::is_test_file) => FuncKind::Other,
        Origin::SitePackages => FuncKind::Installed,
        _ => FuncKind::Other,
    }
}

/// Which nodes of a tree are the test runner's work, by node id: the runner's own functions,
/// and the standard library's and installed packages' code that the runner called, down to
/// the first call back into the program (the tests, their fixtures, the code under test, an
/// object's `__repr__`). A failing `assert` has pytest format its report, and with
/// `--color=yes` (a project's `addopts`) colour it with pygments: 29 of a failing test's 33
/// functions were pygments', Ochiai 1.0 each (they ran in the failing test only), and a
/// 4,000-token prompt dropped the function with the bug to keep them. The one rule for the
/// spectrum ([`counted_nodes`]) and for prompts ([`crate::plumbing`]).
///
/// Where the runner describes a failure ([`describes_failure`]: pytest's `saferepr` of the
/// values an assertion compared), everything it calls is its work, the program's code too:
/// cachetools' `Cache.__repr__`, called only to print a failing comparison, ran in failing
/// tests only and ranked above the function with the bug.
pub fn runner_work(tree: &CallTree, kinds: &[FuncKind]) -> Vec<bool> {
    let kind = |n: crate::calltree::NodeId| kinds.get(tree.node(n).func as usize).copied().unwrap_or(FuncKind::Other);
    let mut work = vec![false; tree.nodes.len()];
    let mut reporting = vec![false; tree.nodes.len()];
    // Pre-order: a parent's verdict is known before its children's.
    for n in tree.preorder() {
        let parent = tree.node(n).parent;
        let parent_work = parent != crate::calltree::ROOT && work[parent as usize];
        let k = kind(n);
        reporting[n as usize] = (parent != crate::calltree::ROOT && reporting[parent as usize])
            || (k == FuncKind::Runner && tree.func(n).is_some_and(describes_failure));
        work[n as usize] = reporting[n as usize]
            || match k {
                FuncKind::Runner => true,
                FuncKind::Stdlib | FuncKind::Installed => parent_work,
                FuncKind::Other => false,
            };
    }
    work
}

/// pytest's code that describes a failure for its report: the representations of the values
/// an assertion compared (`_pytest/_io/saferepr.py`, `_pytest/assertion/util.py`, the
/// rewritten assertion's `_saferepr` and `_call_reprcompare`), tracebacks (`_pytest/_code/`),
/// reports and the terminal. Not its import hook (`rewrite.py` executes the test modules).
pub fn describes_failure(f: &Function) -> bool {
    let Some(file) = f.file.as_deref() else { return false };
    let file = file.to_string_lossy();
    let Some((_, rest)) = file.rsplit_once("/_pytest/") else { return false };
    rest.starts_with("_io/")
        || rest.starts_with("_code/")
        || matches!(rest, "assertion/util.py" | "reports.py" | "terminal.py")
        || (rest == "assertion/rewrite.py"
            && matches!(
                f.name.as_str(),
                "_saferepr" | "_call_reprcompare" | "_format_assertmsg" | "_format_explanation" | "_format_boolop"
            ))
}

/// Which nodes of a test's tree are the test's own work, by node id: not the test runner's
/// ([`runner_work`]), and standard-library code only where such work called it (pytest's
/// failure report formats with difflib and pprint; that is the runner's work, not the test's).
pub fn counted_nodes(tree: &CallTree, kinds: &[FuncKind]) -> Vec<bool> {
    let kind = |n: crate::calltree::NodeId| kinds.get(tree.node(n).func as usize).copied().unwrap_or(FuncKind::Other);
    let work = runner_work(tree, kinds);
    // Pre-order: a parent's verdict is known before its children's.
    let mut counted = vec![false; tree.nodes.len()];
    for n in tree.preorder() {
        let parent = tree.node(n).parent;
        let parent_counted = parent != crate::calltree::ROOT && counted[parent as usize];
        counted[n as usize] = match kind(n) {
            FuncKind::Stdlib => parent_counted,
            _ => !work[n as usize],
        };
    }
    counted
}

/// The functions of a test's tree that the spectrum counts, by [`FuncId`] (of an interned
/// tree: functions sharing a key are one function), once each: those of its [`counted_nodes`],
/// less code without a file (`<string>`).
pub fn counted_ids(tree: &CallTree, kinds: &[FuncKind]) -> HashSet<FuncId> {
    let counted = counted_nodes(tree, kinds);
    let mut seen: HashSet<u32> = HashSet::default();
    let mut out: HashSet<FuncId> = HashSet::default();
    for n in tree.preorder() {
        if !counted[n as usize] || !seen.insert(tree.node(n).func) {
            continue;
        }
        // (A function missing from the table is `Function::unknown`: its key has no `<`.)
        if !tree.func(n).is_some_and(Function::key_is_bracketed) {
            out.insert(tree.func_id(n));
        }
    }
    out
}

/// How often each function ran in failing and in passing tests, over every test of the traces
/// given (several traces: the shards of one suite). Functions are the [`FuncId`]s of the
/// interner the tests' trees were read with ([`Spectrum::set_interner`]); a function of
/// another analysis is resolved to one by its key, once ([`Spectrum::id`]).
#[derive(Debug, Clone, Default)]
pub struct Spectrum {
    pub failed_total: u32,
    pub passed_total: u32,
    /// function -> (failing tests it ran in, passing tests it ran in).
    pub counts: HashMap<FuncId, (u32, u32)>,
    interner: Arc<Interner>,
    /// The same over source lines, where every test counted reported its own lines
    /// ([`Spectrum::add_lines`]): function -> line -> (failing, passing tests it ran in).
    pub line_counts: HashMap<FuncId, HashMap<u32, (u32, u32)>>,
    /// Failing and passing tests whose lines were added.
    pub line_tests: (u32, u32),
    /// Functions whose line reporting stopped early in some test counted (a line event with
    /// line 0): their lines are left out of the line spectrum.
    pub lines_uncertain: HashSet<FuncId>,
}

impl Spectrum {
    /// Add one test's tree (interned; skipped, xfailed tests count as neither and are not
    /// added). `kinds[i]`: what function `i` of the tree's table is ([`function_kinds`]): the
    /// test runner's own code is not counted, nor standard-library code that the runner called
    /// (it runs in failing tests to report them: difflib, traceback); what the code under test
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
        for id in counted_ids(tree, kinds) {
            let e = self.counts.entry(id).or_default();
            if failed {
                e.0 += 1;
            } else {
                e.1 += 1;
            }
        }
    }

    /// The interner of the trees added (once they are all read).
    pub fn set_interner(&mut self, interner: Arc<Interner>) {
        self.interner = interner;
    }

    /// The id of the function with this key ([`crate::symbols::Function::key`]), if the
    /// spectrum's interner has it.
    pub fn id(&self, key: &str) -> Option<FuncId> {
        self.interner.id(key)
    }

    /// Add the lines one test ran (`lines`: (function index of `tree`'s table, line) pairs from
    /// between its boundaries, [`crate::fold::FoldInfo::test_lines`]), once
    /// per line, for the functions [`Spectrum::add`] counted for the same test (`tree`,
    /// `kinds`). Only for tests whose process reported lines per test
    /// (`proc.json`'s `lines_per_test`): elsewhere a line that an earlier test ran first is
    /// missing from later tests.
    pub fn add_lines(&mut self, outcome: TestOutcome, tree: &CallTree, kinds: &[FuncKind], lines: &[(u32, u32)]) {
        let failed = outcome.is_failure();
        if !failed && !outcome.is_pass() {
            return;
        }
        if failed {
            self.line_tests.0 += 1;
        } else {
            self.line_tests.1 += 1;
        }
        let counted = counted_ids(tree, kinds);
        let mut seen: HashSet<(u32, u32)> = HashSet::default();
        for &(func, line) in lines {
            if !seen.insert((func, line)) {
                continue;
            }
            let id = tree.id_of(func);
            // The standard library's and the runner's lines are reported once per process,
            // not per test (shims/python/src/testlines.rs): a later test's would be missing.
            let own = kinds.get(func as usize).is_none_or(|k| *k == FuncKind::Other);
            if !own || !counted.contains(&id) {
                continue;
            }
            if line == 0 {
                self.lines_uncertain.insert(id);
                continue;
            }
            let e = self.line_counts.entry(id).or_default().entry(line).or_default();
            if failed {
                e.0 += 1;
            } else {
                e.1 += 1;
            }
        }
    }

    /// Whether the line spectrum holds: every test counted reported its own lines.
    fn lines_hold(&self) -> bool {
        self.line_tests == (self.failed_total, self.passed_total) && self.informative()
    }

    /// The lines of a function with their counts and Ochiai scores, when the line spectrum
    /// holds and the function's lines are all known.
    fn lines_of(&self, id: FuncId) -> Option<Vec<(u32, u32, u32, f64)>> {
        if !self.lines_hold() || self.lines_uncertain.contains(&id) {
            return None;
        }
        let lines = self.line_counts.get(&id)?;
        let mut v: Vec<(u32, u32, u32, f64)> = lines.iter().map(|(&l, &(ef, ep))| (l, ef, ep, self.score(ef, ep))).collect();
        v.sort_unstable_by_key(|x| x.0);
        Some(v)
    }

    fn score(&self, ef: u32, ep: u32) -> f64 {
        if ef == 0 || self.failed_total == 0 {
            return 0.0;
        }
        ef as f64 / ((self.failed_total as f64) * (ef + ep) as f64).sqrt()
    }

    /// The Ochiai score of a function's most suspicious line (`docs/prompts.md`, "Tests"), when
    /// the line spectrum holds.
    pub fn line_ochiai(&self, id: FuncId) -> Option<f64> {
        self.lines_of(id)?.iter().map(|x| x.3).max_by(f64::total_cmp)
    }

    /// A function's suspiciousness for the ranking: its own Ochiai score, or its most
    /// suspicious line's when that is higher (a function every test runs, with a branch only
    /// the failing tests take).
    pub fn suspiciousness(&self, id: FuncId) -> f64 {
        let f = self.ochiai(id);
        self.line_ochiai(id).map_or(f, |l| l.max(f))
    }

    /// What a prompt says of the lines of a function that go with failure more than the
    /// function does: at most [`LINE_GROUPS`] groups of lines with the same counts, most
    /// suspicious first, `lines 14, 17-18 ran in 1 of 1 failing tests, 0 of 12 passing
    /// (Ochiai 1.00)`. `None` when no line does (or the line spectrum does not hold).
    pub fn describe_lines(&self, id: FuncId) -> Option<String> {
        let f = self.ochiai(id);
        let lines = self.lines_of(id)?;
        let mut groups: Vec<((u32, u32), f64, Vec<u32>)> = Vec::new();
        for (l, ef, ep, o) in lines {
            if o <= f + 1e-9 {
                continue;
            }
            match groups.iter_mut().find(|g| g.0 == (ef, ep)) {
                Some(g) => g.2.push(l),
                None => groups.push(((ef, ep), o, vec![l])),
            }
        }
        if groups.is_empty() {
            return None;
        }
        groups.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.2[0].cmp(&b.2[0])));
        let text: Vec<String> = groups
            .iter()
            .take(LINE_GROUPS)
            .map(|((ef, ep), o, ls)| {
                format!(
                    "line{} {} ran in {ef} of {} failing test{}, {ep} of {} passing (Ochiai {o:.2})",
                    if ls.len() == 1 { "" } else { "s" },
                    crate::coverage::line_ranges(ls),
                    self.failed_total,
                    if self.failed_total == 1 { "" } else { "s" },
                    self.passed_total,
                )
            })
            .collect();
        Some(text.join("; "))
    }

    /// Whether it can tell anything: at least one failing and one passing test.
    pub fn informative(&self) -> bool {
        self.failed_total > 0 && self.passed_total > 0
    }

    /// The Ochiai score of a function: `ef / sqrt(F × (ef + ep))` (`ef`, `ep`: failing and
    /// passing tests it ran in; `F`: failing tests). 1 for code that ran in every failing test
    /// and no passing one; 0 for code no failing test ran.
    pub fn ochiai(&self, id: FuncId) -> f64 {
        let Some(&(ef, ep)) = self.counts.get(&id) else { return 0.0 };
        self.score(ef, ep)
    }

    /// What a prompt says of a function: `ran in 3 of 3 failing tests, 2 of 461 passing`.
    pub fn describe(&self, id: FuncId) -> Option<String> {
        let &(ef, ep) = self.counts.get(&id)?;
        Some(format!(
            "ran in {ef} of {} failing test{}, {ep} of {} passing (Ochiai {:.2})",
            self.failed_total,
            if self.failed_total == 1 { "" } else { "s" },
            self.passed_total,
            self.ochiai(id)
        ))
    }
}

/// Most groups of lines [`Spectrum::describe_lines`] names.
pub const LINE_GROUPS: usize = 3;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calltree::{TreeBuilder, ROOT};
    use crate::testutil::py_funcs;
    use std::sync::Arc;

    #[test]
    fn ochiai_ranks_what_only_failing_tests_ran_first() {
        let funcs = Arc::new(py_funcs(&["test", "common", "buggy"]));
        let mut interner = Interner::default();
        let ids = Arc::new(interner.intern_table(&funcs, funcs.len()));
        let built = |b: TreeBuilder| {
            let mut t = b.finish();
            t.ids = ids.clone();
            t
        };
        let tree = |fs: &[u32]| {
            let mut b = TreeBuilder::new(funcs.clone());
            let t = b.child(ROOT, fs[0]);
            for &i in &fs[1..] {
                b.child(t, i);
            }
            built(b)
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
        assert!(!ignoring.counts.contains_key(&ids[1]) && ignoring.counts.contains_key(&ids[2]));
        let mut b = TreeBuilder::new(funcs.clone());
        let runner = b.child(ROOT, 1);
        b.child(runner, 2);
        let mut under_runner = Spectrum::default();
        under_runner.add(TestOutcome::Failed, &built(b), &[FuncKind::Other, FuncKind::Runner, FuncKind::Stdlib]);
        assert!(under_runner.counts.is_empty(), "{:?}", under_runner.counts);
        assert_eq!((s.failed_total, s.passed_total), (2, 2));
        assert!(s.informative());
        // buggy: 2 / sqrt(2 * 3); common: 2 / sqrt(2 * 4).
        assert!((s.ochiai(ids[2]) - 2.0 / 6f64.sqrt()).abs() < 1e-9);
        assert!((s.ochiai(ids[1]) - 0.5f64.sqrt()).abs() < 1e-9);
        assert!(s.ochiai(ids[2]) > s.ochiai(ids[1]));
        assert_eq!(s.ochiai(FuncId(99)), 0.0);
        assert_eq!(s.describe(ids[2]).unwrap(), "ran in 2 of 2 failing tests, 1 of 2 passing (Ochiai 0.82)");
        // A key from elsewhere meets the spectrum's id once it knows its interner.
        assert_eq!(s.id(&funcs[2].key()), None);
        s.set_interner(Arc::new(interner));
        assert_eq!(s.id(&funcs[2].key()), Some(ids[2]));
        assert_eq!(s.id("nothing"), None);
    }

    /// Two entries of one table with the same key (one function) count once per test, and a
    /// function whose key starts with `<` (no real file) not at all.
    /// runner -> test -> lib.parse (an installed package the test calls: code under test)
    /// -> json.loads (standard library it calls: counted); runner -> pygments.highlight (what
    /// only the runner calls: its work) -> re.compile -> pygments.lex (still its work) ->
    /// Thing.__repr__ (the program's, called back: counted again).
    #[test]
    fn what_only_the_runner_calls_is_its_work_down_to_the_programs_code() {
        use FuncKind::*;
        let funcs = Arc::new(py_funcs(&["runner", "test", "parse", "loads", "highlight", "compile", "lex", "repr"]));
        let kinds = [Runner, Other, Installed, Stdlib, Installed, Stdlib, Installed, Other];
        let mut b = TreeBuilder::new(funcs.clone());
        let r = b.child(ROOT, 0);
        let t = b.child(r, 1);
        let p = b.child(t, 2);
        b.child(p, 3);
        let h = b.child(r, 4);
        let c = b.child(h, 5);
        let l = b.child(c, 6);
        b.child(l, 7);
        let tree = b.finish();
        let by_name = |v: Vec<bool>| -> Vec<&str> {
            tree.preorder().into_iter().filter(|&n| v[n as usize]).filter_map(|n| tree.func(n)).map(|f| f.qualname.as_str()).collect()
        };
        assert_eq!(by_name(runner_work(&tree, &kinds)), ["runner", "highlight", "compile", "lex"]);
        assert_eq!(by_name(counted_nodes(&tree, &kinds)), ["test", "parse", "loads", "repr"]);
    }

    #[test]
    fn what_the_runner_calls_to_describe_a_failure_is_its_work_the_programs_repr_too() {
        use FuncKind::*;
        let mut fs =
            py_funcs(&["runner", "test", "_saferepr", "saferepr", "repr", "Cache.__repr__", "Cache.__len__", "exec_module", "<module>"]);
        let site = "/v/lib/python3.12/site-packages/_pytest/";
        for (i, file) in [(0, "python.py"), (2, "assertion/rewrite.py"), (3, "_io/saferepr.py"), (7, "assertion/rewrite.py")] {
            fs[i].file = Some(format!("{site}{file}").into());
        }
        fs[2].name = "_saferepr".into();
        fs[7].name = "exec_module".into();
        let funcs = Arc::new(fs);
        let kinds = [Runner, Other, Runner, Runner, Stdlib, Other, Other, Runner, Other];
        let mut b = TreeBuilder::new(funcs.clone());
        let r = b.child(ROOT, 0);
        let t = b.child(r, 1);
        let sr = b.child(t, 2);
        let s2 = b.child(sr, 3);
        let rp = b.child(s2, 4);
        let c = b.child(rp, 5);
        b.child(c, 6);
        b.child(t, 6);
        // The assertion-rewriting import hook runs a test module's body: not a report.
        let hook = b.child(r, 7);
        b.child(hook, 8);
        let tree = b.finish();
        let by_name = |v: Vec<bool>| -> Vec<&str> {
            tree.preorder().into_iter().filter(|&n| v[n as usize]).filter_map(|n| tree.func(n)).map(|f| f.qualname.as_str()).collect()
        };
        assert_eq!(
            by_name(runner_work(&tree, &kinds)),
            ["runner", "_saferepr", "saferepr", "repr", "Cache.__repr__", "Cache.__len__", "exec_module"]
        );
        assert_eq!(by_name(counted_nodes(&tree, &kinds)), ["test", "Cache.__len__", "<module>"]);
    }

    #[test]
    fn functions_sharing_a_key_count_once_and_bracketed_ones_not_at_all() {
        let mut fs = py_funcs(&["f", "f", "g"]);
        fs[2].file = Some("<string>".into());
        let funcs = Arc::new(fs);
        let mut interner = Interner::default();
        let mut b = TreeBuilder::new(funcs.clone());
        let a = b.child(ROOT, 0);
        b.child(a, 1);
        b.child(a, 2);
        let mut t = b.finish();
        t.ids = Arc::new(interner.intern_table(&funcs, funcs.len()));
        let mut s = Spectrum::default();
        s.add(TestOutcome::Failed, &t, &[]);
        assert_eq!(s.counts.len(), 1, "{:?}", s.counts);
        assert_eq!(s.counts.get(&t.ids[0]), Some(&(1, 0)));
    }

    #[test]
    fn a_line_only_failing_tests_ran_goes_with_failure_more_than_its_function() {
        // test (0) calls f (1) in every test; f's line 11 runs everywhere, line 12 in the
        // passing tests only, line 13 in the failing test only.
        let funcs = Arc::new(py_funcs(&["test", "f"]));
        let tree = || {
            let mut b = TreeBuilder::new(funcs.clone());
            let t = b.child(ROOT, 0);
            b.child(t, 1);
            b.finish()
        };
        let mut interner = Interner::default();
        let ids = Arc::new(interner.intern_table(&funcs, funcs.len()));
        let tree = || {
            let mut t = tree();
            t.ids = ids.clone();
            t
        };
        let mut s = Spectrum::default();
        let runs: [(TestOutcome, &[(u32, u32)]); 3] = [
            (TestOutcome::Passed, &[(0, 2), (1, 11), (1, 12), (1, 11)]),
            (TestOutcome::Passed, &[(0, 2), (1, 11), (1, 12)]),
            (TestOutcome::Failed, &[(0, 2), (1, 11), (1, 13), (7, 40)]),
        ];
        for (o, lines) in runs {
            s.add(o, &tree(), &[]);
            s.add_lines(o, &tree(), &[], lines);
        }
        let f = ids[1];
        assert_eq!(s.line_counts[&f][&11], (1, 2), "a line counts once per test");
        assert_eq!(s.line_counts[&f][&13], (1, 0));
        // f ran in every test: 1 / sqrt(1 * 3); its line 13: 1.
        assert!((s.ochiai(f) - 1.0 / 3f64.sqrt()).abs() < 1e-9);
        assert_eq!(s.line_ochiai(f), Some(1.0));
        assert_eq!(s.suspiciousness(f), 1.0);
        assert_eq!(s.describe_lines(f).unwrap(), "line 13 ran in 1 of 1 failing test, 0 of 2 passing (Ochiai 1.00)");
        // A test without its own lines (another shard recorded once per process): no line
        // spectrum, the function's own score.
        let mut partial = s.clone();
        partial.add(TestOutcome::Passed, &tree(), &[]);
        assert_eq!(partial.line_ochiai(f), None);
        assert_eq!(partial.suspiciousness(f), partial.ochiai(f));
        // A function whose line reporting stopped early in some test (line 0): its lines are
        // unknown, so none is scored.
        let mut gave_up = s.clone();
        gave_up.add(TestOutcome::Passed, &tree(), &[]);
        gave_up.add_lines(TestOutcome::Passed, &tree(), &[], &[(1, 11), (1, 0)]);
        assert_eq!(gave_up.describe_lines(f), None);
    }
}
