//! `trace run`: prepare the trace directory and the shims' environment, run the target with
//! its own stdin/stdout/stderr, and finish the trace when it exits.

use crate::detect::{self, TargetKind};
use crate::stats;
use anyhow::{bail, Context, Result};
use sha2::{Digest, Sha256};
use std::collections::BTreeSet;
use std::ffi::OsString;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};
use trace_format::{
    event::FLAG_INCOMPLETE, reader::read_meta, ExitStatus, FileFingerprint, FuncKind, SourcesDoc, TraceDir, TraceMeta, ENV_TRACE_DIR,
    ENV_TRACE_OPTIONS, META_FILE, SOURCES_FILE, TRACE_FORMAT_NAME, TRACE_FORMAT_VERSION,
};

/// The `sitecustomize.py` that loads the Python shim (see the file for what it does).
const SITECUSTOMIZE: &str = include_str!("sitecustomize.py");
/// File name of the Python shim, as cargo builds it.
pub const PY_SHIM: &str = "libslicetrace_py.so";
/// File name of the native shim, as cargo builds it.
pub const NATIVE_SHIM: &str = "libslicetrace_native.so";

/// How the Python shim hooks calls (`--python-hook`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PythonHook {
    /// `sys.monitoring` on CPython 3.12+, the profile hook before.
    Auto,
    /// `PyEval_SetProfile`.
    Profile,
}

impl PythonHook {
    fn as_str(self) -> &'static str {
        match self {
            PythonHook::Auto => "auto",
            PythonHook::Profile => "profile",
        }
    }
}

pub struct RunOptions {
    pub output: PathBuf,
    pub c_calls: bool,
    /// `None`: `auto`.
    pub python_hook: Option<PythonHook>,
    pub quiet: bool,
    pub native_filter: NativeFilter,
    pub command: Vec<OsString>,
}

/// `-F`/`-N`: the native shim's record-time filters (shims/native/src/filter.rs).
#[derive(Default)]
pub struct NativeFilter {
    pub filter: Vec<String>,
    pub notrace: Vec<String>,
}

/// The environment variable the native shim reads them from.
const ENV_NATIVE_FILTER: &str = "SLICE_TRACE_NATIVE_FILTER";

impl NativeFilter {
    /// Check every pattern (`NAME[@OBJECT]`, two regular expressions) and give the shim's
    /// text: one `F <pattern>` or `N <pattern>` line each (None: no filter).
    fn env_text(&self) -> std::result::Result<Option<String>, String> {
        let mut lines = Vec::new();
        for (kind, pats) in [("F", &self.filter), ("N", &self.notrace)] {
            for p in pats {
                if p.contains('\n') {
                    return Err(format!("-{kind} {p:?}: a pattern is one line"));
                }
                let (name, object) = p.rsplit_once('@').map_or((p.as_str(), None), |(n, o)| (n, Some(o)));
                for part in std::iter::once(name).chain(object) {
                    regex::Regex::new(part).map_err(|e| format!("-{kind} {p:?}: not a regular expression: {e}"))?;
                }
                lines.push(format!("{kind} {p}"));
            }
        }
        Ok((!lines.is_empty()).then(|| lines.join("\n")))
    }
}

/// An error that ends `trace run` with a specific exit status.
#[derive(Debug)]
pub struct ExitWith {
    pub code: i32,
    pub message: String,
}

impl std::fmt::Display for ExitWith {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}
impl std::error::Error for ExitWith {}

/// Find a shim: next to the `trace` executable, or in `../lib`.
pub fn find_shim(name: &str) -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let exe = exe.canonicalize().unwrap_or(exe);
    let dir = exe.parent()?;
    [dir.join(name), dir.join("../lib").join(name)].into_iter().find(|p| p.is_file())
}

fn now_unix_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

fn write_json_atomic(path: &Path, value: &impl serde::Serialize) -> Result<()> {
    let mut text = serde_json::to_vec_pretty(value)?;
    text.push(b'\n');
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, &text).with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

/// Where a run records: straight into the output directory, or (when that holds an earlier
/// trace) into a hidden directory inside it, moved over the earlier trace only if the new run
/// recorded something.
#[derive(Debug)]
struct Output {
    /// The directory the user named.
    out: PathBuf,
    /// The directory the shims write into (`out`, or `out/.trace-run-<pid>`).
    rec: PathBuf,
}

/// Name prefix of the hidden directory a run records into over an earlier trace.
const STAGING_PREFIX: &str = ".trace-run-";
/// Space kept free for `meta.json` and `sources.json` at the end of the run (see [`Reserve`]).
const RESERVE_FILE: &str = ".trace-reserve";
const RESERVE_BYTES: i64 = 1 << 20;

/// Whether an entry of a trace directory is one that a run writes (and so may replace): the
/// documents, the reserve, and the process directories `p<pid>` / `p<pid>.<n>` that hold a
/// `proc.json`. Everything else is the user's and is never touched.
fn owned_by_trace(dir: &Path, name: &str) -> bool {
    if name == META_FILE || name == SOURCES_FILE || name == RESERVE_FILE || name == "meta.json.tmp" || name == "sources.json.tmp" {
        return true;
    }
    let Some(rest) = name.strip_prefix('p') else { return false };
    let (pid, image) = rest.split_once('.').unwrap_or((rest, "0"));
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    digits(pid) && digits(image) && dir.join(name).join(trace_format::PROC_META_FILE).is_file()
}

/// Decide where to record (see [`Output`]): a new or empty directory is used as is; one that
/// holds an earlier trace gets a hidden recording directory; anything else is refused.
fn prepare_output(out: &Path) -> Result<Output> {
    match std::fs::symlink_metadata(out) {
        Err(_) => {}
        Ok(m) if !m.is_dir() => bail!("{}: exists and is not a directory; choose another output with -o", out.display()),
        Ok(_) => {
            let is_trace = match read_meta(out) {
                Ok(_) => true,
                Err(trace_format::FormatError::NewerVersion { .. }) => true,
                Err(_) => false,
            };
            let empty = std::fs::read_dir(out).map(|mut d| d.next().is_none()).unwrap_or(false);
            if is_trace {
                let rec = out.join(format!("{STAGING_PREFIX}{}", std::process::id()));
                if rec.exists() {
                    std::fs::remove_dir_all(&rec).with_context(|| format!("cannot remove {}", rec.display()))?;
                }
                std::fs::create_dir(&rec).with_context(|| format!("cannot create {}", rec.display()))?;
                return Ok(Output { out: out.to_path_buf(), rec });
            } else if !empty {
                bail!(
                    "{}: exists and is not a trace directory (no valid {META_FILE}); refusing to overwrite it: choose another output with -o or remove it",
                    out.display()
                );
            }
        }
    }
    std::fs::create_dir_all(out).with_context(|| format!("cannot create the trace directory {}", out.display()))?;
    Ok(Output { out: out.to_path_buf(), rec: out.to_path_buf() })
}

impl Output {
    /// Put the new recording in place of the earlier trace: remove the entries the earlier
    /// trace owns ([`owned_by_trace`]), move the new ones in. Nothing else in `out` is touched.
    fn commit(&self) -> Result<()> {
        if self.rec == self.out {
            return Ok(());
        }
        for e in std::fs::read_dir(&self.out).with_context(|| format!("cannot read {}", self.out.display()))? {
            let e = e.with_context(|| format!("cannot read {}", self.out.display()))?;
            let name = e.file_name().to_string_lossy().into_owned();
            if !owned_by_trace(&self.out, &name) {
                continue;
            }
            let path = e.path();
            let r = if path.is_dir() { std::fs::remove_dir_all(&path) } else { std::fs::remove_file(&path) };
            r.with_context(|| format!("cannot remove {} of the earlier trace", path.display()))?;
        }
        for e in std::fs::read_dir(&self.rec).with_context(|| format!("cannot read {}", self.rec.display()))? {
            let e = e.with_context(|| format!("cannot read {}", self.rec.display()))?;
            let to = self.out.join(e.file_name());
            std::fs::rename(e.path(), &to).with_context(|| format!("cannot move the new recording into {}", to.display()))?;
        }
        std::fs::remove_dir(&self.rec).with_context(|| format!("cannot remove {}", self.rec.display()))
    }

    /// Whether the recording directory holds a process directory.
    fn recorded_any(&self) -> bool {
        std::fs::read_dir(&self.rec)
            .map(|d| d.filter_map(|e| e.ok()).any(|e| owned_by_trace(&self.rec, &e.file_name().to_string_lossy()) && e.path().is_dir()))
            .unwrap_or(false)
    }

    /// Drop a recording that holds nothing, keeping the earlier trace.
    fn discard(&self) {
        if self.rec != self.out {
            let _ = std::fs::remove_dir_all(&self.rec);
        }
    }
}

/// A file of [`RESERVE_BYTES`] allocated in the recording directory before the target starts
/// and removed after it ends, so the documents written then (`meta.json`, `sources.json`) have
/// room even when the streams filled the disk.
fn reserve_space(dir: &Path) -> Option<PathBuf> {
    use std::os::unix::io::AsRawFd;
    let path = dir.join(RESERVE_FILE);
    let f = std::fs::File::create(&path).ok()?;
    // SAFETY: posix_fallocate on a descriptor we own.
    let r = unsafe { libc::posix_fallocate(f.as_raw_fd(), 0, RESERVE_BYTES) };
    if r != 0 {
        let _ = std::fs::remove_file(&path);
        return None;
    }
    Some(path)
}

/// The private directory holding `sitecustomize.py` and a link to the Python shim.
fn python_runtime(shim: &Path) -> Result<tempfile::TempDir> {
    // Mapped, not read: only the pages of the ELF headers, the dynamic symbols and the
    // version string are touched (reading the whole 8 MB shim cost ~12 ms per run).
    let data = detect::map_file(shim).with_context(|| format!("cannot read the Python shim {}", shim.display()))?;
    let Some(version) = detect::shim_python_version(&data) else {
        bail!("{}: cannot tell which CPython version this shim was built for; rebuild it with `cargo build --workspace`", shim.display());
    };
    let rt = tempfile::Builder::new().prefix("slice-trace-rt-").tempdir().context("cannot create a temporary directory (check $TMPDIR)")?;
    std::fs::write(rt.path().join("sitecustomize.py"), SITECUSTOMIZE.replace("@PY_VERSION@", &version))
        .context("cannot write sitecustomize.py into the temporary directory")?;
    std::os::unix::fs::symlink(shim, rt.path().join("_slicetrace.so"))
        .context("cannot link the Python shim into the temporary directory")?;
    Ok(rt)
}

/// Refuse a Python target the shim cannot record, before running it.
fn check_python_version(resolved: &Path, path_var: Option<&std::ffi::OsStr>, shim: &Path) -> Result<()> {
    let data = detect::map_file(shim).with_context(|| format!("cannot read the Python shim {}", shim.display()))?;
    let Some(supported) = detect::shim_python_version(&data).as_deref().and_then(detect::parse_supported) else {
        bail!("{}: cannot tell which CPython versions this shim supports; rebuild it with `cargo build --workspace`", shim.display());
    };
    // An ELF that embeds Python (linking libpython) is checked by the shim when it loads.
    let Some(interp) = detect::python_interpreter(resolved, path_var) else { return Ok(()) };
    let name = |p: &Path| p.file_name().unwrap_or_default().to_os_string();
    let names = [name(&interp), name(&interp.canonicalize().unwrap_or_else(|_| interp.clone()))];
    if names.iter().any(|n| detect::is_python_name(n) || n.to_string_lossy().starts_with("pypy")) {
        detect::check_python_target(&interp, supported).map_err(|r| ExitWith { code: r.code, message: r.message })?;
    }
    Ok(())
}

/// `SLICE_TRACE_OPTIONS` for the shims (comma-separated).
fn shim_options(c_calls: bool, hook: PythonHook) -> String {
    let mut o = Vec::new();
    if c_calls {
        o.push("c_calls");
    }
    if hook == PythonHook::Profile {
        o.push("profile_hook");
    }
    o.join(",")
}

static CHILD: AtomicI32 = AtomicI32::new(0);

extern "C" fn forward_signal(sig: libc::c_int) {
    let pid = CHILD.load(Ordering::Relaxed);
    if pid > 0 {
        // SAFETY: kill is async-signal-safe.
        unsafe { libc::kill(pid, sig) };
    }
}

fn set_handler(sig: libc::c_int, handler: libc::sighandler_t) {
    // SAFETY: installing a disposition; the handler only calls kill().
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = handler;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(sig, &sa, std::ptr::null_mut());
    }
}

/// Block `sigs` in this thread; returns the mask to restore.
fn block_signals(sigs: &[libc::c_int]) -> libc::sigset_t {
    // SAFETY: sigset manipulation on local values and pthread_sigmask on this thread.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for &s in sigs {
            libc::sigaddset(&mut set, s);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old);
        old
    }
}

fn restore_signals(old: &libc::sigset_t) {
    // SAFETY: restoring a mask pthread_sigmask gave us.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, old, std::ptr::null_mut()) };
}

pub fn signal_name(sig: i32) -> String {
    let name = match sig {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGUSR2 => "SIGUSR2",
        _ => return format!("signal {sig}"),
    };
    format!("{name} ({sig})")
}

/// Run the target; returns the exit code for `trace` (or does not return: when the target
/// died by a signal, `trace` dies by the same signal).
pub fn run(opts: RunOptions) -> Result<i32> {
    if opts.command.is_empty() {
        return Err(ExitWith { code: 2, message: "no command given; usage: trace run [-o DIR] -- <command> [args...]".into() }.into());
    }
    let hook = opts.python_hook.unwrap_or(PythonHook::Auto);
    let native_filter = opts.native_filter.env_text().map_err(|m| ExitWith { code: 2, message: m })?;
    let path_var = std::env::var_os("PATH");
    let (resolved, kind) = match detect::classify(&opts.command, path_var.as_deref()) {
        Ok(k) => k,
        Err(r) => return Err(ExitWith { code: r.code, message: r.message }.into()),
    };
    let py_shim = find_shim(PY_SHIM);
    let native_shim = find_shim(NATIVE_SHIM);
    let exe_dir = std::env::current_exe().ok().and_then(|e| e.parent().map(Path::to_path_buf)).unwrap_or_default();
    if kind == TargetKind::Python && py_shim.is_none() {
        bail!(crate::shims::missing_message("Python", PY_SHIM, &exe_dir));
    }
    if kind == TargetKind::Native && native_shim.is_none() {
        bail!(crate::shims::missing_message("native", NATIVE_SHIM, &exe_dir));
    }

    let pypy = resolved.file_name().is_some_and(|n| n.to_string_lossy().starts_with("pypy"));
    if let (true, Some(shim)) = (kind == TargetKind::Python || pypy, &py_shim) {
        check_python_version(&resolved, path_var.as_deref(), shim)?;
    }

    let cwd = std::env::current_dir().context("cannot read the current directory")?;
    let output = prepare_output(&cwd.join(&opts.output))?;
    let out = output.rec.clone();
    let start_ms = now_unix_ms();
    let mut meta = TraceMeta {
        format: TRACE_FORMAT_NAME.into(),
        version: TRACE_FORMAT_VERSION,
        tool: format!("trace {}", env!("CARGO_PKG_VERSION")),
        argv: opts.command.iter().map(|a| a.to_string_lossy().into_owned()).collect(),
        cwd: cwd.to_string_lossy().into_owned(),
        target_kind: kind.as_str().into(),
        start_unix_ms: start_ms,
        end_unix_ms: None,
        duration_ns: None,
        exit: None,
        options: serde_json::json!({
            "c_calls": opts.c_calls,
            "python_hook": hook.as_str(),
            "native_filter": opts.native_filter.filter,
            "native_notrace": opts.native_filter.notrace,
        }),
        incomplete: None,
    };
    write_json_atomic(&out.join(META_FILE), &meta)?;
    let reserve = reserve_space(&out);

    // The environment: PYTHONPATH always (Python programs any target starts are recorded),
    // LD_PRELOAD for instrumented native programs.
    let runtime = match &py_shim {
        Some(shim) => Some(python_runtime(shim)?),
        None => None,
    };
    let mut cmd = Command::new(&opts.command[0]);
    cmd.args(&opts.command[1..]);
    cmd.env(ENV_TRACE_DIR, &out);
    cmd.env(ENV_TRACE_OPTIONS, shim_options(opts.c_calls, hook));
    match &native_filter {
        Some(text) => cmd.env(ENV_NATIVE_FILTER, text),
        None => cmd.env_remove(ENV_NATIVE_FILTER),
    };
    if let Some(rt) = &runtime {
        let mut pp = OsString::from(rt.path());
        if let Some(old) = std::env::var_os("PYTHONPATH").filter(|v| !v.is_empty()) {
            pp.push(":");
            pp.push(old);
        }
        cmd.env("PYTHONPATH", pp);
    }
    if matches!(kind, TargetKind::Native | TargetKind::Other) {
        if let Some(native) = &native_shim {
            let mut pre = OsString::from(native);
            if let Some(old) = std::env::var_os("LD_PRELOAD").filter(|v| !v.is_empty()) {
                pre.push(":");
                pre.push(old);
            }
            cmd.env("LD_PRELOAD", pre);
        }
        // An ordinary native build is recorded by entry patching, on by default.
        if let Some(v) = detect::patch_env(&resolved) {
            cmd.env(detect::ENV_PATCH, v);
        }
    }

    let started = Instant::now();
    // The signals `trace` handles are blocked from before the spawn until the handlers are in
    // place: a SIGTERM in between waits, then reaches the handler and is forwarded, instead of
    // killing `trace` and orphaning the target. (The child gets the mask `trace` had before,
    // restored between fork and exec. Handlers are installed after the spawn because an
    // ignored disposition would be inherited across exec.)
    let old_mask = block_signals(&[libc::SIGINT, libc::SIGQUIT, libc::SIGTERM, libc::SIGHUP]);
    {
        use std::os::unix::process::CommandExt;
        let child_mask = old_mask;
        // SAFETY: pthread_sigmask is async-signal-safe, and the closure touches only its copy.
        unsafe {
            cmd.pre_exec(move || {
                libc::pthread_sigmask(libc::SIG_SETMASK, &child_mask, std::ptr::null_mut());
                Ok(())
            })
        };
    }
    let spawned = cmd.spawn();
    if let Ok(c) = &spawned {
        CHILD.store(c.id() as i32, Ordering::Relaxed);
        // Like `time`: the terminal's ^C and ^\ go to the target; `trace` waits for it.
        set_handler(libc::SIGINT, libc::SIG_IGN);
        set_handler(libc::SIGQUIT, libc::SIG_IGN);
        set_handler(libc::SIGTERM, forward_signal as *const () as libc::sighandler_t);
        set_handler(libc::SIGHUP, forward_signal as *const () as libc::sighandler_t);
    }
    restore_signals(&old_mask);
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => {
            output.discard();
            return Err(ExitWith { code: 126, message: format!("{}: cannot run: {e}", resolved.display()) }.into());
        }
    };
    let status = child.wait().context("cannot wait for the target")?;
    let duration = started.elapsed();
    CHILD.store(0, Ordering::Relaxed);
    drop(runtime);

    let exit = match (status.code(), status.signal()) {
        (Some(code), _) => ExitStatus { code: Some(code), signal: None, core_dumped: false },
        (None, Some(sig)) => ExitStatus { code: None, signal: Some(sig), core_dumped: status.core_dumped() },
        (None, None) => ExitStatus { code: Some(1), signal: None, core_dumped: false },
    };
    meta.end_unix_ms = Some(now_unix_ms());
    meta.duration_ns = Some(duration.as_nanos() as u64);
    meta.exit = Some(exit);
    if let Some(r) = &reserve {
        let _ = std::fs::remove_file(r);
    }

    let shown = &opts.output;
    let finished = finish_trace(&out, &mut meta);
    if let Some(sig) = exit.signal {
        eprintln!("trace: {} was killed by {}", opts.command[0].to_string_lossy(), signal_name(sig));
    }
    match finished {
        Ok(s) if s.processes == 0 && output.rec != output.out => {
            output.discard();
            eprintln!(
                "trace: nothing was recorded (no traced Python process or instrumented native program ran); the earlier trace in {} is kept",
                shown.display()
            );
        }
        Ok(s) => {
            output.commit()?;
            if let Some(why) = &meta.incomplete {
                eprintln!("trace: warning: the trace in {} is incomplete: {why}", shown.display());
            }
            if s.events == 0 {
                eprintln!(
                    "trace: nothing was recorded in {} (no traced Python process or instrumented native program ran)",
                    shown.display()
                );
            } else if !opts.quiet {
                eprintln!(
                    "trace: {} events, {} process{}, {} thread{} -> {}",
                    s.events,
                    s.processes,
                    if s.processes == 1 { "" } else { "es" },
                    s.threads,
                    if s.threads == 1 { "" } else { "s" },
                    shown.display()
                );
            }
        }
        Err(e) => {
            // Whatever was recorded is kept: a damaged new trace still replaces the earlier one
            // only if its documents could be written.
            let _ = write_json_atomic(&out.join(META_FILE), &meta);
            if output.recorded_any() {
                let _ = output.commit();
            } else {
                output.discard();
            }
            eprintln!("trace: warning: the trace in {} is incomplete: {e:#}", shown.display());
        }
    }

    if let Some(sig) = exit.signal {
        die_by_signal(sig);
    }
    Ok(exit.code.unwrap_or(1))
}

/// Die by `sig` like the target did (without a core dump), so callers see the same status.
fn die_by_signal(sig: i32) -> ! {
    // SAFETY: plain system calls on our own process.
    unsafe {
        let rl = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        libc::setrlimit(libc::RLIMIT_CORE, &rl);
        set_handler(sig, libc::SIG_DFL);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::raise(sig);
    }
    std::process::exit(128 + sig)
}

/// Read the trace back once: mark it incomplete if a stream ran out of space, fingerprint its
/// sources, write `sources.json` and the final `meta.json`, and count what it holds.
fn finish_trace(out: &Path, meta: &mut TraceMeta) -> Result<stats::Summary> {
    let trace = TraceDir::open(out)?;
    let streams = trace.thread_count();
    let stopped = trace.processes.iter().flat_map(|p| &p.threads).filter(|t| t.header.flags & FLAG_INCOMPLETE != 0).count();
    if stopped > 0 {
        meta.incomplete = Some(format!(
            "no space left on the device holding it: recording stopped early in {stopped} of {streams} thread stream{} (the target ran to its end); free some space or record to another disk with -o",
            if streams == 1 { "" } else { "s" }
        ));
    }
    let mut files = BTreeSet::new();
    let mut modules = BTreeSet::new();
    for p in &trace.processes {
        for f in p.funcs.iter().flatten() {
            match &f.kind {
                FuncKind::Python { file, .. } if file.starts_with('/') => {
                    files.insert(file.clone());
                }
                FuncKind::Native { module, .. } => {
                    modules.insert(module.clone());
                }
                _ => {}
            }
        }
    }
    // The native objects, and the source files they were built from as their debug
    // information names them.
    files.extend(modules.iter().cloned());
    for m in &modules {
        for f in crate::native_sources::dwarf_files(Path::new(&m)) {
            files.insert(f.to_string_lossy().into_owned());
        }
    }
    let doc = SourcesDoc { files: files.iter().filter_map(|f| fingerprint(Path::new(f))).collect() };
    write_json_atomic(&out.join(SOURCES_FILE), &doc)?;
    write_json_atomic(&out.join(META_FILE), meta)?;
    stats::summarize(&trace)
}

fn fingerprint(path: &Path) -> Option<FileFingerprint> {
    let meta = std::fs::metadata(path).ok().filter(|m| m.is_file())?;
    let data = std::fs::read(path).ok()?;
    let hash = Sha256::digest(&data);
    let sha256 = hash.iter().map(|b| format!("{b:02x}")).collect();
    Some(FileFingerprint {
        path: path.to_string_lossy().into_owned(),
        size: meta.len(),
        mtime_ns: meta.mtime() as i128 * 1_000_000_000 + meta.mtime_nsec() as i128,
        sha256,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const OLD_META: &str =
        r#"{"format":"slice-trace","version":1,"tool":"t","argv":[],"cwd":"/","target_kind":"python","start_unix_ms":0}"#;

    #[test]
    fn output_dir_rules() {
        let d = tempfile::tempdir().unwrap();
        // A new directory is created and recorded into; an empty one is used.
        let new = d.path().join("new.d");
        assert_eq!(prepare_output(&new).unwrap().rec, new);
        assert!(new.is_dir());
        assert_eq!(prepare_output(&new).unwrap().rec, new);
        // A directory with other files is refused.
        std::fs::write(new.join("notes.txt"), "mine").unwrap();
        let e = prepare_output(&new).unwrap_err().to_string();
        assert!(e.contains("not a trace directory"), "{e}");
        assert!(new.join("notes.txt").exists());
        // A file is refused.
        let file = d.path().join("file");
        std::fs::write(&file, "x").unwrap();
        assert!(prepare_output(&file).is_err());
    }

    /// An earlier trace with the user's own files beside and inside it.
    fn earlier_trace(d: &Path) -> PathBuf {
        let old = d.join("old.d");
        std::fs::create_dir(&old).unwrap();
        std::fs::write(old.join(META_FILE), OLD_META).unwrap();
        std::fs::write(old.join(SOURCES_FILE), "{\"files\":[]}").unwrap();
        std::fs::create_dir(old.join("p1")).unwrap();
        std::fs::write(old.join("p1").join(trace_format::PROC_META_FILE), "{}").unwrap();
        std::fs::write(old.join("notes.md"), "mine").unwrap();
        std::fs::create_dir(old.join("plots")).unwrap();
        std::fs::write(old.join("plots").join("a.svg"), "mine").unwrap();
        std::fs::create_dir(old.join("p2")).unwrap(); // no proc.json: not the trace's
        old
    }

    #[test]
    fn re_recording_replaces_only_what_the_trace_owns() {
        let d = tempfile::tempdir().unwrap();
        let old = earlier_trace(d.path());
        let o = prepare_output(&old).unwrap();
        assert_ne!(o.rec, old, "an earlier trace is recorded over in a separate directory");
        assert!(old.join("p1").exists(), "nothing is removed before the run");
        // The new run: one process and its documents.
        std::fs::create_dir(o.rec.join("p9")).unwrap();
        std::fs::write(o.rec.join("p9").join(trace_format::PROC_META_FILE), "{}").unwrap();
        std::fs::write(o.rec.join(META_FILE), "new").unwrap();
        assert!(o.recorded_any());
        o.commit().unwrap();
        let mut names: Vec<String> =
            std::fs::read_dir(&old).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        assert_eq!(names, ["meta.json", "notes.md", "p2", "p9", "plots"]);
        assert_eq!(std::fs::read_to_string(old.join(META_FILE)).unwrap(), "new");
        assert_eq!(std::fs::read_to_string(old.join("plots").join("a.svg")).unwrap(), "mine");
    }

    #[test]
    fn a_run_that_records_nothing_keeps_the_earlier_trace() {
        let d = tempfile::tempdir().unwrap();
        let old = earlier_trace(d.path());
        let o = prepare_output(&old).unwrap();
        std::fs::write(o.rec.join(META_FILE), "new").unwrap();
        assert!(!o.recorded_any());
        o.discard();
        assert!(!o.rec.exists());
        assert_eq!(std::fs::read_to_string(old.join(META_FILE)).unwrap(), OLD_META);
        assert!(old.join("p1").join(trace_format::PROC_META_FILE).exists());
        assert!(old.join(SOURCES_FILE).exists());
    }

    #[test]
    fn owned_entries() {
        let d = tempfile::tempdir().unwrap();
        for n in ["p12", "p12.3", "p4x", "p", "p5.", "pp"] {
            std::fs::create_dir(d.path().join(n)).unwrap();
            std::fs::write(d.path().join(n).join(trace_format::PROC_META_FILE), "{}").unwrap();
        }
        let owned: Vec<&str> = ["meta.json", "sources.json", "p12", "p12.3", "p4x", "p", "p5.", "pp", "notes.md"]
            .into_iter()
            .filter(|n| owned_by_trace(d.path(), n))
            .collect();
        assert_eq!(owned, ["meta.json", "sources.json", "p12", "p12.3"]);
    }

    #[test]
    fn fingerprints() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("a.py");
        std::fs::write(&f, "abc").unwrap();
        let fp = fingerprint(&f).unwrap();
        assert_eq!(fp.size, 3);
        assert_eq!(fp.sha256, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        assert!(fingerprint(&d.path().join("missing.py")).is_none());
    }

    #[test]
    fn shim_options_name_the_hook_and_c_calls() {
        assert_eq!(shim_options(false, PythonHook::Auto), "");
        assert_eq!(shim_options(false, PythonHook::Profile), "profile_hook");
        assert_eq!(shim_options(true, PythonHook::Profile), "c_calls,profile_hook");
    }

    #[test]
    fn signal_names() {
        assert_eq!(signal_name(15), "SIGTERM (15)");
        assert_eq!(signal_name(64), "signal 64");
    }
}
