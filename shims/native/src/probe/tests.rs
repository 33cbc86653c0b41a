//! The probes' tests: traps written and restored, groups and roles disarmed.

use super::{restore, write_traps, Probes, Traps, MAX_TRAP};
use crate::arch::{Isa, Native};
use std::sync::atomic::AtomicBool;

/// The probe table of `traps`, with their groups and the groups' parents (`parents`, per group).
fn probes(traps: Traps, groups: Vec<(u32, u32)>, parents: Vec<u32>) -> Probes {
    let parents = parents.into_iter().map(|p| (p, AtomicBool::new(false))).collect();
    Probes { traps, groups, parents, at_entry: Vec::new(), hits: None, entry_groups: Vec::new(), lines: None }
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
/// new trap is not), and [`restore`] puts the bytes back, the page becoming
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
    let traps = unsafe { write_traps::<I>(&[base, base + 4092, base + 4096 + 64]) };
    // SAFETY: the pages are mapped readable.
    let after = unsafe { std::slice::from_raw_parts(page as *const u8, 8192) }.to_vec();
    let written: Vec<u64> = traps.probes.iter().map(|p| p.addr).collect();
    if !written.is_empty() {
        assert_eq!((perms(base).as_str(), perms(base + 4096).as_str()), ("rwxp", "r-xp"), "only the page with traps is writable");
    }
    for (k, p) in traps.probes.iter().enumerate() {
        let at = (p.addr - base) as usize;
        assert_eq!(&after[at..at + len], I::TRAP);
        assert_eq!(&p.orig[..len], &before[at..at + len]);
        assert!(p.orig[len..MAX_TRAP].iter().all(|&b| b == 0));
        // SAFETY: one of `traps`' probes, restored once, by this thread alone.
        unsafe { restore(&traps, p, len) };
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
    let mut traps = unsafe { write_traps::<Native>(&addrs) };
    assert!(traps.probes.iter().all(|p| p.group == NO_GROUP));
    traps.probes.iter_mut().enumerate().for_each(|(k, p)| p.inline = k as u32);
    let groups = groups_of(&mut traps, &list);
    assert_eq!(groups, [(5, 0), (5, 2), (7, 1), (9, 3)]);
    assert_eq!(traps.probes.iter().map(|p| p.group).collect::<Vec<_>>(), [5, 7, 5, 9]);
    let ps = probes(traps, groups, Vec::new());
    let p = &ps.traps.probes[0];
    assert!(p.state.compare_exchange(ARMED, FIRED, Ordering::AcqRel, Ordering::Acquire).is_ok());
    // SAFETY: one of the probes, claimed above.
    unsafe { restore(&ps.traps, p, Native::TRAP.len()) };
    disarm_group(&ps, 0);
    let states: Vec<u8> = ps.traps.probes.iter().map(|p| p.state.load(Ordering::Acquire)).collect();
    assert_eq!(states, [FIRED, ARMED, FIRED, ARMED]);
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
    let mut traps = unsafe { write_traps::<Native>(&offsets.iter().map(|o| base + o).collect::<Vec<_>>()) };
    traps.probes.iter_mut().enumerate().for_each(|(k, p)| p.inline = k as u32);
    let groups = groups_of(&mut traps, &list);
    // Probe 1 is also a line's row; probe 2 only an inline probe.
    traps.probes[1].state.store(INLINE | LINE, Ordering::Relaxed);
    let ps = probes(traps, groups, Vec::new());
    // Probe 0 fires: the inline group is disarmed.
    assert_eq!(ps.traps.probes[0].state.swap(SPENT, Ordering::AcqRel), INLINE);
    // SAFETY: one of the probes, claimed above.
    unsafe { restore(&ps.traps, &ps.traps.probes[0], Native::TRAP.len()) };
    disarm_group(&ps, 0);
    let states = |ps: &Probes| ps.traps.probes.iter().map(|p| p.state.load(Ordering::Acquire)).collect::<Vec<u8>>();
    // SAFETY: the page is mapped readable.
    let trapped =
        || offsets.iter().map(|&o| unsafe { std::slice::from_raw_parts((base + o) as *const u8, 1) } == Native::TRAP).collect::<Vec<_>>();
    assert_eq!(states(&ps), [SPENT, LINE, SPENT]);
    assert_eq!(trapped(), [false, true, false], "the line's row still traps");
    // Its line ran elsewhere: the line role is spent, and the trap goes.
    disarm_role(&ps, 1, LINE);
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
    let states = |ps: &Probes| ps.traps.probes.iter().map(|p| p.state.load(Ordering::Acquire)).collect::<Vec<u8>>();
    let fire = |ps: &Probes, i: usize| {
        assert_eq!(ps.traps.probes[i].state.swap(SPENT, Ordering::AcqRel), INLINE);
        // SAFETY: one of the probes, claimed above.
        unsafe { restore(&ps.traps, &ps.traps.probes[i], Native::TRAP.len()) };
        disarm_group(ps, i as u32);
    };
    let plant = || {
        // SAFETY: the addresses are in the page, this thread alone writes.
        let mut traps = unsafe { write_traps::<Native>(&offsets.iter().map(|o| base + o).collect::<Vec<_>>()) };
        traps.probes.iter_mut().enumerate().for_each(|(k, p)| p.inline = k as u32);
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
