//! Frame repair: which open calls have returned without an exit event.
//!
//! A `longjmp`, a C++ exception that clang's `-finstrument-functions` code does not report
//! while unwinding, or a recorder that sees only entries leaves frames open that are dead.
//! Later calls would nest under them (`deep3 → handle` instead of `main → handle`). The rule
//! (uftrace's `--estimate-return` is the prior art): every open call remembers its canonical
//! frame address (CFA, the stack pointer before the call instruction pushed the return
//! address); when a new call starts at a CFA at or above an open frame's, on the same stack,
//! that frame is no longer live, since a live frame's callees always run below it. The new
//! call closes those frames first (return events at the new call's time), then opens its own.
//! A tail call `f → g` (`jmp g`) therefore shows `g` as a sibling of `f`, under `f`'s caller.
//!
//! The CFA of an instrumented function is measured once per function: the hook runs at a
//! fixed point of the function's prologue, so `CFA - (hook's stack pointer)` is constant; the
//! first time a function is seen, the unwinder (`_Unwind_Backtrace`, from `.eh_frame`) finds
//! its frame above the hook and gives the distance. A function without unwind information
//! gets no CFA (0): it is never closed by this rule and never closes another frame.
//!
//! Other stacks: a frame is compared only with frames on the same stack. The thread's own
//! stack is known (`pthread_getattr_np`); a call on another stack (a `sigaltstack` handler, a
//! `swapcontext` coroutine, a green thread) nests under the current frame, and frames on
//! another stack are closed once a call runs on the thread's stack again ([`stack_switch`]
//! tells hooks.rs, which keeps them in suspend.rs to resume them later). Two frames both off
//! the thread's stack count as the same stack only within `OTHER_STACK_SPAN` of each other.

use crate::guards::SpinLock;
use crate::hot::STACK_CAP;
use crate::table::Table;
use std::cell::Cell;
use std::ptr::null_mut;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

/// The stack pointer, read by the entry hook for hot.c (0 where the architecture does not
/// read it: then no frame is repaired).
#[inline(always)]
pub(crate) fn stack_pointer() -> u64 {
    <crate::arch::Native as crate::arch::Isa>::stack_pointer()
}

/// Frames off the thread's stack further apart than this are on different stacks. hot.c's
/// fast path sends a call this far below the innermost frame here (`SLT_FAR_BELOW`, the same
/// number: checked by a test in hot.rs), since it may be a switch to another stack.
pub(crate) const OTHER_STACK_SPAN: u64 = 1 << 20;

/// Function address -> CFA offset + 1 (so that 0 stays "absent"); `u32::MAX`: no unwind
/// information. Kept across `fork` (addresses are the same in the child).
static OFFSETS: AtomicPtr<Table> = AtomicPtr::new(null_mut());
static OFFSETS_LOCK: SpinLock = SpinLock::new();
const NO_CFA: u32 = u32::MAX;

/// Register the CFA offset of functions whose entry passes a known stack pointer (patched
/// entries: `CFA = sp + off`), so that it is never measured; all under one taking of the
/// lock (patching an object sets thousands).
pub(crate) fn set_cfa_offsets(addrs: &[u64], off: u32) {
    OFFSETS_LOCK.lock();
    for &addr in addrs {
        if Table::get_in(&OFFSETS, addr).is_none() {
            Table::insert_in(&OFFSETS, addr, off + 1);
        }
    }
    OFFSETS_LOCK.unlock();
}

/// Function address -> its size in bytes (at most `u32::MAX`), for the entry-patched
/// functions (patch.rs, from their symbols): which function a return address lies in, for
/// [`returned_above`]. Kept across `fork`.
static EXTENTS: AtomicPtr<Table> = AtomicPtr::new(null_mut());
static EXTENTS_LOCK: SpinLock = SpinLock::new();

/// Register the extents `(start, end)` of patched functions, under one taking of the lock.
pub(crate) fn set_extents(funcs: &[(u64, u64)]) {
    EXTENTS_LOCK.lock();
    for &(start, end) in funcs {
        if start != 0 && end > start && Table::get_in(&EXTENTS, start).is_none() {
            Table::insert_in(&EXTENTS, start, u32::try_from(end - start).unwrap_or(u32::MAX));
        }
    }
    EXTENTS_LOCK.unlock();
}

/// The end of the patched function that starts at `addr` (None: not one, or not patched).
fn extent(addr: u64) -> Option<u64> {
    Table::get_in(&EXTENTS, addr).map(|n| addr + u64::from(n))
}

/// How many of the innermost open frames (`stack`, `cfas`, `rets`: their functions, CFAs and
/// return addresses, innermost last; those the rule of [`dead_frames`] closes already left
/// out) have returned although a call at `cfa` starts below them on the thread's stack.
///
/// Entry patching sees no returns, and a caller may move its stack pointer down between two
/// calls: gcc pushes the stack arguments of a call with more than six (brotli's
/// `EncodeData` calling `WriteMetaBlockInternal` after `BrotliAllocate` and the malloc
/// wrapper below it returned), so the new call starts below the dead frames, and the CFA rule
/// nests it under them. Two witnesses tell:
/// 1. `ret`, the new call's return address (None for an inline probe's hit, which has none):
///    it lies in the function that makes the call. The innermost open frame whose patched
///    function holds it ([`set_extents`]) is the caller, and every frame above it has returned
///    (a running callee of it would be making the call). When the innermost frame holds it,
///    none has.
/// 2. When no open frame's function is known to hold it (a function without extent, a call
///    from code that was not patched): a frame whose return-address slot (its CFA - 8) no
///    longer holds the address its call pushed there has returned, as `slt_python_entry`
///    reads it (the pushed arguments overwrote it); innermost first, to the first that holds it.
///
/// Only frames on the thread's stack (`stack_range`) above the call are judged: that memory is
/// mapped (the running code's stack, between its stack pointer and the top); `read` reads it.
pub(crate) fn returned_above(stack: &[u64], cfas: &[u64], rets: &[u64], cfa: u64, ret: Option<u64>) -> usize {
    // SAFETY: `returned_above_on` reads only the slots of frames on the thread's own stack
    // above `cfa`, the CFA of the call being entered on that stack: between the running code's
    // stack pointer and the stack's top, mapped memory of this thread.
    let read = |a: u64| unsafe { *(a as *const u64) };
    returned_above_on(stack, cfas, rets, cfa, ret, thread_stack(), &extent, &read)
}

#[allow(clippy::too_many_arguments)]
fn returned_above_on(
    stack: &[u64],
    cfas: &[u64],
    rets: &[u64],
    cfa: u64,
    ret: Option<u64>,
    (lo, hi): (u64, u64),
    extent: &dyn Fn(u64) -> Option<u64>,
    read: &dyn Fn(u64) -> u64,
) -> usize {
    let n = cfas.len().min(stack.len()).min(rets.len());
    if cfa == 0 || cfa < lo || cfa >= hi {
        return 0;
    }
    // A frame above the call on the thread's stack.
    let judged = |k: usize| cfas[k] > cfa && cfas[k] < hi;
    if let Some(pc) = ret.filter(|&r| r != 0).map(|r| r - 1) {
        for k in (0..n).rev() {
            let start = stack[k] & !crate::filter::ROOT_BIT;
            if extent(start).is_some_and(|end| start <= pc && pc < end) {
                return if (k + 1..n).all(judged) { n - 1 - k } else { 0 };
            }
        }
    }
    let mut m = 0;
    for k in (0..n).rev() {
        if !judged(k) || rets[k] == 0 || read(cfas[k] - 8) == rets[k] {
            break;
        }
        m += 1;
    }
    m
}

/// The CFA offset of the function at `addr` from the hook's stack pointer `sp`, measured
/// the first time (0: unknown).
pub(crate) fn cfa_offset(addr: u64, sp: u64) -> u32 {
    // An inline probe's hit (probe.rs): its frame address is the interrupted stack pointer less
    // this (a number of the probes', not registered per probe).
    if addr & crate::probe::INLINE_BIT != 0 {
        return crate::probe::HIT_CFA;
    }
    if let Some(v) = Table::get_in(&OFFSETS, addr) {
        return if v == NO_CFA { 0 } else { v - 1 };
    }
    let off = measure(addr, sp);
    OFFSETS_LOCK.lock();
    if Table::get_in(&OFFSETS, addr).is_none() {
        Table::insert_in(&OFFSETS, addr, off.map_or(NO_CFA, |o| o + 1));
    }
    OFFSETS_LOCK.unlock();
    off.unwrap_or(0)
}

#[repr(C)]
struct UnwindContext {
    _private: [u8; 0],
}

type UnwindTraceFn = extern "C" fn(ctx: *mut UnwindContext, arg: *mut libc::c_void) -> libc::c_int;

// libgcc's unwinder. What a caller must hold, beyond the C signature:
extern "C" {
    /// `trace` may be called with `arg` for each frame, until it returns non-zero.
    fn _Unwind_Backtrace(trace: UnwindTraceFn, arg: *mut libc::c_void) -> libc::c_int;
    /// `ctx` is the context `_Unwind_Backtrace` passed to the running callback.
    fn _Unwind_GetCFA(ctx: *mut UnwindContext) -> usize;
    /// As `_Unwind_GetCFA`.
    fn _Unwind_GetRegionStart(ctx: *mut UnwindContext) -> usize;
}

const URC_NO_REASON: libc::c_int = 0;
const URC_END_OF_STACK: libc::c_int = 5;
/// Frames looked at before giving up (the hook is a few frames below the function).
const MAX_FRAMES: usize = 16;

struct Search {
    func: u64,
    found: bool,
    frames: usize,
    cfa: u64,
}

extern "C" fn visit(ctx: *mut UnwindContext, arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the `Search` that `measure` passed, alive for the whole backtrace;
    // `ctx` is the unwinder's context for this frame.
    unsafe {
        let s = &mut *(arg as *mut Search);
        s.frames += 1;
        // libgcc calls back with a frame's IP but the CFA of the frame below it (the stack
        // pointer of this frame at its call): the function's CFA is read at its caller.
        if s.found {
            s.cfa = _Unwind_GetCFA(ctx) as u64;
            return URC_END_OF_STACK;
        }
        if _Unwind_GetRegionStart(ctx) as u64 == s.func {
            s.found = true;
            return URC_NO_REASON;
        }
        if s.frames >= MAX_FRAMES {
            return URC_END_OF_STACK;
        }
    }
    URC_NO_REASON
}

/// Find the innermost frame of the function at `addr` above this one (the instrumented
/// function that called the hook) and return its CFA's distance from `sp`.
#[cold]
#[inline(never)]
pub(crate) fn measure(addr: u64, sp: u64) -> Option<u32> {
    if sp == 0 || addr == 0 {
        return None;
    }
    let mut s = Search { func: addr, found: false, frames: 0, cfa: 0 };
    // SAFETY: the callback only reads the unwinder's context and writes `s`.
    unsafe { _Unwind_Backtrace(visit, &mut s as *mut Search as *mut libc::c_void) };
    (s.cfa > sp).then(|| u32::try_from(s.cfa - sp).ok()).flatten()
}

thread_local! {
    /// The calling thread's stack, `[low, high)` (`(0, 0)` until known, `(1, 0)`: unknown).
    static STACK: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
}

pub(crate) fn thread_stack() -> (u64, u64) {
    STACK.with(|c| {
        let v = c.get();
        if v != (0, 0) {
            return v;
        }
        let v = query_stack().unwrap_or((1, 0));
        c.set(v);
        v
    })
}

fn query_stack() -> Option<(u64, u64)> {
    // SAFETY: pthread_getattr_np fills the attribute object we own, which is destroyed after.
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        if libc::pthread_getattr_np(libc::pthread_self(), &mut attr) != 0 {
            return None;
        }
        let mut addr: *mut libc::c_void = null_mut();
        let mut size: libc::size_t = 0;
        let r = libc::pthread_attr_getstack(&attr, &mut addr, &mut size);
        libc::pthread_attr_destroy(&mut attr);
        (r == 0).then_some((addr as u64, addr as u64 + size as u64))
    }
}

/// Whether two frames are on the same stack (see the module's doc).
fn same_stack(a: u64, b: u64, (lo, hi): (u64, u64)) -> bool {
    let on = |x: u64| lo <= x && x < hi;
    match (on(a), on(b)) {
        (true, true) => true,
        (false, false) => a.abs_diff(b) <= OTHER_STACK_SPAN,
        _ => false,
    }
}

/// Whether `cfa` lies on the thread's alternate signal stack (`sigaltstack`): a handler's
/// frames there nest under the frame the signal interrupted, and are never a coroutine's to
/// suspend or resume (an alternate stack allocated next to a coroutine's would otherwise pass
/// for it). A system call, made only when a call changes stacks.
pub(crate) fn on_signal_stack(cfa: u64) -> bool {
    // SAFETY: sigaltstack only reads the current setting into `ss` (async-signal-safe).
    unsafe {
        let mut ss: libc::stack_t = std::mem::zeroed();
        if libc::sigaltstack(std::ptr::null(), &mut ss) != 0 || ss.ss_flags & libc::SS_DISABLE != 0 {
            return false;
        }
        let lo = ss.ss_sp as u64;
        lo < cfa && cfa <= lo.saturating_add(ss.ss_size as u64)
    }
}

/// Where a call at `cfa` runs, against the open frames (`cfas`, innermost last).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Switch {
    /// On the innermost frame's stack (or unknown: a CFA of 0 on the way): the rule of
    /// [`dead_frames`] decides.
    Same,
    /// Back on the stack of the open frame at this index: the frames above it run on other
    /// stacks that the thread has left (a coroutine switched away from); suspend.rs keeps them.
    Back(usize),
    /// On a stack where no frame is open: a signal handler on an alternate stack, a coroutine's
    /// first run, or one resumed (suspend.rs may hold its frames).
    Enter,
}

pub(crate) fn stack_switch(cfas: &[u64], cfa: u64) -> Switch {
    stack_switch_on(cfas, cfa, thread_stack())
}

fn stack_switch_on(cfas: &[u64], cfa: u64, stack: (u64, u64)) -> Switch {
    match cfas.last() {
        Some(&top) if cfa != 0 && top != 0 && !same_stack(top, cfa, stack) => {}
        _ => return Switch::Same,
    }
    for (k, &f) in cfas.iter().enumerate().rev() {
        if f == 0 {
            return Switch::Same;
        }
        if same_stack(f, cfa, stack) {
            return Switch::Back(k);
        }
    }
    Switch::Enter
}

/// The patched entry of the program's `main` (0: none). The C runtime calls the program's
/// constructors (`.init_array`, C++ static initialisers, Rust's argument capture) and then
/// `main` from different frames of its own, unpatched code: `__libc_start_call_main`'s frame
/// is larger than `call_init`'s, so `main` starts *below* the CFA of the last constructor's
/// frames, and the rule above would nest `main` (the whole run) under a constructor that
/// returned long ago. With entry patching no exit tells; `main` does: when the main thread
/// enters it, nothing of the program is running on that thread.
static PROGRAM_MAIN: AtomicU64 = AtomicU64::new(0);

/// Remember the program's `main` (objects.rs, when it patched the program's entries).
pub(crate) fn set_program_main(addr: u64) {
    PROGRAM_MAIN.store(addr, Ordering::Relaxed);
}

/// Whether a call of `addr` closes every open frame of the thread: the first call of the
/// program's `main` on the main thread (once: a later call of `main` nests as any call). A
/// thread that calls `main` itself nests it.
pub(crate) fn starts_program(addr: u64) -> bool {
    addr != 0
        && addr == PROGRAM_MAIN.load(Ordering::Relaxed)
        && trace_format::writer::gettid() == std::process::id() as u64
        && PROGRAM_MAIN.compare_exchange(addr, 0, Ordering::Relaxed, Ordering::Relaxed).is_ok()
}

/// How many of the innermost open frames (`cfas`, innermost last, 0 = unknown) are dead
/// when a call starts at `cfa`.
pub(crate) fn dead_frames(cfas: &[u64], cfa: u64) -> usize {
    if cfa == 0 {
        return 0;
    }
    dead_frames_on(cfas, cfa, thread_stack())
}

fn dead_frames_on(cfas: &[u64], cfa: u64, stack: (u64, u64)) -> usize {
    let on = |x: u64| stack.0 <= x && x < stack.1;
    let mut n = 0;
    for &f in cfas.iter().rev() {
        if f == 0 {
            break;
        }
        if same_stack(f, cfa, stack) {
            if f > cfa {
                break;
            }
        } else if !on(cfa) || on(f) {
            // A call on another stack than this frame's nests under it, unless the call is
            // back on the thread's stack and the frame was off it (that stack was left).
            break;
        }
        n += 1;
    }
    n
}

const _: () = assert!(STACK_CAP > 0);

#[cfg(test)]
mod tests {
    use super::*;

    const STACK: (u64, u64) = (0x7000_0000, 0x7080_0000);

    #[test]
    fn a_call_at_or_above_a_frame_closes_it() {
        // main at 0x707f_f000, deep1 below it, deep2, deep3 below that.
        let open = [0x707f_f000, 0x707f_e000, 0x707f_d000, 0x707f_c000];
        // handle, called by main after a longjmp: CFA just below main's.
        assert_eq!(dead_frames_on(&open, 0x707f_e000, STACK), 3);
        assert_eq!(dead_frames_on(&open, 0x707f_e008, STACK), 3);
        // A callee of deep3 closes nothing; a sibling of deep3 closes deep3.
        assert_eq!(dead_frames_on(&open, 0x707f_bf00, STACK), 0);
        assert_eq!(dead_frames_on(&open, 0x707f_c000, STACK), 1);
        // A frame without a CFA stops the rule.
        assert_eq!(dead_frames_on(&[0x707f_f000, 0, 0x707f_d000], 0x707f_e800, STACK), 1);
        assert_eq!(dead_frames_on(&open, 0, STACK), 0);
    }

    #[test]
    fn other_stacks_nest_and_are_left_when_the_thread_stack_is_back() {
        let alt = 0x1000_8000u64;
        // A handler on a sigaltstack nests under the interrupted frame, whatever the addresses.
        assert_eq!(dead_frames_on(&[0x707f_f000, 0x707f_e000], alt, STACK), 0);
        assert_eq!(dead_frames_on(&[0x707f_f000, 0x707f_e000], 0x7fff_0000, STACK), 0);
        // Two calls in the handler: the second closes the first.
        assert_eq!(dead_frames_on(&[0x707f_f000, alt], alt, STACK), 1);
        // Back on the thread's stack: the handler's frames are closed, then the rule goes on.
        assert_eq!(dead_frames_on(&[0x707f_f000, 0x707f_e000, alt, alt - 0x100], 0x707f_e000, STACK), 3);
        // A far-away other stack (another coroutine) nests.
        assert_eq!(dead_frames_on(&[0x707f_f000, alt], alt + (4 << 20), STACK), 0);
    }

    #[test]
    fn a_call_on_another_stack_is_a_switch_back_or_an_entry() {
        let co = 0x1000_8000u64;
        // main, then a generator on its own stack: a call on the thread's stack is back on
        // main's, above the generator's frames.
        let open = [0x707f_f000, co, co - 0x40];
        assert_eq!(stack_switch_on(&open, 0x707f_e000, STACK), Switch::Back(0));
        // Within the generator: same stack.
        assert_eq!(stack_switch_on(&open, co - 0x40, STACK), Switch::Same);
        // main, consume: a call on the generator's stack enters a stack with no open frame.
        assert_eq!(stack_switch_on(&[0x707f_f000, 0x707f_e000], co - 0x40, STACK), Switch::Enter);
        // Another coroutine far away from the first: an entry too.
        assert_eq!(stack_switch_on(&open, co + (4 << 20), STACK), Switch::Enter);
        // A frame without a CFA on the way: the old rule.
        assert_eq!(stack_switch_on(&[0x707f_f000, 0, co], 0x707f_e000, STACK), Switch::Same);
        assert_eq!(stack_switch_on(&[], 0x707f_e000, STACK), Switch::Same);
        assert_eq!(stack_switch_on(&open, 0, STACK), Switch::Same);
    }

    /// brotli's `EncodeData` (`main` here) called `BrotliAllocate` (`alloc`), which called the
    /// malloc wrapper (`wrap`); both returned, then `main` pushed three stack arguments and
    /// called `weigh` below their frames.
    #[test]
    fn a_call_below_returned_frames_closes_them_by_its_return_address_or_their_slots() {
        use std::collections::HashMap;
        let (main, alloc, wrap) = (0x1000u64, 0x2000u64, 0x3000u64);
        let ext: HashMap<u64, u64> = [(main, 0x1100), (alloc, 0x2040), (wrap, 0x3010)].into();
        let extent = |a: u64| ext.get(&a).copied();
        let s = 0x707f_e000u64;
        let stack = [main, alloc, wrap];
        let cfas = [s + 0x40, s, s - 0x10];
        let rets = [0x9999, 0x10aa, 0x2010];
        // The memory: alloc's slot overwritten by a pushed argument, wrap's too.
        let mut mem: HashMap<u64, u64> = [(s + 0x38, 0x9999), (s - 8, 9), (s - 0x18, 8)].into();
        let read = |a: u64| *mem.get(&a).unwrap_or(&0);
        let cfa = s - 0x20;
        // By the return address: main makes the call, both frames above it returned.
        assert_eq!(returned_above_on(&stack, &cfas, &rets, cfa, Some(0x10de), STACK, &extent, &read), 2);
        // The innermost frame makes the call: none returned, whatever the slots say.
        assert_eq!(returned_above_on(&stack, &cfas, &rets, cfa, Some(0x3005), STACK, &extent, &read), 0);
        assert_eq!(returned_above_on(&stack, &cfas, &rets, cfa, Some(0x2020), STACK, &extent, &read), 1);
        // No extent holds it (a hit, code that was not patched): the slots tell, innermost first.
        assert_eq!(returned_above_on(&stack, &cfas, &rets, cfa, None, STACK, &extent, &read), 2);
        assert_eq!(returned_above_on(&stack, &cfas, &rets, cfa, Some(0x8000), STACK, &extent, &read), 2);
        mem.insert(s - 8, 0x10aa);
        let read = |a: u64| *mem.get(&a).unwrap_or(&0);
        assert_eq!(returned_above_on(&stack, &cfas, &rets, cfa, None, STACK, &extent, &read), 1);
        // A frame whose slot still holds its return address stops the count.
        mem.insert(s - 0x18, 0x2010);
        let read = |a: u64| *mem.get(&a).unwrap_or(&0);
        assert_eq!(returned_above_on(&stack, &cfas, &rets, cfa, None, STACK, &extent, &read), 0);
        // Off the thread's stack, or no CFA: nothing is judged.
        assert_eq!(returned_above_on(&stack, &cfas, &rets, 0, Some(0x10de), STACK, &extent, &read), 0);
        assert_eq!(returned_above_on(&stack, &cfas, &rets, 0x1000_0000, Some(0x10de), STACK, &extent, &read), 0);
        // A frame above the caller that is not above the call on this stack: not closed.
        let far = [s + 0x40, 0x1000_8000, s - 0x10];
        assert_eq!(returned_above_on(&stack, &far, &rets, cfa, Some(0x10de), STACK, &extent, &read), 0);
    }
}
