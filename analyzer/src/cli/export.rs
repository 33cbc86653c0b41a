//! `slice export`: the run as a timeline for Perfetto UI / chrome://tracing or speedscope.

use super::common::SelectArgs;
use super::view_common::{load_views, write_output};
use crate::views::export::{self, Format, Lane};
use crate::views::{FrameNames, Threads};
use clap::Args;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Trace directory written by `trace run`.
    #[arg(value_name = "TRACE.d", default_value = "trace.d")]
    pub trace: PathBuf,
    /// `chrome`: Trace Event Format JSON (open it in ui.perfetto.dev or chrome://tracing);
    /// `speedscope`: speedscope's JSON format (open it in www.speedscope.app). The timeline is
    /// the folded call tree laid out in call order, one bar per tree node as wide as its
    /// inclusive time, not the real timestamps of each call (docs/views.md).
    #[arg(long, value_enum, default_value = "chrome")]
    pub format: Format,
    /// Write to FILE instead of standard output.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub select: SelectArgs,
}

pub fn run(a: ExportArgs) -> anyhow::Result<()> {
    let (t, vs) = load_views(&a.trace, &a.select, Threads::Separate)?;
    let names = FrameNames::new(vs.iter().map(|v| &v.tree), &t.cwd);
    let lanes: Vec<Lane> = t
        .threads
        .iter()
        .map(|th| Lane { pid: th.pid, tid: th.tid, process: th.command.clone(), thread: th.thread_name(), tree: &th.tree })
        .collect();
    let argv = t.meta.argv.join(" ");
    let mut bars = 0;
    write_output(a.output.as_deref(), "timeline", |w| {
        bars = match a.format {
            Format::Chrome => export::write_chrome(w, &lanes, &names, &t.cwd, &argv)?,
            Format::Speedscope => export::write_speedscope(w, &lanes, &names, &argv)?,
        };
        Ok(())
    })?;
    eprintln!("slice: timeline: {bars} bars (one per call-tree node) on {} threads", lanes.len());
    Ok(())
}
