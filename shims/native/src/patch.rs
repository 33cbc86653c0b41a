//! Entry patching of ordinary builds: the program and its libraries, at start-up and after
//! each `dlopen` (objects.rs decides which objects and when; this file patches one object).
//! See docs/native-recording.md for the design and what is missing.
//!
//! Every function symbol of an object's `.symtab` (else `.dynsym`) is considered, minus
//! `.cold` fragments and the C runtime's own start-up functions. The architecture
//! ([`crate::arch`]) plans each entry: which first instructions move out of it into a
//! trampoline, or why it is refused; a function shorter than the jump written over its entry
//! is planned with the padding up to the next function's start ([`PADDING_MAX`]). This file
//! maps the object's trampolines in one area within the jump's reach, has the architecture
//! lay each one out, makes the area executable, registers the patched entries' CFA with
//! frames.rs and writes the jumps over the entries, one `mprotect` pair per run of touching
//! pages. The trampoline's stub calls [`slt_patched_enter`]. No return address is touched:
//! returns are rebuilt by the frame repair (frames.rs).

use crate::arch::{Isa, Native};
use crate::frames;

/// Why a function was not patched. Each architecture refuses with some of these: x86-64
/// never as `Unsupported`, AArch64 only so.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(dead_code, reason = "each architecture constructs only the refusals it has")]
pub(crate) enum Refusal {
    TooShort,
    Undecodable,
    NotPlainPrologue,
    JumpTarget,
    RuntimeStartup,
    ColdFragment,
    TooLong,
    /// `mprotect` refused to make its entry's page writable or its trampoline executable (a
    /// W^X policy: SELinux `execmod`, PaX): left as it was, and said so.
    Protection,
    /// The architecture has no entry patching (every function of every object).
    Unsupported,
}

/// Sets this thread's patch guard while alive (patched functions called meanwhile are not
/// recorded: the shim's own calls while it patches or reports), and puts the old value back.
pub(crate) struct Guard(u8);

impl Guard {
    pub(crate) fn set() -> Guard {
        Guard(Native::guard_swap(1))
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        Native::guard_swap(self.0);
    }
}

/// Called by the architecture's stub: the entry of the patched function `func`, whose stack
/// pointer at entry was `sp` (its CFA is `sp + Isa::ENTRY_CFA`, registered with frames.rs
/// when it was patched).
#[allow(dead_code, reason = "called by the stub of an architecture with entry patching, by nothing where it has none")]
pub(crate) extern "C" fn slt_patched_enter(func: u64, sp: u64) {
    // SAFETY: hot.c's entry point; it only touches this thread's block.
    unsafe { crate::hot::slt_enter(func as *mut libc::c_void, sp) }
}

impl Refusal {
    pub(crate) fn as_str(self) -> &'static str {
        if let Some(text) = Native::refusal_text(self) {
            return text;
        }
        match self {
            Refusal::TooShort => "shorter than the jump written over its entry",
            Refusal::Undecodable => "undecodable",
            Refusal::NotPlainPrologue => "an instruction in its first bytes that cannot be moved",
            Refusal::JumpTarget => "a jump target in its first bytes",
            Refusal::RuntimeStartup => "C runtime start-up",
            Refusal::ColdFragment => "a .cold fragment, not an entry",
            Refusal::TooLong => "no room for its trampoline",
            Refusal::Protection => "its code page cannot be made writable, or its trampoline executable (mprotect refused)",
            Refusal::Unsupported => "entry patching is not supported on this architecture",
        }
    }
}

/// Counts of one object's patching.
#[derive(Debug, Default, Clone)]
pub(crate) struct Report {
    pub patched: usize,
    pub refused: Vec<(String, Refusal)>,
    /// (entry, end of the bytes moved to its trampoline) of each function planned: code
    /// there runs from the trampoline's copy (probe.rs plants no probe in it).
    pub moved: Vec<(u64, u64)>,
    /// (entry, end) of each function whose entry was written: its body runs only after its
    /// entry ran (probe.rs plants the inline probes inside it at its first call).
    pub bodies: Vec<(u64, u64)>,
}

/// Set up once, before the first object is patched (the stub's choice of registers, which
/// reads the CPU's features: slow under a hypervisor). Called by [`patch_object`], so that a
/// process that patches nothing (a system program a script starts) never pays for it; the
/// stub runs only from an entry written after it.
fn init() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(Native::init);
}

/// How far past a function a short function's plan looks for padding: at most the largest
/// alignment compilers give functions.
const PADDING_MAX: u64 = 64;

/// The C runtime's start-up and tear-down functions, never patched.
fn is_runtime<I: Isa>(name: &str) -> bool {
    const NAMES: [&str; 8] = [
        "_start",
        "_init",
        "_fini",
        "deregister_tm_clones",
        "register_tm_clones",
        "__do_global_dtors_aux",
        "frame_dummy",
        "_dl_relocate_static_pie",
    ];
    NAMES.contains(&name) || name.starts_with("__libc_csu") || I::runtime_helper(name)
}

/// Whether this process has entry-patched functions: only their frames close without an exit
/// event (a `-finstrument-functions` build's exits close its own), so only then do threads
/// watch open frames' return-address slots (hot.c `top_slot_reused`; `thread::start_thread`).
static PATCHED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// [`PATCHED`].
pub(crate) fn any_patched() -> bool {
    PATCHED.load(std::sync::atomic::Ordering::Relaxed)
}

/// Patch the functions of the object loaded at `base` (its first page: symbol offsets count
/// from there), whose symbols are `syms`. Its code must not be running in another thread:
/// objects.rs calls this from the constructor (one thread) and right after `dlopen` loaded
/// the object (its code ran only in its constructors, on this thread, which returned).
pub(crate) fn patch_object(base: u64, syms: &crate::filter::Symbols) -> Report {
    init();
    patch_object_with::<Native>(base, syms)
}

/// [`patch_object`] with the architecture `I` (tests run another architecture's refusals).
pub(crate) fn patch_object_with<I: Isa>(base: u64, syms: &crate::filter::Symbols) -> Report {
    let jump_len = I::PATCH_LEN as u64;
    let mut report = Report::default();
    let mut plans = Vec::new();
    for (k, (off, size, name)) in syms.funcs.iter().enumerate() {
        if name.contains(".cold") {
            report.refused.push((name.clone(), Refusal::ColdFragment));
            continue;
        }
        if is_runtime::<I>(name) {
            report.refused.push((name.clone(), Refusal::RuntimeStartup));
            continue;
        }
        let addr = base + off;
        let planned = if *size < jump_len {
            // The next function's start bounds the padding (symbols are sorted by start).
            match syms.funcs[k + 1..].iter().map(|f| f.0).find(|&o| o > *off) {
                Some(next) if next - off >= jump_len && next - off <= PADDING_MAX => {
                    // SAFETY: the bytes up to the next function's start lie in the object's
                    // mapped, readable text (between two functions of one text section).
                    let code = unsafe { std::slice::from_raw_parts(addr as *const u8, (next - off) as usize) };
                    I::plan_short(code, *size as usize, addr)
                }
                _ => Err(Refusal::TooShort),
            }
        } else {
            // SAFETY: the symbol lies in the program's mapped, readable text.
            let code = unsafe { std::slice::from_raw_parts(addr as *const u8, *size as usize) };
            I::plan(code, addr)
        };
        match planned {
            Ok(moved) => plans.push((addr, name, moved, addr + size)),
            Err(r) => report.refused.push((name.clone(), r)),
        }
    }
    if plans.is_empty() {
        return report;
    }
    let lo = plans.iter().map(|p| p.0).min().unwrap_or(base);
    let hi = plans.iter().map(|p| p.0).max().unwrap_or(base);
    let size = (plans.len() * I::SLOT).next_multiple_of(4096);
    let Some(area) = alloc_near(lo, hi, size, I::REACH) else {
        for (_, name, _, _) in &plans {
            report.refused.push((name.to_string(), Refusal::TooLong));
        }
        return report;
    };
    let mut patches = Vec::new();
    for (k, (addr, name, moved, end)) in plans.iter().enumerate() {
        let tramp = area + (k * I::SLOT) as u64;
        match I::trampoline(*addr, moved, tramp) {
            Ok((t, jmp)) => {
                report.moved.push((*addr, addr + I::moved_len(moved) as u64));
                // SAFETY: the slot lies in the area just mapped writable, SLOT bytes each
                // (the architecture keeps a trampoline within its slot; `min` makes sure).
                unsafe { std::ptr::copy_nonoverlapping(t.as_ptr(), tramp as *mut u8, t.len().min(I::SLOT)) };
                patches.push((*addr, jmp, ((*name).clone(), *end)));
            }
            Err(r) => report.refused.push(((*name).clone(), r)),
        }
    }
    // SAFETY: the area was mapped by alloc_near with `size` bytes.
    if unsafe { libc::mprotect(area as *mut libc::c_void, size, libc::PROT_READ | libc::PROT_EXEC) } != 0 {
        // Trampolines that cannot run: no entry may jump to them.
        report.refused.extend(patches.into_iter().map(|p| (p.2 .0, Refusal::Protection)));
        // SAFETY: unmapping the area mapped above, which nothing refers to.
        unsafe { libc::munmap(area as *mut libc::c_void, size) };
        return report;
    }
    I::code_written(area, size);
    PATCHED.store(true, std::sync::atomic::Ordering::Relaxed);
    frames::set_cfa_offsets(&patches.iter().map(|p| p.0).collect::<Vec<_>>(), I::ENTRY_CFA);
    frames::set_extents(&patches.iter().map(|p| (p.0, p.2 .1)).collect::<Vec<_>>());
    patches.sort_unstable_by_key(|p| p.0);
    for run in page_runs(&patches, jump_len) {
        let (page, end) = (run[0].0 & !4095, (run[run.len() - 1].0 + jump_len).next_multiple_of(4096));
        // SAFETY: every page of [page, end) holds the entry of a function patched here (runs
        // join only pages that touch), so all are the object's text, readable and executable;
        // they are made writable only while the entries are replaced, then executable again.
        // No other thread runs this object's code yet (see above), except one its own
        // constructors started before `dlopen` returned: that one could run an entry while
        // its first bytes are replaced (not guarded against).
        unsafe {
            if libc::mprotect(page as *mut libc::c_void, (end - page) as usize, libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC) != 0 {
                report.refused.extend(run.iter().map(|p| (p.2 .0.clone(), Refusal::Protection)));
                continue;
            }
            for (addr, jmp, _) in run {
                let jmp = jmp.as_ref();
                std::ptr::copy_nonoverlapping(jmp.as_ptr(), *addr as *mut u8, jmp.len());
            }
            libc::mprotect(page as *mut libc::c_void, (end - page) as usize, libc::PROT_READ | libc::PROT_EXEC);
        }
        I::code_written(page, (end - page) as usize);
        report.patched += run.len();
        report.bodies.extend(run.iter().map(|p| (p.0, p.2 .1)));
    }
    report
}

/// `patches` (sorted by address) cut into runs whose entries' pages touch: a run's pages all
/// hold a patched entry, so one `mprotect` each way covers it (one pair per run instead of per
/// function: 14,463 functions of the `slice` binary took 28,926 calls).
/// `len` is the jump's length.
fn page_runs<J, T>(patches: &[(u64, J, T)], len: u64) -> impl Iterator<Item = &[(u64, J, T)]> {
    let last_page = move |p: &(u64, J, T)| (p.0 + len - 1) & !4095;
    patches.chunk_by(move |a, b| b.0 & !4095 <= last_page(a) + 4096)
}

/// Map `size` bytes, readable and writable, within `reach` of every address in `[lo, hi]`
/// (`Isa::REACH`).
pub(crate) fn alloc_near(lo: u64, hi: u64, size: usize, reach: u64) -> Option<u64> {
    let fits = |a: u64| a.abs_diff(lo) < reach && (a + size as u64).abs_diff(hi) < reach;
    let mut hint = (hi + (1 << 20)) & !0xffff;
    for _ in 0..64 {
        // SAFETY: an anonymous private mapping at a hint (not MAP_FIXED: nothing is replaced).
        let p = unsafe {
            libc::mmap(hint as *mut libc::c_void, size, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0)
        };
        if p != libc::MAP_FAILED {
            if fits(p as u64) {
                return Some(p as u64);
            }
            // SAFETY: unmapping what we just mapped.
            unsafe { libc::munmap(p, size) };
        }
        hint += 16 << 20;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Entries whose pages touch share one `mprotect` pair; a page with no entry between two
    /// entries splits them (it could be another segment's).
    #[test]
    fn entries_on_touching_pages_are_written_in_one_run() {
        let p = |a: u64| (a, [0u8; 5], ());
        // 0x1ffe's jump ends on page 0x2000, which 0x2100 shares; 0x3000 touches 0x2000;
        // 0x5000 is two pages on.
        let patches = [p(0x1000), p(0x1ffe), p(0x2100), p(0x3000), p(0x5000), p(0x5010)];
        let runs: Vec<Vec<u64>> = page_runs(&patches, 5).map(|r| r.iter().map(|x| x.0).collect()).collect();
        assert_eq!(runs, vec![vec![0x1000, 0x1ffe, 0x2100, 0x3000], vec![0x5000, 0x5010]]);
        let far = [p(0x1000), p(0x3000)];
        assert_eq!(page_runs(&far, 5).count(), 2, "page 0x2000 holds no entry");
    }
}
