//! Line probes: which statement lines of the program's own code ran (`trace run --lines`,
//! docs/native-recording.md, "Lines that ran"), in the program and in its own shared libraries.
//!
//! `trace run --lines` lists where each statement line of the program starts (the `is_stmt`
//! rows of its DWARF line table, tracer/src/line_probes.rs) in the trace directory
//! ([`LINE_PROBES_FILE`]), with one group per source line, and the same for each library the
//! shim patches at start-up ([`LIBRARY_LINE_PROBES_FILE`]). Each object's rows are a [`LineSet`]
//! of their own, in that object's probes, with a file of their own per process (the program's
//! [`LINES_BIN_FILE`], the `k`th library list's `lines-lib-<k>.bin`). [`crate::probe::plant`] plants a trap
//! at each row with the inline probes (one trap per address, carrying both roles when an inline
//! probe starts there too). A line probe's hit records nothing in the event stream and writes
//! no `funcs.jsonl` record: it sets its row's byte of the process's [`LINES_BIN_FILE`] to
//! [`LINE_RAN`] (one atomic store into a shared mapping of the file: a crash keeps it) and
//! disarms the other rows of its line, whose bytes say [`LINE_OF_RAN`]. A row inside the bytes a
//! patched entry moved runs from the trampoline's copy: it is marked ran when the function's
//! first call is recorded ([`crate::probe::entered`]); until then it says [`LINE_UNKNOWN`]
//! (not [`LINE_ARMED`]), so that a call the slow path did not see (`-F`, a dropped event) never
//! makes its line look as not run.
//!
//! A row that code reaches only by falling through from the row before it (the list's
//! `covers`: the rest of a basic block, tracer/src/blocks.rs) gets no probe: it is armed
//! when its block's probe is, and when that fires it says [`LINE_BLOCK_RAN`] and its line's
//! other rows are marked as for a hit of its own. A probe standing for such rows is not
//! disarmed when another row of its own line runs: the rows after it would stay unknown.
//!
//! The bytes: [`LINE_UNKNOWN`] (no probe: not executable, a page that could not be made
//! writable, the moved bytes of an entry), [`LINE_ARMED`] (planted, not run), [`LINE_RAN`],
//! [`LINE_OF_RAN`] (disarmed: another row of its line ran), [`LINE_BLOCK_RAN`] (an earlier
//! row of its block fired).
//! The mapping is made in [`LineSet::new`] (anonymous, shared), and [`attach`] puts each set's
//! file's mapping at the same address once the process directory exists (the constructor,
//! before any other thread). A set planted later, for a library loaded by `dlopen` (listed when
//! the shim asked `trace run`, planted from the loader's hook inside `dlopen`, with its inline probes),
//! gets its file there and then ([`attach_late`]), before its code can run. A forked child keeps the parent's mappings: its lines land in the
//! parent's files (the analyzer takes the union of every process anyway).

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
#[cfg(doc)]
use trace_format::meta::{LIBRARY_LINE_PROBES_FILE, LINES_BIN_FILE, LINE_PROBES_FILE};
use trace_format::meta::{LINE_ARMED, LINE_BLOCK_RAN, LINE_OF_RAN, LINE_RAN, LINE_UNKNOWN};

/// No probe for a row (`LineSet::rows`).
pub(crate) const NO_PROBE: u32 = u32::MAX;

/// The rows of the line list of one object.
pub(crate) struct LineSet {
    /// The name of its file in the process directory (`trace_format::probes::lines_bin_file`).
    file: String,
    /// The first byte of the shared mapping ([`LINES_BIN_FILE`]), one byte per row; never
    /// unmapped.
    bytes: *mut u8,
    len: usize,
    /// (group, row, probe index in the trap table or [`NO_PROBE`]) of every row with a probe or
    /// at an entry, by group: a hit marks its line's rows and disarms their probes.
    pub(crate) rows: Vec<(u32, u32, u32)>,
    /// (function entry, row, group) of the rows in a patched entry's moved bytes, by entry.
    pub(crate) at_entry: Vec<(u64, u32, u32)>,
    /// Per row, how many rows after it its probe stands for (the list's `covers`: the rest of
    /// its basic block, which gets no probe); empty: none.
    pub(crate) covers: Vec<u32>,
    /// Per row, its group (its line), as the list has them.
    pub(crate) groups: Vec<u32>,
    /// Per row, the row whose probe stands for it ([`NO_PROBE`]: none, its own), and the
    /// index of its own probe in the trap table ([`NO_PROBE`]: none); empty without `covers`.
    pub(crate) leader: Vec<u32>,
    pub(crate) probe_of: Vec<u32>,
}

// SAFETY: `bytes` points to a shared mapping that lives as long as the process and is only
// accessed through atomic byte operations.
unsafe impl Send for LineSet {}
// SAFETY: as above.
unsafe impl Sync for LineSet {}

impl LineSet {
    /// A set of `len` rows, all [`LINE_UNKNOWN`], in a fresh anonymous shared mapping, saved
    /// into the process directory's `file` once attached; `None` when it cannot be mapped.
    pub(crate) fn new(len: usize, file: String) -> Option<LineSet> {
        if len == 0 {
            return None;
        }
        // SAFETY: a fresh anonymous mapping, ours; zero-filled (LINE_UNKNOWN).
        let p = unsafe {
            libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED | libc::MAP_ANONYMOUS, -1, 0)
        };
        (p != libc::MAP_FAILED).then(|| LineSet {
            file,
            bytes: p as *mut u8,
            len,
            rows: Vec::new(),
            at_entry: Vec::new(),
            covers: Vec::new(),
            groups: Vec::new(),
            leader: Vec::new(),
            probe_of: Vec::new(),
        })
    }

    fn byte(&self, row: u32) -> Option<&AtomicU8> {
        // SAFETY: `row < len` bytes of a mapping that is never unmapped; an `AtomicU8` has the
        // size and alignment of a byte, and every access to the mapping is atomic.
        ((row as usize) < self.len).then(|| unsafe { AtomicU8::from_ptr(self.bytes.add(row as usize)) })
    }

    /// Row `row` got a probe.
    pub(crate) fn armed(&self, row: u32) {
        if let Some(b) = self.byte(row) {
            b.store(LINE_ARMED, Ordering::Relaxed);
        }
    }

    /// The state of row `row`.
    pub(crate) fn state(&self, row: u32) -> u8 {
        self.byte(row).map_or(LINE_UNKNOWN, |b| b.load(Ordering::Relaxed))
    }

    /// Row `row` ran (whatever it said).
    pub(crate) fn ran(&self, row: u32) {
        if let Some(b) = self.byte(row) {
            b.store(LINE_RAN, Ordering::Relaxed);
        }
    }

    /// The rows after `row` that its probe stands for (the rest of its basic block).
    pub(crate) fn covered(&self, row: u32) -> std::ops::Range<u32> {
        let n = self.covers.get(row as usize).copied().unwrap_or(0);
        row.saturating_add(1)..row.saturating_add(1).saturating_add(n).min(self.len as u32)
    }

    /// The line of `group` ran: its armed rows say so ([`LINE_OF_RAN`]); `disarm` is called with the probe
    /// index of each of its other rows' probes, but of a probe that stands for rows after it
    /// (the rest of its block, known to run only when it fires) only once none of its rows
    /// is armed any more (each one's line ran: [`Self::block_spent`]). Async-signal-safe:
    /// atomic stores.
    pub(crate) fn group_ran(&self, group: u32, mut disarm: impl FnMut(u32)) {
        let from = self.rows.partition_point(|r| r.0 < group);
        for &(_, row, probe) in self.rows[from..].iter().take_while(|r| r.0 == group) {
            if let Some(b) = self.byte(row) {
                let _ = b.compare_exchange(LINE_ARMED, LINE_OF_RAN, Ordering::Relaxed, Ordering::Relaxed);
            }
            if probe != NO_PROBE {
                if self.block_spent(row) {
                    disarm(probe);
                }
            } else if let Some(&l) = self.leader.get(row as usize).filter(|&&l| l != NO_PROBE) {
                // A row without a probe whose line ran: its block's probe may be spent now.
                if let Some(&p) = self.probe_of.get(l as usize).filter(|&&p| p != NO_PROBE) {
                    if self.block_spent(l) {
                        disarm(p);
                    }
                }
            }
        }
    }

    /// Whether the probe of row `row` has nothing left to tell: neither it nor a row it stands
    /// for is still armed.
    fn block_spent(&self, row: u32) -> bool {
        std::iter::once(row).chain(self.covered(row)).all(|r| self.state(r) != LINE_ARMED)
    }

    /// Row `row` ran (its probe fired, or its function was entered with it in the moved
    /// bytes): the rows its probe stands for ran too, falling through from it
    /// ([`LINE_BLOCK_RAN`], unless one says [`LINE_RAN`]), and so did their lines (their
    /// other rows are marked, their probes disarmed through `disarm`). Async-signal-safe.
    pub(crate) fn block_ran(&self, row: u32, mut disarm: impl FnMut(u32)) {
        for c in self.covered(row) {
            if let Some(b) = self.byte(c) {
                if b.load(Ordering::Relaxed) != LINE_RAN {
                    b.store(LINE_BLOCK_RAN, Ordering::Relaxed);
                }
            }
            if let Some(&g) = self.groups.get(c as usize) {
                self.group_ran(g, &mut disarm);
            }
        }
    }

    /// Put the shared mapping of its file in `dir` where the anonymous one is, with its bytes:
    /// from now on the file holds them. Before any thread can touch its bytes: before any other
    /// thread exists (the constructor), or before its object's code can run and before the set
    /// is published ([`attach_late`]).
    fn attach(&self, dir: &std::path::Path) -> std::io::Result<()> {
        use std::io::Write;
        use std::os::fd::AsRawFd;
        let mut f = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(dir.join(&self.file))?;
        // SAFETY: `len` bytes of our mapping, read by this thread alone (no other thread can
        // reach them yet: the contract).
        f.write_all(unsafe { std::slice::from_raw_parts(self.bytes, self.len) })?;
        // SAFETY: replaces our own mapping (same address and length) with the file's, shared;
        // no other thread touches it, and none of its probes fires meanwhile (the program has
        // not started, or the object's code cannot run yet: the contract).
        let p = unsafe {
            libc::mmap(
                self.bytes as *mut libc::c_void,
                self.len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_FIXED,
                f.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }
}

/// The constructor's [`attach`] ran: a set planted from now on attaches its own file
/// ([`attach_late`]).
static ATTACHED: AtomicBool = AtomicBool::new(false);

/// After the constructor planted the probes: make the process directory and map each line
/// set's file there ([`LineSet::attach`]). Nothing without line probes.
pub(crate) fn attach() {
    ATTACHED.store(true, Ordering::Release);
    let mut sets = crate::probe::line_sets().peekable();
    if sets.peek().is_none() {
        return;
    }
    let Some(dir) = crate::process::ensure_process() else { return };
    for set in sets {
        if let Err(e) = set.attach(&dir) {
            let file = dir.join(&set.file);
            crate::process::warn_once(&format!("cannot write {}: {e}; the lines that ran there are not saved", file.display()));
        }
    }
}

/// A set planted after the constructor's [`attach`] (a library loaded by `dlopen`, from the
/// loader's hook inside it, before its code can run and before the set is published): its
/// file's mapping now, in the process directory if it is made (it is not made here: the
/// objects' lock is held). Before the constructor's [`attach`], nothing: that one maps it.
pub(crate) fn attach_late(set: &LineSet) {
    if !ATTACHED.load(Ordering::Acquire) {
        return;
    }
    let Some(dir) = crate::process::process_dir() else {
        crate::process::warn_once(&format!("no process directory yet: the lines that ran in {} are not saved", set.file));
        return;
    };
    if let Err(e) = set.attach(&dir) {
        let file = dir.join(&set.file);
        crate::process::warn_once(&format!("cannot write {}: {e}; the lines that ran there are not saved", file.display()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use trace_format::meta::LINES_BIN_FILE;

    /// The bytes go from unknown to armed to ran, a line's hit marks its armed rows only and
    /// disarms the probes of its other rows, and the file holds what the mapping says once
    /// attached.
    #[test]
    fn a_line_hit_marks_the_armed_rows_of_its_line_and_the_file_keeps_them() {
        let mut set = LineSet::new(6, LINES_BIN_FILE.to_string()).expect("mapped");
        assert!((0..6).all(|r| set.state(r) == LINE_UNKNOWN));
        // Rows 0, 2, 3 are line group 7 (row 3 at an entry: no probe, unknown), rows 1, 4 group 9.
        for r in [0, 1, 2, 4] {
            set.armed(r);
        }
        set.rows = vec![(7, 0, 10), (7, 2, 12), (7, 3, NO_PROBE), (9, 1, 11), (9, 4, 14)];
        let d = tempfile::tempdir().unwrap();
        set.attach(d.path()).unwrap();
        let mut disarmed = Vec::new();
        set.ran(2);
        set.group_ran(7, |p| disarmed.push(p));
        assert_eq!(disarmed, [10, 12]);
        let states: Vec<u8> = (0..6).map(|r| set.state(r)).collect();
        assert_eq!(states, [LINE_OF_RAN, LINE_ARMED, LINE_RAN, LINE_UNKNOWN, LINE_ARMED, LINE_UNKNOWN]);
        assert_eq!(std::fs::read(d.path().join(LINES_BIN_FILE)).unwrap(), states, "the file is the mapping");
        assert_eq!(set.state(99), LINE_UNKNOWN, "a row past the end");
    }

    /// One probe per block: row 0's probe stands for rows 1 and 2 (armed with it). Its own
    /// line running elsewhere (row 4, same group) does not disarm it while rows 1 and 2 are
    /// armed; when it fires they say ran with their block, and their lines' other rows are
    /// marked and disarmed (row 3, line of row 1). A probe whose rows' lines all ran is disarmed.
    #[test]
    fn a_blocks_probe_marks_its_rows_and_stays_armed_while_they_are() {
        let mut set = LineSet::new(5, LINES_BIN_FILE.to_string()).expect("mapped");
        for r in 0..5 {
            set.armed(r);
        }
        // Groups (lines): rows 0 and 4 line 7, rows 1 and 3 line 8, row 2 line 9.
        set.groups = vec![7, 8, 9, 8, 7];
        set.covers = vec![2, 0, 0, 0, 0];
        set.leader = vec![NO_PROBE, 0, 0, NO_PROBE, NO_PROBE];
        // Probes: row 0 has probe 10, row 3 probe 13, row 4 probe 14; rows 1, 2 none.
        set.probe_of = vec![10, NO_PROBE, NO_PROBE, 13, 14];
        set.rows = vec![(7, 0, 10), (7, 4, 14), (8, 1, NO_PROBE), (8, 3, 13), (9, 2, NO_PROBE)];
        assert_eq!(set.covered(0), 1..3);
        assert!(set.covered(1).is_empty());
        let mut disarmed = Vec::new();
        // Row 4 fires: line 7 ran; row 0's probe still stands for rows 1 and 2.
        set.ran(4);
        set.group_ran(7, |p| disarmed.push(p));
        assert_eq!(disarmed, [14]);
        assert_eq!(set.state(0), LINE_OF_RAN);
        // Row 0 fires: rows 1, 2 ran with their block, row 3 (line 8) is disarmed.
        disarmed.clear();
        set.ran(0);
        set.block_ran(0, |p| disarmed.push(p));
        let states: Vec<u8> = (0..5).map(|r| set.state(r)).collect();
        assert_eq!(states, [LINE_RAN, LINE_BLOCK_RAN, LINE_BLOCK_RAN, LINE_OF_RAN, LINE_RAN]);
        assert_eq!(disarmed, [13, 10], "row 3's, then row 0's own (spent by its hit already) once its block ran");

        // Another set: rows 1 and 2's lines run elsewhere, then row 0's: its probe is disarmed
        // once none of its rows is armed.
        let mut set = LineSet::new(5, LINES_BIN_FILE.to_string()).expect("mapped");
        for r in 0..5 {
            set.armed(r);
        }
        set.groups = vec![7, 8, 9, 8, 9];
        set.covers = vec![2, 0, 0, 0, 0];
        set.leader = vec![NO_PROBE, 0, 0, NO_PROBE, NO_PROBE];
        set.probe_of = vec![10, NO_PROBE, NO_PROBE, 13, 14];
        set.rows = vec![(7, 0, 10), (8, 1, NO_PROBE), (8, 3, 13), (9, 2, NO_PROBE), (9, 4, 14)];
        let mut disarmed = Vec::new();
        set.ran(3);
        set.group_ran(8, |p| disarmed.push(p));
        set.ran(4);
        set.group_ran(9, |p| disarmed.push(p));
        assert_eq!(disarmed, [13, 14], "row 0 still armed itself");
        set.group_ran(7, |p| disarmed.push(p));
        assert_eq!(disarmed, [13, 14, 10], "nothing of row 0's block is armed now");
    }
}
