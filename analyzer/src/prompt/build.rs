//! [`Model::build`]: the trees, function facts and sources that every rendering of a prompt
//! reads, gathered once from the prepared traces.

use super::{rank, FuncId, FuncInfo, Funcs, Model, ModelNode, ModelThread, ModelTrace, SourceState};
use crate::analysis::{display_path, PreparedTrace};
use crate::coverage::LineCoverage;
use crate::pathclass::{module_name, origin, Origin};
use crate::prune::is_module;
use crate::python::values::{module_values, read_by, ModuleValue};
use crate::source::{CodeKind, Unavailable};
use crate::symbols::{Function, Language};
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::collections::BTreeMap;

impl Model {
    /// Gather trees, function facts and sources from prepared traces.
    pub fn build(question: &str, traces: &mut [PreparedTrace]) -> Model {
        let mut funcs = Funcs::default();
        // The prompt's id of each function of the analysis ([`crate::symbols::Interner`]; traces
        // prepared apart have interners of their own, told apart by address): functions are
        // matched by id, and a key is copied once per function.
        let mut ids: HashMap<(usize, FuncId), FuncId> = HashMap::default();
        let mut analysis_ids: HashMap<(usize, FuncId), FuncId> = HashMap::default();
        let mut mtraces = Vec::new();
        let mut index = 0usize;
        // File -> why its source cannot be shown, and the first trace that said so.
        let mut unavailable_files: BTreeMap<String, (String, usize)> = BTreeMap::new();
        // (function, trace) pairs whose source was looked for again in that trace.
        let mut retried: HashSet<(FuncId, usize)> = HashSet::default();
        // File (as shown) -> the traces that ran code of it, each with its path there.
        let mut file_seen: BTreeMap<String, Vec<(usize, std::path::PathBuf)>> = BTreeMap::new();
        for (ti, t) in traces.iter_mut().enumerate() {
            let mut file_values: HashMap<std::path::PathBuf, std::collections::HashMap<String, ModuleValue>> = HashMap::default();
            let cwd = t.cwd.clone();
            let interner = t.interner.clone();
            let interner_at = std::sync::Arc::as_ptr(&interner) as usize;
            // Module names by file: finding a program file's package looks for `__init__.py` in
            // its directories, once per file, not once per function.
            let mut modules: HashMap<std::path::PathBuf, String> = HashMap::default();
            let mut threads = Vec::new();
            for th in &t.threads {
                let tree = &th.tree;
                let mut nodes = Vec::with_capacity(tree.len());
                let sizes = tree.subtree_sizes();
                // The entry script's module body is shown with its top-level statements: its
                // values need no second copy.
                let entry_files: HashSet<&std::path::Path> = th.entry.iter().filter_map(|&i| tree.function(i)?.file.as_deref()).collect();
                // Per function index of the tree: its id in the model and the smallest depth
                // seen, so a node of a function met before costs one lookup.
                let mut known: HashMap<u32, (FuncId, u32)> = HashMap::default();
                for n in tree.preorder() {
                    let node = tree.node(n);
                    let func = match known.get_mut(&node.func) {
                        Some((id, depth)) => {
                            if node.depth < *depth {
                                *depth = node.depth;
                                let fi = &mut funcs[*id];
                                fi.min_depth = fi.min_depth.min(node.depth);
                            }
                            *id
                        }
                        None => {
                            if let Some(path) = tree.func(n).and_then(|f| f.file.as_ref()) {
                                let shown = display_path(&t.sources.resolve(path), &cwd);
                                let seen = file_seen.entry(shown).or_default();
                                if !seen.iter().any(|(i, _)| *i == ti) {
                                    seen.push((ti, path.clone()));
                                }
                            }
                            let analysis_id = tree.func_id(n);
                            let id = match ids.get(&(interner_at, analysis_id)).copied() {
                                Some(id) => {
                                    let fi = &mut funcs[id];
                                    fi.min_depth = fi.min_depth.min(node.depth);
                                    // A function whose source an earlier trace could not show
                                    // (the file changed since that run): this trace's copy, once.
                                    if matches!(fi.source, SourceState::Unavailable(_)) && retried.insert((id, ti)) {
                                        let f = tree.func(n);
                                        let key = fi.key.clone();
                                        let entry = th.entry.contains(&node.func);
                                        let mut info = func_info(key, f, entry, &cwd, &mut t.sources, &mut modules, (node.depth, index));
                                        if !th.plumbing.contains(&node.func) && matches!(info.source, SourceState::Code(_)) {
                                            info.values = values_read(f, &info.source, &entry_files, &mut file_values, &mut t.sources);
                                            info.not_run = not_run(f, &info.source, &t.coverage);
                                            adopt_source(&mut funcs[id], info);
                                        }
                                    }
                                    id
                                }
                                None => {
                                    let f = tree.func(n);
                                    let key = match interner.shared_key(analysis_id) {
                                        Some(k) => k,
                                        None => f.cloned().unwrap_or_else(|| Function::unknown(node.func)).key().into(),
                                    };
                                    let entry = th.entry.contains(&node.func);
                                    let mut info = func_info(key, f, entry, &cwd, &mut t.sources, &mut modules, (node.depth, index));
                                    if th.plumbing.contains(&node.func) {
                                        info.source = SourceState::Omitted("framework plumbing (collapsed)");
                                    }
                                    info.values = values_read(f, &info.source, &entry_files, &mut file_values, &mut t.sources);
                                    info.not_run = not_run(f, &info.source, &t.coverage);
                                    if let SourceState::Unavailable(why) = &info.source {
                                        unavailable_files.entry(info.file.clone()).or_insert_with(|| (why.clone(), ti));
                                    }
                                    let id = match funcs.id(&info.key) {
                                        // Reached first in an earlier trace prepared apart
                                        // from this one.
                                        Some(id) => {
                                            if matches!(funcs[id].source, SourceState::Unavailable(_))
                                                && matches!(info.source, SourceState::Code(_))
                                            {
                                                adopt_source(&mut funcs[id], info);
                                            }
                                            id
                                        }
                                        None => {
                                            let unavailable = matches!(info.source, SourceState::Unavailable(_));
                                            let id = funcs.insert(info);
                                            if unavailable {
                                                // This trace's own copy: not looked for again.
                                                retried.insert((id, ti));
                                            }
                                            id
                                        }
                                    };
                                    ids.insert((interner_at, analysis_id), id);
                                    id
                                }
                            };
                            analysis_ids.insert((ti, analysis_id), id);
                            known.insert(node.func, (id, node.depth));
                            id
                        }
                    };
                    index += 1;
                    nodes.push(ModelNode {
                        id: n,
                        parent: node.parent,
                        depth: node.depth,
                        func,
                        count: node.count,
                        resumes: node.resumes,
                        time_ns: node.time_ns,
                        recursive: node.recursive,
                        descendants: sizes[n as usize] - 1,
                        inlined: tree.func(n).is_some_and(|f| f.inlined),
                    });
                }
                threads.push(ModelThread {
                    label: th.label.clone(),
                    pid: th.pid,
                    tid: th.tid,
                    name: th.name.clone(),
                    is_main: th.is_main,
                    nodes,
                    shapes: Default::default(),
                });
            }
            mtraces.push(ModelTrace {
                dir: t.dir.display().to_string(),
                command: trace_format::escape::command(&t.meta.argv),
                cwd: t.meta.cwd.clone(),
                threads,
                notes: t.notes.clone(),
                outcome: t.outcome.iter().map(|o| crate::testrun::clean_text(o)).collect(),
                files_executed: t.files_executed.iter().map(|f| t.sources.resolve(f)).collect(),
            });
        }
        rank::score(&mut funcs, question);
        rank::tree_boost(&mut funcs, &mtraces);
        let tests_shown = traces.iter().any(|t| t.tests_shown);
        if tests_shown {
            rank::construction(&mut funcs, &mtraces);
            let scores: Vec<(String, f64)> = traces.iter().flat_map(|t| t.invocation_scores.iter().cloned()).collect();
            rank::invocations(&mut funcs, &scores);
            let frames: Vec<(String, u32)> = traces.iter().flat_map(|t| t.failure_frames.iter().flatten().cloned()).collect();
            super::producer::producers(&mut funcs, &mtraces, &frames);
        }
        crate::native::work::rank(&mut funcs, &mtraces);
        if let Some(spectrum) = traces.iter().find_map(|t| t.spectrum.clone()) {
            rank::spectrum(&mut funcs, &spectrum);
        }
        let frames: Vec<(String, u32)> = traces.iter().flat_map(|t| t.failure_frames.iter().flatten().cloned()).collect();
        rank::failure_frames(&mut funcs, &frames);
        let tracebacks: Vec<&[(String, u32)]> = traces.iter().flat_map(|t| t.failure_frames.iter().map(Vec::as_slice)).collect();
        rank::raisers(&mut funcs, &tracebacks);
        rank::frame_constructors(&mut funcs, &frames);
        let outcomes: Vec<String> = mtraces.iter().flat_map(|t| t.outcome.iter().cloned()).collect();
        rank::missing_attribute(&mut funcs, &outcomes);
        let mut notes = super::unavailable_notes(&file_notes(unavailable_files, &file_seen, &funcs, traces));
        notes.extend(traces.iter().filter_map(|t| recovered_note(t, "the run")));
        let front = traces.first().map(|t| t.front).unwrap_or_default();
        Model {
            question: question.trim().to_string(),
            traces: mtraces,
            funcs,
            notes,
            tests_shown,
            front,
            budget_by_default: false,
            analysis_ids,
        }
    }
}

/// A function's source as a later trace shows it (`info`), where the trace that reached it
/// first could not show it: a diff of a run before an edit and one after, whose first run's
/// copy of the edited file changed since; the later run's matches it.
fn adopt_source(old: &mut FuncInfo, info: FuncInfo) {
    old.source = info.source;
    old.line = info.line;
    old.values = info.values;
    old.not_run = info.not_run;
}

/// The note of each file whose source some function could not show (file -> note), and of
/// each file that changed between the traces of the prompt (a diff of a run before an edit and
/// one after): which traces' copy is the file's now, so which is shown, and which ran another
/// copy, whose functions that no other trace reached are not shown. Other files' notes as
/// their trace said (`unavailable`: the note and the first trace that said it).
fn file_notes(
    unavailable: BTreeMap<String, (String, usize)>,
    file_seen: &BTreeMap<String, Vec<(usize, std::path::PathBuf)>>,
    funcs: &super::Funcs,
    traces: &mut [PreparedTrace],
) -> BTreeMap<String, String> {
    let still: HashSet<&str> =
        funcs.values().filter(|f| matches!(f.source, SourceState::Unavailable(_))).map(|f| f.file.as_str()).collect();
    let names = |v: &[usize], traces: &[PreparedTrace]| {
        v.iter().map(|&i| trace_format::escape::code_span(&traces[i].dir.display().to_string())).collect::<Vec<_>>().join(", ")
    };
    let mut out: BTreeMap<String, String> = unavailable.iter().map(|(f, (why, _))| (f.clone(), why.clone())).collect();
    for (file, seen) in file_seen.iter().filter(|(_, v)| v.len() > 1) {
        let (mut now, mut changed) = (Vec::new(), Vec::new());
        for (i, path) in seen {
            match traces[*i].sources.file(path) {
                Ok(_) => now.push(*i),
                Err(crate::source::Unavailable::Changed(_)) => changed.push(*i),
                Err(_) => {}
            }
        }
        if now.is_empty() || changed.is_empty() {
            continue;
        }
        let mut note = format!("shown as {} ran it; the file changed since {} ran", names(&now, traces), names(&changed, traces));
        if still.contains(file.as_str()) {
            note.push_str(", and the functions only that run reached are not shown (their code there is not known)");
        }
        out.insert(file.clone(), note);
    }
    out
}

/// Values a Python function reads from its module ([`crate::python::values`]), each file's values
/// read once (`file_values`); none for the entry script's functions (its module body is shown
/// with its top-level statements).
fn values_read(
    f: Option<&Function>,
    source: &SourceState,
    entry_files: &HashSet<&std::path::Path>,
    file_values: &mut HashMap<std::path::PathBuf, std::collections::HashMap<String, ModuleValue>>,
    sources: &mut crate::source::SourceCache,
) -> Vec<ModuleValue> {
    let (Some(f), SourceState::Code(e)) = (f, source) else { return Vec::new() };
    if f.language != Language::Python || !matches!(e.kind, CodeKind::Function | CodeKind::Lambda) {
        return Vec::new();
    }
    let Some(file) = f.file.as_ref().filter(|p| !entry_files.contains(p.as_path())) else { return Vec::new() };
    let vals = file_values.entry(file.clone()).or_insert_with(|| sources.file(file).map(|ft| module_values(&ft)).unwrap_or_default());
    read_by(&e.code, vals).into_iter().cloned().collect()
}

/// A function's code with what did not run elided ([`super::notrun`] for Python,
/// [`super::notrun_native`] for native code), when the trace has line data for its file and
/// some of its statements did not run.
fn not_run(f: Option<&Function>, source: &SourceState, coverage: &LineCoverage) -> Option<(String, usize)> {
    let (Some(f), SourceState::Code(e)) = (f, source) else { return None };
    let python = match (f.language, e.kind) {
        (Language::Python, CodeKind::Function) => true,
        (Language::Native, _) => false,
        _ => return None,
    };
    let states = coverage.states(f.file.as_deref()?, e.first_line, e.code.lines().count())?;
    if python {
        super::notrun::elide_not_run(&e.code, &states)
    } else {
        super::notrun_native::elide_not_run(&e.code, &states)
    }
}

fn func_info(
    key: std::sync::Arc<str>,
    f: Option<&Function>,
    entry_module: bool,
    cwd: &std::path::Path,
    cache: &mut crate::source::SourceCache,
    modules: &mut HashMap<std::path::PathBuf, String>,
    (depth, index): (u32, usize),
) -> FuncInfo {
    let Some(f) = f else {
        return FuncInfo {
            qualname: key.to_string(),
            key,
            language: Language::Native,
            file: String::new(),
            line: None,
            module: String::new(),
            origin: Origin::Program,
            kind: Default::default(),
            source: SourceState::Omitted("unknown function"),
            min_depth: depth,
            first_index: index,
            relevance: 0.0,
            lexical: 0.0,
            values: Vec::new(),
            not_run: None,
            spectrum: None,
        };
    };
    let file = match (&f.file, &f.object) {
        (Some(p), _) => display_path(&cache.resolve(p), cwd),
        (None, Some(o)) => o.rsplit('/').next().unwrap_or(o).to_string(),
        (None, None) => String::new(),
    };
    let source = if is_module(f) && !entry_module {
        SourceState::Omitted("imported module body (import-time work)")
    } else {
        match cache.extract(f, is_module(f)) {
            Ok(e) if e.kind == CodeKind::Class => SourceState::Omitted("class body (its methods that ran appear separately)"),
            Ok(e) => SourceState::Code(e),
            Err(Unavailable::NoFile) => SourceState::Omitted("no source file"),
            Err(u) => SourceState::Unavailable(u.note()),
        }
    };
    FuncInfo {
        key,
        qualname: f.qualname.clone(),
        language: f.language,
        file,
        line: f.first_line,
        module: match (&f.file, f.language) {
            (Some(file), Language::Python) => modules.entry(file.clone()).or_insert_with(|| module_name(f, cwd)).clone(),
            _ => module_name(f, cwd),
        },
        origin: origin(f),
        kind: crate::testrun::function_kind(f, cwd),
        source,
        min_depth: depth,
        first_index: index,
        relevance: 0.0,
        lexical: 0.0,
        values: Vec::new(),
        not_run: None,
        spectrum: None,
    }
}

/// At most this many files are named by [`recovered_note`].
const RECOVERED_NAMED: usize = 5;

/// How [`recovered_note`] begins.
pub(crate) const RECOVERED_NOTE: &str = "Changed since ";

/// A trace's files that changed since the run and whose executed version was read from git
/// (`crate::source::git`): the code shown is what ran, not what is on disk now. `run`: how the
/// note names the run (`the run`; `run A` in a diff of two).
pub(crate) fn recovered_note(t: &PreparedTrace, run: &str) -> Option<String> {
    let r = t.sources.recovered();
    if r.is_empty() {
        return None;
    }
    let named: Vec<String> = r
        .iter()
        .take(RECOVERED_NAMED)
        .map(|r| {
            let gone = if r.gone { "deleted since; " } else { "" };
            format!("{} ({gone}as in {})", display_path(&r.path, &t.cwd), r.from)
        })
        .collect();
    let more = if r.len() > RECOVERED_NAMED { format!(" and {} more", r.len() - RECOVERED_NAMED) } else { String::new() };
    // In a diff a function both runs reached is shown as run A's code and how run B's copy
    // differs from it: run B's copy may be shown only as that difference.
    let shown = match run {
        "the run" => "The code shown is the version the run executed".to_string(),
        _ => format!("What is shown of {run}'s copy (its code, or how it differs from the other run's) is the version {run} executed"),
    };
    Some(format!(
        "{RECOVERED_NOTE}{run}: {}{more}. {shown}, read from git (the same size and SHA-256 as when {run} ended), not the file on disk now.",
        named.join(", ")
    ))
}
