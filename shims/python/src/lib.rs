//! `_slicetrace`: the Python shim loaded by the `sitecustomize.py` that `trace run` puts on
//! `PYTHONPATH`.
//!
//! It installs a C-level profile function (`PyEval_SetProfile`, no Python-level callback) in
//! the main thread at start-up and in every thread started later (it wraps
//! `_thread.start_new_thread`, which `threading` uses), and writes one compact binary event per
//! call and return into a per-thread stream (`trace_format::writer::StreamWriter`). Each code
//! object gets a dense id the first time it runs; its `funcs.jsonl` record is written once,
//! before the first event that uses the id. The id is cached in the code object's `co_extra`
//! slot, so the hot path does no Python-level work and no hashing.
//!
//! Everything in this module runs with the GIL held, except the thread-exit destructor, which
//! only touches the registry of streams under its own lock.

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyModule, PyTuple};
use std::cell::{Cell, UnsafeCell};
use std::collections::HashMap;
use std::ffi::{c_int, c_void, CStr};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use trace_format::event::FLAG_PYTHON;
use trace_format::writer::{gettid, monotonic_ns, stream_file_name, FuncTableWriter, ProcessFiles, StreamWriter, DEFAULT_WINDOW};
use trace_format::{FuncKind, FuncRecord, ENV_TRACE_DIR, ENV_TRACE_OPTIONS, FUNCS_FILE};

/// The CPython `major.minor` this shim was compiled for. `trace run` reads this exported
/// symbol from the file to refuse other versions before anything loads the shim.
#[no_mangle]
#[used]
pub static SLICETRACE_PYTHON_VERSION: [u8; 16] = version_bytes(env!("SLICETRACE_PY_VERSION"));

const fn version_bytes(s: &str) -> [u8; 16] {
    let b = s.as_bytes();
    let mut out = [0u8; 16];
    let mut i = 0;
    while i < b.len() && i < 15 {
        out[i] = b[i];
        i += 1;
    }
    out
}

/// A cell for state that is only touched with the GIL held (which serialises all access).
struct GilCell<T>(UnsafeCell<T>);
// SAFETY: every access happens with the GIL held; see the module comment.
unsafe impl<T> Sync for GilCell<T> {}

impl<T> GilCell<T> {
    /// # Safety
    /// The caller holds the GIL and does not keep the reference across calls that could
    /// re-enter the shim.
    #[allow(clippy::mut_from_ref)]
    unsafe fn get(&self) -> &mut T {
        &mut *self.0.get()
    }
}

/// Per-process recording state.
struct Proc {
    pid: u32,
    funcs: FuncTableWriter,
    dir: PathBuf,
    cwd: PathBuf,
    next_id: u32,
    /// Bumped in a forked child: ids cached in `co_extra` by an earlier generation are stale.
    generation: u32,
    thread_seq: u32,
    c_calls: bool,
    /// Recording through the frame-evaluation hook (PEP 523) rather than the profile hook.
    eval_hook: bool,
    /// C functions seen so far (with `c_calls`), by `PyMethodDef` address.
    cfuncs: HashMap<usize, u32>,
}

static PROC: GilCell<Option<Proc>> = GilCell(UnsafeCell::new(None));
/// Index of our slot in every code object's `co_extra`.
static CODE_EXTRA: GilCell<ffi::Py_ssize_t> = GilCell(UnsafeCell::new(-1));
/// The original `_thread.start_new_thread`.
static ORIG_START_THREAD: GilCell<Option<Py<PyAny>>> = GilCell(UnsafeCell::new(None));

/// One thread's stream. Written only by its thread (with the GIL held); finished by the
/// thread's exit destructor or by the process exit handler, under the registry lock.
struct ThreadRec {
    pid: u32,
    writer: UnsafeCell<StreamWriter>,
}

struct Registry(UnsafeCell<Vec<*mut ThreadRec>>);
// SAFETY: the vector is only touched while REGISTRY_LOCK is held.
unsafe impl Sync for Registry {}
static REGISTRY: Registry = Registry(UnsafeCell::new(Vec::new()));
/// A spin lock rather than a `Mutex` so that a forked child (single-threaded) can reset it
/// even if another thread of the parent held it at the time of the fork.
static REGISTRY_LOCK: AtomicBool = AtomicBool::new(false);

fn with_registry<R>(f: impl FnOnce(&mut Vec<*mut ThreadRec>) -> R) -> R {
    while REGISTRY_LOCK.compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed).is_err() {
        std::thread::yield_now();
    }
    // SAFETY: we hold the lock.
    let r = f(unsafe { &mut *REGISTRY.0.get() });
    REGISTRY_LOCK.store(false, Ordering::Release);
    r
}

/// Finishes the thread's stream when the thread exits.
struct ExitGuard;
impl Drop for ExitGuard {
    fn drop(&mut self) {
        let rec = CURRENT.with(|c| c.replace(std::ptr::null_mut()));
        if rec.is_null() {
            return;
        }
        with_registry(|reg| {
            if let Some(i) = reg.iter().position(|&r| r == rec) {
                reg.swap_remove(i);
                // SAFETY: the record was leaked from a Box by `new_thread_rec` and is now
                // unreachable from the registry and from this thread.
                unsafe { drop(Box::from_raw(rec)) };
            }
        });
    }
}

thread_local! {
    static CURRENT: Cell<*mut ThreadRec> = const { Cell::new(std::ptr::null_mut()) };
    static GUARD: ExitGuard = const { ExitGuard };
}

/// The current thread's stream, created on first use.
///
/// # Safety
/// GIL held.
#[inline(always)]
unsafe fn current_writer(name: Option<&str>) -> Option<&'static mut StreamWriter> {
    let rec = CURRENT.with(|c| c.get());
    if !rec.is_null() {
        return Some(&mut *(*rec).writer.get());
    }
    new_thread_rec(name)
}

#[cold]
#[inline(never)]
unsafe fn new_thread_rec(name: Option<&str>) -> Option<&'static mut StreamWriter> {
    let proc = PROC.get().as_mut()?;
    let tid = gettid();
    let seq = proc.thread_seq;
    proc.thread_seq += 1;
    let path = proc.dir.join(stream_file_name(tid, seq));
    let mut w = match StreamWriter::create(&path, FLAG_PYTHON, proc.pid, tid, monotonic_ns(), DEFAULT_WINDOW) {
        Ok(w) => w,
        Err(e) => {
            warn(&format!("cannot create {}: {e}; this thread is not recorded", path.display()));
            return None;
        }
    };
    let name = match name {
        Some(n) => n.to_string(),
        None if libc::getpid() as u64 == tid => "MainThread".to_string(),
        None => format!("Thread-{tid}"),
    };
    w.thread_name(&name);
    let rec = Box::into_raw(Box::new(ThreadRec { pid: proc.pid, writer: UnsafeCell::new(w) }));
    with_registry(|reg| reg.push(rec));
    CURRENT.with(|c| c.set(rec));
    // Touch the guard so its destructor runs at thread exit.
    GUARD.with(|_| {});
    Some(&mut *(*rec).writer.get())
}

/// A warning on stderr. Never `eprintln!`: it panics when stderr fails (a closed pipe), and
/// this runs inside the C hooks, where a panic aborts the traced program.
fn warn(msg: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "trace: {msg}");
}

/// `co_extra` holds a plain integer, nothing to free.
unsafe extern "C" fn free_extra(_: *mut c_void) {}

/// Id of a code object, assigning one (and writing its record) the first time.
///
/// # Safety
/// GIL held; `code` is a live code object.
#[inline(always)]
unsafe fn code_id(proc: &mut Proc, code: *mut ffi::PyObject) -> Option<u32> {
    let idx = *CODE_EXTRA.get();
    let mut extra: *mut c_void = std::ptr::null_mut();
    if idx >= 0 && ffi::PyUnstable_Code_GetExtra(code, idx, &mut extra) == 0 {
        let v = extra as usize as u64;
        if v != 0 && (v >> 32) as u32 == proc.generation {
            return Some((v & 0xffff_ffff) as u32 - 1);
        }
    } else {
        ffi::PyErr_Clear();
    }
    new_code_id(proc, code, idx)
}

#[cold]
#[inline(never)]
unsafe fn new_code_id(proc: &mut Proc, code: *mut ffi::PyObject, idx: ffi::Py_ssize_t) -> Option<u32> {
    let py = Python::assume_attached();
    let code_obj = Bound::from_borrowed_ptr(py, code);
    let id = proc.next_id;
    let kind = describe_code(&code_obj, &proc.cwd);
    if let Err(e) = proc.funcs.append(&FuncRecord { id, kind }) {
        warn(&format!("cannot write {}: {e}", proc.dir.join(FUNCS_FILE).display()));
        return None;
    }
    proc.next_id += 1;
    if idx >= 0 {
        let v = ((proc.generation as u64) << 32) | (id as u64 + 1);
        if ffi::PyUnstable_Code_SetExtra(code, idx, v as usize as *mut c_void) != 0 {
            ffi::PyErr_Clear();
        }
    }
    Some(id)
}

fn describe_code(code: &Bound<'_, PyAny>, cwd: &Path) -> FuncKind {
    let s = |attr: &str| code.getattr(attr).and_then(|v| v.extract::<String>()).unwrap_or_default();
    let name = s("co_name");
    let mut qualname = s("co_qualname");
    if qualname.is_empty() {
        qualname = name.clone();
    }
    let first_line = code.getattr("co_firstlineno").and_then(|v| v.extract::<u32>()).unwrap_or(0);
    let table = code.getattr("co_linetable").ok();
    let parsed = table.as_ref().and_then(|t| t.cast::<PyBytes>().ok()).and_then(|t| last_line_of(t.as_bytes(), first_line));
    let last_line = parsed.unwrap_or_else(|| last_line_from_co_lines(code, first_line));
    if cfg!(debug_assertions) {
        // Debug builds (the tests) check the fast path against `co_lines()`.
        let slow = last_line_from_co_lines(code, first_line);
        if parsed != Some(slow) {
            warn(&format!("internal: last line of {qualname} from co_linetable is {parsed:?}, co_lines says {slow}"));
        }
    }
    FuncKind::Python { file: absolute_file(&s("co_filename"), cwd), qualname, name, first_line, last_line }
}

/// The largest line `co_lines()` reports, computed from the location table (`co_linetable`,
/// CPython 3.11's format, `Objects/locations.md`) without creating a Python object per entry:
/// describing a function this way costs a few hundred instructions instead of tens of
/// thousands. `None` if the table is malformed.
fn last_line_of(table: &[u8], first_line: u32) -> Option<u32> {
    fn varint(t: &[u8], i: &mut usize) -> Option<u64> {
        let mut v = 0u64;
        let mut shift = 0;
        loop {
            let b = *t.get(*i)?;
            *i += 1;
            v |= ((b & 63) as u64) << shift;
            if b & 64 == 0 {
                return Some(v);
            }
            shift += 6;
            if shift > 60 {
                return None;
            }
        }
    }
    fn svarint(t: &[u8], i: &mut usize) -> Option<i64> {
        let v = varint(t, i)?;
        Some(if v & 1 != 0 { -((v >> 1) as i64) } else { (v >> 1) as i64 })
    }
    let mut line = first_line as i64;
    let mut last = first_line as i64;
    let mut i = 0;
    while i < table.len() {
        let head = table[i];
        if head & 0x80 == 0 {
            return None;
        }
        i += 1;
        let code = (head >> 3) & 15;
        match code {
            0..=9 => i += 1,
            10..=12 => {
                line += (code - 10) as i64;
                i += 2;
            }
            13 => line += svarint(table, &mut i)?,
            14 => {
                line += svarint(table, &mut i)?;
                varint(table, &mut i)?;
                varint(table, &mut i)?;
                varint(table, &mut i)?;
            }
            _ => continue, // 15: no location (co_lines reports None)
        }
        last = last.max(line);
    }
    (i == table.len()).then(|| u32::try_from(last).ok()).flatten()
}

/// The slow way (a Python tuple per entry), for tables [`last_line_of`] does not understand.
fn last_line_from_co_lines(code: &Bound<'_, PyAny>, first_line: u32) -> u32 {
    let mut last_line = first_line;
    if let Ok(lines) = code.call_method0("co_lines").and_then(|l| l.try_iter()) {
        for item in lines.flatten() {
            if let Ok(Some(line)) = item.get_item(2).and_then(|l| l.extract::<Option<u32>>()) {
                last_line = last_line.max(line);
            }
        }
    }
    last_line
}

/// `co_filename` made absolute when it names an existing file relative to the start-up cwd.
fn absolute_file(file: &str, cwd: &Path) -> String {
    if file.is_empty() || file.starts_with('/') || file.starts_with('<') {
        return file.to_string();
    }
    let p = cwd.join(file);
    if p.exists() {
        p.to_string_lossy().into_owned()
    } else {
        file.to_string()
    }
}

/// Id of a C function (with `c_calls`), keyed by its `PyMethodDef`.
unsafe fn cfunc_id(proc: &mut Proc, func: *mut ffi::PyObject) -> Option<u32> {
    if ffi::PyCFunction_Check(func) == 0 {
        return None;
    }
    let cf = func as *mut ffi::PyCFunctionObject;
    let ml = (*cf).m_ml;
    if ml.is_null() {
        return None;
    }
    if let Some(&id) = proc.cfuncs.get(&(ml as usize)) {
        return Some(id);
    }
    let py = Python::assume_attached();
    let name = if (*ml).ml_name.is_null() { "?".to_string() } else { CStr::from_ptr((*ml).ml_name).to_string_lossy().into_owned() };
    let m_self = (*cf).m_self;
    let (module, qualname) = if !m_self.is_null() && ffi::PyModule_Check(m_self) == 0 {
        // A method bound to an object: name it after the object's type.
        let ty = Bound::from_borrowed_ptr(py, m_self).get_type();
        let tq = ty.getattr("__qualname__").and_then(|v| v.extract::<String>()).unwrap_or_default();
        let tm = ty.getattr("__module__").and_then(|v| v.extract::<String>()).ok();
        (tm, format!("{tq}.{name}"))
    } else {
        let m = (*cf).m_module;
        let module =
            if !m.is_null() && ffi::PyUnicode_Check(m) != 0 { Bound::from_borrowed_ptr(py, m).extract::<String>().ok() } else { None };
        (module, name)
    };
    let id = proc.next_id;
    if let Err(e) = proc.funcs.append(&FuncRecord { id, kind: FuncKind::Builtin { module, qualname } }) {
        warn(&format!("cannot write {}: {e}", proc.dir.join(FUNCS_FILE).display()));
        return None;
    }
    proc.next_id += 1;
    proc.cfuncs.insert(ml as usize, id);
    Some(id)
}

/// The profile function: called by CPython with the GIL held for every call and return.
unsafe extern "C" fn profile(_obj: *mut ffi::PyObject, frame: *mut ffi::PyFrameObject, what: c_int, arg: *mut ffi::PyObject) -> c_int {
    match what {
        ffi::PyTrace_CALL => {
            let ts = monotonic_ns();
            let Some(proc) = PROC.get().as_mut() else { return 0 };
            let code = ffi::PyFrame_GetCode(frame) as *mut ffi::PyObject;
            if code.is_null() {
                ffi::PyErr_Clear();
                return 0;
            }
            let id = code_id(proc, code);
            ffi::Py_DECREF(code);
            if let (Some(id), Some(w)) = (id, current_writer(None)) {
                w.call(id, ts);
            }
        }
        ffi::PyTrace_RETURN => {
            let ts = monotonic_ns();
            if let Some(w) = current_writer(None) {
                w.ret(ts);
            }
        }
        ffi::PyTrace_C_CALL => {
            let Some(proc) = PROC.get().as_mut() else { return 0 };
            if !proc.c_calls {
                return 0;
            }
            let ts = monotonic_ns();
            if let (Some(id), Some(w)) = (cfunc_id(proc, arg), current_writer(None)) {
                w.call(id, ts);
            }
        }
        ffi::PyTrace_C_RETURN | ffi::PyTrace_C_EXCEPTION => {
            let Some(proc) = PROC.get().as_ref() else { return 0 };
            let ts = monotonic_ns();
            if proc.c_calls && ffi::PyCFunction_Check(arg) != 0 && !(*(arg as *mut ffi::PyCFunctionObject)).m_ml.is_null() {
                if let Some(w) = current_writer(None) {
                    w.ret(ts);
                }
            }
        }
        _ => {}
    }
    0
}

extern "C" {
    /// CPython's own frame evaluator (exported by 3.11's `cpython/ceval.h`).
    fn _PyEval_EvalFrameDefault(
        tstate: *mut ffi::PyThreadState,
        frame: *mut ffi::_PyInterpreterFrame,
        throwflag: c_int,
    ) -> *mut ffi::PyObject;
}

/// Index of `f_code` among the leading pointer fields of CPython 3.11's `_PyInterpreterFrame`
/// (`f_func, f_globals, f_builtins, f_locals, f_code, ...`, `internal/pycore_frame.h`). The
/// shim is built for one `major.minor` and `trace run` refuses any other, so the layout is fixed.
const FRAME_CODE_SLOT: usize = 4;

/// Byte offset of `char owner` in 3.11's `_PyInterpreterFrame` (after its 8 pointers,
/// `int stacktop` and `bool is_entry`), and its value for a frame on the thread's stack.
const FRAME_OWNER_OFFSET: usize = 69;
const FRAME_OWNED_BY_THREAD: u8 = 0;
/// Byte offset of `int co_flags` in 3.11's `PyCodeObject`.
const CODE_FLAGS_OFFSET: usize = 48;
/// `CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR`.
const CO_GENERATOR_LIKE: c_int = 0x20 | 0x80 | 0x200;

/// Calling a generator (coroutine, async generator) function evaluates its frame once on the
/// thread's stack, to create the generator object (`RETURN_GENERATOR`) before any of its body
/// runs; its resumptions evaluate the frame the generator owns. A profile function sees no
/// call for the creation: neither does the hook, so both record the same calls.
unsafe fn creates_generator(frame: *mut ffi::_PyInterpreterFrame, code: *mut ffi::PyObject) -> bool {
    *(frame as *const u8).add(FRAME_OWNER_OFFSET) == FRAME_OWNED_BY_THREAD
        && (code as *const u8).add(CODE_FLAGS_OFFSET).cast::<c_int>().read_unaligned() & CO_GENERATOR_LIKE != 0
}

/// The frame-evaluation hook (PEP 523): every Python frame, including generator and coroutine
/// resumptions, is evaluated through it, so one call event before and one return event after
/// `_PyEval_EvalFrameDefault` record it. Unlike a profile function it leaves CPython's
/// specialising interpreter on and materialises no frame objects.
unsafe extern "C" fn eval_frame(
    tstate: *mut ffi::PyThreadState,
    frame: *mut ffi::_PyInterpreterFrame,
    throwflag: c_int,
) -> *mut ffi::PyObject {
    let code = *(frame as *mut *mut ffi::PyObject).add(FRAME_CODE_SLOT);
    if creates_generator(frame, code) {
        return _PyEval_EvalFrameDefault(tstate, frame, throwflag);
    }
    let recorded = match PROC.get().as_mut() {
        Some(proc) => match (code_id_keeping_error(proc, code, throwflag != 0), current_writer(None)) {
            (Some(id), Some(w)) => {
                w.call(id, monotonic_ns());
                true
            }
            _ => false,
        },
        None => false,
    };
    let result = _PyEval_EvalFrameDefault(tstate, frame, throwflag);
    if recorded {
        // The stream may have been closed (a fork, the process exit) while the frame ran:
        // look the writer up again.
        if let Some(w) = current_writer(None) {
            w.ret(monotonic_ns());
        }
    }
    result
}

/// [`code_id`] for a frame resumed to raise (a generator's `throw`/`close`): the pending
/// exception is set aside while a new function is described (which calls into Python) and put
/// back for the frame to raise.
unsafe fn code_id_keeping_error(proc: &mut Proc, code: *mut ffi::PyObject, throwing: bool) -> Option<u32> {
    if !throwing {
        return code_id(proc, code);
    }
    let (mut t, mut v, mut tb) = (std::ptr::null_mut(), std::ptr::null_mut(), std::ptr::null_mut());
    ffi::PyErr_Fetch(&mut t, &mut v, &mut tb);
    let id = code_id(proc, code);
    ffi::PyErr_Restore(t, v, tb);
    id
}

/// Whether the frame-evaluation hook can be used: nobody else (a debugger, a JIT) installed one.
unsafe fn eval_hook_free() -> bool {
    let interp = ffi::PyInterpreterState_Get();
    let current = ffi::_PyInterpreterState_GetEvalFrameFunc(interp);
    current as *const () == _PyEval_EvalFrameDefault as *const ()
}

/// Record a call for every frame already on the current thread's stack (outermost first),
/// so the returns that follow have matching calls.
unsafe fn record_open_frames(py: Python<'_>) {
    let Some(proc) = PROC.get().as_mut() else { return };
    let mut codes = Vec::new();
    let mut f = ffi::PyEval_GetFrame();
    if !f.is_null() {
        ffi::Py_INCREF(f as *mut ffi::PyObject);
    }
    while !f.is_null() {
        let code = ffi::PyFrame_GetCode(f) as *mut ffi::PyObject;
        if !code.is_null() {
            codes.push(Bound::from_owned_ptr(py, code));
        }
        let back = ffi::PyFrame_GetBack(f);
        ffi::Py_DECREF(f as *mut ffi::PyObject);
        f = back;
    }
    let ts = monotonic_ns();
    for code in codes.iter().rev() {
        if let (Some(id), Some(w)) = (code_id(proc, code.as_ptr()), current_writer(None)) {
            w.call(id, ts);
        }
    }
}

fn runtime_name(py: Python<'_>) -> String {
    let v = py.version_info();
    format!("CPython {}.{}.{}", v.major, v.minor, v.patch)
}

/// Create this process's directory and function table.
fn open_process(
    py: Python<'_>,
    root: &Path,
    c_calls: bool,
    eval_hook: bool,
    generation: u32,
    forked_from: Option<u32>,
) -> Result<Proc, String> {
    let files = ProcessFiles::create(root, "python", &runtime_name(py), forked_from)
        .map_err(|e| format!("{e} (check that the trace directory {} is writable)", root.display()))?;
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    Ok(Proc {
        pid: files.meta.pid,
        funcs: files.funcs,
        dir: files.dir,
        cwd,
        next_id: 0,
        generation,
        thread_seq: 0,
        c_calls,
        eval_hook,
        cfuncs: HashMap::new(),
    })
}

/// Start recording in this process (called once by `sitecustomize`). Returns whether
/// recording started: it does not without `SLICE_TRACE_DIR`.
#[pyfunction]
fn start(py: Python<'_>) -> PyResult<bool> {
    // SAFETY: we hold the GIL (a #[pyfunction]).
    unsafe {
        if PROC.get().is_some() {
            return Ok(true);
        }
        let Some(root) = std::env::var_os(ENV_TRACE_DIR).filter(|v| !v.is_empty()) else { return Ok(false) };
        let options = std::env::var(ENV_TRACE_OPTIONS).unwrap_or_default();
        let has = |name: &str| options.split(',').any(|o| o.trim() == name);
        let c_calls = has("c_calls");
        // C calls are only reported to profile functions; `profile_hook` forces the profile
        // function (for comparisons).
        let eval_hook = !c_calls && !has("profile_hook") && eval_hook_free();
        let proc = match open_process(py, Path::new(&root), c_calls, eval_hook, 1, None) {
            Ok(p) => p,
            Err(e) => {
                warn(&format!("{e}; running without recording"));
                return Ok(false);
            }
        };
        *CODE_EXTRA.get() = ffi::PyUnstable_Eval_RequestCodeExtraIndex(free_extra);
        *PROC.get() = Some(proc);
        ffi::Py_AtExit(Some(finish_all));
        wrap_thread_start(py)?;
        current_writer(Some("MainThread"));
        if eval_hook {
            // Frames already running (site, this sitecustomize) were not entered through the
            // hook and will not return through it: they are not recorded.
            ffi::_PyInterpreterState_SetEvalFrameFunc(ffi::PyInterpreterState_Get(), Some(eval_frame));
        } else {
            ffi::PyEval_SetProfile(Some(profile), std::ptr::null_mut());
            record_open_frames(py);
        }
    }
    Ok(true)
}

/// Replace `_thread.start_new_thread` (and `threading`'s copy of it, if already imported) so
/// that every new thread installs the profile function before it runs any Python code.
fn wrap_thread_start(py: Python<'_>) -> PyResult<()> {
    let thread = py.import("_thread")?;
    let orig = thread.getattr("start_new_thread")?;
    let ours = wrap_pyfunction!(start_new_thread, &thread)?;
    // SAFETY: GIL held.
    unsafe { *ORIG_START_THREAD.get() = Some(orig.unbind()) };
    thread.setattr("start_new_thread", &ours)?;
    if let Ok(threading) = py.import("sys")?.getattr("modules")?.get_item("threading") {
        if threading.hasattr("_start_new_thread")? {
            threading.setattr("_start_new_thread", &ours)?;
        }
    }
    Ok(())
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
    // SAFETY: GIL held.
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
    // `_name` (an instance attribute: no Python code runs, so with the frame-evaluation hook
    // nothing is recorded before the stream has its name), else the `name` property.
    let owner = function.getattr("__self__").ok();
    let name = owner.as_ref().and_then(|t| t.getattr("_name").or_else(|_| t.getattr("name")).ok()).and_then(|n| n.extract::<String>().ok());
    // SAFETY: GIL held.
    unsafe {
        if let Some(proc) = PROC.get().as_ref() {
            let eval_hook = proc.eval_hook;
            let name = name.as_deref().unwrap_or("Thread");
            let existed = !CURRENT.with(|c| c.get()).is_null();
            if let (Some(w), true) = (current_writer(Some(name)), existed) {
                // Events were recorded (by the `name` property) before: name the stream from here.
                w.thread_name(name);
            }
            if !eval_hook {
                ffi::PyEval_SetProfile(Some(profile), std::ptr::null_mut());
            }
        }
    }
    let args = args.cast_into::<PyTuple>()?;
    let kwargs = if kwargs.is_none() { None } else { Some(kwargs.cast_into::<PyDict>()?) };
    Ok(function.call(args, kwargs.as_ref())?.unbind())
}

/// `os.register_at_fork(after_in_child=...)`: the child gets its own process directory,
/// function ids and streams; the parent's are let go without touching their files.
#[pyfunction]
fn after_fork_child(py: Python<'_>) {
    // SAFETY: the child has a single thread, which holds the GIL.
    unsafe {
        let Some(old) = PROC.get().take() else { return };
        REGISTRY_LOCK.store(false, Ordering::Release);
        with_registry(|reg| {
            for rec in reg.drain(..) {
                (*(*rec).writer.get()).abandon();
                drop(Box::from_raw(rec));
            }
        });
        CURRENT.with(|c| c.set(std::ptr::null_mut()));
        let mut funcs = old.funcs;
        funcs.abandon();
        // Read the thread's name while no process state is set, so this is not recorded.
        let name = py
            .import("sys")
            .and_then(|s| s.getattr("modules"))
            .and_then(|m| m.get_item("threading"))
            .and_then(|t| t.call_method0("current_thread"))
            .and_then(|t| t.getattr("name"))
            .and_then(|n| n.extract::<String>())
            .ok();
        let root = old.dir.parent().map(Path::to_path_buf).unwrap_or_default();
        match open_process(py, &root, old.c_calls, old.eval_hook, old.generation.wrapping_add(1).max(1), Some(old.pid)) {
            Ok(p) => *PROC.get() = Some(p),
            Err(e) => {
                warn(&format!("{e}; the forked child is not recorded"));
                return;
            }
        }
        current_writer(Some(name.as_deref().unwrap_or("MainThread")));
        record_open_frames(py);
    }
}

/// Close every stream of this process (run by `Py_AtExit`, after the interpreter is done).
extern "C" fn finish_all() {
    // SAFETY: getpid cannot fail.
    let pid = unsafe { libc::getpid() } as u32;
    with_registry(|reg| {
        for &rec in reg.iter() {
            // SAFETY: records in the registry are live; a record of this process is only
            // written by its thread with the GIL held, and no Python code runs any more.
            unsafe {
                if (*rec).pid == pid {
                    (*(*rec).writer.get()).finish();
                }
            }
        }
    });
}

/// Flush nothing, but tell whether this process is recording (for tests and `sitecustomize`).
#[pyfunction]
fn recording() -> bool {
    // SAFETY: GIL held.
    unsafe { PROC.get().is_some() }
}

#[pymodule]
#[pyo3(name = "_slicetrace")]
fn slicetrace_module(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(start, m)?)?;
    m.add_function(wrap_pyfunction!(after_fork_child, m)?)?;
    m.add_function(wrap_pyfunction!(recording, m)?)?;
    m.add("BUILT_FOR", env!("SLICETRACE_PY_VERSION"))?;
    Ok(())
}
