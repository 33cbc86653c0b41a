//! `trace`: record which functions a program runs, into a trace directory that `slice` reads.
//!
//! A library so that the installable package at the workspace root (`slice-trace`, `src/bin/trace.rs`)
//! builds the `trace` binary from it; [`main`] is the whole program.

mod blocks;
mod detect;
mod dlopened;
mod dump;
mod fingerprint;
mod inline_probes;
mod launch;
mod libraries;
mod line_probes;
mod outdir;
mod plan;
mod probe_lists;
mod run;
mod shims;
mod stats;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use trace_format::TraceDir;

#[derive(Parser)]
#[command(
    name = "trace",
    version,
    about = "Record the functions a program calls, for `slice` to turn into LLM prompts",
    long_about = "Record the functions a program calls, per process and thread, into a trace directory.\n\n\
Python programs (CPython 3.9 to 3.15) are recorded by a shim loaded via PYTHONPATH (sys.monitoring on 3.12+, \
the C-level profile hook before); \
native programs (C, C++, Rust; x86-64) are recorded by a shim loaded through LD_PRELOAD, which patches the \
function entries of an ordinary build in memory when the program and each library load (symbols needed, \
`-g` or line tables for source; system libraries are left alone by default) or uses the hooks of a build \
made with `-finstrument-functions`.",
    after_help = "Examples:\n  \
trace run -- python3 examples/python/shop_app.py            # writes ./trace.d\n  \
trace run -o rich.d -- rich data.csv                         # a console script\n  \
trace run -o m.d -- python3 -m json.tool data.json           # a module\n  \
trace info trace.d                                           # what was recorded\n  \
trace dump trace.d --limit 20                                # events as JSON lines\n  \
slice from-trace trace.d -q \"How are totals computed?\"      # then ask about it"
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run a command and record it. Its stdin, stdout, stderr and exit status are passed through.
    #[command(after_help = "Examples:\n  \
trace run -- python3 app.py --flag input.csv\n  \
trace run -o rich.d -- rich data.csv\n  \
trace run --c-calls -- python3 -m mypkg.cli args\n  \
trace run --lines -- python3.11 app.py      # executed lines before 3.12 too (slower)\n  \
trace run --python-hook profile -- python3 app.py   # the PyEval_SetProfile hook\n  \
trace run -- ./build/app input.txt          # any build with symbols (-g for source lines)\n  \
trace run --lines -- ./build/app input.txt  # native: also which lines ran (-g; opt-in, a trap per line)\n  \
SLICE_TRACE_PATCH=all trace run -- ./app    # also patch system libraries (libc, libstdc++...)\n  \
SLICE_TRACE_PATCH=0 trace run -- ./app      # no entry patching (instrumented builds only)\n\n\
Every Python process the command starts (subprocesses, forks, console scripts) is recorded into its own \
p<pid> directory. `trace` exits with the command's exit status; if the command is killed by a signal, \
`trace` reports it and dies by the same signal. Python's -I, -E and -S flags are refused (they disable \
the PYTHONPATH/site mechanism the recorder is loaded through).")]
    Run {
        /// Trace directory to write (replaced if it holds an earlier trace).
        #[arg(short, long, value_name = "DIR", default_value = "trace.d")]
        output: PathBuf,
        /// Also record calls of C functions (builtins, C extension functions) from Python.
        #[arg(long)]
        c_calls: bool,
        /// Python: also record which source lines each function executed, so a prompt can
        /// leave out the statements that did not run (branches not taken, code after an early
        /// return: prompts are smaller). On by default on CPython 3.12 and
        /// later, where it costs next to nothing (`sys.monitoring`: each line reports once,
        /// function bodies only, a function stops once its lines all ran or after 256 entries).
        /// Before 3.12 it needs a C trace function called on every executed line (several
        /// times slower), so it is off there unless this flag is given. Native programs
        /// (built with -g, recorded by entry patching): a one-shot probe at each statement
        /// line of the program's own code (about 8 µs per line that runs, once), off unless
        /// this flag is given.
        #[arg(long, overrides_with = "no_lines")]
        lines: bool,
        /// Python: do not record executed lines, on any version (prompts then show whole
        /// functions).
        #[arg(long, overrides_with = "lines")]
        no_lines: bool,
        /// Python tests (pytest, unittest): report the lines each test runs inside that test,
        /// also those an earlier test ran first, so that `slice` can rank lines by how they go
        /// with failing tests (a line spectrum: "line 9 ran in 1 of 1 failing test, 0 of 12
        /// passing"). Implies --lines. Off by default: it costs about a tenth more CPU on a
        /// whole suite (the code under test reports its lines again in every test)
        #[arg(long, conflicts_with = "no_lines")]
        lines_per_test: bool,
        /// Python: also record the native functions of the compiled extension modules the
        /// program imports (`*.cpython-*.so`, `*.abi3.so`: C, Cython, mypyc, pybind11; not the
        /// standard library's, not the interpreter or system libraries), by patching their
        /// entries as native programs are; they appear in the tree under the Python function
        /// that called into them, named from their symbols, with their source where their
        /// debug information allows. Native programs the Python program starts
        /// (`subprocess.run(["./tool"])`) are then recorded too, each as a process of its own,
        /// as under a shell script. Off by default (docs/native-recording.md, "Python
        /// extension modules").
        #[arg(long)]
        native_ext: bool,
        /// How Python calls are hooked: `auto` (default), `sys.monitoring` (PEP 669) on
        /// CPython 3.12 and later and the C-level profile hook before; `profile`, the C-level
        /// `PyEval_SetProfile` hook on every version. Both record the same Python calls.
        /// If another tool holds our `sys.monitoring` tool id, the profile hook is used.
        #[arg(long, value_enum, value_name = "HOOK")]
        python_hook: Option<run::PythonHook>,
        /// Do not print the summary line.
        #[arg(short, long)]
        quiet: bool,
        /// Native programs: record only inside calls of functions matching PATTERN (and every
        /// call under them), like uftrace's -F. PATTERN is NAME[@OBJECT]: regular
        /// expressions matching the whole function name (demangled, with or without C++
        /// parameters) and the whole file name of its object, e.g. `parse_.*`,
        /// `.*@libfoo\.so\.1`. Repeatable.
        #[arg(short = 'F', long = "filter", value_name = "PATTERN")]
        filter: Vec<String>,
        /// Native programs: do not record calls of functions matching PATTERN, nor any call
        /// under them, like uftrace's -N (same PATTERN syntax as -F; wins over -F). Repeatable.
        #[arg(short = 'N', long = "notrace", value_name = "PATTERN")]
        notrace: Vec<String>,
        /// The command to run, after `--`.
        #[arg(value_name = "COMMAND", trailing_var_arg = true, allow_hyphen_values = true)]
        command: Vec<OsString>,
    },
    /// Summarize a trace: command, exit status, duration, processes, threads, events, functions.
    Info {
        /// The trace directory.
        #[arg(default_value = "trace.d")]
        dir: PathBuf,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// Name every function that could not be patched (programs recorded with entry
        /// patching).
        #[arg(short, long)]
        verbose: bool,
    },
    /// Print a trace's events as JSON lines (pid, tid, kind, func id and name, ts, depth).
    Dump {
        /// The trace directory.
        #[arg(default_value = "trace.d")]
        dir: PathBuf,
        /// Only this process.
        #[arg(long)]
        pid: Option<u32>,
        /// Only this thread (kernel thread id).
        #[arg(long)]
        tid: Option<u64>,
        /// Stop after this many lines.
        #[arg(long, value_name = "N")]
        limit: Option<u64>,
        /// Print the function tables (funcs.jsonl of every process) instead of the events.
        #[arg(long)]
        funcs: bool,
    },
}

fn open(dir: &std::path::Path) -> Result<TraceDir> {
    let trace = TraceDir::open(dir).map_err(anyhow::Error::from)?;
    warn_all(&trace);
    Ok(trace)
}

/// What opening the trace could not do (a merge of extension modules' calls that failed).
fn warn_all(trace: &TraceDir) {
    for w in &trace.warnings {
        eprintln!("trace: warning: {}", trace_format::escape::line(w));
    }
}

fn real_main() -> Result<i32> {
    let cli = Cli::parse();
    match cli.command {
        Cmd::Run { output, c_calls, lines, no_lines, lines_per_test, native_ext, python_hook, quiet, filter, notrace, command } => {
            let native_filter = run::NativeFilter { filter, notrace };
            let lines = match (lines || lines_per_test, no_lines) {
                (true, _) => Some(true),
                (_, true) => Some(false),
                _ => None,
            };
            run::run(run::RunOptions { output, c_calls, lines, lines_per_test, native_ext, python_hook, quiet, native_filter, command })
        }
        Cmd::Info { dir, json, verbose } => {
            // A summary counts the functions: the tables are read line by line, never kept.
            let trace = TraceDir::open_with(&dir, trace_format::reader::FuncTables::Count)?;
            warn_all(&trace);
            let s = stats::summarize(&trace)?;
            let text = if json {
                let mut v = serde_json::to_value(&s)?;
                v["meta"] = serde_json::to_value(&trace.meta)?;
                format!("{}\n", trace_format::escape::json_pretty(&v)?)
            } else {
                stats::render(&trace, &s, verbose)
            };
            match write_stdout(text.as_bytes()) {
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(0),
                r => r.context("cannot write to stdout")?,
            }
            report_damage(&s.damaged)
        }
        Cmd::Dump { dir, pid, tid, limit, funcs } => {
            let trace = open(&dir)?;
            let stdout = std::io::stdout();
            let mut out = std::io::BufWriter::new(stdout.lock());
            let r = dump::dump(&trace, &dump::DumpOptions { pid, tid, limit, funcs }, &mut out).and_then(|d| {
                out.flush().context("cannot write to stdout")?;
                Ok(d)
            });
            match r {
                Ok(damaged) => report_damage(&damaged),
                Err(e) if is_broken_pipe(&e) => Ok(0),
                Err(e) => Err(e),
            }
        }
    }
}

/// Write all of `bytes` to standard output. A reader that closed the pipe early (`| head`)
/// gives `BrokenPipe`, which the callers treat as the end of the output, like other Unix tools.
fn write_stdout(bytes: &[u8]) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(bytes)?;
    out.flush()
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| c.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe))
}

fn report_damage(damaged: &[String]) -> Result<i32> {
    for d in damaged {
        eprintln!("trace: error: {}", trace_format::escape::line(d));
    }
    Ok(if damaged.is_empty() { 0 } else { 1 })
}

/// The `trace` program: parse the command line, run it, and exit with its status.
pub fn main() {
    // `trace run`'s stop signals are handled before anything else (even the parsing of the
    // command line): see `launch::catch_stop_signals`.
    if std::env::args_os().nth(1).is_some_and(|a| a == "run") {
        launch::catch_stop_signals();
    }
    let code = match real_main() {
        Ok(code) => code,
        Err(e) => {
            let code = e.downcast_ref::<run::ExitWith>().map(|x| x.code).unwrap_or(1);
            eprintln!("trace: error: {}", trace_format::escape::block(&format!("{e:#}")));
            code
        }
    };
    std::process::exit(code);
}

#[cfg(test)]
mod tests {
    use super::Cli;
    use clap::CommandFactory;

    /// The help text is wrapped once, by clap, to the terminal width: a paragraph written with
    /// hard line breaks would be wrapped again into ragged lines (a long line, then a line of one
    /// or two words). Every line of a prose paragraph but its last fills most of the width.
    #[test]
    fn help_paragraphs_are_not_wrapped_twice() {
        let mut cmd = Cli::command().term_width(100);
        cmd.build();
        let mut helps = vec![cmd.render_long_help().to_string()];
        for sub in cmd.get_subcommands_mut() {
            helps.push(sub.clone().term_width(100).render_long_help().to_string());
        }
        for help in helps {
            let lines: Vec<&str> = help.lines().collect();
            for w in lines.windows(2) {
                let (line, next) = (w[0], w[1]);
                // A prose line (not indented: options and examples are) followed by more prose.
                let prose = |l: &str| !l.is_empty() && !l.starts_with(' ') && !l.ends_with(':');
                if prose(line) && prose(next) {
                    assert!(line.len() > 60, "ragged help line {line:?} before {next:?} in:\n{help}");
                }
            }
        }
    }
}
