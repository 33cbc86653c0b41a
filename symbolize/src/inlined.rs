//! Where a program's inlined code starts, for the recorder's inline probes
//! (docs/native-recording.md, "Inlined functions"): every `DW_TAG_inlined_subroutine`'s entry
//! (`DW_AT_entry_pc`, where it lies inside them) and the start of each of its address ranges, with the chain of inlined
//! functions it belongs to. Which instances get a probe is the caller's rule (`keep`, by the
//! inlined function's declaration file).

use crate::dwarf::Instance;
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
    /// The instance's entry (`DW_AT_entry_pc`; without one, its first range's start), not the
    /// start of a later range.
    pub entry: bool,
    /// The instance, an index into [`InlinedCode::instances`].
    pub instance: u32,
}

/// What [`inlined_code`] reads: the probes' starts, the folded functions, and the address
/// ranges of every inlined instance with code (kept or not), by [`InlinedStart::instance`].
#[derive(Debug, Clone, Default)]
pub struct InlinedCode {
    pub starts: Vec<InlinedStart>,
    pub folded: Vec<Folded>,
    pub instances: Vec<Vec<(u64, u64)>>,
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
/// refuses; at most about `limit`. An inlined function that no DIE declares (a unit built with
/// line tables only: a bare `DW_AT_name`, no `DW_AT_decl_file`) is judged by the file the
/// symbolizer gives it, that of the first row of the instance's own code
/// ([`crate::dwarf::first_file`]): the standard library's code inlined into such a unit is
/// then left out as a declared one is. Where the unit has no line table to tell, it is kept.
pub fn instance_starts(obj: &object::File, keep: impl FnMut(&Path) -> bool, limit: usize) -> Result<Vec<InlinedStart>, gimli::Error> {
    Ok(inlined_code(obj, keep, limit)?.starts)
}

/// A function of the program's own code that the compiler inlined everywhere leaving no code
/// of its own in the debug information: an abstract `DW_TAG_subprogram` (`DW_AT_inline`) that
/// no inlined instance with an address and no out-of-line copy refers to. Whether it ran cannot
/// be told (gcc `-O2` folds a one-line `static` predicate into its caller's branch).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Folded {
    /// `DW_AT_name` (not qualified).
    pub name: String,
    /// Its declaration file and line.
    pub file: std::path::PathBuf,
    pub line: u32,
}

/// [`instance_starts`], the [`Folded`] functions declared in files `keep` keeps (none when
/// the walk stopped at `limit`: the rest of the DWARF could hold their instances), and every
/// inlined instance's ranges.
pub fn inlined_code(obj: &object::File, mut keep: impl FnMut(&Path) -> bool, limit: usize) -> Result<InlinedCode, gimli::Error> {
    let sections = crate::units::Sections::of(obj);
    let dwarf = sections.dwarf();
    let mut xref = Xref::new(&dwarf);
    // Whether a file is kept, by (unit start, file index).
    let mut kept: HashMap<(usize, u64), bool> = HashMap::new();
    let mut out = Vec::new();
    // Abstract functions of the kept files (by DIE, across units) and the DIEs some code
    // instance refers to: those never referred to were folded away.
    let mut abstracts: HashMap<u64, Folded> = HashMap::new();
    let mut instantiated: std::collections::HashSet<u64> = std::collections::HashSet::new();
    let mut stopped = false;
    let mut all_ranges: Vec<Vec<(u64, u64)>> = Vec::new();
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
        // The unit's instances in DIE order, each subprogram a range-less stop between them
        // (for [`crate::dwarf::own_code`]); and those whose function no DIE declares:
        // (instance, its starts in `out`, chain, parent).
        let mut instances: Vec<Instance> = Vec::new();
        let mut undeclared: Vec<(usize, std::ops::Range<usize>, u64, u64)> = Vec::new();
        while let Some((delta, entry)) = cursor.next_dfs()? {
            depth += delta;
            while open.last().is_some_and(|o| o.0 >= depth) {
                open.pop();
            }
            let (chain, inlined, parent) = match entry.tag() {
                gimli::DW_TAG_subprogram => {
                    let key = here.wrapping_add(entry.offset().0) as u64;
                    if has_code(&unit, entry) {
                        instantiated.insert(origin_key(here, entry));
                    } else if let Some(f) = abstract_function(&unit, entry, here, &mut kept, &mut keep) {
                        abstracts.insert(key, f);
                    }
                    open.push((depth, mix(0, key), 0, 0));
                    instances.push(Instance { depth: depth.max(0) as u32, ranges: Vec::new(), call: None });
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
            let mut declared = false;
            follow_origins(&unit, entry, &mut xref, |u, e, foreign| {
                let Some(file) = decl_file(e) else { return true };
                let k = foreign.unwrap_or(here);
                declared = true;
                is_kept = *kept.entry((k, file)).or_insert_with(|| file_path(u, file).is_none_or(|f| keep(&f)));
                false
            });
            open.push((depth, chain, inlined, if is_kept { chain } else { parent }));
            // An entry where the instance is entered (DW_AT_entry_pc) and at the start of each
            // of its ranges: code motion can run a later range without the entry's (hexyl's
            // Unit::get_multiplier is seen only by a later range).
            // An entry outside every range of the instance is left out: the symbolizer finds no
            // inlined code there (gcc 12 at `-O1` can put a helper's entry at its caller's first
            // instruction, the range starting after it), so its probe would name the caller
            // itself as inlined into itself.
            let mut spans = Vec::new();
            if let Ok(mut ranges) = unit.die_ranges(entry) {
                while let Ok(Some(r)) = ranges.next() {
                    if r.end > r.begin {
                        spans.push((r.begin, r.end));
                    }
                }
            }
            let call = (entry.attr_value(gimli::DW_AT_call_file).ok().flatten().and_then(crate::units::file_index))
                .zip(entry.attr_value(gimli::DW_AT_call_line).ok().flatten().and_then(|v| v.udata_value()))
                .map(|(f, l)| (f, l.min(u32::MAX as u64) as u32));
            instances.push(Instance { depth: depth.max(0) as u32, ranges: spans.clone(), call });
            if !spans.is_empty() {
                instantiated.insert(origin_key(here, entry));
            }
            let instance = all_ranges.len() as u32;
            if !spans.is_empty() {
                all_ranges.push(spans.clone());
            }
            if !is_kept {
                continue;
            }
            let from = out.len();
            let start = |addr, entry| InlinedStart { addr, depth: inlined, chain, parent, entry, instance };
            let entry_pc = entry
                .attr_value(gimli::DW_AT_entry_pc)
                .ok()
                .flatten()
                .and_then(|v| unit.attr_address(v).ok().flatten())
                .filter(|a| spans.iter().any(|&(b, e)| (b..e).contains(a)));
            if let Some(a) = entry_pc {
                out.push(start(a, true));
            }
            out.extend(spans.iter().enumerate().map(|(k, &(b, _))| start(b, entry_pc.map_or(k == 0, |a| a == b))));
            if !declared {
                undeclared.push((instances.len() - 1, from..out.len(), chain, parent));
            }
            if out.len() >= limit {
                stopped = true;
                break;
            }
        }
        drop_undeclared(&unit, here, &instances, &undeclared, &mut out, &mut kept, &mut keep);
        if out.len() >= limit {
            stopped = true;
            break;
        }
    }
    let mut folded: Vec<Folded> = match stopped {
        true => Vec::new(),
        false => abstracts.into_iter().filter(|(k, _)| !instantiated.contains(k)).map(|(_, f)| f).collect(),
    };
    folded.sort();
    folded.dedup();
    Ok(InlinedCode { starts: out, folded, instances: all_ranges })
}

/// Whether a DIE has code: an address range or a low PC.
fn has_code<'a>(unit: &gimli::UnitRef<R<'a>>, entry: &gimli::DebuggingInformationEntry<R<'a>>) -> bool {
    entry.attr_value(gimli::DW_AT_low_pc).ok().flatten().is_some()
        || unit.die_ranges(entry).is_ok_and(|mut r| matches!(r.next(), Ok(Some(r)) if r.end > r.begin))
}

/// An abstract function (`DW_AT_inline` inlined or declared inline) declared in a file `keep`
/// keeps, with its name and declaration.
fn abstract_function<'a>(
    unit: &gimli::UnitRef<R<'a>>,
    entry: &gimli::DebuggingInformationEntry<R<'a>>,
    here: usize,
    kept: &mut HashMap<(usize, u64), bool>,
    keep: &mut impl FnMut(&Path) -> bool,
) -> Option<Folded> {
    let inline = entry.attr_value(gimli::DW_AT_inline).ok().flatten()?;
    if !matches!(inline, gimli::AttributeValue::Inline(gimli::DW_INL_inlined | gimli::DW_INL_declared_inlined)) {
        return None;
    }
    let index = decl_file(entry)?;
    let file = file_path(unit, index)?;
    if !*kept.entry((here, index)).or_insert_with(|| keep(&file)) {
        return None;
    }
    let name = unit.attr_string(entry.attr_value(gimli::DW_AT_name).ok().flatten()?).ok()?.to_string_lossy().into_owned();
    let line = entry.attr_value(gimli::DW_AT_decl_line).ok().flatten().and_then(|v| v.udata_value()).unwrap_or(0);
    Some(Folded { name, file, line: line.min(u32::MAX as u64) as u32 })
}

/// The call sites (file, line) of the inlined instances of `obj`'s DWARF whose code holds one of
/// `wanted` (link-time addresses, sorted), at every depth, each once, sorted. One walk of the
/// DIEs of the units whose code holds a wanted address ([`crate::dwarf::misses`]), reading only
/// the inlined instances' ranges and call sites (the analyzer's native lines: the lines calling
/// inlined code whose probe another copy's row disarmed).
pub fn call_sites_at(obj: &object::File, wanted: &[u64]) -> Result<Vec<(std::path::PathBuf, u32)>, gimli::Error> {
    let sections = crate::units::Sections::of(obj);
    let dwarf = sections.dwarf();
    let mut out = std::collections::BTreeSet::new();
    let mut units = dwarf.units();
    while let Some(header) = units.next()? {
        let Ok(unit) = dwarf.unit(header) else { continue };
        let unit = unit.unit_ref(&dwarf);
        if crate::dwarf::misses(&unit, wanted) {
            continue;
        }
        let mut files: HashMap<u64, Option<std::path::PathBuf>> = HashMap::new();
        let mut cursor = unit.entries();
        while let Some((_, entry)) = cursor.next_dfs()? {
            if entry.tag() != gimli::DW_TAG_inlined_subroutine {
                continue;
            }
            let Ok(mut ranges) = unit.die_ranges(entry) else { continue };
            let mut holds = false;
            while let Ok(Some(r)) = ranges.next() {
                let i = wanted.partition_point(|&w| w < r.begin);
                if wanted.get(i).is_some_and(|&w| w < r.end) {
                    holds = true;
                    break;
                }
            }
            if !holds {
                continue;
            }
            let file = entry.attr_value(gimli::DW_AT_call_file).ok().flatten().and_then(crate::units::file_index);
            let line = entry.attr_value(gimli::DW_AT_call_line).ok().flatten().and_then(|v| v.udata_value());
            if let (Some(f), Some(l)) = (file, line) {
                if let Some(path) = files.entry(f).or_insert_with(|| file_path(&unit, f)).clone() {
                    out.insert((path, l.min(u32::MAX as u64) as u32));
                }
            }
        }
    }
    Ok(out.into_iter().collect())
}

/// Leave out of `out` the starts of the instances `undeclared` ((instance, its starts, chain,
/// parent)) whose own code's first row is in a file that `keep` refuses, and give the starts
/// nested in one the parent it had.
fn drop_undeclared(
    unit: &gimli::UnitRef<R>,
    here: usize,
    instances: &[Instance],
    undeclared: &[(usize, std::ops::Range<usize>, u64, u64)],
    out: &mut Vec<InlinedStart>,
    kept: &mut HashMap<(usize, u64), bool>,
    keep: &mut impl FnMut(&Path) -> bool,
) {
    if undeclared.is_empty() || unit.line_program.is_none() {
        return;
    }
    let own = undeclared.iter().map(|u| crate::dwarf::own_code(instances, u.0)).collect();
    let rows = crate::dwarf::rows_over(unit, own);
    // Chain left out -> the parent its nested instances take instead.
    let mut dropped: HashMap<u64, u64> = HashMap::new();
    let mut gone = vec![false; out.len()];
    for (u, rows) in undeclared.iter().zip(&rows) {
        let Some(file) = crate::dwarf::first_file(rows) else { continue };
        if *kept.entry((here, file)).or_insert_with(|| crate::units::file_path(unit, file).is_none_or(|f| keep(&f))) {
            continue;
        }
        dropped.insert(u.2, u.3);
        u.1.clone().for_each(|i| gone[i] = true);
    }
    if dropped.is_empty() {
        return;
    }
    let first = undeclared[0].1.start;
    let mut k = 0;
    out.retain(|_| {
        k += 1;
        !gone[k - 1]
    });
    let first = first.min(out.len());
    for s in out[first..].iter_mut() {
        // A bounded walk up (a hash collision cannot loop it).
        for _ in 0..256 {
            match dropped.get(&s.parent) {
                Some(&p) if p != s.parent => s.parent = p,
                _ => break,
            }
        }
    }
}
