//! Readers and the publisher of a trace directory in this server: a tool reading a trace holds
//! its read lock while it loads it; the record tool holds its write lock while it puts a new
//! trace in place ([`super::record`]'s `publish`). A tool of this server so never reads a trace
//! half-way through its replacement (the replacement itself is one rename, which is what
//! readers in other processes see).

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock};

/// Per trace path: how many readers hold it, and whether the writer does.
#[derive(Default)]
struct State {
    readers: HashMap<PathBuf, usize>,
    writers: HashMap<PathBuf, bool>,
}

struct Table {
    state: Mutex<State>,
    changed: Condvar,
}

fn table() -> &'static Table {
    static T: OnceLock<Table> = OnceLock::new();
    T.get_or_init(|| Table { state: Mutex::new(State::default()), changed: Condvar::new() })
}

fn state() -> MutexGuard<'static, State> {
    table().state.lock().unwrap_or_else(|e| e.into_inner())
}

/// The key of a trace path: absolute, `.` and `..` resolved, the directory itself resolved
/// through symbolic links when it exists (its parent otherwise).
fn key(path: &Path) -> PathBuf {
    let abs = std::env::current_dir().map(|c| c.join(path)).unwrap_or_else(|_| path.to_path_buf());
    let mut k = PathBuf::new();
    for c in abs.components() {
        match c {
            Component::ParentDir => {
                k.pop();
            }
            Component::CurDir => {}
            other => k.push(other),
        }
    }
    if let Ok(c) = k.canonicalize() {
        return c;
    }
    match (k.parent().and_then(|p| p.canonicalize().ok()), k.file_name()) {
        (Some(p), Some(n)) => p.join(n),
        _ => k,
    }
}

/// A held lock of trace paths, released when dropped.
pub struct Held {
    keys: Vec<PathBuf>,
    write: bool,
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut s = state();
        for k in &self.keys {
            if self.write {
                s.writers.remove(k);
            } else if let Some(n) = s.readers.get_mut(k) {
                *n -= 1;
                if *n == 0 {
                    s.readers.remove(k);
                }
            }
        }
        drop(s);
        table().changed.notify_all();
    }
}

/// Hold the read locks of these traces: wait until no writer holds any of them, then take
/// them all at once (so readers and writers never wait on each other in a cycle).
pub fn read(paths: &[PathBuf]) -> Held {
    let mut keys: Vec<PathBuf> = paths.iter().map(|p| key(p)).collect();
    keys.sort();
    keys.dedup();
    let mut s = state();
    while keys.iter().any(|k| s.writers.contains_key(k)) {
        s = table().changed.wait(s).unwrap_or_else(|e| e.into_inner());
    }
    for k in &keys {
        *s.readers.entry(k.clone()).or_default() += 1;
    }
    Held { keys, write: false }
}

/// Hold the write lock of a trace: wait until nobody reads or writes it.
pub fn write(path: &Path) -> Held {
    let k = key(path);
    let mut s = state();
    while s.writers.contains_key(&k) || s.readers.contains_key(&k) {
        s = table().changed.wait(s).unwrap_or_else(|e| e.into_inner());
    }
    s.writers.insert(k.clone(), true);
    Held { keys: vec![k], write: true }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn a_writer_waits_for_the_readers_of_the_same_trace_only() {
        let d = tempfile::tempdir().unwrap();
        let a = d.path().join("a.d");
        let r = read(&[a.clone(), d.path().join("b.d")]);
        // Another trace: not blocked.
        drop(write(&d.path().join("c.d")));
        let a2 = d.path().join("x/../a.d");
        let t = Instant::now();
        let h = std::thread::spawn(move || {
            let _w = write(&a2);
            Instant::now()
        });
        std::thread::sleep(Duration::from_millis(200));
        drop(r);
        let got = h.join().unwrap();
        assert!(got.duration_since(t) >= Duration::from_millis(200), "the writer waited for the reader");
    }
}
