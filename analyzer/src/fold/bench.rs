use super::*;
use crate::testutil::py_funcs;
use trace_format::writer::StreamWriter;

/// Folding throughput on a synthetic 10M-event stream: depth-4 call chains, each level
/// picking one of 10 functions (a tree of up to 11,110 nodes). Not a timing test: run it by hand with
/// `cargo test --release -p analyzer fold_throughput -- --ignored --nocapture`.
#[test]
#[ignore]
fn fold_throughput() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("t1-0.ev");
    let mut w = StreamWriter::create(&path, 1, 1, 1, 0, 4 << 20).unwrap();
    let mut ts = 0u64;
    let mut n = 0u64;
    let mut x = 12345u64;
    while n < 10_000_000 {
        // depth-4 call chains, pseudo-random functions
        let mut depth = 0;
        for _ in 0..4 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ts += 20;
            w.call((depth * 10 + (x >> 33) % 10) as u32, ts);
            depth += 1;
            n += 1;
        }
        for _ in 0..depth {
            ts += 15;
            w.ret(ts);
            n += 1;
        }
    }
    w.finish();
    let funcs = Arc::new(py_funcs(&(0..500).map(|i| format!("f{i}")).collect::<Vec<_>>().iter().map(|s| s.as_str()).collect::<Vec<_>>()));
    let classes = vec![FoldClass::Visible; 500];
    let s = ThreadStream::open(&path).unwrap();
    let t0 = std::time::Instant::now();
    let (tree, info) = fold_events(funcs, &classes, s.events().unwrap());
    let dt = t0.elapsed().as_secs_f64();
    eprintln!("folded {} events into {} nodes in {:.3} s: {:.1} M events/s", info.events, tree.len(), dt, info.events as f64 / dt / 1e6);
    assert_eq!(info.events, n);
}
