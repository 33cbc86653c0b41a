// CPython 3.11's internal frame and code-object offsets on 64-bit targets, as written by
// `shims/python/build.rs` from the 3.11 headers (`Py_BUILD_CORE`, `internal/pycore_frame.h`).
// Committed, as py-spy keeps its per-version bindings, so that a machine without the 3.11
// headers builds the same shim; where the headers exist, every build regenerates these lines
// and fails if they differ (regenerate with SLICETRACE_BLESS_LAYOUT311=1).
pub const FRAME_CODE: usize = 32;
pub const FRAME_PREV_INSTR: usize = 56;
pub const FRAME_OWNER: usize = 69;
pub const FRAME_OWNED_BY_THREAD: u8 = 0;
pub const CODE_FLAGS: usize = 48;
pub const CODE_UNITS: usize = 184;
