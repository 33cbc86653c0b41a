//! `_slicetrace`: the Python shim loaded by the `sitecustomize.py` that `trace run` puts on
//! `PYTHONPATH`. One stable-ABI (abi3) build loads into every CPython 3.9-3.15; the parts
//! that differ between versions are chosen at run time ([`runtime`]).
//!
//! - 3.12 and later: `sys.monitoring` with C callbacks ([`monitoring`]).
//! - 3.9 to 3.11: a frame-evaluation hook (PEP 523, [`evalframe`]; 3.11 only when its frame
//!   layout was read from the 3.11 headers at build time).
//! - Otherwise (`--python-hook profile`, `--c-calls` before 3.12, another frame-evaluation
//!   hook already installed): a C-level profile function, installed in the main thread at
//!   start-up and in every thread started later ([`profile`]).
//!
//! `_thread.start_new_thread` (and 3.13's `start_joinable_thread`) are wrapped so every thread
//! names its stream (and installs the profile function) before it runs Python code.
//!
//! Either way one compact binary event is written per call, resumption and return into a
//! per-thread stream ([`state`]). Each code object gets a dense id the first time it runs; its
//! `funcs.jsonl` record is written once ([`describe`]). The id is cached in the code object's
//! `co_extra` slot, so the hot path does no Python-level work and no hashing.
//!
//! Everything runs with the GIL held, except the thread-exit destructor (which only touches
//! the registry of streams under its own lock) and the fork handler ([`fork`]).

#![deny(unsafe_op_in_unsafe_fn)]

mod describe;
mod evalframe;
mod fork;
mod linetable;
mod linetrace;
mod linewatch;
mod monitoring;
mod profile;
mod runtime;
mod state;
mod testlines;
mod testscope;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyModule, PyTuple};
use state::{warn, GilCell};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use trace_format::{ENV_TRACE_DIR, ENV_TRACE_OPTIONS};

/// The CPython versions this shim supports. `trace run` reads this exported symbol from the
/// file (and passes it to `sitecustomize.py`, which warns about any other interpreter).
#[no_mangle]
#[used]
pub static SLICETRACE_PYTHON_VERSION: [u8; 16] = *b"3.9-3.15\0\0\0\0\0\0\0\0";

/// The original `_thread.start_new_thread`.
static ORIG_START_THREAD: GilCell<Option<Py<PyAny>>> = GilCell::new(None);
/// The original `_thread.start_joinable_thread` (3.13+, what `threading` uses there).
static ORIG_START_JOINABLE: GilCell<Option<Py<PyAny>>> = GilCell::new(None);
/// Threads install the profile hook (false: `sys.monitoring` covers every thread).
static PROFILE_MODE: AtomicBool = AtomicBool::new(false);
/// Threads install the line trace function ([`linetrace`]).
static LINE_TRACE_MODE: AtomicBool = AtomicBool::new(false);

/// Start recording in this process (called once by `sitecustomize`). Returns whether
/// recording started: it does not without `SLICE_TRACE_DIR`, nor in an unsupported interpreter.
#[pyfunction]
fn start(py: Python<'_>) -> PyResult<bool> {
    if state::recording(py) {
        return Ok(true);
    }
    let Some(root) = std::env::var_os(ENV_TRACE_DIR).filter(|v| !v.is_empty()) else { return Ok(false) };
    let options = std::env::var(ENV_TRACE_OPTIONS).unwrap_or_default();
    // With the native shim in the process (`trace run --native-ext`), one clock for both
    // shims' streams: its TSC calibration (trace_format::clock).
    trace_format::clock::share_preloaded();
    let has = |name: &str| options.split(',').any(|o| o.trim() == name);
    let c_calls = has("c_calls");
    let profile_only = has("profile_hook");
    let rt = match runtime::init(py, profile_only) {
        Ok(rt) => rt,
        Err(e) => {
            warn(&format!("{e}; running without recording"));
            return Ok(false);
        }
    };
    // Executed lines: asked for (`lines`, `no_lines`), else where they are cheap (3.12+: each
    // line reports once; before, a trace function runs on every executed line).
    let want_lines = has("lines") || (!has("no_lines") && rt.minor >= 12);
    testlines::ASKED.store(has("lines_per_test"), std::sync::atomic::Ordering::Relaxed);
    let proc = match state::open_process(py, Path::new(&root), c_calls, state::LineMode::Off, None) {
        Ok(p) => p,
        Err(e) => {
            warn(&format!("{e}; running without recording"));
            return Ok(false);
        }
    };
    // SAFETY: GIL held (a #[pyfunction]).
    unsafe {
        state::set_proc(Some(proc));
        pyo3::ffi::Py_AtExit(Some(state::finish_all));
    }
    fork::install();
    wrap_thread_start(py)?;
    // SAFETY: GIL held.
    unsafe { state::current(Some("MainThread")) };
    // The line mode is set once the hooks are in. Installing them runs no Python function,
    // and a code object described before would only lack `code_lines` (nothing of it is then
    // marked as not run): never the reverse.
    let mut lines_by_monitoring = false;
    let hook = if rt.monitoring && monitoring::install(py, monitoring::Events { calls: true, c_calls, lines: want_lines })? {
        lines_by_monitoring = want_lines;
        "monitoring"
    // SAFETY: GIL held (C calls are only reported to profile functions before 3.12).
    } else if !profile_only && !c_calls && unsafe { evalframe::install(rt.minor) } {
        // Frames already running were not entered through the hook and will not return
        // through it: they are not recorded.
        "evalframe"
    } else {
        PROFILE_MODE.store(true, Ordering::Relaxed);
        // SAFETY: GIL held.
        unsafe { profile::install() };
        "profile"
    };
    // SAFETY: GIL held.
    unsafe { state::record_hook(hook) };
    // Calls through the profile hook on 3.12+ (asked for, or our tool id was taken): lines
    // still come from `sys.monitoring` if it lets us in.
    if want_lines && !lines_by_monitoring && rt.minor >= 12 && !rt.monitoring {
        lines_by_monitoring = monitoring::install(py, monitoring::Events { calls: false, c_calls: false, lines: true })?;
    }
    let lines = if lines_by_monitoring {
        state::LineMode::Monitoring
    } else if want_lines && (rt.minor < 12 || has("lines")) {
        state::LineMode::Trace
    } else {
        state::LineMode::Off
    };
    fork::remember(Path::new(&root), c_calls, lines, hook);
    // SAFETY: GIL held.
    unsafe {
        state::with_proc(|p| p.lines = lines);
        if lines == state::LineMode::Trace {
            LINE_TRACE_MODE.store(true, Ordering::Relaxed);
            linetrace::install();
        }
        // Frames already running (site, this sitecustomize) will return through the
        // callbacks: give them their calls.
        if rt.monitoring || PROFILE_MODE.load(Ordering::Relaxed) {
            state::record_open_frames(py);
        }
    }
    Ok(true)
}

/// Replace `_thread.start_new_thread` (and `threading`'s copy of it, if already imported) so
/// that every new thread names its stream (and installs the profile hook) before it runs any
/// Python code.
fn wrap_thread_start(py: Python<'_>) -> PyResult<()> {
    let thread = py.import("_thread")?;
    let threading = py.import("sys")?.getattr("modules")?.get_item("threading").ok();
    let orig = thread.getattr("start_new_thread")?;
    let ours = wrap_pyfunction!(start_new_thread, &thread)?;
    // SAFETY: GIL held.
    unsafe { *ORIG_START_THREAD.get() = Some(orig.unbind()) };
    thread.setattr("start_new_thread", &ours)?;
    if let Some(t) = threading.as_ref().filter(|t| t.hasattr("_start_new_thread").unwrap_or(false)) {
        t.setattr("_start_new_thread", &ours)?;
    }
    if let Ok(orig) = thread.getattr("start_joinable_thread") {
        let ours = wrap_pyfunction!(start_joinable_thread, &thread)?;
        // SAFETY: GIL held.
        unsafe { *ORIG_START_JOINABLE.get() = Some(orig.unbind()) };
        thread.setattr("start_joinable_thread", &ours)?;
        if let Some(t) = threading.as_ref().filter(|t| t.hasattr("_start_joinable_thread").unwrap_or(false)) {
            t.setattr("_start_joinable_thread", &ours)?;
        }
    }
    Ok(())
}

/// Drop-in for `_thread.start_joinable_thread(function, handle=None, daemon=True)` (3.13+).
#[pyfunction]
#[pyo3(signature = (function, handle = None, daemon = true))]
fn start_joinable_thread(
    py: Python<'_>,
    function: Bound<'_, PyAny>,
    handle: Option<Bound<'_, PyAny>>,
    daemon: bool,
) -> PyResult<Py<PyAny>> {
    // SAFETY: GIL held; the reference is cloned before any call into CPython.
    let orig = unsafe { ORIG_START_JOINABLE.get().as_ref().map(|o| o.clone_ref(py)) };
    let Some(orig) = orig else {
        return Err(pyo3::exceptions::PyRuntimeError::new_err("_slicetrace: start_joinable_thread is not set up"));
    };
    let entry = wrap_pyfunction!(thread_entry, py)?;
    let empty = PyTuple::empty(py);
    let run = py.import("functools")?.getattr("partial")?.call1((entry, function, empty, py.None()))?;
    let kwargs = PyDict::new(py);
    kwargs.set_item("handle", handle)?;
    kwargs.set_item("daemon", daemon)?;
    orig.call(py, (run,), Some(&kwargs))
}

/// Drop-in for `_thread.start_new_thread(function, args[, kwargs])`.
#[pyfunction]
#[pyo3(signature = (function, args, kwargs = None))]
fn start_new_thread(
    py: Python<'_>,
    function: Bound<'_, PyAny>,
    args: Bound<'_, PyAny>,
    kwargs: Option<Bound<'_, PyAny>>,
) -> PyResult<Py<PyAny>> {
    // SAFETY: GIL held; the reference is cloned before any call into CPython.
    let orig = unsafe { ORIG_START_THREAD.get().as_ref().map(|o| o.clone_ref(py)) };
    let Some(orig) = orig else { return Err(pyo3::exceptions::PyRuntimeError::new_err("_slicetrace: start_new_thread is not set up")) };
    let entry = wrap_pyfunction!(thread_entry, py)?;
    let kwargs = kwargs.unwrap_or_else(|| py.None().into_bound(py));
    let packed = PyTuple::new(py, [function, args, kwargs])?;
    orig.call1(py, (entry, packed))
}

/// First (C) function of every new thread: start recording, then run the thread's function.
#[pyfunction]
fn thread_entry(function: Bound<'_, PyAny>, args: Bound<'_, PyAny>, kwargs: Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
    // `threading` starts threads with the bound method `Thread._bootstrap`: use its name. Read
    // `_name` (an instance attribute: no Python code runs), else the `name` property.
    let owner = function.getattr("__self__").ok();
    let name = owner.as_ref().and_then(|t| t.getattr("_name").or_else(|_| t.getattr("name")).ok()).and_then(|n| n.extract::<String>().ok());
    if state::recording(function.py()) {
        let name = name.as_deref().unwrap_or("Thread");
        // SAFETY: GIL held.
        unsafe {
            let existed = !state::CURRENT.with(|c| c.get()).is_null();
            if let (Some(rec), true) = (state::current(Some(name)), existed) {
                // Events were recorded (by the `name` property) before: name the stream from here.
                state::writer(rec).thread_name(name);
            }
            if PROFILE_MODE.load(Ordering::Relaxed) {
                profile::install();
            }
            if LINE_TRACE_MODE.load(Ordering::Relaxed) {
                linetrace::install();
            }
        }
    }
    let args = args.cast_into::<PyTuple>()?;
    let kwargs = if kwargs.is_none() { None } else { Some(kwargs.cast_into::<PyDict>()?) };
    Ok(function.call(args, kwargs.as_ref())?.unbind())
}

/// Tell whether this process is recording (for tests and `sitecustomize`).
#[pyfunction]
fn recording(py: Python<'_>) -> bool {
    state::recording(py)
}

/// The directory this process records into (`<trace>/p<pid>[.<n>]`), or `None` when it does not
/// record. The test-runner plugins (`tracer/src/slicetrace_tests.py`) write `tests.jsonl` there.
#[pyfunction]
fn process_dir(py: Python<'_>) -> Option<std::path::PathBuf> {
    let _ = py;
    // SAFETY: GIL held (a #[pyfunction] holds it: `py` is its token).
    unsafe { state::with_proc(|p| p.dir.clone()) }
}

#[pymodule]
#[pyo3(name = "_slicetrace")]
fn slicetrace_module(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(start, m)?)?;
    m.add_function(wrap_pyfunction!(fork::after_fork_child, m)?)?;
    m.add_function(wrap_pyfunction!(recording, m)?)?;
    m.add_function(wrap_pyfunction!(process_dir, m)?)?;
    m.add_function(wrap_pyfunction!(testlines::test_begins, m)?)?;
    Ok(())
}
