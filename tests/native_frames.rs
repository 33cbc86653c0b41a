//! End-to-end: the native shim's frame repair. Frames that a `longjmp` or an exception
//! left without an exit event are closed when a later call starts at or above them on the
//! stack, so later calls attach to the frame that is really live. Checked on gcc and clang
//! builds, in the recorded calls and in the prompt `slice` prints.

mod native_support;

use native_support::*;
use slice_trace_e2e::{cmd, run_ok, scratch, texts};
use std::path::{Path, PathBuf};

/// Build `src` with `compiler` and the flags of the examples' Makefiles into `dir`.
fn build(compiler: &str, src: &Path, dir: &Path, extra: &[&str]) -> PathBuf {
    let exe = dir.join(format!("{}-{compiler}", src.file_stem().and_then(|s| s.to_str()).unwrap_or("prog")));
    let out = slice_trace_e2e::run(
        std::process::Command::new(compiler)
            .args(["-finstrument-functions", "-g", "-O0", "-fno-omit-frame-pointer"])
            .args(extra)
            .arg("-o")
            .arg(&exe)
            .arg(src),
    );
    assert!(out.status.success(), "{compiler} failed (CI installs clang): {:?}", texts(&out));
    exe
}

fn prompt(t: &Path, q: &str) -> String {
    run_ok(cmd("slice").arg("from-trace").arg(t).arg("-q").arg(q))
}

/// The line of the prompt's tree that names `func` at `indent` (two spaces a level).
fn tree_line<'a>(prompt: &'a str, indent: usize, func: &str) -> Option<&'a str> {
    // A tree line: the name at that indent, then its location, its count or nothing (a
    // function whose source block follows is located by the block's heading instead).
    let head = format!("{}{func}", " ".repeat(indent));
    prompt.lines().find(|l| l.strip_prefix(&head).is_some_and(|rest| rest.is_empty() || rest.starts_with(' ')))
}

#[test]
fn calls_after_a_longjmp_attach_to_the_frame_that_is_live() {
    let s = scratch();
    for cc in ["cc", "clang"] {
        let exe = build(cc, &example("c/jumps.c"), s.path(), &[]);
        let t = s.path().join(format!("{cc}.d"));
        let out = trace(&t, &exe, &["6"]);
        let (stdout, stderr) = texts(&out);
        assert!(out.status.success(), "{stderr}");
        assert_eq!(stdout, "job 0 ok\njob 1 failed\njob 2 ok\njob 3 ok\njob 4 failed\njob 5 ok\n");

        let p = &load(&t)[0];
        assert_eq!(p.callees("main"), ["deep1", "handle"], "{cc}: {:?}", p.sequence(0));
        assert_eq!(p.callees("deep1"), ["deep2"]);
        assert_eq!(p.callees("deep2"), ["deep3"]);
        assert_eq!(p.callees("deep3"), ["check"]);
        assert_eq!(p.count("deep1"), 6);
        assert_eq!(p.count("handle"), 2);
        // The two jobs that failed: deep1..deep3 were closed when handle started.
        let seq = p.sequence(0);
        let want = ["1:main", "2:deep1", "3:deep2", "4:deep3", "5:check", "2:handle", "2:deep1"];
        let at = seq.iter().position(|x| x == "2:handle").expect("handle called");
        assert_eq!(seq[at - 4..at + 2], want[1..], "{cc}: {seq:?}");
        assert_eq!(p.threads[0].open_at_end, 0);

        let pr = prompt(&t, "What happens to a job that fails?");
        let handle = tree_line(&pr, 2, "handle").unwrap_or_else(|| panic!("{cc}: main → handle not in\n{pr}"));
        assert_eq!(handle, "  handle ×2", "{pr}");
        assert!(pr.contains("#### `handle` (") && pr.contains("jumps.c:35-"), "{pr}");
        assert!(tree_line(&pr, 2, "deep1").is_some_and(|l| l.ends_with("×6")), "{pr}");
        assert!(!pr.lines().any(|l| l.ends_with("↻ recursive")), "{pr}");
        assert!(tree_line(&pr, 8, "handle").is_none(), "{pr}");
    }
}

#[test]
fn calls_after_an_exception_caught_several_frames_up_attach_to_the_catching_frame() {
    let s = scratch();
    // g++ runs the exit hooks while unwinding; clang++ does not (only the repair helps).
    // (clang has no -finstrument-functions-exclude-file-list: the standard library's inline
    // code is recorded too, and left out of the callee lists below.)
    for (cxx, extra) in [("c++", &["-finstrument-functions-exclude-file-list=/usr/include"][..]), ("clang++", &[][..])] {
        let exe = build(cxx, &example("cpp/unwind.cpp"), s.path(), extra);
        let t = s.path().join(format!("{cxx}.d"));
        let out = trace(&t, &exe, &["8"]);
        let (stdout, stderr) = texts(&out);
        assert!(out.status.success(), "{stderr}");
        assert_eq!(stdout, "error: hard failure in job 3\nerror: hard failure in job 7\nsum 26\n");

        let p = &load(&t)[0];
        let own = |f: &str| -> Vec<String> {
            p.callees(f).into_iter().filter(|c| !c.starts_with("std::") && !c.starts_with("__gnu_cxx::")).collect()
        };
        let main = own("main");
        assert_eq!(main, ["report(std::exception const&)", "run_job(int)"], "{cxx}: {:?}", p.sequence(0));
        assert_eq!(own("run_job(int)"), ["stage1(int)"]);
        let stage1 = own("stage1(int)");
        assert!(stage1.contains(&"recover(Recoverable const&)".to_string()), "{cxx}: {stage1:?}");
        assert!(stage1.contains(&"stage2(int)".to_string()), "{cxx}: {stage1:?}");
        assert_eq!(own("stage2(int)"), ["stage3(int)"]);
        assert!(own("stage3(int)").iter().all(|c| c.starts_with("Recoverable::")), "{:?}", p.callees("stage3(int)"));
        assert_eq!(p.count("report(std::exception const&)"), 2);
        assert_eq!(p.count("recover(Recoverable const&)"), 2);
        assert_eq!(p.count("stage3(int)"), 8);
        assert_eq!(p.threads[0].open_at_end, 0);

        let pr = prompt(&t, "What happens after a hard failure?");
        assert!(tree_line(&pr, 2, "report(std::exception const&)").is_some_and(|l| l.ends_with("×2")), "{cxx}:\n{pr}");
        assert!(tree_line(&pr, 6, "recover(Recoverable const&)").is_some_and(|l| l.ends_with("×2")), "{cxx}:\n{pr}");
    }
}
