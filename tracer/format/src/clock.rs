//! The shims' clock: `CLOCK_MONOTONIC` nanoseconds, read from the CPU's time-stamp counter
//! when the kernel itself uses it.
//!
//! Reading `CLOCK_MONOTONIC` through the vDSO was more than half of the native shim's cost
//! per event on common virtual machines (`docs/performance.md`, "Figures behind the code's choices"). When the kernel's
//! clocksource is `tsc` and the CPU says its TSC is invariant (constant rate, synchronised
//! across cores), the clock reads the TSC (`rdtsc`, a fraction of that) and converts
//! ticks to nanoseconds with a rate measured against `CLOCK_MONOTONIC` itself:
//!
//! - until the process has run [`CALIBRATION_NS`], every read is a real `clock_gettime`; the
//!   read that crosses that point measures the rate over the interval and switches to the TSC;
//! - [`refine`] (called by the writer whenever a stream window fills up) measures the rate
//!   again over at least [`REFINE_NS`], which bounds the drift from `CLOCK_MONOTONIC` to a
//!   few microseconds per minute.
//!
//! The values are `CLOCK_MONOTONIC` nanoseconds either way, so the trace format does not
//! change. `SLICE_TRACE_CLOCK=monotonic` in the environment turns the TSC off.
//!
//! One clock per process. Each shim links its own copy of this module, so two shims in one
//! process (`trace run --native-ext`: the Python shim and the preloaded native shim) would
//! each calibrate their own TSC conversion, a few microseconds apart, and the merge of their
//! streams by time (`tracer`'s `pyext`) needs one order. The native shim therefore exports
//! its clock ([`SHARED_NOW_SYMBOL`], [`SHARED_REFINE_SYMBOL`]) and the Python shim reads it
//! through [`share_preloaded`]: one calibration for both streams, at the cost of one call per
//! read.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};

/// How long the first calibration interval lasts.
pub const CALIBRATION_NS: u64 = 10_000_000;
/// The interval of the second, final calibration.
pub const REFINE_NS: u64 = 1_000_000_000;

const UNKNOWN: u8 = 0;
/// `clock_gettime` for every read (no usable TSC, or turned off).
const SYSTEM: u8 = 1;
/// `clock_gettime` until [`CALIBRATION_NS`] have passed since `START`.
const CALIBRATING: u8 = 2;
/// One thread is computing the first calibration.
const COMPUTING: u8 = 3;
/// The TSC, converted with the calibration in `ACTIVE`.
const TSC: u8 = 4;
/// Another copy of this clock in the process, reached through [`share_preloaded`].
const SHARED: u8 = 5;

/// The symbol by which the native shim exports its clock's `now_ns` (`extern "C" fn() -> u64`).
pub const SHARED_NOW_SYMBOL: &std::ffi::CStr = c"slice_trace_clock_ns";
/// The symbol by which the native shim exports its clock's [`refine`] (`extern "C" fn()`).
pub const SHARED_REFINE_SYMBOL: &std::ffi::CStr = c"slice_trace_clock_refine";

/// The symbol by which the native shim exports the clock for a Python call or resume
/// (`extern "C" fn() -> u64`): it first closes the native calls of the thread that have
/// returned (`trace_format::pyext`, "Returns at Python calls"), then reads the clock.
pub const SHARED_PYTHON_ENTRY_SYMBOL: &std::ffi::CStr = c"slice_trace_python_entry_ns";

/// The native shim's [`SHARED_PYTHON_ENTRY_SYMBOL`], 0 when it is not in the process.
static SHARED_PYTHON_ENTRY: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// With [`SHARED`]: the other clock's two functions.
static SHARED_NOW: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
static SHARED_REFINE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

static MODE: AtomicU8 = AtomicU8::new(UNKNOWN);

/// A conversion from ticks to ns: `ns = base_ns + ((tsc - base_tsc) * mult) >> 32`, with
/// `tsc - base_tsc` saturating at 0 and the product taken in 128 bits. Each slot is written
/// once, before its index is published in `ACTIVE`. `#[repr(C)]`: the native shim's C hot path
/// reads it (as three `uint64_t`) through [`tsc_calibration`].
#[repr(C)]
pub struct TscCalibration {
    pub base_tsc: AtomicU64,
    pub base_ns: AtomicU64,
    pub mult: AtomicU64,
}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: TscCalibration = TscCalibration { base_tsc: AtomicU64::new(0), base_ns: AtomicU64::new(0), mult: AtomicU64::new(0) };
static SLOTS: [TscCalibration; 2] = [EMPTY, EMPTY];
/// Index of the calibration in use (0: first, 1: refined).
static ACTIVE: AtomicU8 = AtomicU8::new(0);
/// The (tsc, ns) pair the calibrations measure from.
static START_TSC: AtomicU64 = AtomicU64::new(0);
static START_NS: AtomicU64 = AtomicU64::new(0);
/// Set by the one thread that computes the refined calibration.
static REFINING: AtomicU8 = AtomicU8::new(0);

/// `CLOCK_MONOTONIC` through the vDSO.
#[inline]
pub fn system_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64).wrapping_mul(1_000_000_000).wrapping_add(ts.tv_nsec as u64)
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn rdtsc() -> u64 {
    // SAFETY: rdtsc has no preconditions; it is only used after `tsc_usable` said yes.
    unsafe { core::arch::x86_64::_rdtsc() }
}

#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn rdtsc() -> u64 {
    0
}

/// `CLOCK_MONOTONIC` in nanoseconds (see the module documentation for how).
#[inline(always)]
pub fn now_ns() -> u64 {
    if MODE.load(Ordering::Acquire) == TSC {
        let c = &SLOTS[ACTIVE.load(Ordering::Acquire) as usize];
        let base = c.base_tsc.load(Ordering::Relaxed);
        // A core whose counter reads a few ticks behind the base must not wrap around.
        let d = rdtsc().saturating_sub(base);
        return c.base_ns.load(Ordering::Relaxed) + ((d as u128 * c.mult.load(Ordering::Relaxed) as u128) >> 32) as u64;
    }
    slow_now()
}

/// A (tsc, ns) pair read as close together as possible: of a few tries, the one whose two
/// counter reads are nearest (a thread preempted between them would skew the rate).
fn pair() -> (u64, u64) {
    let mut best = (0u64, 0u64);
    let mut best_span = u64::MAX;
    for _ in 0..8 {
        let a = rdtsc();
        let ns = system_ns();
        let b = rdtsc();
        let span = b.wrapping_sub(a);
        if span < best_span {
            best_span = span;
            best = (a + span / 2, ns);
        }
    }
    best
}

/// The ticks-to-ns factor (32.32 fixed point) between two pairs, if it is plausible.
fn rate(from: (u64, u64), to: (u64, u64)) -> Option<u64> {
    let ticks = to.0.checked_sub(from.0)?;
    let ns = to.1.checked_sub(from.1)?;
    if ticks == 0 || ns == 0 {
        return None;
    }
    let mult = ((ns as u128) << 32) / ticks as u128;
    // Between 0.05 GHz and 20 GHz.
    (mult > (1u128 << 32) / 20 && mult < (20u128 << 32)).then_some(mult as u64)
}

#[cold]
#[inline(never)]
fn slow_now() -> u64 {
    match MODE.load(Ordering::Acquire) {
        UNKNOWN => {
            let (t, ns) = pair();
            if tsc_usable() {
                START_TSC.store(t, Ordering::Relaxed);
                START_NS.store(ns, Ordering::Relaxed);
                let _ = MODE.compare_exchange(UNKNOWN, CALIBRATING, Ordering::AcqRel, Ordering::Relaxed);
            } else {
                let _ = MODE.compare_exchange(UNKNOWN, SYSTEM, Ordering::AcqRel, Ordering::Relaxed);
            }
            ns
        }
        CALIBRATING => {
            let ns = system_ns();
            if ns.wrapping_sub(START_NS.load(Ordering::Relaxed)) < CALIBRATION_NS
                || MODE.compare_exchange(CALIBRATING, COMPUTING, Ordering::AcqRel, Ordering::Relaxed).is_err()
            {
                return ns;
            }
            let now = pair();
            match rate((START_TSC.load(Ordering::Relaxed), START_NS.load(Ordering::Relaxed)), now) {
                Some(mult) => {
                    let c = &SLOTS[0];
                    c.base_tsc.store(now.0, Ordering::Relaxed);
                    c.base_ns.store(now.1, Ordering::Relaxed);
                    c.mult.store(mult, Ordering::Relaxed);
                    ACTIVE.store(0, Ordering::Release);
                    MODE.store(TSC, Ordering::Release);
                }
                None => MODE.store(SYSTEM, Ordering::Release),
            }
            now.1
        }
        SHARED => {
            let f = SHARED_NOW.load(Ordering::Relaxed);
            // SAFETY: set by `share_with` from a function of the `extern "C" fn() -> u64` type
            // before MODE was published as SHARED; the library holding it is never unloaded
            // (a preloaded library).
            unsafe { std::mem::transmute::<usize, extern "C" fn() -> u64>(f)() }
        }
        _ => system_ns(),
    }
}

/// Read the time from another copy of this clock in the process from now on: `now` and
/// `refine` are that copy's [`now_ns`] and [`refine`]. Whatever mode this copy was in, its
/// values and the other's are both `CLOCK_MONOTONIC` nanoseconds, so switching keeps a stream's
/// times in order to within the calibrations' error.
pub fn share_with(now: extern "C" fn() -> u64, refine: extern "C" fn()) {
    SHARED_NOW.store(now as usize, Ordering::Relaxed);
    SHARED_REFINE.store(refine as usize, Ordering::Relaxed);
    MODE.store(SHARED, Ordering::Release);
}

/// Use the clock the preloaded native shim exports ([`SHARED_NOW_SYMBOL`]), when it is in the
/// process: the Python shim calls this when it starts. Returns whether it is. Never call it
/// from the library that exports the symbols (it would find its own and call itself).
pub fn share_preloaded() -> bool {
    // SAFETY: dlsym with RTLD_DEFAULT and NUL-terminated names only looks symbols up.
    let (now, refine) = unsafe {
        (libc::dlsym(libc::RTLD_DEFAULT, SHARED_NOW_SYMBOL.as_ptr()), libc::dlsym(libc::RTLD_DEFAULT, SHARED_REFINE_SYMBOL.as_ptr()))
    };
    if now.is_null() || refine.is_null() {
        return false;
    }
    // SAFETY: the native shim defines these two symbols with exactly these types
    // (shims/native/src/hooks.rs).
    let (now, refine) = unsafe {
        (
            std::mem::transmute::<*mut libc::c_void, extern "C" fn() -> u64>(now),
            std::mem::transmute::<*mut libc::c_void, extern "C" fn()>(refine),
        )
    };
    share_with(now, refine);
    // SAFETY: as above.
    let entry = unsafe { libc::dlsym(libc::RTLD_DEFAULT, SHARED_PYTHON_ENTRY_SYMBOL.as_ptr()) };
    SHARED_PYTHON_ENTRY.store(entry as usize, Ordering::Release);
    true
}

/// Whether [`python_entry_ns`] has the native shim close its returned calls
/// ([`share_preloaded`] found [`SHARED_PYTHON_ENTRY_SYMBOL`]).
pub fn closes_native_at_python_entry() -> bool {
    SHARED_PYTHON_ENTRY.load(Ordering::Acquire) != 0
}

/// The time of a Python call or resume: [`now_ns`], read by the native shim's
/// [`SHARED_PYTHON_ENTRY_SYMBOL`] when it is in the process, which first writes the returns of
/// the thread's native calls that have ended (stamped no later than this time).
#[inline]
pub fn python_entry_ns() -> u64 {
    let f = SHARED_PYTHON_ENTRY.load(Ordering::Relaxed);
    if f == 0 {
        return now_ns();
    }
    // SAFETY: set by `share_preloaded` from the native shim's symbol of this type
    // (shims/native/src/hooks.rs); the library holding it is preloaded, never unloaded.
    unsafe { std::mem::transmute::<usize, extern "C" fn() -> u64>(f)() }
}

/// Measure the TSC rate again over a longer interval (once, after [`REFINE_NS`]). Cheap to
/// call often: the writer calls it whenever a window fills up.
pub fn refine() {
    if MODE.load(Ordering::Acquire) == SHARED {
        let f = SHARED_REFINE.load(Ordering::Relaxed);
        // SAFETY: as in `slow_now`: an `extern "C" fn()` set before SHARED was published.
        unsafe { std::mem::transmute::<usize, extern "C" fn()>(f)() };
        return;
    }
    if MODE.load(Ordering::Acquire) != TSC || REFINING.load(Ordering::Relaxed) != 0 {
        return;
    }
    let start = (START_TSC.load(Ordering::Relaxed), START_NS.load(Ordering::Relaxed));
    let now = pair();
    if now.1.wrapping_sub(start.1) < REFINE_NS || REFINING.swap(1, Ordering::AcqRel) != 0 {
        return;
    }
    if let Some(mult) = rate(start, now) {
        let c = &SLOTS[1];
        c.base_tsc.store(now.0, Ordering::Relaxed);
        c.base_ns.store(now.1, Ordering::Relaxed);
        c.mult.store(mult, Ordering::Relaxed);
        ACTIVE.store(1, Ordering::Release);
    }
}

/// The calibration [`now_ns`] uses, while it reads the TSC (`None` while calibrating, or when
/// it reads `clock_gettime`). It changes at most once more, when [`refine`] publishes the
/// refined one; a calibration is never modified after it is published.
pub fn tsc_calibration() -> Option<&'static TscCalibration> {
    (MODE.load(Ordering::Acquire) == TSC).then(|| &SLOTS[ACTIVE.load(Ordering::Acquire) as usize])
}

/// Whether the clock reads the TSC (false while calibrating).
pub fn uses_tsc() -> bool {
    MODE.load(Ordering::Acquire) == TSC
}

/// The TSC can stand in for `CLOCK_MONOTONIC`: x86-64, an invariant TSC, the kernel's own
/// clocksource is `tsc` (so it found the counters synchronised), and not turned off.
fn tsc_usable() -> bool {
    if !cfg!(target_arch = "x86_64") {
        return false;
    }
    // SAFETY: getenv returns a pointer into the environment or null; we only read it.
    let off = unsafe {
        let v = libc::getenv(c"SLICE_TRACE_CLOCK".as_ptr());
        !v.is_null() && std::ffi::CStr::from_ptr(v).to_bytes() == b"monotonic"
    };
    if off || !invariant_tsc() {
        return false;
    }
    let mut buf = [0u8; 32];
    read_small(c"/sys/devices/system/clocksource/clocksource0/current_clocksource", &mut buf).is_some_and(|s| s.trim_ascii() == b"tsc")
}

#[cfg(target_arch = "x86_64")]
fn invariant_tsc() -> bool {
    use core::arch::x86_64::__cpuid;
    // SAFETY: cpuid is available on every x86-64 CPU (the intrinsic is safe in newer Rust).
    #[allow(unused_unsafe)]
    unsafe {
        __cpuid(0x8000_0000).eax >= 0x8000_0007 && __cpuid(0x8000_0007).edx & (1 << 8) != 0
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn invariant_tsc() -> bool {
    false
}

/// Read a small file without allocating (this runs inside the hooks of traced programs).
fn read_small<'a>(path: &std::ffi::CStr, buf: &'a mut [u8]) -> Option<&'a [u8]> {
    // SAFETY: open/read/close on a buffer we own.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return None;
        }
        let n = libc::read(fd, buf.as_mut_ptr() as *mut libc::c_void, buf.len());
        libc::close(fd);
        (n > 0).then(|| &buf[..n as usize])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follows_clock_monotonic() {
        // Whatever the machine offers (TSC or not), the clock must track CLOCK_MONOTONIC.
        let first = now_ns();
        let deadline = system_ns() + 3 * CALIBRATION_NS;
        let mut last = first;
        while system_ns() < deadline {
            let t = now_ns();
            assert!(t + 1_000 >= last, "went back by more than 1 us: {last} -> {t}");
            last = t;
        }
        for _ in 0..5 {
            let a = system_ns();
            let t = now_ns();
            let b = system_ns();
            // Within 50 us of the system clock read around it (the calibration is far better;
            // the margin is for a preempted test thread).
            assert!(t + 50_000 >= a && t <= b + 50_000, "{a} <= {t} <= {b}");
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }

    #[test]
    fn rate_rejects_nonsense() {
        assert_eq!(rate((10, 10), (10, 20)), None);
        assert_eq!(rate((10, 10), (5, 20)), None);
        // 3 GHz: 1/3 ns per tick.
        let m = rate((0, 0), (3_000_000_000, 1_000_000_000)).unwrap();
        assert_eq!(m, (1u64 << 32) / 3);
    }
}
