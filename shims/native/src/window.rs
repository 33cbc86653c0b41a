//! Taking the write window back from a path that was left with `siglongjmp`.
//!
//! hot.c's rule ("THE hot-path rule" there): a path that writes the thread's window holds it
//! by leaving a marker, `~sp`, in the `limit` word, where `sp` is its stack pointer. A
//! signal handler's event that finds the window held is dropped: the interrupted path will
//! go on writing at the position it read. But a handler may leave with `siglongjmp` and
//! never return into the path it interrupted; the window would stay held and the thread
//! record nothing more. This module decides when the holder is gone, and rebuilds the
//! cursor the holder may have left half-updated.
//!
//! **When the holder is gone** ([`owner_gone`]). While a path is interrupted, all that runs on
//! the thread is nested in it: a signal handler (and what it calls, and handlers nested in
//! it) runs below the interrupted stack pointer (the kernel pushes the signal frame there,
//! past the red zone), or on the alternate signal stack (`sigaltstack`), wherever that is.
//! So an event whose stack pointer is at or above the holder's, and that is not on the
//! alternate signal stack, is not nested in the holder: the holder's frame is gone. An event
//! below it may be nested or may be a deeper call after the jump; it is dropped (sound, not
//! complete: recording resumes at the first event at or above the holder's frame, typically
//! the next call or return of the function that called `sigsetjmp`).
//!
//! **What the holder left** ([`take_over`]). A fast path commits an event with one store of
//! the position, after the event's bytes and its shadow-stack slot; the depth, the counters
//! and the delta base are stored around it in any order. So the position is the truth: the
//! events between the position thread.rs handed over last (`push`, which keeps a [`Handover`])
//! and the current one are exactly the fast paths' committed events. Decoding them gives
//! the depth, the call and return counts and the last time exactly, whatever the holder had
//! stored of its own event.
//!
//! Async-signal-safety: both run in whatever context the event came from (often a signal
//! handler). `owner_gone` makes one system call (`sigaltstack`, async-signal-safe); the
//! decoding reads memory of the thread's own mapped window (at most one window, 4 MiB) and
//! allocates nothing.

use crate::hot::{SltThread, M_ACTIVE};
use std::ptr::null_mut;
use trace_format::writer::{RawCursor, StreamWriter};

extern "C" {
    /// None: a pure function of the value (`lim` is not dereferenced).
    fn slt_limit_owner(lim: *const u8) -> u64;
}

/// The stack pointer of the path that holds the window with a marker, from a `limit` value
/// (0: none, or the holder's stack pointer is unknown).
pub(crate) fn owner_of(lim: *const u8) -> u64 {
    // SAFETY: a pure function of the value.
    unsafe { slt_limit_owner(lim) }
}

/// Whether the path holding `t`'s window with a marker is gone (see the module's doc), for
/// an event whose stack pointer is `sp` (0: unknown). False when no marker holds it.
pub(crate) fn owner_gone(t: &SltThread, sp: u64) -> bool {
    let owner = owner_of(t.cur.limit);
    if owner == 0 || sp == 0 || sp < owner {
        return false;
    }
    // SAFETY: sigaltstack only fills the stack_t we own (async-signal-safe).
    unsafe {
        let mut ss: libc::stack_t = std::mem::zeroed();
        libc::sigaltstack(null_mut(), &mut ss) == 0 && ss.ss_flags & libc::SS_ONSTACK == 0
    }
}

/// The cursor as thread.rs handed it to hot.c last (`push`): where the fast paths started.
#[derive(Clone, Copy)]
pub(crate) struct Handover {
    pub pos: *mut u8,
    /// The last byte an event may start at, + 1 (the window's end is `MAX_EVENT_LEN - 1`
    /// beyond).
    pub limit: *mut u8,
    pub last_ts: u64,
    pub calls: u64,
    pub returns: u64,
    pub depth: u64,
}

impl Handover {
    pub(crate) const NONE: Handover = Handover { pos: null_mut(), limit: null_mut(), last_ts: 0, calls: 0, returns: 0, depth: 0 };
}

/// What fast paths wrote since a hand-over: call and return events, their delta sum.
#[derive(Debug, PartialEq, Eq, Default)]
pub(crate) struct Written {
    pub(crate) calls: u64,
    pub(crate) returns: u64,
    pub(crate) dt: u64,
}

/// Decode the events the shim writes (calls and returns, as `trace_format::event` encodes
/// them, and the resume marker before a call that the slow path writes for a frame of a stack
/// it switched back to: suspend.rs). None for anything else: the bytes are not theirs. The
/// encoding's constants and its varint are `trace_format::event`'s (no call, no allocation);
/// the golden corpus checks this decoder too (golden.rs).
pub(crate) fn decode(buf: &[u8]) -> Option<Written> {
    use trace_format::event::{get_varint, tag_value, EXT_RESUME, INLINE_ESCAPE, INLINE_MAX, KIND_CALL, KIND_EXT, KIND_MASK, KIND_RETURN};
    let mut w = Written::default();
    let mut i = 0;
    while i < buf.len() {
        let tag = buf[i];
        i += 1;
        let value = tag_value(tag);
        match tag & KIND_MASK {
            KIND_CALL => {
                if value == INLINE_ESCAPE {
                    get_varint(buf, &mut i)?;
                }
                w.calls += 1;
                w.dt = w.dt.wrapping_add(get_varint(buf, &mut i)?);
            }
            KIND_RETURN => {
                w.returns += 1;
                let dt = if value == INLINE_ESCAPE { get_varint(buf, &mut i)?.wrapping_add(INLINE_MAX + 1) } else { value.into() };
                w.dt = w.dt.wrapping_add(dt);
            }
            // The resume marker: its call follows (counted as a call, as the writer counts it).
            KIND_EXT if value == EXT_RESUME && buf.get(i).is_some_and(|b| b & KIND_MASK == KIND_CALL) => {}
            _ => return None,
        }
    }
    Some(w)
}

/// The counters and the depth at `end`, from the last hand-over `h` and the events between
/// its position and `end` (all calls and returns: fast paths' and the slow paths'). None if
/// `end` is not in the hand-over's window after its position, or the bytes are not such
/// events.
///
/// # Safety
/// `h` is the last hand-over of the window `end` is in (so that window is still mapped), and
/// the bytes up to `end` are written.
unsafe fn rebuild(h: &Handover, end: *mut u8) -> Option<(u64, u64, u64, u64)> {
    let (start, end) = (h.pos as usize, end as usize);
    let window_end = (h.limit as usize).saturating_add(trace_format::event::MAX_EVENT_LEN - 1);
    if h.pos.is_null() || end < start || end > window_end {
        return None;
    }
    // SAFETY: [start, end) lies in the window of the last hand-over (checked above, `h` being
    // that window's by the contract), mapped until the writer changes windows (which happens
    // only before a new hand-over); the window is held, so nothing writes it meanwhile.
    let w = decode(unsafe { std::slice::from_raw_parts(start as *const u8, end - start) })?;
    let depth = (h.depth + w.calls).checked_sub(w.returns)?;
    Some((h.calls + w.calls, h.returns + w.returns, h.last_ts.wrapping_add(w.dt), depth))
}

/// thread.rs took the window (`old`: the `limit` it found) from a thread in mode ACTIVE: if a
/// marker held it, its path was left for good (the caller checked [`owner_gone`], or is not
/// nested in any path: the thread's exit, `exit`, a fork child); rebuild the cursor and the
/// depth from the stream. Returns false if the stream since the hand-over cannot be read as
/// calls and returns (then the caller stops recording).
///
/// # Safety
/// `t` is this thread's block, its window taken by the caller; `h` is the last hand-over of
/// the window `t.cur.pos` is in.
pub(crate) unsafe fn take_over(t: &mut SltThread, old: *mut u8, h: &Handover) -> bool {
    if t.mode != M_ACTIVE || (old as i64) >= 0 {
        return true;
    }
    // SAFETY: `h` is the last hand-over of the window `t.cur.pos` is in (the contract), and
    // hot.c stores the position only after the bytes of the event it commits.
    let Some((calls, returns, last_ts, depth)) = (unsafe { rebuild(h, t.cur.pos) }) else { return false };
    t.cur.calls = calls;
    t.cur.returns = returns;
    t.cur.last_ts = last_ts;
    t.depth = depth;
    true
}

/// A slow path (hooks.rs) was left for good (recover_busy): the writer's position is the
/// truth (one store per event, after its bytes), its counters and the depth may be an event
/// apart from it; rebuild them from the stream. The writer cannot have been left while it
/// changed windows ([`NearWindowEnd`]). Returns false if the stream cannot be read back.
///
/// # Safety
/// `t` is this thread's block (mode BUSY); `w` its writer, `h` the last hand-over, of the
/// writer's current window (a slow path changes windows only with signals blocked, so one that
/// was left did not).
pub(crate) unsafe fn resync_writer(t: &mut SltThread, w: &mut StreamWriter, h: &Handover) -> bool {
    // Not near the window's end (the slow path that was left ran with signals open), so this
    // lends a cursor in the same window.
    let Some(c) = w.cursor() else { return true };
    // SAFETY: `h` is the last hand-over of the writer's window (the contract), which `c.pos`
    // is in; the writer's position is stored only after the bytes of its events.
    let Some((calls, returns, last_ts, depth)) = (unsafe { rebuild(h, c.pos) }) else { return false };
    // SAFETY: the cursor just lent, its position unmoved.
    unsafe { w.set_cursor(&RawCursor { calls, returns, last_ts, ..c }) };
    t.depth = depth;
    true
}

/// Room left in the window below which a slow path runs with signals blocked (more than a
/// slow path writes: at most `STACK_CAP` returns and a call, `MAX_EVENT_LEN` bytes each).
const MARGIN: usize = 64 << 10;

/// Blocks every signal while a slow path may make the writer change windows (near the end of
/// the window, or a thread without a stream yet): a handler that left with `siglongjmp` in
/// the middle of that (one window unmapped, the next not yet mapped) would leave a writer
/// that cannot be resumed. Elsewhere a slow path only writes events into the window, which
/// [`resync_writer`] can read back. Two system calls (`pthread_sigmask`, async-signal-safe),
/// for the slow paths in the last [`MARGIN`] bytes of each window only.
pub(crate) struct NearWindowEnd(Option<libc::sigset_t>);

/// Whether a slow path of `t` may change windows: less than [`MARGIN`] left after the
/// position of the last hand-over `h`, or no hand-over yet (the stream is created).
pub(crate) fn near_end(t: &SltThread, h: Option<&Handover>) -> bool {
    h.filter(|h| !h.pos.is_null()).is_none_or(|h| (h.limit as usize).saturating_sub(t.cur.pos as usize) < MARGIN)
}

impl NearWindowEnd {
    pub(crate) fn guard(block: bool) -> NearWindowEnd {
        if !block {
            return NearWindowEnd(None);
        }
        // SAFETY: sets we own; the old mask is put back by `drop`.
        unsafe {
            let mut all: libc::sigset_t = std::mem::zeroed();
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&mut all);
            libc::pthread_sigmask(libc::SIG_BLOCK, &all, &mut old);
            NearWindowEnd(Some(old))
        }
    }
}

impl Drop for NearWindowEnd {
    fn drop(&mut self) {
        if let Some(old) = &self.0 {
            // SAFETY: the mask saved by `guard`.
            unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, old, null_mut()) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(events: &[(bool, u32, u64)]) -> Vec<u8> {
        let mut out = vec![0u8; events.len() * trace_format::event::MAX_EVENT_LEN];
        let mut p = 0;
        for &(call, id, dt) in events {
            // SAFETY: MAX_EVENT_LEN bytes of room per event.
            p = unsafe {
                if call {
                    trace_format::event::encode_call(out.as_mut_ptr(), p, id, dt)
                } else {
                    trace_format::event::encode_return(out.as_mut_ptr(), p, dt)
                }
            };
        }
        out.truncate(p);
        out
    }

    #[test]
    fn decodes_what_the_encoder_writes() {
        let evs =
            [(true, 3, 0), (true, 62, 5), (true, 63, 1 << 20), (false, 0, 62), (false, 0, 63), (true, u32::MAX, 1), (false, 0, 1 << 40)];
        let w = decode(&enc(&evs)).unwrap();
        assert_eq!(w, Written { calls: 4, returns: 3, dt: evs.iter().map(|e| e.2).sum() });
        assert_eq!(decode(&[]), Some(Written::default()));
        // Truncated, or not a fast path's event (an extended op).
        let b = enc(&[(true, 100, 1 << 30)]);
        assert_eq!(decode(&b[..b.len() - 1]), None);
        assert_eq!(decode(&[trace_format::event::tag(trace_format::event::EXT_PAD, trace_format::event::KIND_EXT)]), None);
        // A resume marker counts with its call; alone, or before anything else, it is not ours.
        let mut r = vec![trace_format::event::tag(trace_format::event::EXT_RESUME, trace_format::event::KIND_EXT)];
        r.extend(enc(&[(true, 7, 9)]));
        assert_eq!(decode(&r), Some(Written { calls: 1, returns: 0, dt: 9 }));
        assert_eq!(decode(&r[..1]), None);
        assert_eq!(decode(&[r[0], trace_format::event::KIND_RETURN]), None);
    }
}
