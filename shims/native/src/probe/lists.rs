//! Where an object's executable code lies (the lists `trace run` wrote for the probes are
//! read by `trace_format::probes`).

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
