//! `slice graph`: the function-level call graph as Graphviz DOT.

use super::output::OutputArgs;
use super::view_common::{load_views, ViewInput};
use crate::views::{graph, FrameNames, Threads};
use clap::Args;

#[derive(Debug, Args)]
#[command(mut_arg("output", |a| a.help(
    "Write the DOT text to FILE instead of standard output (`-`: standard output); render it with `dot -Tsvg FILE -o graph.svg`"
)))]
pub struct GraphArgs {
    #[command(flatten)]
    pub input: ViewInput,
    #[command(flatten)]
    pub output: OutputArgs,
}

pub fn run(a: GraphArgs) -> anyhow::Result<()> {
    let (t, vs) = load_views(&a.input, Threads::Separate)?;
    let t = &t;
    let names = FrameNames::new(vs.iter().map(|v| &v.tree), &t.cwd);
    let g = graph::build(&vs, &names, &t.cwd);
    let dot = graph::to_dot(&g, &trace_format::escape::command(&t.meta.argv));
    a.output.write("call graph", |w| w.write_all(dot.as_bytes()))?;
    eprintln!("slice: call graph: {} functions, {} caller-callee edges", g.node_count(), g.edge_count());
    Ok(())
}
