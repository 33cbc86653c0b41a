//! Ranking for the budget: the lexical score of each function for the question
//! ([`super::relevance`]), then the tree's evidence added.

use super::{relevance, FuncInfo, ModelTrace, SourceState};
use crate::pathclass::Origin;
use rustc_hash::FxHashMap as HashMap;

/// Weight of the program's own functions' lexical scores (not the standard library's, not
/// installed packages'): a user asks about their program, whose code is small beside its
/// libraries' and shares fewer words with the question than their long, documented functions
/// (pytest's `Metafunc.parametrize` outranked the test's own `add`). A function matching no
/// term stays at 0; through the tree boost its callers and callees rise too.
pub const PROGRAM_WEIGHT: f64 = 2.0;

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
            f.relevance = if f.origin == Origin::Program { s * PROGRAM_WEIGHT } else { s };
            f.lexical = f.relevance;
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

/// Weight of a function's Ochiai score ([`crate::testrun::Spectrum::ochiai`], 0 to 1) in its
/// relevance: large beside the lexical scores, so that with failing and passing tests in the
/// traces the budget keeps what goes with failure first, and the question orders functions of
/// equal suspiciousness.
pub const SPECTRUM_WEIGHT: f64 = 1000.0;

/// Add the spectrum's evidence: `relevance(f) += SPECTRUM_WEIGHT × ochiai(f)`, and its counts
/// for the prompt's note on the function.
pub(super) fn spectrum(funcs: &mut HashMap<String, FuncInfo>, s: &crate::testrun::Spectrum) {
    for (k, f) in funcs.iter_mut() {
        let o = s.ochiai(k);
        f.relevance = ((f.relevance + SPECTRUM_WEIGHT * o) * 1e6).round() / 1e6;
        if o > 0.0 && f.origin != Origin::Stdlib {
            f.spectrum = s.describe(k);
        }
    }
}

/// Weight added to a function that a shown test's failure traceback passes through (where the
/// exception was raised, and the calls on its way there): below the spectrum's, above any
/// lexical score.
pub const TRACEBACK_WEIGHT: f64 = 500.0;

/// Add [`TRACEBACK_WEIGHT`] to the functions holding a frame of a failure's traceback: the
/// frame's file is the function's display path, or ends with it after a `/` (runners give
/// paths relative to their root directory, or absolute), and its line is inside the
/// function's source.
pub(super) fn failure_frames(funcs: &mut HashMap<String, FuncInfo>, frames: &[(String, u32)]) {
    if frames.is_empty() {
        return;
    }
    for f in funcs.values_mut() {
        let SourceState::Code(e) = &f.source else { continue };
        let same_file = |file: &str| file == f.file || file.strip_suffix(f.file.as_str()).is_some_and(|head| head.ends_with('/'));
        if frames.iter().any(|(file, line)| same_file(file) && (e.first_line..=e.last_line).contains(line)) {
            f.relevance = ((f.relevance + TRACEBACK_WEIGHT) * 1e6).round() / 1e6;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::{CodeKind, Extract};
    use crate::symbols::Language;

    fn func(key: &str, file: &str, origin: Origin, code: &str) -> FuncInfo {
        FuncInfo {
            key: key.into(),
            qualname: key.into(),
            language: Language::Python,
            file: file.into(),
            line: Some(1),
            module: String::new(),
            origin,
            source: SourceState::Code(Extract {
                kind: CodeKind::Function,
                first_line: 1,
                last_line: 2,
                code: code.into(),
                signature: None,
            }),
            min_depth: 1,
            first_index: 0,
            relevance: 0.0,
            lexical: 0.0,
            values: Vec::new(),
            not_run: None,
            spectrum: None,
        }
    }

    #[test]
    fn a_failures_frames_rank_their_functions_first() {
        let mut funcs: HashMap<String, FuncInfo> = HashMap::default();
        funcs.insert("raiser".into(), func("raiser", "pkg/core.py", Origin::Program, "def raiser():\n    raise KeyError"));
        funcs.insert("other".into(), func("other", "pkg/other.py", Origin::Program, "def other():\n    pass"));
        // Absolute (unittest) and relative (pytest) frame paths both find the function.
        failure_frames(&mut funcs, &[("/home/u/proj/pkg/core.py".into(), 2)]);
        assert_eq!((funcs["raiser"].relevance, funcs["other"].relevance), (TRACEBACK_WEIGHT, 0.0));
        failure_frames(&mut funcs, &[("xpkg/core.py".into(), 2), ("pkg/core.py".into(), 9)]);
        assert_eq!(funcs["raiser"].relevance, TRACEBACK_WEIGHT, "another file, or a line outside: no boost");
    }

    #[test]
    fn the_programs_own_functions_weigh_twice() {
        let code = "def border(x):\n    return x.border";
        let mut funcs: HashMap<String, FuncInfo> = HashMap::default();
        for (key, file, origin) in [
            ("mine", "app/draw.py", Origin::Program),
            ("theirs", "site-packages/lib/draw.py", Origin::SitePackages),
            ("unrelated", "app/other.py", Origin::Program),
        ] {
            let code = if key == "unrelated" { "def other():\n    return 1" } else { code };
            funcs.insert(key.into(), func(key, file, origin, code));
        }
        score(&mut funcs, "Where is the border drawn?");
        let (mine, theirs) = (funcs["mine"].relevance, funcs["theirs"].relevance);
        assert!(theirs > 0.0, "{theirs}");
        // The paths match no term and have no length normalisation: only the weight differs.
        assert!((mine - 2.0 * theirs).abs() < 1e-5, "{mine} vs {theirs}");
        assert_eq!(funcs["unrelated"].relevance, 0.0, "no term matched: nothing to weigh");
    }
}
