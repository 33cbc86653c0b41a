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

/// `slice mcp` started in `cwd`, its stdin and stdout piped, its stderr dropped.
fn spawn_mcp(cwd: &Path) -> std::process::Child {
    Command::new(bin("slice"))
        .arg("mcp")
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("run slice mcp")
}

impl Server {
    /// Start `slice mcp` in `cwd` and initialize the session.
    fn start(cwd: &Path) -> Server {
        let mut child = spawn_mcp(cwd);
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
        assert!(text.lines().nth(2).is_some_and(|l| l.starts_with("1 process, 1 thread, ")), "{text}");
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
        assert!(counts.starts_with("1 process, 1 thread, ") && !counts.contains(" 0 events"), "run {i}: {text}");
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

/// The lines a one-shot client writes: initialize, initialized, then `calls`.
fn session_lines(calls: &[(&str, &str, Value)]) -> String {
    let mut lines = vec![
        json!({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "oneshot", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    ];
    for (id, tool, arguments) in calls {
        lines.push(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}));
    }
    lines.iter().map(|l| format!("{l}\n")).collect()
}

/// Run `slice mcp` in `cwd` as a one-shot client does: write the whole session, close stdin at
/// once, read stdout to its end. The answers by id, and the server's exit status.
fn one_shot(cwd: &Path, input: &str) -> (HashMap<String, Value>, std::process::ExitStatus) {
    let mut child = spawn_mcp(cwd);
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(input.as_bytes()).expect("write the session");
    drop(stdin);
    let mut answers = HashMap::new();
    for line in BufReader::new(child.stdout.take().expect("stdout")).lines() {
        let v: Value = serde_json::from_str(&line.expect("read stdout")).expect("a JSON line");
        if let Some(id) = v["id"].as_str() {
            answers.insert(id.to_string(), v);
        }
    }
    (answers, child.wait().expect("wait for slice mcp"))
}

#[test]
fn a_one_shot_client_that_closes_stdin_at_once_gets_the_whole_recording_and_its_answer() {
    let d = scratch();
    let prog = job_program(d.path());
    let input = session_lines(&[("rec", "record", json!({"argv": [python(), p(&prog), "3"]}))]);
    let (answers, status) = one_shot(d.path(), &input);
    assert!(status.success(), "{status:?}");
    let (err, text) = Server::result(answers.get("rec").unwrap_or_else(|| panic!("no answer to the record call: {answers:?}")));
    assert!(!err, "{text}");
    let dir = recorded_into(&text);
    assert_eq!(dir, d.path().join(".slice-traces/job-1.d"), "{text}");
    // The run went to its end, as with stdin held open: not stopped.
    assert!(text.lines().nth(1).is_some_and(|l| l.starts_with("exit status 0, after ")), "{text}");
    assert!(!text.contains("stopped"), "{text}");
    let m = meta(&dir);
    assert_eq!((m["exit"]["code"].clone(), m.get("stopped")), (json!(0), None), "{m}");
    assert!(functions(&dir).contains("job_3"));
}

#[test]
fn closing_stdin_lets_the_recording_run_to_its_timeout_then_answers_and_ends_the_server() {
    let d = scratch();
    let (prog, started, out) = endless(d.path());
    let mut s = Server::start(d.path());
    s.call("rec", "record", json!({"argv": [python(), p(&prog)], "out": p(&out), "timeout_s": 6}));
    let pid = started_pid(&started);
    drop(s.stdin.take());
    // Still running after the end of the input: the call is not cut short.
    std::thread::sleep(Duration::from_millis(1000));
    assert!(alive(pid.0), "the end of the input stopped the recording");
    let (err, text) = Server::result(&s.answer("rec", Duration::from_secs(60)));
    assert!(!err, "{text}");
    assert!(text.contains("Still running after timeout_s=6: stopped"), "{text}");
    assert!(s.wait_exit(Duration::from_secs(30)).is_some_and(|st| st.success()), "the server runs on after its last answer");
    ended_with_a_partial_trace(&pid, &out);
}

#[test]
fn a_client_gone_both_ways_stops_the_recording_at_once_and_ends_the_server() {
    let d = scratch();
    let (prog, started, out) = endless(d.path());
    let mut child = Command::new(bin("slice"))
        .arg("mcp")
        .current_dir(d.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("run slice mcp");
    let mut stdin = child.stdin.take().expect("stdin");
    let input = session_lines(&[("rec", "record", json!({"argv": [python(), p(&prog)], "out": p(&out), "timeout_s": 600}))]);
    stdin.write_all(input.as_bytes()).expect("write the session");
    stdin.flush().expect("flush");
    let pid = started_pid(&started);
    // The client goes away: both pipes closed.
    drop(child.stdout.take());
    drop(stdin);
    let t = Instant::now();
    ended_with_a_partial_trace(&pid, &out);
    let until = Instant::now() + Duration::from_secs(30);
    while child.try_wait().expect("wait").is_none() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    let ended = child.try_wait().expect("wait");
    if ended.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    assert!(ended.is_some(), "the server runs on after its client left");
    assert!(t.elapsed() < Duration::from_secs(40), "the recording was not stopped at once: {:?}", t.elapsed());
}

#[test]
fn sigterm_to_the_server_stops_the_program_keeps_its_trace_and_ends_the_server() {
    let d = scratch();
    let (mut s, pid, out) = recording_an_endless_program(d.path());
    let killed = Command::new("kill").args(["-TERM", &s.child.id().to_string()]).status().expect("run kill");
    assert!(killed.success());
    // The stopped call is still answered on stdout.
    let (err, text) = Server::result(&s.answer("rec", Duration::from_secs(40)));
    assert!(
        !err && text
            .lines()
            .nth(1)
            .is_some_and(|l| l.starts_with("The server is shutting down: stopped (killed by signal 15 (SIGTERM)) after ")),
        "{text}"
    );
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
    // Said once, where the agent sets it (the tool's description does not repeat its parameters).
    assert!(
        record["inputSchema"]["properties"]["timeout_s"]["description"].as_str().unwrap().contains("default 120, at most 3600"),
        "{record}"
    );
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

#[test]
fn three_servers_in_one_directory_recording_the_same_command_at_once_never_share_a_trace() {
    let d = scratch();
    let prog = job_program(d.path());
    let mut servers: Vec<Server> = (0..3).map(|_| Server::start(d.path())).collect();
    // Two calls at once in each server, six in all, every one `python3 job.py N`: the same
    // default directory name, `.slice-traces/job-<n>.d`.
    for (i, s) in servers.iter_mut().enumerate() {
        for k in 0..2 {
            s.call(&format!("r{k}"), "record", json!({"argv": [python(), p(&prog), (i * 2 + k).to_string()]}));
        }
    }
    let mut dirs = HashSet::new();
    for (i, s) in servers.iter_mut().enumerate() {
        for k in 0..2 {
            let run = i * 2 + k;
            let (err, text) = Server::result(&s.answer(&format!("r{k}"), Duration::from_secs(180)));
            assert!(!err, "{text}");
            let dir = recorded_into(&text);
            assert!(dirs.insert(dir.clone()), "two calls answered {}", dir.display());
            assert_eq!(meta(&dir)["argv"][2], run.to_string(), "the answer of run {run} names {}", dir.display());
            let f = functions(&dir);
            assert!(f.contains(&format!("job_{run}")) && f.iter().filter(|n| n.starts_with("job_")).count() == 1, "{f:?}");
        }
    }
    let mut names: Vec<String> = std::fs::read_dir(d.path().join(".slice-traces"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["job-1.d", "job-2.d", "job-3.d", "job-4.d", "job-5.d", "job-6.d"]);
}

#[test]
fn a_trace_still_being_recorded_is_said_to_be_so_by_every_reading_tool() {
    let d = scratch();
    let (prog, started, _) = endless(d.path());
    let mut a = Server::start(d.path());
    a.call("rec", "record", json!({"argv": [python(), p(&prog)]}));
    let pid = started_pid(&started);
    let dir = d.path().join(".slice-traces/endless-1.d");
    // Another agent, in another server, finds it and asks about it while it is recorded.
    let mut b = Server::start(d.path());
    let expected = format!(
        "slice: error: {}: the trace is still being recorded (a `trace run` is writing it now); ask again when that run has ended",
        p(&dir)
    );
    let asks = [
        ("tree", json!({"trace": p(&dir)})),
        ("prompt", json!({"trace": p(&dir), "question": "what runs?"})),
        ("tests", json!({"trace": p(&dir)})),
        ("find_calls", json!({"trace": p(&dir), "function": "tick"})),
        ("diff", json!({"a": p(&dir), "b": p(&dir)})),
    ];
    for (i, (tool, args)) in asks.iter().enumerate() {
        b.call(&format!("q{i}"), tool, args.clone());
        let (err, text) = Server::result(&b.answer(&format!("q{i}"), Duration::from_secs(30)));
        assert!(err, "{tool}: {text}");
        assert_eq!(text, expected, "{tool}");
    }
    // The CLI says the same.
    let o = slice_trace_e2e::run(slice_trace_e2e::cmd("slice").args(["tree", &p(&dir)]));
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("the trace is still being recorded"), "{o:?}");
    // Once the recording is stopped, the same call reads it.
    a.send_line(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "rec"}}).to_string());
    // `trace` ends a moment after the program (it finishes the trace, which takes a while).
    let until = Instant::now() + Duration::from_secs(60);
    for k in 0.. {
        b.call(&format!("again{k}"), "tree", json!({"trace": p(&dir)}));
        let (err, text) = Server::result(&b.answer(&format!("again{k}"), Duration::from_secs(30)));
        if text == expected && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(200));
            continue;
        }
        assert!(!err && text.contains("tick  ("), "{text}");
        break;
    }
    assert!(!alive(pid.0));
}

/// Copy a trace directory (regular files and directories only).
fn copy_trace(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let t = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_trace(&e.path(), &t);
        } else {
            std::fs::copy(e.path(), &t).unwrap();
        }
    }
}

/// The process directory of a one-process trace, and its (one) stream.
fn proc_and_stream(trace: &Path) -> (PathBuf, PathBuf) {
    let proc_dir =
        std::fs::read_dir(trace).unwrap().flatten().map(|e| e.path()).find(|p| p.join("proc.json").is_file()).expect("a process directory");
    let stream = std::fs::read_dir(&proc_dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "ev"))
        .expect("a stream");
    (proc_dir, stream)
}

#[test]
fn crafted_traces_get_a_readable_error_from_every_tool_never_a_hang_or_a_read_outside() {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::symlink;
    let d = scratch();
    let prog = job_program(d.path());
    let good = d.path().join("good.d");
    slice_trace_e2e::run_ok(slice_trace_e2e::cmd("trace").args(["run", "-q", "-o", &p(&good), "--", &python(), &p(&prog), "4"]));
    let (gproc, gstream) = proc_and_stream(&good);
    let outside = d.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    let make = |name: &str, f: &dyn Fn(&Path, &Path, &Path)| {
        let t = d.path().join(name);
        copy_trace(&good, &t);
        let (proc_dir, stream) = proc_and_stream(&t);
        f(&t, &proc_dir, &stream);
        t
    };
    let link = "a symbolic link, which `trace` never writes";
    // (trace, what every tool's error must say)
    let cases: Vec<(PathBuf, String)> = vec![
        (
            make("meta-link.d", &|t, _, _| {
                std::fs::remove_file(t.join("meta.json")).unwrap();
                symlink(good.join("meta.json"), t.join("meta.json")).unwrap();
            }),
            link.to_string(),
        ),
        (
            make("proc-link.d", &|_, proc_dir, _| {
                std::fs::remove_dir_all(proc_dir).unwrap();
                symlink(&gproc, proc_dir).unwrap();
            }),
            link.to_string(),
        ),
        (
            make("stream-link.d", &|_, _, stream| {
                std::fs::remove_file(stream).unwrap();
                symlink(&gstream, stream).unwrap();
            }),
            link.to_string(),
        ),
        (
            make("stream-to-dev-zero.d", &|_, _, stream| {
                std::fs::remove_file(stream).unwrap();
                symlink("/dev/zero", stream).unwrap();
            }),
            link.to_string(),
        ),
        (
            make("truncated-header.d", &|_, _, stream| {
                std::fs::OpenOptions::new().write(true).open(stream).unwrap().set_len(30).unwrap();
            }),
            "the stream header is truncated (30 of 64 bytes)".to_string(),
        ),
        (
            make("huge-meta.d", &|t, _, _| {
                std::fs::OpenOptions::new().write(true).open(t.join("meta.json")).unwrap().set_len(1 << 40).unwrap();
            }),
            "1099511627776 bytes, more than the 16777216 bytes such a document may have".to_string(),
        ),
        (
            make("huge-funcs.d", &|_, proc_dir, _| {
                std::fs::OpenOptions::new().write(true).open(proc_dir.join("funcs.jsonl")).unwrap().set_len(1 << 40).unwrap();
            }),
            "longer than 16777216 bytes".to_string(),
        ),
        (
            make("non-utf8-name.d", &|_, _, stream| {
                let bad = stream.with_file_name(std::ffi::OsStr::from_bytes(b"\xff\x1b[31m.ev"));
                std::fs::write(&bad, b"not a stream").unwrap();
            }),
            "\\x1b[31m.ev: the stream header is truncated (12 of 64 bytes)".to_string(),
        ),
    ];
    let mut s = Server::start(d.path());
    // Every case is asked and checked; the failures are listed together.
    let mut failed = Vec::new();
    for (k, (trace, expected)) in cases.iter().enumerate() {
        for tool in ["prompt", "tree", "tests"] {
            let mut args = json!({"trace": p(trace)});
            if tool == "prompt" {
                args["question"] = json!("What runs?");
            }
            let id = format!("{tool}{k}");
            let t = Instant::now();
            s.call(&id, tool, args);
            let (err, text) = Server::result(&s.answer(&id, Duration::from_secs(60)));
            let ok = t.elapsed() < Duration::from_secs(30)
                && err
                && text.starts_with("slice: error: ")
                && text.contains(expected.as_str())
                // No control character reaches the agent, nothing read from outside the trace.
                && !text.contains('\u{1b}')
                && !text.contains("job_4");
            if !ok {
                failed.push(format!("{tool} on {} ({:?}): {text:?}", trace.display(), t.elapsed()));
            }
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
    s.send_line(&json!({"jsonrpc": "2.0", "id": "ping", "method": "ping"}).to_string());
    assert_eq!(s.answer("ping", Duration::from_secs(10))["result"], json!({}));
}

#[test]
fn sigterm_to_the_server_still_answers_a_recording_that_takes_seconds_to_stop() {
    let d = scratch();
    let started = d.path().join("started");
    let prog = d.path().join("slow_stop.py");
    std::fs::write(
        &prog,
        format!(
            "import os, signal, sys, time\n\ndef stop(*_):\n    time.sleep(2.5)\n    sys.exit(0)\n\nsignal.signal(signal.SIGTERM, stop)\nopen({:?}, 'w').write(str(os.getpid()))\nwhile True:\n    time.sleep(0.05)\n",
            p(&started)
        ),
    )
    .unwrap();
    let mut s = Server::start(d.path());
    s.call("rec", "record", json!({"argv": [python(), p(&prog)]}));
    let _pid = started_pid(&started);
    std::thread::sleep(Duration::from_millis(300));
    assert!(Command::new("kill").args(["-TERM", &s.child.id().to_string()]).status().expect("run kill").success());
    let (err, text) = Server::result(&s.answer("rec", Duration::from_secs(40)));
    assert!(
        !err && text.lines().nth(1).is_some_and(|l| l.starts_with("The server is shutting down: stopped (exit status 0) after ")),
        "{text}"
    );
    assert!(s.wait_exit(Duration::from_secs(30)).is_some(), "the server runs on after SIGTERM");
}
