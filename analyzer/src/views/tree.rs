//! `slice tree`: the call tree in the terminal, one node a line, with inclusive time, self time
//! and call count, like `uftrace graph` or `perf report --children`:
//!
//! ```text
//!     TOTAL      SELF    CALLS  FUNCTION
//!   4.12 ms   15.0 µs       ×1  main  (app.py:53)
//!   1.20 ms   40.1 µs       ×1  ├─ load_catalogue  (app.py:24)
//!   1.02 ms    310 µs       ×6  │  └─ parse_row  (shop/models.py:47)
//! ```
//!
//! `TOTAL`: inclusive time of all calls merged into the node; `SELF`: that time less the
//! callees' (time spent in the function's own code, and in callees not shown); `×N`: calls
//! merged into the node; `↻ recursive`: a recursive call, nothing below it is recorded.

use super::{human_ns, location, self_time, total_calls, total_time, View};
use crate::calltree::{CallTree, NodeId, ROOT};
use anstyle::{AnsiColor, Style};
use std::io::{self, Write};
use std::path::Path;
use trace_format::escape;

/// Styles of the parts of a line (all plain without colour).
#[derive(Debug, Clone, Copy, Default)]
pub struct Palette {
    pub header: Style,
    pub name: Style,
    pub location: Style,
    pub count: Style,
    pub hot: Style,
    pub warm: Style,
    pub guide: Style,
    pub recursive: Style,
}

impl Palette {
    /// The colour palette (`color: false`: no escape sequences at all).
    pub fn new(color: bool) -> Palette {
        if !color {
            return Palette::default();
        }
        Palette {
            header: Style::new().bold(),
            name: Style::new().bold(),
            location: Style::new().dimmed(),
            count: AnsiColor::Cyan.on_default(),
            hot: AnsiColor::Red.on_default().bold(),
            warm: AnsiColor::Yellow.on_default(),
            guide: Style::new().dimmed(),
            recursive: AnsiColor::Magenta.on_default(),
        }
    }
}

/// Write `text` in `style` (no escapes for the plain style).
pub fn paint<W: Write + ?Sized>(out: &mut W, style: Style, text: &str) -> io::Result<()> {
    if style == Style::new() {
        out.write_all(text.as_bytes())
    } else {
        write!(out, "{}{text}{}", style.render(), style.render_reset())
    }
}

/// Render one view: a header naming it, a column header, then the tree.
pub fn render<W: Write + ?Sized>(out: &mut W, view: &View, cwd: &Path, pal: &Palette) -> io::Result<()> {
    let t = &view.tree;
    let total = total_time(t);
    let header = format!(
        "── {} ── {} nodes, {} calls, {}{}",
        escape::line(&view.label),
        t.len(),
        total_calls(t),
        if total > 0 { human_ns(total) } else { "no time recorded".into() },
        if view.times_estimated && total > 0 { format!(" ({})", super::TIMES_ESTIMATED) } else { String::new() }
    );
    paint(out, pal.header, &header)?;
    writeln!(out)?;
    paint(out, pal.header, &format!("{:>9} {:>9} {:>8}  FUNCTION", "TOTAL", "SELF", "CALLS"))?;
    writeln!(out)?;
    // (node, guide prefix of its children)
    let mut stack: Vec<(NodeId, String)> = t.node(ROOT).children.iter().rev().map(|&c| (c, String::new())).collect();
    while let Some((n, prefix)) = stack.pop() {
        let node = t.node(n);
        let f = super::func_of(t, n);
        let parent = node.parent;
        let siblings = &t.node(parent).children;
        let last = siblings.last() == Some(&n);
        let (branch, cont) = if node.depth == 1 {
            ("", "")
        } else if last {
            ("└─ ", "   ")
        } else {
            ("├─ ", "│  ")
        };
        let share = if total > 0 { node.time_ns as f64 / total as f64 } else { 0.0 };
        let tstyle = if share >= 0.5 {
            pal.hot
        } else if share >= 0.2 {
            pal.warm
        } else {
            Style::new()
        };
        paint(out, tstyle, &format!("{:>9}", human_ns(node.time_ns)))?;
        write!(out, " {:>9} ", human_ns(self_time(t, n)))?;
        // An inlined function is not called: its count is of the inline probes that fired and
        // the calls its code made.
        let calls = if f.inlined { "ran".to_string() } else { format!("×{}", node.count) };
        paint(out, pal.count, &format!("{calls:>8}"))?;
        write!(out, "  ")?;
        if node.depth.saturating_sub(1) > super::MAX_INDENT {
            // No guide below MAX_INDENT levels: the depth instead.
            paint(out, pal.guide, &super::depth_mark(node.depth))?;
        } else {
            paint(out, pal.guide, &format!("{prefix}{branch}"))?;
        }
        paint(out, pal.name, &escape::line(&f.qualname))?;
        if f.inlined {
            write!(out, "{}", crate::prompt::INLINED_MARK)?;
        }
        let loc = location(&f, cwd);
        if !loc.is_empty() {
            paint(out, pal.location, &format!("  ({loc})"))?;
        }
        if node.resumes > 0 {
            write!(out, " (+{} resume{})", node.resumes, if node.resumes == 1 { "" } else { "s" })?;
        }
        if node.recursive {
            write!(out, " ")?;
            paint(out, pal.recursive, "↻ recursive")?;
        }
        writeln!(out)?;
        // The guide stops growing at MAX_INDENT levels (deeper lines have none).
        let child_prefix = if node.depth > super::MAX_INDENT { String::new() } else { format!("{prefix}{cont}") };
        stack.extend(node.children.iter().rev().map(|&c| (c, child_prefix.clone())));
    }
    Ok(())
}

/// Render every view, a blank line between them.
pub fn render_all<W: Write + ?Sized>(out: &mut W, views: &[View], cwd: &Path, pal: &Palette) -> io::Result<()> {
    for (i, v) in views.iter().enumerate() {
        if i > 0 {
            writeln!(out)?;
        }
        render(out, v, cwd, pal)?;
    }
    Ok(())
}

/// The tree as plain lines (no colour), for tests and for embedding.
pub fn plain(tree: &CallTree, label: &str, cwd: &Path) -> String {
    let mut out = Vec::new();
    let view = View::new(label, label, tree.clone());
    // Writing into a Vec cannot fail.
    let _ = render(&mut out, &view, cwd, &Palette::default());
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{Ev::C, Ev::R};
    use crate::views::tests::tree_of;

    #[test]
    fn lines_have_times_counts_guides_and_markers() {
        // main -> a -> f -> f (recursive) ; main -> a (again) ; main -> b
        let t = tree_of(
            &["main", "a", "f", "b"],
            &["/p/app.py", "/p/app.py", "/p/lib/f.py", "/p/app.py"],
            &[C(0), C(1), C(2), C(2), R, R, R, C(1), R, C(3), R, R],
        );
        let s = plain(&t, "process 1 (python3 app.py), thread MainThread", Path::new("/p"));
        let lines: Vec<&str> = s.lines().collect();
        assert!(lines[0].starts_with("── process 1 (python3 app.py), thread MainThread ── 5 nodes, 6 calls, "), "{s}");
        assert_eq!(lines[1], "    TOTAL      SELF    CALLS  FUNCTION");
        // main: 10..120 -> 110 ns inclusive; self = 110 - a(20..70 + 80..90 = 60) - b(100..110 = 10) = 40
        assert_eq!(lines[2], "   110 ns     40 ns       ×1  main  (app.py:1)");
        assert_eq!(lines[3], "    60 ns     30 ns       ×2  ├─ a  (app.py:1)");
        // The recursive call's time is counted under the first f, not again at its marker.
        assert_eq!(lines[4], "    30 ns     30 ns       ×1  │  └─ f  (lib/f.py:1)");
        assert_eq!(lines[5], "     0 ns      0 ns       ×1  │     └─ f  (lib/f.py:1) ↻ recursive");
        assert_eq!(lines[6], "    10 ns     10 ns       ×1  └─ b  (app.py:1)");
        assert_eq!(lines.len(), 7);
    }

    #[test]
    fn estimated_times_are_said_once_in_the_header() {
        let t = tree_of(&["main", "f"], &["/p/a.c", "/p/a.c"], &[C(0), C(1), R, R]);
        let mut view = View::new("x", "x", t);
        let render_plain = |v: &View| {
            let mut out = Vec::new();
            render(&mut out, v, Path::new("/p"), &Palette::default()).unwrap();
            String::from_utf8(out).unwrap()
        };
        let measured = render_plain(&view);
        assert!(!measured.contains("estimated"), "{measured}");
        view.times_estimated = true;
        let estimated = render_plain(&view);
        let lines: Vec<&str> = estimated.lines().collect();
        assert!(lines[0].ends_with(&format!(" ({})", crate::views::TIMES_ESTIMATED)), "{estimated}");
        assert_eq!(estimated.matches("estimated").count(), 1, "{estimated}");
        // Only the header changes.
        assert_eq!(lines[1..], measured.lines().collect::<Vec<_>>()[1..]);
    }

    #[test]
    fn names_and_labels_cannot_drive_the_terminal() {
        let t = tree_of(&["evil\x1b]0;title\x07\n\u{202e}x"], &["/p/a\x1b[2J.py"], &[C(0), R]);
        let s = plain(&t, "thread \x1b[2Jt", Path::new("/p"));
        assert!(!s.contains('\x1b') && !s.contains('\x07') && !s.contains('\u{202e}'), "{s:?}");
        assert_eq!(s.lines().count(), 3, "{s}");
        assert!(s.contains("evil\\x1b]0;title\\x07\\n\\u202ex  (a\\x1b[2J.py:1)"), "{s}");
        assert!(s.starts_with("── thread \\x1b[2Jt ──"), "{s}");
    }

    #[test]
    fn colour_only_when_asked() {
        let t = tree_of(&["main"], &["/p/app.py"], &[C(0), R]);
        let view = View::new("x", "x", t);
        let mut plain_out = Vec::new();
        render(&mut plain_out, &view, Path::new("/p"), &Palette::new(false)).unwrap();
        assert!(!plain_out.contains(&0x1b));
        let mut colour = Vec::new();
        render(&mut colour, &view, Path::new("/p"), &Palette::new(true)).unwrap();
        let s = String::from_utf8(colour).unwrap();
        assert!(s.contains("\x1b[1mmain\x1b[0m"), "{s:?}");
        // The main function holds all the time: painted hot.
        assert!(s.contains("\x1b[1m\x1b[31m"), "{s:?}");
    }
}
