//! End-to-end: the probe lists of a program the recorded one starts (docs/native-recording.md,
//! "Inlined functions"). `trace run` lists the recorded program's inlined code before the run;
//! a program it starts (`sh -c ./prog`, a launcher that forks and execs, `make run`) is asked
//! for by its shim at start-up, its executable and its own libraries, so that its inlined code
//! that ran is shown from the first run: `examples/c/inlined.c` built `gcc -g -O1` (`checksum`
//! inlined into `main`) and `examples/c/libinline` (`mix` inlined into the library's
//! `lib_hash`). A system program started the same way (`/bin/true`) is never asked about.

mod native_support;

use native_support::*;
use slice_trace_e2e::{call_tree_text as tree_text, cmd, run, run_ok, scratch, source_block as block, target_dir, texts};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use trace_format::probes::{ListRequest, ENV_LISTS_SOCKET, ENV_LISTS_TIMEOUT_MS};

/// `examples/c/inlined.c` built `gcc -g -O1` into `dir/inlined`.
fn build_inlined(dir: &Path) -> PathBuf {
    let exe = dir.join("inlined");
    let o = run(std::process::Command::new("gcc").args(["-g", "-O1", "-o"]).arg(&exe).arg(example("c/inlined.c")));
    assert!(o.status.success(), "gcc failed: {:?}", texts(&o));
    exe
}

/// `trace run -o dir -- argv` from `cwd`, with inline probes on by default and an empty
/// cache of lists (`cache`): stdout.
fn trace_in(cwd: &Path, cache: &Path, dir: &Path, argv: &[&str]) -> String {
    let mut c = cmd("trace");
    c.current_dir(cwd).env_remove("SLICE_TRACE_PATCH").env_remove("SLICE_TRACE_INLINE").env("XDG_CACHE_HOME", cache);
    let out = run(c.arg("run").arg("-q").arg("-o").arg(dir).arg("--").args(argv));
    assert!(out.status.success(), "{:?}", texts(&out));
    texts(&out).0
}

fn prompt(dir: &Path, q: &str) -> String {
    run_ok(cmd("slice").arg("from-trace").arg(dir).arg("-q").arg(q))
}

/// The objects the libraries' inline list file names.
fn listed(dir: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(dir.join("inline-probes-libs.json")).unwrap_or_else(|e| panic!("no libraries' lists: {e}"));
    let lists: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap();
    lists.iter().map(|l| l["object"].as_str().unwrap().to_string()).collect()
}

#[test]
fn a_program_started_by_sh_c_shows_its_inlined_code_from_the_first_run() {
    let s = scratch();
    let exe = build_inlined(s.path());
    let lib_dir = example("c/libinline");
    let (lib, hasher) = build_with_library(s.path(), &lib_dir.join("hashing.c"), "hashing", &lib_dir.join("hasher.c"), "hasher");
    let cache = s.path().join("cache");
    let src = std::fs::read_to_string(example("c/inlined.c")).unwrap();
    let lines: Vec<&str> = src.lines().collect();

    // `&& /bin/true`: the shell forks the program (a lone command it would exec in place).
    let t = s.path().join("sh.d");
    assert_eq!(trace_in(s.path(), &cache, &t, &["sh", "-c", "./inlined abc && /bin/true"]), "193485963\n");
    assert_eq!(listed(&t), [exe.canonicalize().unwrap().to_string_lossy()], "the child's executable, listed when it started");
    let p = prompt(&t, "How is the checksum computed?");
    assert_eq!(tree_text(&p), "main\n  checksum [inlined]\n", "{p}");
    assert!(p.contains("#### `checksum` (") && p.contains("inlined.c:8-13)"), "{p}");
    assert_eq!(block(&p, "checksum"), Some(lines[7..13].join("\n").as_str()), "{p}");
    assert!(!p.contains("report_error`"), "report_error did not run: {p}");
    assert!(p.contains("in inlined, a function the compiler inlined into its caller is shown under that caller"), "{p}");
    assert!(!p.contains("cannot be told"), "{p}");

    // The child's own library (its DT_NEEDED one) is listed too.
    let t = s.path().join("lib.d");
    assert_eq!(trace_in(s.path(), &cache, &t, &["sh", "-c", "./hasher abc && /bin/true"]), "193485963\n");
    let mut want =
        vec![hasher.canonicalize().unwrap().to_string_lossy().into_owned(), lib.canonicalize().unwrap().to_string_lossy().into_owned()];
    let mut got = listed(&t);
    want.sort();
    got.sort();
    assert_eq!(got, want);
    let p = prompt(&t, "How is the hash computed?");
    assert_eq!(tree_text(&p), "main\n  lib_hash\n    mix [inlined]\n", "{p}");
    assert!(p.contains("#### `mix` (") && p.contains("hashing.c:10-15)"), "{p}");
    assert!(!p.contains("`complain`"), "complain did not run: {p}");
}

/// A shell script running a Python script that starts the program with `subprocess.run`: the
/// Python process is recorded by the Python shim, the program by entry patching, with its
/// inlined code from its list asked for at its start.
#[test]
fn a_program_a_python_script_starts_through_a_shell_script_shows_its_inlined_code() {
    let s = scratch();
    build_inlined(s.path());
    std::fs::write(s.path().join("sub.py"), "import subprocess\nsubprocess.run([\"./inlined\", \"abc\"], check=True)\n").unwrap();
    let script = s.path().join("run.sh");
    std::fs::write(&script, format!("#!/bin/sh\nexec {} sub.py\n", slice_trace_e2e::python())).unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let t = s.path().join("py.d");
    assert_eq!(trace_in(s.path(), &s.path().join("cache"), &t, &[script.to_str().unwrap()]), "193485963\n");
    let p = prompt(&t, "How is the checksum computed?");
    assert!(p.contains("(python3 sub.py), thread MainThread") || p.contains(" sub.py), thread MainThread"), "{p}");
    // The program's own tree (its main's source follows: no file in the tree line).
    assert!(p.contains("(./inlined abc), thread main\n\n```text\nmain\n  checksum [inlined]\n```"), "{p}");
    assert!(p.contains("#### `checksum` (") && p.contains("inlined.c:8-13)"), "{p}");
}

/// A native program that starts another by `fork` and `execv`, and waits for it.
fn build_spawner(dir: &Path) -> PathBuf {
    let src = dir.join("spawn.c");
    std::fs::write(
        &src,
        "#include <sys/wait.h>\n#include <unistd.h>\n\
         int main(int argc, char **argv) {\n\
           if (argc < 2) return 2;\n\
           pid_t pid = fork();\n\
           if (pid == 0) { execv(argv[1], argv + 1); _exit(127); }\n\
           int st = 0;\n\
           waitpid(pid, &st, 0);\n\
           return WIFEXITED(st) ? WEXITSTATUS(st) : 1;\n\
         }\n",
    )
    .unwrap();
    let exe = dir.join("spawn");
    let o = run(std::process::Command::new("gcc").args(["-g", "-O1", "-o"]).arg(&exe).arg(&src));
    assert!(o.status.success(), "gcc failed: {:?}", texts(&o));
    exe
}

/// The recorded program is native (its own list written before the run) and starts another
/// program: that one's list is asked for when it starts.
#[test]
fn a_program_a_native_program_starts_shows_its_inlined_code_from_the_first_run() {
    let s = scratch();
    let exe = build_inlined(s.path());
    let spawner = build_spawner(s.path());
    let cache = s.path().join("cache");
    let t = s.path().join("spawn.d");
    let (spawner, exe) = (spawner.to_string_lossy().into_owned(), exe.to_string_lossy().into_owned());
    assert_eq!(trace_in(s.path(), &cache, &t, &[&spawner, &exe, "abc"]), "193485963\n");
    assert!(listed(&t).iter().any(|o| o.ends_with("/inlined")), "{:?}", listed(&t));
    let p = prompt(&t, "How is the checksum computed?");
    // Each process its own tree: the child's main, from inlined.c, with checksum under it.
    assert!(p.contains("(inlined abc), thread main\n\n```text\nmain  (") && p.contains("inlined.c:20)\n  checksum [inlined]\n```"), "{p}");
    let src = std::fs::read_to_string(example("c/inlined.c")).unwrap();
    let lines: Vec<&str> = src.lines().collect();
    assert_eq!(block(&p, "checksum"), Some(lines[7..13].join("\n").as_str()), "{p}");
    assert!(!p.contains("report_error`"), "{p}");
}

/// The shim alone, with the test standing in for `trace run` on the socket: `sh -c` running a
/// system program and then the user's program asks once, at that program's start, naming its
/// executable; the shell, `/bin/true` and the C runtime are never asked about.
#[test]
fn a_system_program_started_by_a_shell_asks_for_no_list() {
    let s = scratch();
    let exe = build_inlined(s.path());
    let socket = s.path().join("lists.sock");
    let listener = UnixListener::bind(&socket).unwrap();
    listener.set_nonblocking(true).unwrap();
    let answering = StandInListener::answer_none(listener);
    let shimmed = |dir: &Path, script: &str| {
        std::fs::create_dir_all(dir).unwrap();
        let mut c = std::process::Command::new("sh");
        c.args(["-c", script])
            .current_dir(s.path())
            .env("LD_PRELOAD", target_dir().join("libslicetrace_native.so"))
            .env("SLICE_TRACE_DIR", dir)
            .env("SLICE_TRACE_PATCH", "1")
            .env(ENV_LISTS_SOCKET, &socket)
            .env(ENV_LISTS_TIMEOUT_MS, "20000")
            .env_remove("SLICE_TRACE_INLINE");
        texts(&run(&mut c)).0
    };
    assert_eq!(shimmed(&s.path().join("true.d"), "for i in 1 2 3; do /bin/true; done; echo ok"), "ok\n");
    assert_eq!(shimmed(&s.path().join("both.d"), "/bin/true && ./inlined abc && /bin/true"), "193485963\n");
    let asked = answering.requests();
    assert_eq!(asked.len(), 1, "{asked:?}");
    let req = ListRequest::parse(&asked[0]).unwrap_or_else(|| panic!("{asked:?}"));
    assert_eq!(req.path, exe.canonicalize().unwrap().to_string_lossy(), "{req:?}");
}
