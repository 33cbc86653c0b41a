//! `slice graph`: the function-level call graph as Graphviz DOT.

use super::common::SelectArgs;
use super::view_common::load_views;
use super::view_common::write_output;
use crate::views::{graph, FrameNames, Threads};
use clap::Args;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct GraphArgs {
    /// Trace directory written by `trace run`.
    #[arg(value_name = "TRACE.d", default_value = "trace.d")]
    pub trace: PathBuf,
    /// Write the DOT text to FILE instead of standard output (render it with
    /// `dot -Tsvg FILE -o graph.svg`).
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub select: SelectArgs,
}

pub fn run(a: GraphArgs) -> anyhow::Result<()> {
    let (t, vs) = load_views(&a.trace, &a.select, Threads::Separate)?;
    let t = &t;
    let names = FrameNames::new(vs.iter().map(|v| &v.tree), &t.cwd);
    let g = graph::build(&vs, &names, &t.cwd);
    let dot = graph::to_dot(&g, &t.meta.argv.join(" "));
    write_output(a.output.as_deref(), "call graph", |w| w.write_all(dot.as_bytes()))?;
    eprintln!("slice: call graph: {} functions, {} caller-callee edges", g.node_count(), g.edge_count());
    Ok(())
}
