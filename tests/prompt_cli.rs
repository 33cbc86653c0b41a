//! End-to-end tests of `slice from-trace` and `slice stats` on real traces recorded by
//! `trace run` from the Python examples (and rich-cli from PyPI).

use slice_trace_e2e::{bin, cmd, python, rich_cli, root, run, run_ok, scratch, texts};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

fn trace(cwd: &Path, out: &Path, argv: &[&str]) {
    let mut c = cmd("trace");
    c.current_dir(cwd).arg("run").arg("-o").arg(out).arg("--").args(argv);
    let o = run(&mut c);
    assert!(o.status.success(), "trace run failed: {:?}", texts(&o));
}

/// `trace run` of a target that fails with exit status `code`: the status passes through and
/// the trace records it.
fn trace_failing(cwd: &Path, out: &Path, argv: &[&str], code: i32) {
    let mut c = cmd("trace");
    c.current_dir(cwd).arg("run").arg("-o").arg(out).arg("--").args(argv);
    let o = run(&mut c);
    assert_eq!(o.status.code(), Some(code), "{:?}", texts(&o));
    let meta: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(out.join("meta.json")).unwrap()).unwrap();
    assert_eq!(meta["exit"]["code"], code, "{meta}");
}

/// One recorded run of the shop example, shared by the tests of this file.
fn shop() -> &'static PathBuf {
    static T: OnceLock<PathBuf> = OnceLock::new();
    T.get_or_init(|| {
        let dir = scratch().keep();
        let out = dir.join("shop.d");
        let app = root().join("examples/python/shop_app.py");
        trace(&dir, &out, &[&python(), app.to_str().unwrap()]);
        out
    })
}

fn slice(args: &[&str]) -> (String, String, i32) {
    let o = run(Command::new(bin("slice")).args(args));
    let (out, err) = texts(&o);
    (out, err, o.status.code().unwrap_or(-1))
}

fn slice_ok(args: &[&str]) -> (String, String) {
    let (out, err, code) = slice(args);
    assert_eq!(code, 0, "slice {args:?} failed:\n{err}");
    (out, err)
}

fn tokens_reported(stderr: &str) -> usize {
    let l =
        stderr.lines().find(|l| l.starts_with("slice: ") && l.contains(" tokens (")).unwrap_or_else(|| panic!("no token line in {stderr}"));
    l["slice: ".len()..].split_whitespace().next().unwrap().parse().unwrap()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

const Q: &str = "How is the price of a bundle computed?";

#[test]
fn shop_prompt_has_question_tree_and_exact_sources() {
    let t = shop();
    let (p, err) = slice_ok(&["from-trace", s(t), "-q", Q]);
    assert!(p.starts_with(&format!("# Question\n\n{Q}\n")));
    // Tree: recursion cut, counts, threads and the subprocess labelled.
    // (The tree names a function whose source block follows; the block's heading locates it.)
    assert!(p.lines().any(|l| l.trim_start() == "bundle_price ×3") && p.contains("↻ recursive"), "{p}");
    assert!(p.lines().any(|l| l.trim_start().starts_with("part_price ×")), "{p}");
    // A generator called once and resumed 12 times is one call, not thirteen.
    assert!(p.lines().any(|l| l.trim_start() == "category_report (+12 resumes)"), "{p}");
    assert!(p.lines().any(|l| l.trim_start() == "item_lines ×3 (+9 resumes)"), "{p}");
    assert!(p.contains("#### `category_report` (") && p.contains("/shop/report.py:17-"), "{p}");
    assert!(p.contains("thread stats-"), "threads are labelled by name");
    assert!(p.contains("checksum.py), thread MainThread") && p.contains("fletcher16"), "the subprocess has its tree");
    // The exact source of bundle_price: lines 6-11 of shop/pricing.py, nothing of its neighbours.
    let src = std::fs::read_to_string(root().join("examples/python/shop/pricing.py")).unwrap();
    let want: Vec<&str> = src.lines().skip(5).take(6).collect();
    let file = root().join("examples/python/shop/pricing.py");
    let block = format!("#### `bundle_price` ({}:6-11)\n\nModule-level values it reads ({}, line 3):\n\n```python\nBUNDLE_DISCOUNT_PERCENT = 10\n```\n\n```python\n{}\n```\n", file.display(), file.display(), want.join("\n"));
    assert!(p.contains(&block), "no exact bundle_price block in:\n{p}");
    assert!(!p.contains("def part_price(item):\n    if hasattr(item, \"parts\"):\n        return bundle_price(item)\n    return item.price_cents\n\n\ndef discounted"));
    // Callee after caller.
    assert!(p.find("#### `main`").unwrap() < p.find("#### `load_catalogue`").unwrap());
    assert!(p.find("#### `load_catalogue`").unwrap() < p.find("#### `parse_row`").unwrap());
    // Import-time work is pruned by default, the standard library hidden.
    assert!(err.contains("tokens (o200k_base)"));
    assert!(p.contains("Start-up pruning (automatic)"));
    assert!(!p.contains("subprocess.py") && !p.contains("stdlib/"));
    assert!(tokens_reported(&err) > 500);
}

#[test]
fn variants_and_their_long_options() {
    let t = shop();
    let get = |extra: &[&str]| {
        let mut a = vec!["from-trace", s(t), "-q", Q];
        a.extend_from_slice(extra);
        slice_ok(&a).0
    };
    let default = get(&[]);
    let full = get(&["--variant", "full"]);
    let a = get(&["--variant", "A"]);
    let c = get(&["--variant", "C"]);
    let ca = get(&["--variant", "CA"]);
    let tr = get(&["--variant", "T"]);
    assert!(full.matches("#### `bundle_price`").count() > 1, "full repeats");
    assert_eq!(default.matches("#### `bundle_price`").count(), 1, "the default shows each source once");
    // ...and a subtree the tree already showed whole is named, not repeated.
    assert!(default.contains("\n      Bundle.value_cents ×3 [same calls as above]\n"), "{default}");
    // A subtree another thread's tree showed: that tree is named (by process and thread).
    let other_thread =
        regex::Regex::new(r"```text\nCategoryStats\.compute \[same calls as above, in `process \d+, thread stats-stationery`\]\n```")
            .unwrap();
    assert!(other_thread.is_match(&default), "{default}");
    assert!(!full.contains("[same calls as above]"), "the method's full variant keeps the whole tree");
    assert!(default.contains("### Call tree") && default.find("#### `main`").unwrap() < default.find("#### `bundle_price`").unwrap());
    assert_eq!(a.matches("#### `bundle_price`").count(), 1, "A: once each");
    assert!(a.contains("### Call tree") && !c.contains("### Call tree") && !ca.contains("### Call tree"));
    assert!(c.matches("#### `bundle_price`").count() > 1);
    assert!(!tr.contains("```python") && tr.contains("bundle_price"));
    // Sorted by qualified name.
    assert!(ca.find("#### `add_bundles`").unwrap() < ca.find("#### `bundle_price`").unwrap());
    assert!(ca.find("#### `bundle_price`").unwrap() < ca.find("#### `main`").unwrap());
    // Long options reproduce the variants exactly.
    assert_eq!(get(&["--no-tree", "--order", "sorted"]), ca);
    assert_eq!(get(&["--order", "sorted"]), a);
    assert_eq!(get(&["--variant", "full", "--no-tree"]), c);
    assert_eq!(get(&["--variant", "full", "--dedupe"]), default);
    assert_eq!(get(&["--no-sources"]), tr);
    assert_eq!(get(&["--variant", "full", "--dedupe"]).matches("#### `bundle_price`").count(), 1);
    let (_, err, code) = slice(&["from-trace", s(t), "-q", Q, "--order", "sorted", "--repeat"]);
    assert_eq!(code, 2, "{err}");
}

#[test]
fn budget_is_exact_and_reports_what_it_dropped() {
    let t = shop();
    for budget in [3000usize, 2000, 1200] {
        let b = budget.to_string();
        let (p, err) = slice_ok(&["from-trace", s(t), "-q", Q, "--budget", &b]);
        let n = tokens_reported(&err);
        assert!(n <= budget, "{n} > {budget}");
        assert!(p.contains(&format!("To fit the budget of {budget} tokens")), "{p}");
        assert!(err.contains(&format!("slice: budget {budget}: kept")));
        assert!(p.contains(Q));
        // Same count with the other tokenizer's budget honoured too.
        let (_, err) = slice_ok(&["from-trace", s(t), "-q", Q, "--budget", &b, "--tokenizer", "cl100k_base"]);
        assert!(tokens_reported(&err) <= budget);
    }
    // The code closest to the question survives longest.
    let (p, _) = slice_ok(&["from-trace", s(t), "-q", Q, "--budget", "2500"]);
    assert!(p.contains("def bundle_price(bundle):"), "{p}");
    let (_, err, code) = slice(&["from-trace", s(t), "-q", Q, "--budget", "40"]);
    assert_eq!(code, 1);
    assert!(err.contains("too small"), "{err}");
}

#[test]
fn xml_json_and_user_templates() {
    let t = shop();
    let (x, _) = slice_ok(&["from-trace", s(t), "-q", Q, "--format", "xml"]);
    assert!(x.starts_with("<question>\nHow is the price"));
    assert!(x.contains("<call_tree thread=\"process ") && x.contains("<source function=\"bundle_price\""));
    let (j, _) = slice_ok(&["from-trace", s(t), "-q", Q, "--format", "json"]);
    let v: serde_json::Value = serde_json::from_str(&j).unwrap();
    assert_eq!(v["schema_version"], 1);
    let threads = v["traces"][0]["threads"].as_array().unwrap();
    assert!(threads.len() >= 4, "main thread, 3 stats threads, the subprocess");
    let nodes = threads[0]["nodes"].as_array().unwrap();
    let bp = nodes.iter().find(|n| v["functions"][n["function"].as_str().unwrap()]["qualname"] == "bundle_price").unwrap();
    assert!(v["sources"][bp["function"].as_str().unwrap()]["code"].as_str().unwrap().starts_with("def bundle_price(bundle):"));
    let d = scratch();
    let tpl = d.path().join("mine.j2");
    std::fs::write(&tpl, "Q: {{ question }}\n{% for t in traces %}{% for s in t.sources %}{{ s.qualname }};{% endfor %}{% endfor %}")
        .unwrap();
    let (p, _) = slice_ok(&["from-trace", s(t), "-q", Q, "--template", s(&tpl), "--dedupe"]);
    assert!(p.starts_with(&format!("Q: {Q}\n")) && p.contains("bundle_price;"), "{p}");
    std::fs::write(&tpl, "{% if %}").unwrap();
    let (_, err, code) = slice(&["from-trace", s(t), "-q", Q, "--template", s(&tpl)]);
    assert_eq!(code, 1);
    assert!(err.contains("mine.j2"), "{err}");
}

#[test]
fn selection_options() {
    let t = shop();
    let tree = |extra: &[&str]| {
        let mut a = vec!["from-trace", s(t), "-q", Q, "--variant", "T"];
        a.extend_from_slice(extra);
        slice_ok(&a).0
    };
    let f = tree(&["--focus", "^Bundle.value_cents$"]);
    assert!(f.contains("Bundle.value_cents") && f.contains("item_lines") && !f.contains("load_catalogue") && !f.contains("fletcher16"));
    assert!(!f.contains("format_cents"));
    assert!(!f.contains("bundle_price"), "without --focus-subtree the callees go");
    let fs = tree(&["--focus", "^Bundle.value_cents$", "--focus-subtree"]);
    assert!(fs.contains("bundle_price") && fs.contains("part_price"));
    let d = tree(&["--max-depth", "2"]);
    assert!(d.contains("\n  main  (") && !d.contains("\n    load_catalogue"));
    let m = tree(&["--module", "^shop\\.pricing$"]);
    assert!(m.contains("bundle_price") && !m.contains("parse_row"));
    let x = tree(&["--exclude", "^compute_all$"]);
    assert!(!x.contains("CategoryStats.__init__") && x.contains("thread stats-"));
    let xf = tree(&["--exclude-file", "report\\.py$"]);
    assert!(!xf.contains("category_report") && !xf.contains("item_lines"));
    let std = tree(&["--stdlib"]);
    assert!(std.contains("stdlib/subprocess.py"), "--stdlib shows the standard library");
    let nosite = tree(&["--no-site-packages", "--stdlib"]);
    assert!(!nosite.contains("site-packages/"));
    let (_, err, code) = slice(&["from-trace", s(t), "-q", Q, "--include", "("]);
    assert_eq!(code, 2);
    assert!(err.contains("--include") && err.contains("regular expression"), "{err}");
}

#[test]
fn baseline_pruning_removes_what_startup_also_did() {
    let d = scratch();
    let app = root().join("examples/python/shop_app.py");
    // A baseline that starts the same program and stops early (an empty catalogue).
    std::fs::write(d.path().join("empty.csv"), "").unwrap();
    let base = d.path().join("base.d");
    // The baseline only starts: the app fails on an empty catalogue (KeyError, status 1).
    trace_failing(d.path(), &base, &[&python(), s(&app), "empty.csv"], 1);
    let t = shop();
    let (p, err) = slice_ok(&["from-trace", s(t), "-q", Q, "--variant", "T", "--prune-startup", s(&base)]);
    assert!(p.contains("also ran at the same place in the baseline run"), "{p}\n{err}");
    // The baseline's leaf Inventory.__init__ under load_catalogue is gone; the feature stays.
    let lc = p.find("load_catalogue").unwrap();
    let next_sibling = p[lc..].find("\n    add_bundles").unwrap() + lc;
    assert!(!p[lc..next_sibling].contains("Inventory.__init__"), "{p}");
    assert!(p[lc..next_sibling].contains("parse_row"));
    // Import-time module bodies ran in the baseline too; trace's own bootstrap is never shown.
    assert!(!p.contains("models.py:1)") && !p.contains("sitecustomize"), "{p}");
    let (off, _) = slice_ok(&["from-trace", s(t), "-q", Q, "--variant", "T", "--prune-startup", "off"]);
    assert!(off.contains("<module>  (") && off.matches("<module>").count() > p.matches("<module>").count());
}

#[test]
fn bad_input_gives_clear_errors() {
    let d = scratch();
    let (_, err, code) = slice(&["from-trace", s(&d.path().join("nope.d")), "-q", "x"]);
    assert_eq!(code, 1);
    assert!(err.contains("no such trace directory"), "{err}");
    let empty = d.path().join("empty.d");
    std::fs::create_dir(&empty).unwrap();
    let (_, err, code) = slice(&["from-trace", s(&empty), "-q", "x"]);
    assert_eq!(code, 1);
    assert!(err.contains("not a trace directory"), "{err}");
    // A newer format version.
    let newer = d.path().join("newer.d");
    std::fs::create_dir(&newer).unwrap();
    let meta = std::fs::read_to_string(shop().join("meta.json")).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&meta).unwrap();
    v["version"] = 99.into();
    std::fs::write(newer.join("meta.json"), v.to_string()).unwrap();
    let (_, err, code) = slice(&["from-trace", s(&newer), "-q", "x"]);
    assert_eq!(code, 1);
    assert!(err.contains("newer version") && err.contains("upgrade"), "{err}");
    // Only meta.json: no process.
    std::fs::write(newer.join("meta.json"), meta).unwrap();
    let (_, err, code) = slice(&["from-trace", s(&newer), "-q", "x"]);
    assert_eq!(code, 1);
    assert!(err.contains("no process"), "{err}");
    // A truncated stream: a warning naming the file, and the events before the damage are used.
    let cut = d.path().join("cut.d");
    copy_dir(shop(), &cut);
    let stream = std::fs::read_dir(&cut)
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_dir())
        .flat_map(|p| std::fs::read_dir(p.path()).unwrap().flatten())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "ev"))
        .max_by_key(|p| std::fs::metadata(p).unwrap().len())
        .unwrap();
    let len = std::fs::metadata(&stream).unwrap().len();
    let bytes = std::fs::read(&stream).unwrap();
    std::fs::write(&stream, &bytes[..(len as usize * 2 / 3)]).unwrap();
    let (p, err, code) = slice(&["from-trace", s(&cut), "-q", "x", "--variant", "T"]);
    assert_eq!(code, 0, "{err}");
    assert!(p.contains("main  ("));
    // A closed stream cut short always shows: it ends inside an event, or holds fewer events
    // than the totals in its header.
    let name = stream.file_name().unwrap().to_str().unwrap();
    assert!(err.contains("warning") && err.contains(name), "{err}");
    // Usage errors: exit 2.
    let (_, _, code) = slice(&["from-trace", s(shop())]);
    assert_eq!(code, 2, "-q is required");
    let (_, _, code) = slice(&["from-trace", s(shop()), "-q", "x", "--variant", "Z"]);
    assert_eq!(code, 2);
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            copy_dir(&p, &to.join(e.file_name()));
        } else {
            std::fs::copy(&p, to.join(e.file_name())).unwrap();
        }
    }
}

#[test]
fn changed_source_is_reported_not_printed() {
    let d = scratch();
    let script = d.path().join("app.py");
    std::fs::write(&script, "def greet(name):\n    return 'hi ' + name\n\n\nprint(greet('x'))\n").unwrap();
    let t = d.path().join("t.d");
    trace(d.path(), &t, &[&python(), "app.py"]);
    let (p, _) = slice_ok(&["from-trace", s(&t), "-q", "What does greet return?"]);
    assert!(p.contains("def greet(name):\n    return 'hi ' + name\n```"), "{p}");
    std::fs::write(&script, "def greet(name):\n    return 'hello ' + name\n\n\nprint(greet('x'))\n").unwrap();
    let (p, err) = slice_ok(&["from-trace", s(&t), "-q", "What does greet return?"]);
    assert!(!p.contains("'hello '") && !p.contains("'hi '"), "{p}");
    assert!(p.contains("the file changed since the run"));
    assert!(err.contains("app.py") && err.contains("warning"), "{err}");
}

#[test]
fn several_traces_in_one_prompt() {
    let d = scratch();
    std::fs::write(d.path().join("a.py"), "def alpha():\n    return 1\n\n\nalpha()\n").unwrap();
    std::fs::write(d.path().join("b.py"), "def beta():\n    return 2\n\n\nbeta()\n").unwrap();
    trace(d.path(), &d.path().join("a.d"), &[&python(), "a.py"]);
    trace(d.path(), &d.path().join("b.d"), &[&python(), "b.py"]);
    let (p, _) = slice_ok(&["from-trace", s(&d.path().join("a.d")), s(&d.path().join("b.d")), "-q", "Compare"]);
    let idx = |n: &str| p.find(n).unwrap_or_else(|| panic!("{n} missing:\n{p}"));
    assert!(idx("# Question") < idx("## Run 1:"));
    assert!(idx("## Run 1:") < idx("#### `alpha`") && idx("#### `alpha`") < idx("## Run 2:") && idx("## Run 2:") < idx("#### `beta`"));
    let (ca, _) = slice_ok(&["from-trace", s(&d.path().join("a.d")), s(&d.path().join("b.d")), "-q", "Compare", "--variant", "CA"]);
    assert_eq!(ca.matches("## Source code").count(), 1);
    assert!(ca.find("#### `alpha`").unwrap() < ca.find("#### `beta`").unwrap());
}

#[test]
fn stats_table() {
    let (out, _) = slice_ok(&["stats", s(shop()), "-q", Q]);
    for row in ["question", "call tree", "sources (each function once)", "prompt full", "prompt A", "prompt C", "prompt CA", "prompt T"] {
        assert!(out.contains(row), "{row} missing:\n{out}");
    }
    assert!(out.contains("every file the run executed, whole"));
    let full: usize = out.lines().find(|l| l.starts_with("prompt full")).unwrap().split_whitespace().last().unwrap().parse().unwrap();
    let whole: usize = out.lines().find(|l| l.starts_with("every file")).unwrap().split_whitespace().last().unwrap().parse().unwrap();
    assert!(full > 0 && whole > full, "{out}");
    // The shared `-o FILE` writes the same table into a file.
    let d = scratch();
    let file = d.path().join("stats.txt");
    let (to_stdout, _) = slice_ok(&["stats", s(shop()), "-q", Q, "-o", s(&file)]);
    assert_eq!(to_stdout, "");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), out);
}

/// `slice ... | head -1`: every subcommand that prints its result on standard output ends
/// quietly with status 0 when the reader closed the pipe, like `cat`, not with a panic or an
/// error message.
#[test]
fn results_into_a_closed_pipe_end_quietly() {
    let t = s(shop());
    let cases: [&[&str]; 10] = [
        &["from-trace", t, "-q", Q],
        &["stats", t, "-q", Q],
        &["tree", t],
        &["folded", t],
        &["graph", t],
        &["export", t, "--format", "speedscope"],
        &["flamegraph", t, "-o", "-"],
        &["diff", t, t],
        &["diff", t, t, "--format", "prompt", "-q", Q],
        &["tokens", "Cargo.toml"],
    ];
    for args in cases {
        // The read end is closed before `slice` starts: its first write fails with EPIPE.
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let o =
            Command::new(bin("slice")).current_dir(root()).args(args).stdout(writer).stderr(std::process::Stdio::piped()).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "slice {args:?}: {err}");
        assert!(!err.contains("panicked") && !err.contains("error"), "slice {args:?}: {err}");
    }
}

/// rich-cli from PyPI (the third-party CLI of the method's paper), in the venv that
/// tests/python_trace.rs also uses.
#[test]
fn rich_cli_prompt() {
    let rich = rich_cli();
    let d = scratch();
    std::fs::write(d.path().join("data.csv"), "name,qty,price\napple,3,1.20\npear,5,0.80\nplum,7,2.10\n").unwrap();
    let t = d.path().join("rich.d");
    let mut c = cmd("trace");
    // With line data (`--lines`): code that did not run can be elided.
    c.current_dir(d.path())
        .env("COLUMNS", "60")
        .env("TERM", "dumb")
        .args(["run", "--lines", "-o"])
        .arg(&t)
        .arg("--")
        .arg(&rich)
        .arg("data.csv");
    run_ok(&mut c);
    let q = "Which function draws the table borders when I run rich data.csv?";
    let (p, err) = slice_ok(&["from-trace", s(&t), "-q", q]);
    assert!(p.lines().any(|l| l.trim_start() == "Table._render (+132 resumes)" || l.trim_start().starts_with("Table._render ")), "{p}");
    assert!(p.contains("#### `Table._render` (site-packages/rich/table.py:") && p.contains("def _render("));
    assert!(p.contains("render_csv") && p.contains("Box.get_top"));
    assert!(tokens_reported(&err) > 10_000);
    // click only carries control to rich-cli's main: its functions are tree lines on the path,
    // without source, and its parser internals are gone.
    assert!(p.contains("> Framework plumbing collapsed: click only carries control to the program here"), "{p}");
    assert!(p.lines().any(|l| l.trim_start().starts_with("Command.main  (site-packages/click/core.py:")), "{p}");
    assert!(!p.contains("#### `Command.main`") && !p.contains("click/parser.py"), "{p}");
    let (whole, _) = slice_ok(&["from-trace", s(&t), "-q", q, "--show-plumbing"]);
    assert!(whole.contains("#### `Command.main`") && whole.contains("click/parser.py") && !whole.contains("plumbing collapsed"));
    // A question that names click keeps it whole.
    let (named, _) = slice_ok(&["from-trace", s(&t), "-q", "How does click parse the arguments of rich data.csv?"]);
    assert!(named.contains("#### `Command.main`"), "{named}");
    // rich-cli is itself installed: `--no-site-packages` hides rich and click, not rich_cli.
    let (own, _) = slice_ok(&["from-trace", s(&t), "-q", q, "--no-site-packages"]);
    assert!(own.contains("#### `render_csv` (site-packages/rich_cli/__main__.py:"), "{own}");
    assert!(!own.contains("site-packages/rich/") && !own.contains("site-packages/click/"), "{own}");
    // By default, long docstrings far from the question are cut (rich's Console.is_terminal
    // explains its `Returns:`) and so is code that did not run (with TERM=dumb,
    // `_detect_color_system` returns before its last 17 lines), not in the closest functions;
    // `--docstrings whole --not-run show` shows every function exact.
    let block_of = |p: &str, f: &str| -> String {
        let at = p.find(&format!("#### `{f}` (")).unwrap_or_else(|| panic!("no {f} source:\n{p}"));
        let b = &p[at..];
        b[..b[4..].find("\n#### ").map_or(b.len(), |e| e + 4)].to_string()
    };
    assert!(p.contains("> Docstrings cut: ") && p.contains("`--docstrings whole` shows them whole"), "{p}");
    assert!(p.contains("> Code that did not run: ") && p.contains("`--not-run show` shows them"), "{p}");
    assert!(block_of(&p, "Console.is_terminal").contains("more docstring lines cut]"), "{p}");
    let colors = block_of(&p, "Console._detect_color_system");
    assert!(
        colors.contains("if not self.is_terminal or self.is_dumb_terminal:\n            return None\n        ...  # 17 lines not run\n```"),
        "{colors}"
    );
    let (exact, exact_err) = slice_ok(&["from-trace", s(&t), "-q", q, "--docstrings", "whole", "--not-run", "show"]);
    assert!(
        !exact.contains("more docstring lines cut") && !exact.contains("lines not run") && !exact.contains("Docstrings cut"),
        "{exact}"
    );
    assert!(!exact.contains("Code that did not run"), "{exact}");
    assert!(!block_of(&p, "Table._render").contains("lines not run"), "{p}");
    assert_eq!(block_of(&exact, "Table._render"), block_of(&p, "Table._render"));
    assert!(tokens_reported(&err) < tokens_reported(&exact_err), "{err} / {exact_err}");
    let (p8, err8) = slice_ok(&["from-trace", s(&t), "-q", q, "--budget", "8000"]);
    assert!(tokens_reported(&err8) <= 8000);
    assert!(p8.contains("Table._render"), "the tree keeps its shape");
    assert!(p8.contains("To fit the budget of 8000 tokens"));
    // The function that draws the borders is the most relevant to the question (the rare
    // `border` in its body outweighs `table`, which hundreds of rich functions share): at 8000
    // tokens it keeps its whole source while the rest is stepped down to names.
    let q = "Which function draws the table borders?";
    let (p8, err8) = slice_ok(&["from-trace", s(&t), "-q", q, "--budget", "8000"]);
    assert!(tokens_reported(&err8) <= 8000, "{err8}");
    let at = p8.find("#### `Table._render` (site-packages/rich/table.py:").unwrap_or_else(|| panic!("no Table._render source:\n{p8}"));
    let block = &p8[at..];
    let block = &block[..block[4..].find("\n#### ").map_or(block.len(), |e| e + 4)];
    assert!(block.contains("def _render(") && block.contains("_box.get_top(widths)") && block.contains("border_style"), "{block}");
    assert!(!block.contains("# body elided"), "{block}");
    let line = p8.lines().find(|l| l.trim_start().starts_with("Table._render")).unwrap();
    assert!(!line.contains("[name only]"), "{line}");
    // The tree keeps only the paths to the shown sources, the calls it hides are counted, and
    // the dropped functions are listed on stderr.
    assert!(p8.contains("the call tree shows only its first level and the paths to the functions whose source is shown"), "{p8}");
    assert!(p8.contains("more calls below"), "{p8}");
    // stderr names what was dropped, the most relevant first, at most 40 of them.
    let dropped: usize = err8
        .lines()
        .find_map(|l| l.split_once(", dropped ")?.1.split(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no count of dropped sources: {err8}"));
    assert!(dropped > 40, "{err8}");
    let line = err8.lines().find(|l| l.starts_with("slice: sources dropped")).unwrap_or_else(|| panic!("{err8}"));
    let (head, names) = line.split_once("): ").unwrap_or_else(|| panic!("{line}"));
    assert_eq!(head, format!("slice: sources dropped (the 40 most relevant of {dropped}; `--show-ranking 0` ranks every function"));
    assert_eq!(names.split(", ").count(), 40, "{line}");
    assert!(!names.split(", ").any(|n| n == "Table._render"), "{line}");
    // A tree-only prompt too small for the whole tree is cut, but keeps the path from the root
    // to the most relevant function.
    let (t3, err3) = slice_ok(&["from-trace", s(&t), "-q", q, "--variant", "T", "--budget", "3000"]);
    assert!(tokens_reported(&err3) <= 3000, "{err3}");
    assert!(t3.contains("more calls below") && t3.contains("except the paths to `Table._render`"), "{t3}");
    for f in ["run  (", "Command.main  (", "main  (site-packages/rich_cli/", "Console.print  (", "Table._render  ("] {
        assert!(t3.lines().any(|l| l.trim_start().starts_with(f)), "{f} missing from the path:\n{t3}");
    }
}

/// A dispatcher that re-enters itself for nested children (render -> render_table -> render):
/// what the nested calls reach is in the tree, under the first `render`, with its source.
#[test]
fn a_re_entered_dispatcher_hides_nothing() {
    let d = scratch();
    let t = d.path().join("render.d");
    let app = root().join("examples/python/render_demo.py");
    trace(d.path(), &t, &[&python(), app.to_str().unwrap()]);
    let (p, _) = slice_ok(&["from-trace", s(&t), "-q", "Which function draws the table's borders?"]);
    let file = app.display().to_string();
    // Every function here has its source block, whose heading locates it: the tree names them.
    let want = "  main\n    Paragraph.__init__ ×5\n    Table.__init__\n    Document.__init__\n    render\n      render_document\n        render ×2 ↻ recursive\n      render_paragraph ×5\n      render_table\n        render ×4 ↻ recursive\n        draw_row ×2\n";
    for (f, line) in [
        ("main", 54),
        ("Paragraph.__init__", 11),
        ("Table.__init__", 16),
        ("Document.__init__", 21),
        ("render", 25),
        ("render_document", 34),
        ("render_paragraph", 38),
        ("render_table", 42),
        ("draw_row", 50),
    ] {
        assert!(p.contains(&format!("#### `{f}` ({file}:{line}-")), "{f} at line {line}:\n{p}");
    }
    assert!(p.contains(want), "want:\n{want}\nin:\n{p}");
    for f in ["render_table", "draw_row", "render_paragraph"] {
        assert_eq!(p.matches(&format!("#### `{f}`")).count(), 1, "{f} has its source once:\n{p}");
    }
    assert!(p.contains("def draw_row(cells):\n    return BORDER + BORDER.join("), "{p}");
}

/// Module-level values that a shown function reads come with it, once.
#[test]
fn module_values_are_shown_with_the_function_that_reads_them() {
    let t = shop();
    let (p, _) = slice_ok(&["from-trace", s(t), "-q", Q]);
    let file = root().join("examples/python/shop/pricing.py");
    let block = format!(
        "#### `bundle_price` ({}:6-11)\n\nModule-level values it reads ({}, line 3):\n\n```python\nBUNDLE_DISCOUNT_PERCENT = 10\n```\n\n```python\ndef bundle_price(bundle):",
        file.display(),
        file.display()
    );
    assert!(p.contains(&block), "no values block in:\n{p}");
    assert_eq!(p.matches("BUNDLE_DISCOUNT_PERCENT = 10").count(), 1, "once");
}
