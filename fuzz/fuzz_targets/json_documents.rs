//! The JSON documents of a trace (see `harness::json_documents`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::PathBuf;
use std::sync::OnceLock;

#[path = "../harness.rs"]
mod harness;

static DIR: OnceLock<PathBuf> = OnceLock::new();

fuzz_target!(|data: &[u8]| {
    harness::json_documents(DIR.get_or_init(|| harness::scratch("json_documents")), data);
});
