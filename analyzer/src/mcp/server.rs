//! The MCP server: tool wiring with `rmcp`'s macros. Every tool runs its (blocking) work on
//! Tokio's blocking pool; its error, or a panic, comes back as a tool error (`isError`) with
//! the CLI's message, never as the end of the server.

use super::params::{DiffParams, FunctionParams, PromptParams, RecordParams, TestsParams, TreeParams};
use super::{query, record, views};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, Implementation, ServerCapabilities, ServerConfig};
use rmcp::{tool, tool_handler, tool_router, ServerHandler};
use std::path::PathBuf;
use tokio_util::sync::CancellationToken;

/// What the server tells an agent about itself when it connects.
pub const INSTRUCTIONS: &str = "Execution-trace slicer: record a run of a program (record), then ask which code ran \
and why, with only the functions that actually executed: a prompt for a question (prompt), the call tree (tree), \
where a function is called from (find_calls), a function's exact source (source), and what one run reached that \
another did not (diff). For a failing test: record the test command, list the tests (tests), then prompt with \
test: \"failed\" (the failure first, then only the code that test ran). Every answer fits its max_tokens and says \
what it left out.";

#[derive(Debug, Clone)]
pub struct SliceServer {
    tool_router: ToolRouter<Self>,
    /// Cancelled when the server shuts down: running recordings stop and keep their trace.
    shutdown: CancellationToken,
    /// Whether the record tool runs commands (off: it answers with a tool error).
    can_record: bool,
}

impl Default for SliceServer {
    fn default() -> Self {
        Self::new()
    }
}

/// Run a tool's work off the async runtime and turn its outcome into a tool result; the
/// traces it reads are held against replacement by a recording meanwhile ([`super::locks`]).
async fn answer(traces: Vec<PathBuf>, work: impl FnOnce() -> anyhow::Result<String> + Send + 'static) -> CallToolResult {
    let work = move || {
        let _reading = super::locks::read(&traces);
        work()
    };
    match tokio::task::spawn_blocking(work).await {
        Ok(Ok(text)) => CallToolResult::success(vec![ContentBlock::text(text)]),
        // As the CLI prints it: a name from the trace (a file name, say) may hold control
        // characters, escaped here like everywhere else (`trace_format::escape`).
        Ok(Err(e)) => {
            CallToolResult::error(vec![ContentBlock::text(format!("slice: error: {}", trace_format::escape::block(&format!("{e:#}"))))])
        }
        Err(e) => CallToolResult::error(vec![ContentBlock::text(format!(
            "slice: internal error: {e}; the server keeps running (please report this with the trace)"
        ))]),
    }
}

#[tool_router]
impl SliceServer {
    pub fn new() -> Self {
        Self::with(CancellationToken::new(), true)
    }

    /// A server whose recordings stop when `shutdown` is cancelled; `can_record: false` makes
    /// it one that never runs a command (the fuzz target's).
    pub fn with(shutdown: CancellationToken, can_record: bool) -> Self {
        Self { tool_router: Self::tool_router(), shutdown, can_record }
    }

    #[tool(description = "Record which functions run when I run this command. Runs argv under `trace run` (Python \
programs and test suites, where pytest's and unittest's tests are recorded as tests; native C, C++ and Rust \
programs as they are built, with a symbol table) and returns the trace directory (a new one per call unless out is \
given), the exit status or signal, and the counts (processes, threads, events, functions), with the end of its \
stdout and stderr; for a test command, the test outcomes and the failing tests. A command still running at \
timeout_s (default 120, at most 3600) is stopped and its partial trace kept; so is one whose call is cancelled.")]
    async fn record(&self, Parameters(p): Parameters<RecordParams>, call: CancellationToken) -> CallToolResult {
        if !self.can_record {
            return CallToolResult::error(vec![ContentBlock::text("slice: error: this server does not run commands (record is off)")]);
        }
        let shutdown = self.shutdown.clone();
        answer(Vec::new(), move || {
            record::record_until(&p, &|| {
                if shutdown.is_cancelled() {
                    Some(record::StopReason::Shutdown)
                } else if call.is_cancelled() {
                    Some(record::StopReason::Cancelled)
                } else {
                    None
                }
            })
        })
        .await
    }

    #[tool(description = "Which tests ran in this recorded test run, which failed and why, and which functions go with \
the failures? Returns the counts, each failing test with its failure's first line and place, the functions ranked \
by how strongly they go with failure (Ochiai over failing and passing tests), then every test with its outcome, \
duration and calls. Several traces (the shards of one suite) are ranked together.")]
    async fn tests(&self, Parameters(p): Parameters<TestsParams>) -> CallToolResult {
        answer(p.trace.paths(), move || views::tests(&p)).await
    }

    #[tool(description = "Which code runs when this program does X, and how does it work? Returns an LLM-ready prompt \
for the question: the call tree of the recorded run and the exact source of every function that ran, in call order \
(start-up work pruned, standard library hidden), never over max_tokens (default 16000): least relevant bodies are \
elided first, every cut is marked and listed. Pass several traces to compare runs in one prompt. For a test run, \
test: \"failed\" (or a test id) gives each test's failure first, then only the code that test ran.")]
    async fn prompt(&self, Parameters(p): Parameters<PromptParams>) -> CallToolResult {
        answer(p.trace.paths(), move || views::prompt(&p)).await
    }

    #[tool(description = "What did this run call, in which order, how often and for how long? Returns the call tree of \
a recorded run (one node per callee under each caller, with call counts, inclusive and self time, file:line), \
per thread; focus on the paths to a function, limit the depth; deeper levels are cut first to fit max_tokens.")]
    async fn tree(&self, Parameters(p): Parameters<TreeParams>) -> CallToolResult {
        answer(vec![PathBuf::from(&p.trace)], move || views::tree(&p)).await
    }

    #[tool(description = "Who calls this function in this run, through which path, how often, and what does it call? \
Finds a function by name, regex or file:line and returns every call path from the root to it with call counts, \
its callers and its callees.")]
    async fn find_calls(&self, Parameters(p): Parameters<FunctionParams>) -> CallToolResult {
        answer(vec![PathBuf::from(&p.trace)], move || query::find_calls(&p)).await
    }

    #[tool(description = "Show me the exact code of this function as it ran. Returns its source with file and line \
range, from the very file the run executed (a file changed since the run is not shown: the answer says why), found \
by name, regex or file:line.")]
    async fn source(&self, Parameters(p): Parameters<FunctionParams>) -> CallToolResult {
        answer(vec![PathBuf::from(&p.trace)], move || query::source(&p)).await
    }

    #[tool(description = "Why does this run behave differently from that one? Compares two recorded runs (e.g. one \
that works and one that fails) and returns the call paths and functions only one of them reached (- only in A, + \
only in B); with a question, also the source of the functions where the runs part ways.")]
    async fn diff(&self, Parameters(p): Parameters<DiffParams>) -> CallToolResult {
        answer(vec![PathBuf::from(&p.a), PathBuf::from(&p.b)], move || views::diff(&p)).await
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for SliceServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("slice", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }
}
