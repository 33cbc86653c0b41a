//! `slice diff`: the differential slice of two runs, for "works here, fails there" questions.
//!
//! Each run's threads are merged into one tree ([`super::merge`]); the two trees are then laid
//! over each other by call path. A path is the sequence of functions from a thread's first
//! call down to a node, each function named by its *diff key*: the source file relative to
//! the run's working directory (or the native object's file name) and the qualified name, so the
//! same function matches in both runs even when the traces number functions differently, the
//! runs were made from different checkouts, or lines moved. A node is then in both runs, only
//! in A, or only in B; every path below a one-sided node is one-sided too.
//!
//! The text shows the one-sided nodes, under the callers both runs share (for context), like a
//! unified diff: `-` only in run A, `+` only in run B.

use super::{func_of, location, merge};
use crate::analysis::{display_path, PreparedTrace};
use crate::calltree::{CallTree, NodeId, ROOT};
use crate::frontend::{FrontEnd, Opt};
use crate::prompt::{fence_for, DocSource, Layout, Model, ModelNode, ModelTrace, Order, Plan};
use crate::symbols::{FuncId, Function};
use std::collections::HashMap;
use std::path::Path;
use trace_format::escape;

/// Which runs reached a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Both,
    OnlyA,
    OnlyB,
}

/// A node of the union of the two trees.
#[derive(Debug, Clone)]
pub struct DiffNode {
    pub parent: usize,
    pub children: Vec<usize>,
    pub depth: u32,
    /// The diff key (see the module docs).
    pub key: String,
    /// The diff key's number in the union: nodes of one function in either run have the same.
    pub key_id: u32,
    /// The function, from run A when A reached it, else from run B.
    pub func: Function,
    /// Its [`FuncId`] in the interner of the run it comes from: (run B, id).
    pub func_id: (bool, FuncId),
    /// Display location (`file:line`).
    pub location: String,
    pub count_a: u64,
    pub count_b: u64,
    pub recursive: bool,
}

impl DiffNode {
    pub fn side(&self) -> Side {
        match (self.count_a > 0, self.count_b > 0) {
            (true, false) => Side::OnlyA,
            (false, true) => Side::OnlyB,
            _ => Side::Both,
        }
    }
}

/// A function reached by one run only.
#[derive(Debug, Clone, PartialEq)]
pub struct OneSided {
    pub qualname: String,
    pub location: String,
    pub calls: u64,
    /// Its Ochiai score when the traces hold failing and passing tests
    /// ([`crate::testrun::Spectrum`]): the lists are sorted by it, highest first.
    pub ochiai: Option<f64>,
    /// Its function key ([`Function::key`]).
    pub key: String,
}

/// The two runs laid over each other.
#[derive(Debug, Clone)]
pub struct Diff {
    /// Node 0 is the root.
    pub nodes: Vec<DiffNode>,
    /// Functions that only run A reached anywhere, in call order.
    pub funcs_only_a: Vec<OneSided>,
    pub funcs_only_b: Vec<OneSided>,
    /// Whether a node's subtree holds a one-sided node (what the views show).
    pub shown: Vec<bool>,
}

/// The diff key of a function: file relative to the run's directory, and qualified name.
pub fn diff_key(f: &Function, cwd: &Path) -> String {
    match (&f.file, &f.object) {
        (Some(p), _) => format!("{}::{}", display_path(p, cwd), f.qualname),
        (None, Some(o)) => format!("{}::{}", o.rsplit('/').next().unwrap_or(o), f.qualname),
        (None, None) => f.qualname.clone(),
    }
}

/// Lay two trees (each a whole run, see [`super::merge`]) over each other.
pub fn diff(a: &CallTree, cwd_a: &Path, b: &CallTree, cwd_b: &Path) -> Diff {
    let root = DiffNode {
        parent: 0,
        children: Vec::new(),
        depth: 0,
        key: String::new(),
        key_id: u32::MAX,
        func: func_of(a, ROOT),
        func_id: (false, FuncId::NONE),
        location: String::new(),
        count_a: 0,
        count_b: 0,
        recursive: false,
    };
    let mut nodes = vec![root];
    // Diff keys are formatted once per function of each run and numbered: the union matches
    // numbers, and a function's diff key is built (and its `Function` copied) once per union
    // node at most.
    let mut key_ids: HashMap<String, u32> = HashMap::new();
    let mut index: HashMap<(usize, u32), usize> = HashMap::new();
    for (side_b, t, cwd) in [(false, a, cwd_a), (true, b, cwd_b)] {
        let mut at: Vec<usize> = vec![0; t.nodes.len()];
        let mut key_of: HashMap<FuncId, u32> = HashMap::new();
        for n in t.preorder() {
            let node = t.node(n);
            let key_id = *key_of.entry(t.func_id(n)).or_insert_with(|| {
                let next = key_ids.len() as u32;
                *key_ids.entry(diff_key(&func_of(t, n), cwd)).or_insert(next)
            });
            let parent = at[node.parent as usize];
            let d = *index.entry((parent, key_id)).or_insert_with(|| {
                let id = nodes.len();
                let depth = nodes[parent].depth + 1;
                let f = func_of(t, n);
                let location = location(&f, cwd);
                nodes.push(DiffNode {
                    parent,
                    children: Vec::new(),
                    depth,
                    key: diff_key(&f, cwd),
                    key_id,
                    func: f,
                    func_id: (side_b, t.func_id(n)),
                    location,
                    count_a: 0,
                    count_b: 0,
                    recursive: false,
                });
                nodes[parent].children.push(id);
                id
            });
            at[n as usize] = d;
            let dn = &mut nodes[d];
            if side_b {
                dn.count_b += node.count;
            } else {
                dn.count_a += node.count;
            }
            dn.recursive |= node.recursive;
        }
    }
    // A node is shown when it or something below it is one-sided (children have larger ids).
    let mut shown = vec![false; nodes.len()];
    for i in (1..nodes.len()).rev() {
        if nodes[i].side() != Side::Both {
            shown[i] = true;
        }
        if shown[i] {
            shown[nodes[i].parent] = true;
        }
    }
    // Calls per function (by diff key) in each run.
    let mut seen: Vec<(u64, u64)> = vec![(0, 0); key_ids.len()];
    for n in &nodes[1..] {
        let e = &mut seen[n.key_id as usize];
        e.0 += n.count_a;
        e.1 += n.count_b;
    }
    let mut funcs_only_a = Vec::new();
    let mut funcs_only_b = Vec::new();
    let mut listed = vec![false; key_ids.len()];
    for i in preorder(&nodes) {
        let n = &nodes[i];
        let (ca, cb) = seen[n.key_id as usize];
        if (ca == 0 || cb == 0) && !std::mem::replace(&mut listed[n.key_id as usize], true) {
            let one = OneSided {
                qualname: n.func.qualname.clone(),
                location: n.location.clone(),
                calls: ca + cb,
                ochiai: None,
                key: n.func.key(),
            };
            if cb == 0 {
                funcs_only_a.push(one);
            } else {
                funcs_only_b.push(one);
            }
        }
    }
    Diff { nodes, funcs_only_a, funcs_only_b, shown }
}

fn preorder(nodes: &[DiffNode]) -> Vec<usize> {
    let mut out = Vec::with_capacity(nodes.len());
    let mut stack: Vec<usize> = nodes[0].children.iter().rev().copied().collect();
    while let Some(n) = stack.pop() {
        out.push(n);
        stack.extend(nodes[n].children.iter().rev().copied());
    }
    out
}

impl Diff {
    /// Nodes shown, in call order (run A's order first, then what only B called).
    pub fn shown_preorder(&self) -> Vec<usize> {
        preorder(&self.nodes).into_iter().filter(|&n| self.shown[n]).collect()
    }

    /// Number of one-sided nodes per side: (only in A, only in B).
    pub fn counts(&self) -> (usize, usize) {
        let a = self.nodes[1..].iter().filter(|n| n.side() == Side::OnlyA).count();
        let b = self.nodes[1..].iter().filter(|n| n.side() == Side::OnlyB).count();
        (a, b)
    }

    /// Whether the runs reached exactly the same call paths.
    pub fn is_empty(&self) -> bool {
        self.counts() == (0, 0)
    }

    /// A both-sides node from which the runs call different functions.
    pub fn is_divergence(&self, n: usize) -> bool {
        self.nodes[n].side() == Side::Both && self.nodes[n].children.iter().any(|&c| self.nodes[c].side() != Side::Both)
    }

    /// The tree lines: `(marker, text)` where the marker is `-`, `+` or ` `.
    pub fn lines(&self) -> Vec<(char, String)> {
        self.shown_preorder()
            .into_iter()
            .map(|i| {
                let n = &self.nodes[i];
                let marker = match n.side() {
                    Side::Both => ' ',
                    Side::OnlyA => '-',
                    Side::OnlyB => '+',
                };
                let mut s = format!(
                    "{}{}{}",
                    "  ".repeat(super::indent_levels(n.depth)),
                    super::depth_mark(n.depth),
                    escape::line(&n.func.qualname)
                );
                if !n.location.is_empty() {
                    s.push_str(&format!("  ({})", n.location));
                }
                let count = n.count_a + n.count_b;
                if n.side() != Side::Both && count > 1 {
                    s.push_str(&format!(" ×{count}"));
                }
                if n.recursive {
                    s.push_str(" ↻ recursive");
                }
                (marker, s)
            })
            .collect()
    }

    /// The tree as unified-diff text.
    pub fn text(&self) -> String {
        self.lines().into_iter().map(|(m, s)| format!("{m} {s}\n")).collect()
    }
}

/// Diff two prepared runs: every thread of each run merged. With tests in both runs'
/// trees (`--test`), the two are lined up by the code under test: the runner's functions and
/// the test files' are spliced out (their callees move up), so that two different tests'
/// calls into the same code meet at the same paths. With a spectrum (failing and passing
/// tests in the runs), the functions only one run reached are sorted by their Ochiai score.
pub fn diff_traces(a: &PreparedTrace, b: &PreparedTrace) -> Diff {
    let align = a.tests_shown && b.tests_shown;
    let tree = |t: &PreparedTrace| {
        let merged = merge(t.threads.iter().filter(|th| !th.earlier_state).map(|th| &th.tree));
        if align {
            code_under_test(&merged, &t.cwd)
        } else {
            merged
        }
    };
    let mut d = diff(&tree(a), &a.cwd, &tree(b), &b.cwd);
    if let Some(s) = a.spectrum.as_ref().or(b.spectrum.as_ref()) {
        for v in [&mut d.funcs_only_a, &mut d.funcs_only_b] {
            for f in v.iter_mut() {
                f.ochiai = Some(s.id(&f.key).map_or(0.0, |id| s.ochiai(id)));
            }
            // Stable: call order among equal scores.
            v.sort_by(|x, y| y.ochiai.unwrap_or(0.0).total_cmp(&x.ochiai.unwrap_or(0.0)));
        }
    }
    d
}

/// A tree with the test runner's functions and the test files' spliced out.
fn code_under_test(t: &CallTree, cwd: &Path) -> CallTree {
    let kinds = crate::testrun::function_kinds(&t.funcs, cwd);
    t.rebuild(|t, n| {
        let func = t.node(n).func;
        let runner = kinds.get(func as usize) == Some(&crate::testrun::FuncKind::Runner);
        let test_file = t.function(func).and_then(|f| f.file.as_deref()).is_some_and(crate::plumbing::is_test_file);
        if runner || test_file {
            crate::calltree::Keep::Splice
        } else {
            crate::calltree::Keep::Keep
        }
    })
}

/// The differential slice as a Markdown prompt section: the question (if any), the differing
/// paths, the functions only one run reached, and the source of the functions where the runs
/// part ways and of those on the differing paths, extracted by the prompt's source machinery
/// (`traces`: run A then run B, as given to [`diff_traces`]).
/// The budget of a diff prompt ([`prompt_within`]).
#[derive(Debug, Clone, Copy)]
pub struct DiffBudget {
    pub tokens: usize,
    pub tokenizer: crate::tokens::Tokenizer,
    /// The command line's default, not one the caller chose: the prompt says so.
    pub by_default: bool,
}

pub fn prompt(question: Option<&str>, d: &Diff, traces: &mut [PreparedTrace]) -> String {
    prompt_within(question, d, traces, None).unwrap_or_else(|e| e.to_string())
}

/// A diff prompt that does not fit its budget even with every source dropped and the paths cut.
#[derive(Debug, thiserror::Error)]
#[error(
    "{} {budget} is too small for this diff: without any source, with one line of call paths and no names of functions only one run reached it takes {needed} tokens ({tokenizer}); raise {} or narrow it with {}",
    .front.name(Opt::Budget), .front.name(Opt::Budget), .front.name(Opt::Focus)
)]
pub struct DiffTooSmall {
    pub budget: usize,
    pub needed: usize,
    pub tokenizer: &'static str,
    /// Who reads it: how it names the options.
    pub front: FrontEnd,
}

/// [`prompt`] within a budget: the sources kept most relevant first (by the prompt's ranking:
/// the spectrum, then the question) beside a share of the call paths and of the lists of
/// functions only one run reached, then the paths and the lists cut from the end to what is
/// left, each cut said.
pub fn prompt_within(
    question: Option<&str>,
    d: &Diff,
    traces: &mut [PreparedTrace],
    budget: Option<DiffBudget>,
) -> Result<String, DiffTooSmall> {
    let cmd = |t: &PreparedTrace| trace_format::escape::command(&t.meta.argv);
    let (cmd_a, cmd_b) = (cmd(&traces[0]), cmd(&traces[1]));
    let (dir_a, dir_b) = (traces[0].dir.display().to_string(), traces[1].dir.display().to_string());
    let model = Model::build(question.unwrap_or(""), traces);
    // Sources: divergence points and one-sided nodes, in call order, each function once.
    let mut nodes = Vec::new();
    // The callers of the points where the runs part ways: what they passed decides the split.
    let callers: std::collections::HashSet<usize> =
        d.shown_preorder().into_iter().filter(|&i| d.is_divergence(i)).map(|i| d.nodes[i].parent).filter(|&p| p != 0).collect();
    for i in d.shown_preorder() {
        let n = &d.nodes[i];
        if n.side() == Side::Both && !d.is_divergence(i) && !callers.contains(&i) {
            continue;
        }
        let Some(func) = model.func_of_trace(n.func_id.0 as usize, n.func_id.1) else { continue };
        nodes.push(ModelNode {
            id: i as NodeId,
            parent: n.parent as NodeId,
            depth: n.depth,
            func,
            count: n.count_a + n.count_b,
            resumes: 0,
            time_ns: 0,
            recursive: n.recursive,
            descendants: 0,
            inlined: n.func.inlined,
        });
    }
    let why: HashMap<crate::prompt::FuncId, &str> = d
        .shown_preorder()
        .into_iter()
        .filter_map(|i| {
            let n = &d.nodes[i];
            let why = match n.side() {
                Side::OnlyA => "only run A reached it here",
                Side::OnlyB => "only run B reached it here",
                Side::Both if d.is_divergence(i) => "both runs; from here they call different functions",
                Side::Both => "both runs; it calls where they part ways",
            };
            Some((model.func_of_trace(n.func_id.0 as usize, n.func_id.1)?, why))
        })
        .rev()
        .collect();
    let restricted = Model {
        question: model.question.clone(),
        traces: vec![ModelTrace::one_thread(
            format!("{dir_a} vs {dir_b}"),
            format!("{cmd_a} vs {cmd_b}"),
            traces[0].meta.cwd.clone(),
            nodes,
        )],
        funcs: model.funcs.clone(),
        notes: model.notes.clone(),
        tests_shown: model.tests_shown,
        front: model.front,
        budget_by_default: false,
        analysis_ids: Default::default(),
    };
    let layout = Layout { tree: false, sources: true, order: Order::Call, repeat: false };
    let doc = restricted.doc(layout, &Plan::default());
    let sources: Vec<DocSource> = doc.traces.into_iter().flat_map(|t| t.sources).collect();

    let tree_lines: Vec<String> = d.text().lines().map(str::to_string).collect();
    let relevance = |s: &DocSource| restricted.funcs.get(s.func).map_or(0.0, |f| f.relevance);
    // Least relevant first: the order sources are dropped in.
    let mut drop_order: Vec<usize> = (0..sources.len()).collect();
    drop_order.sort_by(|&x, &y| relevance(&sources[x]).total_cmp(&relevance(&sources[y])).then(y.cmp(&x)));
    let render = |kept: &[bool], tree_keep: usize, list_keep: usize| -> String {
        // Most relevant first (the reverse of the order they were dropped in).
        let dropped: Vec<&str> = drop_order.iter().rev().filter(|&&i| !kept[i]).map(|&i| sources[i].qualname.as_str()).collect();
        let mut tree: String = tree_lines[..tree_keep].iter().map(|l| format!("{l}\n")).collect();
        if tree_keep < tree_lines.len() {
            tree.push_str(&format!("… {} more lines of call paths left out to fit the budget\n", tree_lines.len() - tree_keep));
        }
        let mut notes = doc.notes.clone();
        if !dropped.is_empty() {
            notes.push(dropped_note(&dropped, budget, restricted.tests_shown));
        }
        let shown: Vec<&DocSource> = sources.iter().zip(kept).filter(|(_, k)| **k).map(|(s, _)| s).collect();
        write_prompt(question, &cmd_a, &cmd_b, d, &tree, &notes, &shown, &why, list_keep)
    };
    let all = tree_lines.len();
    // The longer of the two lists of functions only one run reached: `list_keep` caps each.
    let listed = d.funcs_only_a.len().max(d.funcs_only_b.len());
    let text = render(&vec![true; sources.len()], all, listed);
    let Some(DiffBudget { tokens: budget, tokenizer: tok, .. }) = budget else { return Ok(text) };
    let within = |t: &str, limit: usize| tok.count(t) <= limit;
    if within(&text, budget) {
        return Ok(text);
    }
    // The largest count in `lo..=hi` for which `ok` holds (`lo` if none does): `ok` holds up to
    // some count and not after (more lines of paths or more sources only add text).
    let largest = |mut lo: usize, mut hi: usize, ok: &dyn Fn(usize) -> bool| {
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            if ok(mid) {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        lo
    };
    let first = 1usize.min(all);
    let none = vec![false; sources.len()];
    // 1. The lists of functions only one run reached take at most a quarter of what the budget
    //    leaves beside the rest of the prompt while there are sources to show (half when there
    //    are none), and the call paths at most half while there are sources: a diff of two
    //    large runs has thousands of lines of paths and of names, which would leave no source.
    let fixed = tok.count(&render(&none, first, 0));
    let share = |parts: usize| fixed + budget.saturating_sub(fixed) / parts;
    let list_share = share(if sources.is_empty() { 2 } else { 4 });
    let mut list_keep = listed;
    if !within(&render(&none, first, listed), list_share) {
        list_keep = largest(0, listed, &|k| within(&render(&none, first, k), list_share));
    }
    let mut tree_keep = all;
    if !sources.is_empty() && !within(&render(&none, all, list_keep), share(2)) {
        tree_keep = largest(first, all, &|k| within(&render(&none, k, list_keep), share(2)));
    }
    // 2. The sources, most relevant first, each taken when its block fits the room left by
    //    its own count (one large block, a module's, does not keep the smaller ones after it
    //    out); then the largest part of that choice, in the same order, that fits for real.
    let base = tok.count(&render(&none, tree_keep, list_keep));
    let mut left = budget.saturating_sub(base);
    let mut chosen: Vec<usize> = Vec::new();
    for &i in drop_order.iter().rev() {
        let cost = tok.count(&source_block(&sources[i], why.get(&sources[i].func).copied().unwrap_or("")));
        if cost <= left {
            left -= cost;
            chosen.push(i);
        }
    }
    let kept_of = |m: usize| {
        let mut kept = vec![false; sources.len()];
        for &i in &chosen[..m] {
            kept[i] = true;
        }
        kept
    };
    let kept = kept_of(largest(0, chosen.len(), &|m| m == 0 || within(&render(&kept_of(m), tree_keep, list_keep), budget)));
    // 3. The paths: as many lines as fit beside those sources (more than half of the budget
    //    when the sources left room; fewer when even no source leaves too little); then the
    //    lists, as many names as fit beside both (at least what step 1 gave them, unless even
    //    no source leaves too little).
    let tree_keep = largest(first, all, &|k| within(&render(&kept, k, list_keep), budget));
    let list_keep = if within(&render(&kept, tree_keep, list_keep), budget) {
        largest(list_keep, listed, &|k| within(&render(&kept, tree_keep, k), budget))
    } else {
        largest(0, list_keep, &|k| within(&render(&kept, tree_keep, k), budget))
    };
    let text = render(&kept, tree_keep, list_keep);
    if within(&text, budget) {
        Ok(text)
    } else {
        Err(DiffTooSmall { budget, needed: tok.count(&text), tokenizer: tok.name(), front: model.front })
    }
}

/// The note of a diff prompt whose budget dropped sources (`dropped`: most relevant first):
/// how many, the most relevant of them by name (as `slice from-trace`'s notes name them: a
/// run's diff can drop a thousand), and, when the budget is the command line's default, that
/// it is and how to turn it off.
fn dropped_note(dropped: &[&str], budget: Option<DiffBudget>, tests_shown: bool) -> String {
    let of = match budget {
        Some(b) if b.by_default => {
            format!(" of {} tokens ({}{})", b.tokens, b.tokenizer.name(), crate::prompt::budget::default_budget_words(tests_shown))
        }
        _ => String::new(),
    };
    let names = crate::prompt::budget::list_of(dropped.iter().copied(), dropped.len(), crate::prompt::budget::NOTE_NAMES);
    format!("To fit the budget{of}, the source of {} is not shown: {names}.", crate::testrun::plural(dropped.len(), "function"))
}

/// The diff prompt's text (see [`prompt`]).
#[allow(clippy::too_many_arguments)]
fn write_prompt(
    question: Option<&str>,
    cmd_a: &str,
    cmd_b: &str,
    d: &Diff,
    tree: &str,
    notes: &[String],
    sources: &[&DocSource],
    why: &HashMap<crate::prompt::FuncId, &str>,
    list_keep: usize,
) -> String {
    let fence = fence_for(&[tree]);
    let mut s = String::new();
    if let Some(q) = question.map(str::trim).filter(|q| !q.is_empty()) {
        s.push_str(&format!("# Question\n\n{q}\n\n"));
    }
    s.push_str("# Differential slice\n\n");
    s.push_str(&format!(
        "The program was run twice and both runs were recorded. Run A: {}. Run B: {}.\n",
        escape::code_span(cmd_a),
        escape::code_span(cmd_b)
    ));
    s.push_str(
        "Below are the call paths that only one of the runs reached (each line a function that ran, indented under its caller; \
`-`: only in run A, `+`: only in run B; unmarked lines are callers both runs share, shown for context), the functions \
only one run reached at all, and the source code of the functions where the runs part ways and of the functions on \
the differing paths, in call order.\n",
    );
    for n in notes {
        s.push_str(&format!("\n> {}\n", escape::line(n)));
    }
    s.push_str("\n## Call paths only in one run\n\n");
    if d.is_empty() {
        s.push_str("Both runs reached exactly the same call paths.\n");
    } else {
        s.push_str(&format!("{fence}diff\n{tree}{fence}\n"));
    }
    s.push_str("\n## Functions reached by only one run\n\n");
    let list = |v: &[OneSided]| -> String {
        if v.is_empty() {
            return "none".to_string();
        }
        let mut names: Vec<String> = v
            .iter()
            .take(list_keep)
            .map(|f| match f.ochiai.filter(|o| *o > 0.0) {
                Some(o) => format!("{} ({}; Ochiai {o:.2})", escape::code_span(&f.qualname), escape::line(&f.location)),
                None => format!("{} ({})", escape::code_span(&f.qualname), escape::line(&f.location)),
            })
            .collect();
        if v.len() > names.len() {
            let more = v.len() - names.len();
            names.push(if names.is_empty() {
                format!("{} (left out to fit the budget)", crate::testrun::plural(more, "function"))
            } else {
                format!("and {more} more (left out to fit the budget)")
            });
        }
        names.join(", ")
    };
    let ranked = if d.funcs_only_a.iter().chain(&d.funcs_only_b).any(|f| f.ochiai.is_some()) {
        " (most associated with failing tests first)"
    } else {
        ""
    };
    s.push_str(&format!("- Only in run A{ranked}: {}\n", list(&d.funcs_only_a)));
    s.push_str(&format!("- Only in run B{ranked}: {}\n", list(&d.funcs_only_b)));
    if !sources.is_empty() {
        s.push_str("\n## Source code\n");
        for src in sources {
            s.push_str(&source_block(src, why.get(&src.func).copied().unwrap_or("")));
        }
    }
    s
}

/// A source of the diff prompt: its heading (with `why` the runs reach it), note and code.
fn source_block(src: &DocSource, why: &str) -> String {
    let lines = match (src.first_line, src.last_line) {
        (Some(a), Some(b)) => format!(":{a}-{b}"),
        (Some(a), None) => format!(":{a}"),
        _ => String::new(),
    };
    let mut s = format!("\n#### {} ({}{lines}): {why}\n", escape::code_span(&src.qualname), escape::line(&src.file));
    if let Some(note) = &src.note {
        s.push_str(&format!("\n_{}_\n", escape::line(note)));
    }
    if let Some(code) = &src.code {
        s.push_str(&format!("\n{}{}\n{}\n{}\n", src.fence, escape::line(&src.lang), escape::block(code), src.fence));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{Ev::C, Ev::R};
    use crate::views::tests::tree_of;

    /// The note of dropped sources says the budget only when it is the default, with how to
    /// turn it off.
    #[test]
    fn a_default_budget_is_said_in_the_dropped_sources_note() {
        let b = |by_default| Some(DiffBudget { tokens: 20_000, tokenizer: crate::tokens::Tokenizer::O200kBase, by_default });
        assert_eq!(dropped_note(&["f", "g"], b(false), true), "To fit the budget, the source of 2 functions is not shown: `f`, `g`.");
        assert_eq!(
            dropped_note(&["f"], b(true), true),
            "To fit the budget of 20000 tokens (o200k_base; a test's prompt gets this budget by default, `--no-budget` shows \
             every function), the source of 1 function is not shown: `f`."
        );
        // A thousand dropped: the first ten named, the rest counted.
        let many: Vec<String> = (0..1000).map(|i| format!("f{i}")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        assert_eq!(
            dropped_note(&many, b(false), false),
            "To fit the budget, the source of 1000 functions is not shown: `f0`, `f1`, `f2`, `f3`, `f4`, `f5`, `f6`, `f7`, `f8`, \
             `f9` and 990 more."
        );
    }

    #[test]
    fn one_sided_paths_and_functions() {
        // A: main -> parse -> emojize ; main -> log
        // B: main -> read_file -> parse ; main -> log      (different function ids, other cwd)
        let a = tree_of(
            &["main", "parse", "emojize", "log"],
            &["/a/app.py", "/a/app.py", "/a/emoji.py", "/a/app.py"],
            &[C(0), C(1), C(2), R, R, C(3), R, R],
        );
        let b = tree_of(
            &["log", "main", "read_file", "parse"],
            &["/b/app.py", "/b/app.py", "/b/app.py", "/b/app.py"],
            &[C(1), C(2), C(3), R, R, C(0), R, R],
        );
        let d = diff(&a, Path::new("/a"), &b, Path::new("/b"));
        assert_eq!(d.counts(), (2, 2));
        let text = d.text();
        assert_eq!(
            text,
            "  main  (app.py:1)\n\
             -   parse  (app.py:1)\n\
             -     emojize  (emoji.py:1)\n\
             +   read_file  (app.py:1)\n\
             +     parse  (app.py:1)\n"
        );
        // parse ran in both runs (at different paths): not a one-sided function.
        let names = |v: &[OneSided]| v.iter().map(|f| f.qualname.clone()).collect::<Vec<_>>();
        assert_eq!(names(&d.funcs_only_a), vec!["emojize"]);
        assert_eq!(names(&d.funcs_only_b), vec!["read_file"]);
        let main = d.shown_preorder()[0];
        assert!(d.is_divergence(main));
    }

    #[test]
    fn identical_runs_have_no_difference() {
        let evs = [C(0), C(1), R, R];
        let a = tree_of(&["main", "f"], &["/a/m.py", "/a/m.py"], &evs);
        let b = tree_of(&["main", "f"], &["/a/m.py", "/a/m.py"], &evs);
        let d = diff(&a, Path::new("/a"), &b, Path::new("/a"));
        assert!(d.is_empty());
        assert_eq!(d.text(), "");
        assert!(d.funcs_only_a.is_empty() && d.funcs_only_b.is_empty());
    }
}
