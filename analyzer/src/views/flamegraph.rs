//! `slice flamegraph`: an interactive SVG (click to zoom, Ctrl-F to search) drawn by
//! [`inferno`] from the folded stacks of [`super::folded`].
//!
//! Unlike sampled flamegraphs, frames are not sorted by name: the stacks are given in call
//! order, so left to right is the order in which callees were first called (as in the tree
//! and the prompt), and widths are exact (recorded calls or recorded time, not samples).

use super::folded::{self, Weight};
use super::{FrameNames, View};
use inferno::flamegraph::{color::BasicPalette, color::Palette, from_lines, Options, TextTruncateDirection};
use std::io::{self, Write};

/// What to draw.
#[derive(Debug, Clone)]
pub struct Flame {
    /// The title: the traced command.
    pub title: String,
    /// A line under the title (trace directory, selection).
    pub subtitle: Option<String>,
    pub weight: Weight,
}

/// Errors drawing a flamegraph.
#[derive(Debug, thiserror::Error)]
pub enum FlameError {
    #[error("nothing to draw: every node of the selected tree has a zero {0} value")]
    Empty(&'static str),
    #[error("inferno could not draw the flamegraph: {0}")]
    Inferno(#[from] io::Error),
}

/// Draw the views as one flamegraph SVG (with several views, each thread is a frame at the
/// bottom). Returns the folded totals it was drawn from.
pub fn write_svg(out: &mut impl Write, views: &[View], names: &FrameNames, flame: &Flame) -> Result<folded::Totals, FlameError> {
    let (text, totals) = folded::to_string(views, names, flame.weight, views.len() > 1);
    if totals.lines == 0 {
        return Err(FlameError::Empty(match flame.weight {
            Weight::Time => "time",
            Weight::Calls => "call count",
        }));
    }
    let mut opt = Options::default();
    // The title is the traced command by default: argv can hold any character, and an SVG
    // (XML) cannot hold control characters at all.
    opt.title = trace_format::escape::line(&flame.title).into_owned();
    opt.subtitle = flame.subtitle.as_deref().map(|s| trace_format::escape::line(s).into_owned());
    opt.count_name = flame.weight.unit().to_string();
    opt.name_type = "Function:".to_string();
    opt.colors = Palette::Basic(BasicPalette::Hot);
    // Same name, same colour: a function is easy to spot wherever it was called.
    opt.hash = true;
    // Names that do not fit keep their beginning: `bundle_pr..`, not `..dle_price`.
    opt.text_truncate_direction = TextTruncateDirection::Right;
    // The lines are in call order and each subtree's lines are together (so inferno's merging
    // of adjacent lines with a common prefix rebuilds the tree): keep that order. Flame-chart
    // mode is inferno's way to take unsorted lines; it reverses them, so they go in reversed.
    opt.flame_chart = true;
    from_lines(&mut opt, text.lines().rev(), out)?;
    Ok(totals)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{Ev::C, Ev::R};
    use crate::views::tests::tree_of;
    use std::path::Path;

    #[test]
    fn svg_has_title_frames_and_call_order() {
        let t = tree_of(&["<module>", "zeta", "alpha"], &["/p/app.py", "/p/app.py", "/p/app.py"], &[C(0), C(1), R, C(2), R, R]);
        let views = vec![View::new("main", "main", t)];
        let names = FrameNames::new(views.iter().map(|v| &v.tree), Path::new("/p"));
        let mut svg = Vec::new();
        let flame = Flame { title: "python3 app.py --x <y>".into(), subtitle: None, weight: Weight::Calls };
        let totals = write_svg(&mut svg, &views, &names, &flame).unwrap();
        assert_eq!(totals.sum, 3);
        let s = String::from_utf8(svg).unwrap();
        assert!(s.starts_with("<?xml"), "{}", &s[..100]);
        assert!(s.contains("python3 app.py --x &lt;y&gt;"));
        assert!(s.contains("&lt;module&gt;"));
        // zeta was called first: it is drawn left of alpha despite the name order.
        let z = s.find("<title>zeta").unwrap();
        let a = s.find("<title>alpha").unwrap();
        assert!(z < a);
    }

    #[test]
    fn empty_selection_is_an_error_not_an_empty_svg() {
        let t = tree_of(&["a"], &["/p/a.py"], &[]);
        let views = vec![View::new("main", "main", t)];
        let names = FrameNames::default();
        let flame = Flame { title: "x".into(), subtitle: None, weight: Weight::Time };
        assert!(matches!(write_svg(&mut Vec::new(), &views, &names, &flame), Err(FlameError::Empty("time"))));
    }
}
