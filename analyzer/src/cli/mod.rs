//! The `slice` command line. One module per subcommand; shared options in [`common`].

pub mod common;
pub mod diff;
pub mod export;
pub mod flamegraph;
pub mod folded;
pub mod from_trace;
pub mod graph;
pub mod mcp;
pub mod output;
pub mod stats;
pub mod test_list;
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
slice diff works.d fails.d --format prompt -q \"...\"\n  \
trace run -o t.d -- python -m pytest tests/\n  \
slice tests t.d\n  \
slice from-trace t.d --test failed -q \"Why does this test fail?\"",
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
    /// per variant, beside the whole files the run touched (alias `info`; `trace info` sums up
    /// the recording itself: command, exit status, processes, threads).
    #[command(visible_alias = "info")]
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
    /// List the tests a run of a test suite recorded: outcome, duration, calls, failures; with
    /// failing and passing tests, the functions that go most with failure.
    Tests(test_list::TestsArgs),
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
        Command::Tests(a) => test_list::run(a),
        Command::Tokens(a) => tokens::run(a),
        Command::Mcp(a) => mcp::run(a),
        Command::Export(a) => export::run(a),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            if e.downcast_ref::<common::UsageError>().is_some() {
                eprintln!("slice: usage error: {}", trace_format::escape::block(&format!("{e:#}")));
                ExitCode::from(2)
            } else {
                eprintln!("slice: error: {}", trace_format::escape::block(&format!("{e:#}")));
                ExitCode::from(1)
            }
        }
    }
}

/// Print warnings on stderr, one line each (they name files and functions of the trace:
/// control characters escaped, [`trace_format::escape::line`]).
pub fn warn_all(warnings: &[String]) {
    for w in warnings {
        eprintln!("slice: warning: {}", trace_format::escape::line(w));
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

#[cfg(test)]
mod tests {
    use super::common::SelectArgs;
    use super::output::{ColorArg, ColorArgs, OutputArgs};
    use super::{Cli, Command};
    use clap::{CommandFactory, Parser};
    use std::path::Path;

    /// The shared argument groups a parsed subcommand holds: selection, output, colour.
    fn shared(c: &Command) -> (Option<&SelectArgs>, Option<&OutputArgs>, Option<&ColorArgs>) {
        match c {
            Command::FromTrace(a) => (Some(&a.select), Some(&a.output), None),
            Command::Stats(a) => (Some(&a.select), Some(&a.output), None),
            Command::Tree(a) => (Some(&a.input.select), Some(&a.output), Some(&a.color)),
            Command::Flamegraph(a) => (Some(&a.input.select), Some(&a.output), None),
            Command::Folded(a) => (Some(&a.input.select), Some(&a.output), None),
            Command::Diff(a) => (Some(&a.select), Some(&a.output), Some(&a.color)),
            Command::Graph(a) => (Some(&a.input.select), Some(&a.output), None),
            Command::Export(a) => (Some(&a.input.select), Some(&a.output), None),
            Command::Tests(a) => (None, Some(&a.output), None),
            Command::Tokens(_) | Command::Mcp(_) => (None, None, None),
        }
    }

    const SELECTION: &[&str] = &[
        "--prune-startup",
        "off",
        "--include",
        "inc",
        "--exclude",
        "exc",
        "--include-file",
        "incf",
        "--exclude-file",
        "excf",
        "--module",
        "mod",
        "--exclude-module",
        "excm",
        "--focus",
        "foc",
        "--focus-subtree",
        "--max-depth",
        "3",
        "--stdlib",
        "--no-site-packages",
        "--show-plumbing",
        "--plumbing",
        "click",
    ];

    /// Every subcommand that reads traces takes the same selection flags and `-o FILE`; the
    /// ones that colour take `--color`; each parses into the shared groups.
    #[test]
    fn every_subcommand_takes_the_shared_selection_output_and_color_arguments() {
        Cli::command().debug_assert();
        let subcommands: [(&[&str], bool); 8] = [
            (&["from-trace", "t.d", "-q", "why?"], false),
            (&["stats", "t.d"], false),
            (&["tree", "t.d"], true),
            (&["flamegraph", "t.d"], false),
            (&["folded", "t.d"], false),
            (&["diff", "a.d", "b.d"], true),
            (&["graph", "t.d"], false),
            (&["export", "t.d"], false),
        ];
        for (sub, colours) in subcommands {
            let mut argv = vec!["slice"];
            argv.extend_from_slice(sub);
            argv.extend_from_slice(SELECTION);
            argv.extend_from_slice(&["-o", "out.txt"]);
            if colours {
                argv.extend_from_slice(&["--color", "never"]);
            }
            let cli = Cli::try_parse_from(&argv).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
            let (select, output, color) = shared(&cli.command);
            let a = select.unwrap_or_else(|| panic!("{sub:?}: no selection"));
            let s = &a.fields;
            assert_eq!(s.prune_startup.as_deref(), Some("off"), "{sub:?}");
            assert_eq!(
                [&s.include, &s.exclude, &s.include_file, &s.exclude_file, &s.include_module, &s.exclude_module, &s.focus],
                [&["inc"], &["exc"], &["incf"], &["excf"], &["mod"], &["excm"], &["foc"]],
                "{sub:?}"
            );
            assert!(s.focus_subtree && a.stdlib && a.no_site_packages && s.show_plumbing, "{sub:?}");
            assert_eq!((s.max_depth, s.plumbing.as_slice()), (Some(3), &["click".to_string()][..]), "{sub:?}");
            assert_eq!(output.unwrap_or_else(|| panic!("{sub:?}: no output")).file(), Some(Path::new("out.txt")), "{sub:?}");
            assert_eq!(color.map(|c| c.color), colours.then_some(ColorArg::Never), "{sub:?}");
            if !colours {
                let mut with_color = argv.clone();
                with_color.extend_from_slice(&["--color", "never"]);
                assert!(Cli::try_parse_from(&with_color).is_err(), "{sub:?} does not colour, so --color is refused");
            }
        }
    }

    /// `-o -` and no `-o` both mean standard output (flamegraph: its default file); `auto`
    /// colour is off for a file.
    #[test]
    fn output_and_color_defaults() {
        let parse = |args: &[&str]| Cli::try_parse_from(args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
        for args in [&["slice", "tree"][..], &["slice", "tree", "-o", "-"]] {
            let cli = parse(args);
            let (_, out, color) = shared(&cli.command);
            assert_eq!(out.and_then(OutputArgs::file), None, "{args:?}");
            assert_eq!(color.map(|c| c.color), Some(ColorArg::Auto));
        }
        let cli = parse(&["slice", "tree", "-o", "t.txt"]);
        let (_, Some(out), Some(_)) = shared(&cli.command) else { panic!("tree has output and colour") };
        assert!(ColorArgs { color: ColorArg::Always }.enabled(out));
        assert!(!ColorArgs { color: ColorArg::Never }.enabled(out));
        let cli = parse(&["slice", "flamegraph"]);
        assert_eq!(shared(&cli.command).1.and_then(OutputArgs::file), Some(Path::new("flame.svg")));
        let cli = parse(&["slice", "flamegraph", "-o", "-"]);
        assert_eq!(shared(&cli.command).1.and_then(OutputArgs::file), None);
    }

    /// The shared `-o` reads the same everywhere: short `-o`, `FILE`, under "Output".
    #[test]
    fn output_help_is_shared() {
        let mut cmd = Cli::command();
        cmd.build();
        let mut seen = 0;
        for sub in cmd.get_subcommands() {
            if let Some(o) = sub.get_arguments().find(|a| a.get_id() == "output") {
                seen += 1;
                assert_eq!(o.get_short(), Some('o'), "{}", sub.get_name());
                assert_eq!(o.get_value_names().map(|v| v.iter().map(|s| s.as_str()).collect::<Vec<_>>()), Some(vec!["FILE"]));
                assert_eq!(o.get_help_heading(), Some("Output"), "{}", sub.get_name());
                let help = o.get_help().map(|h| h.to_string()).unwrap_or_default();
                assert!(help.contains("`-`: standard output"), "{}: {help}", sub.get_name());
            }
        }
        assert_eq!(seen, 9);
    }

    /// A test's prompt gets its default budget, a run's prompt its own, unless `--budget` or
    /// `--no-budget` says otherwise.
    #[test]
    fn a_tests_prompt_has_a_default_budget_that_the_options_override() {
        let model = |tests_shown| crate::prompt::Model { tests_shown, ..crate::testutil::model("", Vec::new(), Default::default()) };
        let budget = |args: &[&str], tests_shown| {
            let argv: Vec<&str> = ["slice", "from-trace", "t.d", "-q", "why?"].iter().chain(args).copied().collect();
            let Command::FromTrace(a) = Cli::try_parse_from(&argv).unwrap_or_else(|e| panic!("{argv:?}: {e}")).command else {
                panic!("from-trace")
            };
            let mut m = model(tests_shown);
            let b = a.prompt.apply_budget(&mut m);
            assert_eq!(m.budget_by_default, args.is_empty() || args == ["--test", "failed"], "{args:?}");
            b
        };
        let default = crate::prompt::budget::DEFAULT_TEST_BUDGET;
        assert_eq!(budget(&["--test", "failed"], true), Some(default));
        assert_eq!(budget(&[], false), Some(crate::prompt::budget::DEFAULT_RUN_BUDGET));
        assert_eq!(budget(&["--no-budget"], false), None);
        assert_eq!(budget(&["--budget", "4000"], true), Some(4000));
        assert_eq!(budget(&["--no-budget"], true), None);
        assert!(Cli::try_parse_from(["slice", "from-trace", "t.d", "-q", "x", "--budget", "9", "--no-budget"]).is_err());
    }

    /// `slice info DIR` (what a user who knows `trace info` types) is `slice stats DIR`.
    #[test]
    fn info_is_stats() {
        let cli = Cli::try_parse_from(["slice", "info", "t.d"]).unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(cli.command, Command::Stats(_)), "{:?}", cli.command);
    }
}
