//! Native symbolization: from the run-time addresses the native shim recorded to functions
//! with a demangled name, a source file and the function's exact line span.
//!
//! For each object (executable or shared library) once:
//! 1. open it with `object` and compute the link-time address of every recorded address:
//!    `addr - base + (first PT_LOAD p_vaddr, page-aligned)` (see docs/trace-format.md);
//! 2. find its DWARF: in the object itself, or in a separate debug file found through its
//!    build-id (`/usr/lib/debug/.build-id/xx/yyyy.debug`) or its `.gnu_debuglink` (next to the
//!    object, in its `.debug/` directory, or under `/usr/lib/debug/<dir>/`);
//! 3. walk the DIEs with `gimli`: the `DW_TAG_subprogram` whose code starts at (or contains)
//!    the address gives the name (`DW_AT_linkage_name`, demangled, else `DW_AT_name`, following
//!    `DW_AT_specification`/`DW_AT_abstract_origin`), `DW_AT_decl_file` and `DW_AT_decl_line`;
//!    the last line is the largest line of the line table over the subprogram's address
//!    ranges, in its own file, leaving out the ranges of code inlined into it;
//! 4. widen the span with the source text when it is readable ([`super::source_span`]): the
//!    lines of the declaration before the name (`static int`, `template <...>`) and, for a
//!    function whose code does not reach its closing brace, down to that brace;
//! 5. addresses without a subprogram DIE go through `addr2line` (the outermost frame of
//!    `find_frames`, i.e. the function itself rather than what was inlined at its entry),
//!    then the object's symbol tables, then the dynamic symbol the shim recorded.
//!
//! Nothing here fails: a missing object or missing debug information degrades to symbol
//! names with one warning per object saying how to fix it.

use super::demangle::{demangle, short_name, Lang};
use super::source_span;
use crate::symbols::{Function, Language};
use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol, SymbolKind};
use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

type R<'a> = gimli::EndianSlice<'a, gimli::RunTimeEndian>;

/// One native function address to resolve.
#[derive(Debug, Clone)]
pub struct NativeAddr {
    pub id: u32,
    /// Run-time address.
    pub addr: u64,
    /// Path of the object holding it.
    pub module: String,
    /// Run-time load address of that object.
    pub base: u64,
    /// Dynamic symbol recorded by the shim (`name` or `name+0xoff`).
    pub symbol: Option<String>,
}

/// Resolve addresses to functions, in the same order. Never fails: what cannot be resolved
/// degrades to a symbol name or an address, with a warning (at most one per object).
pub fn resolve(addrs: &[NativeAddr]) -> (Vec<Function>, Vec<String>) {
    let mut out: Vec<Option<Function>> = vec![None; addrs.len()];
    let mut warnings = Vec::new();
    let mut by_module: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, a) in addrs.iter().enumerate() {
        by_module.entry(a.module.as_str()).or_default().push(i);
    }
    for (module, idxs) in by_module {
        let items: Vec<&NativeAddr> = idxs.iter().map(|&i| &addrs[i]).collect();
        let (funcs, warning) = resolve_module(module, &items);
        warnings.extend(warning);
        for (i, f) in idxs.into_iter().zip(funcs) {
            out[i] = Some(f);
        }
    }
    let mut funcs: Vec<Function> = out.into_iter().zip(addrs).map(|(f, a)| f.unwrap_or_else(|| fallback(a, None))).collect();
    refine_spans(&mut funcs);
    (funcs, warnings)
}

/// A function named only by a symbol (or by its address).
fn fallback(a: &NativeAddr, symbol: Option<String>) -> Function {
    let qualname = symbol.or_else(|| a.symbol.as_deref().map(|s| demangle(s, Lang::Unknown))).unwrap_or_else(|| format!("{:#x}", a.addr));
    Function {
        language: Language::Native,
        name: short_name(&qualname),
        qualname,
        file: None,
        first_line: None,
        last_line: None,
        object: (!a.module.is_empty()).then(|| a.module.clone()),
    }
}

fn resolve_module(module: &str, items: &[&NativeAddr]) -> (Vec<Function>, Option<String>) {
    let names_only = |why: String| (items.iter().map(|a| fallback(a, None)).collect(), Some(why));
    if module.is_empty() {
        return names_only(format!(
            "{} function address(es) were outside every loaded object (generated code?); they are shown by address",
            items.len()
        ));
    }
    let path = Path::new(module);
    let map = match std::fs::File::open(path).and_then(|f| {
        // SAFETY: a read-only mapping of an object file; if another process truncates it
        // meanwhile we may fault, which is the documented limit of mapping files.
        unsafe { memmap2::Mmap::map(&f) }
    }) {
        Ok(m) => m,
        Err(e) => {
            return names_only(format!(
                "{module}: cannot read this object ({e}); was it moved or deleted after the run? \
                 {} function(s) in it are shown by their dynamic symbol names, without source; \
                 put the object back (or record the trace again) to see them",
                items.len()
            ))
        }
    };
    let obj = match object::File::parse(&*map) {
        Ok(o) => o,
        Err(e) => {
            return names_only(format!(
                "{module}: not a readable ELF object ({e}); {} function(s) are shown by symbol name only",
                items.len()
            ))
        }
    };
    let bias = obj.segments().map(|s| s.address()).min().map(|v| v & !0xfff).unwrap_or(0);
    let link: Vec<u64> = items.iter().map(|a| a.addr.wrapping_sub(a.base).wrapping_add(bias)).collect();
    let symbols = SymbolTable::new(&obj);

    let debug = find_debug_file(path, &obj);
    let dwarf_found = match &debug {
        DebugSource::Itself => Some(symbolize_dwarf(&obj, &link, &symbols)),
        DebugSource::File(p) => match std::fs::File::open(p).and_then(|f| {
            // SAFETY: as above.
            unsafe { memmap2::Mmap::map(&f) }
        }) {
            Ok(dmap) => match object::File::parse(&*dmap) {
                Ok(dobj) => Some(symbolize_dwarf(&dobj, &link, &symbols)),
                Err(_) => None,
            },
            Err(_) => None,
        },
        DebugSource::None(_) => None,
    };
    let mut warning = None;
    let resolved: Vec<Option<Function>> = match dwarf_found {
        Some(Ok(r)) => r,
        Some(Err(e)) => {
            warning =
                Some(format!("{module}: its debug information is damaged or unsupported ({e}); functions are shown by symbol name only"));
            vec![None; items.len()]
        }
        None => {
            let looked = match &debug {
                DebugSource::None(looked) if !looked.is_empty() => {
                    format!(" (also looked for a separate debug file in {})", looked.join(", "))
                }
                _ => String::new(),
            };
            warning = Some(format!(
                "{module}: no debug information{looked}; {} function(s) in it are shown by symbol name only, without source. \
                 Rebuild it with `-g`, or install its debug symbols (the distribution's -dbgsym/-dbg/-debuginfo package)",
                items.len()
            ));
            vec![None; items.len()]
        }
    };
    let funcs = items
        .iter()
        .zip(resolved)
        .zip(&link)
        .map(|((a, r), &l)| {
            let mut f = r.unwrap_or_else(|| fallback(a, symbols.lookup(l)));
            f.object = Some(module.to_string());
            f
        })
        .collect();
    (funcs, warning)
}

// ---------------------------------------------------------------------------------------
// Finding debug information
// ---------------------------------------------------------------------------------------

enum DebugSource {
    Itself,
    File(PathBuf),
    /// Not found; the places that were tried.
    None(Vec<String>),
}

fn has_dwarf(obj: &object::File) -> bool {
    obj.section_by_name(".debug_info").is_some_and(|s| s.size() > 0)
}

/// Where the DWARF of `path` is: in the object, or in a separate debug file.
fn find_debug_file(path: &Path, obj: &object::File) -> DebugSource {
    if has_dwarf(obj) {
        return DebugSource::Itself;
    }
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Ok(Some(id)) = obj.build_id() {
        if id.len() >= 2 {
            let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
            candidates.push(PathBuf::from(format!("/usr/lib/debug/.build-id/{}/{}.debug", &hex[..2], &hex[2..])));
        }
    }
    if let Ok(Some((name, _crc))) = obj.gnu_debuglink() {
        let name = String::from_utf8_lossy(name).into_owned();
        let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        if let Some(dir) = real.parent() {
            candidates.push(dir.join(&name));
            candidates.push(dir.join(".debug").join(&name));
            let rel = dir.strip_prefix("/").unwrap_or(dir);
            candidates.push(Path::new("/usr/lib/debug").join(rel).join(&name));
        }
    }
    for c in &candidates {
        if c.as_path() == path {
            continue;
        }
        let ok = std::fs::read(c).ok().is_some_and(|data| object::File::parse(&*data).is_ok_and(|d| has_dwarf(&d)));
        if ok {
            return DebugSource::File(c.clone());
        }
    }
    DebugSource::None(candidates.iter().map(|c| c.display().to_string()).collect())
}

// ---------------------------------------------------------------------------------------
// Symbol tables (fallback)
// ---------------------------------------------------------------------------------------

struct SymbolTable {
    /// (address, size, raw name), sorted by address.
    syms: Vec<(u64, u64, String)>,
}

impl SymbolTable {
    fn new(obj: &object::File) -> SymbolTable {
        let mut syms: Vec<(u64, u64, String)> = obj
            .symbols()
            .chain(obj.dynamic_symbols())
            .filter(|s| s.kind() == SymbolKind::Text && s.address() != 0)
            .filter_map(|s| s.name().ok().filter(|n| !n.is_empty()).map(|n| (s.address(), s.size(), n.to_string())))
            .collect();
        syms.sort();
        syms.dedup_by_key(|s| s.0);
        SymbolTable { syms }
    }

    /// The demangled name of the function containing `addr`.
    fn lookup(&self, addr: u64) -> Option<String> {
        let i = self.syms.partition_point(|s| s.0 <= addr);
        let (start, size, name) = self.syms.get(i.checked_sub(1)?)?;
        if *start == addr || addr < start + (*size).max(1) {
            Some(demangle(name, Lang::Unknown))
        } else {
            None
        }
    }

    /// The raw name of the symbol at exactly `addr`.
    fn exact(&self, addr: u64) -> Option<&str> {
        let i = self.syms.partition_point(|s| s.0 < addr);
        self.syms.get(i).filter(|s| s.0 == addr).map(|s| s.2.as_str())
    }
}

// ---------------------------------------------------------------------------------------
// DWARF
// ---------------------------------------------------------------------------------------

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

/// Load a `gimli::Dwarf` over the (decompressed) sections of `obj`.
fn load_dwarf<'a>(sections: &'a [(gimli::SectionId, Cow<'a, [u8]>)], endian: gimli::RunTimeEndian) -> gimli::Dwarf<R<'a>> {
    let get = |id: gimli::SectionId| -> Result<R<'a>, gimli::Error> {
        let data: &'a [u8] = sections.iter().find(|(s, _)| *s == id).map(|(_, d)| d.as_ref()).unwrap_or(&[]);
        Ok(gimli::EndianSlice::new(data, endian))
    };
    gimli::Dwarf::load(get).unwrap_or_default()
}

/// Resolve link-time addresses with the DWARF of `obj`; `None` for addresses DWARF does
/// not describe.
fn symbolize_dwarf(obj: &object::File, link: &[u64], symbols: &SymbolTable) -> Result<Vec<Option<Function>>, gimli::Error> {
    let endian = if obj.is_little_endian() { gimli::RunTimeEndian::Little } else { gimli::RunTimeEndian::Big };
    let sections: Vec<(gimli::SectionId, Cow<[u8]>)> = SECTIONS
        .iter()
        .map(|&id| (id, obj.section_by_name(id.name()).and_then(|s| s.uncompressed_data().ok()).unwrap_or(Cow::Borrowed(&[][..]))))
        .collect();
    let dwarf = load_dwarf(&sections, endian);
    let mut wanted: Vec<u64> = link.to_vec();
    wanted.sort_unstable();
    wanted.dedup();
    let found = walk_subprograms(&dwarf, &wanted)?;

    let mut ctx: Option<addr2line::Context<R>> = None;
    let mut out = Vec::with_capacity(link.len());
    for &a in link {
        if let Some(s) = found.get(&a) {
            let mut f = s.to_function();
            // Functions with internal linkage (static functions, lambdas, templates over
            // local types) have no DW_AT_linkage_name; the symbol table keeps their mangled
            // name, which demangles to the full qualified name with parameters.
            if !s.has_linkage {
                if let Some(raw) = symbols.exact(a).filter(|r| r.starts_with("_Z") || r.starts_with("_R")) {
                    let q = demangle(raw, s.lang);
                    if q != raw {
                        f.name = short_name(&q);
                        f.qualname = q;
                    }
                }
            }
            out.push(Some(f));
            continue;
        }
        if ctx.is_none() {
            ctx = addr2line::Context::from_dwarf(load_dwarf(&sections, endian)).ok();
        }
        out.push(ctx.as_ref().and_then(|c| addr2line_function(c, a)));
    }
    Ok(out)
}

/// The function containing `addr` according to addr2line: the outermost frame (the
/// function itself, not what was inlined at the address).
fn addr2line_function(ctx: &addr2line::Context<R>, addr: u64) -> Option<Function> {
    let mut frames = ctx.find_frames(addr).skip_all_loads().ok()?;
    let mut last = None;
    while let Ok(Some(f)) = frames.next() {
        last = Some(f);
    }
    let frame = last?;
    let func = frame.function.as_ref()?;
    let raw = func.raw_name().ok()?;
    let lang = func.language.map(Lang::from_dwarf).unwrap_or(Lang::Unknown);
    let qualname = demangle(&raw, lang);
    let (file, line) = match ctx.find_location(addr) {
        Ok(Some(loc)) => (loc.file.map(|f| trace_format::normalize_path(Path::new(f))), loc.line),
        _ => (None, None),
    };
    Some(Function {
        language: Language::Native,
        name: short_name(&qualname),
        qualname,
        file,
        first_line: line,
        last_line: line,
        object: None,
    })
}

/// What the DIE walk learns about one subprogram.
#[derive(Debug, Clone)]
struct Sub {
    qualname: String,
    /// Whether the name came from DW_AT_linkage_name.
    has_linkage: bool,
    lang: Lang,
    file: Option<PathBuf>,
    decl_line: Option<u32>,
    /// Low address of the subprogram (to prefer exact matches).
    low: u64,
    ranges: Vec<(u64, u64)>,
    inlined: Vec<(u64, u64)>,
    last_line: Option<u32>,
}

impl Sub {
    fn to_function(&self) -> Function {
        let first = self.decl_line;
        let last = match (first, self.last_line) {
            (Some(f), Some(l)) => Some(l.max(f)),
            (f, l) => l.or(f),
        };
        Function {
            language: Language::Native,
            name: short_name(&self.qualname),
            qualname: self.qualname.clone(),
            file: self.file.clone(),
            first_line: first,
            last_line: last,
            object: None,
        }
    }
}

fn in_ranges(ranges: &[(u64, u64)], a: u64) -> bool {
    ranges.iter().any(|&(b, e)| a >= b && a < e)
}

/// Walk every unit's DIEs and describe the subprograms whose code holds a wanted address.
fn walk_subprograms(dwarf: &gimli::Dwarf<R>, wanted: &[u64]) -> Result<HashMap<u64, Sub>, gimli::Error> {
    let mut found: HashMap<u64, Sub> = HashMap::new();
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
                        let id = die_identity(&unit, entry);
                        // A lambda's call operator has no declaration line of its own: it is
                        // where its closure type is declared.
                        let class = scopes.iter().rev().find(|s| s.is_type);
                        let (decl_file, decl_line) = match (id.file, id.line) {
                            (None, None) => class.map_or((None, None), |c| (c.file, c.line)),
                            fl => fl,
                        };
                        let file = decl_file.and_then(|f| files.entry(f).or_insert_with(|| file_path(&unit, f)).clone());
                        let low = ranges.iter().map(|r| r.0).min().unwrap_or(0);
                        let has_linkage = id.linkage.is_some();
                        let qualname = match (id.linkage, id.name) {
                            (Some(l), _) => demangle(&l, lang),
                            (None, Some(n)) => {
                                let mut q: Vec<&str> = scopes.iter().filter_map(|s| s.name.as_deref()).collect();
                                q.push(&n);
                                q.join("::")
                            }
                            (None, None) => format!("{low:#x}"),
                        };
                        let sub = Sub {
                            qualname,
                            has_linkage,
                            lang,
                            file,
                            decl_line: decl_line.map(|l| l as u32),
                            low,
                            ranges,
                            inlined: Vec::new(),
                            last_line: None,
                        };
                        subs.push((hits, sub));
                        Some(subs.len() - 1)
                    };
                    stack.push((depth, idx));
                }
                gimli::DW_TAG_namespace | gimli::DW_TAG_class_type | gimli::DW_TAG_structure_type | gimli::DW_TAG_union_type
                    if entry.has_children() =>
                {
                    let id = die_identity(&unit, entry);
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
                    Some(old) => old.low != h && sub.low == h,
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
/// `DW_AT_specification` and `DW_AT_abstract_origin` within the unit.
fn die_identity<'a>(unit: &gimli::UnitRef<R<'a>>, entry: &gimli::DebuggingInformationEntry<R<'a>>) -> Identity {
    let mut id = Identity::default();
    let mut next = id.visit(unit, entry);
    for _ in 0..8 {
        let Some(off) = next else { break };
        next = match unit.entry(off) {
            Ok(e) => id.visit(unit, &e),
            Err(_) => break,
        };
    }
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
}

impl Identity {
    /// Take the attributes not known yet from `e`; returns the DIE it refers to, if any.
    fn visit<'a>(&mut self, unit: &gimli::UnitRef<R<'a>>, e: &gimli::DebuggingInformationEntry<R<'a>>) -> Option<gimli::UnitOffset> {
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
                    }
                }
                gimli::DW_AT_decl_line if self.line.is_none() => self.line = attr.udata_value(),
                gimli::DW_AT_specification | gimli::DW_AT_abstract_origin => {
                    if let gimli::AttributeValue::UnitRef(o) = attr.value() {
                        next = Some(o);
                    }
                }
                _ => {}
            }
        }
        next
    }
}

/// Absolute path of file `index` of the unit's line table.
fn file_path(unit: &gimli::UnitRef<R>, index: u64) -> Option<PathBuf> {
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

// ---------------------------------------------------------------------------------------
// Source spans
// ---------------------------------------------------------------------------------------

/// Widen each function's span with its source text (see [`source_span`]); files that
/// cannot be read keep the DWARF span.
fn refine_spans(funcs: &mut [Function]) {
    let mut cache: HashMap<PathBuf, Option<String>> = HashMap::new();
    for f in funcs.iter_mut() {
        let (Some(file), Some(first), Some(last)) = (&f.file, f.first_line, f.last_line) else { continue };
        let text = cache.entry(file.clone()).or_insert_with(|| std::fs::read(file).ok().map(|b| String::from_utf8_lossy(&b).into_owned()));
        if let Some(text) = text {
            let lines: Vec<&str> = text.lines().collect();
            let (a, b) = source_span::refine(&lines, first, last);
            f.first_line = Some(a);
            f.last_line = Some(b);
        }
    }
}
