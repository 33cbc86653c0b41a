//! Long docstrings, cut to their summary. In `rich data.csv` docstrings are 16% of the source
//! a prompt shows, mostly `Args:`/`Returns:` sections that repeat the signature. A cut Python
//! docstring longer than [`KEEP_WHOLE`] lines keeps its first paragraph (at most
//! [`SUMMARY_LINES`] lines) and the rest is replaced by a marked line. The code stays valid
//! Python: the string is closed again.
//!
//! Which docstrings are cut is [`Docstrings`]: by default (`auto`) those of installed packages'
//! functions that are not among the [`super::KEPT_EXACT_TOP`] closest to the question (the
//! program's own functions and the question's strongest matches keep their exact source); with
//! `whole` none; with `short` all.

use crate::frontend::{FrontEnd, Opt};
use crate::source::logical_starts;

/// Which docstrings a prompt cuts to their summary (`--docstrings`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Docstrings {
    /// None: every function's exact source
    Whole,
    /// Those of installed packages' functions outside the 25 closest to the question
    #[default]
    Auto,
    /// Every long docstring
    Short,
}

/// The prompt's note for `cut` docstrings cut in `mode` (none when nothing was cut).
/// `whose`: which functions `auto` condenses, as [`super::Model::condensed_whose`] says.
pub fn note(mode: Docstrings, cut: usize, whose: &str, front: FrontEnd) -> Option<String> {
    let s = if cut == 1 { "" } else { "s" };
    let whole = front.set(Opt::Docstrings, "whole");
    match mode {
        _ if cut == 0 => None,
        Docstrings::Whole => None,
        Docstrings::Auto => Some(format!(
            "Docstrings cut: {cut} long docstring{s} of {whose} that are not among the \
             {} closest to the question keep their first paragraph (marked in the code); \
             `{whole}` shows them whole.",
            super::KEPT_EXACT_TOP
        )),
        Docstrings::Short => Some(format!(
            "Docstrings cut: {cut} long docstring{s} keep their first paragraph (marked in the code); \
             `{whole}` shows them whole."
        )),
    }
}

/// Docstrings of at most this many lines are kept whole.
pub const KEEP_WHOLE: usize = 3;
/// Lines of the first paragraph kept at most.
pub const SUMMARY_LINES: usize = 3;

fn is_def(line: &str) -> bool {
    let t = line.trim_start();
    t.starts_with("def ") || t.starts_with("async def ") || t.starts_with("class ")
}

/// The opening quote of a docstring line (`"""` or `'''`, after an optional `r`/`u` prefix).
fn opening_quote(line: &str) -> Option<&'static str> {
    let t = line.trim_start().trim_start_matches(['r', 'R', 'u', 'U']);
    if t.starts_with("\"\"\"") {
        Some("\"\"\"")
    } else if t.starts_with("'''") {
        Some("'''")
    } else {
        None
    }
}

/// `code` (one function's source) with its docstring cut to its summary, or `None` when it
/// has no docstring longer than [`KEEP_WHOLE`] lines.
pub fn trim_docstring(code: &str) -> Option<String> {
    let lines: Vec<String> = code.lines().map(str::to_string).collect();
    let starts = logical_starts(&lines);
    let n = lines.len();
    let def = (0..n).find(|&i| starts[i] && is_def(&lines[i]))?;
    let body = (def + 1..n).find(|&i| starts[i] && !lines[i].trim().is_empty() && !lines[i].trim_start().starts_with('#'))?;
    let quote = opening_quote(&lines[body])?;
    let next = (body + 1..n).find(|&i| starts[i]).unwrap_or(n);
    let last = (body..next).rev().find(|&i| !lines[i].trim().is_empty())?;
    if last + 1 - body <= KEEP_WHOLE {
        return None;
    }
    let para_end = (body + 1..=last).find(|&i| lines[i].trim().is_empty()).unwrap_or(last + 1).min(body + SUMMARY_LINES);
    // The summary must not already hold the closing quote.
    if lines[body..para_end].iter().enumerate().any(|(k, l)| {
        let from = if k == 0 { l.find(quote).map_or(0, |p| p + 3) } else { 0 };
        l[from..].contains(quote)
    }) {
        return None;
    }
    let indent: String = lines[body].chars().take_while(|c| c.is_whitespace()).collect();
    let cut = last + 1 - para_end;
    let mut out: Vec<String> = lines[..para_end].to_vec();
    out.push(format!("{indent}[{cut} more docstring lines cut]"));
    out.push(format!("{indent}{quote}"));
    out.extend(lines[last + 1..].iter().cloned());
    Some(out.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const F: &str = r#"    @property
    def add_column(
        self, header: str = "", *, justify: str = "left"
    ) -> None:
        """Add a column to the table.

        Args:
            header (str): Text for the header.
            justify (str): How to justify.
        """
        column = Column(header=header, justify=justify)
        self.columns.append(column)"#;

    #[test]
    fn a_long_docstring_keeps_its_summary_and_stays_closed() {
        let t = trim_docstring(F).unwrap();
        assert_eq!(
            t,
            r#"    @property
    def add_column(
        self, header: str = "", *, justify: str = "left"
    ) -> None:
        """Add a column to the table.
        [5 more docstring lines cut]
        """
        column = Column(header=header, justify=justify)
        self.columns.append(column)"#
        );
    }

    /// The note names the option as its reader passes it.
    #[test]
    fn the_note_names_the_option_of_its_front_end() {
        let cli = note(Docstrings::Short, 2, "", FrontEnd::Cli).unwrap();
        assert!(cli.ends_with("`--docstrings whole` shows them whole."), "{cli}");
        let mcp = note(Docstrings::Auto, 2, "installed packages' functions", FrontEnd::Mcp).unwrap();
        assert!(mcp.ends_with("`docstrings: \"whole\"` shows them whole."), "{mcp}");
    }

    #[test]
    fn short_or_absent_docstrings_are_left_alone() {
        assert_eq!(trim_docstring("def f():\n    \"\"\"One line.\"\"\"\n    return 1"), None);
        assert_eq!(trim_docstring("def f():\n    x = '''a\nb\nc\nd\ne\n'''\n    return x"), None);
        assert_eq!(trim_docstring("def f():\n    \"\"\"Summary\n    goes on\n    and on.\"\"\"\n    return 1"), None);
        // The summary paragraph holds the closing quote: nothing to cut safely.
        assert_eq!(trim_docstring("def f():\n    \"\"\"A.\"\"\"; x = 1\n    y = '''\n\n\n\n'''"), None);
    }
}
