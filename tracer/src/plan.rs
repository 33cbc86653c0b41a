//! What `trace run` will do, decided before anything happens: the target's argv and
//! environment, where the trace is recorded and the `meta.json` written when the run starts.
//!
//! Pure: built from the options ([`Usage`], checked first) and what was detected about the
//! target and the machine ([`Detected`]); no file is read or written here. `run.rs` detects,
//! builds the plan and hands it to the executor (`launch.rs`), which spawns the target,
//! forwards signals and waits.
//!
//! Where to add things: a new input goes into [`Detected`] (e.g. a shim found another way:
//! [`Shims`]; entry patching decided by `detect`: [`Detected::patch`]); a new environment
//! variable for the target into [`Plan::env`] through [`env_for`]; a new recording option into
//! [`options_json`] (and the shims' `SLICE_TRACE_OPTIONS` into [`shim_options`]).

use crate::detect::TargetKind;
use crate::run::{ExitWith, PythonHook, RunOptions};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use trace_format::{TraceMeta, ENV_TRACE_DIR, ENV_TRACE_OPTIONS, TRACE_FORMAT_NAME, TRACE_FORMAT_VERSION};

/// The environment variable the native shim reads `-F`/`-N` from.
pub const ENV_NATIVE_FILTER: &str = "SLICE_TRACE_NATIVE_FILTER";
/// The environment variable that turns on the native shim's entry patching (`1`).
pub use trace_format::patching::ENV_PATCH as ENV_NATIVE_PATCH;
/// The shims' clock switch (`trace_format::clock`): `monotonic` turns the TSC off.
/// Name prefix of the hidden directory a run records into over an earlier trace.
pub const STAGING_PREFIX: &str = ".trace-run-";

/// The options, checked before anything is looked at: usage errors end `trace run` with
/// status 2 whatever the target is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Usage {
    pub hook: PythonHook,
    /// The native shim's filter text (`-F`/`-N`), `None` without filters.
    pub native_filter: Option<String>,
}

/// Check the options: a command is given, every `-F`/`-N` pattern is valid.
pub fn check_usage(opts: &RunOptions) -> Result<Usage, ExitWith> {
    if opts.command.is_empty() {
        return Err(ExitWith { code: 2, message: "no command given; usage: trace run [-o DIR] -- <command> [args...]".into() });
    }
    trace_format::command::check_argv(opts.command.iter().map(|a| a.as_os_str()))
        .map_err(|e| ExitWith { code: 2, message: e.to_string() })?;
    let native_filter = opts.native_filter.env_text().map_err(|m| ExitWith { code: 2, message: m })?;
    Ok(Usage { hook: opts.python_hook.unwrap_or(PythonHook::Auto), native_filter })
}

/// What is at the output path before the run (see [`decide_output`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputState {
    /// Nothing (or nothing `trace` may look at: creating it then says why).
    Missing,
    /// An empty directory.
    Empty,
    /// A directory holding a trace (a valid `meta.json`, possibly of a newer version).
    Trace,
    /// A file, a symbolic link or anything else that is not a directory.
    NotADirectory,
    /// A directory holding something other than a trace.
    OtherDirectory,
}

/// Where the run records (see `outdir.rs` for the files a run owns).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputPlan {
    /// The directory the user named (absolute).
    pub out: PathBuf,
    /// The directory the shims write into: `out`, or `out/.trace-run-<pid>` over an earlier
    /// trace, moved over it at the end only if the new run recorded something.
    pub rec: PathBuf,
}

impl OutputPlan {
    /// Whether the run records beside an earlier trace, to replace it at the end.
    pub fn staged(&self) -> bool {
        self.rec != self.out
    }
}

/// Decide where to record: a new or empty directory is used as is; one that holds an earlier
/// trace gets a hidden recording directory; anything else is refused (nothing of the user's is
/// ever overwritten).
pub fn decide_output(out: &Path, state: OutputState, pid: u32) -> Result<OutputPlan, ExitWith> {
    let refuse = |why: String| ExitWith { code: 1, message: why };
    match state {
        OutputState::Missing | OutputState::Empty => Ok(OutputPlan { out: out.to_path_buf(), rec: out.to_path_buf() }),
        OutputState::Trace => Ok(OutputPlan { out: out.to_path_buf(), rec: out.join(format!("{STAGING_PREFIX}{pid}")) }),
        OutputState::NotADirectory => {
            Err(refuse(format!("{}: exists and is not a directory; choose another output with -o", out.display())))
        }
        OutputState::OtherDirectory => Err(refuse(format!(
            "{}: exists and is not a trace directory (no valid {}); refusing to overwrite it: choose another output with -o or remove it",
            out.display(),
            trace_format::META_FILE
        ))),
    }
}

/// The shims `trace run` found (embedded or next to itself, see `shims::find`), as the target will load them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Shims {
    /// The private directory holding `sitecustomize.py` and the Python shim, put first on the
    /// target's `PYTHONPATH`; `None` when the Python shim was not found.
    pub python_runtime: Option<PathBuf>,
    /// The native shim, preloaded into native targets; `None` when it was not found.
    pub native: Option<PathBuf>,
}

/// The variables of `trace`'s own environment that the target's values extend.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Inherited {
    pub pythonpath: Option<OsString>,
    pub ld_preload: Option<OsString>,
}

/// What was detected about the target and the machine before the run: the plan's inputs
/// besides the options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Detected {
    /// `argv[0]`, resolved like `execvp` does.
    pub program: PathBuf,
    pub kind: TargetKind,
    /// `trace` tells the native shim to patch the program's function entries
    /// (`SLICE_TRACE_PATCH=1`, docs/native-recording.md): an ordinary x86-64 ELF, not built
    /// with `-finstrument-functions`, whose user did not set the variable (a value the user set,
    /// `0`, `1` or `all`, is inherited as it is).
    pub patch: bool,
    /// `trace`'s working directory (the target's too).
    pub cwd: PathBuf,
    /// `trace`'s process id (names the staging directory).
    pub pid: u32,
    /// What is at the output path now.
    pub output: OutputState,
    pub shims: Shims,
    pub inherited: Inherited,
    /// Wall-clock time of the start, ms since the epoch.
    pub start_unix_ms: u64,
}

/// A change to the target's environment (everything else is inherited from `trace`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnvChange {
    Set(OsString),
    Remove,
}

/// Everything `trace run` will do, decided.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The command to run, exactly as given after `--`.
    pub argv: Vec<OsString>,
    /// The program `argv[0]` resolves to (for messages).
    pub program: PathBuf,
    /// Changes to the target's environment, in the order they are applied.
    pub env: Vec<(&'static str, EnvChange)>,
    /// Where the run records.
    pub output: OutputPlan,
    /// `meta.json` as written when the run starts (the executor adds the end and exit status).
    pub meta: TraceMeta,
}

impl Plan {
    /// Build the plan from the checked options and what was detected.
    pub fn build(opts: &RunOptions, usage: &Usage, d: &Detected) -> Result<Plan, ExitWith> {
        let output = decide_output(&d.cwd.join(&opts.output), d.output, d.pid)?;
        let env = env_for(opts.c_calls, opts.lines, opts.lines_per_test, opts.native_ext, usage, d, &output.rec);
        let meta = TraceMeta {
            format: TRACE_FORMAT_NAME.into(),
            version: TRACE_FORMAT_VERSION,
            tool: format!("trace {}", env!("CARGO_PKG_VERSION")),
            argv: opts.command.iter().map(|a| a.to_string_lossy().into_owned()).collect(),
            cwd: d.cwd.to_string_lossy().into_owned(),
            target_kind: d.kind.as_str().into(),
            start_unix_ms: d.start_unix_ms,
            end_unix_ms: None,
            duration_ns: None,
            exit: None,
            options: options_json(opts, usage),
            incomplete: None,
            stopped: None,
            python_hooks: Vec::new(),
        };
        Ok(Plan { argv: opts.command.clone(), program: d.program.clone(), env, output, meta })
    }

    /// The value the plan gives `name`, if it sets it.
    #[cfg(test)]
    pub fn env_value(&self, name: &str) -> Option<&OsString> {
        self.env.iter().rev().find(|(n, _)| *n == name).and_then(|(_, c)| match c {
            EnvChange::Set(v) => Some(v),
            EnvChange::Remove => None,
        })
    }
}

/// The recording options in force, as `meta.json` records them.
pub fn options_json(opts: &RunOptions, usage: &Usage) -> serde_json::Value {
    serde_json::json!({
        "c_calls": opts.c_calls,
        "python_hook": usage.hook.as_str(),
        "lines": match opts.lines {
            None => "auto",
            Some(true) => "on",
            Some(false) => "off",
        },
        "native_ext": opts.native_ext,
        "native_filter": opts.native_filter.filter,
        "native_notrace": opts.native_filter.notrace,
    })
}

/// `SLICE_TRACE_OPTIONS` for the shims (comma-separated). `lines` only when the user chose
/// (`--lines`/`--no-lines`): otherwise each Python process decides by its version;
/// `lines_per_test` with `--lines-per-test`.
pub fn shim_options(c_calls: bool, hook: PythonHook, lines: Option<bool>, per_test: bool) -> String {
    let mut o = Vec::new();
    if c_calls {
        o.push("c_calls");
    }
    if hook == PythonHook::Profile {
        o.push("profile_hook");
    }
    match lines {
        Some(true) => o.push("lines"),
        Some(false) => o.push("no_lines"),
        None => {}
    }
    if per_test {
        o.push("lines_per_test");
    }
    o.join(",")
}

/// `first`, then the inherited value of a `:`-separated list if it is not empty.
fn prepend(first: &Path, inherited: Option<&OsString>) -> OsString {
    let mut v = OsString::from(first);
    if let Some(old) = inherited.filter(|v| !v.is_empty()) {
        v.push(":");
        v.push(old);
    }
    v
}

/// The target's environment: where to record and how, always; `PYTHONPATH` whenever the
/// Python shim is there (Python programs any target starts are recorded); `LD_PRELOAD` for
/// native targets and other programs (a shell script) that may start native ones, and for
/// Python targets with `--native-ext` (`SLICE_TRACE_PATCH=ext`: the shim patches only a CPython
/// process's extension modules; both shims read `CLOCK_MONOTONIC` itself, so that `trace` can
/// merge the two streams of a thread by time: docs/native-recording.md, "Python extension
/// modules").
pub fn env_for(
    c_calls: bool,
    lines: Option<bool>,
    per_test: bool,
    native_ext: bool,
    usage: &Usage,
    d: &Detected,
    rec: &Path,
) -> Vec<(&'static str, EnvChange)> {
    let mut env = vec![
        (ENV_TRACE_DIR, EnvChange::Set(rec.into())),
        (ENV_TRACE_OPTIONS, EnvChange::Set(shim_options(c_calls, usage.hook, lines, per_test).into())),
        (ENV_NATIVE_FILTER, usage.native_filter.as_ref().map_or(EnvChange::Remove, |t| EnvChange::Set(t.into()))),
    ];
    if let Some(rt) = &d.shims.python_runtime {
        env.push(("PYTHONPATH", EnvChange::Set(prepend(rt, d.inherited.pythonpath.as_ref()))));
    }
    if matches!(d.kind, TargetKind::Native | TargetKind::Other) {
        if let Some(native) = &d.shims.native {
            env.push(("LD_PRELOAD", EnvChange::Set(prepend(native, d.inherited.ld_preload.as_ref()))));
            if d.patch {
                env.push((ENV_NATIVE_PATCH, EnvChange::Set("1".into())));
            }
        }
    }
    if native_ext && matches!(d.kind, TargetKind::Python | TargetKind::Other) {
        if let Some(native) = &d.shims.native {
            if d.kind == TargetKind::Python {
                env.push(("LD_PRELOAD", EnvChange::Set(prepend(native, d.inherited.ld_preload.as_ref()))));
            }
            env.push((ENV_NATIVE_PATCH, EnvChange::Set("ext".into())));
        }
    }
    env
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::run::NativeFilter;

    fn opts(command: &[&str]) -> RunOptions {
        RunOptions {
            output: PathBuf::from("trace.d"),
            c_calls: false,
            lines: None,
            lines_per_test: false,
            native_ext: false,
            python_hook: None,
            quiet: false,
            native_filter: NativeFilter::default(),
            command: command.iter().map(OsString::from).collect(),
        }
    }

    /// A target detected at `/work` (pid 42), not patched, with both shims (also the probe
    /// lists' tests').
    pub(crate) fn detected(program: &str, kind: TargetKind) -> Detected {
        Detected {
            program: PathBuf::from(program),
            kind,
            patch: false,
            cwd: PathBuf::from("/work"),
            pid: 42,
            output: OutputState::Missing,
            shims: Shims { python_runtime: Some("/tmp/rt".into()), native: Some("/opt/st/libslicetrace_native.so".into()) },
            inherited: Inherited::default(),
            start_unix_ms: 1_700_000_000_000,
        }
    }

    fn plan(o: &RunOptions, d: &Detected) -> Plan {
        Plan::build(o, &check_usage(o).unwrap(), d).unwrap()
    }

    fn set(v: &str) -> EnvChange {
        EnvChange::Set(v.into())
    }

    /// The environment every target gets: where and how to record, no stale native filter.
    fn base_env() -> Vec<(&'static str, EnvChange)> {
        vec![("SLICE_TRACE_DIR", set("/work/trace.d")), ("SLICE_TRACE_OPTIONS", set("")), ("SLICE_TRACE_NATIVE_FILTER", EnvChange::Remove)]
    }

    #[test]
    fn an_argument_with_a_nul_byte_is_a_usage_error_naming_it() {
        let e = check_usage(&opts(&["python3", "a\0b.py"])).map(|_| ()).unwrap_err();
        assert_eq!(e.code, 2);
        assert!(e.message.starts_with("argument 1 of the command, \"a\\0b.py\", contains a NUL byte"), "{}", e.message);
    }

    #[test]
    fn python_script() {
        let o = opts(&["python3", "app.py", "--flag", "in.csv"]);
        let p = plan(&o, &detected("/usr/bin/python3", TargetKind::Python));
        assert_eq!(p.argv, o.command, "the command is run exactly as given");
        assert_eq!(p.program, Path::new("/usr/bin/python3"));
        let mut env = base_env();
        env.push(("PYTHONPATH", set("/tmp/rt")));
        assert_eq!(p.env, env, "a Python target gets the Python runtime, not LD_PRELOAD");
        assert_eq!(p.output, OutputPlan { out: "/work/trace.d".into(), rec: "/work/trace.d".into() });
        assert_eq!(p.meta.argv, ["python3", "app.py", "--flag", "in.csv"]);
        assert_eq!((p.meta.format.as_str(), p.meta.version), ("slice-trace", TRACE_FORMAT_VERSION));
        assert_eq!((p.meta.cwd.as_str(), p.meta.target_kind.as_str(), p.meta.start_unix_ms), ("/work", "python", 1_700_000_000_000));
        assert_eq!((p.meta.end_unix_ms, p.meta.exit, p.meta.incomplete), (None, None, None));
        assert_eq!(
            p.meta.options,
            serde_json::json!({"c_calls": false, "python_hook": "auto", "lines": "auto", "native_ext": false, "native_filter": [], "native_notrace": []})
        );
    }

    #[test]
    fn native_ext_preloads_the_native_shim_for_extension_modules_only() {
        let mut o = opts(&["python3", "app.py"]);
        o.native_ext = true;
        let mut d = detected("/usr/bin/python3", TargetKind::Python);
        d.inherited.ld_preload = Some("/usr/lib/libfaketime.so".into());
        let p = plan(&o, &d);
        assert_eq!(p.env_value("LD_PRELOAD"), Some(&OsString::from("/opt/st/libslicetrace_native.so:/usr/lib/libfaketime.so")));
        assert_eq!(p.env_value("SLICE_TRACE_PATCH"), Some(&OsString::from("ext")), "extension modules only");
        // One clock for both streams without slowing the Python shim down: it reads the native
        // shim's TSC clock (trace_format::clock::share_preloaded), not `clock_gettime`.
        assert_eq!(p.env_value("SLICE_TRACE_CLOCK"), None);
        assert_eq!(p.meta.options["native_ext"], true);
        // A shell script gets the shim anyway; it is told the mode too.
        let p = plan(&o, &detected("/work/run.sh", TargetKind::Other));
        assert_eq!(p.env_value("SLICE_TRACE_PATCH"), Some(&OsString::from("ext")));
    }

    #[test]
    fn python_module_keeps_its_argv_and_extends_the_users_pythonpath() {
        let o = opts(&["python3", "-m", "json.tool", "data.json"]);
        let mut d = detected("/usr/bin/python3", TargetKind::Python);
        d.inherited.pythonpath = Some("/home/u/lib".into());
        d.inherited.ld_preload = Some("/usr/lib/libfaketime.so".into());
        let p = plan(&o, &d);
        assert_eq!(p.argv, o.command);
        assert_eq!(p.env_value("PYTHONPATH"), Some(&OsString::from("/tmp/rt:/home/u/lib")), "the runtime first, the user's after");
        assert_eq!(p.env_value("LD_PRELOAD"), None, "LD_PRELOAD is left as inherited for Python");
        // An empty inherited value is not kept as an empty (current-directory) entry.
        d.inherited.pythonpath = Some("".into());
        assert_eq!(plan(&o, &d).env_value("PYTHONPATH"), Some(&OsString::from("/tmp/rt")));
    }

    #[test]
    fn console_script_is_a_python_target_with_options() {
        let mut o = opts(&["rich", "data.csv"]);
        o.c_calls = true;
        o.python_hook = Some(PythonHook::Profile);
        o.lines = Some(false);
        let p = plan(&o, &detected("/venv/bin/rich", TargetKind::Python));
        assert_eq!(p.env_value("SLICE_TRACE_OPTIONS"), Some(&OsString::from("c_calls,profile_hook,no_lines")));
        assert_eq!(p.meta.options["c_calls"], true);
        assert_eq!(p.meta.options["lines"], "off");
        assert_eq!(p.meta.options["python_hook"], "profile");
        assert_eq!(p.meta.target_kind, "python");
    }

    #[test]
    fn native_instrumented() {
        let mut o = opts(&["./build/app", "in.txt"]);
        o.native_filter = NativeFilter { filter: vec!["parse_.*".into()], notrace: vec![".*@libc\\.so\\.6".into()] };
        let mut d = detected("./build/app", TargetKind::Native);
        d.inherited.ld_preload = Some("/usr/lib/libfaketime.so".into());
        let p = plan(&o, &d);
        let mut env = base_env();
        env[2] = ("SLICE_TRACE_NATIVE_FILTER", set("F parse_.*\nN .*@libc\\.so\\.6"));
        env.push(("PYTHONPATH", set("/tmp/rt")));
        env.push(("LD_PRELOAD", set("/opt/st/libslicetrace_native.so:/usr/lib/libfaketime.so")));
        assert_eq!(p.env, env, "the native shim preloaded first; Python programs it starts recorded too");
        assert_eq!(p.meta.target_kind, "native");
        assert_eq!(p.meta.options["native_filter"], serde_json::json!(["parse_.*"]));
        assert_eq!(p.meta.options["native_notrace"], serde_json::json!([".*@libc\\.so\\.6"]));
    }

    #[test]
    fn native_patched() {
        let o = opts(&["./plain-build"]);
        let mut d = detected("./plain-build", TargetKind::Native);
        d.patch = true;
        let p = plan(&o, &d);
        assert_eq!(p.env_value("LD_PRELOAD"), Some(&OsString::from("/opt/st/libslicetrace_native.so")));
        assert_eq!(p.env_value("SLICE_TRACE_PATCH"), Some(&OsString::from("1")), "the shim is told to patch");
        assert_eq!(p.meta.target_kind, "native");
        // Without the native shim there is nothing to patch with.
        d.shims.native = None;
        let p = plan(&o, &d);
        assert_eq!((p.env_value("LD_PRELOAD"), p.env_value("SLICE_TRACE_PATCH")), (None, None));
    }

    #[test]
    fn other_programs_get_both_shims() {
        let o = opts(&["./run.sh"]);
        let d = detected("/work/run.sh", TargetKind::Other);
        let p = plan(&o, &d);
        assert_eq!(p.env_value("PYTHONPATH"), Some(&OsString::from("/tmp/rt")));
        assert_eq!(p.env_value("LD_PRELOAD"), Some(&OsString::from("/opt/st/libslicetrace_native.so")));
        assert_eq!(p.env_value("SLICE_TRACE_PATCH"), None);
        assert_eq!(p.meta.target_kind, "other");
        // Without the Python shim a script still runs, without the Python runtime.
        let mut d = d;
        d.shims.python_runtime = None;
        assert_eq!(plan(&o, &d).env_value("PYTHONPATH"), None);
    }

    #[test]
    fn output_decisions() {
        let out = Path::new("/work/t.d");
        for state in [OutputState::Missing, OutputState::Empty] {
            let p = decide_output(out, state, 7).unwrap();
            assert_eq!((p.rec.as_path(), p.staged()), (out, false), "{state:?}");
        }
        let p = decide_output(out, OutputState::Trace, 7).unwrap();
        assert_eq!(p.rec, Path::new("/work/t.d/.trace-run-7"), "an earlier trace is recorded over beside it");
        assert!(p.staged());
        let e = decide_output(out, OutputState::NotADirectory, 7).unwrap_err();
        assert_eq!(e.code, 1);
        assert!(e.message.contains("is not a directory"), "{}", e.message);
        let e = decide_output(out, OutputState::OtherDirectory, 7).unwrap_err();
        assert!(e.message.contains("not a trace directory") && e.message.contains("refusing to overwrite"), "{}", e.message);
        // The plan: -o relative to the working directory; the shims write into the staging one.
        let mut o = opts(&["python3", "a.py"]);
        o.output = PathBuf::from("t.d");
        let mut d = detected("/usr/bin/python3", TargetKind::Python);
        d.output = OutputState::Trace;
        let p = plan(&o, &d);
        assert_eq!(p.output.out, Path::new("/work/t.d"));
        assert_eq!(p.env_value("SLICE_TRACE_DIR"), Some(&OsString::from("/work/t.d/.trace-run-42")));
        o.output = PathBuf::from("/abs/t.d");
        d.output = OutputState::Missing;
        assert_eq!(plan(&o, &d).output.rec, Path::new("/abs/t.d"));
        d.output = OutputState::OtherDirectory;
        assert!(Plan::build(&o, &check_usage(&o).unwrap(), &d).is_err());
    }

    #[test]
    fn usage_errors_come_first() {
        let e = check_usage(&opts(&[])).unwrap_err();
        assert_eq!(e.code, 2);
        assert!(e.message.contains("no command given"));
        let mut o = opts(&["./app"]);
        o.native_filter.notrace = vec!["parse_(".into()];
        let e = check_usage(&o).unwrap_err();
        assert_eq!(e.code, 2);
        assert!(e.message.contains("-N \"parse_(\": not a regular expression"), "{}", e.message);
        assert_eq!(check_usage(&opts(&["./app"])).unwrap(), Usage { hook: PythonHook::Auto, native_filter: None });
    }

    #[test]
    fn shim_options_name_the_hook_c_calls_and_lines() {
        assert_eq!(shim_options(false, PythonHook::Auto, None, false), "", "lines by default: each interpreter decides");
        assert_eq!(shim_options(false, PythonHook::Profile, None, false), "profile_hook");
        assert_eq!(shim_options(true, PythonHook::Profile, None, false), "c_calls,profile_hook");
        assert_eq!(shim_options(false, PythonHook::Auto, Some(true), false), "lines");
        assert_eq!(shim_options(true, PythonHook::Auto, Some(false), false), "c_calls,no_lines");
        assert_eq!(shim_options(false, PythonHook::Auto, Some(true), true), "lines,lines_per_test");
    }
}
