//! The trace directory format (see `docs/trace-format.md`).
//!
//! - [`writer`]: what the shims use inside a traced process (mmap-backed, lock-free per thread).
//! - [`reader`]: what `trace info`/`trace dump` and `slice` use to read a trace back.
//! - [`meta`]: the JSON documents (`meta.json`, `proc.json`, `funcs.jsonl`).
//! - [`event`]: the binary encoding of thread streams.
//! - [`testrun`]: `tests.jsonl`, the tests a test runner ran in a process.
//! - [`clock`]: the shims' timestamp source (`CLOCK_MONOTONIC`, through the TSC where possible).
//! - [`escape`]: how `trace` and `slice` print the text a trace holds (names, argv) without
//!   letting control characters act on a terminal or a prompt's structure.
//! - [`command`]: the check of a command line before it is run and recorded (no NUL byte).
//! - [`patching`]: `SLICE_TRACE_PATCH`, entry patching's switch, read by `trace` and the native shim.
//! - [`probes`]: the native shim's probe lists (inline and line probes) and their hit files.

#![deny(unsafe_op_in_unsafe_fn)]

pub mod clock;
pub mod command;
pub mod escape;
pub mod event;
pub mod lock;
pub mod meta;
pub mod objects;
pub mod patching;
pub mod probes;
pub mod pyext;
pub mod reader;
pub mod testrun;
pub mod writer;

pub use event::{Event, StreamHeader, StreamTotals};
pub use meta::{
    ExitStatus, FileFingerprint, FuncKind, FuncRecord, ProcMeta, RecordedSymbol, SourcesDoc, Stopped, TraceMeta, SOURCES_FILE,
    TRACE_FORMAT_NAME, TRACE_FORMAT_VERSION,
};
pub use reader::{EventIter, Process, StreamSummary, ThreadStream, TraceDir};
pub use testrun::{TestFailure, TestOutcome, TestRun};

use std::path::{Path, PathBuf};

/// Run-level document at the root of a trace directory.
pub const META_FILE: &str = "meta.json";
/// Per-process document.
pub const PROC_META_FILE: &str = "proc.json";
/// Per-process function table.
pub const FUNCS_FILE: &str = "funcs.jsonl";
/// Environment variable through which `trace run` tells the shims where to write.
pub const ENV_TRACE_DIR: &str = "SLICE_TRACE_DIR";
/// Environment variable carrying recording options to the shims (comma-separated).
pub const ENV_TRACE_OPTIONS: &str = "SLICE_TRACE_OPTIONS";

/// How a reader of an error records a trace, for the errors that tell it to record one
/// ([`FormatError::message`]): with the `trace` command line ([`TraceRun`], the wording of these
/// errors' `Display`), or with a front end's own means (`slice mcp`'s `record` tool). The error
/// carries the facts (which directory, what is wrong with it); this words the remedy.
pub trait RecordHint {
    /// How to record a trace into `path`: `` `trace run -o x.d -- <command>` ``.
    fn record_into(&self, path: &Path) -> String;
    /// What writes trace directories, and where by default: `` `trace run` writes (default ./trace.d) ``.
    fn writes_traces(&self) -> String;
    /// Where the functions entry patching refused are named: `` `trace info --verbose` ``.
    fn patch_details(&self) -> String;
    /// How to record with an environment variable set: `SLICE_TRACE_PATCH=all`.
    fn with_env(&self, name: &str, value: &str) -> String;
}

/// The remedies as the `trace` command line says them.
#[derive(Debug, Clone, Copy, Default)]
pub struct TraceRun;

impl RecordHint for TraceRun {
    fn record_into(&self, path: &Path) -> String {
        format!("`trace run -o {} -- <command>`", path.display())
    }
    fn writes_traces(&self) -> String {
        "`trace run` writes (default ./trace.d)".into()
    }
    fn patch_details(&self) -> String {
        "`trace info --verbose`".into()
    }
    fn with_env(&self, name: &str, value: &str) -> String {
        format!("{name}={value}")
    }
}

/// Errors reading a trace directory (and, as `Io`, creating a process's files in one). Each names
/// the file, the problem and what to do (how to record a trace: [`FormatError::message`]).
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    #[error("{}", self.message(&TraceRun))]
    NotFound { path: PathBuf },
    #[error("{}", self.message(&TraceRun))]
    NotADirectory { path: PathBuf },
    #[error("{path}: the trace is still being recorded (a `trace run` is writing it now); ask again when that run has ended")]
    BeingRecorded { path: PathBuf },
    #[error("{}", self.message(&TraceRun))]
    NotATrace { path: PathBuf },
    #[error("{path}: written by a newer version of the trace format ({found}; this program reads up to {supported}); upgrade `slice`/`trace` to read it")]
    NewerVersion { path: PathBuf, found: u64, supported: u64 },
    #[error("{path}: invalid JSON: {msg}; the trace is damaged, record it again")]
    BadJson { path: PathBuf, msg: String },
    #[error("{path}: the stream header is truncated ({len} of 64 bytes); the file was cut short, record the trace again")]
    TruncatedHeader { path: PathBuf, len: u64 },
    #[error("{path}: not a thread stream (bad magic bytes); the trace is damaged, record it again")]
    BadMagic { path: PathBuf },
    #[error("{path}: the stream ends inside an event at byte {offset}; the events before it were read")]
    TruncatedEvent { path: PathBuf, offset: u64 },
    #[error("{path}: corrupt stream at byte {offset} ({what}); the events before it were read")]
    Corrupt { path: PathBuf, offset: u64, what: &'static str },
    #[error("{path}: the events do not add up to the totals its writer stored when closing it (decoded {decoded}; recorded {recorded}); the stream was damaged after the run, record the trace again")]
    TotalsMismatch { path: PathBuf, decoded: String, recorded: String },
    #[error(
        "{path}: line {line}: function id {id} is out of range (at most {max}); the function table is damaged, record the trace again"
    )]
    FuncIdOutOfRange { path: PathBuf, line: usize, id: u64, max: u64 },
    #[error("{path}: {msg}; the trace is damaged, record it again")]
    Damaged { path: PathBuf, msg: String },
    /// (Not a `#[source]`: the message holds it already, and `{:#}` would repeat it.)
    #[error("{path}: {error}")]
    Io { path: PathBuf, error: std::io::Error },
}

impl FormatError {
    /// The message with its remedy worded by `hint` (how its reader records a trace); the
    /// `Display` of an error is its message for [`TraceRun`].
    pub fn message(&self, hint: &dyn RecordHint) -> String {
        match self {
            FormatError::NotFound { path } => {
                format!("{}: no such trace directory (record one with {})", path.display(), hint.record_into(path))
            }
            FormatError::NotADirectory { path } => {
                format!("{}: not a directory; a trace is the directory that {}", path.display(), hint.writes_traces())
            }
            FormatError::NotATrace { path } => {
                format!("{}: not a trace directory (no valid meta.json); record one with {}", path.display(), hint.record_into(path))
            }
            // (No variant above may word itself with `message`: this would not end.)
            other => other.to_string(),
        }
    }

    pub(crate) fn io(path: &Path, source: std::io::Error) -> FormatError {
        FormatError::Io { path: path.to_path_buf(), error: source }
    }

    /// Whether the error leaves the events read before it usable (a damaged tail).
    pub fn is_damaged_tail(&self) -> bool {
        matches!(self, FormatError::TruncatedEvent { .. } | FormatError::Corrupt { .. } | FormatError::TotalsMismatch { .. })
    }
}

/// A path with `.` removed and `..` resolved lexically (DWARF paths are often `dir/./x.c`):
/// the one spelling `trace run` fingerprints a native source under and `slice` looks it up by.
pub fn normalize_path(p: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Tool;
    impl RecordHint for Tool {
        fn record_into(&self, path: &Path) -> String {
            format!("the tool, out {}", path.display())
        }
        fn writes_traces(&self) -> String {
            "the tool writes".into()
        }
        fn patch_details(&self) -> String {
            "its report".into()
        }
        fn with_env(&self, name: &str, value: &str) -> String {
            format!("env {name}: {value}")
        }
    }

    /// The `trace` command line's wording is the errors' `Display`; another front end words
    /// the same facts its own way, and errors without a remedy to record are the same for both.
    #[test]
    fn an_error_that_says_to_record_a_trace_words_it_for_its_reader() {
        let path = PathBuf::from("x.d");
        let e = FormatError::NotFound { path: path.clone() };
        assert_eq!(e.to_string(), "x.d: no such trace directory (record one with `trace run -o x.d -- <command>`)");
        assert_eq!(e.message(&Tool), "x.d: no such trace directory (record one with the tool, out x.d)");
        let e = FormatError::NotADirectory { path: path.clone() };
        assert_eq!(e.to_string(), "x.d: not a directory; a trace is the directory that `trace run` writes (default ./trace.d)");
        assert_eq!(e.message(&Tool), "x.d: not a directory; a trace is the directory that the tool writes");
        let e = FormatError::NotATrace { path: path.clone() };
        assert_eq!(e.to_string(), "x.d: not a trace directory (no valid meta.json); record one with `trace run -o x.d -- <command>`");
        assert_eq!(e.message(&Tool), "x.d: not a trace directory (no valid meta.json); record one with the tool, out x.d");
        let e = FormatError::BadMagic { path };
        assert_eq!(e.message(&Tool), e.to_string());
    }
}
