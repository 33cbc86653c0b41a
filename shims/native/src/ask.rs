//! Asking `trace run` for the probe lists of an object loaded by `dlopen` (docs/native-recording.md,
//! "Inlined functions"). `trace run` lists the program's inlined code (and with `--lines` its
//! lines) and its `DT_NEEDED` libraries' before the run, from their DWARF; a plugin loaded by
//! `dlopen` cannot be known then, and reading DWARF inside every traced process is not an option
//! (a shell or `make` loads the shim too). So when the loader's hook inside `dlopen` patches a
//! new object of the program's own (not a system library: [`crate::objects::system_library`]),
//! the shim asks `trace run`, which listens on a private unix socket
//! ([`trace_format::probes::ENV_LISTS_SOCKET`]): one connection per request (no descriptor lives
//! across a `fork` or an `exec`), one line naming the object's file
//! ([`trace_format::probes::ListRequest`]), and a bounded wait
//! ([`trace_format::probes::LISTS_TIMEOUT_MS`], or [`trace_format::probes::ENV_LISTS_TIMEOUT_MS`])
//! for the answer. `trace run` computes the lists (or finds them in its cache), appends them to
//! the libraries' list files and answers; the probes are then planted from those files as a
//! `DT_NEEDED` library's are, before the object's constructors run. A `trace run` that is gone
//! (connection refused, no socket) costs a failed `connect`; one that does not answer in time,
//! the wait: the object is then patched without probes and `patch.json` says why
//! ([`Unlisted`]).
//!
//! The same request is made at start-up, from the constructor, for the objects of the
//! program's own patched there that found no list in the trace directory: the executable and
//! libraries of a program the recorded one started (`sh -c ./prog`; objects.rs,
//! `list_at_start`).
//!
//! Cost: nothing in a process that loads nothing by `dlopen` and whose objects of its own are
//! listed (the recorded program), nothing for a system library or a system program (never
//! patched, never asked about; the socket's address is read once, by the constructor); one
//! round trip per start of an unlisted program of the user's own (`trace run` remembers its
//! answer per file). The wait happens inside `dlopen`, with
//! the loader's lock held (as the patching does), but with no lock of the shim held and no
//! signal blocked; `errno` is kept by the caller's guard.

use std::sync::atomic::{AtomicPtr, AtomicU32, Ordering};
use trace_format::meta::Unlisted;
#[cfg(doc)]
use trace_format::probes::LISTED;
use trace_format::probes::{ListRequest, ENV_LISTS_SOCKET, ENV_LISTS_TIMEOUT_MS, LISTS_TIMEOUT_MS};

/// The address of `trace run`'s socket (null: not set, or too long for an address), set by
/// the constructor, never freed.
static SOCKET: AtomicPtr<libc::sockaddr_un> = AtomicPtr::new(std::ptr::null_mut());

/// How long to wait for an answer, in milliseconds.
static TIMEOUT_MS: AtomicU32 = AtomicU32::new(LISTS_TIMEOUT_MS);

/// Read the socket's address and the wait from the environment. Called by the constructor,
/// before any thread of the program exists.
pub(crate) fn init() {
    let Some(path) = std::env::var_os(ENV_LISTS_SOCKET) else { return };
    let bytes = path.as_encoded_bytes();
    // SAFETY: an all-zero sockaddr_un is valid (an empty path).
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    // The path and its NUL must fit.
    if bytes.is_empty() || bytes.len() >= addr.sun_path.len() || bytes.contains(&0) {
        return;
    }
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (d, s) in addr.sun_path.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    if let Some(ms) = std::env::var(ENV_LISTS_TIMEOUT_MS).ok().and_then(|v| v.parse::<u32>().ok()) {
        TIMEOUT_MS.store(ms, Ordering::Relaxed);
    }
    SOCKET.store(Box::into_raw(Box::new(addr)), Ordering::Release);
}

/// Whether `trace run` can be asked (its socket was given).
pub(crate) fn wanted() -> bool {
    !SOCKET.load(Ordering::Acquire).is_null()
}

/// A socket descriptor, closed when dropped.
struct Fd(libc::c_int);

impl Drop for Fd {
    fn drop(&mut self) {
        // SAFETY: a descriptor this module opened and owns.
        unsafe { libc::close(self.0) };
    }
}

/// The monotonic clock, in milliseconds.
fn now_ms() -> u64 {
    // SAFETY: a zeroed timespec we own, filled by clock_gettime.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1000 + ts.tv_nsec as u64 / 1_000_000
}

fn errno() -> libc::c_int {
    // SAFETY: this thread's errno slot (the caller's guard puts the program's back).
    unsafe { *libc::__errno_location() }
}

/// Wait until `fd` is ready for `events` or `deadline` (ms, [`now_ms`]) passes: false then.
fn ready(fd: &Fd, events: libc::c_short, deadline: u64) -> bool {
    loop {
        let left = deadline.saturating_sub(now_ms());
        if left == 0 {
            return false;
        }
        let mut p = libc::pollfd { fd: fd.0, events, revents: 0 };
        // SAFETY: one pollfd we own.
        match unsafe { libc::poll(&mut p, 1, left.min(i32::MAX as u64) as libc::c_int) } {
            n if n > 0 => return true,
            0 => return false,
            _ if errno() == libc::EINTR => continue,
            _ => return false,
        }
    }
}

/// When the answers to the requests made now must have come (one wait for all the objects
/// one `dlopen` loads): [`now_ms`] plus the timeout.
pub(crate) fn deadline() -> u64 {
    now_ms() + u64::from(TIMEOUT_MS.load(Ordering::Relaxed))
}

/// Ask `trace run` for the lists of the object at `path` (absolute, canonical: as the lists
/// and `patch.json` name it), waiting until `deadline` ([`deadline`]) at most. `None`: nothing
/// to say (it answered, listed or not, or the object cannot be asked about); otherwise why
/// there is no list.
pub(crate) fn ask(path: &str, deadline: u64) -> Option<Unlisted> {
    let addr = SOCKET.load(Ordering::Acquire);
    if addr.is_null() {
        return None;
    }
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    let mtime_ns = m.modified().ok()?.duration_since(std::time::UNIX_EPOCH).ok()?.as_nanos() as i128;
    let line = ListRequest { dev: m.dev(), ino: m.ino(), size: m.len(), mtime_ns, path: path.to_string() }.line()?;
    // SAFETY: socket(2) with constant arguments; the descriptor is owned by `Fd`.
    let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK, 0) };
    if fd < 0 {
        return Some(Unlisted::Unreachable);
    }
    let fd = Fd(fd);
    loop {
        // SAFETY: `addr` is the sockaddr_un `init` leaked, never freed or changed.
        let rc = unsafe { libc::connect(fd.0, addr as *const libc::sockaddr, std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t) };
        if rc == 0 {
            break;
        }
        match errno() {
            libc::EINTR => continue,
            // Its backlog is full: wait a little, within the deadline.
            libc::EAGAIN if now_ms() < deadline => {
                let ts = libc::timespec { tv_sec: 0, tv_nsec: 2_000_000 };
                // SAFETY: a timespec we own; no remainder wanted.
                unsafe { libc::nanosleep(&ts, std::ptr::null_mut()) };
            }
            libc::EAGAIN => return Some(Unlisted::TimedOut),
            _ => return Some(Unlisted::Unreachable),
        }
    }
    let mut sent = 0;
    while sent < line.len() {
        if !ready(&fd, libc::POLLOUT, deadline) {
            return Some(Unlisted::TimedOut);
        }
        // SAFETY: the unsent rest of a buffer we own; MSG_NOSIGNAL: a closed peer is an error,
        // not a SIGPIPE.
        let n = unsafe { libc::send(fd.0, line[sent..].as_ptr() as *const libc::c_void, line.len() - sent, libc::MSG_NOSIGNAL) };
        match n {
            n if n > 0 => sent += n as usize,
            _ if matches!(errno(), libc::EINTR | libc::EAGAIN) => {}
            _ => return Some(Unlisted::Unreachable),
        }
    }
    let mut answer = [0u8; 64];
    let mut got = 0;
    while !answer[..got].contains(&b'\n') && got < answer.len() {
        if !ready(&fd, libc::POLLIN, deadline) {
            return Some(Unlisted::TimedOut);
        }
        // SAFETY: the free rest of a buffer we own.
        let n = unsafe { libc::read(fd.0, answer[got..].as_mut_ptr() as *mut libc::c_void, answer.len() - got) };
        match n {
            n if n > 0 => got += n as usize,
            0 => break,
            _ if matches!(errno(), libc::EINTR | libc::EAGAIN) => {}
            _ => return Some(Unlisted::Unreachable),
        }
    }
    // An answer ([`LISTED`] or not): the lists, if any, are in the files now. Closed without
    // one: it ended meanwhile.
    (got == 0).then_some(Unlisted::Unreachable)
}
