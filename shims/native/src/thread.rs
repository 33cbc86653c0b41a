//! Per-thread recording: the Rust side of a thread's state (`ThreadState`: its stream writer,
//! shadow stacks and id cache, pointed to by hot.c's block), handing the write window and the
//! cursor between hot.c and the writer (`pull`, `take`, `push`, `set_mode`), a thread's first
//! event and its exit, and taking a thread back after a `siglongjmp` out of a slow path.
use crate::guards::ErrnoGuard;
use crate::hot::*;
use crate::lifecycle::setup_once;
use crate::process::{ensure_process, id_of, DISABLED, KEY, ROOT, STATE, THREAD_SEQ};
use crate::{filter, frames, window};
use std::ffi::CStr;
use std::ptr::null_mut;
use std::sync::atomic::Ordering;
use trace_format::event::FLAG_NATIVE;
use trace_format::writer::{self, StreamWriter};

/// Sets `busy_sp` for the extent of a slow path and puts the previous value back (a signal
/// handler's slow path nested in another's leaves the outer one's).
pub(crate) struct BusySp {
    t: *mut SltThread,
    prev: u64,
}

impl BusySp {
    pub(crate) fn set(t: *mut SltThread, sp: u64) -> BusySp {
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
///
/// # Safety
/// `t` is this thread's block, BUSY; the hand-over in its state is of its writer's current
/// window (as [`window::resync_writer`] needs: a slow path changes windows only with signals
/// blocked, so one left by `siglongjmp` did not).
pub(crate) unsafe fn recover_busy(t: &mut SltThread, sp: u64) -> bool {
    if t.busy_sp == 0 || sp == 0 || sp < t.busy_sp {
        return false;
    }
    // SAFETY: `stack_t` is a plain C struct (a pointer, an int, a size): all zeros is a value.
    let mut ss: libc::stack_t = unsafe { std::mem::zeroed() };
    // SAFETY: sigaltstack only fills the stack_t we own (async-signal-safe).
    if unsafe { libc::sigaltstack(null_mut(), &mut ss) } != 0 || ss.ss_flags & libc::SS_ONSTACK != 0 {
        return false;
    }
    t.busy_sp = 0;
    // The writer holds the position since the slow path's `pull` (or hot.c's cursor does,
    // if the path was left before it); an event it was writing when left is overwritten by
    // the next (its position had not moved), and its counters and the depth are read back
    // from the stream.
    if let Some(w) = t.pull() {
        let w = w as *mut StreamWriter;
        // SAFETY: `pull` found the writer, so `rust` is set: this thread's own state; `w` is
        // its writer (a distinct field), the handover is copied out.
        let h = unsafe { (*(t.rust as *mut ThreadState)).handover };
        // SAFETY: `t` is BUSY and `h` its last hand-over, of the writer's window (the
        // contract); `w` is the state's writer, borrowed nowhere else (`pull`'s borrow was
        // made the raw pointer), and the state is not part of the block `t`.
        if !unsafe { window::resync_writer(t, &mut *w, &h) } {
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

/// Open call `depth` (< `STACK_CAP`) of the thread's shadow stacks: `addr` (with its flag
/// bits), its CFA (0: unknown) and the return address at its CFA - 8 (hot.c's `record_call`
/// stores the same three), which tells a frame still running from one that has returned when
/// Python code starts a call (hot.c's `slt_python_entry`).
///
/// # Safety
/// The thread has its state (`t.rust` is set), so `stack` and `cfas` hold their entries;
/// `depth < STACK_CAP`; `cfa` is 0 or the CFA of a frame of the calling thread that is
/// running (its return address slot is readable).
pub(crate) unsafe fn set_frame(t: &mut SltThread, depth: usize, addr: u64, cfa: u64) {
    // SAFETY: the contract: `stack` holds STACK_CAP entries, `cfas` twice that, depth <
    // STACK_CAP, and a running frame's CFA - 8 holds its return address.
    unsafe {
        *t.stack.add(depth) = addr;
        *t.cfas.add(depth) = cfa;
        *t.cfas.add(STACK_CAP + depth) = if cfa == 0 { 0 } else { *((cfa - 8) as *const u64) };
    }
}

pub(crate) struct ThreadState {
    pub(crate) writer: Option<StreamWriter>,
    pub(crate) stack: Box<[u64; STACK_CAP]>,
    /// The open calls' CFAs, then (from `STACK_CAP`, hot.c's `SLT_RETS`) the return address
    /// each found at its CFA - 8 when it was entered (0: unknown): see [`set_frame`].
    pub(crate) cfas: Box<[u64; 2 * STACK_CAP]>,
    /// The cursor handed to hot.c last (`push`), to rebuild it if a fast path is left half-way
    /// (window.rs).
    pub(crate) handover: window::Handover,
    /// hot.c's id cache (on the heap: see `SLT_CACHE_SETS` there).
    pub(crate) cache: Box<[CacheEntry]>,
    /// Frames of stacks the thread switched away from (suspend.rs).
    pub(crate) suspended: Box<crate::suspend::Suspended>,
}

impl SltThread {
    /// Give the C side's position back to the writer (before Rust writes or closes).
    pub(crate) fn pull(&mut self) -> Option<&mut StreamWriter> {
        if self.rust.is_null() {
            return None;
        }
        // SAFETY: `rust` is this thread's own state (see start_thread).
        let st = unsafe { &mut *(self.rust as *mut ThreadState) };
        let w = st.writer.as_mut()?;
        if self.mode == M_ACTIVE || self.mode == M_BUSY || self.mode == M_FILTERED {
            // SAFETY: the cursor came from this writer's `cursor()` (`push`), and hot.c only
            // moved it forward by whole events, each started before `limit`; taken back again
            // after the writer wrote, it is behind the position and ignored.
            unsafe { w.set_cursor(&self.cur) };
        }
        Some(w)
    }

    /// Take the write window from whatever holds it (hot.c's rule), leaving this frame's
    /// marker. If a fast path (or a hand-over) that a `siglongjmp` left for good held it, the
    /// cursor is rebuilt from the stream first (window.rs); if that fails, recording stops.
    /// Returns whether the cursor is sound.
    pub(crate) fn take(&mut self) -> bool {
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
    pub(crate) fn stop(&mut self) {
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
    pub(crate) fn set_mode(&mut self, mode: u32) {
        debug_assert_ne!(mode, M_ACTIVE);
        if !self.take() {
            return;
        }
        self.mode = mode;
        // SAFETY: this thread's block: the window held (by this frame's marker) is released.
        unsafe { slt_give_limit(self, null_mut()) };
    }

    /// Lend the writer's position to the C side; a stopped stream turns recording off.
    pub(crate) fn push(&mut self) {
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

/// The thread's first event (or its first after a fork): create its state and stream. The
/// mode is then ACTIVE, or OFF if this thread records nothing.
#[cold]
#[inline(never)]
pub(crate) fn start_thread(t: &mut SltThread) {
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
            cfas: Box::new([0u64; 2 * STACK_CAP]),
            handover: window::Handover::NONE,
            cache: (0..CACHE_SIZE).map(|_| CacheEntry { addr: u64::MAX, code: 0 }).collect(),
            suspended: crate::suspend::Suspended::new(),
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
    st.suspended.clear();
    // The thread's stack, where hot.c may read open frames' slots (frames.rs's bounds), in a
    // process with patched entries (whose frames see no exits).
    let (lo, hi) = crate::frames::thread_stack();
    (t.stack_lo, t.stack_span) = if lo < hi && crate::patch::any_patched() { (lo, hi - lo) } else { (0, 0) };
    st.writer = open_stream(t.depth as usize, &st.stack[..]);
    // The cursor of the new stream (a forked child's block still holds its parent's).
    t.push();
    filter::thread_started(t);
}

/// `pthread_key` destructor: the thread is exiting.
pub(crate) extern "C" fn thread_exit(p: *mut libc::c_void) {
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
pub(crate) fn open_stream(depth: usize, stack: &[u64]) -> Option<StreamWriter> {
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

pub(crate) fn thread_name() -> Option<String> {
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
