//! Views of a run for people, on the same folded (pruned, selected) call trees the prompts use:
//! a terminal tree ([`tree`]), folded stacks and flamegraphs ([`folded`], [`flamegraph`]), the
//! differential slice of two runs ([`diff`]) and the function-level call graph ([`graph`]).
//!
//! Every view starts from [`crate::analysis::prepare`], which folds the event streams while
//! reading them (memory grows with the tree, not with the number of events), and turns its
//! threads into [`View`]s: one per thread, or one for the whole run ([`Threads::Merged`]).

pub mod diff;
pub mod export;
pub mod flamegraph;
pub mod folded;
pub mod graph;
pub mod test_rows;
pub mod tree;

use crate::analysis::{display_path, short_argv, PreparedTrace};
use crate::calltree::{CallTree, NodeId, TreeBuilder, NO_FUNC, ROOT};
use crate::symbols::{FuncId, Function};
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use trace_format::escape;

/// How the threads of a run are shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Threads {
    /// One tree per thread (of every process), each under a header naming it.
    #[default]
    Separate,
    /// One tree for the whole run: the threads' trees merged by call path (same function
    /// under the same path: one node, counts and times added).
    Merged,
}

/// One tree to show, with what it is.
#[derive(Debug, Clone)]
pub struct View {
    /// e.g. `process 123 (python3 app.py), thread MainThread`, or `all 5 threads of 2 processes`.
    pub label: String,
    /// A short name for a flamegraph's thread frame: `MainThread [pid 123]`.
    pub frame: String,
    pub tree: CallTree,
    /// Its times are estimated, not measured (entry patching records no returns: a call ends
    /// when a later call starts at or above its frame). Views that show time say so.
    pub times_estimated: bool,
}

impl View {
    /// A view of measured times.
    pub fn new(label: impl Into<String>, frame: impl Into<String>, tree: CallTree) -> View {
        View { label: label.into(), frame: frame.into(), tree, times_estimated: false }
    }
}

/// What a view showing times says of estimated ones: once, after the times.
pub const TIMES_ESTIMATED: &str =
    "times estimated: entry patching records no returns, a call ends when the next call at or above its frame starts";

/// The views of a prepared trace.
pub fn views(trace: &PreparedTrace, mode: Threads) -> Vec<View> {
    match mode {
        Threads::Separate => trace
            .threads
            .iter()
            .map(|th| View {
                // A test's tree, or the part of an earlier test's that built state it used:
                // named so (`test tests/x.py::test_a`, `built earlier, in test ...`), then
                // where it ran.
                label: if th.test || th.earlier_state {
                    let label = th.label.split(" (process ").next().unwrap_or(&th.label);
                    format!("{label}: {}", th.full_label())
                } else {
                    th.full_label()
                },
                frame: format!("{} [pid {}]", th.thread_name(), th.pid),
                tree: th.tree.clone(),
                times_estimated: th.times_estimated,
            })
            .collect(),
        Threads::Merged => {
            let argv = short_argv(&trace.meta.argv, &trace.cwd);
            let mut pids: Vec<u32> = trace.threads.iter().map(|t| t.pid).collect();
            pids.sort_unstable();
            pids.dedup();
            let n = trace.threads.len();
            let label = match (n, pids.len()) {
                (1, _) => format!("process {} ({argv}), the one thread", pids[0]),
                (_, 1) => format!("process {} ({argv}), all {n} threads merged", pids[0]),
                (_, p) => format!("{argv}: all {n} threads of {p} processes merged"),
            };
            vec![View {
                label,
                frame: "all threads".into(),
                tree: merge(trace.threads.iter().map(|t| &t.tree)),
                times_estimated: trace.threads.iter().any(|t| t.times_estimated),
            }]
        }
    }
}

/// Merge call trees (possibly over different function tables) into one, by call path: the
/// functions are matched by [`FuncId`], and nodes with the same path merge (counts and times
/// added). The folding rules still hold: every merged path is a path of one of the trees.
pub fn merge<'a>(trees: impl IntoIterator<Item = &'a CallTree>) -> CallTree {
    let trees: Vec<&CallTree> = trees.into_iter().collect();
    let mut table: Vec<Function> = Vec::new();
    let mut ids: Vec<FuncId> = Vec::new();
    let mut index: HashMap<FuncId, u32> = HashMap::new();
    let mut remaps: Vec<HashMap<u32, u32>> = Vec::with_capacity(trees.len());
    for t in &trees {
        let mut remap = HashMap::new();
        for n in &t.nodes[1..] {
            if remap.contains_key(&n.func) {
                continue;
            }
            let id = *index.entry(t.id_of(n.func)).or_insert_with(|| {
                table.push(t.function(n.func).cloned().unwrap_or_else(|| Function::unknown(n.func)));
                ids.push(t.id_of(n.func));
                (table.len() - 1) as u32
            });
            remap.insert(n.func, id);
        }
        remaps.push(remap);
    }
    let mut b = TreeBuilder::new(Arc::new(table));
    b.tree.ids = Arc::new(ids);
    for (t, remap) in trees.iter().zip(&remaps) {
        let mut stack: Vec<(NodeId, NodeId)> = t.node(ROOT).children.iter().rev().map(|&c| (c, ROOT)).collect();
        while let Some((src, parent)) = stack.pop() {
            let n = t.node(src);
            let d = b.node_like(parent, remap.get(&n.func).copied().unwrap_or(NO_FUNC), n.recursive);
            let dn = b.node_mut(d);
            dn.count += n.count;
            dn.resumes += n.resumes;
            dn.time_ns += n.time_ns;
            dn.via_import |= n.via_import;
            stack.extend(n.children.iter().rev().map(|&c| (c, d)));
        }
    }
    b.finish()
}

/// Deepest level a text tree indents (the terminal tree, the prompt's tree, the diff's paths,
/// the MCP answers): a node deeper than this is drawn without indentation, its depth written
/// before its name ([`depth_mark`]). So a line's length does not grow with the tree's depth (a
/// 200,000-deep chain would otherwise be tens of gigabytes of indentation, and tokenizing long
/// runs of spaces is slow too).
pub const MAX_INDENT: u32 = 100;

/// Indentation levels of a node at `depth` (1: a root call, no indentation): `depth - 1` up
/// to [`MAX_INDENT`], none below.
pub fn indent_levels(depth: u32) -> usize {
    let levels = depth.saturating_sub(1);
    if levels > MAX_INDENT {
        0
    } else {
        levels as usize
    }
}

/// What a node deeper than [`MAX_INDENT`] levels shows before its name: `[depth N] `; empty
/// for the others.
pub fn depth_mark(depth: u32) -> String {
    if depth.saturating_sub(1) > MAX_INDENT {
        format!("[depth {depth}] ")
    } else {
        String::new()
    }
}

/// The function of a node, or a placeholder for an id missing from the table.
pub fn func_of(tree: &CallTree, n: NodeId) -> Function {
    let id = tree.node(n).func;
    tree.function(id).cloned().unwrap_or_else(|| Function::unknown(id))
}

/// Self time of a node: its inclusive time less its children's (never negative).
pub fn self_time(tree: &CallTree, n: NodeId) -> u64 {
    let node = tree.node(n);
    let children: u64 = node.children.iter().map(|&c| tree.node(c).time_ns).sum();
    node.time_ns.saturating_sub(children)
}

/// Total time of a tree: the inclusive times of its top-level calls.
pub fn total_time(tree: &CallTree) -> u64 {
    tree.node(ROOT).children.iter().map(|&c| tree.node(c).time_ns).sum()
}

/// Total number of calls of a tree: the sum of its nodes' call counts, inlined functions' left out.
pub fn total_calls(tree: &CallTree) -> u64 {
    // (An inlined function is not called: its count is of the probes that fired and the calls
    // its code made.)
    (1..tree.nodes.len()).filter(|&n| !tree.func(n as _).is_some_and(|f| f.inlined)).map(|n| tree.nodes[n].count).sum()
}

/// Where a function is defined, for display: `file:line` (relative to `cwd` when inside it),
/// the native object's file name, or nothing. Control characters escaped ([`escape::line`]).
pub fn location(f: &Function, cwd: &Path) -> String {
    match (&f.file, &f.object) {
        (Some(p), _) => match f.first_line {
            Some(l) => format!("{}:{l}", display_path(p, cwd)),
            None => display_path(p, cwd),
        },
        (None, Some(o)) => escape::line(o.rsplit('/').next().unwrap_or(o)).into_owned(),
        (None, None) => String::new(),
    }
}

/// Display names of functions, unique per function: the qualified name, followed by the
/// location (`name (file:line)`) when two different functions share that qualified name;
/// control characters escaped ([`escape::line`]).
#[derive(Debug, Clone, Default)]
pub struct FrameNames {
    by_id: HashMap<FuncId, String>,
}

impl FrameNames {
    /// Names for every function that appears in the trees.
    pub fn new<'a>(trees: impl IntoIterator<Item = &'a CallTree>, cwd: &Path) -> FrameNames {
        let mut funcs: HashMap<FuncId, Function> = HashMap::new();
        for t in trees {
            for n in 1..t.nodes.len() {
                funcs.entry(t.func_id(n as NodeId)).or_insert_with(|| func_of(t, n as NodeId));
            }
        }
        let mut per_name: HashMap<&str, usize> = HashMap::new();
        for f in funcs.values() {
            *per_name.entry(f.qualname.as_str()).or_default() += 1;
        }
        let by_id = funcs
            .iter()
            .map(|(&id, f)| {
                let loc = location(f, cwd);
                let name = if per_name[f.qualname.as_str()] > 1 && !loc.is_empty() {
                    format!("{} ({loc})", escape::line(&f.qualname))
                } else {
                    escape::line(&f.qualname).into_owned()
                };
                (id, name)
            })
            .collect();
        FrameNames { by_id }
    }

    /// The name of the function of node `n` of `tree` (its escaped qualified name if it was
    /// not seen by [`FrameNames::new`]).
    pub fn name(&self, tree: &CallTree, n: NodeId) -> std::borrow::Cow<'_, str> {
        match self.by_id.get(&tree.func_id(n)) {
            Some(name) => std::borrow::Cow::Borrowed(name),
            None => std::borrow::Cow::Owned(escape::line(&func_of(tree, n).qualname).into_owned()),
        }
    }
}

/// A duration in human units: `850 ns`, `12.3 µs`, `4.56 ms`, `1.23 s`.
pub fn human_ns(ns: u64) -> String {
    let x = ns as f64;
    if ns < 1_000 {
        format!("{ns} ns")
    } else if ns < 1_000_000 {
        format!("{} µs", three_digits(x / 1e3))
    } else if ns < 1_000_000_000 {
        format!("{} ms", three_digits(x / 1e6))
    } else {
        format!("{} s", three_digits(x / 1e9))
    }
}

/// Three significant digits for a value in [1, 1000).
fn three_digits(v: f64) -> String {
    if v < 10.0 {
        format!("{v:.2}")
    } else if v < 100.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.0}")
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::fold::{fold_class, fold_events, FoldClass};
    use crate::testutil::{py_funcs, Ev, Ev::C, Ev::R};

    pub(crate) fn tree_of(names: &[&str], files: &[&str], evs: &[Ev]) -> CallTree {
        let mut funcs = py_funcs(names);
        for (f, file) in funcs.iter_mut().zip(files) {
            f.file = Some(file.into());
            f.first_line = Some(1);
        }
        tree_with(funcs, evs)
    }

    /// The tree of `evs` over the function table `funcs`.
    pub(crate) fn tree_with(funcs: Vec<Function>, evs: &[Ev]) -> CallTree {
        let funcs = Arc::new(funcs);
        let classes: Vec<FoldClass> = funcs.iter().map(fold_class).collect();
        crate::testutil::interned(fold_events(funcs, &classes, Ev::events(evs)).0)
    }

    fn show(t: &CallTree) -> Vec<String> {
        t.preorder()
            .iter()
            .map(|&n| format!("{}{} x{}", "  ".repeat(t.node(n).depth as usize - 1), t.func(n).unwrap().qualname, t.node(n).count))
            .collect()
    }

    #[test]
    fn merge_matches_functions_by_key_across_tables() {
        // Two threads with different function tables (ids differ), same functions.
        let a = tree_of(&["main", "work"], &["/p/a.py", "/p/a.py"], &[C(0), C(1), R, C(1), R, R]);
        let b = tree_of(&["work", "main", "other"], &["/p/a.py", "/p/a.py", "/p/b.py"], &[C(1), C(0), R, C(2), R, R]);
        let m = merge([&a, &b]);
        assert_eq!(show(&m), vec!["main x2", "  work x3", "  other x1"]);
        assert_eq!(total_calls(&m), total_calls(&a) + total_calls(&b));
    }

    #[test]
    fn frame_names_disambiguate_shared_qualnames_only() {
        let t = tree_of(&["main", "helper", "helper"], &["/p/a.py", "/p/a.py", "/p/b.py"], &[C(0), C(1), R, C(2), R, R]);
        let names = FrameNames::new([&t], Path::new("/p"));
        let got: Vec<String> = t.preorder().iter().map(|&n| names.name(&t, n).into_owned()).collect();
        assert_eq!(got, vec!["main", "helper (a.py:1)", "helper (b.py:1)"]);
    }

    #[test]
    fn self_time_and_units() {
        let t = tree_of(&["a", "b"], &["/p/a.py", "/p/a.py"], &[C(0), C(1), R, R]);
        let a = t.preorder()[0];
        assert_eq!(self_time(&t, a), t.node(a).time_ns - t.node(t.preorder()[1]).time_ns);
        assert_eq!(human_ns(850), "850 ns");
        assert_eq!(human_ns(12_345), "12.3 µs");
        assert_eq!(human_ns(4_560_000), "4.56 ms");
        assert_eq!(human_ns(123_000_000_000), "123 s");
    }
}
