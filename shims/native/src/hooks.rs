//! The hooks: `__cyg_profile_func_enter/exit` call hot.c's `slt_enter`/`slt_exit` (the
//! compiler turns these into a jump), which call the slow paths here for anything but the
//! common case (`slt_enter_slow`, `slt_exit_slow`, the clock before a TSC calibration).
use crate::guards::ErrnoGuard;
use crate::hot::*;
use crate::process::id_of;
use crate::thread::{recover_busy, start_thread, BusySp, ThreadState};
use crate::{filter, frames, suspend, window};
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
use trace_format::writer;

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

/// The process's clock, exported for the Python shim (`trace run --native-ext`): both streams
/// of a thread are merged by time, so both shims read one TSC calibration, the one hot.c's
/// events are timed with (`trace_format::clock::share_preloaded`).
#[no_mangle]
pub extern "C" fn slice_trace_clock_ns() -> u64 {
    // SAFETY: reads the clock (hot.c's, or Rust's while it has no calibration); keeps errno.
    unsafe { slt_clock_now() }
}

/// The clock for a Python call or resume (the Python shim, `trace run --native-ext`): first
/// the open native calls of this thread that have returned are closed (hot.c's
/// `slt_python_entry`), so that the merge (`trace_format::pyext`) nests a Python call under
/// exactly the native calls still running: a callback under its C caller, and a call after the
/// C function returned beside it. Keeps errno.
#[no_mangle]
pub extern "C" fn slice_trace_python_entry_ns() -> u64 {
    // SAFETY: the calling thread's block, read by this thread only.
    if unsafe { (*slt_thread_state()).depth } == 0 {
        // SAFETY: reads the clock; keeps errno.
        return unsafe { slt_clock_now() };
    }
    // Finding the stack's bounds the first time may set errno.
    let _errno = ErrnoGuard::save();
    let sp = frames::stack_pointer();
    // Slots are read only on the thread's own stack, between `sp` and its top.
    let hi = match frames::thread_stack() {
        (lo, hi) if lo <= sp && sp < hi => hi,
        _ => 0,
    };
    let mut full: libc::c_int = 0;
    // SAFETY: an event of the calling thread; `hi` is 0 or the top of the stack `sp` is on.
    let ns = unsafe { slt_python_entry(sp, hi, &mut full) };
    if full == 0 {
        return ns;
    }
    // SAFETY: this thread's block; `hi` as above.
    unsafe { python_entry_slow(slt_thread_state(), sp, hi) };
    // Read after the returns were written: they are not later than the Python event.
    // SAFETY: reads the clock; keeps errno.
    unsafe { slt_clock_now() }
}

/// The returns of [`slice_trace_python_entry_ns`] that found too little room in the window:
/// written through the thread's writer, which moves to the next window, as an exit's slow
/// path does ([`slt_exit_slow`]). A path of this thread that is live (the Python call runs in
/// a signal handler that interrupted it) keeps the window: nothing is closed then.
///
/// # Safety
/// `t` is the calling thread's block; `hi` is 0 or the top of the stack `sp` is on.
unsafe fn python_entry_slow(t: *mut SltThread, sp: u64, hi: u64) {
    // SAFETY: `t` is this thread's block (the contract), alive as long as the thread.
    let _signals = near_window_end(unsafe { &*t });
    // SAFETY: as above.
    if held_by_live_path(unsafe { &*t }, sp) {
        return;
    }
    let _busy = BusySp::set(t, frames::stack_pointer());
    // SAFETY: as above; a live path this call interrupts made it return above.
    let t = unsafe { &mut *t };
    if !begin_slow(t) {
        return;
    }
    // SAFETY: the thread is BUSY (this path holds the window); `hi` as the contract says.
    let n = unsafe { slt_python_entry_ended(t, sp, hi) } as usize;
    t.depth -= n as u64;
    write_returns(t, n, false);
}

/// The clock's refinement, exported with [`slice_trace_clock_ns`]: hot.c moves to the refined
/// calibration at once, so that the two streams stay on one.
#[no_mangle]
pub extern "C" fn slice_trace_clock_refine() {
    trace_format::clock::refine();
    publish_calibration();
}

/// An event of a thread that records, whose window a path holds (hot.c's marker): a signal
/// handler's event inside that path (dropped), unless the path is gone (window.rs; then the
/// slow path takes the window over when it switches the mode).
pub(crate) fn held_by_live_path(t: &SltThread, sp: u64) -> bool {
    t.mode == M_ACTIVE && (t.cur.limit as i64) < 0 && !window::owner_gone(t, sp)
}

/// Signals blocked for this slow path if it may change windows (window.rs). An event of a
/// thread that does not record changes nothing.
pub(crate) fn near_window_end(t: &SltThread) -> window::NearWindowEnd {
    let near = t.mode != M_OFF && {
        // SAFETY: this thread's own state, if any.
        let h = (!t.rust.is_null()).then(|| unsafe { &(*(t.rust as *mut ThreadState)).handover });
        t.mode == M_UNINIT || window::near_end(t, h)
    };
    window::NearWindowEnd::guard(near)
}

/// Start a slow path: the thread records (its stream is created on its first event); its
/// mode is then BUSY until `push`. True only for a thread that was ACTIVE, so it has its state
/// (see [`SltThread`]).
pub(crate) fn begin_slow(t: &mut SltThread) -> bool {
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
///
/// # Safety
/// `t` is the calling thread's block ([`slt_thread_state`], as hot.c passes it).
#[no_mangle]
pub unsafe extern "C" fn slt_enter_slow(t: *mut SltThread, addr: u64, sp: u64) {
    let _errno = ErrnoGuard::save();
    // SAFETY: `t` is this thread's block (the contract), alive as long as the thread.
    let _signals = near_window_end(unsafe { &*t });
    // SAFETY: as above. A BUSY thread is inside a slow path this entry interrupts
    // (`recover_busy` then only reads the block) or one a `siglongjmp` left; either way its
    // hand-over is of the writer's window (a slow path changes windows with signals blocked).
    if unsafe { (*t).mode == M_BUSY && !recover_busy(&mut *t, sp) } {
        return;
    }
    // SAFETY: as above.
    if held_by_live_path(unsafe { &*t }, sp) {
        return;
    }
    let _busy = BusySp::set(t, sp);
    // SAFETY: as above; a path of this thread that this entry interrupts, if it is still live
    // (BUSY, or holding the window with a marker), made this one return above.
    let t = unsafe { &mut *t };
    if t.mode == M_UNINIT {
        start_thread(t);
    }
    if t.mode == M_FILTERED {
        // SAFETY: `t` is this thread's block, FILTERED.
        unsafe { filter::enter_outside(t, addr, sp) };
        return;
    }
    if !begin_slow(t) {
        return;
    }
    // SAFETY: `begin_slow` found the thread ACTIVE: it has its state.
    unsafe { enter_recorded(t, addr, sp, false) };
}

/// Record an entry (the thread is BUSY; it is ACTIVE again after, or FILTERED when the entry
/// starts a subtree that is not recorded). `root`: the entry starts a `-F` subtree.
///
/// # Safety
/// The thread has its state (`t.rust` is set; see [`SltThread`]): the slow path found it
/// ACTIVE or FILTERED.
pub(crate) unsafe fn enter_recorded(t: &mut SltThread, addr: u64, sp: u64, root: bool) {
    // Take back what hot.c wrote before anything below lends the cursor out again.
    t.pull();
    let decision = filter::decision(addr);
    let off = frames::cfa_offset(addr, sp);
    let cfa = if off == 0 { 0 } else { sp + off as u64 };
    let depth = t.depth as usize;
    let now = writer::monotonic_ns();
    let mut entered = false;
    let dead = if frames::starts_program(addr) {
        // `exit` runs its handlers from frames below those `main` left open (no exit event
        // closes them): close them first. Registered now, the closer runs before the
        // handlers registered earlier (C++ static destructors, `.fini_array`).
        // SAFETY: the handler is a function of this library, which stays loaded until the
        // process ends (it is preloaded), and may run at any `exit`.
        unsafe { libc::atexit(close_frames_at_exit) };
        EXIT_CLOSER.store(true, Ordering::Relaxed);
        depth
    } else if depth <= STACK_CAP {
        // SAFETY: the thread has its state (the contract), and depth <= STACK_CAP.
        let (dead, switch) = unsafe { closed_by(t, addr, cfa) };
        entered = switch == frames::Switch::Enter;
        dead
    } else {
        0
    };
    // SAFETY: the thread has its state (the contract): `stack` holds STACK_CAP entries, the
    // first `depth` of them (at most STACK_CAP) the open calls'.
    let known = unsafe { std::slice::from_raw_parts(t.stack, depth.min(STACK_CAP)) };
    let left_root = dead > 0 && known[known.len() - dead.min(known.len())..].iter().any(|&a| a & filter::ROOT_BIT != 0);
    let depth = depth - dead;
    t.depth = depth as u64;
    if dead > 0 {
        if let Some(w) = t.pull() {
            for _ in 0..dead {
                w.ret(now);
            }
        }
    }
    if entered && !left_root {
        resume_segment(t, cfa, now);
    }
    let depth = t.depth as usize;
    if left_root && !root {
        // The closed frames held the `-F` call: the thread is outside again.
        t.push();
        filter::leave(t);
        // SAFETY: the thread has its state (the contract), whatever its mode now.
        unsafe { filter::enter_outside(t, addr, sp) };
        return;
    }
    if decision == filter::Decision::Skip {
        t.push();
        filter::skip_from(t, cfa);
        return;
    }
    match id_of(addr) {
        Some(id) => {
            // SAFETY: `t` is this thread's block: hot.c writes one entry of its `cache`
            // (CACHE_SIZE entries, or null: then nothing).
            unsafe { slt_cache_put(t, addr, id as u64 | (off as u64) << 32) };
            if depth < STACK_CAP {
                // SAFETY: the thread has its state (the contract), depth < STACK_CAP, and
                // `cfa` is 0 or the CFA of the function being entered, which is running.
                unsafe { crate::thread::set_frame(t, depth, if root { addr | filter::ROOT_BIT } else { addr }, cfa) };
            }
            t.depth += 1;
            if let Some(w) = t.pull() {
                w.call(id, now);
                // Inlined code in the bytes its patched entry moved runs now (probe.rs).
                crate::probe::entered(addr, |inlined| {
                    w.call(inlined, now);
                    w.ret(now);
                });
            }
        }
        None if root => filter::leave(t),
        None => {}
    }
    t.push();
}

/// How many open frames a call at `cfa` closes (frames.rs), `depth <= STACK_CAP`, and where
/// the call runs. A call back on a stack below frames of other stacks (a coroutine switched
/// away from) suspends those frames (suspend.rs) before they are closed: they are written as
/// returns all the same, and resumed when a call runs on their stack again
/// ([`resume_segment`]).
///
/// # Safety
/// The thread has its state (`t.rust` is set; see [`SltThread`]) and `t.depth <= STACK_CAP`.
unsafe fn closed_by(t: &mut SltThread, addr: u64, cfa: u64) -> (usize, frames::Switch) {
    let depth = t.depth as usize;
    // SAFETY: the thread has its state, whose `cfas` holds STACK_CAP entries, and depth <=
    // STACK_CAP (the contract).
    let cfas = unsafe { std::slice::from_raw_parts(t.cfas, depth) };
    let switch = frames::stack_switch(cfas, cfa);
    let dead = match switch {
        frames::Switch::Back(k) => {
            // SAFETY: as for `cfas`.
            let stack = unsafe { std::slice::from_raw_parts(t.stack, depth) };
            // A `-F` call among them: the filter's rules close them (not kept); a signal
            // handler's frames on the alternate stack have returned (not kept).
            let keep =
                !t.rust.is_null() && !stack[k + 1..].iter().any(|&a| a & filter::ROOT_BIT != 0) && !frames::on_signal_stack(cfas[k + 1]);
            if keep {
                let mut left = [(0u64, 0u64); suspend::SEGMENT_FRAMES];
                let n = (depth - k - 1).min(suspend::SEGMENT_FRAMES);
                for (i, f) in left[..n].iter_mut().enumerate() {
                    *f = (stack[k + 1 + i], cfas[k + 1 + i]);
                }
                let parent = (stack[k], cfas[k]);
                // SAFETY: `rust` is set (`keep`): the thread's own state, which no other
                // reference in this path borrows (`stack` and `cfas` borrow the arrays its
                // boxes point to, which `suspend` does not touch).
                let st = unsafe { &mut *(t.rust as *mut ThreadState) };
                st.suspended.suspend(&left[..n], parent);
            }
            (depth - k - 1) + frames::dead_frames(&cfas[..=k], cfa)
        }
        frames::Switch::Same if cfa != 0 => {
            let by_cfa = frames::dead_frames(cfas, cfa);
            let left = depth - by_cfa;
            // SAFETY: as for `cfas`: `stack` holds STACK_CAP entries, `cfas` 2 * STACK_CAP
            // (their return addresses from STACK_CAP on: thread::set_frame).
            let (stack, rets) =
                unsafe { (std::slice::from_raw_parts(t.stack, left), std::slice::from_raw_parts(t.cfas.add(STACK_CAP), left)) };
            // The call's return address, in the function that makes it: at its CFA - 8, on
            // this stack above the stack pointer (a real call's; an inline probe's hit has
            // none: its CFA is the interrupted stack pointer).
            // SAFETY: `cfa` is the CFA of the function being entered, which is running on
            // this thread's stack: its return-address slot is mapped.
            let ret = (addr & crate::probe::INLINE_BIT == 0).then(|| unsafe { *((cfa - 8) as *const u64) });
            by_cfa + frames::returned_above(stack, &cfas[..left], rets, cfa, ret)
        }
        _ => frames::dead_frames(cfas, cfa),
    };
    (dead, switch)
}

/// A call at `cfa` on a stack where no frame is open ([`frames::Switch::Enter`]), whose frames
/// suspend.rs kept when the thread left it: the frames the thread left that stack under (above
/// the frame the segment was nested in, when that frame is still open) are closed, and the
/// segment's frames that are still live are opened again as resumes, so that the call nests
/// under them. Does nothing for a thread without its state.
fn resume_segment(t: &mut SltThread, cfa: u64, now: u64) {
    let depth = t.depth as usize;
    if t.rust.is_null() || depth > STACK_CAP {
        return;
    }
    // A signal handler on the alternate stack nests under the frame it interrupted.
    if frames::on_signal_stack(cfa) {
        return;
    }
    let mut resumed = [(0u64, 0u64); suspend::SEGMENT_FRAMES];
    let (parent, live) = {
        // SAFETY: `rust` is set (checked above): this thread's own state; the borrow ends
        // here, before the writer's.
        let st = unsafe { &mut *(t.rust as *mut ThreadState) };
        let Some((parent, live)) = st.suspended.take(cfa) else { return };
        resumed[..live].copy_from_slice(st.suspended.taken(live));
        (parent, live)
    };
    // SAFETY: `rust` is set, so `stack` and `cfas` hold STACK_CAP entries each (the block's
    // invariant), and depth <= STACK_CAP (checked above).
    let stack = unsafe { std::slice::from_raw_parts(t.stack, depth) };
    // SAFETY: as above.
    let cfas = unsafe { std::slice::from_raw_parts(t.cfas, depth) };
    let above = (0..depth).rev().find(|&i| (stack[i], cfas[i]) == parent).map_or(0, |i| depth - i - 1);
    if stack[depth - above..].iter().any(|&a| a & filter::ROOT_BIT != 0) {
        return;
    }
    let room = STACK_CAP - (depth - above);
    let (shadow, shadow_cfas) = (t.stack, t.cfas);
    let Some(w) = t.pull() else { return };
    for _ in 0..above {
        w.ret(now);
    }
    let mut d = depth - above;
    for &(a, c) in resumed[..live].iter().take(room) {
        let Some(id) = id_of(a) else { break };
        w.resume(id, now);
        // SAFETY: the shadow stacks hold STACK_CAP entries (`cfas` twice that: its second
        // half the return addresses, 0 here: unknown, the frame counts as running at a Python
        // call), and d < depth - above + room = STACK_CAP (`take(room)`).
        unsafe {
            *shadow.add(d) = a;
            *shadow_cfas.add(d) = c;
            *shadow_cfas.add(STACK_CAP + d) = 0;
        }
        d += 1;
    }
    t.depth = d as u64;
}

/// `atexit` handler (registered when `main` starts): the calls still open on the thread that
/// runs `exit` never return; close them, so that the handlers `exit` runs after this one
/// (destructors, `.fini_array`) are roots and not callees of the last call `main` made. A
/// thread outside the recorded calls (`-F`, `-N`) is left as it is.
extern "C" fn close_frames_at_exit() {
    let _errno = ErrnoGuard::save();
    let sp = frames::stack_pointer();
    // SAFETY: this thread's block (hot.c's TLS), as in the slow paths; the shadow stack is
    // read only after `begin_slow` found the thread ACTIVE (so it has its state).
    unsafe {
        let t = slt_thread_state();
        let _signals = near_window_end(&*t);
        if (*t).mode != M_ACTIVE || held_by_live_path(&*t, sp) {
            return;
        }
        let _busy = BusySp::set(t, sp);
        let t = &mut *t;
        if !begin_slow(t) {
            return;
        }
        t.pull();
        let depth = t.depth as usize;
        let known = std::slice::from_raw_parts(t.stack, depth.min(STACK_CAP));
        let left_root = known.iter().any(|&a| a & filter::ROOT_BIT != 0);
        t.depth = 0;
        write_returns(t, depth, left_root);
    }
}

/// Record `n` returns now on `t` (frames closed by the slow paths: skipped by `longjmp`, or
/// left open at `exit`), then hand the window back; `left_root`: a `-F` call was among them.
fn write_returns(t: &mut SltThread, n: usize, left_root: bool) {
    let now = writer::monotonic_ns();
    if let Some(w) = t.pull() {
        for _ in 0..n {
            w.ret(now);
        }
    }
    t.push();
    if left_root {
        filter::leave(t);
    }
}

/// Set when `main` started: a handler registered from then on (`atexit` in `main`, a
/// function-local static's destructor) runs before the closer registered then, so
/// `__cxa_atexit` makes it close the frames itself (see there).
static EXIT_CLOSER: AtomicBool = AtomicBool::new(false);
static REAL_CXA_ATEXIT: AtomicPtr<libc::c_void> = AtomicPtr::new(std::ptr::null_mut());

type CxaAtexitFn = unsafe extern "C" fn(extern "C" fn(*mut libc::c_void), *mut libc::c_void, *mut libc::c_void) -> libc::c_int;

extern "C" fn close_frames_at_exit_arg(_: *mut libc::c_void) {
    close_frames_at_exit();
}

/// A late exit handler of the program itself, run through [`run_late_handler`].
struct LateHandler {
    func: extern "C" fn(*mut libc::c_void),
    arg: *mut libc::c_void,
}

/// Close the frames left open (as the closer does), then run the handler: the handler is a
/// root of the tree. One exit entry per handler, as without the shim.
extern "C" fn run_late_handler(p: *mut libc::c_void) {
    // SAFETY: `p` is the `LateHandler` boxed by `__cxa_atexit` for this entry, which glibc
    // runs once.
    let h = unsafe { Box::from_raw(p as *mut LateHandler) };
    close_frames_at_exit();
    (h.func)(h.arg)
}

/// Whether `dso` (a `__cxa_atexit` owner) is the main program, whose handlers run only at
/// `exit` (a library's also run at its `dlclose`, in the middle of the program, when closing
/// the thread's frames would be wrong).
fn is_program_dso(dso: *mut libc::c_void) -> bool {
    if dso.is_null() {
        return true;
    }
    // SAFETY: dladdr only reads the loader's tables; AT_PHDR is an address inside the main
    // executable's first mapping.
    unsafe {
        let mut a: libc::Dl_info = std::mem::zeroed();
        let mut b: libc::Dl_info = std::mem::zeroed();
        let phdr = libc::getauxval(libc::AT_PHDR) as *const libc::c_void;
        libc::dladdr(dso, &mut a) != 0 && libc::dladdr(phdr, &mut b) != 0 && a.dli_fbase == b.dli_fbase
    }
}

/// `__cxa_atexit` (what `atexit` and C++ static destructors register with). Once `main`
/// started (see `EXIT_CLOSER`), a handler of the program is registered wrapped in
/// [`run_late_handler`], which closes the frames left open before running it; a library's,
/// which can run at its `dlclose`, is followed by a closer registered for `exit` alone (exit
/// runs handlers in the reverse order: the closer first, so the new handler is a root).
///
/// # Safety
/// As glibc's: `func` is called with `arg` at exit (or at the `dlclose` of `dso`).
#[no_mangle]
pub unsafe extern "C" fn __cxa_atexit(
    func: extern "C" fn(*mut libc::c_void),
    arg: *mut libc::c_void,
    dso: *mut libc::c_void,
) -> libc::c_int {
    let mut f = REAL_CXA_ATEXIT.load(Ordering::Acquire);
    if f.is_null() {
        // SAFETY: dlsym with RTLD_NEXT and a NUL-terminated name.
        f = unsafe { libc::dlsym(libc::RTLD_NEXT, c"__cxa_atexit".as_ptr()) };
        if f.is_null() {
            return -1;
        }
        REAL_CXA_ATEXIT.store(f, Ordering::Release);
    }
    // SAFETY: the next `__cxa_atexit` (glibc's) has this signature.
    let real: CxaAtexitFn = unsafe { std::mem::transmute::<*mut libc::c_void, CxaAtexitFn>(f) };
    if !EXIT_CLOSER.load(Ordering::Relaxed) {
        // SAFETY: glibc's, with the caller's arguments.
        return unsafe { real(func, arg, dso) };
    }
    if is_program_dso(dso) {
        let h = Box::into_raw(Box::new(LateHandler { func, arg }));
        // SAFETY: glibc's; `run_late_handler` takes the box back when it runs.
        let r = unsafe { real(run_late_handler, h as *mut libc::c_void, dso) };
        if r != 0 {
            // SAFETY: not registered: still ours.
            drop(unsafe { Box::from_raw(h) });
        }
        return r;
    }
    // SAFETY: glibc's, with the caller's arguments; then the closer, for exit alone.
    unsafe {
        let r = real(func, arg, dso);
        if r == 0 {
            real(close_frames_at_exit_arg, std::ptr::null_mut(), std::ptr::null_mut());
        }
        r
    }
}

/// Exit, when hot.c cannot record it by itself: the thread's first event, a return with no
/// open call or that skips frames (longjmp), a full window.
///
/// # Safety
/// `t` is the calling thread's block ([`slt_thread_state`], as hot.c passes it).
#[no_mangle]
pub unsafe extern "C" fn slt_exit_slow(t: *mut SltThread, addr: u64, sp: u64) {
    let _errno = ErrnoGuard::save();
    // SAFETY: `t` is this thread's block (the contract), alive as long as the thread.
    let _signals = near_window_end(unsafe { &*t });
    // SAFETY: as above.
    if held_by_live_path(unsafe { &*t }, sp) {
        return;
    }
    // This frame's stack pointer: everything this slow path runs is below it.
    let _busy = BusySp::set(t, frames::stack_pointer());
    // SAFETY: as above; a live fast path this exit interrupts made it return above, and in a
    // live slow path (BUSY) it only sets and puts back `busy_sp` and returns at `begin_slow`.
    let t = unsafe { &mut *t };
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
        // SAFETY: `begin_slow` found the thread ACTIVE, so it has its state: `stack` holds
        // STACK_CAP entries, the first `depth` (at most STACK_CAP) the open calls'.
        let stack = unsafe { std::slice::from_raw_parts(t.stack, depth) };
        if stack[depth - 1] & !filter::ROOT_BIT != addr {
            if let Some(k) = stack[..depth - 1].iter().rposition(|&a| a & !filter::ROOT_BIT == addr) {
                returns += depth - 1 - k;
            }
        }
        left_root = stack[depth - returns.min(depth)..].iter().any(|&a| a & filter::ROOT_BIT != 0);
    }
    t.depth = depth.saturating_sub(returns) as u64;
    write_returns(t, returns, left_root);
}
