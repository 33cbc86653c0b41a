//! The `slice` command line. One module per subcommand; shared options in [`common`].

pub mod common;
pub mod diff;
pub mod export;
pub mod flamegraph;
pub mod folded;
pub mod from_trace;
pub mod graph;
pub mod mcp;
pub mod stats;
pub mod tokens;
pub mod tree;
pub mod view_common;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// Read what `trace run` recorded and give a model exactly the code that ran.
#[derive(Debug, Parser)]
#[command(
    name = "slice",
    version,
    about = "Build LLM prompts and views from execution traces recorded by `trace run`",
    long_about = "Build LLM prompts and views from execution traces recorded by `trace run`.\n\n\
A trace directory holds the calls of one run. `slice` folds them into a call tree (one node per \
callee under each caller, recursion cut at the first recursive call), prunes start-up work, and \
prints the question, the tree and the exact source of every function that ran.\n\n\
Examples:\n  \
trace run -- python3 app.py input.csv\n  \
slice from-trace trace.d -q \"Which function draws the table borders?\" > prompt.md\n  \
slice from-trace trace.d -q \"...\" --variant A --budget 8000 --format xml\n  \
slice from-trace feature.d --prune-startup baseline.d -q \"...\"\n  \
slice stats trace.d\n  \
slice tree trace.d --focus parse\n  \
slice flamegraph trace.d -o flame.svg\n  \
slice diff works.d fails.d --format prompt -q \"...\"",
    after_help = "Prompt variants, defaults and the budget policy: docs/prompts.md. JSON schema: docs/slice-json.md. Views (tree, flamegraph, folded, diff, graph): docs/views.md."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print a prompt: the question, the call tree and the source of each function that ran.
    FromTrace(from_trace::FromTraceArgs),
    /// Print prompt statistics as a table: functions, files, lines and tokens per section and
    /// per variant, beside the whole files the run touched.
    Stats(stats::StatsArgs),
    /// Print the call tree in the terminal: call counts, inclusive and self time, per thread.
    Tree(tree::TreeArgs),
    /// Write an interactive flamegraph SVG (zoom, search) of the call tree.
    Flamegraph(flamegraph::FlamegraphArgs),
    /// Print folded stacks (`a;b;c N`) for inferno, flamegraph.pl, speedscope.
    Folded(folded::FoldedArgs),
    /// Compare two runs: the call paths and functions only one of them reached.
    Diff(diff::DiffArgs),
    /// Print the function-level call graph (all contexts merged) as Graphviz DOT.
    Graph(graph::GraphArgs),
    /// Count the tokens of text files or standard input (o200k_base or cl100k_base), as prompts are counted.
    Tokens(tokens::TokensArgs),
    /// Serve coding agents: a Model Context Protocol server on stdin/stdout with the tools
    /// record, prompt, tree, find_calls, source and diff (docs/agents.md).
    Mcp(mcp::McpArgs),
    /// Write the run as a timeline for Perfetto UI / chrome://tracing (`--format chrome`) or
    /// speedscope (`--format speedscope`).
    Export(export::ExportArgs),
}

/// Run the CLI: exit status 0 on success, 1 on errors, 2 on usage errors.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let r = match cli.command {
        Command::FromTrace(a) => from_trace::run(a),
        Command::Stats(a) => stats::run(a),
        Command::Tree(a) => tree::run(a),
        Command::Flamegraph(a) => flamegraph::run(a),
        Command::Folded(a) => folded::run(a),
        Command::Diff(a) => diff::run(a),
        Command::Graph(a) => graph::run(a),
        Command::Tokens(a) => tokens::run(a),
        Command::Mcp(a) => mcp::run(a),
        Command::Export(a) => export::run(a),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            if e.downcast_ref::<common::UsageError>().is_some() {
                eprintln!("slice: usage error: {e:#}");
                ExitCode::from(2)
            } else {
                eprintln!("slice: error: {e:#}");
                ExitCode::from(1)
            }
        }
    }
}

/// Print warnings on stderr.
pub fn warn_all(warnings: &[String]) {
    for w in warnings {
        eprintln!("slice: warning: {w}");
    }
}

/// Read the question: `-` reads standard input.
pub fn read_question(q: &str) -> anyhow::Result<String> {
    use anyhow::Context;
    use std::io::Read;
    if q == "-" {
        let mut s = String::new();
        std::io::stdin().read_to_string(&mut s).context("reading the question from standard input")?;
        Ok(s)
    } else {
        Ok(q.to_string())
    }
}
