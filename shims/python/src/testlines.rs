//! Lines per test. The recorder reports a line once per process (`sys.monitoring` turns a
//! line's event off after its first report; the trace function keeps a set of the lines
//! reported), so a line that an earlier test ran first would be missing from every later test.
//! At each test's start the test recorder (`tracer/src/slicetrace_tests.py`) calls
//! [`test_begins`], which re-arms the line reporting for the test that starts: every line the
//! test runs is reported again between its boundaries, and `slice` can tell which lines went
//! with failing tests (`docs/trace-format.md`, "Lines per test"). Only with `trace run
//! --lines-per-test` ([`ASKED`]); nothing is done in a process that does not record lines, nor
//! outside test runs.
//!
//! - Trace function (3.9-3.11 with `--lines`): the per-function sets of lines already reported
//!   are emptied.
//! - `sys.monitoring` (3.12+): a test epoch is bumped, and each function's first entry in the
//!   new epoch ([`rearm_if_stale`], from [`crate::linewatch::entered`]) turns its LINE events
//!   off and on again (which puts back the line events that returned `DISABLE`), and restores
//!   its bookkeeping: all its code lines left to report, [`LINE_ENTRIES`] entries. Functions
//!   the test does not enter cost nothing; `sys.monitoring.restart_events()` would re-instrument
//!   every code object (and re-enable other tools' disabled events) instead.
//!
//! Only the code under test is re-armed ([`crate::testscope::per_test`]): the standard library's and the test
//! runner's functions (pytest, pluggy and their kin) report their lines once per process, as
//! without tests. They run around every test (collection, reporting, fixtures' plumbing), so
//! re-arming them cost about a quarter of a suite's run (docs/performance.md), and the line
//! spectrum leaves them out anyway (`analyzer/src/testrun/spectrum.rs`, `add_lines`).

use crate::linewatch::{entries, LINE_ENTRIES};
use crate::state::{self, with_proc, LineMode, GENERATION, LINES_DONE_BIT, WATCHED_BIT};
use pyo3::ffi::PyObject;
use pyo3::prelude::*;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

/// Bumped at each test's start in a process that records lines through `sys.monitoring`; 0
/// before the first test (then no entry looks at it).
pub(crate) static TEST_EPOCH: AtomicU32 = AtomicU32::new(0);

/// `trace run --lines-per-test` (the shim option `lines_per_test`): without it a test's start
/// re-arms nothing (lines are reported once per process, as without tests).
pub(crate) static ASKED: AtomicBool = AtomicBool::new(false);

/// [`state::Proc::line_epoch`] of a function without code lines: never re-armed.
pub(crate) const NO_LINES: u32 = u32::MAX;

/// A test starts (called by the test recorder just before its begin boundary call): re-arm
/// the line reporting, and say in `proc.json` that lines are reported per test.
#[pyfunction]
pub fn test_begins(py: Python<'_>) {
    let _ = py;
    if !ASKED.load(Ordering::Relaxed) {
        return;
    }
    // SAFETY: GIL held (a #[pyfunction]); the closure calls no CPython (it writes a file).
    let done = unsafe {
        with_proc(|p| {
            match p.lines {
                LineMode::Off => return Ok(()),
                LineMode::Trace => {
                    for (set, _) in p.line_sets.iter_mut().zip(&p.per_test).filter(|(_, &again)| again) {
                        *set = Default::default();
                    }
                }
                LineMode::Monitoring => {
                    let e = TEST_EPOCH.load(Ordering::Relaxed);
                    // Wrapping skips 0 (no test yet) and NO_LINES.
                    TEST_EPOCH.store(if e >= NO_LINES - 1 { 1 } else { e + 1 }, Ordering::Relaxed);
                }
            }
            if p.meta.lines_per_test {
                return Ok(());
            }
            p.meta.lines_per_test = true;
            trace_format::writer::write_proc_meta(&p.dir, &p.meta).map_err(|e| format!("{}: {e}", p.dir.display()))
        })
    };
    if let Some(Err(e)) = done {
        state::warn(&format!("cannot mark lines per test in proc.json ({e})"));
    }
}

/// At an entry of function `id` (code object `code`) in test epoch `epoch`: if its lines
/// were last armed in an earlier epoch, arm them for this one. Returns whether it did (its
/// LINE events are then on and its entries counted from this one).
///
/// # Safety
/// GIL held; `code` is a live code object, `id` its id; not from a LINE callback of `code`.
#[inline(always)]
pub(crate) unsafe fn rearm_if_stale(code: *mut PyObject, id: u32, epoch: u32) -> bool {
    // SAFETY: GIL held (the contract); the closure calls no CPython.
    let stale = unsafe { with_proc(|p| p.line_epoch.get(id as usize).is_some_and(|&e| e != epoch && e != NO_LINES)) };
    // SAFETY: as the contract says.
    stale == Some(true) && unsafe { rearm(code, id, epoch) }
}

/// # Safety
/// As [`rearm_if_stale`].
#[cold]
#[inline(never)]
unsafe fn rearm(code: *mut PyObject, id: u32, epoch: u32) -> bool {
    // SAFETY: GIL held (the contract); the closure calls no CPython.
    let was_on = unsafe {
        with_proc(|p| {
            let i = id as usize;
            *p.line_epoch.get_mut(i)? = epoch;
            let all = p.lines_all.get(i).filter(|l| !l.is_empty())?.clone();
            let on = p.line_entries.get(i).is_some_and(|&n| n > 0);
            *p.lines_left.get_mut(i)? = all;
            *p.line_entries.get_mut(i)? = LINE_ENTRIES;
            *p.last_entry.get_mut(i)? = entries();
            Some(on)
        })
    }
    .flatten();
    let Some(was_on) = was_on else { return false };
    if let Some(rt) = crate::runtime::get() {
        // SAFETY: GIL held; `code` is a live code object (the contract).
        let v = unsafe { rt.extra(code) };
        if v != 0 && (v >> 32) as u32 == GENERATION.load(Ordering::Relaxed) {
            // SAFETY: as above.
            unsafe { rt.set_extra(code, (v | WATCHED_BIT) & !LINES_DONE_BIT) };
        }
    }
    // Off, then on: turning a code object's LINE events on instruments every line start again,
    // those that returned DISABLE included; while they are on, asking again changes nothing.
    if was_on {
        // SAFETY: GIL held; `code` is live; not from its LINE callback (the contract).
        unsafe { crate::monitoring::watch_lines(code, false) };
    }
    // SAFETY: as above.
    unsafe { crate::monitoring::watch_lines(code, true) };
    true
}
