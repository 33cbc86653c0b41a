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
    // The file as it is now is the second run's.
    let prompt = run_ok(cmd("slice").arg("from-trace").arg(&after).args(q));
    assert_eq!(source_block(&prompt, "add"), Some("def add(a, b):\n    return a + b"), "{prompt}");
    assert!(!prompt.contains("Changed since the run"), "{prompt}");
    // Without git's help (SLICE_GIT=0): the first run's source is not shown.
    let prompt = run_ok(cmd("slice").env("SLICE_GIT", "0").arg("from-trace").arg(&before).args(q));
    assert!(!prompt.contains("return a - b") && !prompt.contains("return a + b"), "{prompt}");
    assert!(prompt.contains("source not shown: the file changed since the run"), "{prompt}");

    // The diff of the two runs of one checkout: add's text differs, and the edit is shown.
    let diff = run_ok(cmd("slice").arg("diff").arg(&before).arg(&after).args(["--format", "prompt", "-q", "What fixed it?"]));
    assert!(diff.contains("- `add` (calc.py:1): its source differs between the runs (2 lines in run A, 2 in run B)"), "{diff}");
    assert!(diff.contains("```diff\n@@ run B's line 1 @@\n def add(a, b):\n-    return a - b\n+    return a + b\n```"), "{diff}");
    let diff = run_ok(cmd("slice").env("SLICE_GIT", "0").arg("diff").arg(&before).arg(&after).args([
        "--format",
        "prompt",
        "-q",
        "What fixed it?",
    ]));
    assert!(!diff.contains("-    return a - b"), "{diff}");
}
