//! What differs between the CPython versions the one (stable-ABI) build loads into, chosen at
//! run time from the running interpreter's `sys.version_info`.
//!
//! The shim reads no CPython struct directly (no field offset exists anywhere in it): every
//! access goes through a function CPython exports. The functions below exist, with the same
//! signature, in every supported version (checked against each version's exported symbols);
//! the few whose name changed (the code-object "extra" slot API became `PyUnstable_*` in 3.12)
//! are looked up by name at start-up, and the shim refuses to start when one is missing.

use pyo3::ffi::{self, PyObject, Py_ssize_t};
use pyo3::prelude::*;
use std::ffi::{c_int, c_void, CStr};
use std::sync::OnceLock;

/// Oldest and newest supported CPython `3.x` minor versions.
pub const MIN_MINOR: u32 = 9;
pub const MAX_MINOR: u32 = 15;

/// `Py_tracefunc` (`cpython/pystate.h`, the same in 3.9-3.15).
pub type TraceFunc = unsafe extern "C" fn(*mut PyObject, *mut PyObject, c_int, *mut PyObject) -> c_int;
pub const PYTRACE_CALL: c_int = 0;
pub const PYTRACE_LINE: c_int = 2;
pub const PYTRACE_RETURN: c_int = 3;
pub const PYTRACE_C_CALL: c_int = 4;
pub const PYTRACE_C_EXCEPTION: c_int = 5;
pub const PYTRACE_C_RETURN: c_int = 6;

// Exported by every CPython 3.9-3.15 (outside the limited API, so pyo3's abi3 bindings do not
// declare them). Frames are passed as opaque pointers.
extern "C" {
    pub fn PyEval_SetProfile(func: Option<TraceFunc>, obj: *mut PyObject);
    pub fn PyEval_SetTrace(func: Option<TraceFunc>, obj: *mut PyObject);
    /// The line the frame is executing (3.9+; for a trace function's line event, the new line).
    pub fn PyFrame_GetLineNumber(frame: *mut PyObject) -> c_int;
    /// New reference to the frame's code object (3.9+).
    pub fn PyFrame_GetCode(frame: *mut PyObject) -> *mut PyObject;
    /// New reference to the calling frame, or null (3.9+).
    pub fn PyFrame_GetBack(frame: *mut PyObject) -> *mut PyObject;
    /// Borrowed reference to the current thread's innermost frame, or null.
    pub fn PyEval_GetFrame() -> *mut PyObject;
}

type RequestIndexFn = unsafe extern "C" fn(Option<unsafe extern "C" fn(*mut c_void)>) -> Py_ssize_t;
type GetExtraFn = unsafe extern "C" fn(*mut PyObject, Py_ssize_t, *mut *mut c_void) -> c_int;
type SetExtraFn = unsafe extern "C" fn(*mut PyObject, Py_ssize_t, *mut c_void) -> c_int;

/// The running interpreter, as far as the shim cares.
pub struct Runtime {
    pub minor: u32,
    /// Recording through `sys.monitoring` (3.12+) rather than the profile hook.
    pub monitoring: bool,
    /// Opcode of `RESUME` (3.11+): the first one in a generator's code marks its start.
    pub resume_opcode: Option<u8>,
    get_extra: GetExtraFn,
    set_extra: SetExtraFn,
    /// Our slot in every code object's `co_extra`, or -1.
    extra_index: Py_ssize_t,
    /// A second slot: for a code object compiled from a string, who ran the string
    /// (`describe::made_in`), or -1.
    made_in_index: Py_ssize_t,
}

static RUNTIME: OnceLock<Runtime> = OnceLock::new();

/// The runtime, once [`init`] succeeded.
#[inline(always)]
pub fn get() -> Option<&'static Runtime> {
    RUNTIME.get()
}

/// Look a function up among the interpreter's exported symbols, by its first name that exists.
///
/// # Safety
/// `T` is the function pointer type of every name given.
pub unsafe fn lookup<T: Copy>(names: &[&CStr]) -> Option<T> {
    assert_eq!(std::mem::size_of::<T>(), std::mem::size_of::<*mut c_void>());
    for name in names {
        // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name only reads the loader's
        // tables.
        let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
        if !p.is_null() {
            // SAFETY: a non-null symbol address, of the function pointer type `T` the caller
            // names (the contract), which has the size of a pointer (asserted).
            return Some(unsafe { std::mem::transmute_copy::<*mut c_void, T>(&p) });
        }
    }
    None
}

/// The free function of our `co_extra` slot: the slot holds an integer, nothing to free.
///
/// # Safety
/// None (CPython calls it with the slot's value, which it ignores); `unsafe` only for the
/// function pointer type CPython's API asks for.
unsafe extern "C" fn free_extra(_: *mut c_void) {}

/// Whether this interpreter can be recorded, and if not why (for the warning).
pub fn check(py: Python<'_>) -> Result<u32, String> {
    let v = py.version_info();
    let name =
        py.import("sys").and_then(|s| s.getattr("implementation")).and_then(|i| i.getattr("name")).and_then(|n| n.extract::<String>());
    let name = name.unwrap_or_else(|_| "?".into());
    if name != "cpython" || v.major != 3 || !(MIN_MINOR..=MAX_MINOR).contains(&(v.minor as u32)) {
        return Err(format!("{name} {}.{} is not supported (supported: CPython 3.{MIN_MINOR} to 3.{MAX_MINOR})", v.major, v.minor));
    }
    Ok(v.minor as u32)
}

/// Resolve the version-specific parts. `profile_only`: use the profile hook even where
/// `sys.monitoring` exists (`--python-hook profile`).
pub fn init(py: Python<'_>, profile_only: bool) -> Result<&'static Runtime, String> {
    if let Some(rt) = RUNTIME.get() {
        return Ok(rt);
    }
    let minor = check(py)?;
    // SAFETY: the names are CPython functions with exactly these signatures in every
    // supported version (`cpython/code.h`, `cpython/ceval.h`).
    let (request, get_extra, set_extra) = unsafe {
        (
            lookup::<RequestIndexFn>(&[c"PyUnstable_Eval_RequestCodeExtraIndex", c"_PyEval_RequestCodeExtraIndex"]),
            lookup::<GetExtraFn>(&[c"PyUnstable_Code_GetExtra", c"_PyCode_GetExtra"]),
            lookup::<SetExtraFn>(&[c"PyUnstable_Code_SetExtra", c"_PyCode_SetExtra"]),
        )
    };
    let (Some(request), Some(get_extra), Some(set_extra)) = (request, get_extra, set_extra) else {
        return Err(format!("CPython 3.{minor} does not export the code-object extra-slot functions"));
    };
    let resume_opcode = if minor >= 11 {
        let op = py.import("opcode").and_then(|d| d.getattr("opmap")).and_then(|m| m.get_item("RESUME")).and_then(|o| o.extract::<u8>());
        Some(op.map_err(|e| format!("cannot read the RESUME opcode from opcode.opmap: {e}"))?)
    } else {
        None
    };
    // SAFETY: GIL held; the free function does nothing (the slot holds an integer).
    let extra_index = unsafe { request(Some(free_extra)) };
    // SAFETY: as above.
    let made_in_index = unsafe { request(Some(free_extra)) };
    let rt = Runtime { minor, monitoring: minor >= 12 && !profile_only, resume_opcode, get_extra, set_extra, extra_index, made_in_index };
    Ok(RUNTIME.get_or_init(|| rt))
}

impl Runtime {
    /// The value in our `co_extra` slot of `code` (0 if none).
    ///
    /// # Safety
    /// GIL held; `code` is a live code object.
    #[inline(always)]
    pub unsafe fn extra(&self, code: *mut PyObject) -> u64 {
        // SAFETY: the contract.
        unsafe { self.slot(code, self.extra_index) }
    }

    /// # Safety
    /// GIL held; `code` is a live code object.
    pub unsafe fn set_extra(&self, code: *mut PyObject, value: u64) {
        // SAFETY: the contract.
        unsafe { self.set_slot(code, self.extra_index, value) }
    }

    /// The value in our second slot, who ran the string `code` was compiled from (0 if none).
    ///
    /// # Safety
    /// GIL held; `code` is a live code object.
    pub unsafe fn made_in(&self, code: *mut PyObject) -> u64 {
        // SAFETY: the contract.
        unsafe { self.slot(code, self.made_in_index) }
    }

    /// # Safety
    /// GIL held; `code` is a live code object.
    pub unsafe fn set_made_in(&self, code: *mut PyObject, value: u64) {
        // SAFETY: the contract.
        unsafe { self.set_slot(code, self.made_in_index, value) }
    }

    /// # Safety
    /// GIL held; `code` is a live code object; `index` is one of ours (or -1).
    #[inline(always)]
    unsafe fn slot(&self, code: *mut PyObject, index: Py_ssize_t) -> u64 {
        let mut v: *mut c_void = std::ptr::null_mut();
        // SAFETY: GIL held; `code` is a live code object (the contract); the index is ours
        // (requested at `init`); the value is written to our local.
        if index < 0 || unsafe { (self.get_extra)(code, index, &mut v) } != 0 {
            // SAFETY: GIL held.
            unsafe { ffi::PyErr_Clear() };
            return 0;
        }
        v as usize as u64
    }

    /// # Safety
    /// GIL held; `code` is a live code object; `index` is one of ours (or -1).
    unsafe fn set_slot(&self, code: *mut PyObject, index: Py_ssize_t, value: u64) {
        // SAFETY: GIL held; `code` is a live code object (the contract); the index is ours,
        // and its free function ignores the value (an integer, not a pointer).
        if index >= 0 && unsafe { (self.set_extra)(code, index, value as usize as *mut c_void) } != 0 {
            // SAFETY: GIL held.
            unsafe { ffi::PyErr_Clear() };
        }
    }
}
