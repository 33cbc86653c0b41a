//! Cost linear in the input (issue 25): crafted traces that are large in one dimension go
//! through every view, `trace info` and every MCP tool under resource limits (address space,
//! size of the files written, stack, CPU time) that linear code stays far within and code
//! quadratic in the tree's depth, or recursive on it, or reading a file whole, exceeds. The
//! limits are set with the shell's `ulimit` on the child alone; nothing here measures wall-clock
//! time (bench/deep_chain does, on a 200,000-deep chain, and prints the numbers).

use analyzer::testutil::{py, Ev, TraceBuilder};
use slice_trace_e2e::{bin, root, scratch, texts};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// Limits for one child: address space (KiB), size of any file it writes (KiB), stack (KiB),
/// CPU seconds (a backstop against quadratic time, far above what the linear code takes even
/// in a debug build on a loaded machine).
#[derive(Clone, Copy)]
struct Limits {
    vmem_kib: u64,
    fsize_kib: u64,
    stack_kib: u64,
    cpu_s: u64,
}

/// A view of a deep chain: under 1 GiB of address space (the views hold the tree, not the tree
/// times its depth), 64 MiB per file written, a 1 MiB stack (no recursion on the depth).
const VIEW: Limits = Limits { vmem_kib: 1 << 20, fsize_kib: 64 << 10, stack_kib: 1 << 10, cpu_s: 600 };

/// A prompt held to a budget over the deep chain: the budget's fill reads what the state cut
/// once per accepted change, not once per function (quadratic: 36 s of CPU in a release build,
/// 300 s and more in a debug one, where it now takes about 10 s in a debug build).
const BUDGETED_VIEW: Limits = Limits { cpu_s: 120, ..VIEW };

/// `sh -c` running the program with its arguments under `limits` (dash's `ulimit` counts file
/// sizes in 512-byte blocks).
fn under(program: &Path, args: &[&str], limits: Limits) -> Command {
    let script = format!(
        "ulimit -v {}; ulimit -f {}; ulimit -s {}; ulimit -t {}; exec \"$0\" \"$@\"",
        limits.vmem_kib,
        limits.fsize_kib * 2,
        limits.stack_kib,
        limits.cpu_s
    );
    let mut c = Command::new("sh");
    c.arg("-c").arg(script).arg(program).args(args).current_dir(root());
    c
}

/// Run `program args` under `limits`, its stdout into `stdout_file` (a file, so the file-size
/// limit holds for it too).
fn limited(program: &Path, args: &[&str], limits: Limits, stdout_file: &Path) -> Output {
    let out = std::fs::File::create(stdout_file).expect("create the stdout file");
    let mut c = under(program, args, limits);
    c.stdout(Stdio::from(out)).stderr(Stdio::piped()).stdin(Stdio::null());
    let o = c.output().unwrap_or_else(|e| panic!("cannot run {c:?}: {e}"));
    Output { status: o.status, stdout: std::fs::read(stdout_file).unwrap_or_default(), stderr: o.stderr }
}

/// Run `slice mcp` under `limits` for one tool call: initialize, the call, and its input kept
/// open until the answer (the server stops at the end of its input). Returns the output and
/// the answer's line (empty if none came).
fn mcp_limited(limits: Limits, tool: &str, args: serde_json::Value) -> (Output, String) {
    use std::io::{BufRead, Write};
    let mut c = under(&bin("slice"), &["mcp"], limits);
    c.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = c.spawn().unwrap_or_else(|e| panic!("cannot run {c:?}: {e}"));
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(&mcp_session(tool, args)).expect("write the requests");
    stdin.flush().expect("flush the requests");
    let mut answer = String::new();
    for line in std::io::BufReader::new(child.stdout.take().expect("stdout")).lines() {
        let Ok(line) = line else { break };
        if serde_json::from_str::<serde_json::Value>(&line).is_ok_and(|v| v["id"] == 1) {
            answer = line;
            break;
        }
    }
    drop(stdin);
    let o = child.wait_with_output().expect("wait");
    (o, answer)
}

/// The child ended by itself with status 0 (a limit hit ends it with a signal: SIGSEGV for
/// the stack, SIGXFSZ, SIGXCPU, SIGKILL; or an abort for an allocation over the address space).
fn ok(what: &str, o: &Output) {
    assert!(
        o.status.success(),
        "{what} failed ({:?}, signal {:?}) within the limits:\n--- stderr\n{}",
        o.status.code(),
        o.status.signal(),
        String::from_utf8_lossy(&o.stderr).chars().take(3000).collect::<String>()
    );
}

/// A trace of one thread calling `f0 -> f1 -> ... -> f<depth-1>` (distinct functions of a
/// `chain.py` written next to it and fingerprinted, so prompts show their source) and
/// returning; with `root_name`, `f0` is named so and first calls `g0`..`g<callees-1>`.
fn chain(dir: &Path, depth: u32, root_name: Option<&str>, callees: u32) -> PathBuf {
    let src = dir.join("chain.py");
    let mut text = String::new();
    for i in 0..depth {
        text.push_str(&format!("def f{i}():\n    return f{}()\n", i + 1));
    }
    for i in 0..callees {
        text.push_str(&format!("def g{i}():\n    return {i}\n"));
    }
    std::fs::write(&src, text).unwrap();
    let file = src.to_str().unwrap();
    let mut funcs = Vec::new();
    for i in 0..depth {
        let name = match (i, root_name) {
            (0, Some(n)) => n.to_string(),
            _ => format!("f{i}"),
        };
        funcs.push(py(file, &name, 2 * i + 1, 2 * i + 2));
    }
    for i in 0..callees {
        funcs.push(py(file, &format!("g{i}"), 2 * (depth + i) + 1, 2 * (depth + i) + 2));
    }
    let mut evs = vec![Ev::C(0)];
    for i in 0..callees {
        evs.extend([Ev::C(depth + i), Ev::R]);
    }
    evs.extend((1..depth).map(Ev::C));
    evs.extend((0..depth).map(|_| Ev::R));
    let root = dir.join("chain.d");
    let b = TraceBuilder::new(&root, &["python3", "chain.py"], dir).unwrap();
    b.process(1, &funcs, &[(1, "MainThread", &evs)]).unwrap();
    root
}

/// Deep enough that a walk recursing once per level overflows a 1 MiB stack many times over,
/// and that a view writing each node's whole path (folded stacks) or indentation (the tree)
/// writes gigabytes.
const DEPTH: u32 = 30_000;

#[test]
fn every_view_of_a_deep_chain_stays_linear() {
    let work = scratch();
    let t = chain(work.path(), DEPTH, None, 0);
    let t = t.to_str().unwrap();
    let w = |name: &str| work.path().join(name).to_str().unwrap().to_string();
    let (flame, folded, dot, html, prompt) = (w("flame.svg"), w("chain.folded"), w("chain.dot"), w("chain.html"), w("prompt.md"));
    let q = "What does f7 return?";
    let views: Vec<(&str, Vec<&str>)> = vec![
        ("tree", vec!["tree", t]),
        ("flamegraph", vec!["flamegraph", t, "-o", &flame]),
        ("folded", vec!["folded", t, "-o", &folded]),
        ("stats", vec!["stats", t]),
        ("graph", vec!["graph", t, "-o", &dot]),
        ("diff", vec!["diff", t, t]),
        ("export", vec!["export", t, "-o", &html]),
        ("from-trace", vec!["from-trace", t, "-q", q, "--no-budget", "-o", &prompt]),
        ("from-trace --budget", vec!["from-trace", t, "-q", q, "--budget", "4000"]),
        // Without --budget the prompt is held to the default budget, and says so.
        ("from-trace (default budget)", vec!["from-trace", t, "-q", q]),
    ];
    let last = format!("f{}", DEPTH - 1);
    for (what, args) in views {
        let limits = if what.contains("budget") { BUDGETED_VIEW } else { VIEW };
        let o = limited(&bin("slice"), &args, limits, &work.path().join("stdout"));
        ok(&format!("slice {what}"), &o);
        let (out, err) = texts(&o);
        match what {
            "tree" => {
                assert!(
                    out.contains(&format!("[depth {DEPTH}] {last}")),
                    "the deepest node says its depth: {}",
                    &out[out.len().saturating_sub(500)..]
                );
                let longest = out.lines().map(str::len).max().unwrap_or(0);
                assert!(longest < 1000, "lines do not grow with the depth: {longest} bytes");
            }
            "folded" => {
                let text = std::fs::read_to_string(&folded).unwrap();
                let deepest = text.lines().map(|l| l.matches(';').count() + 1).max().unwrap_or(0);
                assert_eq!(deepest, 512, "stacks end at depth 512");
                assert!(err.contains("stacks end at depth 512"), "{err}");
                // The widths still add up: every call is counted once.
                let sum: u64 = text.lines().filter_map(|l| l.rsplit_once(' ')?.1.parse::<u64>().ok()).sum();
                assert!(sum > 0);
            }
            "graph" => {
                let text = std::fs::read_to_string(&dot).unwrap();
                assert_eq!(text.matches(" -> ").count(), DEPTH as usize - 1, "one edge per call");
            }
            "from-trace" => {
                let text = std::fs::read_to_string(&prompt).unwrap();
                assert!(text.contains(&format!("[depth {DEPTH}] {last}")), "the prompt's tree reaches the deepest call");
                assert!(text.contains("def f7():"), "with the source");
            }
            "from-trace (default budget)" => {
                assert!(out.contains("To fit the budget of 100000 tokens (o200k_base; a prompt gets this budget by default, `--no-budget` shows every function)"), "{}", &out[..out.len().min(3000)]);
                assert!(err.contains("budget 100000 (the default; --no-budget shows everything)"), "{err}");
                assert!(out.contains("def f7():"), "the question's function keeps its source");
            }
            _ => {}
        }
    }
    let o = limited(&bin("trace"), &["info", t], VIEW, &work.path().join("stdout"));
    ok("trace info", &o);
}

/// JSON-RPC lines for `slice mcp`: initialize, then one tools/call (id 1).
fn mcp_session(tool: &str, args: serde_json::Value) -> Vec<u8> {
    let lines = [
        serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "linear_cost", "version": "0"}}}),
        serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": args}}),
    ];
    lines.iter().map(|l| format!("{l}\n")).collect::<String>().into_bytes()
}

/// The text of a tools/call answer, and whether it is a tool error; the server must have
/// answered and ended by itself.
fn mcp_answer(what: &str, (o, answer): &(Output, String)) -> (String, bool) {
    ok(what, o);
    let v: serde_json::Value = serde_json::from_str(answer).unwrap_or_else(|_| panic!("{what}: no answer to the call: {answer:?}"));
    let r = &v["result"];
    let text: String = r["content"].as_array().into_iter().flatten().filter_map(|c| c["text"].as_str()).collect();
    (text, r["isError"].as_bool().unwrap_or(false))
}

/// MCP servers hold a tokio runtime (threads, each with its own malloc arena): more address
/// space, the same bound on what the tree may cost.
const MCP: Limits = Limits { vmem_kib: 2 << 20, ..VIEW };

#[test]
fn every_mcp_tool_on_a_deep_chain_stays_linear() {
    let work = scratch();
    let t = chain(work.path(), DEPTH, None, 0);
    let t = t.to_str().unwrap();
    let last = format!("f{}", DEPTH - 1);
    let calls = [
        ("tree", serde_json::json!({"trace": t})),
        ("prompt", serde_json::json!({"trace": t, "question": "What does f7 return?"})),
        ("find_calls", serde_json::json!({"trace": t, "function": last})),
        ("find_calls", serde_json::json!({"trace": t, "function": "f1.*"})),
        ("source", serde_json::json!({"trace": t, "function": last})),
        ("diff", serde_json::json!({"a": t, "b": t})),
    ];
    for (tool, args) in calls {
        let what = format!("mcp {tool} {args}");
        let (text, is_error) = mcp_answer(&what, &mcp_limited(MCP, tool, args));
        assert!(!is_error, "{what}: {text}");
        assert!(analyzer::tokens::Tokenizer::O200kBase.count(&text) <= 16_000, "{what}: bounded");
        if tool == "find_calls" {
            assert!(text.contains("calls …"), "{what}: a long path is shortened in its middle: {}", &text[..text.len().min(2000)]);
        }
    }
}

#[test]
fn find_calls_with_a_huge_root_name_counts_only_the_lines_it_keeps() {
    let work = scratch();
    let name = "r".repeat(100_000);
    let t = chain(work.path(), 2, Some(&name), 1000);
    let t = t.to_str().unwrap();
    // 1000 call paths of 100 KB each: 100 MB of lines, of which an 8,000-token answer keeps
    // none. Counting them all, at every step of a bisection, took minutes of CPU; the linear
    // answer counts the first line, over the limit, and stops.
    let limits = Limits { cpu_s: 20, ..MCP };
    let (text, is_error) = mcp_answer("find_calls", &mcp_limited(limits, "find_calls", serde_json::json!({"trace": t, "function": "g.*"})));
    assert!(!is_error, "{text}");
    assert!(text.contains("1000 function(s) matching"), "{}", &text[..text.len().min(500)]);
    assert!(text.contains("left out to fit max_tokens=8000"), "{}", &text[..text.len().min(500)]);
}

/// A sparse file of 2 GB (no disk used).
fn sparse(path: &Path) {
    let f = std::fs::OpenOptions::new().create(true).write(true).truncate(false).open(path).unwrap();
    f.set_len(2 << 30).unwrap();
}

#[test]
fn oversized_documents_are_refused_by_their_size_before_any_read() {
    // Half a gigabyte of address space: reading any of the files (or a gigabyte of it) fails.
    let limits = Limits { vmem_kib: 512 << 10, ..VIEW };
    for (doc, refused) in [("meta.json", true), ("p1/proc.json", true), ("p1/funcs.jsonl", true), ("sources.json", false)] {
        let work = scratch();
        let t = chain(work.path(), 3, None, 0);
        sparse(&t.join(doc));
        let ts = t.to_str().unwrap();
        for (program, args) in [("slice", vec!["tree", ts]), ("trace", vec!["info", ts])] {
            let o = limited(&bin(program), &args, limits, &work.path().join("stdout"));
            let (out, err) = texts(&o);
            let what = format!("{program} {} with a 2 GB {doc}", args[0]);
            assert_eq!(o.status.signal(), None, "{what}: killed: {err}");
            if refused && doc != "p1/funcs.jsonl" {
                assert!(!o.status.success(), "{what}: refused");
                assert!(err.contains(doc.rsplit('/').next().unwrap()) && err.contains("2147483648 bytes, more than"), "{what}: {err}");
            } else if refused {
                // funcs.jsonl is streamed: 2 GB of NUL bytes is one line over the line limit.
                assert!(!o.status.success(), "{what}: refused");
                assert!(err.contains("funcs.jsonl") && err.contains("longer than"), "{what}: {err}");
            } else {
                // sources.json is refused too, and then no source is shown: the tree still is.
                assert!(o.status.success(), "{what}: {err}");
                assert!(program == "trace" || out.contains("f2"), "{what}: {out}");
            }
        }
    }
}
