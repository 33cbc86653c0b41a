//! `slice mcp` driven by a real MCP client this project did not write: the official MCP
//! Python SDK (PyPI package `mcp`), installed once into a venv under the target directory.
//! One session records examples, asks a question within max_tokens, finds a function's
//! callers, reads a source, diffs two runs, and sends bad inputs; the server must answer each
//! bad input with a tool error and still be serving at the end.

use analyzer::tokens::Tokenizer;
use serde_json::{json, Value};
use slice_trace_e2e::{bin, cmd, python, root, run_ok, scratch, target_dir, texts, venv_with};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A Python >= 3.10 (the `mcp` package needs it): `python3` if new enough, else the newest
/// `python3.1x` on PATH.
fn client_python() -> String {
    for p in ["python3", "python3.13", "python3.12", "python3.11", "python3.10"] {
        let ok = Command::new(p)
            .args(["-c", "import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)"])
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false);
        if ok {
            return p.to_string();
        }
    }
    panic!("the MCP Python SDK needs Python >= 3.10: install one (python3.10 or newer on PATH)");
}

/// The official MCP Python SDK (`mcp`) and everything it installs, pinned.
const MCP_CLIENT: &[&str] = &[
    "annotated-types==0.8.0",
    "anyio==4.16.0",
    "attrs==26.1.0",
    "cffi==2.1.1",
    "click==8.5.1",
    "cryptography==50.0.2",
    "h11==0.16.0",
    "httpcore2==2.16.2",
    "httpx2==2.16.2",
    "idna==3.20",
    "jsonschema==4.26.0",
    "jsonschema-specifications==2025.9.1",
    "mcp==2.3.0",
    "mcp-types==2.3.0",
    "opentelemetry-api==1.45.2",
    "pycparser==3.12",
    "pydantic==2.14.4",
    "pydantic_core==2.50.5",
    "PyJWT==2.15.1",
    "python-multipart==0.0.34",
    "referencing==0.37.0",
    "rpds-py==2026.9.1",
    "sse-starlette==3.7.0",
    "starlette==1.10.0",
    "truststore==0.10.5",
    "typing-inspection==0.4.5",
    "typing_extensions==4.16.0",
    "uvicorn==0.54.0",
];

/// The venv's python with the `mcp` package, installed once (see `venv_with`).
fn mcp_python() -> PathBuf {
    venv_with("mcp-2.3.0-venv", &client_python(), MCP_CLIENT).join("bin/python")
}

/// Run one client session: `calls` is a list of {"tool", "arguments"}; the server runs in
/// the workspace root.
fn session(calls: &Value) -> Value {
    let mut c = Command::new(mcp_python());
    c.arg(root().join("tests/support/mcp_client.py")).arg(bin("slice")).arg(root());
    c.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = c.spawn().expect("run the MCP client");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("stdin");
        stdin.write_all(calls.to_string().as_bytes()).expect("write the session");
    }
    let out = child.wait_with_output().expect("wait for the MCP client");
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "the MCP client failed: {}\n--- stdout\n{stdout}\n--- stderr\n{stderr}", out.status);
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("client output is not JSON ({e}): {stdout}\n{stderr}"))
}

fn tokens(s: &str) -> usize {
    Tokenizer::O200kBase.count(s)
}

fn p(x: &Path) -> String {
    x.display().to_string()
}

/// (is_error, text) of result `i`.
fn result(r: &Value, i: usize) -> (bool, String) {
    let x = &r["results"][i];
    assert!(x.get("protocol_error").is_none(), "call {i} failed at the protocol level: {x}");
    (x["is_error"].as_bool().expect("is_error"), x["text"].as_str().expect("text").to_string())
}

#[test]
fn an_agent_session_records_asks_finds_reads_diffs_and_survives_bad_inputs() {
    let dir = scratch();
    let d = dir.path();
    let (shop, arg, plain, slow_d) = (d.join("shop.d"), d.join("arg.d"), d.join("plain.d"), d.join("slow.d"));
    let slow = d.join("slow.py");
    std::fs::write(&slow, "import time\n\ndef work():\n    return sum(range(10))\n\ndef wait():\n    time.sleep(60)\n\nwork()\nwait()\n")
        .unwrap();
    let corrupt = d.join("corrupt.d");
    std::fs::create_dir(&corrupt).unwrap();
    std::fs::write(corrupt.join("meta.json"), "{ not json").unwrap();
    let demo = "examples/python/views_demo.py";
    let question = "How is the price of a bundle computed?";
    let calls = json!([
        // 0-3: record the runs.
        {"tool": "record", "arguments": {"argv": [python(), "examples/python/shop_app.py"], "out": p(&shop)}},
        {"tool": "record", "arguments": {"argv": [python(), demo, "--emoji", "hello :smile:"], "out": p(&arg)}},
        {"tool": "record", "arguments": {"argv": [python(), demo, "hello :smile:"], "out": p(&plain)}},
        {"tool": "record", "arguments": {"argv": [python(), p(&slow)], "out": p(&slow_d), "timeout_s": 2}},
        // 4: a question within max_tokens.
        {"tool": "prompt", "arguments": {"trace": p(&shop), "question": question, "max_tokens": 2000}},
        // 5-6: who calls parse_row; the source of bundle_price.
        {"tool": "find_calls", "arguments": {"trace": p(&shop), "function": "parse_row"}},
        {"tool": "source", "arguments": {"trace": p(&shop), "function": "bundle_price"}},
        // 7: what the --emoji run reached that the plain one did not.
        {"tool": "diff", "arguments": {"a": p(&arg), "b": p(&plain)}},
        // 8: the tree, bounded.
        {"tool": "tree", "arguments": {"trace": p(&shop), "max_tokens": 700, "merge_threads": true}},
        // 9: the partial trace of the stopped run is readable.
        {"tool": "find_calls", "arguments": {"trace": p(&slow_d), "function": "work"}},
        // 10-16: bad inputs.
        {"tool": "tree", "arguments": {"trace": p(&d.join("missing.d"))}},
        {"tool": "prompt", "arguments": {"trace": p(&corrupt), "question": "why?"}},
        {"tool": "find_calls", "arguments": {"trace": p(&shop), "function": "parse("}},
        {"tool": "tree", "arguments": {"trace": p(&shop), "depth": 18_446_744_073_709_551_615u64, "max_tokens": 300}},
        {"tool": "prompt", "arguments": {"trace": p(&shop), "question": question, "max_tokens": 10}},
        {"tool": "record", "arguments": {"argv": ["/nonexistent/program"], "out": p(&d.join("none.d"))}},
        {"tool": "source", "arguments": {"trace": p(&shop), "function": "no_such_function"}},
        {"tool": "tree", "arguments": {"trace": p(&shop), "focus": "(unclosed"}},
        {"tool": "tree", "arguments": {"depth": "deep"}},
        {"tool": "prompt", "arguments": {"trace": p(&shop), "question": question, "max_tokens": 250}},
        // 20-21: a diff prompt for a question, bounded; a prompt in the JSON schema of --format json.
        {"tool": "diff", "arguments": {"a": p(&arg), "b": p(&plain), "question": "Why are there no emoji without --emoji?", "max_tokens": 900}},
        {"tool": "prompt", "arguments": {"trace": p(&shop), "question": question, "format": "json", "variant": "A", "max_tokens": 8000}},
        // 22: still answering after all of that.
        {"tool": "source", "arguments": {"trace": p(&shop), "function": "examples/python/shop/pricing.py:8"}},
        // 23: two runs in one prompt, selection options passed through.
        {"tool": "prompt", "arguments": {"trace": [p(&arg), p(&plain)], "question": "What differs?", "variant": "T", "focus": ["decorate"], "focus_subtree": true}},
        // 24: sources over the limit.
        {"tool": "source", "arguments": {"trace": p(&shop), "function": "main", "max_tokens": 200}},
        // 25: a command that does not exist, recorded into a fresh directory of its own.
        {"tool": "record", "arguments": {"argv": ["no-such-command-xyz"], "cwd": p(d)}},
        // 26: the tests of a run that ran none.
        {"tool": "tests", "arguments": {"trace": p(&shop)}},
        // 27: a system program that started nothing recorded.
        {"tool": "record", "arguments": {"argv": ["sh", "-c", "echo to-stderr >&2"], "out": p(&d.join("sh.d"))}},
        // 28-29: several functions cut: how to ask for one of them; one function cut: raise the limit.
        {"tool": "find_calls", "arguments": {"trace": p(&shop), "function": "main", "max_tokens": 200}},
        {"tool": "find_calls", "arguments": {"trace": p(&shop), "function": "examples/python/shop_app.py:53", "max_tokens": 200}},
    ]);
    let r = session(&calls);
    // What each answer cost (`cargo test --test mcp_e2e -- --nocapture`; docs/agents.md).
    let tools_json = serde_json::to_string(&r["tools"]).unwrap();
    println!("tools/list: {} tokens (o200k_base) for the 7 tool descriptions and schemas", tokens(&tools_json));
    // As the client sees it (the bound and its reason: analyzer/src/mcp/server.rs).
    assert!(tokens(&tools_json) <= 2500, "tools/list is {} tokens", tokens(&tools_json));
    for (i, (c, x)) in calls.as_array().unwrap().iter().zip(r["results"].as_array().unwrap()).enumerate() {
        let text = x["text"].as_str().unwrap_or("");
        let err = if x["is_error"] == true { " (tool error)" } else { "" };
        println!("{i:>2} {:<10} {:>5} tokens{err}  {}", c["tool"].as_str().unwrap(), tokens(text), c["arguments"]);
    }
    assert_eq!(r["server"]["name"], "slice");
    assert_eq!(r["alive"], true, "the server must still answer a ping after the bad inputs");
    let mut names: Vec<&str> = r["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    names.sort_unstable();
    assert_eq!(names, ["diff", "find_calls", "prompt", "record", "source", "tests", "tree"]);

    // record: the trace directory, the exit status, the counts, the end of the output.
    let (err, text) = result(&r, 0);
    assert!(!err, "{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], format!("Recorded `{} examples/python/shop_app.py` (in {}) into {}", python(), p(&root()), p(&shop)));
    assert!(lines[1].starts_with("exit status 0, after "), "{text}");
    assert!(lines[2].starts_with("2 processes, 5 threads, ") && lines[2].ends_with(" functions called"), "{text}");
    assert!(text.contains("\n  total value 401.55\n"), "{text}");
    assert!(shop.join("meta.json").exists());

    // record with a time limit: stopped, partial trace kept and readable.
    let (err, text) = result(&r, 3);
    assert!(!err, "{text}");
    assert!(
        text.contains("Still running after timeout_s=2: stopped (killed by signal 15 (SIGTERM)); the partial trace is kept."),
        "{text}"
    );
    assert!(text.contains("trace forwarded signal 15 to the program's process group, which then ended by itself.\n"), "{text}");
    let (err, text) = result(&r, 9);
    assert!(!err, "{text}");
    assert!(text.contains("## work  (") && text.contains("1 calls at 1 places"), "{text}");

    // prompt: exactly the CLI's prompt under the same budget, within max_tokens, with the answer.
    let (err, text) = result(&r, 4);
    assert!(!err, "{text}");
    assert!(tokens(&text) <= 2000, "{} tokens", tokens(&text));
    let cli = run_ok(cmd("slice").args(["from-trace", &p(&shop), "-q", question, "--budget", "2000"]));
    assert_eq!(text, cli);
    assert!(text.contains("def bundle_price(bundle):"), "{text}");

    // find_calls: every path, callers and callees with counts.
    let (err, text) = result(&r, 5);
    assert!(!err, "{text}");
    assert!(text.contains("## parse_row  (examples/python/shop/models.py:47)\n8 calls at 2 places in the call tree."), "{text}");
    assert!(
        text.contains(
            "\nCallers: load_catalogue  (examples/python/shop_app.py:24) ×6, validate_extra  (examples/python/shop_app.py:42) ×2\n"
        ),
        "{text}"
    );
    assert!(text.contains("\nCallees: parse_price  (examples/python/shop/models.py:59) ×8, "), "{text}");
    assert!(
        text.contains(
            "<module>  (examples/python/shop_app.py:1) → main  (examples/python/shop_app.py:53) → load_catalogue  \
             (examples/python/shop_app.py:24) → parse_row  (examples/python/shop/models.py:47) ×6\n"
        ),
        "{text}"
    );

    // source: the exact lines of the file, with file and line range.
    let file = std::fs::read_to_string(root().join("examples/python/shop/pricing.py")).unwrap();
    let body: Vec<&str> = file.lines().skip(5).take(6).collect();
    let want = format!("## bundle_price — examples/python/shop/pricing.py:6-11\n```python\n{}\n```\n\n", body.join("\n"));
    assert_eq!(result(&r, 6), (false, want.clone()));
    // ... and by a file:line inside it, after the bad inputs.
    assert_eq!(result(&r, 22), (false, want));

    // diff: what only the --emoji run reached.
    let (err, text) = result(&r, 7);
    assert!(!err, "{text}");
    assert!(text.contains(&format!("--- A {}: {} {demo} --emoji 'hello :smile:'\n", p(&arg), python())), "{text}");
    assert!(
        text.contains(
            "# functions only in A (2): emojize (examples/python/views_demo.py:31), replace_code (examples/python/views_demo.py:25)\n\
             # functions only in B (0): none\n"
        ),
        "{text}"
    );
    assert!(
        text.ends_with(
            "-       emojize  (examples/python/views_demo.py:31)\n-         replace_code  (examples/python/views_demo.py:25) ×2\n"
        ),
        "{text}"
    );

    // tree: bounded, cut by depth, saying what was left out.
    let (err, text) = result(&r, 8);
    assert!(!err, "{text}");
    assert!(tokens(&text) <= 700, "{} tokens", tokens(&text));
    assert!(text.contains("more calls below") && text.contains("Left out to fit max_tokens=700"), "{text}");
    assert!(text.contains("└─ main  (examples/python/shop_app.py:53)\n"), "{text}");

    // Bad inputs: tool errors with the CLI's messages.
    let missing = d.join("missing.d");
    assert_eq!(
        result(&r, 10),
        (
            true,
            format!(
                "slice: error: {}: no such trace directory (record one with `record {{\"argv\": [...], \"out\": {}}}`)",
                p(&missing),
                json!(p(&missing))
            )
        )
    );
    let (err, text) = result(&r, 11);
    assert!(err && text.starts_with(&format!("slice: error: {}", p(&corrupt))), "{text}");
    let (err, text) = result(&r, 12);
    assert!(err && text.contains("\"parse(\" is no function name that ran, and not a valid regular expression either"), "{text}");
    let (err, text) = result(&r, 13);
    assert!(!err && tokens(&text) <= 300, "{text}");
    let (err, text) = result(&r, 14);
    assert_eq!(
        (err, text.as_str()),
        (true, "slice: error: max_tokens 10 is too small: answers need at least 200 tokens (the default is 16000)")
    );
    let (err, text) = result(&r, 15);
    assert!(err && text.contains("/nonexistent/program"), "{text}");
    let (err, text) = result(&r, 16);
    assert!(err && text.contains("no function matching \"no_such_function\" is in the call tree of this run"), "{text}");
    let (err, text) = result(&r, 17);
    // The option as the agent passed it, not as the CLI spells it.
    assert!(err && text.starts_with("slice: error: focus \"(unclosed\": not a valid regular expression"), "{text}");
    let (err, text) = result(&r, 19);
    assert!(
        err && text.starts_with("slice: error: max_tokens 250 is too small for this prompt: even with every function body dropped"),
        "{text}"
    );
    let (err, text) = result(&r, 20);
    assert!(!err && tokens(&text) <= 900, "{} tokens: {text}", tokens(&text));
    assert!(text.contains("Why are there no emoji without --emoji?") && text.contains("def emojize(text):"), "{text}");
    let (err, text) = result(&r, 21);
    assert!(!err && tokens(&text) <= 8000, "{} tokens: {text}", tokens(&text));
    let doc: Value = serde_json::from_str(&text).expect("the json format is JSON");
    assert_eq!((doc["schema"].as_str(), doc["variant"].as_str()), (Some("slice-prompt"), Some("A")));
    assert!(doc["functions"].as_object().unwrap().values().any(|f| f["qualname"] == "bundle_price"), "{text}");
    let (err, text) = result(&r, 23);
    assert!(!err, "{text}");
    let cli = run_ok(cmd("slice").args([
        "from-trace",
        &p(&arg),
        &p(&plain),
        "-q",
        "What differs?",
        "--variant",
        "T",
        "--focus",
        "decorate",
        "--focus-subtree",
        "--budget",
        "16000",
    ]));
    // The same prompt but for its hints, which name the tool's parameters, not the CLI's options.
    assert!(cli.contains("; `--stdlib` shows its code."), "{cli}");
    assert_eq!(text, cli.replace("; `--stdlib` shows its code.", "; `stdlib: true` shows its code."));
    assert!(text.contains("## Run 2: `") && text.contains("      emojize  (examples/python/views_demo.py:31)\n"), "{text}");
    // `trace`'s own refusal is the reason given, and the fresh directory made for the trace
    // does not stay behind.
    let (err, text) = result(&r, 25);
    let second = text.lines().nth(1).unwrap_or_default();
    assert!(err && second.starts_with("exit status 127; trace: error: ") && second.contains("no-such-command-xyz"), "{text}");
    let left: Vec<_> =
        std::fs::read_dir(d.join(".slice-traces")).map(|r| r.filter_map(Result::ok).map(|e| e.file_name()).collect()).unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");

    // No test to list: an error, with the reason `slice tests` gives, in the tools' terms.
    assert_eq!(
        result(&r, 26),
        (
            true,
            format!(
                "slice: error: {}: the trace recorded no tests (the `tests` tool lists the tests of a run of pytest, unittest, \
                 `cargo test` or a GoogleTest binary: `record {{\"argv\": [\"python3\", \"-m\", \"pytest\", ...]}}`)",
                p(&shop)
            )
        )
    );
    // Nothing recorded: why, in the tool's words (its `env` parameter), once; the program's own
    // stderr is shown, `trace`'s line (its command line's words, the directory it recorded into
    // before publishing) is not.
    let sh = p(&d.join("sh.d"));
    assert_eq!(
        result(&r, 27),
        (
            true,
            format!(
                "slice: error: Recorded `sh -c 'echo to-stderr >&2'` (in {}) into {sh}\nexit status 0; {sh}: the trace recorded no \
                 process (`sh` is a script or a system program (such as `env` or `sh`), which `trace` does not record itself (the \
                 `record` tool with `env: {{\"SLICE_TRACE_PATCH\": \"all\"}}` patches system programs): it records the Python and \
                 native programs started from it, and none of them ran); record it again with the `record` tool\nstdout: (empty)\n\
                 stderr ({} bytes):\n  to-stderr",
                root().display(),
                result(&r, 27).1.split("stderr (").nth(1).and_then(|s| s.split(' ').next()).unwrap_or("?")
            )
        )
    );
    let (err, text) = result(&r, 24);
    assert!(!err && tokens(&text) <= 200, "{} tokens: {text}", tokens(&text));
    assert!(
        text.starts_with(
            "# 2 functions match \"main\"; each is shown, the program's first, in call order\n\n## main — examples/python/shop_app.py:53-"
        ),
        "{text}"
    );
    assert!(
        text.contains("lines of this function are left out to fit max_tokens=200")
            && text.ends_with("and 1 more matching functions; raise max_tokens to see it whole\n"),
        "{text}"
    );
    let (err, text) = result(&r, 28);
    assert!(
        !err && text.ends_with(
            "left out to fit max_tokens=200; ask for one of them by its file:line (as its heading gives it) or by an anchored \
             regular expression (`^name$`), or raise max_tokens\n"
        ),
        "{text}"
    );
    let (err, text) = result(&r, 29);
    assert!(
        !err && text.starts_with("# 1 function(s) matching \"examples/python/shop_app.py:53\"")
            && text.ends_with("left out to fit max_tokens=200; raise max_tokens\n"),
        "{text}"
    );
    let (err, text) = result(&r, 18);
    // Arguments that do not fit the schema: a tool error too (rmcp), which the model can correct.
    assert!(err && text.contains("invalid type: string \"deep\", expected u64"), "{text}");
}

/// The worked session of docs/agents.md, with each answer trimmed and the tokens it took:
/// `cargo build --release --workspace && cargo test --release --test mcp_e2e -- --ignored --nocapture worked_session`.
/// Traces go to target/mcp-demo/ (relative paths, as an agent in the project would use them).
#[test]
#[ignore = "prints the worked session of docs/agents.md; run it by name"]
fn worked_session() {
    let demo = target_dir().join("mcp-demo");
    let _ = std::fs::remove_dir_all(&demo);
    let rel = |n: &str| p(demo.join(n).strip_prefix(root()).unwrap_or(&demo.join(n)));
    let (shop, arg, plain) = (rel("shop.d"), rel("arg.d"), rel("plain.d"));
    let calls = json!([
        {"tool": "record", "arguments": {"argv": ["python3", "examples/python/shop_app.py"], "out": shop}},
        {"tool": "prompt", "arguments": {"trace": shop, "question": "How is the price of a bundle computed?", "max_tokens": 2000}},
        {"tool": "find_calls", "arguments": {"trace": shop, "function": "parse_row"}},
        {"tool": "source", "arguments": {"trace": shop, "function": "part_price"}},
        {"tool": "tree", "arguments": {"trace": shop, "max_tokens": 1000, "merge_threads": true}},
        {"tool": "record", "arguments": {"argv": ["python3", "examples/python/views_demo.py", "--emoji", "hello :smile:"], "out": arg}},
        {"tool": "record", "arguments": {"argv": ["python3", "examples/python/views_demo.py", "--emoji", "--file", "examples/python/README.md"], "out": plain}},
        {"tool": "diff", "arguments": {"a": arg, "b": plain}},
        {"tool": "find_calls", "arguments": {"trace": shop, "function": "parse("}},
    ]);
    let r = session(&calls);
    let tools = r["tools"].as_array().unwrap();
    println!("tools/list: {} tokens (o200k_base) in all", tokens(&serde_json::to_string(tools).unwrap()));
    for t in tools {
        println!("  {:<10} {:>5} tokens (description and input schema)", t["name"].as_str().unwrap(), tokens(&t.to_string()));
    }
    for (c, x) in calls.as_array().unwrap().iter().zip(r["results"].as_array().unwrap()) {
        let text = x["text"].as_str().unwrap_or("");
        let err = if x["is_error"] == true { ", isError" } else { "" };
        println!("\n→ {} {}\n← {} tokens{err}", c["tool"].as_str().unwrap(), c["arguments"], tokens(text));
        let lines: Vec<&str> = text.lines().collect();
        for l in lines.iter().take(14) {
            let cut: String = l.chars().take(150).collect();
            println!("  {cut}{}", if cut.len() < l.len() { "…" } else { "" });
        }
        if lines.len() > 14 {
            println!("  [… {} more lines]", lines.len() - 14);
        }
    }
    assert_eq!(r["alive"], true);
}

/// The failing-test workflow of docs/agents.md: record a pytest run, list its tests, ask about
/// the failing one, look at its tree around the buggy function.
/// A trace directory that is missing, not a directory, not a trace, or holds no process or no
/// call: each error says to record one with the `record` tool and its parameters (the same
/// facts as the CLI's `record one with `trace run -o x.d -- <command>``), never with a command
/// the agent cannot pass.
#[test]
fn errors_about_the_trace_directory_name_the_record_tool() {
    let dir = scratch();
    let d = dir.path();
    let (missing, file, empty, no_process, stopped, no_calls) =
        (d.join("missing.d"), d.join("file.d"), d.join("empty.d"), d.join("no-process.d"), d.join("stopped.d"), d.join("no-calls.d"));
    std::fs::write(&file, "").unwrap();
    std::fs::create_dir(&empty).unwrap();
    let meta = |argv: &[&str], kind: &str, end: Value| {
        let mut m = json!({
            "format": "slice-trace", "version": 3, "tool": "trace 0.1.0", "argv": argv, "cwd": p(d),
            "target_kind": kind, "start_unix_ms": 1, "options": {},
        });
        m.as_object_mut().unwrap().extend(end.as_object().unwrap().clone());
        m.to_string()
    };
    let exited = json!({"end_unix_ms": 2, "duration_ns": 1, "exit": {"code": 0, "core_dumped": false}});
    std::fs::create_dir(&no_process).unwrap();
    std::fs::write(no_process.join("meta.json"), meta(&["python3", "app.py"], "python", exited.clone())).unwrap();
    std::fs::create_dir(&stopped).unwrap();
    std::fs::write(stopped.join("meta.json"), meta(&["python3", "app.py"], "python", json!({"stopped": {"signal": 15, "killed": false}})))
        .unwrap();
    // A process of a system program that recorded no call.
    std::fs::create_dir_all(no_calls.join("p7")).unwrap();
    std::fs::write(no_calls.join("meta.json"), meta(&["sh", "-c", "true"], "other", exited)).unwrap();
    let proc = json!({"pid": 7, "ppid": 1, "argv": ["sh"], "exe": "/bin/sh", "cwd": p(d), "kind": "native", "start_ns": 1});
    std::fs::write(no_calls.join("p7/proc.json"), proc.to_string()).unwrap();
    let calls = json!([
        {"tool": "tree", "arguments": {"trace": p(&missing)}},
        {"tool": "prompt", "arguments": {"trace": p(&file), "question": "why?"}},
        {"tool": "source", "arguments": {"trace": p(&empty), "function": "main"}},
        {"tool": "find_calls", "arguments": {"trace": p(&no_process), "function": "main"}},
        {"tool": "tests", "arguments": {"trace": p(&stopped)}},
        {"tool": "diff", "arguments": {"a": p(&no_calls), "b": p(&no_calls)}},
    ]);
    let r = session(&calls);
    let record = |x: &Path| format!("`record {{\"argv\": [...], \"out\": {}}}`", json!(p(x)));
    let expected = [
        format!("{}: no such trace directory (record one with {})", p(&missing), record(&missing)),
        format!("{}: not a directory; a trace is the directory that the `record` tool writes (its answer names it)", p(&file)),
        format!("{}: not a trace directory (no valid meta.json); record one with {}", p(&empty), record(&empty)),
        format!(
            "{}: the trace recorded no process (`python3` ran, but the Python recorder was not active in it (for example `python -I`, \
             `-E` or `-S` in a child, or a cleared environment)); record it again with the `record` tool",
            p(&no_process)
        ),
        format!(
            "{}: the run was stopped (signal 15) before the program was started: nothing was recorded; record it again with the `record` tool",
            p(&stopped)
        ),
        format!(
            "{}: the trace recorded no function calls (`sh` is a script or a system program (such as `env` or `sh`), which `trace` \
             does not record itself (the `record` tool with `env: {{\"SLICE_TRACE_PATCH\": \"all\"}}` patches system programs): it \
             records the Python and native programs started from it, and none of them ran); record it again with the `record` tool",
            p(&no_calls)
        ),
    ];
    for (i, want) in expected.iter().enumerate() {
        assert_eq!(result(&r, i), (true, format!("slice: error: {want}")), "call {i}: {}", calls[i]);
    }
    // The CLI says the same facts in its own words.
    let o = cmd("slice").args(["tree", &p(&missing)]).output().unwrap();
    assert_eq!(
        texts(&o).1,
        format!("slice: error: {}: no such trace directory (record one with `trace run -o {} -- <command>`)\n", p(&missing), p(&missing))
    );
}

#[test]
fn a_failing_test_is_recorded_listed_and_explained() {
    let dir = scratch();
    let proj = slice_trace_e2e::invoice_project(dir.path());
    let py = slice_trace_e2e::pytest_python();
    let t = p(&dir.path().join("tests.d"));
    let totals = p(&dir.path().join("totals.d"));
    let env = json!({"PYTHONDONTWRITEBYTECODE": "1"});
    let calls = json!([
        {"tool": "record", "arguments": {"argv": [p(&py), "-m", "pytest", "-q", "-p", "no:cacheprovider"], "cwd": p(&proj), "out": t, "env": env}},
        {"tool": "tests", "arguments": {"trace": t}},
        {"tool": "prompt", "arguments": {"trace": t, "question": "Why is there no discount on 10 pens?", "test": "failed", "max_tokens": 4000}},
        {"tool": "tree", "arguments": {"trace": t, "test": "test_bulk_discount_starts_at_ten", "focus": "^line_total$", "focus_subtree": true}},
        {"tool": "tests", "arguments": {"trace": t, "test": "nothing_like_this"}},
        {"tool": "tree", "arguments": {"trace": t, "focus_subtree": true}},
        // 6: the whole run's prompt says how to ask for the failing tests.
        {"tool": "prompt", "arguments": {"trace": t, "question": "Why is there no discount on 10 pens?", "variant": "T"}},
        // 7-8: two different tests compared, as `slice diff --test-a --test-b`; a diff prompt too small.
        {"tool": "diff", "arguments": {"a": t, "b": t, "test_a": "test_format_cents", "test_b": "test_bulk_discount_starts_at_ten"}},
        {"tool": "diff", "arguments": {"a": t, "b": t, "test_a": "test_format_cents", "test_b": "failed", "question": "Why?", "max_tokens": 200}},
        // 9-11: whole runs compared, with and without the runner's own calls.
        {"tool": "record", "arguments": {"argv": [p(&py), "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_totals.py"], "cwd": p(&proj), "out": totals, "env": env}},
        {"tool": "diff", "arguments": {"a": t, "b": totals}},
        {"tool": "diff", "arguments": {"a": t, "b": totals, "show_plumbing": true, "max_tokens": 40000}},
        // 12: nothing left to show: the error names the parameters that show more.
        {"tool": "tree", "arguments": {"trace": t, "focus": "^no_such_function$"}},
        // 13-14: the condensing options of `slice from-trace` (--not-run, --docstrings).
        {"tool": "prompt", "arguments": {"trace": t, "question": "Why?", "test": "failed", "not_run": "sometimes"}},
        {"tool": "prompt", "arguments": {"trace": t, "question": "Why?", "docstrings": "long"}},
        // 15: a small tree of the failing tests: the outcome is cut before the tree is.
        {"tool": "tree", "arguments": {"trace": t, "test": "failed", "max_tokens": 500}},
    ]);
    let r = session(&calls);
    // Through MCP no answer names a command-line option: the agent passes tool parameters.
    for (i, x) in r["results"].as_array().unwrap().iter().enumerate() {
        let text = x["text"].as_str().unwrap_or_default();
        if x["tool"] != "record" {
            assert!(!text.contains("`--"), "answer {i} names a command-line option: {text}");
        }
    }
    let (err, text) = result(&r, 0);
    assert!(!err, "{text}");
    assert!(text.contains("\ntests: 2 failed, 7 passed, 1 skipped, 1 xfailed\n"), "{text}");
    assert!(
        text.contains("\nfailed tests/test_totals.py::test_bulk_discount_starts_at_ten: AssertionError: assert 1000 == 900\n"),
        "{text}"
    );
    assert!(text.contains("\"test\": \"failed\""), "{text}");
    let (err, text) = result(&r, 1);
    assert!(!err, "{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("2 failed, 7 passed, 1 skipped, 1 xfailed; run failed: "), "{text}");
    assert_eq!(lines[1], "failures:");
    assert!(
        lines[2].starts_with(
            "  tests/test_totals.py::test_bulk_discount_starts_at_ten: AssertionError: assert 1000 == 900 at tests/test_totals.py:17"
        ),
        "{text}"
    );
    assert!(text.contains("passing     5  bulk_discount  (invoice/totals.py:9)"), "{text}");
    let (err, text) = result(&r, 2);
    assert!(!err, "{text}");
    assert!(tokens(&text) <= 4000);
    let (failure, tree) = (text.find("E       AssertionError: assert 1000 == 900").unwrap(), text.find("### Call tree").unwrap());
    assert!(failure < tree, "{text}");
    assert!(text.contains("    if quantity > BULK_QUANTITY:\n        return BULK_PERCENT\n"), "{text}");
    let (err, text) = result(&r, 3);
    assert!(!err, "{text}");
    assert!(text.contains("FAILED tests/test_totals.py::test_bulk_discount_starts_at_ten"), "{text}");
    let tree_lines: Vec<&str> = text.lines().filter(|l| l.contains("─ bulk_discount  (") || l.contains("─ unit_price  (")).collect();
    assert_eq!(tree_lines.len(), 2, "line_total's callees under the focus: {text}");
    assert!(!text.contains("─ test_line_total  ("), "only the chosen test's tree: {text}");
    // No test matches: an error, as `slice tests` exits 1.
    assert_eq!(
        result(&r, 4),
        (true, format!("slice: error: no recorded test matches \"nothing_like_this\" (11 tests); `tests {{\"trace\": {t:?}}}` lists them"))
    );
    let (err, text) = result(&r, 5);
    assert!(err && text.contains("focus_subtree needs focus"), "{text}");
    // The prompt's notes name the parameters.
    let (err, text) = result(&r, 2);
    assert!(!err, "{text}");
    assert!(
        text.contains(
            "\n> The test runner (_pytest, pluggy) is left out of each test's tree: its calls on the way to the test and its own \
             work (collecting, reporting) are not shown, what it called of the test and the code under test is. \
             `show_plumbing: true` shows it.\n"
        ),
        "{text}"
    );
    // The standard library the runner called for its own work is no code `stdlib: true` would
    // show in a test's tree: the note that it is hidden is the whole run's.
    assert!(!text.contains("The standard library is hidden by default"), "{text}");
    let (err, text) = result(&r, 6);
    assert!(!err, "{text}");
    assert!(
        text.contains(" ran its code and are not shown, ")
            && text.contains(" the other notes' rules leave out, and ")
            && text.contains(" shown; `stdlib: true` shows its code.\n"),
        "{text}"
    );
    assert!(
        text.contains(
            "\n> This run ran 11 tests (2 failed, 7 passed, 1 skipped, 1 xfailed); failing: \
             tests/test_totals.py::test_bulk_discount_starts_at_ten, tests/test_unit_format.py::FormatTest::test_bulk_lamps. \
             `test: \"failed\"` (or `test: \"ID\"`) gives the prompt of the failing tests: their failure first, then only \
             the code each ran.\n"
        ),
        "{text}"
    );
    assert!(text.contains("only carry control to the program here; ") && text.contains("`show_plumbing: true` shows them.\n"), "{text}");
    // The diff tool takes the CLI's test options: the same tree as `slice diff --test-a --test-b`.
    let cli = |args: &[&str]| run_ok(cmd("slice").args(["diff", "--color", "never"]).args(args));
    let (err, text) = result(&r, 7);
    assert!(!err, "{text}");
    let want = cli(&[&t, &t, "--test-a", "test_format_cents", "--test-b", "test_bulk_discount_starts_at_ten"]);
    assert!(want.contains("\n+ line_total  (invoice/totals.py:16)\n"), "{want}");
    // (The CLI's note on lines names how to record them; the record tool cannot.)
    let hint = "; `trace run --lines` before 3.12 and for native code";
    assert!(want.contains(&format!("Neither run recorded the lines that ran (CPython 3.12 and later record them{hint})")), "{want}");
    assert!(!text.contains(hint) && text.ends_with(&want.replace(hint, "")), "MCP:\n{text}\nCLI:\n{want}");
    // The limit as the agent gave it (the CLI's error named --budget, inside the tool's own).
    let (err, text) = result(&r, 8);
    assert!(
        err && text.starts_with(
            "slice: error: max_tokens 200 is too small for this diff: without any source, with one line of call paths and no names of \
             functions only one run reached it takes "
        ) && text.ends_with(" tokens (o200k_base); raise max_tokens or narrow it with focus"),
        "{text}"
    );
    let (err, text) = result(&r, 10);
    assert!(!err, "{text}");
    assert!(text.ends_with(&cli(&[&t, &totals]).replace(hint, "")), "{text}");
    assert!(text.contains("`test_a: \"ID\", test_b: \"ID\"` (each an id, its end, a glob or `failed`) diffs tests' trees"), "{text}");
    let (err, plumbing) = result(&r, 11);
    assert!(!err, "{plumbing}");
    assert!(plumbing.ends_with(&cli(&[&t, &totals, "--show-plumbing"]).replace(hint, "")), "{plumbing}");
    assert_ne!(text.lines().filter(|l| l.starts_with('-')).count(), plumbing.lines().filter(|l| l.starts_with('-')).count());
    let (err, text) = result(&r, 12);
    assert!(
        err && text.contains("modules (`prune_startup: \"off\"` keeps them); ")
            && text.contains("hidden by default (`stdlib: true` shows them); ")
            && text.ends_with("; the filters focus removed the rest; loosen focus"),
        "{text}"
    );
    assert_eq!(result(&r, 13), (true, "slice: error: not_run \"sometimes\": not one of \"auto\", \"show\", \"hide\"".to_string()));
    assert_eq!(result(&r, 14), (true, "slice: error: docstrings \"long\": not one of \"whole\", \"auto\", \"short\"".to_string()));
    let (err, text) = result(&r, 15);
    assert!(!err && tokens(&text) <= 500, "{text}");
    // The test's own tree (the runner spliced out), first of all; what was cut is counted.
    assert!(text.contains("  test_bulk_discount_starts_at_ten  (tests/test_totals.py:16)\n"), "{text}");
    assert!(!text.contains("_pytest") && !text.contains("pluggy"), "{text}");
    assert!(text.contains("more lines of outcome and notes left out") && text.contains("Left out to fit max_tokens=500"), "{text}");
    assert_eq!(r["alive"], true);
}

/// A compiled package (black, mypyc): the prompt's note names the record tool's `native_ext`,
/// and `native_ext: true` records its native functions (`trace run --native-ext`).
#[test]
fn compiled_code_is_recorded_with_the_record_tools_native_ext() {
    let venv = venv_with("black-24.10-venv", &python(), slice_trace_e2e::BLACK);
    let dir = scratch();
    let (ext, plain) = (p(&dir.path().join("ext.d")), p(&dir.path().join("plain.d")));
    let argv = json!([p(&venv.join("bin/python")), "-m", "black", "-q", "-c", "x  =  [1,2]"]);
    let question = "How does black format a list?";
    let calls = json!([
        {"tool": "record", "arguments": {"argv": argv, "out": plain}},
        {"tool": "record", "arguments": {"argv": argv, "out": ext, "native_ext": true}},
        {"tool": "prompt", "arguments": {"trace": plain, "question": question, "variant": "T"}},
        {"tool": "prompt", "arguments": {"trace": ext, "question": question, "variant": "T"}},
    ]);
    let r = session(&calls);
    let note = |i: usize| {
        let (err, text) = result(&r, i);
        assert!(!err, "{text}");
        text.lines()
            .find(|l| l.starts_with("> Compiled Python: "))
            .unwrap_or_else(|| panic!("no note on compiled code:\n{text}"))
            .to_string()
    };
    let n = note(2);
    assert!(
        n.contains(
            "are not in the tree or the sources here (the recorder sees Python functions only; the `record` tool with \
             `native_ext: true` records them as native code, by their C names)"
        ),
        "{n}"
    );
    let n = note(3);
    assert!(n.contains("are in the tree as native code (recorded with native_ext: true): mypyc's compiled functions"), "{n}");
}

/// A unittest run whose test failed in a subtest: `record` names the failing subtest under its
/// test, `tests` lists the subtests under it, `prompt` of the subtest shows its failure.
#[test]
fn a_failing_subtest_is_named_by_record_and_listed_by_tests() {
    let dir = scratch();
    let proj = dir.path().join("proj");
    std::fs::create_dir_all(proj.join("tests")).unwrap();
    std::fs::write(proj.join("calc.py"), "def is_even(n):\n    return n % 2 == 0 or n == 3\n").unwrap();
    std::fs::write(proj.join("tests/__init__.py"), "").unwrap();
    std::fs::write(
        proj.join("tests/test_sub.py"),
        "import unittest\n\nfrom calc import is_even\n\n\nclass EvenTest(unittest.TestCase):\n    def test_evens(self):\n        \
         for n in [2, 3]:\n            with self.subTest(n=n):\n                self.assertEqual(is_even(n), n % 2 == 0)\n",
    )
    .unwrap();
    let t = p(&dir.path().join("sub.d"));
    let sub = "tests.test_sub.EvenTest.test_evens (n=3)";
    let calls = json!([
        {"tool": "record", "arguments": {"argv": [python(), "-m", "unittest", "tests.test_sub"], "cwd": p(&proj), "out": t,
            "env": {"PYTHONDONTWRITEBYTECODE": "1"}}},
        {"tool": "tests", "arguments": {"trace": t}},
        {"tool": "prompt", "arguments": {"trace": t, "question": "Why is 3 even?", "test": sub}},
    ]);
    let r = session(&calls);
    let (err, text) = result(&r, 0);
    assert!(!err, "{text}");
    assert!(
        text.contains(
            "\ntests: 1 failed\nfailed tests.test_sub.EvenTest.test_evens: contains 1 failed subtest\n  failed tests.test_sub.EvenTest.test_evens (n=3): AssertionError: True != False\n"
        ),
        "{text}"
    );
    // `trace`'s last line names the trace where the answer put it, not the recording's
    // private directory.
    assert!(text.contains(&format!(" -> {t}\n")) && !text.contains(".recording-"), "{text}");
    assert!(text.contains("\n1 process, 1 thread, "), "{text}");
    let (err, text) = result(&r, 1);
    assert!(!err, "{text}");
    assert!(text.starts_with("1 failed; subtests: 1 failed, 1 passed; run failed: "), "{text}");
    assert!(text.contains("         -    tests.test_sub.EvenTest.test_evens (n=2)\n"), "{text}");
    let (err, text) = result(&r, 2);
    assert!(!err, "{text}");
    assert!(
        text.contains("FAILED tests.test_sub.EvenTest.test_evens (n=3)\nat tests/test_sub.py:10\n>   self.assertEqual(is_even(n), n % 2 == 0)\nE   AssertionError: True != False\n"),
        "{text}"
    );
    assert_eq!(r["alive"], true);
}
