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

/// One thread's stream. Written only by its thread (with the GIL held); finished by the
/// thread's exit destructor or by the process exit handler, under the registry lock.
pub struct ThreadRec {
    pub pid: u32,
    pub writer: UnsafeCell<StreamWriter>,
    /// Depth inside a call that was not recorded (its function could not be described): its
    /// whole subtree, returns included, is left out so the stream stays balanced.
    pub skip: Cell<u32>,
}

pub struct Registry(UnsafeCell<Vec<*mut ThreadRec>>);
// SAFETY: the vector is only touched while REGISTRY_LOCK is held.
unsafe impl Sync for Registry {}
pub static REGISTRY: Registry = Registry(UnsafeCell::new(Vec::new()));
/// A spin lock rather than a `Mutex` so that a forked child (single-threaded) can reset it
/// even if another thread of the parent held it at the time of the fork.
pub static REGISTRY_LOCK: AtomicBool = AtomicBool::new(false);

pub fn with_registry<R>(f: impl FnOnce(&mut Vec<*mut ThreadRec>) -> R) -> R {
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
    pub static CURRENT: Cell<*mut ThreadRec> = const { Cell::new(std::ptr::null_mut()) };
    static GUARD: ExitGuard = const { ExitGuard };
}

/// The current thread's record, created on first use (`name`: the stream's thread name).
/// Creating it calls no CPython function.
///
/// # Safety
/// GIL held. The record stays valid on this thread until the thread exits (a forked child
/// leaks the parent's), but after a call that may run Python code (which may fork) it may no
/// longer be the thread's current one: look it up again before writing.
#[inline(always)]
pub unsafe fn current(name: Option<&str>) -> Option<&'static ThreadRec> {
    let rec = CURRENT.with(|c| c.get());
    if !rec.is_null() {
        // SAFETY: CURRENT holds this thread's record, leaked from a Box by `new_thread_rec`
        // and freed only by the thread's exit guard, which nulls CURRENT first.
        return Some(unsafe { &*rec });
    }
    // SAFETY: GIL held (the contract).
    unsafe { new_thread_rec(name) }
}

/// The current thread's stream, created on first use.
///
/// # Safety
/// As [`current`]; nothing else holds a reference to this thread's writer (each caller uses
/// it for one write and calls nothing that could re-enter meanwhile).
#[inline(always)]
#[allow(clippy::mut_from_ref)]
pub unsafe fn writer(rec: &ThreadRec) -> &mut StreamWriter {
    // SAFETY: the writer is only used by its thread, with the GIL held, and no other reference
    // to it is alive (the contract).
    unsafe { &mut *rec.writer.get() }
}

/// # Safety
/// GIL held.
#[cold]
#[inline(never)]
unsafe fn new_thread_rec(name: Option<&str>) -> Option<&'static ThreadRec> {
    // SAFETY: GIL held (the contract); the closure calls no CPython.
    let (pid, seq, dir) = unsafe {
        with_proc(|p| {
            p.thread_seq += 1;
            (p.pid, p.thread_seq - 1, p.dir.clone())
        })
    }?;
    let tid = gettid();
    let path = dir.join(stream_file_name(tid, seq));
    let mut w = match StreamWriter::create(&path, FLAG_PYTHON, pid, tid, monotonic_ns(), DEFAULT_WINDOW) {
        Ok(w) => w,
        Err(e) => {
            warn(&format!("cannot create {}: {e}; this thread is not recorded", path.display()));
            return None;
        }
    };
    let name = match name {
        Some(n) => n.to_string(),
        // SAFETY: getpid has no preconditions and cannot fail.
        None if unsafe { libc::getpid() } as u64 == tid => "MainThread".to_string(),
        None => format!("Thread-{tid}"),
    };
    w.thread_name(&name);
    let rec = Box::into_raw(Box::new(ThreadRec { pid, writer: UnsafeCell::new(w), skip: Cell::new(0) }));
    with_registry(|reg| reg.push(rec));
    CURRENT.with(|c| c.set(rec));
    // Touch the guard so its destructor runs at thread exit.
    GUARD.with(|_| {});
    // SAFETY: just leaked from a Box; freed only by this thread's exit guard.
    Some(unsafe { &*rec })
}

/// A warning on stderr. Never `eprintln!`: it panics when stderr fails (a closed pipe), and
/// this runs inside the C hooks, where a panic aborts the traced program.
pub fn warn(msg: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "trace: {msg}");
}

/// What a code object's id says about it: the id, and the flag bits of its `co_extra` value
/// as they are there (tested where needed, not unpacked on every entry).
#[derive(Clone, Copy)]
pub struct CodeId {
    pub id: u32,
    flags: u32,
}

impl CodeId {
    fn new(id: u32, resumable: bool, watched: bool) -> CodeId {
        let flags = if resumable { RESUMABLE_BIT } else { 0 } | if watched { WATCHED_BIT } else { 0 };
        CodeId { id, flags: flags as u32 }
    }

    /// Generator, coroutine or async generator: it can be resumed.
    #[inline(always)]
    pub fn resumable(self) -> bool {
        self.flags & RESUMABLE_BIT as u32 != 0
    }

    /// Every code line has been reported (`sys.monitoring`): turn its LINE events off.
    #[inline(always)]
    pub fn lines_done(self) -> bool {
        self.flags & LINES_DONE_BIT as u32 != 0
    }

    /// Its LINE events are on (`sys.monitoring`): its entries are counted
    /// ([`linewatch::LINE_ENTRIES`]).
    #[inline(always)]
    pub fn watched(self) -> bool {
        self.flags & WATCHED_BIT as u32 != 0
    }
}

/// Layout of our `co_extra` value: generation << 32 | resumable << 31 | lines done << 30 |
/// watched << 29 | (id + 1).
const RESUMABLE_BIT: u64 = 1 << 31;
/// Set when every code line of the function has been reported through `sys.monitoring`: its
/// next entry turns its LINE events off (and clears the bit).
pub(crate) const LINES_DONE_BIT: u64 = 1 << 30;
/// Set while the function's LINE events are on: only then does an entry take the process
/// lock to count it, so a function whose lines are done costs nothing more than a bit test.
pub(crate) const WATCHED_BIT: u64 = 1 << 29;
const ID_MASK: u64 = WATCHED_BIT - 1;

/// Id of a code object, assigning one (and writing its record) the first time.
///
/// # Safety
/// GIL held; `code` is a live code object. May call into CPython (the first time).
#[inline(always)]
pub unsafe fn code_id(code: *mut PyObject) -> Option<CodeId> {
    // SAFETY: GIL held; `code` is a live code object (the contract).
    match unsafe { cached_code_id(code) } {
        Some(c) => Some(c),
        // SAFETY: as above.
        None => unsafe { new_code_id(runtime::get()?, code) },
    }
}

/// The id cached in the code object by this process, if any. Calls no Python code.
///
/// # Safety
/// GIL held; `code` is a live code object.
#[inline(always)]
pub(crate) unsafe fn cached_code_id(code: *mut PyObject) -> Option<CodeId> {
    // SAFETY: GIL held; `code` is a live code object (the contract).
    let v = unsafe { runtime::get()?.extra(code) };
    if v != 0 && (v >> 32) as u32 == GENERATION.load(Ordering::Relaxed) {
        let low = v & 0xffff_ffff;
        return Some(CodeId { id: (low & ID_MASK) as u32 - 1, flags: (low & !ID_MASK) as u32 });
    }
    None
}

/// # Safety
/// GIL held; `code` is a live code object. Calls into CPython.
#[cold]
#[inline(never)]
unsafe fn new_code_id(rt: &runtime::Runtime, code: *mut PyObject) -> Option<CodeId> {
    let generation = GENERATION.load(Ordering::Relaxed);
    // Reserve the id first: describing calls into Python, which may re-enter the shim.
    // SAFETY: GIL held (the contract); the closure calls no CPython.
    let (id, cwd, mode) = unsafe {
        with_proc(|p| {
            p.next_id += 1;
            (p.next_id - 1, p.cwd.clone(), p.lines)
        })
    }?;
    let lines = mode != LineMode::Off;
    if id >= ID_MASK as u32 - 1 {
        return None;
    }
    // SAFETY: GIL held (the contract): this thread is attached.
    let py = unsafe { Python::assume_attached() };
    // SAFETY: `code` is a live object (the contract); the new reference is released when
    // `code_obj` is dropped.
    let code_obj = unsafe { Bound::from_borrowed_ptr(py, code) };
    let desc = describe_code(&code_obj, &cwd, lines);
    let start = if desc.resumable { Some(first_resume_offset(&code_obj, rt.resume_opcode)) } else { None };
    if GENERATION.load(Ordering::Relaxed) != generation {
        return None; // forked while describing: this id belongs to the parent
    }
    let watch = match &desc.kind {
        FuncKind::Python { code_lines: Some(l), .. } if mode == LineMode::Monitoring && !l.is_empty() => Some(l.clone()),
        _ => None,
    };
    // SAFETY: GIL held (the contract); the closure calls no CPython (file writes only).
    let written = unsafe {
        with_proc(|p| {
            if let Some(s) = start {
                p.gen_start.insert(id, s);
            }
            if lines {
                let i = id as usize;
                if p.per_test.len() <= i {
                    p.per_test.resize(i + 1, false);
                }
                p.per_test[i] = match &desc.kind {
                    FuncKind::Python { file, .. } => crate::testscope::per_test(file, p.stdlib_dir.as_deref()),
                    _ => false,
                };
            }
            if let Some(l) = &watch {
                let i = id as usize;
                if p.lines_left.len() <= i {
                    p.lines_left.resize_with(i + 1, Vec::new);
                }
                p.lines_left[i] = l.clone();
                if p.line_entries.len() <= i {
                    p.line_entries.resize(i + 1, 0);
                }
                p.line_entries[i] = linewatch::LINE_ENTRIES;
                linewatch::LINES_WATCHED.store(true, Ordering::Relaxed);
                if p.last_entry.len() <= i {
                    p.last_entry.resize(i + 1, 0);
                }
                p.last_entry[i] = linewatch::entries();
                if p.lines_all.len() <= i {
                    p.lines_all.resize_with(i + 1, Vec::new);
                }
                p.lines_all[i] = l.clone();
                if p.line_epoch.len() <= i {
                    p.line_epoch.resize(i + 1, crate::testlines::NO_LINES);
                }
                p.line_epoch[i] =
                    if p.per_test[i] { crate::testlines::TEST_EPOCH.load(Ordering::Relaxed) } else { crate::testlines::NO_LINES };
            }
            p.funcs
                .append(&FuncRecord { id, kind: desc.kind })
                .map_err(|e| format!("cannot write {}: {e}", p.dir.join(FUNCS_FILE).display()))
        })
    }?;
    if let Err(e) = written {
        warn(&e);
        return None;
    }
    let flag = if desc.resumable { RESUMABLE_BIT } else { 0 } | if watch.is_some() { WATCHED_BIT } else { 0 };
    // SAFETY: GIL held; `code` is a live code object (the contract).
    unsafe { rt.set_extra(code, ((generation as u64) << 32) | flag | (id as u64 + 1)) };
    if watch.is_some() && !IN_LINE_EVENT.load(Ordering::Relaxed) {
        // LINE events are asked for per code object, so that they can be turned off again
        // once every code line has been reported (see `line_reported`). A code object first
        // seen by its own LINE event (a frame that was running across a fork) has them on.
        // SAFETY: GIL held; `code` is live; not from a LINE callback (IN_LINE_EVENT is not
        // set), so not from `code`'s own.
        unsafe { crate::monitoring::watch_lines(code, true) };
    }
    Some(CodeId::new(id, desc.resumable, watch.is_some()))
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
