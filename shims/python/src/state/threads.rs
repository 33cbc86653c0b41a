//! Each thread's stream (`ThreadRec`), the registry the exit handler finishes them from, and
//! the one warning path of the hooks.

use super::*;

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
