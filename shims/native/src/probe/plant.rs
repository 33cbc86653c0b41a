//! Planting an object's probes from `trace run`'s lists ([`plant`]): which addresses get a
//! trap, with which roles, which wait for their function's first call, and the set published
//! into the chain (the module's description in probe.rs).

use super::*;
use trace_format::probes::{self, ProbeKind};

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
    // The rows an earlier row's probe stands for (the rest of its basic block: the list's
    // `covers`), outside the moved bytes: no probe of their own; and which rows are in the
    // moved bytes.
    let mut covered: Vec<u32> = Vec::new();
    let mut moved_row: Vec<bool> = Vec::new();
    if let (Some(l), Some(set)) = (&line_list, &mut lines) {
        if l.covers.len() == l.offsets.len() {
            set.covers.clone_from(&l.covers);
        }
        set.groups.clone_from(&l.groups);
        moved_row = vec![false; l.offsets.len()];
        let mut in_moved = Walk::new(&moved);
        // The rows below `block_end` are covered by the last leader's probe.
        let mut block_end = 0usize;
        for (k, &off) in l.offsets.iter().enumerate() {
            let a = base.wrapping_add(off);
            let is_covered = k < block_end;
            if !is_covered {
                block_end = set.covered(k as u32).end as usize;
            }
            match in_moved.start_of(a) {
                Some(entry) => {
                    set.at_entry.push((entry, k as u32, l.groups[k]));
                    moved_row[k] = true;
                }
                None if is_covered => covered.push(k as u32),
                None if code.iter().any(|&(b, e)| a >= b && a < e) => wanted.push((a, LINE, k as u32)),
                None => {}
            }
        }
    }
    // Two ascending runs (the inline list's, then the line list's): the stable sort merges
    // them in one pass, where an unstable one sorted 15,000 entries from scratch on hexyl.
    wanted.sort();
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
                    // after its entry, which writes its trap first. So are the rows its probe
                    // stands for.
                    set.armed(k);
                    for c in set.covered(k) {
                        if !moved_row.get(c as usize).copied().unwrap_or(true) {
                            set.armed(c);
                        }
                    }
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
    let stats = |list: &InlineProbeList, planted: u64, at_entry: usize, deferred: u64, covered: u64| InlineProbes {
        listed: list.offsets.len() as u64,
        planted,
        at_entry: at_entry as u64,
        unprobed: (list.offsets.len() as u64).saturating_sub(planted + at_entry as u64 + covered),
        deferred,
        covered,
    };
    let out = Planted {
        inline: inline.as_ref().map(|l| stats(l, planted.0, at_entry.len(), deferred_roles.0, 0)),
        lines: line_list
            .as_ref()
            .zip(lines.as_ref())
            .map(|(l, set)| stats(l, planted.1, set.at_entry.len(), deferred_roles.1, covered.len() as u64)),
    };
    if let Some(set) = &mut lines {
        set.rows =
            traps.probes.iter().enumerate().filter(|(_, p)| p.line != NO_PROBE).map(|(i, p)| (p.line_group, p.line, i as u32)).collect();
        set.rows.extend(set.at_entry.iter().map(|e| (e.2, e.1, NO_PROBE)));
        set.rows.extend(covered.iter().filter_map(|&c| Some((*set.groups.get(c as usize)?, c, NO_PROBE))));
        if !set.covers.is_empty() {
            let n = set.covers.len();
            set.probe_of = vec![NO_PROBE; n];
            for (i, p) in traps.probes.iter().enumerate() {
                if let Some(slot) = set.probe_of.get_mut(p.line as usize) {
                    *slot = i as u32;
                }
            }
            set.leader = vec![NO_PROBE; n];
            for k in 0..n as u32 {
                for c in set.covered(k) {
                    set.leader[c as usize] = k;
                }
            }
        }
        sort_by_group(&mut set.rows);
        set.at_entry.sort_unstable();
    }
    at_entry.sort_unstable_by_key(|e| (e.0, e.1));
    let entry_groups = inline.map(|l| l.groups).filter(|g| !g.is_empty()).unwrap_or_default();
    // A library planted from the loader's hook inside `dlopen`, after the constructor mapped
    // the other sets' files: its own file now, before its code can run.
    if let Some(set) = &lines {
        crate::lines::attach_late(set);
    }
    let next = PROBES.load(Ordering::Acquire) as *const Probes;
    let probes = Probes { traps, groups, parents, at_entry, hits, entry_groups, lines, deferred, base, next, gone: AtomicBool::new(false) };
    PROBES.store(Box::into_raw(Box::new(probes)), Ordering::Release);
    out
}

/// Sort `rows` ((group, row, probe)) as `sort_unstable` would, by counting the rows of each
/// group first: the groups are dense (one per source line), with a few rows each, so this is
/// linear, where a comparison sort of hexyl's 9,239 rows was about 0.7 ms of start-up (most of
/// `plant`'s time with line probes). Groups far sparser than the rows are sorted by comparison.
pub(super) fn sort_by_group(rows: &mut Vec<(u32, u32, u32)>) {
    let groups = rows.iter().map(|r| r.0 as usize + 1).max().unwrap_or(0);
    if groups > 4 * rows.len() + 1024 {
        rows.sort_unstable();
        return;
    }
    // start[g]: where group g's rows begin in the sorted order.
    let mut start = vec![0usize; groups + 1];
    for r in rows.iter() {
        start[r.0 as usize + 1] += 1;
    }
    for g in 0..groups {
        start[g + 1] += start[g];
    }
    let mut next = start.clone();
    let mut out = vec![(0u32, 0u32, 0u32); rows.len()];
    for &r in rows.iter() {
        let slot = &mut next[r.0 as usize];
        out[*slot] = r;
        *slot += 1;
    }
    for g in 0..groups {
        out[start[g]..start[g + 1]].sort_unstable();
    }
    *rows = out;
}

/// Sorted ranges ((start, end), not overlapping), asked which one holds each of a series of
/// addresses: ascending ones (the list's offsets, the probes) in one walk instead of a binary
/// search each (6,383 searches over 1,114 ranges, three times, were most of `plant`'s
/// 0.8 ms on hexyl); an address below the one before is searched.
pub(super) struct Walk<'a> {
    ranges: &'a [(u64, u64)],
    /// The ranges starting at or before the last address asked.
    next: usize,
    last: u64,
}

impl<'a> Walk<'a> {
    pub(super) fn new(ranges: &'a [(u64, u64)]) -> Walk<'a> {
        Walk { ranges, next: 0, last: 0 }
    }

    /// The start of the range holding `a`, if any.
    pub(super) fn start_of(&mut self, a: u64) -> Option<u64> {
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
pub(super) fn groups_of(traps: &mut Traps, list: &InlineProbeList) -> Vec<(u32, u32)> {
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
    // Groups are numbered in address order: long ascending runs, which a stable sort merges.
    out.sort();
    out
}

/// [`Probes::parents`] from the list's `group_parents` (none when it has none, or they do not
/// fit its groups).
pub(super) fn parents_of(list: &InlineProbeList) -> Vec<(u32, AtomicBool)> {
    let n = list.groups.iter().max().map_or(0, |&g| g as usize + 1);
    if list.group_parents.len() != n || list.groups.len() != list.offsets.len() {
        return Vec::new();
    }
    list.group_parents.iter().map(|p| (p.filter(|&g| (g as usize) < n).unwrap_or(NO_GROUP), AtomicBool::new(false))).collect()
}
