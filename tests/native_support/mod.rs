//! Helpers shared by the native end-to-end tests (`native_trace.rs`, `native_symbolize.rs`):
//! build the C/C++ examples, record them with `trace run`, and read the recorded calls back
//! with the trace-format reader and the analyzer's symbolizer.
#![allow(dead_code)]

use analyzer::symbols::{resolve_process, Function};
use slice_trace_e2e::{cmd, root, run};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::Mutex;
use trace_format::{Event, TraceDir};

/// Build `examples/c` and `examples/cpp` with their Makefiles (once per test binary).
pub fn build_examples() {
    static BUILT: Mutex<bool> = Mutex::new(false);
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if *built {
        return;
    }
    for dir in ["examples/c", "examples/cpp"] {
        let out = std::process::Command::new("make").arg("-s").arg("-C").arg(root().join(dir)).output().expect("run make");
        assert!(out.status.success(), "make -C {dir} failed:\n{}", String::from_utf8_lossy(&out.stderr));
    }
    *built = true;
}

/// Compile `src` into `exe` with `cc` (`gcc`, `g++`) and `flags` (before `-o`), and `extra`
/// after the source (libraries); fails the test with the compiler's output if it fails.
pub fn compile(cc: &str, flags: &[&str], exe: &Path, src: &Path, extra: &[&str]) {
    let o = run(std::process::Command::new(cc).args(flags).arg("-o").arg(exe).arg(src).args(extra));
    assert!(o.status.success(), "{cc} failed: {}", String::from_utf8_lossy(&o.stderr));
}

pub fn example(rel: &str) -> PathBuf {
    root().join("examples").join(rel)
}

/// A program over a shared library of its own, built `gcc -g -O1` in `dir`: `lib_src` into
/// `dir/lib<name>.so` (`-fPIC -shared`) and `prog_src` into `dir/<exe>`, linked to it and
/// finding it beside itself (`$ORIGIN`). The library's and the program's paths.
pub fn build_with_library(dir: &Path, lib_src: &Path, name: &str, prog_src: &Path, exe: &str) -> (PathBuf, PathBuf) {
    let (lib, exe) = (dir.join(format!("lib{name}.so")), dir.join(exe));
    let o = run(std::process::Command::new("gcc").args(["-g", "-O1", "-fPIC", "-shared", "-o"]).arg(&lib).arg(lib_src));
    assert!(o.status.success(), "gcc failed: {:?}", slice_trace_e2e::texts(&o));
    let o = run(std::process::Command::new("gcc")
        .args(["-g", "-O1", "-o"])
        .arg(&exe)
        .arg(prog_src)
        .arg("-L")
        .arg(dir)
        .arg(format!("-l{name}"))
        .arg("-Wl,-rpath,$ORIGIN"));
    assert!(o.status.success(), "gcc failed: {:?}", slice_trace_e2e::texts(&o));
    (lib, exe)
}

/// `examples/c/dlplugin` built `gcc -g -O1` in `dir`: `plugin.so` (`-fPIC -shared`) and
/// `host`, which loads it with `dlopen`. The plugin's and the host's paths.
pub fn build_dlplugin(dir: &Path) -> (PathBuf, PathBuf) {
    let src = example("c/dlplugin");
    let (plugin, host) = (dir.join("plugin.so"), dir.join("host"));
    let o = run(std::process::Command::new("gcc").args(["-g", "-O1", "-fPIC", "-shared", "-o"]).arg(&plugin).arg(src.join("plugin.c")));
    assert!(o.status.success(), "gcc failed: {:?}", slice_trace_e2e::texts(&o));
    let o = run(std::process::Command::new("gcc").args(["-g", "-O1", "-o"]).arg(&host).arg(src.join("host.c")).arg("-ldl"));
    assert!(o.status.success(), "gcc failed: {:?}", slice_trace_e2e::texts(&o));
    (plugin, host)
}

/// That `lib` exports `exported` and that `helpers`, its static functions, are all inlined into
/// it: no symbol of their own, one `DW_TAG_inlined_subroutine` each.
pub fn assert_helpers_inlined(lib: &Path, exported: &str, helpers: &[&str]) {
    let syms = slice_trace_e2e::run_ok(std::process::Command::new("nm").arg(lib));
    assert!(syms.contains(&format!(" T {exported}")), "{syms}");
    for h in helpers {
        assert!(!syms.contains(&format!(" {h}")), "{h} has a symbol of its own:\n{syms}");
    }
    let dwarf = slice_trace_e2e::run_ok(std::process::Command::new("readelf").arg("--debug-dump=info").arg(lib));
    assert_eq!(dwarf.matches("DW_TAG_inlined_subroutine").count(), helpers.len(), "{dwarf}");
}

/// `trace run -o <dir> -- <prog> <args>`, from the example's directory.
pub fn trace(dir: &Path, prog: &Path, args: &[&str]) -> Output {
    let mut c = cmd("trace");
    c.arg("run").arg("-o").arg(dir).arg("--").arg(prog).args(args);
    c.current_dir(prog.parent().unwrap_or(&root()));
    run(&mut c)
}

/// One call as seen in a thread: nesting depth (1 = outermost) and function.
#[derive(Debug, Clone)]
pub struct Call {
    pub depth: usize,
    pub func: u32,
    pub parent: Option<u32>,
    /// A suspended frame opened again (the resume marker), not a new call.
    pub resume: bool,
}

pub struct Thread {
    pub tid: u64,
    pub calls: Vec<Call>,
    /// Open calls left at the end of the stream (a crash or `_exit`).
    pub open_at_end: usize,
}

pub struct Proc {
    pub dir: PathBuf,
    pub meta: trace_format::ProcMeta,
    pub funcs: Vec<Function>,
    pub warnings: Vec<String>,
    pub threads: Vec<Thread>,
}

impl Proc {
    pub fn name(&self, id: u32) -> &str {
        &self.funcs[id as usize].qualname
    }

    /// The function whose qualified name is `q` (panics with the list if there is none).
    pub fn func(&self, q: &str) -> &Function {
        self.funcs
            .iter()
            .find(|f| f.qualname == q)
            .unwrap_or_else(|| panic!("no function {q:?} in {:?}", self.funcs.iter().map(|f| &f.qualname).collect::<Vec<_>>()))
    }

    /// Number of calls to `q` over all threads (resumes are not calls).
    pub fn count(&self, q: &str) -> usize {
        self.threads.iter().flat_map(|t| &t.calls).filter(|c| !c.resume && self.name(c.func) == q).count()
    }

    /// Number of resumes of frames of `q` over all threads.
    pub fn resumes(&self, q: &str) -> usize {
        self.threads.iter().flat_map(|t| &t.calls).filter(|c| c.resume && self.name(c.func) == q).count()
    }

    /// Distinct direct callees of `q` over all threads.
    pub fn callees(&self, q: &str) -> Vec<String> {
        let mut v: Vec<String> = self
            .threads
            .iter()
            .flat_map(|t| &t.calls)
            .filter(|c| c.parent.is_some_and(|p| self.name(p) == q))
            .map(|c| self.name(c.func).to_string())
            .collect();
        v.sort();
        v.dedup();
        v
    }

    /// The call sequence of a thread as `depth:name` strings (`depth:+name` for a resume).
    pub fn sequence(&self, t: usize) -> Vec<String> {
        self.threads[t].calls.iter().map(|c| format!("{}:{}{}", c.depth, if c.resume { "+" } else { "" }, self.name(c.func))).collect()
    }
}

/// Read a trace: every process, its resolved functions and its threads' calls.
pub fn load(dir: &Path) -> Vec<Proc> {
    let trace = TraceDir::open(dir).unwrap_or_else(|e| panic!("cannot open trace {}: {e}", dir.display()));
    let mut out = Vec::new();
    for p in &trace.processes {
        let (funcs, warnings) = resolve_process(p);
        let mut threads = Vec::new();
        for s in &p.threads {
            let mut calls = Vec::new();
            let mut stack: Vec<u32> = Vec::new();
            for ev in s.events().expect("events") {
                match ev.unwrap_or_else(|e| panic!("{}: {e}", s.path.display())) {
                    Event::Call { func, .. } => {
                        calls.push(Call { depth: stack.len() + 1, func, parent: stack.last().copied(), resume: false });
                        stack.push(func);
                    }
                    Event::Resume { func, .. } => {
                        calls.push(Call { depth: stack.len() + 1, func, parent: stack.last().copied(), resume: true });
                        stack.push(func);
                    }
                    Event::Return { .. } => {
                        stack.pop();
                    }
                    Event::ThreadName(_) | Event::Line { .. } => {}
                }
            }
            threads.push(Thread { tid: s.header.tid, calls, open_at_end: stack.len() });
        }
        out.push(Proc { dir: p.dir.clone(), meta: p.meta.clone(), funcs, warnings, threads });
    }
    out
}

/// The 1-based line of the first line of `file` that contains `needle`, and the line of
/// the first `}` at column 0 after it (the end of a top-level function).
pub fn source_span(file: &Path, needle: &str) -> (u32, u32) {
    let text = std::fs::read_to_string(file).expect("read source");
    let lines: Vec<&str> = text.lines().collect();
    let i = lines.iter().position(|l| l.contains(needle)).unwrap_or_else(|| panic!("{needle:?} not in {}", file.display()));
    let j = (i..lines.len()).find(|&j| lines[j] == "}").expect("closing brace");
    (i as u32 + 1, j as u32 + 1)
}

/// A Rust CLI from crates.io (hexyl 0.16.0, about 30 s to build on 2 cores), built by the
/// test set-up once (cached under target/rust-cli) as a release build with `debug = 1`, not
/// instrumented, recorded with entry patching.
pub fn hexyl() -> PathBuf {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let root = slice_trace_e2e::target_dir().join("rust-cli");
    let exe = root.join("bin/hexyl");
    if !exe.is_file() {
        let out = slice_trace_e2e::run(
            std::process::Command::new("cargo")
                .args(["install", "hexyl", "--version", "0.16.0", "--locked", "--root"])
                .arg(&root)
                .env("CARGO_PROFILE_RELEASE_DEBUG", "1")
                .env("CARGO_TARGET_DIR", root.join("build")),
        );
        assert!(out.status.success(), "cargo install hexyl (needs crates.io): {:?}", slice_trace_e2e::texts(&out));
    }
    exe
}

/// A stand-in for `trace run`'s lists listener: answers every request `none` (no list) on its
/// own thread and keeps the request lines, until [`StandInListener::requests`].
pub struct StandInListener {
    done: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<Vec<String>>,
}

impl StandInListener {
    /// Answer on `listener` (non-blocking).
    pub fn answer_none(listener: std::os::unix::net::UnixListener) -> StandInListener {
        use std::io::{BufRead, Write};
        use std::sync::atomic::Ordering;
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let ended = done.clone();
        let thread = std::thread::spawn(move || {
            let mut asked = Vec::new();
            loop {
                match listener.accept() {
                    Ok((c, _)) => {
                        c.set_nonblocking(false).unwrap();
                        let mut line = String::new();
                        std::io::BufReader::new(&c).read_line(&mut line).unwrap();
                        (&c).write_all(b"none\n").unwrap();
                        asked.push(line);
                    }
                    // Every connection of the program is taken before it is seen to have ended.
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock && ended.load(Ordering::Acquire) => break,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(std::time::Duration::from_millis(5)),
                    Err(e) => panic!("{e}"),
                }
            }
            asked
        });
        StandInListener { done, thread }
    }

    /// The request lines received, once every connection made so far has been answered.
    pub fn requests(self) -> Vec<String> {
        self.done.store(true, std::sync::atomic::Ordering::Release);
        self.thread.join().unwrap()
    }
}
