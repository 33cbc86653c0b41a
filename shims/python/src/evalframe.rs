//! The frame-evaluation hook (PEP 523): how 3.9 to 3.11 are recorded by default. Every Python
//! frame evaluation, including each resumption of a generator or coroutine, goes through it,
//! so one entry before and one exit after CPython's own `_PyEval_EvalFrameDefault` record it.
//! Unlike a profile function it keeps the interpreter's fast paths (3.11's specialising
//! interpreter) and materialises no frame objects.
//!
//! 3.9 and 3.10 pass a frame object, read through exported functions. 3.11 passes its internal
//! `_PyInterpreterFrame`: its offsets are in `layout311.rs`, generated from the 3.11 headers
//! and checked against them by `build.rs` wherever they exist (64-bit targets only).

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

#[cfg(target_pointer_width = "64")]
#[path = "layout311.rs"]
mod layout311;

/// `CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR`.
#[cfg(target_pointer_width = "64")]
const CO_RESUMABLE: c_int = 0x20 | 0x80 | 0x200;

/// Whether this build can hook frame evaluation in CPython 3.`minor`.
pub fn supported(minor: u32) -> bool {
    matches!(minor, 9 | 10) || (minor == 11 && cfg!(target_pointer_width = "64"))
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
    let (Some(set), Some(get), Some(default)) = (unsafe {
        (
            crate::runtime::lookup::<SetEvalFn>(&[c"_PyInterpreterState_SetEvalFrameFunc"]),
            crate::runtime::lookup::<GetEvalFn>(&[c"_PyInterpreterState_GetEvalFrameFunc"]),
            crate::runtime::lookup::<EvalFn>(&[c"_PyEval_EvalFrameDefault"]),
        )
    }) else {
        return false;
    };
    // SAFETY: GIL held (the contract): the current interpreter exists.
    let interp = unsafe { ffi::PyInterpreterState_Get() };
    // SAFETY: GIL held; `interp` is the current interpreter.
    if unsafe { get(interp) }.map(|f| f as usize) != Some(default as usize) {
        return false;
    }
    let _ = DEFAULT.set(default);
    // `minor` is the running interpreter's (the contract): 3.11's hook reads 3.11's frames.
    let hook: EvalFn = if minor == 11 { eval_311 } else { eval_39 };
    // SAFETY: GIL held; `interp` is the current interpreter; the hook lives as long as the
    // process and calls DEFAULT, set just above.
    unsafe { set(interp, Some(hook)) };
    true
}

/// Run an entry; a frame resumed to raise (`throwflag`: a generator's `throw`/`close`) has its
/// exception pending, set aside while the entry may call into CPython.
///
/// # Safety
/// GIL held.
#[inline(always)]
unsafe fn enter(throwflag: c_int, f: impl FnOnce() -> bool) -> bool {
    if throwflag != 0 {
        // SAFETY: GIL held (the contract).
        unsafe { keeping_error(f) }
    } else {
        f()
    }
}

/// CPython's own evaluation of `frame`.
///
/// # Safety
/// The arguments of a frame-evaluation call, as CPython passed them to the hook.
#[inline(always)]
unsafe fn evaluate(tstate: *mut ffi::PyThreadState, frame: *mut c_void, throwflag: c_int) -> *mut PyObject {
    match DEFAULT.get() {
        // SAFETY: `f` is `_PyEval_EvalFrameDefault`, given the hook's own arguments (the
        // contract), as the hook it replaces would have been.
        Some(f) => unsafe { f(tstate, frame, throwflag) },
        None => std::ptr::null_mut(), // unreachable: installed only after DEFAULT is set
    }
}

/// 3.9 and 3.10: `frame` is a `PyFrameObject`. A generator's frame is only evaluated to run
/// its body (creating it evaluates nothing), first with `f_lasti == -1`.
///
/// # Safety
/// Called by CPython 3.9 or 3.10 as its frame-evaluation function (GIL held, a live frame
/// object).
unsafe extern "C" fn eval_39(tstate: *mut ffi::PyThreadState, frame: *mut c_void, throwflag: c_int) -> *mut PyObject {
    let f = frame as *mut PyObject;
    // SAFETY: GIL held; `f` is a live frame object (the contract). A new reference, or null.
    let code = unsafe { crate::runtime::PyFrame_GetCode(f) };
    // SAFETY: GIL held; `code` is live (our reference) and `f` is live; with `throwflag` the
    // pending exception is set aside before `frame_started` reads the frame.
    let counted = !code.is_null() && unsafe { enter(throwflag, || state::enter(code, |c| frame_started(f, c))) };
    if !code.is_null() {
        // SAFETY: releases our reference, not used after.
        unsafe { ffi::Py_DECREF(code) };
    }
    // SAFETY: the hook's own arguments (the contract).
    let result = unsafe { evaluate(tstate, frame, throwflag) };
    if counted {
        // SAFETY: GIL held (CPython's evaluation returns with it).
        unsafe { state::exit() };
    }
    result
}

/// 3.11: `frame` is a `_PyInterpreterFrame`. Calling a generator function evaluates its frame
/// once on the thread's stack to create the generator (`RETURN_GENERATOR`), before any of its
/// body runs: not recorded (a profile function sees nothing either). Its body then runs in the
/// frame the generator owns, first from before its first `RESUME`.
///
/// # Safety
/// Called by CPython 3.11 as its frame-evaluation function (GIL held, a live
/// `_PyInterpreterFrame` whose layout is `layout311.rs`'s, checked against the headers at build time).
#[cfg(target_pointer_width = "64")]
unsafe extern "C" fn eval_311(tstate: *mut ffi::PyThreadState, frame: *mut c_void, throwflag: c_int) -> *mut PyObject {
    use layout311::*;
    let base = frame as *const u8;
    // SAFETY: offsets of this version's struct fields, from its headers (build.rs): the
    // frame's (aligned) code pointer, a live code object while the frame is.
    let code = unsafe { base.add(FRAME_CODE).cast::<*mut PyObject>().read() };
    // SAFETY: as above: the code object's `co_flags`.
    let resumable = unsafe { (code as *const u8).add(CODE_FLAGS).cast::<c_int>().read_unaligned() } & CO_RESUMABLE != 0;
    // SAFETY: as above: the frame's `owner` byte.
    if resumable && unsafe { *base.add(FRAME_OWNER) } == FRAME_OWNED_BY_THREAD {
        // SAFETY: the hook's own arguments (the contract).
        return unsafe { evaluate(tstate, frame, throwflag) };
    }
    let started = |c: state::CodeId| {
        // SAFETY: as above: the frame's `prev_instr`, and the start of the code's
        // instructions (`co_code_adaptive`), both in live objects; GIL held for `gen_start`.
        let prev = unsafe { base.add(FRAME_PREV_INSTR).cast::<*const u8>().read() };
        // SAFETY: as above.
        let units = unsafe { (code as *const u8).add(CODE_UNITS) };
        // SAFETY: as above.
        (prev as isize - units as isize) > unsafe { state::gen_start(c.id) } as isize
    };
    // SAFETY: GIL held; `code` is live (the frame holds it); with `throwflag` the pending
    // exception is set aside meanwhile.
    let counted = unsafe { enter(throwflag, || state::enter(code, started)) };
    // SAFETY: the hook's own arguments (the contract).
    let result = unsafe { evaluate(tstate, frame, throwflag) };
    if counted {
        // SAFETY: GIL held (CPython's evaluation returns with it).
        unsafe { state::exit() };
    }
    result
}

/// # Safety
/// As the other `eval_311` (never installed: `supported(11)` is false).
#[cfg(not(target_pointer_width = "64"))]
unsafe extern "C" fn eval_311(tstate: *mut ffi::PyThreadState, frame: *mut c_void, throwflag: c_int) -> *mut PyObject {
    // SAFETY: the hook's own arguments (the contract).
    unsafe { evaluate(tstate, frame, throwflag) } // never installed: `supported(11)` is false
}
