//! Which objects entry patching patches, and when (x86-64; patch.rs patches one object).
//!
//! - **At start-up** (the shim's constructor, before the program's own constructors and
//!   before any thread of the program exists): every loaded object ([`crate::loaded`]) — the
//!   program and the libraries loaded with it.
//! - **Inside `dlopen`, before the constructors**: from the loader's debugger hook
//!   ([`crate::loaderhook`]), once the new objects are mapped and before they are relocated
//!   and their constructors run ([`patch_from_loader`]); so a plugin's constructors are
//!   recorded, and no thread they start can run code being patched.
//! - **After `dlopen`**: the shim exports `dlopen` (LD_PRELOAD puts it first), calls the real
//!   one and then patches the objects that were not there before (when the loader's hook is
//!   not one the shim knows, or the object has text relocations), before `dlopen` returns to
//!   its caller, so before any other thread can have a pointer into them. (uftrace's libmcount
//!   does only this; rtld-audit's `la_objopen` would come before the constructors too, but
//!   needs `LD_AUDIT` and a second library living in its own link-map namespace with its own
//!   copy of the shim's state.) `dlmopen` is wrapped the same way; the objects it loads into
//!   another link-map namespace are listed from the loader's namespace list
//!   ([`crate::loaded`]). `dlclose` is wrapped too, so that an object loaded again at the same
//!   address is patched again.
//!
//! glibc's `dlopen` searches a bare name (`libfoo.so`) with the *caller's* `DT_RUNPATH`; our
//! wrapper is the caller the real `dlopen` sees, so when that fails the wrapper searches the
//! real caller's paths (`dlinfo(RTLD_DI_SERINFO)` of the caller's object) and opens the file
//! it finds.
//!
//! Left alone by default, as the Python standard library is hidden by default: the C
//! runtime and system libraries (anything under `/lib`, `/usr/lib`, …, and libc, libm, ld.so,
//! libstdc++, libgcc_s, libpthread wherever they are), objects built with
//! `-finstrument-functions` (their hooks record them), the shim itself and the vDSO.
//! `SLICE_TRACE_PATCH=all` patches the system libraries too; a `-F NAME@OBJECT` pattern
//! whose OBJECT matches a library's file name patches that library.

use crate::guards::SpinLock;
use crate::loaded::{loaded_objects, Loaded};
use crate::{filter, patch};
use std::ffi::CStr;
use std::sync::atomic::{AtomicPtr, AtomicU8, Ordering};

const OFF: u8 = 0;
const ON: u8 = 1;
const ALL: u8 = 2;

/// Patching mode of this process image (set by the constructor; OFF until then, so that a
/// `dlopen` in another library's constructor is only passed on).
static MODE: AtomicU8 = AtomicU8::new(OFF);

/// The objects seen and what was done to each, under `LOCK` (signals blocked while held).
struct Seen {
    /// (load address of the first page, name as the loader gives it) of loaded objects.
    loaded: Vec<(u64, String)>,
    reports: Vec<ObjectReport>,
}

struct ObjectReport {
    path: String,
    report: patch::Report,
    skipped: Option<String>,
    dlopened: bool,
    /// The program's inline probes (probe.rs), if it was probed.
    probes: Option<trace_format::meta::InlineProbes>,
}

static LOCK: SpinLock = SpinLock::new();
static mut SEEN: Seen = Seen { loaded: Vec::new(), reports: Vec::new() };

/// Holds `LOCK` with every signal blocked: no handler runs half-patched code of this
/// thread, and none can wait for the lock its own thread holds.
struct Locked {
    old: libc::sigset_t,
}

impl Locked {
    fn take() -> Locked {
        // SAFETY: a zeroed sigset_t is a valid set; pthread_sigmask fills the ones we own.
        let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        unsafe {
            let mut all: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&mut all);
            libc::pthread_sigmask(libc::SIG_BLOCK, &all, &mut old);
        }
        LOCK.lock();
        Locked { old }
    }

    fn seen(&mut self) -> &mut Seen {
        // SAFETY: SEEN is only touched while LOCK is held, which `self` proves.
        unsafe { &mut *std::ptr::addr_of_mut!(SEEN) }
    }
}

impl Drop for Locked {
    fn drop(&mut self) {
        LOCK.unlock();
        // SAFETY: puts back the mask `take` saved.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &self.old, std::ptr::null_mut()) };
    }
}

/// In a forked child: the lock may have been held by a thread that does not exist there.
pub(crate) fn after_fork_child() {
    LOCK.0.store(false, Ordering::Release);
}

/// Whether this process is a CPython interpreter (its C API is loaded: the executable or
/// `libpython` defines it). The Python shim records it; patched, every call of the
/// interpreter's own C functions would be recorded too (a `python3` started by a patched
/// program wrote 10 GB in two minutes).
fn is_cpython() -> bool {
    // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name only reads the loader's tables.
    !unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"Py_IsInitialized".as_ptr()) }.is_null()
}

/// GoogleTest's runner (`testing::internal::UnitTestImpl`, mangled): a program that links it
/// is a GoogleTest binary.
const GTEST_RUNNER: &str = "_ZN7testing8internal12UnitTestImpl";

/// Set when the program links GoogleTest ([`GTEST_RUNNER`]).
static GTEST: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The file in the process directory that GoogleTest writes its JSON report into.
pub(crate) const GTEST_REPORT: &str = "gtest.json";

/// A GoogleTest binary: have GoogleTest write its JSON report (every test's name, outcome,
/// time and failure, as the runner reports them) into the process directory, through
/// `GTEST_OUTPUT`, which it reads in `InitGoogleTest`, after this constructor. Not when the
/// user asked for a report of their own; a value this shim set in a parent (the variable is
/// inherited) is replaced. The process directory is made now, to hold it.
fn ask_gtest_for_its_report() {
    let root = crate::process::ROOT.load(Ordering::Acquire);
    if root.is_null() {
        return;
    }
    // SAFETY: set once by the constructor, never freed.
    let root = unsafe { &*root };
    let ours = format!("json:{}/", root.display());
    if std::env::var("GTEST_OUTPUT").is_ok_and(|v| !v.starts_with(&ours)) {
        return;
    }
    let Some(dir) = crate::process::ensure_process() else { return };
    let Ok(value) = std::ffi::CString::new(format!("json:{}", dir.join(GTEST_REPORT).display())) else { return };
    // SAFETY: in the constructor, before `main`: no other thread reads the environment yet.
    unsafe { libc::setenv(c"GTEST_OUTPUT".as_ptr(), value.as_ptr(), 1) };
}

/// The constructor: read the mode and patch the objects loaded with the program.
pub(crate) fn patch_at_start() {
    // Unset: off (`trace` sets it for the programs it patches).
    let mode = match trace_format::patching::PatchMode::from_env() {
        Some(trace_format::patching::PatchMode::Program) => ON,
        Some(trace_format::patching::PatchMode::All) => ALL,
        Some(trace_format::patching::PatchMode::Off) | None => OFF,
    };
    if mode == OFF || is_cpython() {
        return;
    }
    patch::init();
    MODE.store(mode, Ordering::Release);
    patch_new(false);
    // A program none of whose functions could be patched never reaches a hook, which is where
    // the process directory is made: make it now, so that `patch.json` says why nothing was
    // recorded.
    let refused_only = {
        let mut l = Locked::take();
        let reports = &l.seen().reports;
        reports.iter().all(|o| o.report.patched == 0) && reports.iter().any(|o| !o.report.refused.is_empty())
    };
    if refused_only {
        crate::process::ensure_process();
    }
    if GTEST.load(Ordering::Acquire) {
        ask_gtest_for_its_report();
    }
    let hooked = crate::loaderhook::install();
    if std::env::var_os("SLICE_TRACE_PATCH_VERBOSE").is_some() {
        let mut l = Locked::take();
        let mut msg = if hooked {
            String::from("slicetrace-native: dlopened objects are patched before their constructors run\n")
        } else {
            String::from("slicetrace-native: the loader's debugger hook is not one the shim knows: dlopened objects are patched when dlopen returns (their constructors are not recorded)\n")
        };
        for o in &l.seen().reports {
            match &o.skipped {
                Some(why) => msg.push_str(&format!("slicetrace-native: {}: not patched ({why})\n", o.path)),
                None => {
                    msg.push_str(&format!(
                        "slicetrace-native: {}: patched {} functions, refused {}\n",
                        o.path,
                        o.report.patched,
                        o.report.refused.len()
                    ));
                    for (name, why) in &o.report.refused {
                        msg.push_str(&format!("  {name}: {}\n", why.as_str()));
                    }
                }
            }
        }
        drop(l);
        // SAFETY: writing a buffer we own to stderr.
        unsafe { libc::write(2, msg.as_ptr() as *const libc::c_void, msg.len()) };
    }
}

/// The shim's own load address (never patched).
fn own_base() -> u64 {
    // SAFETY: dladdr fills the Dl_info we own.
    unsafe {
        let mut info: libc::Dl_info = std::mem::zeroed();
        if libc::dladdr(own_base as *const libc::c_void, &mut info) == 0 {
            return 0;
        }
        info.dli_fbase as u64
    }
}

/// Libraries of the C runtime, by file name, wherever they are installed.
const RUNTIME: [&str; 10] =
    ["libc.so", "libm.so", "ld-linux", "ld64.so", "libstdc++.so", "libgcc_s.so", "libpthread.so", "libdl.so", "librt.so", "libslicetrace"];

/// Directories of the system's libraries.
const SYSTEM_DIRS: [&str; 5] = ["/lib/", "/lib64/", "/usr/lib/", "/usr/lib64/", "/usr/libexec/"];

/// Directories of the system's programs: the shells, `env`, `make` and compilers a recorded
/// program starts (pyenv's `python3` is a bash script running a dozen more bash processes;
/// each was recorded with bash's own functions).
const SYSTEM_PROGRAM_DIRS: [&str; 4] = ["/usr/bin/", "/bin/", "/usr/sbin/", "/sbin/"];

/// The rustup proxies (`~/.cargo/bin/cargo` is rustup itself under another name).
const RUSTUP_PROXIES: [&str; 12] = [
    "cargo",
    "rustc",
    "rustup",
    "rustdoc",
    "rustfmt",
    "cargo-fmt",
    "cargo-clippy",
    "clippy-driver",
    "rust-gdb",
    "rust-lldb",
    "rust-analyzer",
    "cargo-miri",
];

/// Whether `path` is the Rust toolchain: rustup's toolchains (`cargo`, `rustc` and
/// `librustc_driver`: a program recorded with `trace run -- cargo test` builds itself first,
/// and rustc patched whole failed its allocations) or one of its proxies. Programs installed
/// with `cargo install` into the same `bin/` are the user's own.
fn rust_toolchain(path: &str, file: &str) -> bool {
    let rustup_home = std::env::var("RUSTUP_HOME").ok().filter(|h| h.starts_with('/'));
    if path.contains("/.rustup/toolchains/")
        || rustup_home.is_some_and(|h| path.starts_with(&format!("{}/toolchains/", h.trim_end_matches('/'))))
    {
        return true;
    }
    let cargo_bin = std::env::var("CARGO_HOME").ok().filter(|h| h.starts_with('/')).map(|h| format!("{}/bin/", h.trim_end_matches('/')));
    let in_cargo_bin = path.contains("/.cargo/bin/") || cargo_bin.is_some_and(|b| path.starts_with(&b));
    in_cargo_bin && RUSTUP_PROXIES.contains(&file)
}

/// Why the object at `path` (absolute) is left alone by default, if it is.
pub(crate) fn system_library(path: &str) -> Option<&'static str> {
    let file = path.rsplit('/').next().unwrap_or(path);
    if RUNTIME.iter().any(|r| file.starts_with(r)) {
        return Some("the C runtime");
    }
    if rust_toolchain(path, file) {
        return Some("the Rust toolchain");
    }
    if SYSTEM_PROGRAM_DIRS.iter().any(|d| path.starts_with(d)) {
        return Some("a system program");
    }
    SYSTEM_DIRS.iter().any(|d| path.starts_with(d)).then_some("a system library")
}

/// From the loader's debugger hook ([`crate::loaderhook`]), inside `dlopen` or `dlclose`:
/// forget the objects no longer loaded, then patch the new ones before they are relocated
/// and before their constructors run (those with text relocations are left to [`slt_dlopen`]:
/// relocating them could write over a patched entry).
pub(crate) fn patch_from_loader() {
    patch_objects(true, true);
}

/// Forget the objects seen that are no longer among `objects` (unloaded by `dlclose`, or by
/// a `dlopen` that failed after mapping them), so that one loaded later at the same address
/// is patched. Only with a complete listing: an object of a namespace the loader is changing
/// is not listed, and forgetting it would patch its entries a second time.
fn forget_unloaded(seen: &mut Seen, objects: &[Loaded]) {
    seen.loaded.retain(|(b, n)| objects.iter().any(|o| o.base == *b && o.name == *n));
}

/// Patch the objects not seen yet. `dlopened`: after a `dlopen`.
fn patch_new(dlopened: bool) {
    patch_objects(dlopened, false);
}

/// [`patch_new`]; `early`: from the loader's hook, before relocation (unloaded objects are
/// forgotten first; objects with text relocations are left for later, not marked seen).
fn patch_objects(dlopened: bool, early: bool) {
    let mode = MODE.load(Ordering::Acquire);
    if mode == OFF {
        return;
    }
    let _errno = crate::guards::ErrnoGuard::save();
    let _guard = patch::Guard::set();
    let listing = loaded_objects();
    let own = own_base();
    let mut l = Locked::take();
    let seen = l.seen();
    if early && listing.complete {
        forget_unloaded(seen, &listing.objects);
    }
    let mut added = false;
    for (i, Loaded { base, name, textrel }) in listing.objects.into_iter().enumerate() {
        if seen.loaded.iter().any(|(b, n)| *b == base && *n == name) || (early && textrel) {
            continue;
        }
        seen.loaded.push((base, name.clone()));
        let program = i == 0 && name.is_empty();
        let path = if i == 0 && name.is_empty() {
            match std::fs::read_link("/proc/self/exe") {
                Ok(p) => p.to_string_lossy().into_owned(),
                Err(_) => continue,
            }
        } else if !name.starts_with('/') && !name.contains('/') {
            // The vDSO (no file), or an unnamed object.
            continue;
        } else {
            std::fs::canonicalize(&name).map(|p| p.to_string_lossy().into_owned()).unwrap_or(name)
        };
        if base == own {
            continue;
        }
        let file = path.rsplit('/').next().unwrap_or(&path).to_string();
        let skipped = match system_library(&path) {
            Some(why) if mode != ALL && !filter::active().is_some_and(|f| f.names_object(&file)) => {
                Some(format!("{why}; SLICE_TRACE_PATCH=all or -F 'PATTERN@{}' patches it", regex_escape(&file)))
            }
            _ => None,
        };
        let mut probes = None;
        let (report, skipped) = match skipped {
            Some(s) => (patch::Report::default(), Some(s)),
            None => match examine(&path) {
                Ok(syms) => {
                    let report = patch::patch_object(base, &syms);
                    if program {
                        note_program_main(base, &syms, &report);
                        probes = crate::probe::plant(base, &path, &report.moved);
                        if syms.funcs.iter().any(|f| f.2.starts_with(GTEST_RUNNER)) {
                            GTEST.store(true, Ordering::Release);
                        }
                    }
                    (report, None)
                }
                Err(why) => (patch::Report::default(), Some(why.to_string())),
            },
        };
        seen.reports.push(ObjectReport { path, report, skipped, dlopened, probes });
        added = true;
    }
    drop(l);
    // `patch.json` is rewritten only when an object was added (a `dlopen` of a loaded
    // library, or one the loader's hook already saw, changes nothing).
    if added && crate::process::STATE.load(Ordering::Acquire) == crate::process::READY {
        let p = crate::process::PROC.load(Ordering::Acquire);
        if !p.is_null() {
            // SAFETY: PROC is set before READY is published and never freed; `dir` never
            // changes.
            let dir = unsafe { (*p).dir.clone() };
            let _ = write_report(&dir);
        }
    }
}

/// The program's `main`, if its entry was patched (frames.rs: its first call closes the
/// constructors' frames).
fn note_program_main(base: u64, syms: &filter::Symbols, report: &patch::Report) {
    if report.refused.iter().any(|(n, _)| n == "main") {
        return;
    }
    if let Some((off, _, _)) = syms.funcs.iter().find(|(_, _, n)| n == "main") {
        crate::frames::set_program_main(base + off);
    }
}

fn regex_escape(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c.to_string() } else { format!("\\{c}") }).collect()
}

/// The symbols of a patchable object, or why it is not patched.
fn examine(path: &str) -> Result<filter::Symbols, &'static str> {
    use object::{Object, ObjectSymbol};
    let f = std::fs::File::open(path).map_err(|_| "its file cannot be read")?;
    // SAFETY: a read-only private mapping of an object the loader has mapped already (only
    // the pages holding headers and symbol tables are read, not the whole file: a large
    // library loaded by `dlopen` cost its whole size in reads before). Truncating the file
    // while it is loaded would crash its own code as well; a rewrite can only fail the parse.
    let data = unsafe { memmap2::Mmap::map(&f) }.map_err(|_| "its file cannot be read")?;
    let file = object::File::parse(&*data).map_err(|_| "not an ELF file the shim can read")?;
    if file.dynamic_symbols().any(|s| s.is_undefined() && s.name() == Ok("__cyg_profile_func_enter")) {
        return Err("built with -finstrument-functions: its hooks record it");
    }
    let syms = filter::Symbols::of(&file);
    if syms.funcs.is_empty() {
        return Err("no function symbols");
    }
    Ok(syms)
}

/// Write `patch.json` into the process directory: totals, each object, each refusal.
pub(crate) fn write_report(dir: &std::path::Path) -> std::io::Result<()> {
    if MODE.load(Ordering::Acquire) == OFF {
        return Ok(());
    }
    let _guard = patch::Guard::set();
    let mut l = Locked::take();
    let mut doc = trace_format::meta::PatchReport::default();
    for o in &l.seen().reports {
        doc.patched += o.report.patched as u64;
        for (name, why) in &o.report.refused {
            let function = filter::demangled(name);
            let function = if function == *name { name.clone() } else { format!("{function} ({name})") };
            doc.refused.push(trace_format::meta::PatchRefusal { function, reason: why.as_str().to_string(), object: Some(o.path.clone()) });
        }
        doc.objects.push(trace_format::meta::PatchObject {
            path: o.path.clone(),
            patched: o.report.patched as u64,
            refused: o.report.refused.len() as u64,
            skipped: o.skipped.clone(),
            dlopened: o.dlopened,
            inline_probes: o.probes.clone(),
        });
    }
    drop(l);
    let text = serde_json::to_vec(&doc).map_err(std::io::Error::other)?;
    // Replaced whole (a reader never sees half a document).
    let tmp = dir.join(format!("{}.tmp", trace_format::meta::PATCH_FILE));
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, dir.join(trace_format::meta::PATCH_FILE))
}

// ---------------------------------------------------------------------------------------
// dlopen / dlclose
// ---------------------------------------------------------------------------------------

type DlopenFn = unsafe extern "C" fn(*const libc::c_char, libc::c_int) -> *mut libc::c_void;
type DlcloseFn = unsafe extern "C" fn(*mut libc::c_void) -> libc::c_int;

static REAL_DLOPEN: AtomicPtr<libc::c_void> = AtomicPtr::new(std::ptr::null_mut());
static REAL_DLCLOSE: AtomicPtr<libc::c_void> = AtomicPtr::new(std::ptr::null_mut());

fn real(slot: &AtomicPtr<libc::c_void>, name: &CStr) -> *mut libc::c_void {
    let mut f = slot.load(Ordering::Acquire);
    if f.is_null() {
        // SAFETY: dlsym with RTLD_NEXT and a NUL-terminated name.
        f = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) };
        slot.store(f, Ordering::Release);
    }
    f
}

// `dlopen` passes its caller's return address on (the real dlopen searches a bare name
// with its caller's paths, and the caller it sees is this library).
std::arch::global_asm!(
    ".pushsection .text.slt_dlopen_entry,\"ax\",@progbits",
    ".globl dlopen",
    ".type dlopen,@function",
    "dlopen:",
    "mov rdx, qword ptr [rsp]",
    "jmp {wrapper}",
    ".size dlopen, . - dlopen",
    ".popsection",
    wrapper = sym slt_dlopen,
);

/// `dlopen(filename, flags)`, called from `caller`: the real one, then patching.
///
/// # Safety
/// As `dlopen`'s: `filename` is null or a NUL-terminated string. Reached only from the
/// `dlopen` entry above, which passes its caller's return address as `caller`.
unsafe extern "C" fn slt_dlopen(filename: *const libc::c_char, flags: libc::c_int, caller: u64) -> *mut libc::c_void {
    let f = {
        let _guard = patch::Guard::set();
        real(&REAL_DLOPEN, c"dlopen")
    };
    if f.is_null() {
        return std::ptr::null_mut();
    }
    // SAFETY: `f` is the next `dlopen` (dlsym RTLD_NEXT), not null, which has this signature.
    let real_dlopen: DlopenFn = unsafe { std::mem::transmute::<*mut libc::c_void, DlopenFn>(f) };
    // SAFETY: the real dlopen with the caller's flags and a name `open_as` gives: `filename`
    // or a path it built, null or NUL-terminated.
    let open = |name: *const libc::c_char| unsafe { real_dlopen(name, flags) };
    // SAFETY: `filename` is null or NUL-terminated (the contract); `open` takes such names.
    unsafe { open_as(filename, caller, open) }
}

// `dlmopen` likewise (its caller's return address is its fourth argument).
std::arch::global_asm!(
    ".pushsection .text.slt_dlmopen_entry,\"ax\",@progbits",
    ".globl dlmopen",
    ".type dlmopen,@function",
    "dlmopen:",
    "mov rcx, qword ptr [rsp]",
    "jmp {wrapper}",
    ".size dlmopen, . - dlmopen",
    ".popsection",
    wrapper = sym slt_dlmopen,
);

type DlmopenFn = unsafe extern "C" fn(libc::c_long, *const libc::c_char, libc::c_int) -> *mut libc::c_void;
static REAL_DLMOPEN: AtomicPtr<libc::c_void> = AtomicPtr::new(std::ptr::null_mut());

/// `dlmopen(lmid, filename, flags)`, called from `caller`: the real one, then patching (the
/// new objects are found in their namespace by [`crate::loaded`]).
///
/// # Safety
/// As `dlmopen`'s: `filename` is null or a NUL-terminated string. Reached only from the
/// `dlmopen` entry above, which passes its caller's return address as `caller`.
unsafe extern "C" fn slt_dlmopen(lmid: libc::c_long, filename: *const libc::c_char, flags: libc::c_int, caller: u64) -> *mut libc::c_void {
    let f = {
        let _guard = patch::Guard::set();
        real(&REAL_DLMOPEN, c"dlmopen")
    };
    if f.is_null() {
        return std::ptr::null_mut();
    }
    // SAFETY: `f` is the next `dlmopen` (dlsym RTLD_NEXT), not null, which has this signature.
    let real_dlmopen: DlmopenFn = unsafe { std::mem::transmute::<*mut libc::c_void, DlmopenFn>(f) };
    // SAFETY: as in `slt_dlopen`; `lmid` and `flags` are the caller's, for the real one to check.
    let open = |name: *const libc::c_char| unsafe { real_dlmopen(lmid, name, flags) };
    // SAFETY: as in `slt_dlopen`.
    unsafe { open_as(filename, caller, open) }
}

/// Open `filename` with `open` (the real `dlopen` or `dlmopen`) as `caller` would: a bare
/// name that `open` does not find (it searched with the shim's paths) is looked for in the
/// caller's search path, then the new objects are patched.
///
/// No guard around `open`: the constructors it runs are the program's calls (recorded when
/// the loader hook patched their object first). The shim's own work here (the search, the
/// patching) runs guarded.
///
/// # Safety
/// `filename` is null or a NUL-terminated string, and `open` may be given it or another
/// NUL-terminated string.
unsafe fn open_as(
    filename: *const libc::c_char,
    caller: u64,
    open: impl Fn(*const libc::c_char) -> *mut libc::c_void,
) -> *mut libc::c_void {
    let mut h = open(filename);
    // SAFETY: not null here, so NUL-terminated (the contract).
    if h.is_null() && !filename.is_null() && !unsafe { CStr::from_ptr(filename) }.to_bytes().contains(&b'/') {
        let found = {
            let _guard = patch::Guard::set();
            // SAFETY: as above; the caller's string outlives this call.
            search_as(caller, unsafe { CStr::from_ptr(filename) })
        };
        if let Some(path) = found {
            h = open(path.as_ptr());
        }
        if h.is_null() {
            // The real error message, for dlerror().
            h = open(filename);
        }
    }
    if !h.is_null() {
        patch_new(true);
    }
    h
}

/// glibc's `Dl_serpath` and `Dl_serinfo` (<dlfcn.h>; not in the libc crate).
#[repr(C)]
struct DlSerpath {
    dls_name: *mut libc::c_char,
    dls_flags: libc::c_uint,
}

#[repr(C)]
struct DlSerinfo {
    dls_size: libc::size_t,
    dls_cnt: libc::c_uint,
    dls_serpath: [DlSerpath; 1],
}

const _: () = assert!(std::mem::size_of::<DlSerpath>() == 16 && std::mem::size_of::<DlSerinfo>() == 32);
const RTLD_DI_SERINFO: libc::c_int = 4;
const RTLD_DI_SERINFOSIZE: libc::c_int = 5;

/// The file a bare `name` names in the search path of the object holding `caller` (its
/// `DT_RUNPATH`/`DT_RPATH`, `LD_LIBRARY_PATH`, the system's directories), if there is one.
fn search_as(caller: u64, name: &CStr) -> Option<std::ffi::CString> {
    let _errno = crate::guards::ErrnoGuard::save();
    let f = real(&REAL_DLOPEN, c"dlopen");
    if f.is_null() {
        return None;
    }
    // SAFETY: `f` is the next `dlopen` (dlsym RTLD_NEXT), not null, which has this signature.
    let real_dlopen: DlopenFn = unsafe { std::mem::transmute::<*mut libc::c_void, DlopenFn>(f) };
    // SAFETY: `Dl_info` is a plain C struct of pointers: all zeros is a value.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr takes any address, only reads the loader's tables and fills our Dl_info.
    if unsafe { libc::dladdr(caller as *const libc::c_void, &mut info) } == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: getauxval reads the auxiliary vector; AT_PHDR, if there, is an address inside
    // the main executable's first mapping; dladdr as above.
    let main = unsafe {
        let phdr = libc::getauxval(libc::AT_PHDR) as *const libc::c_void;
        let mut m: libc::Dl_info = std::mem::zeroed();
        !phdr.is_null() && libc::dladdr(phdr, &mut m) != 0 && m.dli_fbase == info.dli_fbase
    };
    // SAFETY: the real dlopen with null (the program) or the loaded object's name that
    // dladdr gave (NUL-terminated, kept while the object is loaded); RTLD_NOLOAD loads and
    // initialises nothing, it only takes a reference.
    let h = unsafe { real_dlopen(if main { std::ptr::null() } else { info.dli_fname }, libc::RTLD_LAZY | libc::RTLD_NOLOAD) };
    if h.is_null() {
        return None;
    }
    let mut size = DlSerinfo { dls_size: 0, dls_cnt: 0, dls_serpath: [DlSerpath { dls_name: std::ptr::null_mut(), dls_flags: 0 }] };
    let mut found = None;
    // SAFETY: RTLD_DI_SERINFOSIZE fills the dls_size and dls_cnt of the Dl_serinfo given
    // (ours), for a handle dlopen returned.
    if unsafe { libc::dlinfo(h, RTLD_DI_SERINFOSIZE, &mut size as *mut DlSerinfo as *mut libc::c_void) } == 0 && size.dls_size > 0 {
        // u64 words: Dl_serinfo's alignment.
        let mut buf = vec![0u64; (size.dls_size as usize).div_ceil(8)];
        let si = buf.as_mut_ptr() as *mut DlSerinfo;
        // SAFETY: `buf` holds dls_size bytes (at least its two leading fields), 8-aligned
        // as Dl_serinfo is; RTLD_DI_SERINFO fills that many bytes, as its manual says: the
        // dls_cnt entries, then the strings they point to, all inside `buf`.
        unsafe {
            (*si).dls_size = size.dls_size;
            (*si).dls_cnt = size.dls_cnt;
        }
        // SAFETY: as above.
        if unsafe { libc::dlinfo(h, RTLD_DI_SERINFO, si as *mut libc::c_void) } == 0 {
            // SAFETY: the dls_cnt entries the loader wrote into `buf` (as above), which
            // lives until the end of the function.
            let paths = unsafe { std::slice::from_raw_parts((*si).dls_serpath.as_ptr(), (*si).dls_cnt as usize) };
            for p in paths {
                if p.dls_name.is_null() {
                    continue;
                }
                // SAFETY: a NUL-terminated string the loader wrote into `buf` (as above).
                let mut full = unsafe { CStr::from_ptr(p.dls_name) }.to_bytes().to_vec();
                full.push(b'/');
                full.extend_from_slice(name.to_bytes());
                let Ok(full) = std::ffi::CString::new(full) else { continue };
                // SAFETY: access reads the NUL-terminated path we own.
                if unsafe { libc::access(full.as_ptr(), libc::R_OK) } == 0 {
                    found = Some(full);
                    break;
                }
            }
        }
    }
    let close = real(&REAL_DLCLOSE, c"dlclose");
    if !close.is_null() {
        // SAFETY: the next `dlclose` (dlsym RTLD_NEXT), which has this signature; `h` is the
        // reference RTLD_NOLOAD took, given back once.
        unsafe { std::mem::transmute::<*mut libc::c_void, DlcloseFn>(close)(h) };
    }
    found
}

/// `dlclose`: the real one; an object it unloaded is forgotten, so that one loaded later
/// at the same address is patched.
///
/// # Safety
/// As glibc's: `handle` is a handle `dlopen` or `dlmopen` returned, not closed since.
#[no_mangle]
pub unsafe extern "C" fn dlclose(handle: *mut libc::c_void) -> libc::c_int {
    let f = real(&REAL_DLCLOSE, c"dlclose");
    if f.is_null() {
        return -1;
    }
    // SAFETY: `f` is the next `dlclose` (dlsym RTLD_NEXT), which has this signature; `handle`
    // is the caller's, as glibc's asks (the contract).
    let r = unsafe { std::mem::transmute::<*mut libc::c_void, DlcloseFn>(f)(handle) };
    if MODE.load(Ordering::Acquire) != OFF {
        let _errno = crate::guards::ErrnoGuard::save();
        let now = loaded_objects();
        if now.complete {
            forget_unloaded(Locked::take().seen(), &now.objects);
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_libraries_and_the_c_runtime_are_told_apart() {
        assert_eq!(system_library("/usr/lib/x86_64-linux-gnu/libz.so.1.2.13"), Some("a system library"));
        assert_eq!(system_library("/lib/x86_64-linux-gnu/libc.so.6"), Some("the C runtime"));
        assert_eq!(system_library("/opt/gcc/lib64/libstdc++.so.6.0.30"), Some("the C runtime"));
        assert_eq!(system_library("/home/u/app/build/libshapes.so"), None);
        assert_eq!(system_library("/home/u/app/build/app"), None);
        assert_eq!(system_library("/usr/bin/bash"), Some("a system program"));
        assert_eq!(system_library("/usr/local/bin/mytool"), None);
        assert_eq!(system_library("/root/.cargo/bin/cargo"), Some("the Rust toolchain"));
        assert_eq!(system_library("/home/u/.cargo/bin/rg"), None, "cargo install's programs are the user's");
        assert_eq!(
            system_library("/home/u/.rustup/toolchains/stable-x86_64-unknown-linux-gnu/lib/librustc_driver-1a2b.so"),
            Some("the Rust toolchain")
        );
        assert_eq!(regex_escape("libz.so.1"), "libz\\.so\\.1");
    }
}
