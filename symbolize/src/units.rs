//! What every walk over an object's DWARF shares: its sections, the table of units for
//! references into another unit ([`Xref`]), the chase from a DIE to the DIEs that describe it
//! ([`follow_origins`]), the paths of a unit's files and the address ranges of a DIE.

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::PathBuf;

pub type R<'a> = gimli::EndianSlice<'a, gimli::RunTimeEndian>;

/// The sections gimli reads.
const SECTIONS: [gimli::SectionId; 13] = [
    gimli::SectionId::DebugAbbrev,
    gimli::SectionId::DebugAddr,
    gimli::SectionId::DebugAranges,
    gimli::SectionId::DebugInfo,
    gimli::SectionId::DebugLine,
    gimli::SectionId::DebugLineStr,
    gimli::SectionId::DebugLoc,
    gimli::SectionId::DebugLocLists,
    gimli::SectionId::DebugRanges,
    gimli::SectionId::DebugRngLists,
    gimli::SectionId::DebugStr,
    gimli::SectionId::DebugStrOffsets,
    gimli::SectionId::DebugTypes,
];

/// The DWARF sections of an object, uncompressed (an absent or unreadable one is empty).
pub struct Sections<'d> {
    data: Vec<(gimli::SectionId, Cow<'d, [u8]>)>,
    endian: gimli::RunTimeEndian,
}

impl<'d> Sections<'d> {
    pub fn of(obj: &object::File<'d>) -> Sections<'d> {
        use object::{Object, ObjectSection};
        let data = SECTIONS
            .iter()
            .map(|&id| (id, obj.section_by_name(id.name()).and_then(|s| s.uncompressed_data().ok()).unwrap_or(Cow::Borrowed(&[][..]))))
            .collect();
        let endian = if obj.is_little_endian() { gimli::RunTimeEndian::Little } else { gimli::RunTimeEndian::Big };
        Sections { data, endian }
    }

    /// A `gimli::Dwarf` over these sections.
    pub fn dwarf(&self) -> gimli::Dwarf<R<'_>> {
        let get = |id: gimli::SectionId| -> Result<R<'_>, gimli::Error> {
            let data: &[u8] = self.data.iter().find(|(s, _)| *s == id).map(|(_, d)| d.as_ref()).unwrap_or(&[]);
            Ok(gimli::EndianSlice::new(data, self.endian))
        };
        // The loader above never fails, and neither does `load` then.
        gimli::Dwarf::load(get).unwrap_or_default()
    }
}

/// Where a unit starts in `.debug_info` (`usize::MAX` for a unit of `.debug_types`, which no
/// `DW_FORM_ref_addr` reaches).
pub fn unit_start(unit: &gimli::UnitRef<R>) -> usize {
    unit.header.offset().as_debug_info_offset().map_or(usize::MAX, |o| o.0)
}

/// The units of `.debug_info`, for references into another unit: headers by start, each unit
/// parsed once, when first referred to.
pub struct Xref<'d, 'a> {
    dwarf: &'d gimli::Dwarf<R<'a>>,
    heads: Vec<(usize, gimli::UnitHeader<R<'a>>)>,
    units: HashMap<usize, Option<gimli::Unit<R<'a>>>>,
}

impl<'d, 'a> Xref<'d, 'a> {
    pub fn new(dwarf: &'d gimli::Dwarf<R<'a>>) -> Self {
        let mut heads = Vec::new();
        let mut it = dwarf.units();
        while let Ok(Some(h)) = it.next() {
            if let Some(o) = h.offset().as_debug_info_offset() {
                heads.push((o.0, h));
            }
        }
        heads.sort_by_key(|h| h.0);
        Xref { dwarf, heads, units: HashMap::new() }
    }

    /// The unit holding `off` (its start) and the offset within it.
    fn locate(&self, off: gimli::DebugInfoOffset) -> Option<(usize, gimli::UnitOffset)> {
        let i = self.heads.partition_point(|h| h.0 <= off.0).checked_sub(1)?;
        let (start, h) = &self.heads[i];
        Some((*start, off.to_unit_offset(h)?))
    }

    fn unit(&mut self, start: usize) -> Option<gimli::UnitRef<'_, R<'a>>> {
        let (dwarf, heads) = (self.dwarf, &self.heads);
        self.units
            .entry(start)
            .or_insert_with(|| {
                let i = heads.binary_search_by_key(&start, |h| h.0).ok()?;
                dwarf.unit(heads[i].1).ok()
            })
            .as_ref()
            .map(|u| u.unit_ref(dwarf))
    }
}

/// The DIE a DIE refers to for what it does not say itself: its `DW_AT_abstract_origin` (an
/// inlined or out-of-line instance's abstract instance), else its `DW_AT_specification` (a
/// definition's declaration).
enum Ref {
    Unit(gimli::UnitOffset),
    Info(gimli::DebugInfoOffset),
}

fn origin(e: &gimli::DebuggingInformationEntry<R>) -> Option<Ref> {
    let as_ref = |v| match v {
        gimli::AttributeValue::UnitRef(o) => Some(Ref::Unit(o)),
        gimli::AttributeValue::DebugInfoRef(o) => Some(Ref::Info(o)),
        _ => None,
    };
    // One pass over the attributes.
    let mut specification = None;
    let mut attrs = e.attrs();
    while let Ok(Some(a)) = attrs.next() {
        match a.name() {
            gimli::DW_AT_abstract_origin => return as_ref(a.value()),
            gimli::DW_AT_specification => specification = as_ref(a.value()),
            _ => {}
        }
    }
    specification
}

/// At most this many references are followed from one DIE (a bound on a cycle in damaged DWARF).
const MAX_HOPS: usize = 8;

/// Call `visit` on `entry`, then on each DIE its chain of `DW_AT_abstract_origin` /
/// `DW_AT_specification` references leads to, within its unit or into another one
/// (`DW_FORM_ref_addr`: an LTO build's inlined functions refer to their origin in the unit that
/// defines them), until `visit` returns `false` or the chain ends. `visit` gets the unit holding
/// the DIE and, when that is another unit than `unit`, its start (the unit's file indexes are
/// then that unit's).
pub fn follow_origins<'a>(
    unit: &gimli::UnitRef<R<'a>>,
    entry: &gimli::DebuggingInformationEntry<R<'a>>,
    xref: &mut Xref<'_, 'a>,
    mut visit: impl FnMut(&gimli::UnitRef<R<'a>>, &gimli::DebuggingInformationEntry<R<'a>>, Option<usize>) -> bool,
) {
    if !visit(unit, entry, None) {
        return;
    }
    let here = unit_start(unit);
    // The unit of the last visited DIE, which a unit-relative reference is relative to.
    let mut at = here;
    let mut next = origin(entry);
    for _ in 0..MAX_HOPS {
        let (k, off) = match next {
            None => return,
            Some(Ref::Unit(o)) => (at, o),
            Some(Ref::Info(o)) => match xref.locate(o) {
                Some(l) => l,
                None => return,
            },
        };
        // The next reference is read only when `visit` wants more (reading it costs a scan of
        // the DIE's attributes).
        if k == here {
            let Ok(e) = unit.entry(off) else { return };
            if !visit(unit, &e, None) {
                return;
            }
            next = origin(&e);
        } else {
            let Some(other) = xref.unit(k) else { return };
            let Ok(e) = other.entry(off) else { return };
            if !visit(&other, &e, Some(k)) {
                return;
            }
            next = origin(&e);
        }
        at = k;
    }
}

/// A DIE's `DW_AT_decl_file`: an index of its unit's line table.
pub fn decl_file(e: &gimli::DebuggingInformationEntry<R>) -> Option<u64> {
    file_index(e.attr_value(gimli::DW_AT_decl_file).ok()??)
}

/// A file attribute's value as an index of the unit's line table.
pub fn file_index(v: gimli::AttributeValue<R>) -> Option<u64> {
    match v {
        gimli::AttributeValue::FileIndex(i) => Some(i),
        v => v.udata_value(),
    }
}

/// Absolute, lexically normalized path of file `index` of the unit's line table (compilation
/// directory, include directory, file name).
pub fn file_path(unit: &gimli::UnitRef<R>, index: u64) -> Option<PathBuf> {
    let program = unit.line_program.as_ref()?;
    let header = program.header();
    let fe = header.file(index)?;
    entry_path(unit, header, fe)
}

/// [`file_path`] of a line table's entry.
pub(crate) fn entry_path<'a>(
    unit: &gimli::UnitRef<R<'a>>,
    header: &gimli::LineProgramHeader<R<'a>>,
    fe: &gimli::FileEntry<R<'a>>,
) -> Option<PathBuf> {
    let mut p = PathBuf::new();
    if let Some(cd) = &unit.comp_dir {
        p.push(cd.to_string_lossy().as_ref());
    }
    // In DWARF 5 the directory table's entry 0 is the compilation directory itself, not a
    // directory under it: joined to a relative `DW_AT_comp_dir` it doubled (Debian's libc,
    // built with its paths mapped to `./csu`, read `csu/csu/errno-loc.c`).
    let is_comp_dir = header.version() >= 5 && fe.directory_index() == 0 && unit.comp_dir.is_some();
    if let Some(dir) = fe.directory(header).filter(|_| !is_comp_dir) {
        if let Ok(d) = unit.attr_string(dir) {
            p.push(d.to_string_lossy().as_ref());
        }
    }
    let name = unit.attr_string(fe.path_name()).ok()?;
    p.push(name.to_string_lossy().as_ref());
    Some(trace_format::normalize_path(&p))
}

/// The non-empty address ranges of a DIE.
pub fn die_ranges<'a>(unit: &gimli::UnitRef<R<'a>>, entry: &gimli::DebuggingInformationEntry<R<'a>>) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    if let Ok(mut it) = unit.die_ranges(entry) {
        while let Ok(Some(r)) = it.next() {
            if r.end > r.begin {
                out.push((r.begin, r.end));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn paths_are_normalized_lexically() {
        use std::path::{Path, PathBuf};
        assert_eq!(trace_format::normalize_path(Path::new("/a/./b/../c.c")), PathBuf::from("/a/c.c"));
    }
}
