//! AArch64: no entry patching. Every function is refused with "entry patching is not
//! supported on aarch64", through the same interface as x86-64's, so `patch.json`, `trace
//! info` and `slice`'s "nothing was recorded" say why; `-finstrument-functions` builds are
//! recorded by their hooks as on every architecture. Frame repair is off (no stack pointer is
//! read: [`Isa::stack_pointer`] gives 0, as before this module existed). No inline probes:
//! [`Isa::TRAP`] is empty ("inline probes are not supported on aarch64"), so `probe::plant`
//! plants nothing (no trap, no `SIGTRAP` handler, no `inline_probes` in `patch.json`, as
//! before probes existed).
//!
//! What a port puts here (uftrace's `arch/aarch64/` does these):
//! - `stack_pointer`: `mov x, sp`; the CFA rule holds (the stack grows down; `sp` before `bl`
//!   is the CFA, so `ENTRY_CFA` is 0; AArch64 keeps `sp` 16-byte aligned). The unwinder
//!   measurement works unchanged (`.eh_frame` exists on AArch64 Linux).
//! - `plan`/`trampoline`: instructions are 4 bytes; a `b` reaches ±128 MiB, so trampolines
//!   must be within that range (or the patch is `adrp x16; add x16; br x16`, 12 bytes, when the
//!   first three instructions do not use x16/x17 and are not branch targets); PC-relative
//!   instructions (`adr`, `adrp`, `ldr literal`, `b.cond`, `cbz`, `tbz`, `bl`) must be
//!   rewritten, which iced-x86 does not do (a decoder such as `yaxpeax-arm` plus a
//!   hand-written rewriter for those few forms).
//! - `code_written`: instruction-cache maintenance (`__clear_cache`) after each write.
//! - the stub: save x0-x18, x30 and q0-q31 (the AAPCS64 caller-saved state), the guard byte in
//!   initial-exec TLS (`tpidr_el0`).
//! - `hook_site`/`hook_jump`: glibc's `_dl_debug_state` is a lone `ret` (or `bti c; ret`).
//! - the clock is in hot.c (`cntvct_el0`, with `cntfrq_el0` for the rate).
//! - inline probes: `TRAP` is `brk #0` (`00 00 20 d4`, 4 bytes; entries of inlined code are
//!   instruction starts, so 4-aligned and never across a page), raising `SIGTRAP` with
//!   `si_code` `TRAP_BRKPT` (1); the kernel leaves the pc at the `brk` (`trap_pc` is
//!   `uc_mcontext.pc` itself), `trap_sp` is `uc_mcontext.sp`, `set_trap_pc` writes
//!   `uc_mcontext.pc`; `code_written` must run after each trap is written (and probe.rs's
//!   restore through `/proc/self/mem`, which the kernel's `copy_to_user_page` keeps coherent,
//!   or after its `mprotect` fallback).

#[cfg(target_arch = "aarch64")]
mod dlopen;

use crate::arch::Isa;
use crate::patch::Refusal;
use std::cell::Cell;
use std::convert::Infallible;

/// AArch64 (AAPCS64, Linux).
pub(crate) struct Aarch64;

/// What every function of every object is refused with.
const UNSUPPORTED: &str = "entry patching is not supported on aarch64";

thread_local! {
    /// The guard byte: kept per thread as the interface asks (no stub reads it here).
    static GUARD: Cell<u8> = const { Cell::new(0) };
}

impl Isa for Aarch64 {
    /// Nothing is ever moved: no plan exists.
    type Moved = Infallible;
    /// A `b` (one instruction).
    type EntryJump = [u8; 4];

    const PATCH_LEN: usize = 4;
    /// No trampolines: nothing is planned.
    const SLOT: usize = 0;
    /// A `b`'s ±128 MiB.
    const REACH: u64 = 1 << 27;
    /// `bl` keeps the return address in x30: the stack pointer at entry is the CFA.
    const ENTRY_CFA: u32 = 0;
    /// The loader's hook is never replaced: nothing is read.
    const HOOK_READ: usize = 0;
    /// Empty: inline probes are not supported on aarch64; none is planted.
    const TRAP: &'static [u8] = &[];
    /// `TRAP_BRKPT`, what a port's `brk` raises (no trap is ever written here).
    const TRAP_SI_CODE: i32 = 1;

    fn refusal_text(r: Refusal) -> Option<&'static str> {
        (r == Refusal::Unsupported).then_some(UNSUPPORTED)
    }

    fn init() {}

    fn plan(_code: &[u8], _ip: u64) -> Result<Infallible, Refusal> {
        Err(Refusal::Unsupported)
    }

    fn plan_short(_code: &[u8], _len: usize, _ip: u64) -> Result<Infallible, Refusal> {
        Err(Refusal::Unsupported)
    }

    fn moved_len(moved: &Infallible) -> usize {
        match *moved {}
    }

    fn trampoline(_func: u64, moved: &Infallible, _slot: u64) -> Result<(Vec<u8>, [u8; 4]), Refusal> {
        match *moved {}
    }

    /// Never reached: no code is written (a port calls `__clear_cache` here).
    fn code_written(_addr: u64, _len: usize) {}

    fn guard_swap(new: u8) -> u8 {
        GUARD.with(|g| g.replace(new))
    }

    /// Not read: no frame is repaired (see the module's notes).
    #[inline(always)]
    fn stack_pointer() -> u64 {
        0
    }

    fn runtime_helper(_name: &str) -> bool {
        false
    }

    fn hook_site(_code: &[u8], _at: u64) -> bool {
        false
    }

    fn hook_jump(_site: u64, _area: u64, _handler: u64) -> Option<(Vec<u8>, [u8; 4])> {
        None
    }

    /// No trap is written here (empty `TRAP`): no `SIGTRAP` is one of ours, and 0 is the
    /// address of no probe (a port reads `uc_mcontext.pc`).
    fn trap_pc(_uc: &libc::ucontext_t) -> u64 {
        0
    }

    /// Not read: no probe fires (a port reads `uc_mcontext.sp`).
    fn trap_sp(_uc: &libc::ucontext_t) -> u64 {
        0
    }

    /// Never called: no probe fires (a port writes `uc_mcontext.pc`).
    fn set_trap_pc(_uc: &mut libc::ucontext_t, _pc: u64) {}
}

#[cfg(test)]
mod tests {
    use super::Aarch64;
    use crate::arch::Isa;
    use crate::patch::{patch_object_with, Refusal};

    /// Compiled on every host: the generic patching of an object, run with this module,
    /// refuses every entry for the one reason, and writes nothing.
    #[test]
    fn every_function_is_refused_as_not_supported_through_the_same_interface() {
        // Code of three functions (any bytes: nothing is decoded), the first shorter than a
        // `b` followed by padding, then a `.cold` fragment and the C runtime's `_start`.
        let text = [0xd6u8, 0x5f, 0x03, 0xc0, 0x1f, 0x20, 0x03, 0xd5].repeat(8);
        let before = text.clone();
        let funcs = [(0, 2, "short"), (8, 16, "f"), (24, 8, "g"), (32, 8, "f.cold"), (40, 8, "_start")];
        let syms = crate::filter::Symbols { funcs: funcs.iter().map(|&(o, s, n)| (o, s, n.to_string())).collect() };
        let report = patch_object_with::<Aarch64>(text.as_ptr() as u64, &syms);
        assert_eq!(report.patched, 0);
        let refused: Vec<(&str, Refusal)> = report.refused.iter().map(|(n, r)| (n.as_str(), *r)).collect();
        assert_eq!(
            refused,
            [
                ("short", Refusal::Unsupported),
                ("f", Refusal::Unsupported),
                ("g", Refusal::Unsupported),
                ("f.cold", Refusal::ColdFragment),
                ("_start", Refusal::RuntimeStartup)
            ]
        );
        assert_eq!(Aarch64::refusal_text(Refusal::Unsupported), Some("entry patching is not supported on aarch64"));
        assert_eq!(Aarch64::refusal_text(Refusal::TooShort), None);
        assert_eq!(text, before, "nothing written");
        assert!(!Aarch64::hook_site(&[0xc0, 0x03, 0x5f, 0xd6], 0x1000));
        assert_eq!(Aarch64::guard_swap(1), 0);
        assert_eq!(Aarch64::guard_swap(0), 1);
    }

    /// Compiled on every host: no inline probe's trap is written (inline probes are not
    /// supported on aarch64), and no `SIGTRAP` is taken for one.
    #[test]
    fn no_inline_probe_is_written() {
        assert_eq!(Aarch64::TRAP, &[] as &[u8]);
        assert_eq!(crate::probe::tests::traps_written_and_restored::<Aarch64>(), Vec::<u64>::new());
    }
}
