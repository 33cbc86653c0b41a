//! Folded stacks: the text format of Brendan Gregg's `stackcollapse` scripts, read by inferno,
//! `flamegraph.pl`, speedscope and most flamegraph tools. One line per call-tree node:
//!
//! ```text
//! main;load_catalogue;parse_row 6
//! ```
//!
//! the frames from the outermost call to the node, separated by `;`, a space, and the node's
//! *self* value. A flamegraph frame's width is the sum of the values of the lines that start with
//! its stack, so it shows the node's inclusive value:
//!
//! - [`Weight::Calls`]: the value of a line is the node's call count (calls merged into it). A
//!   frame is then as wide as the calls made in its subtree, itself included, and the values of
//!   all lines add up to the number of calls in the (pruned, selected) tree.
//! - [`Weight::Time`]: the value is the node's self time in nanoseconds (inclusive time less
//!   the callees'), so a frame is as wide as its inclusive time and the lines add up to the
//!   total time of the top-level calls. Lines whose self time is 0 are left out (their callees'
//!   lines carry the frame).
//!
//! Frame names are qualified names, with the location added where two functions share one
//! ([`super::FrameNames`]). A `;` inside a name (Rust `[u8; 4]`) is written as `,`, and line
//! breaks, tabs and other control characters as visible escapes (`\n`, `\t`, `\x1b`; the rule
//! of [`trace_format::escape`]), so every line splits back into the same frames. With several
//! views (threads), each stack starts with a frame naming its thread.

use super::{self_time, FrameNames, View};
use crate::calltree::{NodeId, ROOT};
use std::io::{self, Write};

/// What a stack line's value counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Weight {
    /// Self time in nanoseconds (frames as wide as their inclusive time).
    #[default]
    Time,
    /// Call counts (frames as wide as the number of calls made in their subtree).
    Calls,
}

impl Weight {
    /// The unit, as inferno's "count name".
    pub fn unit(self) -> &'static str {
        match self {
            Weight::Time => "ns",
            Weight::Calls => "calls",
        }
    }
}

/// A frame name made safe for folded stacks: control characters escaped
/// ([`trace_format::escape::line`]), `;` written as `,`.
pub fn frame(name: &str) -> String {
    trace_format::escape::line(name).replace(';', ",").trim().to_string()
}

/// Deepest frame of a folded stack: a node at this depth stands for its whole subtree (its
/// value is the subtree's: the calls made in it, or its inclusive time), so a frame is still
/// as wide as it should be, and the output stays proportional to the tree, not to the tree
/// times its depth (every line holds its whole stack: a 200,000-deep chain would be over
/// 100 GB of stacks). A flamegraph is unreadable long before this depth.
pub const MAX_FRAMES: u32 = 512;

/// What [`write`] wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    pub lines: usize,
    /// Sum of the values of all lines.
    pub sum: u64,
    /// Nodes deeper than [`MAX_FRAMES`], counted in their ancestor at that depth.
    pub folded_deeper: usize,
}

/// Write the folded stacks of views, in call order (a node's line before its callees', the
/// callees in order of first call). `thread_frames`: start each stack with the view's thread
/// frame. Stacks end at depth [`MAX_FRAMES`].
pub fn write<W: Write + ?Sized>(
    out: &mut W,
    views: &[View],
    names: &FrameNames,
    weight: Weight,
    thread_frames: bool,
) -> io::Result<Totals> {
    let mut totals = Totals::default();
    // The stack of the line being written: a node's line starts with its caller's, so one
    // buffer serves every line, cut back to the caller's part for each node.
    let mut line = String::new();
    for v in views {
        let t = &v.tree;
        line.clear();
        if thread_frames {
            line.push_str(&frame(&v.frame));
        }
        // (node, length of its caller's stack in `line`)
        let mut stack: Vec<(NodeId, usize)> = t.node(ROOT).children.iter().rev().map(|&c| (c, line.len())).collect();
        while let Some((n, prefix)) = stack.pop() {
            let node = t.node(n);
            line.truncate(prefix);
            if !line.is_empty() {
                line.push(';');
            }
            line.push_str(&frame(&names.name(t, n)));
            let deepest = node.depth >= MAX_FRAMES && !node.children.is_empty();
            let value = match (weight, deepest) {
                (Weight::Calls, false) => node.count,
                (Weight::Time, false) => self_time(t, n),
                (Weight::Calls, true) => {
                    let (calls, nodes) = subtree_calls(t, n);
                    totals.folded_deeper += nodes;
                    calls
                }
                (Weight::Time, true) => {
                    totals.folded_deeper += subtree_calls(t, n).1;
                    node.time_ns
                }
            };
            if value > 0 {
                writeln!(out, "{line} {value}")?;
                totals.lines += 1;
                totals.sum += value;
            }
            if !deepest {
                let len = line.len();
                stack.extend(node.children.iter().rev().map(|&c| (c, len)));
            }
        }
    }
    Ok(totals)
}

/// The calls made in the subtree below `n` and `n`'s own (its count), and the number of nodes below it.
fn subtree_calls(t: &crate::calltree::CallTree, n: NodeId) -> (u64, usize) {
    let (mut calls, mut nodes) = (t.node(n).count, 0usize);
    let mut stack: Vec<NodeId> = t.node(n).children.clone();
    while let Some(c) = stack.pop() {
        calls += t.node(c).count;
        nodes += 1;
        stack.extend_from_slice(&t.node(c).children);
    }
    (calls, nodes)
}

/// What a CLI says on stderr when stacks were cut at [`MAX_FRAMES`], if they were.
pub fn deeper_note(totals: &Totals) -> Option<String> {
    (totals.folded_deeper > 0).then(|| {
        format!(
            "slice: note: stacks end at depth {MAX_FRAMES}: the {} tree nodes below it are counted in their frame at that depth \
             (narrow the tree with --focus to see them)",
            totals.folded_deeper
        )
    })
}

/// The folded stacks as a string.
pub fn to_string(views: &[View], names: &FrameNames, weight: Weight, thread_frames: bool) -> (String, Totals) {
    let mut out = Vec::new();
    // Writing into a Vec cannot fail.
    let totals = write(&mut out, views, names, weight, thread_frames).unwrap_or_default();
    (String::from_utf8_lossy(&out).into_owned(), totals)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{Ev::C, Ev::R};
    use crate::views::tests::tree_of;
    use crate::views::{total_calls, total_time};
    use std::path::Path;

    fn sample() -> View {
        // main -> a x2 -> f ; main -> b ; helper defined twice (two files) under main and b
        let t = tree_of(
            &["main", "a", "f", "b", "helper", "helper"],
            &["/p/app.py", "/p/app.py", "/p/f.py", "/p/app.py", "/p/x.py", "/p/y.py"],
            &[C(0), C(1), C(2), R, R, C(1), R, C(3), C(4), R, R, C(5), R, R],
        );
        View::new("process 1, thread; main", "thread; main", t)
    }

    #[test]
    fn calls_weight_sums_to_the_tree_calls() {
        let v = sample();
        let names = FrameNames::new([&v.tree], Path::new("/p"));
        let (s, totals) = to_string(std::slice::from_ref(&v), &names, Weight::Calls, false);
        assert_eq!(s, "main 1\nmain;a 2\nmain;a;f 1\nmain;b 1\nmain;b;helper (x.py:1) 1\nmain;helper (y.py:1) 1\n", "{s}");
        assert_eq!(totals.sum, total_calls(&v.tree));
        assert_eq!(totals.lines, 6);
    }

    #[test]
    fn time_weight_sums_to_the_total_time_and_frames_are_escaped() {
        let v = sample();
        let names = FrameNames::new([&v.tree], Path::new("/p"));
        let (s, totals) = to_string(std::slice::from_ref(&v), &names, Weight::Time, true);
        assert_eq!(totals.sum, total_time(&v.tree));
        for l in s.lines() {
            assert!(l.starts_with("thread, main;main"), "{l}");
            let (stack, value) = l.rsplit_once(' ').unwrap();
            assert!(value.parse::<u64>().unwrap() > 0);
            assert!(!stack.contains('\n'));
        }
        assert_eq!(frame("f<[u8; 4]>\tx\n"), "f<[u8, 4]>\\tx\\n");
        assert_eq!(frame("a\x1b]0;t\x07\u{202e}"), "a\\x1b]0,t\\x07\\u202e");
    }
}
