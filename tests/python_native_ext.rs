//! End-to-end: `trace run --native-ext` records the native functions of a Python program's
//! compiled extension modules, in the same tree as its Python functions. The test builds a
//! small C extension module (`examples/python/ext/demo_ext.c`, gcc against the CPython 3.12
//! headers of `$(pyenv root)`): `report` (Python) calls `demo_ext.weighted_sum` (C), which
//! calls its static helper `item_weight`; the prompt shows the three, nested, with their source.

use slice_trace_e2e::{cmd, missing, pyenv_python, root, run, scratch, source_block, texts};
use std::path::{Path, PathBuf};

/// Build the example extension module into `dir` with its script beside it; returns the
/// interpreter it was built for.
fn build_extension(dir: &Path) -> Option<PathBuf> {
    let Some(py) = pyenv_python(12) else {
        missing("python3.12", "CPython 3.12 under $(pyenv root)/versions/3.12.*, with its headers, builds the test's extension module");
        return None;
    };
    let prefix = py.parent().and_then(Path::parent).unwrap_or(Path::new("/"));
    let ex = root().join("examples/python/ext");
    for f in ["demo_ext.c", "use_ext.py"] {
        std::fs::copy(ex.join(f), dir.join(f)).unwrap();
    }
    let o = run(std::process::Command::new("gcc")
        .current_dir(dir)
        .args(["-g", "-O0", "-shared", "-fPIC", "-I"])
        .arg(prefix.join("include/python3.12"))
        .args(["demo_ext.c", "-o", "demo_ext.cpython-312-x86_64-linux-gnu.so"]));
    assert!(o.status.success(), "gcc: {:?}", texts(&o));
    Some(py)
}

fn record(dir: &Path, py: &Path, trace: &str, flags: &[&str]) -> String {
    let o = run(cmd("trace").current_dir(dir).args(["run", "-q", "-o", trace]).args(flags).arg("--").arg(py).args([
        "use_ext.py",
        "4",
        "5",
        "6",
    ]));
    let (out, err) = texts(&o);
    assert!(o.status.success(), "{err}");
    assert_eq!(out, "weighted sum: 32\n", "the program's own output, untouched");
    let o = run(cmd("slice").current_dir(dir).args(["from-trace", trace, "-q", "How is the weighted sum computed?"]));
    let (prompt, err) = texts(&o);
    assert!(o.status.success(), "{err}");
    prompt
}

#[test]
fn an_extension_modules_functions_are_in_the_tree_under_their_python_caller_with_source() {
    let d = scratch();
    let Some(py) = build_extension(d.path()) else { return };
    let prompt = record(d.path(), &py, "ext.d", &["--native-ext"]);
    let tree = &prompt[prompt.find("```text\n").unwrap()..];
    let tree = &tree[..tree[8..].find("```").unwrap() + 8];
    let lines: Vec<&str> = tree.lines().collect();
    let at = |name: &str| {
        lines
            .iter()
            .position(|l| l.trim_start() == name || l.trim_start().starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no {name} in the tree:\n{tree}"))
    };
    let indent = |i: usize| lines[i].len() - lines[i].trim_start().len();
    let (report, sum, helper) = (at("report"), at("weighted_sum"), at("item_weight ×3"));
    assert!(report < sum && sum < helper, "{tree}");
    assert_eq!(indent(sum), indent(report) + 2, "weighted_sum under report:\n{tree}");
    assert_eq!(indent(helper), indent(sum) + 2, "item_weight under weighted_sum:\n{tree}");
    // The C API's header functions compiled into the module are the standard library's.
    assert!(!tree.contains("Py_TYPE"), "{tree}");
    let sum_src = source_block(&prompt, "weighted_sum").unwrap_or_else(|| panic!("no source of weighted_sum:\n{prompt}"));
    assert!(sum_src.starts_with("static PyObject *weighted_sum(PyObject *self, PyObject *args) {"), "{sum_src}");
    assert!(sum_src.contains("total += item_weight((long)i, v);"), "{sum_src}");
    let helper_src = source_block(&prompt, "item_weight").unwrap_or_else(|| panic!("no source of item_weight:\n{prompt}"));
    assert_eq!(helper_src, "static long item_weight(long i, long value) {\n    return (i % 3 + 1) * value;\n}");
    assert!(prompt.contains("#### `report` (use_ext.py:12-15)"), "{prompt}");

    // One process: the native shim's directory was merged into the Python process's, and
    // only the extension module was patched (not the interpreter, libc or lib-dynload).
    let procs: Vec<PathBuf> = std::fs::read_dir(d.path().join("ext.d"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with('p')))
        .collect();
    assert_eq!(procs.len(), 1, "{procs:?}");
    let patch: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(procs[0].join("patch.json")).unwrap()).unwrap();
    let patched: Vec<&str> = patch["objects"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["patched"].as_u64().unwrap_or(0) > 0)
        .map(|o| o["path"].as_str().unwrap())
        .collect();
    assert!(patched.len() == 1 && patched[0].ends_with("/demo_ext.cpython-312-x86_64-linux-gnu.so"), "{patched:?}");
}

#[test]
fn without_the_flag_the_extension_is_not_in_the_tree() {
    let d = scratch();
    let Some(py) = build_extension(d.path()) else { return };
    let prompt = record(d.path(), &py, "plain.d", &[]);
    assert!(prompt.contains("    report\n"), "{prompt}");
    assert!(!prompt.contains("weighted_sum\n") && !prompt.contains("item_weight"), "{prompt}");
}

extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, sig: i32) -> i32;
}

/// `slice tree`'s lines of a trace (`TOTAL SELF CALLS FUNCTION` columns, the tree drawn in
/// the last), and where a function is in it.
struct Tree {
    text: String,
}

impl Tree {
    fn of(dir: &Path, trace: &str) -> Tree {
        let o = run(cmd("slice").current_dir(dir).args(["tree", "--color", "never", trace]));
        let (text, err) = texts(&o);
        assert!(o.status.success(), "{err}");
        Tree { text }
    }

    /// Each line of the first thread's tree: (calls column, depth in characters, name).
    fn rows(&self) -> Vec<(String, usize, String)> {
        let mut lines = self.text.lines().skip_while(|l| !l.trim_end().ends_with("FUNCTION"));
        let Some(header) = lines.next() else {
            panic!(
                "no tree:
{}",
                self.text
            )
        };
        let col = header.chars().count() - "FUNCTION".len();
        lines
            .take_while(|l| l.chars().count() > col)
            .map(|l| {
                let head: String = l.chars().take(col).collect();
                let calls = head.split_whitespace().last().unwrap_or("").to_string();
                let f: String = l.chars().skip(col).collect();
                let name = f.trim_start_matches(|c: char| c.is_whitespace() || "│├└─".contains(c));
                let depth = f.chars().count() - name.chars().count();
                (calls, depth, name.split("  (").next().unwrap_or(name).to_string())
            })
            .collect()
    }

    /// (row, depth, calls) of the first row of `name`.
    fn at(&self, name: &str) -> (usize, usize, String) {
        self.rows()
            .into_iter()
            .enumerate()
            .find(|(_, r)| r.2 == name)
            .map(|(i, r)| (i, r.1, r.0))
            .unwrap_or_else(|| panic!("no {name} in the tree:\n{}", self.text))
    }

    /// The subtree of the first row of `name`, a line per row: two spaces per level below it,
    /// the name and the calls column.
    fn subtree(&self, name: &str) -> Vec<String> {
        let rows = self.rows();
        let (a, da, _) = self.at(name);
        std::iter::once(&rows[a])
            .chain(rows[a + 1..].iter().take_while(|r| r.1 > da))
            .map(|r| format!("{}{} {}", "  ".repeat((r.1 - da) / 3), r.2, r.0))
            .collect()
    }

    /// The calls of `callee` right under `caller` (its first row there), if any.
    fn under(&self, callee: &str, caller: &str) -> Option<String> {
        let rows = self.rows();
        let (a, da, _) = self.at(caller);
        rows[a + 1..].iter().take_while(|r| r.1 > da).find(|r| r.2 == callee && r.1 == da + 3).map(|r| r.0.clone())
    }
}

/// A C function calling Python back 2,000 times, a C helper call before each: every call of
/// `scale` nests under `apply`, and `finish` (called after `apply` returned) beside it. The
/// Python and native events interleave a microsecond apart, so this holds only if both
/// shims time them on one clock.
#[test]
fn python_callbacks_of_a_c_function_nest_under_it_and_what_follows_does_not() {
    let d = scratch();
    let Some(py) = build_extension(d.path()) else { return };
    std::fs::copy(root().join("examples/python/ext/callback_ext.py"), d.path().join("callback_ext.py")).unwrap();
    let o = run(cmd("trace")
        .current_dir(d.path())
        .args(["run", "-q", "-o", "cb.d", "--native-ext", "--"])
        .arg(&py)
        .args(["callback_ext.py", "100000"]));
    let (out, err) = texts(&o);
    assert!(o.status.success(), "{err}");
    assert_eq!(out, "applied: 99998666671\n", "the program's own output, untouched");
    let tree = Tree::of(d.path(), "cb.d");
    let t = &tree.text;
    assert_eq!(tree.under("apply", "run").as_deref(), Some("×1"), "{t}");
    assert_eq!(tree.under("item_weight", "apply").as_deref(), Some("×100000"), "{t}");
    // Every callback, the last one too: the native shim closes `apply` at the first Python
    // call after it returned (`finish`), not at the native stream's next call (there is none).
    // And each one after `item_weight` returned, also where the returns did not fit in what
    // was left of the native stream's window (100000 rounds fill several).
    assert_eq!(tree.under("scale", "apply").as_deref(), Some("×100000"), "{t}");
    assert_eq!(tree.under("scale", "item_weight"), None, "no callback under the helper that returned before it:\n{t}");
    assert_eq!(tree.under("scale", "run"), None, "no callback beside apply:\n{t}");
    assert_eq!(tree.under("finish", "run").as_deref(), Some("×1"), "finish beside apply, not under it:\n{t}");
}

/// The shapes of callbacks (`examples/python/ext/nested_ext.py`): a C function that calls two
/// callbacks and returns, callbacks that call C that calls Python again, a callback that
/// raises. Each callback sits under the C function that called it, and what Python calls after
/// a C function returned (`after`) beside it, whatever the native stream does next.
#[test]
fn every_callback_sits_under_its_c_caller_nested_or_raising_and_what_follows_beside_it() {
    let d = scratch();
    let Some(py) = build_extension(d.path()) else { return };
    std::fs::copy(root().join("examples/python/ext/nested_ext.py"), d.path().join("nested_ext.py")).unwrap();
    let o = run(cmd("trace").current_dir(d.path()).args(["run", "-q", "-o", "n.d", "--native-ext", "--"]).arg(&py).arg("nested_ext.py"));
    let (out, err) = texts(&o);
    assert!(o.status.success(), "{err}");
    assert_eq!(out, "nested: 23\n", "the program's own output, untouched");
    let tree = Tree::of(d.path(), "n.d");
    assert_eq!(
        tree.subtree("main"),
        [
            "main ×1",
            "  both ×1",
            "    first ×1",
            "    second ×1",
            "  after ×1",
            "  apply ×1",
            "    item_weight ×3",
            "    inner ×3",
            "      both ×3",
            "        first ×3",
            "        second ×3",
            "  handled ×1",
            "    both ×1",
            "      fails ×1",
            "    after ×1",
        ],
        "{}",
        tree.text
    );
}

/// `trace` killed with SIGKILL while the program is inside the extension module (the
/// program dies with it): `trace` never merged the native shim's directory, the reader does,
/// and the tree nests as after a finished run.
#[test]
fn a_killed_trace_is_merged_when_it_is_read() {
    let d = scratch();
    let Some(py) = build_extension(d.path()) else { return };
    std::fs::copy(root().join("examples/python/ext/callback_ext.py"), d.path().join("callback_ext.py")).unwrap();
    let mut child = cmd("trace")
        .current_dir(d.path())
        .args(["run", "-q", "-o", "k.d", "--native-ext", "--"])
        .arg(&py)
        .args(["callback_ext.py", "300", "forever"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    for _ in 0..2 {
        line.clear();
        std::io::BufRead::read_line(&mut out, &mut line).unwrap();
    }
    assert_eq!(line, "ready\n");
    std::thread::sleep(std::time::Duration::from_millis(200));
    // SAFETY: kill(2) has no memory effects.
    unsafe { libc_kill(child.id() as i32, 9) };
    child.wait().unwrap();
    let procs = || -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(d.path().join("k.d"))
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.join("proc.json").is_file())
            .collect();
        v.sort();
        v
    };
    let before = procs();
    assert_eq!(before.len(), 2, "the Python process and the native shim's directory, unmerged: {before:?}");
    // The program dies with `trace` (PR_SET_PDEATHSIG); wait until it is gone and reaped.
    let pid: i32 = before[0].file_name().unwrap().to_string_lossy()[1..].split('.').next().unwrap().parse().unwrap();
    let start = std::time::Instant::now();
    // SAFETY: signal 0 only checks that the process exists.
    while unsafe { libc_kill(pid, 0) } == 0 {
        assert!(start.elapsed() < std::time::Duration::from_secs(20), "the program still runs");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let native_funcs = std::fs::read_to_string(before[1].join("funcs.jsonl")).unwrap_or_default();
    let tree = Tree::of(d.path(), "k.d");
    let t = &tree.text;
    for (callee, caller) in [("apply", "run"), ("item_weight", "apply"), ("scale", "apply"), ("finish", "run")] {
        if tree.under(callee, caller).is_none() {
            // What to look at if this fails again (seen once in CI, not reproduced since): the
            // native records before the merge, and the merged stream's calls per function.
            let o = run(cmd("trace").current_dir(d.path()).args(["dump", "k.d"]));
            let mut calls = std::collections::BTreeMap::<String, usize>::new();
            for l in String::from_utf8_lossy(&o.stdout).lines().filter(|l| l.contains("\"kind\":\"call\"")) {
                let name = l.split("\"name\":\"").nth(1).and_then(|r| r.split('"').next()).unwrap_or("?");
                *calls.entry(name.to_string()).or_default() += 1;
            }
            let slice_err = texts(&run(cmd("slice").current_dir(d.path()).args(["tree", "--color", "never", "k.d"]))).1;
            panic!("{callee} not under {caller}:\n{t}\nslice's notes:\n{slice_err}\nnative funcs.jsonl before the merge:\n{native_funcs}\ncalls in the merged trace: {calls:?}");
        }
    }
    assert_eq!(tree.under("scale", "item_weight"), None, "{t}");
    assert_eq!(procs().len(), 1, "merged on disk, once: {:?}", procs());
    // Read again: nothing left to merge, the same tree.
    assert_eq!(Tree::of(d.path(), "k.d").text, tree.text);
}

/// A native program that a Python program starts (`subprocess.run(["./fib", ...])`): with
/// `--native-ext` it is recorded by entry patching as a process of its own (its functions,
/// with their source), and the system program it also starts (`/bin/true`) is left alone;
/// without `--native-ext` no native shim is preloaded and only the Python process is recorded.
#[test]
fn a_native_program_a_python_program_starts_is_recorded_with_native_ext() {
    let d = scratch();
    let Some(py) = pyenv_python(12) else {
        missing("python3.12", "CPython 3.12 under $(pyenv root)/versions/3.12.* runs the test's script");
        return;
    };
    let o =
        run(std::process::Command::new("gcc").current_dir(d.path()).args(["-g", "-O0", "-o", "fib"]).arg(root().join("examples/c/fib.c")));
    assert!(o.status.success(), "gcc: {:?}", texts(&o));
    std::fs::write(
        d.path().join("starts.py"),
        "import subprocess\n\ndef main():\n    subprocess.run([\"/bin/true\"], check=True)\n    \
         out = subprocess.run([\"./fib\", \"6\"], capture_output=True, text=True, check=True).stdout\n    \
         print(out.strip())\n\nmain()\n",
    )
    .unwrap();
    let record = |trace: &str, flags: &[&str]| -> Vec<String> {
        let o = run(cmd("trace").current_dir(d.path()).args(["run", "-q", "-o", trace]).args(flags).arg("--").arg(&py).arg("starts.py"));
        let (out, err) = texts(&o);
        assert!(o.status.success(), "{err}");
        assert_eq!(out, "fib(6) = 8, total = 179708\n", "the program's own output, untouched");
        let o = run(cmd("slice").current_dir(d.path()).args(["tree", "--color", "never", trace]));
        let (text, err) = texts(&o);
        assert!(o.status.success(), "{err}");
        text.lines().filter(|l| l.starts_with("── process ")).map(|l| l.split(", thread").next().unwrap_or(l).to_string()).collect()
    };
    let procs = record("ext.d", &["--native-ext"]);
    assert_eq!(procs.len(), 2, "{procs:?}");
    assert!(procs[0].ends_with(" (./fib 6)") || procs[1].ends_with(" (./fib 6)"), "{procs:?}");
    let o = run(cmd("slice").current_dir(d.path()).args(["from-trace", "ext.d", "-q", "How is fib computed?"]));
    let (prompt, err) = texts(&o);
    assert!(o.status.success(), "{err}");
    let fib = source_block(&prompt, "fib").unwrap_or_else(|| panic!("no source of fib:\n{prompt}"));
    assert!(fib.starts_with("static long fib(int n)\n{"), "{fib}");
    assert!(prompt.contains("#### `main` (starts.py:3-6)"), "{prompt}");
    // Without the flag: the Python process only.
    let procs = record("plain.d", &[]);
    assert_eq!(procs.len(), 1, "{procs:?}");
    assert!(procs[0].contains("starts.py"), "{procs:?}");
}
