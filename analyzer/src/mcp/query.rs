//! The `find_calls` and `source` tools: questions about one function of a run, answered from
//! the prompt's [`Model`] (the same trees, function facts and extracted sources a prompt shows).

use super::bound::{self, fit_lines, VIEW_DEFAULT};
use super::params::FunctionParams;
use crate::analysis::{display_path, prepare};
use crate::cli::common::UsageError;
use crate::prompt::{FuncId, FuncInfo, Model, ModelThread, SourceState};
use crate::source::CodeKind;
use crate::testrun::FuncKind;
use regex::Regex;
use std::collections::HashMap;
use std::path::PathBuf;
use trace_format::escape;

/// How a `function` argument names functions.
#[derive(Debug)]
enum Matcher {
    /// `file:line`: the functions of that file whose lines hold the line.
    FileLine(String, u32),
    /// A name: the qualified name, or its last dotted parts (`parse_row`, `Catalogue.load`).
    Name(String),
}

impl Matcher {
    fn parse(s: &str) -> Matcher {
        if let Some((file, line)) = s.rsplit_once(':') {
            if let Ok(l) = line.trim().parse::<u32>() {
                if file.contains('.') || file.contains('/') {
                    return Matcher::FileLine(file.trim().to_string(), l);
                }
            }
        }
        Matcher::Name(s.trim().to_string())
    }
}

/// The functions of the model that `function` names: the program's first, then installed
/// packages', the test runner's, the standard library's ([`whose`]), each in call order. The
/// argument is resolved to ids here, once, and the tools walk the trees by id. A name that
/// matches no qualified name exactly (nor its last dotted parts) is tried as a regular
/// expression. A plain name whose matches are none of the program's also takes the program's
/// private methods of that name (`update` finds `LRUCache.__update` beside pytest's
/// `NodeKeywords.update`).
fn matching(model: &Model, function: &str) -> Result<Vec<FuncId>, String> {
    let mut funcs: Vec<(FuncId, &FuncInfo)> = model.funcs.iter().collect();
    funcs.sort_by_key(|(_, f)| f.first_index);
    let found: Vec<(FuncId, &FuncInfo)> = match Matcher::parse(function) {
        Matcher::FileLine(file, line) => funcs
            .into_iter()
            .filter(|(_, f)| !f.file.is_empty() && (f.file.ends_with(&file) || file.ends_with(&f.file)))
            .filter(|(_, f)| match &f.source {
                SourceState::Code(e) if e.kind != CodeKind::Module => e.first_line <= line && line <= e.last_line,
                _ => f.line == Some(line),
            })
            .collect(),
        Matcher::Name(name) => {
            // A private method by the name Python mangles it to (`_LRUCache__update`).
            let unmangled = unmangle_private(&name);
            let names: Vec<&str> = std::iter::once(name.as_str()).chain(unmangled.as_deref()).collect();
            // The qualified name, its last parts, or the module's name before it (`parse.parse`,
            // `pkg.mod.Class.method`).
            let in_module = |f: &FuncInfo, name: &str| {
                let module = name.strip_suffix(f.qualname.as_str()).and_then(|m| m.strip_suffix('.'));
                !f.module.is_empty() && module.is_some_and(|m| f.module == m || f.module.ends_with(&format!(".{m}")))
            };
            let named_by = |f: &FuncInfo, names: &[&str]| {
                names.iter().any(|name| {
                    f.qualname == *name
                        || f.qualname.ends_with(&format!(".{name}"))
                        || f.qualname.ends_with(&format!("::{name}"))
                        || in_module(f, name)
                })
            };
            let mut by_name: Vec<(FuncId, &FuncInfo)> = funcs.iter().copied().filter(|(_, f)| named_by(f, &names)).collect();
            let plain = !name.is_empty() && name.chars().all(|c| c.is_alphanumeric() || c == '_') && !name.starts_with('_');
            if plain && by_name.iter().all(|(_, f)| f.kind != FuncKind::Other) {
                let private = [format!("_{name}"), format!("__{name}")];
                let private: Vec<&str> = private.iter().map(String::as_str).collect();
                by_name.extend(funcs.iter().copied().filter(|(_, f)| f.kind == FuncKind::Other && named_by(f, &private)));
            }
            if !by_name.is_empty() {
                by_name
            } else {
                let re = Regex::new(&name).map_err(|e| {
                    format!("function {name:?} is no function name that ran, and not a valid regular expression either: {e}")
                })?;
                funcs.into_iter().filter(|(_, f)| re.is_match(&f.qualname)).collect()
            }
        }
    };
    // Stable: call order within each kind.
    let mut found = found;
    found.sort_by_key(|(_, f)| whose(f));
    Ok(found.into_iter().map(|(id, _)| id).collect())
}

/// Where [`matching`] lists a function: the program's first, then installed packages', the test
/// runner's, the standard library's.
fn whose(f: &FuncInfo) -> u8 {
    match f.kind {
        FuncKind::Other => 0,
        FuncKind::Installed => 1,
        FuncKind::Runner => 2,
        FuncKind::Stdlib => 3,
    }
}

/// `Class.__name` of a private method's mangled name `_Class__name` (Python strips the class
/// name's leading underscores), else None.
fn unmangle_private(name: &str) -> Option<String> {
    let rest = name.strip_prefix('_')?;
    let (class, method) = rest.split_once("__")?;
    let ident = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_alphanumeric() || c == '_');
    (ident(class) && !class.starts_with('_') && ident(method) && !method.ends_with("__")).then(|| format!("{class}.__{method}"))
}

/// The error for a `function` that matched nothing, with the names that look closest.
fn not_found(model: &Model, p: &FunctionParams) -> anyhow::Error {
    let needle = p.function.rsplit(['.', ':', '/']).next().unwrap_or(&p.function).to_lowercase();
    let mut similar: Vec<&str> = model
        .funcs
        .values()
        .filter(|f| !needle.is_empty() && f.qualname.to_lowercase().contains(&needle))
        .map(|f| f.qualname.as_str())
        .collect();
    similar.sort_unstable();
    similar.dedup();
    similar.truncate(10);
    let hidden =
        if p.stdlib == Some(true) { "" } else { " (if it is the standard library's: its code is hidden, pass stdlib: true to search it)" };
    let hint = if similar.is_empty() { String::new() } else { format!("; similar names: {}", escape::line(&similar.join(", "))) };
    UsageError(format!("{}: no function matching {:?} is in the call tree of this run{hidden}{hint}", p.trace, p.function)).into()
}

fn load(p: &FunctionParams) -> anyhow::Result<(Model, String, Recovered)> {
    let opts = p.select().args().options_for(crate::frontend::FrontEnd::Mcp, true)?;
    let (mut traces, warnings) = prepare(&[PathBuf::from(&p.trace)], &opts)?;
    let mut head = String::new();
    for w in &warnings {
        head.push_str(&format!("warning: {}\n", escape::line(w)));
    }
    let model = Model::build("", &mut traces);
    let recovered = traces.iter().flat_map(|t| t.sources.recovered().iter().map(|r| (display_path(&r.path, &t.cwd), r.clone()))).collect();
    Ok((model, head, recovered))
}

/// The files that changed since the run whose executed version was read from git
/// ([`crate::source::git`]), as [`FuncInfo::file`] names them.
type Recovered = HashMap<String, crate::source::Recovered>;

/// `qualname  (file:line)`, control characters escaped.
fn named(f: &FuncInfo) -> String {
    let (name, file) = (escape::line(&f.qualname), escape::line(&f.file));
    match (file.is_empty(), f.line) {
        (true, _) => name.into_owned(),
        (false, Some(l)) => format!("{name}  ({file}:{l})"),
        (false, None) => format!("{name}  ({file})"),
    }
}

/// Callers or callees of a function with their call counts, most calls first (`None`: the
/// thread's start), then by key.
fn tally(model: &Model, counts: HashMap<Option<FuncId>, u64>) -> String {
    if counts.is_empty() {
        return "none".into();
    }
    let key = |k: Option<FuncId>| k.map_or(THREAD_START, |k| key_of(model, k));
    let mut v: Vec<(Option<FuncId>, u64)> = counts.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(key(a.0).cmp(key(b.0))));
    v.iter()
        .map(|&(k, n)| format!("{} ×{n}", k.and_then(|k| model.funcs.get(k)).map(named).unwrap_or_else(|| key(k).to_string())))
        .collect::<Vec<_>>()
        .join(", ")
}

/// What [`tally`] calls the caller of a thread's first calls.
const THREAD_START: &str = "(thread start)";

/// The key of a function of the model.
fn key_of(model: &Model, f: FuncId) -> &str {
    model.funcs.get(f).map_or("", |f| &*f.key)
}

/// Where the functions asked about are in the model's trees, and how to walk them.
struct Places {
    /// Per thread of each trace, the position of each node id in its pre-order.
    indexes: Vec<Vec<HashMap<u32, usize>>>,
    /// Per function, its nodes: (trace, thread, position), in tree order.
    nodes: HashMap<FuncId, Vec<(usize, usize, usize)>>,
}

impl Places {
    /// One pass over every tree, whatever the number of functions asked about.
    fn new(model: &Model, found: &[FuncId]) -> Places {
        let mut nodes: HashMap<FuncId, Vec<(usize, usize, usize)>> = found.iter().map(|&f| (f, Vec::new())).collect();
        let mut indexes = Vec::new();
        for (ti, t) in model.traces.iter().enumerate() {
            let mut per_thread = Vec::new();
            for (hi, th) in t.threads.iter().enumerate() {
                for (i, n) in th.nodes.iter().enumerate() {
                    if let Some(v) = nodes.get_mut(&n.func) {
                        v.push((ti, hi, i));
                    }
                }
                per_thread.push(th.nodes.iter().enumerate().map(|(i, n)| (n.id, i)).collect());
            }
            indexes.push(per_thread);
        }
        Places { indexes, nodes }
    }
}

/// Lines about one function: every call path from the root to it with counts, its callers
/// and its callees.
fn calls_of(model: &Model, places_of: &Places, id: FuncId, multi_thread: bool) -> Vec<String> {
    let Some(f) = model.funcs.get(id) else { return Vec::new() };
    let mut paths = Vec::new();
    let mut callers: HashMap<Option<FuncId>, u64> = HashMap::new();
    let mut callees: HashMap<Option<FuncId>, u64> = HashMap::new();
    let (mut calls, mut places) = (0u64, 0usize);
    for &(ti, hi, i) in places_of.nodes.get(&id).map(Vec::as_slice).unwrap_or(&[]) {
        let th = &model.traces[ti].threads[hi];
        let index = &places_of.indexes[ti][hi];
        let n = &th.nodes[i];
        calls += n.count;
        places += 1;
        paths.push(path_line(model, th, index, i, multi_thread));
        match index.get(&n.parent) {
            Some(&pi) => *callers.entry(Some(th.nodes[pi].func)).or_default() += n.count,
            None => *callers.entry(None).or_default() += n.count,
        }
        // The children only: from one to the next over its subtree (pre-order).
        let end = (i + n.descendants).min(th.nodes.len().saturating_sub(1));
        let mut c = i + 1;
        while c <= end {
            *callees.entry(Some(th.nodes[c].func)).or_default() += th.nodes[c].count;
            c += th.nodes[c].descendants + 1;
        }
    }
    let mut out = vec![
        format!("## {}", named(f)),
        format!("{calls} calls at {places} places in the call tree. Call paths (root → function, ×N = calls merged into that step):"),
    ];
    out.extend(paths.into_iter().enumerate().map(|(i, p)| format!("{}. {p}", i + 1)));
    out.push(format!("Callers: {}", tally(model, callers)));
    out.push(format!("Callees: {}", tally(model, callees)));
    out.push(String::new());
    out
}

/// Steps of a call path shown at each end; the steps between are counted, not named, so a
/// path line stays short however deep the tree (a 200,000-deep chain has paths of 200,000 steps).
const PATH_ENDS: usize = 16;

fn path_line(model: &Model, th: &ModelThread, index: &HashMap<u32, usize>, mut i: usize, multi_thread: bool) -> String {
    let step = |i: usize| {
        let n = &th.nodes[i];
        let name = model.funcs.get(n.func).map(named).unwrap_or_default();
        if n.count > 1 {
            format!("{name} ×{}", n.count)
        } else {
            name
        }
    };
    // The node's ancestors, innermost first.
    let mut chain = Vec::new();
    loop {
        chain.push(i);
        match index.get(&th.nodes[i].parent) {
            Some(&p) => i = p,
            None => break,
        }
    }
    chain.reverse();
    let steps: Vec<String> = if chain.len() <= 2 * PATH_ENDS + 1 {
        chain.iter().map(|&i| step(i)).collect()
    } else {
        let between = chain.len() - 2 * PATH_ENDS;
        let mut v: Vec<String> = chain[..PATH_ENDS].iter().map(|&i| step(i)).collect();
        v.push(format!("… {between} calls …"));
        v.extend(chain[chain.len() - PATH_ENDS..].iter().map(|&i| step(i)));
        v
    };
    let thread = if multi_thread && !th.label.is_empty() { format!("[{}] ", th.label) } else { String::new() };
    format!("{thread}{}", steps.join(" → "))
}

/// The find_calls tool.
pub fn find_calls(p: &FunctionParams) -> anyhow::Result<String> {
    let max = bound::limit(p.max_tokens, VIEW_DEFAULT).map_err(UsageError)?;
    let (model, mut head, _) = load(p)?;
    let found = matching(&model, &p.function).map_err(UsageError)?;
    if found.is_empty() {
        return Err(not_found(&model, p));
    }
    let multi = model.traces.iter().map(|t| t.threads.len()).sum::<usize>() > 1;
    head.push_str(&format!("# {} function(s) matching {:?} in {}\n\n", found.len(), p.function, p.trace));
    let places = Places::new(&model, &found);
    let lines: Vec<String> = found.iter().flat_map(|&f| calls_of(&model, &places, f, multi)).collect();
    let narrow = narrow_hint(found.len());
    Ok(fit_lines(&head, &lines, max, |n| {
        format!("… {n} more lines (call paths, callers, callees or further functions) left out to fit max_tokens={max}; {narrow}raise max_tokens")
    }))
}

/// How to ask for fewer of the `found` functions, before "raise max_tokens": with several, by
/// one's `file:line` as its heading gives it, or an anchored regular expression; nothing with one.
fn narrow_hint(found: usize) -> &'static str {
    if found > 1 {
        "ask for one of them by its file:line (as its heading gives it) or by an anchored regular expression (`^name$`), or "
    } else {
        ""
    }
}

/// The source tool.
pub fn source(p: &FunctionParams) -> anyhow::Result<String> {
    let max = bound::limit(p.max_tokens, VIEW_DEFAULT).map_err(UsageError)?;
    let (model, mut head, recovered) = load(p)?;
    let found = matching(&model, &p.function).map_err(UsageError)?;
    if found.is_empty() {
        return Err(not_found(&model, p));
    }
    if found.len() > 1 {
        head.push_str(&format!(
            "# {} functions match {:?}; each is shown, the program's first, in call order\n\n",
            found.len(),
            p.function
        ));
    }
    // One block per function (its lines joined): whole blocks are kept or left out, so that
    // no code fence is left open; a first block longer than the limit is cut line by line.
    let mut blocks: Vec<Vec<String>> = Vec::new();
    for f in found.iter().filter_map(|&f| model.funcs.get(f)) {
        let mut b = Vec::new();
        match &f.source {
            SourceState::Code(e) => {
                let fence = crate::prompt::fence_for(&[&e.code]);
                b.push(format!("## {} — {}:{}-{}", escape::line(&f.qualname), escape::line(&f.file), e.first_line, e.last_line));
                if let Some(r) = recovered.get(&f.file) {
                    let (file, from) = (escape::line(&f.file), &r.from);
                    b.push(match r.gone {
                        true => format!("({file} was deleted since the run: this is the version the run executed, as in {from}, read from git)"),
                        false => format!("({file} changed since the run: this is the version the run executed, as in {from}, read from git, not the file on disk now)"),
                    });
                }
                if e.kind == CodeKind::Module {
                    b.push("(module body: top-level statements; the bodies of its functions and classes are elided)".into());
                }
                b.push(format!("{fence}{}", f.lang()));
                b.extend(escape::block(&e.code).lines().map(str::to_string));
                b.push(fence);
            }
            SourceState::Unavailable(why) => b.extend([format!("## {}", named(f)), escape::line(why).into_owned()]),
            SourceState::Omitted(why) => b.extend([format!("## {}", named(f)), format!("no source shown: {}", escape::line(why))]),
        }
        b.push(String::new());
        blocks.push(b);
    }
    let joined: Vec<String> = blocks.iter().map(|b| b.join("\n")).collect();
    let narrow = narrow_hint(found.len());
    let left_out = |n: usize| format!("… {n} more functions left out to fit max_tokens={max}; {narrow}raise max_tokens");
    let first_fits = joined.first().is_none_or(|b| bound::TOKENIZER.count(&format!("{head}{b}\n{}\n", left_out(joined.len()))) <= max);
    if first_fits {
        return Ok(fit_lines(&head, &joined, max, left_out));
    }
    let first = &blocks[0];
    Ok(fit_lines(&head, first, max, |n| {
        format!(
            "… the last {n} lines of this function are left out to fit max_tokens={max} (the code block above is cut \
             and not closed){}; raise max_tokens to see it whole",
            if joined.len() > 1 { format!(", and {} more matching functions", joined.len() - 1) } else { String::new() }
        )
    }))
}

#[cfg(test)]
mod tests {
    use super::{unmangle_private, Matcher};

    #[test]
    fn a_private_methods_mangled_name_is_its_method() {
        assert_eq!(unmangle_private("_LRUCache__update").as_deref(), Some("LRUCache.__update"));
        assert_eq!(unmangle_private("_Cache_v2__pop_item").as_deref(), Some("Cache_v2.__pop_item"));
        for not in ["__init__", "_private", "update", "_X__", "__x", "_A__init__"] {
            assert_eq!(unmangle_private(not), None, "{not}");
        }
    }

    /// A name lists the program's functions before the runner's, and a plain name that only
    /// the runner's code has also finds the program's private method of that name.
    #[test]
    fn a_name_finds_the_programs_functions_first_its_private_ones_too() {
        use crate::pathclass::Origin;
        use crate::testrun::FuncKind;
        let mut funcs = crate::prompt::Funcs::default();
        let mut add = |qualname: &str, kind: FuncKind, index: usize| {
            let mut f = crate::testutil::func_info(&format!("{index}:{qualname}"), "f.py", Origin::Program, "def f():\n    pass\n");
            (f.qualname, f.kind, f.first_index) = (qualname.into(), kind, index);
            funcs.insert(f)
        };
        let runner = add("NodeKeywords.update", FuncKind::Runner, 0);
        let dict = add("OrderedDict.update", FuncKind::Stdlib, 1);
        let private = add("LRUCache.__update", FuncKind::Other, 2);
        let installed = add("Store.update", FuncKind::Installed, 3);
        let get = add("Cache.get", FuncKind::Runner, 4);
        let program_get = add("Cache.get", FuncKind::Other, 5);
        let _other_private = add("Cache._get", FuncKind::Other, 6);
        funcs[installed].module = "pkg.store".into();
        let model = crate::testutil::model("", Vec::new(), funcs);
        let m = |name: &str| super::matching(&model, name).expect("a name");
        assert_eq!(m("update"), [private, installed, runner, dict]);
        assert_eq!(m("Store.update"), [installed]);
        assert_eq!(m("_LRUCache__update"), [private]);
        // A name with its module before it.
        assert_eq!(m("pkg.store.Store.update"), [installed]);
        assert_eq!(m("store.Store.update"), [installed]);
        assert_eq!(m("other.Store.update"), Vec::<crate::prompt::FuncId>::new());
        // The program has a `get`: its private `_get` is not added.
        assert_eq!(m("get"), [program_get, get]);
        // No name ends in `._update`: the regular expression finds it.
        assert_eq!(m("_update"), [private]);
    }

    #[test]
    fn function_arguments() {
        let m = |s: &str| format!("{:?}", Matcher::parse(s));
        assert_eq!(m("shop/pricing.py:12"), r#"FileLine("shop/pricing.py", 12)"#);
        assert_eq!(m("main.c:7"), r#"FileLine("main.c", 7)"#);
        assert_eq!(m("Catalogue.load"), r#"Name("Catalogue.load")"#);
        assert_eq!(m("ns::func"), r#"Name("ns::func")"#);
        assert_eq!(m("x.py:main"), r#"Name("x.py:main")"#);
        assert_eq!(m("f:12"), r#"Name("f:12")"#);
    }
}
