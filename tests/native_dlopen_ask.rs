//! End-to-end, the shim alone: how it asks `trace run` for the lists of an object loaded by
//! `dlopen` (shims/native/src/ask.rs; docs/native-recording.md, "Inlined functions"). The
//! shim is preloaded with the environment `trace run` gives it, and the test stands in for
//! `trace run` on the socket: a process that loads only a system library by `dlopen` never
//! connects; a plugin of the program's own is asked about once, by one line naming its file;
//! a recorder that is gone, or does not answer, never hangs the program, and `patch.json` says
//! why the plugin got no list.

mod native_support;

use native_support::*;
use slice_trace_e2e::{run, scratch, target_dir, texts};
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};
use trace_format::probes::{ListRequest, ENV_LISTS_SOCKET, ENV_LISTS_TIMEOUT_MS};

/// `exe args` with the shim preloaded, patching, recording into `dir` and asking at `socket`
/// with a wait of `timeout_ms`: its output and how long it took.
/// (Run from `exe`'s directory.)
/// The program's own (empty) inline list is in `dir`, as `trace run` writes it before the run:
/// only the `dlopen`ed objects are asked about (a program without a list asks for its own at
/// start-up: tests/native_child_lists.rs).
fn shimmed(dir: &Path, socket: &Path, timeout_ms: u32, exe: &Path, args: &[&str]) -> (Output, Duration) {
    std::fs::create_dir_all(dir).unwrap();
    let m = std::fs::metadata(exe).unwrap();
    let mtime_ns = m.modified().unwrap().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    let list = serde_json::json!({"object": exe.canonicalize().unwrap(), "size": m.len(), "mtime_ns": mtime_ns, "offsets": []});
    std::fs::write(dir.join("inline-probes.json"), list.to_string()).unwrap();
    let mut c = std::process::Command::new(exe);
    c.args(args)
        .current_dir(exe.parent().unwrap())
        .env("LD_PRELOAD", target_dir().join("libslicetrace_native.so"))
        .env("SLICE_TRACE_DIR", dir)
        .env("SLICE_TRACE_PATCH", "1")
        .env(ENV_LISTS_SOCKET, socket)
        .env(ENV_LISTS_TIMEOUT_MS, timeout_ms.to_string())
        .env_remove("SLICE_TRACE_INLINE");
    let start = Instant::now();
    let out = run(&mut c);
    (out, start.elapsed())
}

/// The `unlisted` of the object named `file` in the `patch.json` of the one process under `dir`.
fn unlisted(dir: &Path, file: &str) -> serde_json::Value {
    let pdir = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).find(|p| p.join("patch.json").exists()).expect("a process");
    let patch: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(pdir.join("patch.json")).unwrap()).unwrap();
    let obj = patch["objects"].as_array().unwrap().iter().find(|o| o["path"].as_str().is_some_and(|p| p.ends_with(file))).cloned();
    let obj = obj.unwrap_or_else(|| panic!("{patch}"));
    assert!(obj["dlopened"] == true && obj["patched"].as_u64() > Some(0), "{obj}");
    obj["unlisted"].clone()
}

/// A program that loads the C library's libm by `dlopen` and calls `cos` from it.
fn build_system_dlopener(dir: &Path) -> std::path::PathBuf {
    let src = dir.join("sysdl.c");
    std::fs::write(
        &src,
        "#include <dlfcn.h>\n#include <stdio.h>\n\
         int main(void) {\n\
           void *h = dlopen(\"libm.so.6\", RTLD_NOW);\n\
           if (!h) { fprintf(stderr, \"%s\\n\", dlerror()); return 1; }\n\
           double (*c)(double) = (double (*)(double))dlsym(h, \"cos\");\n\
           printf(\"%.1f\\n\", c ? c(0.0) : -1.0);\n\
           return 0;\n\
         }\n",
    )
    .unwrap();
    let exe = dir.join("sysdl");
    let o = run(std::process::Command::new("gcc").args(["-g", "-O1", "-o"]).arg(&exe).arg(&src).arg("-ldl"));
    assert!(o.status.success(), "gcc failed: {:?}", texts(&o));
    exe
}

#[test]
fn a_system_library_loaded_by_dlopen_asks_nothing_and_a_plugin_asks_once() {
    let s = scratch();
    let (plugin, host) = build_dlplugin(s.path());
    let sysdl = build_system_dlopener(s.path());
    let socket = s.path().join("lists.sock");
    let listener = UnixListener::bind(&socket).unwrap();
    listener.set_nonblocking(true).unwrap();

    // libm: a system library, left alone, and no connection.
    let t = s.path().join("sys.d");
    let (out, _) = shimmed(&t, &socket, 20_000, &sysdl, &[]);
    assert_eq!(texts(&out), ("1.0\n".into(), String::new()));
    assert!(
        matches!(listener.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "a process that dlopens a system library does not connect"
    );

    // The plugin: one request naming its file, answered.
    let answering = StandInListener::answer_none(listener);
    let t = s.path().join("plugin.d");
    let plugin_arg = plugin.canonicalize().unwrap().to_string_lossy().into_owned();
    // Named relative to the program's directory (the loader keeps the name as given).
    let (out, _) = shimmed(&t, &socket, 20_000, &host, &["./plugin.so", "4"]);
    assert_eq!(texts(&out).0, "210\n", "{:?}", texts(&out));
    let asked = answering.requests();
    assert_eq!(asked.len(), 1, "{asked:?}");
    let req = ListRequest::parse(&asked[0]).unwrap_or_else(|| panic!("{asked:?}"));
    let m = std::fs::metadata(&plugin).unwrap();
    assert_eq!((req.path.as_str(), req.size), (plugin_arg.as_str(), m.len()), "{req:?}");
    // Answered (with no list): nothing to say.
    assert_eq!(unlisted(&t, "/plugin.so"), serde_json::Value::Null);
}

#[test]
fn a_recorder_that_is_gone_or_does_not_answer_never_hangs_the_program() {
    let s = scratch();
    let (plugin, host) = build_dlplugin(s.path());
    let plugin_arg = plugin.to_string_lossy().into_owned();

    // Gone: its socket file left behind (connection refused), or no socket at all. No wait,
    // though the program would wait 20 s for an answer.
    let refused = s.path().join("refused.sock");
    drop(UnixListener::bind(&refused).unwrap());
    for (name, socket) in [("refused", refused), ("missing", s.path().join("missing.sock"))] {
        let t = s.path().join(format!("{name}.d"));
        let (out, took) = shimmed(&t, &socket, 20_000, &host, &[&plugin_arg, "4"]);
        assert_eq!(texts(&out).0, "210\n", "{name}: {:?}", texts(&out));
        assert!(took < Duration::from_secs(5), "{name}: {took:?}");
        assert_eq!(unlisted(&t, "/plugin.so"), "unreachable", "{name}");
    }

    // Alive but silent: one that never accepts (the connection waits in its backlog), one that
    // accepts and never answers. The program goes on after its wait (300 ms) without probes.
    let socket = s.path().join("silent.sock");
    let listener = UnixListener::bind(&socket).unwrap();
    let t = s.path().join("backlog.d");
    let (out, took) = shimmed(&t, &socket, 300, &host, &[&plugin_arg, "4"]);
    assert_eq!(texts(&out).0, "210\n", "{:?}", texts(&out));
    assert!(took >= Duration::from_millis(300) && took < Duration::from_secs(5), "{took:?}");
    assert_eq!(unlisted(&t, "/plugin.so"), "timed_out");
    let held = std::thread::spawn(move || {
        let (c, _) = listener.accept().unwrap();
        // The one left in the backlog by the run above.
        let (d, _) = listener.accept().unwrap();
        std::thread::sleep(Duration::from_secs(3));
        drop((c, d));
    });
    let t = s.path().join("silent.d");
    let (out, took) = shimmed(&t, &socket, 300, &host, &[&plugin_arg, "4"]);
    assert_eq!(texts(&out).0, "210\n", "{:?}", texts(&out));
    assert!(took >= Duration::from_millis(300) && took < Duration::from_secs(3), "{took:?}");
    assert_eq!(unlisted(&t, "/plugin.so"), "timed_out");
    held.join().unwrap();
}
