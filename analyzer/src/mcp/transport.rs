//! The server's side of the stdio transport: one JSON-RPC message per line in, one per line
//! out. It replaces `rmcp::transport::stdio()` because rmcp drops a line that is not JSON
//! without an answer (on purpose: its issue #938), which leaves a client waiting forever for
//! the answer to a request it mangled. Here every line that is not a message gets an answer:
//!
//! - not JSON (or not UTF-8): `-32700 Parse error`, id null;
//! - JSON but no JSON-RPC message the server knows (a batch, a missing `jsonrpc`, a wrong
//!   shape): `-32600 Invalid Request`, with the request's id when it has a usable one, else
//!   null; a malformed *notification* (an object with a `method` and no `id`) gets nothing, as
//!   JSON-RPC says notifications are never answered;
//! - a line longer than [`MAX_LINE`]: `-32600`, id null, and the line is skipped to its end.
//!
//! Every answer is written whole, one line at a time, by one writer task. At the end of the
//! input the transport cancels `eof` (the server then stops the recordings still running).

use rmcp::model::ErrorCode;
use rmcp::service::{RoleServer, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::Value;
use std::future::Future;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

/// The longest line read (rmcp's own limit): a peer that never sends a newline cannot make
/// the server buffer without bound.
pub const MAX_LINE: usize = 16 * 1024 * 1024;

/// A line to write, and who waits for it to be written.
type Out = (Vec<u8>, Option<oneshot::Sender<std::io::Result<()>>>);

/// Line-delimited JSON-RPC over a reader and a writer (stdin and stdout for `slice mcp`).
pub struct LineTransport<R> {
    read: BufReader<R>,
    /// The line being read; kept across calls, since `receive` is polled inside a `select!`
    /// and may be dropped half-way through a line.
    line: Vec<u8>,
    /// Skipping the rest of an over-long line.
    skipping: bool,
    out: Option<mpsc::UnboundedSender<Out>>,
    eof: CancellationToken,
    max_line: usize,
}

impl<R: AsyncRead + Unpin + Send> LineTransport<R> {
    /// Read `read`, write `write` (on a task of the current runtime); cancel `eof` when the
    /// input ends.
    pub fn new<W: AsyncWrite + Unpin + Send + 'static>(read: R, write: W, eof: CancellationToken) -> Self {
        let (tx, mut rx) = mpsc::unbounded_channel::<Out>();
        tokio::spawn(async move {
            let mut write = write;
            while let Some((line, done)) = rx.recv().await {
                let r = async {
                    write.write_all(&line).await?;
                    write.flush().await
                }
                .await;
                let failed = r.is_err();
                if let Some(done) = done {
                    let _ = done.send(r);
                }
                if failed {
                    break;
                }
            }
        });
        LineTransport { read: BufReader::new(read), line: Vec::new(), skipping: false, out: Some(tx), eof, max_line: MAX_LINE }
    }

    /// A smaller line limit (tests).
    pub fn with_max_line(mut self, max: usize) -> Self {
        self.max_line = max;
        self
    }

    /// Queue an error answer (no waiting: `receive` must stay cancel-safe).
    fn answer_error(&self, code: ErrorCode, message: String, id: Value) {
        let msg = serde_json::json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": {"code": code.0, "message": message},
        });
        let mut line = msg.to_string().into_bytes();
        line.push(b'\n');
        if let Some(out) = &self.out {
            let _ = out.send((line, None));
        }
    }

    /// One whole line into `self.line` (without its newline); `None` at the end of the input.
    /// `Some(false)`: the line was too long and is dropped.
    async fn read_line(&mut self) -> Option<bool> {
        loop {
            let (used, done) = {
                let buf = match self.read.fill_buf().await {
                    Ok(b) => b,
                    Err(_) => return None,
                };
                if buf.is_empty() {
                    // The end of the input: a last line without a newline still counts.
                    if self.skipping || self.line.is_empty() {
                        self.skipping = false;
                        return None;
                    }
                    return Some(true);
                }
                let nl = buf.iter().position(|&b| b == b'\n');
                let take = nl.map_or(buf.len(), |i| i + 1);
                let chunk = &buf[..nl.unwrap_or(buf.len())];
                let mut result = None;
                if self.skipping {
                    if nl.is_some() {
                        self.skipping = false;
                    }
                } else if self.line.len() + chunk.len() > self.max_line {
                    self.line.clear();
                    self.skipping = nl.is_none();
                    result = Some(false);
                } else {
                    self.line.extend_from_slice(chunk);
                    if nl.is_some() {
                        result = Some(true);
                    }
                }
                (take, result)
            };
            self.read.consume(used);
            if let Some(r) = done {
                return Some(r);
            }
        }
    }
}

/// What to do with one line of input.
#[derive(Debug)]
pub enum Parsed {
    Message(Box<RxJsonRpcMessage<RoleServer>>),
    /// Blank, or a malformed notification: nothing to answer.
    Ignore,
    /// An error answer: code, message, id.
    Error(ErrorCode, String, Value),
}

/// Parse one line (without its newline).
pub fn parse_line(line: &[u8]) -> Parsed {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return Parsed::Ignore;
    }
    let value: Value = match serde_json::from_slice(line) {
        Ok(v) => v,
        Err(e) => return Parsed::Error(ErrorCode::PARSE_ERROR, format!("Parse error: {e}"), Value::Null),
    };
    let id = match value.get("id") {
        Some(id @ (Value::String(_) | Value::Number(_))) => id.clone(),
        _ => Value::Null,
    };
    let is_notification = value.as_object().is_some_and(|o| o.contains_key("method") && !o.contains_key("id"));
    match serde_json::from_value::<RxJsonRpcMessage<RoleServer>>(value) {
        Ok(m) => Parsed::Message(Box::new(m)),
        Err(_) if is_notification => Parsed::Ignore,
        Err(e) => Parsed::Error(ErrorCode::INVALID_REQUEST, format!("Invalid Request: {e}"), id),
    }
}

impl<R: AsyncRead + Unpin + Send + 'static> Transport<RoleServer> for LineTransport<R> {
    type Error = std::io::Error;

    fn send(&mut self, item: TxJsonRpcMessage<RoleServer>) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let out = self.out.clone();
        async move {
            let mut line = serde_json::to_vec(&item).map_err(std::io::Error::other)?;
            line.push(b'\n');
            let out = out.ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotConnected, "the transport is closed"))?;
            let (done, written) = oneshot::channel();
            out.send((line, Some(done))).map_err(|_| std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the output is closed"))?;
            written.await.map_err(|_| std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the output is closed"))?
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            let Some(whole) = self.read_line().await else {
                self.eof.cancel();
                return None;
            };
            let line = std::mem::take(&mut self.line);
            if !whole {
                self.answer_error(
                    ErrorCode::INVALID_REQUEST,
                    format!("Invalid Request: the line is longer than {} bytes", self.max_line),
                    Value::Null,
                );
                continue;
            }
            match parse_line(&line) {
                Parsed::Message(m) => return Some(*m),
                Parsed::Ignore => {}
                Parsed::Error(code, message, id) => self.answer_error(code, message, id),
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.out = None;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error_of(line: &str) -> (i32, Value) {
        match parse_line(line.as_bytes()) {
            Parsed::Error(c, _, id) => (c.0, id),
            other => panic!("{line}: {other:?}"),
        }
    }

    #[test]
    fn lines_that_are_no_message_get_the_json_rpc_error() {
        assert_eq!(error_of("this is not json"), (-32700, Value::Null));
        assert_eq!(error_of("{\"jsonrpc\":\"2.0\",\"id\":1,"), (-32700, Value::Null));
        assert_eq!(error_of("\u{FEFF}{"), (-32700, Value::Null));
        assert_eq!(error_of("[1,2]"), (-32600, Value::Null));
        assert_eq!(error_of("{\"id\":5,\"method\":\"ping\"}"), (-32600, serde_json::json!(5)));
        assert_eq!(error_of("{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":7}"), (-32600, serde_json::json!("a")));
        assert_eq!(error_of("{\"jsonrpc\":\"2.0\",\"id\":{\"x\":1},\"result\":7}"), (-32600, Value::Null));
        assert!(matches!(parse_line(b"\xff\xfe"), Parsed::Error(ErrorCode::PARSE_ERROR, _, Value::Null)));
        // Notifications are never answered, even malformed ones; blank lines are skipped.
        assert!(matches!(parse_line(b"{\"jsonrpc\":\"2.0\",\"method\":\"$/progress\",\"params\":3}"), Parsed::Ignore));
        assert!(matches!(parse_line(b"  \r"), Parsed::Ignore));
        assert!(matches!(parse_line(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\r"), Parsed::Message(_)));
    }
}
