//! Turning a process's function table (`funcs.jsonl`) into [`Function`]s the rest of the
//! analyzer works with: Python code objects directly, native addresses through DWARF
//! ([`crate::native::resolve`]).

use crate::native::paths::{package_repository, registry_package_dir, same_repository};
use std::path::{Path, PathBuf};
use trace_format::{FuncKind, Process};

/// What kind of code a function is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Language {
    Python,
    /// A C function called from Python (`--c-calls`).
    Builtin,
    Native,
}

/// A function as the analyzer sees it: a display name and where its source is.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Function {
    pub language: Language,
    /// Short name: `co_name`, or the native function's name without its scope.
    pub name: String,
    /// Qualified name: `co_qualname` (`Class.method`, `outer.<locals>.inner`), or the
    /// demangled native name (`ns::Class::method(int)`).
    pub qualname: String,
    /// Source file, when known.
    pub file: Option<PathBuf>,
    /// First line of the function's source (decorators included), when known.
    pub first_line: Option<u32>,
    /// Last line of the function's source, when known.
    pub last_line: Option<u32>,
    /// The native object (executable or shared library) or Python module it belongs to; for
    /// a Python function that ran compiled (mypyc, shown with the source it was compiled
    /// from: [`crate::python::mypyc`]), the extension module that ran it.
    pub object: Option<String>,
    /// Native: `object` is a library of the program's own though installed among the system's
    /// (named after the process's executable, as Debian's `jq` and `libjq.so.1`:
    /// `trace_format::objects`, the rule the shim patched it by), so its functions are the
    /// program's code.
    pub program_library: bool,
    /// Native: its source is in the cargo package (registry, git checkout or vendored
    /// directory) that holds the program's own `main`, as when `cargo install` builds a
    /// program from cargo's registry: the program's code, not a dependency's
    /// ([`crate::native::paths::program_crate_root`]); or, without a source file, in the
    /// program's executable, its demangled name is of the crate of the program's `main`
    /// ([`crate::native::paths::rust_name_origin`]).
    pub program_crate: bool,
    /// Native, without a source file, in a Rust program's executable: its demangled name is of
    /// a crate neither the program's nor the standard library's, a dependency's
    /// ([`crate::native::paths::rust_name_origin`]): shown as installed packages are.
    pub dependency_crate: bool,
    /// Native, without a source file, in an object whose debug information describes other
    /// functions: its demangled name is of a crate the Rust standard library links for its
    /// own use (`miniz_oxide`, `gimli`, `addr2line`: what a panic's backtrace runs), which the
    /// standard library's build leaves without debug information. The standard library's
    /// code ([`crate::native::paths::STD_OWN_DEPENDENCIES`]).
    pub std_dependency: bool,
    /// Native, without a source file: named by a Rust-mangled symbol (legacy or v0), whose
    /// demangled path, hash left out, names one source function: the copies rustc makes of it
    /// (generic instances) are one function in the tree ([`crate::fold::fold_classes`]), as
    /// they are with a source file ([`crate::native::resolve`]).
    pub rust_symbol: bool,
    /// Native code the compiler inlined into its caller, shown where an inline probe saw it
    /// run (docs/native-recording.md, "Inlined functions"): it ran inside the function above
    /// it in the tree, without a call.
    pub inlined: bool,
    /// Python code compiled from a string (file `<string>`): the file of the code that ran
    /// it with `exec`/`eval`, as recorded (`funcs.jsonl`'s `made_in`): whose code it is
    /// ([`crate::python::paths::made_by_stdlib`]).
    pub made_in: Option<String>,
}

impl Function {
    /// Placeholder for an id with no record in the function table (the process died while
    /// writing it).
    pub fn unknown(id: u32) -> Function {
        Function {
            language: Language::Native,
            name: format!("<unknown #{id}>"),
            qualname: format!("<unknown #{id}>"),
            file: None,
            first_line: None,
            last_line: None,
            object: None,
            program_library: false,
            program_crate: false,
            dependency_crate: false,
            std_dependency: false,
            rust_symbol: false,
            made_in: None,
            inlined: false,
        }
    }

    /// Whether its [`Function::key`] starts with `<` (code without a real file: `<string>`,
    /// `<frozen ...>`), without formatting the key.
    pub fn key_is_bracketed(&self) -> bool {
        match &self.file {
            // (`<` is ASCII: the path's display starts with it exactly when its bytes do.)
            Some(f) => f.as_os_str().as_encoded_bytes().first() == Some(&b'<'),
            None => self.object.as_deref().unwrap_or("").starts_with('<'),
        }
    }

    /// A key identifying the same function across processes and traces.
    pub fn key(&self) -> String {
        match &self.file {
            Some(f) => format!("{}:{}:{}", f.display(), self.first_line.unwrap_or(0), self.qualname),
            None => format!("{}:{}", self.object.as_deref().unwrap_or(""), self.qualname),
        }
    }
}

/// A function of one analysis: an index into the [`Interner`] the traces of that analysis are
/// read with (one for all the traces a command reads, so that the same function in two runs, or
/// in two processes of one run, has the same id: [`crate::calltree::CallTree::func_id`]), or
/// into a prompt's [`crate::prompt::Funcs`], which numbers the functions a prompt shows densely
/// in the order it meets them. Everything between the reader and the renderers compares and
/// stores these; the [`Function::key`] string is formatted once per function, when it is
/// interned, and names are formatted at output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FuncId(pub u32);

impl FuncId {
    /// No function: the root of a tree, or a tree whose functions were never interned.
    pub const NONE: FuncId = FuncId(u32::MAX);

    /// The id as an index into its table.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// The one function interner of an analysis: every function of every process of every trace
/// it reads gets its [`FuncId`] here, by [`Function::key`] (formatted once per function of a
/// process table, when it is interned). Created where traces are read
/// ([`crate::analysis::prepare`], [`crate::fold::load_trace`]'s callers); the views and the
/// prompt compare these ids, never key strings.
#[derive(Debug, Default)]
pub struct Interner {
    keys: Vec<std::sync::Arc<str>>,
    by_key: rustc_hash::FxHashMap<std::sync::Arc<str>, FuncId>,
}

impl Interner {
    /// The id of `f`: the id of the function with its key if there is one, else a new id.
    pub fn intern(&mut self, f: &Function) -> FuncId {
        let key = f.key();
        if let Some(&id) = self.by_key.get(key.as_str()) {
            return id;
        }
        let id = FuncId(self.keys.len() as u32);
        let key: std::sync::Arc<str> = key.into();
        self.by_key.insert(key.clone(), id);
        self.keys.push(key);
        id
    }

    /// The ids of a process's function table, index by index, followed by those of
    /// `unknown` placeholders ([`Function::unknown`]) for the indices past the table up to
    /// `len` (a stream naming a record that was lost).
    pub fn intern_table(&mut self, funcs: &[Function], len: usize) -> Vec<FuncId> {
        let mut ids: Vec<FuncId> = funcs.iter().map(|f| self.intern(f)).collect();
        for i in funcs.len()..len {
            ids.push(self.intern(&Function::unknown(i as u32)));
        }
        ids
    }

    /// The [`Function::key`] of an id interned here.
    pub fn key(&self, id: FuncId) -> Option<&str> {
        self.keys.get(id.index()).map(|k| &**k)
    }

    /// The id of the function with this key, if one was interned.
    pub fn id(&self, key: &str) -> Option<FuncId> {
        self.by_key.get(key).copied()
    }

    /// [`Interner::key`], shared: a prompt's function keeps the interner's string.
    pub fn shared_key(&self, id: FuncId) -> Option<std::sync::Arc<str>> {
        self.keys.get(id.index()).cloned()
    }

    /// Number of functions interned.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

/// Warnings produced while resolving functions (missing debug info, ...), for stderr.
pub type Warnings = Vec<String>;

/// Resolve every function of a process, by its recorded id (ids without a record resolve to
/// a placeholder named `<unknown #id>`): a vector as long as the table's largest id, for a look
/// at a small trace (tests); an analysis uses [`resolve_process_with_inlined`], whose table holds
/// only the functions that ran.
pub fn resolve_process(proc: &Process) -> (Vec<Function>, Warnings) {
    let r = resolve_process_with_inlined(proc);
    // As long as the table's largest id (bounded by the file's size): a streamed id past it
    // has no entry, whatever it says.
    let len = proc.funcs.iter().map(|f| f.id as usize + 1).max().unwrap_or(0);
    let mut funcs: Vec<Function> = (0..len as u32).map(Function::unknown).collect();
    for (&id, &dense) in r.ids.iter().take_while(|(&id, _)| (id as usize) < len) {
        if let (Some(slot), Some(f)) = (funcs.get_mut(id as usize), r.funcs.get(dense as usize)) {
            *slot = f.clone();
        }
    }
    (funcs, r.warnings)
}

/// A process's functions, with the inlined functions its inline probes saw run.
#[derive(Debug, Default)]
pub struct ResolvedProcess {
    /// The functions of the process's thread streams and of its kept records, numbered densely
    /// in the order of their recorded ids (`ids`); past them, the inlined functions around the
    /// innermost one at each probe's address (see `chains`).
    pub funcs: Vec<Function>,
    /// Recorded function id (`funcs.jsonl`, the streams' events) to index into `funcs`: the
    /// one place ids are renumbered; [`ResolvedProcess::index`] applies it to events.
    pub ids: std::collections::BTreeMap<u32, u32>,
    /// For an inline probe (by its index into `funcs`): the indices of the inlined functions
    /// around it, outermost first. The fold opens them before the probe's own call and closes
    /// them after its return, so that `f → (inlined) run → (inlined) parse` shows every level
    /// that ran.
    pub chains: std::collections::HashMap<u32, Vec<u32>>,
    /// (caller, callee) (indices into `funcs`) whose every direct call site lies in the same
    /// inlined code of the caller ([`crate::native::callsites`]): the index of the innermost
    /// inlined function there, whose chain (`chains`) the fold opens around each call of the
    /// callee made while the caller is the innermost open frame.
    pub wraps: std::collections::HashMap<(u32, u32), u32>,
    /// Indices into `funcs` whose calls resume a frame rather than call (mypyc's generator
    /// bodies, the same function as the def that made the generator): folded as resumes.
    pub resumed: std::collections::HashSet<u32>,
    pub warnings: Warnings,
}

impl ResolvedProcess {
    /// The index into [`ResolvedProcess::funcs`] of recorded id `id`. Every id of the streams
    /// has one; an id outside them (a stream that changed since it was opened, or a process
    /// not opened with `FuncTables::Used`) gets `u32::MAX`, which the fold reports as damage
    /// (an id far beyond the function table), as it did any id past the table before.
    pub fn index(&self, id: u32) -> u32 {
        self.ids.get(&id).copied().unwrap_or(u32::MAX)
    }

    /// `ev` with its function id renumbered by [`ResolvedProcess::index`].
    pub fn renumber(&self, ev: trace_format::Event) -> trace_format::Event {
        use trace_format::Event;
        match ev {
            Event::Call { func, ts } if self.resumed.contains(&self.index(func)) => Event::Resume { func: self.index(func), ts },
            Event::Call { func, ts } => Event::Call { func: self.index(func), ts },
            Event::Resume { func, ts } => Event::Resume { func: self.index(func), ts },
            Event::Line { func, line } => Event::Line { func: self.index(func), line },
            other => other,
        }
    }
}

/// [`resolve_process`], renumbered, with the chains of inlined functions (see
/// [`ResolvedProcess`]). Resolves the ids the streams name and the kept records' ids, so a
/// process opened with [`trace_format::reader::FuncTables::Used`] costs what ran.
pub fn resolve_process_with_inlined(proc: &Process) -> ResolvedProcess {
    let mut warnings = Vec::new();
    if proc.func_count == 0 && !proc.threads.is_empty() {
        let path = proc.dir.join(trace_format::FUNCS_FILE);
        let what = if path.exists() { "is empty" } else { "is missing" };
        warnings.push(format!(
            "{}: the function table {what}: every function of process {} shows as <unknown #id>; the trace is damaged, record it again",
            path.display(),
            proc.meta.pid
        ));
    }
    let mut ids = std::collections::BTreeMap::new();
    for id in proc.stream_ids.iter().copied().chain(proc.funcs.iter().map(|r| r.id)) {
        ids.insert(id, 0u32);
    }
    let mut out: Vec<Function> = Vec::with_capacity(ids.len());
    let mut native = Vec::new();
    let mut chains = std::collections::HashMap::new();
    let mut wraps = std::collections::HashMap::new();
    let mut resumed = std::collections::HashSet::new();
    for (&id, dense) in ids.iter_mut() {
        *dense = out.len() as u32;
        let f = match proc.funcs.get(id).map(|r| &r.kind) {
            Some(FuncKind::Python { file, qualname, name, first_line, last_line, made_in, .. }) => Function {
                language: Language::Python,
                name: name.clone(),
                qualname: qualname.clone(),
                file: Some(PathBuf::from(file)),
                first_line: Some(*first_line),
                last_line: Some(*last_line),
                object: None,
                program_library: false,
                program_crate: false,
                dependency_crate: false,
                std_dependency: false,
                rust_symbol: false,
                made_in: made_in.clone(),
                inlined: false,
            },
            Some(FuncKind::Builtin { module, qualname }) => Function {
                language: Language::Builtin,
                name: qualname.rsplit('.').next().unwrap_or(qualname).to_string(),
                qualname: qualname.clone(),
                file: None,
                first_line: None,
                last_line: None,
                object: module.clone(),
                program_library: false,
                program_crate: false,
                dependency_crate: false,
                std_dependency: false,
                rust_symbol: false,
                made_in: None,
                inlined: false,
            },
            Some(FuncKind::Native { addr, module, base, symbol, inlined }) => {
                native.push(crate::native::resolve::NativeAddr {
                    id: *dense,
                    addr: *addr,
                    module: module.clone(),
                    base: *base,
                    symbol: symbol.clone(),
                    inlined: *inlined,
                });
                Function::unknown(id)
            }
            None => Function::unknown(id),
        };
        out.push(f);
    }
    if !native.is_empty() {
        // The fingerprints of the objects that ran are in the trace directory's sources.json.
        let recorded = proc.dir.parent().and_then(crate::source::SourceCache::read_sources_doc);
        // The call sites between the recorded functions, resolved with them (the same
        // rules make the same functions of the inlined code there as of a probe's).
        let sites = crate::native::callsites::find(&native);
        let with_sites: Vec<_> = native.iter().chain(&sites.addrs).cloned().collect();
        let (mut resolved, w) = crate::native::resolve::resolve_chains(&with_sites, recorded.as_ref());
        warnings.extend(w);
        let at_sites = resolved.split_off(native.len());
        let exe = proc.meta.exe.as_str();
        let own = |f: &mut Function| {
            f.program_library = f.object.as_deref().is_some_and(|o| o != exe && trace_format::objects::own_library(exe, o));
        };
        let push_chain = |out: &mut Vec<Function>, outer: Vec<Function>| -> Vec<u32> {
            outer
                .into_iter()
                .map(|mut g| {
                    own(&mut g);
                    out.push(g);
                    (out.len() - 1) as u32
                })
                .collect()
        };
        for (a, (mut f, mut outer)) in native.iter().zip(resolved) {
            own(&mut f);
            out[a.id as usize] = f;
            outer.retain(crate::native::callsites::shown_level);
            if !outer.is_empty() {
                chains.insert(a.id, push_chain(&mut out, outer));
            }
        }
        // (Marked first: the program's own libraries are not the system's to `wraps`.)
        let at_sites: Vec<_> = at_sites
            .into_iter()
            .map(|(mut f, mut outer)| {
                own(&mut f);
                outer.iter_mut().for_each(own);
                (f, outer)
            })
            .collect();
        for (pair, (f, outer)) in crate::native::callsites::wraps(&sites.pairs, at_sites, &out, &sites.taken) {
            let outer = push_chain(&mut out, outer);
            let inner = push_chain(&mut out, vec![f])[0];
            if !outer.is_empty() {
                chains.insert(inner, outer);
            }
            wraps.insert(pair, inner);
        }
        mark_program_crate(&mut out, exe);
        // mypyc's compiled functions (`trace run --native-ext`) as the Python functions they
        // were compiled from, where the process's extension modules say which those are.
        // A generator's body is the function its def is (folded as one: `fold_classes`), and
        // each call of it resumes the generator the def made.
        if let Ok(Some(doc)) = proc.extensions() {
            resumed.extend(crate::python::mypyc::map_functions(&mut out, &doc).1);
        }
    }
    ResolvedProcess { funcs: out, ids, chains, wraps, resumed, warnings }
}

/// Mark the native functions whose source is in the cargo package of the program's own
/// `main` ([`Function::program_crate`]), or in a registry package published from the same
/// repository ([`same_repository`], by the packages' `Cargo.toml`): a program built by
/// `cargo install` lives in cargo's registry beside its dependencies, and only its `main` tells
/// them apart. Then, for the executable's functions without a source file (no debug
/// information), by the crate of their names ([`mark_crates_by_name`]). `exe`: the process's
/// executable.
fn mark_program_crate(funcs: &mut [Function], exe: &str) {
    mark_std_dependencies(funcs);
    mark_crates_by_name(funcs, exe);
    let exe_name = exe.rsplit('/').next().unwrap_or(exe);
    let mut roots: Vec<String> = Vec::new();
    for f in funcs.iter().filter(|f| f.language == Language::Native) {
        let Some(file) = f.file.as_deref() else { continue };
        let file = file.to_string_lossy();
        if let Some(root) = crate::native::paths::program_crate_root(&f.qualname, &file, exe_name) {
            if !roots.iter().any(|r| r == root) {
                roots.push(root.to_string());
            }
        }
    }
    if roots.is_empty() {
        return;
    }
    // The program's repository, from its package's manifest: registry packages published from
    // the same repository (ripgrep's `ignore`, `grep-printer`) are the program's too.
    let manifest_repo = |dir: &str| std::fs::read_to_string(Path::new(dir).join("Cargo.toml")).ok().and_then(|m| package_repository(&m));
    let repos: Vec<String> = roots.iter().filter_map(|r| manifest_repo(r)).collect();
    let mut same: rustc_hash::FxHashMap<String, bool> = Default::default();
    for f in funcs.iter_mut().filter(|f| f.language == Language::Native) {
        let Some(file) = f.file.as_deref() else { continue };
        let file = file.to_string_lossy();
        f.program_crate = roots.iter().any(|r| file.starts_with(r.as_str()))
            || (!repos.is_empty()
                && registry_package_dir(&file).is_some_and(|dir| {
                    *same
                        .entry(dir.to_string())
                        .or_insert_with(|| manifest_repo(dir).is_some_and(|repo| repos.iter().any(|p| same_repository(p, &repo))))
                }));
    }
}

/// Mark the functions of [`Function::std_dependency`]: without a source file, in an object
/// whose debug information gives other functions theirs, named in crates that the standard
/// library links for itself. A program that depends on `gimli` itself, built with debug
/// information, has its `gimli` functions' source; built without, no function of the object
/// has a source file and none is marked.
fn mark_std_dependencies(funcs: &mut [Function]) {
    let described: std::collections::HashSet<String> =
        funcs.iter().filter(|f| f.language == Language::Native && f.file.is_some()).filter_map(|f| f.object.clone()).collect();
    if described.is_empty() {
        return;
    }
    for f in funcs.iter_mut() {
        if f.language == Language::Native
            && f.file.is_none()
            && f.object.as_ref().is_some_and(|o| described.contains(o))
            && crate::native::paths::is_std_own_dependency(&f.qualname)
        {
            f.std_dependency = true;
        }
    }
}

/// The executable's native functions without a source file, when it is a Rust program (one
/// of them is its crate's `main`, `<crate>::main`): each marked the program's or a
/// dependency's by the crates of its name ([`crate::native::paths::rust_name_origin`]). The
/// program's crate is the crate of `main` named as the executable (cargo names a binary's
/// crate after it, `-` as `_`), or, for a renamed executable, the one `<crate>::main` that ran.
fn mark_crates_by_name(funcs: &mut [Function], exe: &str) {
    let exe_name = exe.rsplit('/').next().unwrap_or(exe).replace('-', "_");
    let nameonly = |f: &Function| f.language == Language::Native && f.file.is_none() && f.object.as_deref() == Some(exe);
    let mut mains: Vec<&str> = Vec::new();
    for f in funcs.iter().filter(|f| nameonly(f)) {
        let Some(krate) = f.qualname.strip_suffix("::main") else { continue };
        let ident = !krate.is_empty() && krate.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if ident
            && crate::native::paths::rust_name_origin(&f.qualname, &[]) == Some(crate::pathclass::Origin::SitePackages)
            && !mains.contains(&krate)
        {
            mains.push(krate);
        }
    }
    let program: Vec<String> = match mains.iter().find(|k| **k == exe_name) {
        Some(k) => vec![k.to_string()],
        None if mains.len() == 1 => vec![mains[0].to_string()],
        None => return,
    };
    let program: Vec<&str> = program.iter().map(String::as_str).collect();
    for f in funcs.iter_mut().filter(|f| nameonly(f)) {
        match crate::native::paths::rust_name_origin(&f.qualname, &program) {
            Some(crate::pathclass::Origin::Program) => f.program_crate = true,
            Some(crate::pathclass::Origin::SitePackages) => f.dependency_crate = true,
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{py, py_funcs, Ev::C, Ev::R, TraceBuilder};

    /// A call of a function whose calls resume (mypyc's generator body) is folded as a
    /// resume; other calls, returns and lines keep their kind, every id renumbered.
    #[test]
    fn calls_of_a_generator_body_are_resumes() {
        use trace_format::Event;
        let r = ResolvedProcess {
            ids: [(7, 0), (9, 1)].into_iter().collect(),
            resumed: [1].into_iter().collect(),
            ..ResolvedProcess::default()
        };
        assert_eq!(r.renumber(Event::Call { func: 9, ts: 5 }), Event::Resume { func: 1, ts: 5 });
        assert_eq!(r.renumber(Event::Call { func: 7, ts: 6 }), Event::Call { func: 0, ts: 6 });
        assert_eq!(r.renumber(Event::Resume { func: 9, ts: 7 }), Event::Resume { func: 1, ts: 7 });
        assert_eq!(r.renumber(Event::Line { func: 9, line: 3 }), Event::Line { func: 1, line: 3 });
    }

    /// [`Function::key_is_bracketed`] says what the key's first character says.
    #[test]
    fn a_bracketed_key_is_told_without_formatting_it() {
        let f = |file: Option<&str>, object: Option<&str>, qualname: &str| Function {
            file: file.map(Into::into),
            object: object.map(Into::into),
            qualname: qualname.into(),
            ..Function::unknown(0)
        };
        for g in [
            f(Some("<string>"), None, "f"),
            f(Some("<frozen importlib._bootstrap>"), None, "_find"),
            f(Some("app.py"), None, "<module>"),
            f(Some(""), None, "<lambda>"),
            f(None, Some("<jit>"), "f"),
            f(None, Some(""), "<x>"),
            f(None, None, "<unknown #3>"),
            f(Some("/a/<b>.py"), Some("<o>"), "x"),
        ] {
            assert_eq!(g.key_is_bracketed(), g.key().starts_with('<'), "{g:?}");
        }
    }

    #[test]
    fn interner_gives_a_function_one_id_across_tables() {
        let mut i = Interner::default();
        let a = i.intern_table(&py_funcs(&["main", "work"]), 2);
        // Another process: the same functions at other indices, a new one, and an index past
        // its table (a lost record) that another table lost too.
        let b = i.intern_table(&py_funcs(&["work", "other", "main"]), 4);
        let c = i.intern_table(&py_funcs(&["main"]), 4);
        assert_eq!((a[0], a[1]), (b[2], b[0]));
        assert!(b[1] != a[0] && b[1] != a[1]);
        assert_eq!(b[3], c[3], "<unknown #3> is one function, as its key says");
        assert!(c[1] != c[2] && c[0] == a[0]);
        assert_eq!(i.key(b[1]), Some(":other"));
        assert_eq!(i.len(), 6);
        assert_eq!(i.key(FuncId::NONE), None);
    }

    #[test]
    fn a_missing_or_empty_function_table_is_a_warning_naming_it() {
        let d = tempfile::tempdir().unwrap();
        let b = TraceBuilder::new(&d.path().join("t.d"), &["app.py"], d.path()).unwrap();
        let dir = b.process(7, &[py("app.py", "main", 1, 2)], &[(7, "MainThread", &[C(0), R])]).unwrap();
        let p = Process::open(&dir).unwrap();
        assert_eq!(resolve_process(&p).1, Vec::<String>::new());
        std::fs::write(dir.join(trace_format::FUNCS_FILE), "").unwrap();
        let w = resolve_process(&Process::open(&dir).unwrap()).1;
        assert_eq!(w.len(), 1);
        assert!(w[0].contains("funcs.jsonl: the function table is empty") && w[0].contains("<unknown #id>"), "{w:?}");
        std::fs::remove_file(dir.join(trace_format::FUNCS_FILE)).unwrap();
        let w = resolve_process(&Process::open(&dir).unwrap()).1;
        assert!(w.len() == 1 && w[0].contains("is missing"), "{w:?}");
    }

    /// The functions of the package holding the program's `main` are marked, in whatever
    /// file of the package; other packages' and functions without a file are not.
    #[test]
    fn the_programs_own_cargo_package_is_marked() {
        let reg = "/h/registry/src/index.crates.io-1949cf8c6b5b557f";
        let native = |q: &str, file: Option<String>| Function {
            language: Language::Native,
            name: q.rsplit("::").next().unwrap_or(q).into(),
            qualname: q.into(),
            file: file.map(PathBuf::from),
            first_line: Some(1),
            last_line: Some(2),
            object: Some("/i/bin/hexyl".into()),
            program_library: false,
            program_crate: false,
            dependency_crate: false,
            std_dependency: false,
            rust_symbol: false,
            made_in: None,
            inlined: false,
        };
        let mut funcs = vec![
            native("hexyl::main", Some(format!("{reg}/hexyl-0.16.0/src/main.rs"))),
            native("hexyl::Printer::print_all", Some(format!("{reg}/hexyl-0.16.0/src/lib.rs"))),
            native("clap_builder::derive::Parser::parse", Some(format!("{reg}/clap_builder-4.5.20/src/derive.rs"))),
            native("hexyl::helper", None),
        ];
        mark_program_crate(&mut funcs, "/i/bin/hexyl");
        assert_eq!(funcs.iter().map(|f| f.program_crate).collect::<Vec<_>>(), [true, true, false, false]);
        // Without the program's `main` among them, nothing is marked.
        let mut rest = funcs.split_off(1);
        rest.iter_mut().for_each(|f| f.program_crate = false);
        mark_program_crate(&mut rest, "/i/bin/hexyl");
        assert!(rest.iter().all(|f| !f.program_crate));
    }

    /// Without debug information, the executable's functions are marked by the crates of
    /// their names once the program's `main` is among them: the crate named as the executable
    /// (`-` as `_`), or the only `<crate>::main` of a renamed one; a library's functions,
    /// functions with a file, and a program without a Rust `main` are not marked.
    #[test]
    fn crates_are_marked_by_name_without_debug_information() {
        let native = |q: &str, object: &str| Function {
            language: Language::Native,
            name: q.rsplit("::").next().unwrap_or(q).into(),
            qualname: q.into(),
            file: None,
            first_line: None,
            last_line: None,
            object: Some(object.into()),
            program_library: false,
            program_crate: false,
            dependency_crate: false,
            std_dependency: false,
            rust_symbol: false,
            made_in: None,
            inlined: false,
        };
        let exe = "/i/bin/no-debug";
        let names = [
            "main",
            "no_debug::main",
            "no_debug::count::{{closure}}",
            "<no_debug::Mode as core::fmt::Debug>::fmt",
            "clap_builder::parser::parser::Parser::react",
            "<P as clap_builder::builder::value_parser::AnyValueParser>::parse_ref_",
            "std::rt::lang_start_internal",
        ];
        let marks = |funcs: &[Function]| funcs.iter().map(|f| (f.program_crate, f.dependency_crate)).collect::<Vec<_>>();
        let (no, program, dep) = ((false, false), (true, false), (false, true));
        let mut funcs: Vec<Function> = names.iter().map(|q| native(q, exe)).collect();
        funcs.push(native("clap_lex::ParsedArg::to_long", "/usr/lib/libother.so"));
        let mut with_file = native("regex::Regex::new", exe);
        with_file.file = Some(PathBuf::from("/h/registry/src/index.crates.io-1949cf8c6b5b557f/regex-1.13.2/src/lib.rs"));
        funcs.push(with_file);
        mark_program_crate(&mut funcs, exe);
        assert_eq!(marks(&funcs), [no, program, program, program, dep, dep, no, no, no]);
        assert_eq!(crate::pathclass::origin(&funcs[4]), crate::pathclass::Origin::SitePackages);
        assert_eq!(crate::pathclass::origin(&funcs[2]), crate::pathclass::Origin::Program);

        // A renamed executable: its one `<crate>::main`.
        let mut renamed: Vec<Function> = names.iter().map(|q| native(q, "/i/bin/nd")).collect();
        mark_program_crate(&mut renamed, "/i/bin/nd");
        assert_eq!(marks(&renamed)[..5], [no, program, program, program, dep]);

        // Two candidates and none named as the executable, or no Rust `main`: nothing marked.
        let mut two: Vec<Function> = names.iter().map(|q| native(q, "/i/bin/nd")).collect();
        two.push(native("other_tool::main", "/i/bin/nd"));
        mark_program_crate(&mut two, "/i/bin/nd");
        assert!(marks(&two).iter().all(|m| *m == no), "{:?}", marks(&two));
        let mut c: Vec<Function> =
            ["main", "app::Widget::draw(int)", "std::vector<int>::push_back"].iter().map(|q| native(q, "/i/bin/app")).collect();
        mark_program_crate(&mut c, "/i/bin/app");
        assert!(marks(&c).iter().all(|m| *m == no));

        // A test binary with debug information: the backtrace's `gimli` without a source file
        // is the standard library's; the program's own `gimli` use has its source, and in a
        // binary without any debug information nothing is told so.
        let t = "/t/target/debug/deps/calc-1234";
        let mut calc = native("calc::mean", t);
        calc.file = Some(PathBuf::from("/t/src/lib.rs"));
        let mut own = native("gimli::read::Dwarf::load", t);
        own.file = Some(PathBuf::from("/h/registry/src/index.crates.io-1949cf8c6b5b557f/gimli-0.31.1/src/read/dwarf.rs"));
        let mut funcs =
            vec![calc, own, native("<gimli::read::abbrev::Attributes>::push", t), native("miniz_oxide::inflate::core::decompress", t)];
        funcs.push(native("gimli::read::Dwarf::load", "/t/bin/stripped"));
        mark_program_crate(&mut funcs, t);
        assert_eq!(funcs.iter().map(|f| f.std_dependency).collect::<Vec<_>>(), [false, false, true, true, false]);
        assert_eq!(crate::pathclass::origin(&funcs[2]), crate::pathclass::Origin::Stdlib);
    }

    /// Registry packages published from the program's repository (by their manifests'
    /// `repository`) are the program's; others, and any without a manifest, are not.
    #[test]
    fn packages_from_the_programs_repository_are_marked() {
        let d = tempfile::tempdir().unwrap();
        let reg = d.path().join("h/registry/src/index.crates.io-1949cf8c6b5b557f");
        let pkg = |dir: &str, repo: Option<&str>| {
            let p = reg.join(dir);
            std::fs::create_dir_all(p.join("src")).unwrap();
            let repo = repo.map(|r| format!("repository = \"{r}\"\n")).unwrap_or_default();
            std::fs::write(p.join("Cargo.toml"), format!("[package]\nname = \"x\"\n{repo}")).unwrap();
            p.join("src/lib.rs").to_string_lossy().into_owned()
        };
        let main = pkg("ripgrep-15.2.0", Some("https://github.com/BurntSushi/ripgrep"));
        let ignore = pkg("ignore-0.4.29", Some("https://github.com/BurntSushi/ripgrep/tree/master/crates/ignore"));
        let clap = pkg("clap-4.5.20", Some("https://github.com/clap-rs/clap"));
        let bare = pkg("bare-1.0.0", None);
        let native = |q: &str, file: &str| Function {
            language: Language::Native,
            name: q.rsplit("::").next().unwrap_or(q).into(),
            qualname: q.into(),
            file: Some(PathBuf::from(file)),
            first_line: Some(1),
            last_line: Some(2),
            object: Some("/i/bin/rg".into()),
            program_library: false,
            program_crate: false,
            dependency_crate: false,
            std_dependency: false,
            rust_symbol: false,
            made_in: None,
            inlined: false,
        };
        let mut funcs = vec![
            native("rg::main", &main),
            native("ignore::dir::Ignore::matched", &ignore),
            native("clap::parse", &clap),
            native("bare::f", &bare),
        ];
        mark_program_crate(&mut funcs, "/i/bin/rg");
        assert_eq!(funcs.iter().map(|f| f.program_crate).collect::<Vec<_>>(), [true, true, false, false]);
    }
}
