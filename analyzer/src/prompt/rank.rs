//! Ranking for the budget: the lexical score of each function for the question
//! ([`super::relevance`]), then the tree's evidence added.

use super::{relevance, FuncInfo, ModelTrace, SourceState};
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
    // Functions by index (sorted keys: nothing depends on the hash map's order).
    let mut keys: Vec<&str> = funcs.keys().map(String::as_str).collect();
    keys.sort_unstable();
    let id: HashMap<&str, usize> = keys.iter().enumerate().map(|(i, &k)| (k, i)).collect();
    let base: Vec<f64> = keys.iter().map(|&k| funcs[k].relevance).collect();
    let (mut best_caller, mut best_callee) = (vec![0.0f64; keys.len()], vec![0.0f64; keys.len()]);
    for th in traces.iter().flat_map(|t| t.threads.iter()) {
        // Pre-order: a node's caller is the last node met one level up.
        let mut path: Vec<Option<usize>> = Vec::new();
        for n in &th.nodes {
            let d = n.depth as usize;
            let me = id.get(n.key.as_str()).copied();
            let caller = if d >= 1 { path.get(d - 1).copied().flatten() } else { None };
            path.truncate(d);
            path.resize(d, None);
            path.push(me);
            let (Some(c), Some(p)) = (me, caller) else { continue };
            if p == c {
                continue;
            }
            best_caller[c] = best_caller[c].max(base[p]);
            best_callee[p] = best_callee[p].max(base[c]);
        }
    }
    let boosts: Vec<(String, f64)> = keys.iter().enumerate().map(|(i, k)| (k.to_string(), best_caller[i] + best_callee[i])).collect();
    for (k, b) in boosts {
        if let Some(f) = funcs.get_mut(&k) {
            // Rounded like the lexical scores, so the order never depends on the last bit.
            f.relevance = ((f.relevance + TREE_BOOST * b) * 1e6).round() / 1e6;
        }
    }
}
