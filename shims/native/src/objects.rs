//! Which objects entry patching patches, and when (patch.rs patches one object; `dlopen.rs`
//! holds the `dlopen`, `dlmopen` and `dlclose` wrappers).
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
//! Left alone by default, as the Python standard library is hidden by default: the C
//! runtime and system libraries (anything under `/lib`, `/usr/lib`, …, and libc, libm, ld.so,
//! libstdc++, libgcc_s, libpthread wherever they are), objects built with
//! `-finstrument-functions` (their hooks record them), the shim itself and the vDSO.
//! `SLICE_TRACE_PATCH=all` patches the system libraries too; a `-F NAME@OBJECT` pattern
//! whose OBJECT matches a library's file name patches that library.

use crate::guards::SpinLock;
use crate::loaded::{loaded_objects, Loaded};
use crate::{filter, patch};
use std::sync::atomic::{AtomicU8, Ordering};
use trace_format::meta::Unlisted::Late;

mod dlopen;
pub(crate) use dlopen::{slt_dlmopen, slt_dlopen};

const OFF: u8 = 0;
const ON: u8 = 1;
const ALL: u8 = 2;
/// `--native-ext`: a CPython process's extension modules only (any other process started
/// under such a run, a native program a Python script runs, is patched as with [`ON`]).
const EXT: u8 = 3;

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
    /// Its line probes (lines.rs), if it was probed for lines.
    line_probes: Option<trace_format::meta::InlineProbes>,
    /// Loaded by `dlopen` and left without lists: why (ask.rs).
    unlisted: Option<trace_format::meta::Unlisted>,
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

/// Set when the program links libtest ([`crate::output::LIBTEST_RUNNER`]).
static LIBTEST: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

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
    crate::output::resolve();
    // Unset: off (`trace` sets it for the programs it patches).
    let mode = match trace_format::patching::PatchMode::from_env() {
        Some(trace_format::patching::PatchMode::Program) => ON,
        Some(trace_format::patching::PatchMode::All) => ALL,
        Some(trace_format::patching::PatchMode::Ext) => EXT,
        Some(trace_format::patching::PatchMode::Off) | None => OFF,
    };
    // A CPython interpreter is recorded by the Python shim, except its extension modules
    // with `--native-ext`; under that mode any other process (a native program the Python
    // program starts) is patched as a native target is.
    let cpython = is_cpython();
    if mode == OFF || (cpython && mode != EXT) {
        return;
    }
    let mode = if mode == EXT && !cpython { ON } else { mode };
    crate::ask::init();
    MODE.store(mode, Ordering::Release);
    patch_new(false);
    // The probes' hit files (`inline.bin`, `lines.bin`) go into the process directory, made now
    // (outside the lock that `patch_new` took: making it writes `patch.json`).
    crate::probe::attach();
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
    if LIBTEST.load(Ordering::Acquire) {
        crate::output::open_log();
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

/// The process's executable (`/proc/self/exe`, read once).
fn program_path() -> Option<&'static str> {
    static PROGRAM: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    PROGRAM.get_or_init(|| std::fs::read_link("/proc/self/exe").ok().map(|p| p.to_string_lossy().into_owned())).as_deref()
}

/// Why the object at `path` (absolute) is left alone by default, if it is: the one rule of
/// `trace_format::objects`, which `trace` and `slice` read too (a library named after the
/// program, jq's `libjq.so.1`, is the program's own code).
pub(crate) fn system_library(path: &str) -> Option<&'static str> {
    trace_format::objects::not_the_programs(path, program_path())
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
    seen.loaded.retain(|(b, n)| {
        let kept = objects.iter().any(|o| o.base == *b && o.name == *n);
        if !kept {
            // Its inline probes too (if it had any).
            crate::probe::forget(*b);
        }
        kept
    });
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
    // From the loader's hook inside `dlopen`: the lists of the new objects of the program's own
    // are asked for first (ask.rs), with no lock of the shim held while `trace run` answers.
    let asked = if early && dlopened && mode != EXT && crate::ask::wanted() { ask_lists(&listing.objects) } else { Vec::new() };
    let mut l = Locked::take();
    let seen = l.seen();
    if early && listing.complete {
        forget_unloaded(seen, &listing.objects);
    }
    let mut added = false;
    // At start-up: the objects of the program's own patched without a list (the executable of
    // a program the recorded one started, and its libraries), asked for once the lock is
    // dropped (`ask_at_start`).
    let mut unlisted_at_start: Vec<AtStart> = Vec::new();
    let ask_at_start = !dlopened && mode != EXT && crate::ask::wanted();
    for (i, Loaded { base, name, textrel }) in listing.objects.into_iter().enumerate() {
        if seen.loaded.iter().any(|(b, n)| *b == base && *n == name) || (early && textrel) {
            continue;
        }
        seen.loaded.push((base, name.clone()));
        let program = i == 0 && name.is_empty();
        let path = if i == 0 && name.is_empty() {
            match program_path() {
                Some(p) => p.to_string(),
                None => continue,
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
        let ext = mode == EXT;
        let system = if ext { None } else { system_library(&path) };
        let skipped = match system {
            _ if ext && !trace_format::patching::is_extension_module(&path) => {
                Some("not a Python extension module (--native-ext patches only those)".to_string())
            }
            Some(why) if mode != ALL && !filter::active().is_some_and(|f| f.names_object(&file)) => {
                Some(format!("{why}; SLICE_TRACE_PATCH=all or -F 'PATTERN@{}' patches it", regex_escape(&file)))
            }
            _ => None,
        };
        let mut probes = crate::probe::Planted::default();
        let mut unlisted = None;
        let (report, skipped) = match skipped {
            Some(s) => (patch::Report::default(), Some(s)),
            None => match examine(&path, system.is_none()) {
                Ok(syms) => {
                    let report = patch::patch_object(base, &syms);
                    // The libraries patched at start-up get the probes of their lists too
                    // (`trace run` lists them), and so does one `dlopen`ed later when `trace
                    // run` listed it (asked just now: `ask_lists`) and it is patched from the
                    // loader's hook, before its code can run (after `dlopen` returned, a
                    // thread started by its constructors may be running it).
                    if !program && (!dlopened || early) {
                        probes = crate::probe::plant(base, &path, &report.moved, &report.bodies, false);
                    }
                    if dlopened && probes.inline.is_none() && probes.lines.is_none() {
                        unlisted =
                            if early { asked.iter().find(|a| a.0 == path).and_then(|a| a.1) } else { system.is_none().then_some(Late) };
                    }
                    if program {
                        note_program_main(base, &syms, &report);
                        probes = crate::probe::plant(base, &path, &report.moved, &report.bodies, true);
                        if syms.funcs.iter().any(|f| f.2.starts_with(GTEST_RUNNER)) {
                            GTEST.store(true, Ordering::Release);
                        }
                        if syms.funcs.iter().any(|f| crate::output::LIBTEST_RUNNER.iter().any(|r| f.2.contains(r))) {
                            LIBTEST.store(true, Ordering::Release);
                        }
                    }
                    if ask_at_start && system.is_none() && probes.inline.is_none() && probes.lines.is_none() && report.patched > 0 {
                        unlisted_at_start.push(AtStart {
                            report: seen.reports.len(),
                            base,
                            path: path.clone(),
                            moved: report.moved.clone(),
                            bodies: report.bodies.clone(),
                        });
                    }
                    (report, None)
                }
                Err(why) => (patch::Report::default(), Some(why.to_string())),
            },
        };
        seen.reports.push(ObjectReport { path, report, skipped, dlopened, probes: probes.inline, line_probes: probes.lines, unlisted });
        added = true;
    }
    drop(l);
    if !unlisted_at_start.is_empty() {
        list_at_start(unlisted_at_start);
    }
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

/// An object patched at start-up that had no list ([`list_at_start`]).
struct AtStart {
    /// Its index in [`Seen::reports`].
    report: usize,
    base: u64,
    path: String,
    moved: Vec<(u64, u64)>,
    bodies: Vec<(u64, u64)>,
}

/// At start-up (the constructor, before any other thread exists and before the program's code
/// runs), the objects of the program's own that were patched and found no list in the trace
/// directory: the executable of a program the recorded one started (`sh -c ./prog`, `make run`,
/// a test runner spawning the binary) and its libraries, none of which `trace run` listed
/// before the run. `trace run` is asked for their lists (ask.rs, as for a `dlopen`ed library:
/// one wait for them all, no lock of the shim held, no signal blocked), which it appends to the
/// libraries' list files; each is then planted from there as a library's (its hits get
/// `funcs.jsonl` lines, its line states a `lines-lib-<k>.bin`; `inline.bin` is the listed
/// program's). A forked child keeps its parent's probes and asks nothing (no constructor runs);
/// a system program is never patched, so never asked about.
fn list_at_start(objects: Vec<AtStart>) {
    let deadline = crate::ask::deadline();
    let answers: Vec<Option<trace_format::meta::Unlisted>> = objects.iter().map(|o| crate::ask::ask(&o.path, deadline)).collect();
    let mut l = Locked::take();
    for (o, why) in objects.into_iter().zip(answers) {
        let planted =
            if why.is_none() { crate::probe::plant(o.base, &o.path, &o.moved, &o.bodies, false) } else { crate::probe::Planted::default() };
        let Some(r) = l.seen().reports.get_mut(o.report) else { continue };
        if planted.inline.is_none() && planted.lines.is_none() {
            r.unlisted = why;
        }
        r.probes = planted.inline;
        r.line_probes = planted.lines;
    }
}

/// Ask `trace run` for the lists of the objects among `objects` that are new (not seen), have a
/// file and are the program's own (ask.rs): (path, why there is none, if it said). One wait
/// for them all: a `trace run` that does not answer holds one `dlopen` for one timeout.
fn ask_lists(objects: &[Loaded]) -> Vec<(String, Option<trace_format::meta::Unlisted>)> {
    let new: Vec<&str> = {
        let mut l = Locked::take();
        let seen = l.seen();
        objects
            .iter()
            // A file's name has a slash (`dlopen("./plugin.so")` keeps it relative); the vDSO's
            // has none.
            .filter(|o| !o.textrel && o.name.contains('/') && !seen.loaded.iter().any(|(b, n)| *b == o.base && *n == o.name))
            .map(|o| o.name.as_str())
            .collect()
    };
    let deadline = crate::ask::deadline();
    new.into_iter()
        .map(|name| std::fs::canonicalize(name).map(|p| p.to_string_lossy().into_owned()).unwrap_or_else(|_| name.to_string()))
        .filter(|path| system_library(path).is_none())
        .map(|path| {
            let why = crate::ask::ask(&path, deadline);
            (path, why)
        })
        .collect()
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
fn examine(path: &str, own_code: bool) -> Result<filter::Symbols, &'static str> {
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
    let mut syms = filter::Symbols::of(&file);
    if own_code && file.symbols().next().is_none() {
        // Stripped (only the dynamic symbols, the exported functions): the symbol table of its
        // separate debug file, when installed, names its static functions too. Only for the
        // program's own objects: a system library patched on request (`all`, `-F`) keeps to
        // its exported functions (glibc's internal ones, named by libc6-dbg, include code the
        // hooks themselves run and entries that are not ordinary functions).
        if let Some(full) = debug_file_symbols(path, &file).filter(|d| d.funcs.len() > syms.funcs.len()) {
            syms = full;
        }
    }
    if syms.funcs.is_empty() {
        return Err("no function symbols");
    }
    Ok(syms)
}

/// The function symbols of the separate debug file of the stripped object at `path`
/// (`trace_format::objects::debug_file_candidates`: by build-id, by `.gnu_debuglink`), if one
/// with the same build-id (or, without one, the debug link's) and a symbol table is there.
fn debug_file_symbols(path: &str, file: &object::File) -> Option<filter::Symbols> {
    use object::Object;
    let build_id = file.build_id().ok().flatten();
    let debuglink = file.gnu_debuglink().ok().flatten().map(|(name, _crc)| name);
    for c in trace_format::objects::debug_file_candidates(std::path::Path::new(path), build_id, debuglink) {
        let Ok(f) = std::fs::File::open(&c) else { continue };
        // Read through a cache, not mapped: a debug file truncated meanwhile fails the parse
        // instead of raising SIGBUS in the program (only its headers and symbol table are read).
        let data = object::ReadCache::new(f);
        let Ok(debug) = object::File::parse(&data) else { continue };
        if build_id.is_some() && debug.build_id().ok().flatten() != build_id {
            continue;
        }
        let syms = filter::Symbols::of(&debug);
        if !syms.funcs.is_empty() {
            return Some(syms);
        }
    }
    None
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
            line_probes: o.line_probes.clone(),
            unlisted: o.unlisted,
        });
    }
    drop(l);
    let text = serde_json::to_vec(&doc).map_err(std::io::Error::other)?;
    // Replaced whole (a reader never sees half a document).
    let tmp = dir.join(format!("{}.tmp", trace_format::meta::PATCH_FILE));
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, dir.join(trace_format::meta::PATCH_FILE))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_names_are_escaped_for_filter_patterns() {
        assert_eq!(regex_escape("libz.so.1"), "libz\\.so\\.1");
    }
}
