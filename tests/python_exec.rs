//! Code a program runs with `exec` (as execnet runs pytest-xdist's workers: the worker's whole
//! work under an exec'd `<module>`) is the run's feature, not start-up; the methods
//! `dataclasses` generates are the standard library's, hidden with it.

use slice_trace_e2e::{cmd, python, run_ok, scratch};

const APP: &str = r#"from dataclasses import dataclass


@dataclass
class Job:
    name: str

    def __post_init__(self):
        self.name = self.name.strip()


# A launcher like execnet's: the worker's code arrives as text and runs under exec.
REMOTE = """
def serve(jobs):
    for j in jobs:
        handle(j)

def handle(job):
    print("remote", job.name)

serve([Job(" a "), Job("b")])
"""
exec(compile(REMOTE, "<string>", "exec"), {"Job": Job})

# runpy.run_path-style: a real file compiled and exec'd.
with open("local_worker.py") as f:
    exec(compile(f.read(), "local_worker.py", "exec"), {"Job": Job})
"#;

const LOCAL: &str = r#"def work(job):
    return job.name.upper()


print("local", work(Job("c")))
"#;

#[test]
fn exec_d_code_is_kept_and_dataclass_methods_are_hidden() {
    let s = scratch();
    std::fs::write(s.path().join("app.py"), APP).unwrap();
    std::fs::write(s.path().join("local_worker.py"), LOCAL).unwrap();
    let d = s.path().join("t.d");
    let out = run_ok(cmd("trace").current_dir(s.path()).arg("run").arg("-q").arg("-o").arg(&d).arg("--").arg(python()).arg("app.py"));
    assert_eq!(out, "remote a\nremote b\nlocal C\n");

    let tree = run_ok(cmd("slice").args(["tree", "--color", "never"]).arg(&d));
    for f in ["serve", "handle  (<string>:", "Job.__post_init__  (app.py:8)", "work  (local_worker.py:1)"] {
        assert!(tree.contains(f), "{f} missing from the tree:\n{tree}");
    }
    assert!(!tree.contains("__create_fn__"), "dataclasses' generated methods are the standard library's:\n{tree}");

    let prompt = run_ok(cmd("slice").arg("from-trace").arg(&d).args(["-q", "What does work return?"]));
    assert!(prompt.contains("#### `work` (local_worker.py:1-2)\n"), "{prompt}");
    assert!(prompt.contains("    return job.name.upper()\n"), "{prompt}");
    assert!(prompt.contains("#### `Job.__post_init__` (app.py:8-9)\n"), "{prompt}");
}

/// An installed package that compiles a validator from a schema into Python source and runs
/// it with `exec`, as fastjsonschema does (its validators' frames read `File "<string>"`).
const GENVAL: &str = r#"def compile_schema(required):
    lines = ["def validate_order(data):"]
    for key in required:
        lines.append("    if %r not in data:" % key)
        lines.append("        raise ValueError('missing %s')" % key)
    lines.append("    return data")
    ns = {}
    exec(compile("\n".join(lines) + "\n", "<string>", "exec"), ns)
    return ns["validate_order"]
"#;

const GENERATED: &str = r#"import collections
import dataclasses
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "vendor/lib/python3/site-packages"))

import genval

Point = collections.namedtuple("Point", "x y")


@dataclasses.dataclass
class Order:
    item: str
    qty: int

    def __post_init__(self):
        self.item = self.item.strip()


RULES = """
def check_qty(order):
    return order.qty > 0
"""
rules = {}
exec(compile(RULES, "<string>", "exec"), rules)

validate_order = genval.compile_schema(["item", "qty"])


def total(order, at):
    return order.qty * 3 + at.x


def main():
    at = Point(1, 2)
    order = Order(" pen ", 2)
    validate_order({"item": order.item, "qty": order.qty})
    if rules["check_qty"](order):
        print(total(order, at))


main()
"#;

/// The lines of a prompt's call tree from `  main` to the end of its subtree.
fn main_subtree(prompt: &str) -> String {
    let mut out = Vec::new();
    for l in prompt.lines().skip_while(|l| *l != "  main") {
        if !out.is_empty() && !l.starts_with("    ") {
            break;
        }
        out.push(l);
    }
    out.join("\n")
}

/// Code that the standard library compiles from a string and runs (namedtuple's `__new__`,
/// the methods `dataclasses` generates) is the standard library's, whoever calls it: the
/// recorder notes who ran the string (`made_in`). Code that the program or an installed
/// package generates the same way (`File "<string>"`: fastjsonschema's validators) stays.
#[test]
fn code_the_standard_library_generates_is_hidden_with_it_and_code_others_generate_stays() {
    for py in [python(), slice_trace_e2e::pyenv_python(12).expect("CPython 3.12 under $(pyenv root)/versions").display().to_string()] {
        let s = scratch();
        let pkg = s.path().join("vendor/lib/python3/site-packages/genval");
        std::fs::create_dir_all(&pkg).unwrap();
        std::fs::write(pkg.join("__init__.py"), GENVAL).unwrap();
        std::fs::write(s.path().join("app.py"), GENERATED).unwrap();
        let d = s.path().join("t.d");
        let out = run_ok(cmd("trace").current_dir(s.path()).args(["run", "-q", "-o"]).arg(&d).arg("--").arg(&py).arg("app.py"));
        assert_eq!(out, "7\n");
        let prompt = run_ok(cmd("slice").arg("from-trace").arg(&d).args(["-q", "What does total return?"]));
        assert_eq!(
            main_subtree(&prompt),
            "  main\n    Order.__post_init__\n    validate_order  (<string>:1)\n    check_qty  (<string>:2)\n    total",
            "{py}:\n{prompt}"
        );
        // With the standard library shown, namedtuple's `__new__` and the dataclass's `__init__`
        // are there, where they ran.
        let tree = run_ok(cmd("slice").args(["tree", "--color", "never", "--stdlib"]).arg(&d));
        for f in ["<lambda>  (<string>:1)", "__create_fn__.<locals>.__init__  (<string>:"] {
            assert!(tree.contains(f), "{py}: {f} missing with --stdlib:\n{tree}");
        }
        let default = run_ok(cmd("slice").args(["tree", "--color", "never"]).arg(&d));
        assert!(!default.contains("<lambda>") && default.contains("validate_order  (<string>:1)"), "{py}:\n{default}");
    }
}

const PARENT: &str = r#"import os
import subprocess
import sys

# As venv does for ensurepip: the child's environment without PYTHONPATH (and here without
# anything else that is not the program's own).
env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "SLICE_TRACE"))}
env["GREETING"] = "hello"
out = subprocess.run([sys.executable, "child.py"], env=env, stdout=subprocess.PIPE, check=True).stdout
sys.stdout.write("child: " + out.decode())
"#;

const CHILD: &str = r#"import os


def greet():
    return os.environ["GREETING"] + " from the child"


print(greet())
"#;

/// Record `argv` in `dir` (with `GREETING=hello` in the environment) into `dir/out`; returns
/// its stdout after checking that the child's `greet` is in the tree.
fn record_child(dir: &std::path::Path, out: &str, argv: &[&str]) -> String {
    let d = dir.join(out);
    let stdout = run_ok(cmd("trace").current_dir(dir).env("GREETING", "hello").args(["run", "-q", "-o"]).arg(&d).arg("--").args(argv));
    let tree = run_ok(cmd("slice").args(["tree", "--color", "never"]).arg(&d));
    assert!(tree.contains("greet  (child.py:4)"), "{argv:?}: the child's function is in the tree:\n{tree}");
    stdout
}

#[test]
fn a_python_child_started_without_pythonpath_is_recorded() {
    let s = scratch();
    std::fs::write(s.path().join("parent.py"), PARENT).unwrap();
    std::fs::write(s.path().join("child.py"), CHILD).unwrap();
    let out = record_child(s.path(), "t.d", &[&python(), "parent.py"]);
    assert_eq!(out, "child: hello from the child\n");
    let info = run_ok(cmd("trace").arg("info").arg(s.path().join("t.d")));
    assert!(info.contains("processes:  2\n"), "{info}");
}

/// The usual ways to start a program through a system launcher (Debian strips `env`, `sh`,
/// `bash`, `make`): the launcher runs like a shell script and the Python program it starts is
/// recorded.
#[test]
fn a_program_started_through_a_stripped_system_launcher_is_recorded() {
    let s = scratch();
    std::fs::write(s.path().join("child.py"), CHILD).unwrap();
    let py = python();
    let (env_argv, sh, bash) =
        (["env", "GREETING=hello", py.as_str(), "child.py"], format!("{py} child.py"), format!("{py} child.py; true"));
    let launches: [&[&str]; 3] = [&env_argv, &["sh", "-c", &sh], &["bash", "-c", &bash]];
    for (i, argv) in launches.iter().enumerate() {
        assert_eq!(record_child(s.path(), &format!("l{i}.d"), argv), "hello from the child\n", "{argv:?}");
    }
}

/// A Python interpreter started by a patched native program is recorded by the Python shim
/// only: its own C functions are not patched (they would be every call the interpreter makes).
#[test]
fn python_started_by_a_patched_native_program_is_not_patched() {
    let s = scratch();
    std::fs::write(s.path().join("child.py"), CHILD).unwrap();
    let src = s.path().join("launch.c");
    std::fs::write(&src, "#include <unistd.h>\nint main(int c, char **v) { (void)c; execvp(v[1], v + 1); return 127; }\n").unwrap();
    let exe = s.path().join("launch");
    let o = std::process::Command::new("gcc").args(["-O0", "-g", "-o"]).arg(&exe).arg(&src).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let d = s.path().join("t.d");
    assert_eq!(record_child(s.path(), "t.d", &["./launch", &python(), "child.py"]), "hello from the child\n");
    // The interpreter is a Python process, not also a native one with its C functions patched
    // (it wrote 10 GB in two minutes), and system programs on the way (pyenv's `python3` is a
    // bash script) are left alone like system libraries.
    let info = run_ok(cmd("trace").arg("info").arg(&d));
    let native = info.lines().filter(|l| l.starts_with('p') && l.contains(", native ")).count();
    assert_eq!(native, 1, "only ./launch is a native process:\n{info}");
    assert!(info.lines().any(|l| l.starts_with('p') && l.contains(", python CPython ")), "{info}");
    let size: u64 = walk_size(&d);
    assert!(size < 16 << 20, "the trace takes {size} bytes");
}

fn walk_size(p: &std::path::Path) -> u64 {
    std::fs::read_dir(p)
        .unwrap()
        .flatten()
        .map(|e| {
            let m = e.metadata().unwrap();
            if m.is_dir() {
                walk_size(&e.path())
            } else {
                use std::os::unix::fs::MetadataExt;
                m.blocks() * 512
            }
        })
        .sum()
}
