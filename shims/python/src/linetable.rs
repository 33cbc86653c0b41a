//! Line tables: a code object's source lines without a Python object per entry (describing a
//! function costs a few hundred instructions instead of tens of thousands), and the set of
//! lines a process has already reported (3.9-3.11, where the interpreter cannot turn a line
//! event off once seen).
//!
//! Plain Rust on bytes (no CPython call): compiled into the shim, and into
//! `tests/python_linetable.rs`, which runs the unit tests below (the shim itself is a cdylib
//! that only links inside an interpreter).

/// One entry of a 3.11+ location table: `units` code units (2-byte instructions and their
/// inline caches) whose location is on `line` (`None`: no location).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    pub units: u32,
    pub line: Option<i64>,
}

/// The entries of a 3.11+ location table (`co_linetable`, `Objects/locations.md`; the same
/// format in 3.11-3.15), with absolute line numbers from `first_line`. `None` if the table is
/// malformed.
pub fn entries_311(table: &[u8], first_line: u32) -> Option<Vec<Entry>> {
    fn varint(t: &[u8], i: &mut usize) -> Option<u64> {
        let mut v = 0u64;
        let mut shift = 0;
        loop {
            let b = *t.get(*i)?;
            *i += 1;
            v |= ((b & 63) as u64) << shift;
            if b & 64 == 0 {
                return Some(v);
            }
            shift += 6;
            if shift > 60 {
                return None;
            }
        }
    }
    fn svarint(t: &[u8], i: &mut usize) -> Option<i64> {
        let v = varint(t, i)?;
        Some(if v & 1 != 0 { -((v >> 1) as i64) } else { (v >> 1) as i64 })
    }
    let mut out = Vec::new();
    let mut line = first_line as i64;
    let mut i = 0;
    while i < table.len() {
        let head = table[i];
        if head & 0x80 == 0 {
            return None;
        }
        i += 1;
        let units = (head & 7) as u32 + 1;
        let code = (head >> 3) & 15;
        let located = match code {
            0..=9 => {
                i += 1;
                true
            }
            10..=12 => {
                line += (code - 10) as i64;
                i += 2;
                true
            }
            13 => {
                line += svarint(table, &mut i)?;
                true
            }
            14 => {
                line += svarint(table, &mut i)?;
                varint(table, &mut i)?;
                varint(table, &mut i)?;
                varint(table, &mut i)?;
                true
            }
            _ => false, // 15: no location (co_lines reports None)
        };
        out.push(Entry { units, line: located.then_some(line) });
    }
    (i == table.len()).then_some(out)
}

/// The last source line of a 3.11+ code object (at least `first_line`). `None` if the table is
/// malformed.
pub fn last_line_311(table: &[u8], first_line: u32) -> Option<u32> {
    let last = entries_311(table, first_line)?.iter().filter_map(|e| e.line).fold(first_line as i64, i64::max);
    u32::try_from(last).ok()
}

/// The lines holding code a 3.11+ code object can execute, ascending: the lines of the
/// instructions after its prologue, which ends with its first `RESUME` at code unit
/// `resume_unit` (the instructions up to it, on the `def` line, run before any statement and
/// report no line). `None` if the table is malformed.
pub fn code_lines_311(table: &[u8], first_line: u32, resume_unit: Option<u32>) -> Option<Vec<u32>> {
    let body_start = resume_unit.map_or(0, |r| r + 1);
    let mut lines = Vec::new();
    let mut start = 0u32;
    for e in entries_311(table, first_line)? {
        let end = start.saturating_add(e.units);
        if let (Some(line), true) = (e.line, end > body_start) {
            lines.extend(u32::try_from(line).ok().filter(|&l| l > 0));
        }
        start = end;
    }
    lines.sort_unstable();
    lines.dedup();
    Some(lines)
}

/// 3.9's `co_lnotab`: pairs of (bytecode increment, signed line increment).
pub fn last_line_lnotab(table: &[u8], first_line: u32) -> u32 {
    let mut line = first_line as i64;
    let mut last = line;
    for pair in table.chunks_exact(2) {
        line += pair[1] as i8 as i64;
        last = last.max(line);
    }
    u32::try_from(last).unwrap_or(first_line)
}

/// The lines holding code of a 3.9 code object (`co_lnotab`, `code_len` bytes of bytecode),
/// ascending: the lines on which at least one instruction starts, as `dis.findlinestarts`
/// reads them (a line increment over no bytecode, like the one from `co_firstlineno` to the
/// first statement, names no code).
pub fn code_lines_lnotab(table: &[u8], first_line: u32, code_len: usize) -> Vec<u32> {
    let mut lines = Vec::new();
    let mut line = first_line as i64;
    let mut addr = 0usize;
    for pair in table.chunks_exact(2) {
        if pair[0] != 0 {
            lines.extend(u32::try_from(line).ok().filter(|&l| l > 0));
            addr += pair[0] as usize;
        }
        line += pair[1] as i8 as i64;
    }
    if addr < code_len {
        lines.extend(u32::try_from(line).ok().filter(|&l| l > 0));
    }
    lines.sort_unstable();
    lines.dedup();
    lines
}

/// The lines of one function a process has reported: a bitset from the lowest line seen
/// (rounded down to a multiple of 64), grown (or moved down) as needed. At most [`LineSet::MAX_SPAN`] lines apart: a line
/// further away is reported as new every time (its event is a duplicate, which readers accept).
#[derive(Debug, Default, Clone)]
pub struct LineSet {
    base: u32,
    words: Vec<u64>,
}

impl LineSet {
    /// Largest distance between the lowest and the highest line kept (1 MiB of bits).
    pub const MAX_SPAN: u32 = 1 << 23;

    /// Add `line`; true if it was not in the set.
    #[inline]
    pub fn insert(&mut self, line: u32) -> bool {
        if self.words.is_empty() {
            self.base = line & !63;
        } else if line < self.base && !self.rebase(line) {
            return true;
        }
        let off = line - self.base;
        if off >= Self::MAX_SPAN {
            return true;
        }
        let (w, bit) = ((off / 64) as usize, 1u64 << (off % 64));
        if w >= self.words.len() {
            self.words.resize(w + 1, 0);
        }
        let new = self.words[w] & bit == 0;
        self.words[w] |= bit;
        new
    }

    /// Move the base down to `line` rounded down to a multiple of 64 (false: too far).
    #[cold]
    fn rebase(&mut self, line: u32) -> bool {
        let shift_words = (self.base - (line & !63)) / 64;
        let new_len = self.words.len() as u64 + shift_words as u64;
        if new_len * 64 > Self::MAX_SPAN as u64 {
            return false;
        }
        let mut words = vec![0u64; shift_words as usize];
        words.extend_from_slice(&self.words);
        self.words = words;
        self.base -= shift_words * 64;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    // The tables below are real: this function's code object, printed by each interpreter
    // (`co_linetable.hex()` / `co_lnotab.hex()`), with `co_firstlineno` 2:
    //
    //     def f(x):                     # 2
    //         """doc"""                 # 3
    //         total = 0                 # 4
    //         for i in range(x):        # 5
    //             if i % 2:             # 6
    //                 total += i        # 7
    //             else:                 # 8
    //                 total -= 1        # 9
    //         if x > 100:               # 10
    //             return -1             # 11
    //         return total              # 12
    const F_LINES: [u32; 8] = [4, 5, 6, 7, 9, 10, 11, 12];
    const F_311: &str = "8000e00c0d8045dd0d12903189588c58f000040517f0000405178801d80b0c88718935f000030917d80c119051894a88458845e00c119051894a88458845d80708883382778077d80f118872d80b10804c";
    const F_312: &str = "8000e00c0d8045dc0d1290318b58f2000405178801d80b0c88718a35d80c119051894a8945e00c119051894a8945f009040517f00a00080988338277d80f11d80b10804c";
    const F_313: &str =
        "8000e00c0d8045dc0d1290318e588801d80b0c88718f35d80c11894a8a45e00c119051894a8a45f109000e16f00a00080988338377d80f11d80b10804c";
    const F_39: &str = "000204010c0108010a020a0108010401";

    #[test]
    fn code_lines_of_3_11_to_3_13_skip_the_prologue() {
        for (table, units) in [(F_311, 47), (F_312, 43), (F_313, 51)] {
            let t = hex(table);
            // The RESUME at unit 0 is on the `def` line: that line holds no statement.
            assert_eq!(code_lines_311(&t, 2, Some(0)).unwrap(), F_LINES, "{table}");
            // Without a prologue the `def` line is there (what co_lines() lists).
            assert_eq!(code_lines_311(&t, 2, None).unwrap()[0], 2);
            assert_eq!(last_line_311(&t, 2), Some(12));
            let total: u32 = entries_311(&t, 2).unwrap().iter().map(|e| e.units).sum();
            assert_eq!(total, units, "the entries cover the whole code ({table})");
        }
    }

    #[test]
    fn a_one_line_generator_keeps_its_line() {
        // `def g(n): yield n` on line 13: RETURN_GENERATOR, POP_TOP, RESUME, then the body, all
        // on line 13; 3.12 and 3.13 also have entries without a location.
        for (table, resume) in [("e800e8008000900188278827882788278827", 2), ("e800f8800090018b27f9", 2), ("e900800090018b27f9", 2)] {
            let t = hex(table);
            assert_eq!(code_lines_311(&t, 13, Some(resume)).unwrap(), [13], "{table}");
        }
    }

    #[test]
    fn malformed_tables_are_refused() {
        assert_eq!(entries_311(&[0x00], 1), None, "an entry must start with the high bit");
        assert_eq!(entries_311(&[0xe8], 1), None, "code 13 without its line varint");
        assert_eq!(code_lines_311(&[0xf0, 0x41], 1, None), None, "a varint cut short");
        assert_eq!(code_lines_311(&[], 1, None), Some(vec![]));
    }

    #[test]
    fn lnotab_lines_are_the_line_starts() {
        let t = hex(F_39);
        assert_eq!(code_lines_lnotab(&t, 2, 60), F_LINES);
        assert_eq!(last_line_lnotab(&t, 2), 12);
        // An empty table: the whole code is on the first line (a one-line generator)...
        assert_eq!(code_lines_lnotab(&[], 13, 10), [13]);
        // ...unless there is no code at all.
        assert_eq!(code_lines_lnotab(&[], 13, 0), Vec::<u32>::new());
        // A negative increment (a line before the one above, e.g. a loop's condition).
        assert_eq!(code_lines_lnotab(&[2, 3, 2, 0xff, 2, 2], 10, 8), [10, 12, 13, 14]);
    }

    #[test]
    fn a_line_set_reports_each_line_once() {
        let mut s = LineSet::default();
        assert!(s.insert(100));
        assert!(!s.insert(100));
        assert!(s.insert(300), "grows upwards");
        assert!(s.insert(5), "moves its base down");
        assert!(!s.insert(5));
        assert!(!s.insert(100) && !s.insert(300), "keeps what it had across a rebase");
        assert!(s.insert(99) && s.insert(101) && s.insert(6) && s.insert(0));
        assert!(!s.insert(0) && !s.insert(5) && !s.insert(300));
        // Too far from the others: reported every time, never stored.
        assert!(s.insert(5 + LineSet::MAX_SPAN + 100));
        assert!(s.insert(5 + LineSet::MAX_SPAN + 100));
        assert!(!s.insert(300));
    }
}
