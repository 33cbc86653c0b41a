//! End-to-end tests of issue 14: a full disk never harms the target, a trace is untrusted
//! input (no huge allocation, no hang, no file printed that the run did not execute), nothing
//! of the user's is deleted, damage is reported, and a SIGTERM never orphans the target.
//! Each test runs the real `trace` and `slice` binaries; none may be killed by a signal.

use serde_json::Value;
use slice_trace_e2e::{cmd, python, run, scratch, texts};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A small tmpfs, unmounted when dropped. As root a failure to mount fails the test; when not
/// root the full-disk tests fail too, unless `SLICE_TEST_OPT_OUT` lists `root`.
struct SmallFs(tempfile::TempDir);

impl SmallFs {
    fn mount(size: &str) -> Option<SmallFs> {
        let d = scratch();
        let uid = run(Command::new("id").arg("-u"));
        if texts(&uid).0.trim() != "0" {
            slice_trace_e2e::missing("root", "not root, so no tmpfs can be mounted to fill up: the full-disk case needs root");
            return None;
        }
        let st =
            Command::new("mount").args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"]).arg(d.path()).status().expect("run mount");
        assert!(st.success(), "as root, `mount -t tmpfs -o size={size}` must work: {st}");
        Some(SmallFs(d))
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.0.path()).status();
    }
}

/// Run a command with a time limit: a hang fails the test instead of stalling the suite. Its
/// output is read while it runs (a full pipe would otherwise stop it and look like a hang).
fn run_limited(c: &mut Command, limit: Duration) -> Output {
    use std::io::Read;
    let mut child = c.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn");
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = r.read_to_end(&mut v);
            v
        })
    };
    let out = drain(Box::new(child.stdout.take().expect("stdout")));
    let err = drain(Box::new(child.stderr.take().expect("stderr")));
    let start = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait") {
            break st;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let st = child.wait().expect("wait");
            let o = Output { status: st, stdout: out.join().unwrap_or_default(), stderr: err.join().unwrap_or_default() };
            panic!("{c:?} did not finish within {limit:?} (a hang): {:?}", texts(&o));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output { status, stdout: out.join().unwrap_or_default(), stderr: err.join().unwrap_or_default() }
}

/// The process ended by itself (no signal, no abort), whatever its exit code.
fn no_signal(what: &str, o: &Output) {
    assert_eq!(o.status.signal(), None, "{what} was killed by a signal: {:?}", texts(o));
}

fn slice(args: &[&str]) -> Output {
    let o = run_limited(cmd("slice").args(args), Duration::from_secs(60));
    no_signal(&format!("slice {args:?}"), &o);
    o
}

fn trace_info(dir: &Path) -> Output {
    let o = run_limited(cmd("trace").arg("info").arg("--json").arg(dir), Duration::from_secs(60));
    no_signal("trace info", &o);
    o
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

const BUSY: &str = r#"import sys

def tick(i):
    return i & 3

def main(n):
    t = 0
    for i in range(n):
        t += tick(i)
    print("total", t)
    sys.exit(3)

main(int(sys.argv[1]))
"#;

/// Trace `BUSY` with `n` iterations into `out`, next to an untraced run for comparison.
fn trace_busy(dir: &Path, out: &Path, n: &str) -> Output {
    let script = dir.join("busy.py");
    std::fs::write(&script, BUSY).unwrap();
    let plain = run(Command::new(python()).arg(&script).arg(n));
    let o = run_limited(
        cmd("trace").current_dir(dir).arg("run").arg("-o").arg(out).arg("--").arg(python()).arg(&script).arg(n),
        Duration::from_secs(300),
    );
    no_signal("trace run", &o);
    assert_eq!(o.status.code(), Some(3), "the target's exit code passes through: {:?}", texts(&o));
    assert_eq!(o.stdout, plain.stdout, "the target ran to its end with the same output");
    o
}

#[test]
fn a_full_2m_disk_stops_the_recording_never_the_target_and_readers_survive() {
    let Some(fs) = SmallFs::mount("2m") else { return };
    let work = scratch();
    let out = fs.0.path().join("t.d");
    let o = trace_busy(work.path(), &out, "100000");
    let (_, err) = texts(&o);
    assert_eq!(err.matches("incomplete").count(), 1, "exactly one warning: {err}");
    assert!(err.contains("no space left"), "{err}");
    let meta: Value = serde_json::from_slice(&std::fs::read(out.join("meta.json")).unwrap()).unwrap();
    assert!(meta["incomplete"].as_str().unwrap().contains("no space left"), "{meta}");
    assert_eq!(meta["exit"]["code"], 3);
    let i = trace_info(&out);
    assert!(i.status.success(), "{:?}", texts(&i));
    let i: Value = serde_json::from_slice(&i.stdout).unwrap();
    assert!(i["meta"]["incomplete"].is_string(), "{i}");
    slice(&["tree", s(&out)]);
    slice(&["from-trace", s(&out), "-q", "why?"]);
}

#[test]
fn a_disk_filling_mid_run_keeps_what_fit_and_says_so_once() {
    let Some(fs) = SmallFs::mount("8m") else { return };
    let work = scratch();
    let out = fs.0.path().join("t.d");
    // About 9 MB of events: the first 4 MiB window fits, the second does not.
    let o = trace_busy(work.path(), &out, "3000000");
    let (_, err) = texts(&o);
    assert_eq!(err.matches("incomplete").count(), 1, "exactly one warning: {err}");
    assert!(err.contains("recording stopped early in 1 of 1 thread stream"), "{err}");
    let i = trace_info(&out);
    assert!(i.status.success(), "{:?}", texts(&i));
    let t = slice(&["tree", s(&out)]);
    let (tree, terr) = texts(&t);
    assert!(t.status.success(), "{terr}");
    // tick ran a million-odd times before the disk filled, and is in the tree with a count.
    let line = tree.lines().find(|l| l.contains("tick")).unwrap_or_else(|| panic!("tick missing from\n{tree}"));
    let count: u64 =
        line.split('×').nth(1).and_then(|c| c.split_whitespace().next()).and_then(|c| c.replace(',', "").parse().ok()).unwrap_or(0);
    assert!(count > 500_000 && count < 3_000_000, "{line}");
}

/// A small recorded Python run to damage: `app.py` with `helper` and `main`.
struct Fixture {
    _dir: tempfile::TempDir,
    work: PathBuf,
    trace: PathBuf,
    app: PathBuf,
}

const APP: &str = "def helper(x):\n    return x + 1\n\n\ndef main():\n    print(helper(1))\n\n\nmain()\n";

fn fixture() -> Fixture {
    let dir = scratch();
    let work = dir.path().to_path_buf();
    let app = work.join("app.py");
    std::fs::write(&app, APP).unwrap();
    let trace = work.join("t.d");
    let o = run(cmd("trace").current_dir(&work).arg("run").arg("-o").arg(&trace).arg("--").arg(python()).arg(&app));
    assert!(o.status.success(), "{:?}", texts(&o));
    Fixture { _dir: dir, work, trace, app }
}

fn main_proc_dir(trace: &Path) -> PathBuf {
    std::fs::read_dir(trace)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with('p') && p.join("proc.json").exists())
        .expect("a process directory")
}

/// Point the function table's records for `app.py` at `target`.
fn repoint(f: &Fixture, target: &Path) {
    let funcs = main_proc_dir(&f.trace).join("funcs.jsonl");
    let text = std::fs::read_to_string(&funcs).unwrap();
    let app = serde_json::to_string(s(&f.app)).unwrap();
    let to = serde_json::to_string(s(target)).unwrap();
    assert!(text.contains(&app));
    std::fs::write(&funcs, text.replace(&app, &to)).unwrap();
}

fn prompt(f: &Fixture) -> (String, String) {
    let o = slice(&["from-trace", s(&f.trace), "-q", "what runs?"]);
    assert!(o.status.success(), "{:?}", texts(&o));
    texts(&o)
}

#[test]
fn the_unmodified_fixture_prints_its_source() {
    let f = fixture();
    let (p, _) = prompt(&f);
    assert!(p.contains("def helper(x):\n    return x + 1"), "{p}");
}

#[test]
fn a_huge_function_id_is_an_error_not_an_allocation() {
    for id in ["4294967295", "100000000"] {
        let f = fixture();
        let funcs = main_proc_dir(&f.trace).join("funcs.jsonl");
        let mut text = std::fs::read_to_string(&funcs).unwrap();
        text.push_str(&format!("{{\"id\":{id},\"kind\":\"builtin\",\"qualname\":\"len\"}}\n"));
        std::fs::write(&funcs, text).unwrap();
        for o in [slice(&["tree", s(&f.trace)]), trace_info(&f.trace)] {
            let (_, err) = texts(&o);
            assert!(!o.status.success());
            assert!(err.contains(&format!("function id {id} is out of range")) && err.contains("funcs.jsonl"), "{err}");
        }
    }
}

#[test]
fn a_file_the_run_did_not_execute_is_never_printed() {
    let f = fixture();
    repoint(&f, Path::new("/etc/passwd"));
    std::fs::remove_file(f.trace.join("sources.json")).unwrap();
    let (p, _) = prompt(&f);
    assert!(!p.contains("root:"), "{p}");
    assert!(p.contains("source not shown: the trace has no sources.json"), "{p}");
    // With a sources.json that does not list it: the same.
    let f = fixture();
    repoint(&f, Path::new("/etc/passwd"));
    let (p, _) = prompt(&f);
    assert!(!p.contains("root:"), "{p}");
    assert!(p.contains("source not shown: /etc/passwd is not among the files the run executed"), "{p}");
}

#[test]
fn fifos_devices_and_binary_files_are_refused_without_blocking() {
    let fx = fixture();
    let fifo = fx.work.join("fifo.py");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let binary = fx.work.join("bin.py");
    std::fs::write(&binary, (0..=255u8).cycle().take(1 << 20).collect::<Vec<u8>>()).unwrap();
    for (target, why) in [
        (fifo.as_path(), "is a FIFO, not a source file"),
        (Path::new("/dev/zero"), "is a device, not a source file"),
        (binary.as_path(), "is not among the files the run executed"),
    ] {
        let f = fixture();
        repoint(&f, target);
        let (p, _) = prompt(&f);
        assert!(p.contains(&format!("source not shown: {} {why}", target.display())), "{target:?}: {p}");
        assert!(p.len() < 20_000, "{target:?}: no file content in the prompt ({} bytes)", p.len());
    }
}

#[test]
fn an_edit_with_size_and_mtime_restored_is_caught_by_the_hash() {
    let f = fixture();
    let md = std::fs::metadata(&f.app).unwrap();
    let edited = APP.replace("x + 1", "x - 1");
    assert_eq!(edited.len(), APP.len());
    std::fs::write(&f.app, edited).unwrap();
    let times = std::fs::FileTimes::new().set_modified(md.modified().unwrap()).set_accessed(md.accessed().unwrap());
    std::fs::File::options().write(true).open(&f.app).unwrap().set_times(times).unwrap();
    assert_eq!(std::fs::metadata(&f.app).unwrap().modified().unwrap(), md.modified().unwrap());
    let (p, _) = prompt(&f);
    assert!(!p.contains("x - 1"), "{p}");
    assert!(p.contains("source not shown: the file changed since the run"), "{p}");
}

#[test]
fn a_missing_or_empty_function_table_is_a_clear_warning() {
    for empty in [true, false] {
        let f = fixture();
        let funcs = main_proc_dir(&f.trace).join("funcs.jsonl");
        if empty {
            std::fs::write(&funcs, "").unwrap();
        } else {
            std::fs::remove_file(&funcs).unwrap();
        }
        let o = slice(&["tree", s(&f.trace)]);
        let (_, err) = texts(&o);
        let what = if empty { "is empty" } else { "is missing" };
        assert!(err.contains(&format!("funcs.jsonl: the function table {what}")), "{err}");
    }
}

#[test]
fn a_flipped_bit_in_a_stream_is_reported_with_the_file() {
    let f = fixture();
    let pdir = main_proc_dir(&f.trace);
    let ev = std::fs::read_dir(&pdir).unwrap().map(|e| e.unwrap().path()).find(|p| p.extension().is_some_and(|x| x == "ev")).unwrap();
    let mut bytes = std::fs::read(&ev).unwrap();
    let last = bytes.len() - 1;
    // The last byte is a return's tag or the last byte of a time delta: either way bit 6
    // changes a time, which only the header's totals can reveal.
    assert!(bytes[last] < 0x80, "{:#x}", bytes[last]);
    bytes[last] ^= 1 << 6;
    std::fs::write(&ev, bytes).unwrap();
    // Every reader that decodes the stream says so (`trace info` reads a closed stream's
    // totals without decoding it).
    let dump = run_limited(cmd("trace").arg("dump").arg(&f.trace), Duration::from_secs(60));
    no_signal("trace dump", &dump);
    for o in [slice(&["tree", s(&f.trace)]), dump] {
        let (out, err) = texts(&o);
        assert!(format!("{out}{err}").contains(&format!("{}: the events do not add up to the totals", ev.display())), "{out}\n{err}");
    }
}

#[test]
fn re_recording_keeps_the_users_files_and_an_empty_run_keeps_the_trace() {
    let f = fixture();
    std::fs::write(f.trace.join("notes.md"), "my notes").unwrap();
    let old_meta = std::fs::read(f.trace.join("meta.json")).unwrap();
    let old_procs: Vec<_> =
        std::fs::read_dir(&f.trace).unwrap().map(|e| e.unwrap().file_name()).filter(|n| n.to_string_lossy().starts_with('p')).collect();
    // A run that records nothing (a shell that runs no Python and no instrumented program).
    let script = f.work.join("nothing.sh");
    std::fs::write(&script, "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let o = run(cmd("trace").current_dir(&f.work).arg("run").arg("-o").arg(&f.trace).arg("--").arg(&script));
    assert!(o.status.success(), "{:?}", texts(&o));
    assert!(texts(&o).1.contains("the earlier trace in"), "{:?}", texts(&o));
    assert_eq!(std::fs::read(f.trace.join("meta.json")).unwrap(), old_meta);
    for p in &old_procs {
        assert!(f.trace.join(p).join("funcs.jsonl").exists());
    }
    // A run that records: the trace is replaced, the notes stay.
    let o = run(cmd("trace").current_dir(&f.work).arg("run").arg("-o").arg(&f.trace).arg("--").arg(python()).arg(&f.app));
    assert!(o.status.success(), "{:?}", texts(&o));
    assert_eq!(std::fs::read_to_string(f.trace.join("notes.md")).unwrap(), "my notes");
    assert_ne!(std::fs::read(f.trace.join("meta.json")).unwrap(), old_meta);
    let names: Vec<String> = std::fs::read_dir(&f.trace).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert!(names.iter().all(|n| !n.starts_with(".trace")), "no leftovers: {names:?}");
    let (p, _) = prompt(&f);
    assert!(p.contains("def helper(x):"), "{p}");
}

/// Target processes: those whose last argument is `argv`'s last (a unique marker), other
/// than `trace` itself (`trace` resolves the program to its full path, so only the marker
/// is compared).
fn processes_running(argv: &[&str]) -> Vec<u32> {
    let marker = argv.last().copied().unwrap_or_default();
    slice_trace_e2e::processes_where(|args| args.last() == Some(&marker.as_bytes()))
}

/// Start `trace run -- argv` recording into a scratch directory.
fn spawn_trace(argv: &[&str], out: &Path) -> std::process::Child {
    let mut c = cmd("trace");
    c.arg("run").arg("-q").arg("-o").arg(out).arg("--").args(argv).stdout(Stdio::null()).stderr(Stdio::null());
    c.spawn().unwrap()
}

#[test]
fn sigterm_at_any_moment_of_the_start_never_orphans_the_target() {
    let marker = format!("i14-marker-{}", std::process::id());
    let argv = [python(), "-c".into(), "import time; time.sleep(60)".into(), marker];
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    // Calibrate: how long after `trace` starts does the target's command line appear (the
    // end of the spawn, when `trace` used to be still without its handlers)?
    let mut seen = Vec::new();
    for _ in 0..3 {
        let out = scratch();
        let start = Instant::now();
        let mut child = spawn_trace(&argv, &out.path().join("t.d"));
        while processes_running(&argv).is_empty() {
            assert!(start.elapsed() < Duration::from_secs(30), "the target never started");
            std::thread::sleep(Duration::from_micros(100));
        }
        seen.push(start.elapsed());
        // SAFETY: kill on a child we spawned and have not reaped.
        unsafe { libc_kill(child.id() as i32, 15) };
        child.wait().unwrap();
        while !processes_running(&argv).is_empty() {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    seen.sort();
    let t = seen[1];
    // SIGTERM at moments from 15 ms before that to 5 ms after: before the spawn, while the
    // target is being started, and after `trace` waits. Wherever it lands, `trace` must end
    // and no target may outlive it.
    let mut forwarded = 0;
    for i in 0..80u32 {
        let delay = (t + Duration::from_micros(250) * i).saturating_sub(Duration::from_millis(15));
        let out = scratch();
        let mut child = spawn_trace(&argv, &out.path().join("t.d"));
        std::thread::sleep(delay);
        // SAFETY: kill on a child we spawned and have not reaped.
        unsafe { libc_kill(child.id() as i32, 15) };
        let st = child.wait().unwrap();
        if out.path().join("t.d").join("meta.json").exists() && st.signal() == Some(15) {
            forwarded += 1;
        }
        let mut left = processes_running(&argv);
        for _ in 0..50 {
            if left.is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
            left = processes_running(&argv);
        }
        for &p in &left {
            // SAFETY: kill a leftover the test started.
            unsafe { libc_kill(p as i32, 9) };
        }
        assert!(left.is_empty(), "after SIGTERM {delay:?} into the start (target seen at {t:?}), the target was orphaned: {left:?}");
    }
    assert!(forwarded > 0, "no SIGTERM landed after the target started");
}

extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, sig: i32) -> i32;
}

/// `trace run -q -o out -- argv`, started as `slice mcp` starts it: SIGTERM, SIGINT and SIGHUP
/// blocked (`trace` unblocks them once its handlers are in place), and, with `pending`, a
/// SIGTERM already sent to it before its exec.
fn trace_with_stop_signals_blocked(argv: &[&str], out: &Path, pending: bool) -> Command {
    use std::os::unix::process::CommandExt;
    let mut c = cmd("trace");
    c.args(["run", "-q", "-o"]).arg(out).arg("--").args(argv).stdin(Stdio::null());
    // SAFETY: only async-signal-safe calls between fork and exec, on locals.
    unsafe {
        c.pre_exec(move || {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            for s in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
                libc::sigaddset(&mut set, s);
            }
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            if pending {
                libc::kill(libc::getpid(), libc::SIGTERM);
            }
            Ok(())
        })
    };
    c
}

#[test]
fn a_sigterm_before_the_program_starts_leaves_a_readable_stopped_trace_and_starts_nothing() {
    let d = scratch();
    let out = d.path().join("t.d");
    let py = python();
    let o = trace_with_stop_signals_blocked(&[&py, "-c", "print('ran')"], &out, true).output().unwrap();
    let (stdout, stderr) = texts(&o);
    assert_eq!(o.status.signal(), Some(libc::SIGTERM), "{stderr}");
    assert_eq!(stdout, "", "the program was not started");
    assert_eq!(stderr, format!("trace: stopped by SIGTERM (15) before {py} was started; nothing was recorded\n"));
    let m: Value = serde_json::from_str(&std::fs::read_to_string(out.join("meta.json")).unwrap()).unwrap();
    assert_eq!(m["stopped"], serde_json::json!({"signal": 15, "killed": false}), "{m}");
    assert!(m.get("exit").is_none(), "{m}");
    assert_eq!(std::fs::read_to_string(out.join("sources.json")).unwrap().trim(), "{\n  \"files\": []\n}");
    let o = slice(&["tree", s(&out)]);
    let (_, err) = texts(&o);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        err,
        format!("slice: error: {}: the run was stopped (signal 15) before the program was started: nothing was recorded; record it again with `trace run`\n", out.display())
    );
}

#[test]
fn a_sigterm_at_any_moment_of_the_start_leaves_a_readable_stopped_trace() {
    let py = python();
    let argv = [py.as_str(), "-c", "import time\ndef wait():\n    time.sleep(30)\nwait()"];
    let mut started = 0;
    for i in 0..25u64 {
        let d = scratch();
        let out = d.path().join("t.d");
        let mut child = trace_with_stop_signals_blocked(&argv, &out, false).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
        std::thread::sleep(Duration::from_millis(i * 4));
        // SAFETY: kill on a child we spawned and have not reaped.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let t = Instant::now();
        let st = child.wait().unwrap();
        assert_eq!(st.signal(), Some(libc::SIGTERM), "SIGTERM {} ms into the start", i * 4);
        assert!(t.elapsed() < Duration::from_secs(3), "the program did not get the SIGTERM (blocked?): {:?}", t.elapsed());
        let m: Value = serde_json::from_str(
            &std::fs::read_to_string(out.join("meta.json")).unwrap_or_else(|e| panic!("SIGTERM {} ms into the start: {e}", i * 4)),
        )
        .unwrap();
        assert_eq!(m["stopped"], serde_json::json!({"signal": 15, "killed": false}), "{m}");
        if m.get("exit").is_some() {
            started += 1;
            assert_eq!(m["exit"]["signal"], 15, "{m}");
        }
    }
    assert!(started > 0, "no SIGTERM landed after the program started");
}
