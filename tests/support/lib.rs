//! Helpers shared by the end-to-end tests in `tests/`: locate the real `trace` and `slice`
//! binaries built by `cargo build --workspace`, run them, and make scratch directories.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The workspace root (where `Cargo.toml` and `examples/` are): two levels above this crate.
pub fn root() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    here.parent().and_then(Path::parent).map(Path::to_path_buf).unwrap_or_else(|| here.to_path_buf())
}

/// The cargo target profile directory the tests were built into (e.g. `target/debug`).
pub fn target_dir() -> PathBuf {
    // The test executable lives in target/<profile>/deps/.
    let exe = std::env::current_exe().expect("current_exe");
    exe.parent().and_then(|d| d.parent()).map(Path::to_path_buf).expect("target dir")
}

/// Path of a workspace binary (`trace` or `slice`). Panics with the fix if it is not built.
pub fn bin(name: &str) -> PathBuf {
    let p = target_dir().join(name);
    assert!(p.exists(), "{} is not built: run `cargo build --workspace` before the tests (the README's test command does)", p.display());
    p
}

/// A `Command` for a workspace binary, run from the workspace root.
pub fn cmd(name: &str) -> Command {
    let mut c = Command::new(bin(name));
    c.current_dir(root());
    c
}

/// Run a command and return its output (stdout, stderr, status).
pub fn run(c: &mut Command) -> Output {
    c.output().unwrap_or_else(|e| panic!("cannot run {c:?}: {e}"))
}

/// Run a command and require success; returns stdout as a string. On failure, panics with
/// both output streams so the test log shows what went wrong.
pub fn run_ok(c: &mut Command) -> String {
    let out = run(c);
    assert!(
        out.status.success(),
        "{c:?} failed with {}\n--- stdout\n{}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A fresh scratch directory (removed when dropped).
pub fn scratch() -> tempfile::TempDir {
    tempfile::Builder::new().prefix("slice-e2e-").tempdir().expect("tempdir")
}

/// Stdout and stderr of an output as strings.
pub fn texts(out: &Output) -> (String, String) {
    (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// The Python interpreter the tests trace (`SLICE_TEST_PYTHON`, default `python3`).
pub fn python() -> String {
    std::env::var("SLICE_TEST_PYTHON").unwrap_or_else(|_| "python3".into())
}

/// `$(pyenv root)`: `$PYENV_ROOT`, else what `pyenv root` says, else `~/.pyenv`.
pub fn pyenv_root() -> PathBuf {
    if let Some(r) = std::env::var_os("PYENV_ROOT").filter(|r| !r.is_empty()) {
        return PathBuf::from(r);
    }
    if let Ok(o) = Command::new("pyenv").arg("root").output() {
        let r = String::from_utf8_lossy(&o.stdout).trim().to_string();
        if o.status.success() && !r.is_empty() {
            return PathBuf::from(r);
        }
    }
    PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".pyenv")
}

/// `cargo build --offline --quiet` of the Cargo project at `project` into the target
/// directory `target` (with no `RUSTFLAGS` from the caller), which must succeed: the Rust
/// programs the tests build, whose dependencies are already on the machine. Their debug
/// binaries are under `target/debug/`.
pub fn cargo_build(project: &Path, target: &Path) {
    let out = run(Command::new("cargo")
        .args(["build", "--offline", "--quiet"])
        .current_dir(project)
        .env("CARGO_TARGET_DIR", target)
        .env_remove("RUSTFLAGS"));
    assert!(out.status.success(), "cargo build in {}: {:?}", project.display(), texts(&out));
}

/// The processes (other than `trace` itself) whose command line, split into its non-empty
/// arguments, `matches`: how the tests find a recorded program that should have ended.
pub fn processes_where(matches: impl Fn(&[&[u8]]) -> bool) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()))
        .filter(|pid| {
            let Ok(c) = std::fs::read(format!("/proc/{pid}/cmdline")) else { return false };
            let args: Vec<&[u8]> = c.split(|&b| b == 0).filter(|a| !a.is_empty()).collect();
            args.first().is_some_and(|a| !a.ends_with(b"/trace")) && matches(&args)
        })
        .collect()
}

/// The variable that lets a machine without some prerequisite skip the tests needing it:
/// a comma-separated list of [`missing`]'s keys (`python3.9` .. `python3.13`, `old-pythons`,
/// `new-pythons`, `root`), or `all`. CI sets none: there, everything a test needs must be present.
pub const OPT_OUT_VAR: &str = "SLICE_TEST_OPT_OUT";

/// A test cannot run here because `what` is missing (its key: `key`). It fails, naming what to
/// install, unless [`OPT_OUT_VAR`] names the key: then it says it skipped and the caller returns.
/// A test that skips silently would count as passed, so no test decides on its own to skip.
pub fn missing(key: &str, what: &str) {
    missing_given(&std::env::var(OPT_OUT_VAR).unwrap_or_default(), key, what)
}

/// [`missing`] with the opt-out list given.
fn missing_given(listed: &str, key: &str, what: &str) {
    if listed.split(',').map(str::trim).any(|k| k == key || k == "all") {
        eprintln!("SKIPPED ({OPT_OUT_VAR} lists `{key}`): {what}");
        return;
    }
    panic!("{what} (to skip the tests that need it on this machine: {OPT_OUT_VAR}={key})");
}

/// The interpreter of CPython 3.`minor` under `$(pyenv root)/versions/3.<minor>.*/bin/` (the
/// newest patch release), if there is one.
pub fn pyenv_python(minor: u32) -> Option<PathBuf> {
    let prefix = format!("3.{minor}.");
    let mut found: Vec<PathBuf> = std::fs::read_dir(pyenv_root().join("versions"))
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.starts_with(&prefix) && n[prefix.len()..].chars().all(|c| c.is_ascii_digit())
        })
        .map(|e| e.path().join(format!("bin/python3.{minor}")))
        .filter(|p| p.is_file())
        .collect();
    found.sort_by_key(|p| p.parent().and_then(|b| b.parent()).and_then(|v| v.file_name()).map(|n| n.to_string_lossy().into_owned()));
    found.pop()
}

/// A venv under the target directory named `name`, made by `interpreter` and holding the
/// PyPI `packages`, installed once and reused (its `.installed` mark says it is whole). Test
/// binaries that run at the same time (nextest) wait for each other through a lock directory.
/// Returns the venv's directory.
pub fn venv_with(name: &str, interpreter: &str, packages: &[&str]) -> PathBuf {
    let venv = target_dir().join(name);
    let done = venv.join(".installed");
    let lock = target_dir().join(format!("{name}.lock"));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(900);
    loop {
        if done.exists() {
            return venv;
        }
        match std::fs::create_dir(&lock) {
            Ok(()) => break,
            Err(_) if std::time::Instant::now() < deadline => std::thread::sleep(std::time::Duration::from_millis(500)),
            Err(e) => panic!(
                "{}: waited 15 minutes for another test to install {packages:?} ({e}); remove the directory if no test is running",
                lock.display()
            ),
        }
    }
    let install = || -> Result<(), String> {
        if venv.exists() {
            // A venv left half-made by an interrupted run.
            std::fs::remove_dir_all(&venv).map_err(|e| format!("{}: {e}", venv.display()))?;
        }
        let o = run(Command::new(interpreter).args(["-m", "venv"]).arg(&venv));
        if !o.status.success() {
            return Err(format!("`{interpreter} -m venv` failed (on Debian: apt-get install python3-venv): {:?}", texts(&o)));
        }
        let o = run(Command::new(venv.join("bin/pip")).args(["install", "--quiet"]).args(packages));
        if !o.status.success() {
            return Err(format!("pip install {packages:?} failed (is PyPI reachable?): {:?}", texts(&o)));
        }
        std::fs::write(&done, "").map_err(|e| format!("{}: {e}", done.display()))
    };
    let r = install();
    let _ = std::fs::remove_dir(&lock);
    if let Err(e) = r {
        panic!("{e}");
    }
    venv
}

/// pytest as the test-recording tests use it (and its dependencies, pinned too: the golden
/// prompt names their functions and lines).
/// black and its dependencies, pinned (the mypyc-compiled CPython 3.11 wheel): a package that
/// runs as compiled extension code (tests/python_compiled.rs, tests/mcp_e2e.rs).
pub const BLACK: &[&str] =
    &["black==24.10.0", "click==8.1.7", "mypy-extensions==1.0.0", "packaging==24.2", "pathspec==0.12.1", "platformdirs==4.3.6"];

pub const PYTEST: &[&str] =
    &["pytest==9.2.0", "pluggy==1.7.0", "iniconfig==2.3.1", "packaging==26.4", "pytest-xdist==3.8.0", "execnet==2.1.2"];

/// The interpreter of a venv holding [`PYTEST`], made once by [`venv_with`].
pub fn pytest_python() -> PathBuf {
    // Named after what it holds: a venv made for another list is not reused.
    venv_with("pytest9-xdist-venv", &python(), PYTEST).join("bin/python")
}

/// A copy of `examples/python/invoice` (the pytest example: one planted bug) in `dir`, so that
/// the runs write nothing into the checkout.
pub fn invoice_project(dir: &Path) -> PathBuf {
    fn copy_dir(src: &Path, dst: &Path) {
        std::fs::create_dir_all(dst).unwrap_or_else(|e| panic!("{}: {e}", dst.display()));
        for e in std::fs::read_dir(src).unwrap_or_else(|e| panic!("{}: {e}", src.display())).flatten() {
            let to = dst.join(e.file_name());
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                if e.file_name() != "__pycache__" {
                    copy_dir(&e.path(), &to);
                }
            } else {
                std::fs::copy(e.path(), &to).unwrap_or_else(|err| panic!("{}: {err}", e.path().display()));
            }
        }
    }
    let dst = dir.join("invoice");
    copy_dir(&root().join("examples/python/invoice"), &dst);
    dst
}

/// rich-cli and everything it installs, pinned: the tests assert rich's own functions and lines.
pub const RICH_CLI: &[&str] = &[
    "certifi==2026.10.19.post1",
    "charset-normalizer==3.5.3",
    "click==8.5.1",
    "commonmark==0.9.2",
    "docutils==0.23",
    "idna==3.20",
    "Pygments==2.21.0",
    "requests==2.34.2",
    "rich==12.6.0",
    "rich-cli==1.8.1",
    "rich-rst==1.3.2",
    "textual==0.1.18",
    "urllib3==2.8.0",
];

/// The `rich` console script of rich-cli (a real third-party CLI from PyPI), in a venv made
/// once by [`venv_with`].
pub fn rich_cli() -> PathBuf {
    venv_with("rich-cli-1.8.1-venv", &python(), RICH_CLI).join("bin/rich")
}

/// `trace run -o DIR -- EXE ARGS` with the default patching and inline probes (neither
/// `SLICE_TRACE_PATCH` nor `SLICE_TRACE_INLINE` in the environment): the run's output.
pub fn trace_default(dir: &Path, exe: &Path, args: &[&str]) -> Output {
    let mut c = cmd("trace");
    c.env_remove("SLICE_TRACE_PATCH").env_remove("SLICE_TRACE_INLINE").arg("run").arg("-o").arg(dir).arg("--").arg(exe).args(args);
    run(&mut c)
}

/// The text of a prompt's call tree (the fenced block under `### Call tree`).
pub fn call_tree_text(prompt: &str) -> &str {
    let tree = prompt.find("### Call tree").expect("a call tree");
    let start = tree + prompt[tree..].find("```text\n").expect("its text") + "```text\n".len();
    let len = prompt[start..].find("```").expect("the tree's end");
    &prompt[start..start + len]
}

/// The code of the source block under a prompt's heading for function `name` (`#### `name` (`),
/// without its fences.
pub fn source_block<'a>(prompt: &'a str, name: &str) -> Option<&'a str> {
    let h = prompt.find(&format!("#### `{name}` ("))?;
    let body = &prompt[h + prompt[h..].find("```")?..];
    let open = body.find('\n')? + 1;
    let len = body[open..].find("\n```")?;
    Some(&body[open..open + len])
}

#[cfg(test)]
mod tests {
    /// A missing prerequisite that no variable opts out of fails the test, naming the way out.
    #[test]
    #[should_panic(expected = "SLICE_TEST_OPT_OUT=no-such-prerequisite")]
    fn a_missing_prerequisite_fails_the_test() {
        super::missing_given("python3.9,root", "no-such-prerequisite", "a prerequisite this test made up is missing");
    }

    /// Listed (or `all`), it is skipped.
    #[test]
    fn a_listed_prerequisite_is_skipped() {
        super::missing_given("python3.9, root", "root", "not root");
        super::missing_given("all", "new-pythons", "no 3.14");
    }
}
