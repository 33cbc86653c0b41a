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
//! `<hash>__mypyc`) the `.py` file beside it is scanned for its `def`s and `lambda`s
//! ([`scan`]), each is given the C names mypyc gives the code that runs its body
//! ([`name_map`]: the function itself; a nested function's callable class
//! `<name>_<outer functions>_obj.__call__`; a generator's or coroutine's
//! `..._gen.__mypyc_generator_helper__`, where its body runs; a lambda's
//! `__mypyc_lambda__<N>_<outer functions>_obj.__call__` where its scope has one lambda), and a
//! recorded `CPyDef_` function whose name is one of these becomes that Python function (its
//! file, span and qualified name; a generator's body is the same function as its def). A C
//! name two definitions would get (a function defined in both branches of an `if`, two
//! lambdas in one function) is refused: it keeps its C name. So are the methods of nested
//! classes, the glue methods mypyc writes for an override with another signature
//! (`..._glue`), class attribute defaults (`__mypyc_defaults_setup`) and constructors
//! (`CPyDef_<module>___<Class>`); the generator classes' `__next__`/`send`/`throw` and the
//! callable classes' `__get__` are plumbing ([`crate::native::paths::extension_plumbing`]).

use crate::symbols::{Function, Language};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use trace_format::meta::ExtensionsDoc;

mod scan;
pub use scan::{definitions, scan, Def, Lambda, Scan};

/// The end of the C name of a generator's body (its generator class's helper, which its
/// `__next__`, `send` and `throw` call), after `exported_name`.
pub const GENERATOR_BODY: &str = "_gen_____mypyc_generator_helper__";

/// The prefix of every compiled function's C name.
pub const DEF_PREFIX: &str = "CPyDef_";

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

/// mypyc's chain of function scopes (its `FuncInfo`s) down to the `def` at `path`: per
/// function, outermost first, its name and the class it is a method of. `None` for a `def`
/// mypyc does not compile as a function of the module: in a nested class, or in a class
/// inside a function.
fn fn_chain(path: &[(String, bool)]) -> Option<Vec<(&str, Option<&str>)>> {
    let mut out = Vec::new();
    let mut class = None;
    for (i, (name, is_class)) in path.iter().enumerate() {
        if *is_class {
            if i > 0 {
                return None;
            }
            class = Some(name.as_str());
        } else {
            out.push((name.as_str(), class.take()));
        }
    }
    (!out.is_empty() && class.is_none()).then_some(out)
}

/// mypyc's namespace of a function nested in the functions of `chain` (`gen_func_ns`):
/// each function's name, `_` and its class for a method, joined by `_`.
fn namespace(chain: &[(&str, Option<&str>)]) -> String {
    let parts: Vec<String> = chain.iter().map(|(n, c)| c.map_or_else(|| n.to_string(), |c| format!("{n}_{c}"))).collect();
    parts.join("_")
}

/// mypyc's `FuncInfo.namespaced_name` of the last function of `chain`: its name, its class
/// and the namespace of the functions around it, the non-empty ones joined by `_`
/// (`_rhs_transform_line` for `transform_line.<locals>._rhs`, `visit_default_LineGenerator`).
/// Its callable class is that + `_obj` (`setup_callable_class`), its generator class that +
/// `_gen` (`setup_generator_class`), its environment class that + `_env`.
fn namespaced_name(chain: &[(&str, Option<&str>)]) -> String {
    let Some(((name, class), outer)) = chain.split_last() else { return String::new() };
    let ns = namespace(outer);
    [*name, class.unwrap_or(""), ns.as_str()].iter().filter(|s| !s.is_empty()).copied().collect::<Vec<_>>().join("_")
}

/// The stand-in for a lambda's number in the C names [`name_map`] gives lambdas (a C name
/// has no `#`): mypyc numbers a module's lambdas in the order it compiles them
/// (`__mypyc_lambda__0`, ...), which the text alone does not pin; [`lookup_key`] puts it in
/// place of a recorded name's number.
const LAMBDA_NUMBER: &str = "#";
const LAMBDA_NAME: &str = "__mypyc_lambda__";

/// The key of a recorded C name in a [`name_map`]: the name, with a lambda's number (the
/// digits after `__mypyc_lambda__`) as [`LAMBDA_NUMBER`]. `None` for a name with lambdas
/// in lambdas (not mapped).
pub fn lookup_key(cname: &str) -> Option<std::borrow::Cow<'_, str>> {
    let Some(at) = cname.find(LAMBDA_NAME) else { return Some(cname.into()) };
    let rest = &cname[at + LAMBDA_NAME.len()..];
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 || rest[digits..].contains(LAMBDA_NAME) {
        return None;
    }
    Some(format!("{}{LAMBDA_NUMBER}{}", &cname[..at + LAMBDA_NAME.len()], &rest[digits..]).into())
}

/// C name (a [`lookup_key`]) to Python function for the modules of one group (`None`: two
/// definitions would get that name; refused). `read`: the lines of a `.py` file, if it can
/// be read. Per `def`, the names mypyc gives the code that runs its body:
/// - a top-level function or a method of a top-level class: `CPyDef_` + `exported_name` of
///   its module prefix and short name;
/// - a nested function, or a method of a class mypyc does not compile as an extension class
///   (an `Enum`'s): its callable class's `__call__`, `<namespaced name>_obj.__call__`;
/// - a generator or coroutine: its generator class's `__mypyc_generator_helper__` (what
///   `__next__`, `send` and `throw` run: the body), `<namespaced name>_gen.__mypyc_generator_helper__`,
///   besides the function above that only makes the generator;
/// - a lambda: `__mypyc_lambda__<N>_<namespace>_obj.__call__`, where `N` numbers the
///   module's lambdas; mapped only where its scope has one lambda (the text does not say
///   which number mypyc gave which of several).
pub fn name_map(group: &[Module], read: &mut dyn FnMut(&Path) -> Option<Vec<String>>) -> HashMap<String, Option<Target>> {
    let names: Vec<&str> = group.iter().map(|m| m.name.as_str()).collect();
    let prefixes = module_prefixes(&names);
    let mut out: HashMap<String, Option<Target>> = HashMap::new();
    let mut add = |short: &str, prefix: &str, target: Target| {
        let cname = format!("{DEF_PREFIX}{}", exported_name(&format!("{prefix}{short}")));
        match out.get(&cname) {
            None => out.insert(cname, Some(target)),
            Some(_) => out.insert(cname, None),
        };
    };
    for m in group {
        let Some(prefix) = prefixes.get(&m.name) else { continue };
        let Some(lines) = read(&m.source) else { continue };
        let found = scan(&lines);
        for d in &found.defs {
            if d.overload {
                continue;
            }
            let target = Target {
                file: m.source.clone(),
                name: d.path.last().map(|p| p.0.clone()).unwrap_or_default(),
                qualname: d.qualname(),
                first_line: d.first_line,
                last_line: d.last_line,
            };
            if let Some(short) = d.mypyc_short_name() {
                add(&short, prefix, target.clone());
            }
            let Some(chain) = fn_chain(&d.path) else { continue };
            if d.setter {
                continue;
            }
            let name = namespaced_name(&chain);
            if chain.len() > 1 || chain[0].1.is_some() {
                add(&format!("{name}_obj.__call__"), prefix, target.clone());
            }
            if d.generator {
                add(&format!("{name}_gen.__mypyc_generator_helper__"), prefix, target);
            }
        }
        // Lambdas, per scope: mapped where the scope has one.
        let mut per_scope: HashMap<Option<usize>, Vec<&Lambda>> = HashMap::new();
        for l in &found.lambdas {
            per_scope.entry(l.scope).or_default().push(l);
        }
        for (scope, ls) in per_scope {
            let def = scope.and_then(|i| found.defs.get(i));
            let ns = match def {
                Some(d) => match fn_chain(&d.path) {
                    Some(chain) => namespace(&chain),
                    None => continue,
                },
                None => String::new(),
            };
            let short = if ns.is_empty() {
                format!("{LAMBDA_NAME}{LAMBDA_NUMBER}_obj.__call__")
            } else {
                format!("{LAMBDA_NAME}{LAMBDA_NUMBER}_{ns}_obj.__call__")
            };
            let target = |l: &Lambda| Target {
                file: m.source.clone(),
                name: "<lambda>".into(),
                qualname: scan::lambda_qualname(def),
                first_line: l.first_line,
                last_line: l.last_line,
            };
            for l in ls {
                add(&short, prefix, target(l));
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
/// `object` is the runtime module that ran it ([`ran_compiled`]). Returns how many were mapped
/// and the indices of those that are generators' bodies (each call of one resumes the
/// generator its def made: [`GENERATOR_BODY`]).
pub fn map_functions(funcs: &mut [Function], doc: &ExtensionsDoc) -> (usize, Vec<u32>) {
    if !funcs.iter().any(|f| f.language == Language::Native && f.qualname.starts_with(DEF_PREFIX)) {
        return (0, Vec::new());
    }
    let mut read = |p: &Path| {
        crate::source::read_regular_file(p, crate::source::MAX_SOURCE_BYTES)
            .ok()
            .map(|b| String::from_utf8_lossy(&b).lines().map(|l| l.trim_end_matches('\r').to_string()).collect())
    };
    let mut mapped = 0;
    let mut bodies = Vec::new();
    for (runtime_file, group) in groups(doc) {
        let map = name_map(&group, &mut read);
        for (i, f) in funcs.iter_mut().enumerate() {
            if f.language != Language::Native || f.object.as_deref() != Some(runtime_file.as_str()) {
                continue;
            }
            let Some(Some(t)) = lookup_key(&f.qualname).and_then(|k| map.get(k.as_ref())) else { continue };
            if f.qualname.ends_with(GENERATOR_BODY) {
                bodies.push(i as u32);
            }
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
                program_crate: false,
                dependency_crate: false,
                std_dependency: false,
                rust_symbol: false,
                made_in: None,
                inlined: false,
            };
            mapped += 1;
        }
    }
    (mapped, bodies)
}

#[cfg(test)]
mod tests;
