//! `slice tests`: the tests a trace recorded (outcome, duration, calls, failures), and with
//! failing and passing tests the functions that go with failure.

use super::output::OutputArgs;
use crate::testrun::{RankRule, TestFilter, TestTable};
use clap::Args;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct TestsArgs {
    /// Trace directories written by `trace run` of a test suite (several: the shards of one
    /// suite, whose tests are ranked together).
    #[arg(required = true, value_name = "TRACE")]
    pub traces: Vec<PathBuf>,
    /// Only these tests: an id, its end, a glob, or `failed` (as `slice from-trace --test`).
    #[arg(long, value_name = "ID|GLOB|failed")]
    pub test: Option<String>,
    /// Rank the N functions that go most with failure (Ochiai; 0: none). Needs failing and
    /// passing tests in the traces. Standard-library functions and framework plumbing are left
    /// out of it, as a prompt leaves them out (the list says how many).
    #[arg(long, value_name = "N", default_value = "10")]
    pub rank: usize,
    /// Rank standard-library functions too.
    #[arg(long)]
    pub stdlib: bool,
    /// Rank framework plumbing too (click, pluggy, ... unless a test calls it directly).
    #[arg(long)]
    pub show_plumbing: bool,
    /// Output format: text (a table) or json (every test with its phases and failure).
    #[arg(long, value_enum, default_value = "text")]
    pub format: TestsFormat,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TestsFormat {
    Text,
    Json,
}

pub fn run(a: TestsArgs) -> anyhow::Result<()> {
    let filter = match &a.test {
        Some(t) => Some(TestFilter::parse(t).map_err(super::common::UsageError)?),
        None => None,
    };
    let rule = RankRule::prompt_default(a.stdlib, a.show_plumbing);
    let (table, warnings) = TestTable::load(&a.traces, filter.as_ref(), a.rank, &rule, crate::frontend::FrontEnd::Cli)?;
    super::warn_all(&warnings);
    // No test to list is an error, as `--test` on the same traces is (from-trace, tree, diff):
    // a script reading the list learns it from the exit status, and nothing half-made is
    // printed.
    if let Some(why) = table.nothing_to_list(&a.traces, a.test.as_deref(), crate::frontend::FrontEnd::Cli) {
        anyhow::bail!(why);
    }
    let text = match a.format {
        TestsFormat::Text => table.text(),
        TestsFormat::Json => {
            let mut s = trace_format::escape::json_pretty(&table)?;
            s.push('\n');
            s
        }
    };
    a.output.write("the test list", |w| w.write_all(text.as_bytes()))?;
    Ok(())
}
