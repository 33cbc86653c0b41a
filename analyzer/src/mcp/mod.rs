//! `slice mcp`: the analyzer's capabilities as Model Context Protocol tools over stdio, for
//! coding agents (see `docs/agents.md`).
//!
//! - [`server`]: the tool wiring (`rmcp`'s `#[tool_router]`), errors as tool errors;
//! - [`params`]: the tools' arguments and their JSON schemas;
//! - [`record`]: running a command under `trace run`;
//! - [`views`]: `prompt`, `tree`, `diff` (the CLI's functions, bounded);
//! - [`query`]: `find_calls`, `source` (answered from the prompt's model);
//! - [`bound`]: fitting every answer into its token limit, saying what was left out.

pub mod bound;
pub mod params;
pub mod query;
pub mod record;
pub mod server;
pub mod views;

use anyhow::Context;
use rmcp::ServiceExt;

/// Serve on stdin/stdout until the client closes the connection.
pub fn serve() -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().context("starting the async runtime")?;
    rt.block_on(async {
        let service = server::SliceServer::new()
            .serve(rmcp::transport::stdio())
            .await
            .context("starting the MCP session on stdin/stdout (is an MCP client connected?)")?;
        service.waiting().await.context("serving MCP")?;
        Ok(())
    })
}
