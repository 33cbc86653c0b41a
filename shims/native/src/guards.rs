//! Guards of the shim's own code: `errno` kept for the program, and the cold paths' lock
//! (signals blocked while it is held).
use std::ptr::null_mut;
use std::sync::atomic::{AtomicBool, Ordering};

/// Restores `errno` when dropped. Every path of the shim that may call into libc (the slow
/// paths, the constructor-time and exit-time handlers) holds one: the traced program must see
/// the `errno` it left (glibc's `realpath`, `dladdr`, `mmap` and friends may set it even when
/// they succeed). Reading and writing `errno` through `__errno_location` is async-signal-safe
/// (it is the calling thread's own TLS word).
pub(crate) struct ErrnoGuard(libc::c_int);

impl ErrnoGuard {
    #[inline]
    pub(crate) fn save() -> ErrnoGuard {
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
pub(crate) struct SpinLock(pub(crate) AtomicBool, std::cell::UnsafeCell<std::mem::MaybeUninit<libc::sigset_t>>);

// SAFETY: the cell is written and read only by the thread that holds the lock.
unsafe impl Sync for SpinLock {}

impl SpinLock {
    pub(crate) const fn new() -> SpinLock {
        SpinLock(AtomicBool::new(false), std::cell::UnsafeCell::new(std::mem::MaybeUninit::uninit()))
    }

    pub(crate) fn lock(&self) {
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

    /// [`SpinLock::lock`] by a thread whose every signal is blocked already (a handler
    /// installed with a full mask): no mask call.
    pub(crate) fn lock_blocked(&self) {
        while self.0.compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed).is_err() {
            // SAFETY: sched_yield has no preconditions (and is async-signal-safe).
            unsafe { libc::sched_yield() };
        }
    }

    /// [`SpinLock::lock_blocked`] that gives up after `tries` attempts, each but the first
    /// after a `sched_yield`: true when the lock is taken (release it with
    /// [`SpinLock::unlock_blocked`]).
    pub(crate) fn try_lock_blocked(&self, tries: u32) -> bool {
        for k in 0..tries.max(1) {
            if k > 0 {
                // SAFETY: sched_yield has no preconditions (and is async-signal-safe).
                unsafe { libc::sched_yield() };
            }
            if self.0.compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed).is_ok() {
                return true;
            }
        }
        false
    }

    /// Release a lock taken with [`SpinLock::lock_blocked`].
    pub(crate) fn unlock_blocked(&self) {
        self.0.store(false, Ordering::Release);
    }

    pub(crate) fn unlock(&self) {
        // SAFETY: written by `lock` on this thread, which holds the lock.
        let old = unsafe { (*self.1.get()).assume_init() };
        self.0.store(false, Ordering::Release);
        // SAFETY: the mask saved by `lock`.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, null_mut()) };
    }
}

#[cfg(test)]
mod tests {
    use super::SpinLock;

    /// A lock another holder keeps is given up after the tries; a free one is taken at once.
    #[test]
    fn a_bounded_lock_gives_up_on_a_lock_held_for_ever() {
        let l = SpinLock::new();
        assert!(l.try_lock_blocked(1));
        let t0 = std::time::Instant::now();
        assert!(!l.try_lock_blocked(1000));
        assert!(t0.elapsed() < std::time::Duration::from_secs(5));
        l.unlock_blocked();
        assert!(l.try_lock_blocked(1));
        l.unlock_blocked();
    }
}
