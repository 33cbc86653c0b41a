//! The event decoder: arbitrary bytes as a thread stream (see `harness::event_decoder`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::PathBuf;
use std::sync::OnceLock;

#[path = "../harness.rs"]
mod harness;

static DIR: OnceLock<PathBuf> = OnceLock::new();

fuzz_target!(|data: &[u8]| {
    harness::event_decoder(DIR.get_or_init(|| harness::scratch("event_decoder")), data);
});
