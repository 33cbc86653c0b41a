//! End-to-end tests of how `trace run` launches and ends the program (issue 25): the program
//! runs in a process group of its own; a stop signal sent to `trace` reaches that group, which
//! is killed after a grace period, and the trace is finished all the same (nothing left in
//! /tmp); `#!` lines are read as the kernel and GNU env read them; a NUL byte in an argument is
//! a clear error; streams that processes left unclosed are cut to what they hold.

use serde_json::{json, Value};
use slice_trace_e2e::{bin, cmd, python, run, scratch, texts};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, sig: i32) -> i32;
    /// signal(2); handler 0 is SIG_DFL.
    #[link_name = "signal"]
    fn libc_signal(sig: i32, handler: usize) -> usize;
}

const SIGINT: i32 = 2;
const SIGQUIT: i32 = 3;
const SIG_DFL: usize = 0;
const SIGKILL: i32 = 9;
const SIGTERM: i32 = 15;

fn kill(pid: u32, sig: i32) {
    // SAFETY: kill(2) has no memory effects.
    unsafe { libc_kill(pid as i32, sig) };
}

/// Wait for `child` at most `limit`; on time-out kill it (and the processes named by
/// `marker`) and fail.
fn wait_within(child: &mut Child, limit: Duration, what: &str, marker: &str) -> ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st;
        }
        if start.elapsed() > limit {
            kill(child.id(), SIGKILL);
            let _ = child.wait();
            for p in processes_with(marker) {
                kill(p, SIGKILL);
            }
            panic!("{what}: still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Processes whose command line holds `marker` (other than `trace` itself).
fn processes_with(marker: &str) -> Vec<u32> {
    slice_trace_e2e::processes_where(|args| args.contains(&marker.as_bytes()))
}

/// Wait up to 5 s for the processes named by `marker` to be gone; kill and fail otherwise.
fn assert_none_left(marker: &str, what: &str) {
    let start = Instant::now();
    let mut left = processes_with(marker);
    while !left.is_empty() && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
        left = processes_with(marker);
    }
    for &p in &left {
        kill(p, SIGKILL);
    }
    assert!(left.is_empty(), "{what}: processes left running (orphaned): {left:?}");
}

fn read_json(p: &Path) -> Value {
    let text = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The `slice-trace-rt-*` runtime directories in `tmp`.
fn runtime_dirs(tmp: &Path) -> Vec<String> {
    std::fs::read_dir(tmp)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("slice-trace-rt-"))
        .collect()
}

/// A finished trace: `sources.json`, the exit status in `meta.json`, no reserve file left.
fn assert_finished(dir: &Path, what: &str) -> Value {
    assert!(dir.join("sources.json").is_file(), "{what}: no sources.json in {}", dir.display());
    assert!(!dir.join(".trace-reserve").exists(), "{what}: the 1 MiB reserve was left in {}", dir.display());
    let meta = read_json(&dir.join("meta.json"));
    assert!(meta.get("exit").is_some(), "{what}: no exit status in meta.json: {meta}");
    assert!(meta.get("end_unix_ms").is_some(), "{what}: no end in meta.json: {meta}");
    meta
}

/// A Python program that ignores SIGTERM, and a child of it that does too, both calling
/// functions for a minute; `marker` is their last argument.
fn stubborn_program(dir: &Path) -> PathBuf {
    let p = dir.join("stubborn.py");
    std::fs::write(
        &p,
        "import os, signal, sys, time\n\
         signal.signal(signal.SIGTERM, signal.SIG_IGN)\n\
         def work():\n    time.sleep(0.01)\n\
         print('started', flush=True)\n\
         os.fork()\n\
         for _ in range(6000):\n    work()\n",
    )
    .unwrap();
    p
}

/// One JSON-RPC session with `slice mcp`: initialize, then one `tools/call`; returns the
/// call's answer. The server (and so `trace`) gets `tmp` as its TMPDIR.
fn mcp_call(tool: &str, arguments: Value, tmp: &Path, cwd: &Path) -> Value {
    let mut server = Command::new(bin("slice"))
        .arg("mcp")
        .current_dir(cwd)
        .env("TMPDIR", tmp)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = server.stdin.take().unwrap();
    let mut stdout = BufReader::new(server.stdout.take().unwrap());
    let send = |stdin: &mut std::process::ChildStdin, v: Value| {
        stdin.write_all(format!("{v}\n").as_bytes()).unwrap();
        stdin.flush().unwrap();
    };
    let mut line = String::new();
    send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": {"name": "launch-test", "version": "1"}}}),
    );
    stdout.read_line(&mut line).unwrap();
    send(&mut stdin, json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    send(&mut stdin, json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}));
    line.clear();
    stdout.read_line(&mut line).unwrap();
    drop(stdin);
    let _ = server.wait();
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
}

fn answer_text(v: &Value) -> String {
    v["result"]["content"][0]["text"].as_str().unwrap_or_else(|| panic!("no text in {v}")).to_string()
}

#[test]
fn a_record_timeout_on_a_program_that_ignores_sigterm_still_finishes_the_trace() {
    let s = scratch();
    let tmp = s.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let prog = stubborn_program(s.path());
    let marker = format!("i25-mcp-{}", std::process::id());
    let out = s.path().join("t.d");
    let args = json!({"argv": [python(), prog, marker], "out": out, "timeout_s": 1});
    let started = Instant::now();
    let r = mcp_call("record", args, &tmp, s.path());
    let took = started.elapsed();
    let text = answer_text(&r);
    assert_none_left(&marker, "after the record tool's time-out");
    let meta = assert_finished(&out, "a record that timed out");
    assert_eq!(meta["stopped"], json!({"signal": SIGTERM, "killed": true}), "{meta}");
    assert_eq!(meta["exit"]["signal"], SIGKILL, "{meta}");
    assert!(text.contains("processes") && !text.contains("cannot be read"), "{text}");
    assert!(runtime_dirs(&tmp).is_empty(), "left in TMPDIR: {:?}", runtime_dirs(&tmp));
    assert!(took < Duration::from_secs(1 + 3 + 4), "took {took:?}");
}

/// Start `trace run -o out -- argv` with no terminal (stdin /dev/null, output piped).
/// Start `c` with SIGINT and SIGQUIT at their default action, as at a user's terminal. A shell
/// without job control starts background commands with both ignored, and an ignored signal
/// stays ignored across `exec`: Python then installs no KeyboardInterrupt handler, and the
/// tests of Ctrl-C forwarding would test the caller's shell instead.
fn with_default_sigint(c: &mut Command) -> &mut Command {
    use std::os::unix::process::CommandExt;
    // SAFETY: runs in the child between fork and exec; signal(2) is async-signal-safe and
    // touches no memory of the parent.
    unsafe {
        c.pre_exec(|| {
            libc_signal(SIGINT, SIG_DFL);
            libc_signal(SIGQUIT, SIG_DFL);
            Ok(())
        })
    }
}

fn spawn_trace(out: &Path, argv: &[&str], tmp: &Path) -> Child {
    let mut c = cmd("trace");
    with_default_sigint(&mut c);
    c.args(["run", "-o"]).arg(out).arg("--").args(argv).env("TMPDIR", tmp);
    c.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    c.spawn().unwrap()
}

/// Wait until the program's first line (`started`) is out; otherwise kill everything and fail.
fn wait_started(child: &mut Child, marker: &str) {
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
    if line != "started\n" {
        kill(child.id(), SIGKILL);
        for p in processes_with(marker) {
            kill(p, SIGKILL);
        }
        panic!("the program's first line is {line:?}, not \"started\"");
    }
}

#[test]
fn sigterm_to_trace_reaches_the_whole_group_which_is_killed_after_the_grace() {
    let s = scratch();
    let tmp = s.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let prog = stubborn_program(s.path());
    let marker = format!("i25-term-{}", std::process::id());
    let out = s.path().join("t.d");
    let mut child = spawn_trace(&out, &[&python(), prog.to_str().unwrap(), &marker], &tmp);
    wait_started(&mut child, &marker);
    std::thread::sleep(Duration::from_millis(300));
    kill(child.id(), SIGTERM);
    let st = wait_within(&mut child, Duration::from_secs(10), "trace after SIGTERM", &marker);
    let (_, err) = texts(&child.wait_with_output().unwrap());
    assert_eq!(st.signal(), Some(SIGKILL), "trace ends as its program did: {err}");
    assert!(err.contains("trace: stopped by SIGTERM (15)") && err.contains("killed (SIGKILL)"), "{err}");
    assert_none_left(&marker, "the program's forked child ignores SIGTERM too");
    let meta = assert_finished(&out, "SIGTERM to trace");
    assert_eq!(meta["stopped"], json!({"signal": SIGTERM, "killed": true}), "{meta}");
    assert!(runtime_dirs(&tmp).is_empty(), "left in TMPDIR: {:?}", runtime_dirs(&tmp));
    // Both processes were recorded, and the trace reads.
    let info = run(cmd("trace").args(["info", "--json"]).arg(&out));
    let info: Value = serde_json::from_slice(&info.stdout).unwrap();
    assert_eq!(info["processes"], 2, "{info}");
}

#[test]
fn sigint_to_traces_pid_alone_is_forwarded() {
    let s = scratch();
    let tmp = s.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let marker = format!("i25-int-{}", std::process::id());
    let code = "import time\nprint('started', flush=True)\ntry:\n    time.sleep(60)\nexcept KeyboardInterrupt:\n    print('interrupted', flush=True)\n    raise SystemExit(7)\n";
    let out = s.path().join("t.d");
    let mut child = spawn_trace(&out, &[&python(), "-c", code, &marker], &tmp);
    wait_started(&mut child, &marker);
    std::thread::sleep(Duration::from_millis(200));
    kill(child.id(), SIGINT);
    let st = wait_within(&mut child, Duration::from_secs(10), "trace after SIGINT", &marker);
    let o = child.wait_with_output().unwrap();
    assert_eq!(st.code(), Some(7), "the program caught the forwarded SIGINT and exited 7: {:?}", texts(&o));
    assert_eq!(texts(&o).0, "interrupted\n");
    let meta = assert_finished(&out, "SIGINT to trace");
    assert_eq!(meta["stopped"], json!({"signal": SIGINT, "killed": false}), "{meta}");
    assert_none_left(&marker, "after SIGINT");
    assert!(runtime_dirs(&tmp).is_empty(), "left in TMPDIR: {:?}", runtime_dirs(&tmp));
}

#[test]
fn under_nohup_a_hangup_neither_stops_nor_kills_the_program() {
    // `nohup trace run -- prog`: SIGHUP is ignored from the start. A hangup sent to `trace`
    // must leave the run alone, as it would leave `nohup prog` alone: the program, which
    // ignores SIGHUP too, runs past the grace period to its own end and exit status.
    use std::os::unix::process::CommandExt;
    const SIGHUP: i32 = 1;
    const SIG_IGN: usize = 1;
    let s = scratch();
    let tmp = s.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let marker = format!("nohup-{}", std::process::id());
    let code = "import time\nprint('started', flush=True)\ntime.sleep(4)\nprint('done', flush=True)\n";
    let out = s.path().join("t.d");
    let mut c = cmd("trace");
    with_default_sigint(&mut c);
    // SAFETY: runs in the child between fork and exec; signal(2) is async-signal-safe.
    unsafe {
        c.pre_exec(|| {
            libc_signal(SIGHUP, SIG_IGN);
            Ok(())
        });
    }
    c.args(["run", "-o"]).arg(&out).args(["--", &python(), "-c", code, &marker]).env("TMPDIR", &tmp);
    let mut child = c.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    wait_started(&mut child, &marker);
    kill(child.id(), SIGHUP);
    let st = wait_within(&mut child, Duration::from_secs(15), "trace under nohup after SIGHUP", &marker);
    let o = child.wait_with_output().unwrap();
    let (stdout, err) = texts(&o);
    assert_eq!((st.code(), st.signal()), (Some(0), None), "{err}");
    assert_eq!(stdout, "done\n", "the program ran to its end");
    assert!(!err.contains("stopped by"), "{err}");
    let meta = assert_finished(&out, "SIGHUP under nohup");
    assert!(meta.get("stopped").is_none(), "{meta}");
}

#[test]
fn at_a_terminal_the_program_keeps_the_terminal_and_gets_ctrl_c_once() {
    // A pseudo-terminal made by Python's `pty` (the test needs Python anyway): `trace` runs as
    // the session's foreground job; the program reports whether it is in the terminal's
    // foreground group, then ^C is typed once.
    let s = scratch();
    let script = s.path().join("pty_run.py");
    std::fs::write(
        &script,
        r#"import os, pty, sys, time, select
pid, fd = pty.fork()
if pid == 0:
    os.execv(sys.argv[1], sys.argv[1:])
buf = b""
def read_until(token, limit):
    global buf
    end = time.time() + limit
    while token not in buf and time.time() < end:
        r, _, _ = select.select([fd], [], [], 0.1)
        if r:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            buf += chunk
read_until(b"ready", 30)
time.sleep(0.3)
os.write(fd, b"\x03")
read_until(b"bye", 10)
_, status = os.waitpid(pid, 0)
print(repr(buf.decode(errors="replace")))
print(os.waitstatus_to_exitcode(status))
"#,
    )
    .unwrap();
    let code = "import os, time\n\
        print('foreground' if os.tcgetpgrp(0) == os.getpgrp() else 'background', flush=True)\n\
        print('ready', flush=True)\n\
        try:\n    time.sleep(30)\nexcept KeyboardInterrupt:\n    print('interrupted', flush=True)\n\
        try:\n    time.sleep(0.5)\nexcept KeyboardInterrupt:\n    print('twice', flush=True)\n\
        print('bye', flush=True)\n";
    let out = s.path().join("t.d");
    let o = run(with_default_sigint(&mut Command::new(python()))
        .arg(&script)
        .arg(bin("trace"))
        .args(["run", "-q", "-o"])
        .arg(&out)
        .args(["--", &python(), "-c", code]));
    let (stdout, stderr) = texts(&o);
    assert!(o.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("foreground"), "the program can read the terminal (its foreground group): {stdout}");
    assert!(stdout.contains("interrupted") && !stdout.contains("twice"), "^C reaches the program exactly once: {stdout}");
    assert!(stdout.trim_end().ends_with("\n0"), "trace exits as the program did: {stdout}");
}

#[test]
fn a_foreground_run_with_its_streams_redirected_keeps_the_terminal() {
    // `trace run -- prog <in >out 2>err` typed at a shell: no standard stream is the terminal,
    // but the job is in the foreground, and the program may open /dev/tty (as getpass does).
    let s = scratch();
    let result = s.path().join("result");
    let script = s.path().join("pty_fg.py");
    std::fs::write(
        &script,
        r#"import os, pty, sys
pid, fd = pty.fork()
if pid == 0:
    os.execv("/bin/sh", ["sh", "-c", 'exec "$@" </dev/null >"$0" 2>&1'] + sys.argv[1:])
while True:
    try:
        if not os.read(fd, 4096):
            break
    except OSError:
        break
_, status = os.waitpid(pid, 0)
print(os.waitstatus_to_exitcode(status))
"#,
    )
    .unwrap();
    let code = "import os\n\
        tty = os.open('/dev/tty', os.O_RDONLY)\n\
        print('foreground' if os.tcgetpgrp(tty) == os.getpgrp() else 'background')\n";
    let out = s.path().join("t.d");
    let o = run(Command::new(python()).arg(&script).arg(&result).arg(bin("trace")).args(["run", "-q", "-o"]).arg(&out).args([
        "--",
        &python(),
        "-c",
        code,
    ]));
    let (stdout, stderr) = texts(&o);
    let got = std::fs::read_to_string(&result).unwrap_or_default();
    assert_eq!(stdout.trim(), "0", "{stdout}\n{stderr}\n{got}");
    assert_eq!(got.trim(), "foreground");
}

#[test]
fn nul_in_an_argument_is_a_clear_error_from_the_record_tool() {
    let s = scratch();
    let r = mcp_call("record", json!({"argv": [python(), "a\u{0}b.py"], "out": s.path().join("t.d")}), s.path(), s.path());
    let text = answer_text(&r);
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert!(text.contains(r#"argument 1 of the command, "a\0b.py", contains a NUL byte"#), "{text}");
    assert!(!text.contains("install the `trace` binary"), "{text}");
    assert!(!s.path().join("t.d").exists());
}

/// An executable script with this content.
fn script(dir: &Path, name: &str, content: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, content).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

#[test]
fn shebangs_run_under_trace_as_they_run_without_it() {
    let s = scratch();
    let py = python();
    let body = b"def greet():\n    return 'hi'\nprint(greet())\n";
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("env.py", format!("#!/usr/bin/env {py}\n").into_bytes()),
        ("env_s.py", format!("#!/usr/bin/env -S {py} -u\n").into_bytes()),
        ("env_s_crlf.py", format!("#!/usr/bin/env -S {py} -u\r\n").into_bytes()),
        ("env_split.py", format!("#!/usr/bin/env --split-string=A=1 {py} -X dev\n").into_bytes()),
        ("env_crlf.py", format!("#!/usr/bin/env {py}\r\n").into_bytes()),
        ("env_no_s.py", format!("#!/usr/bin/env {py} -u\n").into_bytes()),
        ("crlf.py", b"#!/bin/sh\r\n".to_vec()),
    ];
    for (name, line) in cases {
        let p = script(s.path(), name, &[line.as_slice(), body].concat());
        // Without trace, as a shell runs it (127 when its interpreter does not exist).
        let plain = run(Command::new("/bin/sh").arg("-c").arg("exec \"$0\"").arg(&p).current_dir(s.path()));
        let out = s.path().join(format!("{name}.d"));
        let traced = run(cmd("trace").args(["run", "-q", "-o"]).arg(&out).arg("--").arg(&p).current_dir(s.path()));
        let (t_out, t_err) = texts(&traced);
        assert_eq!(traced.status.code(), plain.status.code(), "{name}: exit status with and without trace: {t_err}");
        assert_eq!(t_out, texts(&plain).0, "{name}: {t_err}");
        assert!(!t_err.contains("no such Python script") && !t_err.contains("this flag makes Python"), "{name}: {t_err}");
        if plain.status.success() {
            assert!(traced.status.success(), "{name}: {t_err}");
            let dump = run(cmd("trace").arg("dump").arg(&out));
            assert!(texts(&dump).0.contains("\"greet\""), "{name}: greet was recorded: {:?}", texts(&dump));
        }
    }
}

/// Bytes the files under `dir` take on disk.
fn disk_usage(dir: &Path) -> u64 {
    let mut total = 0;
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let m = e.metadata().unwrap();
        total += if m.is_dir() { disk_usage(&e.path()) } else { m.blocks() * 512 };
    }
    total
}

#[test]
fn streams_left_unclosed_by_forked_children_are_cut_to_what_they_hold() {
    let s = scratch();
    let code = "import os\n\
        def f():\n    pass\n\
        for i in range(40):\n    pid = os.fork()\n    if pid == 0:\n        f(); f()\n        os._exit(0)\n    os.waitpid(pid, 0)\n";
    let out = s.path().join("t.d");
    let o = run(cmd("trace").args(["run", "-q", "-o"]).arg(&out).args(["--", &python(), "-c", code]));
    assert!(o.status.success(), "{:?}", texts(&o));
    let used = disk_usage(&out);
    // Each child's stream used to keep its whole reserved window (4 MiB): 160 MiB here.
    assert!(used < 8 << 20, "the trace takes {used} bytes on disk for 41 small processes");
    let info: Value = serde_json::from_slice(&run(cmd("trace").args(["info", "--json"]).arg(&out)).stdout).unwrap();
    assert_eq!(info["processes"], 41, "{info}");
    let children: Vec<&Value> = info["procs"].as_array().unwrap().iter().filter(|p| p.get("forked_from").is_some()).collect();
    assert_eq!(children.len(), 40);
    for c in children {
        let t = &c["threads"][0];
        assert!(t["calls"].as_u64().unwrap() >= 2, "{c}");
        assert_eq!(t["unclosed"], true, "a cut stream still reads as not closed by its process: {c}");
    }
}

#[test]
fn a_child_still_running_when_the_trace_is_finished_keeps_its_stream() {
    // The program exits at once; its forked child records for another second. Its stream
    // must not be cut under it (a write past the end of a mapped file is SIGBUS).
    let s = scratch();
    let done = s.path().join("done");
    let code = format!(
        "import os, sys, time\n\
         def f():\n    pass\n\
         if os.fork() == 0:\n    for i in range(200):\n        f()\n        time.sleep(0.005)\n    open({:?}, 'w').write('ok')\n    os._exit(0)\n",
        done.to_str().unwrap()
    );
    let out = s.path().join("t.d");
    let o = run(cmd("trace").args(["run", "-q", "-o"]).arg(&out).args(["--", &python(), "-c", &code]));
    assert!(o.status.success(), "{:?}", texts(&o));
    let start = Instant::now();
    while !done.exists() && start.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(std::fs::read_to_string(&done).ok().as_deref(), Some("ok"), "the child ran to its end");
}
