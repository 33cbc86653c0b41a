//! Source extraction: the exact text of each function that ran, read once per file, and
//! never from a file that changed since the run.
//!
//! Python: from `first_line` (the first decorator) to the end of the `def`/`class` body,
//! found by indentation on logical lines (strings, brackets and backslash continuations are
//! tracked, so a docstring at column 0 or a multi-line signature does not end the function
//! early), and never before the code object's `last_line`. Trailing blank lines, and comment
//! lines at or left of the `def`, are not part of it. Lambdas: their line(s). Native code:
//! `first_line..=last_line` from the debug information.

pub mod git;

use crate::symbols::{Function, Language};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use trace_format::SourcesDoc;

/// A file's lines with, for Python, where logical lines start.
#[derive(Debug)]
pub struct FileText {
    pub lines: Vec<String>,
    /// Per line: does it start a logical line (not inside a string, brackets or after `\`)?
    pub logical_start: Vec<bool>,
}

/// Largest source file whose lines are shown (larger: "source not shown").
pub const MAX_SOURCE_BYTES: u64 = 16 << 20;

/// Why a file's lines are not shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unavailable {
    /// The file changed since the run (its content no longer matches the fingerprint).
    Changed(String),
    /// It cannot be read (moved, deleted, permissions).
    Missing(String),
    /// It is not shown although it can be read: not a regular file, too large, binary, or the
    /// trace holds no fingerprint of it (so it cannot be the file the run executed).
    Refused(String),
    /// The function has no source file (built-in, native code without debug info, `<string>`).
    NoFile,
}

/// How [`Unavailable::Changed`]'s note begins.
const CHANGED_NOTE: &str = "source not shown: the file changed since the run";

/// Whether a note of [`Unavailable::note`] says the file changed since the run.
pub fn is_changed_note(note: &str) -> bool {
    note.starts_with(CHANGED_NOTE)
}

impl Unavailable {
    /// A one-line note for the prompt.
    pub fn note(&self) -> String {
        match self {
            Unavailable::Changed(why) => format!("{CHANGED_NOTE} ({why}); record the trace again"),
            Unavailable::Missing(why) | Unavailable::Refused(why) => format!("source not shown: {why}"),
            Unavailable::NoFile => "no source file".to_string(),
        }
    }
}

/// What kind of code a source range is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CodeKind {
    Function,
    Class,
    Lambda,
    /// A module body (`<module>`).
    Module,
    /// Native code, or anything shown as its recorded line range.
    Range,
}

/// The extracted source of one function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Extract {
    pub kind: CodeKind,
    pub first_line: u32,
    pub last_line: u32,
    /// The whole text, lines joined with `\n` (no trailing newline).
    pub code: String,
    /// Decorators and signature, then a marked elision of the body, when the code has a
    /// body to elide (functions and classes); `None` otherwise.
    pub signature: Option<String>,
}

/// Marker line put in place of an elided body (after the indentation).
pub const ELIDED_BODY: &str = "...  # body elided";

/// A file that changed since the run (or was deleted) whose executed version was read from git.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recovered {
    pub path: PathBuf,
    /// Where it was found ([`git::Found::from`]: `the index`, `commit 1a2b3c4d`).
    pub from: String,
    /// The file is no longer on disk (deleted or moved since the run).
    pub gone: bool,
}

/// Reads files once each and checks them against the trace's fingerprints.
pub struct SourceCache {
    sources: Option<HashMap<String, trace_format::FileFingerprint>>,
    cwd: PathBuf,
    files: HashMap<PathBuf, Result<Arc<FileText>, Unavailable>>,
    /// The files that changed since the run whose executed version was read from git, in the
    /// order they were read.
    recovered: Vec<Recovered>,
    /// The git lookups of the changed files ([`git::History`]).
    history: git::History,
}

impl SourceCache {
    /// `sources`: the trace's `sources.json`, if it has one (without it no file is shown);
    /// `cwd`: the run's working directory (relative paths are resolved against it).
    pub fn new(sources: Option<SourcesDoc>, cwd: &Path) -> SourceCache {
        let sources: Option<HashMap<String, trace_format::FileFingerprint>> =
            sources.map(|d| d.files.into_iter().map(|f| (f.path.clone(), f)).collect());
        let run_files = sources.iter().flat_map(|m| m.keys()).map(|p| cwd.join(p)).collect();
        SourceCache { sources, cwd: cwd.to_path_buf(), files: HashMap::new(), recovered: Vec::new(), history: git::History::new(run_files) }
    }

    /// The files read so far that changed since the run and whose executed version came from
    /// git.
    pub fn recovered(&self) -> &[Recovered] {
        &self.recovered
    }

    /// Load `sources.json` from a trace directory (absent, unreadable, not a regular file or
    /// invalid: `None`, and then no source is shown).
    pub fn read_sources_doc(trace_dir: &Path) -> Option<SourcesDoc> {
        let bytes =
            trace_format::reader::read_document(&trace_dir.join(trace_format::SOURCES_FILE), trace_format::reader::MAX_SOURCES_BYTES)
                .ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// Absolute path of a function's file.
    pub fn resolve(&self, file: &Path) -> PathBuf {
        if file.is_absolute() {
            file.to_path_buf()
        } else {
            self.cwd.join(file)
        }
    }

    /// The file's text, or why it cannot be shown.
    pub fn file(&mut self, file: &Path) -> Result<Arc<FileText>, Unavailable> {
        let path = self.resolve(file);
        if let Some(r) = self.files.get(&path) {
            return r.clone();
        }
        let r = self.load(file, &path);
        self.files.insert(path, r.clone());
        r
    }

    /// Read a file the trace names, as untrusted input: only a regular file (a FIFO, device
    /// or directory is refused without blocking: opened with `O_NONBLOCK`, checked with
    /// `fstat`), at most [`MAX_SOURCE_BYTES`], not binary, and only if its content matches the
    /// fingerprint `trace run` recorded when the run ended. A file that changed since the run,
    /// or is gone, is read from git when its repository holds the version with that fingerprint
    /// ([`git::History::find_version`]).
    fn load(&mut self, as_recorded: &Path, path: &Path) -> Result<Arc<FileText>, Unavailable> {
        let name = as_recorded.to_string_lossy();
        if name.starts_with('<') {
            return Err(Unavailable::NoFile);
        }
        let on_disk = read_regular_file(path, MAX_SOURCE_BYTES);
        if let Err(e @ Unavailable::Refused(_)) = on_disk {
            return Err(e);
        }
        let fp = self.fingerprint_of(as_recorded, path).cloned();
        let Some(fp) = fp else {
            on_disk?;
            return Err(Unavailable::Refused(match self.sources {
                Some(_) => format!("{} is not among the files the run executed (sources.json has no fingerprint of it)", path.display()),
                None => "the trace has no sources.json (the fingerprints of the files the run executed), so no file can be checked; record the trace again".to_string(),
            }));
        };
        // The hash is always compared: a file edited with its size and time restored differs
        // only there.
        let bytes = match on_disk {
            Ok(bytes) if bytes.len() as u64 == fp.size && hex(&Sha256::digest(&bytes)) == fp.sha256 => bytes,
            other => match self.history.find_version(path, fp.size, &fp.sha256, MAX_SOURCE_BYTES) {
                Some(found) => {
                    let gone = matches!(other, Err(Unavailable::Missing(_)));
                    self.recovered.push(Recovered { path: path.to_path_buf(), from: found.from, gone });
                    found.bytes
                }
                None => {
                    other?;
                    let why = "its content differs from the fingerprint in sources.json";
                    return Err(Unavailable::Changed(match self.history.asks(path) {
                        true => format!("{why}, and no commit of its repository nor the index holds the version that ran"),
                        false => why.to_string(),
                    }));
                }
            },
        };
        if bytes.contains(&0) {
            return Err(Unavailable::Refused(format!("{} is a binary file", path.display())));
        }
        let text = String::from_utf8_lossy(&bytes);
        let lines: Vec<String> = text.lines().map(|l| l.trim_end_matches('\r').to_string()).collect();
        let logical_start = logical_starts(&lines);
        Ok(Arc::new(FileText { lines, logical_start }))
    }

    /// The fingerprint `trace run` took of a file (as the trace names it), if `sources.json`
    /// has one.
    pub fn fingerprint(&self, file: &Path) -> Option<&trace_format::FileFingerprint> {
        self.fingerprint_of(file, &self.resolve(file))
    }

    /// [`SourceCache::fingerprint`] of a file named `as_recorded`, at `path`: by that name, the
    /// absolute path, or the canonical one.
    fn fingerprint_of(&self, as_recorded: &Path, path: &Path) -> Option<&trace_format::FileFingerprint> {
        let m = self.sources.as_ref()?;
        m.get(as_recorded.to_string_lossy().as_ref()).or_else(|| m.get(path.to_string_lossy().as_ref())).or_else(|| {
            let c = std::fs::canonicalize(path).ok()?;
            m.get(c.to_string_lossy().as_ref())
        })
    }

    /// Extract a function's source. `elide_defs` (for a module body): keep top-level
    /// statements, elide the bodies of `def` and `class` statements.
    pub fn extract(&mut self, f: &Function, elide_defs: bool) -> Result<Extract, Unavailable> {
        let Some(file) = f.file.clone() else { return Err(Unavailable::NoFile) };
        let text = self.file(&file)?;
        let first = f.first_line.unwrap_or(1).max(1);
        let last = f.last_line.unwrap_or(first).max(first);
        if (first as usize) > text.lines.len() {
            return Err(Unavailable::Changed(format!("it has {} lines, the function starts at line {first}", text.lines.len())));
        }
        if f.language != Language::Python {
            let last = (last as usize).min(text.lines.len()) as u32;
            return Ok(Extract {
                kind: CodeKind::Range,
                first_line: first,
                last_line: last,
                code: text.lines[first as usize - 1..last as usize].join("\n"),
                signature: None,
            });
        }
        if f.name == "<module>" {
            let code = if elide_defs { module_with_elided_defs(&text) } else { text.lines.join("\n") };
            return Ok(Extract { kind: CodeKind::Module, first_line: 1, last_line: text.lines.len() as u32, code, signature: None });
        }
        Ok(python_block(&text, first, last, f.name == "<lambda>"))
    }
}

/// Read `path` if it is a regular file of at most `cap` bytes. Opened with `O_NONBLOCK` (a
/// FIFO with no writer would block `open` itself) and checked with `fstat` on the descriptor
/// (no race with a rename between a check and the open); reads stop at `cap + 1` bytes
/// whatever the file says its size is.
pub fn read_regular_file(path: &Path, cap: u64) -> Result<Vec<u8>, Unavailable> {
    use std::io::Read;
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| Unavailable::Missing(format!("cannot read {}: {e}", path.display())))?;
    let md = f.metadata().map_err(|e| Unavailable::Missing(format!("cannot read {}: {e}", path.display())))?;
    let ft = md.file_type();
    if !ft.is_file() {
        let what = if ft.is_dir() {
            "a directory"
        } else if ft.is_fifo() {
            "a FIFO"
        } else if ft.is_char_device() || ft.is_block_device() {
            "a device"
        } else if ft.is_socket() {
            "a socket"
        } else {
            "not a regular file"
        };
        return Err(Unavailable::Refused(format!("{} is {what}, not a source file", path.display())));
    }
    if md.len() > cap {
        return Err(Unavailable::Refused(format!("{} is larger than {} MiB", path.display(), cap >> 20)));
    }
    let mut bytes = Vec::with_capacity(md.len() as usize);
    f.take(cap + 1).read_to_end(&mut bytes).map_err(|e| Unavailable::Missing(format!("cannot read {}: {e}", path.display())))?;
    if bytes.len() as u64 > cap {
        return Err(Unavailable::Refused(format!("{} is larger than {} MiB", path.display(), cap >> 20)));
    }
    Ok(bytes)
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Per line: whether it starts a logical Python line.
pub fn logical_starts(lines: &[String]) -> Vec<bool> {
    let mut out = Vec::with_capacity(lines.len());
    let mut depth: i32 = 0;
    let mut triple: Option<u8> = None; // quote char of an open triple-quoted string
    let mut cont = false;
    for line in lines {
        out.push(triple.is_none() && depth <= 0 && !cont);
        cont = false;
        let b = line.as_bytes();
        let mut i = 0;
        while i < b.len() {
            if let Some(q) = triple {
                if b[i] == b'\\' {
                    i += 2;
                    continue;
                }
                if b[i] == q && b.get(i + 1) == Some(&q) && b.get(i + 2) == Some(&q) {
                    triple = None;
                    i += 3;
                    continue;
                }
                i += 1;
                continue;
            }
            match b[i] {
                b'#' => break,
                b'(' | b'[' | b'{' => depth += 1,
                b')' | b']' | b'}' => depth -= 1,
                b'\\' if i + 1 == b.len() => cont = true,
                q @ (b'"' | b'\'') => {
                    if b.get(i + 1) == Some(&q) && b.get(i + 2) == Some(&q) {
                        triple = Some(q);
                        i += 3;
                        continue;
                    }
                    // single-quoted string: to its closing quote on this line
                    i += 1;
                    while i < b.len() && b[i] != q {
                        if b[i] == b'\\' {
                            if i + 1 == b.len() {
                                cont = true;
                            }
                            i += 1;
                        }
                        i += 1;
                    }
                }
                _ => {}
            }
            i += 1;
        }
    }
    out
}

/// The width of a line's leading white space (a tab to the next multiple of 8).
pub(crate) fn indent(line: &str) -> usize {
    let mut n = 0;
    for c in line.chars() {
        match c {
            ' ' => n += 1,
            '\t' => n = (n / 8 + 1) * 8,
            _ => break,
        }
    }
    n
}

fn is_blank_or_comment(line: &str) -> bool {
    let t = line.trim_start();
    t.is_empty() || t.starts_with('#')
}

fn is_def_header(line: &str) -> Option<CodeKind> {
    let t = line.trim_start();
    if t.starts_with("def ") || t.starts_with("async def ") {
        Some(CodeKind::Function)
    } else if t.starts_with("class ") {
        Some(CodeKind::Class)
    } else {
        None
    }
}

/// For a header line at `j` (0-based): the index of the last line of the header (where the
/// logical line containing it ends).
pub(crate) fn header_end(t: &FileText, j: usize) -> usize {
    let mut k = j;
    while k + 1 < t.lines.len() && !t.logical_start[k + 1] {
        k += 1;
    }
    k
}

/// End (exclusive, 0-based) of the block whose header is at `j` with indentation `ind`,
/// not before line index `min_end` (exclusive).
pub(crate) fn block_end(t: &FileText, j: usize, ind: usize, min_end: usize) -> usize {
    let mut m = header_end(t, j) + 1;
    while m < t.lines.len() {
        let l = &t.lines[m];
        if m >= min_end && t.logical_start[m] && !is_blank_or_comment(l) && indent(l) <= ind {
            break;
        }
        m += 1;
    }
    // Trim trailing blank lines and comments at or left of the header.
    while m > min_end.max(j + 1) {
        let l = &t.lines[m - 1];
        if l.trim().is_empty() || (is_blank_or_comment(l) && indent(l) <= ind) {
            m -= 1;
        } else {
            break;
        }
    }
    m
}

fn python_block(t: &FileText, first: u32, last: u32, lambda: bool) -> Extract {
    let start = first as usize - 1;
    let last_idx = (last as usize).min(t.lines.len()) - 1;
    let range = |a: usize, b: usize, kind| Extract {
        kind,
        first_line: a as u32 + 1,
        last_line: b as u32,
        code: t.lines[a..b].join("\n"),
        signature: None,
    };
    if lambda {
        return range(start, last_idx + 1, CodeKind::Lambda);
    }
    // Find the def/class header: the first logical line from `start` that is one, passing
    // over decorators (and anything inside them), blank lines and comments.
    let mut j = start;
    let found = loop {
        if j >= t.lines.len() {
            break None;
        }
        let l = &t.lines[j];
        if t.logical_start[j] {
            if let Some(k) = is_def_header(l) {
                break Some(k);
            }
            let s = l.trim_start();
            if !(s.starts_with('@') || is_blank_or_comment(l)) {
                break None;
            }
        }
        j += 1;
    };
    let Some(kind) = found else {
        return range(start, last_idx + 1, CodeKind::Range);
    };
    let ind = indent(&t.lines[j]);
    let end = block_end(t, j, ind, last_idx + 1);
    let hend = header_end(t, j);
    let mut ex = range(start, end, kind);
    if hend + 1 < end {
        let mut sig: Vec<&str> = t.lines[start..=hend].iter().map(String::as_str).collect();
        let marker = format!("{}{}", " ".repeat(ind + 4), ELIDED_BODY);
        sig.push(&marker);
        ex.signature = Some(sig.join("\n"));
    }
    ex
}

fn module_with_elided_defs(t: &FileText) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < t.lines.len() {
        let l = &t.lines[i];
        if t.logical_start[i] && is_def_header(l).is_some() {
            let ind = indent(l);
            let hend = header_end(t, i);
            let end = block_end(t, i, ind, hend + 1);
            for h in &t.lines[i..=hend] {
                out.push(h.clone());
            }
            if end > hend + 1 {
                out.push(format!("{}{}", " ".repeat(ind + 4), ELIDED_BODY));
            }
            i = end;
            continue;
        }
        out.push(l.clone());
        i += 1;
    }
    while out.last().is_some_and(|l| l.trim().is_empty()) {
        out.pop();
    }
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ft(src: &str) -> FileText {
        let lines: Vec<String> = src.lines().map(String::from).collect();
        let logical_start = logical_starts(&lines);
        FileText { lines, logical_start }
    }

    const SRC: &str = r#"import os

# helper comment
@decorator(
    arg=1,
)
@other
def decorated(a,
              b):
    """Doc.
text at column 0
"""
    x = [
1, 2]
    # inner comment

    return a + b
# trailing comment at col 0

class K:
    def method(self):
        return 1

    def other(self): return 2


def one_liner(): return 3
f = lambda x: x + 1
"#;

    #[test]
    fn decorated_multiline_def_is_exact() {
        let t = ft(SRC);
        let e = python_block(&t, 4, 17, false);
        assert_eq!(e.kind, CodeKind::Function);
        assert_eq!((e.first_line, e.last_line), (4, 17));
        assert!(e.code.starts_with("@decorator(\n"));
        assert!(e.code.ends_with("    return a + b"));
        assert!(!e.code.contains("trailing comment"));
        let sig = e.signature.unwrap();
        assert_eq!(sig, "@decorator(\n    arg=1,\n)\n@other\ndef decorated(a,\n              b):\n    ...  # body elided");
    }

    #[test]
    fn never_stops_before_last_line() {
        // A last_line beyond the indentation end (as the code object says) wins.
        let t = ft("def f():\n    pass\nx = 1\ny = 2\n");
        let e = python_block(&t, 1, 3, false);
        assert_eq!(e.code, "def f():\n    pass\nx = 1");
    }

    #[test]
    fn methods_and_one_liners() {
        let t = ft(SRC);
        let m = python_block(&t, 21, 22, false);
        assert_eq!(m.code, "    def method(self):\n        return 1");
        let o = python_block(&t, 24, 24, false);
        assert_eq!(o.code, "    def other(self): return 2");
        assert_eq!(o.signature, None);
        let k = python_block(&t, 20, 24, false);
        assert_eq!(k.kind, CodeKind::Class);
        assert_eq!((k.first_line, k.last_line), (20, 24));
        let l = python_block(&t, 28, 28, true);
        assert_eq!(l.code, "f = lambda x: x + 1");
        assert_eq!(l.kind, CodeKind::Lambda);
    }

    #[test]
    fn module_bodies_are_elided() {
        let t = ft(SRC);
        let m = module_with_elided_defs(&t);
        assert!(m.contains("import os"));
        assert!(m.contains("def decorated(a,\n              b):\n    ...  # body elided"));
        assert!(!m.contains("return a + b"));
        assert!(m.contains("class K:\n    ...  # body elided"));
        assert!(m.contains("def one_liner(): return 3"));
        assert!(m.ends_with("f = lambda x: x + 1"));
    }

    #[test]
    fn logical_lines_track_strings_brackets_and_continuations() {
        let t = ft("a = '''x\ny'''\nb = (1,\n2)\nc = 1 + \\\n  2\nd = '#('\ne = 1\n");
        assert_eq!(t.logical_start, vec![true, false, true, false, true, false, true, true]);
    }

    #[test]
    fn changed_and_missing_files_are_detected() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("m.py");
        std::fs::write(&p, "def f():\n    return 1\n").unwrap();
        let mut f = crate::testutil::py_funcs(&["f"]).remove(0);
        (f.file, f.first_line, f.last_line) = (Some(p.clone()), Some(1), Some(2));
        let sha = hex(&Sha256::digest(b"def f():\n    return 1\n"));
        let doc = |sha: &str| SourcesDoc {
            files: vec![trace_format::FileFingerprint {
                path: p.to_string_lossy().into(),
                size: 22,
                mtime_ns: 0,
                sha256: sha.into(),
                ..Default::default()
            }],
        };
        // The hash matches (whatever the recorded time): shown.
        let mut c = SourceCache::new(Some(doc(&sha)), d.path());
        assert_eq!(c.extract(&f, false).unwrap().code, "def f():\n    return 1");
        // Hash differs: changed.
        let mut c = SourceCache::new(Some(doc("00")), d.path());
        assert!(matches!(c.extract(&f, false), Err(Unavailable::Changed(_))));
        // No fingerprint of the file, or no sources.json at all: refused.
        let mut c = SourceCache::new(Some(SourcesDoc { files: vec![] }), d.path());
        assert!(matches!(c.extract(&f, false), Err(Unavailable::Refused(w)) if w.contains("not among the files")));
        let mut c = SourceCache::new(None, d.path());
        assert!(matches!(c.extract(&f, false), Err(Unavailable::Refused(w)) if w.contains("no sources.json")));
        // Edited with the same size: the hash tells.
        std::fs::write(&p, "def f():\n    return 2\n").unwrap();
        let mut c = SourceCache::new(Some(doc(&sha)), d.path());
        assert!(matches!(c.extract(&f, false), Err(Unavailable::Changed(_))));
        std::fs::remove_file(&p).unwrap();
        let mut c = SourceCache::new(Some(doc(&sha)), d.path());
        assert!(matches!(c.extract(&f, false), Err(Unavailable::Missing(_))));
        let mut g = f.clone();
        g.file = Some("<string>".into());
        assert!(matches!(c.extract(&g, false), Err(Unavailable::NoFile)));
    }

    #[test]
    fn only_regular_small_text_files_are_read_and_nothing_blocks() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("fifo.py");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo on a path we own.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        // A FIFO with no writer: a plain open would block forever.
        let e = read_regular_file(&fifo, MAX_SOURCE_BYTES).unwrap_err();
        assert!(matches!(&e, Unavailable::Refused(w) if w.contains("a FIFO")), "{e:?}");
        let e = read_regular_file(Path::new("/dev/zero"), MAX_SOURCE_BYTES).unwrap_err();
        assert!(matches!(&e, Unavailable::Refused(w) if w.contains("a device")), "{e:?}");
        let e = read_regular_file(d.path(), MAX_SOURCE_BYTES).unwrap_err();
        assert!(matches!(&e, Unavailable::Refused(w) if w.contains("a directory")), "{e:?}");
        let big = d.path().join("big.py");
        std::fs::write(&big, vec![b'#'; 2000]).unwrap();
        assert!(matches!(read_regular_file(&big, 1000), Err(Unavailable::Refused(w)) if w.contains("larger than")));
        assert_eq!(read_regular_file(&big, 2000).unwrap().len(), 2000);
        // A binary file, even one fingerprinted, is not shown as source.
        let bin = d.path().join("bin.py");
        std::fs::write(&bin, b"\x7fELF\x00\x01def f():\n").unwrap();
        let sha = hex(&Sha256::digest(b"\x7fELF\x00\x01def f():\n"));
        let doc = SourcesDoc {
            files: vec![trace_format::FileFingerprint {
                path: bin.to_string_lossy().into(),
                size: 15,
                mtime_ns: 0,
                sha256: sha,
                ..Default::default()
            }],
        };
        let mut c = SourceCache::new(Some(doc), d.path());
        assert!(matches!(c.file(&bin), Err(Unavailable::Refused(w)) if w.contains("binary")));
    }
}
