//! `slice folded`: folded stacks for flamegraph tools.

use super::output::OutputArgs;
use super::view_common::{load_views, ViewInput};
use crate::views::folded::{self, Weight};
use crate::views::{FrameNames, Threads};
use clap::Args;

#[derive(Debug, Args)]
pub struct FoldedArgs {
    #[command(flatten)]
    pub input: ViewInput,
    /// What a line's value counts: `time` (self time in ns: frames as wide as their inclusive
    /// time) or `calls` (the node's call count: frames as wide as the calls in their subtree;
    /// all values add up to the calls in the tree).
    #[arg(long, value_enum, default_value = "time")]
    pub weight: Weight,
    /// `separate`: each stack starts with a frame naming its thread (when the run has more
    /// than one); `merged`: the threads' trees merged by call path, no thread frame.
    #[arg(long, value_enum, default_value = "separate")]
    pub threads: Threads,
    #[command(flatten)]
    pub output: OutputArgs,
}

pub fn run(a: FoldedArgs) -> anyhow::Result<()> {
    let (t, vs) = load_views(&a.input, a.threads)?;
    let t = &t;
    let names = FrameNames::new(vs.iter().map(|v| &v.tree), &t.cwd);
    let mut totals = folded::Totals::default();
    a.output.write("folded stacks", |w| {
        totals = folded::write(w, &vs, &names, a.weight, vs.len() > 1)?;
        Ok(())
    })?;
    eprintln!("slice: {} stacks, {} {} in total", totals.lines, totals.sum, a.weight.unit());
    if let Some(note) = folded::deeper_note(&totals) {
        eprintln!("{note}");
    }
    Ok(())
}
