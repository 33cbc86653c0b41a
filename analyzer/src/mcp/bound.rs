//! Bounding answers: every tool answer of `slice mcp` fits its token limit, counted with the
//! real tokenizer, and says what it left out and how to ask for it.
//!
//! The prompt tool uses the prompt budget machinery ([`crate::prompt::budget::fit`]); the
//! other tools lay their answers out as a head and a list of lines, and keep as many whole
//! lines as fit ([`fit_lines`]), or cut a tree below a depth ([`fit_tree`]).

use crate::tokens::Tokenizer;

/// Default `max_tokens` of the prompt tool (Claude Code refuses tool output past 25,000 tokens
/// by default; the margin covers tokenizers that count more than o200k_base).
pub const PROMPT_DEFAULT: usize = 16_000;
/// Default `max_tokens` of the other tools.
pub const VIEW_DEFAULT: usize = 8_000;
/// The smallest limit accepted: room for a head line and the note on what was left out.
pub const MIN_TOKENS: usize = 200;

/// The token counter of the answers.
pub const TOKENIZER: Tokenizer = Tokenizer::O200kBase;

/// A token limit from a tool argument: the default when absent, an error below [`MIN_TOKENS`].
pub fn limit(asked: Option<u64>, default: usize) -> Result<usize, String> {
    match asked {
        None => Ok(default),
        Some(n) if (n as u128) < MIN_TOKENS as u128 => {
            Err(format!("max_tokens {n} is too small: answers need at least {MIN_TOKENS} tokens (the default is {default})"))
        }
        Some(n) => Ok(usize::try_from(n).unwrap_or(usize::MAX)),
    }
}

/// `head`, then as many of `lines` (in order) as fit in `max` tokens with the note that
/// `left_out(n)` writes for the `n` lines left out. The result is never over `max` tokens
/// unless `head` alone is (then `head` is cut too, line by line).
pub fn fit_lines(head: &str, lines: &[String], max: usize, left_out: impl Fn(usize) -> String) -> String {
    fit_lines_dyn(head, lines, max, &left_out)
}

fn fit_lines_dyn(head: &str, lines: &[String], max: usize, left_out: &dyn Fn(usize) -> String) -> String {
    let build = |k: usize| -> String {
        let mut s = String::with_capacity(head.len() + 64 * k);
        s.push_str(head);
        for l in &lines[..k] {
            s.push_str(l);
            s.push('\n');
        }
        if k < lines.len() {
            s.push_str(&left_out(lines.len() - k));
            s.push('\n');
        }
        s
    };
    let all = build(lines.len());
    if TOKENIZER.count(&all) <= max {
        return all;
    }
    // The largest k that fits, by bisection (token counts grow with k).
    let (mut lo, mut hi) = (0usize, lines.len());
    if TOKENIZER.count(&build(0)) > max {
        let head_lines: Vec<String> = head.lines().map(str::to_string).collect();
        if head_lines.len() <= 1 {
            return cut_chars(head, max);
        }
        return fit_lines_dyn("", &head_lines, max, &|n| format!("… {n} more lines left out to fit max_tokens={max}"));
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if TOKENIZER.count(&build(mid)) <= max {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    build(lo)
}

/// The longest prefix of a single line of text that fits (a last resort).
fn cut_chars(text: &str, max: usize) -> String {
    let chars: Vec<char> = text.chars().collect();
    let (mut lo, mut hi) = (0usize, chars.len());
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        let s: String = chars[..mid].iter().collect();
        if TOKENIZER.count(&s) < max {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let mut s: String = chars[..lo].iter().collect();
    s.push('…');
    s
}

/// One line of a tree, with the depth of its node (1 = a root call) and the number of nodes
/// below it.
#[derive(Debug, Clone)]
pub struct TreeLine {
    pub text: String,
    pub depth: u32,
    pub descendants: usize,
}

/// Cut a tree (lines in pre-order) below the deepest depth at which `head` + the lines fit in
/// `max` tokens. Each cut is marked in place (`… N more calls below`) and `note(depth)` is
/// appended when anything was cut. Falls back to [`fit_lines`] when even depth 1 is too long.
pub fn fit_tree(head: &str, lines: &[TreeLine], max: usize, note: impl Fn(u32) -> String) -> String {
    let build = |d: u32| -> String {
        let mut s = String::from(head);
        let mut i = 0;
        while i < lines.len() {
            let l = &lines[i];
            if l.depth > d {
                i += 1;
                continue;
            }
            s.push_str(&l.text);
            s.push('\n');
            if l.depth == d && l.descendants > 0 {
                s.push_str(&format!("{}… {} more calls below\n", " ".repeat(30 + 3 * d as usize), l.descendants));
            }
            i += 1;
        }
        s
    };
    let max_depth = lines.iter().map(|l| l.depth).max().unwrap_or(0);
    let full = build(max_depth);
    if TOKENIZER.count(&full) <= max {
        return full;
    }
    let with_note = |d: u32| {
        let mut s = build(d);
        s.push_str(&note(d));
        s.push('\n');
        s
    };
    let (mut lo, mut hi) = (0u32, max_depth);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if TOKENIZER.count(&with_note(mid)) <= max {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    if lo >= 1 {
        return with_note(lo);
    }
    let texts: Vec<String> = lines.iter().map(|l| l.text.clone()).collect();
    fit_lines(head, &texts, max, |n| format!("… {n} more tree lines left out; {}", note(1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_kept_in_order_until_the_limit_and_the_rest_is_counted() {
        let lines: Vec<String> = (0..500).map(|i| format!("line number {i} of the answer")).collect();
        let s = fit_lines("HEAD\n", &lines, 300, |n| format!("… {n} more lines (raise max_tokens)"));
        assert!(TOKENIZER.count(&s) <= 300, "{}", TOKENIZER.count(&s));
        assert!(s.starts_with("HEAD\nline number 0 of the answer\nline number 1 of"));
        let kept = s.lines().filter(|l| l.starts_with("line number")).count();
        assert!(kept > 10 && kept < 500);
        assert!(s.ends_with(&format!("… {} more lines (raise max_tokens)\n", 500 - kept)), "{s}");
        // Everything fits: no note.
        let small = fit_lines("HEAD\n", &lines[..3], 300, |_| "NOTE".into());
        assert_eq!(small, "HEAD\nline number 0 of the answer\nline number 1 of the answer\nline number 2 of the answer\n");
    }

    #[test]
    fn a_head_longer_than_the_limit_is_cut_too() {
        let head: String = (0..400).map(|i| format!("head line {i}\n")).collect();
        let s = fit_lines(&head, &[], 200, |_| String::new());
        assert!(TOKENIZER.count(&s) <= 200);
        assert!(s.starts_with("head line 0\n"));
        let one = "word ".repeat(1000);
        let s = fit_lines(&one, &[], 200, |_| String::new());
        assert!(TOKENIZER.count(&s) <= 200 && s.ends_with('…'));
    }

    #[test]
    fn trees_are_cut_by_depth_with_marks() {
        // a -> (b -> c -> d) x 60 siblings
        let mut lines = vec![TreeLine { text: "a".into(), depth: 1, descendants: 180 }];
        for i in 0..60 {
            lines.push(TreeLine { text: format!("  b{i} something long enough"), depth: 2, descendants: 2 });
            lines.push(TreeLine { text: format!("    c{i} something long enough"), depth: 3, descendants: 1 });
            lines.push(TreeLine { text: format!("      d{i} something long enough"), depth: 4, descendants: 0 });
        }
        let full = fit_tree("H\n", &lines, 100_000, |d| format!("cut below {d}"));
        assert_eq!(full.lines().count(), 1 + 181);
        let cut = fit_tree("H\n", &lines, 1200, |d| format!("cut below {d}"));
        assert!(TOKENIZER.count(&cut) <= 1200);
        assert!(cut.contains("  b0 something") && !cut.contains("d0 something"), "{cut}");
        assert!(cut.trim_end().ends_with("cut below 2") || cut.trim_end().ends_with("cut below 3"), "{cut}");
        let marks = cut.lines().filter(|l| l.trim_start().starts_with("… ")).count();
        assert!(marks == 60, "{cut}");
    }

    #[test]
    fn limits() {
        assert_eq!(limit(None, 8000), Ok(8000));
        assert_eq!(limit(Some(u64::MAX), 8000), Ok(usize::MAX));
        assert!(limit(Some(10), 8000).unwrap_err().contains("too small"));
    }
}
