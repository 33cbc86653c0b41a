//! Ranking for the budget: the lexical score of each function for the question
//! ([`super::relevance`]), then the tree's evidence added.

use super::{relevance, FuncInfo, ModelTrace, SourceState};
use crate::calltree::NodeId;
use rustc_hash::FxHashMap as HashMap;

/// Score every function for the question: one BM25F document per function (its qualified
/// name, display path and the code the prompt shows), IDF over the functions of the slice.
pub(super) fn score(funcs: &mut HashMap<String, FuncInfo>, question: &str) {
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
pub(super) fn tree_boost(funcs: &mut HashMap<String, FuncInfo>, traces: &[ModelTrace]) {
    let base: HashMap<&str, f64> = funcs.iter().map(|(k, f)| (k.as_str(), f.relevance)).collect();
    let mut best_caller: HashMap<&str, f64> = HashMap::default();
    let mut best_callee: HashMap<&str, f64> = HashMap::default();
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
