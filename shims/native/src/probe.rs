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
use trace_format::probes::{self, ProbeKind};

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

/// What [`plant`] planted: each list's counts (`None`: no list for the program).
#[derive(Default)]
pub(crate) struct Planted {
    pub(crate) inline: Option<InlineProbes>,
    pub(crate) lines: Option<InlineProbes>,
}

/// Plant the probes of the program loaded at `base` (its first page), whose file is `path`,
/// whose patched entries moved the bytes in `moved` and whose entry-patched functions span
/// `bodies` ((entry, end)): its inline probes and its line probes, from the lists `trace run`
/// wrote. The pages that hold probes are made writable now (one `mprotect` per run of touching
/// pages); a probe inside an entry-patched function gets its trap at that function's first
/// call ([`first_call`]: its body runs only after its entry), the others now. Without
/// deferring (a `-F`/`-N` filter, whose calls outside it are never registered; or
/// `SLICE_TRACE_INLINE=start`) every trap is written now. Called once for the program
/// (`program`: its inline and line lists) and once per library with a list (its inline list
/// among [`LIBRARY_INLINE_PROBES_FILE`]'s, whose hits get `funcs.jsonl` lines, `inline.bin`
/// being the program's; its line list among [`LIBRARY_LINE_PROBES_FILE`]'s, whose states go
/// into a `lines-lib-<k>.bin` of its own): from the constructor, before any other thread
/// exists, for the program and the libraries loaded with it; from the loader's hook inside
/// `dlopen` for a library it loads (objects.rs), before the library is relocated and its
/// constructors run, so that no thread can run its code yet (the loader holds its lock: no
/// `dlsym` can reach it) and no other `plant` runs (the objects' lock is held). Each object's
/// probes are a set of their own ([`PROBES`]), all under the one [`LOCK`]. Nothing when there is
/// no list for this object (or inline probes are off and there is no line list, or
/// [`Isa::TRAP`] is empty: not supported on this architecture).
pub(crate) fn plant(base: u64, path: &str, moved: &[(u64, u64)], bodies: &[(u64, u64)], program: bool) -> Planted {
    // No trap: inline probes are not supported on this architecture (arch/aarch64).
    if Native::TRAP.is_empty() || all().any(|p| p.base == base) {
        return Planted::default();
    }
    let root = crate::process::ROOT.load(Ordering::Acquire);
    if root.is_null() {
        return Planted::default();
    }
    // SAFETY: set once by the constructor, never freed.
    let root = unsafe { &*root };
    let Some(file_id) = std::fs::metadata(path).ok().and_then(|m| {
        let t = m.modified().ok()?.duration_since(std::time::UNIX_EPOCH).ok()?.as_nanos() as i128;
        Some((m.len(), t))
    }) else {
        return Planted::default();
    };
    let ours = |l: &InlineProbeList| l.object == path && (l.size, l.mtime_ns) == file_id;
    let inline_env = std::env::var_os(ENV_INLINE);
    let inline_off = inline_env.as_ref().is_some_and(|v| v == "0");
    let lazy = inline_env.is_none_or(|v| v != "start") && crate::filter::active().is_none();
    // The program's lists, or a library's among the libraries' (the line list's index there
    // names its file: `lines-lib-<k>.bin`).
    let inline = (!inline_off).then(|| probes::list_for(root, ProbeKind::Inline, program, ours)).flatten().map(|l| l.0);
    let line_list = probes::list_for(root, ProbeKind::Lines, program, |l| ours(l) && l.groups.len() == l.offsets.len());
    if inline.is_none() && line_list.is_none() {
        return Planted::default();
    }
    let mut lines = line_list.as_ref().and_then(|(l, k)| LineSet::new(l.offsets.len(), probes::lines_bin_file(*k)));
    let line_list = line_list.filter(|_| lines.is_some()).map(|l| l.0);
    // SAFETY: `base` is the first page of the program's loaded image, whose ELF and program
    // headers the loader mapped there.
    let code = unsafe { executable_ranges(base) };
    let mut moved: Vec<(u64, u64)> = moved.to_vec();
    moved.sort_unstable();
    // The patched entry whose moved bytes hold `a`, if any.
    let mut in_moved = Walk::new(&moved);
    let mut at_entry = Vec::new();
    // (address, role, index in its list) of the probes wanted.
    let mut wanted: Vec<(u64, u8, u32)> = Vec::new();
    for (k, &off) in inline.iter().flat_map(|l| l.offsets.iter().enumerate()) {
        let a = base.wrapping_add(off);
        match in_moved.start_of(a) {
            Some(entry) => at_entry.push((entry, a, AtomicBool::new(false), k as u32)),
            None if code.iter().any(|&(b, e)| a >= b && a < e) => wanted.push((a, INLINE, k as u32)),
            None => {}
        }
    }
    if let (Some(l), Some(set)) = (&line_list, &mut lines) {
        let mut in_moved = Walk::new(&moved);
        for (k, &off) in l.offsets.iter().enumerate() {
            let a = base.wrapping_add(off);
            match in_moved.start_of(a) {
                Some(entry) => set.at_entry.push((entry, k as u32, l.groups[k])),
                None if code.iter().any(|&(b, e)| a >= b && a < e) => wanted.push((a, LINE, k as u32)),
                None => {}
            }
        }
    }
    wanted.sort_unstable();
    let mut addrs: Vec<u64> = wanted.iter().map(|w| w.0).collect();
    addrs.dedup();
    if !addrs.is_empty() && !INSTALLED.load(Ordering::Acquire) && !install_handler() {
        addrs.clear();
    }
    // The entry-patched function whose body holds `a`, if any.
    let mut bodies: Vec<(u64, u64)> = bodies.to_vec();
    bodies.sort_unstable();
    let mut in_body = Walk::new(&bodies);
    // SAFETY: every address is inside an executable segment of the object (checked above),
    // whose code no other thread can run yet (the contract).
    let mut traps = unsafe { write_traps::<Native>(&addrs, |a| lazy && in_body.start_of(a).is_some()) };
    // Each probe's roles: those wanted at its address (both sorted: one walk).
    let mut planted = (0u64, 0u64);
    let mut deferred_roles = (0u64, 0u64);
    let mut from = 0;
    for p in &mut traps.probes {
        while wanted.get(from).is_some_and(|w| w.0 < p.addr) {
            from += 1;
        }
        let mut roles = SPENT;
        for &(_, role, k) in wanted[from..].iter().take_while(|w| w.0 == p.addr) {
            roles |= role;
            if role == LINE {
                if let (Some(l), Some(set)) = (&line_list, &lines) {
                    (p.line, p.line_group) = (k, l.groups[k as usize]);
                    // A row of a function not entered yet is armed too: its code runs only
                    // after its entry, which writes its trap first.
                    set.armed(k);
                }
                planted.1 += 1;
                deferred_roles.1 += u64::from(p.state.load(Ordering::Relaxed) & TRAP == 0);
            } else {
                p.inline = k;
                planted.0 += 1;
                deferred_roles.0 += u64::from(p.state.load(Ordering::Relaxed) & TRAP == 0);
            }
        }
        p.state.fetch_or(roles, Ordering::Relaxed);
    }
    // The deferred probes by function: contiguous, as the probes and the bodies are sorted.
    let mut deferred: Vec<Deferred> = Vec::new();
    let mut in_body = Walk::new(&bodies);
    for (j, p) in traps.probes.iter().enumerate() {
        if p.state.load(Ordering::Relaxed) & TRAP != 0 {
            continue;
        }
        let Some(entry) = in_body.start_of(p.addr) else { continue };
        match deferred.last_mut() {
            Some(d) if d.entry == entry => d.probes.1 = j as u32 + 1,
            _ => deferred.push(Deferred { entry, probes: (j as u32, j as u32 + 1), planted: AtomicBool::new(false) }),
        }
    }
    let groups = inline.as_ref().map(|l| groups_of(&mut traps, l)).unwrap_or_default();
    let parents = inline.as_ref().map(parents_of).unwrap_or_default();
    // `inline.bin` is the program's: a library's hits get `funcs.jsonl` lines.
    let hits = inline.as_ref().filter(|_| program).and_then(|l| HitMap::new(l.offsets.len(), base));
    let stats = |list: &InlineProbeList, planted: u64, at_entry: usize, deferred: u64| InlineProbes {
        listed: list.offsets.len() as u64,
        planted,
        at_entry: at_entry as u64,
        unprobed: (list.offsets.len() as u64).saturating_sub(planted + at_entry as u64),
        deferred,
    };
    let out = Planted {
        inline: inline.as_ref().map(|l| stats(l, planted.0, at_entry.len(), deferred_roles.0)),
        lines: line_list.as_ref().zip(lines.as_ref()).map(|(l, set)| stats(l, planted.1, set.at_entry.len(), deferred_roles.1)),
    };
    if let Some(set) = &mut lines {
        set.rows =
            traps.probes.iter().enumerate().filter(|(_, p)| p.line != NO_PROBE).map(|(i, p)| (p.line_group, p.line, i as u32)).collect();
        set.rows.extend(set.at_entry.iter().map(|e| (e.2, e.1, NO_PROBE)));
        set.rows.sort_unstable();
        set.at_entry.sort_unstable();
    }
    at_entry.sort_unstable_by_key(|e| (e.0, e.1));
    let entry_groups = inline.map(|l| l.groups).filter(|g| !g.is_empty()).unwrap_or_default();
    let next = PROBES.load(Ordering::Acquire) as *const Probes;
    let probes = Probes { traps, groups, parents, at_entry, hits, entry_groups, lines, deferred, base, next, gone: AtomicBool::new(false) };
    PROBES.store(Box::into_raw(Box::new(probes)), Ordering::Release);
    out
}

/// Sorted ranges ((start, end), not overlapping), asked which one holds each of a series of
/// addresses: ascending ones (the list's offsets, the probes) in one walk instead of a binary
/// search each (6,383 searches over 1,114 ranges, three times, were most of `plant`'s
/// 0.8 ms on hexyl); an address below the one before is searched.
struct Walk<'a> {
    ranges: &'a [(u64, u64)],
    /// The ranges starting at or before the last address asked.
    next: usize,
    last: u64,
}

impl<'a> Walk<'a> {
    fn new(ranges: &'a [(u64, u64)]) -> Walk<'a> {
        Walk { ranges, next: 0, last: 0 }
    }

    /// The start of the range holding `a`, if any.
    fn start_of(&mut self, a: u64) -> Option<u64> {
        if a < self.last {
            self.next = self.ranges.partition_point(|r| r.0 <= a);
        }
        while self.ranges.get(self.next).is_some_and(|r| r.0 <= a) {
            self.next += 1;
        }
        self.last = a;
        self.next.checked_sub(1).map(|i| self.ranges[i]).filter(|&(_, end)| a < end).map(|r| r.0)
    }
}

/// The groups of the list (`InlineProbeList::groups`) of the inline probes planted, as
/// [`Probes::groups`] keeps them, each probe's `group` set to its own.
fn groups_of(traps: &mut Traps, list: &InlineProbeList) -> Vec<(u32, u32)> {
    if list.groups.len() != list.offsets.len() {
        return Vec::new();
    }
    let mut out: Vec<(u32, u32)> = Vec::new();
    for (i, p) in traps.probes.iter_mut().enumerate() {
        if let Some(&g) = list.groups.get(p.inline as usize) {
            p.group = g;
            out.push((g, i as u32));
        }
    }
    out.sort_unstable();
    out
}

/// [`Probes::parents`] from the list's `group_parents` (none when it has none, or they do not
/// fit its groups).
fn parents_of(list: &InlineProbeList) -> Vec<(u32, AtomicBool)> {
    let n = list.groups.iter().max().map_or(0, |&g| g as usize + 1);
    if list.group_parents.len() != n || list.groups.len() != list.offsets.len() {
        return Vec::new();
    }
    list.group_parents.iter().map(|p| (p.filter(|&g| (g as usize) < n).unwrap_or(NO_GROUP), AtomicBool::new(false))).collect()
}

// ---------------------------------------------------------------------------------------
// The traps, the handler, the rewind
// ---------------------------------------------------------------------------------------

/// Write `I`'s trap at each of `addrs` (ascending) but those `defer` says wait for their
/// function's first call ([`first_call`]), one `mprotect` per run of touching pages, which are
/// left writable (see "Writable code" in the module's description; a page where no probe is
/// is made read-and-execute again); the probes, each written one with its original bytes and
/// [`TRAP`] in its state, and their pages, each counting its probes. An address whose bytes
/// already are the trap (the program's own) gets no probe; a deferred one is looked at when
/// its trap is written. Nothing is written where `I` has no trap.
///
/// # Safety
/// Every address lies in the program's mapped executable code, and no other thread runs it
/// (none exists yet, or the object is a library being loaded, whose code cannot run yet).
pub(crate) unsafe fn write_traps<I: Isa>(addrs: &[u64], mut defer: impl FnMut(u64) -> bool) -> Traps {
    let trap = I::TRAP;
    let mut out = Traps { probes: Vec::with_capacity(addrs.len()), pages: Vec::new() };
    if trap.is_empty() {
        return out;
    }
    let runs = addrs.chunk_by(|a, b| b & !4095 <= (a & !4095) + 4096);
    for run in runs {
        let (page, end) = (run[0] & !4095, (run[run.len() - 1] + trap.len() as u64).next_multiple_of(4096));
        let mut written = false;
        // SAFETY: the pages hold the program's code (the contract): readable and executable;
        // written by this thread alone (no other thread runs yet). A deferred probe's bytes
        // are not read now (no cache miss, no copy of its page until its function runs).
        unsafe {
            if libc::mprotect(page as *mut libc::c_void, (end - page) as usize, libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC) != 0 {
                continue;
            }
            for &a in run {
                let mut orig = [0; MAX_TRAP];
                let state = if defer(a) {
                    SPENT
                } else {
                    let code = std::slice::from_raw_parts_mut(a as *mut u8, trap.len());
                    if *code == *trap {
                        continue;
                    }
                    orig[..trap.len()].copy_from_slice(code);
                    code.copy_from_slice(trap);
                    written = true;
                    TRAP
                };
                // A trap never crosses a page (`Isa::TRAP`): its page is its first byte's.
                if out.pages.last().is_none_or(|p| p.0 != a & !4095) {
                    out.pages.push(Page(a & !4095, AtomicU32::new(0)));
                }
                let last = out.pages.len() - 1;
                out.pages[last].1.fetch_add(1, Ordering::Relaxed);
                out.probes.push(Probe {
                    addr: a,
                    orig: AtomicU32::new(u32::from_le_bytes(orig)),
                    state: AtomicU8::new(state),
                    page: last as u32,
                    group: NO_GROUP,
                    inline: NO_PROBE,
                    line: NO_PROBE,
                    line_group: NO_GROUP,
                });
            }
            // The run's pages without a probe go back to read-and-execute.
            for p in (page..end).step_by(4096) {
                if out.pages.binary_search_by_key(&p, |q| q.0).is_err() {
                    libc::mprotect(p as *mut libc::c_void, 4096, libc::PROT_READ | libc::PROT_EXEC);
                }
            }
            if written {
                I::code_written(page, (end - page) as usize);
            }
        }
    }
    out
}

/// Install [`on_trap`] for `SIGTRAP`, keeping the disposition it replaces to chain to. It runs
/// with every signal blocked (so its registration of a hit needs no mask calls of its own;
/// [`chain`] gives the program's handler the mask it would have had).
fn install_handler() -> bool {
    // Look the wrapped functions up now: `dlsym` is not for signal handlers.
    next_symbol(c"pthread_sigmask", &REAL_PTHREAD_SIGMASK);
    next_symbol(c"sigprocmask", &REAL_SIGPROCMASK);
    let Some(real) = real_sigaction() else { return false };
    // SAFETY: a zeroed sigaction is valid (no handler, empty mask); `real` is libc's
    // `sigaction`, given structures we own.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_trap as *const () as usize;
        sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
        libc::sigfillset(&mut sa.sa_mask);
        let mut old: libc::sigaction = std::mem::zeroed();
        if real(libc::SIGTRAP, &sa, &mut old) != 0 {
            return false;
        }
        CHAINED.store(old.sa_sigaction, Ordering::Release);
        CHAINED_FLAGS.store(old.sa_flags, Ordering::Release);
    }
    INSTALLED.store(true, Ordering::Release);
    true
}

/// The `SIGTRAP` handler (see the module's description).
///
/// Async-signal-safety: it runs with every signal blocked (`install_handler`). It reads the
/// immutable probe table, takes the probes' spin lock without a mask call ([`Held`]: no
/// holder can be this thread, whose holders block every signal), changes atomics, stores the
/// probe's bytes into its page (left writable by `plant`; one `mprotect` when the page's last
/// probe is spent), releases the lock, registers the hit's
/// id (process.rs, under the cold lock, the same work a patched function's first call does
/// in any handler) and records through hot.c's `slt_enter`/`slt_exit`, which are built to run
/// in signal handlers (a patched function called by one reaches them the same way; an event
/// that interrupts the same thread's recording is dropped there). A line probe's hit only
/// stores bytes into the shared mapping of `lines.bin` (atomics, lines.rs) and disarms its
/// line's other rows as an inline group is disarmed. `errno` is kept.
extern "C" fn on_trap(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    let _errno = ErrnoGuard::save();
    // SAFETY: the kernel passes a valid siginfo and ucontext to an SA_SIGINFO handler.
    let (code, uc) = unsafe { ((*info).si_code, &mut *(ctx as *mut libc::ucontext_t)) };
    if code == Native::TRAP_SI_CODE {
        let at = Native::trap_pc(uc);
        let found = all().find_map(|ps| ps.traps.probes.binary_search_by_key(&at, |p| p.addr).ok().map(|i| (ps, i)));
        // The probe's roles this thread claimed (none: another thread did; its bytes are back
        // by the time the lock is ours), or `None`: no trap of ours was ever written there.
        let claimed = found.and_then(|(ps, i)| {
            let held = Held::lock_blocked();
            let p = &ps.traps.probes[i];
            let s = p.state.load(Ordering::Acquire);
            if s & TRAP == 0 {
                return None;
            }
            let roles = s & ROLES;
            if roles != SPENT {
                p.state.store(TRAP, Ordering::Release);
                // SAFETY: one of `traps`' probes with its trap written, whose last role this
                // thread spent just now, under the lock.
                unsafe { release(&ps.traps, p, Native::TRAP.len(), true, &held) };
            }
            if roles & LINE != 0 {
                if let Some(set) = &ps.lines {
                    set.ran(p.line);
                    set.group_ran(p.line_group, |j| disarm_role(ps, j, LINE, &held));
                }
            }
            if roles & INLINE != 0 {
                disarm_group(ps, i as u32, &held);
            }
            Some((ps, p, roles))
        });
        if let Some((ps, p, roles)) = claimed {
            if roles & INLINE != 0 {
                // The interrupted code's stack pointer is the hit's frame address (its CFA
                // offset is HIT_CFA): frames at or below it have returned.
                let frame = Native::trap_sp(uc) - HIT_CFA as u64;
                // Its id now, with the signals blocked already (no mask calls of the cold path's
                // own): `slt_enter` finds it. Noted in `inline.bin` (no system call), or, without
                // it, with a `funcs.jsonl` record. (The probes' lock is not held: the cold lock
                // is taken alone here.)
                let key = p.addr | INLINE_BIT;
                match ps.hits.as_ref().filter(|h| h.usable() && p.inline != NO_PROBE) {
                    Some(h) => crate::process::lookup_or(key, || crate::process::register_noted_blocked(key, |id| h.set(p.inline, id))),
                    None => crate::process::register_blocked(key),
                };
                // SAFETY: hot.c's entry points, for this thread; the address is a number.
                unsafe {
                    crate::hot::slt_enter((p.addr | INLINE_BIT) as *mut libc::c_void, frame);
                    crate::hot::slt_exit((p.addr | INLINE_BIT) as *mut libc::c_void, frame);
                }
            }
            // Run the original instruction (after its bytes are back; until then, trap again).
            Native::set_trap_pc(uc, p.addr);
            return;
        }
    }
    chain(sig, info, ctx);
}

/// The other probes of the inline group of probe `i` (if any), and every probe of the groups
/// around it (its parent's, theirs, ...: that code ran, since this code is inside it): their
/// inline role spent, and their bytes put back when that was their last role, so that they
/// never trap (the hit of `i` stands for them; a probe whose function has not run yet gets no
/// trap then). A group already spent stops the walk (its parents were spent with it).
fn disarm_group(ps: &Probes, i: u32, held: &Held) {
    disarm_groups(ps, ps.traps.probes[i as usize].group, i, held);
}

/// [`disarm_group`] for the probes of `group` but probe `except` (none: `NO_PROBE`).
fn disarm_groups(ps: &Probes, mut group: u32, except: u32, held: &Held) {
    // A walk as long as the groups are many at most (a damaged list cannot loop it).
    for _ in 0..=ps.parents.len() {
        if group == NO_GROUP {
            return;
        }
        if let Some((_, spent)) = ps.parents.get(group as usize) {
            if spent.swap(true, Ordering::AcqRel) {
                return;
            }
        }
        let from = ps.groups.partition_point(|g| g.0 < group);
        for &(_, j) in ps.groups[from..].iter().take_while(|g| g.0 == group) {
            if j != except {
                disarm_role(ps, j, INLINE, held);
            }
        }
        group = ps.parents.get(group as usize).map_or(NO_GROUP, |p| p.0);
    }
}

/// Spend role `role` of probe `j` (if it is still armed with it); when that was its last,
/// its bytes go back if its trap was written ([`release`]). Async-signal-safe: atomics, and
/// [`release`].
fn disarm_role(ps: &Probes, j: u32, role: u8, held: &Held) {
    let Some(q) = ps.traps.probes.get(j as usize) else { return };
    let before = q.state.load(Ordering::Acquire);
    if before & role == 0 {
        return;
    }
    q.state.store(before & !role, Ordering::Release);
    if before & ROLES == role {
        // SAFETY: one of the probes of `ps.traps`, whose last role this thread spent just now,
        // under the lock.
        unsafe { release(&ps.traps, q, Native::TRAP.len(), before & TRAP != 0, held) };
    }
}

/// Probe `p` of `traps` is spent: if its trap was written (`had_trap`), put its first `len`
/// bytes back with a plain store (its page is writable: it counts `p`); count it off its page,
/// which becomes read-and-execute again when that was its last armed probe (no trap is ever
/// written into it again: every probe there is spent).
///
/// # Safety
/// `p` is one of `traps`' probes, whose last role the caller spent under the lock (`_held`),
/// once.
pub(crate) unsafe fn release(traps: &Traps, p: &Probe, len: usize, had_trap: bool, _held: &Held) {
    if had_trap {
        let orig = p.orig.load(Ordering::Acquire).to_le_bytes();
        // SAFETY: the trap's bytes are in a page of the program's code left writable and
        // executable while it counts this probe (the contract: not yet counted off); a thread
        // running them meanwhile either still traps (and is rewound to try again) or runs the
        // original instruction: the other bytes of the page do not change.
        unsafe {
            for (i, &b) in orig[..len].iter().enumerate() {
                std::ptr::write_volatile((p.addr + i as u64) as *mut u8, b);
            }
        }
        Native::code_written(p.addr, len);
    }
    let page = &traps.pages[p.page as usize];
    if page.1.fetch_sub(1, Ordering::AcqRel) == 1 {
        // Every probe of the page is spent and its bytes are back: no store into it follows.
        // SAFETY: the page is the program's code, mapped; mprotect is async-signal-safe.
        unsafe { libc::mprotect(page.0 as *mut libc::c_void, 4096, libc::PROT_READ | libc::PROT_EXEC) };
    }
}

mod hits;
mod lists;
mod signals;
use lists::executable_ranges;
use signals::{chain, next_symbol, real_sigaction, REAL_PTHREAD_SIGMASK, REAL_SIGPROCMASK};
#[cfg(test)]
pub(crate) mod tests;
