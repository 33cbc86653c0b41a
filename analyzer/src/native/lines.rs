//! Lines that ran, for native code (`trace run --lines`, docs/native-recording.md, "Lines that
//! ran"): per object probed (the program, `line-probes.json`, and each of its own shared
//! libraries, `line-probes-libs.json`), where each of its statement lines starts and each
//! process's states of those rows (`lines.bin`, `lines-lib-<k>.bin`: per row, no probe, armed,
//! ran, its line ran, ran by its block's earlier probe), made into [`LineCoverage`]; each
//! object's the same way.
//!
//! A row without a probe of its own, which an earlier row of its basic block stood for
//! ([`LINE_BLOCK_RAN`] once that one fired), ran when the run's program exited normally (no
//! thread can have stopped between the two rows: nothing between them branches, calls or
//! returns); after a crash, a kill, or a run `trace` stopped it may have run
//! ([`crate::coverage::LineState::MayHaveRun`]), as may the call sites of its inlined code.
//!
//! A row that ran in some process makes its lines [`crate::coverage::LineState::Ran`]: every
//! line with an `is_stmt` row at its address (code reaching the address reaches each of them),
//! and the call sites of the inlined functions running there (a row of inlined code that ran
//! ran the lines calling it). A row disarmed because another row of its line ran makes only
//! that line (the last row at its address, the one `trace` grouped it by) ran; the other lines
//! at its address and the call sites of the inlined functions there may have run
//! ([`crate::coverage::LineState::MayHaveRun`]: never elided). A row that was
//! armed in some process and ran in none is code that did not run
//! ([`crate::coverage::LineState::NotRun`], unless a line of it ran elsewhere); a row no
//! process planted says nothing. Files and lines come from this analyzer's own reading of the
//! object's line table (the path as [`super::symbolize`] gives a function's file, so that a
//! function's lines are found under its `file`).

use crate::coverage::LineCoverage;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use trace_format::meta::{InlineProbeList, LINE_ARMED, LINE_BLOCK_RAN, LINE_OF_RAN, LINE_RAN, LINE_UNKNOWN};

/// Add the native lines of the trace at `root` (its process directories `procs`) to `coverage`:
/// the program's and its libraries'. Nothing for an object without a line list or whose
/// lines no process saved; a warning when the object changed since the run or the files
/// disagree.
pub fn add_native_lines<'a>(
    root: &Path,
    procs: impl IntoIterator<Item = &'a Path>,
    coverage: &mut LineCoverage,
    warnings: &mut Vec<String>,
) {
    let procs: Vec<&Path> = procs.into_iter().collect();
    let ended = trace_format::reader::read_meta(root).ok().is_some_and(|m| ended_normally(&m));
    for (list, file) in trace_format::probes::line_lists(root) {
        add_object_lines(&list, &file, &procs, ended, coverage, warnings);
    }
}

/// Whether the run's program exited on its own with an exit code (not killed by a signal,
/// not stopped by `trace`): then a row its block's earlier probe stood for
/// ([`LINE_BLOCK_RAN`]) ran, since no thread stopped inside a block; otherwise it may have run
/// (a crash inside the block, before the row).
fn ended_normally(meta: &trace_format::meta::TraceMeta) -> bool {
    meta.stopped.is_none() && meta.exit.is_some_and(|e| e.code.is_some() && e.signal.is_none())
}

/// [`add_native_lines`] for one object's `list`, whose states each process keeps in `file`;
/// `ended`: the run ended normally ([`ended_normally`]).
fn add_object_lines(
    list: &InlineProbeList,
    file: &str,
    procs: &[&Path],
    ended: bool,
    coverage: &mut LineCoverage,
    warnings: &mut Vec<String>,
) {
    let n = list.offsets.len();
    let mut states = vec![LINE_UNKNOWN; n];
    let mut any = false;
    for dir in procs {
        let file = dir.join(file);
        let Ok(bytes) = read_capped(&file, n as u64) else { continue };
        if bytes.len() != n {
            warnings.push(format!("{}: {} bytes for {n} listed lines, ignored", file.display(), bytes.len()));
            continue;
        }
        any = true;
        for (s, b) in states.iter_mut().zip(bytes) {
            if rank(b) > rank(*s) {
                *s = b;
            }
        }
    }
    if !any {
        return;
    }
    // A row its block's probe stood for: ran when the run ended normally; otherwise a thread
    // may have stopped inside the block before reaching it.
    for s in &mut states {
        if *s == LINE_BLOCK_RAN {
            *s = if ended { LINE_RAN } else { LINE_BLOCK_RAN };
        }
    }
    let object = Path::new(&list.object);
    let unchanged = std::fs::metadata(object).ok().is_some_and(|m| {
        let t = m.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok()).map(|d| d.as_nanos() as i128);
        m.len() == list.size && t == Some(list.mtime_ns)
    });
    if !unchanged {
        warnings.push(format!("{}: changed since the run; the lines that ran are not used (functions are shown whole)", object.display()));
        return;
    }
    let wanted: Vec<(usize, u64)> =
        states.iter().enumerate().filter(|(_, s)| **s != LINE_UNKNOWN).map(|(k, _)| (k, list.offsets[k])).collect();
    let lines = match lines_at(object, &wanted.iter().map(|w| w.1).collect::<Vec<_>>()) {
        Ok(l) => l,
        Err(e) => {
            warnings.push(format!("{}: cannot read its line table ({e}); the lines that ran are not used", object.display()));
            return;
        }
    };
    for &(k, off) in &wanted {
        let Some(at) = lines.get(&off) else { continue };
        match states[k] {
            // The last row at the address is the line it was grouped by; the other lines there
            // may have run.
            LINE_OF_RAN => {
                if let Some(((file, line), others)) = at.split_last() {
                    coverage.add_native_line(file, *line, true);
                    for (file, line) in others {
                        coverage.add_native_maybe(file, *line);
                    }
                }
            }
            LINE_BLOCK_RAN => {
                for (file, line) in at {
                    coverage.add_native_maybe(file, *line);
                }
            }
            s => {
                for (file, line) in at {
                    coverage.add_native_line(file, *line, s == LINE_RAN);
                }
            }
        }
    }
    // A row that ran inside inlined code ran the line of each call site around it too: in
    // optimized code a line's own row can be only the end of its statement (hexyl's
    // `terminal_size`: `if let Some(size) = terminal_size_of(stdout())` has one row, the test
    // of the result, skipped when the inlined call fails, while the call's rows ran).
    let ran: Vec<u64> = wanted.iter().filter(|w| states[w.0] == LINE_RAN).map(|w| w.1).collect();
    for (file, line) in call_sites(object, &ran) {
        coverage.add_native_line(&file, line, true);
    }
    // A row of inlined code disarmed because another row of its line ran (another inlined
    // copy of the same callee): whether this copy ran is not known, so neither is whether the
    // lines calling it did. Without this, a statement whose only row sits on a path its
    // inlined call skipped (ripgrep's `m_ignore = ig.inner.ignore_matcher.matched(..)`, whose
    // inlined `matched` returns early when there is no `.ignore` file) read as not run.
    let of_ran: Vec<u64> = wanted.iter().filter(|w| matches!(states[w.0], LINE_OF_RAN | LINE_BLOCK_RAN)).map(|w| w.1).collect();
    for (file, line) in call_sites(object, &of_ran) {
        coverage.add_native_maybe(&file, line);
    }
}

/// The call sites (file, line) of the inlined functions running at each of `offsets` of the
/// object at `path` (the symbolizer's chains), each once.
fn call_sites(path: &Path, offsets: &[u64]) -> Vec<(PathBuf, u32)> {
    let Ok(obj) = symbolize::functions::ObjectFile::open(path) else { return Vec::new() };
    // Offsets are from the first page: the link-time address of an object loaded at 0.
    let links: Vec<u64> = offsets.iter().map(|&o| obj.link_address(o, 0)).collect();
    obj.inlined_call_sites(path, &links)
}

fn read_capped(file: &Path, cap: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let f = std::fs::File::open(file)?;
    let mut out = Vec::new();
    f.take(cap + 1).read_to_end(&mut out)?;
    Ok(out)
}

/// How much a row's state says, for the union over processes: ran, its line ran, armed, nothing.
fn rank(state: u8) -> u8 {
    match state {
        LINE_RAN => 4,
        LINE_BLOCK_RAN => 3,
        LINE_OF_RAN => 2,
        LINE_ARMED => 1,
        _ => 0,
    }
}

/// The (file, line) of the `is_stmt` line-table rows at each of `offsets` (from the object's
/// first page) of the object at `path`, in the table's order (the last is the one a lookup of
/// the address finds).
fn lines_at(path: &Path, offsets: &[u64]) -> Result<HashMap<u64, Vec<(PathBuf, u32)>>, symbolize::lines::LinesError> {
    let mut wanted: Vec<u64> = offsets.to_vec();
    wanted.sort_unstable();
    let rows = symbolize::lines::statement_rows(path, |_| true, |o| wanted.binary_search(&o).is_ok(), usize::MAX)?;
    let mut out: HashMap<u64, Vec<(PathBuf, u32)>> = HashMap::new();
    for row in rows {
        let at = out.entry(row.offset).or_default();
        let line = (row.file.to_path_buf(), row.line);
        at.retain(|l| *l != line);
        at.push(line);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coverage::LineState;
    use trace_format::meta::{LIBRARY_LINE_PROBES_FILE, LINES_BIN_FILE, LINE_PROBES_FILE};

    /// A line list of `exe` (its size and time, so it is taken for this build) with `offsets`,
    /// one group (line) each.
    fn list_of(exe: &std::path::Path, offsets: Vec<u64>) -> InlineProbeList {
        let meta = std::fs::metadata(exe).unwrap();
        let mtime_ns = meta.modified().unwrap().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as i128;
        let groups = (0..offsets.len() as u32).collect();
        InlineProbeList { object: exe.to_string_lossy().into_owned(), size: meta.len(), mtime_ns, offsets, groups, ..Default::default() }
    }

    /// `prog.c` (`f` of four statement lines, called by `main`) built `-g -O0` in `dir`.
    fn build_prog(dir: &std::path::Path) -> std::path::PathBuf {
        let src = dir.join("prog.c");
        std::fs::write(&src, "int f(int x) {\n  int r = x;\n  r += 2;\n  r *= 3;\n  return r;\n}\nint main(int c, char **v) {\n  (void)v;\n  return f(c);\n}\n").unwrap();
        let exe = dir.join("prog");
        let st = std::process::Command::new("cc").args(["-g", "-O0", "-o"]).arg(&exe).arg(&src).status().expect("run cc");
        assert!(st.success());
        exe
    }

    /// A C program built here: its line list (as `trace` lists it, one row per statement
    /// line), two processes' bytes, and the coverage they give: ran in either, not run in
    /// both, unknown where no probe was.
    #[test]
    fn rows_ran_in_any_process_ran_and_armed_rows_are_code_that_did_not_run() {
        let d = tempfile::tempdir().unwrap();
        let exe = build_prog(d.path());
        let src = d.path().join("prog.c");
        // The rows of lines 2, 3 and 4 (addr2line's numbering is the line table's).
        let out = std::process::Command::new("objdump").arg("--dwarf=decodedline").arg(&exe).output().expect("run objdump");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let row = |line: u32| -> u64 {
            text.lines()
                .filter_map(|l| {
                    let f: Vec<&str> = l.split_whitespace().collect();
                    (f.len() >= 3 && f[0] == "prog.c" && f[1] == line.to_string())
                        .then(|| u64::from_str_radix(f[2].trim_start_matches("0x"), 16).ok())
                        .flatten()
                })
                .next()
                .unwrap_or_else(|| panic!("a row of line {line}: {text}"))
        };
        let list = list_of(&exe, vec![row(2), row(3), row(4)]);
        std::fs::write(d.path().join(LINE_PROBES_FILE), serde_json::to_vec(&list).unwrap()).unwrap();
        let (p1, p2) = (d.path().join("p1"), d.path().join("p2"));
        for (p, bytes) in [(&p1, [2u8, 1, 0]), (&p2, [1, 1, 0])] {
            std::fs::create_dir(p).unwrap();
            std::fs::write(p.join(LINES_BIN_FILE), bytes).unwrap();
        }
        let mut c = LineCoverage::default();
        let mut warnings = Vec::new();
        add_native_lines(d.path(), [p1.as_path(), p2.as_path()], &mut c, &mut warnings);
        assert_eq!(warnings, Vec::<String>::new());
        let file = trace_format::normalize_path(&src);
        assert_eq!(c.states(&file, 2, 3), Some(vec![LineState::Ran, LineState::NotRun, LineState::Unknown]));
        // The same object as the second of the libraries' lists: its states are read from its
        // own file (`lines-lib-1.bin`), not from the program's `lines.bin` (all armed here).
        let d2 = tempfile::tempdir().unwrap();
        let other = InlineProbeList { object: "/nonexistent/libother.so".into(), offsets: vec![0], groups: vec![0], ..Default::default() };
        std::fs::write(d2.path().join(LIBRARY_LINE_PROBES_FILE), serde_json::to_vec(&[other, list.clone()]).unwrap()).unwrap();
        let (q1, q2) = (d2.path().join("p1"), d2.path().join("p2"));
        for (p, bytes) in [(&q1, [2u8, 1, 0]), (&q2, [1, 1, 0])] {
            std::fs::create_dir(p).unwrap();
            std::fs::write(p.join("lines-lib-1.bin"), bytes).unwrap();
            std::fs::write(p.join(LINES_BIN_FILE), [1u8; 3]).unwrap();
        }
        let mut c = LineCoverage::default();
        add_native_lines(d2.path(), [q1.as_path(), q2.as_path()], &mut c, &mut warnings);
        assert_eq!(warnings, Vec::<String>::new());
        assert_eq!(c.states(&file, 2, 3), Some(vec![LineState::Ran, LineState::NotRun, LineState::Unknown]));
        // The program rebuilt since: nothing is used.
        std::fs::write(&exe, b"changed").unwrap();
        let mut c = LineCoverage::default();
        add_native_lines(d.path(), [p1.as_path()], &mut c, &mut warnings);
        assert!(c.is_empty());
        assert!(warnings[0].contains("changed since the run"), "{warnings:?}");
    }

    /// A row its block's earlier probe stood for (`LINE_BLOCK_RAN`) ran when the run's program
    /// exited with a code; after a crash (killed by a signal) or with no recorded end it may
    /// have run: a thread can have stopped inside the block before it.
    #[test]
    fn a_row_run_by_its_blocks_probe_ran_after_a_normal_exit_and_may_have_after_a_crash() {
        let d = tempfile::tempdir().unwrap();
        let exe = build_prog(d.path());
        let src = d.path().join("prog.c");
        let offsets = symbolize::lines::statement_rows(&exe, |f| f.ends_with("prog.c"), |_| true, 100).expect("rows");
        let at = |line: u32| offsets.iter().find(|r| r.line == line).map(|r| r.offset).expect("a row");
        // Line 2's probe stands for lines 3 and 4.
        let list = InlineProbeList { covers: vec![2, 0, 0], ..list_of(&exe, vec![at(2), at(3), at(4)]) };
        std::fs::write(d.path().join(LINE_PROBES_FILE), serde_json::to_vec(&list).unwrap()).unwrap();
        let p = d.path().join("p1");
        std::fs::create_dir(&p).unwrap();
        std::fs::write(p.join(LINES_BIN_FILE), [LINE_RAN, LINE_BLOCK_RAN, LINE_BLOCK_RAN]).unwrap();
        let file = trace_format::normalize_path(&src);
        let states = |exit: &str| {
            let meta = format!(
                r#"{{"format":"slice-trace","version":3,"tool":"test","argv":["prog"],"cwd":"/","target_kind":"native","start_unix_ms":0{exit}}}"#
            );
            std::fs::write(d.path().join("meta.json"), meta).unwrap();
            let mut c = LineCoverage::default();
            let mut warnings = Vec::new();
            add_native_lines(d.path(), [p.as_path()], &mut c, &mut warnings);
            assert_eq!(warnings, Vec::<String>::new());
            c.states(&file, 2, 3)
        };
        use LineState::{MayHaveRun, Ran};
        assert_eq!(states(r#","exit":{"code":3}"#), Some(vec![Ran, Ran, Ran]), "exited with a code");
        assert_eq!(states(r#","exit":{"signal":11,"core_dumped":true}"#), Some(vec![Ran, MayHaveRun, MayHaveRun]), "a crash");
        assert_eq!(states(""), Some(vec![Ran, MayHaveRun, MayHaveRun]), "no recorded end");
        assert_eq!(
            states(r#","exit":{"code":0},"stopped":{"signal":15,"killed":false}"#),
            Some(vec![Ran, MayHaveRun, MayHaveRun]),
            "stopped by trace"
        );
    }

    /// A row of inlined code that ran makes the line calling it ran (gcc -O1 inlines `helper`
    /// into `main` at line 8), though no row of that line is listed.
    #[test]
    fn a_row_of_inlined_code_that_ran_ran_its_call_site_too_and_one_disarmed_by_its_line_may_have() {
        let d = tempfile::tempdir().unwrap();
        let src = d.path().join("prog.c");
        std::fs::write(
            &src,
            "#include <stdio.h>\nstatic int helper(int x) {\n  int s = 0;\n  for (int i = 0; i < x; i++) s += i * x;\n  return s;\n}\nint main(int argc, char **argv) {\n  int v = helper(argc + 5);\n  printf(\"%d\\n\", v);\n  return argv == 0;\n}\n",
        )
        .unwrap();
        let exe = d.path().join("prog");
        let st = std::process::Command::new("cc").args(["-g", "-O1", "-o"]).arg(&exe).arg(&src).status().expect("run cc");
        assert!(st.success());
        let out = std::process::Command::new("objdump").arg("--dwarf=decodedline").arg(&exe).output().expect("run objdump");
        // The is_stmt rows of helper's loop (line 4).
        let offsets: Vec<u64> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                (f.len() >= 3 && f[0] == "prog.c" && f[1] == "4" && f.last() == Some(&"x"))
                    .then(|| u64::from_str_radix(f[2].trim_start_matches("0x"), 16).ok())
                    .flatten()
            })
            .collect();
        assert!(!offsets.is_empty());
        let mut offsets = offsets;
        offsets.sort_unstable();
        offsets.dedup();
        let meta = std::fs::metadata(&exe).unwrap();
        let mtime_ns = meta.modified().unwrap().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as i128;
        let n = offsets.len();
        let list = InlineProbeList {
            object: exe.to_string_lossy().into_owned(),
            size: meta.len(),
            mtime_ns,
            offsets,
            groups: vec![0; n],
            ..Default::default()
        };
        std::fs::write(d.path().join(LINE_PROBES_FILE), serde_json::to_vec(&list).unwrap()).unwrap();
        let p = d.path().join("p1");
        std::fs::create_dir(&p).unwrap();
        std::fs::write(p.join(LINES_BIN_FILE), vec![LINE_RAN; n]).unwrap();
        let mut c = LineCoverage::default();
        let mut warnings = Vec::new();
        add_native_lines(d.path(), [p.as_path()], &mut c, &mut warnings);
        let file = trace_format::normalize_path(&src);
        assert_eq!((c.state(&file, 4), c.state(&file, 8), c.state(&file, 9)), (LineState::Ran, LineState::Ran, LineState::Unknown));
        // The same rows disarmed because another row of line 4 ran (another inlined copy of
        // `helper` would do that): line 4 ran, and whether this copy's call site ran is not
        // known, so line 8 may have run; it is never code that did not run.
        std::fs::write(p.join(LINES_BIN_FILE), vec![LINE_OF_RAN; n]).unwrap();
        let mut c = LineCoverage::default();
        add_native_lines(d.path(), [p.as_path()], &mut c, &mut warnings);
        assert_eq!((c.state(&file, 4), c.state(&file, 8), c.state(&file, 9)), (LineState::Ran, LineState::MayHaveRun, LineState::Unknown));
        assert_eq!(warnings, Vec::<String>::new());
    }
}
