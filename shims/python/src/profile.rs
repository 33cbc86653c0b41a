//! The C-level profile hook (`PyEval_SetProfile`): how 3.9-3.11 are recorded (and every
//! version with `--python-hook profile`). CPython calls it with the GIL held, never for events
//! inside itself (it suspends tracing while it runs).

use crate::runtime::{self, PYTRACE_CALL, PYTRACE_C_CALL, PYTRACE_C_EXCEPTION, PYTRACE_C_RETURN, PYTRACE_RETURN};
use crate::state::{self, CodeId};
use pyo3::ffi::{self, PyObject};
use std::ffi::c_int;

/// Whether `frame` of the resumable function `c` was entered before: a generator or
/// coroutine resumed (or thrown into), not started. Only resumable code pays this lookup.
pub unsafe fn frame_started(frame: *mut PyObject, c: CodeId) -> bool {
    let lasti = ffi::PyObject_GetAttrString(frame, c"f_lasti".as_ptr());
    if lasti.is_null() {
        ffi::PyErr_Clear();
        return false;
    }
    let v = ffi::PyLong_AsLongLong(lasti);
    ffi::Py_DECREF(lasti);
    if v == -1 && !ffi::PyErr_Occurred().is_null() {
        ffi::PyErr_Clear();
        return false;
    }
    v > state::gen_start(c.id)
}

/// The profile function: called for every call and return (and C call, reported only to
/// profile functions) of the thread it is installed in.
pub unsafe extern "C" fn profile(_obj: *mut PyObject, frame: *mut PyObject, what: c_int, arg: *mut PyObject) -> c_int {
    match what {
        PYTRACE_CALL => {
            let code = runtime::PyFrame_GetCode(frame);
            if code.is_null() {
                ffi::PyErr_Clear();
                return 0;
            }
            // A resumption is told apart by the frame's position; reading it may raise, and
            // a pending exception (a throw into a generator) must survive: keep it aside.
            state::enter(code, |c| keeping_error(|| frame_started(frame, c)));
            ffi::Py_DECREF(code);
        }
        PYTRACE_RETURN => state::exit(),
        PYTRACE_C_CALL if c_calls() && ffi::PyCFunction_Check(arg) != 0 => state::enter_c(arg),
        PYTRACE_C_RETURN | PYTRACE_C_EXCEPTION if c_calls() && ffi::PyCFunction_Check(arg) != 0 => state::exit(),
        _ => {}
    }
    0
}

#[inline(always)]
unsafe fn c_calls() -> bool {
    state::with_proc(|p| p.c_calls).unwrap_or(false)
}

/// Run `f` with the current exception (if any) set aside and put back afterwards.
pub unsafe fn keeping_error<R>(f: impl FnOnce() -> R) -> R {
    if ffi::PyErr_Occurred().is_null() {
        return f();
    }
    let (mut t, mut v, mut tb) = (std::ptr::null_mut(), std::ptr::null_mut(), std::ptr::null_mut());
    ffi::PyErr_Fetch(&mut t, &mut v, &mut tb);
    let r = f();
    ffi::PyErr_Restore(t, v, tb);
    r
}

/// Install the hook in the current thread.
///
/// # Safety
/// GIL held.
pub unsafe fn install() {
    runtime::PyEval_SetProfile(Some(profile), std::ptr::null_mut());
}
