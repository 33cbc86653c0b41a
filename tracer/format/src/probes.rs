//! The native shim's probe lists in a trace directory and the per-process files their hits go
//! to (docs/trace-format.md: `inline-probes.json`, `inline-probes-libs.json`,
//! `line-probes.json`, `line-probes-libs.json`, `p<pid>/lines.bin`, `p<pid>/lines-lib-<k>.bin`):
//! `trace run` writes the lists, the shim reads the one for each object it probes, and `slice`
//! reads the lists with the hits. One list per object: the program's in one file, its own
//! shared libraries' in another (a JSON array, each naming its library).

use crate::meta::{
    InlineProbeList, INLINE_PROBES_FILE, LIBRARY_INLINE_PROBES_FILE, LIBRARY_LINE_PROBES_FILE, LINES_BIN_FILE, LINE_PROBES_FILE,
};
use std::path::Path;

/// A list file is read whole, at most this large (by the shim and by readers).
pub const MAX_LIST: u64 = 64 << 20;

/// Which probes a list is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeKind {
    /// Inline probes: where inlined code starts (docs/native-recording.md, "Inlined functions").
    Inline,
    /// Line probes (`trace run --lines`): where each statement line starts ("Lines that ran").
    Lines,
}

impl ProbeKind {
    /// The file of the program's list.
    pub fn program_file(self) -> &'static str {
        match self {
            ProbeKind::Inline => INLINE_PROBES_FILE,
            ProbeKind::Lines => LINE_PROBES_FILE,
        }
    }

    /// The file of the libraries' lists.
    pub fn libraries_file(self) -> &'static str {
        match self {
            ProbeKind::Inline => LIBRARY_INLINE_PROBES_FILE,
            ProbeKind::Lines => LIBRARY_LINE_PROBES_FILE,
        }
    }
}

/// The list in `file` (one object's), if it can be read and is at most [`MAX_LIST`] long.
pub fn read_list(file: &Path) -> Option<InlineProbeList> {
    serde_json::from_slice(&crate::reader::read_document(file, MAX_LIST).ok()?).ok()
}

/// The lists in `file` (the libraries'), if it can be read and is at most [`MAX_LIST`] long.
pub fn read_lists(file: &Path) -> Option<Vec<InlineProbeList>> {
    serde_json::from_slice(&crate::reader::read_document(file, MAX_LIST).ok()?).ok()
}

/// The list of `kind` in the trace directory `root` for one object: the program's (`program`),
/// or the first of the libraries' lists that `ours` accepts, with its index there (which names
/// its per-process file: [`lines_bin_file`]).
pub fn list_for(
    root: &Path,
    kind: ProbeKind,
    program: bool,
    ours: impl Fn(&InlineProbeList) -> bool,
) -> Option<(InlineProbeList, Option<usize>)> {
    if program {
        return read_list(&root.join(kind.program_file())).filter(|l| ours(l)).map(|l| (l, None));
    }
    read_lists(&root.join(kind.libraries_file()))?.into_iter().enumerate().find(|(_, l)| ours(l)).map(|(k, l)| (l, Some(k)))
}

/// The per-process file of an object's line states: `lines.bin` for the program's list (`None`),
/// `lines-lib-<k>.bin` for the `k`th list of [`LIBRARY_LINE_PROBES_FILE`].
pub fn lines_bin_file(library: Option<usize>) -> String {
    match library {
        None => LINES_BIN_FILE.to_string(),
        Some(k) => format!("lines-lib-{k}.bin"),
    }
}

/// Every object's line list in the trace directory `root` (each with as many groups as offsets;
/// the others are left out), with the name of its per-process file ([`lines_bin_file`]): the
/// program's, then the libraries' in their order.
pub fn line_lists(root: &Path) -> Vec<(InlineProbeList, String)> {
    let program = read_list(&root.join(LINE_PROBES_FILE)).map(|l| (l, None));
    let libraries = read_lists(&root.join(LIBRARY_LINE_PROBES_FILE)).unwrap_or_default().into_iter().enumerate().map(|(k, l)| (l, Some(k)));
    program.into_iter().chain(libraries).filter(|(l, _)| l.groups.len() == l.offsets.len()).map(|(l, k)| (l, lines_bin_file(k))).collect()
}

/// The environment variable naming the unix socket on which `trace run` answers the native
/// shim's requests for the lists of an object loaded by `dlopen` (docs/native-recording.md,
/// "Inlined functions"): set by `trace run` for a native program recorded with probes, and
/// inherited by every process of the run.
pub const ENV_LISTS_SOCKET: &str = "SLICE_TRACE_LISTS_SOCKET";

/// The environment variable that sets how long the shim waits for `trace run`'s answer, in
/// milliseconds ([`LISTS_TIMEOUT_MS`] unless set).
pub const ENV_LISTS_TIMEOUT_MS: &str = "SLICE_TRACE_LISTS_TIMEOUT_MS";

/// How long the shim waits for an answer by default: listing a large library's inlined code
/// from its DWARF the first time takes a second or two; after that it is a cache hit.
pub const LISTS_TIMEOUT_MS: u32 = 5000;

/// `trace run`'s answer when the object's lists are now in the libraries' list files
/// ([`LIBRARY_INLINE_PROBES_FILE`], [`LIBRARY_LINE_PROBES_FILE`]).
pub const LISTED: &str = "listed";

/// `trace run`'s answer when there is no list for the object (no debug information, the file
/// changed since the shim looked at it, or it cannot be read).
pub const NOT_LISTED: &str = "none";

/// A request for the lists of the object at `path` (absolute, as the shim names it in
/// `patch.json`), with what identifies its file, so that `trace run` lists the same file: one
/// line `<dev> <ino> <size> <mtime_ns> <path>\n` on a connection of its own; the answer is one
/// line too, [`LISTED`] or [`NOT_LISTED`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListRequest {
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
    pub mtime_ns: i128,
    pub path: String,
}

impl ListRequest {
    /// The request's line, newline included; `None` for a path with a newline (which no line
    /// can carry) or not absolute.
    pub fn line(&self) -> Option<String> {
        (self.path.starts_with('/') && !self.path.contains('\n'))
            .then(|| format!("{} {} {} {} {}\n", self.dev, self.ino, self.size, self.mtime_ns, self.path))
    }

    /// The request in `line` (with or without its newline), if it is one.
    pub fn parse(line: &str) -> Option<ListRequest> {
        let mut parts = line.strip_suffix('\n').unwrap_or(line).splitn(5, ' ');
        let mut num = || parts.next()?.parse::<u64>().ok();
        let (dev, ino, size) = (num()?, num()?, num()?);
        let mtime_ns = parts.next()?.parse::<i128>().ok()?;
        let path = parts.next()?.to_string();
        (path.starts_with('/') && !path.contains('\n')).then_some(ListRequest { dev, ino, size, mtime_ns, path })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A request goes through its line whole, a path with spaces included; a path that no
    /// line can carry, or a line that is not a request, is none.
    #[test]
    fn list_requests_go_through_one_line() {
        let r = ListRequest { dev: 2049, ino: 77, size: 16384, mtime_ns: 1_700_000_000_123_456_789, path: "/a dir/lib x.so".into() };
        let line = r.line().unwrap();
        assert_eq!(line, "2049 77 16384 1700000000123456789 /a dir/lib x.so\n");
        assert_eq!(ListRequest::parse(&line), Some(r.clone()));
        assert_eq!(ListRequest { path: "/a\nb.so".into(), ..r.clone() }.line(), None);
        assert_eq!(ListRequest { path: "lib.so".into(), ..r }.line(), None);
        for bad in ["", "1 2 3 4", "1 2 3 x /p", "1 2 3 4 p", "-1 2 3 4 /p"] {
            assert_eq!(ListRequest::parse(bad), None, "{bad:?}");
        }
    }

    fn list(object: &str, n: usize) -> InlineProbeList {
        InlineProbeList { object: object.into(), offsets: (0..n as u64).collect(), groups: vec![0; n], ..Default::default() }
    }

    /// The program's list is found in its file, a library's among the libraries' by `ours` with
    /// its index, which names its lines file; a list whose groups do not fit is left out.
    #[test]
    fn each_object_finds_its_list_and_its_lines_file() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join(LINE_PROBES_FILE), serde_json::to_vec(&list("/p", 2)).unwrap()).unwrap();
        let mut bad = list("/bad.so", 2);
        bad.groups.pop();
        let libs = vec![list("/a.so", 1), bad, list("/b.so", 3)];
        std::fs::write(d.path().join(LIBRARY_LINE_PROBES_FILE), serde_json::to_vec(&libs).unwrap()).unwrap();
        let named = |o: &'static str| move |l: &InlineProbeList| l.object == o;
        assert_eq!(list_for(d.path(), ProbeKind::Lines, true, |_| true), Some((list("/p", 2), None)));
        assert_eq!(list_for(d.path(), ProbeKind::Lines, false, named("/b.so")), Some((list("/b.so", 3), Some(2))));
        assert_eq!(list_for(d.path(), ProbeKind::Lines, false, named("/c.so")), None);
        assert_eq!(list_for(d.path(), ProbeKind::Inline, true, |_| true), None, "no inline list");
        let all: Vec<(String, String)> = line_lists(d.path()).into_iter().map(|(l, f)| (l.object, f)).collect();
        let want = [("/p", "lines.bin"), ("/a.so", "lines-lib-0.bin"), ("/b.so", "lines-lib-2.bin")];
        assert_eq!(all, want.map(|(o, f)| (o.to_string(), f.to_string())));
        assert_eq!(lines_bin_file(Some(2)), "lines-lib-2.bin");
    }
}
