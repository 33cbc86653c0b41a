//! x86-64: entry patching's instruction-level facts, by concern.
//! - `relocate.rs`: which first instructions of an entry move (iced-x86 decoding), the
//!   trampoline they move into (iced-x86's `BlockEncoder` re-targets RIP-relative operands;
//!   a moved call becomes `push; jmp`), the 5-byte `jmp rel32` over the entry;
//! - `stub.rs`: the register-saving stub the trampolines call, the guard byte it reads, the
//!   choice of vector state (xmm, or whole ymm when the program uses it);
//! - `loader.rs`: the shape of glibc's `_dl_debug_state` the loader hook may replace;
//! - `dlopen.rs`: the `dlopen`/`dlmopen` entry points that pass the caller's return address;
//! - here: the inline probes' trap (`int3`) and the registers of the context it stops
//!   (`rip`, one past the `int3`, and `rsp` in the ucontext's `gregs`).

mod dlopen;
mod loader;
mod relocate;
mod stub;

use crate::arch::Isa;
use crate::patch::Refusal;
use iced_x86::Instruction;

/// x86-64 (System V ABI, Linux).
pub(crate) struct X86_64;

impl Isa for X86_64 {
    type Moved = Vec<Instruction>;
    type EntryJump = [u8; relocate::JMP_LEN];

    const PATCH_LEN: usize = relocate::JMP_LEN;
    const SLOT: usize = relocate::SLOT;
    /// `rel32`'s ±2 GiB, less a margin for the area's own size.
    const REACH: u64 = (1 << 31) - (1 << 24);
    /// The return address the `call` pushed.
    const ENTRY_CFA: u32 = 8;
    const HOOK_READ: usize = loader::HOOK_READ;
    /// `int3`.
    const TRAP: &'static [u8] = &[0xcc];
    /// The kernel's `SI_KERNEL`: `int3` raises `SIGTRAP` with it.
    const TRAP_SI_CODE: i32 = 0x80;

    fn refusal_text(r: Refusal) -> Option<&'static str> {
        match r {
            Refusal::TooShort => Some("shorter than 5 bytes"),
            Refusal::NotPlainPrologue => Some("a call before the end of its first bytes, a call through rsp or a far branch"),
            _ => None,
        }
    }

    fn init() {
        stub::init();
    }

    fn plan(code: &[u8], ip: u64) -> Result<Self::Moved, Refusal> {
        relocate::plan(code, ip)
    }

    fn plan_short(code: &[u8], len: usize, ip: u64) -> Result<Self::Moved, Refusal> {
        relocate::plan_short(code, len, ip)
    }

    fn moved_len(moved: &Self::Moved) -> usize {
        moved.iter().map(|i| i.len()).sum()
    }

    fn trampoline(func: u64, moved: &Self::Moved, slot: u64) -> Result<(Vec<u8>, Self::EntryJump), Refusal> {
        relocate::trampoline(func, moved, slot, stub::slt_patch_stub as *const () as u64)
    }

    /// x86 keeps instruction fetch coherent with stores: nothing to do.
    fn code_written(_addr: u64, _len: usize) {}

    fn guard_swap(new: u8) -> u8 {
        // SAFETY: reads and writes this thread's guard byte.
        unsafe { stub::slt_patch_guard_swap(new) }
    }

    #[inline(always)]
    fn stack_pointer() -> u64 {
        let sp: u64;
        // SAFETY: reads a register, touches no memory.
        unsafe { std::arch::asm!("mov {}, rsp", out(reg) sp, options(nomem, nostack, preserves_flags)) };
        sp
    }

    /// i386's PIC thunks (`__x86.get_pc_thunk.*`).
    fn runtime_helper(name: &str) -> bool {
        name.starts_with("__x86.get_pc_thunk")
    }

    fn hook_site(code: &[u8], at: u64) -> bool {
        loader::replaceable(code, at)
    }

    fn hook_jump(site: u64, area: u64, handler: u64) -> Option<(Vec<u8>, Self::EntryJump)> {
        loader::hook_jump(site, area, handler)
    }

    /// `rip` is past the `int3` (one byte) when its `SIGTRAP` is delivered.
    fn trap_pc(uc: &libc::ucontext_t) -> u64 {
        (uc.uc_mcontext.gregs[libc::REG_RIP as usize] as u64).wrapping_sub(Self::TRAP.len() as u64)
    }

    fn trap_sp(uc: &libc::ucontext_t) -> u64 {
        uc.uc_mcontext.gregs[libc::REG_RSP as usize] as u64
    }

    fn set_trap_pc(uc: &mut libc::ucontext_t, pc: u64) {
        uc.uc_mcontext.gregs[libc::REG_RIP as usize] = pc as i64;
    }
}

#[cfg(test)]
mod tests {
    use super::X86_64;
    use crate::arch::Isa;
    use crate::frames::measure;
    use crate::patch::Refusal;

    /// `patch.json`'s reasons, as `trace info` and `slice` have always read them on x86-64.
    #[test]
    fn refusals_are_worded_as_patch_json_has_them() {
        let all = [
            Refusal::TooShort,
            Refusal::Undecodable,
            Refusal::NotPlainPrologue,
            Refusal::JumpTarget,
            Refusal::RuntimeStartup,
            Refusal::ColdFragment,
            Refusal::TooLong,
            Refusal::Protection,
        ];
        assert_eq!(
            all.map(Refusal::as_str),
            [
                "shorter than 5 bytes",
                "undecodable",
                "a call before the end of its first bytes, a call through rsp or a far branch",
                "a jump target in its first bytes",
                "C runtime start-up",
                "a .cold fragment, not an entry",
                "no room for its trampoline",
                "its code page cannot be made writable, or its trampoline executable (mprotect refused)",
            ]
        );
    }

    /// The stack pointer read here is the one frames.rs's unwinder measurement expects.
    #[test]
    fn the_cfa_of_a_caller_is_measured_from_the_unwind_tables() {
        #[inline(never)]
        extern "C" fn probe(out: &mut [u64; 3]) {
            let here = X86_64::stack_pointer();
            out[0] = here;
            out[1] = measure(caller as *const () as usize as u64, here).map_or(0, |o| o as u64);
        }
        #[inline(never)]
        extern "C" fn caller(out: &mut [u64; 3]) {
            // The caller's own stack pointer, below its CFA.
            out[2] = X86_64::stack_pointer();
            probe(out);
            std::hint::black_box(&out);
        }
        let mut r = [0u64; 3];
        caller(&mut r);
        let [probe_sp, off, caller_sp] = r;
        assert!(off > 0 && off < 4096, "{r:?}");
        // The CFA is above everything the caller pushed (not the caller's stack pointer at
        // the call, which libgcc reports as the callee's CFA), and 16-byte aligned (the ABI
        // aligns the stack pointer at a call).
        assert!(probe_sp + off > caller_sp, "{r:?}");
        assert_eq!((probe_sp + off) % 16, 0, "{r:?}");
        // An address that is no function start is not found.
        assert_eq!(measure(caller as *const () as usize as u64 + 1, probe_sp), None);
    }
}
