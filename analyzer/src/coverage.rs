//! Which source lines ran: the line events of a trace (format version 3) and the lines each
//! Python code object can execute (`funcs.jsonl`'s `code_lines`), gathered per source file
//! over every process and thread of a trace.
//!
//! A line is [`LineState::Ran`] when some process reported it, [`LineState::NotRun`] when a
//! code object that recorded lines holds code there but no process reported it, and
//! [`LineState::Unknown`] otherwise: a blank line, a comment, a continuation line without code
//! of its own, the body of a nested function that never ran, any line of a file whose
//! processes did not record lines (Python 3.9–3.11 without `trace run --lines`, native code
//! without it: native lines come from line probes, [`crate::native::lines`]),
//! and the unreported lines of a function whose recorder stopped reporting its lines early
//! (a line event with line 0, `docs/trace-format.md`).
//! Only `NotRun` lines can make the prompt elide code ([`crate::prompt`]), so a trace without
//! line data shows every function whole, as before.

use crate::symbols::Function;
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::path::{Path, PathBuf};
use trace_format::{FuncKind, FuncRecord};

/// What a trace says about one source line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineState {
    /// Some process executed code on it.
    Ran,
    /// A code object that recorded lines has code on it, and no process executed it.
    NotRun,
    /// Nothing known: no code of a code object that recorded lines, or no line data.
    Unknown,
    /// Native code only: whether it ran cannot be told, though code around it ran. The probe
    /// that would tell was disarmed when another row of its line ran, and this line calls the
    /// inlined code at that row or shares its address ([`crate::native::lines`]). Never
    /// elided, like a line that ran.
    MayHaveRun,
}

impl LineState {
    /// Whether the line ran or may have: code the prompt never elides as not run.
    pub fn may_have_run(self) -> bool {
        matches!(self, LineState::Ran | LineState::MayHaveRun)
    }
}

#[derive(Debug, Clone, Default)]
struct FileLines {
    /// Lines holding code of a code object that recorded lines.
    code: HashSet<u32>,
    /// Lines some process executed.
    ran: HashSet<u32>,
    /// Lines of functions whose line reporting stopped early in some process: not reported
    /// there does not mean not run.
    uncertain: HashSet<u32>,
    /// Native lines that may have run ([`LineState::MayHaveRun`]).
    maybe: HashSet<u32>,
}

/// Executed lines per source file (the union over the trace's processes).
#[derive(Debug, Clone, Default)]
pub struct LineCoverage {
    files: HashMap<PathBuf, FileLines>,
}

impl LineCoverage {
    /// Add one process: its function records (for `code_lines`), `index` from a record's id to
    /// the index into `funcs` (the renumbering of [`crate::symbols::ResolvedProcess::ids`]),
    /// its resolved functions (the files of the ids that line events name) and the (function
    /// index, line) pairs its streams reported. Ids without a Python function are ignored (a damaged or foreign stream).
    pub fn add_process<'a>(
        &mut self,
        records: impl IntoIterator<Item = &'a FuncRecord>,
        index: impl Fn(u32) -> Option<u32>,
        funcs: &[Function],
        lines: impl IntoIterator<Item = (u32, u32)>,
    ) {
        let lines: Vec<(u32, u32)> = lines.into_iter().collect();
        // Line 0: the recorder stopped reporting that function's lines before all had run.
        let stopped: HashSet<u32> = lines.iter().filter(|&&(_, l)| l == 0).map(|&(f, _)| f).collect();
        for rec in records {
            if let FuncKind::Python { file, code_lines: Some(code), .. } = &rec.kind {
                let entry = self.files.entry(PathBuf::from(file)).or_default();
                entry.code.extend(code.iter().copied());
                if index(rec.id).is_some_and(|i| stopped.contains(&i)) {
                    entry.uncertain.extend(code.iter().copied());
                }
            }
        }
        for (func, line) in lines {
            if line == 0 {
                continue;
            }
            let Some(file) = funcs.get(func as usize).and_then(|f| f.file.as_ref()) else { continue };
            // Every id a line event names had its record written first; a file seen only
            // through line events (its record was lost) still counts what ran.
            let entry = match self.files.get_mut(file) {
                Some(e) => e,
                None => self.files.entry(file.clone()).or_default(),
            };
            entry.ran.insert(line);
        }
    }

    /// One statement line of native code that had a line probe (`trace run --lines`,
    /// [`crate::native::lines`]): it holds code, and `ran` says whether some process ran it.
    pub fn add_native_line(&mut self, file: &Path, line: u32, ran: bool) {
        let entry = match self.files.get_mut(file) {
            Some(e) => e,
            None => self.files.entry(file.to_path_buf()).or_default(),
        };
        entry.code.insert(line);
        if ran {
            entry.ran.insert(line);
        }
    }

    /// A line of native code that may have run ([`LineState::MayHaveRun`]), unless some process
    /// ran it.
    pub fn add_native_maybe(&mut self, file: &Path, line: u32) {
        let entry = match self.files.get_mut(file) {
            Some(e) => e,
            None => self.files.entry(file.to_path_buf()).or_default(),
        };
        entry.maybe.insert(line);
    }

    /// Whether any process recorded lines of `file`.
    pub fn knows(&self, file: &Path) -> bool {
        self.files.get(file).is_some_and(|f| !f.code.is_empty())
    }

    /// The state of `line` of `file`.
    pub fn state(&self, file: &Path, line: u32) -> LineState {
        match self.files.get(file) {
            Some(f) if f.ran.contains(&line) => LineState::Ran,
            Some(f) if f.maybe.contains(&line) => LineState::MayHaveRun,
            Some(f) if f.code.contains(&line) && !f.uncertain.contains(&line) => LineState::NotRun,
            _ => LineState::Unknown,
        }
    }

    /// The states of lines `first..first + n` of `file`, or `None` when no process recorded
    /// lines of it.
    pub fn states(&self, file: &Path, first: u32, n: usize) -> Option<Vec<LineState>> {
        if !self.knows(file) {
            return None;
        }
        Some((0..n as u32).map(|i| self.state(file, first + i)).collect())
    }

    /// This coverage with the lines of `files` that ran replaced by `ran` (theirs only): the
    /// lines some tests ran, where their process reported lines per test. The other files keep
    /// what the whole run ran (the standard library's and the runner's lines are reported once
    /// per process, not per test), and so do the lines the recorder marked uncertain.
    pub fn with_ran_in(&self, files: &std::collections::HashSet<PathBuf>, ran: &[(PathBuf, u32)]) -> LineCoverage {
        let mut out = self.clone();
        for (path, f) in out.files.iter_mut() {
            if files.contains(path) {
                f.ran.clear();
            }
        }
        for (path, line) in ran {
            if let Some(f) = out.files.get_mut(path).filter(|_| files.contains(path)) {
                f.ran.insert(*line);
            }
        }
        out
    }

    /// Whether the trace holds any line data.
    pub fn is_empty(&self) -> bool {
        self.files.values().all(|f| f.code.is_empty())
    }
}

/// Sorted line numbers as ranges: `3, 5-7, 10`.
pub fn line_ranges(lines: &[u32]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let mut j = i;
        while j + 1 < lines.len() && lines[j + 1] == lines[j] + 1 {
            j += 1;
        }
        out.push(if i == j { lines[i].to_string() } else { format!("{}-{}", lines[i], lines[j]) });
        i = j + 1;
    }
    out.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::py_funcs;

    fn record(id: u32, file: &str, code_lines: Option<Vec<u32>>) -> Option<FuncRecord> {
        Some(FuncRecord {
            id,
            kind: FuncKind::Python {
                file: file.into(),
                qualname: "f".into(),
                name: "f".into(),
                first_line: 1,
                last_line: 9,
                code_lines,
                made_in: None,
            },
        })
    }

    /// Python functions named `names`, all in `/app/m.py`.
    fn in_m(names: &[&str]) -> Vec<Function> {
        let mut funcs = py_funcs(names);
        for f in &mut funcs {
            f.file = Some(PathBuf::from("/app/m.py"));
        }
        funcs
    }

    /// A test's lines replace the run's in the files of the code under test; a runner's file
    /// keeps the whole run's.
    #[test]
    fn a_tests_lines_replace_the_runs_in_the_files_given() {
        let mut c = LineCoverage::default();
        for (file, line, ran) in [("/app/m.py", 2, true), ("/app/m.py", 3, true), ("/app/m.py", 4, false), ("/r/runner.py", 7, true)] {
            c.add_native_line(Path::new(file), line, ran);
        }
        let files: std::collections::HashSet<PathBuf> = [PathBuf::from("/app/m.py")].into_iter().collect();
        let t = c.with_ran_in(&files, &[(PathBuf::from("/app/m.py"), 3), (PathBuf::from("/r/runner.py"), 8)]);
        let m = Path::new("/app/m.py");
        assert_eq!(t.states(m, 2, 3), Some(vec![LineState::NotRun, LineState::Ran, LineState::NotRun]));
        assert_eq!(t.state(Path::new("/r/runner.py"), 7), LineState::Ran);
        assert_eq!(t.state(Path::new("/r/runner.py"), 8), LineState::Unknown);
        // The run's own coverage is unchanged.
        assert_eq!(c.state(m, 2), LineState::Ran);
    }

    #[test]
    fn lines_are_ran_not_run_or_unknown_over_every_process() {
        let funcs = in_m(&["f", "g"]);
        let mut c = LineCoverage::default();
        assert!(c.is_empty());
        c.add_process(
            [record(0, "/app/m.py", Some(vec![2, 3, 5])), record(1, "/app/m.py", None)].iter().flatten(),
            Some,
            &funcs,
            [(0, 2), (0, 2), (7, 3)],
        );
        assert_eq!(c.state(Path::new("/app/m.py"), 2), LineState::Ran);
        assert_eq!(c.state(Path::new("/app/m.py"), 3), LineState::NotRun, "an id past the table is ignored");
        assert_eq!(c.state(Path::new("/app/m.py"), 4), LineState::Unknown);
        // A second process ran line 5: the union.
        c.add_process([record(0, "/app/m.py", Some(vec![5]))].iter().flatten(), Some, &funcs, [(1, 5)]);
        assert_eq!(c.state(Path::new("/app/m.py"), 5), LineState::Ran);
        assert_eq!(
            c.states(Path::new("/app/m.py"), 2, 4),
            Some(vec![LineState::Ran, LineState::NotRun, LineState::Unknown, LineState::Ran])
        );
        assert_eq!(c.states(Path::new("/app/other.py"), 1, 3), None);
        assert!(!c.is_empty());
    }

    #[test]
    fn a_function_whose_line_reporting_stopped_early_has_no_lines_known_not_to_have_run() {
        let funcs = in_m(&["f", "g"]);
        let mut c = LineCoverage::default();
        // f stopped after reporting line 2; g reported line 7 only and did not stop.
        c.add_process(
            [record(0, "/app/m.py", Some(vec![2, 3, 4])), record(1, "/app/m.py", Some(vec![7, 8]))].iter().flatten(),
            Some,
            &funcs,
            [(0, 2), (0, 0), (1, 7)],
        );
        let st = |c: &LineCoverage, l| c.state(Path::new("/app/m.py"), l);
        assert_eq!((st(&c, 2), st(&c, 3), st(&c, 4)), (LineState::Ran, LineState::Unknown, LineState::Unknown));
        assert_eq!((st(&c, 7), st(&c, 8)), (LineState::Ran, LineState::NotRun));
        assert_eq!(st(&c, 0), LineState::Unknown);
        // Another process that recorded f to the end does not make f's lines known: the first
        // may have run them after it stopped reporting.
        c.add_process([record(0, "/app/m.py", Some(vec![2, 3, 4]))].iter().flatten(), Some, &funcs, [(0, 2)]);
        assert_eq!(st(&c, 3), LineState::Unknown);
    }

    #[test]
    fn without_code_lines_nothing_is_known_not_to_have_run() {
        let funcs = in_m(&["f"]);
        let mut c = LineCoverage::default();
        c.add_process([record(0, "/app/m.py", None)].iter().flatten(), Some, &funcs, [(0, 2)]);
        assert!(!c.knows(Path::new("/app/m.py")));
        assert_eq!(c.states(Path::new("/app/m.py"), 1, 3), None);
    }

    #[test]
    fn line_numbers_read_as_ranges() {
        assert_eq!(line_ranges(&[3, 5, 6, 7, 10]), "3, 5-7, 10");
        assert_eq!(line_ranges(&[7]), "7");
        assert_eq!(line_ranges(&[]), "");
    }
}
