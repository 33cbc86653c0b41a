//! `slice mcp`: the analyzer's capabilities as Model Context Protocol tools over stdio, for
//! coding agents (see `docs/agents.md`).
//!
//! - [`server`]: the tool wiring (`rmcp`'s `#[tool_router]`), errors as tool errors;
//! - [`transport`]: JSON-RPC lines in and out, every line that is no message answered;
//! - [`params`]: the tools' arguments and their JSON schemas;
//! - [`record`]: running a command under `trace run`, into a directory of its own;
//! - [`locks`]: no tool reads a trace while a recording replaces it;
//! - [`views`]: `prompt`, `tree`, `diff` (the CLI's functions, bounded);
//! - [`query`]: `find_calls`, `source` (answered from the prompt's model);
//! - [`bound`]: fitting every answer into its token limit, saying what was left out.

pub mod bound;
pub mod locks;
pub mod params;
pub mod query;
pub mod record;
pub mod server;
pub mod transport;
pub mod views;

use anyhow::Context;
use rmcp::ServiceExt;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::sync::CancellationToken;

/// How long a shutting-down server waits for its recordings to stop (each gets SIGTERM through
/// `trace`, then SIGKILL after its grace period).
const SHUTDOWN_WAIT: Duration = Duration::from_secs(30);

/// Serve on stdin/stdout until the client closes its side of stdin (the calls in flight still
/// run to their end and their answers are written: [`transport::LineTransport`]) or the server
/// gets SIGTERM, SIGINT or SIGHUP (the recordings still running are stopped, their partial
/// traces kept, and their answers written if stdout is open); then wait for the recordings.
pub fn serve() -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().context("starting the async runtime")?;
    let r = rt.block_on(async {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate()).context("handling SIGTERM")?;
        let mut int = signal(SignalKind::interrupt()).context("handling SIGINT")?;
        let mut hup = signal(SignalKind::hangup()).context("handling SIGHUP")?;
        let shutdown = CancellationToken::new();
        let session = serve_with(tokio::io::stdin(), tokio::io::stdout(), shutdown.clone(), true, Some(Box::new(stdout_closed)));
        tokio::pin!(session);
        tokio::select! {
            r = &mut session => r?,
            _ = term.recv() => stop_session(&shutdown, session).await,
            _ = int.recv() => stop_session(&shutdown, session).await,
            _ = hup.recv() => stop_session(&shutdown, session).await,
        }
        shutdown.cancel();
        wait_for_recordings().await;
        anyhow::Ok(())
    });
    // A view still running (its answer has nowhere to go) does not hold the exit up.
    rt.shutdown_timeout(Duration::from_millis(100));
    r
}

/// Told to stop: the recordings stop (`shutdown`), the transport reads no more, and the session
/// gets [`transport::STOP_WAIT`] (and a little to write) to answer the calls in flight.
async fn stop_session(shutdown: &CancellationToken, session: impl std::future::Future<Output = anyhow::Result<()>>) {
    shutdown.cancel();
    let _ = tokio::time::timeout(transport::STOP_WAIT + Duration::from_secs(2), session).await;
}

/// Whether the reader of our stdout is gone (a pipe or socket whose other end is closed:
/// `poll` says POLLERR or POLLHUP at once). A file or a terminal never is.
fn stdout_closed() -> bool {
    let mut fd = libc::pollfd { fd: 1, events: libc::POLLOUT, revents: 0 };
    // SAFETY: poll on one pollfd we own, without waiting.
    let n = unsafe { libc::poll(&mut fd, 1, 0) };
    n == 1 && fd.revents & (libc::POLLERR | libc::POLLHUP) != 0
}

/// One session over `read` and `write`: serve until the input ends and the calls in flight
/// are answered, or `shutdown` is cancelled (see [`transport::LineTransport`]).
pub async fn serve_on<R, W>(read: R, write: W, shutdown: CancellationToken, can_record: bool) -> anyhow::Result<()>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    serve_with(read, write, shutdown, can_record, None).await
}

async fn serve_with<R, W>(
    read: R,
    write: W,
    shutdown: CancellationToken,
    can_record: bool,
    peer_gone: Option<transport::PeerGone>,
) -> anyhow::Result<()>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let mut transport = transport::LineTransport::new(read, write, shutdown.clone());
    if let Some(p) = peer_gone {
        transport = transport.with_peer_gone(p);
    }
    let service = server::SliceServer::with(shutdown, can_record)
        .serve(transport)
        .await
        .context("starting the MCP session on stdin/stdout (is an MCP client connected?)")?;
    service.waiting().await.context("serving MCP")?;
    Ok(())
}

/// Wait (at most [`SHUTDOWN_WAIT`]) until no recording runs.
async fn wait_for_recordings() {
    let until = Instant::now() + SHUTDOWN_WAIT;
    while record::running() > 0 && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Serve a whole session read from `input` (JSON-RPC lines) and return what the server wrote:
/// the MCP server's request handling as a function, for the fuzz target and tests. Recording is
/// off (an input never runs a command).
pub fn answer_lines(input: &[u8]) -> Vec<u8> {
    let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else { return Vec::new() };
    let (mut theirs, ours) = tokio::io::duplex(64 * 1024);
    let input = input.to_vec();
    rt.block_on(async move {
        let (read, write) = tokio::io::split(ours);
        let collect = tokio::spawn(async move {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let (mut from_server, mut to_server) = tokio::io::split(&mut theirs);
            let feed = async {
                let _ = to_server.write_all(&input).await;
                let _ = to_server.shutdown().await;
            };
            let mut out = Vec::new();
            let read_all = from_server.read_to_end(&mut out);
            let _ = tokio::join!(feed, read_all);
            out
        });
        let _ = serve_on(read, write, CancellationToken::new(), false).await;
        collect.await.unwrap_or_default()
    })
}
