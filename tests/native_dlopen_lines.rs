//! End-to-end: lines that ran in a library loaded by `dlopen` (`trace run --lines`,
//! docs/native-recording.md, "Lines that ran"; tracer/src/dlopened.rs).
//! `examples/c/dlplugin/plugin.c` built `gcc -g -O1 -fPIC -shared`, whose exported `plugin_fn`
//! calls `refuse` for a number that is not positive and `scale` for one that is (both inlined),
//! loaded by `host.c` with `dlopen`: its line list cannot be known before the run, so the shim
//! asks `trace run` for it from the loader's hook inside `dlopen` (shims/native/src/ask.rs);
//! from the first run, with nothing cached, `trace run` lists it in `line-probes-libs.json`
//! then, the shim plants its rows before the plugin's code runs and saves their states in a
//! `lines-lib-<k>.bin` of its own, and the prompt condenses the branch of `plugin_fn` that did
//! not run; the other way round for the other input.

mod native_support;

use analyzer::coverage::LineState::{self, NotRun, Ran, Unknown};
use native_support::*;
use slice_trace_e2e::{cmd, run, run_ok, scratch, source_block as block, texts};
use std::path::Path;

/// `trace run -q --lines` with patching and probes as by default and its cache in `cache`:
/// the program's stdout.
fn trace_lines(cache: &Path, dir: &Path, exe: &Path, args: &[&str]) -> String {
    let mut c = cmd("trace");
    c.env_remove("SLICE_TRACE_PATCH").env_remove("SLICE_TRACE_INLINE").env("XDG_CACHE_HOME", cache);
    let out = run(c.args(["run", "-q", "--lines", "-o"]).arg(dir).arg("--").arg(exe).args(args));
    assert!(out.status.success(), "{:?}", texts(&out));
    texts(&out).0
}

/// The states of lines 10-30 (`scale`, `refuse`, `plugin_fn`) of `src` in the trace at `dir`.
fn states(dir: &Path, src: &Path) -> Option<Vec<LineState>> {
    let loaded = analyzer::fold::load_trace(dir, &mut analyzer::symbols::Interner::default(), Default::default()).expect("a trace");
    loaded.coverage.states(&trace_format::normalize_path(src), 10, 21)
}

fn prompt(dir: &Path) -> String {
    run_ok(cmd("slice").arg("from-trace").arg(dir).args(["-q", "What does the plugin compute?", "--not-run", "hide"]))
}

/// The process directory of the trace at `dir`.
fn process_dir(dir: &Path) -> std::path::PathBuf {
    std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).find(|p| p.join("proc.json").exists()).expect("a process")
}

#[test]
fn a_plugins_branch_that_did_not_run_is_condensed_from_its_first_run() {
    let s = scratch();
    let src = example("c/dlplugin");
    let (plugin, host) = build_dlplugin(s.path());
    let cache = s.path().join("cache");
    let plugin_src = src.join("plugin.c");
    let text = std::fs::read_to_string(&plugin_src).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let plugin_arg = plugin.to_string_lossy().into_owned();
    // plugin_fn: lines 22-30, with lines `from`-`to` condensed.
    let cut = |from: usize, to: usize, indent: &str| {
        let mut v: Vec<String> = lines[21..from - 1].iter().map(|l| l.to_string()).collect();
        v.push(format!("{indent}// ...  {} lines not run", to - from + 1));
        v.extend(lines[to..30].iter().map(|l| l.to_string()));
        v.join("\n")
    };

    // First run, nothing cached: no line list for the plugin before it (the host links no
    // library of its own); listed when the shim asks inside `dlopen`, planted there and its
    // states saved in its own file.
    let t = s.path().join("first.d");
    assert!(!cache.exists());
    assert_eq!(trace_lines(&cache, &t, &host, &[&plugin_arg, "4"]), "210\n");
    let libs: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(t.join("line-probes-libs.json")).unwrap()).unwrap();
    assert!(libs[0]["object"].as_str() == Some(plugin_arg.as_str()) && libs.as_array().map(Vec::len) == Some(1), "{libs}");
    let listed = libs[0]["offsets"].as_array().map_or(0, Vec::len);
    let pdir = process_dir(&t);
    assert_eq!(std::fs::read(pdir.join("lines-lib-0.bin")).map(|b| b.len()).ok(), Some(listed), "one byte per listed row");
    let patch: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(pdir.join("patch.json")).unwrap()).unwrap();
    let obj = patch["objects"].as_array().unwrap().iter().find(|o| o["path"].as_str() == Some(plugin_arg.as_str()));
    let obj = obj.unwrap_or_else(|| panic!("{patch}"));
    let n = |k: &str| obj["line_probes"][k].as_u64().unwrap_or_else(|| panic!("{obj}"));
    assert!(obj["dlopened"] == true && n("listed") == listed as u64 && n("unprobed") == 0, "{obj}");
    // Rows an earlier row's probe stands for (the rest of its basic block) get none.
    let covered = obj["line_probes"]["covered"].as_u64().unwrap_or(0);
    assert_eq!(n("planted") + n("at_entry") + covered, n("listed"), "{obj}");
    // Lines 10-26: scale's loop ran; refuse (17-19) and the call of it (24) did not; the
    // declarations of the inlined helpers and the closing braces hold no row.
    // Lines 10-30: scale's loop ran; refuse (17-19) and the refusal (24-27) did not; the
    // declarations of the inlined helpers and the closing braces hold no row.
    let want = [
        Unknown, Unknown, Ran, Ran, Unknown, Unknown, Unknown, NotRun, NotRun, NotRun, Unknown, Unknown, Ran, Ran, NotRun, NotRun, NotRun,
        NotRun, Unknown, Ran, Unknown,
    ];
    assert_eq!(states(&t, &plugin_src), Some(want.to_vec()));
    let p = prompt(&t);
    assert_eq!(block(&p, "plugin_fn"), Some(cut(24, 27, "        ").as_str()), "{p}");

    // The other way round: refuse ran, scale did not.
    let t = s.path().join("zero.d");
    assert_eq!(trace_lines(&cache, &t, &host, &[&plugin_arg, "0"]), "-1\n");
    // scale's loop did not run; refuse and the refusal did. Line 29 (`return scale(n)`) says
    // unknown, so plugin_fn has no run of lines not run to condense: it is whole.
    let want = [
        Unknown, Unknown, NotRun, NotRun, Unknown, Unknown, Unknown, Ran, Ran, Ran, Unknown, Unknown, Ran, Ran, Ran, Ran, Ran, Ran,
        Unknown, Unknown, Unknown,
    ];
    assert_eq!(states(&t, &plugin_src), Some(want.to_vec()));
    let p = prompt(&t);
    assert_eq!(block(&p, "plugin_fn"), Some(lines[21..30].join("\n").as_str()), "{p}");
}
