//! `slice stats`: prompt statistics as a table.

use super::common::SelectArgs;
use super::output::OutputArgs;
use super::{read_question, warn_all};
use crate::analysis::prepare;
use crate::prompt::render::{Format, Renderer};
use crate::prompt::{Docstrings, Model, NotRun, Plan, SourceState, Variant};
use crate::tokens::{Count, Tokenizer};
use clap::Args;
use std::collections::BTreeSet;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct StatsArgs {
    /// Trace directories written by `trace run`.
    #[arg(required = true, value_name = "TRACE.d")]
    pub traces: Vec<PathBuf>,
    /// The question (counted in the prompt sizes; a placeholder if omitted).
    #[arg(short, long, value_name = "TEXT", default_value = "(question)")]
    pub question: String,
    /// Tokenizer: o200k_base or cl100k_base.
    #[arg(long, value_name = "NAME", default_value = "o200k_base")]
    pub tokenizer: Tokenizer,
    /// Count the prompts in this format.
    #[arg(long, value_name = "markdown|xml|json", default_value = "markdown")]
    pub format: Format,
    #[command(flatten)]
    pub select: SelectArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

struct Row {
    what: String,
    items: String,
    lines: usize,
    chars: usize,
    tokens: Count,
}

/// A row of the table. Its tokens are counted as `from-trace` counts its prompt for stderr
/// ([`Tokenizer::count_for_message`]): exactly, unless more than 4 MiB of the text was never
/// counted before (a million tokens or more); then from a sample, and the table marks it `~`.
fn row(what: impl Into<String>, items: impl Into<String>, text: &str, tok: Tokenizer) -> Row {
    Row {
        what: what.into(),
        items: items.into(),
        lines: text.lines().count(),
        chars: text.chars().count(),
        tokens: tok.count_for_message(text),
    }
}

pub fn run(a: StatsArgs) -> anyhow::Result<()> {
    let question = read_question(&a.question)?;
    a.tokenizer.prewarm();
    let opts = a.select.prompt_options(&question)?;
    let (mut traces, warnings) = prepare(&a.traces, &opts)?;
    warn_all(&warnings);
    let mut model = Model::build(&question, &mut traces);
    // Sized as `from-trace` prints it by default.
    model.condense(NotRun::default(), Docstrings::default());
    let tok = a.tokenizer;
    let renderer = Renderer::new(a.format, None)?;

    let nodes: usize = model.traces.iter().flat_map(|t| t.threads.iter()).map(|th| th.nodes.len()).sum();
    let recorded: usize = traces.iter().map(|t| t.nodes_recorded).sum();
    let events: u64 = traces.iter().map(|t| t.events).sum();
    let shown_funcs: Vec<_> = model.funcs.values().collect();
    let with_code = shown_funcs.iter().filter(|f| matches!(f.source, SourceState::Code(_))).count();
    let mut tree_files = BTreeSet::new();
    for t in &traces {
        for th in &t.threads {
            for n in th.tree.preorder() {
                if let Some(f) = th.tree.func(n).and_then(|f| f.file.as_ref()) {
                    if !f.to_string_lossy().starts_with('<') {
                        tree_files.insert(t.sources.resolve(f));
                    }
                }
            }
        }
    }
    let all_files: BTreeSet<PathBuf> = model.traces.iter().flat_map(|t| t.files_executed.iter().cloned()).collect();
    // The analysis is no longer needed: what follows reads the model.
    drop(traces);

    let mut rows = Vec::new();
    rows.push(row("question", "", &question, tok));
    // The sections are those of the `A` layout (each function once): its document is laid out
    // once, for the sections and for its prompt, whose text waits for its row (rows are
    // counted in table order: what one row counted, a later one finds counted).
    let doc = model.doc(Variant::A.layout(), &Plan::default());
    let tree_text: String = doc.traces.iter().flat_map(|t| t.threads.iter()).map(|th| format!("{}\n", th.tree)).collect();
    let src_text: String = doc.sorted_sources.iter().filter_map(|s| s.code.as_ref()).map(|c| format!("{c}\n")).collect();
    let mut prompt_a = Some(renderer.render(&model, doc)?);
    rows.push(row("call tree", format!("{nodes} nodes"), &tree_text, tok));
    drop(tree_text);
    rows.push(row("sources (each function once)", format!("{with_code} functions"), &src_text, tok));
    drop(src_text);
    // The other variants are rendered by a second thread, one ahead of the counting here
    // (rows are counted in table order), so rendering and counting overlap; at most two texts
    // besides A's are alive at a time, each dropped once counted.
    std::thread::scope(|scope| -> anyhow::Result<()> {
        let (send, texts) = std::sync::mpsc::sync_channel::<anyhow::Result<String>>(1);
        let (model, renderer) = (&model, &renderer);
        scope.spawn(move || {
            for v in Variant::ALL.into_iter().filter(|v| *v != Variant::A) {
                let text = renderer.render(model, model.doc(v.layout(), &Plan::default())).map_err(anyhow::Error::from);
                let failed = text.is_err();
                if send.send(text).is_err() || failed {
                    return;
                }
            }
        });
        for v in Variant::ALL {
            let text = match v {
                Variant::A => prompt_a.take().unwrap_or_default(),
                _ => texts.recv().map_err(|_| anyhow::anyhow!("the rendering thread stopped"))??,
            };
            rows.push(row(format!("prompt {v}"), "", &text, tok));
        }
        Ok(())
    })?;
    let read_all = |files: &BTreeSet<PathBuf>| -> String {
        files
            .iter()
            .filter_map(|f| std::fs::read_to_string(f).ok())
            .map(|mut s| {
                if !s.ends_with('\n') {
                    s.push('\n');
                }
                s
            })
            .collect()
    };
    let whole = row("whole files of the tree's functions", format!("{} files", tree_files.len()), &read_all(&tree_files), tok);
    // The same files (a run of one file): the same text, counted alike (a count that was
    // exact stays exact, and a sampled one left the memo as it was), so counted once.
    let every = if all_files == tree_files {
        Row { what: "every file the run executed, whole".into(), items: format!("{} files", all_files.len()), ..whole }
    } else {
        row("every file the run executed, whole", format!("{} files", all_files.len()), &read_all(&all_files), tok)
    };
    rows.push(whole);
    rows.push(every);

    a.output.write("statistics", |out| {
        let traces = model.traces.iter().map(|t| format!("{} ({})", t.dir, t.command)).collect::<Vec<_>>().join("; ");
        writeln!(out, "traces: {}", trace_format::escape::line(&traces))?;
        writeln!(
            out,
            "events: {events}; recorded tree nodes: {recorded}; shown tree nodes: {nodes}; functions: {} ({with_code} with source); files: {}; tokenizer: {tok}",
            shown_funcs.len(),
            tree_files.len()
        )?;
        writeln!(out)?;
        let w = rows.iter().map(|r| r.what.len()).max().unwrap_or(10).max(7);
        let wi = rows.iter().map(|r| r.items.len()).max().unwrap_or(5).max(5);
        writeln!(out, "{:<w$}  {:>wi$}  {:>9}  {:>11}  {:>10}", "section", "items", "lines", "characters", "tokens")?;
        for r in &rows {
            writeln!(out, "{:<w$}  {:>wi$}  {:>9}  {:>11}  {:>10}", r.what, r.items, r.lines, r.chars, r.tokens.to_string())?;
        }
        if rows.iter().any(|r| !r.tokens.exact) {
            writeln!(out, "\n~: estimated from a sample (more than 4 MiB of the text was never counted before; docs/prompts.md)")?;
        }
        Ok(())
    })
}
