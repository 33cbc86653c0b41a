//! Native shim: an `LD_PRELOAD` runtime that implements `__cyg_profile_func_enter/exit` for
//! binaries built with `-finstrument-functions` (gcc and clang, C and C++).
//!
//! `trace run` preloads this library with `SLICE_TRACE_DIR=<trace dir>`. Nothing happens in a
//! process until its first instrumented function is entered (a shell or any other
//! uninstrumented program that inherits the preload leaves no trace); then the shim creates
//! the process's directory `p<pid>` and records, per thread, one event stream with the
//! `trace-format` writer (mmap-backed: every event survives `_exit`, `abort`, crashes and
//! `SIGKILL` without any flush, so no signal handler is installed).
//!
//! Hot path (one call or return): a thread-local pointer, a lock-free hash lookup of the
//! function address in a process-wide table, a shadow-stack store and a 1-3 byte event
//! written into the mapped window. A function seen for the first time takes the cold path
//! under a lock: `dladdr` names its object and load address, and its record is appended to
//! `funcs.jsonl` before the first event that uses its id.
//!
//! Processes and threads:
//! - threads: each gets its own stream on its first event; a `pthread_key` destructor
//!   closes it when the thread exits;
//! - `exit()`: a `.fini_array` destructor closes the calling thread's stream (other threads'
//!   streams are complete anyway and end in zeros, which readers treat as the end);
//! - `fork`: a `pthread_atfork` child handler drops the parent's stream, function table and
//!   ids; the child records into its own `p<pid>` directory (with `forked_from`), and its
//!   stream starts by re-entering the functions that were open at the fork (from the shadow
//!   stack), so the child's call tree keeps its context;
//! - `exec`: the new image loads the shim again and records into `p<pid>.1`.

#![allow(clippy::missing_safety_doc)]

use std::cell::Cell;
use std::ffi::CStr;
use std::path::PathBuf;
use std::ptr::null_mut;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, Ordering};
use trace_format::event::FLAG_NATIVE;
use trace_format::writer::{self, FuncTableWriter, StreamWriter};
use trace_format::{FuncKind, FuncRecord, ENV_TRACE_DIR, FUNCS_FILE};

// ---------------------------------------------------------------------------------------
// Process-wide state
// ---------------------------------------------------------------------------------------

const UNINIT: u8 = 0;
const INITIALIZING: u8 = 1;
const READY: u8 = 2;
const DISABLED: u8 = 3;

/// Recording state of this process image (reset to `UNINIT` in a forked child).
static STATE: AtomicU8 = AtomicU8::new(UNINIT);
/// Trace root from `SLICE_TRACE_DIR`, read once by the constructor (null: do nothing).
static ROOT: AtomicPtr<PathBuf> = AtomicPtr::new(null_mut());
/// The process's recording state; valid while `STATE == READY`.
static PROC: AtomicPtr<Proc> = AtomicPtr::new(null_mut());
/// Address -> id table; null until the first function is registered (and after a fork).
static TABLE: AtomicPtr<Table> = AtomicPtr::new(null_mut());
/// Lock of the cold path (registering a function, growing the table).
static COLD: SpinLock = SpinLock(AtomicBool::new(false));
/// Sequence number of the next thread stream of this process.
static THREAD_SEQ: AtomicU32 = AtomicU32::new(0);
/// Pid of the traced parent, in a child created by `fork` (0: none).
static FORKED_FROM: AtomicU32 = AtomicU32::new(0);
/// `pthread_key` whose destructor closes a thread's stream when the thread exits.
static KEY: AtomicU64 = AtomicU64::new(u64::MAX);

struct Proc {
    pid: u32,
    dir: PathBuf,
    funcs: FuncTableWriter,
    next_id: u32,
    /// Load address of the main executable (`dli_fbase`), whose `dladdr` name is only argv[0].
    main_base: u64,
    exe: String,
    /// Object path by load address, made absolute once.
    modules: Vec<(u64, String)>,
}

struct SpinLock(AtomicBool);

impl SpinLock {
    fn lock(&self) {
        while self.0.compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed).is_err() {
            // SAFETY: sched_yield has no preconditions.
            unsafe { libc::sched_yield() };
        }
    }
    fn unlock(&self) {
        self.0.store(false, Ordering::Release);
    }
}

// ---------------------------------------------------------------------------------------
// Address -> id table: readers never lock; writers hold `COLD`. A full table is replaced by
// a twice larger copy; the old one is leaked, since readers may still be looking at it.
// ---------------------------------------------------------------------------------------

struct Table {
    shift: u32,
    mask: usize,
    len: usize,
    keys: Box<[AtomicU64]>,
    ids: Box<[AtomicU32]>,
}

impl Table {
    fn new(bits: u32) -> Table {
        let cap = 1usize << bits;
        Table {
            shift: 64 - bits,
            mask: cap - 1,
            len: 0,
            keys: (0..cap).map(|_| AtomicU64::new(0)).collect(),
            ids: (0..cap).map(|_| AtomicU32::new(0)).collect(),
        }
    }

    #[inline(always)]
    fn slot(&self, addr: u64) -> usize {
        (addr.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift) as usize
    }

    #[inline(always)]
    fn get(&self, addr: u64) -> Option<u32> {
        let mut i = self.slot(addr);
        loop {
            let k = self.keys[i].load(Ordering::Acquire);
            if k == addr {
                return Some(self.ids[i].load(Ordering::Relaxed));
            }
            if k == 0 {
                return None;
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Insert (caller holds `COLD`, and `addr` is absent and non-zero).
    fn put(&mut self, addr: u64, id: u32) {
        let mut i = self.slot(addr);
        while self.keys[i].load(Ordering::Relaxed) != 0 {
            i = (i + 1) & self.mask;
        }
        self.ids[i].store(id, Ordering::Relaxed);
        self.keys[i].store(addr, Ordering::Release);
        self.len += 1;
    }
}

#[inline(always)]
fn lookup(addr: u64) -> Option<u32> {
    let t = TABLE.load(Ordering::Acquire);
    if t.is_null() {
        return None;
    }
    // SAFETY: tables are never freed.
    unsafe { (*t).get(addr) }
}

/// Insert under `COLD`, growing the table first when it is half full.
fn insert(addr: u64, id: u32) {
    let mut t = TABLE.load(Ordering::Acquire);
    // SAFETY: tables are never freed; only the holder of `COLD` mutates one, and a table is
    // only mutated (by `put`) in slots readers see as empty until the key is published.
    unsafe {
        if t.is_null() || ((*t).len + 1) * 2 > (*t).mask + 1 {
            let bits = if t.is_null() { 12 } else { 64 - (*t).shift + 1 };
            let mut n = Table::new(bits);
            if !t.is_null() {
                for (k, v) in (*t).keys.iter().zip((*t).ids.iter()) {
                    let k = k.load(Ordering::Relaxed);
                    if k != 0 {
                        n.put(k, v.load(Ordering::Relaxed));
                    }
                }
            }
            t = Box::into_raw(Box::new(n));
            TABLE.store(t, Ordering::Release);
        }
        (*t).put(addr, id);
    }
}

// ---------------------------------------------------------------------------------------
// Per-thread state
// ---------------------------------------------------------------------------------------

/// Functions remembered for replay after `fork` and for matching returns (deeper calls are
/// counted but not remembered).
const STACK_CAP: usize = 1024;
/// Thread-local pointer values that are not a `ThreadState`.
const T_STARTING: usize = 1;
const T_DEAD: usize = 2;

struct ThreadState {
    writer: Option<StreamWriter>,
    /// Creating the stream failed (no trace dir, disk full): stop trying.
    failed: bool,
    /// The shim is running on this thread: events from code it calls (an instrumented
    /// allocator, a signal handler) are dropped, entry and exit alike.
    busy: bool,
    depth: usize,
    stack: Box<[u64; STACK_CAP]>,
}

thread_local! {
    static TS: Cell<*mut ThreadState> = const { Cell::new(null_mut()) };
}

#[inline(always)]
fn thread_state() -> Option<&'static mut ThreadState> {
    let p = TS.with(|c| c.get());
    if (p as usize) > T_DEAD {
        // SAFETY: a live ThreadState owned by this thread.
        return Some(unsafe { &mut *p });
    }
    if p.is_null() {
        return new_thread_state();
    }
    None
}

#[cold]
#[inline(never)]
fn new_thread_state() -> Option<&'static mut ThreadState> {
    if ROOT.load(Ordering::Relaxed).is_null() || STATE.load(Ordering::Acquire) == DISABLED {
        return None;
    }
    // Allocation may run instrumented code (a custom allocator): mark the thread first.
    TS.with(|c| c.set(T_STARTING as *mut ThreadState));
    let st =
        Box::into_raw(Box::new(ThreadState { writer: None, failed: false, busy: false, depth: 0, stack: Box::new([0u64; STACK_CAP]) }));
    TS.with(|c| c.set(st));
    let key = KEY.load(Ordering::Relaxed);
    if key != u64::MAX {
        // SAFETY: the key was created by the constructor.
        unsafe { libc::pthread_setspecific(key as libc::pthread_key_t, st as *const libc::c_void) };
    }
    // SAFETY: just allocated, owned by this thread.
    Some(unsafe { &mut *st })
}

/// `pthread_key` destructor: the thread is exiting.
extern "C" fn thread_exit(p: *mut libc::c_void) {
    let st = p as *mut ThreadState;
    TS.with(|c| {
        if c.get() == st {
            c.set(T_DEAD as *mut ThreadState);
        }
    });
    if !st.is_null() {
        // SAFETY: the pointer came from Box::into_raw in new_thread_state, and the thread
        // that owns it is exiting (no other reference remains).
        drop(unsafe { Box::from_raw(st) });
    }
}

impl ThreadState {
    /// The thread's stream, created (with its process directory) on first use.
    #[inline(always)]
    fn writer(&mut self) -> Option<&mut StreamWriter> {
        if self.writer.is_none() {
            if self.failed {
                return None;
            }
            self.open_stream();
        }
        self.writer.as_mut()
    }

    #[cold]
    #[inline(never)]
    fn open_stream(&mut self) {
        let Some(dir) = ensure_process() else {
            self.failed = true;
            return;
        };
        let pid = std::process::id();
        let tid = writer::gettid();
        let seq = THREAD_SEQ.fetch_add(1, Ordering::Relaxed);
        let path = dir.join(writer::stream_file_name(tid, seq));
        let now = writer::monotonic_ns();
        match StreamWriter::create(&path, FLAG_NATIVE, pid, tid, now, writer::DEFAULT_WINDOW) {
            Ok(mut w) => {
                if tid != pid as u64 {
                    if let Some(name) = thread_name() {
                        w.thread_name(&name);
                    }
                }
                // After a fork: re-enter the functions open at the fork, so the child's
                // tree starts where the parent was.
                let known = self.depth.min(STACK_CAP);
                for i in 0..known {
                    if let Some(id) = id_of(self.stack[i]) {
                        w.call(id, now);
                    }
                }
                self.writer = Some(w);
            }
            Err(_) => self.failed = true,
        }
    }
}

fn thread_name() -> Option<String> {
    let mut buf = [0 as libc::c_char; 64];
    // SAFETY: the buffer is large enough for the 16-byte kernel thread name.
    if unsafe { libc::pthread_getname_np(libc::pthread_self(), buf.as_mut_ptr(), buf.len()) } != 0 {
        return None;
    }
    // SAFETY: pthread_getname_np NUL-terminates on success.
    let name = unsafe { CStr::from_ptr(buf.as_ptr()) }.to_string_lossy().into_owned();
    let comm = std::fs::read_to_string("/proc/self/comm").unwrap_or_default();
    (!name.is_empty() && name != comm.trim_end()).then_some(name)
}

// ---------------------------------------------------------------------------------------
// Process initialisation and function registration (cold paths)
// ---------------------------------------------------------------------------------------

/// The process's trace directory, created on first use by the first thread that gets here.
fn ensure_process() -> Option<PathBuf> {
    loop {
        match STATE.load(Ordering::Acquire) {
            READY => {
                let p = PROC.load(Ordering::Acquire);
                // SAFETY: set before READY was published and never freed.
                return (!p.is_null()).then(|| unsafe { (*p).dir.clone() });
            }
            DISABLED => return None,
            UNINIT => {
                if STATE.compare_exchange(UNINIT, INITIALIZING, Ordering::AcqRel, Ordering::Acquire).is_ok() {
                    let ok = init_process();
                    STATE.store(if ok { READY } else { DISABLED }, Ordering::Release);
                }
            }
            _ => {
                // SAFETY: sched_yield has no preconditions.
                unsafe { libc::sched_yield() };
            }
        }
    }
}

fn init_process() -> bool {
    let root = ROOT.load(Ordering::Relaxed);
    if root.is_null() {
        return false;
    }
    // SAFETY: set once by the constructor, never freed.
    let root = unsafe { &*root };
    let pid = std::process::id();
    let Ok(dir) = writer::create_process_dir(root, pid) else {
        warn_once(&format!("cannot create a process directory under {}; this process is not traced", root.display()));
        return false;
    };
    let forked = FORKED_FROM.load(Ordering::Relaxed);
    let meta = writer::current_proc_meta("native", &runtime(), (forked != 0).then_some(forked));
    let Ok(funcs) = FuncTableWriter::create(&dir.join(FUNCS_FILE)) else {
        return false;
    };
    if writer::write_proc_meta(&dir, &meta).is_err() {
        return false;
    }
    // SAFETY: AT_PHDR is an address inside the main executable's first mapping.
    let main_base = unsafe {
        let phdr = libc::getauxval(libc::AT_PHDR) as *const libc::c_void;
        let mut info: libc::Dl_info = std::mem::zeroed();
        if !phdr.is_null() && libc::dladdr(phdr, &mut info) != 0 {
            info.dli_fbase as u64
        } else {
            u64::MAX
        }
    };
    let proc = Proc { pid, dir, funcs, next_id: 0, main_base, exe: meta.exe, modules: Vec::new() };
    PROC.store(Box::into_raw(Box::new(proc)), Ordering::Release);
    true
}

fn runtime() -> String {
    // SAFETY: gnu_get_libc_version returns a static NUL-terminated string.
    let v = unsafe { CStr::from_ptr(gnu_get_libc_version()) }.to_string_lossy();
    format!("glibc {v}")
}

extern "C" {
    fn gnu_get_libc_version() -> *const libc::c_char;
}

fn warn_once(msg: &str) {
    static WARNED: AtomicBool = AtomicBool::new(false);
    if !WARNED.swap(true, Ordering::Relaxed) {
        let line = format!("slicetrace-native: {msg}\n");
        // SAFETY: writing a buffer we own to stderr.
        unsafe { libc::write(2, line.as_ptr() as *const libc::c_void, line.len()) };
    }
}

/// Id of a function address, registering it (and writing its record) if it is new.
#[inline(always)]
fn id_of(addr: u64) -> Option<u32> {
    match lookup(addr) {
        Some(id) => Some(id),
        None => register(addr),
    }
}

#[cold]
#[inline(never)]
fn register(addr: u64) -> Option<u32> {
    if addr == 0 {
        return None;
    }
    COLD.lock();
    let r = register_locked(addr);
    COLD.unlock();
    r
}

fn register_locked(addr: u64) -> Option<u32> {
    if let Some(id) = lookup(addr) {
        return Some(id);
    }
    let p = PROC.load(Ordering::Acquire);
    if p.is_null() {
        return None;
    }
    // SAFETY: PROC is only mutated under COLD, which we hold.
    let proc = unsafe { &mut *p };
    // SAFETY: dladdr fills the Dl_info we own; the strings it points to live as long as the object.
    let (module, base, symbol) = unsafe {
        let mut info: libc::Dl_info = std::mem::zeroed();
        if libc::dladdr(addr as *const libc::c_void, &mut info) == 0 {
            (String::new(), 0u64, None)
        } else {
            let base = info.dli_fbase as u64;
            let module = module_path(proc, base, info.dli_fname);
            let symbol = (!info.dli_sname.is_null()).then(|| {
                let name = CStr::from_ptr(info.dli_sname).to_string_lossy().into_owned();
                let off = addr.wrapping_sub(info.dli_saddr as u64);
                if off == 0 {
                    name
                } else {
                    format!("{name}+{off:#x}")
                }
            });
            (module, base, symbol)
        }
    };
    let id = proc.next_id;
    proc.next_id += 1;
    let rec = FuncRecord { id, kind: FuncKind::Native { addr, module, base, symbol } };
    if proc.funcs.append(&rec).is_err() {
        warn_once(&format!("cannot write {}/{FUNCS_FILE}; function names will be missing", proc.dir.display()));
    }
    insert(addr, id);
    Some(id)
}

/// Absolute path of the object loaded at `base`.
unsafe fn module_path(proc: &mut Proc, base: u64, fname: *const libc::c_char) -> String {
    if let Some((_, m)) = proc.modules.iter().find(|(b, _)| *b == base) {
        return m.clone();
    }
    let path = if base == proc.main_base || fname.is_null() {
        proc.exe.clone()
    } else {
        let name = CStr::from_ptr(fname).to_string_lossy().into_owned();
        std::fs::canonicalize(&name).map(|p| p.to_string_lossy().into_owned()).unwrap_or(name)
    };
    proc.modules.push((base, path.clone()));
    path
}

// ---------------------------------------------------------------------------------------
// The hooks
// ---------------------------------------------------------------------------------------

/// Called by `-finstrument-functions` code on entry to every instrumented function.
#[no_mangle]
pub extern "C" fn __cyg_profile_func_enter(this_fn: *mut libc::c_void, _call_site: *mut libc::c_void) {
    let Some(st) = thread_state() else { return };
    if st.busy {
        return;
    }
    st.busy = true;
    enter(st, this_fn as u64);
    st.busy = false;
}

#[inline(always)]
fn enter(st: &mut ThreadState, addr: u64) {
    if st.writer().is_none() {
        return;
    }
    let Some(id) = id_of(addr) else { return };
    if st.depth < STACK_CAP {
        st.stack[st.depth] = addr;
    }
    st.depth += 1;
    if let Some(w) = st.writer.as_mut() {
        w.call(id, writer::monotonic_ns());
    }
}

/// Called by `-finstrument-functions` code on exit from every instrumented function
/// (normal return and C++ exception unwinding).
#[no_mangle]
pub extern "C" fn __cyg_profile_func_exit(this_fn: *mut libc::c_void, _call_site: *mut libc::c_void) {
    let Some(st) = thread_state() else { return };
    if st.busy {
        return;
    }
    st.busy = true;
    exit(st, this_fn as u64);
    st.busy = false;
}

#[inline(always)]
fn exit(st: &mut ThreadState, addr: u64) {
    if st.writer().is_none() {
        return;
    }
    // Frames skipped by longjmp never return: if the exiting function is deeper in the
    // stack than the top, close the skipped frames first.
    let mut returns = 1;
    if st.depth > 0 && st.depth <= STACK_CAP && st.stack[st.depth - 1] != addr {
        if let Some(k) = st.stack[..st.depth - 1].iter().rposition(|&a| a == addr) {
            returns += st.depth - 1 - k;
        }
    }
    st.depth = st.depth.saturating_sub(returns);
    let now = writer::monotonic_ns();
    if let Some(w) = st.writer.as_mut() {
        for _ in 0..returns {
            w.ret(now);
        }
    }
}

// ---------------------------------------------------------------------------------------
// Constructor, destructor, fork
// ---------------------------------------------------------------------------------------

#[used]
#[link_section = ".init_array"]
static INIT: extern "C" fn() = constructor;

#[used]
#[link_section = ".fini_array"]
static FINI: extern "C" fn() = destructor;

extern "C" fn constructor() {
    let Some(dir) = std::env::var_os(ENV_TRACE_DIR).filter(|d| !d.is_empty()) else { return };
    let mut dir = PathBuf::from(dir);
    if dir.is_relative() {
        if let Ok(cwd) = std::env::current_dir() {
            dir = cwd.join(dir);
        }
    }
    let mut key: libc::pthread_key_t = 0;
    // SAFETY: plain registrations with functions that live as long as the process.
    unsafe {
        if libc::pthread_key_create(&mut key, Some(thread_exit)) == 0 {
            KEY.store(key as u64, Ordering::Relaxed);
        }
        libc::pthread_atfork(None, None, Some(after_fork_child));
    }
    ROOT.store(Box::into_raw(Box::new(dir)), Ordering::Release);
}

/// `exit()` (or return from `main`): close the calling thread's stream, cut to its length.
extern "C" fn destructor() {
    let p = TS.with(|c| c.get());
    if (p as usize) > T_DEAD {
        // SAFETY: this thread's own state.
        let st = unsafe { &mut *p };
        if !st.busy {
            if let Some(w) = st.writer.as_mut() {
                w.finish();
            }
        }
    }
}

/// In the child of a `fork`: forget the parent's recording; the child starts its own.
extern "C" fn after_fork_child() {
    let state = STATE.load(Ordering::Acquire);
    let p = PROC.load(Ordering::Acquire);
    if state == READY && !p.is_null() {
        // SAFETY: the parent's Proc, copied into the child; only this thread exists now.
        unsafe {
            FORKED_FROM.store((*p).pid, Ordering::Relaxed);
            (*p).funcs.abandon();
        }
    } else {
        FORKED_FROM.store(0, Ordering::Relaxed);
    }
    PROC.store(null_mut(), Ordering::Release);
    TABLE.store(null_mut(), Ordering::Release);
    THREAD_SEQ.store(0, Ordering::Relaxed);
    COLD.0.store(false, Ordering::Release);
    STATE.store(UNINIT, Ordering::Release);
    let t = TS.with(|c| c.get());
    if (t as usize) > T_DEAD {
        // SAFETY: this thread's own state.
        let st = unsafe { &mut *t };
        if let Some(mut w) = st.writer.take() {
            w.abandon();
        }
        st.failed = false;
    }
}
