//! `trace run --native-ext`: one process, two recorders. In a Python process the Python shim
//! writes `p<pid>/` and the native shim, patching only the extension modules, writes its own
//! directory for the same pid (`p<pid>.1`, kind `native`). When the run ends, `trace` merges
//! the second into the first: the native function records are appended to the Python
//! process's `funcs.jsonl` under ids after its own, and each thread's two streams become one,
//! ordered by time (both shims read one clock, the native shim's: `trace_format::clock`,
//! "One clock per process"), so that a native
//! call sits under the Python function that was running when it started
//! (docs/native-recording.md, "Python extension modules").
//!
//! The rule that joins them ([`streams`]). Entry patching sees native entries, not returns:
//! the native shim writes a frame's return when a later call starts at or above it on the
//! stack (frame repair), and, before each Python call or resume, the returns of the frames
//! that have ended by then (`trace_format::clock::python_entry_ns`: a frame at or below the
//! stack pointer, or whose return-address slot no longer holds the address its call pushed),
//! stamped no later than the Python event. The Python process's `proc.json` says so
//! (`native_closed_at_python_calls`); then the native frames still open at a Python call are
//! running, and the Python call is their callback, nested under them (mypyc-compiled black's
//! `main` calling click, which calls black's compiled functions again), while a call after a
//! C function returned goes beside it. A trace of an older shim is placed by looking ahead in
//! the native stream instead: the native frames it returns before its next call are taken as
//! ended before the Python call. A native frame never outlives the Python frame it was called
//! in: a Python return closes the native frames above it.
//!
//! Who merges. `trace run` merges when the run ends. A run that ended otherwise (`trace`
//! itself killed with SIGKILL, so that the program went on and ended unwatched) leaves the
//! two directories; the reader then merges them when it opens the trace
//! ([`crate::reader::TraceDir::open`], for a trace recorded with `native_ext`), once the
//! process has ended. A lock on the native directory's `proc.json` keeps two merges (two
//! readers, or a reader and `trace`) from running at once, and the merge gives the native
//! directory up (`proc.json` renamed) before it replaces the first file of the Python
//! process, so a merge cut short is never done twice: its trace is read as it was left.

use crate::event::{FLAG_INCOMPLETE, FLAG_NATIVE, FLAG_PYTHON};
use crate::meta::{FuncRecord, ProcMeta, PATCH_FILE};
use crate::reader::{stream_func_ids, FuncTables};
use crate::writer::{stream_file_name, StreamWriter, DEFAULT_WINDOW};
use crate::{Event, Process, ThreadStream, FUNCS_FILE, PROC_META_FILE};
use std::io::Write;
use std::path::{Path, PathBuf};
use streams::{merge_streams, Closing};

mod streams;

/// What a native directory's `proc.json` becomes once its merge has begun: the directory is
/// no longer a process of the trace.
const MERGED_META: &str = "proc.json.merged";

/// Merge every native directory recorded beside a Python process of the same image (same
/// pid and executable) into it, once that process has ended. Returns warnings (a pair that
/// could not be merged is left as two processes).
pub fn merge_extension_processes(root: &Path) -> Vec<String> {
    let mut warnings = Vec::new();
    let Ok(entries) = std::fs::read_dir(root) else { return warnings };
    let mut procs: Vec<(PathBuf, ProcMeta)> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with('p')) && p.is_dir())
        .filter_map(|p| {
            let text = crate::reader::read_document_text(&p.join(PROC_META_FILE), crate::reader::MAX_META_BYTES).ok()?;
            let meta: ProcMeta = serde_json::from_str(&text).ok()?;
            Some((p, meta))
        })
        .collect();
    procs.sort_by(|a, b| a.0.cmp(&b.0));
    for (ndir, n) in procs.iter().filter(|(_, m)| m.kind == "native") {
        let Some((pydir, _)) = procs.iter().find(|(d, p)| p.kind == "python" && p.pid == n.pid && p.exe == n.exe && d != ndir) else {
            continue;
        };
        if process_alive(n.pid) {
            continue;
        }
        if let Err(e) = merge_locked(pydir, ndir) {
            warnings.push(format!(
                "cannot merge the extension modules' calls ({}) into the Python process ({}): {e}; they show as a process of their own",
                ndir.display(),
                pydir.display()
            ));
        }
    }
    warnings
}

/// Whether process `pid` exists (a zombie counts).
pub fn process_alive(pid: u32) -> bool {
    let Ok(pid) = i32::try_from(pid) else { return false };
    if pid <= 0 {
        return false;
    }
    // SAFETY: signal 0 only checks that the process exists.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// One merge at a time per native directory: the lock is `proc.json`'s, held until the merge
/// ends (a merger that dies releases it).
fn merge_locked(pydir: &Path, ndir: &Path) -> std::io::Result<()> {
    let lock = match std::fs::File::open(ndir.join(PROC_META_FILE)) {
        Ok(f) => f,
        // Merged by someone else meanwhile.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    // SAFETY: flock on a descriptor we own.
    if unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&lock), libc::LOCK_EX) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    if !ndir.join(PROC_META_FILE).exists() {
        return Ok(());
    }
    let py = Process::open_with(pydir, FuncTables::Records).map_err(std::io::Error::other)?;
    let n = Process::open_with(ndir, FuncTables::Records).map_err(std::io::Error::other)?;
    merge_pair(&py, &n)
}

/// Merge `n` into `py`. Everything is written beside its destination first (names a reader
/// skips); then the native directory is given up, and the files are renamed into place.
fn merge_pair(py: &Process, n: &Process) -> std::io::Result<()> {
    let ids = stream_func_ids(&py.threads);
    let offset = py.funcs.iter().map(|r| r.id).chain(ids.iter().copied()).max().map_or(0, |m| m + 1);
    // The records: the Python process's table, then the native one's, past its ids.
    let funcs = py.dir.join(FUNCS_FILE);
    let mut text = match std::fs::read(&funcs) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(e),
    };
    if text.last().is_some_and(|&c| c != b'\n') {
        // A last line cut short (the process was killed while writing it): readers ignore it.
        text.push(b'\n');
    }
    for r in n.funcs.iter() {
        let rec = FuncRecord { id: r.id + offset, kind: r.kind.clone() };
        text.extend(serde_json::to_vec(&rec).map_err(std::io::Error::other)?);
        text.push(b'\n');
    }
    let mut moves: Vec<(PathBuf, PathBuf)> = Vec::new();
    let funcs_tmp = py.dir.join(".merge-funcs.jsonl.tmp");
    std::fs::File::create(&funcs_tmp)?.write_all(&text)?;
    moves.push((funcs_tmp, funcs));
    let mut seq = 1000u32;
    for t in &n.threads {
        let tmp = py.dir.join(format!(".merge-{}-{}.ev.tmp", t.header.tid, moves.len()));
        let _ = std::fs::remove_file(&tmp);
        match py.threads.iter().find(|p| p.header.tid == t.header.tid) {
            Some(p) => {
                let rule = if py.meta.native_closed_at_python_calls { Closing::AtPythonCalls } else { Closing::LookAhead };
                merge_streams(p, t, offset, rule, &tmp)?;
                moves.push((tmp, p.path.clone()));
            }
            None => {
                let path = loop {
                    let path = py.dir.join(stream_file_name(t.header.tid, seq));
                    seq += 1;
                    if !path.exists() {
                        break path;
                    }
                };
                copy_stream(t, offset, &tmp)?;
                moves.push((tmp, path));
            }
        }
    }
    let patch = n.dir.join(PATCH_FILE);
    if patch.exists() {
        moves.push((patch, py.dir.join(PATCH_FILE)));
    }
    // The point of no return: from here the native directory is no process of the trace.
    std::fs::rename(n.dir.join(PROC_META_FILE), n.dir.join(MERGED_META))?;
    // The records before the streams that name them.
    for (from, to) in moves {
        std::fs::rename(from, to)?;
    }
    std::fs::remove_dir_all(&n.dir)
}

fn events(t: &ThreadStream) -> std::io::Result<impl Iterator<Item = Event>> {
    // A damaged stream is read up to the damage, as the analyzer reads it.
    Ok(t.events().map_err(std::io::Error::other)?.map_while(Result::ok))
}

fn writer_for(path: &Path, a: &ThreadStream, b: Option<&ThreadStream>) -> std::io::Result<StreamWriter> {
    let flags = a.header.flags | b.map_or(0, |b| b.header.flags);
    let start = b.map_or(a.header.start_ns, |b| b.header.start_ns.min(a.header.start_ns));
    StreamWriter::create(
        path,
        (flags & (FLAG_PYTHON | FLAG_NATIVE | FLAG_INCOMPLETE)) | FLAG_NATIVE,
        a.header.pid,
        a.header.tid,
        start,
        DEFAULT_WINDOW,
    )
}

/// A native thread no Python code ran on (a thread an extension started): its stream, with
/// the ids moved past the Python ones.
fn copy_stream(t: &ThreadStream, offset: u32, path: &Path) -> std::io::Result<()> {
    let mut w = writer_for(path, t, None)?;
    for ev in events(t)? {
        match ev {
            Event::Call { func, ts } => w.call(func + offset, ts),
            Event::Resume { func, ts } => w.resume(func + offset, ts),
            Event::Return { ts } => w.ret(ts),
            Event::ThreadName(name) => w.thread_name(&name),
            Event::Line { func, line } => w.line(func + offset, line),
        }
    }
    w.finish();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Event::{Call, Return};

    /// A trace whose recorder did not merge (killed): a Python process and the native shim's
    /// directory of the same (ended) process. Returns the trace's root.
    fn unmerged_trace(d: &Path) -> PathBuf {
        use crate::meta::{FuncKind, TraceMeta};
        use crate::writer::{create_process_dir, write_proc_meta, FuncTableWriter};
        // A pid no process has: above the kernel's largest (2^22).
        let pid = (1 << 22) + 7;
        let meta = TraceMeta::for_tests(crate::meta::TRACE_FORMAT_VERSION, "python3", serde_json::json!({"native_ext": true}));
        std::fs::write(d.join(crate::META_FILE), serde_json::to_string(&meta).unwrap()).unwrap();
        for (kind, flags, events) in [
            ("python", FLAG_PYTHON, vec![Call { func: 0, ts: 10 }, Return { ts: 90 }]),
            ("native", FLAG_NATIVE, vec![Call { func: 0, ts: 20 }]),
        ] {
            let dir = create_process_dir(d, pid).unwrap();
            let m = ProcMeta::for_tests(pid, kind, "python3", "/usr/bin/python3");
            write_proc_meta(&dir, &m).unwrap();
            let ft = FuncTableWriter::create(&dir.join(FUNCS_FILE)).unwrap();
            let kind = match kind {
                "python" => FuncKind::Builtin { module: None, qualname: "report".into() },
                _ => FuncKind::Builtin { module: None, qualname: "weighted_sum".into() },
            };
            ft.append(&FuncRecord { id: 0, kind }).unwrap();
            let mut w =
                StreamWriter::create(&dir.join(stream_file_name(pid as u64, 0)), flags, pid, pid as u64, 0, DEFAULT_WINDOW).unwrap();
            for ev in events {
                match ev {
                    Call { func, ts } => w.call(func, ts),
                    _ => w.ret(90),
                }
            }
            w.finish();
        }
        d.to_path_buf()
    }

    #[test]
    fn a_reader_merges_an_unmerged_trace_once() {
        let d = tempfile::tempdir().unwrap();
        let root = unmerged_trace(d.path());
        let t = crate::reader::TraceDir::open(&root).unwrap();
        assert!(t.warnings.is_empty(), "{:?}", t.warnings);
        assert_eq!(t.processes.len(), 1, "merged into one process");
        let p = &t.processes[0];
        assert_eq!(p.funcs.iter().count(), 2);
        let got: Vec<Event> = p.threads[0].events().unwrap().map(Result::unwrap).collect();
        assert_eq!(got, [Call { func: 0, ts: 10 }, Call { func: 1, ts: 20 }, Return { ts: 90 }, Return { ts: 90 }]);
        // Nothing left to merge: opening it again changes nothing.
        let listing = |root: &Path| {
            let mut v: Vec<String> =
                std::fs::read_dir(root).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
            v.sort();
            v
        };
        let before = listing(&root);
        let t = crate::reader::TraceDir::open(&root).unwrap();
        assert_eq!((t.processes.len(), t.processes[0].funcs.iter().count()), (1, 2));
        assert_eq!(listing(&root), before);
    }

    #[test]
    fn a_merge_given_up_is_not_repeated_and_its_leftovers_are_not_streams() {
        let d = tempfile::tempdir().unwrap();
        let root = unmerged_trace(d.path());
        // A merge cut short after the point of no return: the native directory is no process,
        // a temporary stream lies in the Python one.
        let pid = (1u32 << 22) + 7;
        let ndir = root.join(format!("p{pid}.1"));
        std::fs::rename(ndir.join(PROC_META_FILE), ndir.join(MERGED_META)).unwrap();
        let pydir = root.join(format!("p{pid}"));
        std::fs::copy(pydir.join(stream_file_name(pid as u64, 0)), pydir.join(format!(".merge-{pid}-1.ev.tmp"))).unwrap();
        let t = crate::reader::TraceDir::open(&root).unwrap();
        assert_eq!(t.processes.len(), 1);
        assert_eq!(t.processes[0].threads.len(), 1, "the temporary file is not a stream");
        assert_eq!(t.processes[0].funcs.iter().count(), 1, "not merged again");
    }

    #[test]
    fn a_trace_recorded_without_native_ext_is_left_alone() {
        let d = tempfile::tempdir().unwrap();
        let root = unmerged_trace(d.path());
        let mut meta: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(root.join(crate::META_FILE)).unwrap()).unwrap();
        meta["options"] = serde_json::json!({});
        std::fs::write(root.join(crate::META_FILE), meta.to_string()).unwrap();
        assert_eq!(crate::reader::TraceDir::open(&root).unwrap().processes.len(), 2);
    }
}
