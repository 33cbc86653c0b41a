//! Every instruction-level fact of the native shim, one directory per architecture (as
//! uftrace keeps `arch/<name>/`), behind one small interface: [`Isa`].
//!
//! The rest of the shim is written against [`Native`], the architecture this library is built
//! for, chosen here and nowhere else:
//! - `patch.rs` (which functions of an object, the trampoline area, writing the entries)
//!   asks the architecture to plan an entry ([`Isa::plan`], [`Isa::plan_short`]), to lay out
//!   its trampoline and the jump written over it ([`Isa::trampoline`]), and for the guard
//!   byte its register-saving stub reads ([`Isa::guard_swap`]);
//! - `loaderhook.rs` asks whether the loader's debugger hook has a shape it may replace
//!   ([`Isa::hook_site`]) and for the jumps that send it to the shim ([`Isa::hook_jump`]);
//! - `frames.rs` reads the stack pointer through [`Isa::stack_pointer`];
//! - `probe.rs` (inline probes) writes [`Isa::TRAP`] at the entries of inlined code, tells
//!   its traps by [`Isa::TRAP_SI_CODE`], reads the trap's address and the stack pointer from
//!   the interrupted context ([`Isa::trap_pc`], [`Isa::trap_sp`]) and resumes it at the
//!   probe's instruction ([`Isa::set_trap_pc`]);
//! - `objects.rs`'s `dlopen`/`dlmopen` wrappers are entered through each architecture's two
//!   assembly entry points (they pass the caller's return address on: `<arch>/dlopen.rs`).
//!
//! - `x86_64/`: entry patching (iced-x86 relocation, the register-saving stub, glibc's
//!   `_dl_debug_state` shapes).
//! - `aarch64/`: no entry patching: every function is refused with "entry patching is not
//!   supported on aarch64", through the same interface (`-finstrument-functions` builds are
//!   recorded by their hooks on every architecture); no inline probes (an empty
//!   [`Isa::TRAP`]: `probe::plant` writes nothing). Its module says what a port needs.
//!
//! The AArch64 module is plain Rust apart from its `dlopen` entry points, so it is compiled,
//! and its refusals tested, on every host.
//!
//! Not here: hot.c's clock read (`rdtsc`) and its window `cmpxchg` (C, each with a portable
//! fallback), and `trace_format::clock`'s TSC calibration.

#[cfg(any(target_arch = "aarch64", test))]
mod aarch64;
#[cfg(target_arch = "x86_64")]
mod x86_64;

#[cfg(target_arch = "aarch64")]
pub(crate) use aarch64::Aarch64 as Native;
#[cfg(target_arch = "x86_64")]
pub(crate) use x86_64::X86_64 as Native;

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
compile_error!(
    "slicetrace-native has no arch/ module for this architecture: add one implementing arch::Isa (arch/aarch64/ is the smallest: it refuses entry patching)"
);

use crate::patch::Refusal;

/// What entry patching, the loader hook, frame repair and inline probes need to know about
/// the instruction set. Implemented once per architecture by a unit type; [`Native`] is this build's.
pub(crate) trait Isa {
    /// The instructions [`Isa::plan`] moves out of an entry, before they are relocated.
    type Moved;
    /// The bytes written over a patched entry (and over the loader's hook): a jump.
    type EntryJump: AsRef<[u8]> + Copy;

    /// Bytes an entry's jump overwrites: a function shorter than this needs the padding after
    /// it ([`Isa::plan_short`]).
    const PATCH_LEN: usize;
    /// Bytes of one trampoline slot (the trampolines of an object are one mapping).
    const SLOT: usize;
    /// How far the entry's jump reaches: trampolines are mapped within this distance of
    /// every entry they serve (`patch::alloc_near`).
    const REACH: u64;
    /// A patched function's CFA minus the stack pointer at its entry, which the stub passes
    /// to the hook (registered with frames.rs: a patched entry's CFA is never measured).
    const ENTRY_CFA: u32;
    /// Bytes [`Isa::hook_site`] reads at the loader's hook (they stay inside its page).
    const HOOK_READ: usize;
    /// The trap an inline probe writes over the start of an instruction (`probe.rs`; at most
    /// `probe::MAX_TRAP` bytes, never across a page): executing it raises `SIGTRAP`. Empty:
    /// inline probes are not supported on this architecture: `probe::plant` plants nothing.
    const TRAP: &'static [u8];
    /// The `si_code` of the `SIGTRAP` that [`Isa::TRAP`] raises (other codes are not ours).
    const TRAP_SI_CODE: i32;

    /// A refusal worded in this architecture's terms (`patch.json`, verbose output), where
    /// it has its own words (else `Refusal::as_str` words it).
    fn refusal_text(r: Refusal) -> Option<&'static str>;
    /// Set up once, before the first object is patched (what the stub saves, by CPU).
    fn init();
    /// The instructions to move out of the entry of a function whose `code` starts at `ip`
    /// (at least [`Isa::PATCH_LEN`] bytes), or why it is not patched.
    fn plan(code: &[u8], ip: u64) -> Result<Self::Moved, Refusal>;
    /// The plan for a function of `len` bytes, shorter than the jump: `code` is the function
    /// and the bytes after it up to the next function's start.
    fn plan_short(code: &[u8], len: usize, ip: u64) -> Result<Self::Moved, Refusal>;
    /// The trampoline of the function at `func`, laid out for the slot at `slot` (at most
    /// [`Isa::SLOT`] bytes: it enters the stub, runs the moved instructions and goes back),
    /// and the jump to write over the function's entry.
    fn trampoline(func: u64, moved: &Self::Moved, slot: u64) -> Result<(Vec<u8>, Self::EntryJump), Refusal>;
    /// How many bytes of the entry a plan moves to the trampoline (code there runs from the
    /// trampoline's copy: the inline probes of `probe.rs` plant nothing in it).
    fn moved_len(moved: &Self::Moved) -> usize;
    /// Code at `addr..addr + len` was written: make it visible to instruction fetch.
    fn code_written(addr: u64, len: usize);
    /// Swap this thread's guard byte (set: patched functions run unrecorded), return the old.
    fn guard_swap(new: u8) -> u8;
    /// The caller's stack pointer (0 where it is not read: then no frame is repaired).
    fn stack_pointer() -> u64;
    /// The architecture's own start-up helpers, never patched (besides the C runtime's).
    fn runtime_helper(name: &str) -> bool;
    /// Whether `code` (at `at`, [`Isa::HOOK_READ`] bytes) is an empty function with room
    /// after it that the jump to the loader hook's handler may replace.
    fn hook_site(code: &[u8], at: u64) -> bool;
    /// The code to put at `area` (mapped within [`Isa::REACH`] of `site`) that goes on to
    /// `handler`, and the jump to write at `site`; `None` when `area` is out of reach.
    fn hook_jump(site: u64, area: u64, handler: u64) -> Option<(Vec<u8>, Self::EntryJump)>;
    /// The address of the [`Isa::TRAP`] that stopped the context `uc` of a `SIGTRAP` handler
    /// (where the trap raised by the instruction there starts; no probe is at the address of a
    /// trap that is not one).
    fn trap_pc(uc: &libc::ucontext_t) -> u64;
    /// The stack pointer of the context `uc` of a signal handler.
    fn trap_sp(uc: &libc::ucontext_t) -> u64;
    /// Make the context `uc` of a signal handler resume at `pc` when the handler returns.
    fn set_trap_pc(uc: &mut libc::ucontext_t, pc: u64);
}
