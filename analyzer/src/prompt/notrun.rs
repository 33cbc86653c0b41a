//! Code that did not run, elided. With line data (trace format version 3: `trace run` records it
//! by default on CPython 3.12+, with `--lines` on 3.9–3.11), a function's source can
//! show which of its statements this run never executed: branches not taken, handlers of
//! exceptions that did not happen, the rest of a function after an early `return`. In
//! `rich data.csv` that is about a quarter of the library source a prompt shows.
//!
//! The rule, on the function's statements (Python's block structure, read from indentation and
//! logical lines): in every block, a run of consecutive statements none of whose lines ran and
//! at least one of whose lines holds code that did not run ([`LineState::NotRun`]) is replaced
//! by one line `...  # N lines not run` at the statement's indentation, when the run is at least
//! [`MIN_LINES`] lines long; statements with a line that ran are kept and their own blocks
//! (the bodies of `if`/`else`, `try`/`except`, loops, `with`) are looked into the same way.
//! Statements that hold no code of their own (a docstring, a comment) at either end of a run
//! stay. The code stays valid Python (`...` is a statement).
//!
//! Which functions are condensed is [`NotRun`]: by default (`auto`) installed packages'
//! functions outside the [`super::KEPT_EXACT_TOP`] closest to the question (the
//! program's own functions and the question's strongest matches keep their exact source, as
//! for docstrings: a branch not taken can be the answer to "how can I change this").

use crate::coverage::LineState;
use crate::frontend::{FrontEnd, Opt};
use crate::source::{indent, logical_starts};

/// Which functions show their code that did not run (`--not-run`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum NotRun {
    /// Elided in installed packages' functions outside the 25 closest to the question
    #[default]
    Auto,
    /// Shown everywhere: every function's exact source
    Show,
    /// Elided in every function
    Hide,
}

/// A run of statements that did not run is elided when it is at least this many lines long.
pub const MIN_LINES: usize = 3;

/// The prompt's note for `lines` lines elided in `funcs` functions (none when nothing was).
/// `whose`: which functions `auto` condenses, as [`super::Model::condensed_whose`] says.
pub fn note(mode: NotRun, funcs: usize, lines: usize, whose: &str, front: FrontEnd) -> Option<String> {
    let which = match mode {
        _ if funcs == 0 => return None,
        NotRun::Show => return None,
        NotRun::Auto => {
            // (`whose` is said of several functions: "functions outside the test files".)
            let whose = if funcs == 1 { whose.replacen("functions", "function", 1) } else { whose.to_string() };
            let are = if funcs == 1 { "is" } else { "are" };
            format!("in {funcs} {whose} that {are} not among the {} closest to the question", super::KEPT_EXACT_TOP)
        }
        NotRun::Hide => format!("in {}", crate::testrun::plural(funcs, "function")),
    };
    Some(format!(
        "Code that did not run: {lines} lines that this run never executed (branches not taken, the rest of a \
         function after an early return) are elided {which}, each run marked `...  # N lines not run`; \
         `{}` shows them.",
        front.set(Opt::NotRun, "show")
    ))
}

fn is_trivia(line: &str) -> bool {
    let t = line.trim_start();
    t.is_empty() || t.starts_with('#')
}

/// Whether a logical line (its physical lines) opens a block: it ends with `:` outside a
/// comment.
fn opens_block(lines: &[String]) -> bool {
    let Some(last) = lines.last() else { return false };
    let b = last.as_bytes();
    let mut quote: Option<u8> = None;
    let mut end = b.len();
    let mut i = 0;
    while i < b.len() {
        match (quote, b[i]) {
            (Some(_), b'\\') => i += 1,
            (Some(q), c) if c == q => quote = None,
            (None, b'"' | b'\'') => quote = Some(b[i]),
            (None, b'#') => {
                end = i;
                break;
            }
            _ => {}
        }
        i += 1;
    }
    last[..end].trim_end().ends_with(':')
}

/// A clause that continues the statement before it at the same indentation.
fn is_clause(line: &str) -> bool {
    let t = line.trim_start();
    ["else", "elif", "except", "finally"].iter().any(|k| t.strip_prefix(k).is_some_and(|rest| rest.starts_with([':', ' ', '(', '*', '\t'])))
}

struct Lines<'a> {
    text: &'a [String],
    states: &'a [LineState],
    /// Per line: whether it starts a logical line (not inside brackets or a string).
    starts: Vec<bool>,
    /// Per line: whether it starts a logical line that holds code.
    code_start: Vec<bool>,
    /// Per line: the end (exclusive) of the logical line starting there.
    logical_end: Vec<usize>,
}

/// What a range of lines holds.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Holds {
    /// A line that ran.
    Ran,
    /// No line that ran, and code that did not run.
    NotRun,
    /// Neither.
    Nothing,
}

impl Lines<'_> {
    fn holds(&self, lo: usize, hi: usize) -> Holds {
        let s = &self.states[lo..hi];
        if s.iter().any(|l| l.may_have_run()) {
            Holds::Ran
        } else if s.contains(&LineState::NotRun) {
            Holds::NotRun
        } else {
            Holds::Nothing
        }
    }

    /// Code-starting lines in `lo..hi` at indentation `ind`.
    fn at_indent(&self, lo: usize, hi: usize, ind: usize) -> Vec<usize> {
        (lo..hi).filter(|&i| self.code_start[i] && indent(&self.text[i]) == ind).collect()
    }

    /// The block `lo..hi` (its statements are the code-starting lines at the indentation of
    /// the first): append the line ranges to elide to `out`.
    fn block(&self, lo: usize, hi: usize, out: &mut Vec<(usize, usize)>) {
        let Some(first) = (lo..hi).find(|&i| self.code_start[i]) else { return };
        let ind = indent(&self.text[first]);
        let heads = self.at_indent(first, hi, ind);
        // Statements: a head and the clauses that continue it; each spans to the next
        // statement's first line.
        let mut stmts: Vec<(usize, Vec<usize>)> = Vec::new();
        for &h in &heads {
            match stmts.last_mut() {
                Some((_, clauses)) if is_clause(&self.text[h]) => clauses.push(h),
                _ => stmts.push((h, vec![h])),
            }
        }
        let spans: Vec<(usize, usize)> = stmts.iter().enumerate().map(|(k, (s, _))| (*s, stmts.get(k + 1).map_or(hi, |n| n.0))).collect();
        let holds: Vec<Holds> = spans.iter().map(|&(a, b)| self.holds(a, b)).collect();
        let mut k = 0;
        while k < stmts.len() {
            if holds[k] == Holds::Ran {
                // Look into each clause's block.
                let clauses = &stmts[k].1;
                for (c, &h) in clauses.iter().enumerate() {
                    let end = self.logical_end[h];
                    if !opens_block(&self.text[h..end]) {
                        continue;
                    }
                    let body_hi = clauses.get(c + 1).copied().unwrap_or(spans[k].1);
                    self.block(end, body_hi, out);
                }
                k += 1;
                continue;
            }
            // A run of statements with no line that ran.
            let mut j = k;
            while j < stmts.len() && holds[j] != Holds::Ran {
                j += 1;
            }
            // Statements holding no code at either end stay.
            let (mut a, mut b) = (k, j);
            while a < b && holds[a] == Holds::Nothing {
                a += 1;
            }
            while b > a && holds[b - 1] == Holds::Nothing {
                b -= 1;
            }
            if a < b {
                let from = spans[a].0;
                // To the last line of the run that is not a blank line or comment.
                let to = (from..spans[b - 1].1).rev().find(|&i| !(self.starts[i] && is_trivia(&self.text[i]))).map_or(from, |i| i + 1);
                if to - from >= MIN_LINES {
                    out.push((from, to));
                }
            }
            k = j;
        }
    }
}

/// `code` (one function's source, its first line first) with the statements that did not run
/// elided, and the number of lines elided; `None` when nothing is. `states` has one entry per
/// line of `code` (extra entries are ignored, missing ones count as unknown).
pub fn elide_not_run(code: &str, states: &[LineState]) -> Option<(String, usize)> {
    let text: Vec<String> = code.lines().map(str::to_string).collect();
    let n = text.len();
    let mut st = states.to_vec();
    st.resize(n, LineState::Unknown);
    let starts = logical_starts(&text);
    let code_start: Vec<bool> = (0..n).map(|i| starts[i] && !is_trivia(&text[i])).collect();
    let mut logical_end = vec![n; n];
    let mut next = n;
    for i in (0..n).rev() {
        logical_end[i] = next;
        if starts[i] {
            next = i;
        }
    }
    let lines = Lines { text: &text, states: &st, starts, code_start, logical_end };
    // The function itself (decorators, `def`) is the top statement: look into its body only.
    let def = (0..n).find(|&i| {
        let t = text[i].trim_start();
        lines.code_start[i] && (t.starts_with("def ") || t.starts_with("async def "))
    })?;
    let end = lines.logical_end[def];
    if !opens_block(&text[def..end]) {
        return None;
    }
    let mut cut = Vec::new();
    lines.block(end, n, &mut cut);
    if cut.is_empty() {
        return None;
    }
    let mut out: Vec<String> = Vec::with_capacity(n);
    let mut elided = 0;
    let mut i = 0;
    for (from, to) in cut {
        out.extend(text[i..from].iter().cloned());
        let pad: String = text[from].chars().take_while(|c| c.is_whitespace()).collect();
        let k = to - from;
        out.push(format!("{pad}...  # {k} lines not run"));
        elided += k;
        i = to;
    }
    out.extend(text[i..].iter().cloned());
    Some((out.join("\n"), elided))
}

#[cfg(test)]
mod tests {
    use super::*;
    use LineState::{NotRun as N, Ran as R, Unknown as U};

    /// `code` with a state per line given as a string of `R`, `N` and `.` (unknown).
    fn elide(code: &str, states: &str) -> Option<(String, usize)> {
        let st: Vec<LineState> = states
            .chars()
            .filter(|c| !c.is_whitespace())
            .map(|c| match c {
                'R' => R,
                'N' => N,
                _ => U,
            })
            .collect();
        assert_eq!(st.len(), code.lines().count(), "one state per line");
        elide_not_run(code, &st)
    }

    const RENDER: &str = r#"def render_csv(path, header=True):
    """Render a CSV file."""
    rows = read(path)
    if header:
        box = HEAVY_HEAD
    else:
        box = SQUARE
        # no header row
        style = None
        warn("no header")
    table = Table(box=box)
    return table"#;

    #[test]
    fn a_branch_not_taken_is_one_marked_line() {
        let (code, n) = elide(RENDER, "R . R R R . N . N N R R").unwrap();
        assert_eq!(
            code,
            r#"def render_csv(path, header=True):
    """Render a CSV file."""
    rows = read(path)
    if header:
        box = HEAVY_HEAD
    else:
        ...  # 4 lines not run
    table = Table(box=box)
    return table"#
        );
        assert_eq!(n, 4);
    }

    #[test]
    fn short_runs_code_that_ran_and_code_without_line_data_stay() {
        // Two lines not run: under MIN_LINES.
        let short = "def f(x):\n    if x:\n        log(x)\n        raise E(x)\n    return 1";
        assert_eq!(elide(short, "R R N N R"), None);
        // Everything ran.
        assert_eq!(elide(RENDER, "R . R R R . R . R R R R"), None);
        // No line data: nothing is known not to have run.
        assert_eq!(elide(RENDER, ". . . . . . . . . . . ."), None);
    }

    #[test]
    fn the_rest_of_a_function_after_an_early_return_goes() {
        let code = "def divide(self, offsets):\n    if not offsets:\n        return [self]\n    text = self.text\n    \
                    lines = []\n\n    for o in offsets:\n        lines.append(text[:o])\n    return lines\n";
        let (out, n) = elide(code, "R R R N N . N N N").unwrap();
        assert_eq!(out, "def divide(self, offsets):\n    if not offsets:\n        return [self]\n    ...  # 6 lines not run");
        assert_eq!(n, 6);
    }

    #[test]
    fn handlers_that_did_not_run_go_and_the_try_body_stays() {
        let code = "def load(p):\n    try:\n        data = open(p).read()\n    except OSError as e:\n        log(e)\n        \
                    data = ''\n        return None\n    finally:\n        close()\n    return data";
        let (out, n) = elide(code, "R R R N N N N . R R").unwrap();
        assert_eq!(
            out,
            "def load(p):\n    try:\n        data = open(p).read()\n    except OSError as e:\n        ...  # 3 lines not run\n    \
             finally:\n        close()\n    return data"
        );
        assert_eq!(n, 3);
    }

    #[test]
    fn multi_line_statements_and_nested_blocks_are_cut_whole() {
        // A call over three lines that ran is kept, though one of its lines did not run (a
        // short-circuit); a nested if inside a loop body that never ran goes with the loop.
        let code = "def f(items, flag):\n    total = compute(\n        flag or\n        fallback())\n    for i in items:\n        \
                    if i:\n            total += i\n    return total";
        let (out, _) = elide(code, "R R R N N N N R").unwrap();
        assert_eq!(
            out,
            "def f(items, flag):\n    total = compute(\n        flag or\n        fallback())\n    ...  # 3 lines not run\n    return total"
        );
    }

    #[test]
    fn a_docstring_at_the_start_of_a_run_and_trailing_blank_lines_stay() {
        let code = "def f(x):\n    if x:\n        \"\"\"Explain.\"\"\"\n        a = 1\n        b = 2\n        c = 3\n\n    return x";
        let (out, n) = elide(code, "R R . N N N . R").unwrap();
        assert_eq!(out, "def f(x):\n    if x:\n        \"\"\"Explain.\"\"\"\n        ...  # 3 lines not run\n\n    return x");
        assert_eq!(n, 3);
    }

    #[test]
    fn decorators_and_the_signature_are_never_touched() {
        let code = "@cached\ndef f(\n    x,\n):\n    if x:\n        a()\n        b()\n        c()\n    return x";
        let (out, _) = elide(code, "N N N . R N N N R").unwrap();
        assert_eq!(out, "@cached\ndef f(\n    x,\n):\n    if x:\n        ...  # 3 lines not run\n    return x");
        // Not a function (a class or module body): left alone.
        assert_eq!(elide("class A:\n    x = 1\n    y = 2\n    z = 3", "R N N N"), None);
    }

    #[test]
    fn the_note_says_how_many_and_how_to_see_them() {
        assert_eq!(note(NotRun::Auto, 0, 0, "installed packages' functions", FrontEnd::Cli), None);
        assert_eq!(note(NotRun::Show, 3, 40, "installed packages' functions", FrontEnd::Cli), None);
        let n = note(NotRun::Auto, 3, 40, "installed packages' functions", FrontEnd::Cli).unwrap();
        assert!(n.starts_with("Code that did not run: 40 lines") && n.contains("in 3 installed packages' functions"), "{n}");
        assert!(n.ends_with("`--not-run show` shows them."), "{n}");
        // Through MCP: the prompt tool's parameter.
        let n = note(NotRun::Hide, 3, 40, "installed packages' functions", FrontEnd::Mcp).unwrap();
        assert!(n.ends_with("`not_run: \"show\"` shows them."), "{n}");
        // One function: said in the singular.
        let n = note(NotRun::Hide, 1, 4, "installed packages' functions", FrontEnd::Cli).unwrap();
        assert!(n.contains("are elided in 1 function, each"), "{n}");
        let n = note(NotRun::Auto, 1, 4, "functions outside the test files", FrontEnd::Cli).unwrap();
        assert!(n.contains("in 1 function outside the test files that is not among the 25 closest"), "{n}");
    }
}
