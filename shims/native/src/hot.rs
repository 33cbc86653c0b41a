//! The Rust side of hot.c (the fast paths of the hooks): the per-thread block hot.c keeps in
//! an initial-exec TLS slot (`SltThread`, `struct slt_thread`; the layouts are checked by a
//! test), the thread modes, hot.c's functions, the TSC calibration it reads, and the tests
//! that hot.c's event encoder writes the same stream as the `trace-format` writer.
use std::sync::atomic::{AtomicPtr, Ordering};
use trace_format::clock::TscCalibration;
use trace_format::writer::RawCursor;

/// Functions remembered for replay after `fork` and for matching returns (deeper calls are
/// counted but not remembered). Same as `SLT_STACK_CAP` in hot.c.
pub(crate) const STACK_CAP: usize = 1024;
/// Entries of a thread's two-way set-associative address -> id cache (`SLT_CACHE_SIZE` in
/// hot.c).
pub(crate) const CACHE_SIZE: usize = 4096;

/// Modes of a thread (`SLT_*` in hot.c).
pub(crate) const M_UNINIT: u32 = 0;
pub(crate) const M_ACTIVE: u32 = 1;
/// The shim itself runs on this thread: events from code it calls (an instrumented allocator,
/// a signal handler) are dropped, entry and exit alike.
pub(crate) const M_BUSY: u32 = 2;
/// Not recording: no trace directory, the stream could not be created or has stopped, or the
/// thread is exiting.
pub(crate) const M_OFF: u32 = 3;
/// Outside the recorded calls (filter.rs: before a `-F` function, inside a `-N` one): every
/// event goes to the slow path, which records nothing until the thread is inside again.
pub(crate) const M_FILTERED: u32 = 4;

#[repr(C)]
pub(crate) struct CacheEntry {
    pub(crate) addr: u64,
    /// The call event's tag and id bytes with their length, and the CFA offset (hot.c).
    pub(crate) code: u64,
}

/// `struct slt_thread` of hot.c: a thread's hot state (opaque outside this crate).
///
/// What the Rust side relies on (the `# Safety` sections and SAFETY notes of the slow paths
/// say "the block's invariant"; everything that changes these fields keeps it):
/// - a block is its thread's alone: hot.c's initial-exec TLS slot (`slt_thread_state`), which
///   lives as long as the thread, and the slow paths get their own thread's (a zeroed one in
///   the tests). Code that interrupts a path of the thread (a signal handler) runs nested in
///   it, and hot.c's window rule (`held_by_live_path`, `recover_busy`) keeps such a nested path
///   from changing the block under a live one;
/// - `rust` is null or the thread's `ThreadState` (`Box::into_raw` in `start_thread`, freed
///   only by `thread_exit`, which turns the mode OFF and nulls these pointers first); `stack`
///   and `cfas` then point at its `STACK_CAP` and `2 * STACK_CAP` entries and `cache` at its `CACHE_SIZE`
///   entries (set with `rust`, before the thread records; null with it);
/// - a thread in mode ACTIVE or FILTERED has its state: `push` makes a thread ACTIVE only with
///   a stream, and FILTERED is entered only from ACTIVE.
#[repr(C)]
pub(crate) struct SltThread {
    pub(crate) cur: RawCursor,
    pub(crate) depth: u64,
    pub(crate) stack: *mut u64,
    /// The thread's `ThreadState`.
    pub(crate) rust: *mut libc::c_void,
    pub(crate) mode: u32,
    pub(crate) pad: u32,
    /// `CACHE_SIZE` entries in the `ThreadState` (null until the thread's first event).
    pub(crate) cache: *mut CacheEntry,
    /// CFAs of the open calls in `stack` (0: unknown), for the frame repair (frames.rs); then,
    /// from `STACK_CAP` on, their return addresses (`thread::set_frame`).
    pub(crate) cfas: *mut u64,
    /// Stack pointer of the running slow path at its shallowest (0: none): `recover_busy`.
    pub(crate) busy_sp: u64,
    /// The thread's own stack, `[stack_lo, stack_lo + stack_span)` (span 0: unknown), set by
    /// `thread::start_thread`: hot.c's `top_slot_reused` reads open frames' slots only there.
    pub(crate) stack_lo: u64,
    pub(crate) stack_span: u64,
}

// hot.c's functions. What a caller must hold, beyond the C signature:
extern "C" {
    /// None: the calling thread's block (its TLS slot).
    pub(crate) fn slt_thread_state() -> *mut SltThread;
    /// None: an event of the calling thread (`this_fn` is only a number; `sp` 0 if unknown).
    pub(crate) fn slt_enter(this_fn: *mut libc::c_void, sp: u64);
    /// As `slt_enter`.
    pub(crate) fn slt_exit(this_fn: *mut libc::c_void, sp: u64);
    /// `t` is a valid block (its `cache` null or `CACHE_SIZE` entries) no other thread uses.
    pub(crate) fn slt_cache_put(t: *mut SltThread, addr: u64, id: u64);
    /// As `slt_cache_put`.
    pub(crate) fn slt_cache_clear(t: *mut SltThread);
    /// Only accessed atomically (`publish_calibration`; hot.c's acquire loads).
    pub(crate) static mut slt_calibration: *const TscCalibration;
    /// `t` is the calling thread's block; `sp` the caller's stack pointer (its marker).
    pub(crate) fn slt_take_limit(t: *mut SltThread, sp: u64) -> *mut u8;
    /// `t` is the calling thread's block, whose window the caller holds; `lim` null, or the
    /// `limit` of the window `t.cur.pos` is in.
    pub(crate) fn slt_give_limit(t: *mut SltThread, lim: *mut u8);
    /// The clock as hot.c's fast paths read it. No precondition.
    pub(crate) fn slt_clock_now() -> u64;
    /// An event of the calling thread, whose stack pointer is `sp`; `hi` is 0 or the top of
    /// the stack `sp` is on (hot.c reads return-address slots between the two).
    /// `full` is set when returns are due but the window has too little room for them.
    pub(crate) fn slt_python_entry(sp: u64, hi: u64, full: *mut libc::c_int) -> u64;
    /// The thread's block (`t`, BUSY: the caller holds the window); `sp`, `hi` as above.
    pub(crate) fn slt_python_entry_ended(t: *const SltThread, sp: u64, hi: u64) -> u64;
}

/// Let hot.c read the clock's TSC calibration (it asks Rust's clock while there is none).
pub(crate) fn publish_calibration() {
    if let Some(c) = trace_format::clock::tsc_calibration() {
        // SAFETY: `slt_calibration` is a pointer-sized, aligned C object that lives as long as
        // the library and is only ever accessed atomically (hot.c loads it with
        // __atomic_load_n acquire); the release store publishes the calibration's fields,
        // which are never freed or changed afterwards.
        unsafe { AtomicPtr::from_ptr(std::ptr::addr_of_mut!(slt_calibration) as *mut *mut TscCalibration) }
            .store(c as *const TscCalibration as *mut TscCalibration, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use trace_format::event::{FLAG_NATIVE, KIND_CALL, KIND_RETURN};
    use trace_format::writer::{self, StreamWriter};

    extern "C" {
        fn slt_thread_size() -> u64;
        fn slt_cache_size() -> u64;
        fn slt_far_below() -> u64;
        fn slt_test_encode(t: *mut SltThread, kinds: *const u8, ids: *const u64, times: *const u64, n: u64) -> u64;
        fn slt_test_now() -> u64;
        fn slt_test_python_entry_running(t: *const SltThread, k: u64, sp: u64, hi: u64) -> i32;
    }

    /// Which open calls a Python call at stack pointer `sp` still finds running (hot.c's
    /// `python_entry_running`): a stack of 64 words stands for the thread's stack, `hi` its
    /// top; each open call's CFA points into it and its recorded return address is 0x1000 + k.
    #[test]
    fn a_python_call_finds_running_the_calls_whose_frame_is_above_it_with_their_return_address_in_place() {
        let mut mem = [0u64; 64];
        // The return-address slots of the first three calls below (CFA - 8).
        mem[39] = 0x1000;
        mem[29] = 0x2222;
        mem[19] = 0x1005;
        let base = mem.as_ptr() as u64;
        let (sp, hi) = (base + 16 * 8, base + 64 * 8);
        let mut stack = vec![0u64; STACK_CAP];
        let mut cfas = vec![0u64; 2 * STACK_CAP];
        // SAFETY: a zeroed block is valid (null pointers, mode 0); only `stack` and `cfas` are read.
        let mut t: Box<SltThread> = Box::new(unsafe { std::mem::zeroed() });
        let frames: [(u64, u64); 8] = [
            // Above `sp`, the slot holds the address the call pushed: running.
            (0x10, base + 40 * 8),
            // Above `sp`, the slot was written over: returned.
            (0x11, base + 30 * 8),
            // At and below `sp`: returned.
            (0x12, sp),
            (0x13, base + 8 * 8),
            // Unknown CFA, a `-F` root, far below (another stack), above the stack's top (not
            // read): running.
            (0x14, 0),
            (0x15 | crate::filter::ROOT_BIT, base + 20 * 8),
            (0x16, base.wrapping_sub(2 << 20)),
            (0x17, hi + 8),
        ];
        for (k, &(addr, cfa)) in frames.iter().enumerate() {
            stack[k] = addr;
            cfas[k] = cfa;
            cfas[STACK_CAP + k] = 0x1000 + k as u64;
        }
        t.stack = stack.as_mut_ptr();
        t.cfas = cfas.as_mut_ptr();
        let running: Vec<bool> = (0..frames.len() as u64)
            // SAFETY: `stack` and `cfas` hold the entries read; slots are read only within `mem`.
            .map(|k| unsafe { slt_test_python_entry_running(&*t, k, sp, hi) } != 0)
            .collect();
        assert_eq!(running, [true, false, false, false, true, true, true, true]);
        // A known return address of 0 is unknown: running.
        cfas[STACK_CAP + 1] = 0;
        // SAFETY: as above.
        assert_ne!(unsafe { slt_test_python_entry_running(&*t, 1, sp, hi) }, 0);
    }

    #[test]
    fn c_and_rust_agree_on_the_thread_block_layout() {
        // SAFETY: plain C functions returning constants.
        unsafe {
            assert_eq!(slt_thread_size() as usize, std::mem::size_of::<SltThread>());
            assert_eq!(slt_cache_size() as usize, CACHE_SIZE);
            assert_eq!(slt_far_below(), crate::frames::OTHER_STACK_SPAN);
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
            // hot.c's fast paths keep an id's bytes in the cache up to 63 + 2^21 - 1 (three
            // varint bytes); larger ids take the general encoder.
            let id = match i % 6 {
                0 => x % 63,
                1 => 63 + x % 200,
                2 => x % (1 << 20),
                3 => u32::MAX as u64 - x % 3,
                4 => 63 + (1 << 21) - 1 + x % 2,
                _ => 62 + x % 3,
            };
            out.push(if i % 3 == 2 { (KIND_RETURN, 0, ts) } else { (KIND_CALL, id, ts) });
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
            if k == KIND_CALL {
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
            // A few events at a time: after each batch, the window past the last event must
            // still be zeros (hot.c stores a call's id bytes as one word; a stream cut there
            // must end in zeros for the readers).
            let batch = (evs.len() - done).min(5) as u64;
            // SAFETY: the arrays hold `batch` entries from `done`; the cursor is the writer's.
            let n = unsafe { slt_test_encode(&mut *t, kinds[done..].as_ptr(), ids[done..].as_ptr(), times[done..].as_ptr(), batch) };
            let window_end = t.cur.limit as usize + trace_format::event::MAX_EVENT_LEN - 1;
            let after = (window_end - t.cur.pos as usize).min(16);
            // SAFETY: [pos, window end) is inside the writer's mapped window.
            let rest = unsafe { std::slice::from_raw_parts(t.cur.pos, after) };
            assert!(rest.iter().all(|&b| b == 0), "bytes after event {}: {rest:?}", done + n as usize);
            // SAFETY: hot.c moved the cursor by whole events while pos <= limit.
            unsafe { w.set_cursor(&t.cur) };
            done += n as usize;
            // A short batch: the window filled (the writer maps the next one).
            windows += usize::from(n < batch);
        }
        w.finish();
        assert!(windows >= 2, "the events must fill several windows: {windows}");
        let (a, b) = (std::fs::read(&rust_path).unwrap(), std::fs::read(&c_path).unwrap());
        assert_eq!(a.len(), b.len());
        assert!(a == b, "streams differ at byte {:?}", a.iter().zip(&b).position(|(x, y)| x != y));
        // And the stream reads back as the events (times that went back read as the base).
        let s = trace_format::ThreadStream::open(&c_path).unwrap();
        let calls = s.events().unwrap().filter(|e| matches!(e, Ok(trace_format::Event::Call { .. }))).count();
        assert_eq!(calls, kinds.iter().filter(|&&k| k == KIND_CALL).count());
        assert_eq!(s.header.totals.unwrap().calls as usize, calls);
    }

    #[test]
    fn the_cache_keeps_ids_that_fit_an_entry_and_drops_the_others() {
        // SAFETY: a zeroed block is valid; only `cache` is used, pointing at our entries.
        let mut t: Box<SltThread> = Box::new(unsafe { std::mem::zeroed() });
        let mut cache: Vec<CacheEntry> = (0..CACHE_SIZE).map(|_| CacheEntry { addr: 0, code: 7 }).collect();
        t.cache = cache.as_mut_ptr();
        let find = |cache: &[CacheEntry], addr: u64| cache.iter().find(|e| e.addr == addr).map(|e| e.code);
        // SAFETY: `t.cache` holds CACHE_SIZE entries.
        unsafe { slt_cache_clear(&mut *t) };
        assert!(cache.iter().all(|e| e.addr == u64::MAX));
        let (addr, off) = (0x5555_0000_1230u64, 40u64);
        // Id 300: the escape tag (0xFD) and the varint of 237 (0xED 0x01), three bytes.
        // SAFETY: as above.
        unsafe { slt_cache_put(&mut *t, addr, 300 | off << 32) };
        assert_eq!(find(&cache, addr), Some(off << 40 | 0x01_ED_FD << 8 | 3));
        // Id 5 inline: one byte, (5 << 2) | 1.
        // SAFETY: as above.
        unsafe { slt_cache_put(&mut *t, addr + 16, 5) };
        assert_eq!(find(&cache, addr + 16), Some(21 << 8 | 1));
        // An id past 63 + 2^21 - 1, or an offset of 2^24 or more, does not fit: not cached, and
        // an entry the address had is gone (its events are then Rust's).
        for too_big in [63 + (1u64 << 21), (1 << 24) << 32 | 300] {
            // SAFETY: as above.
            unsafe { slt_cache_put(&mut *t, addr, 300 | off << 32) };
            assert!(find(&cache, addr).is_some());
            // SAFETY: as above.
            unsafe { slt_cache_put(&mut *t, addr, too_big) };
            assert_eq!(find(&cache, addr), None, "{too_big:#x}");
        }
        assert_eq!(find(&cache, addr + 16), Some(21 << 8 | 1));
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
