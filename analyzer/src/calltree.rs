//! The call tree of one thread, folded with the method's rules (see `docs/prompts.md`):
//!
//! - under one parent, repeated calls to the same function are one node (subtrees merged);
//! - the same function under different parents stays separate nodes;
//! - each node keeps its call count and inclusive time;
//! - when a function already on the path from the root is called again (re-entry), that call
//!   is a `↻` marker leaf under its caller, and what it reaches is folded into the function's
//!   earlier occurrence on the path (see [`crate::fold::fold_events`]): finite, and no function
//!   that ran is hidden.
//!
//! Node 0 is a synthetic root (no function). Children are kept in the order of their first
//! call, so a pre-order walk is the call order. Function indices point into
//! [`CallTree::funcs`], the function table of the process the tree comes from; across
//! processes and traces a function is its [`FuncId`] ([`CallTree::func_id`]).

use crate::symbols::{FuncId, Function};
use rustc_hash::FxHashMap;
use std::sync::Arc;

/// Index of a node in [`CallTree::nodes`].
pub type NodeId = u32;
/// The synthetic root.
pub const ROOT: NodeId = 0;
/// Function index of the root (it has none).
pub const NO_FUNC: u32 = u32::MAX;

/// One node: a function called from the node's parent (all such calls merged).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// Index into [`CallTree::funcs`], or [`NO_FUNC`] for the root.
    pub func: u32,
    /// Parent node (the root is its own parent).
    pub parent: NodeId,
    /// Children in order of first call.
    pub children: Vec<NodeId>,
    /// Number of calls merged into this node (for a recursive node: recursive calls made
    /// from its parent). Resumptions of a suspended generator or coroutine are not calls: they
    /// are in [`Node::resumes`].
    pub count: u64,
    /// Number of times a suspended frame of this function (a generator or coroutine) was
    /// resumed here (streams that record resumes separately: Python 3.12+; see
    /// `docs/trace-format.md`).
    pub resumes: u64,
    /// Inclusive time of those calls, in nanoseconds.
    pub time_ns: u64,
    /// A `↻` re-entry marker: calls of a function that was already on the path from the root
    /// (its callees are under that earlier occurrence). Always a leaf.
    pub recursive: bool,
    /// Depth: 0 for the root, 1 for its children, ...
    pub depth: u32,
    /// Called directly by Python's import machinery (a module body, a finder, a loader):
    /// import-time work.
    pub via_import: bool,
}

/// A folded call tree.
#[derive(Debug, Clone)]
pub struct CallTree {
    pub funcs: Arc<Vec<Function>>,
    /// The [`FuncId`] of each function index, in the analysis' [`crate::symbols::Interner`]
    /// (set where the trace is read; as long as the function indices the nodes use, which may
    /// pass `funcs`' end). Empty for a tree never interned (unit tests).
    pub ids: Arc<Vec<FuncId>>,
    pub nodes: Vec<Node>,
}

impl CallTree {
    /// An empty tree (root only) over a function table.
    pub fn new(funcs: Arc<Vec<Function>>) -> CallTree {
        CallTree {
            funcs,
            ids: Arc::default(),
            nodes: vec![Node {
                func: NO_FUNC,
                parent: ROOT,
                children: Vec::new(),
                count: 0,
                resumes: 0,
                time_ns: 0,
                recursive: false,
                depth: 0,
                via_import: false,
            }],
        }
    }

    /// Number of nodes, the root excluded.
    pub fn len(&self) -> usize {
        self.nodes.len() - 1
    }

    /// Whether the tree has no node but the root.
    pub fn is_empty(&self) -> bool {
        self.nodes.len() <= 1
    }

    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id as usize]
    }

    /// The function of a node (`None` for the root and for ids missing from the table).
    pub fn func(&self, id: NodeId) -> Option<&Function> {
        let f = self.nodes[id as usize].func;
        if f == NO_FUNC {
            None
        } else {
            self.funcs.get(f as usize)
        }
    }

    /// The [`FuncId`] of a node's function, the one identity every view, the prompt and
    /// pruning match on across trees; [`FuncId::NONE`] for the root (and in a tree never
    /// interned).
    pub fn func_id(&self, id: NodeId) -> FuncId {
        self.id_of(self.nodes[id as usize].func)
    }

    /// The [`FuncId`] of a function index ([`FuncId::NONE`] for [`NO_FUNC`]).
    pub fn id_of(&self, func: u32) -> FuncId {
        self.ids.get(func as usize).copied().unwrap_or(FuncId::NONE)
    }

    /// Function of a function index.
    pub fn function(&self, func: u32) -> Option<&Function> {
        self.funcs.get(func as usize)
    }

    /// Node ids in pre-order (root excluded): a caller before its callees, callees in call order.
    pub fn preorder(&self) -> Vec<NodeId> {
        let mut out = Vec::with_capacity(self.len());
        let mut stack: Vec<NodeId> = self.nodes[0].children.iter().rev().copied().collect();
        while let Some(n) = stack.pop() {
            out.push(n);
            stack.extend(self.nodes[n as usize].children.iter().rev().copied());
        }
        out
    }

    /// Node ids from the root's child down to `id`.
    pub fn path(&self, mut id: NodeId) -> Vec<NodeId> {
        let mut p = Vec::new();
        while id != ROOT {
            p.push(id);
            id = self.nodes[id as usize].parent;
        }
        p.reverse();
        p
    }

    /// Largest depth of any node.
    pub fn max_depth(&self) -> u32 {
        self.nodes.iter().map(|n| n.depth).max().unwrap_or(0)
    }

    /// Number of nodes in each node's subtree, the node included, indexed by node id: one
    /// pass from the leaves up (children always have larger ids than their parent).
    pub fn subtree_sizes(&self) -> Vec<usize> {
        let mut size = vec![1usize; self.nodes.len()];
        for id in (1..self.nodes.len()).rev() {
            let p = self.nodes[id].parent as usize;
            size[p] += size[id];
        }
        size
    }

    /// Rebuild the tree keeping only some nodes, with the folding rules applied again.
    ///
    /// `decide(tree, node)` says, for each node, whether to keep it, drop it with its whole
    /// subtree, or splice it out (the node goes, its children are attached to its nearest
    /// kept ancestor and merged with that ancestor's children of the same function).
    ///
    /// `decide` is called once for each node that is not under a dropped one, in pre-order.
    /// When it keeps every node the tree is copied as it is (a stage that changes nothing
    /// costs no rebuilding: a million-node tree takes a third of a second to rebuild).
    pub fn rebuild(&self, decide: impl FnMut(&CallTree, NodeId) -> Keep) -> CallTree {
        self.rebuilt(decide).unwrap_or_else(|| self.clone())
    }

    /// [`CallTree::rebuild`] of a tree it takes: when every node is kept the tree itself is
    /// handed back, no copy.
    pub fn rebuild_into(self, decide: impl FnMut(&CallTree, NodeId) -> Keep) -> CallTree {
        self.rebuilt(decide).unwrap_or(self)
    }

    /// The rebuilt tree; `None` when `decide` keeps every node.
    fn rebuilt(&self, mut decide: impl FnMut(&CallTree, NodeId) -> Keep) -> Option<CallTree> {
        // Nodes under a dropped one are never asked about; they stay `Drop`.
        let mut decision = vec![Keep::Drop; self.nodes.len()];
        let mut changed = false;
        let mut stack: Vec<NodeId> = self.nodes[0].children.iter().rev().copied().collect();
        while let Some(src) = stack.pop() {
            let d = decide(self, src);
            decision[src as usize] = d;
            changed |= d != Keep::Keep;
            if d != Keep::Drop {
                stack.extend(self.nodes[src as usize].children.iter().rev());
            }
        }
        if !changed {
            return None;
        }
        let mut b = TreeBuilder::with_capacity(self.funcs.clone(), self.nodes.len());
        b.tree.ids = self.ids.clone();
        // (source node, destination parent)
        let mut stack: Vec<(NodeId, NodeId)> = self.nodes[0].children.iter().rev().map(|&c| (c, ROOT)).collect();
        while let Some((src, dst_parent)) = stack.pop() {
            let n = &self.nodes[src as usize];
            let dst = match decision[src as usize] {
                Keep::Drop => continue,
                Keep::Splice => dst_parent,
                Keep::Keep => {
                    let d = b.node_like(dst_parent, n.func, n.recursive);
                    let dn = &mut b.tree.nodes[d as usize];
                    dn.count += n.count;
                    dn.resumes += n.resumes;
                    dn.time_ns += n.time_ns;
                    dn.via_import |= n.via_import;
                    d
                }
            };
            stack.extend(n.children.iter().rev().map(|&c| (c, dst)));
        }
        Some(b.finish())
    }
}

/// What [`CallTree::rebuild`] does with a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    Keep,
    /// Remove the node and everything under it.
    Drop,
    /// Remove the node only: its children move up to the nearest kept ancestor.
    Splice,
}

/// Builds a tree node by node, merging a parent's calls to the same function.
pub struct TreeBuilder {
    pub tree: CallTree,
    children: ChildIndex,
}

/// A parent's child for a function (and a `↻` marker apart from the ordinary child: a parent
/// may have both an ordinary `f` child and an `f ↻` marker), found without one table of every
/// node of the tree: a parent with few children is searched in its `children` list (most
/// parents, and the same child called again in a loop is its last one); one with more has a
/// table of its own, small enough to stay in cache while its calls are folded (a table of every
/// node missed the cache on most calls of a two-million-node tree).
#[derive(Default)]
struct ChildIndex {
    /// Parent -> index into `tables`, for parents with more than [`ChildIndex::SCAN`] children.
    wide: FxHashMap<NodeId, u32>,
    /// (function << 1 | recursive) -> child.
    tables: Vec<FxHashMap<u64, NodeId>>,
}

impl ChildIndex {
    /// Children searched in the list; past this many a parent gets its table.
    const SCAN: usize = 8;

    fn key(func: u32, recursive: bool) -> u64 {
        ((func as u64) << 1) | recursive as u64
    }

    fn find(&self, nodes: &[Node], parent: NodeId, func: u32, recursive: bool) -> Option<NodeId> {
        let children = &nodes[parent as usize].children;
        // The last child first: a loop calls it again and again.
        let is = |c: &NodeId| {
            let n = &nodes[*c as usize];
            n.func == func && n.recursive == recursive
        };
        if let Some(&last) = children.last().filter(|c| is(c)) {
            return Some(last);
        }
        if children.len() <= Self::SCAN {
            return children.iter().copied().find(|c| is(c));
        }
        let t = *self.wide.get(&parent)?;
        self.tables[t as usize].get(&Self::key(func, recursive)).copied()
    }

    /// `child` was just added to `parent`'s children.
    fn added(&mut self, nodes: &[Node], parent: NodeId, child: NodeId) {
        let children = &nodes[parent as usize].children;
        if children.len() <= Self::SCAN {
            return;
        }
        let t = match self.wide.get(&parent) {
            Some(&t) => t as usize,
            None => {
                // The parent's children pass the list's size: they move into a table.
                let t = self.tables.len();
                self.wide.insert(parent, t as u32);
                let mut m = FxHashMap::default();
                m.reserve(2 * Self::SCAN);
                for &c in &children[..children.len() - 1] {
                    let n = &nodes[c as usize];
                    m.insert(Self::key(n.func, n.recursive), c);
                }
                self.tables.push(m);
                t
            }
        };
        let n = &nodes[child as usize];
        self.tables[t].insert(Self::key(n.func, n.recursive), child);
    }
}

impl TreeBuilder {
    pub fn new(funcs: Arc<Vec<Function>>) -> TreeBuilder {
        TreeBuilder { tree: CallTree::new(funcs), children: ChildIndex::default() }
    }

    /// [`TreeBuilder::new`] with room for `nodes` nodes: a rebuild knows its size at most.
    pub fn with_capacity(funcs: Arc<Vec<Function>>, nodes: usize) -> TreeBuilder {
        let mut b = TreeBuilder::new(funcs);
        b.tree.nodes.reserve(nodes);
        b
    }

    /// The child of `parent` for `func`, created (after the existing children) if missing.
    #[inline]
    pub fn child(&mut self, parent: NodeId, func: u32) -> NodeId {
        self.get_or_add(parent, func, false)
    }

    /// The `↻` re-entry marker of `parent` for `func` ([`Node::recursive`]), created if missing.
    pub fn marker(&mut self, parent: NodeId, func: u32) -> NodeId {
        self.get_or_add(parent, func, true)
    }

    /// [`TreeBuilder::marker`] or [`TreeBuilder::child`], as `recursive` says: for copying
    /// nodes from another tree.
    pub fn node_like(&mut self, parent: NodeId, func: u32, recursive: bool) -> NodeId {
        self.get_or_add(parent, func, recursive)
    }

    #[inline]
    fn get_or_add(&mut self, parent: NodeId, func: u32, recursive: bool) -> NodeId {
        let nodes = &mut self.tree.nodes;
        if let Some(c) = self.children.find(nodes, parent, func, recursive) {
            return c;
        }
        let id = nodes.len() as NodeId;
        let depth = nodes[parent as usize].depth + 1;
        nodes.push(Node { func, parent, children: Vec::new(), count: 0, resumes: 0, time_ns: 0, recursive, depth, via_import: false });
        nodes[parent as usize].children.push(id);
        self.children.added(nodes, parent, id);
        id
    }

    pub fn node_mut(&mut self, id: NodeId) -> &mut Node {
        &mut self.tree.nodes[id as usize]
    }

    pub fn finish(self) -> CallTree {
        self.tree
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::symbols::Language;

    fn funcs(names: &[&str]) -> Arc<Vec<Function>> {
        Arc::new(
            names
                .iter()
                .map(|n| Function {
                    language: Language::Python,
                    name: n.to_string(),
                    qualname: n.to_string(),
                    file: None,
                    first_line: None,
                    last_line: None,
                    object: None,
                    program_library: false,
                    program_crate: false,
                    dependency_crate: false,
                    std_dependency: false,
                    rust_symbol: false,
                    made_in: None,
                    inlined: false,
                })
                .collect(),
        )
    }

    #[test]
    fn builder_merges_same_function_under_one_parent() {
        let mut b = TreeBuilder::new(funcs(&["a", "b"]));
        let a = b.child(ROOT, 0);
        let b1 = b.child(a, 1);
        let b2 = b.child(a, 1);
        assert_eq!(b1, b2);
        let t = b.finish();
        assert_eq!(t.len(), 2);
        assert_eq!(t.node(b1).depth, 2);
    }

    /// The child lookup (a list for few children, a table per parent past
    /// [`ChildIndex::SCAN`]) gives the node a map of every (parent, function, marker) gives,
    /// and creates nodes in the same order, whatever the interleaving of parents, functions,
    /// markers and repeats: parents that grow past the list while others stay small.
    #[test]
    fn child_lookup_is_one_node_per_parent_function_and_marker() {
        let mut b = TreeBuilder::new(funcs(&["a"; 40]));
        let mut reference: std::collections::HashMap<(NodeId, u32, bool), NodeId> = std::collections::HashMap::new();
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |m: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % m
        };
        for step in 0..20_000 {
            let nodes = b.tree.nodes.len() as u64;
            // Mostly the few first nodes (wide parents), sometimes any node (small ones).
            let parent = if step % 3 == 0 { next(nodes) } else { next(nodes.min(4)) } as NodeId;
            let func = if step % 5 == 0 { next(3) } else { next(40) } as u32;
            let recursive = next(7) == 0;
            let expected = reference.get(&(parent, func, recursive)).copied().unwrap_or(b.tree.nodes.len() as NodeId);
            let got = b.node_like(parent, func, recursive);
            assert_eq!(got, expected, "step {step}: parent {parent} func {func} recursive {recursive}");
            reference.insert((parent, func, recursive), got);
            let n = b.tree.node(got);
            assert_eq!((n.parent, n.func, n.recursive), (parent, func, recursive));
        }
        let t = b.finish();
        assert!(t.nodes.iter().any(|n| n.children.len() > 3 * ChildIndex::SCAN), "some parents grew past the list");
        for (i, n) in t.nodes.iter().enumerate().skip(1) {
            assert!(t.node(n.parent).children.contains(&(i as NodeId)));
        }
    }

    #[test]
    fn subtree_sizes_count_every_node_below() {
        // root -> a -> (b -> c, d) ; root -> e
        let mut b = TreeBuilder::new(funcs(&["a", "b", "c", "d", "e"]));
        let a = b.child(ROOT, 0);
        let bb = b.child(a, 1);
        let c = b.child(bb, 2);
        let d = b.child(a, 3);
        let e = b.child(ROOT, 4);
        let s = b.finish().subtree_sizes();
        assert_eq!((s[ROOT as usize], s[a as usize], s[bb as usize], s[c as usize], s[d as usize], s[e as usize]), (6, 4, 2, 1, 1, 1));
    }

    #[test]
    fn rebuild_splice_merges_lifted_children() {
        // root -> a -> h -> b ; a -> b  : splicing h merges both b under a.
        let mut b = TreeBuilder::new(funcs(&["a", "h", "b", "c"]));
        let a = b.child(ROOT, 0);
        let h = b.child(a, 1);
        let hb = b.child(h, 2);
        b.node_mut(hb).count = 2;
        let hbc = b.child(hb, 3);
        b.node_mut(hbc).count = 1;
        let ab = b.child(a, 2);
        b.node_mut(ab).count = 3;
        let t = b.finish();
        let r = t.rebuild(|t, n| if t.node(n).func == 1 { Keep::Splice } else { Keep::Keep });
        let names: Vec<(String, u64, u32)> =
            r.preorder().iter().map(|&n| (r.func(n).unwrap().name.clone(), r.node(n).count, r.node(n).depth)).collect();
        assert_eq!(names, vec![("a".into(), 0, 1), ("b".into(), 5, 2), ("c".into(), 1, 3)]);
        let d = t.rebuild(|t, n| if t.node(n).func == 1 { Keep::Drop } else { Keep::Keep });
        assert_eq!(d.len(), 2);
    }
}
