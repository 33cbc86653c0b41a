//! Options and output handling shared by the view subcommands (`tree`, `folded`,
//! `flamegraph`, `graph`, `diff`).

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
