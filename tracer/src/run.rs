//! `trace run`: check the options, detect the target and find the shims, build the
//! [`Plan`] (argv, environment, output directory, `meta.json`; `plan.rs`, pure), carry it out
//! (`outdir.rs` sets up the trace directory, `launch.rs` runs the target with its own
//! stdin/stdout/stderr and forwards signals), and finish the trace when the target exits.

use crate::detect::{self, TargetKind};
/// Kept here for `stats.rs` and other callers of `run::signal_name`.
pub use crate::launch::signal_name;
use crate::launch::{self, LaunchError};
use crate::outdir::{self, Output};
use crate::plan::{self, Detected, EnvChange, Inherited, Plan, Shims};
use crate::stats;
use anyhow::{bail, Context, Result};
use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};
use trace_format::meta::NOTHING_RECORDED;
use trace_format::{event::FLAG_INCOMPLETE, FuncKind, SourcesDoc, TraceDir, TraceMeta, META_FILE, SOURCES_FILE};

/// The `sitecustomize.py` that loads the Python shim (see the file for what it does).
const SITECUSTOMIZE: &str = include_str!("sitecustomize.py");
/// The test recorder that `sitecustomize.py` loads (pytest plugin, unittest result hooks).
const TESTS_RECORDER: &str = include_str!("slicetrace_tests.py");
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
    pub fn as_str(self) -> &'static str {
        match self {
            PythonHook::Auto => "auto",
            PythonHook::Profile => "profile",
        }
    }
}

pub struct RunOptions {
    pub output: PathBuf,
    pub c_calls: bool,
    /// Record executed lines (Python): `--lines` / `--no-lines`; `None`: by version (3.12+).
    pub lines: Option<bool>,
    /// `--lines-per-test`: Python tests report their lines inside each test.
    pub lines_per_test: bool,
    /// `--native-ext`: a Python program's extension modules are recorded by entry patching.
    pub native_ext: bool,
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

impl NativeFilter {
    /// Check every pattern (`NAME[@OBJECT]`, two regular expressions) and give the shim's
    /// text: one `F <pattern>` or `N <pattern>` line each (None: no filter).
    pub fn env_text(&self) -> std::result::Result<Option<String>, String> {
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

fn now_unix_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

pub(crate) fn write_json_atomic(path: &Path, value: &impl serde::Serialize) -> Result<()> {
    let mut text = serde_json::to_vec_pretty(value)?;
    text.push(b'\n');
    write_bytes_atomic(path, &text)
}

/// [`write_json_atomic`] without the indentation, for the probe lists: thousands of numbers,
/// which the shim parses at start-up in every process (hexyl's line list: 125 kB instead of
/// 264 kB; docs/performance.md, "Fingerprints of large objects from a cache").
pub(crate) fn write_json_compact_atomic(path: &Path, value: &impl serde::Serialize) -> Result<()> {
    let mut text = serde_json::to_vec(value)?;
    text.push(b'\n');
    write_bytes_atomic(path, &text)
}

/// `text` into `path`, through a temporary file renamed into place.
pub(crate) fn write_bytes_atomic(path: &Path, text: &[u8]) -> Result<()> {
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, text).with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

/// The private directory holding `sitecustomize.py` and a link to the Python shim.
fn python_runtime(shim: &Path) -> Result<tempfile::TempDir> {
    // Mapped, not read: only the pages of the ELF headers, the dynamic symbols and the
    // version string are touched (reading the whole shim cost milliseconds per run:
    // `docs/performance.md`, "Figures behind the code's choices").
    let data = detect::map_file(shim).with_context(|| format!("cannot read the Python shim {}", shim.display()))?;
    let Some(version) = detect::shim_python_version(&data) else {
        bail!("{}: cannot tell which CPython version this shim was built for; rebuild it with `cargo build --workspace`", shim.display());
    };
    let rt = tempfile::Builder::new().prefix("slice-trace-rt-").tempdir().context("cannot create a temporary directory (check $TMPDIR)")?;
    std::fs::write(rt.path().join("sitecustomize.py"), SITECUSTOMIZE.replace("@PY_VERSION@", &version))
        .context("cannot write sitecustomize.py into the temporary directory")?;
    std::fs::write(rt.path().join("_slicetrace_tests.py"), TESTS_RECORDER)
        .context("cannot write _slicetrace_tests.py into the temporary directory")?;
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

/// Run the target; returns the exit code for `trace` (or does not return: when the target
/// died by a signal, `trace` dies by the same signal).
pub fn run(opts: RunOptions) -> Result<i32> {
    let usage = plan::check_usage(&opts)?;
    let path_var = std::env::var_os("PATH");
    let (resolved, kind) = match detect::classify(&opts.command, path_var.as_deref()) {
        Ok(k) => k,
        Err(r) => return Err(ExitWith { code: r.code, message: r.message }.into()),
    };
    // The shims: embedded in `trace` (written to a per-user cache) or beside it (src/shims.rs).
    let (py_shim, native_shim) = (crate::shims::find(PY_SHIM), crate::shims::find(NATIVE_SHIM));
    for (needed, shim) in [(TargetKind::Python, &py_shim), (TargetKind::Native, &native_shim)] {
        if let (true, Err(message)) = (kind == needed, shim) {
            bail!("{message}");
        }
    }
    let (py_shim, native_shim) = (py_shim.ok(), native_shim.ok());

    let pypy = resolved.file_name().is_some_and(|n| n.to_string_lossy().starts_with("pypy"));
    if let (true, Some(shim)) = (kind == TargetKind::Python || pypy, &py_shim) {
        check_python_version(&resolved, path_var.as_deref(), shim)?;
    }

    // Everything else the plan depends on. The Python runtime (`sitecustomize.py` and a link to
    // the shim) is a temporary directory, removed when `runtime` is dropped after the run.
    let cwd = std::env::current_dir().context("cannot read the current directory")?;
    let runtime = match &py_shim {
        Some(shim) => Some(python_runtime(shim)?),
        None => None,
    };
    // An ordinary native build is recorded by entry patching, on by default (a value the user
    // set is inherited as it is). A shell script or a system launcher (`sh -c`, `env`, `make`)
    // has nothing of its own to patch, but passes patching on to the programs it starts: the
    // shim patches those of the user's own and leaves system programs and Python interpreters
    // alone.
    let patch = match kind {
        TargetKind::Native => detect::patch_env(&resolved).is_some(),
        TargetKind::Other => std::env::var_os(plan::ENV_NATIVE_PATCH).is_none(),
        _ => false,
    };
    let detected = Detected {
        program: resolved,
        kind,
        patch,
        output: outdir::observe(&cwd.join(&opts.output)),
        cwd,
        pid: std::process::id(),
        shims: Shims { python_runtime: runtime.as_ref().map(|rt| rt.path().to_path_buf()), native: native_shim },
        inherited: Inherited { pythonpath: std::env::var_os("PYTHONPATH"), ld_preload: std::env::var_os("LD_PRELOAD") },
        start_unix_ms: now_unix_ms(),
    };
    let plan = Plan::build(&opts, &usage, &detected)?;
    execute(&opts, &plan, runtime)
}

/// Carry out a plan: set up the trace directory and write the first `meta.json`, run the target
/// (`launch.rs`), then finish the trace and report; returns the exit code for `trace` (or does
/// not return: when the target died by a signal, `trace` dies by the same signal).
fn execute(opts: &RunOptions, plan: &Plan, runtime: Option<tempfile::TempDir>) -> Result<i32> {
    let output = Output::prepare(&plan.output)?;
    let out = output.rec.clone();
    // Held until `trace` ends: readers of the directory say it is still being recorded
    // (trace_format::lock), and a second `trace run -o` into it is refused.
    let _recording = match trace_format::lock::try_lock(&out) {
        Ok(l) => l,
        Err(e) if trace_format::lock::is_busy(&e) => bail!(
            "{}: another `trace run` is recording into this directory now; wait for it to end or choose another -o",
            plan.output.out.display()
        ),
        Err(e) => return Err(anyhow::Error::new(e).context(format!("cannot open the trace directory {}", out.display()))),
    };
    let mut meta = plan.meta.clone();
    write_json_atomic(&out.join(META_FILE), &meta)?;
    crate::probe_lists::write(plan, &out);
    let (inline, lines) = (crate::probe_lists::inline_wanted(plan), crate::probe_lists::lines_wanted(plan));
    // The lists of the libraries the run loads by `dlopen`, and of the programs it starts (their
    // executables and libraries), are asked for during the run.
    let lists = (inline || lines)
        .then(|| crate::dlopened::serve(&out, inline, lines))
        .and_then(|s| s.map_err(|e| eprintln!("trace: cannot listen for the libraries loaded by dlopen ({e}); they get no probes")).ok());
    let mut plan = plan.clone();
    let socket = lists.as_ref().map_or(EnvChange::Remove, |s| EnvChange::Set(s.socket().into()));
    plan.env.push((trace_format::probes::ENV_LISTS_SOCKET, socket));
    let plan = &plan;
    let reserve = outdir::reserve_space(&out);

    let outcome = match launch::spawn_and_wait(plan) {
        Ok(o) => o,
        Err(LaunchError::Spawn(e)) => {
            if let Some(r) = &reserve {
                let _ = std::fs::remove_file(r);
            }
            output.discard();
            return Err(spawn_failure(&plan.program, &e).into());
        }
        Err(LaunchError::Wait(e)) => return Err(anyhow::Error::new(e).context("cannot wait for the target")),
        Err(LaunchError::Stopped(sig)) => {
            drop(runtime);
            return stopped_before_start(opts, &output, meta, reserve, sig);
        }
    };
    drop(runtime);

    let exit = outcome.exit;
    meta.end_unix_ms = Some(now_unix_ms());
    meta.duration_ns = Some(outcome.duration.as_nanos() as u64);
    meta.exit = Some(exit);
    meta.stopped = outcome.stopped;
    if let Some(r) = &reserve {
        let _ = std::fs::remove_file(r);
    }

    // Every request taken is answered first: the list files are final.
    if let Some(s) = lists {
        s.stop();
    }
    if inline {
        crate::dlopened::after_run(&out);
    }
    let finished = finish_trace(&out, &mut meta);
    if let Some(note) = stop_note(&opts.command[0], outcome.stopped) {
        eprintln!("{note}");
    } else if let Some(note) = exit.signal.and_then(|sig| death_note(&opts.command[0], sig)) {
        eprintln!("{note}");
    }
    settle(&output, finished, &meta, opts, &plan.program)?;
    if let Some(sig) = exit.signal {
        launch::die_by_signal(sig);
    }
    Ok(exit.code.unwrap_or(1))
}

/// `trace` was asked to stop (`sig`) before the program started: it is not started, and the
/// trace says so: `meta.json` with `"stopped"` and no exit status, an empty `sources.json`, no
/// process (over an earlier trace, that one is kept). Then `trace` ends by that signal.
fn stopped_before_start(opts: &RunOptions, output: &Output, mut meta: TraceMeta, reserve: Option<PathBuf>, sig: i32) -> Result<i32> {
    if let Some(r) = &reserve {
        let _ = std::fs::remove_file(r);
    }
    meta.end_unix_ms = Some(now_unix_ms());
    meta.duration_ns = Some(0);
    meta.stopped = Some(trace_format::Stopped { signal: sig, killed: false });
    let finished = finish_trace(&output.rec, &mut meta);
    eprintln!(
        "trace: stopped by {} before {} was started; nothing was recorded",
        launch::signal_name(sig),
        opts.command[0].to_string_lossy()
    );
    if output.rec != output.out {
        output.discard();
        eprintln!("trace: the earlier trace in {} is kept", opts.output.display());
    } else if let Err(e) = finished {
        let _ = write_json_atomic(&output.rec.join(META_FILE), &meta);
        eprintln!("trace: warning: the trace in {} is incomplete: {e:#}", opts.output.display());
    }
    launch::die_by_signal(sig)
}

/// What `trace` says on stderr when the target died by `sig`: nothing for SIGPIPE (the reader
/// of its output, such as `head`, closed the pipe: normal in a pipeline, where shells say
/// nothing either, and the target's stderr stays as it is without `trace`).
fn death_note(program: &std::ffi::OsStr, sig: i32) -> Option<String> {
    (sig != libc::SIGPIPE).then(|| format!("trace: {} was killed by {}", program.to_string_lossy(), launch::signal_name(sig)))
}

/// The error of a program that could not be started, with the exit status a shell gives: 127
/// when it (or its script's `#!` interpreter) does not exist, 126 otherwise.
fn spawn_failure(program: &Path, e: &std::io::Error) -> ExitWith {
    let interp = detect::map_file(program).ok().and_then(|d| detect::shebang(&d));
    match (e.kind(), interp) {
        (std::io::ErrorKind::NotFound, Some(sb)) => ExitWith {
            code: 127,
            message: format!("{}: cannot run: its #! interpreter {:?} does not exist", program.display(), sb.interpreter),
        },
        (std::io::ErrorKind::NotFound, None) => ExitWith { code: 127, message: format!("{}: cannot run: {e}", program.display()) },
        _ => ExitWith { code: 126, message: format!("{}: cannot run: {e}", program.display()) },
    }
}

/// What `trace` says on stderr when it was asked to stop the run.
fn stop_note(program: &std::ffi::OsStr, stopped: Option<trace_format::Stopped>) -> Option<String> {
    let s = stopped?;
    let how =
        if s.killed { format!("it did not end within {} s and was killed (SIGKILL)", launch::GRACE_SECS) } else { "it ended".to_string() };
    Some(format!(
        "trace: stopped by {}: forwarded to {}, {how}; the trace is partial",
        launch::signal_name(s.signal),
        program.to_string_lossy()
    ))
}

/// Put the finished recording in place of an earlier trace (or keep the earlier one when the
/// run recorded nothing) and say what was recorded.
fn settle(output: &Output, finished: Result<stats::Summary>, meta: &TraceMeta, opts: &RunOptions, program: &Path) -> Result<()> {
    let shown = &opts.output;
    // A system program that recorded nothing: also why `SLICE_TRACE_PATCH=all` would not help.
    let why = |s: &stats::Summary| match (meta.target_kind == "other").then(|| detect::stripped_note(program)).flatten() {
        Some(stripped) => format!("{}; {stripped}", s.why_nothing(meta)),
        None => s.why_nothing(meta),
    };
    match finished {
        Ok(s) if s.processes == 0 && output.rec != output.out => {
            output.discard();
            eprintln!("{NOTHING_RECORDED} ({}); the earlier trace in {} is kept", why(&s), shown.display());
        }
        Ok(s) => {
            output.commit()?;
            if let Some(why) = &meta.incomplete {
                eprintln!("trace: warning: the trace in {} is incomplete: {why}", shown.display());
            }
            if s.events == 0 {
                eprintln!("{NOTHING_RECORDED} in {} ({})", shown.display(), why(&s));
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
            let _ = write_json_atomic(&output.rec.join(META_FILE), meta);
            if output.recorded_any() {
                let _ = output.commit();
            } else {
                output.discard();
            }
            eprintln!("trace: warning: the trace in {} is incomplete: {e:#}", shown.display());
        }
    }
    Ok(())
}

/// Read the trace back once: mark it incomplete if a stream ran out of space, fingerprint its
/// sources, write `sources.json` and the final `meta.json`, and count what it holds.
fn finish_trace(out: &Path, meta: &mut TraceMeta) -> Result<stats::Summary> {
    let native_ext = meta.options.get("native_ext").and_then(|v| v.as_bool()) == Some(true);
    if native_ext {
        for w in trace_format::pyext::merge_extension_processes(out) {
            eprintln!("trace: {w}");
        }
    }
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
    // Per native object, the offsets (from its load address) of the functions recorded
    // without a symbol name: named from its symbol table below.
    let mut unnamed: std::collections::BTreeMap<String, BTreeSet<u64>> = std::collections::BTreeMap::new();
    for p in &trace.processes {
        for f in p.funcs.iter() {
            match &f.kind {
                FuncKind::Python { file, .. } if file.starts_with('/') => {
                    files.insert(file.clone());
                }
                FuncKind::Native { module, addr, base, symbol, .. } => {
                    modules.insert(module.clone());
                    if symbol.is_none() && !module.is_empty() {
                        unnamed.entry(module.clone()).or_default().insert(addr.wrapping_sub(*base));
                    }
                }
                _ => {}
            }
        }
    }
    // With --native-ext, the Python source beside each compiled extension module a Python
    // process imported (`black/linegen.py` beside `black/linegen.cpython-311-...so`): mypyc's
    // compiled functions are shown with it (analyzer/src/python/mypyc.rs).
    if native_ext {
        for p in &trace.processes {
            let Ok(Some(doc)) = p.extensions() else { continue };
            for m in &doc.modules {
                files.extend(python_source_beside(&m.file));
            }
        }
    }
    // The native objects, and the source files they were built from as their debug
    // information names them.
    files.extend(modules.iter().cloned());
    for m in &modules {
        for f in symbolize::files::dwarf_files(Path::new(&m)) {
            files.insert(f.to_string_lossy().into_owned());
        }
    }
    let mut buf = vec![0u8; 256 << 10];
    let cache = crate::fingerprint::cache_dir();
    let mut doc = SourcesDoc {
        files: files.iter().filter_map(|f| crate::fingerprint::fingerprint(Path::new(f), &mut buf, cache.as_deref())).collect(),
    };
    for fp in &mut doc.files {
        if let Some(offsets) = unnamed.get(&fp.path) {
            fp.symbols = recorded_symbols(Path::new(&fp.path), offsets);
        }
    }
    write_json_atomic(&out.join(SOURCES_FILE), &doc)?;
    let hooks: BTreeSet<&str> = trace.processes.iter().filter_map(|p| p.meta.hook.as_deref()).collect();
    meta.python_hooks = hooks.into_iter().map(String::from).collect();
    let summary = stats::summarize(&trace)?;
    trim_streams(&trace, &summary);
    write_json_atomic(&out.join(META_FILE), meta)?;
    Ok(summary)
}

/// The symbol names of the functions at `offsets` (from the load address) of the native
/// object at `path`, as its symbol table has them now, right after the run: what `slice` shows
/// for them if the object is rebuilt before the trace is read (docs/trace-format.md,
/// `sources.json`). Addresses no symbol holds are left out.
fn recorded_symbols(path: &Path, offsets: &BTreeSet<u64>) -> Vec<trace_format::RecordedSymbol> {
    let Ok(obj) = symbolize::functions::ObjectFile::open(path) else { return Vec::new() };
    let offsets: Vec<u64> = offsets.iter().copied().collect();
    let link: Vec<u64> = offsets.iter().map(|&o| obj.link_address(o, 0)).collect();
    offsets
        .into_iter()
        .zip(obj.symbol_names(&link))
        .filter_map(|(offset, name)| Some(trace_format::RecordedSymbol { offset, name: name? }))
        .collect()
}

/// The `.py` file beside an extension module (`.../black/linegen.py` of
/// `.../black/linegen.cpython-311-x86_64-linux-gnu.so`), if there is one.
fn python_source_beside(module_file: &str) -> Option<String> {
    let (dir, name) = module_file.rsplit_once('/')?;
    let stem = name.split('.').next().filter(|s| !s.is_empty())?;
    let py = format!("{dir}/{stem}.py");
    (module_file.starts_with('/') && Path::new(&py).is_file()).then_some(py)
}

/// Cut every stream its process left unclosed (killed, `_exit`, a thread still running at
/// `exit`) to its written part: a writer reserves its window ahead (`posix_fallocate`, up to
/// 4 MiB), and only a normal close cuts the file. One zero byte is kept after the last event,
/// the end marker, so readers still see the stream as unclosed. A stream whose process is
/// still alive (a daemon the program left running) is left alone: its writer may still write
/// through its mapping, and a page past the end of the file would kill it with SIGBUS.
fn trim_streams(trace: &TraceDir, summary: &stats::Summary) {
    for (p, ps) in trace.processes.iter().zip(&summary.procs) {
        if trace_format::pyext::process_alive(p.meta.pid) {
            continue;
        }
        for (t, ts) in p.threads.iter().zip(&ps.threads) {
            let Some(end) = ts.unclosed_end else { continue };
            if t.size > end + 1 && !trace_format::pyext::process_alive(t.header.pid) {
                if let Ok(f) = std::fs::OpenOptions::new().write(true).open(&t.path) {
                    let _ = f.set_len(end + 1);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_death_by_sigpipe_is_not_announced() {
        let p = std::ffi::OsStr::new("csvcut");
        assert_eq!(death_note(p, libc::SIGPIPE), None);
        assert_eq!(death_note(p, libc::SIGTERM).as_deref(), Some("trace: csvcut was killed by SIGTERM (15)"));
    }

    #[test]
    fn the_python_source_beside_an_extension_module_is_found() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("black");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("linegen.py"), "").unwrap();
        let so = |stem: &str| format!("{}/{stem}.cpython-311-x86_64-linux-gnu.so", dir.display());
        assert_eq!(python_source_beside(&so("linegen")), Some(format!("{}/linegen.py", dir.display())));
        assert_eq!(python_source_beside(&so("nodes")), None, "no nodes.py");
        assert_eq!(python_source_beside("linegen.cpython-311-x86_64-linux-gnu.so"), None, "not a path");
        std::fs::create_dir_all(dir.join("pkg.py")).unwrap();
        assert_eq!(python_source_beside(&so("pkg")), None, "a directory is no source");
    }
    /// Run `script` after loading the test recorder (the module `trace run` writes) as `m`;
    /// its stdout.
    fn with_recorder(script: &str) -> String {
        let code = format!("import types\nm = types.ModuleType('_slicetrace_tests')\nexec(compile({TESTS_RECORDER:?}, 'rec', 'exec'), m.__dict__)\n{script}");
        let out = std::process::Command::new("python3").arg("-c").arg(code).output().expect("python3 runs");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// A test's subtests: bounded in number (the rest counted) and in the length of their ids,
    /// the first failing ones whole and later ones cut to where and a line; the test fails when a subtest failed (errs when
    /// they only erred), unless it failed itself.
    #[test]
    fn the_test_recorder_bounds_subtests_and_a_failing_one_fails_its_test() {
        let out = with_recorder(
            "import json\n\
             rec = {'id': 't', 'outcome': 'passed'}\n\
             for i in range(m._SUBTESTS + 5):\n\
             \x20   m._add_subtest(rec, {'id': 't (i=%d)' % i, 'outcome': 'failed' if i % 2 else 'passed', \
             'failure': {'phase': 'call', 'message': 'one\\ntwo', 'report': 'E x', 'file': 'f.py', 'line': 3}, 'output': {'o': 'x'}})\n\
             m._subtests_verdict(rec)\n\
             subs = rec['subtests']\n\
             print(len(subs), rec['subtests_dropped'], rec['outcome'], rec['failure']['message'])\n\
             fails = [x for x in subs if x['outcome'] == 'failed']\n\
             print(json.dumps(fails[m._SUBTEST_FAILURES - 1], sort_keys=True))\n\
             print(json.dumps(fails[m._SUBTEST_FAILURES], sort_keys=True))\n\
             own = {'id': 'u', 'outcome': 'failed', 'failure': {'message': 'own'}}\n\
             m._add_subtest(own, {'id': 'u (a)', 'outcome': 'failed'})\n\
             m._subtests_verdict(own)\n\
             erred = {'id': 'v', 'outcome': 'passed'}\n\
             m._add_subtest(erred, {'id': 'v (b)', 'outcome': 'error'})\n\
             m._add_subtest(erred, {'id': 'v (c)', 'outcome': 'passed'})\n\
             m._subtests_verdict(erred)\n\
             print(own['outcome'], own['failure']['message'], erred['outcome'], erred['failure']['message'], sorted(erred))\n\
             long = {'id': 'w', 'outcome': 'passed'}\n\
             m._add_subtest(long, {'id': 'w [' + 'x' * 5000 + ']', 'outcome': 'passed'})\n\
             print(len(long['subtests'][0]['id']))\n",
        );
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines,
            [
                "200 5 failed contains 102 failed subtests",
                r#"{"failure": {"file": "f.py", "line": 3, "message": "one\ntwo", "phase": "call", "report": "E x"}, "id": "t (i=39)", "outcome": "failed", "output": {"o": "x"}}"#,
                r#"{"failure": {"file": "f.py", "line": 3, "message": "one", "phase": "call"}, "id": "t (i=41)", "outcome": "failed"}"#,
                "failed own error contains 1 failed subtest ['failure', 'id', 'outcome', 'subtests']",
                "1026",
            ]
        );
    }
}
