//! The probes' tests: traps written and restored, groups and roles disarmed.

use super::{forget_in, live, release, write_traps, Held, Probe, Probes, Traps, MAX_TRAP, ROLES, TRAP};
use crate::arch::{Isa, Native};
use std::sync::atomic::AtomicBool;

/// The probe table of `traps`, with their groups and the groups' parents (`parents`, per group).
fn probes(traps: Traps, groups: Vec<(u32, u32)>, parents: Vec<u32>) -> Probes {
    let parents = parents.into_iter().map(|p| (p, AtomicBool::new(false))).collect();
    Probes {
        traps,
        groups,
        parents,
        at_entry: Vec::new(),
        hits: None,
        entry_groups: Vec::new(),
        lines: None,
        deferred: Vec::new(),
        base: 0,
        next: std::ptr::null(),
        gone: AtomicBool::new(false),
    }
}

/// Probe `p` of `traps`, armed with its trap written, fires: its roles claimed, its bytes
/// put back (as the trap handler does); the roles it had.
fn claim(traps: &Traps, p: &Probe) -> u8 {
    use std::sync::atomic::Ordering;
    let held = Held::lock();
    let s = p.state.load(Ordering::Acquire);
    assert_eq!(s & TRAP, TRAP, "its trap is written");
    p.state.store(TRAP, Ordering::Release);
    // SAFETY: one of `traps`' probes with its trap, whose last role was spent just now.
    unsafe { release(traps, p, Native::TRAP.len(), true, &held) };
    s & ROLES
}

/// The roles still armed of each probe.
fn roles(ps: &Probes) -> Vec<u8> {
    ps.traps.probes.iter().map(|p| p.state.load(std::sync::atomic::Ordering::Acquire) & ROLES).collect()
}

/// The permissions (`r-xp`) `/proc/self/maps` gives the mapping holding `addr`.
fn perms(addr: u64) -> String {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    for l in maps.lines() {
        let (range, rest) = l.split_once(' ').unwrap();
        let (a, b) = range.split_once('-').unwrap();
        if (u64::from_str_radix(a, 16).unwrap()..u64::from_str_radix(b, 16).unwrap()).contains(&addr) {
            return rest[..4].to_string();
        }
    }
    panic!("{addr:#x} is not mapped")
}

/// `write_traps::<I>` on two read-and-execute pages (as a program's code) of `nop`-like
/// bytes with the trap already at one address of the second (the program's own): each other
/// address gets the trap with its bytes kept, its page is left writable (the page without a
/// new trap is not), and [`release`] puts the bytes back, the page becoming
/// read-and-execute again with its last probe; nothing is written where `I` has no trap.
/// The addresses written.
pub(crate) fn traps_written_and_restored<I: Isa>() -> Vec<u64> {
    // SAFETY: a fresh anonymous private mapping of two pages, ours.
    let page = unsafe {
        libc::mmap(std::ptr::null_mut(), 8192, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0)
    };
    assert_ne!(page, libc::MAP_FAILED);
    let base = page as u64;
    let len = I::TRAP.len();
    // SAFETY: the pages are mapped writable (above).
    let bytes = unsafe { std::slice::from_raw_parts_mut(page as *mut u8, 8192) };
    bytes.iter_mut().enumerate().for_each(|(i, b)| *b = i as u8 | 1);
    bytes[4096 + 64..4096 + 64 + len].copy_from_slice(I::TRAP);
    let before = bytes.to_vec();
    // SAFETY: the pages are ours; made read-and-execute as code is.
    assert_eq!(unsafe { libc::mprotect(page, 8192, libc::PROT_READ | libc::PROT_EXEC) }, 0);
    // SAFETY: the addresses are in the pages (mapped executable), this thread alone writes.
    let traps = unsafe { write_traps::<I>(&[base, base + 4092, base + 4096 + 64], |_| false) };
    // SAFETY: the pages are mapped readable.
    let after = unsafe { std::slice::from_raw_parts(page as *const u8, 8192) }.to_vec();
    let written: Vec<u64> = traps.probes.iter().map(|p| p.addr).collect();
    if !written.is_empty() {
        assert_eq!((perms(base).as_str(), perms(base + 4096).as_str()), ("rwxp", "r-xp"), "only the page with traps is writable");
    }
    for (k, p) in traps.probes.iter().enumerate() {
        let at = (p.addr - base) as usize;
        assert_eq!(&after[at..at + len], I::TRAP);
        let orig = p.orig.load(std::sync::atomic::Ordering::Acquire).to_le_bytes();
        assert_eq!(&orig[..len], &before[at..at + len]);
        assert!(orig[len..MAX_TRAP].iter().all(|&b| b == 0));
        let held = Held::lock();
        // SAFETY: one of `traps`' probes, with its trap, released once, by this thread alone.
        unsafe { release(&traps, p, len, true, &held) };
        let last = k + 1 == traps.probes.len();
        assert_eq!(perms(base), if last { "r-xp" } else { "rwxp" }, "writable until its page's last probe fired");
    }
    // SAFETY: the pages are mapped readable.
    assert_eq!(unsafe { std::slice::from_raw_parts(page as *const u8, 8192) }, &before[..], "all bytes back");
    // SAFETY: unmapping the pages mapped above, which nothing else uses.
    unsafe { libc::munmap(page, 8192) };
    written
}

/// A hit disarms the other probes of its group (the list's `groups`), and only those
/// (on the architectures with a trap).
#[test]
#[cfg(target_arch = "x86_64")]
fn a_hit_disarms_the_other_probes_of_its_group() {
    use super::{disarm_group, groups_of, INLINE as ARMED, NO_GROUP, SPENT as FIRED};
    use std::sync::atomic::Ordering;
    // SAFETY: a fresh anonymous private mapping of one page, ours.
    let page = unsafe {
        libc::mmap(std::ptr::null_mut(), 4096, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0)
    };
    assert_ne!(page, libc::MAP_FAILED);
    let base = page as u64;
    // SAFETY: the page is mapped writable (above).
    unsafe { std::ptr::write_bytes(page as *mut u8, 0x90, 4096) };
    let offsets = vec![16, 32, 48, 64];
    let list = trace_format::meta::InlineProbeList { offsets: offsets.clone(), groups: vec![5, 7, 5, 9], ..Default::default() };
    let addrs: Vec<u64> = offsets.iter().map(|o| base + o).collect();
    // SAFETY: the addresses are in the page, this thread alone writes.
    let mut traps = unsafe { write_traps::<Native>(&addrs, |_| false) };
    traps.probes.iter().for_each(|p| _ = p.state.fetch_or(ARMED, Ordering::Relaxed));
    assert!(traps.probes.iter().all(|p| p.group == NO_GROUP));
    traps.probes.iter_mut().enumerate().for_each(|(k, p)| p.inline = k as u32);
    let groups = groups_of(&mut traps, &list);
    assert_eq!(groups, [(5, 0), (5, 2), (7, 1), (9, 3)]);
    assert_eq!(traps.probes.iter().map(|p| p.group).collect::<Vec<_>>(), [5, 7, 5, 9]);
    let ps = probes(traps, groups, Vec::new());
    assert_eq!(claim(&ps.traps, &ps.traps.probes[0]), ARMED);
    disarm_group(&ps, 0, &Held::lock());
    assert_eq!(roles(&ps), [FIRED, ARMED, FIRED, ARMED]);
    // SAFETY: the page is mapped readable.
    let bytes = unsafe { std::slice::from_raw_parts(page as *const u8, 4096) };
    let trapped: Vec<bool> = offsets.iter().map(|&o| bytes[o as usize..].starts_with(Native::TRAP)).collect();
    assert_eq!(trapped, [false, true, false, true]);
    // SAFETY: unmapping the page mapped above, which nothing else uses.
    unsafe { libc::munmap(page, 4096) };
}

/// A trap that is an inline probe and a line probe keeps trapping when its inline group is
/// disarmed (its line has not run), and a line's hit spends only the line role of the other
/// rows of the line: a trap that is also an inline probe stays.
#[test]
#[cfg(target_arch = "x86_64")]
fn disarming_one_role_leaves_a_trap_armed_for_its_other_role() {
    use super::{disarm_group, disarm_role, groups_of, INLINE, LINE, SPENT};
    use std::sync::atomic::Ordering;
    // SAFETY: a fresh anonymous private mapping of one page, ours.
    let page = unsafe {
        libc::mmap(std::ptr::null_mut(), 4096, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0)
    };
    assert_ne!(page, libc::MAP_FAILED);
    let base = page as u64;
    // SAFETY: the page is mapped writable (above).
    unsafe { std::ptr::write_bytes(page as *mut u8, 0x90, 4096) };
    let offsets = vec![16, 32, 48];
    let list = trace_format::meta::InlineProbeList { offsets: offsets.clone(), groups: vec![5, 5, 5], ..Default::default() };
    // SAFETY: the addresses are in the page, this thread alone writes.
    let mut traps = unsafe { write_traps::<Native>(&offsets.iter().map(|o| base + o).collect::<Vec<_>>(), |_| false) };
    traps.probes.iter_mut().enumerate().for_each(|(k, p)| p.inline = k as u32);
    let groups = groups_of(&mut traps, &list);
    // Probe 1 is also a line's row; probe 2 only an inline probe.
    traps.probes.iter().for_each(|p| _ = p.state.fetch_or(INLINE, Ordering::Relaxed));
    traps.probes[1].state.fetch_or(LINE, Ordering::Relaxed);
    let ps = probes(traps, groups, Vec::new());
    // Probe 0 fires: the inline group is disarmed.
    assert_eq!(claim(&ps.traps, &ps.traps.probes[0]), INLINE);
    disarm_group(&ps, 0, &Held::lock());
    let states = roles;
    // SAFETY: the page is mapped readable.
    let trapped =
        || offsets.iter().map(|&o| unsafe { std::slice::from_raw_parts((base + o) as *const u8, 1) } == Native::TRAP).collect::<Vec<_>>();
    assert_eq!(states(&ps), [SPENT, LINE, SPENT]);
    assert_eq!(trapped(), [false, true, false], "the line's row still traps");
    // Its line ran elsewhere: the line role is spent, and the trap goes.
    disarm_role(&ps, 1, LINE, &Held::lock());
    assert_eq!(states(&ps), [SPENT, SPENT, SPENT]);
    assert_eq!(trapped(), [false, false, false]);
    // SAFETY: unmapping the page mapped above, which nothing else uses.
    unsafe { libc::munmap(page, 4096) };
}

#[test]
fn the_native_trap_is_written_where_it_is_not_already_and_restored() {
    let base_free: Vec<u64> = traps_written_and_restored::<Native>().iter().map(|a| a & 4095).collect();
    if Native::TRAP.is_empty() {
        assert_eq!(base_free, Vec::<u64>::new());
    } else {
        assert_eq!(base_free, [0, 4092]);
    }
}

/// A hit disarms the probes of the groups around its own (the list's `group_parents`: that code
/// ran, since the hit's code is inside it), up the chain, and not a sibling group's; a later hit
/// of a group already spent walks no further. Without parents (an older list) only its group.
#[test]
#[cfg(target_arch = "x86_64")]
fn a_hit_disarms_the_groups_around_its_own_and_not_a_sibling() {
    use super::{disarm_group, groups_of, parents_of, INLINE, NO_GROUP, SPENT};
    use std::sync::atomic::Ordering;
    // SAFETY: a fresh anonymous private mapping of one page, ours.
    let page = unsafe {
        libc::mmap(std::ptr::null_mut(), 4096, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0)
    };
    assert_ne!(page, libc::MAP_FAILED);
    let base = page as u64;
    // SAFETY: the page is mapped writable (above).
    unsafe { std::ptr::write_bytes(page as *mut u8, 0x90, 4096) };
    // Groups: 0 `run` in main, 1 `parse` inside `run`, 2 `step` inside `parse`, 3 `other`
    // inside `run` (a sibling of `parse`). Probes 0..5 in groups 0, 2, 1, 3, 0.
    let offsets = vec![16, 32, 48, 64, 80];
    let list = trace_format::meta::InlineProbeList {
        offsets: offsets.clone(),
        groups: vec![0, 2, 1, 3, 0],
        group_parents: vec![None, Some(0), Some(1), Some(0)],
        ..Default::default()
    };
    let states = roles;
    let fire = |ps: &Probes, i: usize| {
        assert_eq!(claim(&ps.traps, &ps.traps.probes[i]), INLINE);
        disarm_group(ps, i as u32, &Held::lock());
    };
    let plant = || {
        // SAFETY: the addresses are in the page, this thread alone writes.
        let mut traps = unsafe { write_traps::<Native>(&offsets.iter().map(|o| base + o).collect::<Vec<_>>(), |_| false) };
        traps.probes.iter_mut().enumerate().for_each(|(k, p)| p.inline = k as u32);
        traps.probes.iter().for_each(|p| _ = p.state.fetch_or(INLINE, Ordering::Relaxed));
        let groups = groups_of(&mut traps, &list);
        (traps, groups)
    };
    let parents: Vec<u32> = parents_of(&list).into_iter().map(|p| p.0).collect();
    assert_eq!(parents, [NO_GROUP, 0, 1, 0]);
    // `step` (group 2) fires first: `parse` and `run` ran; `other` did not.
    let (traps, groups) = plant();
    let ps = probes(traps, groups, parents.clone());
    fire(&ps, 1);
    assert_eq!(states(&ps), [SPENT, SPENT, SPENT, INLINE, SPENT]);
    // SAFETY: the page is mapped readable.
    let trapped =
        || offsets.iter().map(|&o| unsafe { std::slice::from_raw_parts((base + o) as *const u8, 1) } == Native::TRAP).collect::<Vec<_>>();
    assert_eq!(trapped(), [false, false, false, true, false]);
    fire(&ps, 3);
    assert_eq!(states(&ps), [SPENT; 5]);
    assert!(ps.parents.iter().all(|p| p.1.load(Ordering::Acquire)));
    // Without parents: only the hit's own group.
    let (traps, groups) = plant();
    let ps = probes(traps, groups, Vec::new());
    fire(&ps, 1);
    assert_eq!(states(&ps), [INLINE, SPENT, INLINE, INLINE, INLINE]);
    for i in [0, 2, 3] {
        fire(&ps, i);
    }
    // SAFETY: unmapping the page mapped above, which nothing else uses.
    unsafe { libc::munmap(page, 4096) };
}

/// Probes inside an entry-patched function get no trap at start-up (their page made writable,
/// their bytes not even read), and theirs at the function's first call, but for those a hit
/// elsewhere disarmed meanwhile (no trap written for them, ever); the page goes back to
/// read-and-execute when its last probe is spent, and a second first call writes nothing.
#[test]
#[cfg(target_arch = "x86_64")]
fn deferred_probes_get_their_traps_at_the_first_call_unless_disarmed_before() {
    use super::{disarm_groups, groups_of, plant_deferred, Deferred, INLINE, NO_PROBE, SPENT};
    use std::sync::atomic::{AtomicBool, Ordering};
    // SAFETY: a fresh anonymous private mapping of one page, ours.
    let page = unsafe {
        libc::mmap(std::ptr::null_mut(), 4096, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0)
    };
    assert_ne!(page, libc::MAP_FAILED);
    let base = page as u64;
    // SAFETY: the page is mapped writable (above), then made read-and-execute as code is.
    unsafe {
        std::ptr::write_bytes(page as *mut u8, 0x90, 4096);
        assert_eq!(libc::mprotect(page, 4096, libc::PROT_READ | libc::PROT_EXEC), 0);
    }
    let offsets = vec![16, 32, 48];
    let list = trace_format::meta::InlineProbeList { offsets: offsets.clone(), groups: vec![5, 5, 7], ..Default::default() };
    // SAFETY: the addresses are in the page, this thread alone writes.
    let mut traps = unsafe { write_traps::<Native>(&offsets.iter().map(|o| base + o).collect::<Vec<_>>(), |_| true) };
    traps.probes.iter_mut().enumerate().for_each(|(k, p)| p.inline = k as u32);
    traps.probes.iter().for_each(|p| _ = p.state.fetch_or(INLINE, Ordering::Relaxed));
    let groups = groups_of(&mut traps, &list);
    let mut ps = probes(traps, groups, Vec::new());
    ps.deferred = vec![Deferred { entry: base, probes: (0, 3), planted: AtomicBool::new(false) }];
    // SAFETY: the page is mapped readable.
    let trapped =
        || offsets.iter().map(|&o| unsafe { std::slice::from_raw_parts((base + o) as *const u8, 1) } == Native::TRAP).collect::<Vec<_>>();
    let traps_written = |ps: &Probes| ps.traps.probes.iter().map(|p| p.state.load(Ordering::Acquire) & TRAP != 0).collect::<Vec<_>>();
    assert_eq!(trapped(), [false, false, false], "nothing written at start-up");
    assert_eq!(perms(base), "rwxp", "its page is writable, for the first call");
    // A hit elsewhere stands for group 5 before the function runs.
    disarm_groups(&ps, 5, NO_PROBE, &Held::lock());
    assert_eq!(roles(&ps), [SPENT, SPENT, INLINE]);
    // The function's first call: only probe 2 gets its trap, once.
    plant_deferred(&ps, base, &Held::lock());
    assert_eq!(trapped(), [false, false, true]);
    assert_eq!(traps_written(&ps), [false, false, true]);
    assert_eq!(perms(base), "rwxp");
    plant_deferred(&ps, base, &Held::lock());
    assert_eq!(claim(&ps.traps, &ps.traps.probes[2]), INLINE);
    assert_eq!(trapped(), [false, false, false]);
    assert_eq!(perms(base), "r-xp", "read-and-execute again with its last probe spent");
    plant_deferred(&ps, base, &Held::lock());
    // SAFETY: the page is mapped readable.
    assert!(unsafe { std::slice::from_raw_parts(page as *const u8, 4096) }.iter().all(|&b| b == 0x90), "every byte back");
    // SAFETY: unmapping the page mapped above, which nothing else uses.
    unsafe { libc::munmap(page, 4096) };
}

/// A walk over sorted ranges answers as a binary search would, for ascending addresses and
/// for one below the one before.
#[test]
fn a_walk_over_ranges_finds_the_range_holding_each_address() {
    let ranges = [(10, 20), (20, 25), (40, 50)];
    let mut w = super::Walk::new(&ranges);
    let asked = [0, 10, 19, 20, 24, 25, 39, 40, 49, 50, 60, 15, 45];
    let found: Vec<Option<u64>> = asked.iter().map(|&a| w.start_of(a)).collect();
    assert_eq!(found, [None, Some(10), Some(10), Some(20), Some(20), None, None, Some(40), Some(40), None, None, Some(10), Some(40)]);
}

/// A set whose object was unloaded (`dlclose`) is skipped by every walk; the others stay.
#[test]
fn an_unloaded_objects_probes_are_skipped_by_the_walks() {
    let empty = || Traps { probes: Vec::new(), pages: Vec::new() };
    let program = Probes { base: 0x1000, ..probes(empty(), Vec::new(), Vec::new()) };
    let plugin = Probes { base: 0x7000, next: &program, ..probes(empty(), Vec::new(), Vec::new()) };
    let later = Probes { base: 0x9000, next: &plugin, ..probes(empty(), Vec::new(), Vec::new()) };
    let bases = || live(Some(&later)).map(|p| p.base).collect::<Vec<_>>();
    assert_eq!(bases(), [0x9000, 0x7000, 0x1000]);
    forget_in(live(Some(&later)), 0x7000);
    assert_eq!(bases(), [0x9000, 0x1000]);
    // An address no set has: nothing changes.
    forget_in(live(Some(&later)), 0x5000);
    assert_eq!(bases(), [0x9000, 0x1000]);
}

/// Rows sorted by group through the groups' counts come out as a comparison sort puts them,
/// for dense groups (the counting sort) and sparse ones (the fallback), duplicates and all.
#[test]
fn rows_sorted_by_group_match_a_comparison_sort() {
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = |m: u32| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % u64::from(m)) as u32
    };
    for (n, groups) in [(0, 1), (1, 1), (9_239, 3_529), (500, 3), (50, 1_000_000)] {
        let rows: Vec<(u32, u32, u32)> = (0..n).map(|_| (next(groups), next(10_000), next(7))).collect();
        let mut want = rows.clone();
        want.sort_unstable();
        let mut got = rows;
        super::sort_by_group(&mut got);
        assert_eq!(got, want, "{n} rows in {groups} groups");
    }
}
