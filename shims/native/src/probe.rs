//! Inline probes: knowing, without a recompile, that code the compiler inlined ran
//! (docs/native-recording.md, "Inlined functions").
//!
//! `trace run` lists where the program's inlined code starts (the address ranges of its
//! `DW_TAG_inlined_subroutine`s, tracer/src/inline_probes.rs) in the trace directory
//! ([`INLINE_PROBES_FILE`]), and that of the libraries patched at start-up
//! ([`LIBRARY_INLINE_PROBES_FILE`]: one set of probes per object, the same rules in each; their
//! line probes the same way, [`LIBRARY_LINE_PROBES_FILE`]). At start-up, once the program's entries are patched (objects.rs),
//! [`plant`] installs a `SIGTRAP` handler and puts the architecture's trap ([`Isa::TRAP`]:
//! x86-64's one-byte `int3`) at each listed entry of the program that lies outside the
//! entry-patched functions; an entry inside one gets its trap at that function's first call
//! ([`first_call`], from the registration of its id, before its body runs: that code cannot
//! run before its function's entry did), so that the functions that never run cost no trap
//! written, no page copied and no hit (docs/performance.md, "Inline probes planted at the
//! first call"). With a `-F`/`-N` filter (calls outside it are never registered) or
//! `SLICE_TRACE_INLINE=start`, every trap is written at start-up. The first time a thread runs
//! into one ([`on_trap`]), the handler puts the original byte back with a plain store (see
//! "Writable code" below), records the hit as the call and return of the probe's address (keyed
//! with [`INLINE_BIT`]; its id noted in the process's `inline.bin` (hits.rs) instead of a
//! `funcs.jsonl` record, which says `"inlined": true` where one is written) with the stack pointer of the interrupted code
//! as the frame address, so that the frame repair closes the callees that returned and the
//! hit lands under the function that was running, and resumes the program at the probe's
//! address. A probe fires once per process (and once more in a forked child that had not run
//! it): the steady-state cost is entry patching's. The other probes of its group (the list's
//! `groups`: the same chain of inlined functions in the same function, the same node of a
//! tree) are disarmed with it ([`disarm_group`]): their traps would add nothing; so are the
//! probes of the groups around it (the list's `group_parents`), whose code it is inside.
//!
//! An entry inside the bytes a patched function entry moved to its trampoline (inlined code at
//! a function's first instruction) runs from the trampoline's copy, where no probe can be:
//! it runs each time that function is entered, so the slow path records it with the function's
//! first recorded call ([`entered`]).
//!
//! Line probes (`trace run --lines`, lines.rs) use the same traps: a trap has roles (an inline
//! probe, a line probe, or both at one address), and stays armed until every role it has is
//! spent: a hit spends them all; disarming an inline group spends only the inline role of its
//! probes (a row of a line whose line has not run keeps its trap), and a line's hit only the
//! line role of its other rows.
//!
//! One lock ([`LOCK`], held as a [`Held`], with every signal blocked) guards every change of a
//! probe's state, of its bytes in the code and of its page's count: a function's first call
//! writing its traps, a hit claiming its probe, a disarm. Threads racing on one probe: the
//! first claims it (its roles to none) and puts the byte back; the others find it spent under
//! the lock, by then with its byte back, and rewind to run the probe's instruction. A trap
//! that is not one of ours (the program's own `int3`, a `SIGTRAP` sent by
//! `kill`) goes to the program's own disposition: the shim's `sigaction` and `signal` keep the
//! program's `SIGTRAP` handler as the one to chain to while the probes' handler is installed.
//!
//! Writable code: the pages that hold a probe are left readable, writable and executable by
//! [`plant`] (one `mprotect` per run of touching pages, at start-up, also for the traps still
//! to be written: making a page writable copies nothing until it is written), so that a first
//! call writes its traps and a hit puts its byte back with plain stores, and each page is made
//! read-and-execute again when its last probe is spent (one `mprotect` then; a page whose
//! function never ran keeps its probes, as it did when every trap was written at start-up). This weakens W^X for the program's own code while probes are armed
//! in it: a bug of the program that writes through a stray pointer into its text would then
//! change code instead of faulting. Where the pages cannot be made writable (a W^X policy:
//! SELinux `execmod`, PaX), no probe is planted there (`patch.json` counts them `unprobed`).
//! The earlier design wrote each byte back through `/proc/self/mem`, keeping the pages
//! read-and-execute, at two system calls per hit (docs/performance.md, "Inline probes").
//!
//! This module is the same on every architecture: the trap's bytes, the `si_code` it raises,
//! and the interrupted context's trap address, stack pointer and resumption are
//! [`Isa`]'s (arch/). Where [`Isa::TRAP`] is empty (aarch64: inline probes are not supported),
//! [`plant`] plants nothing: no list is read, no trap written, no handler installed.

use crate::arch::{Isa, Native};
use crate::guards::{ErrnoGuard, SpinLock};
use crate::lines::{LineSet, NO_PROBE};
use hits::HitMap;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicU32, AtomicU8, AtomicUsize, Ordering};
use trace_format::meta::{InlineProbeList, InlineProbes};
#[cfg(doc)]
use trace_format::meta::{INLINE_PROBES_FILE, LIBRARY_INLINE_PROBES_FILE, LIBRARY_LINE_PROBES_FILE};

/// `SLICE_TRACE_INLINE=0`: no probe (as `trace run` writes no list then).
const ENV_INLINE: &str = "SLICE_TRACE_INLINE";

/// A probe's roles still armed (its `state`): an inline probe's, a line probe's; none: spent
/// (its bytes are back, or it never got a trap).
const INLINE: u8 = 1;
const LINE: u8 = 2;
const SPENT: u8 = 0;
const ROLES: u8 = INLINE | LINE;
/// In a probe's `state` beside its roles: its trap was written into the code (at start-up, or
/// at its function's first call: [`first_call`]); kept once set, so that whoever spends its
/// last role knows that its bytes go back. Without it the probe has no trap (yet).
const TRAP: u8 = 4;

/// The longest trap an architecture may have ([`Isa::TRAP`]).
pub(crate) const MAX_TRAP: usize = 4;
const _: () = assert!(Native::TRAP.len() <= MAX_TRAP);

/// The frame address a hit is recorded with is the interrupted code's stack pointer less
/// this, the CFA offset of every hit's key (frames.rs's `cfa_offset` answers it for keys with
/// [`INLINE_BIT`]; 0 would be "unknown"): the hit's CFA is that stack pointer.
pub(crate) const HIT_CFA: u32 = 8;

pub(crate) struct Probe {
    addr: u64,
    /// The bytes the trap replaced (the first `TRAP.len()`, little-endian), set with [`TRAP`].
    orig: AtomicU32,
    /// Its roles still armed, and [`TRAP`]; changed only under [`LOCK`] ([`Held`]).
    state: AtomicU8,
    /// Its page's index in [`Traps::pages`].
    page: u32,
    /// Its group in [`Probes::groups`] (`NO_GROUP`: none).
    group: u32,
    /// As an inline probe: its entry in the inline list ([`NO_PROBE`]: none).
    inline: u32,
    /// As a line probe: its row in the line list, and the row's group (its line).
    line: u32,
    line_group: u32,
}

const NO_GROUP: u32 = u32::MAX;

/// Code page (its address) and how many of its probes are still armed (with their trap
/// written or still to be written at their function's first call): made read-and-execute
/// again when that reaches 0. Counted under [`LOCK`]: a page at 0 gets no trap again.
pub(crate) struct Page(u64, AtomicU32);

/// The probes [`write_traps`] planted, by address, and their pages (left writable).
pub(crate) struct Traps {
    probes: Vec<Probe>,
    pages: Vec<Page>,
}

struct Probes {
    /// Probes with a trap.
    traps: Traps,
    /// (group, index in `traps.probes`) of the inline probes, by group: when one fires, the
    /// others are disarmed (their code is the same node of a tree).
    groups: Vec<(u32, u32)>,
    /// Per group of the list, the group around it (`NO_GROUP`: none), whose probes a hit
    /// disarms too (`InlineProbeList::group_parents`), and whether the group is spent (fired
    /// or disarmed: its parents were disarmed then).
    parents: Vec<(u32, AtomicBool)>,
    /// (function entry, inlined entry, recorded, entry in the inline list) for the entries in
    /// a patched entry's moved bytes, by function entry.
    at_entry: Vec<(u64, u64, AtomicBool, u32)>,
    /// Where hits are registered without a `funcs.jsonl` record (hits.rs), if it could be made.
    hits: Option<HitMap>,
    /// The group of each entry of the inline list (empty: the list has none).
    entry_groups: Vec<u32>,
    /// The line probes' rows (lines.rs), if the program was probed for lines.
    lines: Option<LineSet>,
    /// The functions whose probes get their traps at the function's first call, by entry.
    deferred: Vec<Deferred>,
    /// The object's load address (its first page): one set of probes per object.
    base: u64,
    /// The set of the object probed before this one (the program's is the first), or null.
    next: *const Probes,
    /// Its object was unloaded (`dlclose`: [`forget`]): the set is skipped by every walk, so
    /// that an object loaded later at its addresses is neither trapped nor written by it.
    gone: AtomicBool,
}

/// An entry-patched function with probes inside it, planted at its first call ([`first_call`]):
/// its entry, the range of its probes in [`Traps::probes`], and whether they are planted.
struct Deferred {
    entry: u64,
    probes: (u32, u32),
    planted: AtomicBool,
}

/// The probes' lock: every change of a probe's `state`, of its bytes in the code and of its
/// page's count happens while it is held (a [`Held`]), so that planting a function's traps
/// at its first call, a hit claiming its probe and a disarm never interleave. It is held with
/// every signal blocked (a handler on the holder's thread cannot wait for it), only for stores
/// and at most one `mprotect` per probe, never while program code runs; [`first_call`] takes
/// it inside `process`'s cold lock (the order: cold lock, then this one; the trap handler
/// takes them one after the other, never both).
static LOCK: SpinLock = SpinLock::new();

/// Proof that [`LOCK`] is held: the one place where the probes' invariants change.
pub(crate) struct Held(bool);

impl Held {
    /// Take the lock from a path whose signals may be unblocked (the slow path): they are
    /// blocked while it is held (two mask calls).
    pub(crate) fn lock() -> Held {
        LOCK.lock();
        Held(false)
    }

    /// Take the lock from a path that runs with every signal blocked already (the trap
    /// handler, a registration under the cold lock): no mask call.
    pub(crate) fn lock_blocked() -> Held {
        LOCK.lock_blocked();
        Held(true)
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if self.0 {
            LOCK.unlock_blocked();
        } else {
            LOCK.unlock();
        }
    }
}

/// The probes of the last object [`plant`] planted (the constructor, before any other thread),
/// each set linking to the one before ([`Probes::next`]): the program's, then its libraries',
/// never freed or changed once published. A program without libraries of its own to probe has
/// one set, and every walk over them is one step, as before libraries had probes.
static PROBES: AtomicPtr<Probes> = AtomicPtr::new(std::ptr::null_mut());
/// The probes' handler is installed: `sigaction`/`signal` keep the program's own.
static INSTALLED: AtomicBool = AtomicBool::new(false);
/// The program's `SIGTRAP` disposition (`sa_sigaction` and `sa_flags`), chained to.
static CHAINED: AtomicUsize = AtomicUsize::new(libc::SIG_DFL);
static CHAINED_FLAGS: AtomicI32 = AtomicI32::new(0);

/// Every object's probes, the last planted first, but those of unloaded objects.
fn all() -> impl Iterator<Item = &'static Probes> {
    let first = PROBES.load(Ordering::Acquire) as *const Probes;
    // SAFETY: each set is a leaked box published whole (its `next` set before it was), never
    // freed or changed after (but its atomics).
    live(unsafe { first.as_ref() })
}

/// The sets of the chain starting at `first` whose object is still loaded.
fn live(first: Option<&Probes>) -> impl Iterator<Item = &Probes> {
    // SAFETY: `next` is null or the set published before this one, which outlives it.
    std::iter::successors(first, |p| unsafe { p.next.as_ref() }).filter(|p| !p.gone.load(Ordering::Acquire))
}

/// The object loaded at `base` was unloaded (`dlclose`): its probes are forgotten (their code
/// is no longer mapped; another object may be loaded there). Called under the objects' lock,
/// as [`plant`] is.
pub(crate) fn forget(base: u64) {
    forget_in(all(), base);
}

/// [`forget`] among `sets`.
fn forget_in<'a>(mut sets: impl Iterator<Item = &'a Probes>, base: u64) {
    if let Some(p) = sets.find(|p| p.base == base) {
        p.gone.store(true, Ordering::Release);
    }
}

/// Set in the address an inline probe's hit is recorded under (the hooks' `this_fn`, the id
/// table's key): an inlined entry may be a patched function's own entry (inlined code at its
/// first instruction), which must keep its own id. No user-space address has it.
pub(crate) const INLINE_BIT: u64 = 1 << 63;

/// The line probes' rows of every object probed for lines.
pub(crate) fn line_sets() -> impl Iterator<Item = &'static LineSet> {
    all().filter_map(|p| p.lines.as_ref())
}

/// After the constructor planted the probes: make the process directory and map the files
/// where hits are kept there (`inline.bin`, and with line probes `lines.bin`). Nothing without
/// probes.
pub(crate) fn attach() {
    if let Some(h) = all().find_map(|p| p.hits.as_ref()) {
        if let Some(dir) = crate::process::ensure_process() {
            if let Err(e) = h.attach(&dir) {
                let file = dir.join(trace_format::meta::INLINE_BIN_FILE);
                crate::process::warn_once(&format!(
                    "cannot write {}: {e}; inline probes write their hits into funcs.jsonl",
                    file.display()
                ));
            }
        }
    }
    crate::lines::attach();
}

/// In a forked child: the hit map is the parent's file; the child's hits get records of their own.
pub(crate) fn after_fork_child() {
    // Only the forking thread goes on, and it held no probe lock (it was in `fork`).
    LOCK.0.store(false, Ordering::Release);
    if let Some(h) = all().find_map(|p| p.hits.as_ref()) {
        h.detach();
    }
}

/// The slow path recorded the entry of the function at `addr`: the inlined entries in its
/// moved bytes not recorded yet run now; `record` gets each one's id. The line rows in its
/// moved bytes ran (their lines' other rows are disarmed).
pub(crate) fn entered(addr: u64, mut record: impl FnMut(u32)) {
    for p in all() {
        entered_in(p, addr, &mut record);
    }
}

/// [`entered`] in the probes of one object.
fn entered_in(p: &Probes, addr: u64, record: &mut impl FnMut(u32)) {
    let i = p.at_entry.partition_point(|e| e.0 < addr);
    for (_, inlined, done, entry) in p.at_entry[i..].iter().take_while(|e| e.0 == addr) {
        if !done.swap(true, Ordering::AcqRel) {
            let key = *inlined | INLINE_BIT;
            let id = match p.hits.as_ref().filter(|h| h.usable()) {
                Some(h) => crate::process::lookup_or(key, || crate::process::register_noted(key, |id| h.set(*entry, id))),
                None => crate::process::id_of(key),
            };
            if let Some(id) = id {
                record(id);
            }
            // Its group's probes and those around it add nothing now.
            let held = Held::lock();
            disarm_groups(p, p.entry_groups.get(*entry as usize).copied().unwrap_or(NO_GROUP), NO_PROBE, &held);
        }
    }
    if let Some(set) = &p.lines {
        let i = set.at_entry.partition_point(|e| e.0 < addr);
        for &(_, row, group) in set.at_entry[i..].iter().take_while(|e| e.0 == addr) {
            if set.state(row) == trace_format::meta::LINE_UNKNOWN {
                set.ran(row);
                let held = Held::lock();
                set.group_ran(group, |j| disarm_role(p, j, LINE, &held));
                set.block_ran(row, |j| disarm_role(p, j, LINE, &held));
            }
        }
    }
}

/// The function at `addr` is registered (its first recorded call in the process, before its
/// body runs: `process::register_locked`, with every signal blocked): the traps of the probes
/// inside it ([`Probes::deferred`]) are written now, those whose roles are still armed.
/// Functions that never run cost no trap written, no page copied and no hit.
pub(crate) fn first_call(addr: u64) {
    for ps in all() {
        let i = ps.deferred.partition_point(|d| d.entry < addr);
        if ps.deferred.get(i).is_some_and(|d| d.entry == addr && !d.planted.load(Ordering::Acquire)) {
            plant_deferred(ps, addr, &Held::lock_blocked());
            return;
        }
    }
}

/// The traps of the probes deferred to the first call of the function at `entry` (once).
fn plant_deferred(ps: &Probes, entry: u64, held: &Held) {
    let i = ps.deferred.partition_point(|d| d.entry < entry);
    let Some(d) = ps.deferred.get(i).filter(|d| d.entry == entry) else { return };
    if !d.planted.swap(true, Ordering::AcqRel) {
        for j in d.probes.0..d.probes.1 {
            plant_one(&ps.traps, j, held);
        }
    }
}

/// Write the trap of probe `j` of `traps` (deferred to its function's first call), unless its
/// roles are spent (disarmed meanwhile) or its trap is there already. Where the code already
/// holds the trap's bytes (the program's own), no probe is planted: it is spent.
fn plant_one(traps: &Traps, j: u32, held: &Held) {
    let Some(p) = traps.probes.get(j as usize) else { return };
    let s = p.state.load(Ordering::Acquire);
    if s & TRAP != 0 || s & ROLES == 0 {
        return;
    }
    let len = Native::TRAP.len();
    // SAFETY: the probe lies in the program's executable code, in a page `plant` made
    // writable, which stays so while its count is above 0: this probe is armed, so it is.
    // Only the holder of the lock (this thread) writes probes' bytes. Another thread running
    // this code meanwhile runs either byte (one store at an instruction's first byte).
    let code = unsafe { std::slice::from_raw_parts_mut(p.addr as *mut u8, len) };
    if *code == *Native::TRAP {
        p.state.store(SPENT, Ordering::Release);
        // SAFETY: its last role was spent just now, under the lock; it has no trap of ours.
        unsafe { release(traps, p, len, false, held) };
        return;
    }
    let mut orig = [0; MAX_TRAP];
    orig[..len].copy_from_slice(code);
    p.orig.store(u32::from_le_bytes(orig), Ordering::Release);
    code.copy_from_slice(Native::TRAP);
    Native::code_written(p.addr, len);
    p.state.store(s | TRAP, Ordering::Release);
}

mod hits;
mod lists;
mod plant;
mod signals;
mod traps;
use lists::executable_ranges;
#[cfg(test)]
use plant::{groups_of, parents_of, sort_by_group, Walk};
pub(crate) use plant::{plant, Planted};
use signals::{chain, next_symbol, real_sigaction, REAL_PTHREAD_SIGMASK, REAL_SIGPROCMASK};
#[cfg(any(test, doc))]
use traps::disarm_group;
#[cfg(doc)]
use traps::on_trap;
use traps::{disarm_groups, disarm_role, install_handler};
pub(crate) use traps::{release, write_traps};
#[cfg(test)]
pub(crate) mod tests;
