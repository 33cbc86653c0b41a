//! Where a `slice` subcommand's result goes (`-o FILE` or standard output) and whether it is
//! coloured (`--color`): one argument group each, flattened into every subcommand that prints a
//! result, with the one writing rule (a closed pipe on standard output ends the output quietly).

use anyhow::Context;
use clap::Args;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

/// `-o FILE`: where the result goes. Standard output without it, or with `-`.
#[derive(Debug, Clone, Default, Args)]
pub struct OutputArgs {
    /// Write the result to FILE instead of standard output (`-`: standard output).
    #[arg(short, long, value_name = "FILE", help_heading = "Output")]
    pub output: Option<PathBuf>,
}

impl OutputArgs {
    /// The file the result goes to; `None` for standard output (no `-o`, or `-o -`).
    pub fn file(&self) -> Option<&Path> {
        self.output.as_deref().filter(|p| *p != Path::new("-"))
    }

    /// Write the result (`what` names it in errors) with [`write_output`].
    pub fn write(&self, what: &str, f: impl FnOnce(&mut dyn Write) -> std::io::Result<()>) -> anyhow::Result<()> {
        write_output(self.file(), what, f)
    }
}

/// `--color WHEN`, for the subcommands that colour terminal output.
#[derive(Debug, Clone, Default, Args)]
pub struct ColorArgs {
    /// Colour: auto (when the result goes to a terminal, not to a file given with --output, and
    /// NO_COLOR is not set), always, never.
    #[arg(long, value_enum, value_name = "WHEN", default_value = "auto", help_heading = "Output")]
    pub color: ColorArg,
}

impl ColorArgs {
    /// Whether to colour a result written where `out` says: `auto` never colours a file.
    pub fn enabled(&self, out: &OutputArgs) -> bool {
        self.color.decide(out.file().is_some(), std::io::stdout().is_terminal(), no_color())
    }
}

/// When to colour terminal output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ColorArg {
    /// When standard output is a terminal and `NO_COLOR` is not set (to anything non-empty).
    #[default]
    Auto,
    Always,
    Never,
}

/// Whether `NO_COLOR` is set to something non-empty (no-color.org).
fn no_color() -> bool {
    matches!(std::env::var_os("NO_COLOR"), Some(v) if !v.is_empty())
}

impl ColorArg {
    /// Whether to colour standard output.
    pub fn enabled(self) -> bool {
        self.decide(false, std::io::stdout().is_terminal(), no_color())
    }

    /// The rule: `always` and `never` as said; `auto` colours only a terminal (not a file), and
    /// not when `NO_COLOR` is set.
    fn decide(self, to_file: bool, stdout_is_terminal: bool, no_color: bool) -> bool {
        match self {
            ColorArg::Always => true,
            ColorArg::Never => false,
            ColorArg::Auto => !to_file && stdout_is_terminal && !no_color,
        }
    }
}

/// Write a result to a file, or to standard output (`path: None`, or `-`). A closed pipe
/// (`| head`) on standard output is not an error: the output ends there, like `cat`'s.
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

#[cfg(test)]
mod tests {
    use super::ColorArg;

    #[test]
    fn auto_colours_only_a_terminal_without_no_color() {
        let auto = |f, t, n| ColorArg::Auto.decide(f, t, n);
        assert!(auto(false, true, false));
        assert!(!auto(true, true, false), "a file given with --output");
        assert!(!auto(false, false, false), "a pipe");
        assert!(!auto(false, true, true), "NO_COLOR");
        assert!(ColorArg::Always.decide(true, false, true));
        assert!(!ColorArg::Never.decide(false, true, false));
    }
}
