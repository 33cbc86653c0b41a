//! `slice flamegraph`: an interactive SVG flamegraph.

use super::output::OutputArgs;
use super::view_common::{load_views, ViewInput};
use crate::views::flamegraph::{write_svg, Flame};
use crate::views::folded::Weight;
use crate::views::{FrameNames, Threads};
use clap::Args;

/// The file `slice flamegraph` writes without `-o`.
const DEFAULT_SVG: &str = "flame.svg";

#[derive(Debug, Args)]
#[command(mut_arg("output", |a| a.help("Output SVG file (`-`: standard output)").default_value(DEFAULT_SVG)))]
pub struct FlamegraphArgs {
    #[command(flatten)]
    pub input: ViewInput,
    #[command(flatten)]
    pub output: OutputArgs,
    /// Frame widths: `time` (inclusive time) or `calls` (calls made in the frame's subtree).
    #[arg(long, value_enum, default_value = "time")]
    pub weight: Weight,
    /// `separate`: one tower per thread, on a frame naming it; `merged`: threads merged.
    #[arg(long, value_enum, default_value = "separate")]
    pub threads: Threads,
    /// Title (default: the traced command).
    #[arg(long, value_name = "TEXT")]
    pub title: Option<String>,
}

pub fn run(a: FlamegraphArgs) -> anyhow::Result<()> {
    let (t, vs) = load_views(&a.input, a.threads)?;
    let t = &t;
    let names = FrameNames::new(vs.iter().map(|v| &v.tree), &t.cwd);
    let flame = Flame {
        title: a.title.clone().unwrap_or_else(|| trace_format::escape::command(&t.meta.argv)),
        subtitle: Some(format!(
            "{}: {} events; widths: {}",
            t.dir.display(),
            t.events,
            match a.weight {
                Weight::Time if vs.iter().any(|v| v.times_estimated) => format!("inclusive time ({})", crate::views::TIMES_ESTIMATED),
                Weight::Time => "inclusive time".into(),
                Weight::Calls => "calls made in the subtree".into(),
            }
        )),
        weight: a.weight,
    };
    let mut svg = Vec::new();
    let totals = write_svg(&mut svg, &vs, &names, &flame)?;
    a.output.write("flamegraph", |w| w.write_all(&svg))?;
    if let Some(file) = a.output.file() {
        eprintln!("slice: wrote {} ({} stacks, {} {}); open it in a browser", file.display(), totals.lines, totals.sum, a.weight.unit());
    }
    if let Some(note) = crate::views::folded::deeper_note(&totals) {
        eprintln!("{note}");
    }
    Ok(())
}
