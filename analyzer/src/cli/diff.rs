//! `slice diff`: what one run reached that the other did not.

use super::common::SelectArgs;
use super::output::{ColorArgs, OutputArgs};
use super::view_common::print_notes;
use super::{read_question, warn_all};
use crate::analysis::{prepare, PreparedTrace};
use crate::views::diff::{diff_traces, prompt, Diff, OneSided};
use crate::views::tree::{paint, Palette};
use anstyle::{AnsiColor, Style};
use clap::Args;
use std::path::PathBuf;

/// Output of `slice diff`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DiffFormat {
    /// The differing call paths as a tree, like a unified diff (`-` only in A, `+` only in B).
    Tree,
    /// A Markdown prompt section: the question, the differing paths and the source of the
    /// functions where the runs part ways and on the differing paths.
    Prompt,
}

#[derive(Debug, Args)]
#[command(mut_arg("color", |a| a.help(
    "Colour of --format tree: auto (when the result goes to a terminal, not to a file given with --output, and NO_COLOR is not set), always, never"
)))]
pub struct DiffArgs {
    /// Run A (e.g. the one that works), a trace directory written by `trace run`.
    #[arg(value_name = "A.d")]
    pub a: PathBuf,
    /// Run B (e.g. the one that fails).
    #[arg(value_name = "B.d")]
    pub b: PathBuf,
    /// `tree` (default) or `prompt`.
    #[arg(long, value_enum, default_value = "tree")]
    pub format: DiffFormat,
    /// With --format prompt: the question to put first (`-` reads standard input).
    #[arg(short, long, value_name = "TEXT")]
    pub question: Option<String>,
    #[command(flatten)]
    pub select: SelectArgs,
    #[command(flatten)]
    pub color: ColorArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

fn list(v: &[OneSided]) -> String {
    if v.is_empty() {
        return "none".into();
    }
    v.iter()
        .map(|f| if f.location.is_empty() { f.qualname.clone() } else { format!("{} ({})", f.qualname, f.location) })
        .collect::<Vec<_>>()
        .join(", ")
}

pub fn run(a: DiffArgs) -> anyhow::Result<()> {
    let opts = a.select.options(true)?;
    let question = a.question.as_deref().map(read_question).transpose()?;
    if question.is_some() && a.format != DiffFormat::Prompt {
        return Err(super::common::UsageError("--question goes with --format prompt".into()).into());
    }
    let (mut traces, warnings) = prepare(&[a.a.clone(), a.b.clone()], &opts)?;
    warn_all(&warnings);
    for t in &traces {
        print_notes(t);
    }
    let d = diff_traces(&traces[0], &traces[1]);
    let (only_a, only_b) = d.counts();
    match a.format {
        DiffFormat::Prompt => {
            let text = prompt(question.as_deref(), &d, &mut traces);
            a.output.write("prompt", |w| w.write_all(text.as_bytes()))?;
        }
        DiffFormat::Tree => {
            let color = a.color.enabled(&a.output);
            let pal = Palette::new(color);
            let (minus, plus) =
                if color { (AnsiColor::Red.on_default(), AnsiColor::Green.on_default()) } else { (Style::new(), Style::new()) };
            a.output.write("diff", |w| write_tree(w, &d, &traces[0], &traces[1], &pal, minus, plus))?;
        }
    }
    eprintln!(
        "slice: {} functions only in A, {} only in B; {only_a} tree nodes only in A, {only_b} only in B",
        d.funcs_only_a.len(),
        d.funcs_only_b.len()
    );
    Ok(())
}

/// The `--format tree` text of a diff: the two runs, the functions only one reached, and the
/// differing call paths (`-` only in A, `+` only in B). Also used by `slice mcp`.
pub fn write_tree(
    w: &mut dyn std::io::Write,
    d: &Diff,
    ta: &PreparedTrace,
    tb: &PreparedTrace,
    pal: &Palette,
    minus: Style,
    plus: Style,
) -> std::io::Result<()> {
    let (only_a, only_b) = d.counts();
    paint(w, pal.header, &format!("--- A {}: {}", ta.dir.display(), ta.meta.argv.join(" ")))?;
    writeln!(w)?;
    paint(w, pal.header, &format!("+++ B {}: {}", tb.dir.display(), tb.meta.argv.join(" ")))?;
    writeln!(w)?;
    writeln!(w, "# functions only in A ({}): {}", d.funcs_only_a.len(), list(&d.funcs_only_a))?;
    writeln!(w, "# functions only in B ({}): {}", d.funcs_only_b.len(), list(&d.funcs_only_b))?;
    writeln!(w, "# tree nodes only in A: {only_a}, only in B: {only_b}")?;
    if d.is_empty() {
        writeln!(w, "# both runs reached exactly the same call paths")?;
    }
    for (m, s) in d.lines() {
        let style = match m {
            '-' => minus,
            '+' => plus,
            _ => pal.guide,
        };
        paint(w, style, &format!("{m} {s}"))?;
        writeln!(w)?;
    }
    Ok(())
}
