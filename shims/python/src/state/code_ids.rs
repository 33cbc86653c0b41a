//! Function ids of code objects: kept in the code object's `co_extra` slot with their flag
//! bits (resumable, watched), reserved before the code object is described.

use super::*;

/// What a code object's id says about it: the id, and the flag bits of its `co_extra` value
/// as they are there (tested where needed, not unpacked on every entry).
#[derive(Clone, Copy)]
pub struct CodeId {
    pub id: u32,
    flags: u32,
}

impl CodeId {
    fn new(id: u32, resumable: bool, watched: bool) -> CodeId {
        let flags = if resumable { RESUMABLE_BIT } else { 0 } | if watched { WATCHED_BIT } else { 0 };
        CodeId { id, flags: flags as u32 }
    }

    /// Generator, coroutine or async generator: it can be resumed.
    #[inline(always)]
    pub fn resumable(self) -> bool {
        self.flags & RESUMABLE_BIT as u32 != 0
    }

    /// Every code line has been reported (`sys.monitoring`): turn its LINE events off.
    #[inline(always)]
    pub fn lines_done(self) -> bool {
        self.flags & LINES_DONE_BIT as u32 != 0
    }

    /// Its LINE events are on (`sys.monitoring`): its entries are counted
    /// ([`linewatch::LINE_ENTRIES`]).
    #[inline(always)]
    pub fn watched(self) -> bool {
        self.flags & WATCHED_BIT as u32 != 0
    }
}

/// Layout of our `co_extra` value: generation << 32 | resumable << 31 | lines done << 30 |
/// watched << 29 | (id + 1).
const RESUMABLE_BIT: u64 = 1 << 31;
/// Set when every code line of the function has been reported through `sys.monitoring`: its
/// next entry turns its LINE events off (and clears the bit).
pub(crate) const LINES_DONE_BIT: u64 = 1 << 30;
/// Set while the function's LINE events are on: only then does an entry take the process
/// lock to count it, so a function whose lines are done costs nothing more than a bit test.
pub(crate) const WATCHED_BIT: u64 = 1 << 29;
const ID_MASK: u64 = WATCHED_BIT - 1;

/// Id of a code object, assigning one (and writing its record) the first time.
///
/// # Safety
/// GIL held; `code` is a live code object. May call into CPython (the first time).
#[inline(always)]
pub unsafe fn code_id(code: *mut PyObject) -> Option<CodeId> {
    // SAFETY: GIL held; `code` is a live code object (the contract).
    match unsafe { cached_code_id(code) } {
        Some(c) => Some(c),
        // SAFETY: as above.
        None => unsafe { new_code_id(runtime::get()?, code) },
    }
}

/// The id cached in the code object by this process, if any. Calls no Python code.
///
/// # Safety
/// GIL held; `code` is a live code object.
#[inline(always)]
pub(crate) unsafe fn cached_code_id(code: *mut PyObject) -> Option<CodeId> {
    // SAFETY: GIL held; `code` is a live code object (the contract).
    let v = unsafe { runtime::get()?.extra(code) };
    if v != 0 && (v >> 32) as u32 == GENERATION.load(Ordering::Relaxed) {
        let low = v & 0xffff_ffff;
        return Some(CodeId { id: (low & ID_MASK) as u32 - 1, flags: (low & !ID_MASK) as u32 });
    }
    None
}

/// # Safety
/// GIL held; `code` is a live code object. Calls into CPython.
#[cold]
#[inline(never)]
unsafe fn new_code_id(rt: &runtime::Runtime, code: *mut PyObject) -> Option<CodeId> {
    let generation = GENERATION.load(Ordering::Relaxed);
    // Reserve the id first: describing calls into Python, which may re-enter the shim.
    // SAFETY: GIL held (the contract); the closure calls no CPython.
    let (id, cwd, mode) = unsafe {
        with_proc(|p| {
            p.next_id += 1;
            (p.next_id - 1, p.cwd.clone(), p.lines)
        })
    }?;
    let lines = mode != LineMode::Off;
    if id >= ID_MASK as u32 - 1 {
        return None;
    }
    // SAFETY: GIL held (the contract): this thread is attached.
    let py = unsafe { Python::assume_attached() };
    // SAFETY: `code` is a live object (the contract); the new reference is released when
    // `code_obj` is dropped.
    let code_obj = unsafe { Bound::from_borrowed_ptr(py, code) };
    let desc = describe_code(&code_obj, &cwd, lines);
    let start = if desc.resumable { Some(first_resume_offset(&code_obj, rt.resume_opcode)) } else { None };
    if GENERATION.load(Ordering::Relaxed) != generation {
        return None; // forked while describing: this id belongs to the parent
    }
    let watch = match &desc.kind {
        FuncKind::Python { code_lines: Some(l), .. } if mode == LineMode::Monitoring && !l.is_empty() => Some(l.clone()),
        _ => None,
    };
    // SAFETY: GIL held (the contract); the closure calls no CPython (file writes only).
    let written = unsafe {
        with_proc(|p| {
            if let Some(s) = start {
                p.gen_start.insert(id, s);
            }
            if lines {
                let i = id as usize;
                if p.per_test.len() <= i {
                    p.per_test.resize(i + 1, false);
                }
                p.per_test[i] = match &desc.kind {
                    FuncKind::Python { file, .. } => crate::testscope::per_test(file, p.stdlib_dir.as_deref()),
                    _ => false,
                };
            }
            if let Some(l) = &watch {
                let i = id as usize;
                if p.lines_left.len() <= i {
                    p.lines_left.resize_with(i + 1, Vec::new);
                }
                p.lines_left[i] = l.clone();
                if p.line_entries.len() <= i {
                    p.line_entries.resize(i + 1, 0);
                }
                p.line_entries[i] = linewatch::LINE_ENTRIES;
                linewatch::LINES_WATCHED.store(true, Ordering::Relaxed);
                if p.last_entry.len() <= i {
                    p.last_entry.resize(i + 1, 0);
                }
                p.last_entry[i] = linewatch::entries();
                if p.lines_all.len() <= i {
                    p.lines_all.resize_with(i + 1, Vec::new);
                }
                p.lines_all[i] = l.clone();
                if p.line_epoch.len() <= i {
                    p.line_epoch.resize(i + 1, crate::testlines::NO_LINES);
                }
                p.line_epoch[i] =
                    if p.per_test[i] { crate::testlines::TEST_EPOCH.load(Ordering::Relaxed) } else { crate::testlines::NO_LINES };
            }
            p.funcs
                .append(&FuncRecord { id, kind: desc.kind })
                .map_err(|e| format!("cannot write {}: {e}", p.dir.join(FUNCS_FILE).display()))
        })
    }?;
    if let Err(e) = written {
        warn(&e);
        return None;
    }
    let flag = if desc.resumable { RESUMABLE_BIT } else { 0 } | if watch.is_some() { WATCHED_BIT } else { 0 };
    // SAFETY: GIL held; `code` is a live code object (the contract).
    unsafe { rt.set_extra(code, ((generation as u64) << 32) | flag | (id as u64 + 1)) };
    if watch.is_some() && !IN_LINE_EVENT.load(Ordering::Relaxed) {
        // LINE events are asked for per code object, so that they can be turned off again
        // once every code line has been reported (see `line_reported`). A code object first
        // seen by its own LINE event (a frame that was running across a fork) has them on.
        // SAFETY: GIL held; `code` is live; not from a LINE callback (IN_LINE_EVENT is not
        // set), so not from `code`'s own.
        unsafe { crate::monitoring::watch_lines(code, true) };
    }
    Some(CodeId::new(id, desc.resumable, watch.is_some()))
}
