//! Code that did not run, elided in native functions (C, C++, Rust: languages of braces), with
//! the line data of `trace run --lines` (docs/native-recording.md, "Lines that ran").
//!
//! The rule is [`super::notrun`]'s, on lines instead of Python's statements: inside the
//! function's body, a run of consecutive lines none of which ran and at least one of which holds
//! code that did not run ([`LineState::NotRun`]) is replaced by one line `// ...  N lines not
//! run` at the run's indentation, when it is at least [`MIN_LINES`] lines long, starts where a
//! statement starts and ends where one ends (the line before it and its last line end with `;`,
//! `{`, `}` or `:`, or are a Rust match arm's) and is balanced in brackets (`()`, `[]`, `{}`, outside strings and
//! comments): never half a statement or half a block. Blank and comment lines at either end of
//! a run stay. What is left compiles as the text it replaced would have (a comment).
//!
//! One rule more than Python's: a statement with no line data of its own ([`LineState::Unknown`]
//! on its first line, which holds more than brackets and `else`) stops a run. In Python an
//! unknown line holds no code; in optimized native code it can be a statement whose
//! instructions belong to other lines' rows (a macro's expansion, code merged with a
//! neighbour's), which may have run.

use crate::coverage::LineState;
use crate::prompt::notrun::MIN_LINES;

/// Per line: the bracket depth before it and the lowest depth inside it, in one scan that
/// skips string and character literals and comments.
fn depths(text: &[&str]) -> Vec<(i32, i32)> {
    let mut out = Vec::with_capacity(text.len());
    let (mut depth, mut in_block) = (0i32, false);
    for line in text {
        let before = depth;
        let mut low = depth;
        let b = line.as_bytes();
        let mut i = 0;
        while i < b.len() {
            if in_block {
                if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                    in_block = false;
                    i += 1;
                }
                i += 1;
                continue;
            }
            match b[i] {
                b'/' if b.get(i + 1) == Some(&b'/') => break,
                b'/' if b.get(i + 1) == Some(&b'*') => {
                    in_block = true;
                    i += 1;
                }
                b'"' => {
                    i += 1;
                    while i < b.len() && b[i] != b'"' {
                        i += if b[i] == b'\\' { 2 } else { 1 };
                    }
                }
                // A character literal ('x', '\n'), not a Rust lifetime ('a).
                b'\'' if b.get(i + 1) == Some(&b'\\') || b.get(i + 2) == Some(&b'\'') => {
                    i += 1;
                    while i < b.len() && b[i] != b'\'' {
                        i += if b[i] == b'\\' { 2 } else { 1 };
                    }
                }
                b'(' | b'[' | b'{' => depth += 1,
                b')' | b']' | b'}' => {
                    depth -= 1;
                    low = low.min(depth);
                }
                _ => {}
            }
            i += 1;
        }
        out.push((before, low));
    }
    out
}

/// Whether a line holds more than brackets, `;`, `,` and `else` (outside a trailing comment).
fn substantive(line: &str) -> bool {
    let code = line.split("//").next().unwrap_or(line);
    let rest: String = code.chars().filter(|c| !c.is_whitespace() && !"{}()[];,".contains(*c)).collect();
    !rest.is_empty() && rest != "else"
}

fn is_trivia(line: &str) -> bool {
    let t = line.trim_start();
    // A block comment's inner line (` * text`, ` */`), not a statement through a pointer
    // (`*p = 0;`).
    let comment_star = t.strip_prefix('*').is_some_and(|r| r.is_empty() || r.starts_with([' ', '\t', '/']));
    t.is_empty() || t.starts_with("//") || t.starts_with("/*") || comment_star
}

/// Whether a line ends a statement or opens or closes a block (its code, without a trailing
/// `//` comment).
fn ends_statement(line: &str) -> bool {
    let code = match line.find("//") {
        Some(i) if !line[..i].contains('"') => &line[..i],
        _ => line,
    };
    let t = code.trim_end();
    // A Rust match arm ends with `,` too; an argument list's lines do not end statements.
    t.ends_with([';', '{', '}', ':']) || (t.ends_with(',') && t.contains("=>")) || t.trim_start().starts_with('#')
}

/// `code` (one native function's source, its first line first) with the lines that did not
/// run elided, and the number of lines elided; `None` when nothing is. `states` has one entry
/// per line of `code` (missing ones count as unknown).
pub fn elide_not_run(code: &str, states: &[LineState]) -> Option<(String, usize)> {
    let text: Vec<&str> = code.lines().collect();
    let n = text.len();
    let st = |i: usize| states.get(i).copied().unwrap_or(LineState::Unknown);
    let d = depths(&text);
    let depth_at = |i: usize| if i < n { d[i].0 } else { d.last().map_or(0, |l| l.0) };
    // The body: from the line after the one that opens it, to before the last line.
    let open = (0..n).find(|&i| depth_at(i + 1) > 0)?;
    let body = open + 1..n.saturating_sub(1);
    let mut cut: Vec<(usize, usize)> = Vec::new();
    let mut x = body.start;
    while x < body.end {
        // A run of lines none of which ran.
        if st(x).may_have_run() {
            x += 1;
            continue;
        }
        let mut b = x;
        while b < body.end && !st(b).may_have_run() {
            b += 1;
        }
        // The longest piece from each start that is whole statements and balanced.
        let mut a = x;
        while a < b {
            let starts = !is_trivia(text[a])
                && (a == body.start || (0..a).rev().find(|&i| !is_trivia(text[i])).is_none_or(|i| ends_statement(text[i])));
            let base = d[a].0;
            let found = starts
                .then(|| {
                    let mut low = i32::MAX;
                    let mut best = None;
                    for y in a..b {
                        low = low.min(d[y].1);
                        let unknown_statement = st(y) == LineState::Unknown
                            && !is_trivia(text[y])
                            && substantive(text[y])
                            && (y == a || (a..y).rev().find(|&i| !is_trivia(text[i])).is_none_or(|i| ends_statement(text[i])));
                        if low < base || unknown_statement {
                            break;
                        }
                        if depth_at(y + 1) == base && !is_trivia(text[y]) && ends_statement(text[y]) {
                            best = Some(y + 1);
                        }
                    }
                    best
                })
                .flatten()
                .filter(|&y| y - a >= MIN_LINES && (a..y).any(|i| st(i) == LineState::NotRun));
            match found {
                Some(y) => {
                    cut.push((a, y));
                    a = y;
                }
                None => a += 1,
            }
        }
        x = b;
    }
    if cut.is_empty() {
        return None;
    }
    let mut out: Vec<String> = Vec::with_capacity(n);
    let (mut elided, mut i) = (0, 0);
    for (from, to) in cut {
        out.extend(text[i..from].iter().map(|s| s.to_string()));
        let pad: String = text[from].chars().take_while(|c| c.is_whitespace()).collect();
        out.push(format!("{pad}// ...  {} lines not run", to - from));
        elided += to - from;
        i = to;
    }
    out.extend(text[i..].iter().map(|s| s.to_string()));
    Some((out.join("\n"), elided))
}

#[cfg(test)]
mod tests {
    use super::*;
    use LineState::{MayHaveRun as M, NotRun as N, Ran as R, Unknown as U};

    fn states(s: &str) -> Vec<LineState> {
        s.chars()
            .filter(|c| !c.is_whitespace())
            .map(|c| match c {
                'R' => R,
                'N' => N,
                'M' => M,
                _ => U,
            })
            .collect()
    }

    const CLASSIFY: &str = "static int classify(int x) {
  int r = 0;
  if (x > 100) {
    r = x * 2;
    r += 7;
    printf(\"big %d\\n\",
           r);
  } else {
    r = x + 1;
  }
  return r;
}";

    #[test]
    fn a_branch_not_taken_is_one_marker_and_the_block_stays_whole() {
        let (code, n) = elide_not_run(CLASSIFY, &states("R R R N N N . . R . R R")).expect("elided");
        assert_eq!(n, 4);
        assert_eq!(
            code,
            "static int classify(int x) {\n  int r = 0;\n  if (x > 100) {\n    // ...  4 lines not run\n  } else {\n    r = x + 1;\n  }\n  return r;\n}"
        );
    }

    #[test]
    fn half_a_statement_or_a_block_is_never_elided_and_short_runs_stay() {
        // The printf ran but its continuation line is unknown: nothing before it is 3 lines.
        assert_eq!(elide_not_run(CLASSIFY, &states("R R R N N R . . R . R R")), None);
        // Everything after the if unknown or not run, the if ran: the `} else {` line closes a
        // block opened before the run, so the run stops before it.
        let (code, n) = elide_not_run(CLASSIFY, &states("R R R N N N . N N . R R")).expect("elided");
        assert_eq!(n, 4);
        assert!(code.contains("  } else {\n    r = x + 1;\n  }"), "{code}");
        // A statement without line data of its own stops a run (it may have run).
        assert_eq!(elide_not_run(CLASSIFY, &states("R R R N . N . . R . R R")), None);
        // Nothing known: nothing elided.
        assert_eq!(elide_not_run(CLASSIFY, &states("............")), None);
        // A statement through a pointer starts a run; a block comment's inner lines stay.
        let c = "void f(int *p, int x) {\n  if (x) {\n    *p = 1;\n    /* set\n     * twice\n     */\n    *p += x;\n  }\n}";
        let (code, n) = elide_not_run(c, &states("R R N . . . N R R")).expect("elided");
        assert_eq!(n, 5);
        assert!(code.contains("  if (x) {\n    // ...  5 lines not run\n  }"), "{code}");
    }

    /// ripgrep's `m_ignore = ig.inner.ignore_matcher.matched(path, is_dir).map(..)`: the
    /// statement's one row did not fire, and the call of the inlined `matched` on a
    /// continuation line may have run. The statement is shown, as if it had run.
    #[test]
    fn a_line_that_may_have_run_is_never_elided() {
        let rust = "fn f(mut m: Option<u8>, ig: &Ig) {\n    if m.is_none() {\n        m = ig\n            .inner\n            .matched(1)\n            .map(g);\n    }\n}";
        assert_eq!(elide_not_run(rust, &states("R R N . M . R R")), None);
        // With the call not known to have run, the statement is elided.
        let (code, n) = elide_not_run(rust, &states("R R N . . . R R")).expect("elided");
        assert_eq!(n, 4);
        assert!(code.contains("    if m.is_none() {\n        // ...  4 lines not run\n    }"), "{code}");
    }

    #[test]
    fn strings_comments_and_lifetimes_do_not_count_as_brackets() {
        let rust = "fn f<'a>(s: &'a str) -> usize {\n    let n = s.len();\n    if n > 3 {\n        let c = '{';\n        let t = \"}(\";\n        return 1; // )\n    }\n    n\n}";
        let (code, n) = elide_not_run(rust, &states("R R R N N N . R R")).expect("elided");
        assert_eq!(n, 3);
        assert!(code.contains("    if n > 3 {\n        // ...  3 lines not run\n    }\n"), "{code}");
    }
}
