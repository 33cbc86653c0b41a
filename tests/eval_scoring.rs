//! The evaluation's scoring rules (`eval/scoring.py`: a function's state in a prompt, the lines
//! a fix changed, BM25, the packing of the static peers' prompts) hold: their unit tests,
//! `eval/test_scoring.py`, run with the suite's Python. The eval's tables in the closing notes
//! rest on them.

use slice_trace_e2e::{python, texts};
use std::process::Command;

#[test]
fn the_eval_scoring_unit_tests_pass() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(python()).arg(root.join("eval/test_scoring.py")).current_dir(root).output().expect("run python3");
    let (o, e) = texts(&out);
    assert!(out.status.success(), "eval/test_scoring.py failed:\n{o}\n{e}");
    assert!(e.contains("OK"), "no unittest summary:\n{e}");
}
