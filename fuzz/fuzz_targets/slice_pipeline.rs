//! The whole `slice` pipeline on a trace directory built from the input (see `harness::slice_pipeline`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::PathBuf;
use std::sync::OnceLock;

#[path = "../harness.rs"]
mod harness;

static DIR: OnceLock<PathBuf> = OnceLock::new();

fuzz_target!(|data: &[u8]| {
    harness::slice_pipeline(DIR.get_or_init(|| harness::scratch("slice_pipeline")), data);
});
