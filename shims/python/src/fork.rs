//! Fork safety. A `pthread_atfork` child handler runs inside `fork()`, in the child, before
//! any Python-level after-fork handler (`threading`'s, `random`'s, the program's): it lets go
//! of the parent's streams and function table and stops recording, so nothing the child runs
//! can write into the parent's files. The child gets its own process directory, function ids
//! and streams when `os.register_at_fork(after_in_child=after_fork_child)` runs (registered
//! by `sitecustomize` after the others); whatever runs between the two is not recorded.

use crate::state::{self, warn, LineMode, GENERATION, REGISTRY_LOCK};
use pyo3::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Once, OnceLock};

struct Settings {
    root: PathBuf,
    c_calls: bool,
    lines: LineMode,
    /// The hook recording calls (inherited by a forked child), for its `proc.json`.
    hook: &'static str,
}
static SETTINGS: OnceLock<Settings> = OnceLock::new();
/// In a forked child: the pid whose recording the fork handler stopped (0: none).
static FORKED_FROM: AtomicU32 = AtomicU32::new(0);
static INSTALLED: Once = Once::new();
static IN_CHILD_HANDLER: AtomicBool = AtomicBool::new(false);

pub fn remember(root: &Path, c_calls: bool, lines: LineMode, hook: &'static str) {
    let _ = SETTINGS.set(Settings { root: root.to_path_buf(), c_calls, lines, hook });
}

pub fn install() {
    INSTALLED.call_once(|| {
        // SAFETY: registering a handler that only uses async-signal-safe calls (munmap, close)
        // and plain memory writes.
        unsafe { libc::pthread_atfork(None, None, Some(child)) };
    });
}

/// In the child, inside `fork()`: the only thread. The parent's state is let go without
/// freeing it (another parent thread may have been changing it) and without touching its files.
extern "C" fn child() {
    if IN_CHILD_HANDLER.swap(true, Ordering::Relaxed) {
        return;
    }
    GENERATION.fetch_add(1, Ordering::Relaxed);
    // SAFETY: the child has a single thread; no other code runs until this returns.
    unsafe {
        if let Some(mut old) = state::set_proc(None) {
            FORKED_FROM.store(old.pid, Ordering::Relaxed);
            old.funcs.abandon();
            std::mem::forget(old);
        }
        REGISTRY_LOCK.store(false, Ordering::Release);
        state::with_registry(|reg| {
            for rec in reg.drain(..) {
                (*(*rec).writer.get()).abandon();
                // Leaked on purpose: no allocator call in the fork handler.
            }
        });
    }
    state::CURRENT.with(|c| c.set(std::ptr::null_mut()));
    IN_CHILD_HANDLER.store(false, Ordering::Relaxed);
}

/// `os.register_at_fork(after_in_child=...)`: start recording the child into its own process
/// directory, function ids and streams.
#[pyfunction]
pub fn after_fork_child(py: Python<'_>) {
    let parent = FORKED_FROM.swap(0, Ordering::Relaxed);
    let Some(settings) = SETTINGS.get() else { return };
    if parent == 0 || state::recording(py) {
        return;
    }
    // Read the thread's name while not recording, so this is not recorded.
    let name = py
        .import("sys")
        .and_then(|s| s.getattr("modules"))
        .and_then(|m| m.get_item("threading"))
        .and_then(|t| t.call_method0("current_thread"))
        .and_then(|t| t.getattr("name"))
        .and_then(|n| n.extract::<String>())
        .ok();
    // Lines `sys.monitoring` stopped reporting in the parent run again in the child: report
    // them (to its own trace) once more. The trace function's line sets start empty with the
    // child's process state.
    if settings.lines == LineMode::Monitoring {
        if let Err(e) = crate::monitoring::restart_events(py) {
            warn(&format!("cannot restart sys.monitoring events in the forked child ({e}); lines the parent ran are not reported"));
        }
    }
    match state::open_process(py, &settings.root, settings.c_calls, settings.lines, Some(parent)) {
        // SAFETY: GIL held.
        Ok(p) => unsafe {
            state::set_proc(Some(p));
            state::record_hook(settings.hook);
        },
        Err(e) => {
            warn(&format!("{e}; the forked child is not recorded"));
            return;
        }
    }
    // SAFETY: GIL held.
    unsafe {
        state::current(Some(name.as_deref().unwrap_or("MainThread")));
        state::record_open_frames(py);
    }
}
