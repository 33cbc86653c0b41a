//! Lines that ran in one run only, in the functions both runs reached: two runs of one test
//! before and after an edit often call the same functions (an off-by-one, a wrong comparison),
//! and then only their lines tell the runs apart.
//!
//! A function's lines are its source lines that ran (the traces' line coverage,
//! [`crate::coverage`]), less those inside another function of the same file that ran in that
//! run (a nested function's lines are its own: each line is its innermost function's). The two runs' lines are matched by their
//! offset from the function's first line, so a function that moved is compared as it is; one
//! whose number of lines differs between the runs (the edit added or removed lines), or whose
//! text differs where each run's file is its own (two checkouts, two releases of a package), is
//! not compared line by line and is listed as changed.

use super::{diff_key, func_of, preorder, Diff};
use crate::calltree::CallTree;
use crate::coverage::LineState;
use crate::source::SourceCache;
use crate::symbols::Function;
use std::collections::HashMap;
use std::path::Path;

/// How a function both runs reached differs in its lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LineChange {
    /// Line numbers (of run B's copy) that ran only in run A, and only in run B.
    Ran { only_a: Vec<u32>, only_b: Vec<u32> },
    /// Its source differs between the runs, in its number of lines (run A's, run B's) or, where
    /// each run's file is its own, in its text: not compared line by line.
    Source { lines_a: u32, lines_b: u32 },
}

/// A function both runs reached whose lines ran differently.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineDiff {
    pub qualname: String,
    /// Run B's `file:line`.
    pub location: String,
    /// The first node of the union where it is reached (call order).
    pub node: usize,
    pub change: LineChange,
    /// Where each run's copy of the function is on disk and they differ: how run B's copy
    /// differs from run A's, as the lines of a unified diff (`-` run A's, `+` run B's, one line
    /// of context, `@@ run B's line N @@` before each hunk), at most [`EDIT_LINES`] lines.
    pub edit: Option<String>,
}

/// At most this many lines of a function's edit are shown.
pub const EDIT_LINES: usize = 40;

/// One run's view of a function: its file, its span and the lines of it that ran (offsets
/// from its first line).
struct Span {
    path: std::path::PathBuf,
    first: u32,
    last: u32,
    ran: Vec<u32>,
}

/// A function spanning more lines than this is not compared line by line (no real function
/// does; a damaged or crafted trace's would cost its length).
const MAX_SPAN_LINES: u32 = 100_000;

/// A file whose functions span more lines than this, from the first's first line to the last's
/// last, is not compared line by line.
const MAX_FILE_LINES: u32 = 1_000_000;

/// A function of a run's tree with a span: its diff key, its file as the diff shows it, its
/// path, its first and last line.
struct FnSpan {
    key: String,
    shown: String,
    path: std::path::PathBuf,
    first: u32,
    last: u32,
}

/// The functions of a run's tree that have a span (of at most [`MAX_SPAN_LINES`]).
fn fn_spans(t: &CallTree, cwd: &Path) -> Vec<FnSpan> {
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for n in t.preorder() {
        if !seen.insert(t.node(n).func) {
            continue;
        }
        let f: Function = func_of(t, n);
        if let (Some(file), Some(a), Some(b)) = (&f.file, f.first_line, f.last_line) {
            if a <= b && b - a < MAX_SPAN_LINES {
                out.push(FnSpan {
                    key: diff_key(&f, cwd),
                    shown: crate::analysis::display_path(file, cwd),
                    path: file.clone(),
                    first: a,
                    last: b,
                });
            }
        }
    }
    out
}

/// A run's functions (`own`, by diff key) whose file has line data, and their lines that ran.
/// Each line of a file is its innermost function's, of the functions either run reached there
/// (`other`: the other run's, matched by the file as the diff shows it), so that a nested
/// function's lines are its own in both runs whether or not it ran in this one: the spans are
/// laid on the file's lines longest first, each line taken by the last span laid over it.
/// Linear in the lines of the spans.
fn spans(own: &[FnSpan], other: &[FnSpan], coverage: &crate::coverage::LineCoverage) -> HashMap<String, Span> {
    // Per file: its name as shown, and the spans laid on it (first, last, this run's key).
    type Laid<'a> = (&'a str, Vec<(u32, u32, Option<&'a str>)>);
    let mut by_file: HashMap<&Path, Laid> = HashMap::new();
    for f in own.iter().filter(|f| coverage.knows(&f.path)) {
        by_file.entry(f.path.as_path()).or_insert_with(|| (f.shown.as_str(), Vec::new())).1.push((f.first, f.last, Some(f.key.as_str())));
    }
    // The other run's functions that this run did not reach (a function both reached has its
    // span from this run: it may have moved).
    let mine: std::collections::HashSet<&str> = own.iter().map(|f| f.key.as_str()).collect();
    let mut by_shown: HashMap<&str, Vec<(u32, u32)>> = HashMap::new();
    for f in other.iter().filter(|f| !mine.contains(f.key.as_str())) {
        by_shown.entry(f.shown.as_str()).or_default().push((f.first, f.last));
    }
    let mut out = HashMap::new();
    for (file, (shown, mut v)) in by_file {
        v.extend(by_shown.get(shown).into_iter().flatten().map(|&(a, b)| (a, b, None)));
        let low = v.iter().map(|s| s.0).min().unwrap_or(0);
        let high = v.iter().map(|s| s.1).max().unwrap_or(0);
        if high - low >= MAX_FILE_LINES {
            continue;
        }
        // Longest first (then by place, then this run's before the other's, for a stable
        // choice between equal spans).
        v.sort_by_key(|&(a, b, k)| (std::cmp::Reverse(b - a), a, k.is_none()));
        let mut owner = vec![usize::MAX; (high - low + 1) as usize];
        for (i, &(a, b, _)) in v.iter().enumerate() {
            owner[(a - low) as usize..=(b - low) as usize].fill(i);
        }
        // Two functions with the same span (one reached by each run): their lines are both's.
        let owns = |i: usize, l: u32| {
            let o = owner[(l - low) as usize];
            o == i || (o != usize::MAX && v[o].0 == v[i].0 && v[o].1 == v[i].1)
        };
        for (i, &(first, last, key)) in v.iter().enumerate() {
            let Some(key) = key else { continue };
            let ran = (first..=last).filter(|&l| owns(i, l) && coverage.state(file, l) == LineState::Ran).map(|l| l - first).collect();
            out.insert(key.to_string(), Span { path: file.to_path_buf(), first, last, ran });
        }
    }
    out
}

/// The functions both runs reached whose lines ran differently, or whose source differs, in
/// call order; `None` when a run holds no line data ([`source_differences`] then).
pub fn line_differences(
    d: &Diff,
    a: (&CallTree, &Path, &crate::coverage::LineCoverage),
    b: (&CallTree, &Path, &crate::coverage::LineCoverage),
    texts: &mut Texts<'_>,
) -> Option<Vec<LineDiff>> {
    if a.2.is_empty() || b.2.is_empty() {
        return None;
    }
    let (fa, fb) = (fn_spans(a.0, a.1), fn_spans(b.0, b.1));
    Some(differences(d, &spans(&fa, &fb, a.2), &spans(&fb, &fa, b.2), texts))
}

/// The functions both runs reached whose source differs between the runs (in its number of
/// lines, or in its text as each run executed it), in call order: what can be told where the
/// lines that ran cannot be compared (a run recorded none, or ran several tests).
pub fn source_differences(d: &Diff, a: (&CallTree, &Path), b: (&CallTree, &Path), texts: &mut Texts<'_>) -> Vec<LineDiff> {
    let plain = |t: &CallTree, cwd: &Path| -> HashMap<String, Span> {
        fn_spans(t, cwd).into_iter().map(|f| (f.key, Span { path: f.path, first: f.first, last: f.last, ran: Vec::new() })).collect()
    };
    differences(d, &plain(a.0, a.1), &plain(b.0, b.1), texts)
}

/// [`line_differences`] of the runs' spans (their lines that ran, where known).
fn differences(d: &Diff, sa: &HashMap<String, Span>, sb: &HashMap<String, Span>, texts: &mut Texts<'_>) -> Vec<LineDiff> {
    let mut out = Vec::new();
    let mut listed = std::collections::HashSet::new();
    for i in preorder(&d.nodes) {
        let n = &d.nodes[i];
        if n.count_a == 0 || n.count_b == 0 || !listed.insert(n.key_id) {
            continue;
        }
        let (Some(x), Some(y)) = (sa.get(&n.key), sb.get(&n.key)) else { continue };
        let edit = texts.edit(x, y);
        // Run A's file as the union shows it (`file:line`).
        let file = n.location.rsplit_once(':').map_or(n.location.as_str(), |(f, _)| f);
        if edit.is_none() {
            texts.note_unread(x, y, file, &n.func.qualname);
        }
        let change = if x.last - x.first != y.last - y.first || edit.is_some() {
            LineChange::Source { lines_a: x.last - x.first + 1, lines_b: y.last - y.first + 1 }
        } else {
            // (`ran` is ascending.)
            let only = |p: &Span, q: &Span| -> Vec<u32> {
                p.ran.iter().filter(|o| q.ran.binary_search(o).is_err()).map(|o| y.first + o).collect()
            };
            let (only_a, only_b) = (only(x, y), only(y, x));
            if only_a.is_empty() && only_b.is_empty() {
                continue;
            }
            LineChange::Ran { only_a, only_b }
        };
        // At run B's first line.
        let location = format!("{file}:{}", y.first);
        out.push(LineDiff { qualname: n.func.qualname.clone(), location, node: i, change, edit });
    }
    out
}

/// The source files of two runs' functions, each as its run executed it (the file on disk when
/// it still has the fingerprint `trace run` took, else its version in git with that fingerprint:
/// [`SourceCache`]), read once each, to tell whether a function's text differs between the runs:
/// two checkouts or two releases, or one checkout edited between the runs.
pub struct Texts<'a> {
    a: &'a mut SourceCache,
    b: &'a mut SourceCache,
    /// Files whose content differs between the runs (their fingerprints) where a run's copy
    /// cannot be read: the functions in them both runs reached cannot be compared.
    pub unread: Vec<Unread>,
}

/// A file that differs between the runs, by the fingerprints each run took, of which a run's
/// copy cannot be read (changed since that run and not in git, or gone): [`Texts::unread`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unread {
    /// As run A's tree names it.
    pub file: String,
    /// Whether run A's copy, and run B's, cannot be read.
    pub unreadable: (bool, bool),
    /// The functions in it both runs reached, in call order.
    pub functions: Vec<String>,
}

impl Unread {
    /// One sentence for a note.
    pub fn sentence(&self) -> String {
        let copy = match self.unreadable {
            (true, true) => "neither run's copy is on disk or in git",
            (true, false) => "run A's copy is neither on disk nor in git",
            _ => "run B's copy is neither on disk nor in git",
        };
        const LISTED: usize = 10;
        let mut functions = self.functions.iter().take(LISTED).cloned().collect::<Vec<_>>().join(", ");
        if self.functions.len() > LISTED {
            functions.push_str(&format!(" and {} more", self.functions.len() - LISTED));
        }
        format!(
            "{}: its content differs between the runs (the fingerprints each run took), but {copy}, so whether the functions in it both runs reached changed cannot be told: {}.",
            self.file, functions
        )
    }
}

impl<'a> Texts<'a> {
    /// Run A's and run B's sources (the prepared traces' own: what the diff reads, the prompt
    /// shows without reading it again).
    pub fn new(a: &'a mut SourceCache, b: &'a mut SourceCache) -> Texts<'a> {
        Texts { a, b, unread: Vec::new() }
    }

    /// Note `qualname` in [`Texts::unread`] when its file (`file` as run A's tree names it)
    /// differs between the runs by their fingerprints and a run's copy cannot be read.
    fn note_unread(&mut self, x: &Span, y: &Span, file: &str, qualname: &str) {
        let (Some(fa), Some(fb)) = (self.a.fingerprint(&x.path), self.b.fingerprint(&y.path)) else { return };
        if fa.sha256 == fb.sha256 {
            return;
        }
        let unreadable = (self.a.file(&x.path).is_err(), self.b.file(&y.path).is_err());
        // Both readable: [`Texts::edit`] compared them.
        if unreadable == (false, false) {
            return;
        }
        match self.unread.iter_mut().find(|u| u.file == file) {
            Some(u) => u.functions.push(qualname.to_string()),
            None => self.unread.push(Unread { file: file.to_string(), unreadable, functions: vec![qualname.to_string()] }),
        }
    }

    /// How run B's copy of a function (`y`) differs from run A's (`x`) ([`LineDiff::edit`]), when
    /// their texts differ. A file that cannot be shown as its run executed it (changed since
    /// the run with no version in git, unreadable, not a regular file, larger than
    /// [`crate::source::MAX_SOURCE_BYTES`]) or a span past a file's end: not known to differ.
    fn edit(&mut self, x: &Span, y: &Span) -> Option<String> {
        let (fa, fb) = (self.a.file(&x.path).ok()?, self.b.file(&y.path).ok()?);
        let (a, b) = (span(&fa.lines, x)?, span(&fb.lines, y)?);
        (a != b).then(|| edit_text(a, b, y.first))
    }
}

fn span<'a>(lines: &'a [String], s: &Span) -> Option<&'a [String]> {
    lines.get(s.first.checked_sub(1)? as usize..s.last as usize)
}

/// The unified diff of `a` (run A's lines) to `b` (run B's, starting at line `first_b` of its
/// file), one line of context, each hunk headed by its first line in run B's file; cut at
/// [`EDIT_LINES`] lines, saying how many more changed.
fn edit_text(a: &[String], b: &[String], first_b: u32) -> String {
    use similar::{ChangeTag, TextDiff};
    let (ta, tb) = (a.join("\n") + "\n", b.join("\n") + "\n");
    let diff = TextDiff::from_lines(&ta, &tb);
    let mut lines: Vec<String> = Vec::new();
    let mut changed = 0usize;
    for group in diff.grouped_ops(1) {
        let at = group.first().map_or(0, |op| op.new_range().start);
        lines.push(format!("@@ run B's line {} @@", first_b as usize + at));
        for op in &group {
            for c in diff.iter_changes(op) {
                let sign = match c.tag() {
                    ChangeTag::Delete => '-',
                    ChangeTag::Insert => '+',
                    ChangeTag::Equal => ' ',
                };
                if sign != ' ' {
                    changed += 1;
                }
                lines.push(format!("{sign}{}", c.value().trim_end_matches('\n')));
            }
        }
    }
    if lines.len() > EDIT_LINES {
        let shown_changes = lines[..EDIT_LINES].iter().filter(|l| l.starts_with(['-', '+'])).count();
        lines.truncate(EDIT_LINES);
        lines.push(format!("… {} more changed lines", changed - shown_changes));
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coverage::LineCoverage;
    use crate::testutil::{py_funcs, Ev::C, Ev::R};
    use crate::views::tests::tree_with;

    /// Each run's sources, as a trace that fingerprinted `files` (as they are now) holds them.
    fn caches(files: &[&Path]) -> (SourceCache, SourceCache) {
        use sha2::Digest;
        let doc = || trace_format::SourcesDoc {
            files: files
                .iter()
                .map(|f| {
                    let b = std::fs::read(f).unwrap();
                    let sha256 = sha2::Sha256::digest(&b).iter().map(|x| format!("{x:02x}")).collect();
                    trace_format::FileFingerprint {
                        path: f.to_string_lossy().into(),
                        size: b.len() as u64,
                        mtime_ns: 0,
                        sha256,
                        ..Default::default()
                    }
                })
                .collect(),
        };
        (SourceCache::new(Some(doc()), Path::new("/")), SourceCache::new(Some(doc()), Path::new("/")))
    }

    /// `f` given the texts of [`caches`] of `files`.
    fn with_texts<R>(files: &[&Path], f: impl FnOnce(&mut Texts<'_>) -> R) -> R {
        let (mut a, mut b) = caches(files);
        f(&mut Texts::new(&mut a, &mut b))
    }

    /// No file can be shown (no sources.json).
    fn no_texts<R>(f: impl FnOnce(&mut Texts<'_>) -> R) -> R {
        let (mut a, mut b) = (SourceCache::new(None, Path::new("/")), SourceCache::new(None, Path::new("/")));
        f(&mut Texts::new(&mut a, &mut b))
    }

    /// A tree of `main` (lines 1-20 of /p/m.py) calling `inner` (a function nested in it, lines
    /// 5-8) and `moved` (its own span per run), and the coverage of the lines that ran.
    fn run(moved: (u32, u32), ran: &[u32]) -> (CallTree, LineCoverage) {
        let mut funcs = py_funcs(&["main", "main.<locals>.inner", "moved"]);
        for (f, (a, b)) in funcs.iter_mut().zip([(1, 20), (5, 8), moved]) {
            f.file = Some("/p/m.py".into());
            (f.first_line, f.last_line) = (Some(a), Some(b));
        }
        let t = tree_with(funcs, &[C(0), C(1), R, C(2), R, R]);
        let mut cov = LineCoverage::default();
        for l in 1..=40 {
            cov.add_native_line(Path::new("/p/m.py"), l, ran.contains(&l));
        }
        (t, cov)
    }

    /// A nested function that ran in one run only: its `def` line, which its outer function
    /// runs in both, is the nested function's in both runs, not a line only one ran of the
    /// outer function.
    #[test]
    fn a_nested_functions_lines_are_its_own_in_both_runs_whether_it_ran_or_not() {
        let p = Path::new("/p");
        let tree = |calls_inner: bool, ran: &[u32]| {
            let mut funcs = py_funcs(&["main", "main.<locals>.inner"]);
            for (f, (a, b)) in funcs.iter_mut().zip([(1, 20), (5, 8)]) {
                f.file = Some("/p/m.py".into());
                (f.first_line, f.last_line) = (Some(a), Some(b));
            }
            let evs = if calls_inner { vec![C(0), C(1), R, R] } else { vec![C(0), R] };
            let mut cov = LineCoverage::default();
            for l in 1..=20 {
                cov.add_native_line(Path::new("/p/m.py"), l, ran.contains(&l));
            }
            (tree_with(funcs, &evs), cov)
        };
        let (ta, ca) = tree(false, &[1, 2, 5, 9]);
        let (tb, cb) = tree(true, &[1, 2, 5, 6, 9]);
        let d = super::super::diff(&ta, p, &tb, p);
        assert_eq!(no_texts(|t| line_differences(&d, (&ta, p, &ca), (&tb, p, &cb), t)), Some(vec![]));
    }

    /// Two releases, each run from its own checkout: a function of the same length whose text
    /// differs (the fix changed a line) is listed as changed although the same lines ran; one
    /// whose text is the same is not.
    #[test]
    fn a_function_whose_text_differs_between_two_checkouts_is_listed_as_changed() {
        let dir = tempfile::tempdir().unwrap();
        let tree = |root: &Path, fixed: bool| {
            std::fs::create_dir_all(root).unwrap();
            let body = if fixed { "    return a <= b" } else { "    return a < b" };
            std::fs::write(root.join("m.py"), format!("def main():\n    x = 1\n    return le(x, 2)\ndef le(a, b):\n{body}\n")).unwrap();
            let mut funcs = py_funcs(&["main", "le"]);
            for (f, (a, b)) in funcs.iter_mut().zip([(1, 3), (4, 5)]) {
                f.file = Some(root.join("m.py"));
                (f.first_line, f.last_line) = (Some(a), Some(b));
            }
            let mut cov = LineCoverage::default();
            for l in 1..=5 {
                cov.add_native_line(&root.join("m.py"), l, true);
            }
            (tree_with(funcs, &[C(0), C(1), R, R]), cov)
        };
        let (pa, pb) = (dir.path().join("fixed"), dir.path().join("buggy"));
        let (ta, ca) = tree(&pa, true);
        let (tb, cb) = tree(&pb, false);
        let d = super::super::diff(&ta, &pa, &tb, &pb);
        let (fa, fb) = (pa.join("m.py"), pb.join("m.py"));
        let got = with_texts(&[&fa, &fb], |t| line_differences(&d, (&ta, &pa, &ca), (&tb, &pb, &cb), t)).unwrap();
        let got: Vec<(&str, LineChange)> = got.iter().map(|l| (l.qualname.as_str(), l.change.clone())).collect();
        assert_eq!(got, vec![("le", LineChange::Source { lines_a: 2, lines_b: 2 })]);
        let edit = with_texts(&[&fa, &fb], |t| line_differences(&d, (&ta, &pa, &ca), (&tb, &pb, &cb), t)).unwrap()[0].edit.clone();
        assert_eq!(edit.as_deref(), Some("@@ run B's line 4 @@\n def le(a, b):\n-    return a <= b\n+    return a < b"));
        // Without line data, the same from the text alone.
        let got = with_texts(&[&fa, &fb], |t| source_differences(&d, (&ta, &pa), (&tb, &pb), t));
        let got: Vec<(&str, LineChange)> = got.iter().map(|l| (l.qualname.as_str(), l.change.clone())).collect();
        assert_eq!(got, vec![("le", LineChange::Source { lines_a: 2, lines_b: 2 })]);
        // A file that changed since its run, with no version in git: not compared.
        let (mut ca_, mut cb_) = caches(&[&fa, &fb]);
        std::fs::write(&fa, "def main():\n    x = 1\n    return le(x, 2)\ndef le(a, b):\n    return a <= b + 0\n").unwrap();
        assert_eq!(source_differences(&d, (&ta, &pa), (&tb, &pb), &mut Texts::new(&mut ca_, &mut cb_)), vec![]);
        // One checkout run twice, unchanged: the same text.
        let d = super::super::diff(&tb, &pb, &tb, &pb);
        assert_eq!(with_texts(&[&fb], |t| line_differences(&d, (&tb, &pb, &cb), (&tb, &pb, &cb), t)), Some(vec![]));
    }

    /// A trace may name a FIFO as a function's file: it is not read (a read would block until
    /// a writer came), and the function is not known to differ.
    #[test]
    fn a_fifo_named_as_a_file_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let (file, fifo) = (dir.path().join("m.py"), dir.path().join("fifo.py"));
        std::fs::write(&file, "def f():\n    return 1\n").unwrap();
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path; mkfifo only creates the node.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let span = |path: &Path| Span { path: path.to_path_buf(), first: 1, last: 2, ran: Vec::new() };
        assert_eq!(with_texts(&[&file], |t| t.edit(&span(&file), &span(&fifo))), None);
    }

    /// A long edit is cut at EDIT_LINES lines and says how many more lines changed.
    #[test]
    fn a_long_edit_is_cut_and_says_how_much_more_changed() {
        let a: Vec<String> = (0..100).map(|i| format!("a{i}")).collect();
        let b: Vec<String> = (0..100).map(|i| format!("b{i}")).collect();
        let e = edit_text(&a, &b, 10);
        let lines: Vec<&str> = e.lines().collect();
        assert_eq!(lines.len(), EDIT_LINES + 1);
        assert_eq!(lines[0], "@@ run B's line 10 @@");
        assert_eq!(lines[EDIT_LINES], format!("… {} more changed lines", 200 - (EDIT_LINES - 1)));
    }

    #[test]
    fn lines_only_one_run_ran_are_told_apart_by_their_place_in_the_function() {
        let p = Path::new("/p");
        // `moved` sits at 30-33 in A and 31-34 in B (a line added above it): its second line
        // ran in A, its third in B. In `main`, line 3 ran in A only, and line 6, inside
        // `inner`, is `inner`'s, not `main`'s.
        let (ta, ca) = run((30, 33), &[1, 2, 3, 6, 30, 31]);
        let (tb, cb) = run((31, 34), &[1, 2, 5, 31, 33]);
        let d = super::super::diff(&ta, p, &tb, p);
        let got = no_texts(|t| line_differences(&d, (&ta, p, &ca), (&tb, p, &cb), t)).unwrap();
        let want = [
            ("main", "m.py:1", LineChange::Ran { only_a: vec![3], only_b: vec![] }),
            ("main.<locals>.inner", "m.py:5", LineChange::Ran { only_a: vec![6], only_b: vec![5] }),
            ("moved", "m.py:31", LineChange::Ran { only_a: vec![32], only_b: vec![33] }),
        ];
        let got: Vec<(&str, &str, LineChange)> = got.iter().map(|l| (l.qualname.as_str(), l.location.as_str(), l.change.clone())).collect();
        assert_eq!(got, want.iter().map(|(q, l, c)| (*q, *l, c.clone())).collect::<Vec<_>>());
        // A function whose length differs between the runs is not compared line by line.
        let (tb, cb) = run((31, 36), &[1, 2, 3, 6, 31, 32]);
        let got = no_texts(|t| line_differences(&d, (&ta, p, &ca), (&tb, p, &cb), t)).unwrap();
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].change, LineChange::Source { lines_a: 4, lines_b: 6 });
        // A crafted span of four billion lines is not compared (nor walked).
        let (tb, cb) = run((31, 4_000_000_000), &[1, 2, 3, 6, 31, 32]);
        let got = no_texts(|t| line_differences(&d, (&ta, p, &ca), (&tb, p, &cb), t)).unwrap();
        assert!(got.is_empty(), "{got:?}");
        // No line data in a run: nothing to compare.
        assert_eq!(no_texts(|t| line_differences(&d, (&ta, p, &ca), (&tb, p, &LineCoverage::default()), t)), None);
    }
}
