//! End-to-end: programs as a distribution ships them. Debian's `jq` is a stripped `main` over
//! its own `libjq.so.1`: `trace run -- jq ...` records that library (a library named after the
//! program is its own code: `trace_format::objects`), and the prompt says why it has no source.
//! A stripped program and library built here (`examples/c/stripped/`), the library's debug
//! information moved to a separate file as a distribution does: its static functions are
//! patched from the debug file's symbol table, and shown with their source. A system program
//! that only starts others (`ls`) says so when nothing was recorded.

mod native_support;

use native_support::example;
use slice_trace_e2e::{cmd, run, run_ok, scratch, texts};
use std::path::Path;
use std::process::Command;

fn sh(c: &mut Command) {
    let o = run(c);
    assert!(o.status.success(), "{c:?}: {:?}", texts(&o));
}

/// `examples/c/stripped/` built in `dir` with debug information: `libwcount.so` (with
/// `lib_flags` too) and `wcount` linked to it; the library's source path.
fn build_wcount(dir: &Path, lib_flags: &[&str]) -> std::path::PathBuf {
    let cc = |args: &[&str]| {
        sh(Command::new("cc").current_dir(dir).args(args));
    };
    let lib_src = example("c/stripped/libwc.c");
    let main_src = example("c/stripped/wcount.c");
    let mut lib = vec!["-g", "-O1", "-fno-inline", "-fPIC", "-shared"];
    lib.extend_from_slice(lib_flags);
    lib.extend_from_slice(&["-o", "libwcount.so", lib_src.to_str().unwrap()]);
    cc(&lib);
    cc(&["-g", "-O1", "-o", "wcount", main_src.to_str().unwrap(), "-L.", "-lwcount", "-Wl,-rpath,$ORIGIN"]);
    lib_src
}

#[test]
fn jq_is_recorded_through_its_own_library() {
    assert!(Path::new("/usr/bin/jq").is_file(), "/usr/bin/jq is missing: `apt-get install jq` (.ci/run installs it)");
    let d = scratch();
    let input = d.path().join("in.json");
    std::fs::write(&input, r#"{"a":[1,2,3]}"#).unwrap();
    let t = d.path().join("jq.d");
    let o = run(cmd("trace").args(["run", "-o"]).arg(&t).args(["--", "jq", "-c", ".a|map(.*2)"]).arg(&input));
    let (out, err) = texts(&o);
    assert!(o.status.success(), "{err}");
    assert_eq!(out, "[2,4,6]\n", "jq's own output, untouched");
    assert!(!err.contains("nothing was recorded"), "{err}");
    let tree = run_ok(cmd("slice").arg("tree").arg(&t));
    for f in ["jq_init  (libjq.so.1", "jq_compile_args  (libjq.so.1", "jv_parse_sized  (libjq.so.1"] {
        assert!(tree.contains(f), "{f} not in the tree:\n{tree}");
    }
    assert!(!tree.contains("libonig") && !tree.contains("libc.so"), "only jq's own library is patched:\n{tree}");
    let prompt = run_ok(cmd("slice").arg("from-trace").arg(&t).args(["-q", "How does jq run map?"]));
    let note = "> No source for ";
    let line = prompt.lines().find(|l| l.starts_with(note)).unwrap_or_else(|| panic!("no note on the missing source:\n{prompt}"));
    assert!(line.contains("of `libjq.so.1.") && line.contains("named from its symbol table only") && line.contains("-dbgsym"), "{line}");
}

#[test]
fn a_stripped_library_is_patched_and_shown_through_its_separate_debug_file() {
    let d = scratch();
    let dir = d.path();
    let lib_src = build_wcount(dir, &[]);
    // As a distribution ships it: the library's DWARF and full symbol table in a separate
    // file its `.gnu_debuglink` names, both objects stripped.
    sh(Command::new("objcopy").current_dir(dir).args(["--only-keep-debug", "libwcount.so", "libwcount.so.debug"]));
    sh(Command::new("strip").current_dir(dir).args(["--strip-all", "libwcount.so", "wcount"]));
    sh(Command::new("objcopy").current_dir(dir).args(["--add-gnu-debuglink=libwcount.so.debug", "libwcount.so"]));
    let t = dir.join("w.d");
    let o = run(cmd("trace").current_dir(dir).args(["run", "-o"]).arg(&t).args(["--", "./wcount", "a b c", "d e"]));
    let (out, err) = texts(&o);
    assert!(o.status.success(), "{err}");
    assert_eq!(out, "5\n");
    let tree = run_ok(cmd("slice").arg("tree").arg(&t));
    let lib_shown = lib_src.display().to_string();
    assert!(tree.contains(&format!("wc_count_words  ({lib_shown}:12)")), "{tree}");
    // Static: only the debug file's symbol table names it.
    assert!(tree.contains(&format!("└─ is_word_start  ({lib_shown}:8)")), "{tree}");
    let prompt = run_ok(cmd("slice").arg("from-trace").arg(&t).args(["-q", "How are words counted?"]));
    assert!(prompt.contains("static int is_word_start(const char *s, size_t i) {"), "{prompt}");
    assert!(!prompt.contains("> No source for"), "{prompt}");
}

/// The same library with no `.gnu_debuglink`: its debug file found by its build-id in the
/// debuginfod client's cache (`$DEBUGINFOD_CACHE_PATH/<build-id>/debuginfo`), where gdb and
/// `debuginfod-find` leave what they downloaded.
#[test]
fn a_stripped_library_is_shown_through_the_debuginfod_cache_by_its_build_id() {
    let d = scratch();
    let dir = d.path();
    let lib_src = build_wcount(dir, &["-Wl,--build-id"]);
    let notes = run_ok(Command::new("readelf").current_dir(dir).args(["-n", "libwcount.so"]));
    let id = notes.lines().find_map(|l| l.trim().strip_prefix("Build ID: ")).unwrap_or_else(|| panic!("no build-id:\n{notes}")).trim();
    let cache = dir.join("debuginfod");
    std::fs::create_dir_all(cache.join(id)).unwrap();
    sh(Command::new("objcopy").current_dir(dir).arg("--only-keep-debug").arg("libwcount.so").arg(cache.join(id).join("debuginfo")));
    sh(Command::new("strip").current_dir(dir).args(["--strip-all", "libwcount.so", "wcount"]));
    let t = dir.join("w.d");
    let o = run(cmd("trace")
        .current_dir(dir)
        .env("DEBUGINFOD_CACHE_PATH", &cache)
        .args(["run", "-o"])
        .arg(&t)
        .args(["--", "./wcount", "a b c", "d e"]));
    let (out, err) = texts(&o);
    assert!(o.status.success(), "{err}");
    assert_eq!(out, "5\n");
    let lib_shown = lib_src.display().to_string();
    let slice = |args: &[&str]| run_ok(cmd("slice").env("DEBUGINFOD_CACHE_PATH", &cache).args(args).arg(&t));
    let tree = slice(&["tree"]);
    assert!(tree.contains(&format!("wc_count_words  ({lib_shown}:12)")), "{tree}");
    assert!(
        tree.contains(&format!("└─ is_word_start  ({lib_shown}:8)")),
        "a static function, patched through the cached file's symbol table:\n{tree}"
    );
    let prompt = run_ok(cmd("slice").env("DEBUGINFOD_CACHE_PATH", &cache).arg("from-trace").arg(&t).args(["-q", "How are words counted?"]));
    assert!(prompt.contains("static int is_word_start(const char *s, size_t i) {"), "{prompt}");
    assert!(!prompt.contains("> No source for"), "{prompt}");
    // Without the cache the library has no source, and the prompt says so.
    let bare = run_ok(
        cmd("slice").env("DEBUGINFOD_CACHE_PATH", dir.join("empty")).arg("from-trace").arg(&t).args(["-q", "How are words counted?"]),
    );
    assert!(bare.contains("> No source for"), "{bare}");
}

/// With `SLICE_TRACE_PATCH=all` the C library's own functions are patched, and malloc calls
/// some of them with its arena locked; the shim's slow path allocated through that malloc and
/// waited for the lock for ever (Debian's zstd hung at its second thread, 0 s of CPU). The
/// shim has a heap of its own (shims/native/src/lib.rs): the run ends, its output unchanged.
#[test]
fn a_threaded_distro_program_with_every_library_patched_finishes() {
    assert!(Path::new("/usr/bin/zstd").is_file(), "/usr/bin/zstd is missing: `apt-get install zstd` (.ci/run installs it)");
    let d = scratch();
    let mut text = String::new();
    for i in 0..40_000 {
        text.push_str(&format!("line {i}: the quick brown fox {} jumps\n", i * 7919 % 1000));
    }
    for name in ["a.txt", "b.txt", "c.txt"] {
        std::fs::write(d.path().join(name), &text).unwrap();
    }
    let t = d.path().join("z.d");
    let mut child = cmd("trace")
        .current_dir(d.path())
        .env("SLICE_TRACE_PATCH", "all")
        .args(["run", "-q", "-o"])
        .arg(&t)
        .args(["--", "zstd", "-q", "-k", "-f", "-19", "a.txt", "b.txt", "c.txt"])
        .spawn()
        .expect("start trace");
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait for trace") {
            break st;
        }
        if start.elapsed() > std::time::Duration::from_secs(180) {
            let _ = child.kill();
            panic!("trace run -- zstd did not finish in 180 s (untraced it takes about 2 s)");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert!(status.success(), "{status:?}");
    for name in ["a.txt", "b.txt", "c.txt"] {
        let back = run_ok(Command::new("zstd").args(["-d", "-c"]).arg(d.path().join(format!("{name}.zst"))));
        assert!(back == text, "{name}: the round trip differs");
    }
    // The C library's functions were recorded, in the program's threads.
    let tree = run_ok(cmd("slice").args(["tree", "--stdlib"]).arg(&t));
    assert!(tree.contains("fopen") && tree.matches("── process").count() >= 2, "{tree}");
}

#[test]
fn a_system_program_that_started_nothing_says_so() {
    let d = scratch();
    let t = d.path().join("ls.d");
    let o = run(cmd("trace").args(["run", "-o"]).arg(&t).args(["--", "ls", "/"]));
    let (_, err) = texts(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("nothing was recorded")
            && err.contains("`ls` is a script or a system program")
            && err.contains("SLICE_TRACE_PATCH=all"),
        "{err}"
    );
    // Debian's `ls` is stripped and its debug symbols are not installed: even
    // SLICE_TRACE_PATCH=all would find none of its functions, and the line says so.
    assert!(
        err.contains("/ls` is stripped: it has no symbol table and no separate debug information (/usr/lib/debug/.build-id/")
            && err.contains("the `-dbgsym` package of the package that installs it, which `dpkg -S /")
            && err.contains("/ls` names)"),
        "{err}"
    );
}
