//! Fingerprints of the files a trace ran (`sources.json`: size, modification time, SHA-256),
//! taken by `trace run` after the program ended. A large object's hash comes from a per-user
//! cache (`<cache>/slice-trace/fingerprints/`, the shims' private directory) when the file is
//! the one hashed before: same device, inode, size, modification time and status-change time
//! (`ctime`, which every write and every `utime` moves and no user can set back). Hashing
//! hexyl's 6.3 MB binary after each run was about 6 ms of `trace run`'s CPU, more than its
//! probes cost (docs/performance.md, "Fingerprints of large objects from a cache").
//!
//! A hash is stored only for a file whose times are at least [`SETTLED`] old when it is
//! hashed: a file written during that time (or within the file system's timestamp
//! granularity of it) could change again without its times changing, and is hashed every time.

use sha2::{Digest, Sha256};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use trace_format::FileFingerprint;

/// Files smaller than this are hashed every time (most source files: about as cheap as the
/// cache's look-up). hexyl's trace: its binary and 4 of its 84 source files are larger, 6.8 of
/// its 7.7 MB.
const CACHED_FROM: u64 = 64 << 10;

/// How old a file's modification and status-change times must be for its hash to be cached
/// (the rule of the shims' cache, [`crate::shims::SETTLED`]).
const SETTLED: Duration = crate::shims::SETTLED;

/// Hashes kept in the cache (the most recently used).
const CACHE_KEEP: usize = 256;

/// Size, modification time and SHA-256 of a file; `None` when it is not a regular file or
/// cannot be read. Hashed as it is read, in pieces of `buf`'s size (one buffer for every file
/// of the trace): a large program read whole cost `trace run` a fresh buffer of its size to
/// fault in and free, half of its time after recording (`docs/performance.md`, "Figures
/// behind the code's choices"). With `cache` (the cache's directory), a file of at least
/// [`CACHED_FROM`] bytes takes its hash from there when it is unchanged.
pub(crate) fn fingerprint(path: &Path, buf: &mut [u8], cache: Option<&Path>) -> Option<FileFingerprint> {
    use std::io::Read;
    let mut file = std::fs::File::open(path).ok()?;
    let meta = file.metadata().ok().filter(|m| m.is_file())?;
    let mtime_ns = meta.mtime() as i128 * 1_000_000_000 + meta.mtime_nsec() as i128;
    let entry = cache.filter(|_| meta.len() >= CACHED_FROM).map(|d| d.join(cache_key(path, &meta)));
    let cached = entry.as_deref().and_then(read_cached);
    let sha256 = match cached {
        Some(h) => h,
        None => {
            let mut hasher = Sha256::new();
            loop {
                match file.read(buf) {
                    Ok(0) => break,
                    Ok(n) => hasher.update(&buf[..n]),
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(_) => return None,
                }
            }
            let hash = hex(&hasher.finalize());
            // Stored only when the file was not written while it was read, nor just before.
            let after = file.metadata().ok();
            if let (Some(e), Some(after)) = (&entry, after) {
                if same_file_state(&meta, &after) && settled(&after) {
                    store(e, &hash);
                }
            }
            hash
        }
    };
    Some(FileFingerprint { path: path.to_string_lossy().into_owned(), size: meta.len(), mtime_ns, sha256, symbols: Vec::new() })
}

/// The cache directory for [`fingerprint`] (made private), or `None` when there is none: then
/// every file is hashed.
pub(crate) fn cache_dir() -> Option<PathBuf> {
    let dir = crate::shims::cache_dir().ok()?.join("fingerprints");
    let parent = dir.parent()?;
    (crate::shims::private_dir(parent).is_ok() && crate::shims::private_dir(&dir).is_ok()).then_some(dir)
}

/// The cache entry's name: the SHA-256 of what identifies the file's content (the rules'
/// version with it).
fn cache_key(path: &Path, m: &std::fs::Metadata) -> String {
    let key = format!("1\0{}\0{}", path.to_string_lossy(), crate::shims::stat_key(m));
    hex(&Sha256::digest(key.as_bytes()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A cached hash: 64 lowercase hex digits, nothing else.
fn read_cached(entry: &Path) -> Option<String> {
    let text = std::fs::read(entry).ok().filter(|t| t.len() == 64)?;
    let text = String::from_utf8(text).ok().filter(|t| t.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))?;
    // Touched as used, so that pruning keeps it.
    let _ = std::fs::File::open(entry).and_then(|h| h.set_modified(SystemTime::now()));
    Some(text)
}

/// Nothing about the file changed between the two reads of its status.
fn same_file_state(a: &std::fs::Metadata, b: &std::fs::Metadata) -> bool {
    crate::shims::stat_key(a) == crate::shims::stat_key(b)
}

/// Both times of the file at least [`SETTLED`] in the past (a time in the future is not).
fn settled(m: &std::fs::Metadata) -> bool {
    let Ok(now) = SystemTime::now().duration_since(UNIX_EPOCH) else { return false };
    let Some(limit) = now.checked_sub(SETTLED) else { return false };
    // To the nanosecond: whole seconds would ask up to a second more.
    let at = |secs: i64, nsec: i64| Duration::new(secs.max(0) as u64, nsec.clamp(0, 999_999_999) as u32);
    at(m.mtime(), m.mtime_nsec()) <= limit && at(m.ctime(), m.ctime_nsec()) <= limit
}

/// Write `hash` as the entry (a temporary file renamed into place), then prune.
fn store(entry: &Path, hash: &str) {
    let Some(dir) = entry.parent() else { return };
    if let Ok(mut tmp) = tempfile::Builder::new().prefix(".tmp-").tempfile_in(dir) {
        use std::io::Write;
        if tmp.write_all(hash.as_bytes()).is_ok() && tmp.persist(entry).is_ok() {
            prune(dir);
        }
    }
}

/// Keep the [`CACHE_KEEP`] most recently used entries.
fn prune(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let mut files: Vec<(SystemTime, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_str().is_some_and(|n| n.len() == 64))
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .collect();
    if files.len() <= CACHE_KEEP {
        return;
    }
    files.sort_by_key(|f| std::cmp::Reverse(f.0));
    for (_, f) in files.into_iter().skip(CACHE_KEEP) {
        let _ = std::fs::remove_file(f);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprints() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("a.py");
        std::fs::write(&f, "abc").unwrap();
        let mut buf = [0u8; 2];
        let fp = fingerprint(&f, &mut buf, None).unwrap();
        assert_eq!(fp.size, 3);
        assert_eq!(fp.sha256, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        assert!(fingerprint(&d.path().join("missing.py"), &mut buf, None).is_none());
        assert!(fingerprint(d.path(), &mut buf, None).is_none());
        // Read in pieces smaller than the file, hashed the same.
        assert_eq!(fingerprint(&f, &mut [0u8; 1], None).unwrap().sha256, fp.sha256);
    }

    /// A large file: its hash stored once its times are settled, read back while it is
    /// unchanged (the entry is what answers: a planted wrong hash comes back), and taken again
    /// from the file once it is rewritten, even with its old size and modification time.
    #[test]
    fn a_large_unchanged_file_is_hashed_once() {
        let d = tempfile::tempdir().unwrap();
        let cache = d.path().join("cache");
        std::fs::create_dir(&cache).unwrap();
        let f = d.path().join("prog");
        let content = vec![7u8; CACHED_FROM as usize + 5];
        std::fs::write(&f, &content).unwrap();
        let old = SystemTime::now() - Duration::from_secs(60);
        std::fs::File::options().write(true).open(&f).unwrap().set_modified(old).unwrap();
        let want = hex(&Sha256::digest(&content));
        let mut buf = vec![0u8; 4096];
        // Its ctime is now (set_modified moved it): not settled, so nothing is stored.
        assert_eq!(fingerprint(&f, &mut buf, Some(&cache)).unwrap().sha256, want);
        assert_eq!(std::fs::read_dir(&cache).unwrap().count(), 0);
        // Settled (the test cannot age a ctime, so it asks the rule with a later clock).
        let m = std::fs::metadata(&f).unwrap();
        assert!(!settled(&m));
        let entry = cache.join(cache_key(&f, &m));
        store(&entry, &want);
        assert_eq!(fingerprint(&f, &mut buf, Some(&cache)).unwrap().sha256, want);
        // The entry answers while the file is unchanged.
        let planted = "0".repeat(64);
        std::fs::write(&entry, &planted).unwrap();
        assert_eq!(fingerprint(&f, &mut buf, Some(&cache)).unwrap().sha256, planted);
        // Rewritten with the same size, its modification time put back: hashed again.
        let mut changed = content.clone();
        changed[0] = 8;
        std::fs::write(&f, &changed).unwrap();
        std::fs::File::options().write(true).open(&f).unwrap().set_modified(old).unwrap();
        assert_eq!(fingerprint(&f, &mut buf, Some(&cache)).unwrap().sha256, hex(&Sha256::digest(&changed)));
        // A damaged entry is not used.
        let m = std::fs::metadata(&f).unwrap();
        std::fs::write(cache.join(cache_key(&f, &m)), "not a hash").unwrap();
        assert_eq!(fingerprint(&f, &mut buf, Some(&cache)).unwrap().sha256, hex(&Sha256::digest(&changed)));
        // Small files never use the cache.
        let s = d.path().join("small");
        std::fs::write(&s, "abc").unwrap();
        let sm = std::fs::metadata(&s).unwrap();
        std::fs::write(cache.join(cache_key(&s, &sm)), &planted).unwrap();
        assert_eq!(fingerprint(&s, &mut buf, Some(&cache)).unwrap().sha256, hex(&Sha256::digest(b"abc")));
    }

    #[test]
    fn settled_means_both_times_old() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("x");
        std::fs::write(&f, "x").unwrap();
        assert!(!settled(&std::fs::metadata(&f).unwrap()));
        // A file made long ago (the test binary's own directory entry is not; /etc/hostname may
        // be recent too): the C library is a settled file on every test machine.
        let libc_path = ["/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libc.so.6", "/lib64/libc.so.6"]
            .into_iter()
            .find(|p| Path::new(p).exists());
        if let Some(p) = libc_path {
            assert!(settled(&std::fs::metadata(p).unwrap()));
        }
    }
}
