//! `slice mcp`: serve the analyzer to coding agents as an MCP server over stdio.

use clap::Args;

#[derive(Debug, Args)]
pub struct McpArgs {}

pub fn run(_a: McpArgs) -> anyhow::Result<()> {
    crate::mcp::serve()
}
