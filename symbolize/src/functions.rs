//! The one answer to "which function holds this address" for a native object.
//!
//! [`ObjectFile::functions_at`] takes link-time addresses and gives, for each, the function
//! holding it: demangled name, language, source file, first and last line, where its code
//! starts, and the functions inlined at the address. Every caller goes through it (the
//! analyzer's symbolization of recorded functions, and the tests); the rules are in one place,
//! in this order:
//!
//! 1. **DWARF** (in the object, or in a separate debug file found through its build-id or
//!    `.gnu_debuglink`): the `DW_TAG_subprogram` whose address ranges hold the address
//!    ([`crate::dwarf`]); when several do (a local function nested in another's ranges), the
//!    one starting exactly at the address. A subprogram without `DW_AT_linkage_name` (a
//!    static function, a lambda) takes the name its symbol-table entry demangles to, when
//!    there is one at exactly its entry, so that its name carries its scope and parameters.
//! 2. else the **symbol table** (`.symtab` and `.dynsym`): the function symbol holding the
//!    address, by name only (no file, no lines).
//! 3. else nothing: the caller names the function by the dynamic symbol the shim recorded,
//!    or by its address.
//!
//! There is no second DWARF reader (an earlier version asked `addr2line` when the walk found
//! nothing, and the two could disagree on names and lines).

use crate::demangle::{demangle, Lang};
use crate::dwarf::{self, InlinedFrame};
use crate::units::Sections;
use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol, SymbolKind};
use std::path::{Path, PathBuf};

/// A function holding an address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FuncAt {
    /// Demangled qualified name (C++ with its parameter list, Rust without its hash).
    pub qualname: String,
    /// Language of its compile unit; from the symbol table, [`Lang::Rust`] for a Rust-mangled
    /// symbol, else [`Lang::Unknown`].
    pub lang: Lang,
    pub file: Option<PathBuf>,
    /// `DW_AT_decl_line`.
    pub first_line: Option<u32>,
    /// The largest line of the line table over its own code (see [`crate::dwarf`]).
    pub last_line: Option<u32>,
    /// Link-time address where its code starts.
    pub entry: u64,
    /// What answered: DWARF or the symbol table.
    pub found_in: FoundIn,
    /// Whether `file` and the lines come from the line table because no DIE declares the
    /// function (line-tables-only DWARF): `first_line` is then the first line of its code
    /// (normally its `fn` line, where the prologue is), not `DW_AT_decl_line`.
    pub from_line_table: bool,
    /// Functions inlined at the address, outermost first (empty at a function's entry, as a
    /// rule: inlined code starts after the prologue).
    pub inlined_at: Vec<InlinedFrame>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FoundIn {
    Dwarf,
    SymbolTable,
}

/// Where an object's DWARF was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DebugInfo {
    /// In the object itself.
    Itself,
    /// In a separate debug file.
    Separate(PathBuf),
    /// Nowhere: the places that were tried for a separate file.
    Missing(Vec<String>),
    /// Present but unreadable (the reason).
    Damaged(String),
}

/// What [`ObjectFile::functions_at`] found.
#[derive(Debug, Clone)]
pub struct Lookup {
    /// One entry per address, in order.
    pub funcs: Vec<Option<FuncAt>>,
    pub debug: DebugInfo,
}

#[derive(Debug, thiserror::Error)]
pub enum ObjectError {
    #[error("cannot read this object ({0})")]
    Read(#[from] std::io::Error),
    #[error("not a readable ELF object ({0})")]
    Parse(#[from] object::Error),
}

/// An object file (executable or shared library), mapped read-only.
pub struct ObjectFile {
    pub(crate) map: memmap2::Mmap,
    /// Link-time address of its first loaded page.
    bias: u64,
}

pub(crate) fn map_file(path: &Path) -> std::io::Result<memmap2::Mmap> {
    let f = std::fs::File::open(path)?;
    // SAFETY: a read-only mapping of an object file; if another process truncates it
    // meanwhile we may fault, which is the documented limit of mapping files.
    unsafe { memmap2::Mmap::map(&f) }
}

impl ObjectFile {
    pub fn open(path: &Path) -> Result<ObjectFile, ObjectError> {
        let map = map_file(path)?;
        let obj = object::File::parse(&*map)?;
        let bias = obj.segments().map(|s| s.address()).min().map(|v| v & !0xfff).unwrap_or(0);
        Ok(ObjectFile { map, bias })
    }

    /// The link-time address of a run-time address in this object loaded at `base`:
    /// `addr - base + (first PT_LOAD p_vaddr, page-aligned)` (docs/trace-format.md).
    pub fn link_address(&self, addr: u64, base: u64) -> u64 {
        addr.wrapping_sub(base).wrapping_add(self.bias)
    }

    /// The run-time address of link-time address `link` in this object loaded at `base`: the
    /// inverse of [`ObjectFile::link_address`].
    pub fn run_address(&self, link: u64, base: u64) -> u64 {
        link.wrapping_sub(self.bias).wrapping_add(base)
    }

    /// The call sites (file, line) of the inlined instances whose code holds one of link-time
    /// addresses `link`, at every depth, each once, sorted ([`crate::inlined::call_sites_at`]):
    /// what [`ObjectFile::functions_at`]'s `inlined_at` frames give, without describing the
    /// functions. `path`: as for `functions_at`. None without readable debug information.
    pub fn inlined_call_sites(&self, path: &Path, link: &[u64]) -> Vec<(PathBuf, u32)> {
        let Ok(obj) = object::File::parse(&*self.map) else { return Vec::new() };
        let mut wanted = link.to_vec();
        wanted.sort_unstable();
        wanted.dedup();
        match find_debug_file(path, &obj) {
            DebugSource::Itself => crate::inlined::call_sites_at(&obj, &wanted).unwrap_or_default(),
            DebugSource::File(p) => map_file(&p)
                .ok()
                .and_then(|m| object::File::parse(&*m).ok().and_then(|d| crate::inlined::call_sites_at(&d, &wanted).ok()))
                .unwrap_or_default(),
            DebugSource::None(_) => Vec::new(),
        }
    }

    /// The raw name of the function symbol holding each link-time address (`name+0xoff` when
    /// the address is past the symbol's start); `None` where no symbol holds it.
    pub fn symbol_names(&self, link: &[u64]) -> Vec<Option<String>> {
        let Ok(obj) = object::File::parse(&*self.map) else { return vec![None; link.len()] };
        // (Names borrowed from the mapping, not copied: `trace run` calls this after every
        // native run, on objects of tens of thousands of symbols.)
        let mut syms: Vec<(u64, u64, &str)> = obj
            .symbols()
            .chain(obj.dynamic_symbols())
            .filter(|s| s.kind() == SymbolKind::Text && s.address() != 0)
            .filter_map(|s| s.name().ok().filter(|n| !n.is_empty()).map(|n| (s.address(), s.size(), n)))
            .collect();
        syms.sort_unstable();
        syms.dedup_by_key(|s| s.0);
        link.iter()
            .map(|&addr| {
                let i = syms.partition_point(|s| s.0 <= addr);
                let (start, size, name) = syms.get(i.checked_sub(1)?)?;
                match addr - start {
                    0 => Some(name.to_string()),
                    off if off < (*size).max(1) => Some(format!("{name}+{off:#x}")),
                    _ => None,
                }
            })
            .collect()
    }

    /// The functions holding link-time addresses `link` (see the module's rules). `path` is
    /// the object's own path, for finding a separate debug file.
    pub fn functions_at(&self, path: &Path, link: &[u64]) -> Lookup {
        let Ok(obj) = object::File::parse(&*self.map) else {
            return Lookup { funcs: vec![None; link.len()], debug: DebugInfo::Damaged("not an ELF object".into()) };
        };
        let symbols = SymbolTable::new(&obj);
        let (dwarf_found, debug) = match find_debug_file(path, &obj) {
            DebugSource::Itself => match dwarf_functions(&obj, link, &symbols) {
                Ok(r) => (Some(r), DebugInfo::Itself),
                Err(e) => (None, DebugInfo::Damaged(e.to_string())),
            },
            DebugSource::File(p) => {
                match map_file(&p).map_err(|e| e.to_string()).and_then(|m| {
                    let dobj = object::File::parse(&*m).map_err(|e| e.to_string())?;
                    dwarf_functions(&dobj, link, &symbols).map_err(|e| e.to_string())
                }) {
                    Ok(r) => (Some(r), DebugInfo::Separate(p)),
                    Err(e) => (None, DebugInfo::Damaged(format!("{}: {e}", p.display()))),
                }
            }
            DebugSource::None(looked) => (None, DebugInfo::Missing(looked)),
        };
        let dwarf_found = dwarf_found.unwrap_or_else(|| vec![None; link.len()]);
        let funcs = dwarf_found.into_iter().zip(link).map(|(d, &a)| d.or_else(|| symbols.function_at(a))).collect();
        Lookup { funcs, debug }
    }
}

// ---------------------------------------------------------------------------------------
// Finding debug information
// ---------------------------------------------------------------------------------------

pub(crate) enum DebugSource {
    Itself,
    File(PathBuf),
    /// Not found; the places that were tried.
    None(Vec<String>),
}

pub(crate) fn has_dwarf(obj: &object::File) -> bool {
    obj.section_by_name(".debug_info").is_some_and(|s| s.size() > 0)
}

/// Where the DWARF of `path` is: in the object, or in a separate debug file.
pub(crate) fn find_debug_file(path: &Path, obj: &object::File) -> DebugSource {
    if has_dwarf(obj) {
        return DebugSource::Itself;
    }
    let build_id = obj.build_id().ok().flatten();
    let debuglink = obj.gnu_debuglink().ok().flatten().map(|(name, _crc)| name);
    let candidates = trace_format::objects::debug_file_candidates(path, build_id, debuglink);
    for c in &candidates {
        if c.as_path() == path {
            continue;
        }
        let ok = map_file(c).ok().is_some_and(|data| object::File::parse(&*data).is_ok_and(|d| has_dwarf(&d)));
        if ok {
            return DebugSource::File(c.clone());
        }
    }
    DebugSource::None(candidates.iter().map(|c| c.display().to_string()).collect())
}

// ---------------------------------------------------------------------------------------
// Symbol tables
// ---------------------------------------------------------------------------------------

pub(crate) struct SymbolTable {
    /// (address, size, raw name), sorted by address.
    syms: Vec<(u64, u64, String)>,
}

impl SymbolTable {
    pub(crate) fn new(obj: &object::File) -> SymbolTable {
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

    /// The function symbol holding `addr`, by name only.
    fn function_at(&self, addr: u64) -> Option<FuncAt> {
        let i = self.syms.partition_point(|s| s.0 <= addr);
        let (start, size, name) = self.syms.get(i.checked_sub(1)?)?;
        if *start == addr || addr < start + (*size).max(1) {
            // A Rust-mangled symbol says its language.
            let lang = if crate::demangle::is_rust_symbol(name) { Lang::Rust } else { Lang::Unknown };
            Some(FuncAt {
                qualname: demangle(name, lang),
                lang,
                file: None,
                first_line: None,
                last_line: None,
                entry: *start,
                found_in: FoundIn::SymbolTable,
                from_line_table: false,
                inlined_at: Vec::new(),
            })
        } else {
            None
        }
    }

    /// The address range (start, end) of the function symbol holding `addr`, when its size
    /// is known.
    pub(crate) fn range_at(&self, addr: u64) -> Option<(u64, u64)> {
        let i = self.syms.partition_point(|s| s.0 <= addr);
        let (start, size, _) = self.syms.get(i.checked_sub(1)?)?;
        (*size > 0 && addr < start + size).then_some((*start, start + size))
    }

    /// The (start, end) of the parts GCC split off functions into `.cold` symbols, by the raw
    /// name of the function they were split from: `main.cold` and `_Z7checkedi.cold.1` under
    /// `main` and `_Z7checkedi`. A part holds code of its function that the function's own
    /// symbol's extent does not (an exception handler, a path to a `noreturn` or cold call).
    pub(crate) fn cold_parts(&self) -> std::collections::HashMap<&str, Vec<(u64, u64)>> {
        let mut out: std::collections::HashMap<&str, Vec<(u64, u64)>> = std::collections::HashMap::new();
        for (start, size, name) in self.syms.iter().filter(|s| s.1 > 0) {
            let Some(at) = name.rfind(".cold") else { continue };
            let rest = &name[at + ".cold".len()..];
            let numbered = rest.strip_prefix('.').is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
            if at > 0 && (rest.is_empty() || numbered) {
                out.entry(&name[..at]).or_default().push((*start, start + size));
            }
        }
        out
    }

    /// The raw name of the symbol at exactly `addr`.
    pub(crate) fn exact(&self, addr: u64) -> Option<&str> {
        let i = self.syms.partition_point(|s| s.0 < addr);
        self.syms.get(i).filter(|s| s.0 == addr).map(|s| s.2.as_str())
    }
}

// ---------------------------------------------------------------------------------------
// DWARF
// ---------------------------------------------------------------------------------------

/// The inlined instances holding an address, in DIE order, cut to one chain of nested ones:
/// the path to the last one (instances that are not nested in each other, which an LTO build
/// can leave overlapping, are not a chain of calls).
fn nesting_path<'a>(frames: impl Iterator<Item = &'a InlinedFrame>) -> Vec<InlinedFrame> {
    let mut path: Vec<InlinedFrame> = Vec::new();
    for f in frames {
        while path.last().is_some_and(|p| p.depth >= f.depth) {
            path.pop();
        }
        path.push(f.clone());
    }
    path
}

/// Resolve link-time addresses with the DWARF of `obj`: the subprogram holding each; else the
/// symbol-table function holding it, with the file and lines the line table gives its code
/// (a unit with line tables only and no inlined code has no subprogram DIE); `None` for
/// addresses neither holds.
fn dwarf_functions(obj: &object::File, link: &[u64], symbols: &SymbolTable) -> Result<Vec<Option<FuncAt>>, gimli::Error> {
    let sections = Sections::of(obj);
    let dwarf = sections.dwarf();
    let mut wanted: Vec<u64> = link.to_vec();
    wanted.sort_unstable();
    wanted.dedup();
    let found = dwarf::walk_subprograms(&dwarf, &wanted)?;
    // Addresses no subprogram holds, in a function of the symbol table: a unit built with line
    // tables only and nothing inlined has no subprogram DIE at all, but its line table still
    // covers the function's code.
    let bare: Vec<(u64, u64)> = wanted
        .iter()
        .filter(|a| !found.contains_key(a))
        .filter_map(|&a| symbols.range_at(a))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let lines = dwarf::lines_over(&dwarf, &bare)?;
    // Each subprogram's inlined frames by address, in their order (one pass per subprogram: a
    // large function holds thousands of wanted addresses and of frames).
    type At = (*const dwarf::Sub, u64);
    let mut frames_at: std::collections::HashMap<At, Vec<&InlinedFrame>> = std::collections::HashMap::new();
    let mut described = std::collections::HashSet::new();
    for s in found.values() {
        let sub = std::rc::Rc::as_ptr(s);
        if described.insert(sub) {
            for (h, f) in &s.inlined_at {
                frames_at.entry((sub, *h)).or_default().push(f);
            }
        }
    }
    Ok(link
        .iter()
        .map(|&a| {
            let Some(s) = found.get(&a) else {
                let mut f = symbols.function_at(a)?;
                if let Some((file, first, last)) = symbols.range_at(a).and_then(|r| lines.get(&r.0)) {
                    f.file = Some(file.clone());
                    f.first_line = Some(*first);
                    f.last_line = Some(*last);
                    f.found_in = FoundIn::Dwarf;
                    f.from_line_table = true;
                }
                return Some(f);
            };
            let mut qualname = s.qualname.clone();
            // Functions with internal linkage (static functions, lambdas, templates over
            // local types) have no DW_AT_linkage_name; the symbol table keeps their mangled
            // name, which demangles to the full qualified name with parameters.
            if !s.has_linkage {
                if let Some(raw) = symbols.exact(s.entry).filter(|r| r.starts_with("_Z") || r.starts_with("_R")) {
                    let q = demangle(raw, s.lang);
                    if q != raw {
                        qualname = q;
                    }
                }
            }
            let (first_line, last_line) = s.span();
            Some(FuncAt {
                qualname,
                lang: s.lang,
                file: s.file.clone(),
                first_line,
                last_line,
                entry: s.entry,
                found_in: FoundIn::Dwarf,
                from_line_table: s.from_line_table,
                inlined_at: nesting_path(frames_at.get(&(std::rc::Rc::as_ptr(s), a)).into_iter().flatten().copied()),
            })
        })
        .collect())
}
