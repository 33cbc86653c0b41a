//! Where `trace` gets its shims (`libslicetrace_py.so`, `libslicetrace_native.so`).
//!
//! 1. **Embedded** (the `embed-shims` feature, on by default; `build.rs` builds them): the
//!    bytes are written on first use to a per-user cache directory keyed by their SHA-256,
//!    `$XDG_CACHE_HOME/slice-trace/<sha256>/` (or `~/.cache/...`). The directories are made
//!    0700 and must belong to the user, each file is written to a temporary name and renamed
//!    (atomic: a concurrent `trace` sees the whole file or none), and a file found there is
//!    used only if it is byte for byte the embedded one (rewritten otherwise; compared in
//!    full once, then trusted while its inode, size and change time stay those noted beside
//!    it). A directory
//!    shared between users (such as a fixed path under /tmp) would let another user put code
//!    into every recorded process: that is why it is per user. Older versions' directories
//!    are removed, keeping the newest few and any used in the last day.
//! 2. **Beside `trace`** or in `../lib` (a `trace` built without `embed-shims`, with the two
//!    `.so` files installed next to it).

use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/embedded_shims.rs"));
}

/// How many versions' directories the cache keeps (a developer rebuilding the shims makes a
/// new one per build; two installs of different versions alternate between theirs).
const KEEP_VERSIONS: usize = 4;

/// The path of shim `name`: the embedded copy, written to the cache, or one beside `trace`.
/// The error is the message for the user (what is missing, why, what to do).
pub fn find(name: &str) -> Result<PathBuf, String> {
    let embedded_err = match embedded::EMBEDDED.iter().find(|(n, _, _)| *n == name) {
        Some((_, bytes, hash)) => match cache_dir() {
            Ok(base) => match materialize(&base, name, bytes, hash) {
                Ok(p) => return Ok(p),
                Err(e) => Some(e),
            },
            Err(e) => Some(e),
        },
        None => None,
    };
    if let Some(p) = beside_exe(name) {
        return Ok(p);
    }
    let exe_dir = std::env::current_exe().ok().and_then(|e| e.parent().map(Path::to_path_buf)).unwrap_or_default();
    let what = if name.contains("_py") { "Python" } else { "native" };
    Err(match embedded_err {
        Some(e) => format!("cannot write the {what} shim {name} that `trace` carries: {e}"),
        None => missing_message(what, name, &exe_dir),
    })
}

/// `name` next to the `trace` executable, or in `../lib`.
fn beside_exe(name: &str) -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let exe = exe.canonicalize().unwrap_or(exe);
    let dir = exe.parent()?;
    [dir.join(name), dir.join("../lib").join(name)].into_iter().find(|p| p.is_file())
}

/// `$XDG_CACHE_HOME/slice-trace` (an absolute `XDG_CACHE_HOME` only, as the XDG spec says),
/// else `$HOME/.cache/slice-trace`.
pub(crate) fn cache_dir() -> Result<PathBuf, String> {
    let xdg = std::env::var_os("XDG_CACHE_HOME").map(PathBuf::from).filter(|p| p.is_absolute());
    let base = match xdg {
        Some(p) => p,
        None => match std::env::var_os("HOME").map(PathBuf::from).filter(|p| p.is_absolute()) {
            Some(home) => home.join(".cache"),
            None => return Err("neither XDG_CACHE_HOME nor HOME is set to an absolute path".into()),
        },
    };
    Ok(base.join("slice-trace"))
}

/// Make `dir` (and missing parents) with mode 0700, then check that it is a directory of ours
/// that nobody else can write to.
pub(crate) fn private_dir(dir: &Path) -> Result<(), String> {
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let md = std::fs::symlink_metadata(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    if !md.is_dir() || md.uid() != me || md.mode() & 0o022 != 0 {
        return Err(format!(
            "{} is not a private directory of this user (a symbolic link, another owner, or writable by others); remove it",
            dir.display()
        ));
    }
    Ok(())
}

/// The cached copy of an embedded shim under `base/<hash>/name`, written if missing or not
/// identical to `bytes`.
fn materialize(base: &Path, name: &str, bytes: &[u8], hash: &str) -> Result<PathBuf, String> {
    materialize_settled(base, name, bytes, hash, SETTLED)
}

/// [`materialize`], with how long ago a file must have changed for its comparison to be noted.
fn materialize_settled(base: &Path, name: &str, bytes: &[u8], hash: &str, settled: std::time::Duration) -> Result<PathBuf, String> {
    private_dir(base)?;
    let dir = base.join(hash);
    let fresh = !dir.exists();
    private_dir(&dir)?;
    let path = dir.join(name);
    if verified(&dir, name, &path, bytes, settled) {
        // Marked as in use, so that another version's `trace` does not prune it meanwhile.
        if let Ok(d) = std::fs::File::open(&dir) {
            let _ = d.set_modified(std::time::SystemTime::now());
        }
        return Ok(path);
    }
    let mut tmp = tempfile::Builder::new().prefix(".tmp-").tempfile_in(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    tmp.write_all(bytes).and_then(|()| tmp.as_file().sync_all()).map_err(|e| format!("{}: {e}", tmp.path().display()))?;
    tmp.as_file().set_permissions(std::fs::Permissions::from_mode(0o500)).map_err(|e| format!("{}: {e}", tmp.path().display()))?;
    tmp.persist(&path).map_err(|e| format!("{}: {}", path.display(), e.error))?;
    if fresh {
        prune(base, hash);
    }
    Ok(path)
}

/// Whether the file at `path` holds exactly `bytes`. Compared in full once; then its
/// metadata (device, inode, size, modification and change times) is noted in
/// `dir/.<name>.verified`, and a later run that finds the same metadata skips the comparison
/// (reading and comparing the whole shim on every `trace run` was a visible part of its
/// start-up: `docs/performance.md`, "Figures behind the code's choices"). Any write
/// to the file, or a file put in its place, changes its change time (`ctime`, which no
/// user-space call sets back) or its inode. A file changed within the same clock tick as its
/// comparison would keep the noted times, so a file changed less than [`SETTLED`] ago is
/// compared every time and never noted (git's "racy clean" rule).
fn verified(dir: &Path, name: &str, path: &Path, bytes: &[u8], settled: std::time::Duration) -> bool {
    let Ok(md) = std::fs::symlink_metadata(path) else { return false };
    // SAFETY: geteuid has no preconditions and cannot fail.
    if !md.file_type().is_file() || md.uid() != unsafe { libc::geteuid() } || md.len() != bytes.len() as u64 {
        return false;
    }
    let key = stat_key(&md);
    let note = dir.join(format!(".{name}.verified"));
    if std::fs::read_to_string(&note).is_ok_and(|n| n == key) {
        return true;
    }
    if !same_bytes(path, bytes) {
        return false;
    }
    let changed = std::time::UNIX_EPOCH + std::time::Duration::new(md.ctime().max(0) as u64, md.ctime_nsec().clamp(0, 999_999_999) as u32);
    if std::time::SystemTime::now().duration_since(changed).is_ok_and(|age| age >= settled) {
        // Replaced whole; a failure only means comparing again next time.
        let tmp = dir.join(format!(".{name}.verified.tmp-{}", std::process::id()));
        if std::fs::write(&tmp, &key).is_ok() && std::fs::rename(&tmp, &note).is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
    }
    true
}

/// How long ago a file must have last changed for its comparison to be noted ([`verified`]).
pub(crate) const SETTLED: std::time::Duration = std::time::Duration::from_secs(2);

pub(crate) fn stat_key(md: &std::fs::Metadata) -> String {
    format!("{} {} {} {}.{:09} {}.{:09}", md.dev(), md.ino(), md.len(), md.mtime(), md.mtime_nsec(), md.ctime(), md.ctime_nsec())
}

/// Whether the file at `path` holds exactly `bytes`, read in pieces (no copy of the whole).
fn same_bytes(path: &Path, bytes: &[u8]) -> bool {
    use std::io::Read as _;
    let Ok(mut f) = std::fs::File::open(path) else { return false };
    let mut buf = vec![0u8; 256 * 1024];
    let mut at = 0usize;
    loop {
        match f.read(&mut buf) {
            Ok(0) => return at == bytes.len(),
            Ok(n) => {
                if bytes.get(at..at + n) != Some(&buf[..n]) {
                    return false;
                }
                at += n;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
}

/// A version's directory used (by any `trace` run) within this long is never pruned: builds
/// of several versions running at once (worktrees, CI jobs, a tool pinned to an old release)
/// must not delete a shim another run is about to load (its Python children load it later).
const IN_USE: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

/// Remove the directories of other versions but the newest [`KEEP_VERSIONS`] (by mtime), and
/// of those only the ones unused for [`IN_USE`]. A failure only leaves a directory behind.
fn prune(base: &Path, current: &str) {
    let Ok(entries) = std::fs::read_dir(base) else { return };
    let mut others: Vec<(std::time::SystemTime, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_str().is_some_and(|n| n != current && n.len() == 64 && n.bytes().all(|b| b.is_ascii_hexdigit())))
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .collect();
    others.sort_by_key(|o| std::cmp::Reverse(o.0));
    let now = std::time::SystemTime::now();
    let unused = |t: std::time::SystemTime| now.duration_since(t).is_ok_and(|age| age > IN_USE);
    for (_, dir) in others.into_iter().skip(KEEP_VERSIONS - 1).filter(|(t, _)| unused(*t)) {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// The error for a missing shim (`what`: "Python" or "native"; `name`: its file name;
/// `exe_dir`: the directory of the running `trace`), for a `trace` built without embedded
/// shims. Inside a cargo target directory the fix is to build the workspace with the same
/// profile; anywhere else `trace` was copied or installed without the shims.
pub fn missing_message(what: &str, name: &str, exe_dir: &Path) -> String {
    let dir = exe_dir.display();
    let head = format!("the {what} shim {name} is not next to `trace` in {dir} (nor in {dir}/../lib)");
    let profile = exe_dir.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let in_target = exe_dir.parent().and_then(Path::file_name).is_some_and(|n| n == "target");
    match profile {
        "release" if in_target => {
            format!("{head}; build it with `cargo build --release --workspace` at the root of the slice-trace checkout")
        }
        "debug" if in_target => format!("{head}; build it with `cargo build --workspace` at the root of the slice-trace checkout"),
        _ => format!(
            "{head}. This `trace` was built without the `embed-shims` feature, so it loads its shims from beside \
             itself: copy libslicetrace_py.so and libslicetrace_native.so (from target/release after \
             `cargo build --release --workspace`) next to it, or install with `cargo install --path .` (which embeds them)"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advice_fits_where_trace_runs_from() {
        let m = missing_message("Python", "libslicetrace_py.so", Path::new("/src/st/target/release"));
        assert!(m.ends_with("build it with `cargo build --release --workspace` at the root of the slice-trace checkout"), "{m}");
        let m = missing_message("Python", "libslicetrace_py.so", Path::new("/src/st/target/debug"));
        assert!(m.ends_with("build it with `cargo build --workspace` at the root of the slice-trace checkout"), "{m}");
        let m = missing_message("native", "libslicetrace_native.so", Path::new("/home/u/.cargo/bin"));
        assert!(m.starts_with("the native shim libslicetrace_native.so is not next to `trace` in /home/u/.cargo/bin"), "{m}");
        assert!(m.contains("without the `embed-shims` feature") && m.contains("`cargo install --path .`"), "{m}");
    }

    #[test]
    #[cfg(feature = "embed-shims")]
    fn the_default_build_embeds_both_shims() {
        let names: Vec<&str> = embedded::EMBEDDED.iter().map(|(n, _, _)| *n).collect();
        assert_eq!(names, ["libslicetrace_py.so", "libslicetrace_native.so"]);
        for (name, bytes, hash) in embedded::EMBEDDED {
            assert!(bytes.starts_with(b"\x7fELF"), "{name} is not an ELF file");
            assert_eq!(hash.len(), 64, "{name}");
        }
    }

    #[test]
    fn writes_once_privately_and_repairs_a_changed_copy() {
        let d = tempfile::tempdir().unwrap();
        let base = d.path().join("cache/slice-trace");
        let hash = "ab".repeat(32);
        let p = materialize(&base, "libx.so", b"\x7fELF one", &hash).unwrap();
        assert_eq!(p, base.join(&hash).join("libx.so"));
        assert_eq!(std::fs::read(&p).unwrap(), b"\x7fELF one");
        for dir in [&base, &base.join(&hash)] {
            assert_eq!(std::fs::metadata(dir).unwrap().mode() & 0o777, 0o700, "{}", dir.display());
        }
        // A second use finds it as is (same inode: not rewritten).
        let ino = std::fs::metadata(&p).unwrap().ino();
        materialize(&base, "libx.so", b"\x7fELF one", &hash).unwrap();
        assert_eq!(std::fs::metadata(&p).unwrap().ino(), ino);
        // A changed or truncated copy is replaced by the embedded bytes.
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::write(&p, b"\x7fELF tampered").unwrap();
        materialize(&base, "libx.so", b"\x7fELF one", &hash).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"\x7fELF one");
        // No temporary file is left behind.
        let names: Vec<_> = std::fs::read_dir(base.join(&hash)).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, ["libx.so"]);
    }

    #[test]
    fn a_copy_compared_once_is_trusted_until_it_changes() {
        let d = tempfile::tempdir().unwrap();
        let base = d.path().join("slice-trace");
        let hash = "ef".repeat(32);
        let zero = std::time::Duration::ZERO;
        let p = materialize(&base, "libx.so", b"\x7fELF one", &hash).unwrap();
        let note = base.join(&hash).join(".libx.so.verified");
        // Just written: too recent to be noted, under the default rule.
        materialize(&base, "libx.so", b"\x7fELF one", &hash).unwrap();
        assert!(!note.exists());
        // Settled: compared, then noted.
        materialize_settled(&base, "libx.so", b"\x7fELF one", &hash, zero).unwrap();
        let key = std::fs::read_to_string(&note).unwrap();
        assert_eq!(key, stat_key(&std::fs::metadata(&p).unwrap()));
        // A note that does not match the file means nothing: the bytes are compared.
        std::fs::write(&note, stat_key(&std::fs::metadata(d.path()).unwrap())).unwrap();
        assert!(!verified(&base.join(&hash), "libx.so", &p, b"\x7fELF two", zero));
        // Changed in place (same length, same inode, a later change time): rewritten.
        materialize_settled(&base, "libx.so", b"\x7fELF one", &hash, zero).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(30));
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::write(&p, b"\x7fELF two").unwrap();
        materialize_settled(&base, "libx.so", b"\x7fELF one", &hash, zero).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"\x7fELF one");
        // Replaced by another file of the same length: rewritten.
        materialize_settled(&base, "libx.so", b"\x7fELF one", &hash, zero).unwrap();
        std::fs::remove_file(&p).unwrap();
        std::fs::write(&p, b"\x7fELF two").unwrap();
        materialize_settled(&base, "libx.so", b"\x7fELF one", &hash, zero).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"\x7fELF one");
    }

    #[test]
    fn refuses_a_cache_directory_others_can_write() {
        let d = tempfile::tempdir().unwrap();
        let base = d.path().join("slice-trace");
        std::fs::create_dir(&base).unwrap();
        std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = materialize(&base, "libx.so", b"x", &"cd".repeat(32)).unwrap_err();
        assert!(e.contains("is not a private directory of this user"), "{e}");
        // A symbolic link in its place is refused too.
        let link = d.path().join("link");
        std::os::unix::fs::symlink(d.path(), &link).unwrap();
        let e = materialize(&link, "libx.so", b"x", &"cd".repeat(32)).unwrap_err();
        assert!(e.contains("is not a private directory"), "{e}");
    }

    #[test]
    fn keeps_only_the_newest_versions() {
        let d = tempfile::tempdir().unwrap();
        let base = d.path().join("slice-trace");
        let hashes: Vec<String> = (0..6).map(|i| format!("{i:x}").repeat(64)).collect();
        for (i, h) in hashes.iter().enumerate() {
            materialize(&base, "libx.so", b"x", h).unwrap();
            // Distinct mtimes, oldest first.
            let t = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000 + i as u64);
            std::fs::File::open(base.join(h)).unwrap().set_modified(t).unwrap();
        }
        let mut left: Vec<String> = std::fs::read_dir(&base).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        left.sort();
        assert_eq!(left, hashes[2..].to_vec(), "the newest {KEEP_VERSIONS} stay");
    }

    #[test]
    fn versions_in_use_are_not_pruned() {
        let d = tempfile::tempdir().unwrap();
        let base = d.path().join("slice-trace");
        let now = std::time::SystemTime::now();
        let hour = std::time::Duration::from_secs(3600);
        let hashes: Vec<String> = (0..7).map(|i| format!("{i:x}").repeat(64)).collect();
        // Six other versions: 0-3 used within the last hours, 4 and 5 two days ago.
        for (i, h) in hashes[..6].iter().enumerate() {
            std::fs::create_dir_all(base.join(h)).unwrap();
            std::fs::write(base.join(h).join("libx.so"), b"x").unwrap();
            let age = if i < 4 { hour * (i as u32 + 1) } else { hour * 48 };
            std::fs::File::open(base.join(h)).unwrap().set_modified(now - age).unwrap();
        }
        // Using version 5 again marks it as in use.
        materialize(&base, "libx.so", b"x", &hashes[5]).unwrap();
        // A new version's first run prunes only version 4: the others are in use, though
        // more than the newest few.
        materialize(&base, "libx.so", b"x", &hashes[6]).unwrap();
        let mut left: Vec<String> = std::fs::read_dir(&base).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        left.sort();
        let want: Vec<String> = hashes.iter().enumerate().filter(|(i, _)| *i != 4).map(|(_, h)| h.clone()).collect();
        assert_eq!(left, want);
    }
}
