//! `slice tree`: the call tree in the terminal.

use super::output::{ColorArgs, OutputArgs};
use super::view_common::{load_views, ViewInput};
use crate::views::{tree, Threads};
use clap::Args;

#[derive(Debug, Args)]
pub struct TreeArgs {
    #[command(flatten)]
    pub input: ViewInput,
    /// One tree per thread (`separate`, each under a header naming its process and thread), or
    /// one tree for the whole run (`merged`: threads merged by call path).
    #[arg(long, value_enum, default_value = "separate")]
    pub threads: Threads,
    #[command(flatten)]
    pub color: ColorArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

pub fn run(a: TreeArgs) -> anyhow::Result<()> {
    let (t, vs) = load_views(&a.input, a.threads)?;
    let t = &t;
    let pal = tree::Palette::new(a.color.enabled(&a.output));
    let exit = match &t.meta.exit {
        Some(e) => match (e.code, e.signal) {
            (Some(c), _) => format!(", exit {c}"),
            (None, Some(s)) => format!(", killed by signal {s}{}", if e.core_dumped { " (core dumped)" } else { "" }),
            _ => String::new(),
        },
        None => ", exit status not recorded".to_string(),
    };
    a.output.write("tree", |w| {
        let head = format!("# {}: {}{exit}, {} events", t.dir.display(), trace_format::escape::command(&t.meta.argv), t.events);
        tree::paint(w, pal.header, &trace_format::escape::line(&head))?;
        writeln!(w)?;
        // How the run ended when it failed, and the shown tests' outcomes and failures: what the
        // prompt says first and the MCP tree shows, ahead of the trees.
        for o in &t.outcome {
            writeln!(w, "{}", crate::testrun::clean_text(o))?;
        }
        if !t.outcome.is_empty() {
            writeln!(w)?;
        }
        tree::render_all(w, &vs, &t.cwd, &pal)
    })
}
