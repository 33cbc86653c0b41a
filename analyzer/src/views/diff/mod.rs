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

pub mod ends;
mod lines;
mod prompt;

pub use lines::{LineChange, LineDiff};
pub use prompt::{prompt, prompt_within, DiffBudget, DiffTooSmall};

use super::{func_of, location, merge};
use crate::analysis::{display_path, PreparedTrace};
use crate::calltree::{CallTree, ROOT};
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
    /// The functions both runs reached whose lines ran differently ([`lines`]), in call order;
    /// `None` when they cannot be told (and for trees diffed without their traces): then
    /// `lines_note` says why.
    pub lines: Option<Vec<LineDiff>>,
    pub lines_note: Option<String>,
    /// Files that differ between the runs of which a run's copy cannot be read: the functions
    /// in them are not compared ([`lines::Unread`]).
    pub unread: Vec<lines::Unread>,
}

/// The diff key of a function: file relative to the run's directory, and qualified name; a
/// native function's object (its file name) and qualified name, with or without a source
/// file: a run of an object rebuilt since names its functions by the symbols recorded when
/// the run ended, without their files, and they are the same functions as the new run's.
pub fn diff_key(f: &Function, cwd: &Path) -> String {
    match (&f.file, &f.object) {
        (_, Some(o)) if f.language == crate::symbols::Language::Native => {
            format!("{}::{}", o.rsplit('/').next().unwrap_or(o), f.qualname)
        }
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
    Diff { nodes, funcs_only_a, funcs_only_b, shown, lines: None, lines_note: None, unread: Vec::new() }
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
pub fn diff_traces(a: &mut PreparedTrace, b: &mut PreparedTrace) -> Diff {
    let align = a.tests_shown && b.tests_shown;
    let tree = |t: &PreparedTrace| {
        let merged = merge(t.threads.iter().filter(|th| !th.earlier_state).map(|th| &th.tree));
        if align {
            code_under_test(&merged, &t.cwd)
        } else {
            merged
        }
    };
    let (ta, tb) = (tree(a), tree(b));
    let mut d = diff(&ta, &a.cwd, &tb, &b.cwd);
    // Lines are recorded per run: they are a test's only in a run of one test, or where the
    // run recorded lines per test (`trace run --lines-per-test`).
    let per_run = |t: &PreparedTrace| !t.tests_shown || t.tests.len() == 1 || t.tests_coverage.is_some();
    let no_lines: Vec<&str> = [("A", &*a), ("B", &*b)].iter().filter(|(_, t)| t.coverage.is_empty()).map(|(n, _)| *n).collect();
    // (The `record` tool has no option for lines.)
    let cli = a.front == crate::frontend::FrontEnd::Cli;
    if !no_lines.is_empty() {
        let who = if no_lines.len() == 2 { "Neither run".to_string() } else { format!("Run {}", no_lines[0]) };
        let how = if cli { "; `trace run --lines` before 3.12 and for native code" } else { "" };
        d.lines_note = Some(format!(
            "{who} recorded the lines that ran (CPython 3.12 and later record them{how}), so the lines only one run ran are not compared."
        ));
    } else if !(per_run(a) && per_run(b)) {
        let how = if cli { " (`trace run --lines-per-test` records them per test)" } else { "" };
        d.lines_note = Some(format!(
            "Lines are recorded per run, not per test, and a run compared here ran several tests: the lines only one test ran are not compared{how}."
        ));
    }
    // Each run's files through its own sources (read once, for the prompt too).
    {
        let (cov_a, cov_b) = (a.tests_coverage.as_ref().unwrap_or(&a.coverage), b.tests_coverage.as_ref().unwrap_or(&b.coverage));
        let mut texts = lines::Texts::new(&mut a.sources, &mut b.sources);
        if d.lines_note.is_none() {
            d.lines = lines::line_differences(&d, (&ta, &a.cwd, cov_a), (&tb, &b.cwd, cov_b), &mut texts);
        } else {
            // The lines cannot be compared; the functions' text still can, where each run's
            // copy of a file is known (two checkouts, two releases, an edit git holds).
            let edited = lines::source_differences(&d, (&ta, &a.cwd), (&tb, &b.cwd), &mut texts);
            if !edited.is_empty() {
                d.lines = Some(edited);
            }
        }
        d.unread = std::mem::take(&mut texts.unread);
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{Ev::C, Ev::R};
    use crate::views::tests::tree_of;

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
