//! `slice mcp` under a busy or careless client, driven by a raw JSON-RPC client over the real
//! server's stdin and stdout: concurrent recordings each get a trace of their own, a trace being
//! replaced is never read half-way, a cancelled call, a closed connection or a SIGTERM ends the
//! recorded program and keeps its partial trace, and a line that is not JSON gets -32700.

use serde_json::{json, Value};
use slice_trace_e2e::{bin, python, scratch};
use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// A `slice mcp` process and a line-by-line JSON-RPC client of it.
struct Server {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    /// Answers read while waiting for another id.
    early: HashMap<String, Value>,
}

impl Server {
    /// Start `slice mcp` in `cwd` and initialize the session.
    fn start(cwd: &Path) -> Server {
        let mut child = Command::new(bin("slice"))
            .arg("mcp")
            .current_dir(cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("run slice mcp");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut s = Server { child, stdin, lines, early: HashMap::new() };
        s.send_line(
            &json!({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}})
            .to_string(),
        );
        let init = s.answer("init", Duration::from_secs(20));
        assert_eq!(init["result"]["serverInfo"]["name"], "slice", "{init}");
        s.send_line(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string());
        s
    }

    fn send_line(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(line.as_bytes()).and_then(|_| stdin.write_all(b"\n")).and_then(|_| stdin.flush()).expect("write to slice mcp");
    }

    /// The next line the server writes, as JSON.
    fn next(&mut self, timeout: Duration) -> Option<Value> {
        match self.lines.recv_timeout(timeout) {
            Ok(l) => Some(serde_json::from_str(&l).unwrap_or_else(|e| panic!("the server wrote a line that is not JSON ({e}): {l}"))),
            Err(RecvTimeoutError::Timeout) | Err(RecvTimeoutError::Disconnected) => None,
        }
    }

    /// The answer with this id (a string id, as the calls here use).
    fn answer(&mut self, id: &str, timeout: Duration) -> Value {
        let until = Instant::now() + timeout;
        loop {
            if let Some(v) = self.early.remove(id) {
                return v;
            }
            let left = until.saturating_duration_since(Instant::now());
            let v = self.next(left).unwrap_or_else(|| panic!("no answer to {id} within {timeout:?}"));
            match v["id"].as_str() {
                Some(got) if got == id => return v,
                Some(got) => {
                    self.early.insert(got.to_string(), v);
                }
                None => {}
            }
        }
    }

    fn call(&mut self, id: &str, tool: &str, arguments: Value) {
        self.send_line(
            &json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}).to_string(),
        );
    }

    /// The text of a tool answer and whether it is a tool error.
    fn result(v: &Value) -> (bool, String) {
        let r = &v["result"];
        assert!(r.is_object(), "not a tool result: {v}");
        (r["isError"] == true, r["content"][0]["text"].as_str().unwrap_or_default().to_string())
    }

    /// Wait for the server process to end.
    fn wait_exit(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let until = Instant::now() + timeout;
        loop {
            if let Some(s) = self.child.try_wait().expect("wait") {
                return Some(s);
            }
            if Instant::now() >= until {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn p(x: &Path) -> String {
    x.display().to_string()
}

/// meta.json of a trace directory.
fn meta(dir: &Path) -> Value {
    let text = std::fs::read_to_string(dir.join("meta.json")).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    serde_json::from_str(&text).expect("meta.json is JSON")
}

/// The trace directory a record answer names.
fn recorded_into(text: &str) -> PathBuf {
    let first = text.lines().next().unwrap_or_default();
    PathBuf::from(first.rsplit_once(" into ").unwrap_or_else(|| panic!("no trace directory in: {text}")).1)
}

/// One Python program, `job.py N`, that runs the function `job_N`: every run has the same
/// program name (so the same default directory name) and its trace tells which run it holds.
fn job_program(dir: &Path) -> PathBuf {
    let f = dir.join("job.py");
    let mut text = String::from("import sys, time\n\n");
    for i in 0..100 {
        text.push_str(&format!("def job_{i}():\n    time.sleep(0.3)\n    return {i}\n\n"));
    }
    text.push_str("globals()['job_' + sys.argv[1]]()\n");
    std::fs::write(&f, text).unwrap();
    f
}

/// The qualified names of the functions a trace's process(es) reached.
fn functions(dir: &Path) -> HashSet<String> {
    let mut names = HashSet::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let funcs = e.path().join("funcs.jsonl");
        if let Ok(text) = std::fs::read_to_string(&funcs) {
            for l in text.lines() {
                if let Ok(v) = serde_json::from_str::<Value>(l) {
                    if let Some(q) = v["qualname"].as_str() {
                        names.insert(q.to_string());
                    }
                }
            }
        }
    }
    names
}

#[test]
fn ten_recordings_at_once_each_get_a_directory_holding_their_own_run() {
    let d = scratch();
    let mut s = Server::start(d.path());
    let prog = job_program(d.path());
    for i in 0..10 {
        s.call(&format!("r{i}"), "record", json!({"argv": [python(), p(&prog), i.to_string()]}));
    }
    let mut dirs = HashSet::new();
    for i in 0..10 {
        let (err, text) = Server::result(&s.answer(&format!("r{i}"), Duration::from_secs(180)));
        assert!(!err, "{text}");
        assert!(text.lines().nth(2).is_some_and(|l| l.starts_with("1 processes, 1 threads, ")), "{text}");
        let dir = recorded_into(&text);
        assert!(dir.starts_with(d.path().join(".slice-traces")) && p(&dir).contains("job-"), "{text}");
        assert!(dirs.insert(dir.clone()), "two calls answered the same directory {}", dir.display());
        // The directory holds this call's run and only it.
        let argv = meta(&dir)["argv"].clone();
        assert_eq!(argv[2], i.to_string(), "{} holds {argv}, not run {i}", dir.display());
        let f = functions(&dir);
        assert!(f.contains(&format!("job_{i}")), "{}: {f:?}", dir.display());
        assert!(!(0..10).any(|j| j != i && f.contains(&format!("job_{j}"))), "{} mixes runs: {f:?}", dir.display());
    }
    assert_eq!(dirs.len(), 10);
}

#[test]
fn recordings_into_one_out_at_once_answer_their_own_run_and_leave_one_whole_trace() {
    let d = scratch();
    let out = d.path().join("same.d");
    let mut s = Server::start(d.path());
    // An earlier trace there, which the recordings replace.
    let prog = job_program(d.path());
    s.call("r99", "record", json!({"argv": [python(), p(&prog), "99"], "out": p(&out)}));
    let (err, text) = Server::result(&s.answer("r99", Duration::from_secs(60)));
    assert!(!err, "{text}");
    std::fs::write(out.join("notes.md"), "mine").unwrap();
    for i in 0..6 {
        s.call(&format!("r{i}"), "record", json!({"argv": [python(), p(&prog), i.to_string()], "out": p(&out)}));
    }
    // Meanwhile, readers of the trace being replaced: each sees a whole trace, old or new.
    for k in 0..20 {
        s.call(&format!("t{k}"), "tree", json!({"trace": p(&out), "merge_threads": true}));
        std::thread::sleep(Duration::from_millis(100));
    }
    for i in 0..6 {
        let (err, text) = Server::result(&s.answer(&format!("r{i}"), Duration::from_secs(180)));
        assert!(!err, "{text}");
        let counts = text.lines().nth(2).unwrap_or_default();
        assert!(counts.starts_with("1 processes, 1 threads, ") && !counts.contains(" 0 events"), "run {i}: {text}");
        assert_eq!(recorded_into(&text), out);
    }
    for k in 0..20 {
        let (err, text) = Server::result(&s.answer(&format!("t{k}"), Duration::from_secs(60)));
        assert!(!err, "reader {k}: {text}");
        assert!((0..6).chain([99]).any(|j| text.contains(&format!("job_{j}  ("))), "reader {k}: {text}");
    }
    let f = functions(&out);
    let runs: Vec<usize> = (0..6).chain([99]).filter(|j| f.contains(&format!("job_{j}"))).collect();
    assert_eq!(runs.len(), 1, "one run's functions, not a mix: {f:?}");
    assert_eq!(meta(&out)["argv"][2], runs[0].to_string());
    assert_eq!(std::fs::read_to_string(out.join("notes.md")).unwrap(), "mine", "the user's file moves with the trace");
    let left: Vec<String> = std::fs::read_dir(d.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(left.is_empty(), "recording directories left behind: {left:?}");
}

/// A program that writes `started` and then runs until it is stopped, recorded into `out`.
fn endless(d: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let started = d.join("started");
    let prog = d.join("endless.py");
    std::fs::write(
        &prog,
        format!(
            "import os, time\n\ndef tick():\n    time.sleep(0.05)\n\nopen({:?}, 'w').write(str(os.getpid()))\nwhile True:\n    tick()\n",
            p(&started)
        ),
    )
    .unwrap();
    (prog, started, d.join("endless.d"))
}

/// The recorded program, killed when the test ends whatever it found (a failing test leaves
/// no process behind).
struct Program(i32);

impl Drop for Program {
    fn drop(&mut self) {
        if alive(self.0) {
            let _ = Command::new("kill").args(["-KILL", &self.0.to_string()]).status();
        }
    }
}

/// The endless program, once it has started.
fn started_pid(started: &Path) -> Program {
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(pid) = std::fs::read_to_string(started).ok().and_then(|s| s.trim().parse().ok()) {
            return Program(pid);
        }
        assert!(Instant::now() < until, "the recorded program did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn alive(pid: i32) -> bool {
    // A zombie is gone for this purpose: /proc/<pid>/stat's state is Z.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| s.rsplit_once(") ").map(|(_, rest)| !rest.starts_with('Z')).unwrap_or(false))
        .unwrap_or(false)
}

/// The program ended, and its trace is readable and says how it ended.
fn ended_with_a_partial_trace(program: &Program, out: &Path) {
    let pid = program.0;
    let until = Instant::now() + Duration::from_secs(30);
    while alive(pid) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!alive(pid), "the recorded program {pid} still runs");
    // `trace` finishes the trace after the program ended, and the server then moves it to
    // `out` in one rename: that can come a moment after the program's end.
    while !out.join("meta.json").exists() && Instant::now() < until + Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let m = meta(out);
    assert!(m["exit"]["signal"].is_number(), "the trace says the program was stopped: {m}");
    let text = slice_trace_e2e::run_ok(slice_trace_e2e::cmd("slice").args(["tree", &p(out)]));
    assert!(text.contains("tick  ("), "{text}");
}

/// A server in `dir` whose `record` call (id `rec`) runs a program that never ends, once the
/// program started: the server, the program's pid, the trace's `out`.
fn recording_an_endless_program(dir: &Path) -> (Server, Program, PathBuf) {
    let (prog, started, out) = endless(dir);
    let mut s = Server::start(dir);
    s.call("rec", "record", json!({"argv": [python(), p(&prog)], "out": p(&out)}));
    let pid = started_pid(&started);
    std::thread::sleep(Duration::from_millis(300));
    (s, pid, out)
}

#[test]
fn a_cancelled_record_call_stops_the_program_and_keeps_its_trace() {
    let d = scratch();
    let (mut s, pid, out) = recording_an_endless_program(d.path());
    s.send_line(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "rec", "reason": "test"}}).to_string(),
    );
    ended_with_a_partial_trace(&pid, &out);
    // Still serving.
    s.send_line(&json!({"jsonrpc": "2.0", "id": "ping", "method": "ping"}).to_string());
    assert_eq!(s.answer("ping", Duration::from_secs(10))["result"], json!({}));
}

#[test]
fn closing_the_connection_stops_the_program_keeps_its_trace_and_ends_the_server() {
    let d = scratch();
    let (mut s, pid, out) = recording_an_endless_program(d.path());
    drop(s.stdin.take());
    assert!(s.wait_exit(Duration::from_secs(30)).is_some(), "the server runs on after its client left");
    ended_with_a_partial_trace(&pid, &out);
}

#[test]
fn sigterm_to_the_server_stops_the_program_keeps_its_trace_and_ends_the_server() {
    let d = scratch();
    let (mut s, pid, out) = recording_an_endless_program(d.path());
    let killed = Command::new("kill").args(["-TERM", &s.child.id().to_string()]).status().expect("run kill");
    assert!(killed.success());
    assert!(s.wait_exit(Duration::from_secs(30)).is_some(), "the server runs on after SIGTERM");
    ended_with_a_partial_trace(&pid, &out);
}

#[test]
fn timeout_s_is_capped() {
    let d = scratch();
    let mut s = Server::start(d.path());
    s.call("big", "record", json!({"argv": [python(), "-c", "pass"], "timeout_s": 1e12}));
    let (err, text) = Server::result(&s.answer("big", Duration::from_secs(30)));
    assert!(err && text.contains("at most 3600"), "{text}");
    assert!(!d.path().join(".slice-traces").exists(), "nothing ran");
    let v = {
        s.send_line(&json!({"jsonrpc": "2.0", "id": "list", "method": "tools/list"}).to_string());
        s.answer("list", Duration::from_secs(10))
    };
    let record = v["result"]["tools"].as_array().unwrap().iter().find(|t| t["name"] == "record").unwrap().clone();
    assert!(record["description"].as_str().unwrap().contains("default 120, at most 3600"), "{record}");
    assert!(record["inputSchema"]["properties"]["timeout_s"]["description"].as_str().unwrap().contains("at most 3600"), "{record}");
}

#[test]
fn a_line_that_is_not_json_gets_a_parse_error_and_the_server_goes_on() {
    let d = scratch();
    let mut s = Server::start(d.path());
    for bad in ["this is not json", "{\"jsonrpc\": \"2.0\", \"id\": 1,", "\u{1b}]0;title\u{7}"] {
        s.send_line(bad);
        let v = s.next(Duration::from_secs(10)).unwrap_or_else(|| panic!("no answer to the line {bad:?}"));
        assert_eq!(v["error"]["code"], -32700, "{v}");
        assert_eq!(v["id"], Value::Null, "{v}");
        assert_eq!(v["jsonrpc"], "2.0", "{v}");
    }
    // JSON that is no request: -32600 with its id.
    s.send_line("{\"jsonrpc\": \"2.0\", \"id\": \"x\", \"method\": 5}");
    let v = s.next(Duration::from_secs(10)).expect("an answer to an invalid request");
    assert_eq!((v["error"]["code"].clone(), v["id"].clone()), (json!(-32600), json!("x")), "{v}");
    s.send_line(&json!({"jsonrpc": "2.0", "id": "ping", "method": "ping"}).to_string());
    assert_eq!(s.answer("ping", Duration::from_secs(10))["result"], json!({}));
}
