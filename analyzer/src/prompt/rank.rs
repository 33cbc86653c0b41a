//! Ranking for the budget: the lexical score of each function for the question
//! ([`super::relevance`]), then the tree's evidence added.

use super::{relevance, FuncId, Funcs, ModelTrace, SourceState};
use crate::pathclass::Origin;

/// Weight of the program's own functions' lexical scores (not the standard library's, not
/// installed packages'): a user asks about their program, whose code is small beside its
/// libraries' and shares fewer words with the question than their long, documented functions
/// (pytest's `Metafunc.parametrize` outranked the test's own `add`). A function matching no
/// term stays at 0; through the tree boost its callers and callees rise too.
pub const PROGRAM_WEIGHT: f64 = 2.0;

/// Score every function for the question: one BM25F document per function (its qualified
/// name, display path and the code the prompt shows), IDF over the functions of the slice.
pub(super) fn score(funcs: &mut Funcs, question: &str) {
    let query = relevance::weighted_question_terms(question);
    // A fixed order: by key.
    let mut keys: Vec<FuncId> = funcs.iter().map(|(id, _)| id).collect();
    keys.sort_by(|&a, &b| funcs[a].key.cmp(&funcs[b].key));
    let docs: Vec<relevance::Document<'_>> = keys
        .iter()
        .map(|&k| {
            let f = &funcs[k];
            let code = match &f.source {
                SourceState::Code(e) => e.code.as_str(),
                _ => "",
            };
            relevance::Document { name: &f.qualname, path: &f.file, code }
        })
        .collect();
    let scores = relevance::weighted_scores(&docs, &query);
    for (&k, s) in keys.iter().zip(scores) {
        let f = &mut funcs[k];
        f.relevance = if f.origin == Origin::Program { s * PROGRAM_WEIGHT } else { s };
        f.lexical = f.relevance;
    }
}

/// Share of its strongest caller's and callee's BM25F score a function gets on top of its own:
/// the code around a strong match (who calls it, what it calls) is what an answer reads next.
pub const TREE_BOOST: f64 = 0.3;

/// Add the tree's evidence to the lexical scores: `relevance(f) += TREE_BOOST ×
/// (max score of f's callers + max score of f's callees)`, over every place f appears.
///
/// A function the compiler inlined is code of the function it was inlined into: the callers of
/// a node are its parent and, while the one above is inlined, the next one up, to the first
/// that was not (that function's body holds all of them). ripgrep's `Ignore::matched_ignore`,
/// inlined three levels deep into `WalkParallel`'s `should_skip_entry`, is what decides which
/// files are skipped; one level of boost reached only the inlined wrapper above it.
pub(super) fn tree_boost(funcs: &mut Funcs, traces: &[ModelTrace]) {
    let base: Vec<f64> = funcs.values().map(|f| f.relevance).collect();
    let (mut best_caller, mut best_callee) = (vec![0.0f64; base.len()], vec![0.0f64; base.len()]);
    for th in traces.iter().flat_map(|t| t.threads.iter()) {
        // Pre-order: a node's caller is the last node met one level up. Per depth: the
        // function (when in `funcs`) and whether that node was inlined into the one above.
        let mut path: Vec<(Option<usize>, bool)> = Vec::new();
        for n in &th.nodes {
            let d = n.depth as usize;
            let me = Some(n.func.index()).filter(|&i| i < base.len());
            path.truncate(d);
            path.resize(d, (None, false));
            for &(caller, inlined) in path.iter().rev() {
                if let (Some(c), Some(p)) = (me, caller) {
                    if p != c {
                        best_caller[c] = best_caller[c].max(base[p]);
                        best_callee[p] = best_callee[p].max(base[c]);
                    }
                }
                if !inlined {
                    break;
                }
            }
            path.push((me, n.inlined));
        }
    }
    for (i, f) in funcs.values_mut().enumerate() {
        // Rounded like the lexical scores, so the order never depends on the last bit.
        f.relevance = ((f.relevance + TREE_BOOST * (best_caller[i] + best_callee[i])) * 1e6).round() / 1e6;
    }
}

/// Share of its score a function keeps in a test's prompt when every call of it was the
/// construction of an object: a constructor (`__init__`, `__new__`, `__post_init__`) or code
/// that ran only beneath one. A failing test compares what the code computed; building the
/// object it computes with (registering handlers, storing options) is the same in the passing
/// tests beside it, and in a one-test run no spectrum can say so. Construction is often long
/// and names the domain's words (a Markdown parser's `build_*` registries), so without this it
/// outranks the code that processed the test's input.
pub const CONSTRUCTION_WEIGHT: f64 = 0.5;

/// Whether a Python function is a constructor, by its name's last part.
fn is_constructor(f: &super::FuncInfo) -> bool {
    f.language == crate::symbols::Language::Python
        && matches!(f.qualname.rsplit('.').next(), Some("__init__" | "__new__" | "__post_init__"))
}

/// The class of a Python method, `Class` of `Class.__init__` (`Outer.Inner` of a nested class),
/// with its file: the key under which [`used_classes`] finds its other methods.
fn class_of(f: &super::FuncInfo) -> Option<(&str, &str)> {
    f.qualname.rsplit_once('.').map(|(class, _)| (f.file.as_str(), class))
}

/// The classes (file, class) of which a method other than a constructor ran: their objects
/// were used after they were built.
fn used_classes(funcs: &Funcs) -> rustc_hash::FxHashSet<(&str, &str)> {
    funcs
        .values()
        .filter(|f| f.language == crate::symbols::Language::Python && !is_constructor(f))
        .filter_map(|f| {
            // `Class.method` and `Class.method.<locals>.helper` both use a `Class` object.
            let head = f.qualname.split(".<locals>.").next().unwrap_or(&f.qualname);
            head.rsplit_once('.').map(|(class, _)| (f.file.as_str(), class))
        })
        .collect()
}

/// Multiply by [`CONSTRUCTION_WEIGHT`] the score of every function (outside the test files)
/// that ran only as construction: each of its places in the trees is a constructor or lies
/// beneath one. A constructor counts as construction only when another method of its class ran
/// too (the object was used: by its name, `Class.method` in the constructor's file): the rule
/// ranks what was built below what it was built for, and a class none of whose other methods
/// ran was not built for later work. Its constructor's work is what the run did with it, side
/// effects included: reading `doc["a"]` of a tomlkit document builds an `OutOfOrderTableProxy`
/// that is never used, and its `__init__` is where the document was changed (halved, it ranked
/// 23rd and was name only at 4,000 tokens). Call it on a test's prompt, after [`tree_boost`]
/// and before the spectrum's and the traceback's additions.
pub(super) fn construction(funcs: &mut Funcs, traces: &[ModelTrace]) {
    let n = funcs.values().count();
    let used = used_classes(funcs);
    let ctor: Vec<bool> = funcs.values().map(|f| is_constructor(f) && class_of(f).is_some_and(|c| used.contains(&c))).collect();
    let mut elsewhere = vec![false; n];
    let mut seen = vec![false; n];
    for th in traces.iter().flat_map(|t| t.threads.iter()) {
        // Pre-order: the depth of the shallowest constructor on the path, if any.
        let mut under: Vec<bool> = Vec::new();
        for node in &th.nodes {
            let d = node.depth as usize;
            under.truncate(d);
            let above = under.last().copied().unwrap_or(false);
            let i = node.func.index();
            let here = i < n && ctor[i];
            if i < n {
                seen[i] = true;
                if !above && !here {
                    elsewhere[i] = true;
                }
            }
            under.resize(d, above);
            under.push(above || here);
        }
    }
    for (i, f) in funcs.values_mut().enumerate() {
        if seen[i] && !elsewhere[i] && !crate::plumbing::is_test_file(std::path::Path::new(&f.file)) {
            f.relevance = ((f.relevance * CONSTRUCTION_WEIGHT) * 1e6).round() / 1e6;
        }
    }
}

/// How much of its score a function gains, at most, in a failing test's prompt from the test's
/// own invocations ([`invocations`]): a function that ran only in the last of the test's
/// repeated calls (the one whose result failed) has its relevance multiplied by `1 +
/// INVOCATION_WEIGHT`.
pub const INVOCATION_WEIGHT: f64 = 1.0;

/// Multiply each function's relevance by `1 + INVOCATION_WEIGHT × s`, `s` its score over the
/// failing test's own repeated calls ([`crate::testrun::invocations::Invocations::scores`]: 1
/// when it ran only in the last call, 0 when it ran in every call or in none; several failing
/// tests: the highest). A one-test run has no other test to compare with, but a test that
/// calls the code under test several times and fails after the last call compares with
/// itself: click's regression test invokes its command four times, and only the two `--help`
/// invocations, the failing last one among them, ran `Option.get_help_record`, while
/// `Option.get_default`, which shares as many of the bug report's words, ran in all four.
/// A factor, not an addition: the lexical scores' scale differs from prompt to prompt, and
/// what shares no word with the question stays where the tree puts it. Call it on a test's
/// prompt, after [`construction`].
pub(super) fn invocations(funcs: &mut Funcs, scores: &[(String, f64)]) {
    if scores.is_empty() {
        return;
    }
    let mut best: rustc_hash::FxHashMap<&str, f64> = rustc_hash::FxHashMap::default();
    for (k, s) in scores {
        let e = best.entry(k.as_str()).or_default();
        *e = e.max(*s);
    }
    for f in funcs.values_mut() {
        if let Some(&s) = best.get(&*f.key) {
            f.relevance = ((f.relevance * (1.0 + INVOCATION_WEIGHT * s)) * 1e6).round() / 1e6;
        }
    }
}

/// Weight of a function's Ochiai score ([`crate::testrun::Spectrum::ochiai`], 0 to 1) in its
/// relevance: large beside the lexical scores, so that with failing and passing tests in the
/// traces the budget keeps what goes with failure first, and the question orders functions of
/// equal suspiciousness.
pub const SPECTRUM_WEIGHT: f64 = 1000.0;

/// Add the spectrum's evidence: `relevance(f) += SPECTRUM_WEIGHT × s(f)`, where `s(f)` is its
/// Ochiai score or its most suspicious line's where lines were recorded per test
/// ([`crate::testrun::Spectrum::suspiciousness`]), and its counts (and the lines that go with
/// failure) for the prompt's note on the function.
pub(super) fn spectrum(funcs: &mut Funcs, s: &crate::testrun::Spectrum) {
    for f in funcs.values_mut() {
        // (The prompt's functions meet the spectrum's ids by key, once each.)
        let id = s.id(&f.key);
        let o = id.map_or(0.0, |id| s.suspiciousness(id));
        f.relevance = ((f.relevance + SPECTRUM_WEIGHT * o) * 1e6).round() / 1e6;
        if o > 0.0 && f.origin != Origin::Stdlib {
            f.spectrum = id.and_then(|id| match (s.describe(id), s.describe_lines(id)) {
                (Some(d), Some(l)) => Some(format!("{d}; {l}")),
                (d, _) => d,
            });
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
pub(super) fn failure_frames(funcs: &mut Funcs, frames: &[(String, u32)]) {
    if frames.is_empty() {
        return;
    }
    for f in funcs.values_mut() {
        if frames.iter().any(|fr| holds_frame(f, fr)) {
            f.relevance = ((f.relevance + TRACEBACK_WEIGHT) * 1e6).round() / 1e6;
        }
    }
}

/// Weight added, on top of [`TRACEBACK_WEIGHT`], to the function that raised a failure
/// ([`raisers`]): the innermost frame of the traceback is where the code under test gave up,
/// and every frame on the way there scores alike without it.
pub const RAISER_WEIGHT: f64 = 100.0;

/// Whether a traceback frame (file as the runner gives it, line) lies in `f`'s source: the
/// frame's file is the function's display path, or ends with it after a `/` (runners give
/// paths relative to their root directory, or absolute), and its line is inside the function.
fn holds_frame(f: &super::FuncInfo, (file, line): &(String, u32)) -> bool {
    let SourceState::Code(e) = &f.source else { return false };
    let same_file = file == &f.file || file.strip_suffix(f.file.as_str()).is_some_and(|head| head.ends_with('/'));
    same_file && (e.first_line..=e.last_line).contains(line)
}

/// Add [`RAISER_WEIGHT`] to the function that raised each shown failure: of its traceback
/// (`tracebacks`, one per failure, outermost frame first), the innermost frame that lies in a
/// function of the prompt, when that function is outside the test files. A failure the test's
/// own code raised (an `assert`, a helper's comparison) names no function: the comparison is
/// the test's, the code that made its values is elsewhere. An exception raised in the code under
/// test is where that code stopped: simpleeval's `_check_disallowed_items` raised for a list
/// argument, the line the fix changed, and ranked 7th among the traceback's six other frames
/// (every one 500 and a few lexical points), behind the dispatchers above it. Call it after
/// [`failure_frames`].
pub(super) fn raisers(funcs: &mut Funcs, tracebacks: &[&[(String, u32)]]) {
    let mut raised: Vec<FuncId> = Vec::new();
    for tb in tracebacks {
        // The innermost frame in a function of the prompt, and of the functions whose lines
        // hold it the narrowest (a nested function's frame lies in its outer function too).
        let span = |f: &super::FuncInfo| match &f.source {
            SourceState::Code(e) => e.last_line.saturating_sub(e.first_line),
            _ => u32::MAX,
        };
        let innermost = tb
            .iter()
            .rev()
            .find_map(|fr| funcs.iter().filter(|(_, f)| holds_frame(f, fr)).min_by_key(|&(id, f)| (span(f), id.index())).map(|(id, _)| id));
        if let Some(id) = innermost {
            if !crate::plumbing::is_test_file(std::path::Path::new(&funcs[id].file)) && !raised.contains(&id) {
                raised.push(id);
            }
        }
    }
    for id in raised {
        let f = &mut funcs[id];
        f.relevance = ((f.relevance + RAISER_WEIGHT) * 1e6).round() / 1e6;
    }
}

/// Weight added to a method that may have built the object a failure says lacks an attribute
/// ([`missing_attribute`]): below the traceback's (the code the failure went through comes
/// first), above any lexical score.
pub const MISSING_ATTRIBUTE_WEIGHT: f64 = 250.0;

/// Last parts of the names of methods that build an object or make one from another: an
/// attribute missing from an object was never set by what made it.
const BUILDERS: &[&str] =
    &["__init__", "__new__", "__post_init__", "__copy__", "__deepcopy__", "__setstate__", "__reduce__", "copy", "_copy", "clone", "_clone"];

/// The (class, attribute) pairs of CPython's `AttributeError: 'C' object has no attribute 'A'`
/// in a failure's text.
pub(super) fn missing_attributes(texts: &[String]) -> Vec<(String, String)> {
    static RE: std::sync::OnceLock<Option<regex::Regex>> = std::sync::OnceLock::new();
    let Some(re) = RE.get_or_init(|| regex::Regex::new(r"'([A-Za-z_]\w*)' object has no attribute '([A-Za-z_]\w*)'").ok()) else {
        return Vec::new();
    };
    let mut out: Vec<(String, String)> = Vec::new();
    for t in texts {
        for c in re.captures_iter(t) {
            let pair = (c[1].to_string(), c[2].to_string());
            if !out.contains(&pair) {
                out.push(pair);
            }
        }
    }
    out
}

/// Add [`MISSING_ATTRIBUTE_WEIGHT`] to the methods of class `C` (by the last part of the
/// class's name, outside the test files) that ran and build or copy an object ([`BUILDERS`])
/// or assign `.A`, for each `'C' object has no attribute 'A'` of a shown failure. The
/// exception is raised where the attribute is read, which the traceback already ranks; the bug
/// is where the object was made without it, often far from there and sharing no word with the
/// report: pyparsing's `Word.copy` replaced the copy's parse method without setting the
/// `re_match` it reads, and the failure surfaced in `Word.parseImpl_regex` under the parser's
/// machinery, the 4-line `copy` 12th.
pub(super) fn missing_attribute(funcs: &mut Funcs, outcomes: &[String]) {
    for (class, attr) in missing_attributes(outcomes) {
        let store = regex::Regex::new(&format!(r"\.{}\s*(:[^=\n]*)?=[^=]", regex::escape(&attr))).ok();
        for f in funcs.values_mut() {
            if f.language != crate::symbols::Language::Python || crate::plumbing::is_test_file(std::path::Path::new(&f.file)) {
                continue;
            }
            let head = f.qualname.split(".<locals>.").next().unwrap_or(&f.qualname);
            let Some((owner, method)) = head.rsplit_once('.') else { continue };
            if owner.rsplit('.').next() != Some(class.as_str()) {
                continue;
            }
            let code = match &f.source {
                SourceState::Code(e) => e.code.as_str(),
                _ => "",
            };
            let sets = store.as_ref().is_some_and(|re| re.is_match(code));
            if (head == f.qualname && BUILDERS.contains(&method)) || sets {
                f.relevance = ((f.relevance + MISSING_ATTRIBUTE_WEIGHT) * 1e6).round() / 1e6;
            }
        }
    }
}

/// Weight added to the constructor of a class that a function of a failure's traceback
/// instantiates ([`frame_constructors`]): as [`MISSING_ATTRIBUTE_WEIGHT`], below the
/// traceback's own functions.
pub const FRAME_CONSTRUCTOR_WEIGHT: f64 = 250.0;

/// Add [`FRAME_CONSTRUCTOR_WEIGHT`] to the constructors (`C.__init__`, `__new__`,
/// `__post_init__`, outside the test files) that ran, of every class `C` whose name is called
/// (`C(`) in the source of a function holding a frame of a shown failure's traceback (outside
/// the test files; frames found as [`failure_frames`] finds them). A failure on the way to
/// building an object is often about what that object takes: the value the failing line
/// checked was on its way to be stored there, and the constructor, which ran elsewhere in the
/// run, says what it accepts. lark's `LexerThread.from_text` cast its input to a `TextSlice`
/// (which raised for a list) to pass it to `LexerState(text)`, whose `__init__` was the code
/// to change; it ranked 35th, as construction.
pub(super) fn frame_constructors(funcs: &mut Funcs, frames: &[(String, u32)]) {
    if frames.is_empty() {
        return;
    }
    static RE: std::sync::OnceLock<Option<regex::Regex>> = std::sync::OnceLock::new();
    let Some(re) = RE.get_or_init(|| regex::Regex::new(r"\b([A-Z][A-Za-z0-9_]*)\s*\(").ok()) else { return };
    let prose = regex::Regex::new(r#"(?s)""".*?"""|'''.*?'''|#[^\n]*"#).ok();
    let test_file = |f: &super::FuncInfo| crate::plumbing::is_test_file(std::path::Path::new(&f.file));
    let mut called: rustc_hash::FxHashSet<String> = rustc_hash::FxHashSet::default();
    for f in funcs.values() {
        let SourceState::Code(e) = &f.source else { continue };
        if f.language != crate::symbols::Language::Python || test_file(f) {
            continue;
        }
        let same_file = |file: &str| file == f.file || file.strip_suffix(f.file.as_str()).is_some_and(|head| head.ends_with('/'));
        if frames.iter().any(|(file, line)| same_file(file) && (e.first_line..=e.last_line).contains(line)) {
            // Calls in the code, not in its docstrings' examples or its comments.
            let code = prose.as_ref().map_or(std::borrow::Cow::Borrowed(e.code.as_str()), |p| p.replace_all(&e.code, ""));
            called.extend(re.captures_iter(&code).map(|c| c[1].to_string()));
        }
    }
    for f in funcs.values_mut() {
        if !is_constructor(f) || test_file(f) {
            continue;
        }
        let class = f.qualname.rsplit_once('.').map(|(c, _)| c.rsplit('.').next().unwrap_or(c));
        if class.is_some_and(|c| called.contains(c)) {
            f.relevance = ((f.relevance + FRAME_CONSTRUCTOR_WEIGHT) * 1e6).round() / 1e6;
        }
    }
}

/// Source length (characters) up to which a function's place in a test prompt's budget order
/// is its relevance: about 400 tokens, some 40 lines of code.
pub const SIZE_FREE_CHARS: usize = 1600;

/// A function's score for the budget's order in a test's prompt: its relevance, divided past
/// [`SIZE_FREE_CHARS`] by the square root of its length in those units (a function of 6,400
/// characters keeps half). A budget is room, and a long function takes the room of several
/// short ones; the evidence of a one-test run (the question's words, the tree's) rarely tells
/// functions of one code path apart by much, and a long function's many words match a bug
/// report more often than BM25's length normalisation offsets. So among functions ranked
/// alike, the long one goes after: on a Markdown bug the block processor that lost the
/// content (900 characters) came tenth, behind five 2,300–4,700-character functions of the
/// same conversion whose bodies filled a 4,000-token budget. The square root keeps it a
/// moderation: a long function with clearly more evidence (the traceback's 500, the
/// spectrum's) stays ahead. Only the budget's order ([`super::Model::priority`], which
/// `--show-ranking` prints): [`super::Model::ranking`] (the condensing's closest functions)
/// stays by relevance.
pub(super) fn size_discounted(f: &super::FuncInfo) -> f64 {
    let len = match &f.source {
        SourceState::Code(e) => e.code.len(),
        _ => 0,
    };
    if len <= SIZE_FREE_CHARS {
        f.relevance
    } else {
        f.relevance / (len as f64 / SIZE_FREE_CHARS as f64).sqrt()
    }
}

#[cfg(test)]
mod tests {
    use super::super::FuncInfo;
    use super::*;

    fn rel(funcs: &Funcs, key: &str) -> f64 {
        funcs.by_key(key).map_or(f64::NAN, |f| f.relevance)
    }

    fn func(key: &str, file: &str, origin: Origin, code: &str) -> FuncInfo {
        crate::testutil::func_info(key, file, origin, code)
    }

    #[test]
    fn a_failures_frames_rank_their_functions_first() {
        let mut funcs = Funcs::default();
        funcs.insert(func("raiser", "pkg/core.py", Origin::Program, "def raiser():\n    raise KeyError"));
        funcs.insert(func("other", "pkg/other.py", Origin::Program, "def other():\n    pass"));
        // Absolute (unittest) and relative (pytest) frame paths both find the function.
        failure_frames(&mut funcs, &[("/home/u/proj/pkg/core.py".into(), 2)]);
        assert_eq!((rel(&funcs, "raiser"), rel(&funcs, "other")), (TRACEBACK_WEIGHT, 0.0));
        failure_frames(&mut funcs, &[("xpkg/core.py".into(), 2), ("pkg/core.py".into(), 9)]);
        assert_eq!(rel(&funcs, "raiser"), TRACEBACK_WEIGHT, "another file, or a line outside: no boost");
    }

    #[test]
    fn the_function_that_raised_gains_its_weight_over_the_other_frames() {
        let mut funcs = Funcs::default();
        for (k, file, code) in [
            ("test_x", "tests/test_x.py", "def test_x():\n    run()\n    assert 1 == 2"),
            ("run", "pkg/core.py", "def run():\n    check()"),
            ("check", "pkg/check.py", "def check():\n    def inner():\n        raise ValueError\n    inner()"),
            ("check.<locals>.inner", "pkg/check.py", "def inner():\n        raise ValueError"),
        ] {
            let mut f = func(k, file, Origin::Program, code);
            if let SourceState::Code(e) = &mut f.source {
                e.last_line = code.lines().count() as u32;
                if k == "check.<locals>.inner" {
                    (e.first_line, e.last_line) = (2, 3);
                }
            }
            funcs.insert(f);
        }
        // test_x -> run -> check -> inner (raised), then a frame the prompt does not have (the
        // standard library's): the innermost frame in a function of the prompt, the nested one.
        let raised = [
            ("tests/test_x.py".to_string(), 2),
            ("pkg/core.py".into(), 2),
            ("pkg/check.py".into(), 4),
            ("pkg/check.py".into(), 3),
            ("stdlib/re.py".into(), 9),
        ];
        // The test's own assertion: no function raised.
        let asserted = [("tests/test_x.py".to_string(), 3)];
        failure_frames(&mut funcs, &[raised.to_vec(), asserted.to_vec()].concat());
        raisers(&mut funcs, &[&raised, &asserted, &raised]);
        let got = ["test_x", "run", "check", "check.<locals>.inner"].map(|k| rel(&funcs, k));
        let t = TRACEBACK_WEIGHT;
        assert_eq!(got, [t, t, t, t + RAISER_WEIGHT], "once per function, however many failures it raised");
    }

    #[test]
    fn an_objects_missing_attribute_ranks_the_methods_that_built_it_or_set_it() {
        let mut funcs = Funcs::default();
        for (k, file, code) in [
            ("Word.copy", "pkg/core.py", "def copy(self):\n    ret = super().copy()\n    return ret"),
            ("Word.__init__", "pkg/core.py", "def __init__(self):\n    self.x = 1"),
            ("Word.compile", "pkg/core.py", "def compile(self):\n    self.re_match = self.re.match"),
            ("Word.annotated", "pkg/core.py", "def annotated(self):\n    self.re_match: Callable = f"),
            ("Word.parse", "pkg/core.py", "def parse(self):\n    return self.re_match == 1"),
            ("Word.copy.<locals>.inner", "pkg/core.py", "def inner():\n    pass"),
            ("Other.copy", "pkg/core.py", "def copy(self):\n    pass"),
            ("Word.__copy__", "tests/test_core.py", "def __copy__(self):\n    pass"),
        ] {
            funcs.insert(func(k, file, Origin::Program, code));
        }
        let text = "E       AttributeError: 'Word' object has no attribute 're_match'".to_string();
        assert_eq!(missing_attributes(std::slice::from_ref(&text)), [("Word".to_string(), "re_match".to_string())]);
        missing_attribute(&mut funcs, &[text]);
        let got = [
            "Word.copy",
            "Word.__init__",
            "Word.compile",
            "Word.annotated",
            "Word.parse",
            "Word.copy.<locals>.inner",
            "Other.copy",
            "Word.__copy__",
        ]
        .map(|k| rel(&funcs, k));
        let w = MISSING_ATTRIBUTE_WEIGHT;
        assert_eq!(got, [w, w, w, w, 0.0, 0.0, 0.0, 0.0]);
        // Another failure: nothing.
        missing_attribute(&mut funcs, &["E   AssertionError: 1 != 2".to_string()]);
        assert_eq!(rel(&funcs, "Word.copy"), w);
    }

    #[test]
    fn the_constructors_of_classes_a_failures_frames_instantiate_gain_their_weight() {
        let mut funcs = Funcs::default();
        for (k, file, code) in [
            (
                "Thread.from_text",
                "pkg/lexer.py",
                "def from_text(cls, text):\n    \"\"\"Like Other(text).\"\"\"\n    text = Slice.cast_from(text)  # not Other(x)\n    return cls(State(text))",
            ),
            ("State.__init__", "pkg/state.py", "def __init__(self, text):\n    self.text = text"),
            ("Slice.__post_init__", "pkg/utils.py", "def __post_init__(self):\n    raise TypeError('no')"),
            ("Other.__init__", "pkg/other.py", "def __init__(self):\n    pass"),
            ("State.feed", "pkg/state.py", "def feed(self):\n    pass"),
            ("test_x", "tests/test_x.py", "def test_x():\n    Other(1)"),
        ] {
            let mut f = func(k, file, Origin::Program, code);
            if let SourceState::Code(e) = &mut f.source {
                e.last_line = 3;
            }
            funcs.insert(f);
        }
        // The test's own frame instantiates `Other`: the test's input, not the code under test.
        frame_constructors(&mut funcs, &[("tests/test_x.py".into(), 2), ("pkg/lexer.py".into(), 2)]);
        let got = ["State.__init__", "Other.__init__", "Slice.__post_init__", "State.feed"].map(|k| rel(&funcs, k));
        assert_eq!(got, [FRAME_CONSTRUCTOR_WEIGHT, 0.0, 0.0, 0.0]);
    }

    #[test]
    fn what_ran_only_in_a_failing_tests_last_invocation_gains_up_to_its_weight() {
        let mut funcs = Funcs::default();
        for k in ["only_last", "half", "every_call", "other"] {
            let mut f = func(k, "pkg/core.py", Origin::Program, "def f():\n    pass");
            f.relevance = 10.0;
            funcs.insert(f);
        }
        // Two failing tests' scores: a function keeps its highest.
        let scores: Vec<(String, f64)> = [("only_last", 1.0), ("half", 0.25), ("only_last", 0.5)].map(|(k, s)| (k.to_string(), s)).to_vec();
        invocations(&mut funcs, &scores);
        let got = ["only_last", "half", "every_call", "other"].map(|k| rel(&funcs, k));
        assert_eq!(got, [10.0 * (1.0 + INVOCATION_WEIGHT), 10.0 * (1.0 + 0.25 * INVOCATION_WEIGHT), 10.0, 10.0]);
    }

    #[test]
    fn past_the_free_size_a_long_function_is_discounted_by_the_square_root_of_its_length() {
        let body = |chars: usize| format!("def f():\n{}", "x".repeat(chars - 9));
        let mut short = func("short", "pkg/a.py", Origin::Program, &body(SIZE_FREE_CHARS));
        short.relevance = 10.0;
        let mut long = func("long", "pkg/b.py", Origin::Program, &body(4 * SIZE_FREE_CHARS));
        long.relevance = 10.0;
        assert_eq!(size_discounted(&short), 10.0);
        assert!((size_discounted(&long) - 5.0).abs() < 1e-9, "{}", size_discounted(&long));
    }

    /// walk -> skip (10) -> [inlined] matched -> [inlined] ignore -> [inlined] glob -> called,
    /// and skip -> stat (a real call): the inlined chain shares skip's body, so each of its
    /// functions counts skip as a caller (and skip each of them as a callee); `called`, a real
    /// call from code inlined into skip, too. A real call's callee is not boosted past it.
    #[test]
    fn the_tree_boost_passes_through_inlined_functions_to_the_body_that_holds_them() {
        let mut funcs = Funcs::default();
        let names = ["walk", "skip", "matched", "ignore", "glob", "called", "stat", "deep"];
        let ids: Vec<FuncId> = names
            .iter()
            .map(|k| {
                let mut f = func(k, "src/dir.rs", Origin::Program, "fn f() {}");
                f.relevance = if *k == "skip" { 10.0 } else { 0.0 };
                funcs.insert(f)
            })
            .collect();
        let n = |i: usize, depth: u32, inlined: bool| super::super::ModelNode {
            inlined,
            ..super::super::ModelNode::new(i as u32 + 1, depth, ids[i])
        };
        let nodes = vec![
            n(0, 1, false),
            n(1, 2, false),
            n(2, 3, true),
            n(3, 4, true),
            n(4, 5, true),
            n(5, 6, false),
            n(6, 3, false),
            n(7, 4, false),
        ];
        tree_boost(&mut funcs, &[ModelTrace::one_thread(String::new(), String::new(), String::new(), nodes)]);
        let got = names.map(|k| rel(&funcs, k));
        let b = TREE_BOOST * 10.0;
        assert_eq!(got, [b, 10.0, b, b, b, b, b, 0.0]);
    }

    #[test]
    fn construction_keeps_half_its_score() {
        let mut funcs = Funcs::default();
        // test -> render -> Parser.__init__ -> build_rules; render -> Parser.feed -> helper;
        // helper also runs beneath the constructor, but not only there.
        let ids: Vec<FuncId> = [
            ("test_x", "tests/test_x.py"),
            ("render", "pkg/core.py"),
            ("Parser.__init__", "pkg/parser.py"),
            ("build_rules", "pkg/parser.py"),
            ("Parser.feed", "pkg/parser.py"),
            ("helper", "pkg/util.py"),
        ]
        .into_iter()
        .map(|(k, file)| {
            let mut f = func(k, file, Origin::Program, "def f():\n    pass");
            f.relevance = 10.0;
            funcs.insert(f)
        })
        .collect();
        let n = |i: usize, depth: u32| super::super::ModelNode::new(i as u32 + 1, depth, ids[i]);
        let nodes = vec![n(0, 1), n(1, 2), n(2, 3), n(3, 4), n(5, 4), n(4, 3), n(5, 4)];
        let traces = [ModelTrace::one_thread(String::new(), String::new(), String::new(), nodes)];
        construction(&mut funcs, &traces);
        let got: Vec<f64> =
            ["test_x", "render", "Parser.__init__", "build_rules", "Parser.feed", "helper"].map(|k| rel(&funcs, k)).to_vec();
        assert_eq!(got, [10.0, 10.0, 5.0, 5.0, 10.0, 10.0]);
    }

    #[test]
    fn a_constructor_whose_object_no_other_method_used_keeps_its_score() {
        // test -> lookup -> Proxy.__init__ -> copy_items; test -> render -> Parser.__init__,
        // Parser.feed. Nothing of Proxy but its constructor ran: not construction for later
        // work, the constructor's work is what the lookup did (a side effect).
        let mut funcs = Funcs::default();
        let ids: Vec<FuncId> = [
            ("test_x", "tests/test_x.py"),
            ("lookup", "pkg/core.py"),
            ("Proxy.__init__", "pkg/core.py"),
            ("copy_items", "pkg/core.py"),
            ("render", "pkg/core.py"),
            ("Parser.__init__", "pkg/parser.py"),
            ("Parser.feed", "pkg/parser.py"),
            // A method of another file's class of the same name does not use this Proxy.
            ("Proxy.get", "pkg/other.py"),
        ]
        .into_iter()
        .map(|(k, file)| {
            let mut f = func(k, file, Origin::Program, "def f():\n    pass");
            f.relevance = 10.0;
            funcs.insert(f)
        })
        .collect();
        let n = |i: usize, depth: u32| super::super::ModelNode::new(i as u32 + 1, depth, ids[i]);
        let nodes = vec![n(0, 1), n(1, 2), n(2, 3), n(3, 4), n(4, 2), n(5, 3), n(6, 3), n(7, 2)];
        let traces = [ModelTrace::one_thread(String::new(), String::new(), String::new(), nodes)];
        construction(&mut funcs, &traces);
        let got = ["Proxy.__init__", "copy_items", "Parser.__init__", "Parser.feed"].map(|k| rel(&funcs, k));
        assert_eq!(got, [10.0, 10.0, 5.0, 10.0]);
    }

    /// "rg lists src/main.rs but not build.log ... which files are skipped?": the setup code
    /// named `build` and `log` shares two words with the question's file names, the walk's
    /// `skip_entry` one word with its prose. The file names name the user's files: only the
    /// prose counts.
    #[test]
    fn the_questions_file_names_score_nothing() {
        let mut funcs = Funcs::default();
        for (key, code) in [
            ("walk::build_log_levels", "fn build_log_levels(main: &str) {\n    log::set(build(main));\n}"),
            ("walk::skip_entry", "fn skip_entry(e: &Entry) -> bool {\n    e.is_hidden()\n}"),
            ("walk::other", "fn other() {\n    x();\n}"),
        ] {
            funcs.insert(func(key, "src/walk.rs", Origin::Program, code));
        }
        score(&mut funcs, "rg lists src/main.rs and not build.log or target/: which entries are skipped?");
        assert!(rel(&funcs, "walk::skip_entry") > 0.0);
        assert_eq!(rel(&funcs, "walk::build_log_levels"), 0.0, "build, log and main are file names' words");
    }

    #[test]
    fn the_programs_own_functions_weigh_twice() {
        let code = "def border(x):\n    return x.border";
        let mut funcs = Funcs::default();
        for (key, file, origin) in [
            ("mine", "app/draw.py", Origin::Program),
            ("theirs", "site-packages/lib/draw.py", Origin::SitePackages),
            ("unrelated", "app/other.py", Origin::Program),
        ] {
            let code = if key == "unrelated" { "def other():\n    return 1" } else { code };
            funcs.insert(func(key, file, origin, code));
        }
        score(&mut funcs, "Where is the border drawn?");
        let (mine, theirs) = (rel(&funcs, "mine"), rel(&funcs, "theirs"));
        assert!(theirs > 0.0, "{theirs}");
        // The paths match no term and have no length normalisation: only the weight differs.
        assert!((mine - 2.0 * theirs).abs() < 1e-5, "{mine} vs {theirs}");
        assert_eq!(rel(&funcs, "unrelated"), 0.0, "no term matched: nothing to weigh");
    }
}
