//! End-to-end: the native shim's contract with the traced program (issue 14, the review of
//! the shim): `errno` is the program's, only the hooks are exported, and a profiling timer
//! whose handler calls instrumented code while the process exits does not crash it.

mod native_support;

use native_support::*;
use slice_trace_e2e::{scratch, target_dir, texts};
use std::path::{Path, PathBuf};

/// Build C source `code` with `-finstrument-functions` and `extra` (cc runs in `dir`).
fn build_c_with(dir: &Path, name: &str, code: &str, extra: &[&str]) -> PathBuf {
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, code).unwrap();
    let bin = dir.join(name);
    let cc = std::process::Command::new("cc")
        .args(["-finstrument-functions", "-g", "-O0", "-o"])
        .arg(&bin)
        .arg(&src)
        .args(extra)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(cc.status.success(), "{:?}", texts(&cc));
    bin
}

/// The shim's slow paths (the process's first event: its trace directory, `realpath` of the
/// executable, the stream's mmap; a function seen for the first time: `dladdr`, the
/// function table; a new thread) must leave `errno` as the program set it.
#[test]
fn errno_is_unchanged_by_the_first_calls_of_process_thread_and_function() {
    let s = scratch();
    // A function in a shared library: its object's path is made absolute (realpath) when
    // the function is first seen.
    build_c_with(s.path(), "libplug.so", "int plug(int x) { return x - 1; }\n", &["-shared", "-fPIC"]);
    let bin = build_c_with(
        s.path(),
        "errno_check",
        r#"#include <errno.h>
#include <pthread.h>
#include <stdio.h>
static int first(int x) { return x + 1; }
static int second(int x) { return x * 2; }
static int seen_ctor = -1;
/* Not instrumented, run before main and after the preloaded shim's constructor: the call
 * of first() is the process's very first hook call. */
__attribute__((constructor, no_instrument_function)) static void early(void) {
    errno = 4242;
    first(1);
    seen_ctor = errno;
}
int plug(int x);
static void *worker(void *arg) { (void)arg; return 0; }
int main(void) {
    errno = 4243;
    second(2); /* a function seen for the first time */
    int seen_fn = errno;
    errno = 4244;
    plug(3); /* a function of another object, seen for the first time */
    int seen_lib = errno;
    pthread_t th;
    pthread_create(&th, 0, worker, 0); /* the thread's first event opens its stream */
    pthread_join(th, 0);
    printf("%d %d %d\n", seen_ctor, seen_fn, seen_lib);
    return 0;
}
"#,
        &["-L.", "-lplug", "-Wl,-rpath,$ORIGIN", "-pthread"],
    );
    let t = s.path().join("t.d");
    let out = trace(&t, &bin, &[]);
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(stdout.trim_end(), "4242 4243 4244", "errno after the shim's first-call paths");
    // And the calls were recorded (the slow paths ran).
    let procs = load(&t);
    assert_eq!(procs[0].count("first"), 1);
    assert_eq!(procs[0].count("second"), 1);
    assert_eq!(procs[0].count("plug"), 1);
}

/// The library exports the two hooks, the dlopen/dlmopen/dlclose/__cxa_atexit wrappers and the signal wrappers of the inline probes and nothing else of its own: hot.c is compiled with
/// `-fvisibility=hidden`, and lib.rs's slow paths that hot.c calls by name are made local by
/// a version script (build.rs).
#[test]
fn only_the_hooks_are_exported() {
    let so = target_dir().join("libslicetrace_native.so");
    assert!(so.exists(), "{} is not built", so.display());
    let out = std::process::Command::new("nm").args(["-D", "--defined-only"]).arg(&so).output().unwrap();
    assert!(out.status.success(), "{:?}", texts(&out));
    let (stdout, _) = texts(&out);
    let mut funcs: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.split_whitespace().collect::<Vec<_>>().get(1..3).map(|v| (v[0], v[1])))
        .filter(|(k, _)| *k == "T")
        .map(|(_, n)| n)
        .collect();
    funcs.sort_unstable();
    // dlopen, dlmopen and dlclose: entry patching's wrappers (shims/native/src/objects/dlopen.rs), which
    // must be reached by the program's calls; __cxa_atexit: the exit handlers' closer
    // (shims/native/src/hooks.rs); sigaction and signal: the program's SIGTRAP handler kept
    // beside the inline probes', pthread_sigmask and sigprocmask: SIGTRAP never blocked while
    // probes are planted (shims/native/src/probe.rs); write: a libtest binary's output copied
    // into the trace (shims/native/src/output.rs); slice_trace_clock_*: the process's one clock,
    // which the Python shim reads too with --native-ext, and slice_trace_python_entry_ns, the
    // clock of a Python call, which closes the native calls that returned first
    // (shims/native/src/hooks.rs).
    assert_eq!(
        funcs,
        [
            "__cxa_atexit",
            "__cyg_profile_func_enter",
            "__cyg_profile_func_exit",
            "dlclose",
            "dlmopen",
            "dlopen",
            "pthread_sigmask",
            "sigaction",
            "signal",
            "sigprocmask",
            "slice_trace_clock_ns",
            "slice_trace_clock_refine",
            "slice_trace_python_entry_ns",
            "write"
        ],
        "{stdout}"
    );
}

/// A profiling timer's signal that arrives while the process exits, its handler calling
/// instrumented code: the shim turns recording off before it unmaps the stream's window, so
/// the handler's events are dropped, not written into unmapped memory. To hit the race every
/// time, the program interposes `munmap` (exported with -rdynamic, so the shim's call binds
/// to it) and raises SIGPROF right after the real unmap, once `exit` has begun.
#[test]
fn a_profiling_signal_during_the_exit_time_unmap_does_not_crash_the_program() {
    let s = scratch();
    let bin = build_c_with(
        s.path(),
        "exit_timer",
        r#"#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
static volatile long handled;
static volatile int exiting;
static int in_handler(int x) { return x + 1; }
static void on_prof(int sig) { handled = in_handler((int)handled); (void)sig; }
__attribute__((no_instrument_function)) int munmap(void *addr, size_t len) {
    long r = syscall(SYS_munmap, addr, len);
    if (exiting)
        raise(SIGPROF);
    return (int)r;
}
__attribute__((no_instrument_function)) static void at_exit(void) { exiting = 1; }
static int leaf(int x) { return x * 3; }
int main(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_prof;
    sigaction(SIGPROF, &sa, NULL);
    atexit(at_exit); /* runs before the shim's exit-time close */
    long sum = 0;
    for (int i = 0; i < 1000; i++) sum += leaf(i);
    raise(SIGPROF); /* one handler call recorded while recording is on */
    printf("%ld %ld\n", sum, handled);
    fflush(stdout);
    return 0;
}
"#,
        &["-rdynamic"],
    );
    let t = s.path().join("t.d");
    let out = trace(&t, &bin, &[]);
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "{:?} {stderr}", out.status);
    assert_eq!(stdout.trim_end(), "1498500 1");
    let procs = load(&t);
    assert_eq!(procs[0].count("leaf"), 1000);
    assert_eq!(procs[0].count("in_handler"), 1, "the handler's call at exit is dropped, the one before is recorded");
}

/// An instrumented library whose constructor calls instrumented code runs before the
/// preloaded shim's constructor: the shim sets itself up on that first hook call, so the
/// main thread records the constructor's calls and then `main`'s (it recorded nothing).
#[test]
fn an_instrumented_library_constructor_before_the_shims_is_recorded() {
    let s = scratch();
    build_c_with(
        s.path(),
        "libearly.so",
        r#"static int early_helper(int x) { return x + 7; }
int early_value;
__attribute__((constructor)) static void early_init(void) { early_value = early_helper(1); }
"#,
        &["-shared", "-fPIC"],
    );
    let bin = build_c_with(
        s.path(),
        "ctor_order",
        r#"#include <stdio.h>
extern int early_value;
static int work(int x) { return x * 2; }
int main(void) {
    printf("%d %d\n", early_value, work(3));
    return 0;
}
"#,
        &["-L.", "-learly", "-Wl,-rpath,$ORIGIN"],
    );
    let t = s.path().join("t.d");
    let out = trace(&t, &bin, &[]);
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(stdout.trim_end(), "8 6");
    let procs = load(&t);
    let p = &procs[0];
    assert_eq!(p.count("early_helper"), 1, "the library constructor's call");
    assert_eq!(p.count("main"), 1, "the main thread records after an early first event");
    assert_eq!(p.count("work"), 1);
}

/// A signal handler that leaves with `siglongjmp` while the shim registers a new function
/// (the program interposes `dladdr`, which the shim calls then, and raises the signal there):
/// the registration lock is not left held (signals are blocked while it is held: another
/// thread registers its functions, no deadlock), and the thread records again from its next
/// entry at or above the abandoned slow path's stack (it recorded nothing more).
#[test]
fn siglongjmp_out_of_a_handler_during_a_slow_path_leaves_recording_on() {
    let s = scratch();
    let bin = build_c_with(
        s.path(),
        "longjmp_out",
        r#"#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
static sigjmp_buf jb;
static volatile int armed;
static int in_handler(int x) { return x + 1; }
static void on_usr1(int sig) { in_handler(sig); siglongjmp(jb, 1); }
__attribute__((no_instrument_function)) int dladdr(const void *a, Dl_info *info) {
    int (*real)(const void *, Dl_info *) = (int (*)(const void *, Dl_info *))dlsym(RTLD_NEXT, "dladdr");
    int r = real(a, info);
    if (armed) {
        armed = 0;
        raise(SIGUSR1);
    }
    return r;
}
static int victim(int x) { return x * 2; }
static int after(int x) { return x + 3; }
static void *worker(void *arg) { after(1); return arg; }
int main(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sigaction(SIGUSR1, &sa, NULL);
    int jumped = 1;
    if (sigsetjmp(jb, 1) == 0) {
        armed = 1;
        victim(1); /* new: the shim calls dladdr, the handler jumps out */
        jumped = 0;
    }
    after(2);
    pthread_t th;
    pthread_create(&th, 0, worker, 0);
    pthread_join(th, 0);
    printf("%d\n", jumped);
    return 0;
}
"#,
        &["-rdynamic", "-pthread", "-ldl"],
    );
    let t = s.path().join("t.d");
    let mut c = slice_trace_e2e::cmd("trace");
    c.arg("run").arg("-o").arg(&t).arg("--").arg(&bin).stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
    // Its own process group, so that a hang kills the program too, not only `trace`.
    std::os::unix::process::CommandExt::process_group(&mut c, 0);
    let mut child = c.spawn().unwrap();
    let start = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > std::time::Duration::from_secs(30) {
            let _ = std::process::Command::new("kill").arg("-KILL").arg("--").arg(format!("-{}", child.id())).status();
            let _ = child.wait();
            panic!("the program hangs: the registration lock was left held");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(stdout.trim_end(), "1", "the handler jumped out");
    let procs = load(&t);
    let p = &procs[0];
    assert_eq!(p.count("after"), 2, "the main thread records again after the jump, and the worker records");
    assert_eq!(p.count("worker"), 1);
}

/// A timer whose handler leaves with `siglongjmp`, every 100 µs, wherever the
/// signal lands: often inside a hook's fast path, which holds the thread's write window while
/// it writes. The shim takes the window back at the next event at or above the abandoned
/// fast path's frame (hot.c's marker, window.rs), so every call made after a jump is recorded
/// (it recorded nothing more after the first jump out of a fast path), and the stream stays
/// exact: the reader checks the header's totals (calls, returns, last time) against what it
/// decodes, and calls and returns balance.
#[test]
fn siglongjmp_out_of_a_fast_path_leaves_recording_on() {
    let s = scratch();
    let rounds = 1000;
    let bin = build_c_with(
        s.path(),
        "jump_storm",
        &format!(
            r#"#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#define ROUNDS {rounds}
static sigjmp_buf jb;
static volatile sig_atomic_t armed;
/* Not instrumented: it only jumps, from wherever the signal landed. */
__attribute__((no_instrument_function)) static void on_alarm(int sig) {{
    (void)sig;
    if (armed) {{
        armed = 0;
        siglongjmp(jb, 1);
    }}
}}
static int leaf(int x) {{ return x * 3; }}
static int mid(int x) {{ return leaf(x) + leaf(x + 1); }}
/* No locals and no parameter: its frame is smaller than mid's, so its hook runs above any
 * hook of mid or leaf that a jump abandoned. */
static void after_jump(void) {{ }}
static int done(int n) {{ return n; }}
int main(void) {{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval it = {{ {{ 0, 100 }}, {{ 0, 100 }} }};
    setitimer(ITIMER_REAL, &it, NULL);
    volatile long sum = 0;
    volatile int i = 0;
    for (volatile int r = 0; r < ROUNDS; r++) {{
        if (sigsetjmp(jb, 1) == 0) {{
            armed = 1;
            for (;;)
                sum += mid(i++); /* until the signal jumps out */
        }}
        after_jump();
    }}
    struct itimerval off = {{ {{ 0, 0 }}, {{ 0, 0 }} }};
    setitimer(ITIMER_REAL, &off, NULL);
    printf("%d\n", done(ROUNDS));
    return 0;
}}
"#
        ),
        &[],
    );
    let t = s.path().join("t.d");
    let out = trace(&t, &bin, &[]);
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(stdout.trim_end(), rounds.to_string());
    let procs = load(&t); // panics on a corrupt stream or totals that do not match it
    let p = &procs[0];
    assert_eq!(p.threads.len(), 1);
    assert_eq!(p.count("after_jump"), rounds, "a call after a jump was dropped");
    assert_eq!(p.count("done"), 1);
    assert_eq!(p.callees("main"), ["after_jump", "done", "mid"], "the abandoned frames are closed");
    assert!(p.count("mid") >= rounds, "{}", p.count("mid"));
    assert_eq!(p.threads[0].open_at_end, 0, "calls and returns balance");
}

/// glibc carves the static TLS of every preloaded library out of each thread's stack and
/// refuses (EINVAL) a thread whose requested stack cannot hold it (with a 16 KiB id cache in
/// the shim's TLS block, `pthread_create` with a `PTHREAD_STACK_MIN` stack failed). The
/// shim's TLS block stays small (its id cache is on the heap), and a thread with a small
/// stack is created, runs and is recorded. (64 KiB: the first event of a thread runs the
/// shim's slow path on that stack, and a debug build of it needs about 32 KiB; a release
/// build records a `PTHREAD_STACK_MIN` thread.)
#[test]
fn the_shims_tls_block_is_small_and_a_small_stack_thread_is_recorded() {
    let so = target_dir().join("libslicetrace_native.so");
    let out = std::process::Command::new("readelf").args(["-lW"]).arg(&so).output().unwrap();
    let (stdout, _) = texts(&out);
    let tls = stdout.lines().find(|l| l.trim_start().starts_with("TLS ")).unwrap_or_else(|| panic!("no PT_TLS in\n{stdout}"));
    let memsz = tls.split_whitespace().nth(5).and_then(|v| u64::from_str_radix(v.trim_start_matches("0x"), 16).ok());
    assert!(memsz.is_some_and(|m| m <= 1024), "the shim's static TLS must stay small: {tls}");

    let s = scratch();
    let bin = build_c_with(
        s.path(),
        "small_stack",
        r#"#include <pthread.h>
#include <stdio.h>
static int leaf(int x) { return x + 1; }
static void *worker(void *arg) { return (void *)(long)leaf((int)(long)arg); }
int main(void) {
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setstacksize(&at, 64 * 1024);
    pthread_t t;
    void *r = 0;
    int c = pthread_create(&t, &at, worker, (void *)41L);
    if (c == 0)
        pthread_join(t, &r);
    printf("create %d result %ld\n", c, (long)r);
    return 0;
}
"#,
        &["-pthread"],
    );
    let t = s.path().join("t.d");
    let out = trace(&t, &bin, &[]);
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(stdout.trim_end(), "create 0 result 42", "pthread_create under the shim");
    let procs = load(&t);
    assert_eq!(procs[0].threads.len(), 2);
    assert_eq!(procs[0].count("worker"), 1);
    assert_eq!(procs[0].callees("worker"), ["leaf"]);
}
