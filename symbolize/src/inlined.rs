//! Where a program's inlined code starts, for the recorder's inline probes
//! (docs/native-recording.md, "Inlined functions"): every `DW_TAG_inlined_subroutine`'s entry
//! (`DW_AT_entry_pc`, where it lies inside them) and the start of each of its address ranges, with the chain of inlined
//! functions it belongs to. Which instances get a probe is the caller's rule (`keep`, by the
//! inlined function's declaration file).

use crate::units::{decl_file, file_path, follow_origins, unit_start, Xref, R};
use std::collections::HashMap;
use std::path::Path;

/// An entry or range start of an inlined subroutine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InlinedStart {
    /// Link-time address.
    pub addr: u64,
    /// How many inlined subroutines the instance is nested in, itself included.
    pub depth: u32,
    /// A hash of its chain: the function it was inlined into (its DIE) and the abstract
    /// origins from there to the instance, outermost first. Instances with equal chains are
    /// one node of a call tree.
    pub chain: u64,
    /// The chain of the nearest enclosing inlined instance that `keep` kept (0: none, the
    /// instance is inlined straight into its function, or only through instances left out).
    /// When code of `chain` ran, code of `parent` ran: it holds it.
    pub parent: u64,
}

/// Where a DIE's `DW_AT_abstract_origin` points, as one number across units (0: none).
fn origin_key(here: usize, entry: &gimli::DebuggingInformationEntry<R>) -> u64 {
    match entry.attr_value(gimli::DW_AT_abstract_origin).ok().flatten() {
        Some(gimli::AttributeValue::UnitRef(o)) => here.wrapping_add(o.0) as u64,
        Some(gimli::AttributeValue::DebugInfoRef(o)) => o.0 as u64,
        _ => 0,
    }
}

fn mix(h: u64, v: u64) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut s = std::collections::hash_map::DefaultHasher::new();
    (h, v).hash(&mut s);
    s.finish()
}

/// The entry and range starts of the inlined subroutines of `obj`'s own DWARF (link-time
/// addresses, in DIE order), leaving out instances of functions whose declaration file `keep`
/// refuses (an instance whose declaration file is unknown is kept); at most about `limit`.
pub fn instance_starts(obj: &object::File, mut keep: impl FnMut(&Path) -> bool, limit: usize) -> Result<Vec<InlinedStart>, gimli::Error> {
    let sections = crate::units::Sections::of(obj);
    let dwarf = sections.dwarf();
    let mut xref = Xref::new(&dwarf);
    // Whether a declaration file is kept, by (unit start, file index).
    let mut kept: HashMap<(usize, u64), bool> = HashMap::new();
    let mut out = Vec::new();
    let mut units = dwarf.units();
    while let Some(header) = units.next()? {
        let Ok(unit) = dwarf.unit(header) else { continue };
        let unit = unit.unit_ref(&dwarf);
        let here = unit_start(&unit);
        let mut cursor = unit.entries();
        // The chain open at the cursor: (depth in the tree, chain hash, inlined depth, the
        // chain of the nearest kept instance there, itself included: its children's parent).
        let mut open: Vec<(isize, u64, u32, u64)> = Vec::new();
        let mut depth = 0isize;
        while let Some((delta, entry)) = cursor.next_dfs()? {
            depth += delta;
            while open.last().is_some_and(|o| o.0 >= depth) {
                open.pop();
            }
            let (chain, inlined, parent) = match entry.tag() {
                gimli::DW_TAG_subprogram => {
                    open.push((depth, mix(0, here.wrapping_add(entry.offset().0) as u64), 0, 0));
                    continue;
                }
                gimli::DW_TAG_inlined_subroutine => {
                    let (up, d, parent) = open.last().map_or((0, 0, 0), |o| (o.1, o.2, o.3));
                    (mix(up, origin_key(here, entry)), d + 1, parent)
                }
                _ => continue,
            };
            // The declaration file of the inlined function (its abstract origin's).
            let mut is_kept = true;
            follow_origins(&unit, entry, &mut xref, |u, e, foreign| {
                let Some(file) = decl_file(e) else { return true };
                let k = foreign.unwrap_or(here);
                is_kept = *kept.entry((k, file)).or_insert_with(|| file_path(u, file).is_none_or(|f| keep(&f)));
                false
            });
            open.push((depth, chain, inlined, if is_kept { chain } else { parent }));
            if !is_kept {
                continue;
            }
            // An entry where the instance is entered (DW_AT_entry_pc) and at the start of each
            // of its ranges: code motion can run a later range without the entry's (hexyl's
            // Unit::get_multiplier is seen only by a later range).
            // An entry outside every range of the instance is left out: the symbolizer finds no
            // inlined code there (gcc 12 at `-O1` can put a helper's entry at its caller's first
            // instruction, the range starting after it), so its probe would name the caller
            // itself as inlined into itself.
            let start = |addr| InlinedStart { addr, depth: inlined, chain, parent };
            let Ok(mut ranges) = unit.die_ranges(entry) else { continue };
            let mut spans = Vec::new();
            while let Ok(Some(r)) = ranges.next() {
                if r.end > r.begin {
                    spans.push((r.begin, r.end));
                }
            }
            if let Some(a) = entry.attr_value(gimli::DW_AT_entry_pc).ok().flatten().and_then(|v| unit.attr_address(v).ok().flatten()) {
                if spans.iter().any(|&(b, e)| (b..e).contains(&a)) {
                    out.push(start(a));
                }
            }
            out.extend(spans.iter().map(|&(b, _)| start(b)));
            if out.len() >= limit {
                return Ok(out);
            }
        }
    }
    Ok(out)
}
