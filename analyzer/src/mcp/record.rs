//! The `record` tool: run a command under `trace run` (the binary next to the running `slice`,
//! else the one on PATH), with its output captured (the server's stdout is the protocol), a
//! time limit that stops the target and keeps its partial trace, and the counts of the trace.

use super::params::RecordParams;
use crate::cli::common::UsageError;
use crate::fold::{load_trace, LoadError};
use anyhow::Context;
use std::collections::HashSet;
use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use trace_format::meta::NOTHING_RECORDED;
use trace_format::reader::read_meta;
use trace_format::{META_FILE, SOURCES_FILE};

/// Default and largest time limits, in seconds (the largest: an agent waits for the answer;
/// a longer run is recorded with `trace run` directly).
pub const DEFAULT_TIMEOUT_S: f64 = 120.0;
pub const MAX_TIMEOUT_S: f64 = 3600.0;
/// After SIGTERM, how long `trace` gets to stop the target (it forwards SIGTERM, then
/// SIGKILLs the target after its own grace period) and finish the trace, before `trace`
/// itself and its process group get SIGKILL.
const GRACE: Duration = Duration::from_secs(10);
/// Bytes of the target's stdout and stderr kept (the end), and lines shown.
const KEEP_BYTES: usize = 16 * 1024;
const SHOW_LINES: usize = 30;
const SHOW_LINE_CHARS: usize = 300;

/// Most failing tests the record tool's answer names (the tests tool lists them all).
const RECORD_FAILURES: usize = 10;

/// The `trace` binary: next to the running executable, else `trace` from PATH.
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

/// Create a new directory `<base>/<name>-<n><suffix>` with the first free `n`: `mkdir` fails
/// when the name exists, so two calls at once (in this server or another) never get the same
/// directory.
fn create_numbered(base: &Path, name: &str, suffix: &str) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(base).with_context(|| format!("{}: cannot create the directory", base.display()))?;
    for n in 1u32..=100_000 {
        let dir = base.join(format!("{name}-{n}{suffix}"));
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e).with_context(|| format!("{}: cannot create the trace directory", dir.display())),
        }
    }
    anyhow::bail!("{}: no free name {name}-<n>{suffix} left; remove old traces", base.display())
}

/// A new, empty trace directory of this call: `<cwd>/.slice-traces/<stem>-<n>.d`.
fn fresh_out(cwd: &Path, argv: &[String]) -> anyhow::Result<PathBuf> {
    create_numbered(&cwd.join(".slice-traces"), &stem(argv), ".d")
}

/// Whether `out` can take a new trace: missing, an empty directory or a trace directory (the
/// rule of `trace run -o`); the message of `trace run` otherwise.
fn check_out(out: &Path) -> Result<(), UsageError> {
    let Ok(m) = std::fs::symlink_metadata(out) else { return Ok(()) };
    if !m.is_dir() {
        return Err(UsageError(format!("out {}: exists and is not a directory; choose another out", out.display())));
    }
    let is_trace = matches!(read_meta(out), Ok(_) | Err(trace_format::FormatError::NewerVersion { .. }));
    let empty = std::fs::read_dir(out).map(|mut d| d.next().is_none()).unwrap_or(false);
    if is_trace || empty {
        Ok(())
    } else {
        Err(UsageError(format!(
            "out {}: exists and is not a trace directory (no valid {META_FILE}); refusing to overwrite it: choose another out or remove it",
            out.display()
        )))
    }
}

/// Whether an entry of a trace directory belongs to the trace (replaced with it): its
/// documents and its process directories `p<pid>[.<n>]` holding a `proc.json`; the rule of
/// `trace run`'s `outdir::owned_by_trace`. Everything else is the user's and moves to the new trace.
fn owned_by_trace(dir: &Path, name: &str) -> bool {
    if [META_FILE, SOURCES_FILE, ".trace-reserve", "meta.json.tmp", "sources.json.tmp"].contains(&name) || name.starts_with(".trace-run-") {
        return true;
    }
    let Some(rest) = name.strip_prefix('p') else { return false };
    let (pid, image) = rest.split_once('.').unwrap_or((rest, "0"));
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    digits(pid) && digits(image) && dir.join(name).join(trace_format::PROC_META_FILE).is_file()
}

/// `renameat2(from, to, RENAME_EXCHANGE)`: swap two directories in one step.
fn exchange(from: &Path, to: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = |p: &Path| std::ffi::CString::new(p.as_os_str().as_bytes()).map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput));
    let (a, b) = (c(from)?, c(to)?);
    // SAFETY: two NUL-terminated paths that live across the call; renameat2 only reads them.
    let r = unsafe { libc::renameat2(libc::AT_FDCWD, a.as_ptr(), libc::AT_FDCWD, b.as_ptr(), libc::RENAME_EXCHANGE) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Put the recording `rec` (a sibling of `out`) at `out` in one rename: a reader opening `out`
/// finds the earlier trace or the new one, never a mix. Over an earlier trace the two
/// directories are exchanged, then the user's own files move from the earlier trace into the
/// new one and the earlier trace is removed.
fn publish(rec: &Path, out: &Path) -> anyhow::Result<()> {
    let _writing = super::locks::write(out);
    let kept_at = || format!("this run's trace is kept at {}", rec.display());
    check_out(out).map_err(anyhow::Error::from).with_context(kept_at)?;
    match std::fs::rename(rec, out) {
        Ok(()) => return Ok(()),
        // `out` exists (a directory, not empty): exchange below.
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOTEMPTY) | Some(libc::EEXIST)) => {}
        Err(e) => return Err(e).with_context(|| format!("cannot move the new trace to {}; {}", out.display(), kept_at())),
    }
    exchange(rec, out).with_context(|| format!("cannot put the new trace in place of {}; {}", out.display(), kept_at()))?;
    // `rec` now holds the earlier trace.
    let mut kept = Vec::new();
    for e in std::fs::read_dir(rec).with_context(|| format!("cannot read {}", rec.display()))?.flatten() {
        let name = e.file_name();
        let name_s = name.to_string_lossy();
        if owned_by_trace(rec, &name_s) {
            continue;
        }
        let to = out.join(&name);
        if to.exists() || std::fs::rename(e.path(), &to).is_err() {
            kept.push(e.path());
        }
    }
    if kept.is_empty() {
        std::fs::remove_dir_all(rec).with_context(|| format!("cannot remove the earlier trace {}", rec.display()))?;
    } else {
        anyhow::bail!(
            "the new trace is at {}, but these files of the earlier trace could not be moved into it: {}",
            out.display(),
            kept.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
        );
    }
    Ok(())
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
/// The last `trace: error: ...` line `trace` wrote on stderr, if any.
fn trace_error(buf: &Mutex<(Vec<u8>, usize)>) -> Option<String> {
    let g = buf.lock().ok()?;
    let text = String::from_utf8_lossy(&g.0);
    let line = text.lines().rev().find(|l| l.starts_with("trace: error: "))?;
    Some(crate::testrun::clean_text(line.trim_end()))
}

fn shown(name: &str, buf: &Mutex<(Vec<u8>, usize)>) -> String {
    shown_without(name, buf, |_| false)
}

/// [`shown`] without the lines `skip` says (counted in the bytes, not shown).
fn shown_without(name: &str, buf: &Mutex<(Vec<u8>, usize)>, skip: impl Fn(&str) -> bool) -> String {
    let Ok(g) = buf.lock() else { return String::new() };
    let (bytes, total) = (&g.0, g.1);
    if total == 0 {
        return format!("{name}: (empty)\n");
    }
    let text = String::from_utf8_lossy(bytes);
    let lines: Vec<&str> = text.lines().filter(|l| !skip(l)).collect();
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

/// The signals that ask `trace` to stop a run.
fn stop_signal_set() -> libc::sigset_t {
    // SAFETY: sigemptyset/sigaddset on a local set.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
            libc::sigaddset(&mut set, s);
        }
        set
    }
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

/// What a stopped run's `killed` says.
fn tracer_grace_note(killed: bool) -> &'static str {
    if killed {
        ", which was still running after the grace period and was killed with SIGKILL"
    } else {
        ", which then ended by itself"
    }
}

/// Why a recording was stopped before its command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// `timeout_s` passed.
    Timeout,
    /// The client cancelled the call (`notifications/cancelled`).
    Cancelled,
    /// The server is shutting down (SIGTERM, or the client closed the connection).
    Shutdown,
}

/// Wait for the child until `deadline` or until `stop` says why to stop early; `Err(reason)`
/// when it is still running then.
fn wait_until(
    child: &mut Child,
    deadline: Instant,
    stop: &dyn Fn() -> Option<StopReason>,
) -> anyhow::Result<Result<ExitStatus, StopReason>> {
    loop {
        if let Some(s) = child.try_wait().context("waiting for `trace run`")? {
            return Ok(Ok(s));
        }
        if let Some(why) = stop() {
            return Ok(Err(why));
        }
        if Instant::now() >= deadline {
            return Ok(Err(StopReason::Timeout));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Stop `trace`: SIGTERM (it stops the target and finishes the trace), then after [`GRACE`]
/// SIGKILL for `trace` and its process group.
fn stop_trace(child: &mut Child) -> anyhow::Result<ExitStatus> {
    signal(child, libc::SIGTERM, false);
    let deadline = Instant::now() + GRACE;
    loop {
        if let Some(s) = child.try_wait().context("waiting for `trace run`")? {
            return Ok(s);
        }
        if Instant::now() >= deadline {
            signal(child, libc::SIGKILL, true);
            return child.wait().context("waiting for `trace run`");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Recordings running now (the server waits for them when it shuts down).
static RUNNING: AtomicUsize = AtomicUsize::new(0);

/// How many recordings are running.
pub fn running() -> usize {
    RUNNING.load(Ordering::SeqCst)
}

struct Running;
impl Running {
    fn start() -> Running {
        RUNNING.fetch_add(1, Ordering::SeqCst);
        Running
    }
}
impl Drop for Running {
    fn drop(&mut self) {
        RUNNING.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The record tool (see [`record_until`]), stopped only by its time limit.
pub fn record(p: &RecordParams) -> anyhow::Result<String> {
    record_until(p, &|| None)
}

/// The record tool: run `trace run` into a directory of this call alone (a new numbered one,
/// or, with `out`, a hidden sibling of `out`), read the answer from it, then put it at `out`
/// in one rename ([`publish`]). `stop` is asked every 20 ms whether to stop early.
pub fn record_until(p: &RecordParams, stop: &dyn Fn() -> Option<StopReason>) -> anyhow::Result<String> {
    let _running = Running::start();
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
    if timeout.is_nan() || timeout <= 0.0 || timeout > MAX_TIMEOUT_S {
        return Err(UsageError(format!(
            "timeout_s must be a number of seconds above 0 and at most {MAX_TIMEOUT_S} (the default is {DEFAULT_TIMEOUT_S}), not {timeout}; record longer runs with `trace run` directly"
        ))
        .into());
    }
    let timeout = Duration::from_secs_f64(timeout);
    let server_cwd = std::env::current_dir().context("the server's working directory")?;
    let cwd = match &p.cwd {
        Some(c) => server_cwd.join(c),
        None => server_cwd.clone(),
    };
    if !cwd.is_dir() {
        return Err(UsageError(format!("cwd {}: not a directory", cwd.display())).into());
    }
    let (out, rec) = match &p.out {
        Some(o) => {
            let out = cwd.join(o);
            check_out(&out)?;
            let name = out.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "trace".into());
            let parent = out.parent().map(Path::to_path_buf).unwrap_or_else(|| cwd.clone());
            let rec = create_numbered(&parent, &format!(".{name}.recording-{}", std::process::id()), "")?;
            (out, rec)
        }
        None => {
            let out = fresh_out(&cwd, &p.argv)?;
            (out.clone(), out)
        }
    };
    let private = rec != out;
    // The recording directory goes when this call fails before publishing it.
    let drop_rec = |r: anyhow::Result<String>| {
        if private {
            let _ = std::fs::remove_dir_all(&rec);
        }
        r
    };
    let trace = trace_binary();
    let mut cmd = Command::new(&trace);
    cmd.arg("run").arg("-o").arg(&rec);
    if p.native_ext == Some(true) {
        cmd.arg("--native-ext");
    }
    cmd.arg("--").args(&p.argv);
    cmd.current_dir(&cwd).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).process_group(0);
    // `trace` starts with its stop signals blocked: a SIGTERM from this server that comes
    // before `trace` has its handlers in place waits for them (`trace` unblocks the signals
    // then, and the program it runs starts with them unblocked), instead of killing `trace`
    // before it wrote anything (docs/trace-format.md, "Stopping a run").
    // SIGTERM, the one this server stops a recording with, is also put back to its default
    // action: `trace` leaves a signal it inherited as ignored ignored (as `nohup` asks), so a
    // server started with SIGTERM ignored could otherwise never stop its recordings.
    let blocked = stop_signal_set();
    // SAFETY: between fork and exec only pthread_sigmask and sigaction, async-signal-safe, on
    // copies of values built before the fork.
    unsafe {
        cmd.pre_exec(move || {
            let mut default: libc::sigaction = std::mem::zeroed();
            default.sa_sigaction = libc::SIG_DFL;
            libc::sigaction(libc::SIGTERM, &default, std::ptr::null_mut());
            libc::pthread_sigmask(libc::SIG_BLOCK, &blocked, std::ptr::null_mut());
            Ok(())
        });
    }
    if let Some(env) = &p.env {
        cmd.envs(env);
    }
    let started = Instant::now();
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            let e = anyhow::Error::from(e).context(format!(
                "cannot run {}: install the `trace` binary next to `slice` or on PATH (cargo build --workspace)",
                trace.display()
            ));
            return drop_rec(Err(e));
        }
    };
    let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        signal(&child, libc::SIGKILL, true);
        let _ = child.wait();
        return drop_rec(Err(anyhow::anyhow!("the command's output could not be captured")));
    };
    let (out_buf, h_out) = tail_reader(stdout);
    let (err_buf, h_err) = tail_reader(stderr);
    let (status, stopped) = match wait_until(&mut child, started + timeout, stop) {
        Ok(Ok(s)) => (s, None),
        Ok(Err(why)) => (stop_trace(&mut child)?, Some(why)),
        Err(e) => {
            signal(&child, libc::SIGKILL, true);
            let _ = child.wait();
            return drop_rec(Err(e));
        }
    };
    // The readers end when every process holding the pipes has exited; a daemon the target
    // left behind may hold them open: wait a little, then answer with what was read.
    let until = Instant::now() + Duration::from_secs(2);
    while !(h_out.is_finished() && h_err.is_finished()) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(10));
    }
    let elapsed = started.elapsed();
    let mut s = format!("Recorded `{}` (in {}) into {}\n", trace_format::escape::command(&p.argv), cwd.display(), out.display());
    let how = match (status.code(), status.signal()) {
        (Some(c), _) => format!("exit status {c}"),
        (None, Some(sig)) => format!("killed by signal {sig}{}", if sig == libc::SIGTERM { " (SIGTERM)" } else { "" }),
        _ => "unknown exit status".into(),
    };
    match stopped {
        Some(StopReason::Timeout) => {
            s.push_str(&format!("Still running after timeout_s={}: stopped ({how}); the partial trace is kept.\n", timeout.as_secs_f64()))
        }
        Some(StopReason::Cancelled) => s.push_str(&format!(
            "The call was cancelled: stopped ({how}) after {:.2} s; the partial trace is kept.\n",
            elapsed.as_secs_f64()
        )),
        Some(StopReason::Shutdown) => s.push_str(&format!(
            "The server is shutting down: stopped ({how}) after {:.2} s; the partial trace is kept.\n",
            elapsed.as_secs_f64()
        )),
        None => s.push_str(&format!("{how}, after {:.2} s\n", elapsed.as_secs_f64())),
    }
    // The answer reads the trace this call recorded, before anyone else can replace it.
    let mut interner = crate::symbols::Interner::default();
    let loaded = load_trace(&rec, &mut interner, crate::frontend::FrontEnd::Mcp);
    // Messages name the trace's place after publishing.
    let at_out = |m: String| if private { m.replace(&rec.display().to_string(), &out.display().to_string()) } else { m };
    match loaded {
        Ok(t) => {
            let threads: usize = t.processes.iter().map(|p| p.threads.len()).sum();
            let events: u64 = t.processes.iter().flat_map(|p| &p.threads).map(|th| th.info.events).sum();
            let funcs: HashSet<crate::symbols::FuncId> = t
                .processes
                .iter()
                .flat_map(|p| &p.threads)
                .flat_map(|th| (1..th.tree.nodes.len()).map(move |n| th.tree.func_id(n as u32)))
                .collect();
            // How `trace` stopped the program (meta.json's `stopped`): the signal it forwarded to
            // the program's process group, and whether the grace period ran out.
            if let Some(st) = &t.meta.stopped {
                let grace = tracer_grace_note(st.killed);
                s.push_str(&format!("trace forwarded signal {} to the program's process group{grace}.\n", st.signal));
            }
            s.push_str(&format!(
                "{}, {}, {events} events, {} called\n",
                match t.processes.len() {
                    1 => "1 process".to_string(),
                    n => format!("{n} processes"),
                },
                crate::testrun::plural(threads, "thread"),
                crate::testrun::plural(funcs.len(), "function")
            ));
            for w in t.warnings.iter().take(10) {
                s.push_str(&at_out(format!("warning: {w}\n")));
            }
            let tests: Vec<&trace_format::TestRun> = t.processes.iter().flat_map(|p| &p.tests).collect();
            if !tests.is_empty() {
                s.push_str(&format!("tests: {}\n", crate::testrun::outcome_counts(tests.iter().copied())));
                let failing: Vec<&&trace_format::TestRun> = tests.iter().filter(|x| x.outcome.is_failure()).collect();
                let first = |x: &trace_format::TestRun| -> String {
                    crate::testrun::failure_head(x).unwrap_or_else(|| "(the process ended inside the test)".into())
                };
                for x in failing.iter().take(RECORD_FAILURES) {
                    s.push_str(&crate::testrun::clean_text(&format!("{} {}: {}\n", x.outcome.name(), x.id, first(x))));
                    // What made it fail, when a subtest did: the first failing one (the tests
                    // tool lists them all).
                    if let Some(sub) = x.subtests.iter().find(|s| s.outcome.is_failure()) {
                        s.push_str(&crate::testrun::clean_text(&format!("  {} {}: {}\n", sub.outcome.name(), sub.id, first(sub))));
                    }
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
            // Nothing usable was recorded (the command could not run, or ran no traced code);
            // an earlier trace at `out` stays as it was, and a fresh directory this call made
            // goes if nothing was put in it.
            if !private {
                let _ = std::fs::remove_dir(&rec);
            }
            // `trace`'s own refusal (a command not found, an interpreter it cannot record) is
            // the reason, not the unreadable directory it leaves.
            // A trace that holds no process says why in this tool's words (how to set the
            // environment is the `env` parameter), which replace `trace`'s own line, worded for
            // its command line and naming the directory it recorded into before publishing.
            let why = trace_error(&err_buf).unwrap_or_else(|| match e {
                LoadError::NoProcess { .. } => at_out(e.to_string()),
                e => format!("the trace cannot be read: {}", at_out(e.to_string())),
            });
            let mut msg = format!("{}\n{how}; {why}\n", s.lines().next().unwrap_or_default());
            msg.push_str(&shown("stdout", &out_buf));
            msg.push_str(&shown_without("stderr", &err_buf, |l| l.starts_with(NOTHING_RECORDED)));
            return drop_rec(Err(anyhow::anyhow!(msg.trim_end().to_string())));
        }
    }
    if private {
        publish(&rec, &out).with_context(|| {
            format!("recorded `{}`, but the trace could not be put at {}", trace_format::escape::command(&p.argv), out.display())
        })?;
    }
    s.push_str(&shown("stdout", &out_buf));
    // (`trace`'s own last line names the directory it wrote: the one published.)
    s.push_str(&at_out(shown("stderr", &err_buf)));
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
        let first = fresh_out(d.path(), &v(&["rich", "x.csv"])).unwrap();
        assert_eq!(first, d.path().join(".slice-traces/rich-1.d"));
        assert!(first.is_dir(), "the directory is created, so no other call can take it");
        assert_eq!(fresh_out(d.path(), &v(&["rich"])).unwrap(), d.path().join(".slice-traces/rich-2.d"));
    }

    #[test]
    fn calls_at_once_each_get_their_own_directory() {
        let d = tempfile::tempdir().unwrap();
        let argv = vec!["python3".to_string(), "app.py".to_string()];
        let dirs: Vec<PathBuf> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..16).map(|_| s.spawn(|| fresh_out(d.path(), &argv).unwrap())).collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let distinct: HashSet<&PathBuf> = dirs.iter().collect();
        assert_eq!(distinct.len(), 16, "{dirs:?}");
    }

    const META: &str =
        r#"{"format":"slice-trace","version":1,"tool":"t","argv":["NAME"],"cwd":"/","target_kind":"python","start_unix_ms":0}"#;

    /// A trace directory with one process, whose meta.json names `name`.
    fn a_trace(dir: &Path, name: &str, pid: u32) {
        std::fs::create_dir_all(dir.join(format!("p{pid}"))).unwrap();
        std::fs::write(dir.join(META_FILE), META.replace("NAME", name)).unwrap();
        std::fs::write(dir.join(format!("p{pid}")).join(trace_format::PROC_META_FILE), "{}").unwrap();
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        v.sort();
        v
    }

    #[test]
    fn publishing_replaces_the_earlier_trace_whole_and_keeps_the_users_files() {
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("run.d");
        // Onto nothing: a rename.
        let rec = create_numbered(d.path(), ".run.d.recording", "").unwrap();
        a_trace(&rec, "first", 1);
        publish(&rec, &out).unwrap();
        assert!(!rec.exists());
        assert_eq!(names(&out), ["meta.json", "p1"]);
        // Over it, with the user's notes inside: exchanged, the notes move along.
        std::fs::write(out.join("notes.md"), "mine").unwrap();
        let rec = create_numbered(d.path(), ".run.d.recording", "").unwrap();
        a_trace(&rec, "second", 2);
        publish(&rec, &out).unwrap();
        assert!(!rec.exists());
        assert_eq!(names(&out), ["meta.json", "notes.md", "p2"]);
        assert!(std::fs::read_to_string(out.join(META_FILE)).unwrap().contains("second"));
        assert_eq!(names(d.path()), ["run.d"], "nothing is left beside it");
        // Over a directory that is not a trace: refused, the recording kept.
        let other = d.path().join("other");
        std::fs::create_dir(&other).unwrap();
        std::fs::write(other.join("x"), "x").unwrap();
        let rec = create_numbered(d.path(), ".other.recording", "").unwrap();
        a_trace(&rec, "third", 3);
        let e = format!("{:#}", publish(&rec, &other).unwrap_err());
        assert!(e.contains("is not a trace directory") && e.contains("this run's trace is kept at"), "{e}");
        assert_eq!(names(&other), ["x"]);
        assert!(rec.join(META_FILE).exists());
    }

    #[test]
    fn out_rules() {
        let d = tempfile::tempdir().unwrap();
        assert!(check_out(&d.path().join("missing")).is_ok());
        assert!(check_out(d.path()).is_ok(), "empty");
        std::fs::write(d.path().join("f"), "x").unwrap();
        assert!(check_out(&d.path().join("f")).unwrap_err().0.contains("is not a directory"));
        assert!(check_out(d.path()).unwrap_err().0.contains("is not a trace directory"));
        assert!(owned_by_trace(d.path(), "meta.json") && !owned_by_trace(d.path(), "f") && !owned_by_trace(d.path(), "p12"));
    }
}
