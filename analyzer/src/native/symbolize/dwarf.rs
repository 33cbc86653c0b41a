//! The DWARF half of [`super::functions`]: one walk over every unit's DIEs describing the
//! subprograms whose code holds a wanted address.
//!
//! - name: `DW_AT_linkage_name` demangled, else `DW_AT_name` qualified by the enclosing
//!   namespaces and types, following `DW_AT_specification`/`DW_AT_abstract_origin`;
//! - file and first line: `DW_AT_decl_file`/`DW_AT_decl_line` (a lambda's call operator, which
//!   has none, takes its closure type's);
//! - last line: the largest line of the line table over the subprogram's own address ranges,
//!   in its own file, leaving out the ranges of code inlined into it;
//! - inlined code: the `DW_TAG_inlined_subroutine`s containing a wanted address, outermost
//!   first, with their call site.

use super::demangle::{demangle, Lang};
use std::borrow::Cow;
use std::collections::HashMap;
use std::path::PathBuf;

pub type R<'a> = gimli::EndianSlice<'a, gimli::RunTimeEndian>;

pub const SECTIONS: [gimli::SectionId; 13] = [
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

/// Load a `gimli::Dwarf` over the (decompressed) sections of `obj`.
pub fn load_dwarf<'a>(sections: &'a [(gimli::SectionId, Cow<'a, [u8]>)], endian: gimli::RunTimeEndian) -> gimli::Dwarf<R<'a>> {
    let get = |id: gimli::SectionId| -> Result<R<'a>, gimli::Error> {
        let data: &'a [u8] = sections.iter().find(|(s, _)| *s == id).map(|(_, d)| d.as_ref()).unwrap_or(&[]);
        Ok(gimli::EndianSlice::new(data, endian))
    };
    gimli::Dwarf::load(get).unwrap_or_default()
}

/// What the DIE walk learns about one subprogram.
#[derive(Debug, Clone)]
pub struct Sub {
    pub qualname: String,
    /// Whether the name came from DW_AT_linkage_name.
    pub has_linkage: bool,
    pub lang: Lang,
    pub file: Option<PathBuf>,
    pub decl_line: Option<u32>,
    /// Where the subprogram's code starts: the beginning of its first address range
    /// (`DW_AT_low_pc`, or the first of `DW_AT_ranges`, which is the entry's: a `.cold` part
    /// that gcc moves out of line comes later in the list, though at a lower address).
    pub entry: u64,
    ranges: Vec<(u64, u64)>,
    inlined: Vec<(u64, u64)>,
    last_line: Option<u32>,
    /// For each wanted address inside code inlined into this subprogram: the inlined
    /// functions there, outermost first.
    pub inlined_at: Vec<(u64, InlinedFrame)>,
}

/// A function whose code was inlined at an address: it runs there without a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InlinedFrame {
    /// Demangled qualified name of the inlined function.
    pub qualname: String,
    /// Where it is called from (`DW_AT_call_file`/`DW_AT_call_line` of the inlined instance).
    pub call_file: Option<PathBuf>,
    pub call_line: Option<u32>,
    /// The inlined function's own source: `DW_AT_decl_file`/`DW_AT_decl_line` of its abstract
    /// origin. (Its last line is where its braces close, from the source text: the line
    /// table over an instance's code also holds the lines of the code inlined into it.)
    pub file: Option<PathBuf>,
    pub first_line: Option<u32>,
    /// Depth of the instance's DIE in its unit: nested instances are deeper.
    pub depth: u32,
}

impl Sub {
    /// The function's lines: from its declaration line to the largest line of its own code
    /// (never before the declaration line).
    pub fn span(&self) -> (Option<u32>, Option<u32>) {
        let first = self.decl_line;
        let last = match (first, self.last_line) {
            (Some(f), Some(l)) => Some(l.max(f)),
            (f, l) => l.or(f),
        };
        (first, last)
    }
}

fn in_ranges(ranges: &[(u64, u64)], a: u64) -> bool {
    ranges.iter().any(|&(b, e)| a >= b && a < e)
}

/// Walk every unit's DIEs and describe the subprograms whose code holds a wanted address.
pub fn walk_subprograms(dwarf: &gimli::Dwarf<R>, wanted: &[u64]) -> Result<HashMap<u64, Sub>, gimli::Error> {
    let mut found: HashMap<u64, Sub> = HashMap::new();
    let mut xref = Xref::new(dwarf);
    let mut units = dwarf.units();
    while let Some(header) = units.next()? {
        let unit = match dwarf.unit(header) {
            Ok(u) => u,
            Err(_) => continue,
        };
        let unit = unit.unit_ref(dwarf);
        let mut lang = Lang::Unknown;
        let mut subs: Vec<(Vec<u64>, Sub)> = Vec::new();
        let mut stack: Vec<(isize, Option<usize>)> = Vec::new();
        let mut scopes: Vec<Scope> = Vec::new();
        let mut depth: isize = 0;
        let mut files: HashMap<u64, Option<PathBuf>> = HashMap::new();
        let mut entries = unit.entries();
        while let Some((delta, entry)) = entries.next_dfs()? {
            depth += delta;
            while stack.last().is_some_and(|(d, _)| *d >= depth) {
                stack.pop();
            }
            while scopes.last().is_some_and(|s| s.depth >= depth) {
                scopes.pop();
            }
            match entry.tag() {
                gimli::DW_TAG_compile_unit | gimli::DW_TAG_partial_unit => {
                    if let Ok(Some(gimli::AttributeValue::Language(l))) = entry.attr_value(gimli::DW_AT_language) {
                        lang = Lang::from_dwarf(l);
                    }
                }
                gimli::DW_TAG_subprogram => {
                    let ranges = die_ranges(&unit, entry);
                    let hits: Vec<u64> = ranges
                        .iter()
                        .flat_map(|&(b, e)| {
                            let i = wanted.partition_point(|&w| w < b);
                            wanted[i..].iter().take_while(move |&&w| w < e).copied()
                        })
                        .collect();
                    let idx = if hits.is_empty() {
                        None
                    } else {
                        let id = die_identity(&unit, entry, &mut xref);
                        // A lambda's call operator has no declaration line of its own: it is
                        // where its closure type is declared.
                        let class = scopes.iter().rev().find(|s| s.is_type);
                        let (decl_file, decl_line) = match (id.file, id.line) {
                            (None, None) => class.map_or((None, None), |c| (c.file, c.line)),
                            fl => fl,
                        };
                        let file = match id.foreign_file {
                            Some(p) => p,
                            None => decl_file.and_then(|f| files.entry(f).or_insert_with(|| file_path(&unit, f)).clone()),
                        };
                        let entry = ranges.first().map_or(0, |r| r.0);
                        let has_linkage = id.linkage.is_some();
                        let qualname = match (id.linkage, id.name) {
                            (Some(l), _) => demangle(&l, lang),
                            (None, Some(n)) => {
                                let mut q: Vec<&str> = scopes.iter().filter_map(|s| s.name.as_deref()).collect();
                                q.push(&n);
                                q.join("::")
                            }
                            (None, None) => format!("{entry:#x}"),
                        };
                        let sub = Sub {
                            qualname,
                            has_linkage,
                            lang,
                            file,
                            decl_line: decl_line.map(|l| l as u32),
                            entry,
                            ranges,
                            inlined: Vec::new(),
                            last_line: None,
                            inlined_at: Vec::new(),
                        };
                        subs.push((hits, sub));
                        Some(subs.len() - 1)
                    };
                    stack.push((depth, idx));
                }
                gimli::DW_TAG_namespace | gimli::DW_TAG_class_type | gimli::DW_TAG_structure_type | gimli::DW_TAG_union_type
                    if entry.has_children() =>
                {
                    let id = die_identity(&unit, entry, &mut xref);
                    scopes.push(Scope {
                        depth,
                        is_type: entry.tag() != gimli::DW_TAG_namespace,
                        name: id.name,
                        file: id.file,
                        line: id.line,
                    });
                }
                gimli::DW_TAG_inlined_subroutine => {
                    if let Some(&(_, Some(i))) = stack.last() {
                        let r = die_ranges(&unit, entry);
                        let inside: Vec<u64> = subs[i].0.iter().copied().filter(|&h| in_ranges(&r, h)).collect();
                        if !inside.is_empty() {
                            let id = die_identity(&unit, entry, &mut xref);
                            let qualname = match (id.linkage, id.name) {
                                (Some(l), _) => demangle(&l, lang),
                                (None, Some(n)) => n,
                                (None, None) => "<inlined>".to_string(),
                            };
                            let call_file = match entry.attr_value(gimli::DW_AT_call_file) {
                                Ok(Some(gimli::AttributeValue::FileIndex(f))) => Some(f),
                                Ok(Some(v)) => v.udata_value(),
                                _ => None,
                            }
                            .and_then(|f| files.entry(f).or_insert_with(|| file_path(&unit, f)).clone());
                            let call_line = entry.attr_value(gimli::DW_AT_call_line).ok().flatten().and_then(|v| v.udata_value());
                            let file = match id.foreign_file.clone() {
                                Some(p) => p,
                                None => id.file.and_then(|f| files.entry(f).or_insert_with(|| file_path(&unit, f)).clone()),
                            };
                            for h in inside {
                                let frame = InlinedFrame {
                                    qualname: qualname.clone(),
                                    call_file: call_file.clone(),
                                    call_line: call_line.map(|l| l.min(u32::MAX as u64) as u32),
                                    file: file.clone(),
                                    first_line: id.line.map(|l| l.min(u32::MAX as u64) as u32),
                                    depth: depth.max(0) as u32,
                                };
                                subs[i].1.inlined_at.push((h, frame));
                            }
                        }
                        subs[i].1.inlined.extend(r);
                    }
                }
                _ => {}
            }
        }
        if subs.is_empty() {
            continue;
        }
        last_lines(&unit, &mut subs, &mut files);
        for (hits, sub) in subs {
            for h in hits {
                let better = match found.get(&h) {
                    None => true,
                    Some(old) => old.entry != h && sub.entry == h,
                };
                if better {
                    found.insert(h, sub.clone());
                }
            }
        }
    }
    Ok(found)
}

fn die_ranges<'a>(unit: &gimli::UnitRef<R<'a>>, entry: &gimli::DebuggingInformationEntry<R<'a>>) -> Vec<(u64, u64)> {
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

/// Linkage name, name, decl file index and decl line of a DIE, following
/// `DW_AT_specification` and `DW_AT_abstract_origin`, within the unit or into another one
/// (`DW_FORM_ref_addr`: an LTO build's inlined functions refer to their origin in the unit
/// that defines them).
fn die_identity<'a>(unit: &gimli::UnitRef<R<'a>>, entry: &gimli::DebuggingInformationEntry<R<'a>>, xref: &mut Xref<'_, 'a>) -> Identity {
    let mut id = Identity::default();
    let mut next = id.visit(unit, entry, false);
    // The unit the last visited DIE is in: None for `unit`, else the start of another one.
    let mut foreign: Option<usize> = None;
    for _ in 0..8 {
        let (key, off) = match next {
            None => break,
            Some(Ref::Unit(o)) => (foreign, o),
            Some(Ref::Info(o)) => match xref.locate(o) {
                Some((k, uo)) => (Some(k), uo),
                None => break,
            },
        };
        next = match key {
            None => match unit.entry(off) {
                Ok(e) => id.visit(unit, &e, false),
                Err(_) => break,
            },
            Some(k) => {
                let dwarf = xref.dwarf;
                let Some(u) = xref.unit(k) else { break };
                let other = u.unit_ref(dwarf);
                match other.entry(off) {
                    Ok(e) => id.visit(&other, &e, true),
                    Err(_) => break,
                }
            }
        };
        foreign = key;
    }
    id
}

/// A reference to another DIE.
enum Ref {
    Unit(gimli::UnitOffset),
    Info(gimli::DebugInfoOffset),
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

    fn unit(&mut self, start: usize) -> Option<&gimli::Unit<R<'a>>> {
        let dwarf = self.dwarf;
        let heads = &self.heads;
        self.units
            .entry(start)
            .or_insert_with(|| {
                let i = heads.binary_search_by_key(&start, |h| h.0).ok()?;
                dwarf.unit(heads[i].1).ok()
            })
            .as_ref()
    }
}

/// An enclosing namespace or type, for names and declaration lines of what it contains.
struct Scope {
    depth: isize,
    is_type: bool,
    name: Option<String>,
    file: Option<u64>,
    line: Option<u64>,
}

#[derive(Default)]
struct Identity {
    linkage: Option<String>,
    name: Option<String>,
    file: Option<u64>,
    line: Option<u64>,
    /// The declaration file's path when it was found in another unit than the DIE's (`file`
    /// is then an index of that unit's line table).
    foreign_file: Option<Option<PathBuf>>,
}

impl Identity {
    /// Take the attributes not known yet from `e`; returns the DIE it refers to, if any.
    fn visit<'a>(&mut self, unit: &gimli::UnitRef<R<'a>>, e: &gimli::DebuggingInformationEntry<R<'a>>, foreign: bool) -> Option<Ref> {
        let mut next = None;
        let mut attrs = e.attrs();
        while let Ok(Some(attr)) = attrs.next() {
            match attr.name() {
                gimli::DW_AT_linkage_name | gimli::DW_AT_MIPS_linkage_name if self.linkage.is_none() => {
                    self.linkage = unit.attr_string(attr.value()).ok().map(|s| s.to_string_lossy().into_owned());
                }
                gimli::DW_AT_name if self.name.is_none() => {
                    self.name = unit.attr_string(attr.value()).ok().map(|s| s.to_string_lossy().into_owned());
                }
                gimli::DW_AT_decl_file if self.file.is_none() => {
                    self.file = match attr.value() {
                        gimli::AttributeValue::FileIndex(i) => Some(i),
                        v => v.udata_value(),
                    };
                    if foreign {
                        self.foreign_file = Some(self.file.and_then(|f| file_path(unit, f)));
                    }
                }
                gimli::DW_AT_decl_line if self.line.is_none() => self.line = attr.udata_value(),
                gimli::DW_AT_specification | gimli::DW_AT_abstract_origin => match attr.value() {
                    gimli::AttributeValue::UnitRef(o) => next = Some(Ref::Unit(o)),
                    gimli::AttributeValue::DebugInfoRef(o) => next = Some(Ref::Info(o)),
                    _ => {}
                },
                _ => {}
            }
        }
        next
    }
}

/// Absolute path of file `index` of the unit's line table.
pub(crate) fn file_path(unit: &gimli::UnitRef<R>, index: u64) -> Option<PathBuf> {
    let program = unit.line_program.as_ref()?;
    let header = program.header();
    let fe = header.file(index)?;
    let mut p = PathBuf::new();
    if let Some(cd) = &unit.comp_dir {
        p.push(cd.to_string_lossy().as_ref());
    }
    if let Some(dir) = fe.directory(header) {
        if let Ok(d) = unit.attr_string(dir) {
            p.push(d.to_string_lossy().as_ref());
        }
    }
    let name = unit.attr_string(fe.path_name()).ok()?;
    p.push(name.to_string_lossy().as_ref());
    Some(trace_format::normalize_path(&p))
}

/// Set each subprogram's last line: the largest line of the line table over its address
/// ranges, in its own file, outside the code inlined into it.
fn last_lines(unit: &gimli::UnitRef<R>, subs: &mut [(Vec<u64>, Sub)], files: &mut HashMap<u64, Option<PathBuf>>) {
    let Some(program) = unit.line_program.clone() else { return };
    // (begin, end, sub index), sorted by begin, for a binary search per row.
    let mut index: Vec<(u64, u64, usize)> =
        subs.iter().enumerate().flat_map(|(i, (_, s))| s.ranges.iter().map(move |&(b, e)| (b, e, i))).collect();
    index.sort_unstable();
    let mut rows = program.rows();
    while let Ok(Some((_, row))) = rows.next_row() {
        if row.end_sequence() {
            continue;
        }
        let Some(line) = row.line() else { continue };
        let a = row.address();
        let i = index.partition_point(|r| r.0 <= a);
        // Ranges may nest (a local function inside another): look back a few entries.
        for &(b, e, si) in index[..i].iter().rev().take(4) {
            if a < b || a >= e {
                continue;
            }
            let sub = &mut subs[si].1;
            if in_ranges(&sub.inlined, a) {
                continue;
            }
            let fi = row.file_index();
            let same_file = match &sub.file {
                None => true,
                Some(f) => files.entry(fi).or_insert_with(|| file_path(unit, fi)).as_deref() == Some(f.as_path()),
            };
            if same_file {
                let l = line.get().min(u32::MAX as u64) as u32;
                sub.last_line = Some(sub.last_line.map_or(l, |m| m.max(l)));
            }
            break;
        }
    }
}
