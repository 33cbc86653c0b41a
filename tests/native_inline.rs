//! End-to-end: inline probes (docs/native-recording.md, "Inlined functions"). A function the
//! compiler inlined into its caller is in the tree and the prompt, under that caller, marked
//! `[inlined]`, with its source, when its code ran, and only then: `examples/c/inlined.c`
//! built `gcc -g -O1` (two static helpers, each inlined into `main`, one of them run), and
//! hexyl 0.16 (`hexyl::run`, the program's logic, is inlined into `hexyl::main`).

mod native_support;

use native_support::*;
use slice_trace_e2e::{call_tree_text as tree_text, cmd, run, run_ok, scratch, source_block as block, texts, trace_default};
use std::path::Path;

fn trace_patched(dir: &Path, exe: &Path, args: &[&str]) -> String {
    let out = trace_default(dir, exe, args);
    texts(&out).0
}

#[test]
fn a_static_helper_inlined_at_o1_is_shown_when_it_ran_and_only_then() {
    let s = scratch();
    let exe = s.path().join("inlined");
    let src = example("c/inlined.c");
    compile("gcc", &["-g", "-O1"], &exe, &src, &[]);
    // Both helpers are inlined: no function of their own.
    let syms = run_ok(std::process::Command::new("nm").arg(&exe));
    assert!(!syms.contains("checksum") && !syms.contains("report_error"), "{syms}");

    let t = s.path().join("ok.d");
    assert_eq!(trace_patched(&t, &exe, &["abc"]), "193485963\n");
    let prompt = run_ok(cmd("slice").arg("from-trace").arg(&t).arg("-q").arg("How is the checksum computed?"));
    assert_eq!(tree_text(&prompt), "main\n  checksum [inlined]\n", "{prompt}");
    // The hit was registered in the process's inline.bin (its id in the probe's slot), not by a
    // funcs.jsonl line of its own (docs/trace-format.md).
    let pdir = std::fs::read_dir(&t).unwrap().map(|e| e.unwrap().path()).find(|p| p.join("proc.json").exists()).expect("a process");
    let funcs = std::fs::read_to_string(pdir.join("funcs.jsonl")).unwrap();
    assert!(!funcs.contains("\"inlined\""), "{funcs}");
    let bin = std::fs::read(pdir.join("inline.bin")).expect("inline.bin");
    assert_eq!(&bin[..8], b"SLTINL\x001");
    assert!(bin[16..].chunks(4).any(|c| c != [0; 4]), "a slot with an id: {bin:?}");
    let text = std::fs::read_to_string(&src).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(prompt.contains("#### `checksum` (examples/c/inlined.c:8-13)"), "{prompt}");
    assert_eq!(block(&prompt, "checksum"), Some(lines[7..13].join("\n").as_str()), "{prompt}");
    assert!(!prompt.contains("report_error`"), "report_error did not run: {prompt}");
    assert!(
        prompt.contains("in inlined, a function the compiler inlined into its caller is shown under that caller, marked [inlined]"),
        "{prompt}"
    );
    // JSON marks the node (`"inlined": true`, written only there); XML's tree text does.
    let json = run_ok(cmd("slice").arg("from-trace").arg(&t).args(["-q", "How?", "--format", "json"]));
    let doc: serde_json::Value = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {json}"));
    let nodes = &doc["traces"][0]["threads"][0]["nodes"];
    let marked: Vec<(&str, bool)> = nodes
        .as_array()
        .unwrap_or_else(|| panic!("{json}"))
        .iter()
        .map(|n| (n["function"].as_str().unwrap_or_default(), n.get("inlined").is_some_and(|v| v == true)))
        .map(|(k, i)| (k.rsplit(':').next().unwrap_or(k), i))
        .collect();
    assert_eq!(marked, [("main", false), ("checksum", true)], "{json}");
    let xml = run_ok(cmd("slice").arg("from-trace").arg(&t).args(["-q", "How?", "--format", "xml"]));
    assert!(xml.contains("checksum [inlined]"), "{xml}");
    let tree = run_ok(cmd("slice").arg("tree").arg(&t).arg("--color=never"));
    let line = tree.lines().find(|l| l.contains("checksum")).unwrap_or_else(|| panic!("{tree}"));
    assert!(line.contains("ran") && line.contains("└─ checksum [inlined]  (") && line.ends_with("inlined.c:8)"), "{line}");
    assert!(!tree.contains("report_error"), "{tree}");
    // The header counts the stream's events, as `trace info` does, and calls, not the inlined
    // function's probe hit.
    let info = run_ok(cmd("trace").arg("info").arg(&t));
    let events = info.lines().find_map(|l| l.strip_prefix("events:")).map(str::trim).unwrap_or_else(|| panic!("{info}"));
    assert!(tree.lines().next().is_some_and(|l| l.ends_with(&format!(", {events} events"))), "{events}: {tree}");
    assert!(tree.contains(" ── 2 nodes, 1 calls, "), "{tree}");

    // The other way round: report_error ran, checksum did not.
    let t = s.path().join("fail.d");
    trace_patched(&t, &exe, &["--fail"]);
    let prompt = run_ok(cmd("slice").arg("from-trace").arg(&t).arg("-q").arg("Why does it fail?"));
    assert_eq!(tree_text(&prompt), "main\n  report_error [inlined]\n", "{prompt}");
    assert_eq!(block(&prompt, "report_error"), Some(lines[14..18].join("\n").as_str()), "{prompt}");
    assert!(!prompt.contains("checksum`"), "{prompt}");

    // Probes off: nothing inlined is shown, and the note says it cannot tell.
    let t = s.path().join("off.d");
    let out = run(cmd("trace").env("SLICE_TRACE_INLINE", "0").arg("run").arg("-o").arg(&t).arg("--").arg(&exe).arg("abc"));
    assert!(out.status.success(), "{:?}", texts(&out));
    let prompt = run_ok(cmd("slice").arg("from-trace").arg(&t).arg("-q").arg("How is the checksum computed?"));
    assert_eq!(tree_text(&prompt), "main\n", "{prompt}");
    assert!(prompt.contains("in inlined, no inline probe was planted") && prompt.contains("cannot be told"), "{prompt}");
}

/// `examples/c/folded.c` at `-O2`: gcc folds two one-line static predicates into `classify`'s
/// branches and leaves no inlined instance of them in the debug information (checked: the
/// inline list has no entry, and names them as folded). The prompt does not say they did not
/// run: it names them as functions whose running cannot be told.
/// gcc -O2 keeps one copy of the `memset` both inlined helpers end in (cross-jumping) and the
/// debug information gives it to `prepare_long`, whose code `prepare_short`'s jumps to: a probe
/// there showed `prepare_long` as run when only `prepare_short` ran (brotli's `PrepareH68` at
/// quality 5). That range start gets no probe (tracer/src/blocks.rs, `cross_jumped`); each
/// helper is still seen by its entry.
#[test]
fn code_two_inlined_helpers_share_does_not_show_the_other_as_run() {
    let s = scratch();
    let exe = s.path().join("crossjump");
    compile("gcc", &["-g", "-O2"], &exe, &example("c/crossjump.c"), &[]);
    // The premise: prepare_short's code jumps into prepare_long's (objdump -l names the
    // function of each run of instructions).
    let dis = run_ok(std::process::Command::new("objdump").args(["-d", "-l", "--no-show-raw-insn"]).arg(&exe));
    let (mut func, mut at_long, mut jumps_from_short) = ("", Vec::new(), Vec::new());
    for l in dis.lines() {
        if let Some(f) = l.strip_suffix("():") {
            func = f;
            continue;
        }
        let Some((addr, ins)) = l.trim().split_once(":\t") else { continue };
        let Ok(addr) = u64::from_str_radix(addr, 16) else { continue };
        if func == "prepare_long" {
            at_long.push(addr);
        }
        if func == "prepare_short" && ins.starts_with('j') {
            jumps_from_short.extend(ins.split_whitespace().nth(1).and_then(|t| u64::from_str_radix(t, 16).ok()));
        }
    }
    assert!(jumps_from_short.iter().any(|t| at_long.contains(t)), "gcc -O2 no longer shares the memset:\n{dis}");
    for (arg, want) in [
        ("1", "main\n  prepare\n    prepare_short [inlined]\n"),
        ("2", "main\n  prepare\n    prepare_long [inlined]\n"),
        ("3", "main\n  prepare\n"),
    ] {
        let t = s.path().join(format!("k{arg}.d"));
        assert_eq!(trace_patched(&t, &exe, &[arg]), run_ok(std::process::Command::new(&exe).arg(arg)));
        let prompt = run_ok(cmd("slice").arg("from-trace").arg(&t).arg("-q").arg("Which table was prepared?"));
        assert_eq!(tree_text(&prompt), want, "kind {arg}: {prompt}");
    }
}

#[test]
fn helpers_folded_away_without_an_inlined_instance_are_named_as_unknowable() {
    let s = scratch();
    let exe = s.path().join("folded");
    compile("gcc", &["-g", "-O2"], &exe, &example("c/folded.c"), &[]);
    let t = s.path().join("f.d");
    assert_eq!(trace_patched(&t, &exe, &["3", "4", "-2"]), "4\n16\n-1\n");
    let list: serde_json::Value = serde_json::from_slice(&std::fs::read(t.join("inline-probes.json")).unwrap()).unwrap();
    let folded: Vec<(&str, u64)> = list["folded"]
        .as_array()
        .unwrap_or_else(|| panic!("{list}"))
        .iter()
        .map(|f| (f["name"].as_str().unwrap_or_default(), f["line"].as_u64().unwrap_or_default()))
        .collect();
    assert_eq!(folded, [("is_even", 7), ("is_negative", 8)], "{list}");
    let prompt = run_ok(cmd("slice").arg("from-trace").arg(&t).arg("-q").arg("Why is -2 classified as -1?"));
    assert_eq!(tree_text(&prompt), "main\n  classify ×3\n", "{prompt}");
    assert!(
        prompt.contains(
            "> The compiler inlined `is_even` (folded.c:7), `is_negative` (folded.c:8) into their callers leaving no code of their \
             own in the debug information, so no probe can see them run: whether they ran cannot be told"
        ),
        "{prompt}"
    );
    assert!(prompt.contains("every one of its functions that ran with code of its own is in the tree as a call"), "{prompt}");
}

#[test]
fn hexyl_run_inlined_into_main_is_shown_with_its_source() {
    let exe = hexyl();
    let s = scratch();
    let input = s.path().join("in.txt");
    std::fs::write(&input, "hello, world\n").unwrap();
    let t = s.path().join("hexyl.d");
    let out = trace_patched(&t, &exe, &["--color=never", input.to_str().unwrap()]);
    assert!(out.contains("68 65 6c 6c 6f"), "{out}");
    let prompt = run_ok(cmd("slice").arg("from-trace").arg(&t).arg("-q").arg("How does hexyl print a line?"));
    let tree = tree_text(&prompt);
    let main_at = tree.lines().position(|l| l.trim_start().starts_with("hexyl::main")).unwrap_or_else(|| panic!("{tree}"));
    let run_line = tree.lines().nth(main_at + 1).unwrap_or_default();
    // (hexyl::main calls clap's parse first; run is the inlined code after it.)
    let run_at = tree.lines().position(|l| l.trim_start() == "hexyl::run [inlined]").unwrap_or_else(|| panic!("{run_line}\n{tree}"));
    let indent = |l: &str| l.len() - l.trim_start().len();
    let lines: Vec<&str> = tree.lines().collect();
    assert_eq!(indent(lines[run_at]), indent(lines[main_at]) + 2, "under hexyl::main:\n{tree}");
    assert!(lines[main_at + 1..run_at].iter().all(|l| indent(l) > indent(lines[main_at])), "{tree}");
    assert!(prompt.contains("#### `hexyl::run` (cargo-registry/hexyl-0.16.0/src/main.rs:240-450)"), "{prompt}");
    let body = block(&prompt, "hexyl::run").unwrap_or_default();
    assert!(body.starts_with("fn run() -> Result<()> {") && body.ends_with('}'), "{body}");
    // The calls hexyl::run's code made are under it, not beside it (docs/native-recording.md,
    // "Calls made by inlined code"): clap's parsing (main.rs:241) and the printer's
    // `print_all` (main.rs:448) are called from code of `run` only.
    let end = lines[run_at + 1..].iter().position(|l| indent(l) <= indent(lines[run_at])).map_or(lines.len(), |p| run_at + 1 + p);
    let called = |name: &str| lines.iter().position(|l| l.trim_start().starts_with(name)).unwrap_or_else(|| panic!("{name}: {tree}"));
    for name in ["clap_builder::derive::Parser::parse", "hexyl::Printer<Writer>::print_all"] {
        let at = called(name);
        assert!(at > run_at && at < end && indent(lines[at]) == indent(lines[run_at]) + 2, "{name} right under hexyl::run:\n{tree}");
    }
}

/// A C++ lambda that `std::for_each` inlines (`examples/cpp/lambdas.cpp`, g++ -O2): its inline
/// probe and the recorded calls of `report` that its code made name the same node, also with
/// `--stdlib`, where the standard library's inlined frame around the lambda was kept for the
/// probe and left out for the calls, and the lambda was shown twice (once with `report` under
/// it, once under `for_each` without).
#[test]
fn a_lambda_inlined_by_the_standard_library_is_one_node_with_the_calls_it_made() {
    let s = scratch();
    let exe = s.path().join("lambdas");
    compile("g++", &["-g", "-O2"], &exe, &example("cpp/lambdas.cpp"), &[]);
    let t = s.path().join("l.d");
    assert_eq!(trace_patched(&t, &exe, &["b", "a", "b"]), "a 1\nb 2\n");
    for stdlib in [false, true] {
        let mut c = cmd("slice");
        c.arg("tree").arg(&t).arg("--color=never");
        if stdlib {
            c.arg("--stdlib");
        }
        let tree = run_ok(&mut c);
        let lines: Vec<&str> = tree.lines().collect();
        let lambda: Vec<usize> =
            (0..lines.len()).filter(|&i| lines[i].contains("[inlined]") && lines[i].ends_with("lambdas.cpp:21)")).collect();
        assert_eq!(lambda.len(), 1, "one node of the lambda (--stdlib: {stdlib}):\n{tree}");
        let at = lambda[0];
        let indent = |l: &str| l.find("─ ").unwrap_or(0);
        assert!(
            lines.get(at + 1).is_some_and(|l| l.contains("└─ report(") && l.contains("×2") && indent(l) > indent(lines[at])),
            "report right under the lambda (--stdlib: {stdlib}):\n{tree}"
        );
        assert_eq!(tree.matches("report(").count(), 1, "{tree}");
    }
}

/// The program's own SIGTRAP handler (installed with `sigaction` or `signal`) still gets every
/// trap that is not a probe's (`raise`, its own `int3`), and `sigaction` reports it back as
/// the current one, while the probes' handler is installed beside it; a probe still fires
/// after the program blocked every signal.
#[test]
fn the_programs_own_sigtrap_handler_gets_the_traps_that_are_not_probes() {
    let s = scratch();
    let exe = s.path().join("traps");
    compile("gcc", &["-g", "-O1"], &exe, &example("c/traps.c"), &[]);
    for (args, expected) in [(&[][..], "2 5\n"), (&["signal"][..], "2 8\n")] {
        let untraced = run(std::process::Command::new(&exe).args(args));
        assert_eq!(texts(&untraced).0, expected);
        let t = s.path().join(format!("traps{}.d", args.len()));
        assert_eq!(trace_patched(&t, &exe, args), expected, "{args:?}");
        let prompt = run_ok(cmd("slice").arg("from-trace").arg(&t).arg("-q").arg("What happens on a trap?"));
        assert_eq!(tree_text(&prompt), "main\n  on_trap ×2\n  scaled [inlined]\n", "{prompt}");
    }
}

/// A forked child inherits its parent's mapping of inline.bin, but not its function ids: its
/// hits (two: the first one also opens its recording) get funcs.jsonl records of its own, and
/// the parent's file names only what ran in the parent (docs/trace-format.md, `inline.bin`).
#[test]
fn a_forked_childs_hits_are_its_own_and_not_in_its_parents_inline_bin() {
    let s = scratch();
    let src = s.path().join("forks.c");
    std::fs::write(
        &src,
        "#include <stdio.h>\n#include <sys/wait.h>\n#include <unistd.h>\n\nstatic unsigned before_fork(const char *s) {\n    unsigned h = 7;\n    while (*s)\n        h = h * 31 + (unsigned char)*s++;\n    return h;\n}\n\nstatic unsigned in_child(unsigned x) {\n    unsigned s = 0;\n    for (unsigned i = 0; i < x % 97 + 3; i++)\n        s += i * x;\n    return s;\n}\n\nstatic unsigned in_child_too(unsigned x) {\n    unsigned s = 1;\n    for (unsigned i = 0; i < x % 89 + 5; i++)\n        s ^= i + x;\n    return s;\n}\n\nint main(int argc, char **argv) {\n    unsigned h = before_fork(argc > 1 ? argv[1] : \"abc\");\n    fflush(stdout);\n    pid_t p = fork();\n    if (p == 0) {\n        printf(\"child %u\\n\", in_child(h));\n        printf(\"child %u\\n\", in_child_too(h));\n        return 0;\n    }\n    int st;\n    waitpid(p, &st, 0);\n    printf(\"parent %u\\n\", h);\n    return 0;\n}\n",
    )
    .unwrap();
    let exe = s.path().join("forks");
    compile("gcc", &["-g", "-O1"], &exe, &src, &[]);
    let syms = run_ok(std::process::Command::new("nm").arg(&exe));
    assert!(!syms.contains("before_fork") && !syms.contains("in_child"), "all inlined: {syms}");
    let t = s.path().join("forks.d");
    let out = trace_patched(&t, &exe, &["xyz"]);
    assert!(out.contains("child ") && out.contains("parent "), "{out}");
    // The deepest inlined function at an offset of the program (addr2line).
    let name_at = |off: u64| {
        let out = run_ok(std::process::Command::new("addr2line").args(["-f", "-i", "-e"]).arg(&exe).arg(format!("{off:#x}")));
        out.lines().next().unwrap_or_default().to_string()
    };
    let list: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(t.join("inline-probes.json")).unwrap()).unwrap();
    let offsets: Vec<u64> = list["offsets"].as_array().unwrap().iter().map(|o| o.as_u64().unwrap()).collect();
    let (mut parent, mut child) = (None, None);
    for e in std::fs::read_dir(&t).unwrap() {
        let d = e.unwrap().path();
        let Ok(meta) = std::fs::read_to_string(d.join("proc.json")) else { continue };
        let meta: serde_json::Value = serde_json::from_str(&meta).unwrap();
        if meta["forked_from"].is_u64() {
            child = Some(d);
        } else {
            parent = Some(d);
        }
    }
    let (parent, child) = (parent.expect("the parent"), child.expect("the child"));
    // The parent's hits: in its inline.bin, before_fork's and not in_child's.
    let bin = std::fs::read(parent.join("inline.bin")).expect("the parent's inline.bin");
    let fired: Vec<String> = bin[16..].chunks(4).zip(&offsets).filter(|(c, _)| *c != [0; 4]).map(|(_, &o)| name_at(o)).collect();
    assert!(fired.iter().any(|n| n == "before_fork") && !fired.iter().any(|n| n.starts_with("in_child")), "{fired:?}");
    // The child's: a funcs.jsonl record of its own, marked inlined, at in_child's code.
    let funcs = std::fs::read_to_string(child.join("funcs.jsonl")).unwrap();
    let inlined: Vec<String> = funcs
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|r| r["inlined"] == true)
        .map(|r| name_at(r["addr"].as_u64().unwrap() - r["base"].as_u64().unwrap()))
        .collect();
    assert!(inlined.iter().any(|n| n == "in_child") && inlined.iter().any(|n| n == "in_child_too"), "{inlined:?}\n{funcs}");
    let tree = run_ok(cmd("slice").arg("tree").arg(&t).arg("--color=never"));
    assert_eq!(tree.matches("in_child [inlined]").count(), 1, "{tree}");
    assert_eq!(tree.matches("in_child_too [inlined]").count(), 1, "{tree}");
    assert!(tree.contains("before_fork [inlined]"), "{tree}");
}

/// The traps of the inline probes inside an entry-patched function are written at its first
/// call (docs/native-recording.md, "Inlined functions"): a function that never runs gets none,
/// one that runs gets them before its body does (its inlined code that did not run keeps its
/// trap), and `SLICE_TRACE_INLINE=start` writes them all at start-up, as before. The program
/// prints its own code bytes, which the listed probe offsets are looked up in.
#[test]
fn a_functions_inline_probes_are_planted_at_its_first_call_and_never_if_it_never_runs() {
    let s = scratch();
    let src = s.path().join("lazy.c");
    std::fs::write(
        &src,
        "#include <stdio.h>\n#include <stdlib.h>\n\nstatic inline __attribute__((always_inline)) unsigned mix(unsigned x) {\n    unsigned h = x;\n    for (unsigned i = 0; i < x % 7 + 3; i++)\n        h = h * 31 + i;\n    return h;\n}\n\nstatic volatile unsigned sink;\n\n__attribute__((noinline)) unsigned never_called(unsigned x) {\n    sink = x;\n    return mix(x + sink) ^ 0x5a5au;\n}\n\n__attribute__((noinline)) unsigned called_once(unsigned x) {\n    sink = x;\n    if (x == sink + 1)\n        return mix(x + sink);\n    return x + 1;\n}\n\nstatic void dump(const char *name, const void *f, unsigned long n) {\n    const unsigned char *p = f;\n    printf(\"%s \", name);\n    for (unsigned long i = 0; i < n; i++)\n        printf(\"%02x\", p[i]);\n    printf(\"\\n\");\n}\n\nint main(int argc, char **argv) {\n    if (argc < 3)\n        return 2;\n    unsigned r = called_once((unsigned)argc);\n    if (argc > 9)\n        r += never_called(r);\n    printf(\"%u\\n\", r);\n    dump(\"never_called\", (const void *)never_called, strtoul(argv[1], 0, 0));\n    dump(\"called_once\", (const void *)called_once, strtoul(argv[2], 0, 0));\n    return 0;\n}\n",
    )
    .unwrap();
    let exe = s.path().join("lazy");
    compile("gcc", &["-g", "-O1"], &exe, &src, &[]);
    // Each function's offset and size (a PIE: its first page is at 0).
    let syms = run_ok(std::process::Command::new("nm").arg("-S").arg(&exe));
    let sym = |name: &str| {
        let l = syms.lines().find(|l| l.ends_with(&format!(" {name}"))).unwrap_or_else(|| panic!("{name}: {syms}"));
        let f: Vec<&str> = l.split_whitespace().collect();
        (u64::from_str_radix(f[0], 16).unwrap(), u64::from_str_radix(f[1], 16).unwrap())
    };
    let (never, called) = (sym("never_called"), sym("called_once"));
    let sizes = [format!("{}", never.1), format!("{}", called.1)];
    let args = [sizes[0].as_str(), sizes[1].as_str()];
    // Per function, whether each listed probe offset inside it holds the trap (x86-64's int3).
    let traps_at = |t: &Path, out: &str| -> Vec<Vec<bool>> {
        let list: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(t.join("inline-probes.json")).unwrap()).unwrap();
        let offsets: Vec<u64> = list["offsets"].as_array().unwrap().iter().map(|o| o.as_u64().unwrap()).collect();
        [("never_called", never), ("called_once", called)]
            .iter()
            .map(|&(name, (at, size))| {
                let hex = out.lines().find_map(|l| l.strip_prefix(&format!("{name} "))).unwrap_or_else(|| panic!("{out}"));
                let bytes: Vec<u8> = (0..hex.len() / 2).map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap()).collect();
                // Past the entry's patched jump (its moved bytes hold no probe).
                offsets.iter().filter(|&&o| o >= at + 5 && o < at + size).map(|&o| bytes[(o - at) as usize] == 0xcc).collect()
            })
            .collect()
    };
    let t = s.path().join("lazy.d");
    let out = trace_patched(&t, &exe, &args);
    assert!(out.starts_with("4\n"), "{out}");
    let lazy = traps_at(&t, &out);
    assert!(!lazy[0].is_empty() && !lazy[1].is_empty(), "probes listed in both functions: {lazy:?}");
    assert!(lazy[0].iter().all(|&b| !b), "never_called never ran: no trap in it: {lazy:?}");
    assert!(lazy[1].iter().any(|&b| b), "called_once ran: its not-taken inlined mix keeps its trap: {lazy:?}");
    let pdir = std::fs::read_dir(&t).unwrap().map(|e| e.unwrap().path()).find(|p| p.join("proc.json").exists()).expect("a process");
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(pdir.join("patch.json")).unwrap()).unwrap();
    let probes = &report["objects"][0]["inline_probes"];
    assert!(probes["deferred"].as_u64().unwrap_or(0) >= 2, "{report}");
    let tree = run_ok(cmd("slice").arg("tree").arg(&t).arg("--color=never"));
    assert!(tree.contains("called_once") && !tree.contains("mix") && !tree.contains("never_called"), "{tree}");

    // Written at start-up (the earlier behaviour): never_called holds its traps.
    let t = s.path().join("start.d");
    let mut c = cmd("trace");
    c.env_remove("SLICE_TRACE_PATCH").env("SLICE_TRACE_INLINE", "start").arg("run").arg("-o").arg(&t).arg("--").arg(&exe).args(args);
    let out = texts(&run(&mut c)).0;
    let eager = traps_at(&t, &out);
    assert!(eager[0].iter().any(|&b| b), "{eager:?}");
    assert_eq!(eager[1], lazy[1], "{eager:?}");
    // Untraced: no trap anywhere.
    let out = run_ok(std::process::Command::new(&exe).args(args));
    assert!(traps_at(&t, &out).iter().flatten().all(|&b| !b), "{out}");
}
