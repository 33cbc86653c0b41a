//! `slice diff`: what one run reached that the other did not.

use super::common::SelectArgs;
use super::output::{ColorArgs, OutputArgs};
use super::view_common::print_notes;
use super::{read_question, warn_all};
use crate::analysis::{prepare, Hints, PreparedTrace};
use crate::coverage::line_ranges as ranges;
use crate::frontend::{FrontEnd, Opt};
use crate::views::diff::{diff_traces, prompt_within, Diff, DiffBudget, LineChange, OneSided};
use crate::views::tree::{paint, Palette};
use anstyle::{AnsiColor, Style};
use clap::Args;
use std::path::{Path, PathBuf};

/// Output of `slice diff`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DiffFormat {
    /// How each run ended, then the differing call paths as a tree, like a unified diff (`-`
    /// only in A, `+` only in B).
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
    /// With --format prompt: at most N tokens. The lists of functions only one run reached
    /// take at most a quarter of the room and the call paths at most half while sources are
    /// left to show; sources are kept most relevant first (what goes with failing tests, then
    /// by the question), each that fits; the paths, then the lists, get the room left; every
    /// cut is said. Without it a diff prompt is held to 100000 tokens, 20000 when it compares
    /// tests (--no-budget: no limit); a prompt that fits is unchanged.
    #[arg(long, value_name = "N")]
    pub budget: Option<usize>,
    /// With --format prompt: no budget, not even the default one.
    #[arg(long, conflicts_with = "budget")]
    pub no_budget: bool,
    /// Run A's tests to compare (overrides --test for A): an id, its end, a glob, or `failed`.
    /// With tests on both sides, the runs are lined up by the code under test (the runner's
    /// and the test files' functions spliced out), so two different tests can be compared.
    #[arg(long, value_name = "ID|GLOB|failed")]
    pub test_a: Option<String>,
    /// Run B's tests to compare (overrides --test for B).
    #[arg(long, value_name = "ID|GLOB|failed")]
    pub test_b: Option<String>,
    /// Tokenizer for --budget: o200k_base or cl100k_base.
    #[arg(long, value_name = "NAME", default_value = "o200k_base")]
    pub tokenizer: crate::tokens::Tokenizer,
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
        .map(|f| {
            let score = f.ochiai.filter(|o| *o > 0.0).map(|o| format!("; Ochiai {o:.2}")).unwrap_or_default();
            let name = trace_format::escape::line(&f.qualname);
            if f.location.is_empty() {
                name.into_owned()
            } else {
                format!("{name} ({}{score})", trace_format::escape::line(&f.location))
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Runs A and B prepared for a diff, as `slice diff` and `slice mcp`'s diff tool both do:
/// the selection's options (`--test` picks the same tests in both), `test_a` and `test_b`
/// each side's own tests; the test runner collapsed unless `--show-plumbing`. Notes and
/// errors name the options as `front` spells them.
pub fn prepare_sides(
    a: &Path,
    b: &Path,
    select: &SelectArgs,
    test_a: Option<&str>,
    test_b: Option<&str>,
    front: FrontEnd,
) -> anyhow::Result<(Vec<PreparedTrace>, Vec<String>)> {
    let mut opts = select.options_for(front, true)?;
    // The test runner's own calls (reporting a failure) are not what differs between two runs
    // of the code under test.
    if !select.fields.show_plumbing {
        opts.plumbing = crate::plumbing::Plumbing::test_runners(&select.fields.plumbing);
    }
    opts.hints = Hints::Diff { option: Opt::Test };
    if test_a.is_none() && test_b.is_none() {
        // `--test failed` of a passing run and a failing one: in the passing run, the tests
        // that failed in the other (the natural question: what did they do differently?).
        if matches!(opts.tests, Some(crate::testrun::TestFilter::Failed)) {
            // Whether A has failing tests: from its test list when the runner recorded one,
            // else (tests read from the tree) by preparing A alone.
            let a_passed = match crate::testrun::recorded_failures(a) {
                Some(failed) => !failed,
                None => matches!(prepare(&[a.to_path_buf()], &opts), Err(crate::analysis::PrepareError::NoTestMatch { .. })),
            };
            if a_passed {
                let (tb, wb) = prepare(&[b.to_path_buf()], &opts)?;
                let failed: Vec<String> =
                    tb.iter().flat_map(|t| t.ended_tests.iter().filter_map(|&i| t.tests.get(i)).map(|(_, x)| x.id.clone())).collect();
                let mut o = opts.clone();
                o.tests = Some(crate::testrun::TestFilter::Ids(failed));
                let (mut ta, mut wa) = prepare(&[a.to_path_buf()], &o)?;
                ta.extend(tb);
                wa.extend(wb);
                return Ok((ta, wa));
            }
        }
        return Ok(prepare(&[a.to_path_buf(), b.to_path_buf()], &opts)?);
    }
    // Each side with its own tests: prepared apart (each side's spectrum is its own).
    let side = |dir: &Path, test: Option<&str>, option: Opt| -> anyhow::Result<(Vec<PreparedTrace>, Vec<String>)> {
        let mut o = opts.clone();
        if let Some(t) = test {
            o.tests = Some(crate::testrun::TestFilter::parse(t).map_err(super::common::UsageError)?);
            o.hints = Hints::Diff { option };
        }
        Ok(prepare(&[dir.to_path_buf()], &o)?)
    };
    let (mut ta, mut wa) = side(a, test_a, Opt::TestA)?;
    let (tb, wb) = side(b, test_b, Opt::TestB)?;
    ta.extend(tb);
    wa.extend(wb);
    Ok((ta, wa))
}

impl DiffArgs {
    /// The budget of `--format prompt`: `--budget`, else the command line's default of a
    /// prompt (a test's when tests are compared), none with `--no-budget`.
    fn prompt_budget(&self, tests_shown: bool) -> Option<DiffBudget> {
        (!self.no_budget).then(|| DiffBudget {
            tokens: self.budget.unwrap_or_else(|| crate::prompt::budget::default_budget_of(tests_shown)),
            tokenizer: self.tokenizer,
            by_default: self.budget.is_none(),
        })
    }
}

pub fn run(a: DiffArgs) -> anyhow::Result<()> {
    let question = a.question.as_deref().map(read_question).transpose()?;
    if question.is_some() && a.format != DiffFormat::Prompt {
        return Err(super::common::UsageError("--question goes with --format prompt".into()).into());
    }
    if (a.budget.is_some() || a.no_budget) && a.format != DiffFormat::Prompt {
        return Err(super::common::UsageError("--budget and --no-budget go with --format prompt".into()).into());
    }
    let (mut traces, warnings) = prepare_sides(&a.a, &a.b, &a.select, a.test_a.as_deref(), a.test_b.as_deref(), FrontEnd::Cli)?;
    warn_all(&warnings);
    for t in &traces {
        print_notes(t);
    }
    let (first, rest) = traces.split_at_mut(1);
    let d = diff_traces(&mut first[0], &mut rest[0]);
    let (only_a, only_b) = d.counts();
    match a.format {
        DiffFormat::Prompt => {
            // A test's default when tests are compared (as `Model::build` says).
            let budget = a.prompt_budget(traces.iter().any(|t| t.tests_shown));
            let text = prompt_within(question.as_deref(), &d, &mut traces, budget)?;
            eprintln!("slice: {} tokens ({})", a.tokenizer.count(&text), a.tokenizer.name());
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
    let plural = crate::testrun::plural;
    // (Functions whose source differs are counted apart: their lines are not compared.)
    let lines = match &d.lines {
        Some(l) => {
            let source = l.iter().filter(|x| matches!(x.change, crate::views::diff::LineChange::Source { .. })).count();
            let ran = l.len() - source;
            let mut s = String::new();
            if ran > 0 || source == 0 {
                s.push_str(&format!("; {} both reached ran different lines", plural(ran, "function")));
            }
            if source > 0 {
                s.push_str(&format!(
                    "; {} both reached {} different source",
                    plural(source, "function"),
                    if source == 1 { "has" } else { "have" }
                ));
            }
            s
        }
        None => String::new(),
    };
    eprintln!(
        "slice: {} only in A, {} only in B; {} only in A, {only_b} only in B{lines}",
        plural(d.funcs_only_a.len(), "function"),
        d.funcs_only_b.len(),
        plural(only_a, "tree node"),
    );
    Ok(())
}

/// The `--format tree` text of a diff: the two runs and how each ended
/// ([`crate::views::diff::ends::lines`]), the functions only one reached, the
/// functions both reached whose lines ran differently (when both runs recorded lines), and the
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
    paint(
        w,
        pal.header,
        &trace_format::escape::line(&format!("--- A {}: {}", ta.dir.display(), trace_format::escape::command(&ta.meta.argv))),
    )?;
    writeln!(w)?;
    paint(
        w,
        pal.header,
        &trace_format::escape::line(&format!("+++ B {}: {}", tb.dir.display(), trace_format::escape::command(&tb.meta.argv))),
    )?;
    writeln!(w)?;
    for (t, name) in [(ta, "A"), (tb, "B")] {
        for l in crate::views::diff::ends::lines(t, name) {
            writeln!(w, "# {l}")?;
        }
    }
    writeln!(w, "# functions only in A ({}): {}", d.funcs_only_a.len(), list(&d.funcs_only_a))?;
    writeln!(w, "# functions only in B ({}): {}", d.funcs_only_b.len(), list(&d.funcs_only_b))?;
    writeln!(w, "# tree nodes only in A: {only_a}, only in B: {only_b}")?;
    if d.is_empty() {
        writeln!(w, "# both runs reached exactly the same call paths")?;
    }
    if let Some(n) = &d.lines_note {
        writeln!(w, "# {}", trace_format::escape::line(n))?;
    }
    for u in &d.unread {
        writeln!(w, "# {}", trace_format::escape::line(&u.sentence()))?;
    }
    if let Some(lines) = &d.lines {
        // (With a note, the lines were not compared: only the functions' text was.)
        let what = if d.lines_note.is_some() { "whose source differs" } else { "whose lines ran differently" };
        let how = if lines.iter().any(|l| l.edit.is_some()) { " (`--format prompt` shows how their source differs)" } else { "" };
        writeln!(w, "# functions both runs reached {what}: {}{how}", lines.len())?;
        for l in lines {
            let what = match &l.change {
                LineChange::Ran { only_a, only_b } => [("A", only_a), ("B", only_b)]
                    .iter()
                    .filter(|(_, v)| !v.is_empty())
                    .map(|(side, v)| format!("only in {side}: {}", ranges(v)))
                    .collect::<Vec<_>>()
                    .join("; "),
                LineChange::Source { lines_a, lines_b } => format!("source differs ({lines_a} lines in A, {lines_b} in B)"),
            };
            writeln!(w, "#   {} ({}): {what}", trace_format::escape::line(&l.qualname), trace_format::escape::line(&l.location))?;
        }
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

#[cfg(test)]
mod tests {
    use super::super::{Cli, Command};
    use crate::prompt::budget::{DEFAULT_RUN_BUDGET, DEFAULT_TEST_BUDGET};
    use clap::Parser;

    /// A diff prompt gets the default budget of a prompt (a test's when tests are compared),
    /// marked as the default, unless `--budget` or `--no-budget` says otherwise.
    #[test]
    fn a_diff_prompt_has_the_default_budget_of_a_prompt() {
        let budget = |args: &[&str], tests_shown| {
            let argv: Vec<&str> = ["slice", "diff", "a.d", "b.d", "--format", "prompt"].iter().chain(args).copied().collect();
            let Command::Diff(a) = Cli::try_parse_from(&argv).unwrap_or_else(|e| panic!("{argv:?}: {e}")).command else { panic!("diff") };
            a.prompt_budget(tests_shown).map(|b| (b.tokens, b.by_default))
        };
        assert_eq!(budget(&[], false), Some((DEFAULT_RUN_BUDGET, true)));
        assert_eq!(budget(&[], true), Some((DEFAULT_TEST_BUDGET, true)));
        assert_eq!(budget(&["--budget", "100000"], false), Some((100_000, false)));
        assert_eq!(budget(&["--no-budget"], true), None);
        assert!(Cli::try_parse_from(["slice", "diff", "a.d", "b.d", "--budget", "9", "--no-budget"]).is_err());
    }
}
