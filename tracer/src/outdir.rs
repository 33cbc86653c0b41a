//! The trace directory on disk: what is at the output path before a run ([`observe`]),
//! setting up where the run records ([`Output::prepare`], as `plan::decide_output` decided),
//! and putting the new recording in place at the end ([`Output::commit`]) or dropping it.

use crate::plan::{OutputPlan, OutputState};
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use trace_format::{reader::read_meta, META_FILE, SOURCES_FILE};

/// Where a run records: straight into the output directory, or (when that holds an earlier
/// trace) into a hidden directory inside it, moved over the earlier trace only if the new run
/// recorded something.
#[derive(Debug)]
pub struct Output {
    /// The directory the user named.
    pub out: PathBuf,
    /// The directory the shims write into (`out`, or `out/.trace-run-<pid>`).
    pub rec: PathBuf,
}

/// Space kept free for `meta.json` and `sources.json` at the end of the run (see [`reserve_space`]).
const RESERVE_FILE: &str = ".trace-reserve";
const RESERVE_BYTES: i64 = 1 << 20;

/// Whether an entry of a trace directory is one that a run writes (and so may replace): the
/// documents, the reserve, and the process directories `p<pid>` / `p<pid>.<n>` that hold a
/// `proc.json`. Everything else is the user's and is never touched.
pub fn owned_by_trace(dir: &Path, name: &str) -> bool {
    if name == META_FILE || name == SOURCES_FILE || name == RESERVE_FILE || name == "meta.json.tmp" || name == "sources.json.tmp" {
        return true;
    }
    let Some(rest) = name.strip_prefix('p') else { return false };
    let (pid, image) = rest.split_once('.').unwrap_or((rest, "0"));
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    digits(pid) && digits(image) && dir.join(name).join(trace_format::PROC_META_FILE).is_file()
}

/// What is at the output path (`symlink_metadata`: a symbolic link is not a directory).
pub fn observe(out: &Path) -> OutputState {
    match std::fs::symlink_metadata(out) {
        Err(_) => OutputState::Missing,
        Ok(m) if !m.is_dir() => OutputState::NotADirectory,
        Ok(_) => {
            if matches!(read_meta(out), Ok(_) | Err(trace_format::FormatError::NewerVersion { .. })) {
                OutputState::Trace
            } else if std::fs::read_dir(out).map(|mut d| d.next().is_none()).unwrap_or(false) {
                OutputState::Empty
            } else {
                OutputState::OtherDirectory
            }
        }
    }
}

impl Output {
    /// Set up the planned directories: the output directory (created if missing) and, over an
    /// earlier trace, a fresh staging directory inside it.
    pub fn prepare(plan: &OutputPlan) -> Result<Output> {
        if plan.staged() {
            let rec = &plan.rec;
            if rec.exists() {
                std::fs::remove_dir_all(rec).with_context(|| format!("cannot remove {}", rec.display()))?;
            }
            std::fs::create_dir(rec).with_context(|| format!("cannot create {}", rec.display()))?;
        } else {
            std::fs::create_dir_all(&plan.out).with_context(|| format!("cannot create the trace directory {}", plan.out.display()))?;
        }
        Ok(Output { out: plan.out.clone(), rec: plan.rec.clone() })
    }

    /// Put the new recording in place of the earlier trace: remove the entries the earlier
    /// trace owns ([`owned_by_trace`]), move the new ones in. Nothing else in `out` is touched.
    pub fn commit(&self) -> Result<()> {
        if self.rec == self.out {
            return Ok(());
        }
        // Readers of `out` meanwhile say it is being recorded, instead of reading a mix; a
        // `trace run` recording straight into it is waited for.
        let _replacing = trace_format::lock::lock(&self.out).with_context(|| format!("cannot open {}", self.out.display()))?;
        for e in std::fs::read_dir(&self.out).with_context(|| format!("cannot read {}", self.out.display()))? {
            let e = e.with_context(|| format!("cannot read {}", self.out.display()))?;
            let name = e.file_name().to_string_lossy().into_owned();
            if !owned_by_trace(&self.out, &name) {
                continue;
            }
            let path = e.path();
            let r = if path.is_dir() { std::fs::remove_dir_all(&path) } else { std::fs::remove_file(&path) };
            r.with_context(|| format!("cannot remove {} of the earlier trace", path.display()))?;
        }
        for e in std::fs::read_dir(&self.rec).with_context(|| format!("cannot read {}", self.rec.display()))? {
            let e = e.with_context(|| format!("cannot read {}", self.rec.display()))?;
            let to = self.out.join(e.file_name());
            std::fs::rename(e.path(), &to).with_context(|| format!("cannot move the new recording into {}", to.display()))?;
        }
        std::fs::remove_dir(&self.rec).with_context(|| format!("cannot remove {}", self.rec.display()))
    }

    /// Whether the recording directory holds a process directory.
    pub fn recorded_any(&self) -> bool {
        std::fs::read_dir(&self.rec)
            .map(|d| d.filter_map(|e| e.ok()).any(|e| owned_by_trace(&self.rec, &e.file_name().to_string_lossy()) && e.path().is_dir()))
            .unwrap_or(false)
    }

    /// Drop a recording that holds nothing, keeping the earlier trace.
    pub fn discard(&self) {
        if self.rec != self.out {
            let _ = std::fs::remove_dir_all(&self.rec);
        }
    }
}

/// A file of [`RESERVE_BYTES`] allocated in the recording directory before the target starts
/// and removed after it ends, so the documents written then (`meta.json`, `sources.json`) have
/// room even when the streams filled the disk.
pub fn reserve_space(dir: &Path) -> Option<PathBuf> {
    use std::os::unix::io::AsRawFd;
    let path = dir.join(RESERVE_FILE);
    let f = std::fs::File::create(&path).ok()?;
    // SAFETY: posix_fallocate on a descriptor we own.
    let r = unsafe { libc::posix_fallocate(f.as_raw_fd(), 0, RESERVE_BYTES) };
    if r != 0 {
        let _ = std::fs::remove_file(&path);
        return None;
    }
    Some(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `trace run` does with an output path before the run.
    fn prepare_output(out: &Path) -> Result<Output> {
        let plan = crate::plan::decide_output(out, observe(out), std::process::id())?;
        Output::prepare(&plan)
    }

    const OLD_META: &str =
        r#"{"format":"slice-trace","version":1,"tool":"t","argv":[],"cwd":"/","target_kind":"python","start_unix_ms":0}"#;

    #[test]
    fn output_dir_rules() {
        let d = tempfile::tempdir().unwrap();
        // A new directory is created and recorded into; an empty one is used.
        let new = d.path().join("new.d");
        assert_eq!(prepare_output(&new).unwrap().rec, new);
        assert!(new.is_dir());
        assert_eq!(prepare_output(&new).unwrap().rec, new);
        // A directory with other files is refused.
        std::fs::write(new.join("notes.txt"), "mine").unwrap();
        let e = prepare_output(&new).unwrap_err().to_string();
        assert!(e.contains("not a trace directory"), "{e}");
        assert!(new.join("notes.txt").exists());
        // A file is refused.
        let file = d.path().join("file");
        std::fs::write(&file, "x").unwrap();
        assert!(prepare_output(&file).is_err());
    }

    /// An earlier trace with the user's own files beside and inside it.
    fn earlier_trace(d: &Path) -> PathBuf {
        let old = d.join("old.d");
        std::fs::create_dir(&old).unwrap();
        std::fs::write(old.join(META_FILE), OLD_META).unwrap();
        std::fs::write(old.join(SOURCES_FILE), "{\"files\":[]}").unwrap();
        std::fs::create_dir(old.join("p1")).unwrap();
        std::fs::write(old.join("p1").join(trace_format::PROC_META_FILE), "{}").unwrap();
        std::fs::write(old.join("notes.md"), "mine").unwrap();
        std::fs::create_dir(old.join("plots")).unwrap();
        std::fs::write(old.join("plots").join("a.svg"), "mine").unwrap();
        std::fs::create_dir(old.join("p2")).unwrap(); // no proc.json: not the trace's
        old
    }

    #[test]
    fn re_recording_replaces_only_what_the_trace_owns() {
        let d = tempfile::tempdir().unwrap();
        let old = earlier_trace(d.path());
        let o = prepare_output(&old).unwrap();
        assert_ne!(o.rec, old, "an earlier trace is recorded over in a separate directory");
        assert!(old.join("p1").exists(), "nothing is removed before the run");
        // The new run: one process and its documents.
        std::fs::create_dir(o.rec.join("p9")).unwrap();
        std::fs::write(o.rec.join("p9").join(trace_format::PROC_META_FILE), "{}").unwrap();
        std::fs::write(o.rec.join(META_FILE), "new").unwrap();
        assert!(o.recorded_any());
        o.commit().unwrap();
        let mut names: Vec<String> =
            std::fs::read_dir(&old).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        assert_eq!(names, ["meta.json", "notes.md", "p2", "p9", "plots"]);
        assert_eq!(std::fs::read_to_string(old.join(META_FILE)).unwrap(), "new");
        assert_eq!(std::fs::read_to_string(old.join("plots").join("a.svg")).unwrap(), "mine");
    }

    #[test]
    fn a_run_that_records_nothing_keeps_the_earlier_trace() {
        let d = tempfile::tempdir().unwrap();
        let old = earlier_trace(d.path());
        let o = prepare_output(&old).unwrap();
        std::fs::write(o.rec.join(META_FILE), "new").unwrap();
        assert!(!o.recorded_any());
        o.discard();
        assert!(!o.rec.exists());
        assert_eq!(std::fs::read_to_string(old.join(META_FILE)).unwrap(), OLD_META);
        assert!(old.join("p1").join(trace_format::PROC_META_FILE).exists());
        assert!(old.join(SOURCES_FILE).exists());
    }

    #[test]
    fn owned_entries() {
        let d = tempfile::tempdir().unwrap();
        for n in ["p12", "p12.3", "p4x", "p", "p5.", "pp"] {
            std::fs::create_dir(d.path().join(n)).unwrap();
            std::fs::write(d.path().join(n).join(trace_format::PROC_META_FILE), "{}").unwrap();
        }
        let owned: Vec<&str> = ["meta.json", "sources.json", "p12", "p12.3", "p4x", "p", "p5.", "pp", "notes.md"]
            .into_iter()
            .filter(|n| owned_by_trace(d.path(), n))
            .collect();
        assert_eq!(owned, ["meta.json", "sources.json", "p12", "p12.3"]);
    }
}
