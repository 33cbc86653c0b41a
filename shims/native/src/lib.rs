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
//! Hot path (one call or return, in `hot.c`): the thread's state in an initial-exec TLS block
//! (no `__tls_get_addr` call), the function's id from a per-thread two-way cache, a
//! shadow-stack store, one `rdtsc` converted to ns with a multiply and a shift, and a 1-3 byte
//! event written into the mapped window. Everything else is Rust, below: the thread's first
//! event, a cache miss (a lock-free lookup in the process-wide address -> id table), a full
//! window, a return that skips frames (longjmp). A function seen for the first time takes the
//! cold path under a lock: `dladdr` names its object and load address, and its record is
//! appended to `funcs.jsonl` before the first event that uses its id.
//!
//! The library must be loaded at start-up (`LD_PRELOAD`, as `trace run` does), not with
//! `dlopen`: initial-exec TLS needs the static TLS block.
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

mod filter;
mod frames;
#[cfg(target_arch = "x86_64")]
mod objects;
#[cfg(target_arch = "x86_64")]
mod patch;
mod window;

use std::ffi::CStr;
use std::path::PathBuf;
use std::ptr::null_mut;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use trace_format::clock::TscCalibration;
use trace_format::event::FLAG_NATIVE;
use trace_format::writer::{self, FuncTableWriter, RawCursor, StreamWriter};
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
static COLD: SpinLock = SpinLock::new();
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

/// Restores `errno` when dropped. Every path of the shim that may call into libc (the slow
/// paths, the constructor-time and exit-time handlers) holds one: the traced program must see
/// the `errno` it left (glibc's `realpath`, `dladdr`, `mmap` and friends may set it even when
/// they succeed). Reading and writing `errno` through `__errno_location` is async-signal-safe
/// (it is the calling thread's own TLS word).
struct ErrnoGuard(libc::c_int);

impl ErrnoGuard {
    #[inline]
    fn save() -> ErrnoGuard {
        // SAFETY: __errno_location returns this thread's errno slot, always valid.
        ErrnoGuard(unsafe { *libc::__errno_location() })
    }
}

impl Drop for ErrnoGuard {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: as in `save`.
        unsafe { *libc::__errno_location() = self.0 };
    }
}

/// A lock of the shim's cold paths (registering a function, its CFA offset, an object's
/// symbols). Every signal is blocked while it is held (and while it is waited for): a handler
/// that left with `siglongjmp` would leave it held, and every later holder would wait for ever
/// (a timer handler jumping out of `frames::cfa_offset` did so in `tests/native_shim.rs`).
/// Two `pthread_sigmask` calls per use (async-signal-safe), on paths that run once per
/// function or object.
struct SpinLock(AtomicBool, std::cell::UnsafeCell<std::mem::MaybeUninit<libc::sigset_t>>);

// SAFETY: the cell is written and read only by the thread that holds the lock.
unsafe impl Sync for SpinLock {}

impl SpinLock {
    const fn new() -> SpinLock {
        SpinLock(AtomicBool::new(false), std::cell::UnsafeCell::new(std::mem::MaybeUninit::uninit()))
    }

    fn lock(&self) {
        // SAFETY: sets we own; the old mask is kept for `unlock` by the holder only.
        unsafe {
            let mut all: libc::sigset_t = std::mem::zeroed();
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&mut all);
            libc::pthread_sigmask(libc::SIG_BLOCK, &all, &mut old);
            while self.0.compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed).is_err() {
                libc::sched_yield();
            }
            (*self.1.get()).write(old);
        }
    }

    fn unlock(&self) {
        // SAFETY: written by `lock` on this thread, which holds the lock.
        let old = unsafe { (*self.1.get()).assume_init() };
        self.0.store(false, Ordering::Release);
        // SAFETY: the mask saved by `lock`.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, null_mut()) };
    }
}

// ---------------------------------------------------------------------------------------
// Address -> id table: readers never lock; writers hold `COLD`. A full table is replaced by
// a twice larger copy; the old one is leaked, since readers may still be looking at it.
// ---------------------------------------------------------------------------------------

struct Table {
    shift: u32,
    mask: usize,
    /// Occupied slots; written only under `COLD` (atomic so that no `&mut Table` is ever
    /// formed while other threads read the table).
    len: AtomicUsize,
    keys: Box<[AtomicU64]>,
    ids: Box<[AtomicU32]>,
}

impl Table {
    fn new(bits: u32) -> Table {
        let cap = 1usize << bits;
        Table {
            shift: 64 - bits,
            mask: cap - 1,
            len: AtomicUsize::new(0),
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

    /// Insert (caller holds `COLD`, and `addr` is absent and non-zero). Through `&self`:
    /// readers may be looking at the table; they see the slot once its key is published.
    fn put(&self, addr: u64, id: u32) {
        let mut i = self.slot(addr);
        while self.keys[i].load(Ordering::Relaxed) != 0 {
            i = (i + 1) & self.mask;
        }
        self.ids[i].store(id, Ordering::Relaxed);
        self.keys[i].store(addr, Ordering::Release);
        self.len.fetch_add(1, Ordering::Relaxed);
    }
}

#[inline(always)]
fn lookup(addr: u64) -> Option<u32> {
    Table::get_in(&TABLE, addr)
}

/// Insert under `COLD`, growing the table first when it is half full.
fn insert(addr: u64, id: u32) {
    Table::insert_in(&TABLE, addr, id)
}

impl Table {
    /// Look `addr` up in the table `at` points to (none yet: absent).
    #[inline(always)]
    fn get_in(at: &AtomicPtr<Table>, addr: u64) -> Option<u32> {
        let t = at.load(Ordering::Acquire);
        if t.is_null() {
            return None;
        }
        // SAFETY: tables are never freed.
        unsafe { (*t).get(addr) }
    }

    /// Insert into the table `at` points to (the caller holds that table's writer lock,
    /// and `addr` is absent and non-zero), growing it first when it is half full.
    fn insert_in(at: &AtomicPtr<Table>, addr: u64, id: u32) {
        let mut t = at.load(Ordering::Acquire);
        // SAFETY: tables are never freed; only the holder of `COLD` mutates one, and a table is
        // only mutated (by `put`) in slots readers see as empty until the key is published.
        unsafe {
            if t.is_null() || ((*t).len.load(Ordering::Relaxed) + 1) * 2 > (*t).mask + 1 {
                let bits = if t.is_null() { 12 } else { 64 - (*t).shift + 1 };
                let n = Table::new(bits);
                if !t.is_null() {
                    for (k, v) in (*t).keys.iter().zip((*t).ids.iter()) {
                        let k = k.load(Ordering::Relaxed);
                        if k != 0 {
                            n.put(k, v.load(Ordering::Relaxed));
                        }
                    }
                }
                t = Box::into_raw(Box::new(n));
                at.store(t, Ordering::Release);
            }
            (*t).put(addr, id);
        }
    }
}

// ---------------------------------------------------------------------------------------
// Per-thread state. The hot path (hot.c) keeps it in an initial-exec TLS block, `SltThread`;
// the Rust side keeps the stream writer in a `ThreadState` it points to.
// ---------------------------------------------------------------------------------------

/// Functions remembered for replay after `fork` and for matching returns (deeper calls are
/// counted but not remembered). Same as `SLT_STACK_CAP` in hot.c.
const STACK_CAP: usize = 1024;
/// Entries of a thread's two-way set-associative address -> id cache (`SLT_CACHE_SIZE` in
/// hot.c).
const CACHE_SIZE: usize = 2048;

/// Modes of a thread (`SLT_*` in hot.c).
const M_UNINIT: u32 = 0;
const M_ACTIVE: u32 = 1;
/// The shim itself runs on this thread: events from code it calls (an instrumented allocator,
/// a signal handler) are dropped, entry and exit alike.
const M_BUSY: u32 = 2;
/// Not recording: no trace directory, the stream could not be created or has stopped, or the
/// thread is exiting.
const M_OFF: u32 = 3;
/// Outside the recorded calls (filter.rs: before a `-F` function, inside a `-N` one): every
/// event goes to the slow path, which records nothing until the thread is inside again.
const M_FILTERED: u32 = 4;

#[repr(C)]
struct CacheEntry {
    addr: u64,
    id: u64,
}

/// `struct slt_thread` of hot.c: a thread's hot state (opaque outside this crate).
#[repr(C)]
pub struct SltThread {
    cur: RawCursor,
    depth: u64,
    stack: *mut u64,
    /// The thread's `ThreadState`.
    rust: *mut libc::c_void,
    mode: u32,
    pad: u32,
    /// `CACHE_SIZE` entries in the `ThreadState` (null until the thread's first event).
    cache: *mut CacheEntry,
    /// CFAs of the open calls in `stack` (0: unknown), for the frame repair (frames.rs).
    cfas: *mut u64,
    /// Stack pointer of the running slow path at its shallowest (0: none): `recover_busy`.
    busy_sp: u64,
}

/// Sets `busy_sp` for the extent of a slow path and puts the previous value back (a signal
/// handler's slow path nested in another's leaves the outer one's).
struct BusySp {
    t: *mut SltThread,
    prev: u64,
}

impl BusySp {
    fn set(t: *mut SltThread, sp: u64) -> BusySp {
        // SAFETY: this thread's block; a single aligned store (atomic against signals).
        let prev = unsafe { std::mem::replace(&mut (*t).busy_sp, sp) };
        BusySp { t, prev }
    }
}

impl Drop for BusySp {
    fn drop(&mut self) {
        // SAFETY: as in `set`.
        unsafe { (*self.t).busy_sp = self.prev };
    }
}

/// An entry found the thread BUSY. Either a slow path of this thread runs and this entry
/// is a signal handler's (or an instrumented allocator's) inside it: drop the event. Or the
/// slow path is gone: a handler left it with `siglongjmp`, which would leave recording off
/// for good. The stack tells: code that interrupts a slow path runs below the slow path's
/// shallowest frame (`busy_sp`, the hook's stack pointer), so an entry at or above it is
/// after the slow path's frames are gone. Not on an alternate signal stack (a handler there
/// may sit anywhere): then the event is dropped. Returns whether the thread records again.
unsafe fn recover_busy(t: &mut SltThread, sp: u64) -> bool {
    if t.busy_sp == 0 || sp == 0 || sp < t.busy_sp {
        return false;
    }
    // SAFETY: sigaltstack only fills the stack_t we own (async-signal-safe).
    let mut ss: libc::stack_t = std::mem::zeroed();
    if libc::sigaltstack(null_mut(), &mut ss) != 0 || ss.ss_flags & libc::SS_ONSTACK != 0 {
        return false;
    }
    t.busy_sp = 0;
    // The writer holds the position since the slow path's `pull` (or hot.c's cursor does,
    // if the path was left before it); an event it was writing when left is overwritten by
    // the next (its position had not moved), and its counters and the depth are read back
    // from the stream.
    if let Some(w) = t.pull() {
        let w = w as *mut StreamWriter;
        // SAFETY: `rust` is this thread's own state; `w` is its writer (a distinct field).
        let h = (*(t.rust as *mut ThreadState)).handover;
        if !window::resync_writer(t, &mut *w, &h) {
            t.stop();
            return false;
        }
    }
    t.push();
    if t.mode == M_ACTIVE && !filter::inside() {
        t.set_mode(M_FILTERED);
    }
    true
}

extern "C" {
    fn slt_thread_state() -> *mut SltThread;
    fn slt_enter(this_fn: *mut libc::c_void, sp: u64);
    fn slt_exit(this_fn: *mut libc::c_void, sp: u64);
    fn slt_cache_put(t: *mut SltThread, addr: u64, id: u64);
    fn slt_cache_clear(t: *mut SltThread);
    static mut slt_calibration: *const TscCalibration;
    fn slt_take_limit(t: *mut SltThread, sp: u64) -> *mut u8;
    fn slt_give_limit(t: *mut SltThread, lim: *mut u8);
}

struct ThreadState {
    writer: Option<StreamWriter>,
    stack: Box<[u64; STACK_CAP]>,
    cfas: Box<[u64; STACK_CAP]>,
    /// The cursor handed to hot.c last (`push`), to rebuild it if a fast path is left half-way
    /// (window.rs).
    handover: window::Handover,
    /// hot.c's id cache (on the heap: see `SLT_CACHE_SETS` there).
    cache: Box<[CacheEntry]>,
}

impl SltThread {
    /// Give the C side's position back to the writer (before Rust writes or closes).
    fn pull(&mut self) -> Option<&mut StreamWriter> {
        if self.rust.is_null() {
            return None;
        }
        // SAFETY: `rust` is this thread's own state (see start_thread).
        let st = unsafe { &mut *(self.rust as *mut ThreadState) };
        let w = st.writer.as_mut()?;
        if self.mode == M_ACTIVE || self.mode == M_BUSY || self.mode == M_FILTERED {
            // SAFETY: the cursor came from this writer's `cursor()`, and hot.c only moved it
            // forward by whole events while pos <= limit.
            unsafe { w.set_cursor(&self.cur) };
        }
        Some(w)
    }

    /// Take the write window from whatever holds it (hot.c's rule), leaving this frame's
    /// marker. If a fast path (or a hand-over) that a `siglongjmp` left for good held it, the
    /// cursor is rebuilt from the stream first (window.rs); if that fails, recording stops.
    /// Returns whether the cursor is sound.
    fn take(&mut self) -> bool {
        // SAFETY: this thread's block; hot.c's take is one instruction.
        let old = unsafe { slt_take_limit(self, frames::stack_pointer()) };
        if self.rust.is_null() {
            return true;
        }
        // SAFETY: this thread's own state; the window is taken; the hand-over is the last
        // one of this window.
        if unsafe { window::take_over(self, old, &(*(self.rust as *mut ThreadState)).handover) } {
            return true;
        }
        self.stop();
        false
    }

    /// The stream since the last hand-over cannot be read back as calls and returns (window.rs;
    /// not expected): close it at the writer's own position (its last `pull`, a consistent
    /// stream) and record nothing more on this thread. The window must be taken.
    fn stop(&mut self) {
        self.mode = M_OFF;
        if !self.rust.is_null() {
            // SAFETY: this thread's own state.
            if let Some(mut w) = unsafe { (*(self.rust as *mut ThreadState)).writer.take() } {
                w.finish();
            }
        }
        // SAFETY: this thread's block.
        unsafe { slt_give_limit(self, null_mut()) };
    }

    /// Any mode but ACTIVE: hot.c's fast paths test only `pos < limit`, so `limit` is null
    /// unless the thread records (the position stays, for `pull`).
    fn set_mode(&mut self, mode: u32) {
        debug_assert_ne!(mode, M_ACTIVE);
        if !self.take() {
            return;
        }
        self.mode = mode;
        // SAFETY: this thread's block: the window held (by this frame's marker) is released.
        unsafe { slt_give_limit(self, null_mut()) };
    }

    /// Lend the writer's position to the C side; a stopped stream turns recording off.
    fn push(&mut self) {
        publish_calibration();
        let cur = if self.rust.is_null() {
            None
        } else {
            // SAFETY: this thread's own state.
            unsafe { (*(self.rust as *mut ThreadState)).writer.as_mut().and_then(|w| w.cursor()) }
        };
        match cur {
            Some(c) => {
                // The whole cursor but the limit is written while this frame holds the
                // window (a handler's event is dropped meanwhile; a jump out of here leaves
                // a marker, and the hand-over is recorded before the mode is ACTIVE); the
                // limit is given last.
                if !self.take() {
                    return;
                }
                self.cur.last_ts = c.last_ts;
                self.cur.calls = c.calls;
                self.cur.returns = c.returns;
                self.cur.pos = c.pos;
                let h = window::Handover {
                    pos: c.pos,
                    limit: c.limit,
                    last_ts: c.last_ts,
                    calls: c.calls,
                    returns: c.returns,
                    depth: self.depth,
                };
                // SAFETY: this thread's own state (`cur` is Some only with a state).
                unsafe { (*(self.rust as *mut ThreadState)).handover = h };
                self.mode = M_ACTIVE;
                // SAFETY: as above; `c.limit` bounds the window `c.pos` is in.
                unsafe { slt_give_limit(self, c.limit) };
            }
            None => self.set_mode(M_OFF),
        }
    }
}

/// Let hot.c read the clock's TSC calibration (it asks Rust's clock while there is none).
fn publish_calibration() {
    if let Some(c) = trace_format::clock::tsc_calibration() {
        // SAFETY: `slt_calibration` is a pointer-sized, aligned C object that lives as long as
        // the library and is only ever accessed atomically (hot.c loads it with
        // __atomic_load_n acquire); the release store publishes the calibration's fields,
        // which are never freed or changed afterwards.
        unsafe { AtomicPtr::from_ptr(std::ptr::addr_of_mut!(slt_calibration) as *mut *mut TscCalibration) }
            .store(c as *const TscCalibration as *mut TscCalibration, Ordering::Release);
    }
}

/// The thread's first event (or its first after a fork): create its state and stream. The
/// mode is then ACTIVE, or OFF if this thread records nothing.
#[cold]
#[inline(never)]
fn start_thread(t: &mut SltThread) {
    // Allocation may run instrumented code (a custom allocator): mark the thread first.
    t.set_mode(M_BUSY);
    // An instrumented library's constructor may run before this library's: set up now.
    if !setup_once() {
        // Set-up is under way (on another thread, or this thread's set-up was interrupted
        // by a signal whose handler got here): drop this event, try again at the next.
        t.set_mode(M_UNINIT);
        return;
    }
    if ROOT.load(Ordering::Relaxed).is_null() || STATE.load(Ordering::Acquire) == DISABLED {
        t.set_mode(M_OFF);
        return;
    }
    if t.rust.is_null() {
        let st = Box::into_raw(Box::new(ThreadState {
            writer: None,
            stack: Box::new([0u64; STACK_CAP]),
            cfas: Box::new([0u64; STACK_CAP]),
            handover: window::Handover::NONE,
            cache: (0..CACHE_SIZE).map(|_| CacheEntry { addr: u64::MAX, id: 0 }).collect(),
        }));
        t.rust = st as *mut libc::c_void;
        // SAFETY: just allocated; the stacks live as long as the state.
        unsafe {
            t.stack = (*st).stack.as_mut_ptr();
            t.cfas = (*st).cfas.as_mut_ptr();
            t.cache = (*st).cache.as_mut_ptr();
        }
        t.depth = 0;
        let key = KEY.load(Ordering::Relaxed);
        if key != u64::MAX {
            // SAFETY: the key was created by the constructor.
            unsafe { libc::pthread_setspecific(key as libc::pthread_key_t, st as *const libc::c_void) };
        }
    }
    // SAFETY: t is this thread's block.
    unsafe { slt_cache_clear(t) };
    // SAFETY: this thread's own state.
    let st = unsafe { &mut *(t.rust as *mut ThreadState) };
    st.writer = open_stream(t.depth as usize, &st.stack[..]);
    // The cursor of the new stream (a forked child's block still holds its parent's).
    t.push();
    // SAFETY: this thread's block, its stacks set above.
    unsafe { filter::thread_started(t) };
}

/// `pthread_key` destructor: the thread is exiting.
extern "C" fn thread_exit(p: *mut libc::c_void) {
    let _errno = ErrnoGuard::save();
    let st = p as *mut ThreadState;
    // SAFETY: this thread's block.
    let t = unsafe { &mut *slt_thread_state() };
    if t.rust == p {
        if t.mode == M_ACTIVE {
            // Take the window first (a fast path left by siglongjmp is taken over).
            t.set_mode(M_BUSY);
        }
        t.pull();
        t.set_mode(M_OFF);
        t.rust = null_mut();
        t.stack = null_mut();
        t.cfas = null_mut();
        t.cache = null_mut();
    }
    if !st.is_null() {
        // SAFETY: the pointer came from Box::into_raw in start_thread, and the thread that
        // owns it is exiting (no other reference remains). Dropping the writer closes it.
        drop(unsafe { Box::from_raw(st) });
    }
}

/// Create the thread's stream (with its process directory). After a fork, `depth` and
/// `stack` are the calls open at the fork: the stream starts by re-entering them, so the
/// child's tree starts where the parent was.
fn open_stream(depth: usize, stack: &[u64]) -> Option<StreamWriter> {
    let dir = ensure_process()?;
    let pid = std::process::id();
    let tid = writer::gettid();
    let seq = THREAD_SEQ.fetch_add(1, Ordering::Relaxed);
    let path = dir.join(writer::stream_file_name(tid, seq));
    let now = writer::monotonic_ns();
    let mut w = StreamWriter::create(&path, FLAG_NATIVE, pid, tid, now, writer::DEFAULT_WINDOW).ok()?;
    if tid != pid as u64 {
        if let Some(name) = thread_name() {
            w.thread_name(&name);
        }
    }
    for &addr in &stack[..depth.min(STACK_CAP)] {
        if let Some(id) = id_of(addr & !filter::ROOT_BIT) {
            w.call(id, now);
        }
    }
    Some(w)
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
    let forked = FORKED_FROM.load(Ordering::Relaxed);
    let writer::ProcessFiles { dir, meta, funcs } =
        match writer::ProcessFiles::create(root, "native", &runtime(), (forked != 0).then_some(forked)) {
            Ok(f) => f,
            Err(e) => {
                warn_once(&format!("{e}; this process is not traced (check that {} is writable)", root.display()));
                return false;
            }
        };
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
    #[cfg(target_arch = "x86_64")]
    if let Err(e) = objects::write_report(&dir) {
        warn_once(&format!("cannot write {}: {e}", dir.join(trace_format::meta::PATCH_FILE).display()));
    }
    let proc = Proc { pid: meta.pid, dir, funcs, next_id: 0, main_base, exe: meta.exe, modules: Vec::new() };
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
    // No signal handler runs while this thread holds `COLD`: one that left with
    // `siglongjmp` would leave the lock held, and every other thread's next new function
    // would wait for it for ever. (Once per function per process: two cheap system calls.)
    // SAFETY: a zeroed sigset_t is a valid (empty) set.
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: pthread_sigmask with sets we own is async-signal-safe; the old mask is put back.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_BLOCK, &all, &mut old);
    }
    COLD.lock();
    let r = register_locked(addr);
    COLD.unlock();
    // SAFETY: as above.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, null_mut()) };
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
// The hooks: hot.c's `slt_enter`/`slt_exit` (the compiler turns these into a jump), which
// call the slow paths below for anything but the common case.
// ---------------------------------------------------------------------------------------

/// Called by `-finstrument-functions` code on entry to every instrumented function.
// The signature is gcc's; `this_fn` is only used as a number (never dereferenced).
#[allow(clippy::not_unsafe_ptr_arg_deref)]
#[no_mangle]
pub extern "C" fn __cyg_profile_func_enter(this_fn: *mut libc::c_void, _call_site: *mut libc::c_void) {
    // SAFETY: hot.c's entry point; it only touches this thread's block.
    unsafe { slt_enter(this_fn, frames::stack_pointer()) }
}

/// Called by `-finstrument-functions` code on exit from every instrumented function
/// (normal return and C++ exception unwinding).
// The signature is gcc's; `this_fn` is only used as a number (never dereferenced).
#[allow(clippy::not_unsafe_ptr_arg_deref)]
#[no_mangle]
pub extern "C" fn __cyg_profile_func_exit(this_fn: *mut libc::c_void, _call_site: *mut libc::c_void) {
    // SAFETY: hot.c's entry point; it only touches this thread's block.
    unsafe { slt_exit(this_fn, frames::stack_pointer()) }
}

/// The clock, while hot.c has no TSC calibration to read.
#[no_mangle]
pub extern "C" fn slt_now_slow() -> u64 {
    let _errno = ErrnoGuard::save();
    let ns = writer::monotonic_ns();
    publish_calibration();
    ns
}

/// An event of a thread that records, whose window a path holds (hot.c's marker): a signal
/// handler's event inside that path (dropped), unless the path is gone (window.rs; then the
/// slow path takes the window over when it switches the mode).
fn held_by_live_path(t: &SltThread, sp: u64) -> bool {
    t.mode == M_ACTIVE && (t.cur.limit as i64) < 0 && !window::owner_gone(t, sp)
}

/// Signals blocked for this slow path if it may change windows (window.rs). An event of a
/// thread that does not record changes nothing.
fn near_window_end(t: &SltThread) -> window::NearWindowEnd {
    let near = t.mode != M_OFF && {
        // SAFETY: this thread's own state, if any.
        let h = (!t.rust.is_null()).then(|| unsafe { &(*(t.rust as *mut ThreadState)).handover });
        t.mode == M_UNINIT || window::near_end(t, h)
    };
    window::NearWindowEnd::guard(near)
}

/// Start a slow path: the thread records (its stream is created on its first event); its
/// mode is then BUSY until `push`.
unsafe fn begin_slow(t: &mut SltThread) -> bool {
    if t.mode == M_UNINIT {
        start_thread(t);
    }
    if t.mode != M_ACTIVE {
        return false;
    }
    t.set_mode(M_BUSY);
    true
}

/// Entry, when hot.c cannot record it by itself: the thread's first event, a function not
/// in the thread's cache, a full window, open frames that this entry shows dead (frames.rs).
/// `sp` is the stack pointer hot.c's `slt_enter` saw.
#[no_mangle]
pub unsafe extern "C" fn slt_enter_slow(t: *mut SltThread, addr: u64, sp: u64) {
    let _errno = ErrnoGuard::save();
    let _signals = near_window_end(&*t);
    // SAFETY (here and below): `t` is this thread's block, passed by hot.c.
    if (*t).mode == M_BUSY && !recover_busy(&mut *t, sp) {
        return;
    }
    if held_by_live_path(&*t, sp) {
        return;
    }
    let _busy = BusySp::set(t, sp);
    let t = &mut *t;
    if t.mode == M_UNINIT {
        start_thread(t);
    }
    if t.mode == M_FILTERED {
        filter::enter_outside(t, addr, sp);
        return;
    }
    if !begin_slow(t) {
        return;
    }
    enter_recorded(t, addr, sp, false);
}

/// Record an entry (the thread is BUSY; it is ACTIVE again after, or FILTERED when the entry
/// starts a subtree that is not recorded). `root`: the entry starts a `-F` subtree.
unsafe fn enter_recorded(t: &mut SltThread, addr: u64, sp: u64, root: bool) {
    // Take back what hot.c wrote before anything below lends the cursor out again.
    t.pull();
    let decision = filter::decision(addr);
    let off = frames::cfa_offset(addr, sp);
    let cfa = if off == 0 { 0 } else { sp + off as u64 };
    let depth = t.depth as usize;
    let now = writer::monotonic_ns();
    let dead = if depth <= STACK_CAP { frames::dead_frames(std::slice::from_raw_parts(t.cfas, depth), cfa) } else { 0 };
    let left_root = dead > 0 && std::slice::from_raw_parts(t.stack, depth)[depth - dead..].iter().any(|&a| a & filter::ROOT_BIT != 0);
    let depth = depth - dead;
    t.depth = depth as u64;
    if dead > 0 {
        if let Some(w) = t.pull() {
            for _ in 0..dead {
                w.ret(now);
            }
        }
    }
    if left_root && !root {
        // The closed frames held the `-F` call: the thread is outside again.
        t.push();
        filter::leave(t);
        filter::enter_outside(t, addr, sp);
        return;
    }
    if decision == filter::Decision::Skip {
        t.push();
        filter::skip_from(t, cfa);
        return;
    }
    match id_of(addr) {
        Some(id) => {
            slt_cache_put(t, addr, id as u64 | (off as u64) << 32);
            if depth < STACK_CAP {
                *t.stack.add(depth) = if root { addr | filter::ROOT_BIT } else { addr };
                *t.cfas.add(depth) = cfa;
            }
            t.depth += 1;
            if let Some(w) = t.pull() {
                w.call(id, now);
            }
        }
        None if root => filter::leave(t),
        None => {}
    }
    t.push();
}

/// Exit, when hot.c cannot record it by itself: the thread's first event, a return with no
/// open call or that skips frames (longjmp), a full window.
#[no_mangle]
pub unsafe extern "C" fn slt_exit_slow(t: *mut SltThread, addr: u64, sp: u64) {
    let _errno = ErrnoGuard::save();
    let _signals = near_window_end(&*t);
    if held_by_live_path(&*t, sp) {
        return;
    }
    // This frame's stack pointer: everything this slow path runs is below it.
    let _busy = BusySp::set(t, frames::stack_pointer());
    let t = &mut *t;
    if t.mode == M_FILTERED {
        filter::exit_outside(t);
        return;
    }
    if !begin_slow(t) {
        return;
    }
    // Frames skipped by longjmp never return: if the exiting function is deeper in the
    // stack than the top, close the skipped frames first. (A `-F` call is marked with
    // filter::ROOT_BIT, so that its exit comes here.)
    let depth = t.depth as usize;
    let mut returns = 1;
    let mut left_root = false;
    if depth > 0 && depth <= STACK_CAP {
        let stack = std::slice::from_raw_parts(t.stack, depth);
        if stack[depth - 1] & !filter::ROOT_BIT != addr {
            if let Some(k) = stack[..depth - 1].iter().rposition(|&a| a & !filter::ROOT_BIT == addr) {
                returns += depth - 1 - k;
            }
        }
        left_root = stack[depth - returns.min(depth)..].iter().any(|&a| a & filter::ROOT_BIT != 0);
    }
    t.depth = depth.saturating_sub(returns) as u64;
    let now = writer::monotonic_ns();
    if let Some(w) = t.pull() {
        for _ in 0..returns {
            w.ret(now);
        }
    }
    t.push();
    if left_root {
        filter::leave(t);
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
    let _errno = ErrnoGuard::save();
    setup_once();
    if ROOT.load(Ordering::Acquire).is_null() {
        return;
    }
    // Patching stays here (never lazily, from inside a hook call: the code it rewrites may
    // be running then).
    #[cfg(target_arch = "x86_64")]
    objects::patch_at_start();
}

/// Set-up of this process image: 0 not done, 1 under way, 2 done.
static SETUP: AtomicU8 = AtomicU8::new(0);

/// Read the environment and register the thread-exit key, the fork handler and the filters,
/// once: from the constructor, or from the first hook call if an instrumented library's
/// constructor runs before this library's (the main thread would otherwise record nothing).
/// Never waits: false while the set-up is under way elsewhere (then the caller drops its
/// event), so a signal handler that interrupts the set-up cannot deadlock on it.
fn setup_once() -> bool {
    match SETUP.compare_exchange(0, 1, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => {
            setup();
            SETUP.store(2, Ordering::Release);
            true
        }
        Err(state) => state == 2,
    }
}

fn setup() {
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
    if let Some(f) = std::env::var_os(filter::ENV_FILTER) {
        filter::install(filter::Filters::parse(&f.to_string_lossy()));
    }
    ROOT.store(Box::into_raw(Box::new(dir)), Ordering::Release);
}

/// `exit()` (or return from `main`): close the calling thread's stream, cut to its length.
extern "C" fn destructor() {
    let _errno = ErrnoGuard::save();
    // SAFETY: this thread's block.
    let t = unsafe { &mut *slt_thread_state() };
    if t.mode == M_ACTIVE || t.mode == M_FILTERED {
        // Recording off (the limit null) BEFORE the window is unmapped: a profiling timer's
        // handler that calls instrumented code while `finish` runs then has its events
        // dropped instead of written into unmapped memory. BUSY keeps `pull` valid.
        t.set_mode(M_BUSY);
        if let Some(w) = t.pull() {
            w.finish();
        }
        t.set_mode(M_OFF);
    }
}

/// In the child of a `fork`: forget the parent's recording; the child starts its own.
extern "C" fn after_fork_child() {
    let _errno = ErrnoGuard::save();
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
    #[cfg(target_arch = "x86_64")]
    objects::after_fork_child();
    STATE.store(UNINIT, Ordering::Release);
    // SAFETY: this thread's block; the only thread of the child.
    let t = unsafe { &mut *slt_thread_state() };
    // Off (the limit null) before the parent's window is unmapped, as in `destructor`.
    t.set_mode(M_OFF);
    if !t.rust.is_null() {
        // SAFETY: this thread's own state.
        if let Some(mut w) = unsafe { (*(t.rust as *mut ThreadState)).writer.take() } {
            w.abandon();
        }
    }
    // The next event opens the child's stream (replaying the open calls) with fresh ids.
    t.set_mode(M_UNINIT);
}

#[cfg(test)]
mod tests {
    use super::*;

    extern "C" {
        fn slt_thread_size() -> u64;
        fn slt_event_max() -> u64;
        fn slt_cache_size() -> u64;
        fn slt_test_encode(t: *mut SltThread, kinds: *const u8, ids: *const u64, times: *const u64, n: u64) -> u64;
        fn slt_test_now() -> u64;
    }

    #[test]
    fn c_and_rust_agree_on_the_thread_block_layout() {
        // SAFETY: plain C functions returning constants.
        unsafe {
            assert_eq!(slt_thread_size() as usize, std::mem::size_of::<SltThread>());
            assert_eq!(slt_cache_size() as usize, CACHE_SIZE);
            assert_eq!(slt_event_max() as usize, trace_format::event::MAX_EVENT_LEN);
        }
    }

    /// Events of every shape: ids inline and escaped (one to five varint bytes), deltas of
    /// zero to many bytes, and times that go back (delta 0, the base stays).
    fn events() -> Vec<(u8, u64, u64)> {
        let mut out = Vec::new();
        let mut ts = 1_000u64;
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        for i in 0..60_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let dt = match i % 7 {
                0 => 0,
                1 => x % 63,
                2 => 63 + x % 65,
                3 => x % 20_000,
                4 => x % (1 << 40),
                _ => x % 128,
            };
            ts = if i % 97 == 0 { ts.saturating_sub(x % 500) } else { ts + dt };
            let id = match i % 5 {
                0 => x % 63,
                1 => 63 + x % 200,
                2 => x % (1 << 20),
                3 => u32::MAX as u64 - x % 3,
                _ => 62 + x % 3,
            };
            out.push(if i % 3 == 2 { (2, 0, ts) } else { (1, id, ts) });
        }
        out
    }

    #[test]
    fn c_encoder_writes_the_same_stream_as_the_rust_writer() {
        let d = tempfile::tempdir().unwrap();
        let evs = events();
        let window = 64 << 10;
        let rust_path = d.path().join("rust.ev");
        let mut w = StreamWriter::create(&rust_path, FLAG_NATIVE, 7, 8, 1_000, window).unwrap();
        w.thread_name("worker");
        for &(k, id, ts) in &evs {
            if k == 1 {
                w.call(id as u32, ts);
            } else {
                w.ret(ts);
            }
        }
        w.finish();

        let c_path = d.path().join("c.ev");
        let mut w = StreamWriter::create(&c_path, FLAG_NATIVE, 7, 8, 1_000, window).unwrap();
        w.thread_name("worker");
        let kinds: Vec<u8> = evs.iter().map(|e| e.0).collect();
        let ids: Vec<u64> = evs.iter().map(|e| e.1).collect();
        let times: Vec<u64> = evs.iter().map(|e| e.2).collect();
        // SAFETY: a zeroed block is valid (null pointers, mode 0); only `cur` is used.
        let mut t: Box<SltThread> = Box::new(unsafe { std::mem::zeroed() });
        let mut done = 0usize;
        let mut windows = 0;
        while done < evs.len() {
            t.cur = w.cursor().expect("the stream is open");
            // SAFETY: the arrays hold n entries from `done`; the cursor is the writer's.
            let n = unsafe {
                slt_test_encode(&mut *t, kinds[done..].as_ptr(), ids[done..].as_ptr(), times[done..].as_ptr(), (evs.len() - done) as u64)
            };
            // SAFETY: hot.c moved the cursor by whole events while pos <= limit.
            unsafe { w.set_cursor(&t.cur) };
            done += n as usize;
            windows += 1;
        }
        w.finish();
        assert!(windows > 3, "the events must span several windows");
        let (a, b) = (std::fs::read(&rust_path).unwrap(), std::fs::read(&c_path).unwrap());
        assert_eq!(a.len(), b.len());
        assert!(a == b, "streams differ at byte {:?}", a.iter().zip(&b).position(|(x, y)| x != y));
        // And the stream reads back as the events (times that went back read as the base).
        let s = trace_format::ThreadStream::open(&c_path).unwrap();
        let calls = s.events().unwrap().filter(|e| matches!(e, Ok(trace_format::Event::Call { .. }))).count();
        assert_eq!(calls, kinds.iter().filter(|&&k| k == 1).count());
        assert_eq!(s.header.totals.unwrap().calls as usize, calls);
    }

    #[test]
    fn c_clock_is_the_rust_clock() {
        // Before and after a calibration is published, hot.c's reads stay between Rust's.
        for _ in 0..2 {
            let a = writer::monotonic_ns();
            // SAFETY: reads the clock.
            let c = unsafe { slt_test_now() };
            let b = writer::monotonic_ns();
            assert!(a <= c + 1_000 && c <= b + 1_000, "{a} {c} {b}");
            std::thread::sleep(std::time::Duration::from_millis(15));
            publish_calibration();
        }
    }
}
