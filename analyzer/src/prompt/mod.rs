//! Prompts: the question, the call tree(s) and the source of the functions that ran, in the
//! variants of the method (see `docs/prompts.md`).
//!
//! [`Model`] gathers once what every rendering needs (trees, function facts, extracted
//! sources); [`Model::doc`] lays it out for a [`Layout`] and a budget [`Plan`] into a
//! [`Doc`], which [`render`] turns into Markdown, XML or JSON.

pub mod budget;
pub mod docstring;
pub mod relevance;
pub mod render;
#[cfg(test)]
mod tests;

use crate::analysis::{display_path, PreparedTrace};
use crate::calltree::NodeId;
use crate::pathclass::{module_name, origin, Origin};
use crate::prune::is_module;
use crate::source::{CodeKind, Extract, Unavailable};
use crate::symbols::{Function, Language};
use crate::values::{module_values, read_by, ModuleValue};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap, HashSet};
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
    /// Decorators and signature, body elided (marked).
    Signature,
    /// Only its name in the tree.
    Name,
}

/// Budget decisions applied when laying out a prompt. `Default` shows everything.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    /// Per function key; absent = [`Level::Body`].
    pub levels: HashMap<String, Level>,
    /// Show each function's source once even when the layout repeats.
    pub collapse_repeats: bool,
    /// Cut the trees below this depth...
    pub tree_depth: Option<u32>,
    /// ...except the paths from the root to every node of these functions (keys).
    pub tree_keep: HashSet<String>,
    /// Lines explaining what the budget removed (part of the prompt).
    pub notes: Vec<String>,
}

impl Plan {
    pub fn level(&self, key: &str) -> Level {
        self.levels.get(key).copied().unwrap_or(Level::Body)
    }

    /// Which nodes of a thread's tree (pre-order) the plan shows, and for each shown node how
    /// many nodes are hidden right below it (in the subtrees of its hidden children). A node is shown when it is no deeper than
    /// `tree_depth`, or its subtree holds a node of a function in `tree_keep`.
    pub fn visible(&self, nodes: &[ModelNode]) -> Vec<(bool, usize)> {
        let Some(d) = self.tree_depth else { return nodes.iter().map(|_| (true, 0)).collect() };
        // Pre-order: a node's subtree is the range i..=i+descendants.
        let mut kept = vec![0usize; nodes.len() + 1];
        for (i, n) in nodes.iter().enumerate() {
            kept[i + 1] = kept[i] + self.tree_keep.contains(&n.key) as usize;
        }
        let end = |i: usize| (i + 1 + nodes[i].descendants).min(nodes.len());
        let shown: Vec<bool> = nodes.iter().enumerate().map(|(i, n)| n.depth <= d || kept[end(i)] > kept[i]).collect();
        // Hidden nodes are counted at their nearest shown ancestor: a hidden node's parent is
        // shown or hidden itself, so adding each hidden child's whole subtree to a shown parent
        // counts every hidden node once.
        let mut hidden = vec![0usize; nodes.len()];
        let mut stack: Vec<usize> = Vec::new();
        for (i, n) in nodes.iter().enumerate() {
            while stack.last().is_some_and(|&p| nodes[p].depth >= n.depth) {
                stack.pop();
            }
            if let Some(&p) = stack.last() {
                if !shown[i] && shown[p] {
                    hidden[p] += 1 + n.descendants;
                }
            }
            stack.push(i);
        }
        shown.into_iter().zip(hidden).collect()
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
    pub key: String,
    pub qualname: String,
    pub language: Language,
    /// Display path (relative to the run's directory when inside it), or the native object.
    pub file: String,
    pub line: Option<u32>,
    pub module: String,
    pub origin: Origin,
    pub source: SourceState,
    /// Smallest depth at which it appears in any tree.
    pub min_depth: u32,
    /// Index of its first appearance in the pre-order walk of all trees.
    pub first_index: usize,
    /// BM25F score of its name, file and code for the question (see [`relevance`]).
    pub relevance: f64,
    /// Module-level values of its file that its code reads (see [`crate::values`]).
    pub values: Vec<ModuleValue>,
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
    /// Key into [`Model::funcs`].
    pub key: String,
    pub count: u64,
    /// Resumptions of a suspended generator or coroutine (not calls).
    pub resumes: u64,
    pub time_ns: u64,
    pub recursive: bool,
    /// Number of nodes below it.
    pub descendants: usize,
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
}

#[derive(Debug, Clone)]
pub struct ModelTrace {
    pub dir: String,
    pub command: String,
    pub cwd: String,
    pub threads: Vec<ModelThread>,
    pub notes: Vec<String>,
    /// Every source file the run executed (absolute), for whole-file comparisons.
    pub files_executed: Vec<std::path::PathBuf>,
}

/// Everything a prompt is laid out from.
#[derive(Debug, Clone)]
pub struct Model {
    pub question: String,
    pub traces: Vec<ModelTrace>,
    pub funcs: HashMap<String, FuncInfo>,
    /// Notes for the whole prompt (e.g. changed files).
    pub notes: Vec<String>,
}

/// Appended in the tree to a node whose calls are the same as at an earlier line of the same
/// function.
pub const SAME_AS_ABOVE: &str = " [same calls as above]";

/// A hash of what each node called: the functions below it, their recursion marks and their
/// nesting (not the node's own function, not counts or times), for nodes in pre-order with
/// their depths. Two nodes with the same hash made the same calls.
fn calls_shapes(nodes: &[ModelNode]) -> Vec<u64> {
    use std::hash::{Hash, Hasher};
    let mut calls = vec![0u64; nodes.len()];
    // pending[d]: whole-subtree shapes of the nodes at depth d whose parent is not reached
    // yet, in reverse.
    let mut pending: Vec<Vec<u64>> = Vec::new();
    for i in (0..nodes.len()).rev() {
        let d = nodes[i].depth as usize;
        if pending.len() < d + 2 {
            pending.resize(d + 2, Vec::new());
        }
        let children = std::mem::take(&mut pending[d + 1]);
        let mut h = std::collections::hash_map::DefaultHasher::new();
        for c in children.iter().rev() {
            c.hash(&mut h);
        }
        calls[i] = h.finish();
        let mut whole = std::collections::hash_map::DefaultHasher::new();
        nodes[i].key.hash(&mut whole);
        nodes[i].recursive.hash(&mut whole);
        calls[i].hash(&mut whole);
        pending[d].push(whole.finish());
    }
    calls
}

/// Appended in the tree to a function whose source the budget dropped.
pub const NAME_ONLY_MARK: &str = " [name only]";

/// The distinct terms of a question that relevance is computed from (see [`relevance`]).
pub fn question_words(q: &str) -> Vec<String> {
    relevance::question_terms(q)
}

impl Model {
    /// Gather trees, function facts and sources from prepared traces.
    pub fn build(question: &str, traces: &mut [PreparedTrace]) -> Model {
        let mut funcs: HashMap<String, FuncInfo> = HashMap::new();
        let mut mtraces = Vec::new();
        let mut index = 0usize;
        let mut unavailable_files: BTreeMap<String, String> = BTreeMap::new();
        for t in traces.iter_mut() {
            let mut file_values: HashMap<std::path::PathBuf, HashMap<String, ModuleValue>> = HashMap::new();
            let cwd = t.cwd.clone();
            let mut threads = Vec::new();
            for th in &t.threads {
                let tree = &th.tree;
                let mut nodes = Vec::with_capacity(tree.len());
                let sizes = tree.subtree_sizes();
                // The entry script's module body is shown with its top-level statements: its
                // values need no second copy.
                let entry_files: HashSet<&std::path::Path> = th.entry.iter().filter_map(|&i| tree.function(i)?.file.as_deref()).collect();
                for n in tree.preorder() {
                    let node = tree.node(n);
                    let f = tree.func(n);
                    let key = tree.func_key(n);
                    if !funcs.contains_key(&key) {
                        let entry = th.entry.contains(&node.func);
                        let mut info = func_info(&key, f, entry, &cwd, &mut t.sources, node.depth, index);
                        if th.plumbing.contains(&node.func) {
                            info.source = SourceState::Omitted("framework plumbing (collapsed)");
                        }
                        if let (Some(f), SourceState::Code(e)) = (f, &info.source) {
                            if f.language == Language::Python && matches!(e.kind, CodeKind::Function | CodeKind::Lambda) {
                                if let Some(file) = f.file.as_ref().filter(|p| !entry_files.contains(p.as_path())) {
                                    let vals = file_values
                                        .entry(file.clone())
                                        .or_insert_with(|| t.sources.file(file).map(|ft| module_values(&ft)).unwrap_or_default());
                                    info.values = read_by(&e.code, vals).into_iter().cloned().collect();
                                }
                            }
                        }
                        if let SourceState::Unavailable(why) = &info.source {
                            unavailable_files.entry(info.file.clone()).or_insert_with(|| why.clone());
                        }
                        funcs.insert(key.clone(), info);
                    } else if let Some(fi) = funcs.get_mut(&key) {
                        fi.min_depth = fi.min_depth.min(node.depth);
                    }
                    index += 1;
                    nodes.push(ModelNode {
                        id: n,
                        parent: node.parent,
                        depth: node.depth,
                        key,
                        count: node.count,
                        resumes: node.resumes,
                        time_ns: node.time_ns,
                        recursive: node.recursive,
                        descendants: sizes[n as usize] - 1,
                    });
                }
                threads.push(ModelThread {
                    label: th.label.clone(),
                    pid: th.pid,
                    tid: th.tid,
                    name: th.name.clone(),
                    is_main: th.is_main,
                    nodes,
                });
            }
            mtraces.push(ModelTrace {
                dir: t.dir.display().to_string(),
                command: t.meta.argv.join(" "),
                cwd: t.meta.cwd.clone(),
                threads,
                notes: t.notes.clone(),
                files_executed: t.files_executed.iter().map(|f| t.sources.resolve(f)).collect(),
            });
        }
        score(&mut funcs, question);
        tree_boost(&mut funcs, &mtraces);
        let notes = unavailable_files.iter().map(|(file, why)| format!("{file}: {why}")).collect();
        Model { question: question.trim().to_string(), traces: mtraces, funcs, notes }
    }

    /// Cut long docstrings to their summary (`--short-docstrings`; see [`docstring`]). Call it
    /// after [`Model::build`]: relevance was computed on the whole code, so a docstring's words
    /// still count.
    pub fn shorten_docstrings(&mut self) {
        for f in self.funcs.values_mut() {
            if let SourceState::Code(e) = &mut f.source {
                if f.language == Language::Python && e.kind == CodeKind::Function {
                    if let Some(cut) = docstring::trim_docstring(&e.code) {
                        e.code = cut;
                    }
                }
            }
        }
    }

    /// Function keys in priority order, most important first: closest to the question (the
    /// BM25F score of [`relevance`]), then closest to the root, then earliest in call order.
    pub fn priority(&self) -> Vec<String> {
        let v: Vec<&FuncInfo> = self.funcs.values().collect();
        let keys: Vec<(f64, u32, usize)> = v.iter().map(|f| (f.relevance, f.min_depth, f.first_index)).collect();
        relevance::rank(&keys).into_iter().map(|i| v[i].key.clone()).collect()
    }

    /// Lay the prompt out.
    pub fn doc(&self, layout: Layout, plan: &Plan) -> Doc {
        let mut seen: HashSet<&str> = HashSet::new();
        // Module values already shown: (file, first line).
        let mut values_seen: HashSet<(String, u32)> = HashSet::new();
        // Functions whose tree line already gave their file and line.
        let mut located: HashSet<String> = HashSet::new();
        // Subtrees printed whole so far (see `tree_text`).
        let mut shapes: HashMap<u64, String> = HashMap::new();
        let repeat = layout.repeat && !plan.collapse_repeats && layout.order == Order::Call;
        let mut traces = Vec::new();
        for (i, t) in self.traces.iter().enumerate() {
            let mut threads = Vec::new();
            let mut sources = Vec::new();
            for th in &t.threads {
                let (text, nodes) = self.tree_text(th, plan, &mut located, (!repeat).then_some(&mut shapes));
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
                    let vis = plan.visible(&th.nodes);
                    for (n, (shown, _)) in th.nodes.iter().zip(vis) {
                        if !shown {
                            continue;
                        }
                        if !repeat && seen.contains(n.key.as_str()) {
                            continue;
                        }
                        if let Some(s) = self.source_block(&n.key, plan, &mut values_seen) {
                            seen.insert(&n.key);
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
            });
        }
        let mut sorted = Vec::new();
        if layout.sources && layout.order == Order::Sorted {
            let mut keys: Vec<&FuncInfo> = Vec::new();
            for t in &self.traces {
                for th in &t.threads {
                    let vis = plan.visible(&th.nodes);
                    for (n, (shown, _)) in th.nodes.iter().zip(vis) {
                        if !shown {
                            continue;
                        }
                        if seen.insert(&n.key) {
                            keys.push(&self.funcs[&n.key]);
                        }
                    }
                }
            }
            keys.sort_by(|a, b| a.qualname.cmp(&b.qualname).then(a.file.cmp(&b.file)).then(a.line.cmp(&b.line)));
            sorted = keys.iter().filter_map(|f| self.source_block(&f.key, plan, &mut values_seen)).collect();
        }
        let mut notes = self.notes.clone();
        notes.extend(plan.notes.iter().cloned());
        Doc {
            question: self.question.clone(),
            variant: layout.variant().map(|v| v.name().to_string()),
            layout,
            multiple_traces: self.traces.len() > 1,
            traces,
            sorted_sources: sorted,
            notes,
        }
    }

    fn source_block(&self, key: &str, plan: &Plan, values_seen: &mut HashSet<(String, u32)>) -> Option<DocSource> {
        let f = self.funcs.get(key)?;
        let level = plan.level(key);
        if level == Level::Name {
            return None;
        }
        let (code, note, first, last, elided) = match &f.source {
            SourceState::Omitted(_) => return None,
            SourceState::Unavailable(why) => (None, Some(why.clone()), f.line, None, false),
            SourceState::Code(e) => {
                let (code, elided) = match (&e.signature, level) {
                    (Some(sig), Level::Signature) => (sig.clone(), true),
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
            key: key.to_string(),
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

    /// Qualified names that more than one function of the prompt has: their tree lines
    /// always give the location.
    fn ambiguous_names(&self) -> HashSet<&str> {
        let mut seen = HashSet::new();
        let mut dup = HashSet::new();
        for f in self.funcs.values() {
            if !seen.insert(f.qualname.as_str()) {
                dup.insert(f.qualname.as_str());
            }
        }
        dup
    }

    /// A thread's tree as text. A function's `(file:line)` is given on its first line in the
    /// prompt (`located` remembers them across threads and runs); later lines name it only,
    /// unless another function of the prompt has the same qualified name.
    ///
    /// With `shapes` (layouts that show each source once), a node that made the same calls as
    /// a node printed whole earlier in the prompt (same functions, same nesting; counts may
    /// differ) is printed alone, marked [`SAME_AS_ABOVE`] when that node is the same function,
    /// `[same calls as `f`]` otherwise: many sibling subtrees of one shape take a line each.
    fn tree_text(
        &self,
        th: &ModelThread,
        plan: &Plan,
        located: &mut HashSet<String>,
        mut shapes: Option<&mut HashMap<u64, String>>,
    ) -> (String, Vec<DocNode>) {
        let ambiguous = self.ambiguous_names();
        let mut out = String::new();
        let mut nodes = Vec::new();
        let vis = plan.visible(&th.nodes);
        let calls = calls_shapes(&th.nodes);
        // shown_before[i]: shown nodes among the first i.
        let mut shown_before = vec![0usize; th.nodes.len() + 1];
        for (i, v) in vis.iter().enumerate() {
            shown_before[i + 1] = shown_before[i] + v.0 as usize;
        }
        let mut skip_to = 0usize;
        for (i, (n, (shown, hidden))) in th.nodes.iter().zip(vis).enumerate() {
            if !shown || i < skip_to {
                continue;
            }
            let end = i + 1 + n.descendants;
            let mut same: Option<String> = None;
            if let Some(seen) = shapes.as_deref_mut() {
                let whole = shown_before[end.min(th.nodes.len())] - shown_before[i] == n.descendants + 1;
                if n.descendants > 0 && whole {
                    match seen.get(&calls[i]) {
                        Some(k) if *k == n.key => same = Some(SAME_AS_ABOVE.to_string()),
                        Some(k) => same = Some(format!(" [same calls as `{}`]", self.funcs.get(k).map_or(k.as_str(), |f| &f.qualname))),
                        None => {
                            seen.insert(calls[i], n.key.clone());
                        }
                    }
                    if same.is_some() {
                        skip_to = end;
                    }
                }
            }
            let f = &self.funcs[&n.key];
            let indent = "  ".repeat(n.depth.saturating_sub(1) as usize);
            out.push_str(&indent);
            out.push_str(&f.qualname);
            if located.insert(n.key.clone()) || ambiguous.contains(f.qualname.as_str()) {
                match f.line {
                    Some(l) if !f.file.is_empty() => out.push_str(&format!("  ({}:{l})", f.file)),
                    _ if !f.file.is_empty() => out.push_str(&format!("  ({})", f.file)),
                    _ => {}
                }
            }
            if n.count > 1 {
                out.push_str(&format!(" ×{}", n.count));
            }
            if n.resumes > 0 {
                out.push_str(&format!(" (+{} resume{})", n.resumes, if n.resumes == 1 { "" } else { "s" }));
            }
            if n.recursive {
                out.push_str(" ↻ recursive");
            }
            let level = plan.level(&n.key);
            if level == Level::Name && matches!(f.source, SourceState::Code(_) | SourceState::Unavailable(_)) {
                out.push_str(NAME_ONLY_MARK);
            }
            if let Some(m) = &same {
                out.push_str(m);
            }
            out.push('\n');
            if hidden > 0 && same.is_none() {
                out.push_str(&"  ".repeat(n.depth as usize));
                out.push_str(&format!("… {hidden} more calls below (elided to fit the budget)\n"));
            }
            nodes.push(DocNode {
                id: n.id,
                parent: n.parent,
                depth: n.depth,
                function: n.key.clone(),
                count: n.count,
                resumes: n.resumes,
                time_ns: n.time_ns,
                recursive: n.recursive,
                level,
            });
        }
        while out.ends_with('\n') {
            out.pop();
        }
        (out, nodes)
    }
}

/// Score every function for the question: one BM25F document per function (its qualified
/// name, display path and the code the prompt shows), IDF over the functions of the slice.
fn score(funcs: &mut HashMap<String, FuncInfo>, question: &str) {
    let query = relevance::weighted_question_terms(question);
    // A fixed order, so that nothing depends on the hash map's.
    let mut keys: Vec<String> = funcs.keys().cloned().collect();
    keys.sort();
    let docs: Vec<relevance::Document<'_>> = keys
        .iter()
        .map(|k| {
            let f = &funcs[k];
            let code = match &f.source {
                SourceState::Code(e) => e.code.as_str(),
                _ => "",
            };
            relevance::Document { name: &f.qualname, path: &f.file, code }
        })
        .collect();
    let scores = relevance::weighted_scores(&docs, &query);
    for (k, s) in keys.iter().zip(scores) {
        if let Some(f) = funcs.get_mut(k) {
            f.relevance = s;
        }
    }
}

/// Share of its strongest caller's and callee's BM25F score a function gets on top of its own:
/// the code around a strong match (who calls it, what it calls) is what an answer reads next.
pub const TREE_BOOST: f64 = 0.3;

/// Add the tree's evidence to the lexical scores: `relevance(f) += TREE_BOOST ×
/// (max score of f's callers + max score of f's callees)`, over every place f appears.
fn tree_boost(funcs: &mut HashMap<String, FuncInfo>, traces: &[ModelTrace]) {
    let base: HashMap<&str, f64> = funcs.iter().map(|(k, f)| (k.as_str(), f.relevance)).collect();
    let mut best_caller: HashMap<&str, f64> = HashMap::new();
    let mut best_callee: HashMap<&str, f64> = HashMap::new();
    for th in traces.iter().flat_map(|t| t.threads.iter()) {
        let key_of: HashMap<NodeId, &str> = th.nodes.iter().map(|n| (n.id, n.key.as_str())).collect();
        for n in &th.nodes {
            let Some(&pk) = key_of.get(&n.parent) else { continue };
            if pk == n.key {
                continue;
            }
            let (ps, cs) = (base.get(pk).copied().unwrap_or(0.0), base.get(n.key.as_str()).copied().unwrap_or(0.0));
            let c = best_caller.entry(n.key.as_str()).or_default();
            *c = c.max(ps);
            let e = best_callee.entry(pk).or_default();
            *e = e.max(cs);
        }
    }
    let boosts: Vec<(String, f64)> = funcs
        .keys()
        .map(|k| {
            let b = best_caller.get(k.as_str()).copied().unwrap_or(0.0) + best_callee.get(k.as_str()).copied().unwrap_or(0.0);
            (k.clone(), b)
        })
        .collect();
    for (k, b) in boosts {
        if let Some(f) = funcs.get_mut(&k) {
            // Rounded like the lexical scores, so the order never depends on the last bit.
            f.relevance = ((f.relevance + TREE_BOOST * b) * 1e6).round() / 1e6;
        }
    }
}

fn func_info(
    key: &str,
    f: Option<&Function>,
    entry_module: bool,
    cwd: &std::path::Path,
    cache: &mut crate::source::SourceCache,
    depth: u32,
    index: usize,
) -> FuncInfo {
    let Some(f) = f else {
        return FuncInfo {
            key: key.to_string(),
            qualname: key.to_string(),
            language: Language::Native,
            file: String::new(),
            line: None,
            module: String::new(),
            origin: Origin::Program,
            source: SourceState::Omitted("unknown function"),
            min_depth: depth,
            first_index: index,
            relevance: 0.0,
            values: Vec::new(),
        };
    };
    let file = match (&f.file, &f.object) {
        (Some(p), _) => display_path(&cache.resolve(p), cwd),
        (None, Some(o)) => o.rsplit('/').next().unwrap_or(o).to_string(),
        (None, None) => String::new(),
    };
    let source = if is_module(f) && !entry_module {
        SourceState::Omitted("imported module body (import-time work)")
    } else {
        match cache.extract(f, is_module(f)) {
            Ok(e) if e.kind == CodeKind::Class => SourceState::Omitted("class body (its methods that ran appear separately)"),
            Ok(e) => SourceState::Code(e),
            Err(Unavailable::NoFile) => SourceState::Omitted("no source file"),
            Err(u) => SourceState::Unavailable(u.note()),
        }
    };
    FuncInfo {
        key: key.to_string(),
        qualname: f.qualname.clone(),
        language: f.language,
        file,
        line: f.first_line,
        module: module_name(f, cwd),
        origin: origin(f),
        source,
        min_depth: depth,
        first_index: index,
        relevance: 0.0,
        values: Vec::new(),
    }
}

/// A code fence longer than any run of backticks in `texts` (at least three).
pub fn fence_for(texts: &[&str]) -> String {
    let mut longest = 0;
    for t in texts {
        let mut run = 0;
        for c in t.chars() {
            if c == '`' {
                run += 1;
                longest = longest.max(run);
            } else {
                run = 0;
            }
        }
    }
    "`".repeat((longest + 1).max(3))
}

/// A laid-out prompt: what templates receive.
#[derive(Debug, Clone, Serialize)]
pub struct Doc {
    pub question: String,
    /// The variant name when the layout is one of the method's variants.
    pub variant: Option<String>,
    pub layout: Layout,
    pub multiple_traces: bool,
    pub traces: Vec<DocTrace>,
    /// With `order: sorted`: the one deduplicated source list of all traces.
    pub sorted_sources: Vec<DocSource>,
    pub notes: Vec<String>,
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
    pub function: String,
    pub count: u64,
    /// Resumptions of a suspended generator or coroutine (not calls).
    pub resumes: u64,
    pub time_ns: u64,
    pub recursive: bool,
    pub level: Level,
}

#[derive(Debug, Clone, Serialize)]
pub struct DocSource {
    pub key: String,
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
    /// statements joined by newlines (see [`crate::values`]).
    pub values: Option<String>,
    /// Their line numbers (`3, 5-8`).
    pub values_lines: String,
}
