//! Native symbolization: from the run-time addresses the native shim recorded to functions
//! with a demangled name, a source file and the function's exact line span.
//!
//! For each object (executable or shared library) once:
//! 1. ask [`symbolize::functions`] (the one place that knows which function holds an address:
//!    DWARF, else the symbol table) for every recorded address of the object;
//! 2. name what it does not know by the dynamic symbol the shim recorded, else by address;
//! 3. widen each span with the source text when it is readable ([`super::source_span`]): the
//!    lines of the declaration before the name (C's `static int`, `template <...>`, Rust's
//!    attributes and doc comments) and, for a function whose code does not reach its closing
//!    brace, down to that brace;
//! 4. group the instances of one Rust source function ([`group_instances`]): generic
//!    instances (`parse::<u8>`, `parse::<String>`) and the copies of a closure or trait method
//!    in each instance of its generic parent become one function, so the tree merges them and
//!    the prompt prints their source once.
//!
//! Nothing here fails: a missing object or missing debug information degrades to symbol
//! names with one warning per object saying how to fix it.

use super::source_span;
use crate::symbols::{Function, Language};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use symbolize::demangle::{demangle, erase_generics, is_rust_symbol, short_name, Lang};
use symbolize::functions::{DebugInfo, ObjectError, ObjectFile};
use trace_format::SourcesDoc;

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
    /// An inline probe's address (the entry of inlined code), not a function's entry.
    pub inlined: bool,
}

/// A resolved function and the language of its compile unit.
#[derive(Debug, Clone)]
struct Resolved {
    func: Function,
    lang: Lang,
    /// For an inline probe: the inlined functions around `func` (the innermost one running at
    /// the probe's address), outermost first.
    outer: Vec<Function>,
    /// Whether `func`, and each of `outer`, is a function no DIE declares (line-tables-only
    /// DWARF), and how it is named.
    func_undeclared: Undeclared,
    outer_undeclared: Vec<Undeclared>,
}

impl Resolved {
    fn plain(func: Function) -> Resolved {
        Resolved { func, lang: Lang::Unknown, outer: Vec::new(), func_undeclared: Undeclared::No, outer_undeclared: Vec::new() }
    }
}

/// Whether a function is declared by a DIE; if not (line-tables-only DWARF), its file and lines
/// are those of its code, from the line table, and its span starts at the `fn` line found above
/// them ([`source_span::fn_line_above`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Undeclared {
    No,
    /// Named by its symbol (an out-of-line function): a full path.
    Named,
    /// Named by a bare `DW_AT_name` (an inlined function) and the module of its file
    /// ([`undeclared_name`]): a method takes its `impl` block's or trait's path from the source
    /// text too ([`source_span::impl_above`]).
    Bare,
}

impl Undeclared {
    fn of(from_line_table: bool, qualname: &str) -> Undeclared {
        match (from_line_table, symbolize::demangle::split_scope(qualname).len() > 1) {
            (false, _) => Undeclared::No,
            (true, true) => Undeclared::Named,
            (true, false) => Undeclared::Bare,
        }
    }
}

/// The name of an inlined function. Line-tables-only DWARF names one by its bare name
/// (`capacity<u8>`: no namespace, no linkage name; [`symbolize::dwarf`]), which two functions
/// of different types or modules share (`Vec::capacity`, `RawVec::capacity`): a Rust one is
/// named after the module of the file its code is in, which the line table gives
/// (`alloc::raw_vec::capacity<u8>`; [`super::paths::rust_module_path`]).
fn undeclared_name(i: &symbolize::dwarf::InlinedFrame, lang: Lang) -> String {
    if !i.from_line_table || lang != Lang::Rust || symbolize::demangle::split_scope(&i.qualname).len() > 1 {
        return i.qualname.clone();
    }
    let module = i.file.as_deref().and_then(|f| super::paths::rust_module_path(&f.to_string_lossy()));
    match module {
        Some(m) => format!("{m}::{}", i.qualname),
        None => i.qualname.clone(),
    }
}

/// What [`resolve_chains`] gives for each address: its function and, for an inline probe, the
/// inlined functions around it, outermost first (the function itself is the innermost).
pub type WithChain = (Function, Vec<Function>);

/// Resolve addresses to functions, in the same order. Never fails: what cannot be resolved
/// degrades to a symbol name or an address, with a warning (at most one per object).
///
/// `recorded`: the trace's `sources.json`, whose fingerprints of the native objects (taken when
/// the run ended) say whether an object on disk is still the one that ran: a rebuilt or
/// replaced object would name other functions at the recorded addresses, so its functions
/// keep the symbol names recorded at run time instead, with a warning.
pub fn resolve(addrs: &[NativeAddr], recorded: Option<&SourcesDoc>) -> (Vec<Function>, Vec<String>) {
    let (funcs, warnings) = resolve_chains(addrs, recorded);
    (funcs.into_iter().map(|f| f.0).collect(), warnings)
}

/// [`resolve`], with the chain of inlined functions at each inline probe's address.
pub fn resolve_chains(addrs: &[NativeAddr], recorded: Option<&SourcesDoc>) -> (Vec<WithChain>, Vec<String>) {
    let mut out: Vec<Option<Resolved>> = vec![None; addrs.len()];
    let mut warnings = Vec::new();
    let mut by_module: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, a) in addrs.iter().enumerate() {
        by_module.entry(a.module.as_str()).or_default().push(i);
    }
    // Python extension modules without debug information (a mypyc or Cython wheel has dozens):
    // one line for all of them, not one per module.
    let mut bare_extensions: Vec<(&str, usize)> = Vec::new();
    for (module, idxs) in by_module {
        let items: Vec<&NativeAddr> = idxs.iter().map(|&i| &addrs[i]).collect();
        let (funcs, warning) = resolve_module(module, &items, recorded);
        match warning {
            Some(Warning::ExtensionWithoutDebug) => bare_extensions.push((module, items.len())),
            Some(Warning::Text(w)) => warnings.push(w),
            None => {}
        }
        for (i, f) in idxs.into_iter().zip(funcs) {
            out[i] = Some(f);
        }
    }
    warnings.extend(extensions_without_debug(&bare_extensions));
    let mut funcs: Vec<Resolved> =
        out.into_iter().zip(addrs).map(|(f, a)| f.unwrap_or_else(|| Resolved::plain(fallback(a, None)))).collect();
    refine_spans(&mut funcs);
    group_instances(&mut funcs);
    adopt_sources(&mut funcs, Undeclared::No);
    unify_named_spans(&mut funcs);
    adopt_sources(&mut funcs, Undeclared::Named);
    (funcs.into_iter().map(|r| (r.func, r.outer)).collect(), warnings)
}

/// A function named only by a symbol (or by its address).
fn fallback(a: &NativeAddr, symbol: Option<String>) -> Function {
    // (The recorded symbol may be `name+0xoff`: only a whole Rust symbol names its function.)
    let rust_symbol = symbol.is_none() && a.symbol.as_deref().is_some_and(is_rust_symbol);
    let qualname = symbol.or_else(|| a.symbol.as_deref().map(|s| demangle(s, Lang::Unknown))).unwrap_or_else(|| format!("{:#x}", a.addr));
    Function {
        language: Language::Native,
        name: short_name(&qualname),
        qualname,
        file: None,
        first_line: None,
        last_line: None,
        object: (!a.module.is_empty()).then(|| a.module.clone()),
        program_library: false,
        program_crate: false,
        dependency_crate: false,
        std_dependency: false,
        rust_symbol,
        made_in: None,
        inlined: false,
    }
}

/// Why the object at `path` is not the one the run executed, if its fingerprint in
/// `sources.json` says so: size and modification time equal mean unchanged; otherwise the
/// content's SHA-256 decides (a copy or a `touch` keeps it). No fingerprint (a trace from
/// before objects were fingerprinted, or `trace` was killed): nothing to compare, trusted.
pub(crate) fn changed_since_run(path: &Path, recorded: Option<&SourcesDoc>) -> Option<String> {
    use sha2::{Digest, Sha256};
    let fp = recorded?.files.iter().find(|f| Path::new(&f.path) == path)?;
    let meta = std::fs::metadata(path).ok()?;
    let mtime_ns = meta.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok()).map(|d| d.as_nanos() as i128);
    if meta.len() == fp.size && mtime_ns == Some(fp.mtime_ns) {
        return None;
    }
    let why = if meta.len() != fp.size {
        format!("it is {} bytes, the run's was {}", meta.len(), fp.size)
    } else {
        let mut h = Sha256::new();
        let mut f = std::fs::File::open(path).ok()?;
        std::io::copy(&mut f, &mut h).ok()?;
        let now: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
        if now == fp.sha256 {
            return None;
        }
        "its content differs from the run's".to_string()
    };
    Some(why)
}

/// Why an object's functions lost their source.
enum Warning {
    /// Said as it is.
    Text(String),
    /// A Python extension module with no debug information: said once for all of them.
    ExtensionWithoutDebug,
}

/// The one line for every Python extension module (`(path, functions)`) without debug information.
fn extensions_without_debug(modules: &[(&str, usize)]) -> Option<String> {
    const NAMED: usize = 3;
    if modules.is_empty() {
        return None;
    }
    let functions: usize = modules.iter().map(|m| m.1).sum();
    let names: Vec<&str> = modules.iter().take(NAMED).map(|m| m.0.rsplit('/').next().unwrap_or(m.0)).collect();
    let more = modules.len().saturating_sub(NAMED);
    let more = if more > 0 { format!(" and {more} more") } else { String::new() };
    Some(format!(
        "{} Python extension module(s) have no debug information ({}{more}): their {functions} function(s) are shown by \
         symbol name, and mypyc-compiled ones by their Python function and source where the name maps to it; an extension \
         built with `-g` (e.g. `CFLAGS=-g pip install --no-binary <dist> <dist>`) shows its C source",
        modules.len(),
        names.join(", "),
    ))
}

fn resolve_module(module: &str, items: &[&NativeAddr], recorded: Option<&SourcesDoc>) -> (Vec<Resolved>, Option<Warning>) {
    let names_only = |why: String| (items.iter().map(|a| Resolved::plain(fallback(a, None))).collect(), Some(Warning::Text(why)));
    if module.is_empty() {
        return names_only(format!(
            "{} function address(es) were outside every loaded object (generated code?); they are shown by address",
            items.len()
        ));
    }
    let path = Path::new(module);
    if let Some(why) = changed_since_run(path, recorded) {
        // The names `trace run` read from the object's symbol table when the run ended.
        let names: std::collections::HashMap<u64, &str> = recorded
            .and_then(|d| d.files.iter().find(|f| Path::new(&f.path) == path))
            .map(|fp| fp.symbols.iter().map(|s| (s.offset, s.name.as_str())).collect())
            .unwrap_or_default();
        let funcs = items
            .iter()
            .map(|a| match (&a.symbol, names.get(&a.addr.wrapping_sub(a.base))) {
                (None, Some(name)) => Resolved::plain(fallback(&NativeAddr { symbol: Some(name.to_string()), ..(*a).clone() }, None)),
                _ => Resolved::plain(fallback(a, None)),
            })
            .collect();
        return (
            funcs,
            Some(Warning::Text(format!(
                "{module} was rebuilt or replaced after the run ({why}): its debug information would name other functions at \
                 the recorded addresses, so {} function(s) in it are shown by the symbol names recorded when the run ended \
                 (or by address), without source; record the trace again to see them",
                items.len()
            ))),
        );
    }
    let obj = match ObjectFile::open(path) {
        Ok(o) => o,
        Err(e @ ObjectError::Read(_)) => {
            return names_only(format!(
                "{module}: {e}; was it moved or deleted after the run? \
                 {} function(s) in it are shown by their dynamic symbol names, without source; \
                 put the object back (or record the trace again) to see them",
                items.len()
            ))
        }
        Err(e) => return names_only(format!("{module}: {e}; {} function(s) are shown by symbol name only", items.len())),
    };
    let link: Vec<u64> = items.iter().map(|a| obj.link_address(a.addr, a.base)).collect();
    let found = obj.functions_at(path, &link);
    let warning = match &found.debug {
        DebugInfo::Itself | DebugInfo::Separate(_) => None,
        DebugInfo::Damaged(e) => Some(Warning::Text(format!(
            "{module}: its debug information is damaged or unsupported ({e}); functions are shown by symbol name only"
        ))),
        DebugInfo::Missing(_) if trace_format::patching::is_extension_module(module) => Some(Warning::ExtensionWithoutDebug),
        DebugInfo::Missing(looked) => {
            let looked = if looked.is_empty() {
                String::new()
            } else {
                format!(" (also looked for a separate debug file in {})", looked.join(", "))
            };
            // A Rust program (its `main` is `<crate>::main`, the crate named as the
            // executable) is told how cargo builds it with debug information.
            let file = module.rsplit('/').next().unwrap_or(module);
            let fix = no_debug_fix(file, |name| found.funcs.iter().flatten().any(|f| f.qualname == name));
            Some(Warning::Text(format!(
                "{module}: no debug information{looked}; {} function(s) in it are shown by symbol name only, without source. {fix}",
                items.len()
            )))
        }
    };
    let funcs = items
        .iter()
        .zip(found.funcs)
        .map(|(a, r)| {
            let mut r = match r {
                Some(f) if a.inlined && !f.inlined_at.is_empty() => {
                    let mut undeclared: Vec<Undeclared> =
                        f.inlined_at.iter().map(|i| Undeclared::of(i.from_line_table, &i.qualname)).collect();
                    let mut chain: Vec<Function> = f
                        .inlined_at
                        .iter()
                        .map(|i| Function {
                            language: Language::Native,
                            name: short_name(&i.qualname),
                            qualname: undeclared_name(i, f.lang),
                            file: i.file.clone(),
                            first_line: i.first_line,
                            last_line: i.last_line.or(i.first_line),
                            object: Some(module.to_string()),
                            program_library: false,
                            program_crate: false,
                            dependency_crate: false,
                            std_dependency: false,
                            rust_symbol: false,
                            made_in: None,
                            inlined: true,
                        })
                        .collect();
                    let func = chain.pop().unwrap_or_else(|| fallback(a, None));
                    let func_undeclared = undeclared.pop().unwrap_or(Undeclared::No);
                    Resolved { lang: f.lang, func, outer: chain, func_undeclared, outer_undeclared: undeclared }
                }
                Some(f) => Resolved {
                    func_undeclared: Undeclared::of(f.from_line_table, &f.qualname),
                    outer_undeclared: Vec::new(),
                    lang: f.lang,
                    func: Function {
                        // (A Rust path without a source: from the symbol table, or DWARF
                        // without a line.)
                        rust_symbol: f.file.is_none() && f.lang == Lang::Rust,
                        language: Language::Native,
                        name: short_name(&f.qualname),
                        qualname: f.qualname,
                        file: f.file,
                        first_line: f.first_line,
                        last_line: f.last_line,
                        object: None,
                        program_library: false,
                        program_crate: false,
                        dependency_crate: false,
                        std_dependency: false,
                        made_in: None,
                        inlined: a.inlined,
                    },
                    outer: Vec::new(),
                },
                None => Resolved::plain(fallback(a, None)),
            };
            r.func.object = Some(module.to_string());
            r
        })
        .collect();
    (funcs, warning)
}

// ---------------------------------------------------------------------------------------
// Source spans and Rust instances
// ---------------------------------------------------------------------------------------

/// Widen each function's span with its source text (see [`source_span`]); files that
/// cannot be read keep the DWARF span.
fn refine_spans(funcs: &mut [Resolved]) {
    // Each file read and cut into lines once (a large file holds thousands of functions).
    let mut texts: HashMap<PathBuf, String> = HashMap::new();
    for f in funcs.iter().flat_map(|r| std::iter::once(&r.func).chain(&r.outer)) {
        if let Some(file) = f.file.as_ref().filter(|p| !texts.contains_key(*p)) {
            if let Ok(b) = std::fs::read(file) {
                texts.insert(file.clone(), String::from_utf8_lossy(&b).into_owned());
            }
        }
    }
    let lines: HashMap<&Path, Vec<&str>> = texts.iter().map(|(p, t)| (p.as_path(), t.lines().collect())).collect();
    for r in funcs.iter_mut() {
        let rust = r.lang == Lang::Rust;
        let undeclared =
            std::iter::once(r.func_undeclared).chain(r.outer_undeclared.iter().copied().chain(std::iter::repeat(Undeclared::No)));
        for (f, undeclared) in std::iter::once(&mut r.func).chain(r.outer.iter_mut()).zip(undeclared) {
            refine_span(f, rust, undeclared, &lines);
        }
    }
}

/// `undeclared`: its first line is its body's first line of code, from the line table (no DIE
/// declares it): a Rust function's span then starts at the `fn` line above it that names it
/// ([`source_span::fn_line_above`]), so that every inlined instance of it has the same span;
/// a method named by a bare name takes its `impl` block's path ([`source_span::impl_above`]).
fn refine_span(f: &mut Function, rust: bool, undeclared: Undeclared, files: &HashMap<&Path, Vec<&str>>) {
    let (Some(file), Some(first), Some(last)) = (&f.file, f.first_line, f.last_line) else { return };
    if let Some(lines) = files.get(file.as_path()) {
        let first = match undeclared != Undeclared::No && rust {
            true => match source_span::fn_line_above(lines, first, &short_name(&erase_generics(&f.name))) {
                Some(at) => {
                    // A method: named after its `impl` block or trait, in its module.
                    if let Some(block) = source_span::impl_above(lines, at).filter(|_| undeclared == Undeclared::Bare) {
                        let module = f.qualname.strip_suffix(f.name.as_str()).and_then(|m| m.strip_suffix("::")).filter(|m| !m.is_empty());
                        f.qualname = match (block.starts_with('<'), module) {
                            (true, _) => format!("{block}::{}", f.name),
                            (false, Some(m)) => format!("{m}::{block}::{}", f.name),
                            (false, None) => format!("{block}::{}", f.name),
                        };
                    }
                    at
                }
                None => first,
            },
            false => first,
        };
        let (a, b) = source_span::refine(lines, first, last, rust);
        // The `main` rustc generates for a test harness (`cargo test`) is declared at line 1 of
        // the crate's root, where other code is: that is not its source.
        if rust && f.name == "main" && !lines.iter().take(b as usize).skip(a.saturating_sub(1) as usize).any(|l| l.contains("fn main")) {
            (f.file, f.first_line, f.last_line) = (None, None, None);
            return;
        }
        f.first_line = Some(a);
        f.last_line = Some(b);
    }
}

/// Make the instances of one Rust source function the same [`Function`], so that the call
/// tree merges them (the fold treats equal functions as one) and the prompt prints their
/// source once.
///
/// Two Rust functions are instances of one source function when they come from DWARF with the
/// same object, file, first and last line, and the same short name once generic arguments
/// are erased: monomorphized copies of a generic function, of a method of a generic type, of
/// a blanket trait impl, and of the closures inside any of them. (Two different functions
/// cannot share all of that, except copies a macro expands at one place, whose text is the
/// same anyway.) Their common name: the name they share if they all have the same one (the
/// legacy mangling names generic code by its parameters, `RawVec<T,A>::grow_one`); else, with
/// v0 names that carry the concrete arguments, the first instance's name with every generic
/// argument list erased (`<alloc::vec::Vec<u8>>::push` and `<alloc::vec::Vec<String>>::push`
/// are `<alloc::vec::Vec>::push`), or if the self types differ, the first instance's erased
/// name.
fn group_instances(funcs: &mut [Resolved]) {
    // (object, file, first line, last line, short name without generics)
    type Instance<'a> = (Option<&'a str>, &'a Path, u32, u32, String);
    // A function of `funcs`: the resolved one (`None`) or one of the inlined ones around it.
    type At = (usize, Option<usize>);
    let mut groups: HashMap<Instance, Vec<At>> = HashMap::new();
    for (i, r) in funcs.iter().enumerate() {
        if r.lang != Lang::Rust {
            continue;
        }
        let all = std::iter::once((None, &r.func)).chain(r.outer.iter().enumerate().map(|(k, f)| (Some(k), f)));
        for (k, f) in all {
            let (Some(file), Some(first), Some(last)) = (f.file.as_deref(), f.first_line, f.last_line) else { continue };
            let short = short_name(&erase_generics(&f.qualname));
            groups.entry((f.object.as_deref(), file, first, last, short)).or_default().push((i, k));
        }
    }
    let get = |funcs: &[Resolved], (i, k): At| -> String {
        match k {
            None => funcs[i].func.qualname.clone(),
            Some(k) => funcs[i].outer[k].qualname.clone(),
        }
    };
    let renames: Vec<(Vec<At>, String)> = groups
        .into_values()
        .filter(|members| members.len() > 1)
        .filter_map(|members| {
            let first = get(funcs, members[0]);
            if members.iter().all(|&m| get(funcs, m) == first) {
                return None;
            }
            Some((members.clone(), erase_generics(&first)))
        })
        .collect();
    for (members, name) in renames {
        for (i, k) in members {
            let f = match k {
                None => &mut funcs[i].func,
                Some(k) => &mut funcs[i].outer[k],
            };
            f.name = short_name(&name);
            f.qualname = name.clone();
        }
    }
}

/// Give a Rust function whose source DWARF does not declare the source of the function of the
/// same name and object that DWARF does declare (a copy of it instantiated in a crate built
/// with full debug information), so that both are one function: a Rust symbol's demangled
/// path, hash left out, names one source function. The functions that take it: those known
/// only by their symbol ([`Function::rust_symbol`]: their copy was built without debug
/// information, a dependency's with `debug = false`), and those whose lines come from the line
/// table ([`Undeclared`]: line tables only), whose first line is that of their first code when
/// the source is not on disk to find the `fn` line. Left alone when DWARF gives that name two
/// different sources (two versions of one crate). `from`: which functions give their source:
/// those DWARF declares ([`Undeclared::No`]); or, in a second pass for the functions known by
/// their symbol only, those named by their symbols whose lines come from the line table
/// ([`Undeclared::Named`], after [`unify_named_spans`]).
fn adopt_sources(funcs: &mut [Resolved], from: Undeclared) {
    type Source = (Option<PathBuf>, Option<u32>, Option<u32>);
    let mut known: HashMap<(Option<String>, String), Option<Source>> = HashMap::new();
    for r in funcs.iter().filter(|r| r.lang == Lang::Rust) {
        let outer = r.outer.iter().zip(r.outer_undeclared.iter().copied().chain(std::iter::repeat(Undeclared::No)));
        for (f, _) in std::iter::once((&r.func, r.func_undeclared)).chain(outer).filter(|(f, u)| f.file.is_some() && *u == from) {
            let src = (f.file.clone(), f.first_line, f.last_line);
            known
                .entry((f.object.clone(), f.qualname.clone()))
                .and_modify(|k| {
                    if k.as_ref() != Some(&src) {
                        *k = None;
                    }
                })
                .or_insert(Some(src));
        }
    }
    if known.is_empty() {
        return;
    }
    for r in funcs.iter_mut() {
        let undeclared =
            std::iter::once(r.func_undeclared).chain(r.outer_undeclared.iter().copied().chain(std::iter::repeat(Undeclared::No)));
        for (f, u) in std::iter::once(&mut r.func).chain(r.outer.iter_mut()).zip(undeclared) {
            if !f.rust_symbol && (u == Undeclared::No || from != Undeclared::No) {
                continue;
            }
            if let Some(Some((file, first, last))) = known.get(&(f.object.clone(), f.qualname.clone())) {
                f.file = file.clone();
                f.first_line = *first;
                f.last_line = *last;
                f.rust_symbol = false;
            }
        }
    }
}

/// Give the copies of one Rust function that no DIE declares, named by their symbols (a full
/// path: [`Undeclared::Named`]) and in one file, one span: the smallest first line and the
/// largest last line among them. Each copy's lines are those of its own code (when the source
/// is not on disk to find its `fn` line), which differ between copies whose code differs
/// (`Option::default` for one type and another). Closures (`f::{{closure}}`, which legacy names
/// do not number) keep their own lines: there the lines tell two closures apart.
fn unify_named_spans(funcs: &mut [Resolved]) {
    type Name = (Option<String>, PathBuf, String);
    let mut spans: HashMap<Name, (u32, u32)> = HashMap::new();
    let named = |f: &Function, u: Undeclared| u == Undeclared::Named && !f.qualname.ends_with("{{closure}}");
    for r in funcs.iter().filter(|r| r.lang == Lang::Rust) {
        let undeclared =
            std::iter::once(r.func_undeclared).chain(r.outer_undeclared.iter().copied().chain(std::iter::repeat(Undeclared::No)));
        for (f, u) in std::iter::once(&r.func).chain(&r.outer).zip(undeclared) {
            let (Some(file), Some(a), Some(b)) = (&f.file, f.first_line, f.last_line) else { continue };
            if named(f, u) {
                let e = spans.entry((f.object.clone(), file.clone(), f.qualname.clone())).or_insert((a, b));
                *e = (e.0.min(a), e.1.max(b));
            }
        }
    }
    for r in funcs.iter_mut().filter(|r| r.lang == Lang::Rust) {
        let undeclared =
            std::iter::once(r.func_undeclared).chain(r.outer_undeclared.iter().copied().chain(std::iter::repeat(Undeclared::No)));
        for (f, u) in std::iter::once(&mut r.func).chain(r.outer.iter_mut()).zip(undeclared) {
            if !named(f, u) {
                continue;
            }
            let Some(file) = f.file.clone() else { continue };
            if let Some(&(a, b)) = spans.get(&(f.object.clone(), file, f.qualname.clone())) {
                f.first_line = Some(a);
                f.last_line = Some(b);
            }
        }
    }
}

/// What would show the source of an object without debug information, in one place for the
/// stderr warning and the prompt's note: a Rust program (its `main` is `<crate>::main`, the
/// crate named as the executable: cargo's convention; `has` tells whether a function of that
/// name is in the object) is told how cargo builds it with debug information, as `cargo
/// install` does not by default; any other object, its distribution's debug symbols (installed,
/// or fetched into the debuginfod cache) or a build with `-g`.
pub(crate) fn no_debug_fix(file: &str, has: impl Fn(&str) -> bool) -> &'static str {
    if has(&format!("{}::main", file.replace('-', "_"))) {
        "It is a Rust program: built with debug information it would show the source, for one installed by `cargo install` with \
         `CARGO_PROFILE_RELEASE_DEBUG=1 cargo install --force <its crate>` (or `debug = 1` under `[profile.release]` of the project that builds it)."
    } else {
        "Its debug symbols (a distribution's -dbgsym, -dbg or -debuginfo package, found under /usr/lib/debug/.build-id/, or fetched into the debuginfod cache with \
         `debuginfod-find debuginfo <the object>`), or a build with `-g`, would show the source."
    }
}

#[cfg(test)]
mod tests;
