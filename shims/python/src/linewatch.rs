//! The bounds on watching a function's lines through `sys.monitoring` (3.12+): a function's
//! LINE events are turned off once all its code lines were reported, after [`LINE_ENTRIES`]
//! entries, or when one of its frames runs long ([`LINE_FRAME_AGE`]); the last two give its
//! unreported lines up with a line event for line 0 (`docs/python-recording.md`). Everything
//! here runs with the GIL held, on the call path ([`count_line_entry`]) or in cold functions.

use crate::runtime;
use crate::state::{cached_code_id, current, with_proc, writer, CodeId, GENERATION, LINES_DONE_BIT, WATCHED_BIT};
use pyo3::ffi::PyObject;
use pyo3::prelude::*;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Every this many entries, the current thread's frames are looked at
/// ([`sweep_long_frames`]).
const SWEEP_EVERY: u64 = 4096;
/// A frame of a watched function still running this many entries after its function's last
/// entry is a long-running one (a loop over a whole input): its unreported lines are given up
/// and its LINE events turned off, since the line starts CPython never reports (a one-line
/// loop inside that loop) cost on every turn; [`LINE_ENTRIES`] cannot see a function entered
/// once.
const LINE_FRAME_AGE: u64 = 20_000;

/// A function's LINE events stay on for at most this many entries (calls and resumptions):
/// after that its lines not reported yet are given up (a line event with line 0 says so, so the
/// analyzer treats them as unknown, not as not run) and its LINE events are turned off. While
/// a function with a line not run is watched, the line starts that CPython never reports to a
/// tool (a jump back to the same line: one-line loops, conditional expressions) stay
/// instrumented and cost on every execution (a one-line comprehension 200 lines below its
/// `def`: many times slower); this bounds how often. Why 256 and not fewer: fewer gives up
/// the lines of many more functions (larger prompts) for no measurable gain
/// (`docs/performance.md`, "Figures behind the code's choices").
pub const LINE_ENTRIES: u16 = 256;

/// Set once a function's LINE events are watched (lines recorded through `sys.monitoring`):
/// until then entries are not counted ([`count_line_entry`]), so a run without lines pays
/// one load per call for them.
pub(crate) static LINES_WATCHED: AtomicBool = AtomicBool::new(false);

/// Entries (calls and resumptions) since lines were first watched: the clock of
/// [`LINE_FRAME_AGE`] and of the sweeps. Written with the GIL held, so a load and a store
/// (no locked read-modify-write) keep it exact.
static ENTRIES: AtomicU64 = AtomicU64::new(0);

/// The entry clock ([`ENTRIES`]).
pub(crate) fn entries() -> u64 {
    ENTRIES.load(Ordering::Relaxed)
}

/// An entry of a function (`id`: its id, `None` when it is not recorded) while some function's
/// lines are watched. A function whose lines are done turns its LINE events off; a watched
/// one is counted ([`count_line_entry`]); any other costs a bit test. Every [`SWEEP_EVERY`]
/// entries the current thread's frames are looked at.
///
/// # Safety
/// GIL held; `code` is a live code object, `id` its id; not from a LINE callback of `code`.
#[inline(always)]
pub(crate) unsafe fn entered(code: *mut PyObject, id: Option<CodeId>) {
    let n = ENTRIES.load(Ordering::Relaxed) + 1;
    ENTRIES.store(n, Ordering::Relaxed);
    // After a test's start, a function's first entry re-arms its lines for that test.
    let epoch = crate::testlines::TEST_EPOCH.load(Ordering::Relaxed);
    // SAFETY: GIL held; `code` is live, `c.id` its id; an entry (the contract).
    let rearmed = epoch != 0 && id.is_some_and(|c| unsafe { crate::testlines::rearm_if_stale(code, c.id, epoch) });
    match id {
        // SAFETY: GIL held; `code` is live, `c.id` its id; an entry, not a LINE callback (the
        // contract).
        Some(c) if rearmed => unsafe { count_line_entry(code, c.id, n) },
        // SAFETY: GIL held; `code` is live, `c.id` its id; an entry, not a LINE callback (the
        // contract).
        Some(c) if c.lines_done() => unsafe { lines_finished(code, c.id) },
        // SAFETY: as above.
        Some(c) if c.watched() => unsafe { count_line_entry(code, c.id, n) },
        _ => {}
    }
    if n % SWEEP_EVERY == 0 {
        // SAFETY: GIL held (the contract).
        unsafe { sweep_long_frames() };
    }
}

/// One more entry (the `n`th, [`ENTRIES`]) of function `id` while its LINE events are on: the
/// last one allowed ([`LINE_ENTRIES`]) gives its unreported lines up.
///
/// # Safety
/// As [`entered`].
#[inline(never)]
unsafe fn count_line_entry(code: *mut PyObject, id: u32, n: u64) {
    // SAFETY: GIL held (the contract); the closure calls no CPython.
    let last = unsafe {
        with_proc(|p| match p.line_entries.get_mut(id as usize) {
            Some(left) if *left > 0 => {
                *left -= 1;
                if let Some(e) = p.last_entry.get_mut(id as usize) {
                    *e = n;
                }
                *left == 0
            }
            _ => false,
        })
    };
    if last == Some(true) {
        // SAFETY: as for `with_proc`; `code` and `id` as the contract says.
        unsafe { give_up_lines(code, id) };
    }
}

/// Give up the lines of the watched functions whose frames in the current thread have been
/// running for [`LINE_FRAME_AGE`] entries since their function's last entry. Other threads'
/// frames are left to their own sweeps.
///
/// # Safety
/// GIL held; not from a LINE callback.
#[cold]
#[inline(never)]
unsafe fn sweep_long_frames() {
    // SAFETY: GIL held (the contract): this thread is attached.
    let py = unsafe { Python::assume_attached() };
    let Ok(sys) = py.import("sys") else { return };
    let Ok(mut frame) = sys.call_method1("_getframe", (0,)) else { return };
    let mut long = Vec::new();
    loop {
        if let Ok(code) = frame.getattr("f_code") {
            // SAFETY: GIL held; `code` is the frame's live code object (held by `code`).
            if let Some(c) = unsafe { cached_code_id(code.as_ptr()) } {
                // SAFETY: GIL held; the closure calls no CPython.
                let old = unsafe {
                    with_proc(|p| {
                        let watched = p.line_entries.get(c.id as usize).is_some_and(|&n| n > 0);
                        let last = p.last_entry.get(c.id as usize).copied().unwrap_or(u64::MAX);
                        watched && entries().saturating_sub(last) >= LINE_FRAME_AGE
                    })
                };
                if old == Some(true) {
                    long.push((code, c.id));
                }
            }
        }
        match frame.getattr("f_back") {
            Ok(b) if !b.is_none() => frame = b,
            _ => break,
        }
    }
    for (code, id) in long {
        // SAFETY: GIL held; `code` is live (held by `long`), `id` its id; not from a LINE
        // callback (the contract).
        unsafe { give_up_lines(code.as_ptr(), id) };
    }
}

/// Stop watching function `id`'s lines: no more entries counted, LINE events of `code` off.
///
/// # Safety
/// GIL held; `code` is a live code object, `id` its id; not from a LINE callback of `code`.
unsafe fn stop_watching(code: *mut PyObject, id: u32) {
    // SAFETY: GIL held (the contract); the closure calls no CPython.
    unsafe { with_proc(|p| p.line_entries.get_mut(id as usize).map(|n| *n = 0)) };
    if let Some(rt) = runtime::get() {
        // SAFETY: GIL held; `code` is a live code object (the contract).
        let v = unsafe { rt.extra(code) };
        if v != 0 && (v >> 32) as u32 == GENERATION.load(Ordering::Relaxed) {
            // SAFETY: as above.
            unsafe { rt.set_extra(code, v & !(LINES_DONE_BIT | WATCHED_BIT)) };
        }
    }
    // SAFETY: as above, and not from `code`'s LINE callback (the contract).
    unsafe { crate::monitoring::watch_lines(code, false) };
}

/// Function `id` was entered [`LINE_ENTRIES`] times, or has a long-running frame: its lines
/// still unreported are given up (line 0 in the stream: they are unknown, not "not run") and
/// its LINE events turned off.
///
/// # Safety
/// As [`stop_watching`].
#[cold]
#[inline(never)]
unsafe fn give_up_lines(code: *mut PyObject, id: u32) {
    // SAFETY: GIL held (the contract); the closure calls no CPython.
    let left = unsafe { with_proc(|p| p.lines_left.get_mut(id as usize).map(std::mem::take)) }.flatten().unwrap_or_default();
    if !left.is_empty() {
        // SAFETY: GIL held.
        if let Some(rec) = unsafe { current(None) } {
            // SAFETY: this thread's current record, just looked up; one write.
            unsafe { writer(rec) }.line(id, 0);
        }
    }
    // SAFETY: as the contract says.
    unsafe { stop_watching(code, id) };
}

/// Every code line of `code` has been reported: turn its LINE events off (this removes the
/// line starts CPython never reports, which would otherwise cost on every execution).
///
/// # Safety
/// As [`stop_watching`].
#[cold]
#[inline(never)]
pub(crate) unsafe fn lines_finished(code: *mut PyObject, id: u32) {
    // SAFETY: as the contract says.
    unsafe { stop_watching(code, id) };
}

/// A line of function `id` (code object `code`) was reported through `sys.monitoring`: once
/// none of its code lines is left, flag the code object so that its next entry turns its
/// LINE events off. Not from the LINE callback itself: the instruction that reported is
/// still running.
///
/// # Safety
/// GIL held; `code` is a live code object, `id` its id.
pub(crate) unsafe fn line_reported(code: *mut PyObject, id: u32, line: u32) {
    // SAFETY: GIL held (the contract); the closure calls no CPython.
    let done = unsafe {
        with_proc(|p| {
            let left = p.lines_left.get_mut(id as usize)?;
            let i = left.binary_search(&line).ok()?;
            left.remove(i);
            Some(left.is_empty())
        })
    };
    if done.flatten() == Some(true) {
        if let Some(rt) = runtime::get() {
            // SAFETY: GIL held; `code` is a live code object (the contract).
            let v = unsafe { rt.extra(code) };
            if v != 0 && (v >> 32) as u32 == GENERATION.load(Ordering::Relaxed) {
                // SAFETY: as above.
                unsafe { rt.set_extra(code, v | LINES_DONE_BIT) };
            }
        }
    }
}
