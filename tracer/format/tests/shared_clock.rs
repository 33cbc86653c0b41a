//! The clock shared between two copies of `trace_format::clock` in one process (the Python
//! shim reading the native shim's, `trace run --native-ext`). A test binary of its own: it
//! switches the process's clock.

use std::sync::atomic::{AtomicU64, Ordering};
use trace_format::clock;
use trace_format::writer::monotonic_ns;

static REFINED: AtomicU64 = AtomicU64::new(0);

extern "C" fn other_now() -> u64 {
    // A clock far from this process's CLOCK_MONOTONIC (1e18 ns: 31 years of uptime), so that a read of our own shows.
    1_000_000_000_000_000_000 + REFINED.load(Ordering::Relaxed)
}

extern "C" fn other_refine() {
    REFINED.fetch_add(1, Ordering::Relaxed);
}

#[test]
fn a_shared_clock_answers_every_read_and_refinement() {
    // Calibrating or not, before sharing the reads are this copy's own.
    let own = monotonic_ns();
    assert!(own < 1_000_000_000_000_000_000, "{own}");
    clock::share_with(other_now, other_refine);
    assert_eq!(monotonic_ns(), 1_000_000_000_000_000_000);
    assert!(!clock::uses_tsc() && clock::tsc_calibration().is_none(), "the other copy's calibration is not ours to hand out");
    clock::refine();
    assert_eq!(REFINED.load(Ordering::Relaxed), 1, "refine goes to the shared clock");
    assert_eq!(monotonic_ns(), 1_000_000_000_000_000_001);
    // From another thread too.
    assert_eq!(std::thread::spawn(monotonic_ns).join().unwrap(), 1_000_000_000_000_000_001);
}

#[test]
fn without_the_native_shim_nothing_is_shared() {
    // This test binary does not export the native shim's clock: share_preloaded says so and
    // leaves the clock alone.
    assert!(!clock::share_preloaded());
}
