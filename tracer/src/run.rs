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
    reader::read_meta, ExitStatus, FileFingerprint, FuncKind, SourcesDoc, TraceDir, TraceMeta, ENV_TRACE_DIR, ENV_TRACE_OPTIONS, META_FILE,
    SOURCES_FILE, TRACE_FORMAT_NAME, TRACE_FORMAT_VERSION,
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

/// Make `out` an empty trace directory: create it, or replace an earlier trace there.
fn prepare_output(out: &Path) -> Result<()> {
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
                std::fs::remove_dir_all(out).with_context(|| format!("cannot remove the earlier trace in {}", out.display()))?;
            } else if !empty {
                bail!(
                    "{}: exists and is not a trace directory (no valid {META_FILE}); refusing to overwrite it: choose another output with -o or remove it",
                    out.display()
                );
            }
        }
    }
    std::fs::create_dir_all(out).with_context(|| format!("cannot create the trace directory {}", out.display()))
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
    let out = cwd.join(&opts.output);
    prepare_output(&out)?;
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
    };
    write_json_atomic(&out.join(META_FILE), &meta)?;

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
    }

    let started = Instant::now();
    let mut child = cmd.spawn().map_err(|e| ExitWith { code: 126, message: format!("{}: cannot run: {e}", resolved.display()) })?;
    CHILD.store(child.id() as i32, Ordering::Relaxed);
    // Like `time`: the terminal's ^C and ^\ go to the target; `trace` waits for it.
    set_handler(libc::SIGINT, libc::SIG_IGN);
    set_handler(libc::SIGQUIT, libc::SIG_IGN);
    set_handler(libc::SIGTERM, forward_signal as *const () as libc::sighandler_t);
    set_handler(libc::SIGHUP, forward_signal as *const () as libc::sighandler_t);
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
    write_json_atomic(&out.join(META_FILE), &meta)?;

    let summary = finish_trace(&out);
    if let Some(sig) = exit.signal {
        eprintln!("trace: {} was killed by {}", opts.command[0].to_string_lossy(), signal_name(sig));
    }
    match summary {
        Ok(s) if s.events == 0 => eprintln!(
            "trace: nothing was recorded in {} (no traced Python process or instrumented native program ran)",
            opts.output.display()
        ),
        Ok(s) if !opts.quiet => eprintln!(
            "trace: {} events, {} process{}, {} thread{} -> {}",
            s.events,
            s.processes,
            if s.processes == 1 { "" } else { "es" },
            s.threads,
            if s.threads == 1 { "" } else { "s" },
            opts.output.display()
        ),
        Ok(_) => {}
        Err(e) => eprintln!("trace: warning: the trace in {} is incomplete: {e:#}", opts.output.display()),
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

/// Read the trace back once: fingerprint its sources and count what it holds.
fn finish_trace(out: &Path) -> Result<stats::Summary> {
    let trace = TraceDir::open(out)?;
    let mut files = BTreeSet::new();
    for p in &trace.processes {
        for f in p.funcs.iter().flatten() {
            match &f.kind {
                FuncKind::Python { file, .. } if file.starts_with('/') => {
                    files.insert(file.clone());
                }
                FuncKind::Native { module, .. } => {
                    files.insert(module.clone());
                }
                _ => {}
            }
        }
    }
    let doc = SourcesDoc { files: files.iter().filter_map(|f| fingerprint(Path::new(f))).collect() };
    write_json_atomic(&out.join(SOURCES_FILE), &doc)?;
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

    #[test]
    fn output_dir_rules() {
        let d = tempfile::tempdir().unwrap();
        // A new directory is created; an empty one is used.
        let new = d.path().join("new.d");
        prepare_output(&new).unwrap();
        assert!(new.is_dir());
        prepare_output(&new).unwrap();
        // A directory with other files is refused.
        std::fs::write(new.join("notes.txt"), "mine").unwrap();
        let e = prepare_output(&new).unwrap_err().to_string();
        assert!(e.contains("not a trace directory"), "{e}");
        assert!(new.join("notes.txt").exists());
        // A file is refused.
        let file = d.path().join("file");
        std::fs::write(&file, "x").unwrap();
        assert!(prepare_output(&file).is_err());
        // An earlier trace is replaced.
        let old = d.path().join("old.d");
        std::fs::create_dir(&old).unwrap();
        std::fs::write(
            old.join(META_FILE),
            r#"{"format":"slice-trace","version":1,"tool":"t","argv":[],"cwd":"/","target_kind":"python","start_unix_ms":0}"#,
        )
        .unwrap();
        std::fs::create_dir(old.join("p1")).unwrap();
        prepare_output(&old).unwrap();
        assert!(!old.join("p1").exists());
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
