//! `slice from-trace`: the prompt.

use super::common::{PromptArgs, SelectArgs};
use super::output::OutputArgs;
use super::{read_question, warn_all};
use crate::analysis::prepare;
use crate::prompt::budget::fit;
use crate::prompt::render::Renderer;
use crate::prompt::Model;
use clap::Args;
use std::collections::HashSet;
use std::path::PathBuf;
use trace_format::escape;

#[derive(Debug, Args)]
pub struct FromTraceArgs {
    /// Trace directories written by `trace run`. With several, the prompt holds the question,
    /// then each run's tree and sources in turn (sorted variants: one deduplicated source list).
    #[arg(required = true, value_name = "TRACE.d")]
    pub traces: Vec<PathBuf>,
    /// The question to ask about the run (`-` reads it from standard input).
    #[arg(short, long, value_name = "TEXT")]
    pub question: String,
    #[command(flatten)]
    pub prompt: PromptArgs,
    #[command(flatten)]
    pub select: SelectArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// A prompt larger than this (tokens), which only `--no-budget` gives (the default budget is
/// smaller), gets a warning suggesting `--budget`.
pub const LARGE_PROMPT_TOKENS: usize = 200_000;

/// At most this many names per stderr list of what the budget cut.
const LISTED: usize = 40;

/// `names` (in the order the budget cut them: least relevant first) as the end of a stderr
/// line, most relevant first, at most [`LISTED`] of them.
fn most_relevant_first(names: &[String]) -> String {
    let shown: Vec<std::borrow::Cow<'_, str>> = names.iter().rev().take(LISTED).map(|n| escape::line(n)).collect();
    if names.len() > LISTED {
        format!(" (the {} most relevant of {}; `--show-ranking 0` ranks every function): {}", LISTED, names.len(), shown.join(", "))
    } else {
        format!(": {}", shown.join(", "))
    }
}

pub fn run(a: FromTraceArgs) -> anyhow::Result<()> {
    let layout = a.prompt.layout()?;
    let question = read_question(&a.question)?;
    if question.trim().is_empty() {
        return Err(super::common::UsageError("the question is empty: pass it with -q \"...\"".into()).into());
    }
    let mut opts = a.select.prompt_options(&question)?;
    // (Without --budget, a test's prompt's default budget: the most tests.)
    opts.max_tests = Some(crate::analysis::prompt_max_tests(a.prompt.budget));
    let template = a.prompt.template()?;
    let renderer = Renderer::new(a.prompt.format, template)?;
    a.prompt.tokenizer.prewarm();
    let (mut traces, warnings) = prepare(&a.traces, &opts)?;
    warn_all(&warnings);
    // A prompt the default hiding left nearly empty, or without the code of a package that ran
    // compiled: say so on stderr too, not only in the prompt.
    for t in &traces {
        for n in
            t.notes.iter().filter(|n| n.starts_with(crate::empty::STDLIB_NOTE_START) || n.starts_with(crate::python::compiled::NOTE_START))
        {
            eprintln!("slice: {}", escape::line(&format!("{}: {n}", t.dir.display())));
        }
    }
    let tests_left_out: usize = traces.iter().map(|t| t.tests_left_out).sum();
    let mut model = Model::build(&question, &mut traces);
    // The analysis is no longer needed: the prompt is laid out from the model.
    drop(traces);
    warn_all(&model.notes);
    model.condense(a.prompt.not_run(), a.prompt.docstrings());
    if let Some(n) = a.prompt.show_ranking {
        for line in model.ranking_lines(n) {
            eprintln!("{line}");
        }
    }
    let budget = a.prompt.apply_budget(&mut model);
    let fitted = fit(&model, layout, &renderer, a.prompt.tokenizer, budget)?;
    a.output.write("prompt", |w| w.write_all(fitted.text.as_bytes()))?;
    let functions: HashSet<crate::prompt::FuncId> =
        model.traces.iter().flat_map(|t| t.threads.iter()).flat_map(|th| th.nodes.iter()).map(|n| n.func).collect();
    let nodes: usize = model.traces.iter().flat_map(|t| t.threads.iter()).map(|th| th.nodes.len()).sum();
    let tokens = crate::tokens::Count { tokens: fitted.tokens, exact: fitted.exact };
    eprintln!(
        "slice: {} tokens ({}{}), {} lines, {} characters, {} functions, {} tree nodes",
        tokens,
        a.prompt.tokenizer,
        if tokens.exact { "" } else { ", estimated from a sample: the prompt is too large to count every token quickly" },
        fitted.text.lines().count(),
        fitted.text.chars().count(),
        functions.len(),
        nodes
    );
    if budget.is_none() && fitted.tokens > LARGE_PROMPT_TOKENS {
        eprintln!(
            "slice: warning: the prompt is {} tokens, more than most models read well; pass --budget N (e.g. --budget 32000) to keep the code closest to the question, or narrow it with --focus/--module",
            tokens
        );
    }
    if let Some(r) = &fitted.report {
        if r.elided.is_empty() && r.dropped.is_empty() && r.ran.is_empty() && r.tree_depth.is_none() && !r.collapsed_repeats {
            // A default budget that cut nothing is not worth a line.
            if a.prompt.budget.is_some() {
                match tests_left_out {
                    0 => eprintln!("slice: budget {}: everything fits", r.budget),
                    n => eprintln!(
                        "slice: budget {}: what is shown fits whole, but {} that --test chose {} left out (a prompt shows one test per {} tokens of budget, and names the others)",
                        r.budget,
                        crate::testrun::plural(n, "test"),
                        if n == 1 { "is" } else { "are" },
                        crate::analysis::TOKENS_PER_SHOWN_TEST
                    ),
                }
            }
        } else {
            eprintln!(
                "slice: budget {}{}: kept {} whole, elided {}, dropped {}{}{}",
                r.budget,
                match (a.prompt.budget, model.tests_shown) {
                    (Some(_), _) => "",
                    (None, true) => " (a test's prompt's default; --no-budget shows everything)",
                    (None, false) => " (the default; --no-budget shows everything)",
                },
                crate::testrun::plural(r.kept, "function"),
                crate::testrun::plural_of(r.elided.len(), "body", "bodies"),
                crate::testrun::plural(r.dropped.len(), "source"),
                if r.collapsed_repeats { ", repeated sources shown once" } else { "" },
                match (r.tree_depth, r.tree_to_sources) {
                    (Some(_), true) => ", tree cut to its first level and the paths to the functions shown".to_string(),
                    (Some(d), false) => format!(", tree cut below depth {d}"),
                    (None, _) => String::new(),
                }
            );
            if !r.ran.is_empty() {
                eprintln!("slice: shown as the code that ran{}", most_relevant_first(&r.ran));
            }
            if !r.elided.is_empty() {
                eprintln!("slice: bodies elided{}", most_relevant_first(&r.elided));
            }
            if !r.dropped.is_empty() {
                eprintln!("slice: sources dropped{}", most_relevant_first(&r.dropped));
            }
        }
    }
    Ok(())
}
