//! The frame-evaluation hook (PEP 523): how 3.9 to 3.11 are recorded by default. Every Python
//! frame evaluation, including each resumption of a generator or coroutine, goes through it,
//! so one entry before and one exit after CPython's own `_PyEval_EvalFrameDefault` record it.
//! Unlike a profile function it keeps the interpreter's fast paths (3.11's specialising
//! interpreter) and materialises no frame objects.
//!
//! 3.9 and 3.10 pass a frame object, read through exported functions. 3.11 passes its internal
//! `_PyInterpreterFrame`: its offsets come from the 3.11 headers at build time (`build.rs`,
//! `cfg(layout311)`); without them 3.11 uses the profile hook.

use crate::profile::{frame_started, keeping_error};
use crate::state;
use pyo3::ffi::{self, PyObject};
use std::ffi::{c_int, c_void};
use std::sync::OnceLock;

type EvalFn = unsafe extern "C" fn(*mut ffi::PyThreadState, *mut c_void, c_int) -> *mut PyObject;
type SetEvalFn = unsafe extern "C" fn(*mut ffi::PyInterpreterState, Option<EvalFn>);
type GetEvalFn = unsafe extern "C" fn(*mut ffi::PyInterpreterState) -> Option<EvalFn>;

/// CPython's own evaluator, called by our hook.
static DEFAULT: OnceLock<EvalFn> = OnceLock::new();

#[cfg(layout311)]
mod layout311 {
    include!(concat!(env!("OUT_DIR"), "/layout311.rs"));
}

/// `CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR`.
#[cfg(layout311)]
const CO_RESUMABLE: c_int = 0x20 | 0x80 | 0x200;

/// Whether this build can hook frame evaluation in CPython 3.`minor`.
pub fn supported(minor: u32) -> bool {
    matches!(minor, 9 | 10) || (minor == 11 && cfg!(layout311))
}

/// Install the hook for CPython 3.`minor`, unless another one (a debugger, a JIT) is installed.
///
/// # Safety
/// GIL held; `minor` is the running interpreter's.
pub unsafe fn install(minor: u32) -> bool {
    if !supported(minor) {
        return false;
    }
    // SAFETY: these functions have these signatures in 3.9-3.11 (`cpython/pystate.h`,
    // `cpython/ceval.h`; the frame argument is a pointer whose type differs by version).
    let (Some(set), Some(get), Some(default)) = (
        crate::runtime::lookup::<SetEvalFn>(&[c"_PyInterpreterState_SetEvalFrameFunc"]),
        crate::runtime::lookup::<GetEvalFn>(&[c"_PyInterpreterState_GetEvalFrameFunc"]),
        crate::runtime::lookup::<EvalFn>(&[c"_PyEval_EvalFrameDefault"]),
    ) else {
        return false;
    };
    let interp = ffi::PyInterpreterState_Get();
    if get(interp).map(|f| f as usize) != Some(default as usize) {
        return false;
    }
    let _ = DEFAULT.set(default);
    let hook: EvalFn = if minor == 11 { eval_311 } else { eval_39 };
    set(interp, Some(hook));
    true
}

/// Run an entry; a frame resumed to raise (`throwflag`: a generator's `throw`/`close`) has its
/// exception pending, set aside while the entry may call into CPython.
#[inline(always)]
unsafe fn enter(throwflag: c_int, f: impl FnOnce() -> bool) -> bool {
    if throwflag != 0 {
        keeping_error(f)
    } else {
        f()
    }
}

#[inline(always)]
unsafe fn evaluate(tstate: *mut ffi::PyThreadState, frame: *mut c_void, throwflag: c_int) -> *mut PyObject {
    match DEFAULT.get() {
        Some(f) => f(tstate, frame, throwflag),
        None => std::ptr::null_mut(), // unreachable: installed only after DEFAULT is set
    }
}

/// 3.9 and 3.10: `frame` is a `PyFrameObject`. A generator's frame is only evaluated to run
/// its body (creating it evaluates nothing), first with `f_lasti == -1`.
unsafe extern "C" fn eval_39(tstate: *mut ffi::PyThreadState, frame: *mut c_void, throwflag: c_int) -> *mut PyObject {
    let f = frame as *mut PyObject;
    let code = crate::runtime::PyFrame_GetCode(f);
    let counted = !code.is_null() && enter(throwflag, || state::enter(code, |c| frame_started(f, c)));
    if !code.is_null() {
        ffi::Py_DECREF(code);
    }
    let result = evaluate(tstate, frame, throwflag);
    if counted {
        state::exit();
    }
    result
}

/// 3.11: `frame` is a `_PyInterpreterFrame`. Calling a generator function evaluates its frame
/// once on the thread's stack to create the generator (`RETURN_GENERATOR`), before any of its
/// body runs: not recorded (a profile function sees nothing either). Its body then runs in the
/// frame the generator owns, first from before its first `RESUME`.
#[cfg(layout311)]
unsafe extern "C" fn eval_311(tstate: *mut ffi::PyThreadState, frame: *mut c_void, throwflag: c_int) -> *mut PyObject {
    use layout311::*;
    let base = frame as *const u8;
    // SAFETY: offsets of this version's struct fields, from its headers (build.rs).
    let code = base.add(FRAME_CODE).cast::<*mut PyObject>().read();
    let resumable = (code as *const u8).add(CODE_FLAGS).cast::<c_int>().read_unaligned() & CO_RESUMABLE != 0;
    if resumable && *base.add(FRAME_OWNER) == FRAME_OWNED_BY_THREAD {
        return evaluate(tstate, frame, throwflag);
    }
    let started = |c: state::CodeId| {
        let prev = base.add(FRAME_PREV_INSTR).cast::<*const u8>().read();
        let units = (code as *const u8).add(CODE_UNITS);
        (prev as isize - units as isize) > state::gen_start(c.id) as isize
    };
    let counted = enter(throwflag, || state::enter(code, started));
    let result = evaluate(tstate, frame, throwflag);
    if counted {
        state::exit();
    }
    result
}

#[cfg(not(layout311))]
unsafe extern "C" fn eval_311(tstate: *mut ffi::PyThreadState, frame: *mut c_void, throwflag: c_int) -> *mut PyObject {
    evaluate(tstate, frame, throwflag) // never installed: `supported(11)` is false
}
