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

/// Cut a tree (lines in pre-order, depth 0 for header lines) to fit `max` tokens with `head`,
/// breadth first: every line of a depth before any of the next, and of the last depth that
/// fits in part, the first in pre-order. Each cut is marked in place, after what is kept of
/// the subtree (`… N more calls below`), and `note(depth, partial)` (the deepest depth kept
/// whole; whether some lines of the next are kept) is appended when anything was cut.
///
/// `head` (the run's outcome and notes) takes at most half of `max`: the tree is what was
/// asked for. Each line's tokens are counted at most once, and only while the lines still
/// fit: a tree of 200,000 levels is cut in about the time its kept lines take to count (the
/// bisection then rebuilds texts of about `max` tokens, and walks the lines' depths).
pub fn fit_tree(head: &str, lines: &[TreeLine], max: usize, note: impl Fn(u32, bool) -> String) -> String {
    let head = if TOKENIZER.count(head) > max / 2 {
        let head_lines: Vec<String> = head.lines().map(str::to_string).collect();
        fit_lines("", &head_lines, max / 2, |n| format!("… {n} more lines of outcome and notes left out to fit max_tokens={max}"))
    } else {
        head.to_string()
    };
    // Breadth first: by depth, then in pre-order. Header lines go with the roots under them
    // (a second thread's heading before its first call, not before the first thread's roots).
    let mut order: Vec<usize> = (0..lines.len()).collect();
    order.sort_by_key(|&i| (lines[i].depth.max(1), i));
    let mark = |depth: u32, n: usize| {
        let calls = if n == 1 { "call" } else { "calls" };
        format!("{}… {n} more {calls} below\n", " ".repeat(30 + 3 * crate::views::indent_levels(depth + 1)))
    };
    // The text of the first `k` lines in `order`; None when nothing was left out.
    let build = |k: usize| -> (String, Option<u32>) {
        let mut kept = vec![false; lines.len()];
        for &i in &order[..k] {
            kept[i] = true;
        }
        let mut s = head.clone();
        // Open lines: (index, the calls under its children that are not kept).
        let mut open: Vec<(usize, usize)> = Vec::new();
        let close = |s: &mut String, open: &mut Vec<(usize, usize)>| {
            if let Some((i, cut)) = open.pop() {
                if kept[i] && cut > 0 {
                    s.push_str(&mark(lines[i].depth, cut));
                }
                if let Some(parent) = open.last_mut() {
                    if !kept[i] {
                        parent.1 += 1 + lines[i].descendants;
                    }
                }
            }
        };
        for (i, l) in lines.iter().enumerate() {
            while open.last().is_some_and(|&(j, _)| lines[j].depth >= l.depth) {
                close(&mut s, &mut open);
            }
            if kept[i] {
                s.push_str(&l.text);
                s.push('\n');
            }
            open.push((i, 0));
        }
        while !open.is_empty() {
            close(&mut s, &mut open);
        }
        if k == lines.len() {
            return (s, None);
        }
        // The deepest depth kept whole.
        let level = |i: usize| lines[i].depth.max(1);
        let whole = level(order[k]) - 1;
        let partial = k > 0 && level(order[k - 1]) == whole + 1;
        s.push_str(&note(whole, partial));
        s.push('\n');
        (s, Some(whole))
    };
    // How many lines fit, estimated from their counts (marks and the note are a little more);
    // counting stops past `max`.
    let mut used = TOKENIZER.count(&head);
    let mut k = 0;
    for &i in &order {
        used += TOKENIZER.count(&lines[i].text) + 1;
        if used > max {
            break;
        }
        k += 1;
    }
    let fits = |k: usize| k == 0 || TOKENIZER.count(&build(k).0) <= max;
    build(largest_fitting(k, fits)).0
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
        let full = fit_tree("H\n", &lines, 100_000, |d, _| format!("cut below {d}"));
        assert_eq!(full.lines().count(), 1 + 181);
        let cut = fit_tree("H\n", &lines, 1200, |d, _| format!("cut below {d}"));
        assert!(TOKENIZER.count(&cut) <= 1200);
        assert!(cut.contains("  b0 something") && !cut.contains("d0 something"), "{cut}");
        assert!(cut.trim_end().ends_with("cut below 2") || cut.trim_end().ends_with("cut below 3"), "{cut}");
        let marks = cut.lines().filter(|l| l.trim_start().starts_with("… ")).count();
        assert!(marks == 60, "{cut}");
        // Breadth first: every b, then the first c's in pre-order; each line is shown or
        // counted in exactly one mark, and a mark follows what is kept of its subtree.
        assert!(cut.contains("    c0 something") && !cut.contains("    c59 something"), "{cut}");
        let counted: usize = cut
            .lines()
            .filter_map(|l| l.trim_start().strip_prefix("… "))
            .map(|l| l.split(' ').next().and_then(|n| n.parse::<usize>().ok()).expect("a count"))
            .sum();
        let shown = cut.lines().filter(|l| l.contains("something") || *l == "a").count();
        assert_eq!(shown + counted, 181, "{cut}");
        assert!(
            cut.contains("  b0 something long enough\n    c0 something long enough\n") && cut.contains("… 1 more call below\n  b1 "),
            "{cut}"
        );
    }

    #[test]
    fn a_long_head_leaves_half_of_the_limit_to_the_tree() {
        let head: String = (0..300).map(|i| format!("note {i}: a test failed with a long message\n")).collect();
        let lines: Vec<TreeLine> = (0..40).map(|i| TreeLine { text: format!("  call{i}"), depth: 1, descendants: 0 }).collect();
        let s = fit_tree(&head, &lines, 500, |d, _| format!("cut below {d}"));
        assert!(TOKENIZER.count(&s) <= 500, "{s}");
        assert!(s.contains("more lines of outcome and notes left out") && s.contains("  call39\n"), "{s}");
    }

    #[test]
    fn limits() {
        assert_eq!(limit(None, 8000), Ok(8000));
        assert_eq!(limit(Some(u64::MAX), 8000), Ok(usize::MAX));
        assert!(limit(Some(10), 8000).unwrap_err().contains("too small"));
    }
}
