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
