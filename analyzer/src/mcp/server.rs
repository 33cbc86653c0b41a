//! The MCP server: tool wiring with `rmcp`'s macros. Every tool runs its (blocking) work on
//! Tokio's blocking pool; its error, or a panic, comes back as a tool error (`isError`) with
//! the CLI's message, never as the end of the server.

use super::params::{input_schema, DiffParams, FunctionParams, PromptParams, RecordParams, TestsParams, TreeParams};
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

    #[tool(description = "Record which functions run when I run this command (under `trace run`): Python programs and \
test suites (tests recorded as tests), native C, C++ and Rust programs. Returns the trace directory, exit status, \
counts, the end of stdout and stderr, and test outcomes.", input_schema = input_schema::<RecordParams>())]
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
the failures (Ochiai over failing and passing tests)? Then every test with its outcome, duration and calls.", input_schema = input_schema::<TestsParams>())]
    async fn tests(&self, Parameters(p): Parameters<TestsParams>) -> CallToolResult {
        answer(p.trace.paths(), move || views::tests(&p)).await
    }

    #[tool(description = "Which code runs when this program does X, and how does it work? Returns an LLM-ready prompt \
for the question: the call tree of the recorded run and the exact source of the functions that ran, in call order, \
fitted to max_tokens.", input_schema = input_schema::<PromptParams>())]
    async fn prompt(&self, Parameters(p): Parameters<PromptParams>) -> CallToolResult {
        answer(p.trace.paths(), move || views::prompt(&p)).await
    }

    #[tool(description = "What did this run call, in which order, how often and for how long? Returns the call tree per \
thread (call counts, inclusive and self time, file:line), deeper levels cut first to fit max_tokens.", input_schema = input_schema::<TreeParams>())]
    async fn tree(&self, Parameters(p): Parameters<TreeParams>) -> CallToolResult {
        answer(vec![PathBuf::from(&p.trace)], move || views::tree(&p)).await
    }

    #[tool(description = "Who calls this function in this run, through which path, how often, and what does it call? \
Returns every call path from the root to it with call counts, its callers and its callees.", input_schema = input_schema::<FunctionParams>())]
    async fn find_calls(&self, Parameters(p): Parameters<FunctionParams>) -> CallToolResult {
        answer(vec![PathBuf::from(&p.trace)], move || query::find_calls(&p)).await
    }

    #[tool(description = "Show me the exact code of this function as it ran: its source with file and line range, from \
the file the run executed (if changed since: from git, else not shown, saying why).", input_schema = input_schema::<FunctionParams>())]
    async fn source(&self, Parameters(p): Parameters<FunctionParams>) -> CallToolResult {
        answer(vec![PathBuf::from(&p.trace)], move || query::source(&p)).await
    }

    #[tool(description = "Why does this run behave differently from that one? Compares two recorded runs and returns the \
call paths and functions only one of them reached (- only in A, + only in B).", input_schema = input_schema::<DiffParams>())]
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

#[cfg(test)]
mod tests {
    use super::*;

    /// What `tools/list` answers: every tool's name, description and input schema.
    fn tool_list() -> serde_json::Value {
        serde_json::to_value(SliceServer::new().tool_router.list_all()).expect("the tools serialize")
    }

    /// The tool list goes into the model's context at the start of every agent session, before
    /// its first call, whether or not a tool is used. It was 3,992 o200k tokens, most of it
    /// the selection options' descriptions repeated in `prompt` and `diff` and the schemas'
    /// boilerplate; cut to 2,465 (docs/agents.md, "What each tool costs in tokens"). The bound
    /// is the 2,500 set then: a new parameter or a longer description pays for itself with a
    /// shorter one elsewhere, or raises this bound with its reason.
    #[test]
    fn the_tool_list_stays_within_its_token_bound() {
        let tools = tool_list();
        let text = serde_json::to_string(&tools).expect("json");
        let n = crate::tokens::Tokenizer::O200kBase.count(&text);
        assert!(n <= 2500, "tools/list is {n} o200k tokens, over its bound of 2500:\n{text}");
        // The text is what an agent reads: one line each, no schema boilerplate.
        assert!(!text.contains("$schema") && !text.contains("\\n") && !text.contains("uint64"), "{text}");
    }

    /// Every tool says what it answers, and every parameter of every tool what it takes: no
    /// parameter is left for the agent to guess from its name.
    #[test]
    fn every_tool_documents_each_parameter() {
        let tools = tool_list();
        let tools = tools.as_array().expect("a list of tools");
        assert_eq!(tools.len(), 7);
        for t in tools {
            let name = t["name"].as_str().expect("a name");
            assert!(t["description"].as_str().is_some_and(|d| d.len() > 40), "{name}: no description");
            let props = t["inputSchema"]["properties"].as_object().expect("properties");
            assert!(!props.is_empty(), "{name}");
            for (p, s) in props {
                let d = s["description"].as_str().unwrap_or_default();
                assert!(d.len() >= 10, "{name}.{p}: no description ({s})");
                assert!(s.get("type").is_some(), "{name}.{p}: no type ({s})");
            }
        }
    }
}
