//! End-to-end: entry patching of a program's shared libraries, those linked at start-up and
//! those loaded later by `dlopen` (shims/native/src/objects.rs), all built WITHOUT
//! instrumentation by the test at -O0 and -O2: the scene example (`main.c`, `scene.c`) with
//! its library `libshapes.so` and its plugin `libplugin.so`, which it loads by bare name
//! (found through the program's `DT_RUNPATH`, `$ORIGIN`). System libraries are left alone by
//! default and patched with `SLICE_TRACE_PATCH=all`.

mod native_support;

use native_support::*;
use slice_trace_e2e::{cmd, run, run_ok, scratch, texts};
use std::path::{Path, PathBuf};
use std::process::Output;

/// `cc -g -o OUT SRCS ARGS`: the libraries in `args` after the sources that need them (a
/// linker that drops libraries not needed so far, `--as-needed`, would otherwise leave
/// `libplugin.so` without its `DT_NEEDED` on `libshapes.so`: loaded into a namespace of its
/// own, it would then not find `shape_perimeter`).
fn cc(out: &Path, args: &[&str], srcs: &[&str]) {
    let o = run(std::process::Command::new("cc").args(["-g", "-o"]).arg(out).args(srcs.iter().map(|s| example(s))).args(args));
    assert!(o.status.success(), "cc failed: {:?}", texts(&o));
}

/// The scene program, its library and its plugin, built uninstrumented with `opt`, in `dir`.
fn build_scene(dir: &Path, opt: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let lib = format!("-L{}", dir.display());
    cc(&dir.join("libshapes.so"), &[opt, "-fno-inline", "-fPIC", "-shared"], &["c/shapes.c"]);
    cc(&dir.join("libplugin.so"), &[opt, "-fno-inline", "-fPIC", "-shared", &lib, "-lshapes", "-Wl,-rpath,$ORIGIN"], &["c/plugin.c"]);
    let exe = dir.join("scene");
    let o = run(std::process::Command::new("cc")
        .args(["-g", opt, "-fno-inline", "-pthread", "-o"])
        .arg(&exe)
        .arg(example("c/main.c"))
        .arg(example("c/scene.c"))
        .args([lib.as_str(), "-lshapes", "-ldl", "-Wl,-rpath,$ORIGIN"]));
    assert!(o.status.success(), "{:?}", texts(&o));
    exe
}

const ARGS: [&str; 5] = ["c1,r2x3", "--threads", "2", "--plugin", "libplugin.so"];

fn trace_with(patch: &str, dir: &Path, exe: &Path) -> Output {
    let mut c = cmd("trace");
    c.env("SLICE_TRACE_PATCH", patch).arg("run").arg("-o").arg(dir).arg("--").arg(exe).args(ARGS);
    c.current_dir(exe.parent().unwrap_or(Path::new("/")));
    run(&mut c)
}

fn untraced(exe: &Path) -> Output {
    run(std::process::Command::new(exe).args(ARGS).current_dir(exe.parent().unwrap_or(Path::new("/"))))
}

#[test]
fn libraries_linked_at_start_and_dlopened_plugins_are_patched() {
    let s = scratch();
    for opt in ["-O0", "-O2"] {
        let exe = build_scene(&s.path().join(format!("b{opt}")), opt);
        let t = s.path().join(format!("s{opt}.d"));
        let out = trace_with("1", &t, &exe);
        assert!(out.status.success(), "{opt}: {:?}", texts(&out));
        let plain = untraced(&exe);
        assert_eq!(texts(&out).0, texts(&plain).0, "{opt}");
        assert!(texts(&out).0.contains("plugin score: 1.628"), "{opt}: {:?}", texts(&out));

        let p = &load(&t)[0];
        // The program's own calls, its start-up library's and the plugin's.
        // (At -O2 parse_shape may end in a tail jump to shape_circle: then shape_circle is
        // scene_parse's callee, docs/native-recording.md.)
        let parsed: Vec<String> = [p.callees("scene_parse"), p.callees("parse_shape")].concat();
        for f in ["parse_shape", "shape_circle", "shape_rect"] {
            assert!(parsed.contains(&f.to_string()), "{opt}: {f} in {:?}", p.sequence(0));
        }
        // The plugin's constructor ran inside dlopen: patched before it ran, it is recorded
        // under run_plugin (as the instrumented build records it).
        assert_eq!(p.callees("run_plugin"), ["plugin_init", "plugin_score"], "{opt}: {:?}", p.sequence(0));
        assert_eq!(p.callees("plugin_init"), ["plugin_register"], "{opt}: {:?}", p.sequence(0));
        assert_eq!(p.callees("plugin_score"), ["weight"], "{opt}: {:?}", p.sequence(0));
        assert_eq!(p.count("weight"), 2, "{opt}");
        assert!(p.callees("weight").contains(&"shape_perimeter".to_string()), "{opt}: {:?}", p.callees("weight"));
        assert_eq!(p.func("plugin_score").file.as_deref().map(|f| f.ends_with("examples/c/plugin.c")), Some(true));
        // The libraries' functions come from their objects.
        let m = |q: &str| p.func(q).object.clone().unwrap_or_default();
        assert!(m("shape_circle").ends_with("/libshapes.so"), "{opt}: {}", m("shape_circle"));
        assert!(m("plugin_score").ends_with("/libplugin.so"), "{opt}: {}", m("plugin_score"));
        // Worker threads call into the library too.
        assert!(p.callees("worker").contains(&"scene_total_area".to_string()), "{opt}: {:?}", p.callees("worker"));

        // trace info: per object, the plugin marked as dlopened, system libraries left alone.
        let info = run_ok(cmd("trace").arg("info").arg(&t));
        let object_line = |name: &str| {
            info.lines().find(|l| l.trim_start().contains(name)).unwrap_or_else(|| panic!("{opt}: no {name} in {info}")).to_string()
        };
        let counts = |l: &str| l.split_whitespace().filter_map(|w| w.parse::<u64>().ok()).collect::<Vec<_>>();
        // Unnamed threads: the main thread is `main` (as `slice` names it), the workers `-`.
        let threads: Vec<Vec<&str>> =
            info.lines().filter(|l| l.trim_start().starts_with("thread ")).map(|l| l.split_whitespace().collect()).collect();
        assert_eq!(threads.iter().filter(|w| w[2] == "main").count(), 1, "{opt}: {info}");
        assert!(threads.len() > 1 && threads.iter().all(|w| w[2] == "main" || w[2] == "-"), "{opt}: {info}");
        let shapes = object_line("/libshapes.so:");
        assert!(counts(&shapes)[0] >= 8, "{opt}: {shapes}");
        let plugin = object_line("/libplugin.so (dlopen):");
        assert!(counts(&plugin)[0] >= 2, "{opt}: {plugin}");
        assert!(info.contains("system or instrumented libraries left alone (--verbose names them)"), "{opt}: {info}");
        let verbose = run_ok(cmd("trace").arg("info").arg("--verbose").arg(&t));
        assert!(
            verbose.lines().any(|l| l.trim_start().contains("/libc.so.6: not patched: the C runtime; SLICE_TRACE_PATCH=all")),
            "{opt}: {verbose}"
        );

        // The prompt holds the plugin's and the library's source.
        let prompt = run_ok(cmd("slice").arg("from-trace").arg(&t).arg("-q").arg("How is the plugin score computed?"));
        assert!(prompt.lines().any(|l| l.trim_start().starts_with("plugin_score")), "{opt}: {prompt}");
        assert!(prompt.contains("#### `plugin_score` ("), "{opt}: {prompt}");
        assert!(prompt.contains("double plugin_score(const struct scene *sc)"), "{opt}: {prompt}");
        assert!(prompt.contains("static double weight(const struct shape *s)"), "{opt}: {prompt}");
        assert!(prompt.contains("double shape_perimeter(const struct shape *s)"), "{opt}: {prompt}");
    }
}

/// A plugin that `dlmopen` loads into a link-map namespace of its own (with its own copies of
/// `libshapes.so` and libc, which `dl_iterate_phdr` does not list from the shim's namespace)
/// is patched before its constructor runs, as a `dlopen`ed one is; so is its own copy of
/// `libshapes.so`, whose functions it calls.
#[test]
fn a_plugin_dlmopened_into_a_namespace_of_its_own_is_patched() {
    let s = scratch();
    let exe = build_scene(&s.path().join("b"), "-O2");
    let args = ["c1,r2x3", "--threads", "1", "--plugin-ns", "libplugin.so"];
    let t = s.path().join("ns.d");
    let out = run(cmd("trace").arg("run").arg("-o").arg(&t).arg("--").arg(&exe).args(args).current_dir(exe.parent().unwrap()));
    let plain = run(std::process::Command::new(&exe).args(args).current_dir(exe.parent().unwrap()));
    assert!(out.status.success(), "{:?}", texts(&out));
    assert_eq!(texts(&out).0, texts(&plain).0);
    assert!(texts(&out).0.contains("plugin score: 1.628"), "{:?}", texts(&out));
    let p = &load(&t)[0];
    assert_eq!(p.callees("run_plugin"), ["plugin_init", "plugin_score"], "{:?}", p.sequence(0));
    assert_eq!(p.callees("plugin_init"), ["plugin_register"], "{:?}", p.sequence(0));
    assert_eq!(p.callees("plugin_score"), ["weight"], "{:?}", p.sequence(0));
    assert!(p.callees("weight").contains(&"shape_perimeter".to_string()), "{:?}", p.callees("weight"));
    // Two copies of libshapes: the program's and the plugin namespace's, at other addresses.
    let objects: Vec<String> = p.funcs.iter().filter(|f| f.qualname == "shape_perimeter").filter_map(|f| f.object.clone()).collect();
    assert_eq!(objects.len(), 2, "{objects:?}");
    assert!(objects.iter().all(|o| o.ends_with("/libshapes.so")), "{objects:?}");
    let info = run_ok(cmd("trace").arg("info").arg(&t));
    assert!(info.lines().any(|l| l.trim_start().contains("/libplugin.so (dlopen):")), "{info}");
    assert_eq!(info.lines().filter(|l| l.contains("/libshapes.so")).count(), 2, "{info}");
}

/// `SLICE_TRACE_PATCH=all` patches the C runtime too: printf is recorded under scene_print,
/// and the program's output is unchanged.
/// `trace info`'s line for libc says more than a thousand of its functions were patched.
fn assert_libc_patched(info: &str) {
    let libc = info.lines().find(|l| l.contains("/libc.so.6:")).unwrap_or_else(|| panic!("{info}"));
    let n: Vec<u64> = libc.split_whitespace().filter_map(|w| w.parse().ok()).collect();
    assert!(n.first().is_some_and(|&n| n > 1000), "{libc}");
}

#[test]
fn system_libraries_are_patched_on_request() {
    let s = scratch();
    let exe = build_scene(&s.path().join("b"), "-O2");
    let t = s.path().join("all.d");
    let out = trace_with("all", &t, &exe);
    assert!(out.status.success(), "{:?}", texts(&out));
    assert_eq!(texts(&out).0, texts(&untraced(&exe)).0);
    let info = run_ok(cmd("trace").arg("info").arg(&t));
    assert_libc_patched(&info);
    let p = &load(&t)[0];
    let printed = p.callees("scene_print");
    assert!(printed.iter().any(|c| c.contains("printf")), "{printed:?}");
    assert!(printed.contains(&"shape_kind".to_string()), "{printed:?}");
}

/// A `-F NAME@OBJECT` filter that names a system library patches that library (only): the
/// calls of printf in libc are recorded, with what printf calls inside libc, and nothing else.
#[test]
fn a_filter_naming_a_system_library_patches_it() {
    let s = scratch();
    let exe = build_scene(&s.path().join("b"), "-O0");
    let t = s.path().join("f.d");
    let mut c = cmd("trace");
    c.env_remove("SLICE_TRACE_PATCH").args(["run", "-F", "(_IO_)?printf@libc\\.so\\.6", "-o"]).arg(&t).arg("--").arg(&exe).args(ARGS);
    c.current_dir(exe.parent().unwrap_or(Path::new("/")));
    let out = run(&mut c);
    assert!(out.status.success(), "{:?}", texts(&out));
    assert_eq!(texts(&out).0, texts(&untraced(&exe)).0);
    let info = run_ok(cmd("trace").arg("info").arg(&t));
    assert_libc_patched(&info);
    assert!(!info.contains("/libgcc_s.so.1:"), "only the library the filter names: {info}");
    let p = &load(&t)[0];
    let roots: Vec<&str> = p.threads[0].calls.iter().filter(|c| c.depth == 1).map(|c| p.name(c.func)).collect();
    assert!(!roots.is_empty() && roots.iter().all(|r| r.ends_with("printf")), "{roots:?}");
    assert_eq!(p.count("main"), 0);
    assert!(p.threads[0].calls.iter().any(|c| c.depth > 1), "printf's own calls: {:?}", p.sequence(0));
}

/// Under a W^X policy (SELinux `execmod`, PaX) `mprotect` refuses to make text writable: the
/// shim leaves those functions as they were and says so in `patch.json` (none counted as
/// patched), and the program runs as it does without `trace`. The policy is played by a
/// preloaded `mprotect` that refuses write + execute.
#[test]
fn functions_whose_pages_cannot_be_made_writable_are_refused_not_counted() {
    let s = scratch();
    let exe = build_scene(&s.path().join("b"), "-O0");
    let wx = s.path().join("wx.c");
    std::fs::write(
        &wx,
        "#define _GNU_SOURCE\n#include <errno.h>\n#include <stddef.h>\n#include <sys/mman.h>\n#include <sys/syscall.h>\n#include <unistd.h>\n\
         int mprotect(void *a, size_t n, int prot) {\n  if ((prot & PROT_WRITE) && (prot & PROT_EXEC)) { errno = EACCES; return -1; }\n\
           return syscall(SYS_mprotect, a, n, prot);\n}\n",
    )
    .unwrap();
    let wx_so = s.path().join("libwx.so");
    let o = run(std::process::Command::new("cc").args(["-shared", "-fPIC", "-o"]).arg(&wx_so).arg(&wx));
    assert!(o.status.success(), "cc libwx.so: {:?}", texts(&o));
    let t = s.path().join("wx.d");
    let mut c = cmd("trace");
    c.env("SLICE_TRACE_PATCH", "1").env("LD_PRELOAD", &wx_so).arg("run").arg("-o").arg(&t).arg("--").arg(&exe).args(ARGS);
    c.current_dir(exe.parent().unwrap());
    let out = run(&mut c);
    let plain = untraced(&exe);
    assert_eq!((out.status.code(), &out.stdout), (plain.status.code(), &plain.stdout), "runs as without trace: {:?}", texts(&out));
    let pdir = std::fs::read_dir(&t)
        .unwrap()
        .flatten()
        .find(|e| e.file_name().to_string_lossy().starts_with('p'))
        .expect("a process directory")
        .path();
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(pdir.join("patch.json")).expect("patch.json")).unwrap();
    assert_eq!(doc["patched"], 0, "nothing could be written, so nothing is patched: {doc}");
    let refused = doc["refused"].as_array().unwrap();
    let scene_main = refused.iter().find(|r| r["function"] == "main").unwrap_or_else(|| panic!("main refused: {doc}"));
    assert!(scene_main["reason"].as_str().unwrap().contains("mprotect refused"), "{scene_main}");
    let said = texts(&out).1;
    assert!(
        said.contains("nothing was recorded") && said.contains("entry patching could patch none") && said.contains("mprotect refused"),
        "trace run says why nothing was recorded: {said}"
    );
    let info = texts(&run(cmd("trace").args(["info", "--verbose"]).arg(&t))).0;
    assert!(info.contains("mprotect refused"), "trace info names the reason:\n{info}");
    let tree = run(cmd("slice").arg("tree").arg(&t));
    let err = texts(&tree).1;
    assert!(
        !tree.status.success() && err.contains("entry patching could patch none") && err.contains("mprotect refused"),
        "slice says why too: {err}"
    );
}
