//! Test support: synthetic traces written through `trace_format::writer`, exactly as the
//! shims write them. Used by the analyzer's unit tests and usable by end-to-end tests.

use crate::symbols::{Function, Language};
use std::path::{Path, PathBuf};
use trace_format::writer::{create_process_dir, write_proc_meta, FuncTableWriter, StreamWriter};
use trace_format::{Event, FormatError, FuncKind, FuncRecord, ProcMeta, TraceMeta, TRACE_FORMAT_NAME, TRACE_FORMAT_VERSION};

/// A compact event for tests: `C(id)` calls function `id`, `R` returns, `L(id, line)`
/// reports that function `id` executed `line`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ev {
    C(u32),
    R,
    L(u32, u32),
}

impl Ev {
    /// Decoded events with timestamps 10, 20, 30, ...
    pub fn events(evs: &[Ev]) -> Vec<Result<Event, FormatError>> {
        evs.iter()
            .enumerate()
            .map(|(i, e)| {
                let ts = (i as u64 + 1) * 10;
                Ok(match *e {
                    Ev::C(func) => Event::Call { func, ts },
                    Ev::R => Event::Return { ts },
                    Ev::L(func, line) => Event::Line { func, line },
                })
            })
            .collect()
    }
}

/// `tree` with its functions interned (as [`crate::fold::load_trace`] does) in one interner
/// shared by every test of the process, so that trees built apart agree on ids by key.
pub fn interned(mut tree: crate::calltree::CallTree) -> crate::calltree::CallTree {
    static INTERNER: std::sync::Mutex<Option<crate::symbols::Interner>> = std::sync::Mutex::new(None);
    let len = tree.nodes[1..].iter().map(|n| n.func as usize + 1).max().unwrap_or(0).max(tree.funcs.len());
    let mut guard = INTERNER.lock().unwrap_or_else(|e| e.into_inner());
    let interner = guard.get_or_insert_with(Default::default);
    tree.ids = std::sync::Arc::new(interner.intern_table(&tree.funcs, len));
    tree
}

/// Python functions named `names`, without files.
pub fn py_funcs(names: &[&str]) -> Vec<Function> {
    names
        .iter()
        .map(|n| Function {
            language: Language::Python,
            name: n.rsplit('.').next().unwrap_or(n).to_string(),
            qualname: n.to_string(),
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
        })
        .collect()
}

/// A Python function record for [`TraceBuilder::process`].
pub fn py(file: &str, qualname: &str, first_line: u32, last_line: u32) -> FuncKind {
    FuncKind::Python {
        file: file.to_string(),
        qualname: qualname.to_string(),
        name: qualname.rsplit('.').next().unwrap_or(qualname).to_string(),
        first_line,
        last_line,
        code_lines: None,
        made_in: None,
    }
}

/// Writes a trace directory: `meta.json`, then processes with their function tables and
/// thread streams.
pub struct TraceBuilder {
    pub root: PathBuf,
    pub meta: TraceMeta,
}

impl TraceBuilder {
    /// Start a trace directory at `root` (created) for a Python run of `argv` in `cwd`.
    pub fn new(root: &Path, argv: &[&str], cwd: &Path) -> std::io::Result<TraceBuilder> {
        std::fs::create_dir_all(root)?;
        let meta = TraceMeta {
            format: TRACE_FORMAT_NAME.into(),
            version: TRACE_FORMAT_VERSION,
            tool: "testutil".into(),
            argv: argv.iter().map(|s| s.to_string()).collect(),
            cwd: cwd.to_string_lossy().into_owned(),
            target_kind: "python".into(),
            start_unix_ms: 0,
            end_unix_ms: None,
            duration_ns: None,
            exit: Some(trace_format::ExitStatus { code: Some(0), signal: None, core_dumped: false }),
            options: serde_json::Value::Null,
            incomplete: None,
            stopped: None,
            python_hooks: Vec::new(),
        };
        let b = TraceBuilder { root: root.to_path_buf(), meta };
        b.write_meta()?;
        Ok(b)
    }

    /// (Re)write `meta.json`.
    pub fn write_meta(&self) -> std::io::Result<()> {
        std::fs::write(self.root.join(trace_format::META_FILE), serde_json::to_vec_pretty(&self.meta).map_err(std::io::Error::other)?)
    }

    /// Add the Python files of `funcs` that exist to `sources.json`, as `trace run` does when
    /// the run ends (without a fingerprint no source is shown).
    pub fn fingerprint(&self, funcs: &[FuncKind]) -> std::io::Result<()> {
        use sha2::Digest;
        let path = self.root.join(trace_format::SOURCES_FILE);
        let mut doc: trace_format::SourcesDoc = match std::fs::read(&path) {
            Ok(b) => serde_json::from_slice(&b).map_err(std::io::Error::other)?,
            Err(_) => trace_format::SourcesDoc { files: Vec::new() },
        };
        for k in funcs {
            let FuncKind::Python { file, .. } = k else { continue };
            let p = Path::new(&self.meta.cwd).join(file);
            let Ok(bytes) = std::fs::read(&p) else { continue };
            if doc.files.iter().any(|f| f.path == p.to_string_lossy()) {
                continue;
            }
            let sha256 = sha2::Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect();
            doc.files.push(trace_format::FileFingerprint {
                path: p.to_string_lossy().into_owned(),
                size: bytes.len() as u64,
                mtime_ns: 0,
                sha256,
                symbols: Vec::new(),
            });
        }
        std::fs::write(&path, serde_json::to_vec(&doc).map_err(std::io::Error::other)?)
    }

    /// Add a process with function table `funcs` (ids in order) and one stream per entry of
    /// `threads`: `(tid, thread name, events)`. The first thread should have `tid == pid`.
    pub fn process(&self, pid: u32, funcs: &[FuncKind], threads: &[(u64, &str, &[Ev])]) -> std::io::Result<PathBuf> {
        let dir = create_process_dir(&self.root, pid)?;
        let meta = ProcMeta {
            pid,
            ppid: 1,
            argv: self.meta.argv.clone(),
            exe: "/usr/bin/python3".into(),
            cwd: self.meta.cwd.clone(),
            kind: "python".into(),
            runtime: "CPython 3.11.0".into(),
            start_ns: pid as u64,
            forked_from: None,
            hook: None,
            lines_per_test: false,
            native_closed_at_python_calls: false,
        };
        write_proc_meta(&dir, &meta)?;
        let ft = FuncTableWriter::create(&dir.join(trace_format::FUNCS_FILE))?;
        for (id, k) in funcs.iter().enumerate() {
            ft.append(&FuncRecord { id: id as u32, kind: k.clone() })?;
        }
        self.fingerprint(funcs)?;
        for (seq, (tid, name, evs)) in threads.iter().enumerate() {
            let path = dir.join(trace_format::writer::stream_file_name(*tid, seq as u32));
            let mut w = StreamWriter::create(&path, trace_format::event::FLAG_PYTHON, pid, *tid, 1000 + seq as u64, 64 << 10)?;
            if !name.is_empty() {
                w.thread_name(name);
            }
            let mut ts = 1000 + seq as u64;
            for e in evs.iter() {
                ts += 10;
                match *e {
                    Ev::C(f) => w.call(f, ts),
                    Ev::R => w.ret(ts),
                    Ev::L(f, line) => w.line(f, line),
                }
            }
            w.finish();
        }
        Ok(dir)
    }
}

/// A prompt function with source `code` (lines 1-2), nothing ranked or condensed yet.
pub fn func_info(key: &str, file: &str, origin: crate::pathclass::Origin, code: &str) -> crate::prompt::FuncInfo {
    use crate::prompt::{FuncInfo, SourceState};
    use crate::source::{CodeKind, Extract};
    FuncInfo {
        key: key.into(),
        qualname: key.into(),
        language: crate::symbols::Language::Python,
        file: file.into(),
        line: Some(1),
        module: String::new(),
        origin,
        kind: Default::default(),
        source: SourceState::Code(Extract { kind: CodeKind::Function, first_line: 1, last_line: 2, code: code.into(), signature: None }),
        min_depth: 1,
        first_index: 0,
        relevance: 0.0,
        lexical: 0.0,
        values: Vec::new(),
        not_run: None,
        spectrum: None,
    }
}

/// A prompt model of `traces` and `funcs` for `question`, with every other field at its
/// default (no notes, no tests shown, the command line's wording).
pub fn model(question: &str, traces: Vec<crate::prompt::ModelTrace>, funcs: crate::prompt::Funcs) -> crate::prompt::Model {
    crate::prompt::Model {
        question: question.into(),
        traces,
        funcs,
        notes: Vec::new(),
        tests_shown: false,
        front: Default::default(),
        budget_by_default: false,
        analysis_ids: Default::default(),
    }
}
