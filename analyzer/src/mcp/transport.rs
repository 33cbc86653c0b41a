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
//! Every answer is written whole, one line at a time, by one writer task.
//!
//! The end of the input is no reason to drop the calls in flight: a one-shot client writes its
//! requests and closes its side at once, then reads the answers. So at the end of the input
//! (or when the server is told to stop, `stop` cancelled: a signal) the transport reads no
//! more and waits until every request it read has been answered ([`Pending`]) before it tells
//! rmcp that the input is over; see [`LineTransport::drain`] for the bounds.

use rmcp::model::ErrorCode;
use rmcp::service::{RoleServer, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::Value;
use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

/// The longest line read (rmcp's own limit): a peer that never sends a newline cannot make
/// the server buffer without bound.
pub const MAX_LINE: usize = 16 * 1024 * 1024;

/// A line to write, and who waits for it to be written.
type Out = (Vec<u8>, Option<oneshot::Sender<std::io::Result<()>>>);

/// After the input ended, how long calls other than `record` may still take before the server
/// exits without their answers (a view is bounded by its trace; this is the backstop).
pub const VIEW_WAIT: Duration = Duration::from_secs(60);
/// After the input ended, the longest wait for the calls in flight: a `record` ends at its own
/// `timeout_s` (at most 3600 s) plus the time to stop it; this is the backstop.
pub const EOF_WAIT: Duration = Duration::from_secs(3600 + 60);
/// Once the server is told to stop (a signal, or the client is gone), how long it waits for
/// the answers of its calls (the recordings stop: `trace` gets SIGTERM, then SIGKILL 10 s later).
pub const STOP_WAIT: Duration = Duration::from_secs(30);

/// The requests read and not answered yet: their id (as JSON text) and whether each is a call
/// of `record`.
#[derive(Clone, Default)]
pub struct Pending(Arc<Mutex<HashMap<String, bool>>>);

impl Pending {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, bool>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
    /// How many requests wait for their answer, and how many of them are recordings.
    pub fn counts(&self) -> (usize, usize) {
        let g = self.lock();
        (g.len(), g.values().filter(|r| **r).count())
    }
    fn track(&self, t: &Track) {
        match t {
            Track::Request { id, record } => {
                self.lock().insert(id.clone(), *record);
            }
            // A cancelled request gets no answer (rmcp drops it); its recording is stopped and
            // waited for by the server (`record::running`).
            Track::Cancel { id } => {
                self.lock().remove(id);
            }
            Track::None => {}
        }
    }
}

/// What a message read means for [`Pending`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Track {
    /// A request: its id as JSON text, and whether it calls `record`.
    Request {
        id: String,
        record: bool,
    },
    /// `notifications/cancelled` for this id.
    Cancel {
        id: String,
    },
    None,
}

impl Track {
    fn of(value: &Value) -> Track {
        let key = |v: Option<&Value>| match v {
            Some(id @ (Value::String(_) | Value::Number(_))) => Some(id.to_string()),
            _ => None,
        };
        let method = value.get("method").and_then(Value::as_str);
        match (method, key(value.get("id"))) {
            (Some(m), Some(id)) => {
                Track::Request { id, record: m == "tools/call" && value.pointer("/params/name").and_then(Value::as_str) == Some("record") }
            }
            (Some("notifications/cancelled"), None) => {
                key(value.pointer("/params/requestId")).map_or(Track::None, |id| Track::Cancel { id })
            }
            _ => Track::None,
        }
    }
}

/// Whether the client is gone: its end of our output is closed.
pub type PeerGone = Box<dyn Fn() -> bool + Send>;

/// Line-delimited JSON-RPC over a reader and a writer (stdin and stdout for `slice mcp`).
pub struct LineTransport<R> {
    read: BufReader<R>,
    /// The line being read; kept across calls, since `receive` is polled inside a `select!`
    /// and may be dropped half-way through a line.
    line: Vec<u8>,
    /// Skipping the rest of an over-long line.
    skipping: bool,
    out: Option<mpsc::UnboundedSender<Out>>,
    /// Cancelled when the server must stop (a signal): read no more, answer what is in flight.
    /// The transport cancels it too when the client is gone after the input ended.
    stop: CancellationToken,
    max_line: usize,
    pending: Pending,
    /// When the input ended or `stop` was seen; from then on nothing more is read.
    closed_at: Option<Instant>,
    stop_at: Option<Instant>,
    peer_gone: Option<PeerGone>,
}

impl<R: AsyncRead + Unpin + Send> LineTransport<R> {
    /// Read `read`, write `write` (on a task of the current runtime), until the input ends or
    /// `stop` is cancelled; then wait for the answers in flight ([`LineTransport::drain`]).
    pub fn new<W: AsyncWrite + Unpin + Send + 'static>(read: R, write: W, stop: CancellationToken) -> Self {
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
        LineTransport {
            read: BufReader::new(read),
            line: Vec::new(),
            skipping: false,
            out: Some(tx),
            stop,
            max_line: MAX_LINE,
            pending: Pending::default(),
            closed_at: None,
            stop_at: None,
            peer_gone: None,
        }
    }

    /// How to tell that the client is gone (its end of the output closed), checked while the
    /// answers in flight are waited for after the input ended.
    pub fn with_peer_gone(mut self, probe: PeerGone) -> Self {
        self.peer_gone = Some(probe);
        self
    }

    /// After the input ended: wait until every request read has its answer written. A call of
    /// `record` runs to its end (at the latest its `timeout_s`, when it is stopped and its
    /// partial trace kept); other calls get [`VIEW_WAIT`]; [`EOF_WAIT`] in all. When the
    /// client is gone (its end of the output closed: `peer_gone`, or a write failed), or the
    /// server is told to stop (`stop`), the recordings are stopped (`stop` cancelled) and
    /// their answers get [`STOP_WAIT`]. Cancel-safe: the times live in `self`.
    async fn drain(&mut self) {
        let closed_at = *self.closed_at.get_or_insert_with(Instant::now);
        loop {
            let (n, records) = self.pending.counts();
            if n == 0 {
                return;
            }
            let gone = self.out.as_ref().is_none_or(|o| o.is_closed()) || self.peer_gone.as_ref().is_some_and(|g| g());
            if gone {
                self.stop.cancel();
            }
            if self.stop.is_cancelled() {
                if self.stop_at.get_or_insert_with(Instant::now).elapsed() >= STOP_WAIT {
                    return;
                }
            } else if closed_at.elapsed() >= EOF_WAIT || (records == 0 && closed_at.elapsed() >= VIEW_WAIT) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
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
    /// A message, and what it means for the requests waiting for an answer.
    Message(Box<RxJsonRpcMessage<RoleServer>>, Track),
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
    let track = Track::of(&value);
    match serde_json::from_value::<RxJsonRpcMessage<RoleServer>>(value) {
        Ok(m) => Parsed::Message(Box::new(m), track),
        Err(_) if is_notification => Parsed::Ignore,
        Err(e) => Parsed::Error(ErrorCode::INVALID_REQUEST, format!("Invalid Request: {e}"), id),
    }
}

impl<R: AsyncRead + Unpin + Send + 'static> Transport<RoleServer> for LineTransport<R> {
    type Error = std::io::Error;

    fn send(&mut self, item: TxJsonRpcMessage<RoleServer>) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let out = self.out.clone();
        // An answer: its request no longer waits once it is written (or cannot be).
        let answered = match &item {
            rmcp::model::JsonRpcMessage::Response(r) => serde_json::to_string(&r.id).ok(),
            rmcp::model::JsonRpcMessage::Error(e) => e.id.as_ref().and_then(|id| serde_json::to_string(id).ok()),
            _ => None,
        };
        let pending = self.pending.clone();
        async move {
            let r = async {
                let mut line = serde_json::to_vec(&item).map_err(std::io::Error::other)?;
                line.push(b'\n');
                let out = out.ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotConnected, "the transport is closed"))?;
                let (done, written) = oneshot::channel();
                out.send((line, Some(done))).map_err(|_| std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the output is closed"))?;
                written.await.map_err(|_| std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the output is closed"))?
            }
            .await;
            if let Some(id) = answered {
                pending.lock().remove(&id);
            }
            r
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            if self.closed_at.is_some() {
                self.drain().await;
                return None;
            }
            let stop = self.stop.clone();
            let read = tokio::select! {
                biased;
                _ = stop.cancelled() => None,
                r = self.read_line() => r,
            };
            let Some(whole) = read else {
                self.closed_at = Some(Instant::now());
                continue;
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
                Parsed::Message(m, track) => {
                    self.pending.track(&track);
                    return Some(*m);
                }
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
        assert!(matches!(parse_line(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\r"), Parsed::Message(..)));
    }

    fn track_of(line: &str) -> Track {
        match parse_line(line.as_bytes()) {
            Parsed::Message(_, t) => t,
            other => panic!("{line}: {other:?}"),
        }
    }

    #[test]
    fn requests_are_tracked_until_answered_and_record_calls_are_told_apart() {
        let call = |id: &str, name: &str| {
            format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{name}","arguments":{{}}}}}}"#)
        };
        assert_eq!(track_of(&call("7", "record")), Track::Request { id: "7".into(), record: true });
        assert_eq!(track_of(&call("\"7\"", "tree")), Track::Request { id: "\"7\"".into(), record: false });
        assert_eq!(
            track_of(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"7"}}"#),
            Track::Cancel { id: "\"7\"".into() }
        );
        assert_eq!(track_of(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#), Track::None);
        let p = Pending::default();
        p.track(&track_of(&call("1", "record")));
        p.track(&track_of(&call("\"1\"", "prompt")));
        assert_eq!(p.counts(), (2, 1), "the number 1 and the string \"1\" are two requests");
        p.track(&Track::Cancel { id: "1".into() });
        assert_eq!(p.counts(), (1, 0));
        // The key of an answer is the id as rmcp writes it.
        let id: rmcp::model::RequestId = serde_json::from_str("\"1\"").unwrap();
        assert_eq!(serde_json::to_string(&id).unwrap(), "\"1\"");
    }
}
