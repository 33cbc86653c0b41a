//! Constructor, destructor, fork: the set-up of a process image (environment, thread-exit
//! key, fork handler, filters, entry patching at start-up), closing the main thread's stream
//! at `exit()`, and forgetting the parent's recording in a forked child.
use crate::filter;
use crate::guards::ErrnoGuard;
use crate::hot::*;
use crate::objects;
use crate::process::{COLD, FORKED_FROM, KEY, PROC, READY, ROOT, STATE, TABLE, THREAD_SEQ, UNINIT};
use crate::thread::{thread_exit, ThreadState};
use std::path::PathBuf;
use std::ptr::null_mut;
use std::sync::atomic::{AtomicU8, Ordering};
use trace_format::ENV_TRACE_DIR;

#[used]
#[link_section = ".init_array"]
static INIT: extern "C" fn() = constructor;

#[used]
#[link_section = ".fini_array"]
static FINI: extern "C" fn() = destructor;

pub(crate) extern "C" fn constructor() {
    let _errno = ErrnoGuard::save();
    setup_once();
    if ROOT.load(Ordering::Acquire).is_null() {
        return;
    }
    // Patching stays here (never lazily, from inside a hook call: the code it rewrites may
    // be running then).
    objects::patch_at_start();
}

/// Set-up of this process image: 0 not done, 1 under way, 2 done.
pub(crate) static SETUP: AtomicU8 = AtomicU8::new(0);

/// Read the environment and register the thread-exit key, the fork handler and the filters,
/// once: from the constructor, or from the first hook call if an instrumented library's
/// constructor runs before this library's (the main thread would otherwise record nothing).
/// Never waits: false while the set-up is under way elsewhere (then the caller drops its
/// event), so a signal handler that interrupts the set-up cannot deadlock on it.
pub(crate) fn setup_once() -> bool {
    match SETUP.compare_exchange(0, 1, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => {
            setup();
            SETUP.store(2, Ordering::Release);
            true
        }
        Err(state) => state == 2,
    }
}

pub(crate) fn setup() {
    // The shim's heap (lib.rs, `ALLOC`) stays usable in a child forked while another thread
    // allocated (its lock is taken around `fork`).
    // SAFETY: called once (SETUP), before this library allocates: set-up is the first thing
    // its constructor and its hooks do.
    unsafe { dlmalloc::enable_alloc_after_fork() };
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
pub(crate) extern "C" fn destructor() {
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
pub(crate) extern "C" fn after_fork_child() {
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
    objects::after_fork_child();
    crate::probe::after_fork_child();
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
