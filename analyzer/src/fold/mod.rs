//! Reading a trace directory into call trees: one per thread of every process, folded while
//! the events stream by (memory grows with the tree, never with the number of events).

use crate::calltree::{CallTree, NodeId, TreeBuilder, NO_FUNC, ROOT};
use crate::coverage::LineCoverage;
use crate::frontend::FrontEnd;
use crate::symbols::{resolve_process_with_inlined, Function, Interner, Language, ResolvedProcess};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use trace_format::{Event, FormatError, ProcMeta, ThreadStream, TraceDir, TraceMeta};

/// How the folder treats a function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FoldClass {
    /// An ordinary function: a node.
    Visible,
    /// Not a node: its callees attach to the nearest visible ancestor. Comprehension and
    /// generator-expression frames (their code is part of the enclosing function).
    Transparent,
    /// Python's import machinery (`<frozen importlib._bootstrap>`, `..._bootstrap_external`):
    /// transparent, and the nodes it calls directly are marked [`Node::via_import`].
    ///
    /// [`Node::via_import`]: crate::calltree::Node::via_import
    Import,
    /// The same native function as an earlier id (an instance of one Rust source function:
    /// [`crate::native::resolve`] gives its instances equal [`Function`]s): folded as that id.
    SameAs(u32),
    /// The test recorder's boundary calls (`_slicetrace_test_begin`/`_end` of `trace run`'s
    /// runtime directory): transparent, and where a test's own tree starts and ends
    /// ([`fold_events_with_tests`]).
    TestBegin,
    TestEnd,
}

/// Python comprehension and generator-expression code objects.
pub const COMPREHENSIONS: [&str; 4] = ["<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>"];

/// The fold-time class of a function (see [`FoldClass`]).
pub fn fold_class(f: &Function) -> FoldClass {
    if f.language == Language::Native {
        // GoogleTest's per-test events: where a test's tree starts and ends (testrun::gtest).
        return if f.qualname.starts_with(crate::testrun::gtest::TEST_START) {
            FoldClass::TestBegin
        } else if f.qualname.starts_with(crate::testrun::gtest::TEST_END) {
            FoldClass::TestEnd
        } else {
            FoldClass::Visible
        };
    }
    if f.language != Language::Python {
        return FoldClass::Visible;
    }
    let file = f.file.as_deref().map(|p| p.to_string_lossy()).unwrap_or_default();
    // `trace run`'s own bootstrap (a sitecustomize.py in a temporary `slice-trace-rt-*`
    // directory) is not part of the program.
    if file.contains("/slice-trace-rt-") {
        return match f.name.as_str() {
            "_slicetrace_test_begin" => FoldClass::TestBegin,
            "_slicetrace_test_end" => FoldClass::TestEnd,
            _ => FoldClass::Transparent,
        };
    }
    if file.starts_with("<frozen importlib._bootstrap") {
        FoldClass::Import
    } else if COMPREHENSIONS.contains(&f.name.as_str()) {
        FoldClass::Transparent
    } else {
        FoldClass::Visible
    }
}

/// The fold-time classes of a process's function table: [`fold_class`] of each, and
/// [`FoldClass::SameAs`] for a native function equal to an earlier one with a source file or
/// named by a Rust symbol ([`Function::rust_symbol`]; a C function known only by its name is
/// not merged: two `static` functions of one name in two files are two functions) (and for a mypyc
/// function mapped to the same Python function as an earlier one: a generator's body and its
/// def, [`crate::python::mypyc`]).
pub fn fold_classes(funcs: &[Function]) -> Vec<FoldClass> {
    let mut first: std::collections::HashMap<&Function, u32> = std::collections::HashMap::new();
    funcs
        .iter()
        .enumerate()
        .map(|(i, f)| {
            if (f.language == Language::Native && (f.file.is_some() || f.rust_symbol)) || crate::python::mypyc::ran_compiled(f) {
                let canonical = *first.entry(f).or_insert(i as u32);
                if canonical != i as u32 {
                    return FoldClass::SameAs(canonical);
                }
            }
            fold_class(f)
        })
        .collect()
}

/// What folding one stream found besides the tree.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FoldInfo {
    /// Call and return events read.
    pub events: u64,
    /// Last thread name the stream recorded.
    pub thread_name: Option<String>,
    /// Returns with no open call (ignored).
    pub unmatched_returns: u64,
    /// Calls still open at the end of the stream (closed at its last timestamp).
    pub open_at_end: u64,
    /// The damage that stopped reading early, if any (the events before it were used).
    pub damaged: Option<String>,
    /// Executed source lines the stream reported: (function id, line), in stream order,
    /// repeats possible (see [`crate::coverage`]).
    pub lines: Vec<(u32, u32)>,
    /// The same per test, in the order of the tests' trees ([`fold_events_with_tests`]): the
    /// line events between each test's boundaries (every line the test ran where the process
    /// reported lines per test, `proc.json`'s `lines_per_test`).
    pub test_lines: Vec<Vec<(u32, u32)>>,
    /// Per test, in the order of the tests' trees: the calls its own code made directly
    /// ([`crate::testrun::invocations`]).
    pub test_invocations: Vec<crate::testrun::invocations::Invocations>,
}

#[derive(Clone, Copy)]
struct Frame {
    /// The node the frame's callees attach to: its own node, or for a re-entry the node of the
    /// function's nearest earlier occurrence on the path.
    node: NodeId,
    /// Its own time so far (between events while it was the innermost frame), added to its
    /// node's when it closes.
    own: u64,
    /// Function whose `on_path` count this frame holds, or `u32::MAX` for a transparent frame.
    func: u32,
    /// An import-machinery frame.
    import: bool,
}

/// Fold a sequence of events into a call tree. `classes[id]` gives each function id's
/// [`FoldClass`] (ids past its end are visible).
///
/// **Re-entry** (recursion): a call to a function already on the path from the root adds one
/// to a `↻` marker node under its caller (a leaf: [`Node::recursive`]), and what that call
/// reaches is folded into the function's nearest earlier occurrence on the path, with the usual
/// merging. So the tree stays finite (plain recursion `f → f → f` is `f` with one `f ↻` child),
/// and nothing a re-entered dispatcher calls is hidden: `render → table → render ↻ → cell` shows
/// `cell` under the first `render`. Time follows the calls: the time between two events is the
/// self time of the innermost open frame's node, and a node's time is its own and its
/// subtree's. So a re-entered call's time is counted under the earlier occurrence (its marker
/// has none), the frames between the two occurrences do not count it, also when re-entries
/// nest (pytest's hook caller re-entered from a test's failing assertion, and its `_multicall`
/// inside that), and no node's children take more time than the node.
///
/// [`Node::recursive`]: crate::calltree::Node::recursive
pub fn fold_events<I>(funcs: Arc<Vec<Function>>, classes: &[FoldClass], events: I) -> (CallTree, FoldInfo)
where
    I: IntoIterator<Item = Result<Event, FormatError>>,
{
    let (tree, info, _) = fold_events_with_tests(funcs, classes, events);
    (tree, info)
}

/// [`fold_events`], and besides the thread's tree one tree per test that the thread ran: the
/// calls between the `seq`-th [`FoldClass::TestBegin`] call and the next
/// [`FoldClass::TestEnd`] call (the test recorder's boundaries), folded by the same rules with
/// the calls already open at the boundary (the runner's loop) left out. A test whose end never
/// came (its process died in it) ends with the stream.
pub fn fold_events_with_tests<I>(funcs: Arc<Vec<Function>>, classes: &[FoldClass], events: I) -> (CallTree, FoldInfo, Vec<CallTree>)
where
    I: IntoIterator<Item = Result<Event, FormatError>>,
{
    let mut main = Folder::new(funcs.clone(), classes.len());
    let mut info = FoldInfo::default();
    let mut tests: Vec<CallTree> = Vec::new();
    // The current test's folder: every call goes to it too, and a return closes its innermost
    // frame while it has one (its frames are the top of the thread's stack).
    let mut test: Option<Folder> = None;
    let test_code: Vec<bool> =
        funcs.iter().map(|f| f.language == Language::Python && f.file.as_deref().is_some_and(crate::plumbing::is_test_file)).collect();
    let mut inv = crate::testrun::invocations::InvocationTracker::new(test_code);
    for ev in events {
        match ev {
            Ok(ev @ (Event::Call { func, ts } | Event::Resume { func, ts })) => {
                let resume = matches!(ev, Event::Resume { .. });
                let func = match classes.get(func as usize) {
                    Some(&FoldClass::SameAs(c)) => c,
                    _ => func,
                };
                info.events += 1;
                match classes.get(func as usize) {
                    Some(FoldClass::TestBegin) => {
                        if let Some(t) = test.replace(Folder::new(funcs.clone(), classes.len())) {
                            tests.push(t.finish(ts).0);
                            info.test_invocations.push(inv.take());
                        }
                        info.test_lines.push(Vec::new());
                    }
                    Some(FoldClass::TestEnd) => {
                        if let Some(t) = test.take() {
                            tests.push(t.finish(ts).0);
                            info.test_invocations.push(inv.take());
                        }
                    }
                    _ => {}
                }
                if let Err(e) = main.call(classes, func, ts, resume) {
                    info.damaged = Some(e);
                    break;
                }
                if let Some(t) = &mut test {
                    if !matches!(classes.get(func as usize), Some(FoldClass::TestBegin)) {
                        // Same classes, same id check: it cannot fail where `main` did not.
                        let _ = t.call(classes, func, ts, resume);
                        // The frame just pushed (a transparent one is no call of its own);
                        // the nearest visible one below it is its caller.
                        if let Some(f) = t.stack.last().filter(|f| f.func != u32::MAX) {
                            let idx = t.stack.len() - 1;
                            let parent = t.stack[..idx].iter().rposition(|g| g.func != u32::MAX);
                            inv.call(f.func, idx, parent);
                        }
                    }
                }
            }
            Ok(Event::Return { ts }) => {
                info.events += 1;
                if let Some(t) = &mut test {
                    if !t.stack.is_empty() {
                        inv.ret(t.stack.len() - 1);
                        t.ret(ts);
                    }
                }
                if !main.ret(ts) {
                    info.unmatched_returns += 1;
                }
            }
            Ok(Event::ThreadName(n)) => info.thread_name = Some(n),
            Ok(Event::Line { func, line }) => {
                info.lines.push((func, line));
                if test.is_some() {
                    if let Some(l) = info.test_lines.last_mut() {
                        l.push((func, line));
                    }
                }
            }
            Err(e) => {
                info.damaged = Some(e.to_string());
                break;
            }
        }
    }
    let end = main.last_ts;
    if let Some(t) = test.take() {
        tests.push(t.finish(end).0);
        info.test_invocations.push(inv.finish());
    }
    let (tree, open) = main.finish(end);
    info.open_at_end = open;
    (tree, info, tests)
}

/// The folding state of one tree: the builder, the open frames, how often each function is on
/// the path (see [`fold_events`] for the rules).
struct Folder {
    b: TreeBuilder,
    stack: Vec<Frame>,
    on_path: Vec<u32>,
    last_ts: u64,
}

impl Folder {
    fn new(funcs: Arc<Vec<Function>>, nfuncs: usize) -> Folder {
        Folder { b: TreeBuilder::new(funcs), stack: Vec::with_capacity(256), on_path: vec![0; nfuncs], last_ts: 0 }
    }

    /// A call (or resume) of `func` (already mapped through [`FoldClass::SameAs`]). Err: the
    /// id is far beyond the function table (damage).
    fn call(&mut self, classes: &[FoldClass], func: u32, ts: u64, resume: bool) -> Result<(), String> {
        self.tick(ts);
        let (cur, in_import) = match self.stack.last() {
            Some(f) => (f.node, f.import),
            None => (ROOT, false),
        };
        let transparent = |import| Frame { node: cur, own: 0, func: u32::MAX, import };
        match classes.get(func as usize) {
            Some(FoldClass::Transparent | FoldClass::TestBegin | FoldClass::TestEnd) => {
                self.stack.push(transparent(false));
                return Ok(());
            }
            Some(FoldClass::Import) => {
                self.stack.push(transparent(true));
                return Ok(());
            }
            _ => {}
        }
        let fi = func as usize;
        if fi >= self.on_path.len() {
            // An id past the function table (its record was lost) grows the table a
            // little; one far past it is damage, not a reason to allocate gigabytes.
            if fi > classes.len() + trace_format::reader::FUNC_ID_SLACK {
                return Err(format!("function id {func} is far beyond the function table ({} records)", classes.len()));
            }
            self.on_path.resize(fi + 1, 0);
        }
        let earlier = if self.on_path[fi] > 0 { self.stack.iter().rev().find(|f| f.func == func).map(|f| f.node) } else { None };
        let n = match earlier {
            // Resuming the function whose frame is the innermost open one (a mypyc generator's
            // body run while the call that made the generator is still open): its node, not a
            // recursion.
            Some(e) if resume && e == cur && self.stack.last().is_some_and(|f| f.func == func) => cur,
            Some(_) => self.b.marker(cur, func),
            None => self.b.child(cur, func),
        };
        let node = self.b.node_mut(n);
        node.via_import |= in_import;
        if resume {
            node.resumes += 1;
        } else {
            node.count += 1;
        }
        self.on_path[fi] += 1;
        self.stack.push(Frame { node: earlier.unwrap_or(n), own: 0, func, import: false });
        Ok(())
    }

    /// The time since the last event is the innermost open frame's node's own (a transparent
    /// frame's is its caller's, a re-entry's the earlier occurrence's); none before the first
    /// frame of the tree (a test's tree starts inside the runner's loop).
    #[inline]
    fn tick(&mut self, ts: u64) {
        if let Some(f) = self.stack.last_mut() {
            f.own += ts.saturating_sub(self.last_ts);
        }
        self.last_ts = ts;
    }

    /// A return: closes the innermost frame; false when none was open.
    fn ret(&mut self, ts: u64) -> bool {
        self.tick(ts);
        match self.stack.pop() {
            Some(f) => {
                close_frame(f, &mut self.b, &mut self.on_path);
                true
            }
            None => false,
        }
    }

    /// Close the frames still open at `ts`; the tree and how many calls were open. Each
    /// node's time becomes its own and its subtree's.
    fn finish(mut self, ts: u64) -> (CallTree, u64) {
        self.tick(ts);
        let mut open = 0;
        while let Some(f) = self.stack.pop() {
            if f.func != u32::MAX {
                open += 1;
            }
            close_frame(f, &mut self.b, &mut self.on_path);
        }
        let mut tree = self.b.finish();
        // Children come after their parent.
        for id in (1..tree.nodes.len()).rev() {
            let (parent, t) = (tree.nodes[id].parent, tree.nodes[id].time_ns);
            if parent != ROOT {
                tree.nodes[parent as usize].time_ns += t;
            }
        }
        (tree, open)
    }
}

/// Account for the end of frame `f` (already popped from the stack).
#[inline]
fn close_frame(f: Frame, b: &mut TreeBuilder, on_path: &mut [u32]) {
    if f.func != u32::MAX {
        on_path[f.func as usize] -= 1;
    }
    if f.node != ROOT {
        b.node_mut(f.node).time_ns += f.own;
    }
}

/// One thread's tree, with what identifies the thread.
#[derive(Debug, Clone)]
pub struct ThreadTree {
    pub pid: u32,
    pub tid: u64,
    pub thread_name: Option<String>,
    /// The process's main thread (tid == pid).
    pub is_main: bool,
    pub tree: CallTree,
    pub info: FoldInfo,
    pub stream: PathBuf,
    /// One tree per test the thread ran, in order ([`fold_events_with_tests`]): the `seq`-th
    /// is the test whose [`trace_format::TestRun`] has this `tid` and that `seq`.
    pub tests: Vec<CallTree>,
}

/// One traced process: its functions and its threads' trees (main thread first).
#[derive(Debug, Clone)]
pub struct ProcessTrees {
    pub meta: ProcMeta,
    pub funcs: Arc<Vec<Function>>,
    pub threads: Vec<ThreadTree>,
    /// Its times are estimated, not measured: entry patching records no returns
    /// ([`trace_format::reader::Process::times_estimated`]).
    pub times_estimated: bool,
    /// The tests its test runner ran (`tests.jsonl`), in start order.
    pub tests: Vec<trace_format::TestRun>,
    /// Python packages it ran as compiled extension code (`extensions.json`).
    pub compiled: Vec<crate::python::compiled::CompiledPackage>,
}

impl ProcessTrees {
    /// The tree of a test of this process: from the stream of its thread, its `seq`-th.
    pub fn test_tree(&self, t: &trace_format::TestRun) -> Option<&CallTree> {
        self.threads.iter().find(|th| th.tid == t.tid)?.tests.get(t.seq as usize)
    }

    /// The calls a test's own code made directly ([`FoldInfo::test_invocations`]).
    pub fn test_invocations(&self, t: &trace_format::TestRun) -> Option<&crate::testrun::invocations::Invocations> {
        self.threads.iter().find(|th| th.tid == t.tid)?.info.test_invocations.get(t.seq as usize)
    }

    /// The line events between a test's boundaries ([`FoldInfo::test_lines`]).
    pub fn test_lines(&self, t: &trace_format::TestRun) -> Option<&[(u32, u32)]> {
        self.threads.iter().find(|th| th.tid == t.tid)?.info.test_lines.get(t.seq as usize).map(|v| &v[..])
    }
}

/// A trace directory read into trees.
#[derive(Debug, Clone)]
pub struct LoadedTrace {
    pub dir: PathBuf,
    pub meta: TraceMeta,
    /// Processes in start order.
    pub processes: Vec<ProcessTrees>,
    /// Things the user should know (damaged stream tails, unresolved functions), for stderr.
    pub warnings: Vec<String>,
    /// Which source lines ran (empty when no process recorded lines).
    pub coverage: LineCoverage,
}

/// Errors loading a trace. `front`: who reads it, which names how to record a trace
/// ([`FrontEnd::recorder`], the trace format's remedies through [`trace_format::RecordHint`]).
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{}", .error.message(.front))]
    Format { error: FormatError, front: FrontEnd },
    /// `why`: [`trace_format::meta::why_nothing`] from meta.json (what the target was).
    #[error("{path}: the trace recorded no process ({why}); record it again with {}", .front.recorder())]
    NoProcess { path: PathBuf, why: String, front: FrontEnd },
    #[error("{path}: the run was stopped (signal {signal}) before the program was started: nothing was recorded; record it again with {}", .front.recorder())]
    StoppedBeforeStart { path: PathBuf, signal: i32, front: FrontEnd },
}

/// Open a trace directory and fold every thread stream; the functions of its trees get their
/// [`crate::symbols::FuncId`]s in `interner` (one for all the traces a command reads). `front`:
/// who reads the errors ([`LoadError`]).
pub fn load_trace(dir: &Path, interner: &mut Interner, front: FrontEnd) -> Result<LoadedTrace, LoadError> {
    // Only the records the streams use are kept (and resolved, renumbered densely): a table
    // of any size costs what ran.
    let td = TraceDir::open_with(dir, trace_format::reader::FuncTables::Used).map_err(|error| LoadError::Format { error, front })?;
    if td.processes.is_empty() {
        // `trace` was asked to stop before it started the program (meta.json's `stopped`
        // without an exit status): say so, not that the shim failed.
        if let (Some(st), None) = (&td.meta.stopped, &td.meta.exit) {
            return Err(LoadError::StoppedBeforeStart { path: dir.to_path_buf(), signal: st.signal, front });
        }
        let why = trace_format::meta::why_nothing(Some(&td.meta), &[], &front);
        return Err(LoadError::NoProcess { path: dir.to_path_buf(), why, front });
    }
    let mut warnings = td.warnings.clone();
    let mut processes = Vec::new();
    let mut coverage = LineCoverage::default();
    for p in &td.processes {
        let mut resolved = resolve_process_with_inlined(p);
        warnings.append(&mut resolved.warnings);
        let funcs = Arc::new(std::mem::take(&mut resolved.funcs));
        let classes = fold_classes(&funcs);
        let mut threads = Vec::new();
        let mut lines = Vec::new();
        for s in &p.threads {
            let mut t = fold_stream(&funcs, &classes, &resolved, s).map_err(|error| LoadError::Format { error, front })?;
            if let Some(d) = &t.info.damaged {
                warnings.push(format!("{d} (damaged stream tail)"));
            }
            lines.append(&mut t.info.lines);
            threads.push(t);
        }
        intern_trees(interner, &funcs, &mut threads);
        coverage.add_process(p.funcs.iter(), |id| resolved.ids.get(&id).copied(), &funcs, lines);
        let tests = match trace_format::testrun::read_tests(&p.dir) {
            Ok(doc) => {
                if doc.bad_lines > 0 {
                    warnings.push(format!(
                        "{}: {} damaged lines were skipped",
                        p.dir.join(trace_format::testrun::TESTS_FILE).display(),
                        doc.bad_lines
                    ));
                }
                if doc.bad_subtests > 0 {
                    warnings.push(format!(
                        "{}: {} damaged subtests were skipped",
                        p.dir.join(trace_format::testrun::TESTS_FILE).display(),
                        doc.bad_subtests
                    ));
                }
                doc.tests
            }
            Err(e) => {
                warnings.push(format!("{}: cannot read it: {e}", p.dir.join(trace_format::testrun::TESTS_FILE).display()));
                Vec::new()
            }
        };
        let compiled = match p.extensions() {
            Ok(doc) => doc.map(|d| crate::python::compiled::compiled_packages(&d)).unwrap_or_default(),
            Err(e) => {
                warnings.push(format!("{e}, ignored"));
                Vec::new()
            }
        };
        let mut trees = ProcessTrees { meta: p.meta.clone(), funcs, threads, times_estimated: p.times_estimated(), tests, compiled };
        crate::testrun::gtest::read(&p.dir, &mut trees, &mut warnings);
        crate::testrun::libtest::read_from_trees(&p.dir, &mut trees);
        processes.push(trees);
    }
    crate::native::lines::add_native_lines(dir, td.processes.iter().map(|p| p.dir.as_path()), &mut coverage, &mut warnings);
    Ok(LoadedTrace { dir: dir.to_path_buf(), meta: td.meta, processes, warnings, coverage })
}

/// Give the trees of a process's threads (and of their tests) the ids of its functions.
fn intern_trees(interner: &mut Interner, funcs: &[Function], threads: &mut [ThreadTree]) {
    // The indices the nodes use may pass the table's end (a record lost: `Function::unknown`).
    let trees = || threads.iter().flat_map(|t| std::iter::once(&t.tree).chain(&t.tests));
    let used = trees().flat_map(|t| t.nodes[1..].iter().filter(|n| n.func != NO_FUNC).map(|n| n.func as usize + 1)).max().unwrap_or(0);
    let ids = Arc::new(interner.intern_table(funcs, used.max(funcs.len())));
    for t in threads.iter_mut() {
        t.tree.ids = ids.clone();
        for test in &mut t.tests {
            test.ids = ids.clone();
        }
    }
}

fn fold_stream(
    funcs: &Arc<Vec<Function>>,
    classes: &[FoldClass],
    resolved: &ResolvedProcess,
    s: &ThreadStream,
) -> Result<ThreadTree, FormatError> {
    // The stream's own calls and returns, counted as read: the inlined functions' frames that
    // `with_inlined` adds are not events of the stream.
    let read = std::cell::Cell::new(0u64);
    // Recorded ids to the indices into `funcs`, before anything looks a function up.
    let iter = s.events()?.map(|ev| {
        if matches!(ev, Ok(Event::Call { .. } | Event::Resume { .. } | Event::Return { .. })) {
            read.set(read.get() + 1);
        }
        ev.map(|ev| resolved.renumber(ev))
    });
    // Most processes have no inline probe and no call made by inlined code: their events are
    // folded as they are read.
    let (tree, mut info, tests) = if !funcs.iter().any(|f| f.inlined) {
        fold_events_with_tests(funcs.clone(), classes, iter)
    } else {
        fold_events_with_tests(funcs.clone(), classes, with_inlined(iter, &funcs[..], &resolved.chains, &resolved.wraps))
    };
    info.events = read.get();
    Ok(ThreadTree {
        tests,
        pid: s.header.pid,
        tid: s.header.tid,
        thread_name: info.thread_name.clone(),
        is_main: s.header.tid == s.header.pid as u64,
        tree,
        info,
        stream: s.path.clone(),
    })
}

/// The events of a process with inline probes: each probe's call is inlined code that ran,
/// not a call that took time, so its return gets the call's time (what the shim spent
/// recording it stays with the caller); and the probe's chain of inlined functions
/// ([`crate::symbols::ResolvedProcess::chains`]) is opened before the probe's call and closed
/// with its return, so that every level of inlined code that ran is a node. A call that
/// inlined code of the innermost open function made ([`crate::symbols::ResolvedProcess::wraps`])
/// gets that inlined code's chain opened before it and closed with its return: the chain's
/// nodes take the call's time.
///
/// A level of a chain that is the function of the level right above it (the frame it runs
/// in, or the open call's) is that function's own code, not a call: GCC at `-O2` describes
/// some inlined functions as an instance of themselves inside their inlined instance (and an
/// out-of-line function as holding one of itself), which showed as `incr_table_row_count
/// [inlined]` under itself, "recursive". Such a level opens no node ([`same_function`]).
fn with_inlined<'a, I>(
    events: I,
    funcs: &'a [Function],
    chains: &'a HashMap<u32, Vec<u32>>,
    wraps: &'a HashMap<(u32, u32), u32>,
) -> impl Iterator<Item = Result<Event, FormatError>> + 'a
where
    I: IntoIterator<Item = Result<Event, FormatError>> + 'a,
{
    // For each open call: its function, the innermost frame it opened (or the one it runs in,
    // when it opened none), how many frames its return closes, and for an inline probe's, the
    // time of its call.
    let mut open: Vec<(u32, u32, usize, Option<u64>)> = Vec::new();
    let chain = move |inner: u32| chains.get(&inner).map_or(&[][..], |c| c.as_slice());
    let same =
        move |a: u32, b: u32| a == b || matches!((funcs.get(a as usize), funcs.get(b as usize)), (Some(x), Some(y)) if same_function(x, y));
    // The frames of `levels` that open a node under `top`: each one not the function above it.
    let frames = move |top: Option<u32>, levels: &mut dyn Iterator<Item = u32>| -> Vec<u32> {
        let mut out: Vec<u32> = Vec::new();
        for f in levels {
            if !out.last().copied().or(top).is_some_and(|above| same(above, f)) {
                out.push(f);
            }
        }
        out
    };
    events.into_iter().flat_map(move |ev| -> Vec<Result<Event, FormatError>> {
        let top = open.last().map(|&(_, inner, ..)| inner);
        match ev {
            Ok(Event::Call { func, ts }) if funcs.get(func as usize).is_some_and(|f| f.inlined) => {
                let opened = frames(top, &mut chain(func).iter().copied().chain([func]));
                open.push((func, opened.last().copied().or(top).unwrap_or(func), opened.len(), Some(ts)));
                opened.into_iter().map(|f| Ok(Event::Call { func: f, ts })).collect()
            }
            Ok(Event::Call { func, ts }) => {
                let made_by = open.last().and_then(|&(caller, ..)| wraps.get(&(caller, func))).copied();
                let Some(inner) = made_by else {
                    open.push((func, func, 1, None));
                    return vec![ev];
                };
                let mut opened = frames(top, &mut chain(inner).iter().copied().chain([inner]));
                opened.push(func);
                open.push((func, func, opened.len(), None));
                opened.into_iter().map(|f| Ok(Event::Call { func: f, ts })).collect()
            }
            Ok(Event::Resume { func, .. }) => {
                open.push((func, func, 1, None));
                vec![ev]
            }
            Ok(Event::Return { ts }) => {
                let (_, _, n, at) = open.pop().unwrap_or((u32::MAX, u32::MAX, 1, None));
                let ts = at.unwrap_or(ts);
                (0..n).map(|_| Ok(Event::Return { ts })).collect()
            }
            other => vec![other],
        }
    })
}

/// Whether two function records are one function of the source (an inlined instance's
/// record and the out-of-line function's, or two instances'): the same name, file and first
/// line.
fn same_function(a: &Function, b: &Function) -> bool {
    a.qualname == b.qualname && a.file == b.file && a.first_line == b.first_line
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod bench;
