//! Line tables: the last source line of a code object without a Python object per entry
//! (describing a function costs a few hundred instructions instead of tens of thousands).

/// 3.11+ location table (`co_linetable`, `Objects/locations.md`; the same format in
/// 3.11-3.15). `None` if the table is malformed.
pub fn last_line_311(table: &[u8], first_line: u32) -> Option<u32> {
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
    let mut line = first_line as i64;
    let mut last = first_line as i64;
    let mut i = 0;
    while i < table.len() {
        let head = table[i];
        if head & 0x80 == 0 {
            return None;
        }
        i += 1;
        let code = (head >> 3) & 15;
        match code {
            0..=9 => i += 1,
            10..=12 => {
                line += (code - 10) as i64;
                i += 2;
            }
            13 => line += svarint(table, &mut i)?,
            14 => {
                line += svarint(table, &mut i)?;
                varint(table, &mut i)?;
                varint(table, &mut i)?;
                varint(table, &mut i)?;
            }
            _ => continue, // 15: no location (co_lines reports None)
        }
        last = last.max(line);
    }
    (i == table.len()).then(|| u32::try_from(last).ok()).flatten()
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
