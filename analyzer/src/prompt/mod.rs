//! Prompts: the question, the call tree(s) and the source of the functions that ran, in the
//! variants of the method (see `docs/prompts.md`).
//!
//! [`Model`] gathers once what every rendering needs (trees, function facts, extracted
//! sources); [`Model::doc`] lays it out for a [`Layout`] and a budget [`Plan`] into a
//! [`Doc`], which [`render`] turns into Markdown, XML or JSON.

pub use condense::KEPT_EXACT_TOP;
pub use docstring::Docstrings;
pub use funcs::{FuncId, Funcs};
pub use notrun::NotRun;
pub use rank::{PROGRAM_WEIGHT, SIZE_FREE_CHARS, TREE_BOOST};
pub use treetext::SAME_AS_ABOVE;

pub mod budget;
mod build;
pub(crate) use build::{recovered_note, RECOVERED_NOTE};
mod bundled;
mod condense;
pub mod docstring;
mod docvalue;
mod estimate;
mod fill;
mod funcs;
pub mod notrun;
pub mod notrun_native;
mod producer;
mod rank;
pub mod relevance;
pub mod render;
mod riders;
mod termcount;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_fill;
#[cfg(test)]
mod tests_test_budget;
mod treetext;

use crate::calltree::NodeId;
use crate::pathclass::Origin;
use crate::python::values::ModuleValue;
use crate::source::{CodeKind, Extract};
use crate::symbols::Language;
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use serde::Serialize;
use std::fmt;
use std::str::FromStr;

/// The method's prompt variants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Variant {
    /// Tree, then sources in tree order, repeated where a function repeats in the tree.
    #[default]
    Full,
    /// Tree, then sources sorted by qualified name, once each.
    A,
    /// Sources in tree order (repeated like `full`), no tree.
    C,
    /// Sources sorted by qualified name, once each, no tree.
    CA,
    /// Tree only.
    T,
}

impl Variant {
    pub const ALL: [Variant; 5] = [Variant::Full, Variant::A, Variant::C, Variant::CA, Variant::T];

    pub fn layout(self) -> Layout {
        let (tree, sources, order, repeat) = match self {
            Variant::Full => (true, true, Order::Call, true),
            Variant::A => (true, true, Order::Sorted, false),
            Variant::C => (false, true, Order::Call, true),
            Variant::CA => (false, true, Order::Sorted, false),
            Variant::T => (true, false, Order::Call, false),
        };
        Layout { tree, sources, order, repeat }
    }

    pub fn name(self) -> &'static str {
        match self {
            Variant::Full => "full",
            Variant::A => "A",
            Variant::C => "C",
            Variant::CA => "CA",
            Variant::T => "T",
        }
    }
}

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Variant {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "full" => Variant::Full,
            "a" => Variant::A,
            "c" => Variant::C,
            "ca" => Variant::CA,
            "t" => Variant::T,
            _ => return Err(format!("unknown variant {s:?}: use full, A, C, CA or T")),
        })
    }
}

/// Order of the source section.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Order {
    /// Pre-order of the tree: a caller before its callees, callees in call order.
    Call,
    /// By qualified name (then file and line), once each, one list for all traces.
    Sorted,
}

/// What a prompt contains.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Layout {
    pub tree: bool,
    pub sources: bool,
    pub order: Order,
    /// With `order: call`: one source block per tree node (a function that appears at several
    /// places is repeated); otherwise once each, at its first appearance.
    pub repeat: bool,
}

impl Layout {
    /// The default prompt: the tree, then each function's source once, in call order (the
    /// method's `full` with repeated sources shown once).
    pub const DEFAULT: Layout = Layout { tree: true, sources: true, order: Order::Call, repeat: false };

    /// The variant this layout is, if it is one.
    pub fn variant(&self) -> Option<Variant> {
        Variant::ALL.into_iter().find(|v| v.layout() == *self)
    }
}

/// How much of a function a prompt shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// The whole source.
    Body,
    /// The code that ran: its statements that did not run elided, each run marked
    /// `...  # N lines not run` ([`notrun`]). Only under a budget, for a function the default
    /// condensing keeps exact whose whole source does not fit ([`budget`]).
    Ran,
    /// Decorators and signature, body elided (marked).
    Signature,
    /// Only its name in the tree.
    Name,
}

/// Budget decisions applied when laying out a prompt. `Default` shows everything.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    /// Per function; absent = [`Level::Body`].
    pub levels: HashMap<FuncId, Level>,
    /// Show each function's source once even when the layout repeats.
    pub collapse_repeats: bool,
    /// Cut the trees below this depth...
    pub tree_depth: Option<u32>,
    /// (The cut is the budget's last one: the first level and the paths to the functions
    /// whose source is shown, `tree_depth` 1.)
    pub tree_to_sources: bool,
    /// ...except the paths from the root to every node of these functions...
    pub tree_keep: HashSet<FuncId>,
    /// ...or, when set, only to the first node of each of them in each thread: where its
    /// source block is placed ([`Plan::visible`]).
    pub first_places: bool,
    /// Shown tests' failures cut to about this many characters each
    /// ([`crate::testrun::shorten_outcome`]).
    pub outcome_chars: Option<usize>,
    /// Lines explaining what the budget removed (part of the prompt).
    pub notes: Vec<String>,
}

impl Plan {
    pub fn level(&self, f: FuncId) -> Level {
        self.levels.get(&f).copied().unwrap_or(Level::Body)
    }

    /// Which nodes of a thread's tree (pre-order) the plan shows, and for each shown node how
    /// many nodes are hidden right below it (in the subtrees of its hidden children). A node is shown when it is no deeper than
    /// `tree_depth`, or its subtree holds a node of a function in `tree_keep` (with
    /// `first_places`, the first node of that function in the thread).
    pub fn visible(&self, nodes: &[ModelNode]) -> Vec<(bool, u32)> {
        let keep = |i: usize| !self.tree_keep.is_empty() && self.tree_keep.contains(&nodes[i].func);
        self.visible_with(nodes, keep)
    }

    /// [`Plan::visible`], with `keep(i)` saying whether node `i`'s function is in `tree_keep`.
    pub fn visible_with(&self, nodes: &[ModelNode], keep: impl Fn(usize) -> bool) -> Vec<(bool, u32)> {
        let Some(d) = self.tree_depth else { return vec![(true, 0); nodes.len()] };
        // Pre-order: a node's subtree is the range i..=i+descendants. kept[i]: nodes of kept
        // functions among the first i.
        let mut kept = vec![0u32; nodes.len() + 1];
        let mut met: HashSet<FuncId> = HashSet::default();
        for i in 0..nodes.len() {
            let k = keep(i) && (!self.first_places || met.insert(nodes[i].func));
            kept[i + 1] = kept[i] + k as u32;
        }
        let end = |i: usize| (i + 1 + nodes[i].descendants).min(nodes.len());
        let mut out: Vec<(bool, u32)> = nodes.iter().enumerate().map(|(i, n)| (n.depth <= d || kept[end(i)] > kept[i], 0)).collect();
        drop(kept);
        // Hidden nodes are counted at their nearest shown ancestor: a hidden node's parent is
        // shown or hidden itself, so adding each hidden child's whole subtree to a shown parent
        // counts every hidden node once.
        let mut stack: Vec<usize> = Vec::new();
        for (i, n) in nodes.iter().enumerate() {
            while stack.last().is_some_and(|&p| nodes[p].depth >= n.depth) {
                stack.pop();
            }
            if let Some(&p) = stack.last() {
                if !out[i].0 && out[p].0 {
                    out[p].1 += 1 + n.descendants as u32;
                }
            }
            stack.push(i);
        }
        out
    }
}

/// Why a function has no source block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceState {
    /// Shown (for the entry module: top-level statements with def/class bodies elided).
    Code(Extract),
    /// Ran, but its lines cannot be shown (changed or missing file): a block with a note.
    Unavailable(String),
    /// Not shown by policy: class bodies, imported module bodies, built-ins, code without a file.
    Omitted(&'static str),
}

/// Facts about one function, shared by all renderings.
#[derive(Debug, Clone)]
pub struct FuncInfo {
    /// Its [`crate::symbols::Function::key`], shared with the analysis' interner (and every
    /// tree node of the [`Doc`] that names it).
    pub key: std::sync::Arc<str>,
    pub qualname: String,
    pub language: Language,
    /// Display path (relative to the run's directory when inside it), or the native object.
    pub file: String,
    pub line: Option<u32>,
    pub module: String,
    pub origin: Origin,
    /// The program's, an installed package's, the test runner's or the standard library's
    /// ([`crate::testrun::function_kind`]).
    pub kind: crate::testrun::FuncKind,
    pub source: SourceState,
    /// Smallest depth at which it appears in any tree.
    pub min_depth: u32,
    /// Index of its first appearance in the pre-order walk of all trees.
    pub first_index: usize,
    /// BM25F score of its name, file and code for the question (see [`relevance`]).
    pub relevance: f64,
    /// Its own BM25F score for the question (in [`FuncInfo::relevance`] before the tree's
    /// share is added).
    pub lexical: f64,
    /// Module-level values of its file that its code reads (see [`crate::python::values`]).
    pub values: Vec<ModuleValue>,
    /// Its code with the statements that did not run elided, and how many lines that elides
    /// ([`notrun`]); `None` without line data or when everything ran. Swapped in by
    /// [`Model::apply_not_run`]; left here for a function that the condensing keeps exact, as
    /// what a budget may show of it ([`Level::Ran`]).
    pub not_run: Option<(String, usize)>,
    /// How often it ran in failing and passing tests ([`crate::testrun::Spectrum::describe`]),
    /// when the traces hold both.
    pub spectrum: Option<String>,
}

impl FuncInfo {
    /// Fence language for its code.
    pub fn lang(&self) -> &'static str {
        match self.language {
            Language::Python => "python",
            Language::Builtin => "",
            Language::Native => {
                let ext = self.file.rsplit('.').next().unwrap_or("");
                match ext {
                    "c" | "h" => "c",
                    "cc" | "cpp" | "cxx" | "hpp" | "hh" | "hxx" => "cpp",
                    "rs" => "rust",
                    _ => "",
                }
            }
        }
    }
}

/// A node of a thread's tree, for layout.
#[derive(Debug, Clone)]
pub struct ModelNode {
    pub id: NodeId,
    pub parent: NodeId,
    pub depth: u32,
    /// Its function in [`Model::funcs`].
    pub func: FuncId,
    pub count: u64,
    /// Resumptions of a suspended generator or coroutine (not calls).
    pub resumes: u64,
    pub time_ns: u64,
    pub recursive: bool,
    /// Number of nodes below it.
    pub descendants: usize,
    /// Native code inlined into the node above it, seen running by an inline probe
    /// ([`crate::symbols::Function::inlined`]).
    pub inlined: bool,
}

#[derive(Debug, Clone)]
pub struct ModelThread {
    pub label: String,
    pub pid: u32,
    pub tid: u64,
    pub name: Option<String>,
    pub is_main: bool,
    /// Pre-order.
    pub nodes: Vec<ModelNode>,
    /// [`treetext::calls_shapes`] of `nodes`, computed on first use: it does not depend on
    /// the plan, and every render of a budget search needs it.
    pub shapes: std::sync::OnceLock<Vec<u64>>,
}

impl ModelNode {
    /// A node called once, not recursive, without time or nodes below (tests and synthetic
    /// trees).
    pub fn new(id: NodeId, depth: u32, func: FuncId) -> ModelNode {
        ModelNode { id, parent: 0, depth, func, count: 1, resumes: 0, time_ns: 0, recursive: false, descendants: 0, inlined: false }
    }
}

impl ModelTrace {
    /// A trace of one unnamed main thread holding `nodes` (pre-order), with pid and tid 0.
    pub fn one_thread(dir: String, command: String, cwd: String, nodes: Vec<ModelNode>) -> ModelTrace {
        let thread = ModelThread { label: String::new(), pid: 0, tid: 0, name: None, is_main: true, nodes, shapes: Default::default() };
        ModelTrace { dir, command, cwd, threads: vec![thread], notes: Vec::new(), outcome: Vec::new(), files_executed: Vec::new() }
    }
}

impl ModelThread {
    /// What each node called, as a hash ([`treetext::calls_shapes`]).
    pub fn calls_shapes(&self) -> &[u64] {
        self.shapes.get_or_init(|| treetext::calls_shapes(&self.nodes))
    }
}

#[derive(Debug, Clone)]
pub struct ModelTrace {
    pub dir: String,
    pub command: String,
    pub cwd: String,
    pub threads: Vec<ModelThread>,
    pub notes: Vec<String>,
    /// How the run and its shown tests ended, said first ([`crate::analysis::PreparedTrace::outcome`]).
    pub outcome: Vec<String>,
    /// Every source file the run executed (absolute), for whole-file comparisons.
    pub files_executed: Vec<std::path::PathBuf>,
}

/// Everything a prompt is laid out from.
#[derive(Debug, Clone)]
pub struct Model {
    pub question: String,
    pub traces: Vec<ModelTrace>,
    pub funcs: Funcs,
    /// Notes for the whole prompt (e.g. changed files).
    pub notes: Vec<String>,
    /// Built from tests' trees (`--test`): `auto` condensing then reaches the program's own
    /// functions too, outside the closest and the test files ([`Model::condense`]).
    pub tests_shown: bool,
    /// Who reads the prompt: how its notes name options ([`crate::frontend`]).
    pub front: crate::frontend::FrontEnd,
    /// The budget given to [`budget::fit`] is the command line's default, not one the user
    /// chose: its note says so and how to turn it off ([`crate::cli::common::PromptArgs::apply_budget`]).
    pub budget_by_default: bool,
    /// (index of a trace given to [`Model::build`], [`FuncId`] in that trace's interner) -> the
    /// function's id here: for callers that hold ids of the analysis ([`Model::func_of_trace`]).
    pub analysis_ids: HashMap<(usize, FuncId), FuncId>,
}

impl Model {
    /// The id here of the function with id `analysis` in the interner of trace `trace` (its
    /// index among those given to [`Model::build`]), if a tree of the model has it.
    pub fn func_of_trace(&self, trace: usize, analysis: FuncId) -> Option<FuncId> {
        self.analysis_ids.get(&(trace, analysis)).copied()
    }
}

/// Appended in the tree to a function the compiler inlined into the function above it, seen
/// running by an inline probe (docs/native-recording.md, "Inlined functions").
pub const INLINED_MARK: &str = " [inlined]";

/// Marks, in `--show-ranking`'s lines ([`Model::ranking_lines`]), the score of a small function
/// that rides with the function above it ([`riders`]).
pub const RIDER_MARK: &str = "\u{21b3}";

/// Appended in the tree to a function whose source the budget dropped.
pub const NAME_ONLY_MARK: &str = " [name only]";

/// The distinct terms of a question that relevance is computed from (see [`relevance`]).
pub fn question_words(q: &str) -> Vec<String> {
    relevance::question_terms(q)
}

/// The whole native source blocks a prompt shows, per display file: (first line, last line,
/// function).
type NativeBlocks = HashMap<String, Vec<(u32, u32, FuncId)>>;

impl Model {
    /// Functions in priority order, most important first: closest to the question (the
    /// BM25F score of [`relevance`]), then closest to the root, then earliest in call order.
    /// Small functions come right after the function that leads to them ([`riders`]).
    /// A function's score in the order of [`Model::priority`] (before riders move).
    pub(crate) fn priority_score(&self, f: &FuncInfo) -> f64 {
        if self.tests_shown {
            rank::size_discounted(f)
        } else {
            f.relevance
        }
    }

    pub fn priority(&self) -> Vec<FuncId> {
        self.priority_with_anchors().into_iter().map(|(k, _)| k).collect()
    }

    /// [`Model::priority`], each function with the function it rides with ([`riders`]): `None`
    /// for one in its own place by its score ([`Model::priority_score`]).
    pub fn priority_with_anchors(&self) -> Vec<(FuncId, Option<FuncId>)> {
        let order = if self.tests_shown { self.ranking_by(rank::size_discounted) } else { self.ranking() };
        riders::with_anchors(order, &self.funcs, &self.traces)
    }

    /// `--show-ranking N`'s lines (all with `N` 0): a line on how the order is made, then per
    /// function `slice: rank N  SCORE  NAME  (FILE)` in the budget's order ([`Model::priority`]),
    /// SCORE the score that order sorts by ([`Model::priority_score`]), so that the scores
    /// never rise down the list but where a small function rides right after the function that
    /// leads to it ([`riders`]), whatever its own score: its score is marked with
    /// [`RIDER_MARK`]. (Scripts read `rank N`, the name and the file: `eval/run_bugs`.)
    pub fn ranking_lines(&self, n: usize) -> Vec<String> {
        let prio = self.priority_with_anchors();
        let n = if n == 0 { prio.len() } else { n.min(prio.len()) };
        let score = if self.tests_shown {
            format!("its relevance, divided past {SIZE_FREE_CHARS} characters of source by the square root of its length in those units")
        } else {
            "its relevance".to_string()
        };
        let mut out = vec![format!(
            "slice: the budget keeps functions in this order, most important first; score: {score}; {RIDER_MARK}: a small function placed right after the unmarked function above it, which calls it or calls beside it a method of its class (a constructor: any method of its class), whatever its own score"
        )];
        for (i, &(k, anchor)) in prio.iter().take(n).enumerate() {
            if let Some(f) = self.funcs.get(k) {
                let score = format!("{}{:.3}", if anchor.is_some() { RIDER_MARK } else { "" }, self.priority_score(f));
                out.push(format!(
                    "slice: rank {:>4}  {:>9}  {}  ({})",
                    i + 1,
                    score,
                    trace_format::escape::line(&f.qualname),
                    trace_format::escape::line(&f.file)
                ));
            }
        }
        out
    }

    /// Functions by `score(f)` (then closest to the root, then earliest call).
    fn ranking_by(&self, score: impl Fn(&FuncInfo) -> f64) -> Vec<FuncId> {
        let keys: Vec<(f64, u32, usize)> = self.funcs.values().map(|f| (score(f), f.min_depth, f.first_index)).collect();
        relevance::rank(&keys).into_iter().map(|i| FuncId(i as u32)).collect()
    }

    /// Functions by relevance alone (the order of [`Model::priority`] before small
    /// functions join their anchors).
    pub fn ranking(&self) -> Vec<FuncId> {
        self.ranking_by(|f| f.relevance)
    }

    /// Each tree's name, in the order [`Model::doc`] lays the trees out: its heading's label
    /// (a test's, the part of an earlier test's, a thread's; a thread of a run of several
    /// processes by its process id and thread, without the command line its heading repeats),
    /// with its run's number when the prompt shows several runs; `run N` for a run's only tree.
    fn tree_names(&self) -> Vec<String> {
        let several = self.traces.len() > 1;
        let mut names = Vec::new();
        for (i, t) in self.traces.iter().enumerate() {
            for th in &t.threads {
                let label = if th.label.starts_with("process ") {
                    format!("process {}, thread {}", th.pid, crate::analysis::thread_name(th.name.as_deref(), th.is_main, th.tid))
                } else {
                    th.label.clone()
                };
                names.push(match (label.is_empty(), several) {
                    (true, _) => format!("run {}", i + 1),
                    (false, false) => label,
                    (false, true) => format!("{label} of run {}", i + 1),
                });
            }
        }
        names
    }

    /// Lay the prompt out.
    pub fn doc(&self, layout: Layout, plan: &Plan) -> Doc {
        let mut seen: HashSet<FuncId> = HashSet::default();
        // Module values already shown: (file, first line).
        let mut values_seen: HashSet<(String, u32)> = HashSet::default();
        // Functions whose tree line already gave their file and line.
        let mut located: HashSet<FuncId> = HashSet::default();
        // Subtrees printed whole so far, and in which tree (see `tree_text`).
        let tree_names = self.tree_names();
        let mut shapes = treetext::Shapes { seen: HashMap::default(), names: &tree_names, tree: 0, same: false };
        let mut marks = TreeMarks::default();
        let repeat = layout.repeat && !plan.collapse_repeats && layout.order == Order::Call;
        // Whole native source blocks the prompt shows, per file.
        // What each thread's tree shows: computed once, every part of the layout reads it.
        let vis: Vec<Vec<Vec<(bool, u32)>>> =
            self.traces.iter().map(|t| t.threads.iter().map(|th| plan.visible(&th.nodes)).collect()).collect();
        let shown_spans = if layout.sources && !repeat { self.native_blocks(plan, &vis) } else { HashMap::default() };
        let mut traces = Vec::new();
        for (i, t) in self.traces.iter().enumerate() {
            let mut threads = Vec::new();
            let mut sources = Vec::new();
            for (j, th) in t.threads.iter().enumerate() {
                let (text, nodes) = self.tree_text(
                    th,
                    &vis[i][j],
                    plan,
                    &mut located,
                    layout.sources.then_some(&shown_spans),
                    (!repeat).then_some(&mut shapes),
                );
                shapes.tree += 1;
                if layout.tree {
                    marks.add_nodes(&nodes);
                }
                threads.push(DocThread {
                    label: th.label.clone(),
                    pid: th.pid,
                    tid: th.tid,
                    name: th.name.clone(),
                    main: th.is_main,
                    tree: text,
                    fence: fence_for(&[]),
                    nodes,
                });
                if layout.sources && layout.order == Order::Call {
                    for (n, &(shown, _)) in th.nodes.iter().zip(&vis[i][j]) {
                        if !shown {
                            continue;
                        }
                        if !repeat && seen.contains(&n.func) {
                            continue;
                        }
                        if !repeat && self.inside_shown(n.func, &shown_spans) {
                            continue;
                        }
                        if let Some(s) = self.source_block(n.func, plan, &mut values_seen) {
                            seen.insert(n.func);
                            sources.push(s);
                        }
                    }
                }
            }
            for th in &mut threads {
                th.fence = fence_for(&[&th.tree]);
            }
            traces.push(DocTrace {
                index: i + 1,
                dir: t.dir.clone(),
                command: t.command.clone(),
                threads,
                sources,
                notes: t.notes.clone(),
                outcome: t
                    .outcome
                    .iter()
                    .map(|o| {
                        let text = plan.outcome_chars.map_or_else(|| o.clone(), |max| crate::testrun::shorten_outcome(o, max));
                        DocBlock { fence: fence_for(&[&text]), text }
                    })
                    .collect(),
            });
        }
        let mut sorted = Vec::new();
        if layout.sources && layout.order == Order::Sorted {
            let mut keys: Vec<FuncId> = Vec::new();
            for (t, tvis) in self.traces.iter().zip(&vis) {
                for (th, vis) in t.threads.iter().zip(tvis) {
                    for (n, &(shown, _)) in th.nodes.iter().zip(vis) {
                        if !shown {
                            continue;
                        }
                        if seen.insert(n.func) {
                            keys.push(n.func);
                        }
                    }
                }
            }
            keys.sort_by(|&a, &b| {
                let (a, b) = (&self.funcs[a], &self.funcs[b]);
                a.qualname.cmp(&b.qualname).then(a.file.cmp(&b.file)).then(a.line.cmp(&b.line))
            });
            for f in keys {
                if self.inside_shown(f, &shown_spans) {
                    continue;
                }
                if let Some(s) = self.source_block(f, plan, &mut values_seen) {
                    sorted.push(s);
                }
            }
        }
        let mut notes = self.notes.clone();
        notes.extend(plan.notes.iter().cloned());
        marks.same_calls = layout.tree && shapes.same;
        Doc {
            question: self.question.clone(),
            variant: layout.variant().map(|v| v.name().to_string()),
            layout,
            marks,
            multiple_traces: self.traces.len() > 1,
            traces,
            sorted_sources: sorted,
            notes,
        }
    }

    /// The whole native source blocks the prompt shows (functions visible in a tree, at
    /// body level), per display file: (first line, last line, function).
    /// (`vis`: [`Plan::visible`] of each thread of each trace).
    fn native_blocks(&self, plan: &Plan, vis: &[Vec<Vec<(bool, u32)>>]) -> NativeBlocks {
        let mut out: NativeBlocks = HashMap::default();
        let mut done: HashSet<FuncId> = HashSet::default();
        for (th, vis) in self.traces.iter().flat_map(|t| &t.threads).zip(vis.iter().flatten()) {
            for (n, &(shown, _)) in th.nodes.iter().zip(vis) {
                if !shown || !done.insert(n.func) || plan.level(n.func) != Level::Body {
                    continue;
                }
                let Some(f) = self.funcs.get(n.func) else { continue };
                match (f.language, &f.source) {
                    (Language::Native, SourceState::Code(e)) => {
                        out.entry(f.file.clone()).or_default().push((e.first_line, e.last_line, n.func));
                    }
                    // A Python function's block (not a module body's, whose functions' bodies are
                    // elided) holds the functions defined inside it.
                    (Language::Python, SourceState::Code(e)) if e.kind == CodeKind::Function => {
                        out.entry(f.file.clone()).or_default().push((e.first_line, e.last_line, n.func));
                    }
                    _ => {}
                }
            }
        }
        out
    }

    /// Whether a function's source lies inside another shown function's whole source block of
    /// the same language: a Rust closure or C++ lambda inside the function that defines it, or
    /// code a derive macro attributed to the same lines; a Python function or lambda defined
    /// inside another (`f.<locals>.g`). Its tree line points into that block, and its code is
    /// not printed again.
    fn inside_shown(&self, id: FuncId, blocks: &NativeBlocks) -> bool {
        let Some(f) = self.funcs.get(id) else { return false };
        let SourceState::Code(e) = &f.source else { return false };
        let nested = match f.language {
            Language::Native => true,
            Language::Python => f.qualname.contains(".<locals>."),
            _ => false,
        };
        nested
            && blocks.get(&f.file).is_some_and(|spans| {
                // Strictly inside; or the very same lines (code a derive macro generated is all
                // attributed to the derive's line), where the smallest key is printed.
                spans.iter().any(|(a, b, k)| {
                    *k != id
                        && self.funcs[*k].language == f.language
                        && *a <= e.first_line
                        && e.last_line <= *b
                        && ((*a, *b) != (e.first_line, e.last_line) || self.funcs[*k].key < f.key)
                })
            })
    }

    fn source_block(&self, id: FuncId, plan: &Plan, values_seen: &mut HashSet<(String, u32)>) -> Option<DocSource> {
        let f = self.funcs.get(id)?;
        let level = plan.level(id);
        if level == Level::Name {
            return None;
        }
        let (code, note, first, last, elided) = match &f.source {
            SourceState::Omitted(_) => return None,
            SourceState::Unavailable(why) => (None, Some(why.clone()), f.line, None, false),
            SourceState::Code(e) => {
                let (code, elided) = match (&e.signature, level, &f.not_run) {
                    (Some(sig), Level::Signature, _) => (sig.clone(), true),
                    (_, Level::Ran, Some((ran, _))) => (ran.clone(), false),
                    _ => (e.code.clone(), false),
                };
                let note = match e.kind {
                    CodeKind::Module => {
                        Some("module body: top-level statements; the bodies of its functions and classes are elided".to_string())
                    }
                    _ => None,
                };
                (Some(code), note, Some(e.first_line), Some(e.last_line), elided)
            }
        };
        let note = match (note, &f.spectrum) {
            (Some(n), Some(s)) => Some(format!("{n}; {s}")),
            (n, s) => n.or_else(|| s.clone()),
        };
        // Module values go with the whole source only, each once per prompt.
        let values: Vec<&ModuleValue> = if code.is_some() && !elided {
            f.values.iter().filter(|v| values_seen.insert((f.file.clone(), v.first_line))).collect()
        } else {
            Vec::new()
        };
        let values_code = (!values.is_empty()).then(|| values.iter().map(|v| v.text.as_str()).collect::<Vec<_>>().join("\n"));
        let values_lines = values
            .iter()
            .map(|v| if v.first_line == v.last_line { v.first_line.to_string() } else { format!("{}-{}", v.first_line, v.last_line) })
            .collect::<Vec<_>>()
            .join(", ");
        let fence = fence_for(&[code.as_deref().unwrap_or(""), values_code.as_deref().unwrap_or("")]);
        Some(DocSource {
            values: values_code,
            values_lines,
            key: f.key.to_string(),
            func: id,
            qualname: f.qualname.clone(),
            file: f.file.clone(),
            first_line: first,
            last_line: last,
            lang: f.lang().to_string(),
            fence,
            code,
            note,
            elided,
        })
    }
}

/// A code fence longer than any run of backticks in `texts` (at least three).
pub use trace_format::escape::fence_for;

/// A laid-out prompt: what templates receive.
#[derive(Debug, Clone, Serialize)]
pub struct Doc {
    pub question: String,
    /// The variant name when the layout is one of the method's variants.
    pub variant: Option<String>,
    pub layout: Layout,
    /// Which marks the shown trees use: the context explains only these.
    pub marks: TreeMarks,
    pub multiple_traces: bool,
    pub traces: Vec<DocTrace>,
    /// With `order: sorted`: the one deduplicated source list of all traces.
    pub sorted_sources: Vec<DocSource>,
    pub notes: Vec<String>,
}

/// The marks that some line of the prompt's trees carries ([`Model::tree_text`]). The
/// context's legend explains a mark only when a tree shows it: a legend line for a mark that
/// is nowhere in the prompt costs tokens a budget needs for code.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct TreeMarks {
    /// `×N`: a node of several calls.
    pub count: bool,
    /// `(+M resumes)`: a generator or coroutine resumed.
    pub resumes: bool,
    /// `↻ recursive`.
    pub recursive: bool,
    /// `[same calls as …]`: a node whose calls are printed at an earlier line.
    pub same_calls: bool,
}

impl TreeMarks {
    /// The marks of shown nodes (`nodes`: the tree's [`DocNode`]s, as printed).
    fn add_nodes(&mut self, nodes: &[DocNode]) {
        for n in nodes {
            self.count |= n.count > 1 && !n.inlined;
            self.resumes |= n.resumes > 0;
            self.recursive |= n.recursive;
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct DocTrace {
    /// 1-based.
    pub index: usize,
    pub dir: String,
    pub command: String,
    pub threads: Vec<DocThread>,
    /// With `order: call`: this trace's sources in tree order.
    pub sources: Vec<DocSource>,
    pub notes: Vec<String>,
    /// How the run and its shown tests ended (a failed run, each test's failure), first.
    pub outcome: Vec<DocBlock>,
}

/// A block of plain text shown fenced.
#[derive(Debug, Clone, Serialize)]
pub struct DocBlock {
    pub text: String,
    pub fence: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct DocThread {
    /// Empty for the only thread of the only process.
    pub label: String,
    pub pid: u32,
    pub tid: u64,
    pub name: Option<String>,
    pub main: bool,
    /// The tree as indented text.
    pub tree: String,
    pub fence: String,
    pub nodes: Vec<DocNode>,
}

#[derive(Debug, Clone, Serialize)]
pub struct DocNode {
    pub id: u32,
    pub parent: u32,
    pub depth: u32,
    /// Its function's key ([`FuncInfo::key`], shared).
    pub function: std::sync::Arc<str>,
    /// Its function in the prompt's table (for renderers; not part of the document).
    #[serde(skip)]
    pub func: FuncId,
    pub count: u64,
    /// Resumptions of a suspended generator or coroutine (not calls).
    pub resumes: u64,
    pub time_ns: u64,
    pub recursive: bool,
    pub level: Level,
    /// Native code inlined into the node above it, seen running by an inline probe (written
    /// only when true: `docs/slice-json.md`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub inlined: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct DocSource {
    pub key: String,
    /// Its function in the prompt's table (for renderers; not part of the document).
    #[serde(skip)]
    pub func: FuncId,
    pub qualname: String,
    pub file: String,
    pub first_line: Option<u32>,
    pub last_line: Option<u32>,
    pub lang: String,
    pub fence: String,
    /// `None` when the source cannot be shown (see `note`).
    pub code: Option<String>,
    pub note: Option<String>,
    /// The body is elided (signature only).
    pub elided: bool,
    /// Module-level values of its file that it reads, not shown earlier in the prompt: the
    /// statements joined by newlines (see [`crate::python::values`]).
    pub values: Option<String>,
    /// Their line numbers (`3, 5-8`).
    pub values_lines: String,
}
/// Files whose source is named in a warning one by one; the rest are counted in one more.
pub const UNAVAILABLE_NAMED: usize = 5;

/// The warnings for the files whose source is not shown (`file: why`), at most
/// [`UNAVAILABLE_NAMED`] of them one by one and then one line counting the rest: a run that
/// executed code from a directory removed since (pip's wheels unpacked in `/tmp`, when venv
/// runs ensurepip) had 125 lines of warnings, one per file.
pub fn unavailable_notes(files: &std::collections::BTreeMap<String, String>) -> Vec<String> {
    let mut notes: Vec<String> = files.iter().take(UNAVAILABLE_NAMED).map(|(file, why)| format!("{file}: {why}")).collect();
    let rest = files.len().saturating_sub(UNAVAILABLE_NAMED);
    if rest > 0 {
        let dirs: std::collections::BTreeSet<&str> =
            files.keys().skip(UNAVAILABLE_NAMED).map(|f| f.rsplit_once('/').map_or(".", |(d, _)| d)).collect();
        let among = dirs.iter().take(3).copied().collect::<Vec<_>>().join(", ");
        let more = if dirs.len() > 3 { format!(" and {} more directories", dirs.len() - 3) } else { String::new() };
        notes.push(format!("source not shown either for {rest} more files (in {among}{more})"));
    }
    notes
}
