//! Process-wide state and the cold paths: the process's trace directory (created by the first
//! thread that records), function registration (an address seen for the first time gets its
//! id and its `funcs.jsonl` record under `COLD`), warnings.
use crate::guards::SpinLock;
use crate::objects;
use crate::table::{insert, lookup, Table};
use std::ffi::CStr;
use std::path::PathBuf;
use std::ptr::null_mut;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, Ordering};
use trace_format::writer::{self, FuncTableWriter};
use trace_format::{FuncKind, FuncRecord, FUNCS_FILE};

pub(crate) const UNINIT: u8 = 0;
pub(crate) const INITIALIZING: u8 = 1;
pub(crate) const READY: u8 = 2;
pub(crate) const DISABLED: u8 = 3;

/// Recording state of this process image (reset to `UNINIT` in a forked child).
pub(crate) static STATE: AtomicU8 = AtomicU8::new(UNINIT);
/// Trace root from `SLICE_TRACE_DIR`, read once by the constructor (null: do nothing).
pub(crate) static ROOT: AtomicPtr<PathBuf> = AtomicPtr::new(null_mut());
/// The process's recording state; valid while `STATE == READY`.
pub(crate) static PROC: AtomicPtr<Proc> = AtomicPtr::new(null_mut());
/// Address -> id table; null until the first function is registered (and after a fork).
pub(crate) static TABLE: AtomicPtr<Table> = AtomicPtr::new(null_mut());
/// Lock of the cold path (registering a function, growing the table).
pub(crate) static COLD: SpinLock = SpinLock::new();
/// Sequence number of the next thread stream of this process.
pub(crate) static THREAD_SEQ: AtomicU32 = AtomicU32::new(0);
/// Pid of the traced parent, in a child created by `fork` (0: none).
pub(crate) static FORKED_FROM: AtomicU32 = AtomicU32::new(0);
/// `pthread_key` whose destructor closes a thread's stream when the thread exits.
pub(crate) static KEY: AtomicU64 = AtomicU64::new(u64::MAX);

/// The first id a call event writes in more than two bytes: the tag, then a varint of
/// `id - (INLINE_MAX + 1)` (docs/trace-format.md, "Events").
const FIRST_WIDE: u32 = trace_format::event::INLINE_MAX as u32 + 1 + (1 << trace_format::event::VARINT_BITS);

impl Proc {
    /// A new id: a function's is the next short one (written in one or two bytes) while there
    /// are any, an inline probe's hit's (`inlined`) always a wide one. The hits fire once each
    /// but often early (a program's start-up code, before its loops), and took the short ids
    /// from the functions called in those loops, whose every call then wrote one byte more
    /// (hexyl: 402 hits before its two hot functions, ids 566 and 570 instead of 172 and
    /// 173, a stream of 4.4 MB instead of 3.5 MB, docs/performance.md). Ids stay dense, but
    /// for the short ones no function took (fewer than 191 functions ran): such ids have no
    /// record and no event.
    pub(crate) fn take_id(&mut self, inlined: bool) -> u32 {
        if !inlined && self.next_short < FIRST_WIDE {
            self.next_short += 1;
            return self.next_short - 1;
        }
        self.next_id += 1;
        self.next_id - 1
    }
}

pub(crate) struct Proc {
    pub(crate) pid: u32,
    pub(crate) dir: PathBuf,
    pub(crate) funcs: FuncTableWriter,
    /// The next of the ids a call event writes in one or two bytes (below [`FIRST_WIDE`]),
    /// given to functions only; then `next_id`'s.
    pub(crate) next_short: u32,
    /// The next of the wider ids (from [`FIRST_WIDE`]): functions once the short ones are
    /// given out, and inline probes' hits always.
    pub(crate) next_id: u32,
    /// Load address of the main executable (`dli_fbase`), whose `dladdr` name is only argv[0].
    pub(crate) main_base: u64,
    pub(crate) exe: String,
    /// Object path by load address, made absolute once.
    pub(crate) modules: Vec<(u64, String)>,
}

/// The process's trace directory if it is made already (nothing is made: for a caller that
/// holds the objects' lock, which making it takes to write `patch.json`).
pub(crate) fn process_dir() -> Option<PathBuf> {
    if STATE.load(Ordering::Acquire) != READY {
        return None;
    }
    let p = PROC.load(Ordering::Acquire);
    // SAFETY: set before READY was published and never freed.
    (!p.is_null()).then(|| unsafe { (*p).dir.clone() })
}

/// The process's trace directory, created on first use by the first thread that gets here.
pub(crate) fn ensure_process() -> Option<PathBuf> {
    loop {
        match STATE.load(Ordering::Acquire) {
            READY => {
                let p = PROC.load(Ordering::Acquire);
                // SAFETY: set before READY was published and never freed.
                return (!p.is_null()).then(|| unsafe { (*p).dir.clone() });
            }
            DISABLED => return None,
            UNINIT => {
                if STATE.compare_exchange(UNINIT, INITIALIZING, Ordering::AcqRel, Ordering::Acquire).is_ok() {
                    let ok = init_process();
                    STATE.store(if ok { READY } else { DISABLED }, Ordering::Release);
                }
            }
            _ => {
                // SAFETY: sched_yield has no preconditions.
                unsafe { libc::sched_yield() };
            }
        }
    }
}

pub(crate) fn init_process() -> bool {
    let root = ROOT.load(Ordering::Relaxed);
    if root.is_null() {
        return false;
    }
    // SAFETY: set once by the constructor, never freed.
    let root = unsafe { &*root };
    let forked = FORKED_FROM.load(Ordering::Relaxed);
    let writer::ProcessFiles { dir, meta, funcs } =
        match writer::ProcessFiles::create(root, "native", &runtime(), (forked != 0).then_some(forked)) {
            Ok(f) => f,
            Err(e) => {
                warn_once(&format!("{e}; this process is not traced (check that {} is writable)", root.display()));
                return false;
            }
        };
    // SAFETY: AT_PHDR is an address inside the main executable's first mapping.
    let main_base = unsafe {
        let phdr = libc::getauxval(libc::AT_PHDR) as *const libc::c_void;
        let mut info: libc::Dl_info = std::mem::zeroed();
        if !phdr.is_null() && libc::dladdr(phdr, &mut info) != 0 {
            info.dli_fbase as u64
        } else {
            u64::MAX
        }
    };
    if let Err(e) = objects::write_report(&dir) {
        warn_once(&format!("cannot write {}: {e}", dir.join(trace_format::meta::PATCH_FILE).display()));
    }
    let proc = Proc { pid: meta.pid, dir, funcs, next_short: 0, next_id: FIRST_WIDE, main_base, exe: meta.exe, modules: Vec::new() };
    PROC.store(Box::into_raw(Box::new(proc)), Ordering::Release);
    true
}

pub(crate) fn runtime() -> String {
    // SAFETY: gnu_get_libc_version returns a static NUL-terminated string.
    let v = unsafe { CStr::from_ptr(gnu_get_libc_version()) }.to_string_lossy();
    format!("glibc {v}")
}

extern "C" {
    fn gnu_get_libc_version() -> *const libc::c_char;
}

pub(crate) fn warn_once(msg: &str) {
    static WARNED: AtomicBool = AtomicBool::new(false);
    if !WARNED.swap(true, Ordering::Relaxed) {
        let line = format!("slicetrace-native: {msg}\n");
        // SAFETY: writing a buffer we own to stderr.
        unsafe { libc::write(2, line.as_ptr() as *const libc::c_void, line.len()) };
    }
}

/// Id of a function address, registering it (and writing its record) if it is new.
#[inline(always)]
pub(crate) fn id_of(addr: u64) -> Option<u32> {
    match lookup(addr) {
        Some(id) => Some(id),
        None => register(addr),
    }
}

#[cold]
#[inline(never)]
pub(crate) fn register(addr: u64) -> Option<u32> {
    if addr == 0 {
        return None;
    }
    // No signal handler runs while this thread holds `COLD`: one that left with
    // `siglongjmp` would leave the lock held, and every other thread's next new function
    // would wait for it for ever. (Once per function per process: two cheap system calls.)
    // SAFETY: a zeroed sigset_t is a valid (empty) set.
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: pthread_sigmask with sets we own is async-signal-safe; the old mask is put back.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_BLOCK, &all, &mut old);
    }
    // A bounded wait: the holder may be waiting for a lock this thread holds. With
    // `SLICE_TRACE_PATCH=all` the C library's own functions are patched, and malloc calls some
    // of them with its arena locked; a thread registering a function (its record's buffer
    // grows through realloc) then waits for that arena while the thread inside malloc waits
    // here: Debian's zstd hung for ever. Giving up leaves this call unrecorded (the function
    // is registered at a later call) and lets malloc go on.
    let r = if COLD.try_lock_blocked(REGISTER_TRIES) {
        let r = register_locked(addr);
        COLD.unlock_blocked();
        r
    } else {
        None
    };
    // SAFETY: as above.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, null_mut()) };
    r
}

/// Attempts at the registration lock before a call goes unrecorded ([`register`]): about
/// 10-50 ms of `sched_yield`s, far beyond the microseconds a registration holds it.
const REGISTER_TRIES: u32 = 1 << 15;

/// [`register`] from a signal handler that runs with every signal blocked (probe.rs's
/// `on_trap`): the same, without the two mask calls.
pub(crate) fn register_blocked(addr: u64) -> Option<u32> {
    if let Some(id) = lookup(addr) {
        return Some(id);
    }
    COLD.lock_blocked();
    let r = register_locked(addr);
    COLD.unlock_blocked();
    r
}

/// The id of `key` if it has one, else `register()`'s.
#[inline(always)]
pub(crate) fn lookup_or(key: u64, register: impl FnOnce() -> Option<u32>) -> Option<u32> {
    lookup(key).or_else(register)
}

/// Give `key` (an inline probe's hit) an id without a `funcs.jsonl` record: `note` keeps it
/// where the reader finds the record (probe/hits.rs, `inline.bin`), before any event uses it.
pub(crate) fn register_noted(key: u64, note: impl FnOnce(u32)) -> Option<u32> {
    // As `register`: no signal handler runs while this thread holds `COLD`.
    // SAFETY: a zeroed sigset_t is a valid (empty) set.
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: pthread_sigmask with sets we own is async-signal-safe; the old mask is put back.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_BLOCK, &all, &mut old);
    }
    let r = register_noted_blocked(key, note);
    // SAFETY: as above.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, null_mut()) };
    r
}

/// [`register_noted`] with every signal blocked already (probe.rs's handler). No system call,
/// no allocation but the table's growth (as [`register_blocked`]).
pub(crate) fn register_noted_blocked(key: u64, note: impl FnOnce(u32)) -> Option<u32> {
    COLD.lock_blocked();
    let r = lookup(key).or_else(|| {
        let p = PROC.load(Ordering::Acquire);
        if p.is_null() {
            return None;
        }
        // SAFETY: PROC is only mutated under COLD, which we hold.
        let proc = unsafe { &mut *p };
        let id = proc.take_id(true);
        note(id);
        insert(key, id);
        Some(id)
    });
    COLD.unlock_blocked();
    r
}

pub(crate) fn register_locked(key: u64) -> Option<u32> {
    if let Some(id) = lookup(key) {
        return Some(id);
    }
    // An inline probe's hit (probe.rs) is keyed apart from a function entry at its address.
    let (addr, inlined) = (key & !crate::probe::INLINE_BIT, key & crate::probe::INLINE_BIT != 0);
    let p = PROC.load(Ordering::Acquire);
    if p.is_null() {
        return None;
    }
    // SAFETY: PROC is only mutated under COLD, which we hold.
    let proc = unsafe { &mut *p };
    // SAFETY: dladdr fills the Dl_info we own; the strings it points to live as long as the object.
    let (module, base, symbol) = unsafe {
        let mut info: libc::Dl_info = std::mem::zeroed();
        if libc::dladdr(addr as *const libc::c_void, &mut info) == 0 {
            (String::new(), 0u64, None)
        } else {
            let base = info.dli_fbase as u64;
            let module = module_path(proc, base, info.dli_fname);
            let symbol = (!info.dli_sname.is_null()).then(|| {
                let name = CStr::from_ptr(info.dli_sname).to_string_lossy().into_owned();
                let off = addr.wrapping_sub(info.dli_saddr as u64);
                if off == 0 {
                    name
                } else {
                    format!("{name}+{off:#x}")
                }
            });
            (module, base, symbol)
        }
    };
    if !inlined {
        // Its first call: the probes inside it get their traps before its body runs (the
        // probes' lock, inside this one).
        crate::probe::first_call(addr);
    }
    let id = proc.take_id(inlined);
    let rec = FuncRecord { id, kind: FuncKind::Native { addr, module, base, symbol, inlined } };
    if proc.funcs.append(&rec).is_err() {
        warn_once(&format!("cannot write {}/{FUNCS_FILE}; function names will be missing", proc.dir.display()));
    }
    insert(key, id);
    Some(id)
}

/// Absolute path of the object loaded at `base`.
///
/// # Safety
/// `fname` is null or a NUL-terminated string (`dladdr`'s `dli_fname` for `base`).
pub(crate) unsafe fn module_path(proc: &mut Proc, base: u64, fname: *const libc::c_char) -> String {
    if let Some((_, m)) = proc.modules.iter().find(|(b, _)| *b == base) {
        return m.clone();
    }
    let path = if base == proc.main_base || fname.is_null() {
        proc.exe.clone()
    } else {
        // SAFETY: not null here, so a NUL-terminated string (the contract).
        let name = unsafe { CStr::from_ptr(fname) }.to_string_lossy().into_owned();
        std::fs::canonicalize(&name).map(|p| p.to_string_lossy().into_owned()).unwrap_or(name)
    };
    proc.modules.push((base, path.clone()));
    path
}
