//! End-to-end tests of `trace run` on Python programs: the real `trace` binary and the real
//! Python shim (built by `cargo build --workspace`), on `examples/python/` and on small
//! probe programs written by the tests. Assertions read the recorded content back through
//! `trace info --json` and `trace dump`.

use serde_json::Value;
use slice_trace_e2e::{cmd, python, rich_cli, root, run, run_ok, scratch, target_dir, texts};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn info(dir: &Path) -> Value {
    let out = run_ok(cmd("trace").arg("info").arg("--json").arg(dir));
    serde_json::from_str(&out).expect("trace info --json prints JSON")
}

/// Every function record of every process (`trace dump --funcs`).
fn funcs(dir: &Path) -> Vec<Value> {
    run_ok(cmd("trace").arg("dump").arg("--funcs").arg(dir)).lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn qualnames(dir: &Path) -> Vec<String> {
    funcs(dir).iter().filter_map(|f| f["qualname"].as_str().map(String::from)).collect()
}

/// All events (`trace dump`).
fn events(dir: &Path) -> Vec<Value> {
    run_ok(cmd("trace").arg("dump").arg(dir)).lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn calls_of(evs: &[Value], name: &str) -> Vec<Value> {
    evs.iter().filter(|e| e["kind"] == "call" && e["name"] == name).cloned().collect()
}

fn write_script(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// Run `trace run -o <out> -- <args>` from `cwd`.
fn trace_run(cwd: &Path, out: &Path, args: &[&str]) -> std::process::Output {
    let mut c = cmd("trace");
    c.current_dir(cwd).arg("run").arg("-o").arg(out).arg("--").args(args);
    run(&mut c)
}

#[test]
fn shop_app_is_recorded_with_modules_threads_generators_exception_and_subprocess() {
    let s = scratch();
    let out = s.path().join("shop.d");
    let app = root().join("examples/python/shop_app.py");
    let plain = run(Command::new(python()).arg(&app));
    let traced = trace_run(&root(), &out, &[&python(), app.to_str().unwrap()]);
    assert!(traced.status.success(), "{:?}", texts(&traced));
    assert_eq!(plain.stdout, traced.stdout, "stdout must be the same with and without the tracer");
    let (stdout, stderr) = texts(&traced);
    assert!(stdout.contains("rejected extra row: line 2"), "{stdout}");
    assert!(stderr.contains("events, 2 processes, 5 threads ->"), "{stderr}");

    let i = info(&out);
    assert_eq!(i["meta"]["exit"]["code"], 0);
    assert_eq!(i["meta"]["target_kind"], "python");
    assert_eq!(i["processes"], 2);
    let procs = i["procs"].as_array().unwrap();
    let main = &procs[0];
    let names: Vec<&str> = main["threads"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names[0], "MainThread");
    for n in ["stats-bundle", "stats-kitchen", "stats-stationery"] {
        assert!(names.contains(&n), "thread {n} missing from {names:?}");
    }
    let child = &procs[1];
    assert!(child["argv"].as_array().unwrap().iter().any(|a| a.as_str().unwrap().ends_with("checksum.py")), "{child}");
    assert!(child["forked_from"].is_null(), "a subprocess is an exec'd process, not a fork");

    let fs = funcs(&out);
    let find = |q: &str| fs.iter().find(|f| f["qualname"] == q).unwrap_or_else(|| panic!("{q} not recorded"));
    let models = find("parse_row");
    assert_eq!(models["file"], root().join("examples/python/shop/models.py").to_str().unwrap());
    assert!(models["last_line"].as_u64().unwrap() > models["first_line"].as_u64().unwrap());
    for q in [
        "load_catalogue",
        "Bundle.value_cents",
        "Inventory.total_value_cents",
        "item_lines",
        "category_report",
        "InvalidItem.__init__",
        "CategoryStats.compute",
        "fletcher16",
    ] {
        find(q);
    }
    assert_eq!(find("fletcher16")["pid"], child["pid"]);

    let evs = events(&out);
    // Recursion: bundle_price runs inside part_price inside bundle_price (the gift box).
    let nested = calls_of(&evs, "bundle_price").iter().map(|e| e["depth"].as_u64().unwrap()).collect::<Vec<_>>();
    assert!(nested.iter().max() > nested.iter().min(), "bundle_price is never recursive: {nested:?}");
    // Generators: the first entry of each of the 3 item_lines generators is a call, every
    // later entry (after a yield) a resume.
    assert_eq!(calls_of(&evs, "item_lines").len(), 3);
    assert_eq!(evs.iter().filter(|e| e["kind"] == "resume" && e["name"] == "item_lines").count(), 9);
    // Threads: CategoryStats.compute ran in the stats threads, not in the main thread.
    let main_tid = main["threads"][0]["tid"].as_u64().unwrap();
    let computes = calls_of(&evs, "CategoryStats.compute");
    assert_eq!(computes.len(), 3);
    assert!(computes.iter().all(|e| e["tid"].as_u64() != Some(main_tid)));
    // Calls and returns balance in every finished stream.
    for t in main["threads"].as_array().unwrap() {
        assert!(!t["unclosed"].as_bool().unwrap(), "{t}");
    }

    let sources: Value = serde_json::from_str(&std::fs::read_to_string(out.join("sources.json")).unwrap()).unwrap();
    let pricing = root().join("examples/python/shop/pricing.py");
    let fp =
        sources["files"].as_array().unwrap().iter().find(|f| f["path"] == pricing.to_str().unwrap()).expect("pricing.py fingerprinted");
    assert_eq!(fp["size"], std::fs::metadata(&pricing).unwrap().len());
    assert_eq!(fp["sha256"].as_str().unwrap().len(), 64);
}

const PROBE: &str = r#"
import sys, os
print("argv", sys.argv)
print("main", __name__, getattr(sys.modules["__main__"], "__file__", None))
print("path0", sys.path[0])
print("rt", [p for p in sys.path if "slice-trace-rt" in p])
print("stdin", sys.stdin.read().strip())
print("usercustom", os.environ.get("USER_SITECUSTOMIZE_RAN"))
sys.stderr.write("to stderr\n")
sys.exit(int(os.environ.get("PROBE_EXIT", "0")))
"#;

fn run_with_stdin(c: &mut Command, input: &str) -> std::process::Output {
    use std::io::Write;
    let mut child = c.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn target_sees_the_same_argv_main_path_stdin_and_exit_status() {
    let s = scratch();
    let probe = write_script(s.path(), "probe.py", PROBE);
    std::fs::create_dir(s.path().join("pkg")).unwrap();
    write_script(&s.path().join("pkg"), "__init__.py", "");
    write_script(&s.path().join("pkg"), "__main__.py", PROBE);
    for (args, exit) in [
        (vec![python(), "probe.py".into(), "a b".into(), "--x".into()], "0"),
        (vec![python(), "-m".into(), "pkg".into(), "arg".into()], "3"),
    ] {
        let mut plain = Command::new(&args[0]);
        plain.current_dir(s.path()).args(&args[1..]).env("PROBE_EXIT", exit);
        let p = run_with_stdin(&mut plain, "hello input");
        let mut traced = Command::new(target_dir().join("trace"));
        traced.current_dir(s.path()).args(["run", "-q", "-o", "t.d", "--"]).args(&args).env("PROBE_EXIT", exit);
        let t = run_with_stdin(&mut traced, "hello input");
        assert_eq!(String::from_utf8_lossy(&p.stdout), String::from_utf8_lossy(&t.stdout), "{args:?}");
        assert_eq!(p.stderr, t.stderr, "-q: stderr untouched");
        assert_eq!(p.status.code(), Some(exit.parse().unwrap()));
        assert_eq!(t.status.code(), p.status.code());
        assert!(String::from_utf8_lossy(&t.stdout).contains("rt []"));
        let i = info(&s.path().join("t.d"));
        assert_eq!(i["meta"]["exit"]["code"].as_i64().unwrap().to_string(), exit);
        assert!(i["events"].as_u64().unwrap() > 0);
        // The recorded content: the command as given, and the module code of the script the
        // interpreter ran (probe.py, or pkg/__main__.py for `-m pkg`) with its real path.
        let argv: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        assert_eq!(i["meta"]["argv"], serde_json::json!(argv));
        assert_eq!(i["meta"]["target_kind"], "python");
        let main_file = if args[1] == "-m" { s.path().join("pkg/__main__.py") } else { probe.clone() };
        let main_file = main_file.canonicalize().unwrap();
        let fs = funcs(&s.path().join("t.d"));
        assert!(
            fs.iter().any(|f| f["qualname"] == "<module>" && f["file"] == main_file.to_str().unwrap()),
            "{args:?}: no <module> of {} recorded: {fs:?}",
            main_file.display()
        );
    }
}

#[test]
fn user_sitecustomize_still_runs_and_the_console_script_shebang_is_followed() {
    let s = scratch();
    let site = s.path().join("usersite");
    std::fs::create_dir(&site).unwrap();
    write_script(&site, "sitecustomize.py", "import os\nos.environ['USER_SITECUSTOMIZE_RAN'] = 'yes'\n");
    // A console script as pip writes them: an absolute interpreter in the shebang.
    let interp = String::from_utf8(run(Command::new(python()).args(["-c", "import sys; print(sys.executable)"])).stdout).unwrap();
    let script = write_script(s.path(), "probe-cli", &format!("#!{}\n{PROBE}", interp.trim()));
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = s.path().join("cli.d");
    let mut c = cmd("trace");
    c.current_dir(s.path()).env("PYTHONPATH", &site).arg("run").arg("-o").arg(&out).arg("--").arg("./probe-cli").arg("x");
    let o = run_with_stdin(&mut c, "in");
    let (stdout, _) = texts(&o);
    assert!(o.status.success(), "{stdout}");
    assert!(stdout.contains("usercustom yes"), "the user's sitecustomize did not run: {stdout}");
    assert!(stdout.contains("argv ['./probe-cli', 'x']"), "{stdout}");
    let i = info(&out);
    assert_eq!(i["meta"]["target_kind"], "python");
    assert!(qualnames(&out).iter().any(|q| q == "<module>"));
}

#[test]
fn exception_exit_and_signal_death_are_passed_through_and_leave_readable_traces() {
    let s = scratch();
    write_script(s.path(), "boom.py", "def fail_here():\n    raise RuntimeError('boom')\n\nfail_here()\n");
    let o = trace_run(s.path(), &s.path().join("boom.d"), &[&python(), "boom.py"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(texts(&o).1.contains("RuntimeError: boom"));
    assert!(qualnames(&s.path().join("boom.d")).contains(&"fail_here".to_string()));

    write_script(
        s.path(),
        "term.py",
        "import os, signal\ndef before_kill():\n    return 1\nbefore_kill()\nos.kill(os.getpid(), signal.SIGTERM)\n",
    );
    let out = s.path().join("term.d");
    let o = trace_run(s.path(), &out, &[&python(), "term.py"]);
    assert_eq!(o.status.signal(), Some(libc_sigterm()), "trace must die by the same signal");
    assert!(texts(&o).1.contains("killed by SIGTERM"), "{}", texts(&o).1);
    let i = info(&out);
    assert_eq!(i["meta"]["exit"]["signal"], libc_sigterm());
    assert!(calls_of(&events(&out), "before_kill").len() == 1);
    assert!(i["procs"][0]["threads"][0]["unclosed"].as_bool().unwrap());

    write_script(s.path(), "exit.py", "import os\ndef last_words():\n    print('bye', flush=True)\nlast_words()\nos._exit(7)\n");
    let out = s.path().join("exit.d");
    let o = trace_run(s.path(), &out, &[&python(), "exit.py"]);
    assert_eq!(o.status.code(), Some(7));
    assert_eq!(calls_of(&events(&out), "last_words").len(), 1);
}

fn libc_sigterm() -> i32 {
    15
}

#[test]
fn sigterm_to_trace_is_forwarded_and_the_trace_stays_readable() {
    let s = scratch();
    write_script(
        s.path(),
        "loop.py",
        "import time, sys\ndef started():\n    print('started', flush=True)\nstarted()\nwhile True:\n    time.sleep(0.01)\n",
    );
    let out = s.path().join("loop.d");
    let mut child = Command::new(target_dir().join("trace"))
        .current_dir(s.path())
        .args(["run", "-o"])
        .arg(&out)
        .args(["--", &python(), "loop.py"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stdout.as_mut().unwrap()), &mut line).unwrap();
    assert_eq!(line.trim(), "started");
    run_ok(Command::new("kill").arg("-TERM").arg(child.id().to_string()));
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.signal(), Some(15));
    let i = info(&out);
    assert_eq!(i["meta"]["exit"]["signal"], 15);
    assert_eq!(calls_of(&events(&out), "started").len(), 1);
}

#[test]
fn fork_and_exec_get_their_own_process_directories() {
    let s = scratch();
    write_script(
        s.path(),
        "forker.py",
        "import os, sys\n\
def child_work():\n    return 42\n\
def parent_work():\n    return 1\n\
pid = os.fork()\n\
if pid == 0:\n    child_work()\n    os._exit(0)\n\
os.waitpid(pid, 0)\nparent_work()\n\
if len(sys.argv) == 1:\n    os.execv(sys.executable, [sys.executable, sys.argv[0], 'again'])\n",
    );
    let out = s.path().join("fork.d");
    let o = trace_run(s.path(), &out, &[&python(), "forker.py"]);
    assert!(o.status.success(), "{:?}", texts(&o));
    let i = info(&out);
    let procs = i["procs"].as_array().unwrap();
    // The first image, its fork, the exec'd image (same pid, p<pid>.1) and its fork.
    assert_eq!(procs.len(), 4, "{i}");
    let dirs: Vec<&str> = procs.iter().map(|p| p["dir"].as_str().unwrap()).collect();
    let first_pid = procs[0]["pid"].as_u64().unwrap();
    assert!(dirs.contains(&format!("p{first_pid}.1").as_str()), "exec'd image missing: {dirs:?}");
    let forks: Vec<&Value> = procs.iter().filter(|p| !p["forked_from"].is_null()).collect();
    assert_eq!(forks.len(), 2);
    let fs = funcs(&out);
    for f in &forks {
        let pid = &f["pid"];
        let names: Vec<&str> = fs.iter().filter(|r| &r["pid"] == pid).filter_map(|r| r["qualname"].as_str()).collect();
        assert!(names.contains(&"child_work") && !names.contains(&"parent_work"), "{names:?}");
        assert_eq!(f["threads"][0]["name"], "MainThread");
    }
}

/// `slice folded --weight calls` of a trace, sorted, with the pids of thread labels (which
/// differ between runs) replaced by `[pid]`.
fn folded_calls(dir: &Path) -> Vec<String> {
    let out = run_ok(cmd("slice").args(["folded", "--weight", "calls"]).arg(dir));
    let mut lines: Vec<String> = out.lines().map(strip_pids).collect();
    lines.sort();
    lines
}

fn strip_pids(line: &str) -> String {
    let mut s = String::new();
    let mut rest = line;
    while let Some(i) = rest.find("[pid ") {
        s.push_str(&rest[..i]);
        let tail = &rest[i + 5..];
        let digits = tail.chars().take_while(|c| c.is_ascii_digit()).count();
        if tail[digits..].starts_with(']') {
            s.push_str("[pid]");
            rest = &tail[digits + 1..];
        } else {
            s.push_str("[pid ");
            rest = tail;
        }
    }
    s.push_str(rest);
    s
}

#[test]
fn auto_and_profile_hooks_record_the_same_call_tree() {
    let s = scratch();
    let app = root().join("examples/python/shop_app.py");
    let mut trees = Vec::new();
    for hook in ["auto", "profile"] {
        let out = s.path().join(format!("{hook}.d"));
        let mut c = cmd("trace");
        c.current_dir(root()).args(["run", "-q", "--python-hook", hook, "-o"]).arg(&out).args(["--", &python(), app.to_str().unwrap()]);
        run_ok(&mut c);
        assert_eq!(info(&out)["meta"]["options"]["python_hook"], hook);
        trees.push(folded_calls(&out));
    }
    // Generators (shop/report.py), threads, a subprocess: the same stacks, the same counts.
    let (auto, profile) = (&trees[0], &trees[1]);
    assert!(auto.iter().any(|l| l.contains("category_report;item_lines ")), "{auto:#?}");
    assert!(auto.len() > 20, "{auto:#?}");
    assert_eq!(auto, profile);
    // The hook that no longer exists is refused by the command line.
    let mut c = cmd("trace");
    c.current_dir(s.path()).args(["run", "--python-hook", "eval", "--", &python(), "-c", "pass"]);
    assert_eq!(run(&mut c).status.code(), Some(2));
}

#[test]
fn c_calls_are_off_by_default_and_recorded_with_the_option() {
    let s = scratch();
    write_script(s.path(), "c.py", "def use_builtins():\n    xs = []\n    xs.append(len('abc'))\n    return sorted(xs)\nuse_builtins()\n");
    let off = s.path().join("off.d");
    assert!(trace_run(s.path(), &off, &[&python(), "c.py"]).status.success());
    assert!(funcs(&off).iter().all(|f| f["kind"] == "python"));
    let on = s.path().join("on.d");
    let mut c = cmd("trace");
    c.current_dir(s.path()).args(["run", "--c-calls", "-o"]).arg(&on).args(["--", &python(), "c.py"]);
    run_ok(&mut c);
    let fs = funcs(&on);
    let builtin = |q: &str| fs.iter().any(|f| f["kind"] == "builtin" && f["qualname"] == q);
    assert!(builtin("len") && builtin("list.append") && builtin("sorted"), "{fs:?}");
    assert_eq!(info(&on)["meta"]["options"]["c_calls"], true);
}

#[test]
fn bad_input_gives_a_clear_message_and_a_non_zero_exit() {
    let s = scratch();
    let check = |args: &[&str], code: i32, needle: &str| {
        let mut c = cmd("trace");
        c.current_dir(s.path()).args(args);
        let o = run(&mut c);
        let (_, err) = texts(&o);
        assert_eq!(o.status.code(), Some(code), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: expected {needle:?} in {err}");
        assert!(!err.contains("panicked"), "{err}");
    };
    check(&["run"], 2, "no command given");
    check(&["run", "--", "no-such-program-xyz"], 127, "command not found");
    check(&["run", "--", &python(), "missing.py"], 2, "missing.py: no such Python script");
    // A stripped build of the user's: entry patching has no symbol to patch
    // (docs/native-recording.md). (A stripped system program is a launcher: see below.)
    std::fs::copy("/bin/true", s.path().join("mytrue")).unwrap();
    check(&["run", "--", "./mytrue"], 126, "no symbol table (it was stripped)");
    write_script(s.path(), "plain.py", "print(1)\n");
    check(&["run", "--", "./plain.py"], 126, "trace run -- python3");
    check(&["run", "--", &python(), "-I", "plain.py"], 2, "PYTHONPATH");
    // An output directory that is not a trace is left alone.
    std::fs::create_dir(s.path().join("mine")).unwrap();
    write_script(&s.path().join("mine"), "notes.txt", "keep");
    check(&["run", "-o", "mine", "--", &python(), "plain.py"], 1, "not a trace directory");
    assert!(s.path().join("mine/notes.txt").exists());
    // Reading: missing, empty, newer, truncated.
    check(&["info", "nope.d"], 1, "no such trace directory");
    std::fs::create_dir(s.path().join("empty.d")).unwrap();
    check(&["info", "empty.d"], 1, "not a trace directory");
    check(&["dump", "empty.d"], 1, "not a trace directory");

    let good = s.path().join("good.d");
    assert!(trace_run(s.path(), &good, &[&python(), "plain.py"]).status.success());
    let stream = std::fs::read_dir(good.join(format!("p{}", info(&good)["procs"][0]["pid"])))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "ev"))
        .unwrap();
    let data = std::fs::read(&stream).unwrap();
    std::fs::write(&stream, &data[..40]).unwrap();
    check(&["info", "good.d"], 1, "stream header is truncated");
    // Cut inside an event: find a cut that leaves a partial varint (a call with a large delta).
    let mut cut_found = false;
    for cut in (65..data.len()).rev() {
        std::fs::write(&stream, &data[..cut]).unwrap();
        let o = run(cmd("trace").current_dir(s.path()).args(["dump", "good.d"]));
        if texts(&o).1.contains("ends inside an event") {
            assert_eq!(o.status.code(), Some(1));
            assert!(!texts(&o).0.is_empty(), "events before the damage are still printed");
            cut_found = true;
            break;
        }
    }
    assert!(cut_found);
    let meta = good.join("meta.json");
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&meta).unwrap()).unwrap();
    v["version"] = 99.into();
    std::fs::write(&meta, v.to_string()).unwrap();
    check(&["info", "good.d"], 1, "newer version of the trace format");
}

/// `meta.json` says the format version its event streams are written in (one version for the
/// whole trace, docs/trace-format.md).
#[test]
fn meta_json_names_the_version_of_the_streams() {
    let s = scratch();
    write_script(s.path(), "v.py", "def f():\n    return 1\nf()\n");
    let out = s.path().join("v.d");
    assert!(trace_run(s.path(), &out, &[&python(), "v.py"]).status.success());
    let meta: Value = serde_json::from_str(&std::fs::read_to_string(out.join("meta.json")).unwrap()).unwrap();
    let pdir = out.join(format!("p{}", info(&out)["procs"][0]["pid"]));
    let stream = std::fs::read_dir(&pdir).unwrap().map(|e| e.unwrap().path()).find(|p| p.extension().is_some_and(|x| x == "ev")).unwrap();
    let header = std::fs::read(&stream).unwrap();
    assert_eq!(&header[..4], b"SLEV");
    let stream_version = u16::from_le_bytes([header[4], header[5]]);
    assert_eq!(stream_version, 3);
    assert_eq!(meta["version"], u64::from(stream_version), "{meta}");
    // A trace written before meta.json followed its streams (it said 1) still reads.
    let mut old = meta.clone();
    old["version"] = 1.into();
    std::fs::write(out.join("meta.json"), old.to_string()).unwrap();
    assert_eq!(info(&out)["meta"]["version"], 1);
    let tree = run_ok(cmd("slice").args(["tree", "--color", "never"]).arg(&out));
    assert!(tree.contains("f  ("), "{tree}");
}

/// `trace info | head -1`: a reader that closes the pipe early ends `trace` quietly with
/// status 0, like `cat` or `ls`, not with a panic or an error message.
#[test]
fn info_and_dump_into_a_closed_pipe_exit_quietly() {
    let s = scratch();
    write_script(s.path(), "p.py", "def f():\n    return 1\nf()\n");
    let out = s.path().join("p.d");
    assert!(trace_run(s.path(), &out, &[&python(), "p.py"]).status.success());
    for args in [&["info", "--json"][..], &["info"], &["info", "-v"], &["dump"], &["dump", "--funcs"]] {
        // The read end is closed before `trace` starts: its first write fails with EPIPE.
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let o = cmd("trace").args(args).arg(&out).stdout(writer).stderr(Stdio::piped()).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "trace {args:?}: {err}");
        assert_eq!(err, "", "trace {args:?}");
    }
}

/// Every CPython 3.11 on the machine: the one on PATH and Debian's /usr/bin/python3.11.
#[test]
fn every_cpython_311_on_the_machine_is_recorded() {
    let s = scratch();
    write_script(s.path(), "v.py", "import sys\ndef version_probe():\n    return sys.version_info[:2]\nprint(version_probe())\n");
    let mut tried = 0;
    for py in [python(), "/usr/bin/python3.11".to_string(), "/usr/local/bin/python3.11".to_string()] {
        let v = Command::new(&py).args(["-c", "import sys; print('%d.%d' % sys.version_info[:2], sys.version.split()[0])"]).output();
        let Ok(v) = v else { continue };
        let v = String::from_utf8_lossy(&v.stdout).to_string();
        if !v.starts_with("3.11 ") {
            continue;
        }
        tried += 1;
        let out = s.path().join(format!("v{tried}.d"));
        let o = trace_run(s.path(), &out, &[&py, "v.py"]);
        assert!(o.status.success(), "{py}: {:?}", texts(&o));
        assert_eq!(texts(&o).0.trim(), "(3, 11)");
        let i = info(&out);
        assert_eq!(i["procs"][0]["runtime"], format!("CPython {}", v.split_whitespace().nth(1).unwrap()), "{py}");
        assert!(qualnames(&out).contains(&"version_probe".to_string()), "{py}");
    }
    assert!(tried >= 1, "no CPython 3.11 found");
}

/// A real third-party CLI from PyPI: `rich-cli`'s console script `rich`, installed into a venv
/// under the target directory (reused across runs).
#[test]
fn rich_cli_from_pypi_is_recorded() {
    let rich = rich_cli();
    let s = scratch();
    std::fs::write(s.path().join("data.csv"), "name,qty\napple,3\npear,5\n").unwrap();
    let out = s.path().join("rich.d");
    let mut plain = Command::new(&rich);
    plain.current_dir(s.path()).env("COLUMNS", "60").env("TERM", "dumb").arg("data.csv");
    let p = run(&mut plain);
    let mut c = cmd("trace");
    c.current_dir(s.path()).env("COLUMNS", "60").env("TERM", "dumb").arg("run").arg("-o").arg(&out).arg("--").arg(&rich).arg("data.csv");
    let t = run(&mut c);
    assert!(t.status.success(), "{:?}", texts(&t));
    assert_eq!(p.stdout, t.stdout);
    assert!(texts(&t).0.contains("apple"));
    let i = info(&out);
    assert_eq!(i["meta"]["target_kind"], "python");
    let fs = funcs(&out);
    let in_pkg = |pkg: &str| fs.iter().filter(|f| f["file"].as_str().is_some_and(|p| p.contains(&format!("site-packages/{pkg}/")))).count();
    assert!(in_pkg("rich") > 100, "few rich functions: {}", in_pkg("rich"));
    assert!(in_pkg("rich_cli") > 0);
    assert!(fs.iter().any(|f| f["qualname"] == "Table.add_row"), "the CSV rows go through rich.table.Table.add_row");
}

/// The `sitecustomize.py` that `trace run` writes refuses a CPython outside the versions the
/// shim supports, with one line on stderr, and the program runs normally.
#[test]
fn another_python_version_runs_untraced_with_one_warning() {
    let s = scratch();
    let text = std::fs::read_to_string(root().join("tracer/src/sitecustomize.py")).unwrap().replace("@PY_VERSION@", "3.98-3.99");
    write_script(s.path(), "sitecustomize.py", &text);
    std::fs::create_dir(s.path().join("t.d")).unwrap();
    let o = run(Command::new(python())
        .current_dir(s.path())
        .env("PYTHONPATH", s.path())
        .env("SLICE_TRACE_DIR", s.path().join("t.d"))
        .args(["-c", "import sys; print('ran', sys.modules.get('_slicetrace'))"]));
    let (out, err) = texts(&o);
    assert!(o.status.success());
    assert_eq!(out.trim(), "ran None");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("is not supported (supported: CPython 3.98 to 3.99); running it without recording"), "{err}");
    assert_eq!(std::fs::read_dir(s.path().join("t.d")).unwrap().count(), 0, "nothing may be recorded");
}
