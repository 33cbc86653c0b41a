//! The version of a source file that a run executed, read back from git when the file changed
//! since the run (docs/prompts.md, "Sources"): an engineer or an agent records a failing test,
//! edits the code, and asks about the recording; the fingerprint `trace run` took of each file
//! (`sources.json`: size and SHA-256) says which content ran, and when that content is in the
//! file's repository (the commit checked out, the index, or one of the last [`HISTORY`] commits
//! that touched the file) it is shown instead of "source not shown: the file changed since the
//! run".
//!
//! Only git's plumbing runs (`rev-parse`, `log`, `cat-file`), with no pager, no terminal prompt,
//! no optional locks and no fetch (a partial clone's missing objects are not fetched from its
//! promisor remote, which would run the transport command the repository's config names);
//! none of them runs hooks or the file-system monitor, and a repository owned by another user
//! is refused by git itself (`safe.directory`). A content is taken only
//! when its size and SHA-256 are the fingerprint's, so a repository can only give back the
//! bytes the run executed. `SLICE_GIT=0` turns the lookup off.

use sha2::{Digest, Sha256};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// How many of the last commits that touched a file are looked at.
pub const HISTORY: usize = 64;

/// The variable that turns the lookup off (`0`).
pub const DISABLE_ENV: &str = "SLICE_GIT";

/// A content found in git that has the run's fingerprint, and where it was found (`the index`,
/// `commit 1a2b3c4d`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub bytes: Vec<u8>,
    pub from: String,
}

/// The variables that make git read another repository than the one found from its directory.
const REDIRECTING_ENV: [&str; 8] = [
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_COMMON_DIR",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_NAMESPACE",
    "GIT_DISCOVERY_ACROSS_FILESYSTEM",
];

/// `git` with the options every call here takes, in `dir`.
fn git(dir: &Path) -> Command {
    let mut c = Command::new("git");
    c.arg("-C")
        .arg(dir)
        .args(["--no-pager", "--literal-pathspecs", "-c", "core.fsmonitor=false", "-c", "log.showSignature=false"])
        // A partial clone fetches a missing object from its promisor remote, through a transport
        // the repository's own config sets up (`remote.<name>.uploadpack`, `core.sshCommand`):
        // a command of the repository's choosing, and the network. Neither is wanted: a missing
        // object is a version not found (GIT_NO_LAZY_FETCH, git 2.44 and later; no transport
        // at all for older ones).
        .args(["-c", "protocol.allow=never"])
        .env("GIT_NO_LAZY_FETCH", "1")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_OPTIONAL_LOCKS", "0")
        .stderr(Stdio::null());
    // `slice` run from a git hook, `git rebase -x` or an editor's git integration inherits
    // variables that point git at another repository, index or object store than the one
    // holding the file: the repository is found from the file's directory alone.
    for var in REDIRECTING_ENV {
        c.env_remove(var);
    }
    c
}

/// The text `git ARGS` prints in `dir`, when it succeeds.
fn output(dir: &Path, args: &[&str]) -> Option<String> {
    let out = git(dir).args(args).stdin(Stdio::null()).output().ok()?;
    out.status.success().then(|| String::from_utf8(out.stdout).ok()).flatten()
}

/// The top directory of the repository that holds `dir` (canonical), if any.
fn toplevel(dir: &Path) -> Option<PathBuf> {
    let top = PathBuf::from(output(dir, &["rev-parse", "--show-toplevel"])?.trim_end_matches('\n'));
    std::fs::canonicalize(top).ok()
}

/// The lookups of one reader of a trace's files: each directory's repository is asked for
/// once, and each repository answers through one `git cat-file --batch` kept open, so that a
/// trace with many changed files costs a few git processes per repository, not several per
/// file (a prompt of a run whose 200 files were edited since: 0.21 s, not 6.9 s). A version
/// that is neither checked out nor staged is looked for in one `git log` per repository over
/// all the run's files in it ([`History::new`]), not one per file.
#[derive(Default)]
pub struct History {
    /// The run's files (absolute): the paths one `git log` per repository asks about.
    run_files: Vec<PathBuf>,
    /// Top directory -> per file (relative) the last [`HISTORY`] commits that touched it, newest
    /// first, with the blob each left (`None`: the log could not be read).
    logs: std::collections::HashMap<PathBuf, Option<Log>>,
    /// Directory (canonical) -> its repository's top directory.
    tops: std::collections::HashMap<PathBuf, Option<PathBuf>>,
    /// Top directory -> its `cat-file --batch` (`None`: it could not be started or failed).
    readers: std::collections::HashMap<PathBuf, Option<Reader>>,
    /// Top directory -> the commit checked out.
    heads: std::collections::HashMap<PathBuf, String>,
    /// How many git processes were started (the cost the batching bounds).
    started: usize,
}

impl std::fmt::Debug for History {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("History").field("repositories", &self.readers.len()).finish()
    }
}

/// A `git cat-file --batch` that answers one name at a time (it flushes after each object).
struct Reader {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: BufReader<std::process::ChildStdout>,
}

impl Reader {
    fn start(top: &Path) -> Option<Reader> {
        let mut child = git(top).args(["cat-file", "--batch"]).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().ok()?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        };
        Some(Reader { child, stdin, stdout: BufReader::new(stdout) })
    }

    /// The blob `name` names when its size is `size` (`Ok(None)`: missing, not a blob, or
    /// another size); `Err` when the process no longer answers as it should.
    fn blob(&mut self, name: &str, size: u64) -> Result<Option<Vec<u8>>, ()> {
        writeln!(self.stdin, "{name}").map_err(|_| ())?;
        self.stdin.flush().map_err(|_| ())?;
        let mut head = String::new();
        if self.stdout.read_line(&mut head).map_err(|_| ())? == 0 {
            return Err(());
        }
        // `<oid> <type> <size>`, or `<name> missing` (and the like) with no content.
        let mut f = head.trim_end_matches('\n').rsplitn(3, ' ');
        let (Some(n), Some(kind), Some(_oid)) = (f.next(), f.next(), f.next()) else { return Ok(None) };
        let Ok(n) = n.parse::<u64>() else { return Ok(None) };
        if kind != "blob" || n != size {
            // The content is read and dropped: the next answer starts after it.
            let skipped = std::io::copy(&mut (&mut self.stdout).take(n + 1), &mut std::io::sink()).map_err(|_| ())?;
            return if skipped == n + 1 { Ok(None) } else { Err(()) };
        }
        let mut bytes = vec![0u8; usize::try_from(n).map_err(|_| ())?];
        self.stdout.read_exact(&mut bytes).map_err(|_| ())?;
        let mut nl = [0u8; 1];
        self.stdout.read_exact(&mut nl).map_err(|_| ())?;
        Ok(Some(bytes))
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One repository's history of the run's files: per file, (commit, blob) newest first; and the
/// files the log was asked about (a file among them with no entry has no commit that touched it).
#[derive(Default)]
struct Log {
    versions: std::collections::HashMap<String, Vec<(String, String)>>,
    asked: std::collections::HashSet<String>,
}

impl History {
    /// The lookups for a run whose files (absolute paths) are `run_files`.
    pub fn new(run_files: Vec<PathBuf>) -> History {
        History { run_files, ..History::default() }
    }

    /// The commits that touched the run's files in `top`, from one `git log --raw` over them
    /// (their paths given on its standard input), each file's last [`HISTORY`] kept.
    fn log(&mut self, top: &Path, rel: &str) -> Option<&Log> {
        if !self.logs.contains_key(top) {
            // (Names git would quote in its output are left to the one-file lookup.)
            let plain = |r: &str| !r.is_empty() && !r.chars().any(|c| c == '"' || c == '\\' || c.is_control());
            // The run's paths as recorded may pass through a symbolic link (a venv, `/tmp`);
            // `top` is canonical, so each file's directory is made canonical first (once per
            // directory), or every file but the first would need a `git log` of its own.
            let mut canonical: std::collections::HashMap<&Path, Option<PathBuf>> = std::collections::HashMap::new();
            let mut asked: std::collections::HashSet<String> = self
                .run_files
                .iter()
                .filter_map(|f| {
                    let dir = canonical.entry(f.parent()?).or_insert_with_key(|d| std::fs::canonicalize(d).ok()).as_ref()?;
                    dir.join(f.file_name()?).strip_prefix(top).ok()?.to_str().map(str::to_string)
                })
                .filter(|r| plain(r))
                .collect();
            if plain(rel) {
                asked.insert(rel.to_string());
            }
            self.started += 1;
            let log = read_log(top, asked);
            self.logs.insert(top.to_path_buf(), log);
        }
        self.logs.get(top)?.as_ref()
    }

    /// How many git processes the lookups so far started.
    pub fn processes(&self) -> usize {
        self.started
    }

    /// The repository's top directory and `path` relative to it.
    fn in_repository(&mut self, path: &Path) -> Option<(PathBuf, String)> {
        let dir = std::fs::canonicalize(path.parent()?).ok()?;
        if !self.tops.contains_key(&dir) {
            self.started += 1;
            self.tops.insert(dir.clone(), toplevel(&dir));
        }
        let top = self.tops.get(&dir)?.clone()?;
        let rel = dir.join(path.file_name()?).strip_prefix(&top).ok()?.to_str()?.to_string();
        // (cat-file reads one name per line.)
        (!rel.is_empty() && !rel.contains('\n')).then_some((top, rel))
    }

    /// Whether a lookup of `path` asks a repository ([`History::find_version`] found none there:
    /// the version that ran was never committed or staged, or is older than what it reads).
    pub fn asks(&mut self, path: &Path) -> bool {
        std::env::var_os(DISABLE_ENV).is_none_or(|v| v != "0") && self.in_repository(path).is_some()
    }

    /// The content of `name` in `top` if it has the fingerprint.
    fn read(&mut self, top: &Path, name: &str, size: u64, sha256: &str) -> Option<Vec<u8>> {
        if !self.readers.contains_key(top) {
            self.started += 1;
            self.readers.insert(top.to_path_buf(), Reader::start(top));
        }
        let slot = self.readers.get_mut(top)?;
        let reader = slot.as_mut()?;
        match reader.blob(name, size) {
            Ok(bytes) => bytes.filter(|b| super::hex(&Sha256::digest(b)) == sha256),
            Err(()) => {
                *slot = None;
                None
            }
        }
    }

    /// The content of `path` whose size is `size` and whose SHA-256 is `sha256` (lowercase
    /// hex): the commit checked out (`HEAD`), else the index, else the last [`HISTORY`]
    /// commits that touched the file (newest first); `None` when the file is in no repository,
    /// git is not installed, no version has that fingerprint, or `SLICE_GIT=0`.
    pub fn find_version(&mut self, path: &Path, size: u64, sha256: &str, cap: u64) -> Option<Found> {
        if std::env::var_os(DISABLE_ENV).is_some_and(|v| v == "0") || size > cap {
            return None;
        }
        let (top, rel) = self.in_repository(path)?;
        // The usual case first, with no process started: the code as committed ran, and was
        // edited since (or the edit was staged). (`:0:`: stage 0, whatever the name's start.)
        if let Some(bytes) = self.read(&top, &format!("HEAD:{rel}"), size, sha256) {
            let head = self
                .heads
                .entry(top.clone())
                .or_insert_with(|| output(&top, &["rev-parse", "--verify", "-q", "HEAD"]).unwrap_or_default().trim().to_string());
            return Some(Found { bytes, from: commit_name(head) });
        }
        if let Some(bytes) = self.read(&top, &format!(":0:{rel}"), size, sha256) {
            return Some(Found { bytes, from: "the index".to_string() });
        }
        let candidates = match self.log(&top, &rel) {
            Some(log) if log.asked.contains(&rel) => log.versions.get(&rel).cloned().unwrap_or_default(),
            _ => {
                self.started += 3;
                return find_in_log(&top, &rel, size, sha256);
            }
        };
        let mut seen = std::collections::HashSet::new();
        for (commit, blob) in candidates {
            if seen.insert(blob.clone()) {
                if let Some(bytes) = self.read(&top, &blob, size, sha256) {
                    return Some(Found { bytes, from: commit_name(&commit) });
                }
            }
        }
        None
    }
}

/// `git log --raw` from HEAD over the files `asked` (relative to `top`): per file, the commits
/// that changed it (newest first, at most [`HISTORY`]) with the blob each left.
fn read_log(top: &Path, asked: std::collections::HashSet<String>) -> Option<Log> {
    let mut c = git(top);
    c.args(["-c", "core.quotePath=false", "log", "--stdin", "--format=%x01%H", "--raw", "--no-abbrev", "--no-renames", "HEAD"]);
    let mut input = String::from("--\n");
    for r in &asked {
        input.push_str(r);
        input.push('\n');
    }
    let mut child = c.stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().ok()?;
    let mut stdin = child.stdin.take()?;
    // (A writer thread: the input can be larger than the pipe's buffer while git answers.)
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let mut versions: std::collections::HashMap<String, Vec<(String, String)>> = std::collections::HashMap::new();
    let mut commit = String::new();
    for line in BufReader::new(child.stdout.take()?).lines() {
        let Ok(line) = line else { break };
        if let Some(h) = line.strip_prefix('\u{1}') {
            commit = h.to_string();
        } else if let Some(raw) = line.strip_prefix(':') {
            // `<mode> <mode> <old> <new> <status>\t<path>`
            let Some((fields, path)) = raw.split_once('\t') else { continue };
            let Some(new) = fields.split(' ').nth(3) else { continue };
            if new.bytes().all(|b| b == b'0') || commit.is_empty() {
                continue;
            }
            let v = versions.entry(path.to_string()).or_default();
            if v.len() < HISTORY {
                v.push((commit.clone(), new.to_string()));
            }
        }
    }
    let wrote = writer.join().ok()?.is_ok();
    (child.wait().ok()?.success() && wrote).then_some(Log { versions, asked })
}

/// `commit 1a2b3c4d` for a commit's hash.
fn commit_name(h: &str) -> String {
    format!("commit {}", &h[..8.min(h.len())])
}

/// The version with the fingerprint among the last [`HISTORY`] commits that touched `rel`.
fn find_in_log(top: &Path, rel: &str, size: u64, sha256: &str) -> Option<Found> {
    let log = output(top, &["log", &format!("-n{HISTORY}"), "--format=%H", "--", rel]).unwrap_or_default();
    let names: Vec<(String, String)> = log
        .lines()
        .filter(|h| h.len() >= 7 && h.bytes().all(|b| b.is_ascii_hexdigit()))
        .map(|h| (format!("{h}:{rel}"), commit_name(h)))
        .collect();
    if names.is_empty() {
        return None;
    }
    // The blobs of that size, each once, with the first (newest) place it is found in.
    let check = batch(top, "--batch-check=%(objectname) %(objecttype) %(objectsize)", names.iter().map(|(n, _)| n.as_str()))?;
    let mut blobs: Vec<(String, String)> = Vec::new();
    for (line, (_, from)) in check.lines().zip(&names) {
        let mut f = line.split(' ');
        let (Some(oid), Some("blob"), Some(n)) = (f.next(), f.next(), f.next()) else { continue };
        if n.parse::<u64>().ok() == Some(size) && !blobs.iter().any(|(o, _)| o == oid) {
            blobs.push((oid.to_string(), from.clone()));
        }
    }
    if blobs.is_empty() {
        return None;
    }
    let mut child = git(top).args(["cat-file", "--batch"]).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().ok()?;
    {
        let mut stdin = child.stdin.take()?;
        for (oid, _) in &blobs {
            writeln!(stdin, "{oid}").ok()?;
        }
    }
    let found = read_matching(child.stdout.take()?, &blobs, size, sha256);
    let _ = child.kill();
    let _ = child.wait();
    found
}

/// From `cat-file --batch`'s output for `blobs` (each `<oid> blob <size>`, the content and a
/// newline), the first content whose SHA-256 is `sha256`.
fn read_matching(out: impl Read, blobs: &[(String, String)], size: u64, sha256: &str) -> Option<Found> {
    let mut r = BufReader::new(out);
    for (_, from) in blobs {
        let mut head = String::new();
        r.read_line(&mut head).ok()?;
        let n: u64 = head.trim_end().rsplit(' ').next()?.parse().ok()?;
        if n != size {
            return None;
        }
        let mut bytes = vec![0u8; usize::try_from(n).ok()?];
        r.read_exact(&mut bytes).ok()?;
        let mut nl = [0u8; 1];
        r.read_exact(&mut nl).ok()?;
        if super::hex(&Sha256::digest(&bytes)) == sha256 {
            return Some(Found { bytes, from: from.clone() });
        }
    }
    None
}

/// `git cat-file ARG` over `names`, one per line: its output.
fn batch<'a>(top: &Path, arg: &str, names: impl Iterator<Item = &'a str>) -> Option<String> {
    let mut child = git(top).args(["cat-file", arg]).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().ok()?;
    let input: String = names.map(|n| format!("{n}\n")).collect();
    // (A writer thread: the input can be larger than the pipe's buffer while git answers.)
    let mut stdin = child.stdin.take()?;
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let mut text = String::new();
    child.stdout.take()?.read_to_string(&mut text).ok()?;
    let wrote = writer.join().ok()?.is_ok();
    (child.wait().ok()?.success() && wrote).then_some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(dir: &Path, args: &[&str]) {
        let ok = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(["-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"])
            .args(args)
            .stdout(Stdio::null())
            .status()
            .expect("git runs (install git)")
            .success();
        assert!(ok, "git {args:?}");
    }

    fn fingerprint(b: &[u8]) -> (u64, String) {
        (b.len() as u64, super::super::hex(&Sha256::digest(b)))
    }

    #[test]
    fn the_version_that_ran_is_found_in_a_commit_or_the_index_and_only_by_its_fingerprint() {
        let d = tempfile::tempdir().unwrap();
        let repo = d.path().join("r");
        std::fs::create_dir_all(repo.join("pkg")).unwrap();
        let file = repo.join("pkg/m.py");
        sh(&repo, &["init", "-q"]);
        let v1 = b"def f():\n    return 1\n";
        std::fs::write(&file, v1).unwrap();
        sh(&repo, &["add", "pkg/m.py"]);
        sh(&repo, &["commit", "-qm", "one"]);
        let v2 = b"def f():\n    return 2\n";
        std::fs::write(&file, v2).unwrap();
        sh(&repo, &["commit", "-qam", "two"]);
        let v3 = b"def f():\n    return 3\n";
        std::fs::write(&file, v3).unwrap();
        sh(&repo, &["add", "pkg/m.py"]);
        std::fs::write(&file, b"def f():\n    return 4  # not saved anywhere\n").unwrap();

        let (n, sha) = fingerprint(v1);
        let got = History::default().find_version(&file, n, &sha, 1 << 20).expect("the first commit's version");
        assert_eq!(got.bytes, v1);
        assert!(got.from.starts_with("commit ") && got.from.len() == "commit ".len() + 8, "{got:?}");
        let (n, sha) = fingerprint(v3);
        assert_eq!(History::default().find_version(&file, n, &sha, 1 << 20).map(|f| f.from), Some("the index".to_string()));
        // The same size, another content: nothing; larger than the cap: not looked for.
        let (n, _) = fingerprint(v2);
        assert_eq!(History::default().find_version(&file, n, &fingerprint(b"def f():\n    return 9\n").1, 1 << 20), None);
        let (n, sha) = fingerprint(v2);
        assert_eq!(History::default().find_version(&file, n, &sha, 4), None);
        // A file that is no longer there is found by its directory's repository.
        std::fs::remove_file(&file).unwrap();
        assert_eq!(History::default().find_version(&file, n, &sha, 1 << 20).map(|f| f.bytes), Some(v2.to_vec()));
        // Outside any repository: nothing.
        let lone = d.path().join("lone.py");
        std::fs::write(&lone, v1).unwrap();
        let (n, sha) = fingerprint(v1);
        assert_eq!(History::default().find_version(&lone, n, &sha, 1 << 20), None);
    }

    /// Twenty files, each edited and committed after the run: each version that ran is found
    /// in the older commit, through one `git log` for the repository (not one per file), also
    /// when the run named them through a symbolic link.
    #[test]
    fn the_versions_of_many_files_are_found_with_a_few_processes_per_repository() {
        let d = tempfile::tempdir().unwrap();
        let repo = d.path().join("r");
        std::fs::create_dir_all(repo.join("pkg")).unwrap();
        sh(&repo, &["init", "-q"]);
        let files: Vec<PathBuf> = (0..20).map(|i| repo.join(format!("pkg/m{i}.py"))).collect();
        let ran: Vec<Vec<u8>> = (0..20).map(|i| format!("def f{i}():\n    return {i}\n").into_bytes()).collect();
        for (f, b) in files.iter().zip(&ran) {
            std::fs::write(f, b).unwrap();
        }
        sh(&repo, &["add", "-A"]);
        sh(&repo, &["commit", "-qm", "ran"]);
        for f in &files {
            std::fs::write(f, b"def f():\n    return -1  # fixed\n").unwrap();
        }
        sh(&repo, &["commit", "-qam", "fixed"]);
        // The run named its files through a symbolic link to the repository (a venv, `/tmp`).
        let link = d.path().join("link");
        std::os::unix::fs::symlink(&repo, &link).unwrap();
        let files: Vec<PathBuf> = (0..20).map(|i| link.join(format!("pkg/m{i}.py"))).collect();
        let mut h = History::new(files.clone());
        for (f, b) in files.iter().zip(&ran) {
            let (n, sha) = fingerprint(b);
            let got = h.find_version(f, n, &sha, 1 << 20).expect("the version that ran");
            assert_eq!(&got.bytes, b);
            assert!(got.from.starts_with("commit "), "{got:?}");
        }
        // rev-parse for the directory, one cat-file, one log.
        assert_eq!(h.processes(), 3);
    }

    /// A crafted repository (a trace's `sources.json` can name any directory) whose config
    /// names commands: a partial clone's promisor remote with its own `uploadpack` (a lazy
    /// fetch of a missing object would run it), the file-system monitor, the pager, and a
    /// signature check's `gpg.program`. Nothing is run, and the missing version is not found.
    #[test]
    fn a_repositorys_config_runs_no_command_and_no_missing_object_is_fetched() {
        let d = tempfile::tempdir().unwrap();
        let src = d.path().join("src");
        std::fs::create_dir_all(&src).unwrap();
        sh(&src, &["init", "-q"]);
        sh(&src, &["config", "uploadpack.allowFilter", "true"]);
        let ran = b"def f():\n    return 1\n";
        std::fs::write(src.join("m.py"), ran).unwrap();
        sh(&src, &["add", "m.py"]);
        sh(&src, &["commit", "-qm", "one"]);
        let url = format!("file://{}", src.display());
        let clone = d.path().join("clone");
        sh(d.path(), &["clone", "-q", "--no-checkout", "--filter=blob:none", &url, "clone"]);
        let marker = d.path().join("ran");
        let touch = format!("touch '{}'", marker.display());
        for (k, v) in [
            ("remote.origin.uploadpack", format!("{touch}; git-upload-pack")),
            ("core.fsmonitor", format!("{touch}; false")),
            ("core.pager", format!("{touch}; cat")),
            ("log.showSignature", "true".to_string()),
            ("gpg.program", d.path().join("gpg.sh").display().to_string()),
        ] {
            sh(&clone, &["config", k, &v]);
        }
        std::fs::write(d.path().join("gpg.sh"), format!("#!/bin/sh\n{touch}\n")).unwrap();
        std::process::Command::new("chmod").arg("+x").arg(d.path().join("gpg.sh")).status().unwrap();
        std::fs::write(clone.join("m.py"), b"x = 1\n").unwrap();
        let (n, sha) = fingerprint(ran);
        assert_eq!(History::default().find_version(&clone.join("m.py"), n, &sha, 1 << 20), None);
        assert!(!marker.exists(), "a command of the repository's config ran");
        // (The clone does lack the blob: git fetches it when asked to, running the command.)
        sh(&clone, &["cat-file", "-p", "HEAD:m.py"]);
        assert!(marker.exists());
    }
}
