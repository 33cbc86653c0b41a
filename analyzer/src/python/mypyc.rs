//! mypyc's compiled functions mapped back to the Python functions they were compiled from.
//!
//! mypyc names the C function of a compiled Python function `CPyDef_` + its `exported_name`
//! (`mypyc/namegen.py`): the function's module prefix and its short name (`func`, or
//! `Class.method` for a method of a top-level class) joined, `___` first replaced by
//! `___3_`, then every `.` by `___` (`CPyDef_linegen___LineGenerator___visit_default`). The
//! module prefix is the shortest suffix of the module's dotted name that no other module of
//! its compilation group ends with (`make_module_translation_map`: `linegen.` for
//! `black.linegen` when no other compiled module is called `linegen`; empty when the group
//! has one module).
//!
//! The mapping goes forward, so that nothing is guessed from a C name: for every compiled
//! module of the group (the modules whose shims import the group's runtime module
//! `<hash>__mypyc`) the `.py` file beside it is scanned for its top-level functions and the
//! methods of its top-level classes ([`definitions`]), each is given the C name mypyc gives
//! it, and a recorded `CPyDef_` function whose name is one of these becomes that Python
//! function (its file, span and `Class.method` name). A C name two definitions would get
//! (a function defined in both branches of an `if`) is refused: it keeps
//! its C name. Nested functions (mypyc's callable classes `..._obj`), generators' bodies
//! (`..._gen_____mypyc_generator_helper__`), lambdas (`__mypyc_lambda__N`) and every other
//! `__mypyc_` helper are not mapped either.

use crate::source::{block_end, indent, logical_starts, FileText};
use crate::symbols::{Function, Language};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use trace_format::meta::ExtensionsDoc;

/// The prefix of every compiled function's C name.
pub const DEF_PREFIX: &str = "CPyDef_";

/// A `def` (or `async def`) in a Python file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Def {
    /// The names of the classes and functions it is nested in, outermost first, then its own;
    /// each with whether it is a class.
    pub path: Vec<(String, bool)>,
    /// Its first line (its first decorator's), 1-based.
    pub first_line: u32,
    /// Its last line, 1-based.
    pub last_line: u32,
    /// Decorated with `@overload` / `@typing.overload` (a stub, not what runs).
    pub overload: bool,
    /// Its first decorator is `@<name>.setter`: a property's setter, which mypyc names
    /// `__mypyc_setter__<name>` (its getter keeps the name).
    pub setter: bool,
}

impl Def {
    /// The short name mypyc gives it (`func`, `Class.method`), if mypyc compiles it as a
    /// function of its own: a top-level function or a method of a top-level class.
    pub fn mypyc_short_name(&self) -> Option<String> {
        match self.path.as_slice() {
            [(f, false)] => Some(f.clone()),
            [(c, true), (m, false)] if self.setter => Some(format!("{c}.__mypyc_setter__{m}")),
            [(c, true), (m, false)] => Some(format!("{c}.{m}")),
            _ => None,
        }
    }

    /// Its Python qualified name (`Class.method`, `outer.<locals>.inner`).
    pub fn qualname(&self) -> String {
        let mut out = String::new();
        for (i, (name, _)) in self.path.iter().enumerate() {
            if i > 0 {
                let outer_is_function = !self.path[i - 1].1;
                out.push_str(if outer_is_function { ".<locals>." } else { "." });
            }
            out.push_str(name);
        }
        out
    }
}

/// The identifier after `def `/`async def `/`class ` at the start of `s` (trimmed), with
/// whether it is a class.
fn header_name(s: &str) -> Option<(String, bool)> {
    let (rest, class) = if let Some(r) = s.strip_prefix("def ") {
        (r, false)
    } else if let Some(r) = s.strip_prefix("async def ") {
        (r, false)
    } else if let Some(r) = s.strip_prefix("class ") {
        (r, true)
    } else {
        return None;
    };
    let name: String = rest.trim_start().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
    (!name.is_empty()).then_some((name, class))
}

/// Every `def` of a Python file, with the classes and functions it is nested in, found by
/// indentation over logical lines (a multi-line signature, a string or brackets spanning
/// lines do not count as lines of their own), its decorators included in its span.
pub fn definitions(lines: &[String]) -> Vec<Def> {
    let text = FileText { lines: lines.to_vec(), logical_start: logical_starts(lines) };
    let mut out = Vec::new();
    // (indentation, name, is a class)
    let mut stack: Vec<(usize, String, bool)> = Vec::new();
    // The first line of the decorators above the next header, whether one is `overload`, and
    // whether the first is `<name>.setter`.
    let mut decorated: Option<(usize, bool, bool)> = None;
    for (i, line) in text.lines.iter().enumerate() {
        let s = line.trim_start();
        if !text.logical_start[i] || s.is_empty() || s.starts_with('#') {
            continue;
        }
        let ind = indent(line);
        while stack.last().is_some_and(|(d, _, _)| *d >= ind) {
            stack.pop();
        }
        if let Some(d) = s.strip_prefix('@') {
            let name = d.split(['(', ' ']).next().unwrap_or("").trim();
            let overload = name == "overload" || name.ends_with(".overload");
            let (first, any, setter) = decorated.unwrap_or((i, false, name.ends_with(".setter")));
            decorated = Some((first, any || overload, setter));
            continue;
        }
        let Some((name, class)) = header_name(s) else {
            decorated = None;
            continue;
        };
        let (first, overload, setter) = decorated.take().unwrap_or((i, false, false));
        if !class {
            let end = block_end(&text, i, ind, i + 1);
            let mut path: Vec<(String, bool)> = stack.iter().map(|(_, n, c)| (n.clone(), *c)).collect();
            path.push((name.clone(), false));
            out.push(Def { path, first_line: first as u32 + 1, last_line: end as u32, overload, setter });
        }
        stack.push((ind, name, class));
    }
    out
}

/// mypyc's `exported_name`: `___` to `___3_`, then `.` to `___`.
pub fn exported_name(fullname: &str) -> String {
    fullname.replace("___", "___3_").replace('.', "___")
}

/// mypyc's `make_module_translation_map`: each module's prefix, the shortest suffix of its
/// dotted name (with a trailing `.`, or empty) that no other module of the group has.
pub fn module_prefixes(modules: &[&str]) -> HashMap<String, String> {
    fn candidates(m: &str) -> Vec<String> {
        let parts: Vec<&str> = m.split('.').collect();
        let mut out = vec![String::new()];
        for i in 0..parts.len() {
            out.push(format!("{}.", parts[parts.len() - 1 - i..].join(".")));
        }
        out
    }
    let mut count: HashMap<String, usize> = HashMap::new();
    for m in modules {
        for c in candidates(m) {
            *count.entry(c).or_default() += 1;
        }
    }
    let mut out = HashMap::new();
    for m in modules {
        if let Some(c) = candidates(m).into_iter().find(|c| count.get(c) == Some(&1)) {
            out.insert(m.to_string(), c);
        }
    }
    out
}

/// A compiled module of a mypyc group: its dotted name and the `.py` file beside it.
#[derive(Debug, Clone)]
pub struct Module {
    pub name: String,
    pub source: PathBuf,
}

/// The Python function a C name was compiled from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub file: PathBuf,
    pub name: String,
    pub qualname: String,
    pub first_line: u32,
    pub last_line: u32,
}

/// C name to Python function for the modules of one group (`None`: two definitions would get
/// that name; refused). `read`: the lines of a `.py` file, if it can be read.
pub fn name_map(group: &[Module], read: &mut dyn FnMut(&Path) -> Option<Vec<String>>) -> HashMap<String, Option<Target>> {
    let names: Vec<&str> = group.iter().map(|m| m.name.as_str()).collect();
    let prefixes = module_prefixes(&names);
    let mut out: HashMap<String, Option<Target>> = HashMap::new();
    for m in group {
        let Some(prefix) = prefixes.get(&m.name) else { continue };
        let Some(lines) = read(&m.source) else { continue };
        for d in definitions(&lines) {
            let Some(short) = d.mypyc_short_name() else { continue };
            if d.overload {
                continue;
            }
            let cname = format!("{DEF_PREFIX}{}", exported_name(&format!("{prefix}{short}")));
            let target = Target {
                file: m.source.clone(),
                name: d.path.last().map(|p| p.0.clone()).unwrap_or_default(),
                qualname: d.qualname(),
                first_line: d.first_line,
                last_line: d.last_line,
            };
            match out.get(&cname) {
                None => {
                    out.insert(cname, Some(target));
                }
                Some(_) => {
                    out.insert(cname, None);
                }
            }
        }
    }
    out
}

/// Whether `f` is a Python function that ran compiled (mapped by [`map_functions`]): it has a
/// file and, unlike a Python function the interpreter ran, an object.
pub fn ran_compiled(f: &Function) -> bool {
    f.language == Language::Python && f.object.is_some()
}

/// The stem of an extension module's file name (`linegen` of `linegen.cpython-311-...so`).
fn stem(file: &str) -> &str {
    let name = file.rsplit('/').next().unwrap_or(file);
    name.split('.').next().unwrap_or(name)
}

/// The modules of the group of the runtime module at `runtime_file` as its distribution's
/// `RECORD` lists them: every extension module it installed whose shim names the runtime
/// (`None` when no `.dist-info` beside it lists the runtime). A module the process did not
/// import still counts: it shaped the other modules' prefixes.
fn recorded_group(runtime_file: &str, runtime: &str) -> Option<Vec<Module>> {
    let (install, runtime_name) = runtime_file.rsplit_once('/')?;
    for e in std::fs::read_dir(install).ok()?.flatten().take(10_000) {
        if !e.file_name().to_string_lossy().ends_with(".dist-info") {
            continue;
        }
        let Ok(record) = crate::source::read_regular_file(&e.path().join("RECORD"), 16 << 20) else { continue };
        let record = String::from_utf8_lossy(&record);
        let paths: Vec<&str> = record.lines().filter_map(|l| l.split(',').next()).collect();
        if !paths.contains(&runtime_name) {
            continue;
        }
        let mut modules = Vec::new();
        for rel in paths {
            if rel == runtime_name || rel.starts_with('/') || rel.contains("..") || !trace_format::patching::is_extension_module(rel) {
                continue;
            }
            let file = format!("{install}/{rel}");
            if !super::compiled::imports_any(&file, &[runtime]) {
                continue;
            }
            let (dir, _) = rel.rsplit_once('/').unwrap_or(("", rel));
            let stem = stem(rel);
            let mut name = dir.replace('/', ".");
            if stem != "__init__" {
                if !name.is_empty() {
                    name.push('.');
                }
                name.push_str(stem);
            }
            if name.is_empty() {
                continue;
            }
            let source = Path::new(install).join(if dir.is_empty() { format!("{stem}.py") } else { format!("{dir}/{stem}.py") });
            modules.push(Module { name, source });
        }
        return Some(modules);
    }
    None
}

/// The mypyc groups of a process's extension modules: per runtime module (`<hash>__mypyc`),
/// its file and the compiled modules of its group, with the `.py` beside each: as its
/// distribution's `RECORD` lists them, else the imported modules whose shims name it.
pub fn groups(doc: &ExtensionsDoc) -> Vec<(String, Vec<Module>)> {
    let runtimes: Vec<(&str, &str)> = doc
        .modules
        .iter()
        .filter(|m| !m.module.contains('.') && m.module.ends_with("__mypyc"))
        .map(|m| (m.module.as_str(), m.file.as_str()))
        .collect();
    let mut out = Vec::new();
    for (runtime, runtime_file) in runtimes {
        if let Some(modules) = recorded_group(runtime_file, runtime) {
            out.push((runtime_file.to_string(), modules));
            continue;
        }
        let mut modules = Vec::new();
        for m in &doc.modules {
            if m.module == runtime || !m.file.starts_with('/') {
                continue;
            }
            let Some((dir, _)) = m.file.rsplit_once('/') else { continue };
            let source = Path::new(dir).join(format!("{}.py", stem(&m.file)));
            if super::compiled::imports_any(&m.file, &[runtime]) {
                modules.push(Module { name: m.module.clone(), source });
            }
        }
        out.push((runtime_file.to_string(), modules));
    }
    out
}

/// Give the recorded mypyc functions of `funcs` their Python function, where the mapping is
/// unambiguous (see the module's documentation): a [`Language::Python`] function whose
/// `object` is the runtime module that ran it ([`ran_compiled`]). Returns how many were mapped.
pub fn map_functions(funcs: &mut [Function], doc: &ExtensionsDoc) -> usize {
    if !funcs.iter().any(|f| f.language == Language::Native && f.qualname.starts_with(DEF_PREFIX)) {
        return 0;
    }
    let mut read = |p: &Path| {
        crate::source::read_regular_file(p, crate::source::MAX_SOURCE_BYTES)
            .ok()
            .map(|b| String::from_utf8_lossy(&b).lines().map(|l| l.trim_end_matches('\r').to_string()).collect())
    };
    let mut mapped = 0;
    for (runtime_file, group) in groups(doc) {
        let map = name_map(&group, &mut read);
        for f in funcs.iter_mut() {
            if f.language != Language::Native || f.object.as_deref() != Some(runtime_file.as_str()) {
                continue;
            }
            let Some(Some(t)) = map.get(&f.qualname) else { continue };
            *f = Function {
                language: Language::Python,
                name: t.name.clone(),
                qualname: t.qualname.clone(),
                file: Some(t.file.clone()),
                first_line: Some(t.first_line),
                last_line: Some(t.last_line),
                // Still the runtime module's code: the file is what it was compiled from.
                object: Some(runtime_file.clone()),
                program_library: false,
                inlined: false,
            };
            mapped += 1;
        }
    }
    mapped
}

#[cfg(test)]
mod tests;
