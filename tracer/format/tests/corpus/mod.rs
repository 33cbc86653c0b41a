//! The golden corpus of the event encoding (`tracer/format/tests/golden/`), read by every test
//! that checks an encoder or a decoder against it: this crate's `tests/golden.rs` (the Rust
//! writer and reader) and the native shim's `src/golden.rs` (hot.c's encoder and window.rs's
//! decoder), which includes this file with `#[path]`.
//!
//! A case is two files: `<case>.events`, the thread stream described as text (below), and
//! `<case>.ev`, the bytes of that stream as a closed stream file (the 64-byte header, then the
//! events). Every encoder must write those bytes for those events, and every decoder must read
//! them back as those events. `SLICE_BLESS=1 cargo test -p slice-trace-format --test golden`
//! rewrites the `.ev` files from the Rust writer (the definition; the reader's test in the same
//! run still compares the old files); run it again without the switch, and review the diff.
//!
//! The text, one item a line (`#` starts a comment; numbers are decimal, `_` allowed):
//!
//! ```text
//! stream native|python pid <n> tid <n> start <ns>   the header (first line)
//! call <id> at <ns> [reads <ns>]                     a call at that absolute time
//! resume <id> at <ns> [reads <ns>]                   a resume marker and its call
//! return at <ns> [reads <ns>]                        a return
//! line <id> <line>                                   an executed-line event
//! name <text to the end of the line>                 a thread-name event
//! ```
//!
//! `reads` is the time a reader gives the event when it differs from the time written: a time
//! before the previous event's is written as delta 0 and reads as that previous time. The
//! parser checks that a case says so exactly where that happens.

use std::path::{Path, PathBuf};
use trace_format::event::{FLAG_NATIVE, FLAG_PYTHON};
use trace_format::Event;

/// The writer's window for every case (its smallest: no case reaches a window's end).
pub const WINDOW: usize = 64 << 10;

/// What a case asks an encoder to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    Call { func: u32, ts: u64 },
    Resume { func: u32, ts: u64 },
    Return { ts: u64 },
    Line { func: u32, line: u32 },
    Name(String),
}

/// One line of a case: what is written, and what a reader reads back.
#[derive(Debug, Clone)]
pub struct Step {
    pub op: Op,
    pub read: Event,
}

#[derive(Debug)]
pub struct Case {
    /// The `.ev` file.
    pub bytes_path: PathBuf,
    pub flags: u16,
    pub pid: u32,
    pub tid: u64,
    pub start_ns: u64,
    pub steps: Vec<Step>,
}

/// The corpus directory, from the directory of this crate's manifest.
pub fn dir(format_manifest_dir: &Path) -> PathBuf {
    trace_format::normalize_path(&format_manifest_dir.join("tests/golden"))
}

/// Every case of the corpus, by name. Panics (naming the file and line) on a description that
/// does not parse: the corpus is part of the tests.
pub fn load(dir: &Path) -> Vec<Case> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "events"))
        .collect();
    paths.sort();
    assert!(!paths.is_empty(), "{}: no *.events case", dir.display());
    paths.iter().map(|p| parse(p)).collect()
}

fn num<T: std::str::FromStr>(word: Option<&str>, what: &str, at: &str) -> T {
    let w = word.unwrap_or_else(|| panic!("{at}: {what} missing"));
    w.replace('_', "").parse().unwrap_or_else(|_| panic!("{at}: {what}: {w:?} is not a number"))
}

fn parse(path: &Path) -> Case {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut case: Option<Case> = None;
    let mut base = 0u64;
    for (i, raw) in text.lines().enumerate() {
        let at = format!("{}:{}", path.display(), i + 1);
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let mut words = line.split_whitespace();
        let head = words.next().unwrap_or("");
        let Some(c) = case.as_mut() else {
            assert_eq!(head, "stream", "{at}: a case starts with its `stream` line");
            let flags = match words.next() {
                Some("native") => FLAG_NATIVE,
                Some("python") => FLAG_PYTHON,
                w => panic!("{at}: stream kind {w:?} (native or python)"),
            };
            let mut field = |name: &str| {
                assert_eq!(words.next(), Some(name), "{at}: expected `{name}`");
                words.next()
            };
            let (pid, tid, start_ns) = (num(field("pid"), "pid", &at), num(field("tid"), "tid", &at), num(field("start"), "start", &at));
            base = start_ns;
            case = Some(Case { bytes_path: path.with_extension("ev"), flags, pid, tid, start_ns, steps: Vec::new() });
            continue;
        };
        // `at <ns> [reads <ns>]`: the time written and the time read.
        let mut timed = |words: &mut std::str::SplitWhitespace| -> (u64, u64) {
            assert_eq!(words.next(), Some("at"), "{at}: expected `at <ns>`");
            let ts: u64 = num(words.next(), "time", &at);
            let reads = match words.next() {
                Some("reads") => Some(num::<u64>(words.next(), "time read", &at)),
                None => None,
                Some(w) => panic!("{at}: unexpected {w:?}"),
            };
            let expect = if ts > base { ts } else { base };
            match reads {
                None => assert!(ts >= base, "{at}: {ts} is before the previous time {base}: say `reads {base}`"),
                Some(r) => assert!(ts < base && r == base, "{at}: `reads` is only for a time before the previous one, and reads {base}"),
            }
            base = expect;
            (ts, expect)
        };
        let step = match head {
            "call" | "resume" => {
                let func: u32 = num(words.next(), "function id", &at);
                let (ts, read) = timed(&mut words);
                if head == "call" {
                    Step { op: Op::Call { func, ts }, read: Event::Call { func, ts: read } }
                } else {
                    Step { op: Op::Resume { func, ts }, read: Event::Resume { func, ts: read } }
                }
            }
            "return" => {
                let (ts, read) = timed(&mut words);
                Step { op: Op::Return { ts }, read: Event::Return { ts: read } }
            }
            "line" => {
                let (func, line) = (num(words.next(), "function id", &at), num(words.next(), "line", &at));
                assert_eq!(words.next(), None, "{at}: `line <id> <line>`");
                Step { op: Op::Line { func, line }, read: Event::Line { func, line } }
            }
            "name" => {
                let name = line["name".len()..].trim().to_string();
                Step { op: Op::Name(name.clone()), read: Event::ThreadName(name) }
            }
            w => panic!("{at}: unknown item {w:?}"),
        };
        c.steps.push(step);
    }
    case.unwrap_or_else(|| panic!("{}: no `stream` line", path.display()))
}

impl Case {
    /// The committed bytes (the `.ev` file).
    pub fn bytes(&self) -> Vec<u8> {
        std::fs::read(&self.bytes_path).unwrap_or_else(|e| {
            panic!("{}: {e} (SLICE_BLESS=1 cargo test -p slice-trace-format --test golden writes it)", self.bytes_path.display())
        })
    }

    /// Calls (resumes included, as the writer counts them), returns, and the last time read.
    pub fn totals(&self) -> (u64, u64, u64) {
        let (mut calls, mut returns, mut end) = (0, 0, self.start_ns);
        for s in &self.steps {
            match s.read {
                Event::Call { ts, .. } | Event::Resume { ts, .. } => (calls, end) = (calls + 1, ts),
                Event::Return { ts } => (returns, end) = (returns + 1, ts),
                _ => {}
            }
        }
        (calls, returns, end)
    }

    /// Whether every event is a call, resume or return: what the native shim writes into the
    /// window that window.rs decodes.
    pub fn only_timed(&self) -> bool {
        self.steps.iter().all(|s| matches!(s.op, Op::Call { .. } | Op::Resume { .. } | Op::Return { .. }))
    }
}

/// `a` and `b` equal, or a panic naming the case, the first differing offset and the bytes
/// around it.
pub fn assert_same_bytes(case: &Case, who: &str, got: &[u8], want: &[u8]) {
    if got == want {
        return;
    }
    let at = got.iter().zip(want).position(|(x, y)| x != y).unwrap_or(got.len().min(want.len()));
    let around = |b: &[u8]| format!("{:02x?}", &b[at.saturating_sub(4)..(at + 8).min(b.len())]);
    panic!(
        "{}: {who} wrote {} bytes, the corpus has {}; first difference at byte {at}: {} against {} (from byte {})",
        case.bytes_path.display(),
        got.len(),
        want.len(),
        around(got),
        around(want),
        at.saturating_sub(4)
    );
}
