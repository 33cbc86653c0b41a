//! Record-time filters (`trace run -F/-N`, uftrace's conventions): which functions start a
//! recorded subtree (`-F`: with any `-F`, a thread records only inside calls of matching
//! functions) and which start a subtree that is not recorded (`-N`: the function and every
//! call under it). `trace run` passes them in `SLICE_TRACE_NATIVE_FILTER`, one per line:
//! `F <pattern>` or `N <pattern>`. A pattern is `NAME[@OBJECT]`: `NAME` a regular expression
//! that must match the whole function name (demangled, with or without a C++ parameter list),
//! `OBJECT` one that must match the whole file name of the object (`libfoo.so.1`, or the
//! program's) — `.*@libc\.so\.6` names every function of libc.
//!
//! Names come from the object's ELF symbol table (`.symtab`, else `.dynsym`), read once per
//! object on the cold path, so static functions of a program count too.
//!
//! In a `-finstrument-functions` build the hooks still run for calls that are not recorded:
//! they cost a lookup on the slow path but write nothing.

use crate::frames;
use crate::guards::SpinLock;
use crate::hooks::{begin_slow, enter_recorded};
use crate::hot::{SltThread, M_ACTIVE, M_BUSY, M_FILTERED};
use crate::table::Table;
use regex::Regex;
use std::cell::Cell;
use std::ptr::null_mut;
use std::sync::atomic::{AtomicPtr, Ordering};

/// The environment variable `trace run` sets.
pub(crate) const ENV_FILTER: &str = "SLICE_TRACE_NATIVE_FILTER";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Recorded when its caller is.
    Plain = 1,
    /// Matches `-F`: starts a recorded subtree.
    Root = 2,
    /// Matches `-N`: it and its callees are not recorded.
    Skip = 3,
}

struct Pattern {
    name: Regex,
    object: Option<Regex>,
}

impl Pattern {
    fn parse(text: &str) -> Result<Pattern, regex::Error> {
        let (name, object) = match text.rsplit_once('@') {
            Some((n, o)) => (n, Some(o)),
            None => (text, None),
        };
        let whole = |r: &str| Regex::new(&format!("^(?:{r})$"));
        Ok(Pattern { name: whole(if name.is_empty() { ".*" } else { name })?, object: object.map(whole).transpose()? })
    }

    fn matches(&self, names: &[&str], object: &str) -> bool {
        self.object.as_ref().is_none_or(|o| o.is_match(object)) && names.iter().any(|n| self.name.is_match(n))
    }
}

pub(crate) struct Filters {
    only: Vec<Pattern>,
    skip: Vec<Pattern>,
}

impl Filters {
    /// Parse `SLICE_TRACE_NATIVE_FILTER` (`trace run` checked the patterns; a bad line here
    /// is ignored).
    pub(crate) fn parse(text: &str) -> Filters {
        let mut f = Filters { only: Vec::new(), skip: Vec::new() };
        for line in text.lines() {
            let (kind, pat) = line.split_at(line.len().min(2));
            let Ok(p) = Pattern::parse(pat) else { continue };
            match kind {
                "F " => f.only.push(p),
                "N " => f.skip.push(p),
                _ => {}
            }
        }
        f
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.only.is_empty() && self.skip.is_empty()
    }

    /// Whether a `-F` pattern names the object whose file name is `file` (`NAME@OBJECT`):
    /// entry patching then patches it even if it is a system library.
    pub(crate) fn names_object(&self, file: &str) -> bool {
        self.only.iter().any(|p| p.object.as_ref().is_some_and(|o| o.is_match(file)))
    }

    /// With `-F`, a thread starts outside any recorded subtree.
    pub(crate) fn has_roots(&self) -> bool {
        !self.only.is_empty()
    }

    fn decide(&self, name: Option<&str>, object: &str) -> Decision {
        let owned;
        let names: Vec<&str> = match name {
            Some(n) => {
                owned = demangled(n);
                let mut v = vec![n, owned.as_str()];
                if let Some(i) = owned.find('(') {
                    v.push(&owned[..i]);
                }
                v
            }
            None => Vec::new(),
        };
        if self.skip.iter().any(|p| p.matches(&names, object)) {
            Decision::Skip
        } else if self.only.iter().any(|p| p.matches(&names, object)) {
            Decision::Root
        } else {
            Decision::Plain
        }
    }
}

pub(crate) fn demangled(name: &str) -> String {
    if let Ok(d) = rustc_demangle::try_demangle(name) {
        return format!("{d:#}");
    }
    if name.starts_with("_Z") {
        if let Ok(s) = cpp_demangle::Symbol::new(name) {
            if let Ok(d) = s.demangle(&cpp_demangle::DemangleOptions::new().no_return_type()) {
                return d;
            }
        }
    }
    name.to_string()
}

static FILTERS: AtomicPtr<Filters> = AtomicPtr::new(null_mut());
/// Function address -> `Decision as u32`.
static DECISIONS: AtomicPtr<Table> = AtomicPtr::new(null_mut());
static LOCK: SpinLock = SpinLock::new();
/// Symbol tables of the objects seen, by load address (under `LOCK`).
static mut OBJECTS: Vec<(u64, Option<Symbols>)> = Vec::new();

/// Install the filters (the constructor, once).
pub(crate) fn install(f: Filters) {
    if !f.is_empty() {
        FILTERS.store(Box::into_raw(Box::new(f)), Ordering::Release);
    }
}

pub(crate) fn active() -> Option<&'static Filters> {
    let p = FILTERS.load(Ordering::Acquire);
    // SAFETY: set once by the constructor, never freed.
    (!p.is_null()).then(|| unsafe { &*p })
}

/// The decision for the function at `addr` (`Plain` without filters), computed once.
pub(crate) fn decision(addr: u64) -> Decision {
    let Some(f) = active() else { return Decision::Plain };
    if let Some(v) = Table::get_in(&DECISIONS, addr) {
        return from_u32(v);
    }
    LOCK.lock();
    let d = match Table::get_in(&DECISIONS, addr) {
        Some(v) => from_u32(v),
        None => {
            let d = decide_locked(f, addr);
            Table::insert_in(&DECISIONS, addr, d as u32);
            d
        }
    };
    LOCK.unlock();
    d
}

fn from_u32(v: u32) -> Decision {
    match v {
        2 => Decision::Root,
        3 => Decision::Skip,
        _ => Decision::Plain,
    }
}

fn decide_locked(f: &Filters, addr: u64) -> Decision {
    // SAFETY: dladdr fills the Dl_info we own; its strings live as long as the object.
    let (base, path) = unsafe {
        let mut info: libc::Dl_info = std::mem::zeroed();
        if libc::dladdr(addr as *const libc::c_void, &mut info) == 0 {
            return f.decide(None, "");
        }
        let path = if info.dli_fname.is_null() || *info.dli_fname == 0 || is_main(info.dli_fbase as u64) {
            std::fs::read_link("/proc/self/exe").map(|p| p.to_string_lossy().into_owned()).unwrap_or_default()
        } else {
            std::ffi::CStr::from_ptr(info.dli_fname).to_string_lossy().into_owned()
        };
        (info.dli_fbase as u64, path)
    };
    let file = path.rsplit('/').next().unwrap_or("");
    // SAFETY: OBJECTS is only touched under LOCK, which we hold.
    let objects = unsafe { &mut *std::ptr::addr_of_mut!(OBJECTS) };
    let i = match objects.iter().position(|(b, _)| *b == base) {
        Some(i) => i,
        None => {
            objects.push((base, Symbols::read(&path)));
            objects.len() - 1
        }
    };
    let name = objects[i].1.as_ref().and_then(|s| s.name_of(addr - base));
    f.decide(name, file)
}

fn is_main(base: u64) -> bool {
    // SAFETY: AT_PHDR is an address inside the main executable; dladdr fills our Dl_info.
    unsafe {
        let phdr = libc::getauxval(libc::AT_PHDR) as *const libc::c_void;
        let mut info: libc::Dl_info = std::mem::zeroed();
        !phdr.is_null() && libc::dladdr(phdr, &mut info) != 0 && info.dli_fbase as u64 == base
    }
}

/// An object's function symbols, by offset from its load address.
pub(crate) struct Symbols {
    /// (start offset, size, name), sorted by start.
    pub(crate) funcs: Vec<(u64, u64, String)>,
}

impl Symbols {
    pub(crate) fn read(path: &str) -> Option<Symbols> {
        let data = std::fs::read(path).ok()?;
        let file = object::File::parse(&*data).ok()?;
        Some(Symbols::of(&file))
    }

    pub(crate) fn of<'d, R: object::ReadRef<'d>>(file: &object::File<'d, R>) -> Symbols {
        use object::{Object, ObjectSegment, ObjectSymbol, SymbolKind};
        // The load address is that of the first PT_LOAD, page-aligned.
        let first = file.segments().map(|s| s.address()).min().unwrap_or(0) & !0xfff;
        let mut funcs: Vec<(u64, u64, String)> = Vec::new();
        let syms: Vec<_> = if file.symbols().next().is_some() { file.symbols().collect() } else { file.dynamic_symbols().collect() };
        for s in syms {
            if s.kind() != SymbolKind::Text || s.address() == 0 || s.address() < first {
                continue;
            }
            if let Ok(name) = s.name() {
                funcs.push((s.address() - first, s.size().max(1), name.to_string()));
            }
        }
        funcs.sort_by_key(|f| f.0);
        Symbols { funcs }
    }

    fn name_of(&self, off: u64) -> Option<&str> {
        let i = self.funcs.partition_point(|f| f.0 <= off).checked_sub(1)?;
        let (start, size, name) = &self.funcs[i];
        (off < start + size).then_some(name.as_str())
    }
}

// ---------------------------------------------------------------------------------------
// A thread outside the recorded calls
// ---------------------------------------------------------------------------------------

/// Marks the shadow-stack entry of a `-F` call (user-space addresses never have bit 63), so
/// that its exit misses hot.c's fast path and comes to `slt_exit_slow`, which then calls
/// `leave`.
pub(crate) const ROOT_BIT: u64 = 1 << 63;

#[derive(Clone, Copy)]
enum Outside {
    Inside,
    /// Before (or between) `-F` calls.
    Waiting,
    /// Inside a `-N` call whose frame is at `cfa` (0: unknown), `depth` calls below it.
    Skipping {
        cfa: u64,
        depth: u64,
    },
}

thread_local! {
    static OUTSIDE: Cell<Outside> = const { Cell::new(Outside::Inside) };
}

/// The thread's stream was just opened (mode ACTIVE, or OFF): with `-F`, it starts outside,
/// unless the calls replayed after a fork hold a `-F` call; a forked child inside a `-N`
/// call stays there.
pub(crate) fn thread_started(t: &mut SltThread) {
    let Some(f) = active() else { return };
    if t.mode != M_ACTIVE {
        return;
    }
    let state = match OUTSIDE.get() {
        s @ Outside::Skipping { .. } => s,
        _ => {
            let depth = (t.depth as usize).min(crate::hot::STACK_CAP);
            // SAFETY: the thread is ACTIVE, so it has its state: `stack` holds STACK_CAP entries
            // (see SltThread), and depth <= STACK_CAP.
            let in_root = depth > 0 && unsafe { std::slice::from_raw_parts(t.stack, depth) }.iter().any(|&a| a & ROOT_BIT != 0);
            if f.has_roots() && !in_root {
                Outside::Waiting
            } else {
                Outside::Inside
            }
        }
    };
    OUTSIDE.set(state);
    if !matches!(state, Outside::Inside) {
        t.set_mode(M_FILTERED);
    }
}

/// Whether the thread is inside the recorded calls (always, without `-F`/`-N`).
pub(crate) fn inside() -> bool {
    matches!(OUTSIDE.get(), Outside::Inside)
}

/// The thread (ACTIVE) left its last `-F` call.
pub(crate) fn leave(t: &mut SltThread) {
    OUTSIDE.set(Outside::Waiting);
    if t.mode == M_ACTIVE {
        t.set_mode(M_FILTERED);
    }
}

/// The thread (ACTIVE) entered a `-N` function whose frame is at `cfa`.
pub(crate) fn skip_from(t: &mut SltThread, cfa: u64) {
    OUTSIDE.set(Outside::Skipping { cfa, depth: 0 });
    if t.mode == M_ACTIVE {
        t.set_mode(M_FILTERED);
    }
}

/// An entry while the thread is outside (mode FILTERED).
///
/// # Safety
/// The thread has its state (`t.rust` is set; see [`SltThread`]), as a FILTERED thread does.
pub(crate) unsafe fn enter_outside(t: &mut SltThread, addr: u64, sp: u64) {
    t.set_mode(M_BUSY);
    match OUTSIDE.get() {
        Outside::Waiting if decision(addr) == Decision::Root => {
            OUTSIDE.set(Outside::Inside);
            // SAFETY: the thread has its state (the contract); only thread_exit frees it.
            unsafe { enter_recorded(t, addr, sp, true) };
            return;
        }
        Outside::Skipping { cfa: root, depth } => {
            let off = frames::cfa_offset(addr, sp);
            let cfa = if off == 0 { 0 } else { sp + off as u64 };
            if root != 0 && frames::dead_frames(&[root], cfa) == 1 {
                // The `-N` call has returned without an exit (longjmp, exception).
                OUTSIDE.set(Outside::Inside);
                t.pull();
                t.push();
                if begin_slow(t) {
                    // SAFETY: the thread has its state (the contract; `begin_slow` also found
                    // it ACTIVE).
                    unsafe { enter_recorded(t, addr, sp, false) };
                }
                return;
            }
            OUTSIDE.set(Outside::Skipping { cfa: root, depth: depth + 1 });
        }
        _ => {}
    }
    t.set_mode(M_FILTERED);
}

/// An exit while the thread is outside (mode FILTERED).
pub(crate) fn exit_outside(t: &mut SltThread) {
    match OUTSIDE.get() {
        Outside::Skipping { depth: 0, .. } => {
            OUTSIDE.set(Outside::Inside);
            t.set_mode(M_BUSY);
            t.pull();
            t.push();
        }
        Outside::Skipping { cfa, depth } => OUTSIDE.set(Outside::Skipping { cfa, depth: depth - 1 }),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_whole_names_with_an_optional_object() {
        let f = Filters::parse("F main\nN parse_.*\nN .*@libshapes\\.so\nX bad\nN (\n");
        assert_eq!((f.only.len(), f.skip.len()), (1, 2));
        assert_eq!(f.decide(Some("main"), "scene"), Decision::Root);
        assert_eq!(f.decide(Some("main2"), "scene"), Decision::Plain);
        assert_eq!(f.decide(Some("parse_shape"), "scene"), Decision::Skip);
        assert_eq!(f.decide(Some("shape_area"), "libshapes.so"), Decision::Skip);
        assert_eq!(f.decide(Some("shape_area"), "scene"), Decision::Plain);
        assert_eq!(f.decide(None, "scene"), Decision::Plain);
        // C++ and Rust names are matched demangled, with or without the parameters.
        let f = Filters::parse("N geo::Circle::area\nN app::run\n");
        assert_eq!(f.decide(Some("_ZNK3geo6Circle4areaEv"), "shapes"), Decision::Skip);
        assert_eq!(f.decide(Some("_ZN3app3run17h0123456789abcdefE"), "app"), Decision::Skip);
        assert_eq!(f.decide(Some("_ZNK3geo4Rect4areaEv"), "shapes"), Decision::Plain);
    }

    #[test]
    fn symbols_of_this_test_binary_name_its_functions() {
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let s = Symbols::read(exe.to_str().unwrap()).expect("an ELF file");
        assert!(s.funcs.iter().any(|f| f.2.contains("symbols_of_this_test_binary")), "{}", s.funcs.len());
        let (start, size, name) = s.funcs.iter().find(|f| f.2.contains("symbols_of_this_test_binary")).unwrap().clone();
        assert_eq!(s.name_of(start + size / 2), Some(name.as_str()));
    }
}
