//! Writers used inside traced processes by the shims.
//!
//! A thread stream is a file mapped into memory window by window (`MAP_SHARED`): every
//! event is in the kernel's page cache the moment it is written, so a process that is
//! killed, aborts, calls `_exit` or crashes still leaves every event it recorded. No
//! system call happens on the hot path except when a window fills up.
//!
//! Each window's disk space is reserved (`posix_fallocate`) before it is mapped, so a write
//! through the mapping never faults for lack of space (which would kill the target with
//! `SIGBUS`): when no space is left the stream stops, marks itself [`FLAG_INCOMPLETE`], and
//! the target runs on unrecorded.

use crate::event::{self, encode_header, StreamTotals, FLAG_CLOSED, FLAG_INCOMPLETE, MAX_EVENT_LEN, TOTALS_OFFSET};
use crate::meta::{FuncRecord, ProcMeta};
use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Default window: how much of a stream file is mapped at a time.
pub const DEFAULT_WINDOW: usize = 4 << 20;

/// Bytes of a stream's first window written before any of it is warmed, and the first step
/// of warming in every window ([`StreamWriter::warm`]).
pub const WARM_AFTER: usize = 256 << 10;

/// `CLOCK_MONOTONIC` in nanoseconds: the timestamps of events. Read from the CPU's
/// time-stamp counter where the kernel uses it too (see [`crate::clock`]), else through the vDSO.
#[inline(always)]
pub fn monotonic_ns() -> u64 {
    crate::clock::now_ns()
}

fn cpath(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains NUL"))
}

/// Counts the forks this process image went through (bumped in each child by a
/// `pthread_atfork` handler). A stream belongs to the generation that created it: in a forked
/// child the parent's mapping is still shared with the parent, which goes on writing at the
/// same offsets, so a writer inherited across a fork stops writing at once (before the shim's
/// own fork handling runs: CPython, for one, runs Python-level at-fork callbacks first, and
/// their calls would otherwise land in the parent's stream).
static FORK_GENERATION: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

extern "C" fn bump_fork_generation() {
    FORK_GENERATION.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

fn fork_generation() -> u32 {
    static REGISTER: std::sync::Once = std::sync::Once::new();
    // SAFETY: the handler only does an atomic increment (async-signal-safe).
    REGISTER.call_once(|| unsafe {
        libc::pthread_atfork(None, None, Some(bump_fork_generation));
    });
    FORK_GENERATION.load(std::sync::atomic::Ordering::Relaxed)
}

/// Whether an error means the file system has no room left (full, quota, file size limit).
fn is_no_space(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT | libc::EFBIG))
}

/// Writer of one thread's event stream. Not thread safe: one per thread.
pub struct StreamWriter {
    fd: libc::c_int,
    base: *mut u8,
    pos: usize,
    window: usize,
    window_index: u64,
    last_ts: u64,
    calls: u64,
    returns: u64,
    flags: u16,
    /// Offset of the last thread-name event (0: none).
    name_offset: u64,
    /// Recording stopped because a window's space could not be reserved.
    incomplete: bool,
    /// [`FORK_GENERATION`] when the stream was created.
    generation: u32,
    /// Events may be written up to here in the current window (at most `window`): the end of
    /// what is warmed ([`StreamWriter::warm`]); the first window stops at [`WARM_AFTER`] before
    /// any of it is.
    until: usize,
    /// How far the next [`StreamWriter::warm`] of this window reaches: [`WARM_AFTER`] in a new
    /// window, doubled by each step up to the window.
    ahead: usize,
    /// Bytes written as zeros by [`StreamWriter::warm`] (for the tests).
    warmed: u64,
    /// A cursor lent by [`StreamWriter::cursor`] points into the current window. A new
    /// window ends that: a stale cursor's address may fall inside the new mapping (the same
    /// address is often reused), and taking it back would jump over unwritten bytes.
    lent: bool,
}

/// The hot state of a stream, lent to an encoder outside this crate (the native shim's C hot
/// path) that writes the same encoding as [`event::encode_call`]/[`event::encode_return`]
/// straight into the mapped window. An event may start at `pos` while `pos < limit`; then the
/// encoder hands the cursor back with [`StreamWriter::set_cursor`] (to move to the next window,
/// write other events, or close the stream).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct RawCursor {
    pub pos: *mut u8,
    pub limit: *mut u8,
    /// Time of the previous event: deltas are taken from it; a time before it gives delta 0
    /// and leaves it unchanged (so it always equals the time a reader reconstructs).
    pub last_ts: u64,
    pub calls: u64,
    pub returns: u64,
}

// SAFETY: the writer owns its mapping and file descriptor; moving it between threads is fine
// (it is never shared).
unsafe impl Send for StreamWriter {}

impl StreamWriter {
    /// Create `path` (which must not exist) and write the stream header.
    pub fn create(path: &Path, flags: u16, pid: u32, tid: u64, start_ns: u64, window: usize) -> io::Result<Self> {
        let window = window.max(64 << 10);
        let c = cpath(path)?;
        // SAFETY: plain system calls on a path and descriptor we own.
        let fd = unsafe { libc::open(c.as_ptr(), libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC, 0o644) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut w = StreamWriter {
            fd,
            base: std::ptr::null_mut(),
            pos: 0,
            window,
            window_index: 0,
            last_ts: start_ns,
            calls: 0,
            returns: 0,
            flags,
            name_offset: 0,
            incomplete: false,
            generation: fork_generation(),
            until: 0,
            ahead: WARM_AFTER,
            warmed: 0,
            lent: false,
        };
        let h = encode_header(flags, pid, tid, start_ns, window as u32);
        if let Err(e) = w.map_window(0) {
            // No space for a first window: keep a header-only stream marked incomplete (so the
            // run says why this thread has no events), if even the header fits.
            // SAFETY: pwrite from a buffer we own into our descriptor.
            let wrote = unsafe { libc::pwrite(fd, h.as_ptr() as *const libc::c_void, h.len(), 0) } == h.len() as isize;
            if is_no_space(&e) && wrote {
                w.pos = h.len();
                w.mark_incomplete();
                return Ok(w);
            }
            // SAFETY: fd is ours.
            unsafe { libc::close(fd) };
            w.fd = -1;
            return Err(e);
        }
        // SAFETY: the window is at least 64 KiB, the header is 64 bytes.
        unsafe { std::ptr::copy_nonoverlapping(h.as_ptr(), w.base, h.len()) };
        w.pos = h.len();
        Ok(w)
    }

    /// Reserve the disk space of window `index` and map it. The reservation comes first: a
    /// page of a `MAP_SHARED` mapping whose block cannot be allocated faults with `SIGBUS` when
    /// written (or, on tmpfs, even when read), so nothing is mapped that is not backed.
    fn map_window(&mut self, index: u64) -> io::Result<()> {
        let off = index * self.window as u64;
        // SAFETY: we extend and map our own file descriptor.
        unsafe {
            // posix_fallocate returns the error number (it does not set errno); glibc emulates
            // it on file systems without fallocate(2) by writing a byte into each block.
            let r = libc::posix_fallocate(self.fd, off as libc::off_t, self.window as libc::off_t);
            if r != 0 {
                return Err(io::Error::from_raw_os_error(r));
            }
            let p = libc::mmap(
                std::ptr::null_mut(),
                self.window,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                self.fd,
                off as libc::off_t,
            );
            if p == libc::MAP_FAILED {
                return Err(io::Error::last_os_error());
            }
            self.base = p as *mut u8;
        }
        self.window_index = index;
        self.pos = 0;
        self.until = 0;
        self.ahead = WARM_AFTER;
        // A thread that fills a window records a lot: the next one is warmed as soon as it is
        // mapped. The first is warmed only once WARM_AFTER bytes of it are written (most
        // threads write far less, and a warmed window is page cache the thread may never use).
        if index == 0 && self.window > WARM_AFTER {
            self.until = WARM_AFTER;
        } else {
            self.warm(0);
        }
        Ok(())
    }

    /// Put the next pages of the current window, from `from` (rounded up to a page), in the
    /// page cache as zeros, with `pwritev` from a static buffer of zeros, and let events be
    /// written up to their end. A step reaches `ahead` bytes, which doubles with each step of a
    /// window (256 KiB, 512 KiB, ... up to the window's end): a thread that writes a lot
    /// makes a few calls per window, and the last window of a stream, which its thread seldom
    /// fills, is not warmed much past what it holds (a whole 4 MiB window warmed for a few
    /// bytes cost a stream just past 4 MiB 1.5-5.7 ms, `docs/performance.md`).
    ///
    /// Why: a page the events reach first through the mapping costs a page fault that
    /// allocates it, reads it (zeros from the unwritten extent) and makes it writable; written
    /// first by `pwritev`, the same pages cost a fraction of that and the faults that follow
    /// almost nothing (`docs/performance.md`, "Figures behind the code's choices"). The bytes are zeros, which is what the file
    /// holds there already and what a reader takes for the end of a stream; only pages past
    /// the position are written, so no event is overwritten. The space is still reserved by
    /// `posix_fallocate` first: this only warms the pages, and a failure (no memory, an
    /// interrupted call) only leaves the rest to page faults.
    #[cold]
    fn warm(&mut self, from: usize) {
        const PIECE: usize = 64 << 10;
        static ZEROS: [u8; PIECE] = [0; PIECE];
        // Pages before `until` are warm already (`until` is 0 in a new window).
        let mut at = from.next_multiple_of(4096).max(self.until).min(self.window);
        let end = at.saturating_add(self.ahead).min(self.window);
        self.ahead = self.ahead.saturating_mul(2).min(self.window);
        self.until = end;
        let iov: [libc::iovec; 64] = [libc::iovec { iov_base: ZEROS.as_ptr() as *mut libc::c_void, iov_len: PIECE }; 64];
        while at < end {
            let n = (end - at).div_ceil(PIECE).min(iov.len());
            let mut vecs = iov;
            let last = (end - at) - (n - 1) * PIECE;
            vecs[n - 1].iov_len = last.min(PIECE);
            let off = self.window_index * self.window as u64 + at as u64;
            // SAFETY: pwritev from a static buffer into our own descriptor, inside the window
            // (reserved by posix_fallocate), at or past the position.
            let w = unsafe { libc::pwritev(self.fd, vecs.as_ptr(), n as libc::c_int, off as libc::off_t) };
            if w <= 0 {
                // The rest of the window is left to page faults.
                self.until = self.window;
                return;
            }
            at += w as usize;
            self.warmed += w as u64;
        }
    }

    /// Recording stopped for lack of space: set [`FLAG_INCOMPLETE`] in the header now (the
    /// header's block is already allocated, so this write needs no new space), so the mark
    /// is there even if the process never closes the stream.
    #[cold]
    fn mark_incomplete(&mut self) {
        self.incomplete = true;
        self.flags |= FLAG_INCOMPLETE;
        let flags = self.flags.to_le_bytes();
        // SAFETY: pwrite from a buffer we own into our own descriptor.
        unsafe { libc::pwrite(self.fd, flags.as_ptr() as *const libc::c_void, flags.len(), 6) };
    }

    /// Whether recording stopped early because no space could be reserved.
    pub fn is_incomplete(&self) -> bool {
        self.incomplete
    }

    /// Move to the next window. Returns false (and stops recording) if that fails,
    /// e.g. because the disk is full.
    #[cold]
    #[inline(never)]
    fn advance(&mut self) -> bool {
        if self.base.is_null() {
            return false;
        }
        self.lent = false;
        let padded = self.pos < self.window;
        // SAFETY: the pad byte is written only at pos < window, and the old mapping is ours.
        unsafe {
            if padded {
                *self.base.add(self.pos) = event::tag(event::EXT_PAD, event::KIND_EXT);
            }
            libc::munmap(self.base as *mut libc::c_void, self.window);
        }
        self.base = std::ptr::null_mut();
        let next = self.window_index + 1;
        crate::clock::refine();
        match self.map_window(next) {
            Ok(()) => true,
            Err(e) => {
                // Any failure stops the stream; only lack of space is the "incomplete" mark
                // (the run then says the disk filled up).
                if !is_no_space(&e) {
                    if padded {
                        self.pos += 1;
                    }
                    return false;
                }
                // The stream keeps the pad byte (the file is cut after it when closed).
                if padded {
                    self.pos += 1;
                }
                self.mark_incomplete();
                false
            }
        }
    }

    #[inline(always)]
    fn room(&mut self, len: usize) -> bool {
        if self.generation != FORK_GENERATION.load(std::sync::atomic::Ordering::Relaxed) {
            return false; // inherited across a fork: the parent's, not ours to write
        }
        if self.pos + len > self.until {
            return self.reach(len);
        }
        !self.base.is_null()
    }

    /// `room` past `until`: warm the next step of the window, or move to the next window.
    #[cold]
    #[inline(never)]
    fn reach(&mut self, len: usize) -> bool {
        if self.until < self.window && !self.base.is_null() {
            self.warm(self.pos);
            if self.pos + len <= self.until {
                return true;
            }
        }
        self.advance()
    }

    /// Delta of `ts` to the previous event: 0 for a time before it (a core whose counter is
    /// a little behind), which then stays the base.
    #[inline(always)]
    fn delta(&mut self, ts: u64) -> u64 {
        if ts > self.last_ts {
            let dt = ts - self.last_ts;
            self.last_ts = ts;
            dt
        } else {
            0
        }
    }

    /// Record entry into function `func` at monotonic time `ts`.
    #[inline(always)]
    pub fn call(&mut self, func: u32, ts: u64) {
        if !self.room(MAX_EVENT_LEN) {
            return;
        }
        let dt = self.delta(ts);
        // SAFETY: room() guaranteed MAX_EVENT_LEN bytes at pos.
        self.pos = unsafe { event::encode_call(self.base, self.pos, func, dt) };
        self.calls += 1;
    }

    /// Record the resumption of a suspended frame of `func` (a generator or coroutine) at `ts`.
    /// Counted with the calls in the totals: it opens a frame that a return closes.
    #[inline(always)]
    pub fn resume(&mut self, func: u32, ts: u64) {
        if !self.room(MAX_EVENT_LEN) {
            return;
        }
        let dt = self.delta(ts);
        // SAFETY: room() guaranteed MAX_EVENT_LEN bytes at pos.
        self.pos = unsafe { event::encode_resume(self.base, self.pos, func, dt) };
        self.calls += 1;
    }

    /// Record exit from the innermost open call at monotonic time `ts`.
    #[inline(always)]
    pub fn ret(&mut self, ts: u64) {
        if !self.room(MAX_EVENT_LEN) {
            return;
        }
        let dt = self.delta(ts);
        // SAFETY: room() guaranteed MAX_EVENT_LEN bytes at pos.
        self.pos = unsafe { event::encode_return(self.base, self.pos, dt) };
        self.returns += 1;
    }

    /// Record that `func` executed source line `line` (no time: not a call or a return).
    #[inline(always)]
    pub fn line(&mut self, func: u32, line: u32) {
        if !self.room(event::MAX_LINE_EVENT_LEN) {
            return;
        }
        // SAFETY: room() guaranteed MAX_LINE_EVENT_LEN bytes at pos.
        self.pos = unsafe { event::encode_line(self.base, self.pos, func, line) };
    }

    /// Lend the hot state to an outside encoder (see [`RawCursor`]). `None` once the stream has
    /// stopped (closed, or a window could not be mapped): nothing more can be written.
    pub fn cursor(&mut self) -> Option<RawCursor> {
        if !self.room(MAX_EVENT_LEN) {
            return None;
        }
        // SAFETY: room() left the window mapped at `base` with pos + MAX_EVENT_LEN <= until <=
        // window, so both offsets (pos, and until - MAX_EVENT_LEN + 1 <= until) are inside it.
        let (pos, limit) = unsafe { (self.base.add(self.pos), self.base.add(self.until - MAX_EVENT_LEN + 1)) };
        self.lent = true;
        Some(RawCursor { pos, limit, last_ts: self.last_ts, calls: self.calls, returns: self.returns })
    }

    /// Take back a cursor lent by [`StreamWriter::cursor`]. A cursor lent before the writer
    /// moved to another window is ignored (its window is gone), as is one that points
    /// before the position (the writer wrote after taking it back).
    ///
    /// # Safety
    /// `c` must come from this writer's last `cursor()` call, with `pos` moved forward by
    /// whole events (of the stream encoding), each starting before `limit`, and no other
    /// method called between that `cursor()` and the first `set_cursor` that takes it back.
    /// (Taking the same cursor back again later is harmless: behind the position, or of an
    /// earlier window, it is ignored.) What breaks otherwise is the stream, which readers could
    /// no longer decode; memory safety does not depend on it: a position outside the current
    /// window is ignored, and every later write is bounded by the window.
    pub unsafe fn set_cursor(&mut self, c: &RawCursor) {
        if self.base.is_null() || !self.lent {
            return;
        }
        // A cursor that does not point into this window (not from this writer) is ignored.
        let pos = (c.pos as usize).wrapping_sub(self.base as usize);
        if pos < self.pos || pos > self.window {
            return;
        }
        self.pos = pos;
        self.last_ts = c.last_ts;
        self.calls = c.calls;
        self.returns = c.returns;
    }

    /// Record the thread's name (at most 255 bytes are kept).
    pub fn thread_name(&mut self, name: &str) {
        let mut n = name.len().min(255);
        while !name.is_char_boundary(n) {
            n -= 1;
        }
        if !self.room(n + 12) {
            return;
        }
        self.name_offset = self.len();
        // SAFETY: room() guaranteed n + 12 bytes at pos.
        unsafe {
            *self.base.add(self.pos) = event::tag(event::EXT_THREAD_NAME, event::KIND_EXT);
            let p = event::put_varint(self.base, self.pos + 1, n as u64);
            std::ptr::copy_nonoverlapping(name.as_ptr(), self.base.add(p), n);
            self.pos = p + n;
        }
    }

    /// Number of call and return events written so far.
    pub fn events(&self) -> u64 {
        self.calls + self.returns
    }

    /// Bytes of the stream written so far, header included.
    pub fn len(&self) -> u64 {
        self.window_index * self.window as u64 + self.pos as u64
    }

    /// Whether nothing but the header was written.
    pub fn is_empty(&self) -> bool {
        self.events() == 0
    }

    /// The totals [`StreamWriter::finish`] stores in the header.
    pub fn totals(&self) -> StreamTotals {
        StreamTotals {
            name_offset: u32::try_from(self.name_offset).unwrap_or(u32::MAX),
            calls: self.calls,
            returns: self.returns,
            end_ns: self.last_ts,
        }
    }

    /// Close the stream: unmap, cut the file to the bytes written, store the totals in the
    /// header and set its [`FLAG_CLOSED`] (in that order), close. Idempotent.
    pub fn finish(&mut self) {
        if self.fd < 0 {
            return;
        }
        if self.generation != FORK_GENERATION.load(std::sync::atomic::Ordering::Relaxed) {
            // Inherited across a fork: the file is the parent's, still being written.
            return self.abandon();
        }
        let len = self.len();
        let totals = self.totals().encode();
        let flags = (self.flags | FLAG_CLOSED).to_le_bytes();
        // SAFETY: mapping and descriptor are ours; pwrite from buffers we own.
        // A stream that stopped for lack of space has no mapping left but is closed the same
        // way: cutting it frees the rest of its last reservation, and its totals count what it
        // holds.
        unsafe {
            if !self.base.is_null() {
                libc::munmap(self.base as *mut libc::c_void, self.window);
            }
            if libc::ftruncate(self.fd, len as libc::off_t) == 0
                && libc::pwrite(self.fd, totals.as_ptr() as *const libc::c_void, totals.len(), TOTALS_OFFSET as libc::off_t)
                    == totals.len() as isize
            {
                libc::pwrite(self.fd, flags.as_ptr() as *const libc::c_void, flags.len(), 6);
            }
            libc::close(self.fd);
        }
        self.base = std::ptr::null_mut();
        self.fd = -1;
    }

    /// In a child after `fork`: let go of the parent's stream without touching its file.
    pub fn abandon(&mut self) {
        if self.fd < 0 {
            return;
        }
        // SAFETY: the child's copy of the mapping and descriptor are its own to release.
        unsafe {
            if !self.base.is_null() {
                libc::munmap(self.base as *mut libc::c_void, self.window);
            }
            libc::close(self.fd);
        }
        self.base = std::ptr::null_mut();
        self.fd = -1;
    }
}

impl Drop for StreamWriter {
    fn drop(&mut self) {
        self.finish();
    }
}

/// Appender of `funcs.jsonl`: one `write(2)` per record, so a crash never leaves half a
/// record followed by a whole one.
pub struct FuncTableWriter {
    fd: libc::c_int,
}

impl FuncTableWriter {
    pub fn create(path: &Path) -> io::Result<Self> {
        let c = cpath(path)?;
        // SAFETY: plain open of a path we own.
        let fd = unsafe { libc::open(c.as_ptr(), libc::O_WRONLY | libc::O_CREAT | libc::O_APPEND | libc::O_CLOEXEC, 0o644) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(FuncTableWriter { fd })
    }

    /// Append one record as a JSON line.
    pub fn append(&self, rec: &FuncRecord) -> io::Result<()> {
        let mut line = serde_json::to_vec(rec).map_err(io::Error::other)?;
        line.push(b'\n');
        write_all_fd(self.fd, &line)
    }

    /// In a child after `fork`: close the inherited descriptor.
    pub fn abandon(&mut self) {
        if self.fd >= 0 {
            // SAFETY: the descriptor is ours.
            unsafe { libc::close(self.fd) };
            self.fd = -1;
        }
    }
}

impl Drop for FuncTableWriter {
    fn drop(&mut self) {
        self.abandon();
    }
}

fn write_all_fd(fd: libc::c_int, mut buf: &[u8]) -> io::Result<()> {
    while !buf.is_empty() {
        // SAFETY: writing from a slice we own.
        let n = unsafe { libc::write(fd, buf.as_ptr() as *const libc::c_void, buf.len()) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        buf = &buf[n as usize..];
    }
    Ok(())
}

/// Create this process's directory `p<pid>` under the trace root (`p<pid>.1`, `p<pid>.2`,
/// ... when an earlier image of the same pid, before an `exec`, already made one).
pub fn create_process_dir(root: &Path, pid: u32) -> io::Result<PathBuf> {
    for n in 0..10_000u32 {
        let name = if n == 0 { format!("p{pid}") } else { format!("p{pid}.{n}") };
        let dir = root.join(name);
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::new(io::ErrorKind::AlreadyExists, "too many process directories for one pid"))
}

/// Write `proc.json` into a process directory (whole or not at all: written beside it, then
/// renamed over it, so a rewrite never leaves half a document).
pub fn write_proc_meta(dir: &Path, meta: &ProcMeta) -> io::Result<()> {
    let mut s = serde_json::to_vec_pretty(meta).map_err(io::Error::other)?;
    s.push(b'\n');
    let tmp = dir.join(".proc.json.tmp");
    std::fs::write(&tmp, s)?;
    std::fs::rename(&tmp, dir.join(crate::PROC_META_FILE))
}

/// What a shim opens when it starts recording in a process: its directory `p<pid>` (see
/// [`create_process_dir`]), its `proc.json` (from [`current_proc_meta`]) and its empty
/// `funcs.jsonl`.
pub struct ProcessFiles {
    pub dir: PathBuf,
    pub meta: ProcMeta,
    pub funcs: FuncTableWriter,
}

impl ProcessFiles {
    /// Create this process's files under the trace root. `kind`, `runtime` and `forked_from`
    /// go into `proc.json`. The error names the file that could not be created.
    pub fn create(root: &Path, kind: &str, runtime: &str, forked_from: Option<u32>) -> Result<ProcessFiles, crate::FormatError> {
        let meta = current_proc_meta(kind, runtime, forked_from);
        let dir = create_process_dir(root, meta.pid).map_err(|e| crate::FormatError::io(&root.join(format!("p{}", meta.pid)), e))?;
        let funcs_path = dir.join(crate::FUNCS_FILE);
        let funcs = FuncTableWriter::create(&funcs_path).map_err(|e| crate::FormatError::io(&funcs_path, e))?;
        write_proc_meta(&dir, &meta).map_err(|e| crate::FormatError::io(&dir.join(crate::PROC_META_FILE), e))?;
        Ok(ProcessFiles { dir, meta, funcs })
    }
}

/// File name of a thread stream inside a process directory.
pub fn stream_file_name(tid: u64, seq: u32) -> String {
    format!("t{tid}-{seq}.ev")
}

/// Read this process's command line, executable, working directory and parent pid from
/// `/proc/self` (works the same for every language).
pub fn current_proc_meta(kind: &str, runtime: &str, forked_from: Option<u32>) -> ProcMeta {
    let argv = std::fs::read("/proc/self/cmdline")
        .map(|b| b.split(|&c| c == 0).filter(|s| !s.is_empty()).map(|s| String::from_utf8_lossy(s).into_owned()).collect())
        .unwrap_or_default();
    let exe = std::fs::read_link("/proc/self/exe").map(|p| p.to_string_lossy().into_owned()).unwrap_or_default();
    let cwd = std::env::current_dir().map(|p| p.to_string_lossy().into_owned()).unwrap_or_default();
    // SAFETY: getpid/getppid cannot fail.
    let (pid, ppid) = unsafe { (libc::getpid() as u32, libc::getppid() as u32) };
    ProcMeta {
        pid,
        ppid,
        argv,
        exe,
        cwd,
        kind: kind.to_string(),
        runtime: runtime.to_string(),
        start_ns: monotonic_ns(),
        forked_from,
        hook: None,
        lines_per_test: false,
        native_closed_at_python_calls: false,
    }
}

/// The calling thread's kernel thread id.
pub fn gettid() -> u64 {
    // SAFETY: gettid cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as u64 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_files_are_created_once_per_image() {
        let d = tempfile::tempdir().unwrap();
        let pid = std::process::id();
        let a = ProcessFiles::create(d.path(), "native", "glibc x", None).unwrap();
        assert_eq!(a.dir, d.path().join(format!("p{pid}")));
        assert_eq!((a.meta.pid, a.meta.kind.as_str(), a.meta.runtime.as_str()), (pid, "native", "glibc x"));
        let text = std::fs::read_to_string(a.dir.join(crate::PROC_META_FILE)).unwrap();
        assert_eq!(serde_json::from_str::<ProcMeta>(&text).unwrap(), a.meta);
        assert_eq!(std::fs::read(a.dir.join(crate::FUNCS_FILE)).unwrap(), b"");
        // A later image of the same pid (after exec) gets its own directory.
        let b = ProcessFiles::create(d.path(), "python", "CPython", Some(1)).unwrap();
        assert_eq!(b.dir, d.path().join(format!("p{pid}.1")));
        assert_eq!(b.meta.forked_from, Some(1));
    }

    #[test]
    fn process_files_error_names_the_path() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("missing");
        let e = ProcessFiles::create(&root, "native", "", None).err().expect("the root does not exist").to_string();
        assert!(e.contains(&root.display().to_string()), "{e}");
    }

    /// A small tmpfs mounted for the test, unmounted when dropped. `None` (with the reason
    /// printed) only when not root: as root, a failure to mount fails the test.
    pub(crate) struct SmallFs(tempfile::TempDir);

    impl SmallFs {
        pub(crate) fn mount(size: &str) -> Option<SmallFs> {
            let d = tempfile::tempdir().unwrap();
            // SAFETY: geteuid cannot fail.
            if unsafe { libc::geteuid() } != 0 {
                eprintln!("not root: cannot mount a small tmpfs, so the full-disk case is not exercised here");
                return None;
            }
            let st = std::process::Command::new("mount")
                .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
                .arg(d.path())
                .status()
                .expect("run mount");
            assert!(st.success(), "mount -t tmpfs failed as root: {st}");
            Some(SmallFs(d))
        }
        pub(crate) fn path(&self) -> &Path {
            self.0.path()
        }
    }

    impl Drop for SmallFs {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(self.0.path()).status();
        }
    }

    #[test]
    fn a_full_disk_stops_the_stream_marks_it_and_keeps_what_fit() {
        let Some(fs) = SmallFs::mount("1m") else { return };
        // A window larger than the file system: a header-only stream, marked.
        let big = fs.path().join("t2-0.ev");
        let mut w = StreamWriter::create(&big, 1, 1, 2, 0, 4 << 20).unwrap();
        assert!(w.is_incomplete());
        w.call(1, 5);
        w.finish();
        let s = crate::reader::ThreadStream::open(&big).unwrap();
        assert_eq!(s.header.flags & (FLAG_INCOMPLETE | FLAG_CLOSED), FLAG_INCOMPLETE | FLAG_CLOSED);
        assert_eq!((s.size, s.events().unwrap().count()), (64, 0));
        std::fs::remove_file(&big).unwrap();
        let path = fs.path().join("t1-0.ev");
        let mut w = StreamWriter::create(&path, 1, 1, 1, 0, 64 << 10).unwrap();
        // Far more than 1 MiB of events: without the reservation the first write into an
        // unbacked page would kill this test process with SIGBUS.
        let mut n = 0u64;
        while !w.is_incomplete() {
            w.call((n % 100) as u32 + 70, n * 1000 + 1);
            w.ret(n * 1000 + 500);
            n += 1;
            assert!(n < 10_000_000, "the stream never stopped on a 1 MiB file system");
        }
        // Once stopped it stays stopped, and the lent cursor is gone.
        let written = w.events();
        w.call(1, u64::MAX / 2);
        assert_eq!(w.events(), written);
        assert!(w.cursor().is_none());
        // The mark is in the header already, before the stream is closed.
        let h = crate::reader::ThreadStream::open(&path).unwrap().header;
        assert_ne!(h.flags & FLAG_INCOMPLETE, 0);
        w.finish();
        let s = crate::reader::ThreadStream::open(&path).unwrap();
        assert_ne!(s.header.flags & FLAG_INCOMPLETE, 0);
        assert_ne!(s.header.flags & FLAG_CLOSED, 0);
        assert!(s.size < 1 << 20, "the last reservation was released: {}", s.size);
        let evs: Vec<_> = s.events().unwrap().collect::<Result<_, _>>().unwrap();
        assert_eq!(evs.len() as u64, written);
        assert!(written > 100_000, "{written}");
    }

    #[test]
    fn windows_are_warmed_in_doubling_steps_the_first_only_after_warm_after_bytes() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("t1-0.ev");
        let window = 1 << 20;
        let mut w = StreamWriter::create(&path, 1, 1, 1, 0, window).unwrap();
        // The lent cursor stops at WARM_AFTER: an outside encoder comes back to the writer there.
        let c = w.cursor().unwrap();
        assert_eq!(c.limit as usize - c.pos as usize, WARM_AFTER - MAX_EVENT_LEN + 1 - w.len() as usize);
        assert_eq!(w.warmed, 0);
        let mut n = 0u64;
        let mut write_to = |w: &mut StreamWriter, len: usize| {
            while (w.len() as usize) < len {
                w.call((n % 300) as u32, n * 40 + 1);
                w.ret(n * 40 + 20);
                n += 1;
            }
        };
        write_to(&mut w, WARM_AFTER + 100);
        // Past it: the next WARM_AFTER bytes were written as zeros, from the page boundary
        // after the events (the position was within an event's length below WARM_AFTER, a
        // page boundary), and the cursor reaches their end.
        assert_eq!(w.warmed as usize, WARM_AFTER);
        let c = w.cursor().unwrap();
        assert_eq!(c.limit as usize - c.pos as usize, 2 * WARM_AFTER - MAX_EVENT_LEN + 1 - w.len() as usize);
        // SAFETY: the cursor just lent, unmoved.
        unsafe { w.set_cursor(&c) };
        // The next step is twice as long and reaches the window's end (1 MiB).
        write_to(&mut w, 2 * WARM_AFTER + 100);
        assert_eq!(w.warmed as usize, window - WARM_AFTER);
        // The second window is warmed as soon as it is mapped, its first step only: a stream
        // that ends just past a window does not warm the whole next one.
        write_to(&mut w, window + 100);
        assert_eq!(w.warmed as usize, window);
        write_to(&mut w, window + WARM_AFTER + 100);
        assert_eq!(w.warmed as usize, window + 2 * WARM_AFTER);
        let count = n;
        w.finish();
        // Every event reads back, and the zeros past the last one are cut off.
        let s = crate::reader::ThreadStream::open(&path).unwrap();
        assert_eq!(s.size, std::fs::metadata(&path).unwrap().len());
        assert!(s.size < (window + WARM_AFTER) as u64 + 200, "{}", s.size);
        let evs: Vec<_> = s.events().unwrap().collect::<Result<_, _>>().unwrap();
        assert_eq!(evs.len() as u64, 2 * count);
        assert_eq!(evs.last(), Some(&crate::event::Event::Return { ts: (count - 1) * 40 + 20 }));
    }

    #[test]
    fn a_cursor_lent_before_a_new_window_is_not_taken_back() {
        // The native shim's slow path takes the cursor back, writes (closing frames can
        // fill the window), and used to take the same, stale cursor back again: when the new
        // window was mapped at the old address, its position jumped ahead over unwritten
        // bytes and readers stopped there ("the events do not add up to the totals").
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("t.ev");
        let window = 64 << 10;
        let mut w = StreamWriter::create(&path, 0, 1, 1, 0, window).unwrap();
        for i in 0..(window as u64 / 2 - 100) {
            w.call(1, i);
        }
        let stale = w.cursor().unwrap();
        // SAFETY: the cursor just lent, unmoved.
        unsafe { w.set_cursor(&stale) };
        for i in 0..1000 {
            w.ret(1_000_000 + i);
        }
        let (calls, returns, len) = (w.totals().calls, w.totals().returns, w.len());
        // SAFETY: a stale cursor of this writer: must be ignored.
        unsafe { w.set_cursor(&stale) };
        assert_eq!((w.totals().calls, w.totals().returns, w.len()), (calls, returns, len));
        w.finish();
        let s = crate::ThreadStream::open(&path).unwrap();
        let n = s.events().unwrap().filter(|e| e.is_ok()).count() as u64;
        assert_eq!(n, calls + returns);
    }

    #[test]
    fn a_writer_inherited_across_fork_never_touches_the_parents_stream() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("t1-0.ev");
        let mut w = StreamWriter::create(&path, 1, 1, 1, 0, 64 << 10).unwrap();
        w.call(1, 10);
        // SAFETY: the child only calls the writer (no allocation on these paths) and _exit.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            for i in 0..1000 {
                w.call(2, 100 + i);
            }
            w.finish(); // must not cut or close the parent's stream
            unsafe { libc::_exit(0) };
        }
        let mut st = 0;
        // SAFETY: waiting for our child.
        unsafe { libc::waitpid(pid, &mut st, 0) };
        assert!(libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 0);
        w.ret(20);
        w.finish();
        let s = crate::reader::ThreadStream::open(&path).unwrap();
        let evs: Vec<_> = s.events().unwrap().collect::<Result<_, _>>().unwrap();
        assert_eq!(evs, vec![crate::Event::Call { func: 1, ts: 10 }, crate::Event::Return { ts: 20 }]);
    }
}
