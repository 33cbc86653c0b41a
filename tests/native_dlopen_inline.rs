//! End-to-end: inline probes in a library loaded by `dlopen` (docs/native-recording.md,
//! "Inlined functions"; tracer/src/dlopened.rs). `examples/c/dlplugin/plugin.c` built `gcc -g
//! -O1 -fPIC -shared`, whose exported `plugin_fn` has two static helpers inlined into it,
//! loaded by `host.c` with `dlopen`: its list cannot be known before the run, so the shim asks
//! `trace run` for it from inside `dlopen` (shims/native/src/ask.rs) and plants it before the
//! plugin's code runs. The first run, with an empty cache, probes it: the helper that ran is in
//! the tree under `plugin_fn`, marked `[inlined]`, with its source; the one that did not run
//! is not.

mod native_support;

use native_support::*;
use slice_trace_e2e::{call_tree_text as tree_text, cmd, run, run_ok, scratch, source_block as block, texts};
use std::path::Path;

/// `trace run` with patching and probes as by default, and its cache in `cache` (a first run
/// of this test's plugin is a first run whatever ran before).
fn trace(cache: &Path, dir: &Path, exe: &Path, args: &[&str]) -> String {
    let mut c = cmd("trace");
    c.env_remove("SLICE_TRACE_PATCH").env_remove("SLICE_TRACE_INLINE").env("XDG_CACHE_HOME", cache);
    let out = run(c.arg("run").arg("-o").arg(dir).arg("--").arg(exe).args(args));
    assert!(out.status.success(), "{:?}", texts(&out));
    texts(&out).0
}

fn prompt(dir: &Path) -> String {
    run_ok(cmd("slice").arg("from-trace").arg(dir).arg("-q").arg("What does the plugin compute?"))
}

/// The plugin's object in the process's `patch.json`.
fn plugin_report(dir: &Path) -> serde_json::Value {
    let pdir = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).find(|p| p.join("proc.json").exists()).expect("a process");
    let patch: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(pdir.join("patch.json")).unwrap()).unwrap();
    let obj = patch["objects"].as_array().unwrap().iter().find(|o| o["path"].as_str().is_some_and(|p| p.ends_with("/plugin.so")));
    obj.unwrap_or_else(|| panic!("{patch}")).clone()
}

#[test]
fn a_plugin_loaded_by_dlopen_is_probed_from_its_first_run() {
    let s = scratch();
    let src = example("c/dlplugin");
    let (plugin, host) = build_dlplugin(s.path());
    let cache = s.path().join("cache");
    // Both helpers are inlined into plugin_fn: no function of their own, two inlined instances.
    assert_helpers_inlined(&plugin, "plugin_fn", &["scale", "refuse"]);
    let text = std::fs::read_to_string(src.join("plugin.c")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let plugin_arg = plugin.to_string_lossy().into_owned();

    // First run, with nothing cached: no list for the plugin before it; asked for inside
    // `dlopen`, listed during the run and probed. scale ran, refuse did not.
    let t = s.path().join("first.d");
    assert!(!cache.exists());
    assert!(!t.join("inline-probes-libs.json").exists());
    assert_eq!(trace(&cache, &t, &host, &[&plugin_arg, "4"]), "210\n");
    let libs: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(t.join("inline-probes-libs.json")).unwrap()).unwrap();
    assert!(libs[0]["object"].as_str() == Some(plugin_arg.as_str()) && libs.as_array().map(Vec::len) == Some(1), "{libs}");
    let p = prompt(&t);
    assert_eq!(tree_text(&p), "main\n  plugin_fn\n    scale [inlined]\n", "{p}");
    assert!(p.contains("#### `scale` (") && p.contains("plugin.c:10-15)"), "{p}");
    assert_eq!(block(&p, "scale"), Some(lines[9..15].join("\n").as_str()), "{p}");
    assert!(!p.contains("`refuse`"), "refuse did not run: {p}");
    assert!(p.contains("in plugin.so, a function the compiler inlined into its caller is shown under that caller"), "{p}");
    assert!(p.contains("in host, the debug information lists none of its own code as inlined"), "{p}");
    assert!(!p.contains("no inline probe was planted") && !p.contains("cannot be told"), "{p}");
    let obj = plugin_report(&t);
    let n = |k: &str| obj["inline_probes"][k].as_u64().unwrap_or_else(|| panic!("{obj}"));
    assert!(obj["dlopened"] == true && n("listed") >= 2 && n("unprobed") == 0 && n("listed") == n("planted") + n("at_entry"), "{obj}");
    assert!(obj.get("unlisted").is_none(), "{obj}");
    assert!(!t.join("inline-probes-dlopened.json").exists(), "nothing left unprobed");

    // A second run, with the list cached: the same.
    let t = s.path().join("second.d");
    assert_eq!(trace(&cache, &t, &host, &[&plugin_arg, "4"]), "210\n");
    assert_eq!(tree_text(&prompt(&t)), "main\n  plugin_fn\n    scale [inlined]\n");

    // The other way round: refuse ran, scale did not.
    let t = s.path().join("zero.d");
    assert_eq!(trace(&cache, &t, &host, &[&plugin_arg, "0"]), "-1\n");
    let p = prompt(&t);
    assert_eq!(tree_text(&p), "main\n  plugin_fn\n    refuse [inlined]\n", "{p}");
    assert_eq!(block(&p, "refuse"), Some(lines[16..20].join("\n").as_str()), "{p}");
    assert!(!p.contains("`scale`"), "{p}");

    // A plugin rebuilt without debug information: its old list is not used, and the note
    // says why it has none.
    let o = run(std::process::Command::new("gcc").args(["-g0", "-O1", "-fPIC", "-shared", "-o"]).arg(&plugin).arg(src.join("plugin.c")));
    assert!(o.status.success(), "gcc failed: {:?}", texts(&o));
    let t = s.path().join("nodebug.d");
    assert_eq!(trace(&cache, &t, &host, &[&plugin_arg, "4"]), "210\n");
    let p = prompt(&t);
    // (Without DWARF the tree names the function's object.)
    assert_eq!(tree_text(&p), "main\n  plugin_fn  (plugin.so)\n", "{p}");
    assert!(p.contains("in plugin.so, no inline probe was planted (it was loaded by dlopen and has no debug information"), "{p}");
}

/// The plugin loaded by a program the recorded program starts (here by `exec`): not the
/// program `trace run` listed anything for, yet its first run probes the plugin too (the
/// shim of every process of the run asks).
#[test]
fn a_plugin_loaded_by_a_program_the_recorded_one_starts_is_probed_in_the_first_run() {
    let s = scratch();
    let (plugin, host) = build_dlplugin(s.path());
    let src = s.path().join("launch.c");
    std::fs::write(
        &src,
        "#include <unistd.h>\nint main(int argc, char **argv) {\n  (void)argc;\n  execv(argv[1], argv + 1);\n  return 127;\n}\n",
    )
    .unwrap();
    let launcher = s.path().join("launch");
    let o = run(std::process::Command::new("gcc").args(["-g", "-O1", "-o"]).arg(&launcher).arg(&src));
    assert!(o.status.success(), "gcc failed: {:?}", texts(&o));
    let cache = s.path().join("cache");
    let t = s.path().join("t.d");
    let (host_arg, plugin_arg) = (host.to_string_lossy().into_owned(), plugin.to_string_lossy().into_owned());
    assert_eq!(trace(&cache, &t, &launcher, &[&host_arg, &plugin_arg, "4"]), "210\n");
    let objs: Vec<serde_json::Value> = std::fs::read_dir(&t)
        .unwrap()
        .filter_map(|e| std::fs::read_to_string(e.unwrap().path().join("patch.json")).ok())
        .flat_map(|p| serde_json::from_str::<serde_json::Value>(&p).unwrap()["objects"].as_array().cloned().unwrap_or_default())
        .filter(|o| o["path"].as_str() == Some(plugin_arg.as_str()))
        .collect();
    assert!(objs.len() == 1 && objs[0]["inline_probes"]["listed"].as_u64() >= Some(2), "{objs:?}");
    let p = prompt(&t);
    assert!(p.contains("scale [inlined]") && !p.contains("`refuse`"), "{p}");
}
