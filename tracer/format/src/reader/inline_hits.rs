//! `p<pid>/inline.bin` (docs/trace-format.md): the function records of the inline probes' hits
//! that the shim registered without a `funcs.jsonl` line, made from the trace's inline list.

use crate::meta::{FuncKind, FuncRecord, InlineProbeList, INLINE_BIN_HEADER, INLINE_BIN_MAGIC, INLINE_PROBES_FILE};
use crate::probes::MAX_LIST;
use crate::FormatError;
use std::path::Path;

/// The records `bytes` (an `inline.bin`) holds for the entries of `list`: for each slot with an
/// id, `{"id", "kind": "native", "addr": base + offset, "module": list.object, "base",
/// "inlined": true}`, by ascending entry. An error says why the file does not fit the list
/// (its length, its magic, an id given to two entries).
pub fn inline_hit_records(bytes: &[u8], list: &InlineProbeList) -> Result<Vec<FuncRecord>, String> {
    let want = INLINE_BIN_HEADER + 4 * list.offsets.len();
    if bytes.len() != want {
        return Err(format!("{} bytes for {} listed inline probes ({want} expected)", bytes.len(), list.offsets.len()));
    }
    if bytes[..8] != INLINE_BIN_MAGIC {
        return Err("not an inline.bin file (its first bytes)".to_string());
    }
    let mut base = [0u8; 8];
    base.copy_from_slice(&bytes[8..16]);
    let base = u64::from_le_bytes(base);
    let mut out = Vec::new();
    for (slot, &off) in bytes[INLINE_BIN_HEADER..].chunks_exact(4).zip(&list.offsets) {
        let v = u32::from_le_bytes([slot[0], slot[1], slot[2], slot[3]]);
        if v == 0 {
            continue;
        }
        let kind = FuncKind::Native { addr: base.wrapping_add(off), module: list.object.clone(), base, symbol: None, inlined: true };
        out.push(FuncRecord { id: v - 1, kind });
    }
    let mut ids: Vec<u32> = out.iter().map(|r| r.id).collect();
    ids.sort_unstable();
    if ids.windows(2).any(|w| w[0] == w[1]) {
        return Err("one function id given to two inline probes".to_string());
    }
    Ok(out)
}

/// The records of process directory `dir`'s `inline.bin` (none when there is no such file), read
/// with the list of the trace directory around it; an error when the file is there but
/// unreadable or does not fit the list.
pub(crate) fn read(dir: &Path) -> Result<Vec<FuncRecord>, FormatError> {
    let file = dir.join(crate::meta::INLINE_BIN_FILE);
    match std::fs::symlink_metadata(&file) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        _ => {}
    }
    let bad = |msg: String| FormatError::Damaged { path: file.clone(), msg };
    let lpath = dir.parent().unwrap_or(dir).join(INLINE_PROBES_FILE);
    let text = super::read_document(&lpath, MAX_LIST).map_err(|e| bad(format!("its list {}: {e}", lpath.display())))?;
    let list: InlineProbeList = serde_json::from_slice(&text).map_err(|e| bad(format!("its list {}: {e}", lpath.display())))?;
    // The file is exactly as long as the list says: anything longer is refused unread.
    let bytes = super::read_document(&file, (INLINE_BIN_HEADER + 4 * list.offsets.len()) as u64).map_err(|e| FormatError::io(&file, e))?;
    inline_hit_records(&bytes, &list).map_err(bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list() -> InlineProbeList {
        InlineProbeList { object: "/bin/prog".into(), offsets: vec![0x10, 0x20, 0x30], ..Default::default() }
    }

    fn file(base: u64, slots: &[u32]) -> Vec<u8> {
        let mut b = INLINE_BIN_MAGIC.to_vec();
        b.extend(base.to_le_bytes());
        slots.iter().for_each(|s| b.extend(s.to_le_bytes()));
        b
    }

    #[test]
    fn each_slot_with_an_id_is_an_inlined_record_at_its_offset() {
        let recs = inline_hit_records(&file(0x7000, &[0, 5, 1]), &list()).unwrap();
        let got: Vec<(u32, u64, bool)> = recs
            .iter()
            .map(|r| match &r.kind {
                FuncKind::Native { addr, base, inlined, module, .. } => {
                    assert_eq!((module.as_str(), *base), ("/bin/prog", 0x7000));
                    (r.id, *addr, *inlined)
                }
                k => panic!("{k:?}"),
            })
            .collect();
        assert_eq!(got, [(4, 0x7020, true), (0, 0x7030, true)]);
    }

    #[test]
    fn a_file_that_does_not_fit_its_list_is_refused_with_the_reason() {
        assert!(inline_hit_records(&file(0, &[0, 0]), &list()).unwrap_err().contains("3 listed"));
        let mut f = file(0, &[0, 0, 0]);
        f[0] = b'X';
        assert!(inline_hit_records(&f, &list()).unwrap_err().contains("first bytes"));
        assert!(inline_hit_records(&file(0, &[3, 0, 3]), &list()).unwrap_err().contains("two"));
        assert!(inline_hit_records(&[], &list()).is_err());
    }
}
