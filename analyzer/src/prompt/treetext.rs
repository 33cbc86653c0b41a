//! The call tree as prompt text: a function's location on its first line only, and a node
//! that made the same calls as one printed earlier on one line (see `docs/prompts.md`).

use super::{DocNode, FuncId, Level, Model, ModelNode, ModelThread, NativeBlocks, Plan, SourceState, INLINED_MARK, NAME_ONLY_MARK};
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::fmt::Write as _;
use trace_format::escape;

/// Appended in the tree to a node whose calls are the same as at an earlier line of the same
/// function.
pub const SAME_AS_ABOVE: &str = " [same calls as above]";

/// A hash of what each node called: the functions below it, their recursion marks and their
/// nesting (not the node's own function, not counts or times), for nodes in pre-order with
/// their depths. Two nodes with the same hash made the same calls.
pub(super) fn calls_shapes(nodes: &[ModelNode]) -> Vec<u64> {
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
        nodes[i].func.hash(&mut whole);
        nodes[i].recursive.hash(&mut whole);
        calls[i].hash(&mut whole);
        pending[d].push(whole.finish());
    }
    calls
}

/// The subtrees printed whole so far in a prompt ([`Model::tree_text`]): by what they called,
/// the node's function and the number of the tree it is in.
pub(super) struct Shapes<'a> {
    pub seen: HashMap<u64, (FuncId, usize)>,
    /// Every tree's name in the prompt, as its heading gives it ([`Model::tree_names`]).
    pub names: &'a [String],
    /// The number of the tree being laid out.
    pub tree: usize,
    /// Whether a node was printed as the same calls as an earlier one.
    pub same: bool,
}

impl Model {
    /// A thread's tree as text (`vis`: [`Plan::visible`] of its nodes). A function's `(file:line)` is given on its first line in the
    /// prompt (`located` remembers them across threads and runs); later lines name it only,
    /// unless another function of the prompt has the same qualified name. With `sources` (the
    /// layout shows source blocks; the native blocks shown, see [`Model::inside_shown`]), a
    /// function whose source block is shown gets no location in the tree at all: the block's
    /// heading gives its file and lines.
    ///
    /// With `shapes` (layouts that show each source once), a node that made the same calls as
    /// a node printed whole earlier in the prompt (same functions, same nesting; counts may
    /// differ) is printed alone, marked [`SAME_AS_ABOVE`] when that node is the same function,
    /// `[same calls as `f`]` otherwise: many sibling subtrees of one shape take a line each.
    /// [`Shapes`] knows which tree each subtree printed whole is in: a reference into another
    /// tree (another test's, the part of an earlier test's, another thread's or run's) names
    /// that tree, so that it says where the calls are in the prompt that shows them.
    pub(super) fn tree_text(
        &self,
        th: &ModelThread,
        vis: &[(bool, u32)],
        plan: &Plan,
        located: &mut HashSet<FuncId>,
        sources: Option<&NativeBlocks>,
        mut shapes: Option<&mut Shapes>,
    ) -> (String, Vec<DocNode>) {
        let mut out = String::new();
        let mut nodes = Vec::new();
        let calls = th.calls_shapes();
        // shown_before[i]: shown nodes among the first i.
        let mut shown_before = vec![0usize; th.nodes.len() + 1];
        for (i, v) in vis.iter().enumerate() {
            shown_before[i + 1] = shown_before[i] + v.0 as usize;
        }
        let mut skip_to = 0usize;
        for (i, (n, &(shown, hidden))) in th.nodes.iter().zip(vis).enumerate() {
            if !shown || i < skip_to {
                continue;
            }
            let end = i + 1 + n.descendants;
            let mut same: Option<String> = None;
            if let Some(Shapes { seen, names: trees, tree, same: any_same }) = shapes.as_deref_mut() {
                let tree = *tree;
                let whole = shown_before[end.min(th.nodes.len())] - shown_before[i] == n.descendants + 1;
                if n.descendants > 0 && whole {
                    match seen.get(&calls[i]) {
                        Some(&(k, at)) => {
                            let what = match (self.funcs.get(k), self.funcs.get(n.func)) {
                                _ if k == n.func => "above".to_string(),
                                // Another function of the same name (each doctest example's
                                // `<module>`): its place tells them apart.
                                (Some(f), Some(own)) if f.qualname == own.qualname => format!(
                                    "{} ({})",
                                    escape::code_span(&f.qualname),
                                    escape::line(&match f.line {
                                        Some(l) => format!("{}:{l}", f.file),
                                        None => f.file.clone(),
                                    })
                                ),
                                (f, _) => escape::code_span(f.map_or("", |f| f.qualname.as_str())),
                            };
                            same = Some(match trees.get(at).filter(|_| at != tree) {
                                Some(name) => format!(" [same calls as {what}, in {}]", escape::code_span(name)),
                                None => format!(" [same calls as {what}]"),
                            });
                        }
                        None => {
                            seen.insert(calls[i], (n.func, tree));
                        }
                    }
                    if same.is_some() {
                        skip_to = end;
                        *any_same = true;
                    }
                }
            }
            let f = &self.funcs[n.func];
            // At most MAX_INDENT levels of indentation; deeper lines say their depth.
            for _ in 0..crate::views::indent_levels(n.depth) {
                out.push_str("  ");
            }
            out.push_str(&crate::views::depth_mark(n.depth));
            out.push_str(&escape::line(&f.qualname));
            if n.inlined {
                out.push_str(INLINED_MARK);
            }
            let level = plan.level(n.func);
            // (A closure whose code lies inside its shown parent's block has no block of its
            // own: its line points into the parent's.)
            let in_heading = sources.is_some_and(|blocks| {
                level != Level::Name && matches!(f.source, SourceState::Code(_)) && !self.inside_shown(n.func, blocks)
            });
            if (!in_heading && located.insert(n.func)) || self.funcs.ambiguous(n.func) {
                let file = escape::line(&f.file);
                match f.line {
                    Some(l) if !file.is_empty() => {
                        let _ = write!(out, "  ({file}:{l})");
                    }
                    _ if !file.is_empty() => {
                        let _ = write!(out, "  ({file})");
                    }
                    _ => {}
                }
            }
            // (An inlined function's count is of the probes that fired and the calls its code made,
            // not of calls of it.)
            if n.count > 1 && !n.inlined {
                let _ = write!(out, " ×{}", n.count);
            }
            if n.resumes > 0 {
                let _ = write!(out, " (+{} resume{})", n.resumes, if n.resumes == 1 { "" } else { "s" });
            }
            if n.recursive {
                out.push_str(" ↻ recursive");
            }
            if level == Level::Name && matches!(f.source, SourceState::Code(_) | SourceState::Unavailable(_)) {
                out.push_str(NAME_ONLY_MARK);
            }
            if let Some(m) = &same {
                out.push_str(m);
            }
            out.push('\n');
            if hidden > 0 && same.is_none() {
                for _ in 0..crate::views::indent_levels(n.depth + 1) {
                    out.push_str("  ");
                }
                let _ = writeln!(out, "… {hidden} more {} below (elided to fit the budget)", if hidden == 1 { "call" } else { "calls" });
            }
            nodes.push(DocNode {
                id: n.id,
                parent: n.parent,
                depth: n.depth,
                function: f.key.clone(),
                func: n.func,
                count: n.count,
                resumes: n.resumes,
                time_ns: n.time_ns,
                recursive: n.recursive,
                level,
                inlined: n.inlined,
            });
        }
        while out.ends_with('\n') {
            out.pop();
        }
        (out, nodes)
    }
}
