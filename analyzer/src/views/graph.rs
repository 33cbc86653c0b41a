//! `slice graph`: the function-level call graph of a run, every calling context merged: one
//! vertex per function, an edge from caller to callee weighted by the number of calls (summed
//! over every place in the call trees, of every thread and process, where that caller called
//! that callee). Written as Graphviz DOT.
//!
//! The tree's recursion cut shows as a cycle: the first recursive call is an edge back to a
//! function already on the path. Functions on a cycle (mutually recursive) are drawn in a
//! different colour, found with Kosaraju's strongly-connected components (petgraph's iterative
//! version: its Tarjan recurses once per vertex on a path, and a deep call chain overflows the stack).

use super::{func_of, location, FrameNames, View};
use crate::calltree::ROOT;
use crate::symbols::FuncId;
use petgraph::algo::kosaraju_scc;
use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::visit::EdgeRef;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;
use trace_format::escape;

/// A vertex: one function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FuncVertex {
    /// [`crate::symbols::Function::key`].
    pub key: String,
    /// Display name ([`FrameNames`]).
    pub name: String,
    pub location: String,
    /// Calls of the function, all contexts.
    pub calls: u64,
    /// Called from the top of a thread (no caller recorded).
    pub entry: bool,
}

/// The call graph: vertices are functions, edge weights call counts.
pub type CallGraph = DiGraph<FuncVertex, u64>;

/// Build the call graph of views (all their trees merged).
pub fn build(views: &[View], names: &FrameNames, cwd: &Path) -> CallGraph {
    let mut g = CallGraph::new();
    let mut index: HashMap<FuncId, NodeIndex> = HashMap::new();
    let mut edges: HashMap<(NodeIndex, NodeIndex), u64> = HashMap::new();
    for v in views {
        let t = &v.tree;
        // Vertex of each tree node.
        let mut vx: Vec<NodeIndex> = vec![NodeIndex::end(); t.nodes.len()];
        for n in t.preorder() {
            let i = *index.entry(t.func_id(n)).or_insert_with(|| {
                let f = func_of(t, n);
                g.add_node(FuncVertex {
                    key: f.key(),
                    name: names.name(t, n).into_owned(),
                    location: location(&f, cwd),
                    calls: 0,
                    entry: false,
                })
            });
            vx[n as usize] = i;
            let node = t.node(n);
            g[i].calls += node.count;
            if node.parent == ROOT {
                g[i].entry = true;
            } else {
                *edges.entry((vx[node.parent as usize], i)).or_default() += node.count;
            }
        }
    }
    let mut edges: Vec<((NodeIndex, NodeIndex), u64)> = edges.into_iter().collect();
    edges.sort_unstable();
    for ((a, b), w) in edges {
        g.add_edge(a, b, w);
    }
    g
}

/// A DOT string literal.
fn quote(s: &str) -> String {
    let mut q = String::with_capacity(s.len() + 2);
    q.push('"');
    for c in s.chars() {
        match c {
            '"' => q.push_str("\\\""),
            '\\' => q.push_str("\\\\"),
            '\n' => q.push_str("\\n"),
            '\r' => {}
            c => q.push(c),
        }
    }
    q.push('"');
    q
}

/// The graph as Graphviz DOT. `title`: the graph's label (the traced command). Names, locations,
/// keys and the title are shown with control characters escaped ([`escape::line`]): the
/// label's own line breaks are the only ones.
pub fn to_dot(g: &CallGraph, title: &str) -> String {
    let mut on_cycle = vec![false; g.node_count()];
    for scc in kosaraju_scc(g) {
        let self_loop = scc.len() == 1 && g.contains_edge(scc[0], scc[0]);
        if scc.len() > 1 || self_loop {
            for v in scc {
                on_cycle[v.index()] = true;
            }
        }
    }
    let max_edge = g.edge_weights().copied().max().unwrap_or(1).max(1) as f64;
    let mut s = String::new();
    let _ = writeln!(s, "digraph calls {{");
    let _ = writeln!(s, "  label={};", quote(&escape::line(title)));
    let _ = writeln!(s, "  labelloc=t;");
    let _ = writeln!(s, "  node [shape=box, style=\"rounded,filled\", fillcolor=\"#f5f5f5\", fontname=\"monospace\"];");
    let _ = writeln!(s, "  edge [fontname=\"monospace\"];");
    for i in g.node_indices() {
        let v = &g[i];
        let mut label = v.name.clone();
        if !v.location.is_empty() && !v.name.contains(&v.location) {
            label.push('\n');
            label.push_str(&v.location);
        }
        label.push_str(&format!("\n×{}", v.calls));
        let mut attrs = format!("label={}, tooltip={}", quote(&label), quote(&escape::line(&v.key)));
        if on_cycle[i.index()] {
            attrs.push_str(", fillcolor=\"#fde2c8\", color=\"#d9822b\"");
        }
        if v.entry {
            attrs.push_str(", peripheries=2");
        }
        let _ = writeln!(s, "  f{} [{attrs}];", i.index());
    }
    for e in g.edge_references() {
        let w = *e.weight();
        // 1 to 5 points, logarithmic in the call count.
        let pen = 1.0 + 4.0 * ((w as f64).ln_1p() / max_edge.ln_1p());
        let _ = writeln!(
            s,
            "  f{} -> f{} [label={}, weight={w}, penwidth={pen:.1}];",
            e.source().index(),
            e.target().index(),
            quote(&format!("×{w}"))
        );
    }
    s.push_str("}\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{Ev::C, Ev::R};
    use crate::views::tests::tree_of;

    #[test]
    fn edges_sum_calls_over_contexts_and_cycles_are_marked() {
        // main -> a -> log ; main -> b -> log x2 ; main -> a -> b -> a (recursive)
        let t = tree_of(
            &["main", "a", "b", "log \"x\""],
            &["/p/m.py", "/p/m.py", "/p/m.py", "/p/m.py"],
            &[C(0), C(1), C(3), R, R, C(2), C(3), R, C(3), R, R, C(1), C(2), C(1), R, R, R, R],
        );
        let views = vec![View::new("t", "t", t)];
        let names = FrameNames::new(views.iter().map(|v| &v.tree), Path::new("/p"));
        let g = build(&views, &names, Path::new("/p"));
        assert_eq!(g.node_count(), 4);
        let by_name = |n: &str| g.node_indices().find(|&i| g[i].name == n).unwrap();
        let (main, a, b, log) = (by_name("main"), by_name("a"), by_name("b"), by_name("log \"x\""));
        let w = |x, y| g.find_edge(x, y).map(|e| g[e]);
        assert_eq!(w(main, a), Some(2));
        assert_eq!(w(main, b), Some(1));
        assert_eq!(w(a, log), Some(1));
        assert_eq!(w(b, log), Some(2));
        assert_eq!(w(a, b), Some(1));
        assert_eq!(w(b, a), Some(1));
        assert_eq!(g[log].calls, 3);
        assert!(g[main].entry && !g[a].entry);
        let dot = to_dot(&g, "python3 \"m.py\"");
        assert!(dot.starts_with("digraph calls {\n  label=\"python3 \\\"m.py\\\"\";"), "{dot}");
        assert!(dot.contains("label=\"log \\\"x\\\"\\nm.py:1\\n×3\""), "{dot}");
        // a and b call each other: both on a cycle; main and log are not.
        let line = |i: NodeIndex| dot.lines().find(|l| l.starts_with(&format!("  f{} [", i.index()))).unwrap().to_string();
        assert!(line(a).contains("#fde2c8") && line(b).contains("#fde2c8"));
        assert!(!line(main).contains("#fde2c8") && !line(log).contains("#fde2c8"));
        assert!(dot.contains(&format!("  f{} -> f{} [label=\"×2\", weight=2,", b.index(), log.index())));
    }
}
