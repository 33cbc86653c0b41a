//! From trace directories to the trees every `slice` view shows: load and fold
//! ([`crate::fold`]), prune start-up ([`crate::prune`]), select ([`crate::select`]).

use crate::calltree::CallTree;
use crate::coverage::LineCoverage;
use crate::fold::{load_trace, LoadError, LoadedTrace};
use crate::frontend::{FrontEnd, Opt};
use crate::plumbing::Plumbing;
use crate::prune::{entry_modules, prune_baseline, prune_imports, Baseline};
use crate::select::Selection;
use crate::source::SourceCache;
use crate::symbols::{Interner, Language};
use crate::testrun::{Spectrum, TestFilter};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use trace_format::{escape, TraceMeta};

/// Start-up pruning mode.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum PruneMode {
    Off,
    /// Python: drop the work done while importing modules (the default).
    #[default]
    Auto,
    /// Drop the leaves that these baseline runs also reached at the same path, repeatedly.
    Baseline(Vec<PathBuf>),
}

/// How to turn traces into trees.
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub prune: PruneMode,
    pub selection: Selection,
    /// Framework plumbing to collapse (prompts; see [`crate::plumbing`]). Default: none.
    pub plumbing: Plumbing,
    /// Show these tests' trees instead of the threads' (`--test`; [`crate::testrun`]).
    pub tests: Option<TestFilter>,
    /// Which command the trees are for: the options its notes and errors name.
    pub hints: Hints,
    /// Who reads the notes and errors: how they spell those options.
    pub front: FrontEnd,
    /// At most this many of the tests `tests` chose (a prompt's: [`prompt_max_tests`]); the
    /// rest are named in a note ([`crate::testrun::cap_tests`]).
    pub max_tests: Option<usize>,
    /// The question's words ([`crate::testrun::id_words`]): among the tests `max_tests` leaves
    /// out, those whose ids name them are kept first (`ordinalize(13)` -> `test_ordinalize[13-13th]`).
    pub question_words: rustc_hash::FxHashSet<String>,
}

/// The most tests a prompt shows of those `--test` chose (`failed` in a suite that a bug in
/// the code under test breaks everywhere: cachetools' 118): their failures and trees alone
/// would take more than a prompt's budget. A note names the others.
pub const PROMPT_MAX_TESTS: usize = 5;

/// Tokens of budget per test a prompt shows ([`prompt_max_tests`]): a failure block and the
/// test's own code, with room left for the code under test.
pub const TOKENS_PER_SHOWN_TEST: usize = 2000;

/// The most tests a prompt of `budget` tokens shows: [`PROMPT_MAX_TESTS`], fewer under a small
/// budget (one per [`TOKENS_PER_SHOWN_TEST`], at least one), where five failures alike would
/// leave no room for the code that fails.
pub fn prompt_max_tests(budget: Option<usize>) -> usize {
    budget.map_or(PROMPT_MAX_TESTS, |b| (b / TOKENS_PER_SHOWN_TEST).clamp(1, PROMPT_MAX_TESTS))
}

/// The command a [`prepare`] is for, so that every hint in its notes and errors names an
/// option that command has.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Hints {
    /// `slice from-trace` and the views: `--test`.
    #[default]
    Prompt,
    /// `slice diff`: `--test` (both runs), `--test-a`, `--test-b`. `option`: the one that
    /// chose this trace's tests.
    Diff { option: Opt },
}

impl Hints {
    /// The option that chooses tests.
    pub fn test_option(self) -> Opt {
        match self {
            Hints::Prompt => Opt::Test,
            Hints::Diff { option } => option,
        }
    }
}

/// One thread's tree, ready to show.
#[derive(Debug, Clone)]
pub struct PreparedThread {
    /// What tells it apart within its trace: `process 123 (python3 app.py), thread MainThread`
    /// when the run had several processes, `thread MainThread` when one process had several
    /// threads, empty for a single-threaded run. See [`PreparedThread::full_label`].
    pub label: String,
    /// Its process's command line, as [`short_argv`] shows it.
    pub command: String,
    pub pid: u32,
    pub tid: u64,
    pub name: Option<String>,
    pub is_main: bool,
    pub tree: CallTree,
    /// Function indices of the entry module(s) (`<module>` of the script that was run).
    pub entry: HashSet<u32>,
    /// Function indices of collapsed framework plumbing (tree lines without source).
    pub plumbing: HashSet<u32>,
    /// Its times are estimated (entry patching: [`crate::fold::ProcessTrees::times_estimated`]).
    pub times_estimated: bool,
    /// Not a thread or a chosen test but the part of an earlier test's tree that built state a
    /// chosen test reused ([`crate::testrun::built_earlier`]): context for a prompt, left out
    /// where runs are compared.
    pub earlier_state: bool,
    /// A chosen test's tree (`--test`), labelled `test ID`.
    pub test: bool,
}

impl PreparedThread {
    /// The thread's name for display ([`escape::line`]), `main` for an unnamed main thread,
    /// else `tid <tid>`.
    pub fn thread_name(&self) -> String {
        thread_name(self.name.as_deref(), self.is_main, self.tid)
    }

    /// The label naming its process and thread, however many the run had:
    /// `process 123 (python3 app.py), thread MainThread`.
    pub fn full_label(&self) -> String {
        format!("process {} ({}), thread {}", self.pid, self.command, self.thread_name())
    }
}

pub(crate) fn thread_name(name: Option<&str>, is_main: bool, tid: u64) -> String {
    match name {
        Some(n) => escape::line(n).into_owned(),
        None if is_main => "main".into(),
        None => format!("tid {tid}"),
    }
}

/// One trace, ready to show.
pub struct PreparedTrace {
    pub dir: PathBuf,
    pub meta: TraceMeta,
    pub cwd: PathBuf,
    /// Threads with a non-empty tree, main threads first.
    pub threads: Vec<PreparedThread>,
    /// What pruning and selection did, for the prompt.
    pub notes: Vec<String>,
    pub sources: SourceCache,
    /// Every source file the run executed (from the function tables), for whole-file comparisons.
    pub files_executed: Vec<PathBuf>,
    /// Nodes before pruning/selection and after.
    pub nodes_recorded: usize,
    pub nodes_shown: usize,
    pub events: u64,
    /// Which source lines ran (empty without line data).
    pub coverage: LineCoverage,
    /// With `--test`, when every chosen test's process reported lines per test (`trace run
    /// --lines-per-test`): the lines those tests ran in the code under test ([`tests_coverage`]),
    /// which `slice diff` compares where the whole run's lines would mix in other tests'.
    pub tests_coverage: Option<LineCoverage>,
    /// What a prompt says first: how the run ended when it failed, and each shown test's
    /// outcome and failure ([`crate::testrun::outcome_text`]). Plain text blocks.
    pub outcome: Vec<String>,
    /// The frames of each shown test's failure (file as the runner gives it, line), outermost
    /// first: where the failure was raised (the last) and the calls on its way, which the
    /// ranking puts first.
    pub failure_frames: Vec<Vec<(String, u32)>>,
    /// Function key -> score of the shown failing tests' own invocations
    /// ([`crate::testrun::invocations::Invocations::scores`]): what ran only in the last of the
    /// test's repeated calls, the one whose result failed.
    pub invocation_scores: Vec<(String, f64)>,
    /// Every test the run recorded, in start order (`pid`, test).
    pub tests: Vec<(u32, trace_format::TestRun)>,
    /// The tests a view names when it says how the run ended, as indices into `tests`, in
    /// their order: those `--test` chose, else the failing ones (`outcome` holds the blocks of
    /// the first `WHOLE_RUN_FAILURES` of them).
    pub ended_tests: Vec<usize>,
    /// Which functions ran in failing and passing tests, over all traces prepared together;
    /// `None` unless they hold both.
    pub spectrum: Option<std::sync::Arc<Spectrum>>,
    /// Its threads are tests' trees (`--test`), not whole threads.
    pub tests_shown: bool,
    /// Tests `--test` chose that the prompt leaves out ([`Options::max_tests`]; a note names
    /// them): a budget that cut nothing else did not fit everything.
    pub tests_left_out: usize,
    /// Who reads what is made of it: how its hints spell options ([`Options::front`]).
    pub front: FrontEnd,
    /// The interner its trees' [`crate::symbols::FuncId`]s point into, shared by every trace
    /// prepared together ([`prepare`]).
    pub interner: std::sync::Arc<Interner>,
}

/// Errors preparing traces.
#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    #[error(transparent)]
    Load(#[from] LoadError),
    /// `why`: which hiding rule removed what, and the option that shows it ([`crate::empty`]).
    #[error("{path}: nothing left to show: {why}")]
    Empty { path: PathBuf, recorded: usize, pruned: usize, why: String },
    /// `why`: what the trace says of it (entry patching that patched nothing), or that the
    /// recorder may not have been active; `front`: who reads it ([`FrontEnd::recorder`]).
    #[error("{path}: the trace recorded no function calls ({why}); record it again with {}", .front.recorder())]
    NoCalls { path: PathBuf, why: String, front: FrontEnd },
    /// `why`: what the run's command and status say of it ([`crate::testrun::why_no_tests`]),
    /// else which runs `--test` reads and how to record one, as the front end spells them.
    #[error("{path}: the trace recorded no tests; {why}")]
    NoTests { path: PathBuf, why: String },
    /// `list`: how to list the tests ([`FrontEnd::list_tests`]).
    #[error("{path}: no recorded test matches {filter:?} ({available}); `{list}` lists them")]
    NoTestMatch { path: PathBuf, filter: String, available: String, list: String },
}

/// Load, prune and select several traces. Warnings (damaged streams...) are returned for stderr.
pub fn prepare(dirs: &[PathBuf], opts: &Options) -> Result<(Vec<PreparedTrace>, Vec<String>), PrepareError> {
    let mut warnings = Vec::new();
    // One interner for every trace read here, baselines included: a function is the same id
    // in all of them.
    let mut interner = Interner::default();
    let baseline = match &opts.prune {
        PruneMode::Baseline(b) => {
            let mut base = Baseline::new();
            for d in b {
                let t = load_trace(d, &mut interner, opts.front)?;
                warnings.extend(t.warnings.iter().map(|w| format!("baseline: {w}")));
                for p in &t.processes {
                    for th in &p.threads {
                        base.add(&th.tree);
                    }
                }
            }
            Some(base)
        }
        _ => None,
    };
    let mut loaded = Vec::new();
    let mut spectrum = Spectrum::default();
    for d in dirs {
        let t = load_trace(d, &mut interner, opts.front)?;
        warnings.extend(t.warnings.iter().cloned());
        for p in t.processes.iter().filter(|p| !p.tests.is_empty()) {
            let kinds = crate::testrun::function_kinds(&p.funcs, Path::new(&t.meta.cwd));
            for test in &p.tests {
                if let Some(tree) = p.test_tree(test) {
                    spectrum.add(test.outcome, tree, &kinds);
                    if let Some(lines) = p.test_lines(test).filter(|_| p.meta.lines_per_test) {
                        spectrum.add_lines(test.outcome, tree, &kinds, lines);
                    }
                }
            }
        }
        loaded.push(t);
    }
    let interner = std::sync::Arc::new(interner);
    spectrum.set_interner(interner.clone());
    let spectrum = spectrum.informative().then(|| std::sync::Arc::new(spectrum));
    let mut out = Vec::new();
    for t in loaded {
        let mut p = prepare_one(t, opts, baseline.as_ref())?;
        p.spectrum = spectrum.clone();
        p.interner = interner.clone();
        out.push(p);
    }
    Ok((out, warnings))
}

/// Why a trace came out empty: redo pruning per thread (only on this error path) and let
/// [`crate::empty::explain`] attribute the removals to the rules and options.
fn explain_empty(t: &LoadedTrace, opts: &Options, baseline: Option<&Baseline>, cwd: &Path, pruned: usize) -> String {
    let mut trees: Vec<(&CallTree, CallTree)> = Vec::new();
    for p in &t.processes {
        for th in &p.threads {
            let entry = entry_modules(&th.tree, th.is_main);
            let (tree, _) = match (&opts.prune, baseline) {
                (PruneMode::Baseline(_), Some(b)) => prune_baseline(&th.tree, b),
                (PruneMode::Auto, _) => prune_imports(&th.tree, &entry),
                _ => (th.tree.clone(), 0),
            };
            trees.push((&th.tree, tree));
        }
    }
    let stages: Vec<crate::empty::Stage> = trees.iter().map(|(r, p)| crate::empty::Stage { recorded: r, pruned: p }).collect();
    let prune_option = match opts.prune {
        PruneMode::Off => None,
        _ => Some(opts.front.set(Opt::PruneStartup, "off")),
    };
    crate::empty::explain(&stages, &opts.selection, cwd, pruned, prune_option.as_deref(), opts.front)
}

/// A process's command line for labels: the program by its file name, arguments under the
/// run's directory relative to it, and at most 100 characters; arguments quoted as a shell
/// needs them and control characters escaped ([`escape::command`]).
pub fn short_argv(argv: &[String], cwd: &Path) -> String {
    let mut parts: Vec<String> = Vec::with_capacity(argv.len());
    for (i, a) in argv.iter().enumerate() {
        let p = Path::new(a);
        let shown = if i == 0 && p.is_absolute() {
            p.file_name().map(|n| n.to_string_lossy().into_owned())
        } else {
            p.strip_prefix(cwd).ok().filter(|r| p.is_absolute() && !r.as_os_str().is_empty()).map(|r| r.display().to_string())
        };
        parts.push(shown.unwrap_or_else(|| a.clone()));
    }
    let s = escape::command(&parts);
    if s.chars().count() > 100 {
        let cut: String = s.chars().take(97).collect();
        format!("{cut}...")
    } else {
        s
    }
}

fn prepare_one(t: LoadedTrace, opts: &Options, baseline: Option<&Baseline>) -> Result<PreparedTrace, PrepareError> {
    let cwd = PathBuf::from(&t.meta.cwd);
    let mut notes = Vec::new();
    let mut threads = Vec::new();
    let (mut recorded, mut pruned, mut shown, mut events) = (0usize, 0usize, 0usize, 0u64);
    let nproc = t.processes.len();
    let mut files: Vec<PathBuf> = Vec::new();
    let mut seen_files = HashSet::new();
    let (mut after_prune, mut stdlib_hidden) = (0usize, 0usize);
    let (mut plumbing_removed, mut plumbing_packages) = (0usize, std::collections::BTreeSet::new());
    let all_tests: Vec<(u32, trace_format::TestRun)> =
        t.processes.iter().flat_map(|p| p.tests.iter().map(|x| (p.meta.pid, x.clone()))).collect();
    // What is shown: each thread, or with `--test` each matching test's tree.
    // (pid, test, the subtests shown with it: they ran inside it, in its tree).
    let mut chosen: Vec<(u32, &trace_format::TestRun, Vec<&trace_format::TestRun>)> = Vec::new();
    // The tests the run's end names (see [`PreparedTrace::ended_tests`]): the chosen ones with
    // `--test` (below), else the failing ones.
    let mut ended_tests: Vec<usize> = Vec::new();
    let mut tests_left_out = 0;
    if opts.tests.is_none() {
        ended_tests = (0..all_tests.len()).filter(|&i| all_tests[i].1.outcome.is_failure()).collect();
    }
    let mut invocation_scores: Vec<(String, f64)> = Vec::new();
    if let Some(filter) = &opts.tests {
        if all_tests.is_empty() {
            let why = crate::testrun::why_no_tests(&t.meta.argv, t.meta.exit.as_ref()).unwrap_or_else(|| {
                format!(
                    "`{}` needs a run of pytest, unittest, `cargo test` or a GoogleTest binary (`{}`)",
                    opts.front.name(opts.hints.test_option()),
                    opts.front.record_tests()
                )
            });
            return Err(PrepareError::NoTests { path: t.dir.clone(), why });
        }
        for (at, (p, x)) in t.processes.iter().flat_map(|p| p.tests.iter().map(move |x| (p, x))).enumerate() {
            if let Some(subs) = filter.pick(x) {
                chosen.push((p.meta.pid, x, subs));
                ended_tests.push(at);
            }
        }
        if let Some(max) = opts.max_tests.filter(|&m| chosen.len() > m) {
            let tests: Vec<&trace_format::TestRun> = chosen.iter().map(|c| c.1).collect();
            // The code under test each ran (the runner's, the standard library's and the
            // test files' left out), by function id across processes.
            let mut kinds_of: HashMap<u32, Vec<crate::testrun::FuncKind>> = HashMap::new();
            let code: Vec<rustc_hash::FxHashSet<crate::symbols::FuncId>> = chosen
                .iter()
                .map(|(pid, test, _)| {
                    let Some(p) = t.processes.iter().find(|p| p.meta.pid == *pid) else { return Default::default() };
                    let Some(tree) = p.test_tree(test) else { return Default::default() };
                    let kinds = kinds_of.entry(*pid).or_insert_with(|| crate::testrun::function_kinds(&p.funcs, &cwd));
                    tree.nodes
                        .iter()
                        .skip(1)
                        .map(|n| n.func)
                        .filter(|&f| {
                            kinds.get(f as usize).is_some_and(|k| k.is_code())
                                && !tree.function(f).and_then(|x| x.file.as_deref()).is_some_and(crate::plumbing::is_test_file)
                        })
                        .map(|f| tree.id_of(f))
                        .collect()
                })
                .collect();
            let keep = crate::testrun::cap_tests(&tests, &code, &opts.question_words, max);
            // Those not shown, the failing ones first and said to have failed.
            let mut left: Vec<(bool, String)> = (0..chosen.len())
                .filter(|i| !keep.contains(i))
                .map(|i| {
                    let t = chosen[i].1;
                    let failed = t.outcome.is_failure();
                    (failed, if failed { format!("{} ({})", t.id, t.outcome.name()) } else { t.id.clone() })
                })
                .collect();
            left.sort_by_key(|l| !l.0);
            let left: Vec<String> = left.into_iter().map(|l| l.1).collect();
            let shown: Vec<&str> = keep.iter().map(|&i| chosen[i].1.id.as_str()).collect();
            notes.push(format!(
                "{} of the run match {}; this prompt shows {} ({}: one per way of failing first, the most common first, then the other failing tests, then those that ran the most code the others did not, then those the question names). Not shown: {}. \
                 {} gives another's prompt; `{}` lists them all.",
                crate::testrun::plural(chosen.len(), "test"),
                opts.front.set(opts.hints.test_option(), &filter.text()),
                shown.len(),
                shown.join(", "),
                if left.len() > 10 { format!("{} and {} more", left[..10].join(", "), left.len() - 10) } else { left.join(", ") },
                opts.front.set(opts.hints.test_option(), "ID"),
                opts.front.list_tests(&[t.dir.display().to_string()]),
            ));
            tests_left_out = left.len();
            chosen = keep.iter().map(|&i| chosen[i].clone()).collect();
            ended_tests = keep.iter().map(|&i| ended_tests[i]).collect();
        }
        if chosen.is_empty() {
            let filter = filter.text();
            let available = format!(
                "{}: {}",
                crate::testrun::plural(all_tests.len(), "test"),
                crate::testrun::outcome_counts(all_tests.iter().map(|(_, x)| x))
            );
            let list = opts.front.list_tests(&[t.dir.display().to_string()]);
            return Err(PrepareError::NoTestMatch { path: t.dir.clone(), filter, available, list });
        }
    }
    for p in &t.processes {
        for f in p.funcs.iter() {
            if let Some(file) = &f.file {
                let s = file.to_string_lossy();
                if !s.starts_with('<') && seen_files.insert(file.clone()) {
                    files.push(file.clone());
                }
            }
        }
        let nthreads = p.threads.len();
        let command = short_argv(&p.meta.argv, &cwd);
        let mut units: Vec<(Unit, &crate::fold::ThreadTree, std::borrow::Cow<CallTree>)> = Vec::new();
        if opts.tests.is_some() {
            let kinds = crate::testrun::function_kinds(&p.funcs, &cwd);
            let mut earlier_shown: HashSet<u32> = HashSet::new();
            for (_, test, _) in chosen.iter().filter(|(pid, _, _)| *pid == p.meta.pid) {
                let test: &trace_format::TestRun = test;
                if test.outcome.is_failure() {
                    if let Some(inv) = p.test_invocations(test) {
                        let mut scores: Vec<(String, f64)> =
                            inv.scores().into_iter().filter_map(|(i, s)| Some((p.funcs.get(i as usize)?.key(), s))).collect();
                        scores.sort_by(|a, b| a.0.cmp(&b.0));
                        invocation_scores.extend(scores);
                    }
                }
                let (Some(th), Some(tree)) = (p.threads.iter().find(|th| th.tid == test.tid), p.test_tree(test)) else { continue };
                units.push((Unit::Test(&test.id), th, std::borrow::Cow::Borrowed(tree)));
                for (seq, names, part) in crate::testrun::built_earlier(p, test, &kinds) {
                    let Some(by) = p.tests.iter().find(|x| x.tid == test.tid && x.seq as usize == seq) else { continue };
                    notes.push(format!(
                        "{} may have reused state built earlier, by {}: {} ran there and not in this test (a cache filled on first use, or a fixture computed once; or only a branch this test did not take, which the calls alone cannot tell apart). That part of the earlier test's tree is shown too, with its source.",
                        test.id,
                        by.id,
                        names.join(", ")
                    ));
                    if earlier_shown.insert(by.seq) {
                        units.push((Unit::Earlier(&by.id), th, std::borrow::Cow::Owned(part)));
                    }
                }
            }
        } else {
            units.extend(p.threads.iter().map(|th| (Unit::Thread, th, std::borrow::Cow::Borrowed(&th.tree))));
        }
        for th in &p.threads {
            events += th.info.events;
        }
        for (unit, th, unit_tree) in units {
            let test_label = unit.label();
            let unit_tree: &CallTree = &unit_tree;
            recorded += unit_tree.len();
            let is_main = th.is_main && test_label.is_empty();
            let entry = entry_modules(unit_tree, is_main);
            let (tree, removed) = match (&opts.prune, baseline) {
                (PruneMode::Baseline(_), Some(b)) => prune_baseline(unit_tree, b),
                (PruneMode::Auto, _) => prune_imports(unit_tree, &entry),
                _ => (unit_tree.clone(), 0),
            };
            pruned += removed;
            after_prune += tree.len();
            if opts.selection.hide_stdlib {
                // What `--stdlib` would show: in a test's tree, not the standard library the
                // runner called for its own work, which goes with the runner
                // (`plumbing::splice_runner`); counted, the note told of 642 hidden nodes in a
                // test whose tree `--stdlib` left at the same 4.
                let counted = if !test_label.is_empty() && opts.plumbing.splices_runner(true) {
                    let every: std::collections::HashSet<u32> = (0..tree.funcs.len() as u32).collect();
                    std::borrow::Cow::Owned(crate::plumbing::splice_runner(tree.clone(), &every, &cwd, true))
                } else {
                    std::borrow::Cow::Borrowed(&tree)
                };
                stdlib_hidden += crate::empty::count_origin(&counted, crate::pathclass::Origin::Stdlib);
            }
            // `--no-site-packages` keeps a program that is itself an installed package.
            let program_selection;
            let selection = if opts.selection.hide_site_packages {
                let mut s = opts.selection.clone();
                s.program_packages = crate::select::program_packages(&tree, &entry, &cwd);
                program_selection = s;
                &program_selection
            } else {
                &opts.selection
            };
            // (Each stage takes the tree: one that changes nothing makes no copy.)
            let tree = selection.apply_owned(tree, &cwd);
            let collapsed = opts.plumbing.collapse_owned(tree, &cwd, &entry);
            plumbing_removed += collapsed.removed;
            plumbing_packages.extend(collapsed.packages);
            let mut tree = collapsed.tree;
            if opts.plumbing.splices_runner(!test_label.is_empty()) {
                // A test's tree starts at the test: the runner's lines on the way to it (its
                // per-test protocol, the hook calls) are spliced out, what they led to stays.
                // (A whole run's too for `slice diff`.)
                tree = crate::plumbing::splice_runner(tree, &collapsed.funcs, &cwd, !test_label.is_empty());
            }
            shown += tree.len();
            if tree.is_empty() {
                continue;
            }
            let mut pt = PreparedThread {
                label: String::new(),
                command: command.clone(),
                pid: th.pid,
                tid: th.tid,
                name: th.thread_name.clone(),
                is_main: th.is_main,
                tree,
                entry,
                plumbing: collapsed.funcs,
                times_estimated: p.times_estimated,
                earlier_state: matches!(unit, Unit::Earlier(_)),
                test: matches!(unit, Unit::Test(_)),
            };
            if !test_label.is_empty() {
                pt.label = if nproc > 1 { format!("{test_label} (process {} ({}))", pt.pid, pt.command) } else { test_label };
            } else if nproc > 1 {
                pt.label = pt.full_label();
            } else if nthreads > 1 {
                pt.label = format!("thread {}", pt.thread_name());
            }
            threads.push(pt);
        }
    }
    if recorded == 0 {
        return Err(PrepareError::NoCalls { path: t.dir.clone(), why: no_calls_reason(&t.dir, opts.front), front: opts.front });
    }
    if threads.is_empty() {
        let why = explain_empty(&t, opts, baseline, &cwd, pruned);
        return Err(PrepareError::Empty { path: t.dir.clone(), recorded, pruned, why });
    }
    match &opts.prune {
        PruneMode::Auto if pruned > 0 => notes.push(format!(
            "Start-up pruning (automatic): {pruned} of {recorded} tree nodes were work done while importing modules and are not shown."
        )),
        PruneMode::Baseline(b) => notes.push(format!(
            "Start-up pruning: {pruned} of {recorded} tree nodes also ran at the same place in the baseline run ({}) and are not shown.",
            b.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
        )),
        _ => {}
    }
    notes.extend(crate::empty::stdlib_note(stdlib_hidden, after_prune, shown, opts.front));
    if threads.iter().any(|t| t.times_estimated) {
        notes.push(crate::native::inlined::note(&t.dir));
        let shown_files: HashSet<&Path> = threads
            .iter()
            .flat_map(|th| th.tree.funcs.iter())
            .filter(|f| f.language == Language::Native)
            .filter_map(|f| f.file.as_deref())
            .collect();
        notes.extend(crate::native::inlined::folded_note(&t.dir, &shown_files));
    }
    notes.extend(no_source_notes(&threads, &t.dir));
    let mut compiled: Vec<crate::python::compiled::CompiledPackage> = Vec::new();
    let mut native_ext = false;
    for p in &t.processes {
        native_ext |= p.funcs.iter().any(|f| {
            (f.language == Language::Native || crate::python::mypyc::ran_compiled(f))
                && f.object.as_deref().is_some_and(trace_format::patching::is_extension_module)
        });
        // The files of what ran as Python (not mypyc's functions shown with their source).
        let python_files = || {
            p.funcs
                .iter()
                .filter(|f| f.language == Language::Python && !crate::python::mypyc::ran_compiled(f))
                .filter_map(|f| f.file.as_deref())
        };
        for c in &p.compiled {
            if !compiled.iter().any(|k| k.name == c.name) && crate::python::compiled::mostly_compiled(c, python_files()) {
                compiled.push(c.clone());
            }
        }
    }
    notes.extend(crate::python::compiled::note(&compiled, native_ext, opts.front));
    if opts.plumbing.splices_runner(opts.tests.is_some()) {
        // Where the runner is spliced out, not collapsed: said apart.
        let runners: Vec<String> = plumbing_packages.iter().filter(|p| crate::plumbing::is_test_runner(p)).cloned().collect();
        if !runners.is_empty() {
            notes.push(if opts.tests.is_some() {
                format!(
                    "The test runner ({}) is left out of each test's tree: its calls on the way to the test and its own work (collecting, reporting) are not shown, what it called of the test and the code under test is. `{}` shows it.",
                    runners.join(", "),
                    opts.front.on(Opt::ShowPlumbing)
                )
            } else {
                format!(
                    "The test runner ({}) is left out of the tree: its calls on the way to the tests and its own work (collecting, reporting) are not shown, what it called of the tests and the code under test is. `{}` shows it.",
                    runners.join(", "),
                    opts.front.on(Opt::ShowPlumbing)
                )
            });
            plumbing_packages.retain(|p| !crate::plumbing::is_test_runner(p));
            plumbing_removed = 0;
        }
    }
    if !plumbing_packages.is_empty() {
        let names: Vec<String> = plumbing_packages.into_iter().collect();
        let one = names.len() == 1;
        notes.push(format!(
            "Framework plumbing collapsed: {} only {} control to the program here; {} functions are in the tree without their source{}. `{}` shows {}.",
            names.join(", "),
            if one { "carries" } else { "carry" },
            if one { "its" } else { "their" },
            if plumbing_removed > 0 {
                format!(", and {plumbing_removed} calls inside {} that reached no other code are not shown", if one { "it" } else { "them" })
            } else {
                String::new()
            },
            opts.front.on(Opt::ShowPlumbing),
            if one { "it" } else { "them" }
        ));
    }
    let mut outcome = Vec::new();
    let mut failure_frames = Vec::new();
    if let Some(how) = crate::testrun::failed_exit(t.meta.exit.as_ref()) {
        let tests = if all_tests.is_empty() {
            String::new()
        } else {
            format!(
                " ({}: {})",
                crate::testrun::plural(all_tests.len(), "test"),
                crate::testrun::outcome_counts(all_tests.iter().map(|(_, x)| x))
            )
        };
        outcome.push(format!("The run failed: {how}{tests}."));
    } else if t.meta.exit.is_none() {
        outcome.push(
            "The run did not finish normally: `trace` recorded no exit status (it was killed, or the trace was copied while running)."
                .into(),
        );
    }
    if opts.tests.is_some() {
        let mut shown_failures = crate::testrun::ShownFailures::default();
        for (_, x, subs) in &chosen {
            outcome.extend(
                crate::testrun::outcome_texts(x, subs, &cwd)
                    .into_iter()
                    .zip(std::iter::once(&**x).chain(subs.iter().copied()))
                    .map(|(text, t)| shown_failures.say(&t.id, text)),
            );
            failure_frames.push(crate::testrun::failure_frames(x));
            for s in subs {
                failure_frames.push(crate::testrun::failure_frames(s));
            }
        }
    } else if !ended_tests.is_empty() {
        // The whole run's prompt says what failed too, for the first few failing tests.
        for (_, x) in ended_tests.iter().take(WHOLE_RUN_FAILURES).map(|&i| &all_tests[i]) {
            let subs = crate::testrun::failing_subtests(x);
            outcome.extend(crate::testrun::outcome_texts(x, &subs, &cwd));
            failure_frames.push(crate::testrun::failure_frames(x));
            for s in subs.iter().take(crate::testrun::SHOWN_SUBTESTS) {
                failure_frames.push(crate::testrun::failure_frames(s));
            }
        }
        let failing: Vec<&str> = ended_tests.iter().map(|&i| all_tests[i].1.id.as_str()).collect();
        notes.push(format!(
            "This run ran {} ({}); failing: {}{}. {}",
            crate::testrun::plural(all_tests.len(), "test"),
            crate::testrun::outcome_counts(all_tests.iter().map(|(_, x)| x)),
            failing.iter().take(5).copied().collect::<Vec<_>>().join(", "),
            if failing.len() > 5 { format!(" and {} more", failing.len() - 5) } else { String::new() },
            match opts.hints {
                Hints::Prompt => format!(
                    "`{}` (or `{}`) gives the prompt of the failing tests: their failure first, then only the code each ran.",
                    opts.front.set(Opt::Test, "failed"),
                    opts.front.set(Opt::Test, "ID")
                ),
                Hints::Diff { .. } => format!(
                    "`{}` (each an id, its end, a glob or `failed`) diffs tests' trees instead of the whole runs; `{}` picks the same tests in both.",
                    opts.front.join(&[opts.front.set(Opt::TestA, "ID"), opts.front.set(Opt::TestB, "ID")]),
                    opts.front.set(Opt::Test, "ID")
                ),
            }
        ));
    }
    let sources = SourceCache::new(SourceCache::read_sources_doc(&t.dir), &cwd);
    let tests_coverage = tests_coverage(&t, &chosen, &cwd);
    Ok(PreparedTrace {
        outcome,
        failure_frames,
        invocation_scores,
        tests: all_tests,
        ended_tests,
        spectrum: None,
        interner: Default::default(),
        tests_shown: opts.tests.is_some(),
        tests_left_out,
        front: opts.front,
        dir: t.dir,
        meta: t.meta,
        cwd,
        threads,
        notes,
        sources,
        files_executed: files,
        nodes_recorded: recorded,
        nodes_shown: shown,
        events,
        coverage: t.coverage,
        tests_coverage,
    })
}

/// The lines the `chosen` tests ran, in the files of the code under test (the Python functions
/// that are neither the standard library's nor the test runner's: those the recorder re-arms
/// in each test, shims/python/src/testscope.rs), the other files as the whole run ran them;
/// `None` unless each chosen test's process reported lines per test. A file where a test's
/// recorder stopped reporting a function's lines early keeps the whole run's lines.
fn tests_coverage(
    t: &LoadedTrace,
    chosen: &[(u32, &trace_format::TestRun, Vec<&trace_format::TestRun>)],
    cwd: &Path,
) -> Option<LineCoverage> {
    use crate::testrun::FuncKind;
    if chosen.is_empty() {
        return None;
    }
    let mut files: HashSet<PathBuf> = HashSet::new();
    let mut uncertain: HashSet<PathBuf> = HashSet::new();
    let mut ran: Vec<(PathBuf, u32)> = Vec::new();
    let mut kinds_of: std::collections::HashMap<u32, Vec<FuncKind>> = std::collections::HashMap::new();
    for (pid, test, _) in chosen {
        let p = t.processes.iter().find(|p| p.meta.pid == *pid && p.meta.lines_per_test)?;
        let lines = p.test_lines(test)?;
        let kinds = kinds_of.entry(*pid).or_insert_with(|| {
            let kinds = crate::testrun::function_kinds(&p.funcs, cwd);
            for (f, k) in p.funcs.iter().zip(&kinds) {
                if let (true, Language::Python, Some(file)) = (k.is_code(), f.language, &f.file) {
                    files.insert(file.clone());
                }
            }
            kinds
        });
        for &(func, line) in lines {
            let Some(f) = p.funcs.get(func as usize).filter(|_| kinds.get(func as usize).is_some_and(|k| k.is_code())) else { continue };
            let Some(file) = &f.file else { continue };
            if line == 0 {
                uncertain.insert(file.clone());
            } else {
                ran.push((file.clone(), line));
            }
        }
    }
    files.retain(|f| !uncertain.contains(f));
    Some(t.coverage.with_ran_in(&files, &ran))
}

/// How many failing tests' failures the prompt of a whole test run shows first (`--test failed`
/// shows them all).
const WHOLE_RUN_FAILURES: usize = 3;

/// What a tree of [`prepare_one`] shows: a thread's whole tree, a chosen test's
/// ([`PreparedThread::test`]), or the part of an earlier test's that built state a chosen test
/// reused ([`PreparedThread::earlier_state`]).
enum Unit<'a> {
    Thread,
    Test(&'a str),
    Earlier(&'a str),
}

impl Unit<'_> {
    /// Its label: empty for a thread, `test ID`, `built earlier, in test ID`.
    fn label(&self) -> String {
        match self {
            Unit::Thread => String::new(),
            Unit::Test(id) => format!("test {id}"),
            Unit::Earlier(id) => format!("built earlier, in test {id}"),
        }
    }
}

/// Per native object whose shown functions have no source (no debug information, or none
/// that could be read: the warning on stderr says which; or the object was rebuilt since the
/// run), one note: how many, and what shows their source. In the order the objects first
/// appear. `dir`: the trace directory (its `sources.json` says which objects changed since).
fn no_source_notes(threads: &[PreparedThread], dir: &Path) -> Vec<String> {
    let mut objects: Vec<(String, HashSet<String>)> = Vec::new();
    for th in threads {
        let tree = &th.tree;
        for n in tree.nodes.iter().skip(1) {
            let Some(f) = tree.function(n.func) else { continue };
            let (Language::Native, None, Some(object)) = (f.language, &f.file, &f.object) else { continue };
            // The program's code, and a Rust program's dependencies (their crates told by name:
            // the same fix shows their source).
            if !f.dependency_crate && crate::pathclass::origin(f) != crate::pathclass::Origin::Program {
                continue;
            }
            match objects.iter_mut().find(|(o, _)| o == object) {
                Some((_, names)) => {
                    names.insert(f.qualname.clone());
                }
                None => objects.push((object.clone(), HashSet::from_iter([f.qualname.clone()]))),
            }
        }
    }
    if objects.is_empty() {
        return Vec::new();
    }
    // Objects whose debug information does give other functions their source: there the ones
    // without are code it does not describe, not a build without debug information.
    let described: HashSet<&str> = threads
        .iter()
        .flat_map(|th| th.tree.funcs.iter())
        .filter(|f| f.language == Language::Native && f.file.is_some())
        .filter_map(|f| f.object.as_deref())
        .collect();
    let recorded = crate::source::SourceCache::read_sources_doc(dir);
    objects
        .into_iter()
        .map(|(object, names)| match crate::native::resolve::changed_since_run(Path::new(&object), recorded.as_ref()) {
            Some(why) => rebuilt_note(&object, &why, names.len()),
            None if described.contains(object.as_str()) => undescribed_note(&object, names.len()),
            None => no_source_note(&object, &names),
        })
        .collect()
}

/// The note of [`no_source_notes`] for an object whose debug information describes other
/// functions of it but not these: code linked in without it (the Rust standard library's own
/// dependencies, which its panic backtraces run: `miniz_oxide`, `gimli`, `addr2line`) or that
/// the compiler generated (a test harness's `main`).
fn undescribed_note(object: &str, functions: usize) -> String {
    let file = object.rsplit('/').next().unwrap_or(object);
    format!(
        "No source for {} of `{file}` ({object}): its debug information describes the others but not {}: code linked in \
         without debug information (such as the Rust standard library's own dependencies) or generated by the compiler \
         (a test harness's `main`); {} named from its symbol table only.",
        crate::testrun::plural(functions, "function"),
        if functions == 1 { "this one" } else { "these" },
        if functions == 1 { "it is" } else { "they are" }
    )
}

/// The note of [`no_source_notes`] for an object rebuilt or replaced since the run: its debug
/// information describes other code, so its functions are named by the symbols `trace run`
/// recorded when the run ended.
fn rebuilt_note(object: &str, why: &str, functions: usize) -> String {
    let file = object.rsplit('/').next().unwrap_or(object);
    format!(
        "No source for {} of `{file}` ({object}): it was rebuilt or replaced after the run ({why}), so its debug information \
         describes other code; {} named by the symbols recorded when the run ended. Record the trace again to see the source.",
        crate::testrun::plural(functions, "function"),
        if functions == 1 { "it is" } else { "they are" }
    )
}

/// The note of [`no_source_notes`] for one object and the names of its functions shown
/// without source. A Rust program (its `main` is `<crate>::main`, the crate named as the
/// executable: cargo's convention) is told how cargo builds it with debug information, as
/// `cargo install` does not by default.
fn no_source_note(object: &str, names: &HashSet<String>) -> String {
    let file = object.rsplit('/').next().unwrap_or(object);
    let fix = crate::native::resolve::no_debug_fix(file, |name| names.contains(name));
    format!(
        "No source for {} of `{file}` ({object}): the debug information that maps its code to source lines is missing or could not be read (stderr says which), so {} named from its symbol table only. {fix}",
        crate::testrun::plural(names.len(), "function"),
        if names.len() == 1 { "it is" } else { "they are" }
    )
}

/// A path for display: relative to `cwd` when inside it; installed packages as
/// `site-packages/<path in the package directory>`; the Python standard library as
/// `stdlib/<path>`; Rust's standard library and cargo dependencies as `rust-library/<path>`
/// and `cargo-registry/<package>/<path>`; anything else absolute; `.` and `..` resolved as
/// text (`tests/../pkg/x.py` is `pkg/x.py`). Control characters are
/// escaped ([`escape::line`]): the result is for display only.
pub fn display_path(file: &Path, cwd: &Path) -> String {
    escape::line(&shortened_path(file, cwd)).into_owned()
}

pub(crate) fn shortened_path(file: &Path, cwd: &Path) -> String {
    // `dir/../x.py` as `x.py`: Python names a module by the `sys.path` entry it was found
    // through (a conftest.py adding `tests/..`), which the reader does not need to see.
    let normalized;
    let file = if file.components().any(|c| matches!(c, std::path::Component::ParentDir | std::path::Component::CurDir)) {
        normalized = trace_format::normalize_path(file);
        normalized.as_path()
    } else {
        file
    };
    if let Ok(r) = file.strip_prefix(cwd) {
        if !r.as_os_str().is_empty() {
            return r.display().to_string();
        }
    }
    let s = file.to_string_lossy();
    if let Some(short) = crate::native::paths::native_display_path(&s) {
        return short;
    }
    if let Some((name, i)) = crate::python::paths::packages_dir_end(&s) {
        return format!("{name}/{}", &s[i..]);
    }
    if !s.starts_with('<') {
        if let Some(i) = crate::python::paths::stdlib_dir_end(&s) {
            return format!("stdlib/{}", &s[i..]);
        }
    }
    near_cwd(file, cwd).unwrap_or_else(|| s.into_owned())
}

/// How many directories up from the run's directory a path may be named relative to it.
const NEAR_LEVELS: usize = 2;

/// `file` relative to `cwd` through at most [`NEAR_LEVELS`] `..`, when the two share a
/// directory below the root's children (`/tmp/x`, `/home/u`): a program run from its build
/// directory (`cd build && trace run -- ./app`) or a sibling of its checkout reads
/// `../src/table.c`, as a shell there names it, not `/home/u/proj/src/table.c`.
fn near_cwd(file: &Path, cwd: &Path) -> Option<String> {
    use std::path::Component;
    if !file.is_absolute() || !cwd.is_absolute() {
        return None;
    }
    let (f, c): (Vec<Component>, Vec<Component>) = (file.components().collect(), cwd.components().collect());
    let common = f.iter().zip(&c).take_while(|(a, b)| a == b).count();
    let ups = c.len() - common;
    // The root and one directory under it (`/`, `/tmp`) are no shared project.
    if common < 3 || ups == 0 || ups > NEAR_LEVELS || common >= f.len() {
        return None;
    }
    let rest: PathBuf = f[common..].iter().collect();
    Some(format!("{}{}", "../".repeat(ups), rest.display()))
}

/// Why a trace holds no call: what its processes' `patch.json` say when entry patching
/// patched nothing (a W^X policy refusing `mprotect`), else that the recorder may not have
/// been active; its remedies worded for `front`.
fn no_calls_reason(dir: &Path, front: FrontEnd) -> String {
    let td = trace_format::reader::TraceDir::open_with(dir, trace_format::reader::FuncTables::Count).ok();
    let reports: Vec<trace_format::meta::PatchReport> =
        td.as_ref().map(|td| td.processes.iter().filter_map(|p| p.patch_report().ok().flatten()).collect()).unwrap_or_default();
    let refs: Vec<&trace_format::meta::PatchReport> = reports.iter().collect();
    trace_format::meta::why_nothing(td.as_ref().map(|td| &td.meta), &refs, &front)
}

#[cfg(test)]
mod tests {
    /// A prompt shows five tests, fewer under a small budget: one per 2,000 tokens, at least one.
    #[test]
    fn a_small_budget_shows_fewer_tests() {
        let shown: Vec<usize> = [None, Some(20_000), Some(8000), Some(4000), Some(1200)].into_iter().map(super::prompt_max_tests).collect();
        assert_eq!(shown, [5, 5, 4, 2, 1]);
    }

    use super::*;

    /// A Rust program without debug information is told how cargo builds it with some;
    /// another program, of debug symbols and `-g`.
    #[test]
    fn no_source_notes_say_what_shows_the_source() {
        let names = |n: &[&str]| n.iter().map(|s| s.to_string()).collect::<HashSet<String>>();
        let rust = no_source_note("/root/.cargo/bin/hexyl", &names(&["hexyl::main", "clap_builder::derive::Parser::parse"]));
        assert!(rust.starts_with("No source for 2 functions of `hexyl` (/root/.cargo/bin/hexyl)"), "{rust}");
        assert!(rust.contains("CARGO_PROFILE_RELEASE_DEBUG=1 cargo install --force"), "{rust}");
        assert!(!rust.contains("-dbgsym"), "{rust}");
        let dashed = no_source_note("/x/bin/git-absorb", &names(&["git_absorb::main"]));
        assert!(dashed.contains("Rust program"), "{dashed}");
        let c = no_source_note("/usr/bin/jq", &names(&["main", "jv_parse"]));
        assert!(c.contains("-dbgsym") && !c.contains("cargo"), "{c}");
        // A `main` of another crate does not make it the program's.
        let other = no_source_note("/x/bin/tool", &names(&["clap::main"]));
        assert!(!other.contains("cargo"), "{other}");
    }

    #[test]
    fn display_paths() {
        let cwd = Path::new("/home/u/proj");
        assert_eq!(display_path(Path::new("/home/u/proj/app/x.py"), cwd), "app/x.py");
        assert_eq!(display_path(Path::new("/v/lib/python3.11/site-packages/click/core.py"), cwd), "site-packages/click/core.py");
        assert_eq!(display_path(Path::new("/usr/lib/python3/dist-packages/rich/table.py"), cwd), "dist-packages/rich/table.py");
        assert_eq!(display_path(Path::new("/usr/lib/python3.11/json/decoder.py"), cwd), "stdlib/json/decoder.py");
        assert_eq!(display_path(Path::new("/opt/x.py"), cwd), "/opt/x.py");
        assert_eq!(display_path(Path::new("/home/u/proj/tests/../pkg/./gen.py"), cwd), "pkg/gen.py");
        // Run from a build directory or beside the checkout: named as a shell there names it,
        // two levels up at most; a directory under the root is no shared project.
        let build = Path::new("/home/u/proj/build");
        assert_eq!(display_path(Path::new("/home/u/proj/src/table.c"), build), "../src/table.c");
        assert_eq!(display_path(Path::new("/home/u/other/x.c"), build), "../../other/x.c");
        assert_eq!(display_path(Path::new("/home/v/x.c"), build), "/home/v/x.c");
        assert_eq!(display_path(Path::new("/tmp/trial/cmark/table.c"), Path::new("/tmp/trial/b")), "../cmark/table.c");
        assert_eq!(display_path(Path::new("/tmp/a.c"), Path::new("/tmp/b")), "/tmp/a.c");
        assert_eq!(display_path(Path::new("/home/u/proj/.venv/lib/python3.12/site-packages/x/y.py"), build), "site-packages/x/y.py");
    }
}

#[cfg(test)]
mod label_tests {
    use super::short_argv;
    use std::path::Path;

    #[test]
    fn labels_keep_the_script_name_however_deep_the_checkout() {
        let argv: Vec<String> =
            ["/root/.pyenv/versions/3.11.7/bin/python3", "/a/very/long/checkout/path/of/some/user/examples/python/checksum.py", "x"]
                .iter()
                .map(|s| s.to_string())
                .collect();
        assert_eq!(short_argv(&argv, Path::new("/a/very/long/checkout/path/of/some/user")), "python3 examples/python/checksum.py x");
        assert_eq!(
            short_argv(&argv, Path::new("/elsewhere")),
            "python3 /a/very/long/checkout/path/of/some/user/examples/python/checksum.py x"
        );
        // Quoted as a shell needs it: one command, not `python3 -c import time` then `time.sleep(5)`.
        let c: Vec<String> = ["python3", "-c", "import time; time.sleep(5)"].iter().map(|s| s.to_string()).collect();
        assert_eq!(short_argv(&c, Path::new("/")), "python3 -c 'import time; time.sleep(5)'");
        let long: Vec<String> = vec!["prog".into(), "a".repeat(200)];
        let l = short_argv(&long, Path::new("/"));
        assert!(l.ends_with("...") && l.chars().count() == 100);
    }
}
