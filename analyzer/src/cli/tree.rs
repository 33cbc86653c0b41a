//! `slice tree`: the call tree in the terminal.

use super::common::SelectArgs;
use super::view_common::load_views;
use super::view_common::{write_output, ColorArg};
use crate::views::{tree, Threads};
use clap::Args;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct TreeArgs {
    /// Trace directory written by `trace run`.
    #[arg(value_name = "TRACE.d", default_value = "trace.d")]
    pub trace: PathBuf,
    /// One tree per thread (`separate`, each under a header naming its process and thread), or
    /// one tree for the whole run (`merged`: threads merged by call path).
    #[arg(long, value_enum, default_value = "separate")]
    pub threads: Threads,
    /// Colour: auto (when standard output is a terminal and NO_COLOR is not set), always, never.
    #[arg(long, value_enum, value_name = "WHEN", default_value = "auto")]
    pub color: ColorArg,
    /// Write the tree to FILE instead of standard output (no colour unless --color always).
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub select: SelectArgs,
}

pub fn run(a: TreeArgs) -> anyhow::Result<()> {
    let (t, vs) = load_views(&a.trace, &a.select, a.threads)?;
    let t = &t;
    let color = match (a.color, &a.output) {
        (super::view_common::ColorArg::Auto, Some(_)) => false,
        (c, _) => c.enabled(),
    };
    let pal = tree::Palette::new(color);
    let exit = match &t.meta.exit {
        Some(e) => match (e.code, e.signal) {
            (Some(c), _) => format!(", exit {c}"),
            (None, Some(s)) => format!(", killed by signal {s}{}", if e.core_dumped { " (core dumped)" } else { "" }),
            _ => String::new(),
        },
        None => ", exit status not recorded".to_string(),
    };
    write_output(a.output.as_deref(), "tree", |w| {
        tree::paint(w, pal.header, &format!("# {}: {}{exit}, {} events", t.dir.display(), t.meta.argv.join(" "), t.events))?;
        writeln!(w)?;
        tree::render_all(w, &vs, &t.cwd, &pal)
    })
}
