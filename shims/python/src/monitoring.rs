//! `sys.monitoring` (PEP 669): how 3.12 and later are recorded. The callbacks are C
//! functions (`METH_FASTCALL` method definitions, as CPython's own `_lsprof` registers them),
//! called by CPython with the GIL held and with monitoring of the calling thread suspended.
//!
//! Entries: PY_START (a call), PY_RESUME (a resumption), PY_THROW (a resumption, or a call
//! when thrown into a generator that never started). Exits: PY_RETURN, PY_YIELD, PY_UNWIND.
//! With `--c-calls`: CALL of a builtin function (or method descriptor) and its C_RETURN or
//! C_RAISE. When the process records executed lines: LINE, which returns `DISABLE`, so that
//! each line location of each code object reports once and then costs nothing (CPython
//! removes the instrumentation of that instruction).

use crate::state::{self, warn};
use pyo3::ffi::{self, PyObject, Py_ssize_t};
use pyo3::prelude::*;
use std::sync::OnceLock;

/// Our tool id: 0 (debugger), 1 (coverage), 2 (profiler) and 5 (optimizer) are the ones
/// `sys.monitoring` names for others; 3 is unassigned.
pub const TOOL_ID: u8 = 3;
const TOOL_NAME: &str = "slicetrace";

const METH_FASTCALL: std::ffi::c_int = 0x0080;
type FastFn = unsafe extern "C" fn(*mut PyObject, *const *mut PyObject, Py_ssize_t) -> *mut PyObject;

/// Objects the C-call callbacks compare against: `sys.monitoring.MISSING` and the type of
/// method descriptors (`str.join`), as addresses.
struct CallTypes {
    missing: usize,
    method_descriptor: usize,
}
static CALL_TYPES: OnceLock<CallTypes> = OnceLock::new();
/// `sys.monitoring.DISABLE` (kept alive by `sys.monitoring`), as an address.
static DISABLE: OnceLock<usize> = OnceLock::new();
/// `sys.monitoring.set_local_events` and the LINE event's bit: LINE events are asked for per
/// code object ([`watch_lines`]).
static LOCAL_LINES: OnceLock<(Py<PyAny>, u32)> = OnceLock::new();

/// `None`, the callbacks' result. Not incremented: the callbacks only run on 3.12+, where
/// `None` is immortal (CPython's decrement of the result leaves it untouched), and the
/// stable ABI's `Py_IncRef` is a function call per event.
///
/// # Safety
/// GIL held (3.12+).
#[inline(always)]
unsafe fn none() -> *mut PyObject {
    // SAFETY: GIL held (the contract); `None` is a static object.
    unsafe { ffi::Py_None() }
}

/// Argument `i` (0 or more) of a callback, if it has one.
///
/// # Safety
/// `args` holds `nargs` object pointers (a METH_FASTCALL call's arguments).
#[inline(always)]
unsafe fn arg(args: *const *mut PyObject, nargs: Py_ssize_t, i: isize) -> Option<*mut PyObject> {
    // SAFETY: 0 <= i < nargs, and `args` holds `nargs` pointers (the contract).
    (i < nargs).then(|| unsafe { *args.offset(i) })
}

// The callbacks below are `METH_FASTCALL` C functions (see `callback`): CPython calls them with
// the GIL held, `args` holding `nargs` live objects (the event's arguments, as
// `sys.monitoring` documents them per event), on 3.12 or later. That is each one's `# Safety`.

/// PY_START(code, instruction_offset): a call.
///
/// # Safety
/// A `sys.monitoring` callback's call (above).
unsafe extern "C" fn on_start(_: *mut PyObject, args: *const *mut PyObject, nargs: Py_ssize_t) -> *mut PyObject {
    // SAFETY: `args` holds `nargs` pointers (the contract).
    if let Some(code) = unsafe { arg(args, nargs, 0) } {
        // SAFETY: GIL held; `code` is the live code object of the event.
        unsafe { state::enter(code, |_| false) };
    }
    // SAFETY: GIL held.
    unsafe { none() }
}

/// PY_RESUME(code, instruction_offset): a resumption.
///
/// # Safety
/// A `sys.monitoring` callback's call (above).
unsafe extern "C" fn on_resume(_: *mut PyObject, args: *const *mut PyObject, nargs: Py_ssize_t) -> *mut PyObject {
    // SAFETY: `args` holds `nargs` pointers (the contract).
    if let Some(code) = unsafe { arg(args, nargs, 0) } {
        // SAFETY: GIL held; `code` is the live code object of the event.
        unsafe { state::enter(code, |_| true) };
    }
    // SAFETY: GIL held.
    unsafe { none() }
}

/// PY_THROW(code, instruction_offset, exception): a resumption, or a call into a generator
/// that never started.
///
/// # Safety
/// A `sys.monitoring` callback's call (above).
unsafe extern "C" fn on_throw(_: *mut PyObject, args: *const *mut PyObject, nargs: Py_ssize_t) -> *mut PyObject {
    // SAFETY: `args` holds `nargs` pointers (the contract).
    if let (Some(code), Some(offset)) = unsafe { (arg(args, nargs, 0), arg(args, nargs, 1)) } {
        // SAFETY: GIL held; `offset` is the event's live int.
        let off = unsafe { ffi::PyLong_AsLongLong(offset) };
        // SAFETY: GIL held.
        if off == -1 && !unsafe { ffi::PyErr_Occurred() }.is_null() {
            // SAFETY: GIL held.
            unsafe { ffi::PyErr_Clear() };
        }
        // A frame that never started reports an offset before its first RESUME.
        // SAFETY: GIL held; `code` is the live code object of the event.
        unsafe { state::enter(code, |c| off > state::gen_start(c.id)) };
    }
    // SAFETY: GIL held.
    unsafe { none() }
}

/// PY_RETURN, PY_YIELD, PY_UNWIND: an exit.
///
/// # Safety
/// A `sys.monitoring` callback's call (above).
unsafe extern "C" fn on_exit(_: *mut PyObject, _: *const *mut PyObject, _: Py_ssize_t) -> *mut PyObject {
    // SAFETY: GIL held (the contract).
    unsafe { state::exit() };
    // SAFETY: GIL held.
    unsafe { none() }
}

/// LINE(code, line_number): an executed line.
///
/// # Safety
/// A `sys.monitoring` callback's call (above).
unsafe extern "C" fn on_line(_: *mut PyObject, args: *const *mut PyObject, nargs: Py_ssize_t) -> *mut PyObject {
    // SAFETY: `args` holds `nargs` pointers (the contract).
    if let (Some(code), Some(line)) = unsafe { (arg(args, nargs, 0), arg(args, nargs, 1)) } {
        // SAFETY: GIL held; `line` is the event's live int.
        let n = unsafe { ffi::PyLong_AsLong(line) };
        // SAFETY: GIL held.
        if n == -1 && !unsafe { ffi::PyErr_Occurred() }.is_null() {
            // SAFETY: GIL held.
            unsafe { ffi::PyErr_Clear() };
        } else if let Ok(n) = u32::try_from(n) {
            // SAFETY: GIL held; `code` is the live code object of the event.
            unsafe { state::line(code, n, false) };
        }
    }
    match DISABLE.get() {
        Some(&d) => {
            // A new reference, as a callback's result is: CPython compares it with DISABLE,
            // then releases it. Once per line location, so the call does not matter.
            let d = d as *mut PyObject;
            // SAFETY: GIL held; `DISABLE` is `sys.monitoring.DISABLE`, which the module keeps
            // alive.
            unsafe { ffi::Py_IncRef(d) };
            d
        }
        // SAFETY: GIL held.
        None => unsafe { none() },
    }
}

/// Whether CALL/C_RETURN/C_RAISE of `callable` (with first argument `arg0`) is a C call we
/// record: a builtin function, or a method descriptor called with its object.
///
/// # Safety
/// GIL held; `callable` is a live object.
unsafe fn is_c_call(callable: *mut PyObject, arg0: *mut PyObject) -> bool {
    // SAFETY: GIL held; `callable` is live (the contract).
    if unsafe { ffi::PyCFunction_Check(callable) } != 0 {
        return true;
    }
    // SAFETY: as above (`arg0` is only compared).
    CALL_TYPES.get().is_some_and(|t| unsafe { ffi::Py_TYPE(callable) } as usize == t.method_descriptor && arg0 as usize != t.missing)
}

/// CALL(code, instruction_offset, callable, arg0): a call about to be made; with `--c-calls`,
/// one of a C function is recorded.
///
/// # Safety
/// A `sys.monitoring` callback's call (above).
unsafe extern "C" fn on_call(_: *mut PyObject, args: *const *mut PyObject, nargs: Py_ssize_t) -> *mut PyObject {
    // SAFETY: `args` holds `nargs` pointers (the contract).
    let (Some(callable), Some(arg0)) = (unsafe { (arg(args, nargs, 2), arg(args, nargs, 3)) }) else {
        // SAFETY: GIL held.
        return unsafe { none() };
    };
    // SAFETY: GIL held; `callable` is the event's live callable.
    if !unsafe { is_c_call(callable, arg0) } {
        // SAFETY: GIL held.
        return unsafe { none() };
    }
    // SAFETY: as above.
    if unsafe { ffi::PyCFunction_Check(callable) } != 0 {
        // SAFETY: GIL held; `callable` is a live PyCFunction (checked).
        unsafe { state::enter_c(callable) };
    } else {
        // Bind the descriptor (`str.join` to its string) to name it like a bound builtin.
        // SAFETY: GIL held (the contract): this thread is attached.
        let py = unsafe { Python::assume_attached() };
        // SAFETY: `arg0` is the event's live first argument (not MISSING: `is_c_call`).
        let obj = unsafe { Bound::from_borrowed_ptr(py, arg0) };
        // SAFETY: `callable` is the event's live callable.
        let bound = unsafe { Bound::from_borrowed_ptr(py, callable) }.call_method1("__get__", (&obj, obj.get_type()));
        match bound {
            // SAFETY: GIL held; `b` is live (held by `bound`) and a PyCFunction (checked).
            Ok(b) if unsafe { ffi::PyCFunction_Check(b.as_ptr()) } != 0 => unsafe { state::enter_c(b.as_ptr()) },
            // SAFETY: GIL held; null is an entry that cannot be named.
            Ok(_) => unsafe { state::enter_c(std::ptr::null_mut()) },
            // SAFETY: as above.
            Err(_) => unsafe { state::enter_c(std::ptr::null_mut()) },
        }
    }
    // SAFETY: GIL held.
    unsafe { none() }
}

/// C_RETURN, C_RAISE(code, instruction_offset, callable, arg0): the exit of a C call.
///
/// # Safety
/// A `sys.monitoring` callback's call (above).
unsafe extern "C" fn on_c_exit(_: *mut PyObject, args: *const *mut PyObject, nargs: Py_ssize_t) -> *mut PyObject {
    // SAFETY: `args` holds `nargs` pointers (the contract).
    if let (Some(callable), Some(arg0)) = unsafe { (arg(args, nargs, 2), arg(args, nargs, 3)) } {
        // SAFETY: GIL held; `callable` is the event's live callable.
        if unsafe { is_c_call(callable, arg0) } {
            // SAFETY: GIL held.
            unsafe { state::exit() };
        }
    }
    // SAFETY: GIL held.
    unsafe { none() }
}

/// A Python callable for a C callback.
fn callback<'py>(py: Python<'py>, name: &'static std::ffi::CStr, f: FastFn) -> PyResult<Bound<'py, PyAny>> {
    let def = Box::leak(Box::new(ffi::PyMethodDef {
        ml_name: name.as_ptr(),
        // SAFETY: CPython calls `ml_meth` with the METH_FASTCALL signature, as `ml_flags` says.
        ml_meth: ffi::PyMethodDefPointer { PyCFunction: unsafe { std::mem::transmute::<FastFn, ffi::PyCFunction>(f) } },
        ml_flags: METH_FASTCALL,
        ml_doc: std::ptr::null(),
    }));
    // SAFETY: GIL held; the definition lives for the rest of the process.
    unsafe { Bound::from_owned_ptr_or_err(py, ffi::PyCFunction_NewEx(def, std::ptr::null_mut(), std::ptr::null_mut())) }
}

/// What to take from `sys.monitoring`.
pub struct Events {
    /// Python calls, resumptions and returns.
    pub calls: bool,
    /// C calls (with `calls`).
    pub c_calls: bool,
    /// Executed lines.
    pub lines: bool,
}

/// Take our tool id and register the callbacks. `Ok(false)`: another tool holds the id
/// (warned once; the caller falls back to the profile hook).
pub fn install(py: Python<'_>, want: Events) -> PyResult<bool> {
    let mon = py.import("sys")?.getattr("monitoring")?;
    if let Err(e) = mon.call_method1("use_tool_id", (TOOL_ID, TOOL_NAME)) {
        let holder = mon.call_method1("get_tool", (TOOL_ID,)).map(|h| h.to_string()).unwrap_or_else(|_| "?".into());
        let instead = if want.calls { "recording through the profile hook instead" } else { "executed lines are not recorded" };
        warn(&format!("sys.monitoring tool id {TOOL_ID} is held by {holder} ({e}); {instead}"));
        return Ok(false);
    }
    let ev = mon.getattr("events")?;
    let e = |n: &str| ev.getattr(n).and_then(|v| v.extract::<u32>());
    let mut table: Vec<(&str, &'static std::ffi::CStr, FastFn)> = Vec::new();
    if want.calls {
        table.extend([
            ("PY_START", c"slicetrace_py_start", on_start as FastFn),
            ("PY_RESUME", c"slicetrace_py_resume", on_resume),
            ("PY_THROW", c"slicetrace_py_throw", on_throw),
            ("PY_RETURN", c"slicetrace_py_return", on_exit),
            ("PY_YIELD", c"slicetrace_py_yield", on_exit),
            ("PY_UNWIND", c"slicetrace_py_unwind", on_exit),
        ]);
    }
    let mut local = 0;
    if want.lines {
        let _ = DISABLE.set(mon.getattr("DISABLE")?.as_ptr() as usize);
        local = e("LINE")?;
        let _ = LOCAL_LINES.set((mon.getattr("set_local_events")?.unbind(), local));
        table.push(("LINE", c"slicetrace_line", on_line));
    }
    if want.calls && want.c_calls {
        let missing = mon.getattr("MISSING")?.as_ptr() as usize;
        let method_descriptor = py.eval(c"type(str.join)", None, None)?.as_ptr() as usize;
        let _ = CALL_TYPES.set(CallTypes { missing, method_descriptor });
        table.push(("CALL", c"slicetrace_call", on_call));
        table.push(("C_RETURN", c"slicetrace_c_return", on_c_exit));
        table.push(("C_RAISE", c"slicetrace_c_raise", on_c_exit));
    }
    let mut mask = 0;
    for (event, name, f) in table {
        let bit = e(event)?;
        mon.call_method1("register_callback", (TOOL_ID, bit, callback(py, name, f)?))?;
        mask |= bit;
    }
    // LINE is not a global event: each code object asks for it when it gets its id, and turns
    // it off once all its code lines were reported (`watch_lines`).
    mon.call_method1("set_events", (TOOL_ID, mask & !local))?;
    Ok(true)
}

/// Turn LINE events of `code` on (`true`: a new function; `false`: every code line of it has
/// been reported). Turning them off also removes the line starts CPython never reports to a
/// tool (a jump back to the same line: one-line loops, conditional expressions), which `DISABLE`
/// cannot reach and which otherwise cost on every execution.
///
/// # Safety
/// GIL held; `code` is a live code object; not called from the LINE callback of `code`.
pub unsafe fn watch_lines(code: *mut PyObject, on: bool) {
    let Some((set_local, line)) = LOCAL_LINES.get() else { return };
    // SAFETY: GIL held (the contract): this thread is attached.
    let py = unsafe { Python::assume_attached() };
    // SAFETY: `code` is a live code object (the contract).
    let code = unsafe { Bound::from_borrowed_ptr(py, code) };
    if let Err(e) = set_local.bind(py).call1((TOOL_ID, code, if on { *line } else { 0 })) {
        warn(&format!("sys.monitoring.set_local_events failed ({e}); some executed lines may be missing"));
    }
}

/// In a forked child that records lines: turn back on the line events the parent turned off
/// (its lines are the parent's; the child's trace must report its own).
pub fn restart_events(py: Python<'_>) -> PyResult<()> {
    py.import("sys")?.getattr("monitoring")?.call_method0("restart_events")?;
    Ok(())
}
