//! End-to-end tests of `trace run` under every CPython the Python shim supports: 3.9 to 3.13
//! from `$(pyenv root)/versions/`, 3.14 and 3.15 (which neither pyenv here nor Debian 12 has)
//! inside a Debian sid root that `.ci/new-pythons` makes. A claimed version whose interpreter
//! is missing fails the test, naming the path it looked for. Also: fork safety, unsupported
//! interpreters, a subprocess of another version.

use serde_json::Value;
use slice_trace_e2e::{bin, cmd, pyenv_python, pyenv_root, python, root, run, run_ok, scratch, texts};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The CPython versions the tests claim (`3.x` minors).
const TESTED: [u32; 5] = [9, 10, 11, 12, 13];

/// The interpreter of CPython 3.`minor` under `$(pyenv root)/versions/3.<minor>.*/bin/`.
/// Panics, naming where it looked, when there is none: a claimed version is never skipped.
fn cpython(minor: u32) -> PathBuf {
    pyenv_python(minor).unwrap_or_else(|| {
        panic!(
            "CPython 3.{minor} is claimed as tested but no interpreter was found: looked for {}/3.{minor}.*/bin/python3.{minor} \
             (install it with `pyenv install 3.{minor}`)",
            pyenv_root().join("versions").display()
        )
    })
}

fn trace_run(out: &Path, args: &[&str]) -> std::process::Output {
    let mut c = cmd("trace");
    c.args(["run", "-q", "-o"]).arg(out).arg("--").args(args);
    run(&mut c)
}

fn info(dir: &Path) -> Value {
    serde_json::from_str(&run_ok(cmd("trace").arg("info").arg("--json").arg(dir))).unwrap()
}

/// The events of `trace dump`, without line events (3.12+ records executed lines by default;
/// tests/python_lines.rs checks them): the calls, resumes, returns and thread names.
fn events(dir: &Path, pid: Option<u64>) -> Vec<Value> {
    let mut c = cmd("trace");
    c.arg("dump");
    if let Some(p) = pid {
        c.arg("--pid").arg(p.to_string());
    }
    run_ok(c.arg(dir)).lines().map(|l| serde_json::from_str::<Value>(l).unwrap()).filter(|e| e["kind"] != "line").collect()
}

/// (name, kind) -> count of the events whose location is in `file`.
fn entry_counts(evs: &[Value], file: &str) -> BTreeMap<(String, String), usize> {
    let mut m = BTreeMap::new();
    for e in evs {
        if e["at"].as_str().is_some_and(|a| a.contains(file)) {
            *m.entry((e["name"].as_str().unwrap().to_string(), e["kind"].as_str().unwrap().to_string())).or_insert(0) += 1;
        }
    }
    m
}

fn assert_balanced(dir: &Path) {
    for p in info(dir)["procs"].as_array().unwrap() {
        for t in p["threads"].as_array().unwrap() {
            assert!(!t["unclosed"].as_bool().unwrap(), "{}: {t}", dir.display());
        }
    }
}

/// `slice folded` stacks of the example's own code, without pids, times and the `<module>`
/// line (3.9 reports a module's first statement line, later versions line 1).
fn own_stacks(dir: &Path) -> Vec<String> {
    let text = run_ok(cmd("slice").args(["folded", "--weight", "calls"]).arg(dir));
    let mut v: Vec<String> = text
        .lines()
        .map(|l| {
            let l = l.rsplit_once(' ').map_or(l, |(s, _)| s);
            let mut s = String::new();
            for (i, frame) in l.split(';').enumerate() {
                if i > 0 {
                    s.push(';');
                }
                let frame = match frame.find(" [pid ") {
                    Some(k) => &frame[..k],
                    None => frame,
                };
                match frame.rsplit_once(':').filter(|_| frame.starts_with("<module> (")) {
                    Some((head, _)) => {
                        s.push_str(head);
                        s.push(')');
                    }
                    None => s.push_str(frame),
                }
            }
            s
        })
        .filter(|l| l.contains("examples/python/") || l.starts_with("stats-"))
        .collect();
    v.sort();
    v
}

#[test]
fn every_supported_cpython_records_the_same_tree_and_prompt() {
    let s = scratch();
    let app = root().join("examples/python/shop_app.py");
    let plain = run(Command::new(python()).arg(&app));
    let mut reference: Option<(u32, Vec<String>)> = None;
    for minor in TESTED {
        let py = cpython(minor);
        let out = s.path().join(format!("shop-3{minor}.d"));
        let o = trace_run(&out, &[py.to_str().unwrap(), app.to_str().unwrap()]);
        assert!(o.status.success(), "3.{minor}: {:?}", texts(&o));
        assert_eq!(o.stdout, plain.stdout, "3.{minor}: the program's output must not change");
        assert!(o.stderr.is_empty(), "3.{minor}: {}", texts(&o).1);
        let i = info(&out);
        assert_eq!(i["processes"], 2, "3.{minor}: the checksum subprocess is recorded too");
        for p in i["procs"].as_array().unwrap() {
            assert!(p["runtime"].as_str().unwrap().starts_with(&format!("CPython 3.{minor}.")), "{p}");
        }
        assert_balanced(&out);
        assert_hook(&out, minor, "auto");

        let stacks = own_stacks(&out);
        for want in [
            // modules and classes, recursion through two functions, a generator's lambda
            "MainThread;<module> (examples/python/shop_app.py);main (examples/python/shop_app.py:53);category_report;item_lines;Bundle.value_cents;bundle_price;part_price;bundle_price",
            "MainThread;<module> (examples/python/shop_app.py);main (examples/python/shop_app.py:53);category_report;item_lines;item_lines.<locals>.<lambda>",
            // the exception that propagates out of parse_row
            "MainThread;<module> (examples/python/shop_app.py);main (examples/python/shop_app.py:53);validate_extra;parse_row;InvalidItem.__init__",
            // threads
            "stats-bundle;CategoryStats.compute;Bundle.value_cents;bundle_price",
            // the subprocess
            "MainThread;<module> (examples/python/checksum.py);main (examples/python/checksum.py:15);fletcher16",
        ] {
            assert!(stacks.iter().any(|l| l == want), "3.{minor}: no stack {want}:\n{}", stacks.join("\n"));
        }
        match &reference {
            None => reference = Some((minor, stacks)),
            Some((m, r)) => assert_eq!(&stacks, r, "3.{minor} and 3.{m} record different trees"),
        }

        // Generators: a call per generator, a resume per later entry.
        let evs = events(&out, None);
        let counts = entry_counts(&evs, "shop/report.py");
        assert_eq!(counts.get(&("item_lines".into(), "call".into())), Some(&3), "3.{minor}: {counts:?}");
        assert_eq!(counts.get(&("item_lines".into(), "resume".into())), Some(&9), "3.{minor}: {counts:?}");

        let tree = run_ok(cmd("slice").arg("tree").arg(&out));
        assert!(tree.contains("bundle_price"), "3.{minor}: {tree}");
        let prompt = run_ok(cmd("slice").args(["from-trace", "-q", "How is a bundle priced?"]).arg(&out));
        assert!(prompt.contains("How is a bundle priced?"), "3.{minor}");
        for src in ["def bundle_price(", "def part_price(", "def item_lines(", "def parse_row("] {
            assert!(prompt.contains(src), "3.{minor}: the prompt lacks {src}:\n{prompt}");
        }
    }
}

/// The hook that recorded each process is the one `--python-hook` asks for: `auto` is
/// `sys.monitoring` from 3.12 and the frame-evaluation hook before (3.11's needs the layout
/// generated from the 3.11 headers at build time: a shim built without them falls back to the
/// profile hook, and this fails).
fn assert_hook(dir: &Path, minor: u32, asked: &str) {
    let want = match (asked, minor) {
        ("profile", _) => "profile",
        (_, m) if m >= 12 => "monitoring",
        _ => "evalframe",
    };
    let meta: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("meta.json")).unwrap()).unwrap();
    assert_eq!(meta["python_hooks"], serde_json::json!([want]), "3.{minor} --python-hook {asked}: meta.json {meta}");
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path().join("proc.json");
        if p.is_file() {
            let proc: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
            assert_eq!(proc["hook"], want, "3.{minor} --python-hook {asked}: {}", p.display());
        }
    }
}

/// Calls and resumes of `examples/python/coroutines.py`'s coroutines and generators.
fn coroutine_entries() -> BTreeMap<(String, String), usize> {
    [
        (("countdown", "call"), 1),
        (("countdown", "resume"), 3),
        (("drive", "call"), 1),
        (("failing", "call"), 1),
        (("failing", "resume"), 1),
        (("fetch", "call"), 3),
        (("fetch", "resume"), 3),
        (("main", "call"), 1),
        (("main", "resume"), 2),
        (("ticker", "call"), 1),
        (("ticker", "resume"), 3),
    ]
    .into_iter()
    .map(|((a, b), n)| ((a.to_string(), b.to_string()), n))
    .collect()
}

#[test]
fn coroutines_and_generators_are_calls_then_resumes_on_every_version() {
    let s = scratch();
    let app = root().join("examples/python/coroutines.py");
    let probe = s.path().join("throw.py");
    // A throw into a generator that never started enters its frame for the first time.
    std::fs::write(&probe, "def g():\n    yield 1\n\na = g()\ntry:\n    a.throw(ValueError)\nexcept ValueError:\n    pass\n").unwrap();
    let want = coroutine_entries();
    // Both hooks of each version: the default (eval hook before 3.12, sys.monitoring after)
    // and the profile hook.
    for (minor, hook) in TESTED.iter().flat_map(|&m| [(m, "auto"), (m, "profile")]) {
        let py = cpython(minor);
        let out = s.path().join(format!("co-3{minor}-{hook}.d"));
        let mut c = cmd("trace");
        c.args(["run", "-q", "--python-hook", hook, "-o"]).arg(&out).args(["--", py.to_str().unwrap(), app.to_str().unwrap()]);
        let o = run(&mut c);
        assert!(o.status.success(), "3.{minor}: {:?}", texts(&o));
        assert_eq!(texts(&o).0, "([2, 4, 6], [0, 1, 2], 'boom')\n(2, -1, [1])\n");
        assert_balanced(&out);
        assert_hook(&out, minor, hook);
        // The coroutines and generators (not the class body, nor 3.9-3.11's list comprehension).
        let got = entry_counts(&events(&out, None), "examples/python/coroutines.py");
        let got: BTreeMap<_, _> = got.into_iter().filter(|((n, _), _)| want.keys().any(|(w, _)| w == n)).collect();
        assert_eq!(got, want, "3.{minor} {hook}");

        let out = s.path().join(format!("throw-3{minor}-{hook}.d"));
        let mut c = cmd("trace");
        c.args(["run", "-q", "--python-hook", hook, "-o"]).arg(&out).args(["--", py.to_str().unwrap(), probe.to_str().unwrap()]);
        let o = run(&mut c);
        assert!(o.status.success(), "3.{minor}: {:?}", texts(&o));
        assert_balanced(&out);
        let got = entry_counts(&events(&out, None), "throw.py");
        assert_eq!(got.get(&("g".into(), "call".into())), Some(&1), "3.{minor} {hook}: {got:?}");
        assert_eq!(got.get(&("g".into(), "resume".into())), None, "3.{minor} {hook}: {got:?}");
    }
}

/// One recording of `forkpool.py`: the parent's pwork and after calls, and a check that no
/// process's function table repeats an id and every child was forked from the parent.
fn fork_run(py: &str, out: &Path) -> (usize, usize) {
    let o = trace_run(out, &[py, root().join("examples/python/forkpool.py").to_str().unwrap()]);
    assert!(o.status.success(), "{py}: {:?}", texts(&o));
    assert!(!texts(&o).1.contains("trace:"), "{py}: {}", texts(&o).1);
    let i = info(out);
    let procs = i["procs"].as_array().unwrap();
    let parents: Vec<&Value> = procs.iter().filter(|p| p["forked_from"].is_null()).collect();
    assert_eq!(parents.len(), 1, "{py}: {procs:?}");
    let parent = parents[0]["pid"].as_u64().unwrap();
    assert_eq!(procs.len(), 6, "{py}: the parent, 2 pool workers and 3 forks");
    assert!(procs.iter().all(|p| p["pid"].as_u64() == Some(parent) || p["forked_from"].as_u64() == Some(parent)));
    let mut seen = HashSet::new();
    for line in run_ok(cmd("trace").arg("dump").arg("--funcs").arg(out)).lines() {
        let f: Value = serde_json::from_str(line).unwrap();
        assert!(seen.insert((f["pid"].as_u64(), f["id"].as_u64())), "{py}: id repeated in a function table: {f}");
    }
    let evs = events(out, Some(parent));
    let calls = |name: &str| evs.iter().filter(|e| e["kind"] == "call" && e["name"] == name).count();
    (calls("pwork"), calls("after"))
}

#[test]
fn fork_pool_and_fork_loop_keep_the_parent_trace_whole() {
    let s = scratch();
    let out = s.path().join("fork.d");
    // 20 runs: 4 under each tested version.
    let mut runs: Vec<String> = Vec::new();
    for minor in TESTED {
        runs.extend(std::iter::repeat_n(cpython(minor).to_string_lossy().into_owned(), 4));
    }
    let mut results = HashMap::new();
    for py in &runs {
        *results.entry(fork_run(py, &out)).or_insert(0) += 1;
    }
    assert_eq!(results, HashMap::from([((6000, 1), runs.len())]), "(pwork, after) calls of the parent per run");
}

fn fake_interpreter(dir: &Path, name: &str, answer: &str) -> PathBuf {
    let p = dir.join(name);
    let ran = dir.join(format!("{name}.ran"));
    std::fs::write(&p, format!("#!/bin/sh\nif [ \"$1\" = -S ]; then echo '{answer}'; exit 0; fi\ntouch '{}'\n", ran.display())).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

#[test]
fn unsupported_interpreters_are_refused_before_running() {
    let s = scratch();
    let script = s.path().join("app.py");
    std::fs::write(&script, "print('hi')\n").unwrap();
    for (name, answer, why) in [
        ("python3.8", "cpython 3 8 0", "CPython 3.8 is not supported"),
        ("python3.16", "cpython 3 16 0", "CPython 3.16 is not supported"),
        ("pypy3", "pypy 3 10 0", "pypy 3.10 is not CPython"),
        ("python3.13t", "cpython 3 13 1", "CPython 3.13 is a free-threaded build"),
    ] {
        let fake = fake_interpreter(s.path(), name, answer);
        let out = s.path().join(format!("{name}.d"));
        let o = trace_run(&out, &[fake.to_str().unwrap(), script.to_str().unwrap()]);
        let err = texts(&o).1;
        assert_eq!(o.status.code(), Some(126), "{name}: {err}");
        assert!(err.contains(why) && err.contains("(supported: CPython 3.9 to 3.15); it was not run"), "{name}: {err}");
        assert!(!s.path().join(format!("{name}.ran")).exists(), "{name} was run");
        assert!(!out.exists(), "{name}: no trace directory for a refused target");
    }
    // A pyenv shim (a script that runs `pyenv exec`) is followed to the version pyenv would
    // choose, without running pyenv: here PYENV_VERSION names an old one.
    let root = s.path().join("pyenv");
    std::fs::create_dir_all(root.join("shims")).unwrap();
    std::fs::create_dir_all(root.join("versions/3.8.99/bin")).unwrap();
    let shim = root.join("shims/python3");
    std::fs::write(
        &shim,
        format!(
            "#!/bin/sh\ntouch '{}'\nexec \"{}/libexec/pyenv\" exec python3 \"$@\"\n",
            s.path().join("shim.ran").display(),
            root.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&shim, std::fs::Permissions::from_mode(0o755)).unwrap();
    fake_interpreter(&root.join("versions/3.8.99/bin"), "python3", "cpython 3 8 99");
    let mut c = cmd("trace");
    c.env("PYENV_VERSION", "3.8.99").args(["run", "-q", "-o"]).arg(s.path().join("shim.d")).arg("--").arg(&shim).arg(&script);
    let o = run(&mut c);
    let err = texts(&o).1;
    assert_eq!(o.status.code(), Some(126), "{err}");
    assert!(err.contains("CPython 3.8 is not supported"), "{err}");
    assert!(!s.path().join("shim.ran").exists(), "the pyenv shim was run");
}

#[test]
fn a_subprocess_of_another_version_is_recorded_by_its_own_runtime() {
    let s = scratch();
    let (outer, inner) = (cpython(11), cpython(13));
    let child = s.path().join("child.py");
    std::fs::write(&child, "def inner_work():\n    return 7\n\nprint(inner_work())\n").unwrap();
    let parent = s.path().join("parent.py");
    std::fs::write(
        &parent,
        format!(
            "import subprocess\n\ndef outer_work():\n    return subprocess.run([{:?}, {:?}], check=True)\n\nouter_work()\n",
            inner.to_str().unwrap(),
            child.to_str().unwrap()
        ),
    )
    .unwrap();
    let out = s.path().join("two.d");
    let o = trace_run(&out, &[outer.to_str().unwrap(), parent.to_str().unwrap()]);
    assert!(o.status.success(), "{:?}", texts(&o));
    assert_eq!(texts(&o).0, "7\n");
    let i = info(&out);
    let runtimes: Vec<&str> = i["procs"].as_array().unwrap().iter().map(|p| p["runtime"].as_str().unwrap()).collect();
    assert_eq!(runtimes.len(), 2, "{runtimes:?}");
    assert!(runtimes[0].starts_with("CPython 3.11.") && runtimes[1].starts_with("CPython 3.13."), "{runtimes:?}");
    let evs = events(&out, None);
    assert!(evs.iter().any(|e| e["name"] == "outer_work") && evs.iter().any(|e| e["name"] == "inner_work"));
}

#[test]
fn c_calls_are_recorded_through_sys_monitoring() {
    let s = scratch();
    let app = s.path().join("c.py");
    std::fs::write(&app, "def work():\n    return len(','.join(['a', 'b'])) + sum([1])\n\nwork()\n").unwrap();
    for minor in [12, 13] {
        let out = s.path().join(format!("c3{minor}.d"));
        let mut c = cmd("trace");
        c.args(["run", "-q", "--c-calls", "-o"]).arg(&out).args(["--", cpython(minor).to_str().unwrap(), app.to_str().unwrap()]);
        run_ok(&mut c);
        assert_balanced(&out);
        let evs = events(&out, None);
        let start = evs.iter().position(|e| e["kind"] == "call" && e["name"] == "work").expect("work recorded");
        let depth = evs[start]["depth"].as_u64().unwrap();
        let inside: Vec<&str> = evs[start + 1..]
            .iter()
            .take_while(|e| e["depth"].as_u64().is_some_and(|d| d > depth))
            .filter(|e| e["kind"] == "call" && e["depth"].as_u64() == Some(depth + 1))
            .map(|e| e["name"].as_str().unwrap())
            .collect();
        assert_eq!(inside, ["str.join", "len", "sum"], "3.{minor}: the builtins work calls, in order");
    }
}

/// Older CPythons under pyenv (2.7, 3.6-3.8), when installed: started by a recorded program,
/// each prints one warning naming it and runs unrecorded.
#[test]
fn an_unsupported_subprocess_warns_once_and_runs_unrecorded() {
    let versions = pyenv_root().join("versions");
    let mut olds: Vec<PathBuf> = std::fs::read_dir(&versions)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            let mm: Vec<&str> = n.split('.').take(2).collect();
            let exe = e.path().join(format!("bin/python{}", mm.join(".")));
            (matches!(mm.as_slice(), ["2", "7"] | ["3", "6" | "7" | "8"]) && exe.is_file()).then_some(exe)
        })
        .collect();
    olds.sort();
    if olds.is_empty() {
        slice_trace_e2e::missing(
            "old-pythons",
            &format!("no CPython 2.7 or 3.6-3.8 under {}: nothing to check the refusal with", versions.display()),
        );
    }
    let s = scratch();
    for old in olds {
        let name = old.file_name().unwrap().to_string_lossy().into_owned();
        let parent = s.path().join("parent.py");
        std::fs::write(
            &parent,
            format!("import subprocess\nsubprocess.run([{:?}, '-c', 'print(123)'], check=True)\n", old.to_str().unwrap()),
        )
        .unwrap();
        let out = s.path().join(format!("{name}.d"));
        let o = trace_run(&out, &[&python(), parent.to_str().unwrap()]);
        let (stdout, stderr) = texts(&o);
        assert!(o.status.success(), "{name}: {stderr}");
        assert_eq!(stdout, "123\n", "{name}: the old interpreter still runs");
        let warnings: Vec<&str> = stderr.lines().filter(|l| l.starts_with("trace:")).collect();
        assert_eq!(warnings.len(), 1, "{name}: {stderr}");
        assert!(
            warnings[0].contains(&format!("{} (", old.display()))
                && warnings[0].contains("is not supported (supported: CPython 3.9 to 3.15); running it without recording"),
            "{name}: {stderr}"
        );
        assert_eq!(info(&out)["processes"], 1, "{name}: only the parent is recorded");
    }
}

/// Another tool holding our `sys.monitoring` tool id before the recorder starts (a `.pth` file
/// of the user site runs before `sitecustomize`): one warning naming it, and the same calls
/// and resumes recorded through the profile hook.
#[test]
fn a_taken_monitoring_tool_id_falls_back_to_the_profile_hook() {
    let s = scratch();
    let site = s.path().join("userbase/lib/python3.13/site-packages");
    std::fs::create_dir_all(&site).unwrap();
    std::fs::write(site.join("claim.pth"), "import sys; sys.monitoring.use_tool_id(3, 'other-tool')\n").unwrap();
    let out = s.path().join("taken.d");
    let mut c = cmd("trace");
    c.env("PYTHONUSERBASE", s.path().join("userbase")).args(["run", "-q", "-o"]).arg(&out).args([
        "--",
        cpython(13).to_str().unwrap(),
        root().join("examples/python/coroutines.py").to_str().unwrap(),
    ]);
    let o = run(&mut c);
    let (stdout, stderr) = texts(&o);
    assert!(o.status.success(), "{stderr}");
    assert_eq!(stdout, "([2, 4, 6], [0, 1, 2], 'boom')\n(2, -1, [1])\n");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("sys.monitoring tool id 3 is held by other-tool") && stderr.contains("through the profile hook"), "{stderr}");
    assert_balanced(&out);
    let got = entry_counts(&events(&out, None), "examples/python/coroutines.py");
    assert_eq!(got.get(&("fetch".into(), "call".into())), Some(&3), "{got:?}");
    assert_eq!(got.get(&("fetch".into(), "resume".into())), Some(&3), "{got:?}");
}

/// CPython minors tested inside the Debian sid root ([`newer_root`]).
const NEWER: [u32; 2] = [14, 15];

/// Where `.ci/new-pythons` makes the Debian sid root by default.
const NEWER_ROOT: &str = "/opt/slice-trace/sid";

/// The Debian sid root holding `python3.14` and `python3.15`: `SLICE_TRACE_NEW_PYTHONS` (then
/// it must hold them: `.ci/run` sets it once `.ci/new-pythons` made the root), else
/// [`NEWER_ROOT`] if it holds them; otherwise the test fails, unless `SLICE_TEST_OPT_OUT` lists `new-pythons` (`None`).
fn newer_root() -> Option<PathBuf> {
    let given = std::env::var_os("SLICE_TRACE_NEW_PYTHONS").filter(|v| !v.is_empty()).map(PathBuf::from);
    let root = given.clone().unwrap_or_else(|| PathBuf::from(NEWER_ROOT));
    let missing: Vec<PathBuf> = NEWER.iter().map(|m| root.join(format!("usr/bin/python3.{m}"))).filter(|p| !p.is_file()).collect();
    match (missing.is_empty(), given.is_some()) {
        (true, _) => Some(root),
        (false, true) => panic!("SLICE_TRACE_NEW_PYTHONS={}: no {missing:?}; make the root with `.ci/new-pythons {0}`", root.display()),
        (false, false) => {
            slice_trace_e2e::missing(
                "new-pythons",
                &format!("no Debian sid root with CPython 3.14 and 3.15 at {NEWER_ROOT} (make it with `.ci/new-pythons`, as root)"),
            );
            None
        }
    }
}

/// A process run inside the sid root `nr` (`chroot`, as root), from the workspace root.
fn in_root(nr: &Path, args: &[&str]) -> std::process::Output {
    let repo = root();
    let mut c = Command::new("chroot");
    c.arg(nr).args(["/bin/sh", "-c", "cd \"$0\" && exec \"$@\""]).arg(&repo).args(args);
    c.env_clear().env("HOME", "/root").env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin").env("LANG", "C.UTF-8");
    run(&mut c)
}

/// Copy `path` (under the workspace or the target directory) to the same absolute path inside
/// `nr`, so that traces recorded inside name the files the tests read outside.
fn copy_into(nr: &Path, path: &Path) {
    let dest = nr.join(path.strip_prefix("/").unwrap());
    std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
    let o = run(Command::new("cp").arg("-a").arg(path).arg(&dest));
    assert!(o.status.success(), "cp {} {}: {:?}", path.display(), dest.display(), texts(&o));
}

#[test]
fn cpython_3_14_and_3_15_record_the_same_tree_calls_and_resumes() {
    let Some(nr) = newer_root() else { return };
    // What the root sees of the workspace: `trace` (its shims are embedded) and the examples.
    let inside_repo = nr.join(root().strip_prefix("/").unwrap());
    if inside_repo.exists() {
        std::fs::remove_dir_all(&inside_repo).unwrap();
    }
    copy_into(&nr, &bin("trace"));
    copy_into(&nr, &root().join("examples/python"));
    let scratch_rel = format!("tmp/slice-e2e-newer-{}", std::process::id());
    let (inside, outside) = (Path::new("/").join(&scratch_rel), nr.join(&scratch_rel));
    std::fs::create_dir_all(&outside).unwrap();
    // The copies in the root are removed however the test ends (a failed assertion too), so
    // the persistent root does not collect a workspace copy and traces per run.
    let _cleanup = RemoveOnDrop(vec![outside.clone(), inside_repo.clone()]);
    let trace = bin("trace");
    let trace = trace.to_str().unwrap();

    // The reference: the same program under 3.11, outside.
    let s = scratch();
    let app = root().join("examples/python/shop_app.py");
    let reference = s.path().join("shop-311.d");
    let o = trace_run(&reference, &[cpython(11).to_str().unwrap(), app.to_str().unwrap()]);
    assert!(o.status.success(), "{:?}", texts(&o));
    let want_stacks = own_stacks(&reference);
    let app = app.to_str().unwrap();
    let coroutines = root().join("examples/python/coroutines.py");
    let coroutines = coroutines.to_str().unwrap();

    for minor in NEWER {
        let py = format!("python3.{minor}");
        let plain = in_root(&nr, &[&py, app]);
        assert!(plain.status.success(), "3.{minor} without trace: {:?}", texts(&plain));
        let name = format!("shop-3{minor}.d");
        let o = in_root(&nr, &[trace, "run", "-q", "-o", inside.join(&name).to_str().unwrap(), "--", &py, app]);
        assert!(o.status.success(), "3.{minor}: {:?}", texts(&o));
        assert_eq!(o.stdout, plain.stdout, "3.{minor}: the program's output must not change");
        assert!(o.stderr.is_empty(), "3.{minor}: {}", texts(&o).1);
        let out = outside.join(&name);
        let i = info(&out);
        assert_eq!(i["processes"], 2, "3.{minor}: the checksum subprocess is recorded too");
        for p in i["procs"].as_array().unwrap() {
            assert!(p["runtime"].as_str().unwrap().starts_with(&format!("CPython 3.{minor}.")), "{p}");
        }
        assert_balanced(&out);
        assert_eq!(own_stacks(&out), want_stacks, "3.{minor} and 3.11 record different trees");
        let prompt = run_ok(cmd("slice").args(["from-trace", "-q", "How is a bundle priced?"]).arg(&out));
        for src in ["def bundle_price(", "def part_price(", "def item_lines(", "def parse_row("] {
            assert!(prompt.contains(src), "3.{minor}: the prompt lacks {src}:\n{prompt}");
        }

        // Calls and resumes, through sys.monitoring and through the profile hook.
        for hook in ["auto", "profile"] {
            let name = format!("co-3{minor}-{hook}.d");
            let o = in_root(
                &nr,
                &[trace, "run", "-q", "--python-hook", hook, "-o", inside.join(&name).to_str().unwrap(), "--", &py, coroutines],
            );
            assert!(o.status.success(), "3.{minor} {hook}: {:?}", texts(&o));
            assert_eq!(texts(&o).0, "([2, 4, 6], [0, 1, 2], 'boom')\n(2, -1, [1])\n", "3.{minor} {hook}");
            let out = outside.join(&name);
            assert_balanced(&out);
            let want = coroutine_entries();
            let got = entry_counts(&events(&out, None), "examples/python/coroutines.py");
            let got: BTreeMap<_, _> = got.into_iter().filter(|((n, _), _)| want.keys().any(|(w, _)| w == n)).collect();
            assert_eq!(got, want, "3.{minor} {hook}");
        }
    }
}

/// Directories removed when it is dropped (on success and on a panic alike).
struct RemoveOnDrop(Vec<PathBuf>);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        for d in &self.0 {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}
