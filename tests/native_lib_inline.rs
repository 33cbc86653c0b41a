//! End-to-end: inline probes in a program's own shared library (docs/native-recording.md,
//! "Inlined functions"). `examples/c/libinline/hashing.c` built `gcc -g -O1 -fPIC -shared`
//! into `libhashing.so`, whose exported `lib_hash` has two static helpers inlined into it, and
//! `hasher.c` linked to it: the helper that ran is in the tree under `lib_hash`, marked
//! `[inlined]`, with its source; the one that did not run is not.

mod native_support;

use native_support::*;
use slice_trace_e2e::{call_tree_text as tree_text, cmd, run, run_ok, scratch, source_block as block, texts, trace_default};
use std::path::Path;

fn trace_patched(dir: &Path, exe: &Path, args: &[&str]) -> String {
    let out = trace_default(dir, exe, args);
    assert!(out.status.success(), "{:?}", texts(&out));
    texts(&out).0
}

#[test]
fn a_static_helper_inlined_in_a_shared_library_is_shown_when_it_ran_and_only_then() {
    let s = scratch();
    let dir = example("c/libinline");
    let (lib, exe) = build_with_library(s.path(), &dir.join("hashing.c"), "hashing", &dir.join("hasher.c"), "hasher");
    // Both helpers are inlined into lib_hash: no function of their own, and two inlined
    // instances in the library's DWARF.
    assert_helpers_inlined(&lib, "lib_hash", &["mix", "complain"]);

    let text = std::fs::read_to_string(dir.join("hashing.c")).unwrap();
    let lines: Vec<&str> = text.lines().collect();

    let t = s.path().join("ok.d");
    assert_eq!(trace_patched(&t, &exe, &["abc"]), "193485963\n");
    assert!(t.join("inline-probes-libs.json").is_file(), "the library's list");
    let prompt = run_ok(cmd("slice").arg("from-trace").arg(&t).arg("-q").arg("How is the hash computed?"));
    assert_eq!(tree_text(&prompt), "main\n  lib_hash\n    mix [inlined]\n", "{prompt}");
    assert!(prompt.contains("#### `mix` (") && prompt.contains("hashing.c:10-15)"), "{prompt}");
    assert_eq!(block(&prompt, "mix"), Some(lines[9..15].join("\n").as_str()), "{prompt}");
    assert!(!prompt.contains("`complain`"), "complain did not run: {prompt}");
    assert!(prompt.contains("in libhashing.so, a function the compiler inlined into its caller is shown under that caller"), "{prompt}");
    // The program has debug information and nothing of its own inlined: said so, not that it
    // cannot be told.
    assert!(prompt.contains("in hasher, the debug information lists none of its own code as inlined"), "{prompt}");
    assert!(!prompt.contains("cannot be told"), "{prompt}");
    // The hit is a funcs.jsonl line of the library's (inline.bin is the program's).
    let pdir = std::fs::read_dir(&t).unwrap().map(|e| e.unwrap().path()).find(|p| p.join("proc.json").exists()).expect("a process");
    let funcs = std::fs::read_to_string(pdir.join("funcs.jsonl")).unwrap();
    assert!(funcs.lines().any(|l| l.contains("\"inlined\":true") && l.contains("libhashing.so")), "{funcs}");
    let patch = std::fs::read_to_string(pdir.join("patch.json")).unwrap();
    let patch: serde_json::Value = serde_json::from_str(&patch).unwrap();
    let obj = patch["objects"].as_array().unwrap().iter().find(|o| o["path"].as_str().is_some_and(|p| p.ends_with("/libhashing.so")));
    let obj = obj.unwrap_or_else(|| panic!("{patch}"));
    // Every entry probed; those inside lib_hash (an entry-patched function) planted at its
    // first call, the one in its moved entry bytes recorded with that call.
    let n = |k: &str| obj["inline_probes"][k].as_u64().unwrap_or_else(|| panic!("{obj}"));
    assert!(n("listed") >= 2 && n("unprobed") == 0 && n("listed") == n("planted") + n("at_entry"), "{obj}");
    assert_eq!(n("deferred"), n("planted"), "{obj}");

    // The other way round: complain ran, mix did not.
    let t = s.path().join("empty.d");
    assert_eq!(trace_patched(&t, &exe, &[""]), "0\n");
    let prompt = run_ok(cmd("slice").arg("from-trace").arg(&t).arg("-q").arg("Why is it 0?"));
    assert_eq!(tree_text(&prompt), "main\n  lib_hash\n    complain [inlined]\n", "{prompt}");
    assert_eq!(block(&prompt, "complain"), Some(lines[16..20].join("\n").as_str()), "{prompt}");
    assert!(!prompt.contains("`mix`"), "{prompt}");

    // Probes off: nothing inlined is shown, and the note says it cannot tell.
    let t = s.path().join("off.d");
    let out = run(cmd("trace").env("SLICE_TRACE_INLINE", "0").arg("run").arg("-o").arg(&t).arg("--").arg(&exe).arg("abc"));
    assert!(out.status.success(), "{:?}", texts(&out));
    let prompt = run_ok(cmd("slice").arg("from-trace").arg(&t).arg("-q").arg("How is the hash computed?"));
    assert_eq!(tree_text(&prompt), "main\n  lib_hash\n", "{prompt}");
    assert!(prompt.contains("libhashing.so, no inline probe was planted") && !prompt.contains("marked [inlined]"), "{prompt}");
}
