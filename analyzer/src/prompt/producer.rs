//! The code that made the value a failing test line consumed (`docs/prompts.md`, "Ranking"):
//! a test that fails by comparing an output, or by handing an output to a consumer that
//! rejects it, failed because of the code that produced that value, which the traceback does
//! not pass through.

use super::{FuncId, Funcs, ModelTrace, SourceState};

/// How much of its score a function gains when it ran only in producing a value that a
/// failing line of the test's own code read ([`producers`]): its relevance is multiplied by
/// `1 + PRODUCER_WEIGHT`, as a function that ran only in a failing test's last invocation is
/// ([`super::rank::INVOCATION_WEIGHT`]): the same kind of evidence (what the test ran for the
/// value that failed, and for nothing else beside it).
pub const PRODUCER_WEIGHT: f64 = 1.0;

/// At most this many lines make a failing statement (its frame's line and the lines that
/// continue it while a bracket is open).
const STATEMENT_LINES: usize = 20;

fn ident_re() -> Option<&'static regex::Regex> {
    static RE: std::sync::OnceLock<Option<regex::Regex>> = std::sync::OnceLock::new();
    RE.get_or_init(|| regex::Regex::new(r"[A-Za-z_][A-Za-z0-9_]*").ok()).as_ref()
}

/// A line without its string literals (emptied) and its comment.
fn code_only(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut quote: Option<char> = None;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match quote {
            Some(q) => {
                if c == '\\' {
                    chars.next();
                } else if c == q {
                    quote = None;
                    out.push(c);
                }
            }
            None if c == '#' => break,
            None => {
                if c == '\'' || c == '"' {
                    quote = Some(c);
                }
                out.push(c);
            }
        }
    }
    out
}

/// The names a statement reads bare, as values: not an attribute (after a `.`), not a called
/// name (`f(`), and not a name the statement reads into (`obj.m(`, `obj.attr`, `obj[k]`): the
/// object a method or a property is called on is the consumer, and what the statement computes
/// from it is the statement's own work, not its input.
fn values_read(stmt: &str) -> Vec<&str> {
    let Some(re) = ident_re() else { return Vec::new() };
    let mut out = Vec::new();
    for m in re.find_iter(stmt) {
        if stmt[..m.start()].trim_end().ends_with('.') {
            continue;
        }
        if stmt[m.end()..].trim_start().starts_with(['(', '.', '[']) {
            continue;
        }
        out.push(m.as_str());
    }
    out
}

/// The callees (the last part of the called name: `convert` of `md.convert(src)`) whose
/// results the statement at `line` of a Python function's `code` (which starts at
/// `first_line`) reads: each name the statement reads as a value whose last assignment before
/// it in the function was `name = call(...)` (or `a, b = call(...)`).
pub(super) fn producer_calls(code: &str, first_line: u32, line: u32) -> Vec<String> {
    let lines: Vec<&str> = code.lines().collect();
    let Some(at) = line.checked_sub(first_line).map(|a| a as usize).filter(|&a| a < lines.len()) else { return Vec::new() };
    // The statement: the frame's line, and the lines after it while a bracket is open.
    let mut stmt = String::new();
    let mut open = 0i64;
    for l in lines[at..].iter().take(STATEMENT_LINES) {
        let c = code_only(l);
        open += c
            .chars()
            .map(|ch| match ch {
                '(' | '[' | '{' => 1,
                ')' | ']' | '}' => -1,
                _ => 0,
            })
            .sum::<i64>();
        stmt.push_str(&c);
        stmt.push('\n');
        if open <= 0 {
            break;
        }
    }
    let read = values_read(&stmt);
    static ASSIGN: std::sync::OnceLock<Option<regex::Regex>> = std::sync::OnceLock::new();
    let Some(assign) = ASSIGN
        .get_or_init(|| regex::Regex::new(r"^\s*([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)\s*(?::[^=]*)?=\s*([A-Za-z_][\w.]*)\s*\(").ok())
        .as_ref()
    else {
        return Vec::new();
    };
    // The last assignment of each name before the statement (a later one replaces it; an
    // assignment from anything but a call forgets it).
    let mut made: rustc_hash::FxHashMap<&str, Option<String>> = rustc_hash::FxHashMap::default();
    static PLAIN: std::sync::OnceLock<Option<regex::Regex>> = std::sync::OnceLock::new();
    let plain = PLAIN.get_or_init(|| regex::Regex::new(r"^\s*([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)\s*(?::[^=]*)?=[^=]").ok());
    for l in &lines[..at] {
        if let Some(c) = assign.captures(l) {
            let callee = c[2].rsplit('.').next().unwrap_or(&c[2]).to_string();
            for name in c.get(1).map_or("", |m| m.as_str()).split(',') {
                made.insert(name.trim(), Some(callee.clone()));
            }
        } else if let Some(c) = plain.as_ref().and_then(|p| p.captures(l)) {
            for name in c.get(1).map_or("", |m| m.as_str()).split(',') {
                made.insert(name.trim(), None);
            }
        }
    }
    let mut out: Vec<String> = Vec::new();
    for name in read {
        if let Some(Some(callee)) = made.get(name) {
            if !out.contains(callee) {
                out.push(callee.clone());
            }
        }
    }
    out
}

/// Multiply by `1 + PRODUCER_WEIGHT` the relevance of the functions (outside the test files)
/// that produced a value a
/// failing line of the test's own code read. For each frame of a shown failure's traceback in
/// a test file (found as [`super::rank::failure_frames`] finds them), the names its statement
/// reads that the function assigned earlier from a call ([`producer_calls`]) name the
/// producers: the frame function's direct callees of that name in the tree. What ran beneath
/// them and nowhere else beneath the frame function (not in its other callees, the failing
/// call among them) gains the factor. A factor, not an addition: a producer is often most of
/// the code under test (`md.convert`), and an addition as large as the traceback's would
/// flatten what the question and the tree tell apart among it. Call it on a test's prompt
/// with [`super::rank::invocations`], before the spectrum's and the traceback's additions. The traceback follows the consumer, which is where the
/// failure surfaced, not where the wrong value was made: pycparser's round-trip test
/// generates C (`src2 = self._run_c_to_c(src)`) and fails parsing it again
/// (`parse_to_ast(src2)`), a `ParseError` deep in the parser; the generator's code, which
/// dropped the parentheses, ran only in the first call. A test that compares an output
/// (`output = md.convert(source)`, then `assertEqual(output, expected)`) ranks the conversion
/// above the construction and the test's setup beside it. A name the statement reads into
/// (`parser.parse(x)`, `node.lineno`, `rows[0]`) does not count: a method or a property of
/// the value computes on the failing line, and the code that ran there may be the culprit.
pub(super) fn producers(funcs: &mut Funcs, traces: &[ModelTrace], frames: &[(String, u32)]) {
    if frames.is_empty() {
        return;
    }
    let test_file = |file: &str| crate::plumbing::is_test_file(std::path::Path::new(file));
    // (frame function, the callees whose results its failing statement read)
    let mut wanted: Vec<(FuncId, Vec<String>)> = Vec::new();
    for (id, f) in funcs.iter() {
        let SourceState::Code(e) = &f.source else { continue };
        if f.language != crate::symbols::Language::Python || !test_file(&f.file) {
            continue;
        }
        let same_file = |file: &str| file == f.file || file.strip_suffix(f.file.as_str()).is_some_and(|head| head.ends_with('/'));
        for (file, line) in frames {
            if same_file(file) && (e.first_line..=e.last_line).contains(line) {
                let calls = producer_calls(&e.code, e.first_line, *line);
                if !calls.is_empty() {
                    wanted.push((id, calls));
                }
            }
        }
    }
    if wanted.is_empty() {
        return;
    }
    let n = funcs.values().count();
    let (mut made, mut elsewhere) = (vec![false; n], vec![false; n]);
    let last_part = |k: FuncId| funcs.get(k).map(|f| f.qualname.rsplit('.').next().unwrap_or(&f.qualname).to_string());
    for th in traces.iter().flat_map(|t| t.threads.iter()) {
        for (i, node) in th.nodes.iter().enumerate() {
            let Some((_, calls)) = wanted.iter().find(|(k, _)| *k == node.func) else { continue };
            // The frame function's subtree, each of its direct callees' subtrees marked as a
            // producer's or not.
            let mut producing = false;
            for below in th.nodes[i + 1..].iter().take_while(|b| b.depth > node.depth) {
                if below.depth == node.depth + 1 {
                    producing = last_part(below.func).is_some_and(|c| calls.contains(&c));
                }
                let j = below.func.index();
                if j < n {
                    if producing {
                        made[j] = true;
                    } else {
                        elsewhere[j] = true;
                    }
                }
            }
        }
    }
    for (i, f) in funcs.values_mut().enumerate() {
        if made[i] && !elsewhere[i] && !test_file(&f.file) {
            f.relevance = ((f.relevance * (1.0 + PRODUCER_WEIGHT)) * 1e6).round() / 1e6;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::ModelNode;
    use super::*;
    use crate::pathclass::Origin;

    #[test]
    fn the_callees_whose_results_a_failing_statement_reads_are_its_producers() {
        let code = "def _assert_ok(self, src):\n    \"\"\"Round trip: x = f(y).\"\"\"\n    parser = make_parser()\n    src2 = self._run_c_to_c(src)\n    a, b = split(src)  # c = other()\n    b = 3\n    self.assertTrue(compare(parse(src), parse(src2)),\n                    \"{!r} != {!r}\".format(a, b) + 'x = go(y)')\n    parser.parse(src2)\n";
        // Line 7 (the frame's line) and its continuation: `src2` and `a` were made by calls,
        // `b` last by a constant; names inside strings do not count.
        assert_eq!(producer_calls(code, 1, 7), ["_run_c_to_c", "split"]);
        // `parser` is the receiver of the failing call: the consumer, not its input.
        assert_eq!(producer_calls(code, 1, 9), ["_run_c_to_c"]);
        // A property or an item read from the value is the statement's own work.
        let prop = "def test_x():\n    node = extract(code)\n    assert node.lineno == 4 and node[0] == 1";
        assert!(producer_calls(prop, 1, 3).is_empty());
        // A line outside the code, or a statement that reads nothing made by a call.
        assert!(producer_calls(code, 1, 40).is_empty() && producer_calls(code, 5, 2).is_empty());
        let out = "def check(self, source, expected):\n    md = Markdown(**kws)\n    output = md.convert(source)\n    self.assertMultiLineEqual(output, expected)";
        assert_eq!(producer_calls(out, 70, 73), ["convert"]);
    }

    #[test]
    fn what_ran_only_in_producing_a_value_the_failing_test_line_read_gains_its_weight() {
        // _assert_ok -> _run (-> parse -> lex; generate -> visit_expr); _assert_ok -> parse
        // (-> lex -> error). The failing line parses what `_run` returned.
        let mut funcs = Funcs::default();
        let code = "def _assert_ok(self, src):\n    src2 = self._run(src)\n    self.assertTrue(parse(src2))";
        let mut frame = crate::testutil::func_info("T._assert_ok", "tests/test_gen.py", Origin::Program, code);
        if let SourceState::Code(e) = &mut frame.source {
            (e.first_line, e.last_line) = (10, 12);
        }
        let keys = ["T._run", "parse", "lex", "Gen.generate", "Gen.visit_expr", "error"];
        let mut ids = vec![funcs.insert(frame)];
        for k in keys {
            let file = if k == "T._run" { "tests/test_gen.py" } else { "pkg/core.py" };
            let mut f = crate::testutil::func_info(k, file, Origin::Program, "def f():\n    pass");
            f.relevance = 10.0;
            ids.push(funcs.insert(f));
        }
        let n = |i: usize, depth: u32| ModelNode::new(i as u32 + 1, depth, ids[i]);
        let nodes = vec![n(0, 1), n(1, 2), n(2, 3), n(3, 4), n(4, 3), n(5, 4), n(2, 2), n(3, 3), n(6, 3)];
        let traces = [ModelTrace::one_thread(String::new(), String::new(), String::new(), nodes)];
        let rel = |funcs: &Funcs| keys.map(|k| funcs.by_key(k).map_or(f64::NAN, |f| f.relevance));
        // A frame elsewhere in the test file (line 10 reads nothing made by a call): nothing.
        producers(&mut funcs, &traces, &[("tests/test_gen.py".into(), 10)]);
        assert_eq!(rel(&funcs), [10.0; 6]);
        producers(&mut funcs, &traces, &[("/src/proj/tests/test_gen.py".into(), 12), ("pkg/core.py".into(), 2)]);
        // The generator ran only in `_run`; the parser ran in the failing call too; `_run`
        // itself is the test's code.
        let w = 10.0 * (1.0 + PRODUCER_WEIGHT);
        assert_eq!(rel(&funcs), [10.0, 10.0, 10.0, w, w, 10.0]);
    }
}
