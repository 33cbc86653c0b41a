//! The MCP server's request handling: JSON-RPC lines in, answers out (see `harness::mcp_server`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::PathBuf;
use std::sync::OnceLock;

#[path = "../harness.rs"]
mod harness;

static DIR: OnceLock<PathBuf> = OnceLock::new();

fuzz_target!(|data: &[u8]| {
    harness::mcp_server(DIR.get_or_init(|| harness::scratch("mcp_server")), data);
});
