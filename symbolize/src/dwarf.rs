//! The DWARF half of [`crate::functions`]: one walk over every unit's DIEs describing the
//! subprograms whose code holds a wanted address.
//!
//! - name: `DW_AT_linkage_name` demangled, else `DW_AT_name` qualified by the enclosing
//!   namespaces and types, following `DW_AT_specification`/`DW_AT_abstract_origin`;
//! - file and first line: `DW_AT_decl_file`/`DW_AT_decl_line` (a lambda's call operator, which
//!   has none, takes its closure type's);
//! - last line: the largest line of the line table over the subprogram's own address ranges,
//!   in its own file, leaving out the ranges of code inlined into it;
//! - inlined code: the `DW_TAG_inlined_subroutine`s containing a wanted address, outermost
//!   first, with their call site. An inlined function whose DIEs say nowhere where it is
//!   declared (a unit built with line tables only, `-C debuginfo=line-tables-only` or
//!   `-gmlt`: its abstract subprogram has a bare `DW_AT_name`, no namespace around it, no
//!   `DW_AT_decl_file`) takes its file and lines from the line table over the instance's own
//!   code (its ranges less those of the instances nested in it): the file of its first row,
//!   and the smallest and largest line in that file ([`InlinedFrame::from_line_table`]).

use crate::demangle::{demangle, Lang};
use crate::units::{die_ranges, file_index, file_path, follow_origins, Xref, R};
use std::collections::HashMap;
use std::path::PathBuf;
use std::rc::Rc;

/// What the DIE walk learns about one subprogram.
#[derive(Debug, Clone)]
pub struct Sub {
    pub qualname: String,
    /// Whether the name came from DW_AT_linkage_name.
    pub has_linkage: bool,
    pub lang: Lang,
    pub file: Option<PathBuf>,
    pub decl_line: Option<u32>,
    /// Whether `file` and `decl_line` come from the line table, no DIE declaring the function
    /// (line-tables-only DWARF: a bare `DW_AT_name`, no `DW_AT_decl_file`): the file of the
    /// row at its entry and the smallest line of its own code there.
    pub from_line_table: bool,
    /// Where the subprogram's code starts: the beginning of its first address range
    /// (`DW_AT_low_pc`, or the first of `DW_AT_ranges`, which is the entry's: a `.cold` part
    /// that gcc moves out of line comes later in the list, though at a lower address).
    pub entry: u64,
    ranges: Vec<(u64, u64)>,
    inlined: Vec<(u64, u64)>,
    /// Every inlined instance in the subprogram, in DIE order (for the own code of an
    /// instance whose function no DIE declares).
    instances: Vec<Instance>,
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
    /// The largest line of its own code in `file`, when `file` and `first_line` come from the
    /// line table (`from_line_table`); else `None`.
    pub last_line: Option<u32>,
    /// Whether `file`, `first_line` and `last_line` come from the line table rows of the
    /// instance's own code because no DIE declares the function (line-tables-only DWARF):
    /// `first_line` is then the first line of its body that has code, not its `fn` line.
    pub from_line_table: bool,
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

/// Whether a unit's code holds none of `wanted` (sorted) by the ranges its root gives: its DIEs
/// need no walk (most of a large program's units hold none of the functions a run recorded).
/// A unit whose root gives no range (a partial unit, a type unit, a producer that leaves them
/// out) is walked.
pub(crate) fn misses(unit: &gimli::UnitRef<R>, wanted: &[u64]) -> bool {
    let Ok(mut ranges) = unit.unit_ranges() else { return false };
    let mut any = false;
    loop {
        match ranges.next() {
            Ok(Some(r)) => {
                any = true;
                let i = wanted.partition_point(|&w| w < r.begin);
                if wanted.get(i).is_some_and(|&w| w < r.end) {
                    return false;
                }
            }
            Ok(None) => return any,
            Err(_) => return false,
        }
    }
}

/// Walk the DIEs of the units whose code holds a wanted address ([`misses`]) and describe the
/// subprograms whose code holds a wanted address: one
/// description per subprogram, shared by its addresses (a large function with thousands of
/// wanted addresses, each with its inlined frames, is described once, not once per address).
pub fn walk_subprograms(dwarf: &gimli::Dwarf<R>, wanted: &[u64]) -> Result<HashMap<u64, Rc<Sub>>, gimli::Error> {
    let mut found: HashMap<u64, Rc<Sub>> = HashMap::new();
    let mut xref = Xref::new(dwarf);
    let mut units = dwarf.units();
    while let Some(header) = units.next()? {
        let unit = match dwarf.unit(header) {
            Ok(u) => u,
            Err(_) => continue,
        };
        let unit = unit.unit_ref(dwarf);
        if misses(&unit, wanted) {
            continue;
        }
        let mut lang = Lang::Unknown;
        let mut subs: Vec<(Vec<u64>, Sub)> = Vec::new();
        // Inlined frames whose function no DIE declares: (sub, index in its `inlined_at`,
        // index in its `instances`).
        let mut pending: Vec<(usize, usize, usize)> = Vec::new();
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
                            from_line_table: false,
                            entry,
                            ranges,
                            inlined: Vec::new(),
                            instances: Vec::new(),
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
                        let instance = subs[i].1.instances.len();
                        let call = (entry.attr_value(gimli::DW_AT_call_file).ok().flatten().and_then(file_index))
                            .zip(entry.attr_value(gimli::DW_AT_call_line).ok().flatten().and_then(|v| v.udata_value()));
                        subs[i].1.instances.push(Instance {
                            depth: depth.max(0) as u32,
                            ranges: r.clone(),
                            call: call.map(|(f, l)| (f, l.min(u32::MAX as u64) as u32)),
                        });
                        let inside: Vec<u64> = subs[i].0.iter().copied().filter(|&h| in_ranges(&r, h)).collect();
                        if !inside.is_empty() {
                            let id = die_identity(&unit, entry, &mut xref);
                            let qualname = match (id.linkage, id.name) {
                                (Some(l), _) => demangle(&l, lang),
                                (None, Some(n)) => n,
                                (None, None) => "<inlined>".to_string(),
                            };
                            let call_file = (entry.attr_value(gimli::DW_AT_call_file).ok().flatten().and_then(file_index))
                                .and_then(|f| files.entry(f).or_insert_with(|| file_path(&unit, f)).clone());
                            let call_line = entry.attr_value(gimli::DW_AT_call_line).ok().flatten().and_then(|v| v.udata_value());
                            let file = match id.foreign_file.clone() {
                                Some(p) => p,
                                None => id.file.and_then(|f| files.entry(f).or_insert_with(|| file_path(&unit, f)).clone()),
                            };
                            let undeclared = file.is_none() && id.line.is_none();
                            for h in inside {
                                let frame = InlinedFrame {
                                    qualname: qualname.clone(),
                                    call_file: call_file.clone(),
                                    call_line: call_line.map(|l| l.min(u32::MAX as u64) as u32),
                                    file: file.clone(),
                                    first_line: id.line.map(|l| l.min(u32::MAX as u64) as u32),
                                    last_line: None,
                                    from_line_table: false,
                                    depth: depth.max(0) as u32,
                                };
                                if undeclared {
                                    pending.push((i, subs[i].1.inlined_at.len(), instance));
                                }
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
        undeclared_lines(&unit, &mut subs, &pending, &mut files);
        for (hits, sub) in subs {
            let sub = Rc::new(sub);
            for h in hits {
                let better = match found.get(&h) {
                    None => true,
                    Some(old) => old.entry != h && sub.entry == h,
                };
                if better {
                    found.insert(h, Rc::clone(&sub));
                }
            }
        }
    }
    Ok(found)
}

/// Linkage name, name, decl file index and decl line of a DIE, following
/// `DW_AT_specification` and `DW_AT_abstract_origin` ([`follow_origins`]), within the unit or
/// into another one.
fn die_identity<'a>(unit: &gimli::UnitRef<R<'a>>, entry: &gimli::DebuggingInformationEntry<R<'a>>, xref: &mut Xref<'_, 'a>) -> Identity {
    let mut id = Identity::default();
    follow_origins(unit, entry, xref, |u, e, foreign| {
        id.visit(u, e, foreign.is_some());
        !id.complete()
    });
    id
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
    /// Take the attributes not known yet from `e`, a DIE of `unit` (another unit than the
    /// described DIE's when `foreign`).
    fn visit<'a>(&mut self, unit: &gimli::UnitRef<R<'a>>, e: &gimli::DebuggingInformationEntry<R<'a>>, foreign: bool) {
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
                    self.file = file_index(attr.value());
                    if foreign {
                        self.foreign_file = Some(self.file.and_then(|f| file_path(unit, f)));
                    }
                }
                gimli::DW_AT_decl_line if self.line.is_none() => self.line = attr.udata_value(),
                _ => {}
            }
        }
    }

    /// Whether nothing is left to learn.
    fn complete(&self) -> bool {
        self.linkage.is_some() && self.name.is_some() && self.file.is_some() && self.line.is_some()
    }
}

/// Each row of `unit`'s line table that has a line and covers code, as (address, file index,
/// line), in the table's order (ends of sequences left out). A row covers the addresses up to
/// the next row's: one followed by a row at the same address covers none. GCC at `-O2` ends
/// a function with such rows (cmark-gfm's `commonmark_render`: line 599 at the address where
/// `free_row_cells` begins, then line 50 there), which, taken as code, made `free_row_cells`
/// end at line 601, its source 552 lines long.
fn each_row(unit: &gimli::UnitRef<R>, f: impl FnMut(u64, u64, u32)) {
    let Some(program) = unit.line_program.clone() else { return };
    let mut rows = program.rows();
    let table = std::iter::from_fn(move || {
        let (_, row) = rows.next_row().ok()??;
        let line = row.line().map(|l| l.get().min(u32::MAX as u64) as u32);
        Some(TableRow { address: row.address(), end_sequence: row.end_sequence(), file: row.file_index(), line })
    });
    covering_rows(table, f);
}

/// One row of a line table as [`covering_rows`] reads it.
#[derive(Debug, Clone, Copy)]
struct TableRow {
    address: u64,
    end_sequence: bool,
    file: u64,
    /// `None`: line 0, no line.
    line: Option<u32>,
}

/// [`each_row`]'s rule: the rows that have a line and cover code (the next row, or the end of
/// their sequence, is at a higher address), as (address, file, line).
fn covering_rows(table: impl Iterator<Item = TableRow>, mut f: impl FnMut(u64, u64, u32)) {
    // The row before, waiting for the next one's address.
    let mut pending: Option<(u64, u64, u32)> = None;
    for row in table {
        if let Some(p) = pending.take() {
            if row.address > p.0 {
                f(p.0, p.1, p.2);
            }
        }
        if row.end_sequence {
            continue;
        }
        if let Some(line) = row.line {
            pending = Some((row.address, row.file, line));
        }
    }
    if let Some(p) = pending {
        f(p.0, p.1, p.2);
    }
}

/// Set each subprogram's last line: the largest line of the line table over its address
/// ranges, in its own file, outside the code inlined into it. A subprogram that no DIE
/// declares (line tables only) takes its file and first line from those rows too
/// ([`Sub::from_line_table`]).
fn last_lines(unit: &gimli::UnitRef<R>, subs: &mut [(Vec<u64>, Sub)], files: &mut HashMap<u64, Option<PathBuf>>) {
    if unit.line_program.is_none() {
        return;
    }
    // (begin, end, sub index), sorted by begin, for a binary search per row.
    let mut index: Vec<(u64, u64, usize)> =
        subs.iter().enumerate().flat_map(|(i, (_, s))| s.ranges.iter().map(move |&(b, e)| (b, e, i))).collect();
    index.sort_unstable();
    // The rows of the subprograms no DIE declares: (address, file index, line).
    let mut undeclared: HashMap<usize, Vec<(u64, u64, u32)>> = HashMap::new();
    each_row(unit, |a, fi, line| {
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
            if sub.file.is_none() && sub.decl_line.is_none() {
                // Declared nowhere (line tables only): its rows decide, below.
                undeclared.entry(si).or_default().push((a, fi, line));
                break;
            }
            let same_file = match &sub.file {
                None => true,
                Some(f) => files.entry(fi).or_insert_with(|| file_path(unit, fi)).as_deref() == Some(f.as_path()),
            };
            if same_file {
                sub.last_line = Some(sub.last_line.map_or(line, |m| m.max(line)));
            }
            break;
        }
    });
    for (si, own) in undeclared {
        let sub = &mut subs[si].1;
        // The file of its entry's row; its first and last line there.
        let Some(&(_, file, _)) = own.iter().min_by_key(|r| r.0) else { continue };
        let lines = own.iter().filter(|r| r.1 == file).map(|r| r.2);
        sub.decl_line = lines.clone().min();
        sub.last_line = lines.max();
        sub.file = files.entry(file).or_insert_with(|| file_path(unit, file)).clone();
        sub.from_line_table = true;
    }
}

/// A line table row, or a call site taken as one: (address, file index, line).
pub(crate) type Row = (u64, u64, u32);

/// An instance's own code: its address ranges less its nested instances', and the call sites
/// of the instances right inside it as rows ([`own_code`]).
pub(crate) type OwnCode = (Vec<(u64, u64)>, Vec<Row>);

/// An inlined instance inside a subprogram.
#[derive(Debug, Clone)]
pub(crate) struct Instance {
    /// Depth of its DIE in the unit.
    pub(crate) depth: u32,
    pub(crate) ranges: Vec<(u64, u64)>,
    /// `DW_AT_call_file` (an index of the unit's line table) and `DW_AT_call_line`: a line of
    /// the function it is inlined into.
    pub(crate) call: Option<(u64, u32)>,
}

/// The own code of instance `k` of `instances` (in DIE order): its ranges less those of the
/// instances nested in it (the following ones deeper than it, up to the next one at its depth
/// or above; a lexical block may stand between them); and the call sites of the instances
/// right inside it (those not inside another one), each as a row at its first address: a
/// function whose body is one call that was inlined too (`Vec::capacity`, which is
/// `self.buf.capacity()`) has no code of its own, only that call's line.
pub(crate) fn own_code(instances: &[Instance], k: usize) -> OwnCode {
    let Some(me) = instances.get(k) else { return (Vec::new(), Vec::new()) };
    let inside: Vec<&Instance> = instances[k + 1..].iter().take_while(|i| i.depth > me.depth).collect();
    let nested: Vec<(u64, u64)> = inside.iter().flat_map(|i| i.ranges.iter().copied()).collect();
    let mut out = Vec::new();
    for &(b, e) in &me.ranges {
        // Cut [b, e) by every nested range.
        let mut pieces = vec![(b, e)];
        for &(nb, ne) in &nested {
            pieces = pieces
                .into_iter()
                .flat_map(|(pb, pe)| {
                    if ne <= pb || nb >= pe {
                        vec![(pb, pe)]
                    } else {
                        [(pb, nb.max(pb)), (ne.min(pe), pe)].into_iter().filter(|(x, y)| y > x).collect()
                    }
                })
                .collect();
        }
        out.extend(pieces);
    }
    let mut calls = Vec::new();
    for (j, i) in inside.iter().enumerate() {
        let Some(&(start, _)) = i.ranges.first() else { continue };
        let in_another = inside[..j].iter().any(|o| o.depth < i.depth && in_ranges(&o.ranges, start));
        // A call site at line 0 (code the compiler made, no line of the source) says nothing of
        // where the function is: it would start its span at the file's first line.
        if let (false, Some((file, line))) = (in_another, i.call.filter(|c| c.1 > 0)) {
            calls.push((start, file, line));
        }
    }
    (out, calls)
}

/// Per slot of `own` (the own code of an instance: its ranges and its call rows,
/// [`own_code`]): the rows of `unit`'s line table in those ranges, after its call rows. Own
/// ranges of distinct instances do not overlap (those of one instance listed twice might).
pub(crate) fn rows_over(unit: &gimli::UnitRef<R>, own: Vec<OwnCode>) -> Vec<Vec<Row>> {
    // (begin, end, slot), sorted by begin.
    let mut index: Vec<(u64, u64, usize)> = Vec::new();
    let mut rows_of: Vec<Vec<Row>> = Vec::with_capacity(own.len());
    for (n, (ranges, calls)) in own.into_iter().enumerate() {
        index.extend(ranges.into_iter().map(|(b, e)| (b, e, n)));
        rows_of.push(calls);
    }
    if index.is_empty() {
        return rows_of;
    }
    index.sort_unstable();
    each_row(unit, |a, fi, line| {
        let i = index.partition_point(|r| r.0 <= a);
        for &(b, e, slot) in index[..i].iter().rev().take(4) {
            if a >= b && a < e {
                rows_of[slot].push((a, fi, line));
                break;
            }
        }
    });
    rows_of
}

/// The file (an index of the unit's line table) of the row at the lowest address of an
/// instance's own rows ([`rows_over`]): where a function no DIE declares is taken to live.
pub(crate) fn first_file(rows: &[Row]) -> Option<u64> {
    rows.iter().min_by_key(|r| r.0).map(|r| r.1)
}

/// Give the inlined frames `pending` ((sub, frame, instance)) whose function no DIE declares
/// a file and lines from the line table: over the instance's own code ([`own_code`]), the
/// file of the row at the lowest address, and the smallest and largest line of the rows in
/// that file.
fn undeclared_lines(
    unit: &gimli::UnitRef<R>,
    subs: &mut [(Vec<u64>, Sub)],
    pending: &[(usize, usize, usize)],
    files: &mut HashMap<u64, Option<PathBuf>>,
) {
    if pending.is_empty() {
        return;
    }
    if unit.line_program.is_none() {
        return;
    }
    // One entry per distinct instance: (sub, instance) -> slot.
    let mut slots: HashMap<(usize, usize), usize> = HashMap::new();
    let mut own: Vec<OwnCode> = Vec::new();
    for &(si, _, k) in pending {
        let n = slots.len();
        if let std::collections::hash_map::Entry::Vacant(v) = slots.entry((si, k)) {
            v.insert(n);
            own.push(own_code(&subs[si].1.instances, k));
        }
    }
    let rows_of = rows_over(unit, own);
    for &(si, fi, k) in pending {
        let Some(&slot) = slots.get(&(si, k)) else { continue };
        let own = &rows_of[slot];
        let Some(file) = first_file(own) else { continue };
        let lines = own.iter().filter(|r| r.1 == file).map(|r| r.2);
        let (first, last) = (lines.clone().min(), lines.max());
        let path = files.entry(file).or_insert_with(|| file_path(unit, file)).clone();
        if let Some((_, frame)) = subs[si].1.inlined_at.get_mut(fi) {
            frame.file = path;
            frame.first_line = first;
            frame.last_line = last;
            frame.from_line_table = true;
        }
    }
}

/// For each address range `(start, end)` of `ranges` (sorted, not overlapping) that the line
/// tables cover: the file of the row at the lowest address and the smallest and largest line of
/// the rows in that file, by `start`. For functions that no DIE describes (a unit built with
/// line tables only and nothing inlined has no subprogram DIE).
pub fn lines_over(dwarf: &gimli::Dwarf<R>, ranges: &[(u64, u64)]) -> Result<HashMap<u64, (PathBuf, u32, u32)>, gimli::Error> {
    let mut out = HashMap::new();
    if ranges.is_empty() {
        return Ok(out);
    }
    // Per range: (lowest address, its file), and the lines by file.
    let mut first: HashMap<usize, (u64, Option<PathBuf>)> = HashMap::new();
    let mut lines: HashMap<(usize, PathBuf), (u32, u32)> = HashMap::new();
    let mut units = dwarf.units();
    while let Some(header) = units.next()? {
        let Ok(unit) = dwarf.unit(header) else { continue };
        let unit = unit.unit_ref(dwarf);
        let mut files: HashMap<u64, Option<PathBuf>> = HashMap::new();
        each_row(&unit, |a, fi, l| {
            let Some(k) = ranges.partition_point(|r| r.0 <= a).checked_sub(1) else { return };
            if a >= ranges[k].1 {
                return;
            }
            let Some(path) = files.entry(fi).or_insert_with(|| file_path(&unit, fi)).clone() else { return };
            let e = lines.entry((k, path.clone())).or_insert((l, l));
            *e = (e.0.min(l), e.1.max(l));
            let f = first.entry(k).or_insert((a, Some(path.clone())));
            if a < f.0 {
                *f = (a, Some(path));
            }
        });
    }
    for (k, (_, path)) in first {
        let Some(path) = path else { continue };
        if let Some(&(a, b)) = lines.get(&(k, path.clone())) {
            out.insert(ranges[k].0, (path, a, b));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {

    /// A row covers the addresses up to the next row's: cmark-gfm's `commonmark_render` (lines
    /// 562-601) ended with a row of line 599 at the address where `free_row_cells` (lines
    /// 50-56) begins, followed by that function's first row there.
    #[test]
    fn a_row_followed_by_one_at_the_same_address_covers_no_code() {
        let row = |address, line| TableRow { address, end_sequence: false, file: 1, line: Some(line) };
        let table = [
            row(0x3cd70, 564),
            row(0x3cd70, 565),
            row(0x3cf7b, 599),
            row(0x3cf80, 599),
            row(0x3cf80, 50),
            TableRow { address: 0x3cf84, end_sequence: false, file: 1, line: None },
            row(0x3cf90, 52),
            TableRow { address: 0x3cfa0, end_sequence: true, file: 1, line: None },
        ];
        let mut seen = Vec::new();
        covering_rows(table.into_iter(), |a, _, l| seen.push((a, l)));
        assert_eq!(seen, [(0x3cd70, 565), (0x3cf7b, 599), (0x3cf80, 50), (0x3cf90, 52)]);
    }

    use super::*;

    /// An instance's own code is its ranges less its nested instances', and the call sites of
    /// the instances right inside it are rows of it, except a call site at line 0 (code the
    /// compiler made: LTO'd hexyl's `run`, inlined into `main`, took line 0 as its first line
    /// and was printed from the top of `main.rs`).
    #[test]
    fn own_code_cuts_nested_ranges_and_keeps_call_sites_with_a_line() {
        let inst = |depth, ranges: &[(u64, u64)], call| Instance { depth, ranges: ranges.to_vec(), call };
        let instances = [
            inst(2, &[(0x100, 0x200)], Some((1, 10))),
            inst(3, &[(0x120, 0x140)], Some((1, 12))),
            inst(3, &[(0x160, 0x180)], Some((1, 0))),
            inst(4, &[(0x165, 0x170)], Some((2, 7))),
            inst(2, &[(0x300, 0x310)], Some((1, 30))),
        ];
        let (ranges, calls) = own_code(&instances, 0);
        assert_eq!(ranges, vec![(0x100, 0x120), (0x140, 0x160), (0x180, 0x200)]);
        // The line-0 call site is left out; the instance nested in it is not right inside.
        assert_eq!(calls, vec![(0x120, 1, 12)]);
        assert_eq!(first_file(&calls), Some(1));
        // The last instance is not inside the first.
        assert_eq!(own_code(&instances, 4).0, vec![(0x300, 0x310)]);
    }
}
