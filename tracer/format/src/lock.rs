//! "This trace is being recorded": `trace run` holds an exclusive `flock` on the directory it
//! records into (and on the output directory while it puts a new recording in place of an
//! earlier trace), for as long as it writes there; the kernel drops the lock when `trace`
//! ends, even killed. A reader ([`crate::TraceDir::open`]) tries a shared lock without waiting
//! and, when it cannot get one, answers [`crate::FormatError::BeingRecorded`] instead of
//! reading streams that are still growing. Where the file system has no `flock` (some network
//! or FUSE file systems), nothing is locked and a reader reads what is there, as before.

use std::collections::HashSet;
use std::fs::File;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

/// Directories this process holds the recording lock of (its own readers read them freely:
/// `trace run` reads its trace back to finish it).
fn held() -> &'static Mutex<HashSet<PathBuf>> {
    static H: OnceLock<Mutex<HashSet<PathBuf>>> = OnceLock::new();
    H.get_or_init(Default::default)
}

fn key(dir: &Path) -> PathBuf {
    dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf())
}

fn open_dir(dir: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new().read(true).custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC | libc::O_NOCTTY).open(dir)
}

fn flock(f: &File, op: libc::c_int) -> std::io::Result<()> {
    // SAFETY: flock on a descriptor we own.
    if unsafe { libc::flock(f.as_raw_fd(), op) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The recording lock of a directory, held until dropped.
#[derive(Debug)]
pub struct RecordingLock {
    _file: File,
    key: PathBuf,
}

impl Drop for RecordingLock {
    fn drop(&mut self) {
        held().lock().unwrap_or_else(|e| e.into_inner()).remove(&self.key);
    }
}

/// Whether another process holds the lock (`Err(WouldBlock)` from [`try_lock`]).
pub fn is_busy(e: &std::io::Error) -> bool {
    e.raw_os_error() == Some(libc::EWOULDBLOCK)
}

/// Take the recording lock of `dir` without waiting: `Err` with [`is_busy`] when another
/// process records there; `Ok(None)` when the file system has no locks.
pub fn try_lock(dir: &Path) -> std::io::Result<Option<RecordingLock>> {
    lock_with(dir, libc::LOCK_EX | libc::LOCK_NB)
}

/// Take the recording lock of `dir`, waiting while another process holds it.
pub fn lock(dir: &Path) -> std::io::Result<Option<RecordingLock>> {
    lock_with(dir, libc::LOCK_EX)
}

fn lock_with(dir: &Path, op: libc::c_int) -> std::io::Result<Option<RecordingLock>> {
    let f = open_dir(dir)?;
    loop {
        match flock(&f, op) {
            Ok(()) => break,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) if is_busy(&e) => return Err(e),
            // No locks on this file system: record without one.
            Err(_) => return Ok(None),
        }
    }
    let key = key(dir);
    held().lock().unwrap_or_else(|e| e.into_inner()).insert(key.clone());
    Ok(Some(RecordingLock { _file: f, key }))
}

/// Whether a `trace run` (another process) is recording into `dir` now.
pub fn being_recorded(dir: &Path) -> bool {
    if held().lock().unwrap_or_else(|e| e.into_inner()).contains(&key(dir)) {
        return false;
    }
    let Ok(f) = open_dir(dir) else { return false };
    // A shared lock taken and dropped at once (closing the file drops it).
    matches!(flock(&f, libc::LOCK_SH | libc::LOCK_NB), Err(e) if is_busy(&e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_locked_by_another_process_is_being_recorded() {
        let d = tempfile::tempdir().unwrap();
        assert!(!being_recorded(d.path()));
        // Another process holds it: `flock` on another open file description of the
        // directory conflicts like another process's (flock locks belong to the description).
        let other = open_dir(d.path()).unwrap();
        flock(&other, libc::LOCK_EX | libc::LOCK_NB).unwrap();
        assert!(being_recorded(d.path()));
        assert!(is_busy(&try_lock(d.path()).unwrap_err()), "a second recorder is refused");
        drop(other);
        assert!(!being_recorded(d.path()), "the lock goes with its holder");
        // Held by this process: its own readers read it.
        let mine = try_lock(d.path()).unwrap().expect("tmpfs has flock");
        assert!(!being_recorded(d.path()));
        drop(mine);
        assert!(!being_recorded(d.path()));
    }
}
