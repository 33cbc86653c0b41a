//! The probes' `SIGTRAP` neighbours: a trap that is not a probe's goes to the program's own
//! disposition ([`chain`]), and the shim's `sigaction`, `signal`, `pthread_sigmask` and
//! `sigprocmask` keep the program's `SIGTRAP` handler to chain to and never block `SIGTRAP`
//! while the probes' handler is installed (the module's description in probe.rs).

use super::{CHAINED, CHAINED_FLAGS, INSTALLED};
use std::sync::atomic::{AtomicPtr, Ordering};

/// A `SIGTRAP` that is not a probe's: what the program's disposition would have done.
pub(super) fn chain(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    let handler = CHAINED.load(Ordering::Acquire);
    let flags = CHAINED_FLAGS.load(Ordering::Acquire);
    match handler {
        libc::SIG_IGN => {}
        libc::SIG_DFL => {
            // The default action (a core dump): put it back and raise the signal again; it is
            // delivered when this handler returns.
            if let Some(real) = real_sigaction() {
                // SAFETY: libc's sigaction and raise with structures we own.
                unsafe {
                    let mut sa: libc::sigaction = std::mem::zeroed();
                    sa.sa_sigaction = libc::SIG_DFL;
                    real(libc::SIGTRAP, &sa, std::ptr::null_mut());
                    INSTALLED.store(false, Ordering::Release);
                    libc::raise(libc::SIGTRAP);
                }
            }
        }
        h if flags & libc::SA_SIGINFO != 0 => {
            program_mask(ctx);
            // SAFETY: the program installed `h` with SA_SIGINFO: this signature.
            let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) = unsafe { std::mem::transmute(h) };
            f(sig, info, ctx);
        }
        h => {
            program_mask(ctx);
            // SAFETY: the program installed `h` without SA_SIGINFO: this signature.
            let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(h) };
            f(sig);
        }
    }
}

/// The mask the program's own handler runs with: the interrupted code's, and `SIGTRAP` (as the
/// kernel would have set it; [`on_trap`] itself runs with every signal blocked). The kernel
/// puts the interrupted code's mask back when the handler returns.
fn program_mask(ctx: *mut libc::c_void) {
    // SAFETY: `ctx` is the ucontext of the SA_SIGINFO handler `on_trap` (the kernel's).
    let mut set = unsafe { (*(ctx as *const libc::ucontext_t)).uc_sigmask };
    let f = next_symbol(c"pthread_sigmask", &REAL_PTHREAD_SIGMASK);
    if f.is_null() {
        return;
    }
    // SAFETY: a set we own; libc's `pthread_sigmask` (looked up by `install_handler`, not in
    // this handler) is async-signal-safe.
    unsafe {
        libc::sigaddset(&mut set, libc::SIGTRAP);
        std::mem::transmute::<*mut libc::c_void, SigmaskFn>(f)(libc::SIG_SETMASK, &set, std::ptr::null_mut());
    }
}

type SigactionFn = unsafe extern "C" fn(libc::c_int, *const libc::sigaction, *mut libc::sigaction) -> libc::c_int;
type SignalFn = unsafe extern "C" fn(libc::c_int, libc::sighandler_t) -> libc::sighandler_t;

pub(super) fn next_symbol(name: &std::ffi::CStr, cache: &AtomicPtr<libc::c_void>) -> *mut libc::c_void {
    let mut f = cache.load(Ordering::Acquire);
    if f.is_null() {
        // SAFETY: dlsym with RTLD_NEXT and a NUL-terminated name.
        f = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) };
        cache.store(f, Ordering::Release);
    }
    f
}

pub(super) fn real_sigaction() -> Option<SigactionFn> {
    static REAL: AtomicPtr<libc::c_void> = AtomicPtr::new(std::ptr::null_mut());
    let f = next_symbol(c"sigaction", &REAL);
    // SAFETY: the next `sigaction` (libc's) has this signature.
    (!f.is_null()).then(|| unsafe { std::mem::transmute::<*mut libc::c_void, SigactionFn>(f) })
}

/// `sigaction`: while the probes' handler is installed, the program's `SIGTRAP` disposition is
/// kept as the one to chain to (and reported back as the current one); everything else is
/// libc's.
///
/// # Safety
/// As libc's `sigaction`.
#[no_mangle]
pub unsafe extern "C" fn sigaction(sig: libc::c_int, act: *const libc::sigaction, old: *mut libc::sigaction) -> libc::c_int {
    if sig == libc::SIGTRAP && INSTALLED.load(Ordering::Acquire) {
        if !old.is_null() {
            // SAFETY: the caller's structure (the contract); a zeroed one is valid.
            unsafe {
                *old = std::mem::zeroed();
                (*old).sa_sigaction = CHAINED.load(Ordering::Acquire);
                (*old).sa_flags = CHAINED_FLAGS.load(Ordering::Acquire);
            }
        }
        if !act.is_null() {
            // SAFETY: the caller's structure (the contract).
            let (h, f) = unsafe { ((*act).sa_sigaction, (*act).sa_flags) };
            CHAINED_FLAGS.store(f, Ordering::Release);
            CHAINED.store(h, Ordering::Release);
        }
        return 0;
    }
    // Another signal's handler must not block SIGTRAP while it runs (see `no_trap_blocked`).
    // SAFETY: the caller's structure (the contract), copied.
    let copy = (!act.is_null()).then(|| unsafe { *act }).and_then(|mut a| no_trap_blocked(&mut a.sa_mask).then_some(a));
    let act = copy.as_ref().map_or(act, |a| a as *const libc::sigaction);
    match real_sigaction() {
        // SAFETY: libc's, with the caller's arguments.
        Some(real) => unsafe { real(sig, act, old) },
        None => {
            // SAFETY: this thread's errno.
            unsafe { *libc::__errno_location() = libc::ENOSYS };
            -1
        }
    }
}

/// Take `SIGTRAP` out of a mask the program is about to block, while probes are planted;
/// true if it was there. A trap (`int3`, `brk`) in a thread that blocks `SIGTRAP` is not held
/// back: the kernel resets the signal to its default action and the process dies. So a
/// program that blocks every signal in a thread (a worker that leaves signals to the main
/// thread) gets every signal but that one blocked.
fn no_trap_blocked(set: &mut libc::sigset_t) -> bool {
    // SAFETY: a set we own.
    INSTALLED.load(Ordering::Acquire) && unsafe { libc::sigismember(set, libc::SIGTRAP) == 1 && libc::sigdelset(set, libc::SIGTRAP) == 0 }
}

type SigmaskFn = unsafe extern "C" fn(libc::c_int, *const libc::sigset_t, *mut libc::sigset_t) -> libc::c_int;

/// The calling thread's signal mask through libc's `name` (`pthread_sigmask` or
/// `sigprocmask`), with `SIGTRAP` never blocked while probes are planted.
///
/// # Safety
/// As libc's: `set` and `old` are null or valid.
unsafe fn mask_through(
    name: &std::ffi::CStr,
    cache: &AtomicPtr<libc::c_void>,
    how: libc::c_int,
    set: *const libc::sigset_t,
    old: *mut libc::sigset_t,
) -> libc::c_int {
    let f = next_symbol(name, cache);
    if f.is_null() {
        return libc::ENOSYS;
    }
    let copy = (!set.is_null() && how != libc::SIG_UNBLOCK)
        // SAFETY: the caller's set (the contract), copied.
        .then(|| unsafe { *set })
        .and_then(|mut s| no_trap_blocked(&mut s).then_some(s));
    let set = copy.as_ref().map_or(set, |s| s as *const libc::sigset_t);
    // SAFETY: the next `name` (libc's) has this signature; the caller's arguments.
    unsafe { std::mem::transmute::<*mut libc::c_void, SigmaskFn>(f)(how, set, old) }
}

pub(super) static REAL_PTHREAD_SIGMASK: AtomicPtr<libc::c_void> = AtomicPtr::new(std::ptr::null_mut());
pub(super) static REAL_SIGPROCMASK: AtomicPtr<libc::c_void> = AtomicPtr::new(std::ptr::null_mut());

/// `pthread_sigmask`: libc's, except that `SIGTRAP` is not blocked while probes are planted
/// (see [`no_trap_blocked`]).
///
/// # Safety
/// As libc's `pthread_sigmask`.
#[no_mangle]
pub unsafe extern "C" fn pthread_sigmask(how: libc::c_int, set: *const libc::sigset_t, old: *mut libc::sigset_t) -> libc::c_int {
    // SAFETY: the caller's arguments (the contract).
    unsafe { mask_through(c"pthread_sigmask", &REAL_PTHREAD_SIGMASK, how, set, old) }
}

/// `sigprocmask`: as [`pthread_sigmask`].
///
/// # Safety
/// As libc's `sigprocmask`.
#[no_mangle]
pub unsafe extern "C" fn sigprocmask(how: libc::c_int, set: *const libc::sigset_t, old: *mut libc::sigset_t) -> libc::c_int {
    // SAFETY: the caller's arguments (the contract).
    let r = unsafe { mask_through(c"sigprocmask", &REAL_SIGPROCMASK, how, set, old) };
    if r == libc::ENOSYS {
        // SAFETY: this thread's errno.
        unsafe { *libc::__errno_location() = libc::ENOSYS };
        return -1;
    }
    r
}

/// `signal`: as [`sigaction`] (glibc's `signal` does not go through the exported `sigaction`).
///
/// # Safety
/// As libc's `signal`.
#[no_mangle]
pub unsafe extern "C" fn signal(sig: libc::c_int, handler: libc::sighandler_t) -> libc::sighandler_t {
    if sig == libc::SIGTRAP && INSTALLED.load(Ordering::Acquire) {
        CHAINED_FLAGS.store(libc::SA_RESTART, Ordering::Release);
        return CHAINED.swap(handler, Ordering::AcqRel);
    }
    static REAL: AtomicPtr<libc::c_void> = AtomicPtr::new(std::ptr::null_mut());
    let f = next_symbol(c"signal", &REAL);
    if f.is_null() {
        return libc::SIG_ERR;
    }
    // SAFETY: the next `signal` (libc's) has this signature, called with the caller's arguments.
    unsafe { std::mem::transmute::<*mut libc::c_void, SignalFn>(f)(sig, handler) }
}
