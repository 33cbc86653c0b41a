//! Native ranking: which compiled functions did the work of a run. A Rust or C program's
//! trace holds, beside the code that decides things, many functions that only answer a
//! constant (`Flag::name_long` returning `"count"`) or are one of a hundred implementations
//! of the same trait method. They are short, so they score well on the question's words, and
//! under a budget they crowd out the function that decides (a walk's `matched_ignore`).
//!
//! Applied to the relevance of native functions only, after the lexical score and the tree's
//! evidence, before test evidence ([`crate::prompt`]'s ranking); Python functions keep their
//! scores. Three rules, from the run and the function's text alone:
//!
//! - **distinctness**: when more than [`FAMILY_FREE`] implementations of one trait method ran
//!   (`<X as m::Flag>::name_long` for each of a hundred `X`), they are boilerplate of one
//!   shape: each of the `n` keeps `FAMILY_FREE/n` of its score. A few implementations (a sink
//!   and the `&mut` forwarding impl of its trait) are distinct code and keep theirs;
//! - **accessors**: a function whose whole source is at most [`ACCESSOR_LINES`] lines and that
//!   called nothing keeps [`ACCESSOR_SHARE`] of its score;
//! - **work**: a function's score grows by up to [`WORK_WEIGHT`] times itself with the work it
//!   did: how many distinct functions it called and its own (self) time, each against the
//!   largest of the trace, on a log scale. So among functions the question matches alike, the
//!   one that did more comes first; a function the question does not match stays at 0.

use crate::prompt::{FuncId, Funcs, ModelTrace, SourceState};
use crate::symbols::Language;
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

/// Up to this many implementations of one trait method keep their scores.
pub const FAMILY_FREE: usize = 3;
/// A function whose source has at most this many lines (signature and closing brace
/// included) and that called nothing is an accessor: it returns a field or a constant.
pub const ACCESSOR_LINES: usize = 3;
/// The share of its score an accessor keeps.
pub const ACCESSOR_SHARE: f64 = 0.5;
/// At most this many times its score is added to a function for the work it did.
pub const WORK_WEIGHT: f64 = 1.0;

/// What the run says about one function.
#[derive(Debug, Default, Clone)]
struct Run {
    callees: HashSet<FuncId>,
    self_ns: u64,
}

/// The trait method a qualified name implements (`rg::flags::Flag::name_long` of
/// `<rg::flags::defs::Count as rg::flags::Flag>::name_long`); `None` for other names.
pub fn trait_method(qualname: &str) -> Option<String> {
    let inner = qualname.strip_prefix('<')?;
    let mut depth = 1i32;
    let bytes = inner.as_bytes();
    let mut as_at = None;
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'<' => depth += 1,
            b'>' if i == 0 || bytes[i - 1] != b'-' => {
                depth -= 1;
                if depth == 0 {
                    let trait_path = &inner[as_at? + 4..i];
                    let method = inner[i + 1..].strip_prefix("::")?;
                    return Some(format!("{}::{}", trait_path.split('<').next()?, method));
                }
            }
            b' ' if depth == 1 && inner[i..].starts_with(" as ") => as_at = Some(i),
            _ => {}
        }
    }
    None
}

/// Per function: its distinct callees and its self time, over every trace.
fn runs(n: usize, traces: &[ModelTrace]) -> Vec<Run> {
    let mut out = vec![Run::default(); n];
    for th in traces.iter().flat_map(|t| t.threads.iter()) {
        // Pre-order: the open path of (function, time of the node); a node's time is taken off
        // its caller's self time.
        let mut path: Vec<usize> = Vec::new();
        let mut child_ns = vec![0u64; th.nodes.len()];
        for (i, node) in th.nodes.iter().enumerate() {
            path.truncate(node.depth as usize);
            if let Some(&p) = path.last() {
                child_ns[p] = child_ns[p].saturating_add(node.time_ns);
                let caller = th.nodes[p].func;
                if caller != node.func && caller.index() < n {
                    out[caller.index()].callees.insert(node.func);
                }
            }
            path.push(i);
        }
        for (node, kids) in th.nodes.iter().zip(child_ns) {
            if let Some(r) = out.get_mut(node.func.index()) {
                r.self_ns = r.self_ns.saturating_add(node.time_ns.saturating_sub(kids));
            }
        }
    }
    out
}

/// Apply the three rules to the relevance of the native functions of `funcs`.
pub fn rank(funcs: &mut Funcs, traces: &[ModelTrace]) {
    if !funcs.values().any(|f| f.language == Language::Native) {
        return;
    }
    let runs = runs(funcs.len(), traces);
    let mut families: HashMap<String, usize> = HashMap::default();
    for f in funcs.values().filter(|f| f.language == Language::Native) {
        if let Some(m) = trait_method(&f.qualname) {
            *families.entry(m).or_default() += 1;
        }
    }
    let native: Vec<&Run> = funcs.values().zip(&runs).filter(|(f, _)| f.language == Language::Native).map(|(_, r)| r).collect();
    let max_callees = native.iter().map(|r| r.callees.len()).max().unwrap_or(0) as f64;
    let max_self = native.iter().map(|r| r.self_ns).max().unwrap_or(0) as f64;
    let log = |x: f64| (1.0 + x).ln();
    for (f, r) in funcs.values_mut().zip(&runs) {
        if f.language != Language::Native || f.relevance <= 0.0 {
            continue;
        }
        let mut s = f.relevance;
        if let Some(n) = trait_method(&f.qualname).and_then(|m| families.get(&m).copied()) {
            s *= (FAMILY_FREE as f64 / n.max(1) as f64).min(1.0);
        }
        let lines = match &f.source {
            SourceState::Code(e) => Some(e.code.lines().filter(|l| !l.trim().is_empty()).count()),
            _ => None,
        };
        if r.callees.is_empty() && lines.is_some_and(|l| l <= ACCESSOR_LINES) {
            s *= ACCESSOR_SHARE;
        }
        let share = |x: f64, max: f64| if max > 0.0 { log(x) / log(max) } else { 0.0 };
        let work = 0.5 * share(r.callees.len() as f64, max_callees) + 0.5 * share(r.self_ns as f64, max_self);
        s *= 1.0 + WORK_WEIGHT * work;
        // Rounded like the other scores, so the order never depends on the last bit.
        f.relevance = (s * 1e6).round() / 1e6;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::pathclass::Origin;
    use crate::prompt::{FuncInfo, ModelNode};
    use crate::source::{CodeKind, Extract};

    fn func(qualname: &str, lines: usize, relevance: f64, language: Language) -> FuncInfo {
        let code = std::iter::once("fn f() {".to_string())
            .chain((2..lines).map(|i| format!("    x{i}();")))
            .chain(["}".into()])
            .collect::<Vec<_>>()
            .join("\n");
        FuncInfo {
            key: qualname.into(),
            qualname: qualname.into(),
            language,
            file: "src/lib.rs".into(),
            line: Some(1),
            module: String::new(),
            origin: Origin::Program,
            kind: Default::default(),
            source: SourceState::Code(Extract { kind: CodeKind::Range, first_line: 1, last_line: lines as u32, code, signature: None }),
            min_depth: 1,
            first_index: 0,
            relevance,
            lexical: relevance,
            values: Vec::new(),
            not_run: None,
            spectrum: None,
        }
    }

    /// Five one-line `name` impls of a trait, matching the question better than the function
    /// that decides: after the rules the decider ranks first; a pair of impls of another trait
    /// keeps its score but for the work rule; Python functions are untouched.
    #[test]
    fn the_function_that_works_outranks_boilerplate() {
        let mut fs: Vec<FuncInfo> = (0..5).map(|i| func(&format!("<app::F{i} as app::Flag>::name"), 3, 4.0, Language::Native)).collect();
        fs.push(func("app::decide", 12, 3.0, Language::Native));
        fs.push(func("app::helper", 6, 0.0, Language::Native));
        fs.push(func("<app::Sink as app::S>::matched", 8, 2.0, Language::Native));
        fs.push(func("<&mut T as app::S>::matched", 8, 2.0, Language::Native));
        fs.push(func("py.f", 2, 4.0, Language::Python));
        let mut funcs: Funcs = fs.into_iter().collect();
        let id = |f: &Funcs, k: &str| f.id(k).expect("a function of the test");
        let mut nodes = vec![ModelNode::new(0, 0, id(&funcs, "app::decide")), ModelNode::new(1, 1, id(&funcs, "app::helper"))];
        for i in 0..5 {
            nodes.push(ModelNode::new(2 + i, 1, id(&funcs, &format!("<app::F{i} as app::Flag>::name"))));
        }
        nodes.push(ModelNode::new(7, 1, id(&funcs, "<&mut T as app::S>::matched")));
        nodes.push(ModelNode::new(8, 2, id(&funcs, "<app::Sink as app::S>::matched")));
        let t = ModelTrace::one_thread(String::new(), String::new(), String::new(), nodes);
        rank(&mut funcs, std::slice::from_ref(&t));
        let rel = |k: &str| funcs.by_key(k).map_or(f64::NAN, |f| f.relevance);
        // A flag: 3/5 for the family, half for an accessor, no work.
        assert!((rel("<app::F0 as app::Flag>::name") - 4.0 * 0.6 * ACCESSOR_SHARE).abs() < 1e-6, "{}", rel("<app::F0 as app::Flag>::name"));
        assert!(rel("app::decide") > 3.0 && rel("app::decide") > rel("<app::F0 as app::Flag>::name"), "{}", rel("app::decide"));
        assert_eq!(rel("app::helper"), 0.0, "no word of the question: stays at 0");
        assert_eq!(rel("<app::Sink as app::S>::matched"), 2.0, "two impls: distinct code, no callees, no time");
        assert!(rel("<&mut T as app::S>::matched") > 2.0, "it called the sink's method");
        assert_eq!(rel("py.f"), 4.0);
    }

    #[test]
    fn trait_methods_are_named_by_their_trait() {
        assert_eq!(trait_method("<rg::flags::defs::Count as rg::flags::Flag>::name_long").as_deref(), Some("rg::flags::Flag::name_long"));
        assert_eq!(
            trait_method("<grep_printer::summary::SummarySink<M, W> as grep_searcher::sink::Sink>::matched").as_deref(),
            Some("grep_searcher::sink::Sink::matched")
        );
        assert_eq!(trait_method("<alloc::vec::Vec<T> as core::ops::Drop>::drop").as_deref(), Some("core::ops::Drop::drop"));
        assert_eq!(trait_method("ignore::dir::Ignore::matched_ignore"), None);
        assert_eq!(trait_method("<hexyl::Printer<W>>::print_all"), None);
    }
}
