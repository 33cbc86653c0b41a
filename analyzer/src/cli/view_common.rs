//! Arguments and loading shared by the view subcommands (`tree`, `folded`, `flamegraph`,
//! `graph`, `export`; `diff` reads two traces with the same selection).

use super::common::SelectArgs;
use super::warn_all;
use crate::analysis::{prepare, PreparedTrace};
use crate::views::{self, Threads, View};
use anyhow::Context;
use clap::Args;
use std::path::PathBuf;

/// The trace a view reads, and which part of it to show.
#[derive(Debug, Args)]
pub struct ViewInput {
    /// Trace directory written by `trace run`.
    #[arg(value_name = "TRACE.d", default_value = "trace.d")]
    pub trace: PathBuf,
    #[command(flatten)]
    pub select: SelectArgs,
}

/// Notes of a prepared trace (what pruning and selection did), for stderr (one line each,
/// control characters escaped).
pub fn print_notes(t: &PreparedTrace) {
    for n in &t.notes {
        eprintln!("slice: {}", trace_format::escape::line(&format!("{}: {n}", t.dir.display())));
    }
}

/// Load one trace for a view: prepare it with the selection, report its warnings and notes on
/// stderr, and split it into per-thread (or merged) views.
pub fn load_views(input: &ViewInput, threads: Threads) -> anyhow::Result<(PreparedTrace, Vec<View>)> {
    let opts = input.select.options(true)?;
    let (mut traces, warnings) = prepare(std::slice::from_ref(&input.trace), &opts)?;
    warn_all(&warnings);
    let t = traces.pop().context("internal error: no prepared trace")?;
    print_notes(&t);
    let vs = views::views(&t, threads);
    Ok((t, vs))
}
