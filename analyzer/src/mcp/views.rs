//! The `prompt`, `tree` and `diff` tools: the answers of `slice from-trace`, `slice tree` and
//! `slice diff`, built by the same functions, bounded in tokens.

use super::bound::{self, fit_lines, fit_tree, TreeLine, PROMPT_DEFAULT, TOKENIZER, VIEW_DEFAULT};
use super::params::{clamp_depth, DiffParams, PromptParams, Selection, TreeParams};
use crate::analysis::{prepare, PreparedTrace};
use crate::cli::common::{SelectFields, UsageError};
use crate::cli::diff::write_tree;
use crate::frontend::FrontEnd;
use crate::prompt::budget::{fit, BudgetError};
use crate::prompt::render::{Format, Renderer};
use crate::prompt::{Docstrings, Layout, Model, NotRun, Variant};
use crate::views::tree::{render, Palette};
use crate::views::{self, Threads};
use anstyle::Style;
use anyhow::Context;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use trace_format::escape;

/// Warnings and notes of prepared traces, as answer lines.
fn notes(warnings: &[String], traces: &[PreparedTrace]) -> String {
    let mut s = String::new();
    for w in warnings {
        s.push_str(&format!("warning: {}\n", escape::line(w)));
    }
    for t in traces {
        for n in &t.notes {
            s.push_str(&escape::line(&format!("note: {}: {n}", t.dir.display())));
            s.push('\n');
        }
    }
    s
}

/// The prompt tool: `slice from-trace ... --budget max_tokens`.
pub fn prompt(p: &PromptParams) -> anyhow::Result<String> {
    let max = bound::limit(p.max_tokens, PROMPT_DEFAULT).map_err(UsageError)?;
    if p.question.trim().is_empty() {
        return Err(UsageError("the question is empty: pass the question about the run".into()).into());
    }
    // No variant: the CLI's default layout (the tree, then each source once in call order).
    let layout = match p.variant.as_deref() {
        Some(v) => Variant::from_str(v).map_err(UsageError)?.layout(),
        None => Layout::DEFAULT,
    };
    let format = Format::from_str(p.format.as_deref().unwrap_or("markdown")).map_err(UsageError)?;
    let docstrings: Docstrings = choice("docstrings", p.docstrings.as_deref())?;
    let not_run: NotRun = choice("not_run", p.not_run.as_deref())?;
    let mut opts = p.select.args().prompt_options_for(FrontEnd::Mcp, &p.question)?;
    opts.max_tests = Some(crate::analysis::prompt_max_tests(Some(max)));
    let renderer = Renderer::new(format, None)?;
    let (mut traces, warnings) = prepare(&p.trace.paths(), &opts)?;
    let mut model = Model::build(&p.question, &mut traces);
    // The CLI's condensing: code that did not run and long docstrings (by default outside the
    // closest functions).
    model.condense(not_run, docstrings);
    // A budget too small is the caller's to fix: worded for the tool call (`max_tokens`).
    let fitted = fit(&model, layout, &renderer, TOKENIZER, Some(max)).map_err(|e| match e {
        e @ BudgetError::TooSmall { .. } => anyhow::Error::from(UsageError(e.to_string())),
        other => other.into(),
    })?;
    // Warnings go to the server's log: the prompt is the product, exactly as the CLI prints it.
    for w in &warnings {
        eprintln!("slice mcp: warning: {}", escape::line(w));
    }
    Ok(fitted.text)
}

/// One of the values of a CLI option's enum (`docstrings`, `not_run`), by its CLI name;
/// the default when left out.
fn choice<T: clap::ValueEnum + Default>(param: &str, v: Option<&str>) -> Result<T, UsageError> {
    let Some(v) = v else { return Ok(T::default()) };
    T::from_str(v, true).map_err(|_| {
        let names: Vec<String> =
            T::value_variants().iter().filter_map(|x| x.to_possible_value()).map(|p| format!("{:?}", p.get_name())).collect();
        UsageError(format!("{param} {v:?}: not one of {}", names.join(", ")))
    })
}

/// The tree tool: `slice tree` (plain text), cut by depth to fit.
pub fn tree(p: &TreeParams) -> anyhow::Result<String> {
    let max = bound::limit(p.max_tokens, VIEW_DEFAULT).map_err(UsageError)?;
    let fields = SelectFields {
        focus: p.focus.clone().into_iter().collect(),
        focus_subtree: p.focus_subtree == Some(true),
        max_depth: p.depth.map(clamp_depth),
        prune_startup: p.prune_startup.clone(),
        test: p.test.clone(),
        ..SelectFields::default()
    };
    let select = Selection { fields, stdlib: p.stdlib, ..Selection::default() };
    if p.focus_subtree == Some(true) && p.focus.is_none() {
        return Err(UsageError("focus_subtree needs focus: the function whose calls to show whole".into()).into());
    }
    let opts = select.args().options_for(FrontEnd::Mcp, true)?;
    let (traces, warnings) = prepare(&[PathBuf::from(&p.trace)], &opts)?;
    let t = traces.first().context("internal error: no prepared trace")?;
    let threads = if p.merge_threads == Some(true) { Threads::Merged } else { Threads::Separate };
    let vs = views::views(t, threads);
    let mut head = escape::line(&format!("# {}: {}, {} events", t.dir.display(), escape::command(&t.meta.argv), t.events)).into_owned();
    head.push('\n');
    for o in &t.outcome {
        head.push_str(&crate::testrun::clean_text(o));
        head.push('\n');
    }
    head.push_str(&notes(&warnings, &traces));
    let mut lines: Vec<TreeLine> = Vec::new();
    for (i, v) in vs.iter().enumerate() {
        let mut buf = Vec::new();
        render(&mut buf, v, &t.cwd, &Palette::default()).context("rendering the tree")?;
        let text = String::from_utf8_lossy(&buf).into_owned();
        let rendered: Vec<&str> = text.lines().collect();
        // Two header lines, then one line per node in pre-order (what `render` writes).
        let order = v.tree.preorder();
        let sizes = v.tree.subtree_sizes();
        if rendered.len() != order.len() + 2 {
            anyhow::bail!("internal error: the tree view has {} lines for {} nodes", rendered.len(), order.len());
        }
        if i > 0 {
            lines.push(TreeLine { text: String::new(), depth: 0, descendants: 0 });
        }
        for h in &rendered[..2] {
            lines.push(TreeLine { text: h.to_string(), depth: 0, descendants: 0 });
        }
        for (l, n) in rendered[2..].iter().zip(order) {
            lines.push(TreeLine { text: l.to_string(), depth: v.tree.node(n).depth, descendants: sizes[n as usize] - 1 });
        }
    }
    let shown_depth = p.depth.map(clamp_depth);
    Ok(fit_tree(&head, &lines, max, |d, partial| {
        format!(
            "Left out to fit max_tokens={max}: {} (counted at each `… N more calls below`). \
             Ask for a part with focus: \"<function regex>\"{}, or raise max_tokens.",
            match (d, partial) {
                (0, _) => "some of the top calls and all below them".to_string(),
                (d, true) => format!("some calls at depth {} and all below depth {d}", d + 1),
                (d, false) => format!("the calls below depth {d}"),
            },
            if shown_depth.is_none() { " and depth: N" } else { "" }
        )
    }))
}

/// The tests tool: `slice tests` (the table, the failures, the ranking), bounded in tokens.
pub fn tests(p: &super::params::TestsParams) -> anyhow::Result<String> {
    let max = bound::limit(p.max_tokens, VIEW_DEFAULT).map_err(UsageError)?;
    let filter = match &p.test {
        Some(t) => Some(crate::testrun::TestFilter::parse(t).map_err(UsageError)?),
        None => None,
    };
    let rank = p.rank.map_or(10, |r| usize::try_from(r).unwrap_or(usize::MAX).min(1000));
    let rule = crate::testrun::RankRule::prompt_default(p.stdlib.unwrap_or(false), p.show_plumbing.unwrap_or(false));
    let (table, warnings) = crate::testrun::TestTable::load(&p.trace.paths(), filter.as_ref(), rank, &rule, FrontEnd::Mcp)?;
    // As `slice tests`: no test to list is an error, with its reason.
    if let Some(why) = table.nothing_to_list(&p.trace.paths(), p.test.as_deref(), FrontEnd::Mcp) {
        return Err(UsageError(why).into());
    }
    let mut head = String::new();
    for w in &warnings {
        head.push_str(&format!("warning: {w}\n"));
    }
    let lines = table.agent_lines();
    Ok(fit_lines(&head, &lines, max, |n| {
        format!("Left out to fit max_tokens={max}: {n} more lines. Narrow it with test: \"failed\" or a glob, or raise max_tokens.")
    }))
}

/// The diff tool: `slice diff` (tree), or `slice diff --format prompt` with a question.
pub fn diff(p: &DiffParams) -> anyhow::Result<String> {
    let max = bound::limit(p.max_tokens, VIEW_DEFAULT).map_err(UsageError)?;
    let (mut traces, warnings) = crate::cli::diff::prepare_sides(
        Path::new(&p.a),
        Path::new(&p.b),
        &p.select.args(),
        p.test_a.as_deref(),
        p.test_b.as_deref(),
        FrontEnd::Mcp,
    )?;
    let (first, rest) = traces.split_at_mut(1);
    let d = crate::views::diff::diff_traces(&mut first[0], &mut rest[0]);
    let text = match p.question.as_deref().filter(|q| !q.trim().is_empty()) {
        // The notes below take a few lines of the limit; the error names the whole limit.
        Some(q) => crate::views::diff::prompt_within(
            Some(q),
            &d,
            &mut traces,
            Some(crate::views::diff::DiffBudget { tokens: max.saturating_sub(200).max(1), tokenizer: TOKENIZER, by_default: false }),
        )
        .map_err(|e| UsageError(crate::views::diff::DiffTooSmall { budget: max, ..e }.to_string()))?,
        None => {
            let mut buf = Vec::new();
            write_tree(&mut buf, &d, &traces[0], &traces[1], &Palette::default(), Style::new(), Style::new())
                .context("rendering the diff")?;
            String::from_utf8_lossy(&buf).into_owned()
        }
    };
    let head = notes(&warnings, &traces);
    let lines: Vec<String> = text.lines().map(str::to_string).collect();
    Ok(fit_lines(&head, &lines, max, |n| {
        format!(
            "… {n} more lines left out to fit max_tokens={max}; narrow the diff with focus: \"<function regex>\", \
             or raise max_tokens"
        )
    }))
}
