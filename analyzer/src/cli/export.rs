//! `slice export`: the run as a timeline for Perfetto UI / chrome://tracing or speedscope.

use super::output::OutputArgs;
use super::view_common::{load_views, ViewInput};
use crate::views::export::{self, Format, Lane};
use crate::views::{FrameNames, Threads};
use clap::Args;

#[derive(Debug, Args)]
pub struct ExportArgs {
    #[command(flatten)]
    pub input: ViewInput,
    /// `chrome`: Trace Event Format JSON (open it in ui.perfetto.dev or chrome://tracing);
    /// `speedscope`: speedscope's JSON format (open it in www.speedscope.app). The timeline is
    /// the folded call tree laid out in call order, one bar per tree node as wide as its
    /// inclusive time, not the real timestamps of each call (docs/views.md).
    #[arg(long, value_enum, default_value = "chrome")]
    pub format: Format,
    #[command(flatten)]
    pub output: OutputArgs,
}

pub fn run(a: ExportArgs) -> anyhow::Result<()> {
    if a.format == Format::Parquet {
        return parquet(&a);
    }
    let (t, vs) = load_views(&a.input, Threads::Separate)?;
    let names = FrameNames::new(vs.iter().map(|v| &v.tree), &t.cwd);
    let lanes: Vec<Lane> = t
        .threads
        .iter()
        .map(|th| Lane {
            pid: th.pid,
            tid: th.tid,
            // The viewers show a process's name above its lanes: estimated times say so there.
            process: if th.times_estimated { format!("{} ({})", th.command, crate::views::TIMES_ESTIMATED) } else { th.command.clone() },
            thread: th.thread_name(),
            tree: &th.tree,
        })
        .collect();
    let argv = trace_format::escape::command(&t.meta.argv);
    let mut bars = 0;
    a.output.write("timeline", |w| {
        bars = match a.format {
            Format::Chrome => export::write_chrome(w, &lanes, &names, &t.cwd, &argv)?,
            Format::Speedscope => export::write_speedscope(w, &lanes, &names, &argv)?,
            Format::Parquet => unreachable!("written by `parquet`"),
        };
        Ok(())
    })?;
    eprintln!("slice: timeline: {bars} bars (one per call-tree node) on {} threads", lanes.len());
    Ok(())
}

/// `--format parquet`: the per-test coverage rows of the trace ([`crate::views::test_rows`]).
fn parquet(a: &ExportArgs) -> anyhow::Result<()> {
    use anyhow::Context;
    use std::io::IsTerminal;
    if a.output.file().is_none() && std::io::stdout().is_terminal() {
        return Err(super::common::UsageError("Parquet is binary: write it to a file with -o FILE.parquet".into()).into());
    }
    let t = crate::fold::load_trace(&a.input.trace, &mut Default::default(), crate::frontend::FrontEnd::Cli)?;
    super::warn_all(&t.warnings);
    let name = a.input.trace.display().to_string();
    let rows = crate::views::test_rows::rows(&t, &name);
    if rows.is_empty() {
        anyhow::bail!(
            "{name}: the trace recorded no tests, so there are no per-test rows (record a test run: `trace run -- python -m pytest ...`)"
        );
    }
    let bytes = crate::views::test_rows::to_parquet(&rows).context("writing the rows")?;
    a.output.write("Parquet rows", |w| w.write_all(&bytes))?;
    let tests: std::collections::HashSet<&str> = rows.iter().map(|r| r.test.as_str()).collect();
    eprintln!("slice: {} rows (test × function) of {} tests, {} bytes of Parquet", rows.len(), tests.len(), bytes.len());
    Ok(())
}
