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
///
/// Linear in what is kept, not in `lines`: each line is counted once, in order, until the
/// count passes `max`; the lines after that are never counted (an answer of 8,000 tokens
/// does not tokenize 30 MB of call paths, several times over in a bisection).
pub fn fit_lines(head: &str, lines: &[String], max: usize, left_out: impl Fn(usize) -> String) -> String {
    fit_lines_dyn(head, lines, max, &left_out)
}

/// `head`, the first `k` of `lines` and, when lines are left out, the note.
fn build_lines(head: &str, lines: &[String], k: usize, left_out: &dyn Fn(usize) -> String) -> String {
    let mut s = String::with_capacity(head.len() + lines[..k].iter().map(|l| l.len() + 1).sum::<usize>() + 128);
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
}

/// The largest `k` in `0..=hi` for which `fits(k)` holds, given that `fits` is monotone
/// (true up to some k, false after) and `fits(0)` holds: `hi` is tried first (an estimate
/// usually right), then a bisection.
fn largest_fitting(hi: usize, fits: impl Fn(usize) -> bool) -> usize {
    if fits(hi) {
        return hi;
    }
    let (mut lo, mut hi) = (0usize, hi);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if fits(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}

fn fit_lines_dyn(head: &str, lines: &[String], max: usize, left_out: &dyn Fn(usize) -> String) -> String {
    if TOKENIZER.count(&build_lines(head, lines, 0, left_out)) > max {
        let head_lines: Vec<String> = head.lines().map(str::to_string).collect();
        if head_lines.len() <= 1 {
            return cut_chars(head, max);
        }
        return fit_lines_dyn("", &head_lines, max, &|n| format!("… {n} more lines left out to fit max_tokens={max}"));
    }
    // The lines' counts add up to about the count of their text (a line's tokens rarely
    // join the next line's): the estimate `k` of how many fit. Counting stops past `max`.
    let mut used = TOKENIZER.count(head);
    let mut k = 0;
    for l in lines {
        used += TOKENIZER.count(l) + 1;
        if used > max {
            break;
        }
        k += 1;
    }
    let fits = |k: usize| TOKENIZER.count(&build_lines(head, lines, k, left_out)) <= max;
    // Every text counted for real is at most about `max` tokens (and `k` + 1 lines).
    build_lines(head, lines, largest_fitting(k, fits), left_out)
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
///
/// Each line's tokens are counted at most once, and only while the lines of a depth still
/// fit: a tree of 200,000 levels is cut in about the time its kept lines take to count.
pub fn fit_tree(head: &str, lines: &[TreeLine], max: usize, note: impl Fn(u32) -> String) -> String {
    let mark = |l: &TreeLine| {
        let calls = if l.descendants == 1 { "call" } else { "calls" };
        format!("{}… {} more {calls} below\n", " ".repeat(30 + 3 * crate::views::indent_levels(l.depth + 1)), l.descendants)
    };
    let build = |d: u32, with_note: bool| -> String {
        let mut s = String::from(head);
        for l in lines {
            if l.depth > d {
                continue;
            }
            s.push_str(&l.text);
            s.push('\n');
            if l.depth == d && l.descendants > 0 {
                s.push_str(&mark(l));
            }
        }
        if with_note {
            s.push_str(&note(d));
            s.push('\n');
        }
        s
    };
    let max_depth = lines.iter().map(|l| l.depth).max().unwrap_or(0);
    // Tokens of each line (with its newline), counted when first needed.
    let counts: Vec<std::cell::Cell<Option<usize>>> = vec![std::cell::Cell::new(None); lines.len()];
    let count = |i: usize| match counts[i].get() {
        Some(c) => c,
        None => {
            let c = TOKENIZER.count(&lines[i].text) + 1;
            counts[i].set(Some(c));
            c
        }
    };
    let head_tokens = TOKENIZER.count(head);
    // The estimated tokens of the tree cut at depth `d`, or None once past `max`.
    let estimate = |d: u32, with_note: bool| -> Option<usize> {
        let mut used = head_tokens + if with_note { TOKENIZER.count(&note(d)) + 1 } else { 0 };
        for (i, l) in lines.iter().enumerate() {
            if l.depth > d {
                continue;
            }
            used += count(i);
            if l.depth == d && l.descendants > 0 {
                used += TOKENIZER.count(&mark(l));
            }
            if used > max {
                return None;
            }
        }
        Some(used)
    };
    if estimate(max_depth, false).is_some() {
        let full = build(max_depth, false);
        if TOKENIZER.count(&full) <= max {
            return full;
        }
    }
    // The deepest cut whose estimate fits (the estimate is monotone in the depth), then
    // shallower ones until one fits for real.
    let (mut lo, mut hi) = (0u32, max_depth);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if estimate(mid, true).is_some() {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    // Every text counted for real here is about `max` tokens at most.
    let fits = |d: usize| d == 0 || TOKENIZER.count(&build(d as u32, true)) <= max;
    let lo = largest_fitting(lo as usize, fits) as u32;
    if lo >= 1 {
        return build(lo, true);
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
