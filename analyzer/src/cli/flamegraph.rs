//! `slice flamegraph`: an interactive SVG flamegraph.

use super::common::SelectArgs;
use super::view_common::load_views;
use crate::views::flamegraph::{write_svg, Flame};
use crate::views::folded::Weight;
use crate::views::{FrameNames, Threads};
use anyhow::Context;
use clap::Args;
use std::io::Write;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct FlamegraphArgs {
    /// Trace directory written by `trace run`.
    #[arg(value_name = "TRACE.d", default_value = "trace.d")]
    pub trace: PathBuf,
    /// Output SVG file (`-`: standard output).
    #[arg(short, long, value_name = "FILE", default_value = "flame.svg")]
    pub output: PathBuf,
    /// Frame widths: `time` (inclusive time) or `calls` (calls made in the frame's subtree).
    #[arg(long, value_enum, default_value = "time")]
    pub weight: Weight,
    /// `separate`: one tower per thread, on a frame naming it; `merged`: threads merged.
    #[arg(long, value_enum, default_value = "separate")]
    pub threads: Threads,
    /// Title (default: the traced command).
    #[arg(long, value_name = "TEXT")]
    pub title: Option<String>,
    #[command(flatten)]
    pub select: SelectArgs,
}

pub fn run(a: FlamegraphArgs) -> anyhow::Result<()> {
    let (t, vs) = load_views(&a.trace, &a.select, a.threads)?;
    let t = &t;
    let names = FrameNames::new(vs.iter().map(|v| &v.tree), &t.cwd);
    let flame = Flame {
        title: a.title.clone().unwrap_or_else(|| t.meta.argv.join(" ")),
        subtitle: Some(format!(
            "{}: {} events; widths: {}",
            t.dir.display(),
            t.events,
            match a.weight {
                Weight::Time => "inclusive time",
                Weight::Calls => "calls made in the subtree",
            }
        )),
        weight: a.weight,
    };
    let mut svg = Vec::new();
    let totals = write_svg(&mut svg, &vs, &names, &flame)?;
    if a.output.as_os_str() == "-" {
        let mut out = std::io::stdout().lock();
        if let Err(e) = out.write_all(&svg).and_then(|_| out.flush()) {
            if e.kind() != std::io::ErrorKind::BrokenPipe {
                return Err(e).context("writing the flamegraph to standard output");
            }
        }
    } else {
        std::fs::write(&a.output, &svg)
            .with_context(|| format!("{}: cannot write the flamegraph (check the directory exists and is writable)", a.output.display()))?;
        eprintln!(
            "slice: wrote {} ({} stacks, {} {}); open it in a browser",
            a.output.display(),
            totals.lines,
            totals.sum,
            a.weight.unit()
        );
    }
    Ok(())
}
