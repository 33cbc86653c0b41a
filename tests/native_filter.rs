//! End-to-end: record-time filters of native programs (`trace run -F/-N`, uftrace's
//! conventions): what is left out is never written, what is kept is recorded as without a
//! filter, and the program's behaviour is unchanged.

mod native_support;

use native_support::*;
use slice_trace_e2e::{cmd, run, scratch, texts};
use std::path::Path;
use std::process::Output;

/// `trace run -o DIR <filters> -- examples/c/build/<prog> <args>`.
fn trace_filtered(dir: &Path, filters: &[&str], prog: &str, args: &[&str]) -> Output {
    // Every test builds what it runs: no test may rely on another having run first.
    build_examples();
    let exe = example("c/build").join(prog);
    let mut c = cmd("trace");
    c.arg("run").arg("-o").arg(dir).args(filters).arg("--").arg(&exe).args(args);
    c.current_dir(example("c/build"));
    run(&mut c)
}

/// Every function recorded in any thread of the first process.
fn recorded(p: &Proc) -> Vec<String> {
    let mut v: Vec<String> = p.threads.iter().flat_map(|t| &t.calls).map(|c| p.name(c.func).to_string()).collect();
    v.sort();
    v.dedup();
    v
}

#[test]
fn notrace_leaves_out_a_function_and_every_call_under_it() {
    build_examples();
    let s = scratch();
    let (all, cut) = (s.path().join("all.d"), s.path().join("cut.d"));
    let a = trace_filtered(&all, &[], "scene", &["c1,r2x3,s2"]);
    let b = trace_filtered(&cut, &["-N", "shape_area"], "scene", &["c1,r2x3,s2"]);
    assert!(b.status.success(), "{:?}", texts(&b));
    assert_eq!(texts(&a).0, texts(&b).0, "the program's output is unchanged");
    let (pa, pb) = (&load(&all)[0], &load(&cut)[0]);
    let ra = recorded(pa);
    for gone in ["shape_area", "circle_area", "rect_area"] {
        assert!(ra.iter().any(|f| f == gone), "{gone} runs without a filter: {ra:?}");
    }
    // Everything else is recorded exactly as without the filter.
    let rb = recorded(pb);
    let kept: Vec<&String> = ra.iter().filter(|f| !["shape_area", "circle_area", "rect_area"].contains(&f.as_str())).collect();
    assert_eq!(rb.iter().collect::<Vec<_>>(), kept);
    assert_eq!(pb.callees("scene_print"), ["shape_kind", "shape_perimeter"]);
    assert_eq!(pb.callees("shape_perimeter"), pa.callees("shape_perimeter"));
    for f in ["parse_shape", "shape_perimeter", "circle_perimeter", "scene_total_area"] {
        assert_eq!(pb.count(f), pa.count(f), "{f}");
    }
    assert!(pb.threads.iter().all(|t| t.open_at_end == 0));
}

#[test]
fn filter_records_only_inside_the_matching_calls_in_every_thread() {
    build_examples();
    let s = scratch();
    let t = s.path().join("t.d");
    let out = trace_filtered(&t, &["-F", "scene_total_area"], "scene", &["c1,r2x3,s2", "--threads", "2"]);
    assert!(out.status.success(), "{:?}", texts(&out));
    let p = &load(&t)[0];
    assert_eq!(p.threads.len(), 3);
    // scene_total_area and what it calls; nothing before it (parsing, printing) or beside it.
    assert_eq!(recorded(p), ["circle_area", "rect_area", "scene_total_area", "shape_area"]);
    assert_eq!(p.callees("scene_total_area"), ["scene_total_area", "shape_area"]);
    for t in &p.threads {
        // The outermost recorded call is the filtered function itself, then its recursion.
        assert_eq!(t.calls.first().map(|c| (c.depth, p.name(c.func))), Some((1, "scene_total_area")), "thread {}", t.tid);
        assert_eq!(t.open_at_end, 0);
    }

    // -F and -N together, with a pattern on the object: the parser without the library.
    let t2 = s.path().join("t2.d");
    let out = trace_filtered(&t2, &["-F", "scene_parse", "-N", ".*@libshapes\\.so"], "scene", &["c1,r2x3,s2"]);
    assert!(out.status.success(), "{:?}", texts(&out));
    let p = &load(&t2)[0];
    assert_eq!(recorded(p), ["parse_number", "parse_shape", "scene_parse"]);
    assert_eq!(p.sequence(0)[..3], ["1:scene_parse", "2:parse_shape", "3:parse_number"]);
}

#[test]
fn a_notrace_call_left_by_longjmp_ends_at_the_next_call_above_it() {
    build_examples();
    let s = scratch();
    let t = s.path().join("t.d");
    // deep2 is left out with deep3 under it; deep3 jumps out of it to main.
    let out = trace_filtered(&t, &["-N", "deep2"], "jumps", &["6"]);
    assert!(out.status.success(), "{:?}", texts(&out));
    let p = &load(&t)[0];
    assert_eq!(p.callees("main"), ["deep1", "handle"]);
    assert_eq!(p.count("deep1"), 6);
    assert_eq!(p.count("handle"), 2);
    assert_eq!(recorded(p), ["deep1", "handle", "main"]);
    assert_eq!(p.threads[0].open_at_end, 0);

    let prompt = slice_trace_e2e::run_ok(cmd("slice").arg("from-trace").arg(&t).arg("-q").arg("What does a failed job do?"));
    assert!(prompt.lines().any(|l| l == "  handle ×2"), "{prompt}");
}

#[test]
fn bad_patterns_are_refused_before_the_program_runs() {
    let s = scratch();
    let t = s.path().join("t.d");
    let out = trace_filtered(&t, &["-N", "parse_(", "-F", "main"], "fib", &[]);
    assert_eq!(out.status.code(), Some(2));
    let (stdout, stderr) = texts(&out);
    assert!(stdout.is_empty(), "{stdout}");
    assert!(stderr.contains("-N \"parse_(\": not a regular expression"), "{stderr}");
    let out = trace_filtered(&t, &["-F", "main@lib(c"], "fib", &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(texts(&out).1.contains("not a regular expression"), "{:?}", texts(&out));
}
