//! Native shim: an `LD_PRELOAD` runtime that implements `__cyg_profile_func_enter/exit` for
//! binaries built with `-finstrument-functions` (gcc and clang, C and C++).
//!
//! `trace run` preloads this library with `SLICE_TRACE_DIR=<trace dir>`. Nothing happens in a
//! process until its first instrumented function is entered (a shell or any other
//! uninstrumented program that inherits the preload leaves no trace); then the shim creates
//! the process's directory `p<pid>` and records, per thread, one event stream with the
//! `trace-format` writer (mmap-backed: every event survives `_exit`, `abort`, crashes and
//! `SIGKILL` without any flush, so no signal handler is installed for that; the one handler the
//! shim installs is `SIGTRAP`'s, for the inline probes of `probe`, when `trace run` listed any).
//!
//! Hot path (one call or return, in `hot.c`): the thread's state in an initial-exec TLS block
//! (no `__tls_get_addr` call), the function's call-event bytes (its id) from a per-thread
//! two-way cache, a shadow-stack store, one `rdtsc` converted to ns with a multiply and a
//! shift, and a short event (most returns 1 byte, most calls 2-4) written into the mapped
//! window. Everything else is Rust (`hooks`, `thread`,
//! `process`): the thread's first event, a cache miss (a lock-free lookup in the process-wide
//! address -> id table, `table`), a full window, a return that skips frames (longjmp). A
//! function seen for the first time takes the cold path under a lock: `dladdr` names its object and load address, and its record is
//! appended to `funcs.jsonl` before the first event that uses its id.
//!
//! The library must be loaded at start-up (`LD_PRELOAD`, as `trace run` does), not with
//! `dlopen`: initial-exec TLS needs the static TLS block.
//!
//! Processes and threads:
//! - threads: each gets its own stream on its first event; a `pthread_key` destructor
//!   closes it when the thread exits;
//! - `exit()`: a `.fini_array` destructor closes the calling thread's stream (other threads'
//!   streams are complete anyway and end in zeros, which readers treat as the end);
//! - `fork`: a `pthread_atfork` child handler drops the parent's stream, function table and
//!   ids; the child records into its own `p<pid>` directory (with `forked_from`), and its
//!   stream starts by re-entering the functions that were open at the fork (from the shadow
//!   stack), so the child's call tree keeps its context;
//! - `exec`: the new image loads the shim again and records into `p<pid>.1`.

#![deny(unsafe_op_in_unsafe_fn)]

/// The shim's own heap: dlmalloc on pages of its own, never the C library's malloc. The shim's
/// slow paths allocate (a function's record, a stream's buffers), and under
/// `SLICE_TRACE_PATCH=all` they can be entered from the C library's own functions, some of which
/// malloc calls with its arena locked: an allocation there through malloc waited for that lock
/// for ever (Debian's zstd hung at its second thread). `lifecycle::setup` makes it safe across
/// `fork` (`enable_alloc_after_fork`).
#[global_allocator]
static ALLOC: dlmalloc::GlobalDlmalloc = dlmalloc::GlobalDlmalloc;

mod arch;
mod ask;
mod filter;
mod frames;
#[cfg(test)]
mod golden;
mod guards;
mod hooks;
mod hot;
mod lifecycle;
mod lines;
mod loaded;
mod loaderhook;
mod objects;
mod output;
mod patch;
mod probe;
mod process;
mod suspend;
mod table;
mod thread;
mod window;
