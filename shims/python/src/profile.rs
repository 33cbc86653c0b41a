//! The C-level profile hook (`PyEval_SetProfile`): how 3.9-3.11 are recorded (and every
//! version with `--python-hook profile`). CPython calls it with the GIL held, never for events
//! inside itself (it suspends tracing while it runs).

use crate::runtime::{self, PYTRACE_CALL, PYTRACE_C_CALL, PYTRACE_C_EXCEPTION, PYTRACE_C_RETURN, PYTRACE_RETURN};
use crate::state::{self, CodeId};
use pyo3::ffi::{self, PyObject};
use std::ffi::c_int;

/// Whether `frame` of the resumable function `c` was entered before: a generator or
/// coroutine resumed (or thrown into), not started. Only resumable code pays this lookup.
///
/// # Safety
/// GIL held; `frame` is a live frame object; no exception pending (see [`keeping_error`]).
pub unsafe fn frame_started(frame: *mut PyObject, c: CodeId) -> bool {
    // SAFETY: GIL held; `frame` is a live object (the contract); a NUL-terminated name. A new
    // reference, or null with an exception set.
    let lasti = unsafe { ffi::PyObject_GetAttrString(frame, c"f_lasti".as_ptr()) };
    if lasti.is_null() {
        // SAFETY: GIL held.
        unsafe { ffi::PyErr_Clear() };
        return false;
    }
    // SAFETY: GIL held; `lasti` is the live object just returned, released once after.
    let v = unsafe { ffi::PyLong_AsLongLong(lasti) };
    // SAFETY: as above.
    unsafe { ffi::Py_DECREF(lasti) };
    // SAFETY: GIL held.
    if v == -1 && !unsafe { ffi::PyErr_Occurred() }.is_null() {
        // SAFETY: GIL held.
        unsafe { ffi::PyErr_Clear() };
        return false;
    }
    // SAFETY: GIL held.
    v > unsafe { state::gen_start(c.id) }
}

/// The profile function: called for every call and return (and C call, reported only to
/// profile functions) of the thread it is installed in.
///
/// # Safety
/// Called by CPython as a `Py_tracefunc`: GIL held, `frame` the live frame of the event, and
/// `arg` for a C event the live callable.
pub unsafe extern "C" fn profile(_obj: *mut PyObject, frame: *mut PyObject, what: c_int, arg: *mut PyObject) -> c_int {
    match what {
        PYTRACE_CALL => {
            // SAFETY: GIL held; `frame` is live (the contract). A new reference, or null.
            let code = unsafe { runtime::PyFrame_GetCode(frame) };
            if code.is_null() {
                // SAFETY: GIL held.
                unsafe { ffi::PyErr_Clear() };
                return 0;
            }
            // A resumption is told apart by the frame's position; reading it may raise, and
            // a pending exception (a throw into a generator) must survive: keep it aside.
            // SAFETY: GIL held; `code` is live (our reference); `frame` is live and, inside
            // `keeping_error`, no exception is pending.
            unsafe { state::enter(code, |c| keeping_error(|| frame_started(frame, c))) };
            // SAFETY: releases our reference, not used after.
            unsafe { ffi::Py_DECREF(code) };
        }
        // SAFETY: GIL held (the contract).
        PYTRACE_RETURN => unsafe { state::exit() },
        // SAFETY: GIL held; `arg` is the live callable (the contract), a PyCFunction as checked
        // before `enter_c` is given it.
        PYTRACE_C_CALL if unsafe { c_calls() && ffi::PyCFunction_Check(arg) != 0 } => unsafe { state::enter_c(arg) },
        // SAFETY: as above.
        PYTRACE_C_RETURN | PYTRACE_C_EXCEPTION if unsafe { c_calls() && ffi::PyCFunction_Check(arg) != 0 } => unsafe { state::exit() },
        _ => {}
    }
    0
}

/// Whether C calls are recorded (`--c-calls`).
///
/// # Safety
/// GIL held.
#[inline(always)]
unsafe fn c_calls() -> bool {
    // SAFETY: GIL held (the contract); the closure calls no CPython.
    unsafe { state::with_proc(|p| p.c_calls) }.unwrap_or(false)
}

/// Run `f` with the current exception (if any) set aside and put back afterwards.
///
/// # Safety
/// GIL held.
pub unsafe fn keeping_error<R>(f: impl FnOnce() -> R) -> R {
    // SAFETY: GIL held (the contract).
    if unsafe { ffi::PyErr_Occurred() }.is_null() {
        return f();
    }
    let (mut t, mut v, mut tb) = (std::ptr::null_mut(), std::ptr::null_mut(), std::ptr::null_mut());
    // SAFETY: GIL held; moves the pending exception's references into our three locals.
    unsafe { ffi::PyErr_Fetch(&mut t, &mut v, &mut tb) };
    let r = f();
    // SAFETY: GIL held; gives those references back (clearing whatever `f` left pending).
    unsafe { ffi::PyErr_Restore(t, v, tb) };
    r
}

/// Install the hook in the current thread.
///
/// # Safety
/// GIL held.
pub unsafe fn install() {
    // SAFETY: GIL held (the contract); `profile` is a `Py_tracefunc` that lives as long as
    // the process (this library is never unloaded once imported).
    unsafe { runtime::PyEval_SetProfile(Some(profile), std::ptr::null_mut()) };
}
