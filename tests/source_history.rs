//! End-to-end: a file edited after its run is shown as the run executed it, read from git
//! (analyzer/src/source/git.rs; docs/prompts.md, "Sources"): one checkout, a failing run,
//! the fix written in place, a passing run. `slice from-trace` of the first run shows the code
//! that ran (not "source not shown"), and `slice diff` of the two runs shows the edit.

use slice_trace_e2e::{cmd, python, run, run_ok, scratch, source_block, texts};
use std::path::Path;
use std::process::Command;

fn git(dir: &Path, args: &[&str]) {
    let out = run(Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"])
        .args(args));
    assert!(out.status.success(), "git {args:?}: {:?}", texts(&out));
}

fn record(dir: &Path, out: &str) -> std::path::PathBuf {
    let t = dir.join(out);
    let o = run(cmd("trace").current_dir(dir).arg("run").arg("-q").arg("-o").arg(&t).arg("--").arg(python()).arg("calc.py"));
    assert!(o.status.success(), "{:?}", texts(&o));
    t
}

/// The text of the MCP `source` tool's answer for `function` in `trace` (a one-shot session:
/// the requests written, stdin closed, the answers read to the end).
fn mcp_source(cwd: &Path, trace: &Path, function: &str) -> String {
    use std::io::Write;
    let lines = [
        serde_json::json!({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}),
        serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        serde_json::json!({"jsonrpc": "2.0", "id": "src", "method": "tools/call", "params": {
            "name": "source", "arguments": {"trace": trace.display().to_string(), "function": function}}}),
    ];
    let mut child = cmd("slice")
        .current_dir(cwd)
        .arg("mcp")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("run slice mcp");
    let input: String = lines.iter().map(|l| format!("{l}\n")).collect();
    child.stdin.take().expect("stdin").write_all(input.as_bytes()).expect("write the session");
    let out = child.wait_with_output().expect("slice mcp ends");
    let answer = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["id"] == "src")
        .unwrap_or_else(|| panic!("no answer to the source call: {:?}", texts(&out)));
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    answer["result"]["content"][0]["text"].as_str().expect("text").to_string()
}

#[test]
fn a_file_edited_after_its_run_is_shown_as_it_ran_from_git_and_the_diff_shows_the_edit() {
    let s = scratch();
    let repo = s.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    let buggy = "def add(a, b):\n    return a - b\n\n\ndef main():\n    print(add(2, 3))\n\n\nmain()\n";
    std::fs::write(repo.join("calc.py"), buggy).unwrap();
    git(&repo, &["init", "-q"]);
    git(&repo, &["add", "calc.py"]);
    git(&repo, &["commit", "-qm", "calc"]);
    let before = record(&repo, "before.d");
    std::fs::write(repo.join("calc.py"), buggy.replace("a - b", "a + b")).unwrap();
    let after = record(&repo, "after.d");

    let q = ["-q", "Why is the sum wrong?"];
    let prompt = run_ok(cmd("slice").arg("from-trace").arg(&before).args(q));
    assert_eq!(source_block(&prompt, "add"), Some("def add(a, b):\n    return a - b"), "{prompt}");
    assert!(prompt.contains("> Changed since the run: calc.py (as in commit "), "{prompt}");
    // Run from another repository's hook (`git rebase -x`, an editor's integration): the
    // variables that point git at that repository do not hide this one's history.
    let other = s.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    git(&other, &["init", "-q"]);
    let git_dir = other.join(".git");
    let hooked = run_ok(
        cmd("slice")
            .env("GIT_DIR", &git_dir)
            .env("GIT_COMMON_DIR", &git_dir)
            .env("GIT_OBJECT_DIRECTORY", git_dir.join("objects"))
            .env("GIT_INDEX_FILE", git_dir.join("index"))
            .env("GIT_WORK_TREE", &other)
            .arg("from-trace")
            .arg(&before)
            .args(q),
    );
    assert_eq!(hooked, prompt);
    // The file as it is now is the second run's.
    let prompt = run_ok(cmd("slice").arg("from-trace").arg(&after).args(q));
    assert_eq!(source_block(&prompt, "add"), Some("def add(a, b):\n    return a + b"), "{prompt}");
    assert!(!prompt.contains("Changed since the run"), "{prompt}");
    // Without git's help (SLICE_GIT=0): the first run's source is not shown.
    let prompt = run_ok(cmd("slice").env("SLICE_GIT", "0").arg("from-trace").arg(&before).args(q));
    assert!(!prompt.contains("return a - b") && !prompt.contains("return a + b"), "{prompt}");
    assert!(prompt.contains("source not shown: the file changed since the run"), "{prompt}");

    // The MCP `source` tool says the same of the code it shows: an agent reading `return a - b`
    // must not take it for the file it has just fixed.
    let answer = mcp_source(&repo, &before, "add");
    assert!(answer.contains("def add(a, b):\n    return a - b\n"), "{answer}");
    assert!(answer.contains("(calc.py changed since the run: this is the version the run executed, as in commit "), "{answer}");
    assert!(answer.contains(", read from git, not the file on disk now)"), "{answer}");
    assert!(!mcp_source(&repo, &after, "add").contains("changed since the run"));

    // The diff of the two runs of one checkout: add's text differs, and the edit is shown.
    let diff = run_ok(cmd("slice").arg("diff").arg(&before).arg(&after).args(["--format", "prompt", "-q", "What fixed it?"]));
    assert!(diff.contains("- `add` (calc.py:1): its source differs between the runs (2 lines in run A, 2 in run B)"), "{diff}");
    // Which run's file changed since: run A's (in a diff, "the run" could be either).
    assert!(diff.contains("> Changed since run A: calc.py (as in commit "), "{diff}");
    assert!(
        diff.contains(
            "What is shown of run A's copy (its code, or how it differs from the other run's) is the version run A executed, read from git"
        ),
        "{diff}"
    );
    assert!(!diff.contains("Changed since the run") && !diff.contains("Changed since run B"), "{diff}");
    assert!(diff.contains("```diff\n@@ run B's line 1 @@\n def add(a, b):\n-    return a - b\n+    return a + b\n```"), "{diff}");
    let diff = run_ok(cmd("slice").env("SLICE_GIT", "0").arg("diff").arg(&before).arg(&after).args([
        "--format",
        "prompt",
        "-q",
        "What fixed it?",
    ]));
    assert!(!diff.contains("-    return a - b"), "{diff}");

    // The second run executed an edit never committed or staged: once the file changes again,
    // git has no version of it, and the note says git was asked.
    std::fs::write(repo.join("calc.py"), buggy.replace("a - b", "a * b")).unwrap();
    let prompt = run_ok(cmd("slice").arg("from-trace").arg(&after).args(q));
    assert!(!prompt.contains("return a + b") && !prompt.contains("return a * b"), "{prompt}");
    let asked = "its content differs from the fingerprint in sources.json, and no commit of its repository nor the index holds the version that ran";
    assert!(prompt.contains(&format!("source not shown: the file changed since the run ({asked}); record the trace again")), "{prompt}");
    let prompt = run_ok(cmd("slice").env("SLICE_GIT", "0").arg("from-trace").arg(&after).args(q));
    assert!(prompt.contains("source not shown: the file changed since the run") && !prompt.contains(asked), "{prompt}");

    // The file deleted since: the first run's version is still in git, and the notes say the
    // file is gone rather than changed.
    std::fs::remove_file(repo.join("calc.py")).unwrap();
    let prompt = run_ok(cmd("slice").arg("from-trace").arg(&before).args(q));
    assert_eq!(source_block(&prompt, "add"), Some("def add(a, b):\n    return a - b"), "{prompt}");
    assert!(prompt.contains("> Changed since the run: calc.py (deleted since; as in commit "), "{prompt}");
    let answer = mcp_source(&repo, &before, "add");
    assert!(answer.contains("(calc.py was deleted since the run: this is the version the run executed, as in commit "), "{answer}");
    assert!(!answer.contains("not the file on disk now"), "{answer}");
}
