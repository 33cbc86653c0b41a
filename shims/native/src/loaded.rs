//! Which objects are loaded, in every link-map namespace (objects.rs patches them).
//!
//! `dl_iterate_phdr` lists only the objects of its caller's namespace: glibc reports the
//! namespace of the code that calls it, and the shim lives in the base namespace, where
//! `LD_PRELOAD` put it. A library that `dlmopen` loads into a namespace of its own (with its
//! own copies of its dependencies, libc included) is found through the loader's debugger
//! interface instead, which gdb reads too: from glibc 2.35, `_r_debug.r_version` is 2 once a
//! second namespace exists, and `_r_debug` is then the head of a list (`struct
//! r_debug_extended`'s `r_next`) of every namespace's `r_debug`, each with its `r_state` and
//! its list of `link_map`s. A namespace whose list the loader is changing (`r_state` is not
//! `RT_CONSISTENT`: a `dlmopen` mapping objects into it, a `dlclose` removing some) is left
//! out, and the listing says that it is not complete (then nothing is forgotten from it).
//! With an older glibc (`r_version` 1 whatever `dlmopen` did), only the base namespace is
//! listed.

use std::ffi::CStr;

/// glibc's `struct r_debug` (<link.h>); from glibc 2.35 the first member of `struct
/// r_debug_extended`, followed by `r_next`.
#[repr(C)]
pub(crate) struct RDebug {
    pub(crate) r_version: i32,
    r_map: *const LinkMap,
    pub(crate) r_brk: u64,
    pub(crate) r_state: i32,
    r_ldbase: u64,
}

/// glibc's `struct r_debug_extended` (<link.h>, glibc 2.35 and later; `r_version` 2).
#[repr(C)]
struct RDebugExtended {
    base: RDebug,
    r_next: *const RDebugExtended,
}

/// The public part of glibc's `struct link_map` (<link.h>), the same in every version.
#[repr(C)]
struct LinkMap {
    l_addr: u64,
    l_name: *const libc::c_char,
    l_ld: *const ElfDyn,
    l_next: *const LinkMap,
    l_prev: *const LinkMap,
}

const _: () = assert!(std::mem::size_of::<RDebug>() == 40 && std::mem::offset_of!(RDebug, r_state) == 24);
const _: () = assert!(std::mem::offset_of!(RDebugExtended, r_next) == 40);
const _: () = assert!(std::mem::size_of::<LinkMap>() == 40 && std::mem::offset_of!(LinkMap, l_ld) == 16);

/// `RT_CONSISTENT`: the objects in a namespace's list are mapped (and, after a `dlclose`, the
/// unloaded ones are gone).
pub(crate) const RT_CONSISTENT: i32 = 0;

/// Bounds on damaged lists: glibc has 16 namespaces (`DL_NNS`).
const MAX_NAMESPACES: usize = 256;
const MAX_OBJECTS: usize = 1 << 16;

/// The loader's `_r_debug`, if it exports one.
pub(crate) fn r_debug() -> *const RDebug {
    // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name only reads the loader's tables.
    unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"_r_debug".as_ptr()) as *const RDebug }
}

/// A loaded object: load address of its first page, name as the loader gives it ("" for the
/// program), and whether relocating it writes into its code (`DT_TEXTREL`).
pub(crate) struct Loaded {
    pub(crate) base: u64,
    pub(crate) name: String,
    pub(crate) textrel: bool,
}

/// The loaded objects: the base namespace's first (the program first of all), then the
/// other namespaces'. `complete`: no namespace was left out because it was being changed.
pub(crate) struct Listing {
    pub(crate) objects: Vec<Loaded>,
    pub(crate) complete: bool,
}

pub(crate) fn loaded_objects() -> Listing {
    let mut objects = base_namespace();
    // SAFETY: `_r_debug` is the loader's static struct, alive for the whole process.
    let complete = unsafe { other_namespaces(r_debug(), &mut objects) };
    Listing { objects, complete }
}

/// The base namespace's objects, from `dl_iterate_phdr`.
fn base_namespace() -> Vec<Loaded> {
    extern "C" fn visit(info: *mut libc::dl_phdr_info, _size: libc::size_t, data: *mut libc::c_void) -> libc::c_int {
        // SAFETY: the loader passes a valid dl_phdr_info for the duration of the call, its
        // program headers and name included (and the object's mapped dynamic section);
        // `data` is the Vec that base_namespace passed.
        unsafe {
            let out = &mut *(data as *mut Vec<Loaded>);
            let info = &*info;
            let name = if info.dlpi_name.is_null() { String::new() } else { CStr::from_ptr(info.dlpi_name).to_string_lossy().into_owned() };
            let phdrs =
                if info.dlpi_phdr.is_null() { &[][..] } else { std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) };
            let textrel = phdrs
                .iter()
                .find(|p| p.p_type == libc::PT_DYNAMIC)
                .is_some_and(|p| textrel(info.dlpi_addr.wrapping_add(p.p_vaddr) as *const ElfDyn));
            if let Some(first) = phdrs.iter().filter(|p| p.p_type == libc::PT_LOAD).map(|p| p.p_vaddr).min() {
                out.push(Loaded { base: info.dlpi_addr.wrapping_add(first & !0xfff), name, textrel });
            }
        }
        0
    }
    let mut out: Vec<Loaded> = Vec::new();
    // SAFETY: the callback only reads the loader's data and pushes to `out`.
    unsafe { libc::dl_iterate_phdr(Some(visit), &mut out as *mut Vec<Loaded> as *mut libc::c_void) };
    out
}

/// Append the objects of every namespace but the base one, from the loader's list of
/// namespaces (`r_version` 2); false if a namespace was left out because it is being changed.
///
/// # Safety
/// `r` is null or the loader's `_r_debug` (or, in the tests, a list laid out as the loader's).
unsafe fn other_namespaces(r: *const RDebug, out: &mut Vec<Loaded>) -> bool {
    // SAFETY: `r` is the loader's `_r_debug` (the contract), static, its `r_version` an int
    // the loader may be writing (hence the volatile read).
    if r.is_null() || unsafe { std::ptr::read_volatile(std::ptr::addr_of!((*r).r_version)) } < 2 {
        return true;
    }
    let mut complete = true;
    // SAFETY: version 2: `_r_debug` is the head of an `r_debug_extended` list (glibc 2.35).
    let mut ns = unsafe { std::ptr::read_volatile(std::ptr::addr_of!((*(r as *const RDebugExtended)).r_next)) };
    for _ in 0..MAX_NAMESPACES {
        if ns.is_null() {
            break;
        }
        // SAFETY: `ns` is a namespace's `r_debug_extended` from the loader's list, which the
        // loader never frees (one static per namespace).
        if unsafe { std::ptr::read_volatile(std::ptr::addr_of!((*ns).base.r_state)) } != RT_CONSISTENT {
            complete = false;
        } else {
            // SAFETY: as above.
            let mut l = unsafe { std::ptr::read_volatile(std::ptr::addr_of!((*ns).base.r_map)) };
            for _ in 0..MAX_OBJECTS {
                if l.is_null() {
                    break;
                }
                // SAFETY: `l` is a `link_map` of a namespace whose list was consistent when
                // `r_state` was read (its objects mapped and linked). From the loader's hook
                // this thread holds the loader's lock, so it stays so. After `dlopen` or
                // `dlclose` returns it does not: a `dlclose` that another thread starts now
                // could unlink and free an object read here: a race the shim does not close
                // (it cannot take the loader's lock), only as wide as a `dlclose` on one thread
                // racing another thread's `dlopen` or `dlclose` return.
                if let Some(o) = unsafe { from_link_map(&*l) } {
                    out.push(o);
                }
                // SAFETY: as above.
                l = unsafe { (*l).l_next };
            }
        }
        // SAFETY: `ns` as above.
        ns = unsafe { (*ns).r_next };
    }
    complete
}

/// An object of another namespace: its name from the loader, its first page from `dladdr`
/// on its dynamic section (glibc's `dladdr` looks in every namespace). `None` for an object
/// without a name or a dynamic section (the vDSO has a name without a `/`, left alone later).
///
/// # Safety
/// `l` is a `link_map` of a consistent namespace list.
unsafe fn from_link_map(l: &LinkMap) -> Option<Loaded> {
    if l.l_name.is_null() || l.l_ld.is_null() {
        return None;
    }
    // SAFETY: a consistent `link_map`'s `l_name` is a NUL-terminated string the loader keeps
    // while the object is loaded.
    let name = unsafe { CStr::from_ptr(l.l_name) }.to_string_lossy().into_owned();
    if name.is_empty() {
        return None;
    }
    // SAFETY: `Dl_info` is a plain C struct of pointers: all zeros is a value.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr only reads the loader's tables and fills the Dl_info we own.
    if unsafe { libc::dladdr(l.l_ld as *const libc::c_void, &mut info) } == 0 || info.dli_fbase.is_null() {
        return None;
    }
    // SAFETY: a consistent `link_map`'s `l_ld` is its object's mapped dynamic section.
    Some(Loaded { base: info.dli_fbase as u64, name, textrel: unsafe { textrel(l.l_ld) } })
}

/// `Elf64_Dyn` (<elf.h>; not in the libc crate): a tag and its value or address.
#[repr(C)]
pub(crate) struct ElfDyn {
    d_tag: i64,
    d_un: u64,
}

const _: () = assert!(std::mem::size_of::<ElfDyn>() == 16);

/// Whether the dynamic section at `dynamic` (mapped, `DT_NULL`-terminated) asks for text
/// relocations: `DT_TEXTREL`, or `DF_TEXTREL` in `DT_FLAGS`.
///
/// # Safety
/// `dynamic` points to a mapped, `DT_NULL`-terminated dynamic section.
unsafe fn textrel(mut dynamic: *const ElfDyn) -> bool {
    const DT_TEXTREL: i64 = 22;
    const DT_FLAGS: i64 = 30;
    const DF_TEXTREL: u64 = 4;
    // A bound on a damaged section.
    for _ in 0..4096 {
        // SAFETY: an entry of the section (the contract): the loop stops at its DT_NULL.
        let d = unsafe { &*dynamic };
        match d.d_tag {
            0 => return false,
            DT_TEXTREL => return true,
            DT_FLAGS if d.d_un & DF_TEXTREL != 0 => return true,
            _ => {}
        }
        // SAFETY: `d` was not the DT_NULL that ends the section, so an entry follows it.
        dynamic = unsafe { dynamic.add(1) };
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A namespace list built by hand: the base `r_debug` (version 2), a namespace being
    /// changed and a consistent one with two objects, the first without a name.
    #[test]
    fn other_namespaces_are_read_from_the_loaders_list_and_a_changing_one_is_left_out() {
        // Dynamic sections of this test's own objects are not needed: a DT_NULL-only one,
        // inside this test binary (so dladdr finds the test executable for it).
        static DYN: [ElfDyn; 1] = [ElfDyn { d_tag: 0, d_un: 0 }];
        let lib = c"/opt/app/libplugin.so";
        let second = LinkMap { l_addr: 0, l_name: lib.as_ptr(), l_ld: DYN.as_ptr(), l_next: std::ptr::null(), l_prev: std::ptr::null() };
        let first = LinkMap { l_addr: 0, l_name: c"".as_ptr(), l_ld: DYN.as_ptr(), l_next: &second, l_prev: std::ptr::null() };
        let rd = |version, state, map: *const LinkMap, next| RDebugExtended {
            base: RDebug { r_version: version, r_map: map, r_brk: 0, r_state: state, r_ldbase: 0 },
            r_next: next,
        };
        let consistent = rd(1, RT_CONSISTENT, &first, std::ptr::null());
        let changing = rd(1, 1, &first, &consistent);
        let base = rd(2, RT_CONSISTENT, std::ptr::null(), &changing);
        let mut out = Vec::new();
        // SAFETY: a list of structs that live for the whole call.
        let complete = unsafe { other_namespaces(&base.base, &mut out) };
        assert!(!complete);
        let names: Vec<&str> = out.iter().map(|o| o.name.as_str()).collect();
        assert_eq!(names, ["/opt/app/libplugin.so"]);
        // SAFETY: `Dl_info` is a plain C struct of pointers: all zeros is a value.
        let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
        // SAFETY: dladdr fills the Dl_info we own.
        assert_ne!(unsafe { libc::dladdr(DYN.as_ptr() as *const libc::c_void, &mut info) }, 0);
        assert_eq!(out[0].base, info.dli_fbase as u64);
        assert!(!out[0].textrel);
        // Version 1 (glibc before 2.35, or no second namespace): its r_next is not read.
        let old = rd(1, RT_CONSISTENT, std::ptr::null(), &consistent);
        let mut out = Vec::new();
        // SAFETY: as above.
        assert!(unsafe { other_namespaces(&old.base, &mut out) });
        assert!(out.is_empty());
    }

    #[test]
    fn text_relocations_are_seen_in_the_dynamic_section() {
        let plain = [ElfDyn { d_tag: 1, d_un: 5 }, ElfDyn { d_tag: 0, d_un: 0 }];
        let tagged = [ElfDyn { d_tag: 22, d_un: 0 }, ElfDyn { d_tag: 0, d_un: 0 }];
        let flagged = [ElfDyn { d_tag: 30, d_un: 4 }, ElfDyn { d_tag: 0, d_un: 0 }];
        // SAFETY: DT_NULL-terminated arrays.
        unsafe {
            assert!(!textrel(plain.as_ptr()));
            assert!(textrel(tagged.as_ptr()));
            assert!(textrel(flagged.as_ptr()));
        }
    }
}
