//! End-to-end: record the C and C++ examples with `trace run` (the native shim preloaded),
//! read the traces back, symbolize them, and check the calls, threads, processes, exit
//! statuses and source spans.

mod native_support;

use native_support::*;
use slice_trace_e2e::{cmd, run, scratch, texts};
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;

fn c_src(name: &str) -> PathBuf {
    example("c").join(name)
}

#[test]
fn scene_threads_function_pointers_plugin_and_recursion() {
    build_examples();
    let s = scratch();
    let t = s.path().join("t.d");
    let out = trace(&t, &example("c/build/scene"), &["--threads", "2", "--plugin", "./libplugin.so"]);
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("total area: 26.927") && stdout.contains("plugin score: 3.942"), "{stdout}");

    let procs = load(&t);
    assert_eq!(procs.len(), 1);
    let p = &procs[0];
    assert!(p.warnings.is_empty(), "{:?}", p.warnings);
    assert_eq!(p.meta.kind, "native");
    // Main thread and two workers, each in its own stream.
    assert_eq!(p.threads.len(), 3, "{:?}", p.threads.iter().map(|t| t.tid).collect::<Vec<_>>());
    assert_eq!(p.threads[0].tid, p.meta.pid as u64);
    assert_eq!(p.sequence(0)[0], "1:main");
    for w in 1..3 {
        let seq = p.sequence(w);
        assert_eq!(&seq[..2], ["1:worker", "2:scene_total_area"], "thread {w}: {seq:?}");
    }
    assert!(p.threads.iter().all(|t| t.open_at_end == 0));

    // Callers and callees, across the executable, libshapes.so and the dlopen()ed plugin.
    assert_eq!(p.callees("main"), ["parallel_area", "run_plugin", "scene_parse", "scene_print", "scene_total_area"]);
    assert_eq!(p.callees("scene_parse"), ["parse_shape"]);
    assert_eq!(p.callees("parse_shape"), ["parse_number", "shape_circle", "shape_rect", "shape_square"]);
    assert_eq!(p.callees("shape_square"), ["shape_rect"]);
    // Function pointers: shape_area dispatches to both implementations.
    assert_eq!(p.callees("shape_area"), ["circle_area", "rect_area"]);
    assert_eq!(p.callees("shape_perimeter"), ["circle_perimeter", "rect_perimeter"]);
    // The plugin's constructor, called inside dlopen.
    assert_eq!(p.callees("run_plugin"), ["plugin_init", "plugin_score"]);
    assert_eq!(p.callees("plugin_init"), ["plugin_register"]);
    assert_eq!(p.callees("plugin_score"), ["weight"]);
    // Recursion: scene_total_area calls itself.
    assert_eq!(p.callees("scene_total_area"), ["scene_total_area", "shape_area"]);
    // Counts (spec c1,r2x3,s4,c0.5,r1x1).
    assert_eq!(p.count("shape_circle"), 2);
    assert_eq!(p.count("shape_rect"), 3);
    assert_eq!(p.count("weight"), 5);
    assert_eq!(p.count("worker"), 2);
    // main area (5 leaves, 9 calls), two workers over 3 + 2 shapes (5 + 3 calls).
    assert_eq!(p.count("scene_total_area"), 9 + 5 + 3);

    // Objects and sources.
    let so = |q: &str| p.func(q).object.clone().unwrap_or_default();
    assert!(so("main").ends_with("examples/c/build/scene"), "{}", so("main"));
    assert!(so("shape_area").ends_with("examples/c/build/libshapes.so"));
    assert!(so("plugin_score").ends_with("examples/c/build/libplugin.so"));
    for (q, file, needle) in [
        ("scene_total_area", "scene.c", "double scene_total_area(const struct scene *sc, int from, int to)"),
        ("main", "main.c", "int main(int argc, char **argv)"),
        ("rect_area", "shapes.c", "static double rect_area(const struct shape *s)"),
        ("plugin_score", "plugin.c", "double plugin_score(const struct scene *sc)"),
        // GNU style: the return type is on the line before the name; it is included.
        ("circle_area", "shapes.c", "static double\ncircle_area"),
    ] {
        let f = p.func(q);
        let path = c_src(file);
        assert_eq!(f.file.as_deref(), Some(path.as_path()), "{q}");
        let want = if needle.contains('\n') {
            let (first, last) = source_span(&path, needle.split('\n').nth(1).unwrap_or_default());
            (first - 1, last)
        } else {
            source_span(&path, needle)
        };
        assert_eq!((f.first_line, f.last_line), (Some(want.0), Some(want.1)), "{q} in {file}");
        assert_eq!(f.name, q);
    }
}

#[test]
fn fork_child_records_its_own_process_with_context() {
    build_examples();
    let s = scratch();
    let t = s.path().join("t.d");
    let out = trace(&t, &example("c/build/forker"), &[]);
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("child: sum of squares 14") && stdout.contains("parent: child exited with 7"), "{stdout}");
    let procs = load(&t);
    assert_eq!(procs.len(), 2, "{:?}", procs.iter().map(|p| &p.dir).collect::<Vec<_>>());
    let parent = procs.iter().find(|p| p.meta.forked_from.is_none()).expect("parent");
    let child = procs.iter().find(|p| p.meta.forked_from == Some(parent.meta.pid)).expect("child with forked_from");
    assert_eq!(parent.sequence(0), ["1:main", "2:spawn", "3:parent_work", "4:square"]);
    // The child's stream starts with the functions open at the fork.
    assert_eq!(child.sequence(0), ["1:main", "2:spawn", "3:child_work", "4:square", "4:square", "4:square"]);
    assert_eq!(child.threads[0].tid, child.meta.pid as u64);
    assert_eq!(child.func("child_work").file.as_deref(), Some(c_src("forker.c").as_path()));
}

#[test]
fn exec_of_an_instrumented_program_gets_a_new_process_image() {
    build_examples();
    let s = scratch();
    let t = s.path().join("t.d");
    let out = trace(&t, &example("c/build/forker"), &["exec"]);
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("fib(10) = 55"), "{stdout}");
    let procs = load(&t);
    assert_eq!(procs.len(), 3);
    let fib = procs.iter().find(|p| p.meta.exe.ends_with("/build/fib")).expect("fib image");
    assert!(fib.dir.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.ends_with(".1")), "{}", fib.dir.display());
    // The forked child before exec: same pid, its own directory.
    let before = procs.iter().find(|p| p.meta.pid == fib.meta.pid && p.dir != fib.dir).expect("pre-exec image");
    assert_eq!(before.sequence(0), ["1:main", "2:spawn", "3:exec_fib"]);
    // fib(10) makes 177 calls; main computes it twice.
    assert_eq!(fib.count("fib"), 2 * 177);
    assert_eq!(fib.callees("main"), ["fib", "sum_to"]);
    assert_eq!(fib.callees("sum_to"), ["add"]);
    assert_eq!(fib.count("add"), 1000);
}

/// How each ending of crash.c must be reported, and what the trace must hold.
#[test]
fn crashes_exits_and_signals_leave_complete_traces_and_pass_the_status_through() {
    build_examples();
    let cases: [(&str, Option<i32>, Option<i32>); 7] = [
        ("segv", None, Some(libc_sig::SEGV)),
        ("abort", None, Some(libc_sig::ABRT)),
        ("term", None, Some(libc_sig::TERM)),
        ("int", None, Some(libc_sig::INT)),
        ("exit", Some(5), None),
        ("_exit", Some(6), None),
        ("handler", Some(42), None),
    ];
    for (mode, code, signal) in cases {
        let s = scratch();
        let t = s.path().join("t.d");
        let out = trace(&t, &example("c/build/crash"), &[mode]);
        let (stdout, stderr) = texts(&out);
        assert_eq!(out.status.code(), code, "{mode}: {stderr}");
        assert_eq!(out.status.signal(), signal, "{mode}: {stderr}");
        assert!(stdout.contains("sum: 15"), "{mode}: {stdout}");
        let meta: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(t.join("meta.json")).unwrap()).unwrap();
        match (code, signal) {
            (Some(c), _) => assert_eq!(meta["exit"]["code"], c, "{mode}: {meta}"),
            (_, Some(sig)) => assert_eq!(meta["exit"]["signal"], sig, "{mode}: {meta}"),
            _ => unreachable!(),
        }
        let procs = load(&t);
        assert_eq!(procs.len(), 1, "{mode}");
        let p = &procs[0];
        let seq = p.sequence(0);
        let want_prefix =
            ["1:main", "2:work", "3:depth_sum", "4:depth_sum", "5:depth_sum", "6:depth_sum", "7:depth_sum", "8:depth_sum", "3:fail"];
        assert_eq!(&seq[..want_prefix.len()], want_prefix, "{mode}: {seq:?}");
        if mode == "handler" {
            // The program's own handler ran (inside raise, called from fail).
            assert!(stdout.contains("handler: caught SIGTERM"), "{stdout}");
            assert_eq!(seq.last().map(String::as_str), Some("4:on_term"), "{seq:?}");
        } else {
            assert_eq!(seq.len(), want_prefix.len(), "{mode}: {seq:?}");
        }
        // Every ending but a normal exit() leaves main, work and fail open.
        let open = p.threads[0].open_at_end;
        if mode == "exit" {
            assert!(open <= 3, "{mode}: {open}");
        } else {
            assert!(open >= 3, "{mode}: {open} open calls");
        }
    }
}

mod libc_sig {
    pub const INT: i32 = 2;
    pub const ABRT: i32 = 6;
    pub const SEGV: i32 = 11;
    pub const TERM: i32 = 15;
}

/// With entry patching turned off (`SLICE_TRACE_PATCH=0`; it is on by default,
/// tests/native_patch.rs), an uninstrumented binary is refused with the flags to add.
#[test]
fn uninstrumented_binary_is_refused_with_the_build_flags() {
    build_examples();
    let s = scratch();
    let t = s.path().join("t.d");
    let prog = example("c/build/plain");
    let mut c = cmd("trace");
    c.env("SLICE_TRACE_PATCH", "0").arg("run").arg("-o").arg(&t).arg("--").arg(&prog);
    let out = run(&mut c);
    let (stdout, stderr) = texts(&out);
    assert!(!out.status.success());
    assert!(stderr.contains("-finstrument-functions"), "{stderr}");
    assert!(stderr.contains("plain"), "{stderr}");
    assert!(!stdout.contains("plain: not instrumented"), "the target must not run: {stdout}");
}

#[test]
fn cpp_classes_virtual_calls_templates_lambdas_and_exceptions() {
    build_examples();
    let s = scratch();
    let t = s.path().join("t.d");
    let out = trace(&t, &example("cpp/build/shapes"), &["c1,r2x3,s2"]);
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("total area 13.142, 1 square(s)"), "{stdout}");
    let p = &load(&t)[0];
    assert!(p.warnings.is_empty(), "{:?}", p.warnings);
    let src = |f: &str| example("cpp").join(f);

    // Virtual calls resolve to the overriders, with demangled qualified names.
    let report = "report(std::vector<std::unique_ptr<geo::Shape, std::default_delete<geo::Shape> >, std::allocator<std::unique_ptr<geo::Shape, std::default_delete<geo::Shape> > > > const&)";
    let callees = p.callees(report);
    for want in [
        "geo::Circle::area() const",
        "geo::Rect::area() const",
        "geo::Circle::name[abi:cxx11]() const",
        "geo::Rect::name[abi:cxx11]() const",
    ] {
        assert!(callees.iter().any(|c| c == want), "{want} not in {callees:?}");
    }
    let area = p.func("geo::Circle::area() const");
    assert_eq!(area.name, "area");
    assert_eq!(area.file.as_deref(), Some(src("shapes.cpp").as_path()));
    assert_eq!((area.first_line, area.last_line), {
        let (a, b) = source_span(&src("shapes.cpp"), "double Circle::area() const");
        (Some(a), Some(b))
    });
    // An inline member defined in the header.
    let cname = p.func("geo::Circle::name[abi:cxx11]() const");
    assert_eq!(cname.file.as_deref(), Some(src("shapes.hpp").as_path()));
    let hpp = std::fs::read_to_string(src("shapes.hpp")).unwrap();
    let line = hpp.lines().position(|l| l.contains("std::string name() const override { return \"circle\"; }")).unwrap() as u32 + 1;
    assert_eq!((cname.first_line, cname.last_line), (Some(line), Some(line)));

    // Templates: two instantiations; the span starts at the `template <...>` line.
    let sums: Vec<_> = p.funcs.iter().filter(|f| f.name.starts_with("sum_by<")).collect();
    assert_eq!(sums.len(), 2, "{sums:?}");
    let (decl, end) = source_span(&src("main.cpp"), "T sum_by(");
    for f in &sums {
        assert_eq!((f.first_line, f.last_line), (Some(decl - 1), Some(end)), "{}", f.qualname);
        // The lambdas are called from the template.
        let lambdas = p.callees(&f.qualname);
        assert!(lambdas.iter().any(|l| l.contains("{lambda(geo::Shape const&)#")), "{lambdas:?}");
    }
    let lambda = p
        .funcs
        .iter()
        .find(|f| f.qualname.ends_with("{lambda(geo::Shape const&)#2}::operator()(geo::Shape const&) const"))
        .expect("second lambda");
    assert!(lambda.qualname.starts_with("report("), "{}", lambda.qualname);
    assert_eq!(lambda.name, "{lambda(geo::Shape const&)#2}");
    let (l2, _) = source_span(&src("main.cpp"), "int named = sum_by<int>(shapes, [](const geo::Shape &s) {");
    assert_eq!((lambda.first_line, lambda.last_line), (Some(l2), Some(l2 + 2)));

    // Exceptions: the exit hook runs while unwinding, so the stream stays balanced and
    // main carries on after the catch.
    let s2 = scratch();
    let t2 = s2.path().join("t.d");
    let out = trace(&t2, &example("cpp/build/shapes"), &["c1,q"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(texts(&out).0.contains("error: shape spec too short: 'q'"));
    let p = &load(&t2)[0];
    assert_eq!(p.threads[0].open_at_end, 0);
    // parse_one is static: its qualified name comes from the symbol table's mangled name.
    assert_eq!(p.count("geo::parse_one(std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> > const&)"), 2);
    assert!(p.count("geo::Circle::area() const") == 0, "report must not run after the exception");
}

#[test]
fn slice_from_trace_prints_the_native_tree_and_exact_sources() {
    build_examples();
    let s = scratch();
    let t = s.path().join("t.d");
    let out = trace(&t, &example("c/build/scene"), &["--plugin", "./libplugin.so"]);
    assert!(out.status.success(), "{}", texts(&out).1);
    let prompt =
        slice_trace_e2e::run_ok(slice_trace_e2e::cmd("slice").arg("from-trace").arg(&t).arg("-q").arg("How is the total area computed?"));
    // The tree: callers, callees, counts, the recursion cut, the worker threads. Every one of
    // these functions has its source block, whose heading locates it (paths are shown relative
    // to the traced command's directory, here examples/c/build), so the tree names it only.
    for (head, tail) in [
        ("main", ""),
        ("    parse_shape", " ×5"),
        ("      shape_circle", " ×2"),
        ("    shape_area", " ×5"),
        ("      circle_area", " ×2"),
        ("    scene_total_area ×", " ↻ recursive"),
        ("worker", ""),
        ("    plugin_score", ""),
    ] {
        assert!(
            prompt.lines().any(|l| l.starts_with(head) && l.ends_with(tail) && !l.contains('(')),
            "{head:?}..{tail:?} not in\n{prompt}"
        );
    }
    for (f, at) in [
        ("main", "main.c:65-"),
        ("parse_shape", "scene.c:14-"),
        ("shape_circle", "shapes.c:31-"),
        ("shape_area", "shapes.c:49-"),
        ("circle_area", "shapes.c:6-"),
        ("worker", "main.c:21-"),
        ("plugin_score", "plugin.c:9-"),
    ] {
        assert!(prompt.lines().any(|l| l.starts_with(&format!("#### `{f}` (")) && l.contains(at)), "{f} at {at} not in\n{prompt}");
    }
    // The sources: exact spans, the GNU-style return type line included.
    let (first, last) = source_span(&c_src("scene.c"), "double scene_total_area(");
    assert!(prompt.contains(&format!("scene.c:{first}-{last})")), "{prompt}");
    let circle = "```c\nstatic double\ncircle_area(const struct shape *s)\n{\n    return PI * s->a * s->a;\n}\n```";
    assert!(prompt.contains(circle), "{prompt}");
    let weight = std::fs::read_to_string(c_src("plugin.c")).unwrap();
    let weight: String = weight.lines().skip(3).take(4).map(|l| format!("{l}\n")).collect();
    assert!(prompt.contains(&weight), "{weight} not in {prompt}");
    // The hooks record every return: the times are measured, and the tree does not call them
    // estimated (an entry-patched build's does: tests/native_patch.rs).
    let tree = slice_trace_e2e::run_ok(slice_trace_e2e::cmd("slice").arg("tree").arg(&t));
    assert!(tree.lines().filter(|l| l.starts_with("── ")).count() >= 3, "{tree}");
    assert!(!tree.contains("estimated"), "{tree}");
    // Instrumented code calls the hooks from inlined copies too: no note about inlining.
    assert!(!prompt.contains("inlined"), "{prompt}");
}

/// A signal handler that calls instrumented functions, arriving thousands of times in the
/// middle of other calls' events: the stream must stay well formed (no event written over
/// another), every call of the main loop recorded, and the handler's calls recorded where the
/// signal arrived, each whole: `on_alarm` directly under the function it interrupted, with its
/// one `in_handler` call under it. A handler's events are dropped only when the signal lands
/// while the hot path itself writes (a window of a few instructions), so most are recorded.
#[test]
fn signal_handlers_calling_instrumented_code_are_recorded_and_nested_where_they_ran() {
    let s = scratch();
    let src = s.path().join("sig.c");
    std::fs::write(
        &src,
        r#"#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
static volatile long handled;
static int in_handler(int x) { return x + 1; }
static void on_alarm(int sig) { handled = in_handler((int)handled); (void)sig; }
static int leaf(int x) { return x * 3; }
static int mid(int x) { return leaf(x) + leaf(x + 1); }
int main(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigaction(SIGPROF, &sa, NULL);
    struct itimerval it = { { 0, 50 }, { 0, 50 } };
    setitimer(ITIMER_PROF, &it, NULL);
    long sum = 0;
    for (int i = 0; i < 3000000; i++) sum += mid(i);
    struct itimerval off = { { 0, 0 }, { 0, 0 } };
    setitimer(ITIMER_PROF, &off, NULL);
    printf("%ld %ld\n", sum, handled);
    return 0;
}
"#,
    )
    .unwrap();
    let bin = s.path().join("sig");
    let cc = std::process::Command::new("cc").args(["-finstrument-functions", "-g", "-O0", "-o"]).arg(&bin).arg(&src).output().unwrap();
    assert!(cc.status.success(), "{:?}", texts(&cc));
    let t = s.path().join("t.d");
    let out = trace(&t, &bin, &[]);
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "{stderr}");
    let handled: usize = stdout.split_whitespace().nth(1).and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("{stdout}"));
    assert!(handled >= 20, "the timer fired too rarely to test anything: {stdout}");
    let procs = load(&t); // panics on a corrupt stream
    let p = &procs[0];
    assert_eq!(p.threads.len(), 1);
    assert_eq!(p.threads[0].open_at_end, 0, "calls and returns balance");
    assert_eq!(p.count("mid"), 3_000_000);
    assert_eq!(p.count("leaf"), 6_000_000);
    assert_eq!(p.count("main"), 1);
    // The handler's calls: recorded (most of them), never more than ran.
    let recorded = p.count("on_alarm");
    assert!(recorded <= handled, "{recorded} handler calls recorded, {handled} ran");
    assert!(recorded * 2 >= handled, "only {recorded} of {handled} handler calls recorded");
    // Each recorded handler call sits under the function the signal interrupted, and holds
    // exactly its own callee, nested one level below it.
    let calls = &p.threads[0].calls;
    let mut checked = 0;
    for (i, c) in calls.iter().enumerate() {
        match p.name(c.func) {
            "on_alarm" => {
                let parent = c.parent.map(|f| p.name(f));
                assert!(matches!(parent, Some("main" | "mid" | "leaf")), "on_alarm #{i} under {parent:?}");
                let next = calls.get(i + 1).expect("a call after on_alarm");
                assert_eq!((p.name(next.func), next.depth, next.parent), ("in_handler", c.depth + 1, Some(c.func)), "after on_alarm #{i}");
                // Nothing else under on_alarm: the next call after in_handler is outside it.
                assert!(calls.get(i + 2).is_none_or(|n| n.depth <= c.depth), "on_alarm #{i} has a second callee");
                checked += 1;
            }
            "in_handler" => {
                assert_eq!(c.parent.map(|f| p.name(f)), Some("on_alarm"), "in_handler #{i}");
            }
            _ => {}
        }
    }
    assert_eq!(checked, recorded);
    assert_eq!(p.count("in_handler"), recorded, "one in_handler per recorded on_alarm");
}

/// clang as well as gcc: the same program built with `clang -finstrument-functions -g` is
/// recorded, symbolized with exact source spans, and printed by `slice`.
#[test]
fn clang_built_program_is_recorded_and_symbolized() {
    let s = scratch();
    let exe = s.path().join("fib-clang");
    let out = slice_trace_e2e::run(
        std::process::Command::new("clang").args(["-finstrument-functions", "-g", "-O0", "-o"]).arg(&exe).arg(c_src("fib.c")),
    );
    assert!(out.status.success(), "clang failed (CI installs it: apt-get install clang): {:?}", texts(&out));
    let t = s.path().join("t.d");
    let out = trace(&t, &exe, &["10", "1"]);
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("fib(10) = 55"), "{stdout}");

    let procs = load(&t);
    assert_eq!(procs.len(), 1);
    let p = &procs[0];
    assert!(p.warnings.is_empty(), "{:?}", p.warnings);
    assert_eq!(p.callees("main"), ["fib", "sum_to"]);
    assert_eq!(p.callees("sum_to"), ["add"]);
    // fib(10) makes 177 calls; main calls it twice.
    assert_eq!(p.count("fib"), 2 * 177);
    assert_eq!(p.count("add"), 1000);
    let (first, last) = source_span(&c_src("fib.c"), "static long fib(");
    let f = p.func("fib");
    assert_eq!((f.first_line, f.last_line), (Some(first), Some(last)), "{f:?}");
    assert_eq!(f.file.as_deref(), Some(c_src("fib.c").as_path()));

    let prompt = slice_trace_e2e::run_ok(slice_trace_e2e::cmd("slice").arg("from-trace").arg(&t).arg("-q").arg("How is fib computed?"));
    assert!(prompt.lines().any(|l| l == "  fib ×2"), "{prompt}");
    assert!(prompt.contains("#### `fib` (") && prompt.contains(&format!("fib.c:{first}-{last})")), "{prompt}");
    assert!(prompt.lines().any(|l| l.starts_with("    fib ×") && l.ends_with("↻ recursive")), "{prompt}");
    let src = std::fs::read_to_string(c_src("fib.c")).unwrap();
    let block: Vec<&str> = src.lines().skip(first as usize - 1).take((last - first + 1) as usize).collect();
    assert!(prompt.contains(&format!("```c\n{}\n```", block.join("\n"))), "{prompt}");
}

/// 512 distinct functions called through a table of function pointers in a pseudo-random
/// order (examples/c/fptrs.c): far more functions than fit the shim's per-thread id cache
/// without collisions, so entries miss, evict each other and move between the cache's two
/// ways all the time. Every call must be recorded with the right function at the right
/// depth: the expected sequence is computed here the way the program computes it.
#[test]
fn many_functions_through_function_pointers_are_recorded_exactly() {
    build_examples();
    let s = scratch();
    let t = s.path().join("t.d");
    let (chains, depth) = (3000u64, 3i32);
    let out = trace(&t, &example("c/build/fptrs"), &[&chains.to_string(), &depth.to_string()]);
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "{stderr}");
    // The program's own arithmetic (fptrs.c): f<n>(x, d) computes y = 31x + n and calls
    // table[NEXT(y)](y, d - 1) while d > 0; main calls table[NEXT(i + acc)](i, depth).
    let next = |x: u64| (x.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 55) as usize;
    let mut want = vec!["1:main".to_string()];
    let mut acc = 0u64;
    for i in 0..chains {
        let (mut f, mut x) = (next(i.wrapping_add(acc)), i);
        for d in 0..=depth {
            want.push(format!("{}:f{f:03o}", d + 2));
            let y = x.wrapping_mul(31).wrapping_add(f as u64);
            if d == depth {
                acc ^= y;
            } else {
                (f, x) = (next(y), y);
            }
        }
    }
    assert!(stdout.contains(&format!("checksum {acc:x}")), "{stdout} (expected checksum {acc:x})");
    let p = &load(&t)[0];
    let got = p.sequence(0);
    assert_eq!(got.len(), want.len());
    if let Some(i) = got.iter().zip(&want).position(|(a, b)| a != b) {
        panic!("call #{i}: recorded {}, the program made {}", got[i], want[i]);
    }
    let distinct: std::collections::HashSet<&str> = want.iter().filter_map(|c| c.split(':').nth(1)).collect();
    assert!(distinct.len() > 500, "{} distinct functions", distinct.len());
    assert_eq!(p.threads[0].open_at_end, 0);
}
