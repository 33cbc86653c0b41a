//! What a function is: the `funcs.jsonl` record of a code object or a C function, read once,
//! the first time it runs (never on the hot path).

use crate::runtime;
use crate::state::{warn, with_proc, GilCell};
use pyo3::ffi::{self, PyObject};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::collections::HashMap;
use std::path::Path;
use trace_format::{FuncKind, FuncRecord, FUNCS_FILE};

/// `CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR` (`cpython/code.h`, 3.9-3.15).
const CO_RESUMABLE: u32 = 0x20 | 0x80 | 0x200;

pub struct CodeDesc {
    pub kind: FuncKind,
    /// A generator, coroutine or async generator: its frames are entered again on resumption.
    pub resumable: bool,
}

/// Describe a code object; `lines`: the process records executed lines (give `code_lines`).
pub fn describe_code(code: &Bound<'_, PyAny>, cwd: &Path, lines: bool) -> CodeDesc {
    let s = |attr: &str| code.getattr(attr).and_then(|v| v.extract::<String>()).unwrap_or_default();
    let name = s("co_name");
    // `co_qualname` exists from 3.11; before, the name the enclosing code gives it.
    let mut qualname = s("co_qualname");
    if qualname.is_empty() {
        qualname = old_qualname(code, &name);
    }
    let first_line = code.getattr("co_firstlineno").and_then(|v| v.extract::<u32>()).unwrap_or(0);
    let flags = code.getattr("co_flags").and_then(|v| v.extract::<u32>()).unwrap_or(0);
    let last_line = last_line(code, first_line);
    // Function bodies only: a module or class body is never shown with code elided, and on
    // 3.12+ watching its lines costs a scan of its line table for every line more than 127
    // lines below its first (all of a big module's), at import: most of what lines cost rich.
    let code_lines = if lines && flags & CO_FUNCTION == CO_FUNCTION { Some(code_lines(code, first_line)) } else { None };
    let file = s("co_filename");
    let made_in = if file.starts_with('<') { made_in(code, &name, cwd) } else { None };
    CodeDesc {
        kind: FuncKind::Python { file: absolute_file(&file, cwd), qualname, name, first_line, last_line, code_lines, made_in },
        resumable: flags & CO_RESUMABLE != 0,
    }
}

/// The files recorded as `made_in`, in the order met; a code object's second `co_extra` slot
/// holds its index + 1 ([`runtime::Runtime::made_in`]). Never emptied: a forked child's code
/// objects keep their slots and the child keeps the table.
static MADE_IN: GilCell<Vec<String>> = GilCell::new(Vec::new());

/// The number [`MADE_IN`] gives `file` (its index + 1).
fn made_in_number(file: &str) -> u64 {
    // SAFETY: GIL held (every describe is); no call into CPython while the table is borrowed.
    let table = unsafe { MADE_IN.get() };
    let i = table.iter().position(|f| f == file).unwrap_or_else(|| {
        table.push(file.to_string());
        table.len() - 1
    });
    i as u64 + 1
}

/// The file [`made_in_number`] numbered `n`.
fn made_in_file(n: u64) -> Option<String> {
    // SAFETY: as above.
    let table = unsafe { MADE_IN.get() };
    table.get(usize::try_from(n).ok()?.checked_sub(1)?).cloned()
}

/// Who ran the string a code object without a file of its own (`<string>`) was compiled from
/// (`funcs.jsonl`'s `made_in`): for the body `exec`/`eval` runs (a `<module>`), the file of
/// the calling frame, the code that ran it (`collections.namedtuple`'s `eval`, `dataclasses`'
/// `exec`, a program's own `exec`); every code object that body defines (its constants, at
/// any depth) is marked with the same file in its second `co_extra` slot, read here when it
/// first runs (namedtuple's `__new__`, the methods `dataclasses` generates). A caller that
/// has no file either passes on what made it. None: no calling frame (`python -c`), or a code
/// object made some other way.
fn made_in(code: &Bound<'_, PyAny>, name: &str, cwd: &Path) -> Option<String> {
    let rt = runtime::get()?;
    // SAFETY: GIL held (describing is); `code` is a live code object.
    let marked = unsafe { rt.made_in(code.as_ptr()) };
    if marked != 0 {
        return made_in_file(marked);
    }
    if name != "<module>" {
        return None;
    }
    let caller = caller_code(code)?;
    let caller_file = caller.getattr("co_filename").and_then(|v| v.extract::<String>()).ok()?;
    let file = if caller_file.starts_with('<') {
        // SAFETY: GIL held; `caller` is a live code object.
        made_in_file(unsafe { rt.made_in(caller.as_ptr()) }).unwrap_or(caller_file)
    } else {
        absolute_file(&caller_file, cwd)
    };
    let n = made_in_number(&file);
    // The code objects the body defines, depth first (an explicit stack: no recursion on
    // the nesting of the source).
    let mut stack: Vec<Bound<'_, PyAny>> = vec![code.clone()];
    while let Some(c) = stack.pop() {
        let Ok(consts) = c.getattr("co_consts").and_then(|c| c.try_iter()) else { continue };
        for k in consts.flatten() {
            if k.hasattr("co_consts").unwrap_or(false) && k.hasattr("co_code").unwrap_or(false) {
                // SAFETY: GIL held; `k` is a live code object.
                if unsafe { rt.made_in(k.as_ptr()) } == 0 {
                    // SAFETY: as above.
                    unsafe { rt.set_made_in(k.as_ptr(), n) };
                }
                stack.push(k);
            }
        }
    }
    Some(file)
}

/// The code object of the frame that called the one running `code`: the innermost frame when
/// the recorder describes `code` before its frame runs (the frame-evaluation hook), the
/// innermost frame's caller when that frame is already `code`'s (`sys.monitoring`'s start
/// event, the profile hook's call).
fn caller_code<'py>(code: &Bound<'py, PyAny>) -> Option<Bound<'py, PyAny>> {
    let py = code.py();
    // SAFETY: GIL held (describing is); a borrowed reference to this thread's innermost frame,
    // or null.
    let frame = unsafe { runtime::PyEval_GetFrame() };
    if frame.is_null() {
        return None;
    }
    // SAFETY: `frame` is a live frame; a new reference (or null).
    let inner = unsafe { runtime::PyFrame_GetCode(frame) };
    if inner.is_null() {
        // SAFETY: GIL held.
        unsafe { ffi::PyErr_Clear() };
        return None;
    }
    // SAFETY: `inner` is a new reference, owned from here.
    let inner = unsafe { Bound::from_owned_ptr(py, inner) };
    if inner.as_ptr() != code.as_ptr() {
        return Some(inner);
    }
    // SAFETY: `frame` is live (borrowed above, nothing ran since); a new reference or null.
    let back = unsafe { runtime::PyFrame_GetBack(frame) };
    if back.is_null() {
        return None;
    }
    // SAFETY: `back` is a new reference, owned from here.
    let back = unsafe { Bound::from_owned_ptr(py, back) };
    // SAFETY: `back` is a live frame; a new reference (or null).
    let c = unsafe { runtime::PyFrame_GetCode(back.as_ptr()) };
    if c.is_null() {
        // SAFETY: GIL held.
        unsafe { ffi::PyErr_Clear() };
        return None;
    }
    // SAFETY: a new reference, owned from here.
    Some(unsafe { Bound::from_owned_ptr(py, c) })
}

/// Qualified names before 3.11, keyed by code object address: computed the way the compiler
/// does (`Class.method`, `outer.<locals>.inner`) by walking the nested code objects of every
/// `<module>` when it first runs, before any of its functions can. The code objects are kept
/// alive so that an address is never reused for another one.
type QualnameMap = HashMap<usize, (Py<PyAny>, String)>;
static QUALNAMES: GilCell<Option<QualnameMap>> = GilCell::new(None);

/// `CO_OPTIMIZED | CO_NEWLOCALS`: a function body (a class body has neither).
const CO_FUNCTION: u32 = 0x1 | 0x2;

fn old_qualname(code: &Bound<'_, PyAny>, name: &str) -> String {
    if name == "<module>" {
        let mut found = Vec::new();
        walk_nested(code, None, true, &mut found);
        // SAFETY: GIL held; no call into CPython while the map is borrowed.
        let map = unsafe { QUALNAMES.get().get_or_insert_with(HashMap::new) };
        for (c, q) in found {
            map.insert(c.as_ptr() as usize, (c, q));
        }
        return name.to_string();
    }
    // SAFETY: as above.
    let known = unsafe { QUALNAMES.get().as_ref().and_then(|m| m.get(&(code.as_ptr() as usize))).map(|(_, q)| q.clone()) };
    known.unwrap_or_else(|| name.to_string())
}

fn walk_nested(code: &Bound<'_, PyAny>, qualname: Option<&str>, is_module: bool, out: &mut Vec<(Py<PyAny>, String)>) {
    let Ok(consts) = code.getattr("co_consts").and_then(|c| c.try_iter()) else { return };
    let parent_is_class =
        !is_module && code.getattr("co_flags").and_then(|f| f.extract::<u32>()).map(|f| f & CO_FUNCTION == 0).unwrap_or(false);
    for c in consts.flatten() {
        if !c.hasattr("co_consts").unwrap_or(false) || !c.hasattr("co_code").unwrap_or(false) {
            continue;
        }
        let Ok(name) = c.getattr("co_name").and_then(|n| n.extract::<String>()) else { continue };
        let q = match qualname {
            None => name,
            Some(p) if parent_is_class => format!("{p}.{name}"),
            Some(p) => format!("{p}.<locals>.{name}"),
        };
        walk_nested(&c, Some(&q), false, out);
        out.push((c.unbind(), q));
    }
}

fn bytes_attr(code: &Bound<'_, PyAny>, attr: &str) -> Option<Vec<u8>> {
    code.getattr(attr).ok().and_then(|t| t.cast::<PyBytes>().ok().map(|b| b.as_bytes().to_vec()))
}

/// The last source line of a code object, from its line table in the running version's format.
fn last_line(code: &Bound<'_, PyAny>, first_line: u32) -> u32 {
    let minor = runtime::get().map(|r| r.minor).unwrap_or(0);
    let parsed = if minor >= 11 {
        bytes_attr(code, "co_linetable").and_then(|t| crate::linetable::last_line_311(&t, first_line))
    } else if minor == 9 {
        bytes_attr(code, "co_lnotab").map(|t| crate::linetable::last_line_lnotab(&t, first_line))
    } else {
        None // 3.10's table: co_lines() below
    };
    if cfg!(debug_assertions) && minor != 9 {
        // Debug builds (the tests) check the fast path against `co_lines()`.
        let slow = last_line_from_co_lines(code, first_line);
        if parsed.is_some_and(|p| p != slow) {
            warn(&format!("internal: last line from the line table is {parsed:?}, co_lines says {slow}"));
        }
    }
    parsed.unwrap_or_else(|| last_line_from_co_lines(code, first_line))
}

/// The lines holding code the code object can execute (those a line event can name), from its
/// line table in the running version's format.
fn code_lines(code: &Bound<'_, PyAny>, first_line: u32) -> Vec<u32> {
    let rt = runtime::get();
    let minor = rt.map(|r| r.minor).unwrap_or(0);
    if minor == 9 {
        let code_len = bytes_attr(code, "co_code").map_or(0, |c| c.len());
        return bytes_attr(code, "co_lnotab").map(|t| crate::linetable::code_lines_lnotab(&t, first_line, code_len)).unwrap_or_default();
    }
    // 3.11+: the prologue up to the first RESUME (on the `def` line) reports no line.
    let resume_unit = match rt.and_then(|r| r.resume_opcode) {
        Some(op) => u32::try_from(first_resume_offset(code, Some(op)) / 2).ok(),
        None => None,
    };
    let parsed = if minor >= 11 {
        bytes_attr(code, "co_linetable").and_then(|t| crate::linetable::code_lines_311(&t, first_line, resume_unit))
    } else {
        None // 3.10's table: co_lines() below
    };
    if cfg!(debug_assertions) {
        // Debug builds (the tests) check the fast path against `co_lines()`.
        let slow = code_lines_from_co_lines(code, resume_unit);
        if parsed.as_ref().is_some_and(|p| *p != slow) {
            warn(&format!("internal: code lines from the line table are {parsed:?}, co_lines says {slow:?}"));
        }
    }
    parsed.unwrap_or_else(|| code_lines_from_co_lines(code, resume_unit))
}

/// The slow way (a Python tuple per entry, 3.10+): the lines of the ranges that are not empty
/// and end after the prologue (the code unit `resume_unit`).
fn code_lines_from_co_lines(code: &Bound<'_, PyAny>, resume_unit: Option<u32>) -> Vec<u32> {
    let body_start = resume_unit.map_or(0, |r| 2 * (r as u64 + 1));
    let mut lines = Vec::new();
    if let Ok(ranges) = code.call_method0("co_lines").and_then(|l| l.try_iter()) {
        for item in ranges.flatten() {
            let Ok((start, end, line)) = item.extract::<(u64, u64, Option<u32>)>() else { continue };
            if let (Some(line), true) = (line, end > start && end > body_start) {
                lines.extend((line > 0).then_some(line));
            }
        }
    }
    lines.sort_unstable();
    lines.dedup();
    lines
}

/// The slow way (a Python tuple per entry, 3.10+).
fn last_line_from_co_lines(code: &Bound<'_, PyAny>, first_line: u32) -> u32 {
    let mut last_line = first_line;
    if let Ok(lines) = code.call_method0("co_lines").and_then(|l| l.try_iter()) {
        for item in lines.flatten() {
            if let Ok(Some(line)) = item.get_item(2).and_then(|l| l.extract::<Option<u32>>()) {
                last_line = last_line.max(line);
            }
        }
    }
    last_line
}

/// For a resumable code object: the largest instruction offset at which its frame is seen on
/// its first entry. Before 3.11 a new frame has `f_lasti == -1`; from 3.11 the first entry is
/// at the first `RESUME` (and a throw into a never-started generator reports an offset before it).
pub fn first_resume_offset(code: &Bound<'_, PyAny>, resume_opcode: Option<u8>) -> i64 {
    let Some(op) = resume_opcode else { return -1 };
    let Some(co_code) = bytes_attr(code, "co_code") else { return -1 };
    co_code.chunks_exact(2).position(|w| w[0] == op).map(|i| 2 * i as i64).unwrap_or(-1)
}

/// `co_filename` made absolute when it names an existing file relative to the start-up cwd.
fn absolute_file(file: &str, cwd: &Path) -> String {
    if file.is_empty() || file.starts_with('/') || file.starts_with('<') {
        return file.to_string();
    }
    let p = cwd.join(file);
    if p.exists() {
        p.to_string_lossy().into_owned()
    } else {
        file.to_string()
    }
}

/// Id of a C function object (a builtin function or method), keyed by its C function and
/// owner (the module, or the type of the object it is bound to).
///
/// # Safety
/// GIL held; `func` is a live `PyCFunction`. May call into CPython (the first time).
pub unsafe fn cfunc_id(func: *mut PyObject) -> Option<u32> {
    // SAFETY: GIL held; `func` is a live PyCFunction (the contract).
    let cfn = unsafe { ffi::PyCFunction_GetFunction(func) }? as usize;
    // SAFETY: as above; a borrowed reference (or null), alive as long as `func`.
    let owner = unsafe { ffi::PyCFunction_GetSelf(func) };
    // SAFETY: GIL held; `owner` is live when not null.
    let owner_key = if owner.is_null() || unsafe { ffi::PyModule_Check(owner) } != 0 {
        owner as usize
    } else {
        unsafe { ffi::Py_TYPE(owner) as usize }
    };
    let key = (cfn, owner_key);
    // SAFETY: GIL held; the closure calls no CPython.
    if let Some(found) = unsafe { with_proc(|p| p.cfuncs.get(&key).copied()) }? {
        return Some(found);
    }
    // SAFETY: as above.
    let id = unsafe {
        with_proc(|p| {
            p.next_id += 1;
            p.next_id - 1
        })
    }?;
    // SAFETY: GIL held (the contract): this thread is attached.
    let py = unsafe { Python::assume_attached() };
    // SAFETY: `func` is live (the contract); `f` holds a reference of its own.
    let f = unsafe { Bound::from_borrowed_ptr(py, func) };
    let qualname = f.getattr("__qualname__").and_then(|v| v.extract::<String>()).unwrap_or_else(|_| "?".into());
    let module = match f.getattr("__module__").and_then(|v| v.extract::<Option<String>>()) {
        Ok(Some(m)) => Some(m),
        _ => f.getattr("__self__").and_then(|s| s.get_type().getattr("__module__")).and_then(|m| m.extract::<String>()).ok(),
    };
    // SAFETY: GIL held; the closure calls no CPython (a file write).
    let written = unsafe {
        with_proc(|p| {
            p.cfuncs.insert(key, id);
            p.funcs
                .append(&FuncRecord { id, kind: FuncKind::Builtin { module, qualname } })
                .map_err(|e| format!("cannot write {}: {e}", p.dir.join(FUNCS_FILE).display()))
        })
    }?;
    match written {
        Ok(()) => Some(id),
        Err(e) => {
            warn(&e);
            // SAFETY: as above.
            unsafe { with_proc(|p| p.cfuncs.remove(&key)) };
            None
        }
    }
}
