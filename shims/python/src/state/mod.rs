//! Per-process and per-thread recording state, and function ids.
//!
//! Python-side state is touched only with the GIL held, through [`with_proc`], whose closure
//! never calls into CPython: no `&mut` to shared state lives across a call that could run
//! Python code (a finalizer, another thread taking the GIL) and re-enter the shim. A function
//! id is reserved before its code object is described (which calls into Python), so a
//! re-entrant call can never be handed the same id.

use crate::describe::{describe_code, first_resume_offset};
use crate::linetable::LineSet;
use crate::linewatch;
use crate::runtime;
use pyo3::ffi::PyObject;
use pyo3::prelude::*;
use std::cell::{Cell, UnsafeCell};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use trace_format::event::FLAG_PYTHON;
use trace_format::writer::{gettid, monotonic_ns, stream_file_name, FuncTableWriter, ProcessFiles, StreamWriter, DEFAULT_WINDOW};
use trace_format::{FuncKind, FuncRecord, FUNCS_FILE};

mod code_ids;
mod threads;
pub use code_ids::*;
pub use threads::*;

/// A cell for state that is only touched with the GIL held (which serialises all access).
pub struct GilCell<T>(UnsafeCell<T>);
// SAFETY: every access happens with the GIL held (or in a forked child's only thread).
unsafe impl<T> Sync for GilCell<T> {}

impl<T> GilCell<T> {
    pub const fn new(v: T) -> Self {
        GilCell(UnsafeCell::new(v))
    }
    /// # Safety
    /// GIL held (or the only thread of a forked child, in the fork handler), and the reference
    /// is not kept across a call into CPython (which may run Python code that re-enters the
    /// shim and takes its own).
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn get(&self) -> &mut T {
        // SAFETY: the GIL serialises the threads, and on this thread no other reference is
        // alive: each is dropped before anything that could re-enter (the contract).
        unsafe { &mut *self.0.get() }
    }
}

/// How a process records the source lines its functions execute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineMode {
    /// Not at all (no line events, no `code_lines`).
    Off,
    /// `sys.monitoring` LINE events (3.12+), each turned off after its first report.
    Monitoring,
    /// A C trace function (`PyEval_SetTrace`), deduplicated per function ([`Proc::line_sets`]).
    Trace,
}

/// Per-process recording state.
pub struct Proc {
    pub pid: u32,
    /// This process's `proc.json` (rewritten by [`record_hook`]).
    pub meta: trace_format::ProcMeta,
    pub funcs: FuncTableWriter,
    pub dir: PathBuf,
    pub cwd: PathBuf,
    pub next_id: u32,
    pub thread_seq: u32,
    pub c_calls: bool,
    /// C functions seen so far (with `c_calls`), by (C function, owner) address.
    pub cfuncs: HashMap<(usize, usize), u32>,
    /// For generator-like code: the largest instruction offset at which its frame is entered
    /// for the first time (-1 before 3.11, else the offset of its first `RESUME`).
    pub gen_start: HashMap<u32, i64>,
    pub lines: LineMode,
    /// With [`LineMode::Trace`]: the lines already reported, by function id.
    pub line_sets: Vec<LineSet>,
    /// By function id: whether its lines are reported again in each test
    /// ([`crate::testscope::per_test`]: not the standard library's, not the test runner's).
    pub per_test: Vec<bool>,
    /// The standard library's directory (`{sys.base_prefix}/lib/pythonX.Y/`), for
    /// [`crate::testscope::per_test`].
    pub stdlib_dir: Option<String>,
    /// With [`LineMode::Monitoring`]: the code lines not reported yet, by function id (ascending).
    /// When none is left, the function's LINE events are turned off ([`LINES_DONE_BIT`]).
    pub lines_left: Vec<Vec<u32>>,
    /// With [`LineMode::Monitoring`]: how many more entries of each function (by id) keep its
    /// LINE events on; 0 once they are off. See [`LINE_ENTRIES`].
    pub line_entries: Vec<u16>,
    /// With [`LineMode::Monitoring`]: the entry clock ([`linewatch::entries`]) at each watched
    /// function's last entry, by id (for [`LINE_FRAME_AGE`]).
    pub last_entry: Vec<u64>,
    /// With [`LineMode::Monitoring`]: every code line of each function (by id), to report
    /// again in each test ([`crate::testlines`]).
    pub lines_all: Vec<Vec<u32>>,
    /// With [`LineMode::Monitoring`]: the test epoch in which each function's line events were
    /// last armed ([`crate::testlines::TEST_EPOCH`]); [`crate::testlines::NO_LINES`] for a
    /// function without code lines.
    pub line_epoch: Vec<u32>,
}

static PROC: GilCell<Option<Proc>> = GilCell::new(None);

/// Set while a line event describes its (new) code object: see `new_code_id`. GIL-held.
static IN_LINE_EVENT: AtomicBool = AtomicBool::new(false);

/// Bumped in every forked child: ids cached in `co_extra` by an earlier generation are stale.
pub static GENERATION: AtomicU32 = AtomicU32::new(1);

/// Run `f` on the process state, if recording.
///
/// # Safety
/// GIL held, and `f` does not call into CPython (nothing re-enters while it holds the state).
#[inline(always)]
pub unsafe fn with_proc<R>(f: impl FnOnce(&mut Proc) -> R) -> Option<R> {
    // SAFETY: GIL held, and the reference lives only while `f` runs, which cannot re-enter
    // (the contract).
    unsafe { PROC.get() }.as_mut().map(f)
}

/// # Safety
/// GIL held (or the only thread of a forked child, in the fork handler).
pub unsafe fn set_proc(p: Option<Proc>) -> Option<Proc> {
    // SAFETY: GIL held or no other thread (the contract); the reference lives for the swap.
    std::mem::replace(unsafe { PROC.get() }, p)
}

/// Whether this process records (`py`: the GIL is held).
pub fn recording(py: Python<'_>) -> bool {
    let _ = py;
    // SAFETY: GIL held (`py`); the reference lives for the read.
    unsafe { PROC.get().is_some() }
}

/// Create this process's directory and function table.
pub fn open_process(py: Python<'_>, root: &Path, c_calls: bool, lines: LineMode, forked_from: Option<u32>) -> Result<Proc, String> {
    let v = py.version_info();
    let runtime = format!("CPython {}.{}.{}", v.major, v.minor, v.patch);
    let files = ProcessFiles::create(root, "python", &runtime, forked_from)
        .map_err(|e| format!("{e} (check that the trace directory {} is writable)", root.display()))?;
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let stdlib_dir = py
        .import("sys")
        .and_then(|sys| sys.getattr("base_prefix"))
        .and_then(|p| p.extract::<String>())
        .ok()
        .map(|prefix| format!("{}/lib/python{}.{}/", prefix.trim_end_matches('/'), v.major, v.minor));
    let mut meta = files.meta;
    // Written with the hook (`record_hook`): the merge of `--native-ext` relies on it.
    meta.native_closed_at_python_calls = trace_format::clock::closes_native_at_python_entry();
    Ok(Proc {
        pid: meta.pid,
        meta,
        funcs: files.funcs,
        dir: files.dir,
        cwd,
        next_id: 0,
        thread_seq: 0,
        c_calls,
        cfuncs: HashMap::new(),
        gen_start: HashMap::new(),
        lines,
        line_sets: Vec::new(),
        per_test: Vec::new(),
        stdlib_dir,
        lines_left: Vec::new(),
        line_entries: Vec::new(),
        last_entry: Vec::new(),
        lines_all: Vec::new(),
        line_epoch: Vec::new(),
    })
}

/// Say in `proc.json` which hook records this process's calls (`monitoring`, `evalframe`,
/// `profile`). A failure to write is warned about: recording goes on.
///
/// # Safety
/// GIL held.
pub unsafe fn record_hook(hook: &str) {
    // SAFETY: the GIL is held (this function's contract); the closure only writes a file and
    // does not call into CPython.
    let done = unsafe {
        with_proc(|p| {
            p.meta.hook = Some(hook.to_string());
            trace_format::writer::write_proc_meta(&p.dir, &p.meta).map_err(|e| format!("{}: {e}", p.dir.display()))
        })
    };
    if let Some(Err(e)) = done {
        warn(&format!("cannot record the hook in proc.json ({e})"));
    }
}

/// Offset at or below which an entry into a frame of the resumable function `id` is its first.
///
/// # Safety
/// GIL held.
pub unsafe fn gen_start(id: u32) -> i64 {
    // SAFETY: GIL held (the contract); the closure calls no CPython.
    unsafe { with_proc(|p| p.gen_start.get(&id).copied()) }.flatten().unwrap_or(-1)
}

/// Record a function entry: a call, or a resumption of a suspended frame. Returns whether the
/// entry was counted (written, or left out inside an unrecorded call): only then may its exit
/// be reported to [`exit`].
///
/// # Safety
/// GIL held; `code` is a live code object. `resumed` decides, from the code's id, whether
/// this entry resumes a frame (it may call into CPython).
#[inline(always)]
pub unsafe fn enter(code: *mut PyObject, resumed: impl FnOnce(CodeId) -> bool) -> bool {
    // With the native shim (`--native-ext`): its calls that have returned are closed first.
    let ts = trace_format::clock::python_entry_ns();
    // SAFETY: GIL held (the contract).
    let Some(rec) = (unsafe { current(None) }) else { return false };
    if rec.skip.get() > 0 {
        rec.skip.set(rec.skip.get() + 1);
        return true;
    }
    // SAFETY: GIL held; `code` is a live code object (the contract).
    let (id, rec) = match unsafe { cached_code_id(code) } {
        Some(c) => (Some(c), rec),
        None => {
            // SAFETY: as above.
            let id = unsafe { code_id(code) };
            // Look the record up again: describing a new function ran Python code.
            // SAFETY: GIL held.
            let Some(rec) = (unsafe { current(None) }) else { return false };
            (id, rec)
        }
    };
    // `resumed` may call into CPython (but runs no Python code that could record).
    let resume = match id {
        Some(c) if c.resumable() => resumed(c),
        _ => false,
    };
    match id {
        // SAFETY: `rec` is this thread's current record (since describing, `resumed` is all
        // that ran, and it runs no Python code); the writer is used for this one write.
        Some(c) if resume => unsafe { writer(rec) }.resume(c.id, ts),
        // SAFETY: as above.
        Some(c) => unsafe { writer(rec) }.call(c.id, ts),
        None => rec.skip.set(1),
    }
    // Line bookkeeping only once some function's lines are watched: one load otherwise.
    if linewatch::LINES_WATCHED.load(Ordering::Relaxed) {
        // SAFETY: GIL held; `code` is a live code object (the contract).
        unsafe { linewatch::entered(code, id) };
    }
    true
}

/// Record the entry into a C function (with `c_calls`); `func` null: an entry that cannot be
/// named, left out with its subtree (its exit is still reported).
///
/// # Safety
/// GIL held; `func` is null or a live `PyCFunction`.
pub unsafe fn enter_c(func: *mut PyObject) {
    // As in `enter`.
    let ts = trace_format::clock::python_entry_ns();
    // SAFETY: GIL held (the contract).
    let Some(rec) = (unsafe { current(None) }) else { return };
    if rec.skip.get() > 0 {
        rec.skip.set(rec.skip.get() + 1);
        return;
    }
    // SAFETY: GIL held; `func` is a live PyCFunction when not null (the contract).
    let id = if func.is_null() { None } else { unsafe { crate::describe::cfunc_id(func) } };
    // SAFETY: GIL held (looked up again: describing ran Python code).
    let Some(rec) = (unsafe { current(None) }) else { return };
    match id {
        // SAFETY: `rec` is this thread's current record, looked up after the last Python code
        // ran; the writer is used for this one write.
        Some(id) => unsafe { writer(rec) }.call(id, ts),
        None => rec.skip.set(1),
    }
}

/// Record that the code object `code` executed source line `line`, in the current thread's
/// stream. `dedup`: only the first time for this function and line (the C trace function,
/// which reports every execution of a line); without it every report is written
/// (`sys.monitoring`, where the caller turns the event off after its first report). Written
/// even inside a call left out of the call events: a line event names its function.
///
/// # Safety
/// GIL held; `code` is a live code object. May call into CPython (the first time `code` runs).
#[inline(always)]
pub unsafe fn line(code: *mut PyObject, line: u32, dedup: bool) {
    // SAFETY: GIL held (the contract).
    if unsafe { current(None) }.is_none() {
        return;
    }
    // SAFETY: GIL held; `code` is a live code object (the contract).
    let c = match unsafe { cached_code_id(code) } {
        Some(c) => c,
        None => {
            IN_LINE_EVENT.store(true, Ordering::Relaxed);
            // SAFETY: as above.
            let c = unsafe { code_id(code) };
            IN_LINE_EVENT.store(false, Ordering::Relaxed);
            let Some(c) = c else { return };
            c
        }
    };
    if dedup {
        // SAFETY: GIL held (the contract); the closure calls no CPython.
        let new = unsafe {
            with_proc(|p| {
                let i = c.id as usize;
                if p.line_sets.len() <= i {
                    p.line_sets.resize_with(i + 1, LineSet::default);
                }
                p.line_sets[i].insert(line)
            })
        };
        if new != Some(true) {
            return;
        }
    }
    // Look the record up again: describing a new function ran Python code.
    // SAFETY: GIL held.
    if let Some(rec) = unsafe { current(None) } {
        // SAFETY: this thread's current record, just looked up; one write.
        unsafe { writer(rec) }.line(c.id, line);
    }
    if !dedup {
        // SAFETY: GIL held; `code` is a live code object (the contract).
        unsafe { linewatch::line_reported(code, c.id, line) };
    }
}

/// Record the exit from the innermost function entered.
///
/// # Safety
/// GIL held.
#[inline(always)]
pub unsafe fn exit() {
    let ts = monotonic_ns();
    let rec = CURRENT.with(|c| c.get());
    if rec.is_null() {
        return;
    }
    // SAFETY: CURRENT holds this thread's record, freed only by its exit guard, which nulls
    // CURRENT first.
    let rec = unsafe { &*rec };
    let skip = rec.skip.get();
    if skip > 0 {
        rec.skip.set(skip - 1);
    } else {
        // SAFETY: GIL held (the contract); this thread's current record; one write.
        unsafe { writer(rec) }.ret(ts);
    }
}

/// Record a call for every frame already on the current thread's stack (outermost first),
/// so the returns that follow have matching calls.
///
/// # Safety
/// GIL held.
pub unsafe fn record_open_frames(py: Python<'_>) {
    let mut codes = Vec::new();
    // SAFETY: GIL held (the contract); a borrowed reference to this thread's innermost frame,
    // or null, kept alive with a reference of our own from here on.
    let mut f = unsafe { runtime::PyEval_GetFrame() };
    if !f.is_null() {
        // SAFETY: `f` is a live frame (above).
        unsafe { pyo3::ffi::Py_INCREF(f) };
    }
    while !f.is_null() {
        // SAFETY: GIL held; `f` is a live frame we hold a reference to; the result is a new
        // reference (or null), which `Bound` takes over.
        let code = unsafe { runtime::PyFrame_GetCode(f) };
        if !code.is_null() {
            // SAFETY: `code` is the new reference just returned.
            codes.push(unsafe { Bound::from_owned_ptr(py, code) });
        }
        // SAFETY: as for the code: a new reference to the calling frame, or null.
        let back = unsafe { runtime::PyFrame_GetBack(f) };
        // SAFETY: releases our reference to `f`, not used after.
        unsafe { pyo3::ffi::Py_DECREF(f) };
        f = back;
    }
    let ts = monotonic_ns();
    for code in codes.iter().rev() {
        // SAFETY: GIL held; `codes` keeps each code object alive.
        let id = unsafe { code_id(code.as_ptr()) };
        // SAFETY: GIL held; the record is looked up after `code_id`, and used for one write.
        if let (Some(c), Some(rec)) = (id, unsafe { current(None) }) {
            // SAFETY: as above.
            unsafe { writer(rec) }.call(c.id, ts);
        }
    }
}

/// Close every stream of this process (run by `Py_AtExit`, after the interpreter is done).
pub extern "C" fn finish_all() {
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
