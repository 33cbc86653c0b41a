//! Reading what `trace run` wrote for the probes: the program's lists and the libraries'
//! (docs/trace-format.md, `inline-probes.json`, `inline-probes-libs.json`, `line-probes.json`),
//! and where an object's executable code lies.

use trace_format::meta::InlineProbeList;

/// A list file is read whole: at most this large.
const MAX_LIST: u64 = 64 << 20;

/// The program's inline or line list.
pub(super) fn read_list(file: &std::path::Path) -> Option<InlineProbeList> {
    serde_json::from_slice(&read_bytes(file)?).ok()
}

/// The lists of the libraries (`LIBRARY_INLINE_PROBES_FILE`).
pub(super) fn read_lists(file: &std::path::Path) -> Option<Vec<InlineProbeList>> {
    serde_json::from_slice(&read_bytes(file)?).ok()
}

/// A list file, whole, when it is at most [`MAX_LIST`] long.
fn read_bytes(file: &std::path::Path) -> Option<Vec<u8>> {
    use std::io::Read;
    let f = std::fs::File::open(file).ok()?;
    if f.metadata().ok()?.len() > MAX_LIST {
        return None;
    }
    let mut text = Vec::new();
    f.take(MAX_LIST).read_to_end(&mut text).ok()?;
    Some(text)
}

/// The run-time ranges of the executable `PT_LOAD` segments of the object at `base`.
///
/// # Safety
/// `base` is the first page of a loaded ELF object (its headers are mapped there).
pub(super) unsafe fn executable_ranges(base: u64) -> Vec<(u64, u64)> {
    // SAFETY: the ELF header is at `base` (the contract).
    let eh = unsafe { &*(base as *const libc::Elf64_Ehdr) };
    if eh.e_ident[..4] != *b"\x7fELF" || eh.e_phentsize as usize != std::mem::size_of::<libc::Elf64_Phdr>() {
        return Vec::new();
    }
    // SAFETY: the program headers are mapped with the first page (the loader read them there).
    let ph = unsafe { std::slice::from_raw_parts((base + eh.e_phoff) as *const libc::Elf64_Phdr, eh.e_phnum as usize) };
    let loads = || ph.iter().filter(|p| p.p_type == libc::PT_LOAD);
    let Some(bias) = loads().map(|p| p.p_vaddr & !0xfff).min() else { return Vec::new() };
    loads().filter(|p| p.p_flags & libc::PF_X != 0).map(|p| (base + (p.p_vaddr - bias), base + (p.p_vaddr - bias) + p.p_memsz)).collect()
}
