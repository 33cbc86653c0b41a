//! A copy of what a libtest binary writes to its standard output and error, into the process
//! directory (`output.log`, docs/trace-format.md): libtest prints a failing test's panic
//! message (`assertion `left == right` failed`, the panic's location) and the names of the
//! tests it ignored there, and nowhere else; the tree records neither. Only for a program that
//! links libtest ([`LIBTEST_RUNNER`]); every other program's `write` goes straight to the
//! C library's.
//!
//! The shim defines `write`, so the program's calls of it (Rust's standard library calls the
//! C library's `write` for both streams) come here first. It forwards every call to the real
//! `write` (resolved once in the constructor, with `dlsym(RTLD_NEXT)`; the raw system call
//! before that), and for descriptors 1 and 2 appends what was written to the log with a raw
//! system call: no lock and no allocation, so it is as safe in a signal handler as `write`.
//! The log stops at [`MAX_LOG`] bytes; the program's own output is never changed.

use std::sync::atomic::{AtomicI32, AtomicPtr, AtomicU64, Ordering};

/// libtest's function each test runs through (`test::__rust_begin_short_backtrace`), as it
/// appears in the two Rust manglings: legacy `_ZN4test28__rust...`, and v0, which puts a `_`
/// between the length and an identifier that starts with `_` (`...4test28___rust...`).
pub(crate) const LIBTEST_RUNNER: [&str; 2] = ["4test28__rust_begin_short_backtrace", "4test28___rust_begin_short_backtrace"];

/// The log's file name in the process directory.
pub(crate) const LOG: &str = "output.log";

/// Most bytes copied into the log: a test binary's summary (failures, their messages) fits
/// many times over; a program that prints without end does not fill the disk.
const MAX_LOG: u64 = 16 << 20;

type WriteFn = unsafe extern "C" fn(libc::c_int, *const libc::c_void, libc::size_t) -> libc::ssize_t;

/// The C library's `write`, once resolved.
static REAL_WRITE: AtomicPtr<libc::c_void> = AtomicPtr::new(std::ptr::null_mut());
/// The log's descriptor, -1 while there is none.
static LOG_FD: AtomicI32 = AtomicI32::new(-1);
/// The process that opened it (a forked child does not write into its parent's log).
static LOG_PID: AtomicI32 = AtomicI32::new(0);
/// Bytes given to the log so far (including those a full log refused).
static LOGGED: AtomicU64 = AtomicU64::new(0);

/// First thing in the constructor: resolve the real `write`.
pub(crate) fn resolve() {
    // SAFETY: dlsym with RTLD_NEXT and a NUL-terminated name only reads the loader's tables.
    let real = unsafe { libc::dlsym(libc::RTLD_NEXT, c"write".as_ptr()) };
    REAL_WRITE.store(real, Ordering::Release);
}

/// For a libtest binary, in the constructor: open the log in the process directory.
pub(crate) fn open_log() {
    let Some(dir) = crate::process::ensure_process() else { return };
    let Ok(path) = std::ffi::CString::new(dir.join(LOG).into_os_string().into_encoded_bytes()) else { return };
    // SAFETY: a NUL-terminated path; the flags create a new file the shim alone writes.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CREAT | libc::O_APPEND | libc::O_CLOEXEC | libc::O_TRUNC, 0o644) };
    if fd >= 0 {
        // SAFETY: getpid has no preconditions.
        LOG_PID.store(unsafe { libc::getpid() }, Ordering::Release);
        LOG_FD.store(fd, Ordering::Release);
    }
}

/// Append what the program wrote to one of its standard streams to the log, up to [`MAX_LOG`].
fn copy(buf: *const libc::c_void, n: usize) {
    let fd = LOG_FD.load(Ordering::Acquire);
    // SAFETY: getpid has no preconditions.
    if fd < 0 || n == 0 || LOG_PID.load(Ordering::Acquire) != unsafe { libc::getpid() } {
        return;
    }
    let before = LOGGED.fetch_add(n as u64, Ordering::AcqRel);
    if before >= MAX_LOG {
        return;
    }
    let n = n.min((MAX_LOG - before) as usize);
    // SAFETY: `buf` holds at least `n` bytes (the program's own write succeeded with them); a
    // raw system call, so neither this module's `write` nor errno's final value is involved
    // (the caller's errno is restored by the caller).
    unsafe { libc::syscall(libc::SYS_write, fd, buf, n) };
}

/// The C library's `write`, seen first by the shim (see the module's doc).
///
/// # Safety
/// As `write(2)`: `buf` holds `count` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn write(fd: libc::c_int, buf: *const libc::c_void, count: libc::size_t) -> libc::ssize_t {
    let real = REAL_WRITE.load(Ordering::Acquire);
    let n = if real.is_null() {
        // SAFETY: as the caller's contract; before the constructor resolved the real one.
        unsafe { libc::syscall(libc::SYS_write, fd, buf, count) as libc::ssize_t }
    } else {
        // SAFETY: `real` is the C library's `write`, resolved by dlsym; same contract.
        unsafe { std::mem::transmute::<*mut libc::c_void, WriteFn>(real)(fd, buf, count) }
    };
    if n > 0 && (fd == 1 || fd == 2) && LOG_FD.load(Ordering::Relaxed) >= 0 {
        let _errno = crate::guards::ErrnoGuard::save();
        copy(buf, n as usize);
    }
    n
}
