//! JSON documents of a trace directory: `meta.json` (one per run), `proc.json` (one per
//! traced process) and the lines of `funcs.jsonl` (one per function a process reached).

use serde::{Deserialize, Serialize};

/// Value of [`TraceMeta::format`]; identifies a directory written by `trace run`.
pub const TRACE_FORMAT_NAME: &str = "slice-trace";
/// Version of the trace format: the directory layout, its JSON documents and its event
/// streams, one number for all (`meta.json`'s `version` equals the stream headers' version,
/// [`crate::event::STREAM_VERSION`]). Version 2 added the resume marker, version 3 executed lines; readers accept every
/// version up to this one (a version-1 trace reads as before) and refuse a newer one.
pub const TRACE_FORMAT_VERSION: u32 = 3;

/// `meta.json`: written by `trace run` when the run starts, rewritten when it ends.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TraceMeta {
    /// Always [`TRACE_FORMAT_NAME`].
    pub format: String,
    /// [`TRACE_FORMAT_VERSION`] of the writer.
    pub version: u32,
    /// Name and version of the program that wrote the trace, e.g. `trace 0.1.0`.
    pub tool: String,
    /// The traced command line, as given to `trace run`.
    pub argv: Vec<String>,
    /// Working directory of the traced command.
    pub cwd: String,
    /// What kind of target `trace run` launched: `python` or `native`.
    pub target_kind: String,
    /// Wall-clock start of the run, milliseconds since the Unix epoch.
    pub start_unix_ms: u64,
    /// Wall-clock end of the run; absent while the run is going on or if `trace` was killed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_unix_ms: Option<u64>,
    /// Duration of the run in nanoseconds; absent like `end_unix_ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ns: Option<u64>,
    /// How the top process ended; absent like `end_unix_ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit: Option<ExitStatus>,
    /// Recording options in force (`c_calls`, ...), as free-form JSON.
    #[serde(default)]
    pub options: serde_json::Value,
    /// Why the trace holds less than the run did (the disk filled up); absent when complete.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incomplete: Option<String>,
    /// The run was cut short: `trace` was asked to stop (a signal it forwarded to the program's
    /// process group) and the trace is partial; absent when the program ended on its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<Stopped>,
    /// The Python hooks that recorded the run's processes (`proc.json`'s `hook`), each once,
    /// sorted: `monitoring`, `evalframe`, `profile`. Empty (absent) when no Python ran.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub python_hooks: Vec<String>,
}

#[cfg(test)]
impl TraceMeta {
    /// A trace's `meta.json` as the unit tests write it: a Python target `argv0`, started at
    /// 0, not ended, with `options`.
    pub(crate) fn for_tests(version: u32, argv0: &str, options: serde_json::Value) -> Self {
        TraceMeta {
            format: TRACE_FORMAT_NAME.into(),
            version,
            tool: "test".into(),
            argv: vec![argv0.into()],
            cwd: "/".into(),
            target_kind: "python".into(),
            start_unix_ms: 0,
            end_unix_ms: None,
            duration_ns: None,
            exit: None,
            options,
            incomplete: None,
            stopped: None,
            python_hooks: Vec::new(),
        }
    }
}

/// How `trace` stopped a run it was asked to stop (`meta.json`'s `stopped`).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct Stopped {
    /// The signal `trace` received and forwarded (SIGTERM, SIGINT, SIGHUP).
    pub signal: i32,
    /// Whether the program's process group was still running after the grace period and was
    /// killed with SIGKILL.
    #[serde(default)]
    pub killed: bool,
}

/// How a process ended: exactly one of `code` and `signal` is set.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct ExitStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    #[serde(default)]
    pub core_dumped: bool,
}

/// `p<pid>/proc.json`: written by a shim when it starts recording in a process.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ProcMeta {
    pub pid: u32,
    pub ppid: u32,
    /// The process's command line (`/proc/self/cmdline`).
    pub argv: Vec<String>,
    /// The process's executable (`/proc/self/exe`).
    pub exe: String,
    pub cwd: String,
    /// `python` or `native`.
    pub kind: String,
    /// Runtime description, e.g. `CPython 3.11.7`.
    #[serde(default)]
    pub runtime: String,
    /// `CLOCK_MONOTONIC` nanoseconds when recording started in this process.
    pub start_ns: u64,
    /// If the process was created by `fork` from a traced process, that parent's pid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<u32>,
    /// Python: how calls are recorded in this process, `monitoring` (`sys.monitoring`, 3.12+),
    /// `evalframe` (the PEP 523 frame-evaluation hook, 3.9-3.11) or `profile`
    /// (`PyEval_SetProfile`); written once the hook is installed. Absent for native processes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hook: Option<String>,
    /// Python: the executed lines are reported again in every test (the recorder re-arms its
    /// line events at each test's start), so the line events between a test's boundaries are
    /// every line that test ran (`docs/trace-format.md`, "Lines per test"). Written at the
    /// first test's start; absent (false): a line is reported once per process.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub lines_per_test: bool,
    /// Python, `trace run --native-ext`: before each call or resume it records, the Python
    /// shim had the native shim close the native calls that had returned (`trace_format::pyext`,
    /// "Returns at Python calls"), so the native stream's open frames at a Python event are the
    /// ones still running. Absent (false): an older shim; the merge then infers the returns
    /// from the native stream's next call.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub native_closed_at_python_calls: bool,
}

impl ProcMeta {
    /// A process's `proc.json` as the unit tests write it: process `pid` (parent 1) of kind
    /// `kind` running `argv0` as `exe`, started at 5, no hook or optional fact recorded.
    #[cfg(test)]
    pub(crate) fn for_tests(pid: u32, kind: &str, argv0: &str, exe: &str) -> Self {
        ProcMeta {
            pid,
            ppid: 1,
            argv: vec![argv0.into()],
            exe: exe.into(),
            cwd: "/".into(),
            kind: kind.into(),
            runtime: String::new(),
            start_ns: 5,
            forked_from: None,
            hook: None,
            lines_per_test: false,
            native_closed_at_python_calls: false,
        }
    }
}

/// One line of `p<pid>/funcs.jsonl`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FuncRecord {
    /// Dense id used by the events of this process, from 0.
    pub id: u32,
    #[serde(flatten)]
    pub kind: FuncKind,
}

/// What a function id stands for.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FuncKind {
    /// A Python code object.
    Python {
        /// `co_filename`, made absolute when it names an existing relative path.
        file: String,
        /// `co_qualname` (`co_name` before Python 3.11).
        qualname: String,
        /// `co_name`.
        name: String,
        /// `co_firstlineno`: the first decorator line for decorated functions.
        first_line: u32,
        /// Largest line number in the code object's position table.
        last_line: u32,
        /// The lines that hold code the function can execute (from its position table),
        /// ascending. Written only when the process records executed lines
        /// ([`crate::Event::Line`]): then the lines here that no line event names did not run.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        code_lines: Option<Vec<u32>>,
        /// For code compiled from a string (`file` `<string>`, `<...>`: what `exec`, `eval`
        /// and `compile` run), the file of the code that ran it: the caller of the exec'd
        /// body (`<module>`), and for the functions that body defines, the same file (the
        /// functions `collections.namedtuple` or `dataclasses` generate:
        /// `.../collections/__init__.py`). When that caller has no file either, what made it.
        /// Absent: not known (a body run from no Python frame, `python -c`; a function made
        /// from a code object some other way; a trace written before this field).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        made_in: Option<String>,
    },
    /// A function implemented in C and called from Python (recorded with `--c-calls`).
    Builtin {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        module: Option<String>,
        qualname: String,
    },
    /// A native function entered through `-finstrument-functions`.
    Native {
        /// Run-time address of the function.
        addr: u64,
        /// Path of the ELF object that contains it (executable or shared library).
        module: String,
        /// Run-time address at which that object is loaded (`dladdr`'s `dli_fbase`).
        base: u64,
        /// Nearest dynamic symbol, if `dladdr` found one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        symbol: Option<String>,
        /// Not a function entry: the entry of code the compiler inlined at `addr` (an inline
        /// probe, docs/native-recording.md "Inlined functions"). Its call, always followed by
        /// its return, says that the inlined functions starting at `addr` ran there, inside the
        /// function whose frame was innermost.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        inlined: bool,
    },
}

/// One line of `funcs.jsonl`, every kind's fields in one flat struct: parsed in one pass
/// without the buffering that `#[serde(flatten)]` with an internal tag costs (the table can
/// have millions of lines), then checked into a [`FuncRecord`] as its `Deserialize` would.
#[derive(Deserialize)]
struct FlatFunc {
    id: u32,
    kind: String,
    file: Option<String>,
    qualname: Option<String>,
    name: Option<String>,
    first_line: Option<u32>,
    last_line: Option<u32>,
    code_lines: Option<Vec<u32>>,
    made_in: Option<String>,
    module: Option<String>,
    addr: Option<u64>,
    base: Option<u64>,
    symbol: Option<String>,
    inlined: Option<bool>,
}

/// Parse one line of `funcs.jsonl` (without its newline); the error says what is wrong.
pub fn parse_func_line(line: &[u8]) -> Result<FuncRecord, String> {
    let f: FlatFunc = serde_json::from_slice(line).map_err(|e| e.to_string())?;
    let missing = |field: &str| format!("missing field `{field}` of a `{}` function", f.kind);
    let kind = match f.kind.as_str() {
        "python" => FuncKind::Python {
            file: f.file.ok_or_else(|| missing("file"))?,
            qualname: f.qualname.ok_or_else(|| missing("qualname"))?,
            name: f.name.ok_or_else(|| missing("name"))?,
            first_line: f.first_line.ok_or_else(|| missing("first_line"))?,
            last_line: f.last_line.ok_or_else(|| missing("last_line"))?,
            code_lines: f.code_lines,
            made_in: f.made_in,
        },
        "builtin" => FuncKind::Builtin { module: f.module, qualname: f.qualname.ok_or_else(|| missing("qualname"))? },
        "native" => FuncKind::Native {
            addr: f.addr.ok_or_else(|| missing("addr"))?,
            module: f.module.ok_or_else(|| missing("module"))?,
            base: f.base.ok_or_else(|| missing("base"))?,
            symbol: f.symbol,
            inlined: f.inlined.unwrap_or(false),
        },
        other => return Err(format!("unknown variant `{other}`, expected one of `python`, `builtin`, `native`")),
    };
    Ok(FuncRecord { id: f.id, kind })
}

/// Name of the fingerprint document written by `trace run` after the target exits.
pub const SOURCES_FILE: &str = "sources.json";

/// `sources.json`: fingerprints of the files the run executed (Python sources, native
/// objects), taken right after the run, so that `slice` can tell when a file has changed
/// since and refuse to print lines that are no longer the ones that ran.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct SourcesDoc {
    pub files: Vec<FileFingerprint>,
}

/// Fingerprint of one file.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct FileFingerprint {
    /// Absolute path as the trace names it.
    pub path: String,
    pub size: u64,
    /// Modification time, ns since the epoch.
    pub mtime_ns: i128,
    /// Lowercase hex SHA-256 of the content.
    pub sha256: String,
    /// A native object's: the symbol names of its functions that ran and were recorded without
    /// one (entry patching records addresses), read from its symbol table when the run ended,
    /// so that a trace of an object rebuilt since still names them. Added within version 3.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub symbols: Vec<RecordedSymbol>,
}

/// The symbol name of one recorded native address ([`FileFingerprint::symbols`]).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct RecordedSymbol {
    /// The address's offset from the object's load address (`addr - base` of its
    /// `funcs.jsonl` record).
    pub offset: u64,
    /// The raw (mangled) symbol name, `name+0xoff` when the address is not the symbol's start.
    pub name: String,
}

/// `p<pid>/extensions.json`: written by `sitecustomize.py` when a Python process exits: the
/// compiled extension modules it imported from outside the standard library (at most 5,000).
pub const EXTENSIONS_FILE: &str = "extensions.json";

/// `extensions.json`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ExtensionsDoc {
    pub modules: Vec<ExtensionModule>,
}

/// One compiled extension module a Python process imported.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ExtensionModule {
    /// Its dotted name (`black.linegen`).
    pub module: String,
    /// Its file (`.../site-packages/black/linegen.cpython-311-x86_64-linux-gnu.so`).
    pub file: String,
}

/// `p<pid>/patch.json`: written by the native shim when it patched the entries of the
/// process image's program (`SLICE_TRACE_PATCH=1`, docs/native-recording.md).
pub const PATCH_FILE: &str = "patch.json";

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct PatchReport {
    /// Functions whose entry was patched (all objects).
    pub patched: u64,
    /// Functions left unpatched, and why (all objects).
    #[serde(default)]
    pub refused: Vec<PatchRefusal>,
    /// Each object (the program, its libraries, `dlopen`ed ones) that was considered, in the
    /// order seen.
    #[serde(default)]
    pub objects: Vec<PatchObject>,
}

impl PatchRefusal {
    /// A symbol left unpatched that no call enters (the shim's reasons,
    /// shims/native/src/patch.rs `Refusal::as_str`): gcc's `.cold` parts of a function and the
    /// C runtime's start-up code. They are listed, but counting them as refused made the share
    /// of patched entries look worse than it is (half of a C++ program's refusals were `.cold`
    /// fragments).
    pub fn not_an_entry(&self) -> bool {
        self.reason == "a .cold fragment, not an entry" || self.reason == "C runtime start-up"
    }
}

/// Why a run recorded no call although entry patching was on, from its processes' reports:
/// when none of their functions could be patched, how many were refused and the most common
/// reason; `None` when something was patched (or nothing refused).
pub fn nothing_patched(reports: &[&PatchReport], hint: &dyn crate::RecordHint) -> Option<String> {
    let refused: Vec<&PatchRefusal> =
        reports.iter().filter(|r| r.patched == 0).flat_map(|r| r.refused.iter().filter(|f| !f.not_an_entry())).collect();
    if refused.is_empty() {
        return None;
    }
    let mut reasons: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    for f in &refused {
        *reasons.entry(f.reason.as_str()).or_default() += 1;
    }
    let (top, n) = reasons.iter().max_by_key(|(r, n)| (**n, std::cmp::Reverse(**r))).map(|(r, n)| (*r, *n))?;
    Some(format!(
        "entry patching could patch none of the program's {} functions: {n} not patched because {top}; {} names them",
        refused.len(),
        hint.patch_details()
    ))
}

/// How `trace run`'s stderr line starts when a run recorded nothing (followed by why): the MCP
/// `record` tool, which says why in its own words, leaves that line out of the stderr it shows.
pub const NOTHING_RECORDED: &str = "trace: nothing was recorded";

/// Why a run recorded no call, as `trace run` and `slice` say it: entry patching that could
/// patch none of a process's functions ([`nothing_patched`]), else what the target was
/// (`meta`'s `target_kind`, `argv`): a shell script or a system program that only starts
/// others, which started nothing that is recorded; else that the recorder was not active.
/// `hint` words the remedies for the reader ([`crate::TraceRun`]: `trace`'s own).
pub fn why_nothing(meta: Option<&TraceMeta>, reports: &[&PatchReport], hint: &dyn crate::RecordHint) -> String {
    if let Some(why) = nothing_patched(reports, hint) {
        return why;
    }
    let program = meta.and_then(|m| m.argv.first()).map(|a| crate::escape::line(a).into_owned()).unwrap_or_default();
    if let Some(signal) = meta.and_then(|m| m.exit.as_ref()).and_then(|e| e.signal) {
        return format!("`{program}` was killed by signal {signal} before anything was recorded");
    }
    match meta.map(|m| m.target_kind.as_str()) {
        Some("other") => format!(
            "`{program}` is a script or a system program (such as `env` or `sh`), which `trace` does not record itself \
             ({} patches system programs): it records the Python and native programs started from it, and none of them ran",
            hint.with_env(crate::patching::ENV_PATCH, "all")
        ),
        Some("native") => format!(
            "`{program}` ran, but the recorder was not active in it (for example a set-user-ID program, or a launcher that cleared LD_PRELOAD from the environment)"
        ),
        Some("python") => format!("`{program}` ran, but the Python recorder was not active in it (for example `python -I`, `-E` or `-S` in a child, or a cleared environment)"),
        _ => "no traced Python process or instrumented native program ran".to_string(),
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct PatchRefusal {
    pub function: String,
    pub reason: String,
    /// The object's path (absent in traces written before objects were reported).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object: Option<String>,
}

/// One object's part of the patching.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct PatchObject {
    pub path: String,
    pub patched: u64,
    /// Functions of this object left unpatched.
    pub refused: u64,
    /// Why the whole object was left alone (a system library, built with
    /// `-finstrument-functions`, no symbols), if it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    /// Loaded by `dlopen` after start-up.
    #[serde(default)]
    pub dlopened: bool,
    /// Inline probes (docs/native-recording.md, "Inlined functions"): absent when the object
    /// was not probed (no list for it, or probes off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inline_probes: Option<InlineProbes>,
    /// Line probes (`trace run --lines`, [`LINE_PROBES_FILE`]): absent when the object was not
    /// probed for lines. `planted` counts the rows with a trap; `at_entry` those in a patched
    /// entry's moved bytes, marked ran when the function's first call is recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line_probes: Option<InlineProbes>,
    /// Loaded by `dlopen`, or patched at start-up in a program the recorded one started, and
    /// not probed for want of its lists: why the shim has none (within version 3; absent: it
    /// got them, or was not asked for them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unlisted: Option<Unlisted>,
}

/// Why an object loaded by `dlopen`, or patched at start-up in a program the recorded one
/// started, got no probe lists during the run ([`PatchObject::unlisted`]): the shim asks `trace
/// run` for them from the loader's hook inside `dlopen`, or from its constructor
/// (`trace_format::probes::ListRequest`; docs/native-recording.md, "Inlined functions").
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Unlisted {
    /// Patched only after `dlopen` returned (text relocations, or a loader hook the shim does
    /// not know): its code may run by then, so no probe is planted and no list asked for.
    Late,
    /// `trace run` did not answer within the time the shim waits
    /// (`trace_format::probes::LISTS_TIMEOUT_MS`).
    TimedOut,
    /// `trace run` could not be reached (it ended, or its socket is not visible here).
    Unreachable,
    /// A reason a newer shim gives.
    #[serde(other)]
    Other,
}

/// One object's inline probes: one-shot breakpoints at the entries of the code its compiler
/// inlined, from `trace run`'s list ([`INLINE_PROBES_FILE`]).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct InlineProbes {
    /// Entries in the list.
    pub listed: u64,
    /// Entries that got a probe.
    pub planted: u64,
    /// Entries inside the bytes a patched function entry moved to its trampoline: they run
    /// whenever that function is entered, and are recorded then (no probe needed).
    #[serde(default)]
    pub at_entry: u64,
    /// Entries left without a probe (the page could not be made writable, a byte that is not
    /// where an instruction starts could not be told): their inlined code is never shown.
    #[serde(default)]
    pub unprobed: u64,
    /// Of `planted`, the probes inside entry-patched functions, whose traps are written at
    /// the function's first call (none in a function that never ran); the others' at
    /// start-up. Absent (0) in traces of an older shim, which wrote every trap at start-up.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub deferred: u64,
    /// Line lists only: rows without a probe of their own because an earlier row's probe in
    /// the same basic block stands for them ([`InlineProbeList::covers`]). Absent (0) in
    /// traces of an older shim or list.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub covered: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The list of inline-probe addresses `trace run` writes into the trace directory for the
/// program (docs/native-recording.md, "Inlined functions"), read by the native shim.
pub const INLINE_PROBES_FILE: &str = "inline-probes.json";

/// The inline-probe lists `trace run` writes into the trace directory for the shared libraries
/// of the program that the native shim patches at start-up (its `DT_NEEDED` libraries that are
/// not the system's: a library of a project's own, Debian's `libjq.so.1`): a JSON array of
/// [`InlineProbeList`], one per library with inlined code of its own (within version 3), to
/// which `trace run` appends, during the run, the list of a library a process loads by
/// `dlopen` when its shim asks (`crate::probes::ListRequest`; never reordered: a line list's
/// index names its `lines-lib-<k>.bin`).
/// The shim plants each list in the object it names; a hit there is recorded with a
/// `funcs.jsonl` line (`"inlined": true`), not in `inline.bin`, which is the program's.
pub const LIBRARY_INLINE_PROBES_FILE: &str = "inline-probes-libs.json";

/// What `trace run` found, after the run, about the non-system objects that a process of
/// the run loaded by `dlopen` and that got no inline probes (docs/native-recording.md,
/// "Inlined functions"): a JSON array of [`DlopenedList`], absent when there was none (within
/// version 3). Their lists are given during the run when the shim asks for them; this says
/// why one got none (no debug information, `trace run` too slow or gone, patched too late).
pub const DLOPENED_INLINE_PROBES_FILE: &str = "inline-probes-dlopened.json";

/// One object of [`DLOPENED_INLINE_PROBES_FILE`].
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct DlopenedList {
    /// The object, as `patch.json` names it.
    pub object: String,
    /// How many inlined entries its list has (0: its debug information lists none of its own
    /// code as inlined); absent: it has no list (no debug information, or it cannot be read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listed: Option<u64>,
    /// Its list was in [`LIBRARY_INLINE_PROBES_FILE`] by the end of the run, yet it was not
    /// probed: patched only after `dlopen` returned (the loader's hook was not used for it),
    /// when its code may already run, or listed for another process.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub had_list: bool,
    /// Why the shim had no list for it during the run (`patch.json`'s `unlisted`), if it said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unlisted: Option<Unlisted>,
}

/// The list of line-probe addresses `trace run --lines` writes into the trace directory for a
/// native program (docs/native-recording.md, "Lines that ran"): an [`InlineProbeList`] whose
/// offsets are the starts of the program's own `is_stmt` line-table rows and whose groups are
/// one per source line (file and line), read by the native shim.
pub const LINE_PROBES_FILE: &str = "line-probes.json";

/// The line-probe lists `trace run --lines` writes into the trace directory for the shared
/// libraries of the program that the native shim patches at start-up (those of
/// [`LIBRARY_INLINE_PROBES_FILE`]): a JSON array of [`InlineProbeList`] of
/// [`LINE_PROBES_FILE`]'s shape, one per library with statement rows of its own (within
/// version 3). The `k`th list's states go into `p<pid>/lines-lib-<k>.bin`
/// ([`crate::probes::lines_bin_file`]), as the program's go into [`LINES_BIN_FILE`].
pub const LIBRARY_LINE_PROBES_FILE: &str = "line-probes-libs.json";

/// Per process (`p<pid>/lines.bin`): one byte per offset of [`LINE_PROBES_FILE`], in its order:
/// [`LINE_UNKNOWN`], [`LINE_ARMED`], [`LINE_RAN`], [`LINE_OF_RAN`] or [`LINE_BLOCK_RAN`]. Written by the shim through a shared
/// mapping (a crash keeps what was set).
pub const LINES_BIN_FILE: &str = "lines.bin";
/// No probe was planted at the row: nothing is known.
pub const LINE_UNKNOWN: u8 = 0;
/// A probe was planted at the row and did not fire (its line did not run there).
pub const LINE_ARMED: u8 = 1;
/// The row ran: its probe fired (or, in a patched entry's moved bytes, its function was entered).
pub const LINE_RAN: u8 = 2;
/// Another row of the same line fired and this one's probe was disarmed: the line ran, this
/// row maybe not (so neither the other lines at its address nor the lines calling its inlined
/// code are known to have run).
pub const LINE_OF_RAN: u8 = 3;
/// The row has no probe of its own: the probe of an earlier row of its basic block fired
/// (the list's `covers`), and code falls through from there to this row. It ran, unless the
/// thread stopped inside the block (a crash, a signal whose handler jumped away, the process
/// exiting from another thread): the analyzer takes it as ran when the run's program exited
/// normally, as may have run otherwise.
pub const LINE_BLOCK_RAN: u8 = 4;

/// Per process (`p<pid>/inline.bin`): the inline probes of [`INLINE_PROBES_FILE`] that fired
/// and the function ids their hits were recorded under, written by the shim through a shared
/// mapping instead of a `funcs.jsonl` record per hit: [`INLINE_BIN_MAGIC`], the program's
/// run-time load address (`u64`, little-endian), then one little-endian `u32` per offset of the
/// list, in its order: 0 (did not fire, or its hit has a `funcs.jsonl` record), or the id
/// plus one. Read by [`crate::reader::inline_hit_records`].
pub const INLINE_BIN_FILE: &str = "inline.bin";
/// The first 8 bytes of [`INLINE_BIN_FILE`].
pub const INLINE_BIN_MAGIC: [u8; 8] = *b"SLTINL\x001";
/// The bytes before [`INLINE_BIN_FILE`]'s first slot: the magic and the load address.
pub const INLINE_BIN_HEADER: usize = 16;

/// [`INLINE_PROBES_FILE`]: the object it is for and the entries of its inlined code.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct InlineProbeList {
    /// The object, absolute, as `trace run` resolved the program.
    pub object: String,
    /// Its size and modification time (ns since the epoch): the shim plants nothing in an
    /// object that differs.
    pub size: u64,
    pub mtime_ns: i128,
    /// Entries of inlined code, as offsets from the object's first loaded page (link-time
    /// address minus the first `PT_LOAD`'s page-aligned `p_vaddr`), ascending, unique.
    pub offsets: Vec<u64>,
    /// Per offset (as many, or none: each offset on its own), its group: offsets of one group
    /// start code with the same chain of inlined functions in the same function (one node of
    /// a tree), so that when one fires the shim disarms the others.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<u32>,
    /// Per group (indexed by group; none: no group has one), the group of the nearest
    /// inlined function around it in the same function that has probes of its own: code of a
    /// group ran inside its parent's, so when one of its probes fires the shim disarms the
    /// parent's too (and theirs, up the chain). Inline lists only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub group_parents: Vec<Option<u32>>,
    /// Line lists only: per offset (as many, or none: every row has a probe of its own), how
    /// many of the rows after it its probe stands for. Those rows lie in the same basic block,
    /// reached only by falling through from it (no branch target, no call, no jump-table or
    /// address-taken target in between: tracer/src/blocks.rs), so they get no probe: when it
    /// fires they ran ([`LINE_BLOCK_RAN`]); while it is armed, they did not.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub covers: Vec<u32>,
    /// Inline lists only: the program's own functions the compiler inlined leaving no code of
    /// their own in the debug information (an abstract `DW_TAG_subprogram` no instance with an
    /// address refers to), whose running no probe can see; at most [`MAX_FOLDED`]. Added within
    /// version 3.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub folded: Vec<FoldedFunction>,
}

/// Most [`InlineProbeList::folded`] functions listed.
pub const MAX_FOLDED: usize = 256;

/// A function of [`InlineProbeList::folded`]: its bare name and where it is declared.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FoldedFunction {
    pub name: String,
    pub file: String,
    pub line: u32,
}
