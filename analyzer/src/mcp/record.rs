//! The `record` tool: run a command under `trace run` (the binary next to the running `slice`,
//! else the one on PATH), with its output captured (the server's stdout is the protocol), a
//! time limit that stops the target and keeps its partial trace, and the counts of the trace.

use super::params::RecordParams;
use crate::cli::common::UsageError;
use crate::fold::load_trace;
use anyhow::Context;
use std::collections::HashSet;
use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Default and largest time limits, in seconds.
const DEFAULT_TIMEOUT_S: f64 = 120.0;
const MAX_TIMEOUT_S: f64 = 24.0 * 3600.0;
/// After SIGTERM, how long `trace` gets to stop the target and write its summary.
const GRACE: Duration = Duration::from_secs(5);
/// Bytes of the target's stdout and stderr kept (the end), and lines shown.
const KEEP_BYTES: usize = 16 * 1024;
const SHOW_LINES: usize = 30;
const SHOW_LINE_CHARS: usize = 300;

/// The `trace` binary: next to the running executable, else `trace` from PATH.
/// Most failing tests the record tool's answer names (the tests tool lists them all).
const RECORD_FAILURES: usize = 10;

fn trace_binary() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(|d| d.join("trace")))
        .filter(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from("trace"))
}

/// A short name for the trace directory: the script of an interpreter, else the program.
fn stem(argv: &[String]) -> String {
    let name = |s: &str| Path::new(s).file_stem().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let prog = name(&argv[0]);
    let pick = if prog.starts_with("python") { argv.get(1).filter(|a| !a.starts_with('-')).map(|a| name(a)) } else { None };
    let s: String =
        pick.unwrap_or(prog).chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' }).take(40).collect();
    if s.is_empty() {
        "run".into()
    } else {
        s
    }
}

/// A trace directory that does not exist yet: `<cwd>/.slice-traces/<stem>-<n>.d`.
fn fresh_out(cwd: &Path, argv: &[String]) -> PathBuf {
    let base = cwd.join(".slice-traces");
    let s = stem(argv);
    (1u32..).map(|n| base.join(format!("{s}-{n}.d"))).find(|p| !p.exists()).unwrap_or_else(|| base.join(format!("{s}.d")))
}

/// The end of a captured stream (at most 2 × [`KEEP_BYTES`]) and its total length.
type Tail = Arc<Mutex<(Vec<u8>, usize)>>;

/// Read a pipe to its end, keeping the last [`KEEP_BYTES`] bytes.
fn tail_reader(mut r: impl Read + Send + 'static) -> (Tail, std::thread::JoinHandle<()>) {
    let buf = Arc::new(Mutex::new((Vec::new(), 0usize)));
    let b = buf.clone();
    let h = std::thread::spawn(move || {
        let mut chunk = [0u8; 8192];
        while let Ok(n) = r.read(&mut chunk) {
            if n == 0 {
                break;
            }
            if let Ok(mut g) = b.lock() {
                g.0.extend_from_slice(&chunk[..n]);
                g.1 += n;
                if g.0.len() > 2 * KEEP_BYTES {
                    let cut = g.0.len() - KEEP_BYTES;
                    g.0.drain(..cut);
                }
            }
        }
    });
    (buf, h)
}

/// The end of a captured stream, for the answer.
fn shown(name: &str, buf: &Mutex<(Vec<u8>, usize)>) -> String {
    let Ok(g) = buf.lock() else { return String::new() };
    let (bytes, total) = (&g.0, g.1);
    if total == 0 {
        return format!("{name}: (empty)\n");
    }
    let text = String::from_utf8_lossy(bytes);
    let lines: Vec<&str> = text.lines().collect();
    let from = lines.len().saturating_sub(SHOW_LINES);
    let partial = from > 0 || bytes.len() < total;
    let mut s = if partial {
        format!("{name} ({total} bytes; its last {} lines):\n", lines.len() - from)
    } else {
        format!("{name} ({total} bytes):\n")
    };
    for l in &lines[from..] {
        let cut: String = l.chars().take(SHOW_LINE_CHARS).collect();
        s.push_str("  ");
        s.push_str(&cut);
        if cut.len() < l.len() {
            s.push('…');
        }
        s.push('\n');
    }
    s
}

fn signal(child: &Child, sig: i32, group: bool) {
    let Ok(pid) = i32::try_from(child.id()) else { return };
    let target = if group { -pid } else { pid };
    // SAFETY: kill(2) on our own child (or its process group, which we created) has no memory
    // effects; a failure (already gone) is harmless.
    unsafe {
        libc::kill(target, sig);
    }
}

/// Wait for the child until `deadline`; `None` when it is still running then.
fn wait_until(child: &mut Child, deadline: Instant) -> anyhow::Result<Option<ExitStatus>> {
    loop {
        if let Some(s) = child.try_wait().context("waiting for `trace run`")? {
            return Ok(Some(s));
        }
        if Instant::now() >= deadline {
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The record tool.
pub fn record(p: &RecordParams) -> anyhow::Result<String> {
    if p.argv.is_empty() || p.argv[0].is_empty() {
        return Err(UsageError("argv is empty: pass the command to record, e.g. [\"python3\", \"app.py\"]".into()).into());
    }
    // The check `trace run` makes too (a NUL byte cannot reach a program), before anything runs.
    trace_format::command::check_argv(p.argv.iter().map(std::ffi::OsStr::new)).map_err(|e| UsageError(e.to_string()))?;
    for (name, path) in [("cwd", &p.cwd), ("out", &p.out)] {
        if path.as_ref().is_some_and(|s| s.contains('\0')) {
            return Err(UsageError(format!("{name} contains a NUL byte (\\0), which no path can hold; remove it")).into());
        }
    }
    if let Some(env) = &p.env {
        trace_format::command::check_env(env.iter().map(|(k, v)| (std::ffi::OsStr::new(k), std::ffi::OsStr::new(v))))
            .map_err(|e| UsageError(e.to_string()))?;
    }
    let timeout = p.timeout_s.unwrap_or(DEFAULT_TIMEOUT_S);
    if timeout.is_nan() || timeout <= 0.0 {
        return Err(UsageError(format!("timeout_s must be a positive number of seconds, not {timeout}")).into());
    }
    let timeout = Duration::from_secs_f64(timeout.min(MAX_TIMEOUT_S));
    let server_cwd = std::env::current_dir().context("the server's working directory")?;
    let cwd = match &p.cwd {
        Some(c) => server_cwd.join(c),
        None => server_cwd.clone(),
    };
    if !cwd.is_dir() {
        return Err(UsageError(format!("cwd {}: not a directory", cwd.display())).into());
    }
    let out = match &p.out {
        Some(o) => cwd.join(o),
        None => fresh_out(&cwd, &p.argv),
    };
    if let Some(parent) = out.parent() {
        std::fs::create_dir_all(parent).with_context(|| format!("{}: cannot create the directory", parent.display()))?;
    }
    let trace = trace_binary();
    let mut cmd = Command::new(&trace);
    cmd.arg("run").arg("-o").arg(&out).arg("--").args(&p.argv);
    cmd.current_dir(&cwd).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).process_group(0);
    if let Some(env) = &p.env {
        cmd.envs(env);
    }
    let started = Instant::now();
    let mut child = cmd.spawn().with_context(|| {
        format!("cannot run {}: install the `trace` binary next to `slice` or on PATH (cargo build --workspace)", trace.display())
    })?;
    let (out_buf, h_out) = tail_reader(child.stdout.take().context("the command's stdout")?);
    let (err_buf, h_err) = tail_reader(child.stderr.take().context("the command's stderr")?);
    let mut stopped = false;
    let status = match wait_until(&mut child, started + timeout)? {
        Some(s) => s,
        None => {
            stopped = true;
            // `trace` forwards SIGTERM to the target and writes the trace's summary.
            signal(&child, libc::SIGTERM, false);
            match wait_until(&mut child, Instant::now() + GRACE)? {
                Some(s) => s,
                None => {
                    signal(&child, libc::SIGKILL, true);
                    child.wait().context("waiting for `trace run`")?
                }
            }
        }
    };
    // The readers end when every process holding the pipes has exited; a daemon the target
    // left behind may hold them open: wait a little, then answer with what was read.
    let until = Instant::now() + Duration::from_secs(2);
    while !(h_out.is_finished() && h_err.is_finished()) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(10));
    }
    let elapsed = started.elapsed();
    let mut s = format!("Recorded `{}` (in {}) into {}\n", p.argv.join(" "), cwd.display(), out.display());
    let how = match (status.code(), status.signal()) {
        (Some(c), _) => format!("exit status {c}"),
        (None, Some(sig)) => format!("killed by signal {sig}{}", if sig == libc::SIGTERM { " (SIGTERM)" } else { "" }),
        _ => "unknown exit status".into(),
    };
    if stopped {
        s.push_str(&format!("Still running after timeout_s={}: stopped ({how}); the partial trace is kept.\n", timeout.as_secs_f64()));
    } else {
        s.push_str(&format!("{how}, after {:.2} s\n", elapsed.as_secs_f64()));
    }
    match load_trace(&out) {
        Ok(t) => {
            let threads: usize = t.processes.iter().map(|p| p.threads.len()).sum();
            let events: u64 = t.processes.iter().flat_map(|p| &p.threads).map(|th| th.info.events).sum();
            let funcs: HashSet<String> = t
                .processes
                .iter()
                .flat_map(|p| &p.threads)
                .flat_map(|th| (1..th.tree.nodes.len()).map(move |n| th.tree.func_key(n as u32)))
                .collect();
            s.push_str(&format!("{} processes, {threads} threads, {events} events, {} functions called\n", t.processes.len(), funcs.len()));
            for w in t.warnings.iter().take(10) {
                s.push_str(&format!("warning: {w}\n"));
            }
            let tests: Vec<&trace_format::TestRun> = t.processes.iter().flat_map(|p| &p.tests).collect();
            if !tests.is_empty() {
                s.push_str(&format!("tests: {}\n", crate::testrun::outcome_counts(tests.iter().copied())));
                let failing: Vec<&&trace_format::TestRun> = tests.iter().filter(|x| x.outcome.is_failure()).collect();
                for x in failing.iter().take(RECORD_FAILURES) {
                    let first = x
                        .failure
                        .as_ref()
                        .and_then(|f| f.message.as_deref().or(f.report.as_deref()))
                        .and_then(|m| m.lines().find(|l| !l.trim().is_empty()))
                        .unwrap_or("(the process ended inside the test)");
                    s.push_str(&crate::testrun::clean_text(&format!("{} {}: {}\n", x.outcome.name(), x.id, first.trim())));
                }
                if failing.len() > RECORD_FAILURES {
                    s.push_str(&format!("... and {} more failing tests (the tests tool lists them)\n", failing.len() - RECORD_FAILURES));
                }
                s.push_str(&format!(
                    "Next: tests {{\"trace\": {:?}}}, or prompt {{\"trace\": {:?}, \"question\": \"...\", \"test\": \"failed\"}}.\n",
                    out.display().to_string(),
                    out.display().to_string()
                ));
            } else {
                s.push_str(&format!(
                    "Next: prompt {{\"trace\": {:?}, \"question\": \"...\"}}, tree, find_calls or source with the same trace.\n",
                    out.display().to_string()
                ));
            }
        }
        Err(e) => {
            // Nothing usable was recorded (the command could not run, or ran no traced code).
            let mut msg = format!("{}\n{how}; the trace cannot be read: {e}\n", s.lines().next().unwrap_or_default());
            msg.push_str(&shown("stdout", &out_buf));
            msg.push_str(&shown("stderr", &err_buf));
            return Err(anyhow::anyhow!(msg.trim_end().to_string()));
        }
    }
    s.push_str(&shown("stdout", &out_buf));
    s.push_str(&shown("stderr", &err_buf));
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_directory_names() {
        let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(stem(&v(&["python3", "examples/python/shop_app.py", "x"])), "shop_app");
        assert_eq!(stem(&v(&["/usr/bin/python3.11", "-m", "pkg"])), "python3");
        assert_eq!(stem(&v(&["./build/my app"])), "my_app");
        let d = tempfile::tempdir().unwrap();
        let first = fresh_out(d.path(), &v(&["rich", "x.csv"]));
        assert_eq!(first, d.path().join(".slice-traces/rich-1.d"));
        std::fs::create_dir_all(&first).unwrap();
        assert_eq!(fresh_out(d.path(), &v(&["rich"])), d.path().join(".slice-traces/rich-2.d"));
    }
}
