//! Options and output handling shared by the view subcommands (`tree`, `folded`,
//! `flamegraph`, `graph`, `diff`).

use super::common::SelectArgs;
use super::warn_all;
use crate::analysis::{prepare, PreparedTrace};
use crate::views::{self, Threads, View};
use anyhow::Context;
use std::io::{IsTerminal, Write};
use std::path::Path;

/// When to colour terminal output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ColorArg {
    /// When standard output is a terminal and `NO_COLOR` is not set (to anything non-empty).
    #[default]
    Auto,
    Always,
    Never,
}

impl ColorArg {
    /// Whether to colour standard output.
    pub fn enabled(self) -> bool {
        match self {
            ColorArg::Always => true,
            ColorArg::Never => false,
            ColorArg::Auto => !matches!(std::env::var_os("NO_COLOR"), Some(v) if !v.is_empty()) && std::io::stdout().is_terminal(),
        }
    }
}

/// Write a result to a file, or to standard output (`path: None`, or `-`). A closed pipe
/// (`| head`) on standard output is not an error.
pub fn write_output(path: Option<&Path>, what: &str, f: impl FnOnce(&mut dyn Write) -> std::io::Result<()>) -> anyhow::Result<()> {
    match path {
        Some(p) if p != Path::new("-") => {
            let file = std::fs::File::create(p)
                .with_context(|| format!("{}: cannot create the {what} file (check the directory exists and is writable)", p.display()))?;
            let mut w = std::io::BufWriter::new(file);
            f(&mut w).and_then(|_| w.flush()).with_context(|| format!("{}: cannot write the {what}", p.display()))
        }
        _ => {
            let stdout = std::io::stdout();
            let mut w = std::io::BufWriter::new(stdout.lock());
            match f(&mut w).and_then(|_| w.flush()) {
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
                r => r.with_context(|| format!("writing the {what} to standard output")),
            }
        }
    }
}

/// Notes of a prepared trace (what pruning and selection did), for stderr.
pub fn print_notes(t: &PreparedTrace) {
    for n in &t.notes {
        eprintln!("slice: {}: {n}", t.dir.display());
    }
}

/// Load one trace for a view: prepare it with the selection, report its warnings and notes on
/// stderr, and split it into per-thread (or merged) views.
pub fn load_views(trace: &Path, select: &SelectArgs, threads: Threads) -> anyhow::Result<(PreparedTrace, Vec<View>)> {
    let opts = select.options(true)?;
    let (mut traces, warnings) = prepare(&[trace.to_path_buf()], &opts)?;
    warn_all(&warnings);
    let t = traces.pop().context("internal error: no prepared trace")?;
    print_notes(&t);
    let vs = views::views(&t, threads);
    Ok((t, vs))
}
