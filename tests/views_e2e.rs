//! End-to-end tests of the `slice` views (`tree`, `folded`, `flamegraph`, `diff`, `graph`) on
//! real recordings of `examples/python/views_demo.py` and `examples/python/shop_app.py`, made
//! once per test binary with the real `trace` binary and Python shim.

use serde_json::Value;
use slice_trace_e2e::{cmd, python, root, run, run_ok, target_dir, texts};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The recordings shared by the tests.
struct Runs {
    dir: PathBuf,
    /// `views_demo.py --emoji "hello :smile: and :star:"` (the emoji step runs).
    arg: PathBuf,
    /// `views_demo.py --emoji --file card.txt` (the planted bug: no emoji step).
    file: PathBuf,
    /// `shop_app.py`: threads and a subprocess.
    shop: PathBuf,
}

const TEXT: &str = "hello :smile: and :star:";

fn demo() -> PathBuf {
    root().join("examples/python/views_demo.py")
}

fn record(cwd: &Path, out: &str, args: &[&str]) -> PathBuf {
    let d = cwd.join(out);
    run_ok(cmd("trace").current_dir(cwd).arg("run").arg("-o").arg(&d).arg("--").args(args));
    d
}

fn runs() -> &'static Runs {
    static RUNS: OnceLock<Runs> = OnceLock::new();
    RUNS.get_or_init(|| {
        let dir = target_dir().join("views-e2e");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("card.txt"), format!("{TEXT}\n")).unwrap();
        let py = python();
        let demo = demo();
        let demo = demo.to_str().unwrap();
        let arg = record(&dir, "arg.d", &[&py, demo, "--emoji", TEXT]);
        let file = record(&dir, "file.d", &[&py, demo, "--emoji", "--file", "card.txt"]);
        let shop_app = root().join("examples/python/shop_app.py");
        let shop = record(&dir, "shop.d", &[&py, shop_app.to_str().unwrap()]);
        Runs { dir, arg, file, shop }
    })
}

fn slice(args: &[&str]) -> String {
    run_ok(cmd("slice").args(args))
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

// ---------------------------------------------------------------- tree

#[test]
fn tree_shows_counts_times_guides_and_the_thread() {
    let r = runs();
    let out = slice(&["tree", p(&r.arg)]);
    assert!(!out.contains('\x1b'), "no colour into a pipe:\n{out}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with(&format!("# {}: ", r.arg.display())) && lines[0].contains(TEXT) && lines[0].contains("exit 0"), "{out}");
    assert!(lines[1].starts_with("── process ") && lines[1].contains("thread MainThread ──"), "{out}");
    assert_eq!(lines[2], "    TOTAL      SELF    CALLS  FUNCTION");
    let row =
        |name: &str| -> &str { lines.iter().find(|l| l.contains(&format!(" {name}  ("))).unwrap_or_else(|| panic!("no {name} in\n{out}")) };
    // 4 words: replace_code merged into one node called 4 times, under emojize, under decorate.
    assert!(row("replace_code").contains("×4        │  └─ replace_code  ("), "{out}");
    assert!(row("main").contains("×1  └─ main  ("), "{out}");
    let pos = |name: &str| lines.iter().position(|l| l.contains(&format!(" {name}  ("))).unwrap();
    assert!(pos("main") < pos("parse_args") && pos("parse_args") < pos("decorate") && pos("decorate") < pos("emojize"));
    assert!(pos("emojize") < pos("replace_code") && pos("replace_code") < pos("frame") && pos("frame") < pos("border"));
    // Times: TOTAL >= SELF, both with units.
    for l in &lines[3..] {
        let cols: Vec<&str> = l.split_whitespace().collect();
        assert!(["ns", "µs", "ms", "s"].contains(&cols[1]) && ["ns", "µs", "ms", "s"].contains(&cols[3]), "{l}");
    }
    assert!(!out.contains("render_file"));
}

#[test]
fn tree_depth_focus_and_colour() {
    let r = runs();
    let out = slice(&["tree", p(&r.arg), "--max-depth", "2"]);
    assert!(out.contains(" main  (") && !out.contains("decorate"), "{out}");
    let out = slice(&["tree", p(&r.arg), "--focus", "^replace_code$"]);
    for f in ["<module>", "main", "decorate", "emojize", "replace_code"] {
        assert!(out.contains(&format!(" {f}  (")), "{f} missing:\n{out}");
    }
    for f in ["parse_args", "frame", "border"] {
        assert!(!out.contains(&format!(" {f}  (")), "{f} should be gone:\n{out}");
    }
    let out = slice(&["tree", p(&r.arg), "--color", "always"]);
    assert!(out.contains("\x1b[1mreplace_code\x1b[0m"), "{out:?}");
    let o = run(cmd("slice").args(["tree", p(&r.arg), "--color", "auto"]).env("NO_COLOR", "1"));
    assert!(!texts(&o).0.contains('\x1b'));
    let o = run(cmd("slice").args(["tree", p(&r.arg), "--color", "sometimes"]));
    assert_eq!(o.status.code(), Some(2), "bad --color is a usage error");
}

#[test]
fn tree_threads_separate_and_merged() {
    let r = runs();
    let out = slice(&["tree", p(&r.shop)]);
    let headers: Vec<&str> = out.lines().filter(|l| l.starts_with("── ")).collect();
    // Four threads in the app (main + one per category), one in the checksum subprocess: each
    // header names its process (pid and command) and its thread.
    let app: Vec<&&str> = headers.iter().filter(|h| h.starts_with("── process ") && h.contains("shop_app.py), thread ")).collect();
    assert_eq!(app.len(), 4, "{headers:?}");
    assert!(app.iter().any(|h| h.contains("), thread MainThread ── ")), "{headers:?}");
    let sub: Vec<&&str> = headers.iter().filter(|h| h.contains("checksum.py), thread MainThread ── ")).collect();
    assert_eq!(sub.len(), 1, "the subprocess has its own header: {headers:?}");
    let compute: Vec<&str> = out.lines().filter(|l| l.contains(" CategoryStats.compute  (")).collect();
    assert_eq!(compute.len(), 3, "{out}");
    assert!(compute.iter().all(|l| l.contains("×1  CategoryStats.compute")));
    let out = slice(&["tree", p(&r.shop), "--threads", "merged"]);
    let headers: Vec<&str> = out.lines().filter(|l| l.starts_with("── ")).collect();
    assert_eq!(headers.len(), 1, "{out}");
    assert!(headers[0].contains("all 5 threads of 2 processes merged"), "{headers:?}");
    let compute: Vec<&str> = out.lines().filter(|l| l.contains(" CategoryStats.compute  (")).collect();
    assert_eq!(compute.len(), 1);
    assert!(compute[0].contains("×3  CategoryStats.compute"), "{out}");
}

#[test]
fn bad_input_gives_a_clear_error() {
    let o = run(cmd("slice").args(["tree", "/nonexistent/trace.d"]));
    assert_eq!(o.status.code(), Some(1));
    let (out, err) = texts(&o);
    assert!(out.is_empty());
    assert!(err.contains("/nonexistent/trace.d"), "{err}");
    let r = runs();
    let o = run(cmd("slice").args(["flamegraph", p(&r.arg), "-o", "/nonexistent/dir/flame.svg"]));
    assert_eq!(o.status.code(), Some(1));
    assert!(texts(&o).1.contains("/nonexistent/dir/flame.svg"), "{}", texts(&o).1);
}

// ---------------------------------------------------------------- folded

/// Call events of the functions of `file`, per function name, from `trace dump`.
fn recorded_calls(trace: &Path, file: &Path) -> HashMap<String, u64> {
    let mut m = HashMap::new();
    for l in run_ok(cmd("trace").arg("dump").arg(trace)).lines() {
        let e: Value = serde_json::from_str(l).unwrap();
        if e["kind"] == "call" && e["at"].as_str().is_some_and(|a| a.starts_with(&format!("{}:", file.display()))) {
            *m.entry(e["name"].as_str().unwrap().to_string()).or_default() += 1;
        }
    }
    m
}

fn parse_folded(s: &str) -> Vec<(Vec<String>, u64)> {
    s.lines()
        .map(|l| {
            let (stack, v) = l.rsplit_once(' ').unwrap_or_else(|| panic!("not a folded line: {l:?}"));
            (stack.split(';').map(String::from).collect(), v.parse().unwrap_or_else(|_| panic!("bad value in {l:?}")))
        })
        .collect()
}

#[test]
fn folded_call_counts_sum_to_the_recorded_calls() {
    let r = runs();
    let out = slice(&["folded", p(&r.arg), "--weight", "calls", "--prune-startup", "off", "--include-file", "views_demo"]);
    let lines = parse_folded(&out);
    let recorded = recorded_calls(&r.arg, &demo());
    assert_eq!(recorded["replace_code"], 4);
    let total: u64 = recorded.values().sum();
    assert_eq!(lines.iter().map(|(_, v)| v).sum::<u64>(), total, "folded:\n{out}\nrecorded: {recorded:?}");
    // Per function: the lines ending in it add up to its recorded calls.
    let mut per: HashMap<String, u64> = HashMap::new();
    for (stack, v) in &lines {
        *per.entry(stack.last().unwrap().clone()).or_default() += v;
    }
    assert_eq!(per, recorded);
    assert!(lines.iter().any(|(s, v)| s.join(";") == "<module>;main;decorate;emojize;replace_code" && *v == 4), "{out}");
}

#[test]
fn folded_time_and_thread_frames() {
    let r = runs();
    let calls = parse_folded(&slice(&["folded", p(&r.arg), "--weight", "calls"]));
    let time = parse_folded(&slice(&["folded", p(&r.arg)]));
    assert!(time.iter().all(|(_, v)| *v > 0));
    let stacks: Vec<&Vec<String>> = calls.iter().map(|(s, _)| s).collect();
    assert!(time.iter().all(|(s, _)| stacks.contains(&s)), "time stacks are tree paths");
    // Several threads: each stack starts with a frame naming its thread.
    let shop = parse_folded(&slice(&["folded", p(&r.shop), "--weight", "calls"]));
    assert!(shop.iter().all(|(s, _)| s[0].contains("[pid ")), "{shop:?}");
    let mut threads: Vec<&str> = shop.iter().map(|(s, _)| s[0].as_str()).collect();
    threads.sort_unstable();
    threads.dedup();
    assert_eq!(threads.len(), 5, "one thread frame per thread: {threads:?}");
    assert_eq!(threads.iter().filter(|t| t.starts_with("MainThread [pid ")).count(), 2, "{threads:?}");
    let merged = parse_folded(&slice(&["folded", p(&r.shop), "--weight", "calls", "--threads", "merged"]));
    assert!(merged.iter().all(|(s, _)| !s[0].contains("[pid ")));
    let sum = |v: &[(Vec<String>, u64)]| v.iter().map(|(_, x)| x).sum::<u64>();
    assert_eq!(sum(&shop), sum(&merged), "merging threads keeps every call");
}

// ---------------------------------------------------------------- flamegraph

fn svg_titles(svg: &str) -> (Vec<String>, String) {
    // inferno writes the SVG 1.1 DOCTYPE.
    let opts = roxmltree::ParsingOptions { allow_dtd: true, ..Default::default() };
    let doc = roxmltree::Document::parse_with_options(svg, opts).unwrap_or_else(|e| panic!("the SVG is not valid XML: {e}"));
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    let titles = doc.descendants().filter(|n| n.has_tag_name("title")).filter_map(|n| n.text()).map(String::from).collect();
    let title = doc.descendants().find(|n| n.attribute("id") == Some("title")).and_then(|n| n.text()).unwrap_or_default().to_string();
    (titles, title)
}

#[test]
fn flamegraph_is_valid_svg_with_the_frames_and_the_command() {
    let r = runs();
    let out = r.dir.join("calls.svg");
    run_ok(cmd("slice").args(["flamegraph", p(&r.arg), "--weight", "calls", "-o", p(&out)]));
    let (titles, title) = svg_titles(&std::fs::read_to_string(&out).unwrap());
    assert!(title.contains("views_demo.py --emoji 'hello :smile: and :star:'"), "title: {title}");
    // Call weighting: a frame's width is the calls made in its subtree (4 for replace_code, 5 with emojize).
    for want in ["<module> (", "main (", "replace_code (4 calls", "emojize (5 calls", "decorate (8 calls", "border (1 calls"] {
        assert!(titles.iter().any(|t| t.starts_with(want)), "no frame {want:?} in {titles:?}");
    }
    // Time weighting, default file name flame.svg in the current directory.
    let cwd = r.dir.join("default-out");
    std::fs::create_dir_all(&cwd).unwrap();
    run_ok(cmd("slice").current_dir(&cwd).args(["flamegraph", p(&r.arg)]));
    let (titles, _) = svg_titles(&std::fs::read_to_string(cwd.join("flame.svg")).unwrap());
    assert!(titles.iter().any(|t| t.starts_with("replace_code (") && t.contains(" ns, ")), "{titles:?}");
    // Several threads: a frame per thread (weighted by calls: a thread that ran for 0.01% of
    // the time is narrower than the flamegraph's smallest frame, depending on the machine's load).
    run_ok(cmd("slice").args(["flamegraph", p(&r.shop), "--weight", "calls", "-o", p(&r.dir.join("shop.svg"))]));
    let (titles, _) = svg_titles(&std::fs::read_to_string(r.dir.join("shop.svg")).unwrap());
    assert_eq!(titles.iter().filter(|t| t.contains(" [pid ")).count(), 5, "a frame per thread: {titles:?}");
    assert!(titles.iter().any(|t| t.starts_with("CategoryStats.compute (")));
}

// ---------------------------------------------------------------- diff

#[test]
fn diff_finds_the_planted_difference() {
    let r = runs();
    let out = slice(&["diff", p(&r.arg), p(&r.file)]);
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with("--- A ") && lines[0].contains(TEXT), "{out}");
    assert!(lines[1].starts_with("+++ B ") && lines[1].contains("--file card.txt"), "{out}");
    assert!(out.contains("# functions only in A (3): decorate ("), "{out}");
    assert!(out.contains("# functions only in B (2): render_file ("), "{out}");
    let tree: Vec<&str> = lines.iter().copied().filter(|l| !l.starts_with('#') && !l.starts_with("---") && !l.starts_with("+++")).collect();
    let has = |prefix: &str| tree.iter().any(|l| l.starts_with(prefix));
    assert!(has("    main  ("), "main is shared context: {out}");
    assert!(has("-     decorate  (") && has("-       emojize  (") && has("-         replace_code  ("), "{out}");
    assert!(has("+     render_file  (") && has("+       read_text  ("), "{out}");
    // Shared code on shared paths is not shown.
    assert!(!out.contains("parse_args"), "{out}");

    let prompt = slice(&["diff", p(&r.arg), p(&r.file), "--format", "prompt", "-q", "Why does --emoji not work for files?"]);
    assert!(prompt.starts_with("# Question\n\nWhy does --emoji not work for files?\n\n# Differential slice\n"), "{prompt}");
    assert!(prompt.contains("```diff\n"), "{prompt}");
    assert!(prompt.contains("+     render_file  ("));
    assert!(prompt.contains("#### `render_file` (") && prompt.contains("# The bug: `emoji` is not passed on"), "{prompt}");
    assert!(prompt.contains("#### `main` (") && prompt.contains("card = render_file(opts[\"file\"], opts[\"emoji\"])"));
    // A run against itself: nothing differs.
    let same = slice(&["diff", p(&r.arg), p(&r.arg)]);
    assert!(same.contains("# both runs reached exactly the same call paths"), "{same}");
    assert!(same.contains("# functions only in A (0): none"));
}

/// A diff of two large runs within a budget keeps sources beside its call paths and its lists
/// of functions only one run reached: the lists take at most a quarter and the paths at most
/// half of what the budget leaves beside the rest while there are sources to show, then the
/// paths and the lists get the room the sources leave (before, the paths took it all: no
/// source; and the lists were never cut).
#[test]
fn a_large_diff_within_a_budget_keeps_sources_beside_its_paths() {
    let dir = target_dir().join("views-e2e-large-diff");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut prog = String::from("import sys\n\n");
    for i in 0..300 {
        prog.push_str(&format!("def step_{i}(x):\n    return x + {i}\n\n"));
    }
    prog.push_str("STEPS = [");
    prog.push_str(&(0..300).map(|i| format!("step_{i}")).collect::<Vec<_>>().join(", "));
    prog.push_str("]\n\ndef total(x):\n    for f in STEPS:\n        x = f(x)\n    return x\n\n");
    prog.push_str("if __name__ == '__main__':\n    print(total(0) if '--all' in sys.argv else 0)\n");
    std::fs::write(dir.join("steps.py"), prog).unwrap();
    let (a, b) = (record(&dir, "all.d", &[&python(), "steps.py", "--all"]), record(&dir, "none.d", &[&python(), "steps.py"]));
    let q = "How does total add up the steps?";
    let prompt = |budget: &str| slice(&["diff", p(&a), p(&b), "--format", "prompt", "-q", q, "--budget", budget]);
    let tokens = |t: &str| analyzer::tokens::Tokenizer::O200kBase.count(t);
    let whole = slice(&["diff", p(&a), p(&b), "--format", "prompt", "-q", q]);
    assert!(whole.contains("step_299") && tokens(&whole) > 12000, "{} tokens", tokens(&whole));
    let cut = prompt("6000");
    assert!((5000..=6000).contains(&tokens(&cut)), "{} tokens", tokens(&cut));
    // The paths are cut (said), and the most relevant source is there.
    assert!(cut.contains(" more lines of call paths left out to fit the budget\n"), "{cut}");
    assert!(cut.contains("#### `total` (") && cut.contains("        x = f(x)\n"), "{cut}");
    let paths = cut.split("```diff\n").nth(1).and_then(|x| x.split("```").next()).unwrap_or_default();
    assert!(tokens(paths) <= 3000, "the paths take {} tokens of 6000:\n{cut}", tokens(paths));
    // The 300 functions only run A reached are listed as far as a quarter of the room allows,
    // the rest counted (before, all 300 names: about 3,500 of the 6,000 tokens).
    let only_a = cut.lines().find(|l| l.starts_with("- Only in run A: ")).unwrap_or_default();
    let shown = only_a.matches("`step_").count();
    assert!(shown > 0 && only_a.ends_with(&format!(" and {} more (left out to fit the budget)", 300 - shown)), "{only_a}");
    assert!(tokens(only_a) <= 1500, "the list takes {} tokens of 6000:\n{cut}", tokens(only_a));
    assert!(cut.contains("- Only in run B: none\n"), "{cut}");
    // The module's source (its 300 `def` lines, the most relevant after `total`, over 5,000
    // tokens) does not fit; it does not keep the small sources after it out (before: `total`
    // alone).
    let sources = cut.matches("\n#### `step_").count();
    assert!(sources >= 40 && !cut.contains("#### `<module>`"), "{sources} step sources:\n{cut}");
}

// ---------------------------------------------------------------- graph

#[test]
fn graph_is_dot_with_call_counts_on_edges() {
    let r = runs();
    let dot = slice(&["graph", p(&r.shop)]);
    assert!(dot.starts_with("digraph calls {\n"), "{dot}");
    assert!(dot.trim_end().ends_with('}'));
    // Vertex ids by function name.
    let id = |name: &str| -> String {
        let l = dot
            .lines()
            .find(|l| l.contains(&format!("[label=\"{name}\\n")) || l.contains(&format!("[label=\"{name} (")))
            .unwrap_or_else(|| panic!("no vertex {name}:\n{dot}"));
        l.split_whitespace().next().unwrap().to_string()
    };
    let edge = |a: &str, b: &str| -> Option<String> {
        let prefix = format!("  {} -> {} [label=\"", id(a), id(b));
        dot.lines().find(|l| l.starts_with(&prefix)).map(|l| l[prefix.len()..].split('"').next().unwrap().to_string())
    };
    // parse_row calls parse_price 6 times under load_catalogue and twice under validate_extra: one edge, 8 calls.
    assert_eq!(edge("parse_row", "parse_price").as_deref(), Some("×8"), "{dot}");
    assert_eq!(edge("load_catalogue", "parse_row").as_deref(), Some("×6"));
    assert_eq!(edge("validate_extra", "parse_row").as_deref(), Some("×2"));
    // The mutual recursion bundle_price <-> part_price is a cycle.
    assert!(edge("part_price", "bundle_price").is_some() && edge("bundle_price", "part_price").is_some());
    let vertex = |name: &str| dot.lines().find(|l| l.starts_with(&format!("  {} [", id(name)))).unwrap().to_string();
    assert!(vertex("part_price").contains("#fde2c8") && !vertex("parse_row").contains("#fde2c8"));
    // Graphviz accepts it, where installed.
    if let Ok(o) = std::process::Command::new("dot")
        .arg("-Tsvg")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().unwrap().write_all(dot.as_bytes())?;
            c.wait_with_output()
        })
    {
        assert!(o.status.success(), "dot rejected the graph");
    }
}
