//! Inline and line probes for the libraries a program loads by `dlopen` (a plugin, a module a C
//! program opens at run time; docs/native-recording.md, "Inlined functions"). Their lists cannot
//! be known before the run, and reading DWARF inside every traced process is not an option (a
//! shell or `make` loads the shim too). So `trace run` lists them during the run, when they are
//! loaded:
//!
//! - **During the run** ([`serve`]): `trace run` listens on a unix socket in a private
//!   temporary directory, named to the run's processes by
//!   [`trace_format::probes::ENV_LISTS_SOCKET`]. When the loader's hook inside `dlopen` patches
//!   a new object of the program's own (not a system library), the shim asks for its lists
//!   (shims/native/src/ask.rs: one connection per request, one line naming the file by path,
//!   device, inode, size and time) and waits, bounded. Each request is answered by a thread of
//!   its own: the lists (inline probes, and with `--lines` line probes) are found in the per-user
//!   cache or computed (`inline_probes::cached_probe_list`, `line_probes::cached_line_list`:
//!   keyed by path, size and time, a changed object never uses a stale list), appended to
//!   `inline-probes-libs.json` and `line-probes-libs.json` (appended: a list's index there names
//!   its `lines-lib-<k>.bin`, which earlier processes may be writing), and then the answer is
//!   sent; the shim plants them as it plants the `DT_NEEDED` libraries', before the object's
//!   constructors run. A second process loading the same object finds its lists there already.
//!   A shim that waits too long (`SLICE_TRACE_LISTS_TIMEOUT_MS`, 5 s by default) carries on
//!   without probes and `patch.json` says so (`unlisted`); the list is still computed and cached,
//!   so the next run gets it at once.
//! - **After the run** ([`after_run`]), from each process's `patch.json`: the non-system objects
//!   loaded by `dlopen`, patched, that got no inline probes, are said in
//!   `inline-probes-dlopened.json` with what is known of their list (its entries, or none) and
//!   why the shim had none (`unlisted`), so that the prompt's note gives the reason for each.
//!
//! Earlier versions remembered, per program, the objects its runs loaded by `dlopen`, and gave
//! their lists to the next run only: the first run of a program, and any run of another program
//! loading the same plugin, had no probes there. Answering during the run supersedes that record.
//!
//! The same request comes from the shim's constructor in a program the recorded one started
//! (`sh -c ./prog`, a launcher that forks and execs, `make run`): for its executable and its
//! libraries of its own, which no list named before the run (shims/native/src/objects.rs,
//! `list_at_start`). Each answer is remembered per file (device, inode, size, time and path),
//! so a program a script starts a hundred times is listed once and then answered from memory.
//!
//! A process that loads nothing by `dlopen`, or only system libraries, and whose own objects
//! are listed never connects; neither does a system program (never patched). The listener
//! costs `trace run` one thread blocked in `accept`. It listens whenever the run's native
//! programs are patched: the recorded program's, or those a script or a system launcher
//! starts.

use std::io::{BufRead, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use trace_format::meta::{DlopenedList, InlineProbeList, PatchReport, PATCH_FILE};
use trace_format::probes::{self, ListRequest, ProbeKind, LISTED, NOT_LISTED};

/// A record, or a `patch.json`, is read only up to this size.
const MAX_DOC: u64 = 16 << 20;

/// A request line is read only up to this size (a path is at most 4096 bytes).
const MAX_REQUEST: u64 = 8 << 10;

/// How long a connection may take to send its request, and to take its answer.
const IO_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// What the threads answering requests share.
struct Lists {
    /// The trace directory, where the libraries' list files are.
    out: PathBuf,
    inline: bool,
    lines: bool,
    /// Held while a list file is read and rewritten (every writer during the run is here).
    files: Mutex<()>,
    /// The answers given so far, by the file asked about (device, inode, size, time, path): a
    /// program started a hundred times by a script, or a library every process of a run loads,
    /// is listed (or found to have no list) once, and asked about again at the cost of a
    /// look-up, without reading the list files.
    answered: Mutex<std::collections::HashMap<FileKey, bool>>,
}

/// A file asked about: its device, inode, size, time (ns) and path, as a request names it.
type FileKey = (u64, u64, u64, i128, String);

/// `trace run`'s listener for the lists of objects loaded by `dlopen` (see the module's
/// description), stopped by [`Server::stop`] (or when dropped).
pub struct Server {
    /// The private directory holding the socket (removed when dropped).
    dir: Option<tempfile::TempDir>,
    socket: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Listen for the lists of the objects the run's processes load by `dlopen`, to be written into
/// the trace directory `out`: inline-probe lists (`inline`), line-probe lists (`lines`). `Err`
/// when no socket could be made (the run then goes on without: those objects get no probes).
pub fn serve(out: &Path, inline: bool, lines: bool) -> std::io::Result<Server> {
    // A private directory (0700): no other user can connect. Short, as a socket's path must be.
    let dir = tempfile::Builder::new().prefix("slice-trace-").tempdir()?;
    let socket = dir.path().join("lists.sock");
    let listener = UnixListener::bind(&socket)?;
    // Taken only when `poll` says a connection waits; one that went away meanwhile is not waited for.
    listener.set_nonblocking(true)?;
    let stop = Arc::new(AtomicBool::new(false));
    let lists = Arc::new(Lists { out: out.to_path_buf(), inline, lines, files: Mutex::new(()), answered: Mutex::default() });
    let stopped = stop.clone();
    // Every signal blocked in the threads (they inherit the mask they are created with): the
    // signals `trace` forwards to the program are handled by the thread that waits for it.
    let thread =
        with_signals_blocked(|| std::thread::Builder::new().name("lists".into()).spawn(move || accept(&listener, &stopped, &lists)))?;
    Ok(Server { dir: Some(dir), socket, stop, thread: Some(thread) })
}

impl Server {
    /// The socket's path, for [`trace_format::probes::ENV_LISTS_SOCKET`].
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Stop listening, once every request taken is answered (so that the list files are
    /// final), and remove the socket.
    pub fn stop(mut self) {
        self.shut();
    }

    fn shut(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            // Wakes `accept`, which sees `stop`.
            let _ = UnixStream::connect(&self.socket);
            let _ = t.join();
        }
        self.dir.take();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shut();
    }
}

/// Run `f` with every signal blocked in this thread, then restore the mask.
fn with_signals_blocked<T>(f: impl FnOnce() -> T) -> T {
    // SAFETY: sets we own; the old mask is put back below.
    let old = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_BLOCK, &all, &mut old);
        old
    };
    let r = f();
    // SAFETY: the mask saved above.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) };
    r
}

/// Take connections until `stop`; each is answered by a thread of its own, all joined before
/// this returns. [`Server::stop`] wakes it with a connection of its own; should that fail (the
/// socket's file removed meanwhile), it sees `stop` within [`POLL_MS`].
fn accept(listener: &UnixListener, stop: &AtomicBool, lists: &Lists) {
    use std::os::fd::AsRawFd;
    std::thread::scope(|s| {
        while !stop.load(Ordering::Acquire) {
            let mut p = libc::pollfd { fd: listener.as_raw_fd(), events: libc::POLLIN, revents: 0 };
            // SAFETY: one pollfd we own, for the listener's descriptor, open while it lives.
            if unsafe { libc::poll(&mut p, 1, POLL_MS) } <= 0 {
                continue;
            }
            match listener.accept() {
                Ok(_) if stop.load(Ordering::Acquire) => break,
                Ok((c, _)) => {
                    s.spawn(move || answer(lists, c));
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                // Out of descriptors or memory: try again shortly.
                Err(_) => std::thread::sleep(std::time::Duration::from_millis(10)),
            }
        }
    });
}

/// How often the listener looks at whether it is to stop, in milliseconds, when nothing wakes it.
const POLL_MS: libc::c_int = 500;

/// Read one request from `c`, make its lists and answer.
fn answer(lists: &Lists, c: UnixStream) {
    let _ = c.set_nonblocking(false);
    let _ = c.set_read_timeout(Some(IO_TIMEOUT));
    let _ = c.set_write_timeout(Some(IO_TIMEOUT));
    let mut line = String::new();
    let Ok(mut reader) = c.try_clone().map(|r| std::io::BufReader::new(std::io::Read::take(r, MAX_REQUEST))) else { return };
    if reader.read_line(&mut line).is_err() {
        return;
    }
    let reply = match ListRequest::parse(&line) {
        Some(req) if remembered(lists, &req) => LISTED,
        _ => NOT_LISTED,
    };
    // The shim may have stopped waiting (its process went on without probes).
    let _ = (&c).write_all(format!("{reply}\n").as_bytes());
}

/// [`list`], answered from what was answered before for the same file when it was asked about
/// already (the file's identity is checked again by the shim when it plants: a list is only
/// ever planted in the file it was made from).
fn remembered(lists: &Lists, req: &ListRequest) -> bool {
    let key: FileKey = (req.dev, req.ino, req.size, req.mtime_ns, req.path.clone());
    let known = lists.answered.lock().unwrap_or_else(|e| e.into_inner()).get(&key).copied();
    if let Some(known) = known {
        return known;
    }
    let listed = list(lists, req);
    lists.answered.lock().unwrap_or_else(|e| e.into_inner()).insert(key, listed);
    listed
}

/// Whether `l` is the list of the file `req` names.
fn is_for(l: &InlineProbeList, req: &ListRequest) -> bool {
    l.object == req.path && l.size == req.size && l.mtime_ns == req.mtime_ns
}

/// How an object's list of one kind is made (from the cache, else from its DWARF).
type MakeList = fn(&Path) -> Option<InlineProbeList>;

/// Make sure the lists of the object `req` names are in the libraries' list files: true when
/// at least one is there (false: the file is no longer the one named, or has no list).
fn list(lists: &Lists, req: &ListRequest) -> bool {
    use std::os::unix::fs::MetadataExt;
    let path = Path::new(&req.path);
    let Ok(m) = std::fs::metadata(path) else { return false };
    let mtime_ns = m.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok()).map(|d| d.as_nanos() as i128);
    if (m.dev(), m.ino(), m.len(), mtime_ns) != (req.dev, req.ino, req.size, Some(req.mtime_ns)) {
        return false;
    }
    let kinds: [(bool, ProbeKind, MakeList); 2] = [
        (lists.inline, ProbeKind::Inline, crate::inline_probes::cached_probe_list),
        (lists.lines, ProbeKind::Lines, crate::line_probes::cached_line_list),
    ];
    let mut any = false;
    for (kind, make) in kinds.into_iter().filter(|k| k.0).map(|k| (k.1, k.2)) {
        let file = lists.out.join(kind.libraries_file());
        // Listed already (another process loaded it; or a `DT_NEEDED` library loaded again).
        let listed = || probes::read_lists(&file).unwrap_or_default();
        if listed_in(&lists.files, &listed, req) {
            any = true;
            continue;
        }
        // Computed (or read from the cache) with no lock held: other requests go on meanwhile.
        let Some(l) = make(path).filter(|l| is_for(l, req)) else { continue };
        let _held = lists.files.lock().unwrap_or_else(|e| e.into_inner());
        let mut all = listed();
        if !all.iter().any(|o| is_for(o, req)) {
            all.push(l);
            if let Err(e) = crate::run::write_json_compact_atomic(&file, &all) {
                eprintln!("trace: cannot list {} for its probes ({e:#})", req.path);
                continue;
            }
        }
        any = true;
    }
    any
}

/// Whether the lists `read` (under `files`) hold the list of the object `req` names.
fn listed_in(files: &Mutex<()>, read: &dyn Fn() -> Vec<InlineProbeList>, req: &ListRequest) -> bool {
    let _held = files.lock().unwrap_or_else(|e| e.into_inner());
    read().iter().any(|l| is_for(l, req))
}

fn read_json<T: serde::de::DeserializeOwned>(file: &Path) -> Option<T> {
    use std::io::Read;
    let f = std::fs::File::open(file).ok()?;
    let mut bytes = Vec::new();
    f.take(MAX_DOC).read_to_end(&mut bytes).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// After the run whose trace directory is `out` (see the module's description): the non-system
/// objects its processes loaded by `dlopen` that got no inline probes are said in
/// `inline-probes-dlopened.json`, each with its list (computed now if need be, and cached) and
/// why the shim had none.
pub fn after_run(out: &Path) {
    let mut unprobed: Vec<DlopenedList> = Vec::new();
    let Ok(entries) = std::fs::read_dir(out) else { return };
    let mut listed: Option<Vec<InlineProbeList>> = None;
    for e in entries.filter_map(Result::ok) {
        if !e.file_name().to_str().is_some_and(|n| n.starts_with('p')) {
            continue;
        }
        let Some(report) = read_json::<PatchReport>(&e.path().join(PATCH_FILE)) else { continue };
        for o in report.objects.iter().filter(|o| o.dlopened && o.patched > 0 && o.skipped.is_none()) {
            if o.inline_probes.is_some() || unprobed.iter().any(|u| u.object == o.path) {
                continue;
            }
            let list = crate::inline_probes::cached_probe_list(Path::new(&o.path));
            let listed =
                listed.get_or_insert_with(|| probes::read_lists(&out.join(ProbeKind::Inline.libraries_file())).unwrap_or_default());
            let had_list = list.as_ref().is_some_and(|l| listed.contains(l));
            unprobed.push(DlopenedList {
                object: o.path.clone(),
                listed: list.map(|l| l.offsets.len() as u64),
                had_list,
                unlisted: o.unlisted,
            });
        }
    }
    if !unprobed.is_empty() {
        unprobed.sort_by(|a, b| a.object.cmp(&b.object));
        if let Err(e) = super::run::write_json_atomic(&out.join(trace_format::meta::DLOPENED_INLINE_PROBES_FILE), &unprobed) {
            eprintln!("trace: cannot write what became of the dlopen'd libraries' inline probes ({e:#})");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    /// Ask `server` for the object at `path` as the shim does: the answer line.
    fn ask(server: &Server, path: &Path, size_delta: u64) -> String {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(path).unwrap();
        let mtime_ns = m.modified().unwrap().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as i128;
        let req =
            ListRequest { dev: m.dev(), ino: m.ino(), size: m.len() + size_delta, mtime_ns, path: path.to_string_lossy().into_owned() };
        let mut c = UnixStream::connect(server.socket()).unwrap();
        c.write_all(req.line().unwrap().as_bytes()).unwrap();
        let mut a = String::new();
        c.read_to_string(&mut a).unwrap();
        a
    }

    /// A request gets the object's lists appended to the libraries' list files before the
    /// answer, once however often it is asked, after the lists already there; a request naming
    /// another file than the one at the path (its size changed) gets none; a line that is not a
    /// request is answered too. Stopping waits for the answers and removes the socket.
    #[test]
    fn requests_append_each_objects_lists_once_before_answering() {
        let d = tempfile::tempdir().unwrap();
        let src = d.path().join("lib.c");
        std::fs::write(&src, "static long sq(long n) { return n * n + 1; }\nlong f(long n) { return n > 0 ? sq(n) : 0; }\n").unwrap();
        let lib = d.path().join("lib.so");
        let st =
            std::process::Command::new("cc").args(["-g", "-O1", "-fPIC", "-shared", "-o"]).arg(&lib).arg(&src).status().expect("run cc");
        assert!(st.success());
        let lib = lib.canonicalize().unwrap();
        let out = d.path().join("t.d");
        std::fs::create_dir(&out).unwrap();
        let before = InlineProbeList { object: "/earlier.so".into(), ..Default::default() };
        crate::run::write_json_atomic(&out.join(ProbeKind::Lines.libraries_file()), &vec![before.clone()]).unwrap();
        let server = serve(&out, true, true).unwrap();
        let socket = server.socket().to_path_buf();
        assert_eq!(ask(&server, &lib, 1), "none\n", "another file than the one at the path");
        assert!(!out.join(ProbeKind::Inline.libraries_file()).exists());
        let mut c = UnixStream::connect(&socket).unwrap();
        c.write_all(b"not a request\n").unwrap();
        let mut a = String::new();
        c.read_to_string(&mut a).unwrap();
        assert_eq!(a, "none\n");
        assert_eq!(ask(&server, &lib, 0), "listed\n");
        assert_eq!(ask(&server, &lib, 0), "listed\n");
        let name = lib.to_str().unwrap();
        let lines = probes::read_lists(&out.join(ProbeKind::Lines.libraries_file())).unwrap();
        assert_eq!(
            lines.iter().map(|l| l.object.as_str()).collect::<Vec<_>>(),
            ["/earlier.so", name],
            "appended once, after the list there"
        );
        let inline = probes::read_lists(&out.join(ProbeKind::Inline.libraries_file())).unwrap();
        assert_eq!(inline.iter().map(|l| l.object.as_str()).collect::<Vec<_>>(), [name]);
        assert!(!inline[0].offsets.is_empty(), "sq is inlined into f");
        // Asked again (a program a script starts once more), it is answered from memory: the
        // list files are not read or written again.
        std::fs::remove_file(out.join(ProbeKind::Inline.libraries_file())).unwrap();
        assert_eq!(ask(&server, &lib, 0), "listed\n");
        assert_eq!(ask(&server, &lib, 1), "none\n");
        assert!(!out.join(ProbeKind::Inline.libraries_file()).exists(), "answered from memory");
        server.stop();
        assert!(!socket.exists());
        assert!(UnixStream::connect(&socket).is_err());
    }

    /// A listener whose socket's file was removed (its wake-up connection fails) still stops,
    /// within its poll.
    #[test]
    fn a_listener_stops_though_its_socket_file_is_gone() {
        let d = tempfile::tempdir().unwrap();
        let server = serve(d.path(), true, false).unwrap();
        std::fs::remove_file(server.socket()).unwrap();
        let start = std::time::Instant::now();
        server.stop();
        assert!(start.elapsed() < std::time::Duration::from_secs(3), "{:?}", start.elapsed());
    }
}
