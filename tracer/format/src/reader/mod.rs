//! Reading a trace directory: its documents, and its thread streams event by event.
//!
//! Streams are memory-mapped and decoded lazily, so reading a trace costs memory for the
//! function tables only, never for the events.

use crate::event::{self, get_varint, Event, StreamHeader, StreamTotals, FLAG_CLOSED, HEADER_LEN, STREAM_MAGIC, STREAM_VERSION};
use crate::meta::{FuncRecord, PatchReport, ProcMeta, TraceMeta, PATCH_FILE, TRACE_FORMAT_NAME, TRACE_FORMAT_VERSION};
use crate::{FormatError, FUNCS_FILE, META_FILE, PROC_META_FILE};
use std::fs::File;
use std::path::{Path, PathBuf};

mod inline_hits;
pub use inline_hits::inline_hit_records;

/// A trace directory, with every process's documents loaded (events are read on demand).
#[derive(Debug)]
pub struct TraceDir {
    pub root: PathBuf,
    pub meta: TraceMeta,
    /// Processes in the order they started.
    pub processes: Vec<Process>,
    /// What opening it could not do: the merge of a Python process's extension modules that
    /// failed (`crate::pyext`), each a sentence for the user.
    pub warnings: Vec<String>,
}

/// One traced process (one program image: an `exec` starts a new one).
#[derive(Debug)]
pub struct Process {
    pub dir: PathBuf,
    pub meta: ProcMeta,
    /// The records kept of `funcs.jsonl` (see [`FuncTables`]), by id. Empty when the trace
    /// was opened with [`FuncTables::Count`].
    pub funcs: FuncTable,
    /// Every function id the thread streams name (calls, resumes, line events), ascending:
    /// what an analysis resolves. Read with [`FuncTables::Used`] only (empty otherwise).
    pub stream_ids: Vec<u32>,
    /// Complete records in `funcs.jsonl`, and the inline hits of `inline.bin` (counted also when
    /// they are not kept).
    pub func_count: usize,
    /// Thread streams, main thread first, then by start time.
    pub threads: Vec<ThreadStream>,
}

/// One thread's event stream.
#[derive(Debug, Clone)]
pub struct ThreadStream {
    pub path: PathBuf,
    pub header: StreamHeader,
    /// File size in bytes.
    pub size: u64,
}

/// What [`TraceDir::open_with`] keeps of each process's `funcs.jsonl`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FuncTables {
    /// Every record ([`Process::funcs`]): `trace dump`, the recorder's own summary.
    Records,
    /// The records of the ids the process's thread streams name, and those carrying
    /// `code_lines` (line coverage needs every function's lines, run or not): an analysis of a
    /// table of any size costs memory for what ran. Every line is still read and checked.
    Used,
    /// The number of records only ([`Process::func_count`]; `funcs` is left empty): every
    /// line is still read and checked, in constant memory, for a summary of a table of any size.
    Count,
}

impl TraceDir {
    /// Open a trace directory and load its documents.
    pub fn open(root: &Path) -> Result<TraceDir, FormatError> {
        TraceDir::open_with(root, FuncTables::Records)
    }

    /// [`TraceDir::open`], keeping of the function tables what `tables` says.
    pub fn open_with(root: &Path, tables: FuncTables) -> Result<TraceDir, FormatError> {
        if !root.exists() {
            return Err(FormatError::NotFound { path: root.to_path_buf() });
        }
        if !root.is_dir() {
            return Err(FormatError::NotADirectory { path: root.to_path_buf() });
        }
        // Its streams are still growing: no reading them half-written (src/lock.rs).
        if crate::lock::being_recorded(root) {
            return Err(FormatError::BeingRecorded { path: root.to_path_buf() });
        }
        let meta = read_meta(root)?;
        // A run with --native-ext whose recorder did not get to merge the native shim's
        // directories into the Python processes' (it was killed): merged here, once the
        // processes have ended.
        let warnings = if meta.options.get("native_ext").and_then(|v| v.as_bool()) == Some(true) {
            crate::pyext::merge_extension_processes(root)
        } else {
            Vec::new()
        };
        let mut processes = Vec::new();
        let mut entries: Vec<PathBuf> = Vec::new();
        for e in std::fs::read_dir(root).map_err(|e| FormatError::io(root, e))?.filter_map(|e| e.ok()) {
            let path = e.path();
            if !path.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with('p')) {
                continue;
            }
            // A process directory (`p<pid>[.<n>]`) that is a link would be read from outside the
            // trace (another name, `plots`, may be the user's own link).
            let process_name = path.file_name().and_then(|n| n.to_str()).and_then(|n| n.strip_prefix('p')).is_some_and(|rest| {
                let (pid, image) = rest.split_once('.').unwrap_or((rest, "0"));
                let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
                digits(pid) && digits(image)
            });
            match e.file_type() {
                Ok(t) if t.is_symlink() && process_name && path.is_dir() => return Err(FormatError::io(&path, symbolic_link())),
                Ok(t) if t.is_dir() => entries.push(path),
                _ => {}
            }
        }
        entries.sort();
        for dir in entries {
            if !dir.join(PROC_META_FILE).exists() {
                continue;
            }
            processes.push(Process::open_with(&dir, tables)?);
        }
        processes.sort_by_key(|p| (p.meta.start_ns, p.meta.pid));
        Ok(TraceDir { root: root.to_path_buf(), meta, processes, warnings })
    }

    /// Total number of thread streams.
    pub fn thread_count(&self) -> usize {
        self.processes.iter().map(|p| p.threads.len()).sum()
    }
}

/// Largest `meta.json` or `proc.json` a reader loads: a command line of a few MiB is already
/// far beyond what the kernel passes to a program; a bound on what a damaged trace costs.
pub const MAX_META_BYTES: u64 = 16 << 20;
/// Largest `sources.json`: about 200 bytes a file, so a million files fit.
pub const MAX_SOURCES_BYTES: u64 = 256 << 20;
/// Longest line of `funcs.jsonl` (the table itself is streamed, never read whole): a
/// function's `code_lines` of a 100,000-line function take under 1 MiB.
pub const MAX_FUNC_LINE_BYTES: usize = 16 << 20;

/// Open a file of a trace for reading without blocking on a FIFO (`O_NONBLOCK`), and refuse
/// anything but a regular file (checked with `fstat` on the descriptor) and a symbolic link
/// (`O_NOFOLLOW`: `trace` never writes one, so a link in a trace points out of it: the trace
/// was crafted or copied with its links, and nothing outside it is read).
pub fn open_regular(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = match std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_NOFOLLOW).open(path) {
        Ok(f) => f,
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Err(symbolic_link()),
        Err(e) => return Err(e),
    };
    if !f.metadata()?.is_file() {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a regular file"));
    }
    Ok(f)
}

/// The error for a symbolic link where a trace has a file or a process directory.
fn symbolic_link() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        "a symbolic link, which `trace` never writes: a trace's files are read only from inside it (copy the trace with `cp -rL` to read what the links point to)",
    )
}

/// The error for a document larger than its cap.
fn too_large(size: u64, cap: u64) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        format!("{size} bytes, more than the {cap} bytes such a document may have; the trace is damaged, record it again"),
    )
}

/// Read a document of a trace: a regular file of at most `cap` bytes. Its size is taken with
/// `fstat` before anything is read, so a larger (or sparse) file is refused at once, and at
/// most `cap` bytes are read even if it grows meanwhile.
pub fn read_document(path: &Path, cap: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let f = open_regular(path)?;
    let size = f.metadata()?.len();
    if size > cap {
        return Err(too_large(size, cap));
    }
    let mut v = Vec::with_capacity(size as usize);
    f.take(cap + 1).read_to_end(&mut v)?;
    if v.len() as u64 > cap {
        return Err(too_large(v.len() as u64, cap));
    }
    Ok(v)
}

pub(crate) fn read_document_text(path: &Path, cap: u64) -> std::io::Result<String> {
    String::from_utf8(read_document(path, cap)?).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

/// Read and check `meta.json`.
pub fn read_meta(root: &Path) -> Result<TraceMeta, FormatError> {
    let path = root.join(META_FILE);
    let text = match read_document_text(&path, MAX_META_BYTES) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(FormatError::NotATrace { path: root.to_path_buf() });
        }
        Err(e) => return Err(FormatError::io(&path, e)),
    };
    // Check the version before the shape, so a newer trace says "newer", not "corrupt".
    let raw: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| FormatError::BadJson { path: path.clone(), msg: e.to_string() })?;
    if raw.get("format").and_then(|f| f.as_str()) != Some(TRACE_FORMAT_NAME) {
        return Err(FormatError::NotATrace { path: root.to_path_buf() });
    }
    let version = raw.get("version").and_then(|v| v.as_u64()).unwrap_or(0);
    if version > TRACE_FORMAT_VERSION as u64 {
        return Err(FormatError::NewerVersion { path, found: version, supported: TRACE_FORMAT_VERSION as u64 });
    }
    serde_json::from_value(raw).map_err(|e| FormatError::BadJson { path, msg: e.to_string() })
}

impl Process {
    /// Load a process directory: `proc.json`, `funcs.jsonl` and the stream headers.
    pub fn open(dir: &Path) -> Result<Process, FormatError> {
        Process::open_with(dir, FuncTables::Records)
    }

    /// [`Process::open`], keeping of `funcs.jsonl` what `tables` says.
    pub fn open_with(dir: &Path, tables: FuncTables) -> Result<Process, FormatError> {
        let mpath = dir.join(PROC_META_FILE);
        let text = read_document_text(&mpath, MAX_META_BYTES).map_err(|e| FormatError::io(&mpath, e))?;
        let meta: ProcMeta = serde_json::from_str(&text).map_err(|e| FormatError::BadJson { path: mpath.clone(), msg: e.to_string() })?;
        let mut threads = Vec::new();
        for e in std::fs::read_dir(dir).map_err(|e| FormatError::io(dir, e))? {
            let path = match e {
                Ok(e) => e.path(),
                Err(_) => continue,
            };
            if path.extension().and_then(|x| x.to_str()) != Some("ev") {
                continue;
            }
            threads.push(ThreadStream::open(&path)?);
        }
        let pid = meta.pid as u64;
        threads.sort_by_key(|t| (t.header.tid != pid, t.header.start_ns, t.header.tid));
        let stream_ids = match tables {
            FuncTables::Records | FuncTables::Count => Vec::new(),
            FuncTables::Used => stream_func_ids(&threads),
        };
        let fpath = dir.join(FUNCS_FILE);
        let mut funcs = FuncTable::default();
        let mut func_count = 0usize;
        match tables {
            FuncTables::Records => for_each_func(&fpath, |rec| {
                func_count += 1;
                funcs.insert(rec);
            })?,
            FuncTables::Used => for_each_func(&fpath, |rec| {
                func_count += 1;
                let lines = matches!(&rec.kind, crate::meta::FuncKind::Python { code_lines: Some(_), .. });
                if lines || stream_ids.binary_search(&rec.id).is_ok() {
                    funcs.insert(rec);
                }
            })?,
            FuncTables::Count => for_each_func(&fpath, |_| func_count += 1)?,
        }
        // The inline probes' hits registered in `inline.bin` instead (never over a line's id).
        for rec in inline_hits::read(dir)? {
            if funcs.get(rec.id).is_some() {
                continue;
            }
            func_count += 1;
            if tables == FuncTables::Records || (tables == FuncTables::Used && stream_ids.binary_search(&rec.id).is_ok()) {
                funcs.insert(rec);
            }
        }
        Ok(Process { dir: dir.to_path_buf(), meta, funcs, stream_ids, func_count, threads })
    }

    /// The record of function `id`, if the table has one.
    pub fn func(&self, id: u32) -> Option<&FuncRecord> {
        self.funcs.get(id)
    }

    /// Its `patch.json` (entry patching, docs/native-recording.md): `Ok(None)` when the
    /// process was not patched (no file), an error when the file is there but damaged (not a
    /// regular file, larger than [`MAX_PATCH_REPORT_BYTES`], not the expected JSON).
    pub fn patch_report(&self) -> Result<Option<PatchReport>, FormatError> {
        optional_document(&self.dir.join(PATCH_FILE), MAX_PATCH_REPORT_BYTES)
    }

    /// The compiled extension modules this Python process imported (`extensions.json`), if
    /// it wrote them (at its exit).
    pub fn extensions(&self) -> Result<Option<crate::meta::ExtensionsDoc>, FormatError> {
        optional_document(&self.dir.join(crate::meta::EXTENSIONS_FILE), MAX_EXTENSIONS_BYTES)
    }

    /// Whether the call times of this process are estimated rather than measured: its entries
    /// were patched (an entry-only recording: a frame's return is inferred when a later call
    /// starts at or above it on the stack, so its time runs to that call). A damaged
    /// `patch.json` still shows that patching ran.
    pub fn times_estimated(&self) -> bool {
        match self.patch_report() {
            Ok(Some(r)) => r.patched > 0,
            Ok(None) => false,
            Err(_) => true,
        }
    }
}

/// The JSON document at `path`, at most `cap` bytes, or `None` when there is none (an optional
/// document of a process: `patch.json`, `extensions.json`).
fn optional_document<T: serde::de::DeserializeOwned>(path: &Path, cap: u64) -> Result<Option<T>, FormatError> {
    let bytes = match read_document(path, cap) {
        Ok(v) => v,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
            return Err(FormatError::BadJson { path: path.to_path_buf(), msg: e.to_string() })
        }
        Err(e) => return Err(FormatError::io(path, e)),
    };
    serde_json::from_slice(&bytes).map(Some).map_err(|e| FormatError::BadJson { path: path.to_path_buf(), msg: e.to_string() })
}

/// Largest `patch.json` a reader loads: one refusal line per function of every object is
/// far below it.
pub const MAX_PATCH_REPORT_BYTES: u64 = 64 << 20;

/// Largest `extensions.json` a reader loads: 5,000 modules of long paths are far below it.
pub const MAX_EXTENSIONS_BYTES: u64 = 8 << 20;

/// The records kept of a process's `funcs.jsonl`, by id (the last record of an id wins, as
/// when the table was a vector indexed by id).
#[derive(Debug, Clone, Default)]
pub struct FuncTable {
    records: std::collections::BTreeMap<u32, FuncRecord>,
}

impl FuncTable {
    /// Keep `rec`, replacing an earlier record of its id.
    pub fn insert(&mut self, rec: FuncRecord) {
        self.records.insert(rec.id, rec);
    }

    /// The record of `id`, if kept.
    pub fn get(&self, id: u32) -> Option<&FuncRecord> {
        self.records.get(&id)
    }

    /// The kept records, by ascending id.
    pub fn iter(&self) -> impl Iterator<Item = &FuncRecord> + '_ {
        self.records.values()
    }

    /// How many records are kept.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Whether no record is kept.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }
}

/// The function ids `threads` name (calls, resumes, line events), ascending and distinct: one
/// pass of the event decoder over the mapped streams, memory for the distinct ids only. A
/// damaged tail ends a stream's pass (the fold reports it).
pub fn stream_func_ids(threads: &[ThreadStream]) -> Vec<u32> {
    let mut ids = std::collections::HashSet::new();
    for t in threads {
        // A stream whose header cannot be read is reported where it is folded or dumped.
        let Ok(events) = t.events() else { continue };
        for ev in events {
            match ev {
                Ok(Event::Call { func, .. } | Event::Resume { func, .. } | Event::Line { func, .. }) => {
                    ids.insert(func);
                }
                Ok(_) => {}
                Err(_) => break,
            }
        }
    }
    let mut ids: Vec<u32> = ids.into_iter().collect();
    ids.sort_unstable();
    ids
}

/// How far past the number of records in `funcs.jsonl` a function id may be. Ids are dense
/// from 0, so a valid id is below the number of records plus the few whose lines a crash lost;
/// the bound keeps the table (indexed by id) as large as the file, whatever an id says.
pub const FUNC_ID_SLACK: usize = 1 << 16;

/// Read `funcs.jsonl`, streamed line by line (never read whole: its memory is that of the
/// records). A last line without its newline (a process killed while writing it) is ignored;
/// any other bad line is an error, and so are a line longer than [`MAX_FUNC_LINE_BYTES`] and
/// an id [`FUNC_ID_SLACK`] or more past the number of lines read so far (ids are dense and
/// written in order, so the table indexed by id stays as large as the file, whatever an id
/// says). A missing file is an empty table.
pub fn read_funcs(path: &Path) -> Result<Vec<Option<FuncRecord>>, FormatError> {
    let mut funcs: Vec<Option<FuncRecord>> = Vec::new();
    for_each_func(path, |rec| {
        let i = rec.id as usize;
        if i >= funcs.len() {
            funcs.resize(i + 1, None);
        }
        funcs[i] = Some(rec);
    })?;
    Ok(funcs)
}

/// Call `f` with each record of `funcs.jsonl`, in file order, with the checks of [`read_funcs`].
pub fn for_each_func(path: &Path, mut f: impl FnMut(FuncRecord)) -> Result<(), FormatError> {
    use std::io::BufRead;
    let file = match open_regular(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(FormatError::io(path, e)),
    };
    let mut r = std::io::BufReader::with_capacity(1 << 16, file);
    let mut line: Vec<u8> = Vec::new();
    let mut n = 0usize;
    loop {
        line.clear();
        let got = std::io::Read::take(&mut r, MAX_FUNC_LINE_BYTES as u64 + 1)
            .read_until(b'\n', &mut line)
            .map_err(|e| FormatError::io(path, e))?;
        if got == 0 || line.last() != Some(&b'\n') {
            if line.len() > MAX_FUNC_LINE_BYTES {
                return Err(FormatError::BadJson {
                    path: path.to_path_buf(),
                    msg: format!("line {}: longer than {MAX_FUNC_LINE_BYTES} bytes", n + 1),
                });
            }
            // The end, or a last line without its newline: ignored.
            return Ok(());
        }
        n += 1;
        let text = &line[..line.len() - 1];
        if text.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let rec: FuncRecord = crate::meta::parse_func_line(text)
            .map_err(|msg| FormatError::BadJson { path: path.to_path_buf(), msg: format!("line {n}: {msg}") })?;
        let max = n + FUNC_ID_SLACK;
        if rec.id as usize >= max {
            return Err(FormatError::FuncIdOutOfRange { path: path.to_path_buf(), line: n, id: rec.id as u64, max: max as u64 - 1 });
        }
        f(rec);
    }
}

mod stream;
pub use stream::*;

#[cfg(test)]
mod tests;
