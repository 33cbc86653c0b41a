//! The shim's `dlopen`, `dlmopen` and `dlclose`: the real ones, then the new objects are
//! patched (objects.rs), or the unloaded ones forgotten. The exported `dlopen` and `dlmopen`
//! are each architecture's entry points (`arch/<name>/dlopen.rs`), which pass the caller's
//! return address on to [`slt_dlopen`] and [`slt_dlmopen`].
//!
//! glibc's `dlopen` searches a bare name (`libfoo.so`) with the *caller's* `DT_RUNPATH`; our
//! wrapper is the caller the real `dlopen` sees, so when that fails the wrapper searches the
//! real caller's paths (`dlinfo(RTLD_DI_SERINFO)` of the caller's object) and opens the file
//! it finds.

use super::{forget_unloaded, patch_new, Locked, MODE, OFF};
use crate::loaded::loaded_objects;
use crate::patch;
use std::ffi::CStr;
use std::sync::atomic::{AtomicPtr, Ordering};

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

/// `dlopen(filename, flags)`, called from `caller`: the real one, then patching.
///
/// # Safety
/// As `dlopen`'s: `filename` is null or a NUL-terminated string. Reached only from the
/// architecture's `dlopen` entry (`arch/<name>/dlopen.rs`), which passes its caller's return
/// address as `caller`.
pub(crate) unsafe extern "C" fn slt_dlopen(filename: *const libc::c_char, flags: libc::c_int, caller: u64) -> *mut libc::c_void {
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

type DlmopenFn = unsafe extern "C" fn(libc::c_long, *const libc::c_char, libc::c_int) -> *mut libc::c_void;
static REAL_DLMOPEN: AtomicPtr<libc::c_void> = AtomicPtr::new(std::ptr::null_mut());

/// `dlmopen(lmid, filename, flags)`, called from `caller`: the real one, then patching (the
/// new objects are found in their namespace by [`crate::loaded`]).
///
/// # Safety
/// As `dlmopen`'s: `filename` is null or a NUL-terminated string. Reached only from the
/// architecture's `dlmopen` entry (`arch/<name>/dlopen.rs`), which passes its caller's return
/// address as `caller`.
pub(crate) unsafe extern "C" fn slt_dlmopen(
    lmid: libc::c_long,
    filename: *const libc::c_char,
    flags: libc::c_int,
    caller: u64,
) -> *mut libc::c_void {
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
