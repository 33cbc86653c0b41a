//! Small functions ride with the function that leads to them: in the budget's priority order, a
//! function whose whole source is a few short lines comes right after the best-ranked function
//! that calls it, or that the same caller calls on the same class (a dispatcher's `test`
//! before `run`); a small constructor comes right after the best-ranked method of its class.
//! It costs a few dozen tokens and says what the call did, where the lexical ranking alone
//! leaves it far down (it shares no words with the question: a constructor that stores a
//! value, a predicate that applies a pattern).

use super::{FuncId, FuncInfo, Funcs, ModelTrace, SourceState};

/// A function rides when its source has at most this many lines of code ([`small`])...
pub const RIDER_MAX_LINES: usize = 4;
/// ... and at most this many characters (about 60 tokens).
pub const RIDER_MAX_CHARS: usize = 240;
/// At most this many riders follow one function (the best-ranked first), so a function that
/// calls many small ones does not push the rest of the ranking down by more than a few places.
pub const RIDERS_PER_ANCHOR: usize = 3;

/// Whether `f` is small enough to ride: at most [`RIDER_MAX_LINES`] lines of code and
/// [`RIDER_MAX_CHARS`] characters of them, not counting blank lines and a Python function's
/// comment lines (they say nothing the call did), and at most twice that in all (what it costs).
fn small(f: &FuncInfo) -> bool {
    match &f.source {
        SourceState::Code(e) => {
            let python = f.language == crate::symbols::Language::Python;
            let code = e.code.lines().filter(|l| {
                let t = l.trim_start();
                let comment = python && t.starts_with('#');
                !t.is_empty() && !comment
            });
            let (lines, chars) = code.fold((0, 0), |(n, c), l| (n + 1, c + l.len() + 1));
            f.lexical > 0.0 && lines <= RIDER_MAX_LINES && chars <= RIDER_MAX_CHARS + 1 && e.code.len() <= 2 * RIDER_MAX_CHARS
        }
        _ => false,
    }
}

/// Whether `f` is a Python constructor (`__init__`, `__new__`, `__post_init__`).
fn constructor(f: &FuncInfo) -> bool {
    f.language == crate::symbols::Language::Python
        && matches!(f.qualname.rsplit('.').next(), Some("__init__" | "__new__" | "__post_init__"))
}

/// The class part of a qualified name (`OListProcessor` of `OListProcessor.test`,
/// `ns::Box` of `ns::Box::get`), if it names a method; not for nested functions
/// (`f.<locals>.g`).
fn class_of(qualname: &str) -> Option<&str> {
    let cut = qualname.rfind("::").or_else(|| qualname.rfind('.'))?;
    let class = &qualname[..cut];
    (!class.is_empty() && !class.ends_with("<locals>")).then_some(class)
}

/// `ranking` (most important first) with each small function moved to just after its
/// best-ranked anchor when that anchor is ranked above it: a function that calls it, or one
/// of the same class (and file) that the same caller calls. Riders never anchor others. Each
/// function comes with the anchor it rides with (`None` for a function in its own place).
pub(super) fn with_anchors(ranking: Vec<FuncId>, funcs: &Funcs, traces: &[ModelTrace]) -> Vec<(FuncId, Option<FuncId>)> {
    // Ranking position per function id.
    let mut pos: Vec<Option<usize>> = vec![None; funcs.len()];
    for (i, k) in ranking.iter().enumerate() {
        if let Some(p) = pos.get_mut(k.index()) {
            *p = Some(i);
        }
    }
    let is_small: Vec<bool> = ranking.iter().map(|&k| funcs.get(k).is_some_and(small)).collect();
    if !is_small.iter().any(|&s| s) {
        return ranking.into_iter().map(|k| (k, None)).collect();
    }
    let class: Vec<Option<(&str, &str)>> =
        ranking.iter().map(|&k| funcs.get(k).and_then(|f| Some((f.file.as_str(), class_of(&f.qualname)?)))).collect();
    // Best (smallest) anchor position per small function.
    let mut anchor: Vec<usize> = vec![usize::MAX; ranking.len()];
    let mut offer = |rider: usize, by: usize| {
        if is_small[rider] && !is_small[by] && by < rider {
            anchor[rider] = anchor[rider].min(by);
        }
    };
    for th in traces.iter().flat_map(|t| t.threads.iter()) {
        // Pre-order: a node's caller is the last node met one level up; per open caller, the
        // ranking positions of what it called so far.
        let mut path: Vec<Option<usize>> = Vec::new();
        let mut called: Vec<Vec<usize>> = Vec::new();
        for n in &th.nodes {
            let d = n.depth as usize;
            let me = pos.get(n.func.index()).copied().flatten();
            path.truncate(d);
            path.resize(d, None);
            called.truncate(d + 1);
            called.resize_with(d + 1, Vec::new);
            let caller = if d >= 1 { path[d - 1] } else { None };
            path.push(me);
            called.push(Vec::new());
            let Some(me) = me else { continue };
            if let Some(cls) = class[me] {
                if let Some(c) = caller.filter(|&c| class[c] == Some(cls)) {
                    offer(me, c);
                }
                for &s in &called[d] {
                    if class[s] == Some(cls) {
                        offer(me, s);
                        offer(s, me);
                    }
                }
            }
            called[d].push(me);
        }
    }
    // A small constructor rides with the best-ranked method of its class, wherever the object
    // was built: it sets the state the method reads (h11's `ChunkedReader.__init__`, which
    // the test's helper called, and `__call__`, which a reader loop called: the fix changed
    // both; the constructor ranked 17th, name only at 4,000 tokens).
    for (r, &k) in ranking.iter().enumerate() {
        if !is_small[r] || !funcs.get(k).is_some_and(constructor) {
            continue;
        }
        if let Some(by) = (0..r).find(|&by| !is_small[by] && class[by].is_some() && class[by] == class[r]) {
            offer(r, by);
        }
    }
    // Riders per anchor, best-ranked first, at most RIDERS_PER_ANCHOR each.
    let mut riders: Vec<Vec<usize>> = vec![Vec::new(); ranking.len()];
    for (r, &a) in anchor.iter().enumerate() {
        if a != usize::MAX && riders[a].len() < RIDERS_PER_ANCHOR {
            riders[a].push(r);
        }
    }
    let moved: Vec<bool> = {
        let mut m = vec![false; ranking.len()];
        riders.iter().flatten().for_each(|&r| m[r] = true);
        m
    };
    let mut out = Vec::with_capacity(ranking.len());
    for i in 0..ranking.len() {
        if moved[i] {
            continue;
        }
        out.push((ranking[i], None));
        out.extend(riders[i].iter().map(|&r| (ranking[r], Some(ranking[i]))));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::ModelNode;
    use super::*;
    use crate::pathclass::Origin;
    use crate::source::{CodeKind, Extract};
    use crate::symbols::Language;

    /// A function of `file` with `lines` lines of code and its own lexical score.
    fn func(qualname: &str, file: &str, lines: usize, lexical: f64) -> FuncInfo {
        let code = std::iter::once(format!("def {}():", qualname.rsplit('.').next().unwrap_or(qualname)))
            .chain((1..lines).map(|i| format!("    x{i} = {i}")))
            .collect::<Vec<_>>()
            .join("\n");
        FuncInfo {
            key: qualname.into(),
            qualname: qualname.into(),
            language: Language::Python,
            file: file.into(),
            line: Some(1),
            module: String::new(),
            origin: Origin::SitePackages,
            kind: Default::default(),
            source: SourceState::Code(Extract { kind: CodeKind::Function, first_line: 1, last_line: lines as u32, code, signature: None }),
            min_depth: 1,
            first_index: 0,
            relevance: lexical,
            lexical,
            values: Vec::new(),
            not_run: None,
            spectrum: None,
        }
    }

    /// One thread whose pre-order nodes are (depth, key), and the ranking (keys) with riders.
    fn order(ranking: &[&str], funcs: &[FuncInfo], nodes: &[(u32, &str)]) -> Vec<String> {
        let funcs: Funcs = funcs.iter().cloned().collect();
        let id = |k: &str| funcs.id(k).expect("a function of the test");
        let nodes = nodes.iter().enumerate().map(|(i, &(depth, key))| ModelNode::new(i as u32, depth, id(key))).collect();
        let t = ModelTrace::one_thread(String::new(), String::new(), String::new(), nodes);
        let out = with_anchors(ranking.iter().map(|&k| id(k)).collect(), &funcs, std::slice::from_ref(&t));
        out.into_iter().map(|(k, _)| funcs[k].key.to_string()).collect()
    }

    /// A dispatcher calls `test` then `run` of each processor: the small `test` of the
    /// processor whose `run` ranks high comes right after it; another class's does not move.
    #[test]
    fn a_small_method_called_beside_a_ranked_one_of_its_class_follows_it() {
        let funcs = [
            func("parse", "p.py", 10, 1.0),
            func("Proc.test", "p.py", 2, 0.3),
            func("Proc.run", "p.py", 20, 5.0),
            func("Other.test", "p.py", 2, 0.4),
            func("Other.go", "p.py", 20, 0.2),
            func("Mid.work", "p.py", 20, 2.0),
        ];
        let t = [(0, "parse"), (1, "Other.test"), (1, "Other.go"), (1, "Proc.test"), (1, "Proc.run"), (1, "Mid.work")];
        let ranking = ["Proc.run", "Mid.work", "parse", "Other.test", "Proc.test", "Other.go"];
        // Other.test's anchor (Other.go) ranks below it: it stays.
        assert_eq!(order(&ranking, &funcs, &t), ["Proc.run", "Proc.test", "Mid.work", "parse", "Other.test", "Other.go"]);
    }

    /// A constructor that a ranked classmethod of its class calls follows it; a small function
    /// of another class called by it does not ride (that would be any helper), nor does one
    /// that matches no word of the question, nor a long one.
    #[test]
    fn a_small_callee_of_the_same_class_follows_its_caller() {
        let funcs = [
            func("Elem.create", "m.py", 16, 3.0),
            func("Elem.__init__", "m.py", 3, 0.9),
            func("Elem.reset", "m.py", 2, 0.0),
            func("Elem.long", "m.py", 9, 0.5),
            func("Seg.line", "s.py", 2, 0.8),
            func("Elem.create2", "other.py", 16, 2.5),
            func("unrelated", "m.py", 20, 1.0),
        ];
        let t = [(0, "Elem.create"), (1, "Elem.__init__"), (1, "Elem.reset"), (1, "Elem.long"), (1, "Seg.line"), (0, "Elem.create2")];
        let ranking = ["Elem.create", "Elem.create2", "unrelated", "Elem.__init__", "Seg.line", "Elem.long", "Elem.reset"];
        assert_eq!(
            order(&ranking, &funcs, &t),
            ["Elem.create", "Elem.__init__", "Elem.create2", "unrelated", "Seg.line", "Elem.long", "Elem.reset"]
        );
    }

    /// A small constructor follows the best-ranked method of its class though neither calls
    /// the other nor did one caller call both (the test's helper built the reader, a loop
    /// called it); its comment lines do not count against its size. Another class's
    /// constructor stays, and so does one with more lines of code.
    #[test]
    fn a_small_constructor_follows_the_best_ranked_method_of_its_class() {
        let mut init = func("Reader.__init__", "r.py", 4, 0.5);
        if let SourceState::Code(e) = &mut init.source {
            e.code = "def __init__(self):\n    self.n = 0\n    # After a chunk, the trailing CRLF is checked;\n    # these are the bytes still expected.\n    self.expect = b''\n    self.done = False".into();
        }
        let funcs = [
            func("check", "t.py", 30, 5.0),
            func("loop", "t.py", 10, 4.0),
            func("Reader.__call__", "r.py", 30, 3.0),
            func("Reader.more", "r.py", 20, 2.5),
            func("Other.__init__", "r.py", 2, 0.4),
            func("Long.__init__", "r.py", 6, 0.3),
            func("Long.run", "r.py", 20, 2.0),
            func("x", "r.py", 20, 1.0),
            init,
        ];
        let t = [
            (0, "check"),
            (1, "Reader.__init__"),
            (1, "Other.__init__"),
            (1, "Long.__init__"),
            (1, "loop"),
            (2, "Reader.__call__"),
            (2, "Reader.more"),
            (2, "Long.run"),
            (0, "x"),
        ];
        let ranking =
            ["check", "loop", "Reader.__call__", "Reader.more", "Long.run", "x", "Reader.__init__", "Other.__init__", "Long.__init__"];
        assert_eq!(
            order(&ranking, &funcs, &t),
            ["check", "loop", "Reader.__call__", "Reader.__init__", "Reader.more", "Long.run", "x", "Other.__init__", "Long.__init__"]
        );
    }

    /// At most RIDERS_PER_ANCHOR follow one function, the best-ranked of them; nested
    /// functions (`f.<locals>.g`) have no class.
    #[test]
    fn a_function_takes_at_most_three_riders() {
        assert_eq!(RIDERS_PER_ANCHOR, 3);
        let mut funcs = vec![func("C.big", "c.py", 30, 4.0), func("x", "c.py", 30, 2.0), func("C.big.<locals>.g", "c.py", 2, 1.0)];
        let mut nodes = vec![(0, "C.big"), (1, "C.big.<locals>.g")];
        let small = ["C.a", "C.b", "C.c", "C.d"];
        for (i, k) in small.iter().enumerate() {
            funcs.push(func(k, "c.py", 2, 1.0 - i as f64 / 10.0));
            nodes.push((1, k));
        }
        let t = nodes;
        let ranking = ["C.big", "x", "C.big.<locals>.g", "C.a", "C.b", "C.c", "C.d"];
        assert_eq!(order(&ranking, &funcs, &t), ["C.big", "C.a", "C.b", "C.c", "x", "C.big.<locals>.g", "C.d"]);
    }
}
