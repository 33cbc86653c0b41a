//! Executed lines before 3.12 (and from 3.12 when `sys.monitoring` cannot be used): a C trace
//! function (`PyEval_SetTrace`). CPython calls it for every line each frame executes, which
//! costs on every line (and keeps 3.11's interpreter on its slower tracing path), so it is
//! installed only when the user asks for lines (`trace run --lines`). It handles only line
//! events (calls keep coming from the frame-evaluation hook or the profile function) and writes
//! each (function, line) once per process ([`state::line`] with its per-function line set).
//!
//! Like the profile function, it is per thread: installed in the main thread at start-up and
//! by the `_thread` wrapper in every thread started later. A program that sets its own trace
//! function (`sys.settrace`: a debugger, coverage.py) replaces it in that thread.

use crate::runtime::{self, PYTRACE_LINE};
use crate::state;
use pyo3::ffi::{self, PyObject};
use std::ffi::c_int;

/// The trace function.
///
/// # Safety
/// Called by CPython as a `Py_tracefunc`: GIL held, `frame` the live frame of the event.
unsafe extern "C" fn trace(_obj: *mut PyObject, frame: *mut PyObject, what: c_int, _arg: *mut PyObject) -> c_int {
    if what != PYTRACE_LINE {
        return 0;
    }
    // SAFETY: CPython passes the live frame executing the line, with the GIL held (the
    // contract). A new reference, or null.
    let code = unsafe { runtime::PyFrame_GetCode(frame) };
    if code.is_null() {
        // SAFETY: GIL held.
        unsafe { ffi::PyErr_Clear() };
        return 0;
    }
    // SAFETY: as above.
    if let Ok(line) = u32::try_from(unsafe { runtime::PyFrame_GetLineNumber(frame) }) {
        // Describing a new function may raise and clear: nothing is pending at a line event.
        // SAFETY: GIL held; `code` is live (our reference).
        unsafe { state::line(code, line, true) };
    }
    // SAFETY: releases our reference, not used after.
    unsafe { ffi::Py_DECREF(code) };
    0
}

/// Install the trace function in the current thread.
///
/// # Safety
/// GIL held.
pub unsafe fn install() {
    // SAFETY: GIL held (the contract); `trace` lives as long as the process.
    unsafe { runtime::PyEval_SetTrace(Some(trace), std::ptr::null_mut()) };
}
