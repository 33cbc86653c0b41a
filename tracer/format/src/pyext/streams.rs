//! The merge of one thread's two streams (`trace run --native-ext`): the rule of the parent
//! module's documentation, "The rule that joins them", and its two sources of a native
//! frame's end ([`Closing`]).

use super::{events, writer_for};
use crate::writer::StreamWriter;
use crate::{Event, ThreadStream};
use std::path::Path;

/// The time of an event that has one.
fn time(ev: &Event) -> Option<u64> {
    match ev {
        Event::Call { ts, .. } | Event::Resume { ts, .. } | Event::Return { ts } => Some(*ts),
        Event::ThreadName(_) | Event::Line { .. } => None,
    }
}

/// How the native stream tells that a native frame ended before a Python call or resume.
#[derive(Clone, Copy, PartialEq, Debug)]
pub(super) enum Closing {
    /// The native shim wrote the returns of the frames that had ended before each Python call
    /// or resume (proc.json's `native_closed_at_python_calls`): the frames it has not returned
    /// by the Python event's time are running, and the Python call is their callback.
    AtPythonCalls,
    /// An older shim: a frame's return is known only at the native stream's next call, so the
    /// frames returned before it are taken as ended before the Python call (which misplaces
    /// the last callback of each native call beside its caller).
    LookAhead,
}

/// The one order of a thread's Python and native events (the module's rule), written to `out`.
pub(super) fn merge_streams(py: &ThreadStream, native: &ThreadStream, offset: u32, rule: Closing, out: &Path) -> std::io::Result<()> {
    let mut w = writer_for(out, py, Some(native))?;
    let mut sink = Sink { w: &mut w, merged: Vec::new(), native: Vec::new(), open: Vec::new(), dead: Vec::new() };
    let mut pe = events(py)?.peekable();
    let mut ne = Lookahead { it: Box::new(events(native)?), buf: std::collections::VecDeque::new() };
    loop {
        let native_first = match (pe.peek(), ne.peek()) {
            (None, None) => break,
            (Some(_), None) => false,
            (None, Some(_)) => true,
            // Events without a time stay after the Python event before them.
            (Some(p), Some(n)) => match (time(p), time(n)) {
                // A return the native shim wrote at a Python call has that call's time.
                (Some(tp), Some(tn)) => tn < tp || (tn == tp && rule == Closing::AtPythonCalls && matches!(n, Event::Return { .. })),
                (None, _) => false,
                (_, None) => true,
            },
        };
        if native_first {
            if let Some(ev) = ne.next() {
                sink.native(ev, offset);
            }
        } else if let Some(ev) = pe.next() {
            let ending = match ev {
                Event::Call { .. } | Event::Resume { .. } if rule == Closing::LookAhead => ne.returns_before_next_call(),
                _ => 0,
            };
            sink.python(ev, ending);
        }
    }
    w.finish();
    Ok(())
}

/// The native events not merged yet, read ahead as far as the next call.
struct Lookahead {
    it: Box<dyn Iterator<Item = Event>>,
    buf: std::collections::VecDeque<Event>,
}

impl Lookahead {
    fn peek(&mut self) -> Option<&Event> {
        if self.buf.is_empty() {
            self.buf.extend(self.it.next());
        }
        self.buf.front()
    }

    fn next(&mut self) -> Option<Event> {
        self.buf.pop_front().or_else(|| self.it.next())
    }

    /// How many returns the native stream writes before its next call or resume (all of
    /// them when it has none): the native frames that end before the next native call. The
    /// native shim writes a frame's return when a later call starts at or above it, so the
    /// frames it has not returned by then are still on the C stack.
    fn returns_before_next_call(&mut self) -> usize {
        let mut i = 0;
        loop {
            if i == self.buf.len() {
                match self.it.next() {
                    Some(ev) => self.buf.push_back(ev),
                    None => return usize::MAX,
                }
            }
            match self.buf[i] {
                Event::Call { .. } | Event::Resume { .. } => {
                    return self.buf.iter().take(i).filter(|e| matches!(e, Event::Return { .. })).count()
                }
                _ => i += 1,
            }
        }
    }
}

/// A frame of the merged stream.
#[derive(Clone, Copy, PartialEq)]
enum Frame {
    Python,
    /// The native frame with this serial (its call's number in the native stream).
    Native(usize),
}

/// The merged stream being written, its open frames, and the native stream's own.
struct Sink<'a> {
    w: &'a mut StreamWriter,
    merged: Vec<Frame>,
    /// The native stream's open frames (serials), innermost last.
    native: Vec<usize>,
    /// By serial: whether the native frame is open in the merged stream.
    open: Vec<bool>,
    /// By serial: whether the native stream says it ended (while a Python frame above it in
    /// the merged stream was still open: it ends when that one does).
    dead: Vec<bool>,
}

impl Sink<'_> {
    /// Close the frames on top of the merged stream that have ended.
    fn pop_dead(&mut self, ts: u64) {
        while let Some(&Frame::Native(s)) = self.merged.last() {
            if !self.dead[s] {
                break;
            }
            self.merged.pop();
            self.open[s] = false;
            self.w.ret(ts);
        }
    }

    /// A Python event; `ending`: for a call or a resume, how many of the native stream's open
    /// frames end before its next call (those end here; the others are still running, and
    /// the Python call is theirs, a callback).
    fn python(&mut self, ev: Event, ending: usize) {
        if let Some(ts) = time(&ev) {
            let from = self.native.len().saturating_sub(ending);
            for &s in &self.native[from..] {
                self.dead[s] = true;
            }
            self.pop_dead(ts);
        }
        match ev {
            Event::Call { func, ts } => {
                self.w.call(func, ts);
                self.merged.push(Frame::Python);
            }
            Event::Resume { func, ts } => {
                self.w.resume(func, ts);
                self.merged.push(Frame::Python);
            }
            Event::Return { ts } => {
                // The Python frame returns, and every native frame it (or what it called)
                // called with it.
                if self.merged.contains(&Frame::Python) {
                    while let Some(f) = self.merged.pop() {
                        self.w.ret(ts);
                        match f {
                            Frame::Python => break,
                            Frame::Native(s) => self.open[s] = false,
                        }
                    }
                    self.pop_dead(ts);
                } else {
                    // A return of a frame opened before the recording started.
                    self.w.ret(ts);
                }
            }
            Event::ThreadName(name) => self.w.thread_name(&name),
            Event::Line { func, line } => self.w.line(func, line),
        }
    }

    fn native(&mut self, ev: Event, offset: u32) {
        match ev {
            Event::Call { func, ts } | Event::Resume { func, ts } => {
                let s = self.open.len();
                self.open.push(true);
                self.dead.push(false);
                if matches!(ev, Event::Call { .. }) {
                    self.w.call(func + offset, ts);
                } else {
                    self.w.resume(func + offset, ts);
                }
                self.native.push(s);
                self.merged.push(Frame::Native(s));
            }
            Event::Return { ts } => {
                if let Some(s) = self.native.pop() {
                    if self.open[s] {
                        self.dead[s] = true;
                        self.pop_dead(ts);
                    }
                }
            }
            // The Python stream names the thread; native line events do not exist.
            Event::ThreadName(_) | Event::Line { .. } => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{FLAG_NATIVE, FLAG_PYTHON};
    use crate::writer::DEFAULT_WINDOW;
    use crate::Event::{Call, Resume, Return};

    fn stream(path: &Path, flags: u16, events: &[Event]) -> ThreadStream {
        let mut w = StreamWriter::create(path, flags, 7, 7, 0, DEFAULT_WINDOW).unwrap();
        for ev in events {
            match ev {
                Call { func, ts } => w.call(*func, *ts),
                Resume { func, ts } => w.resume(*func, *ts),
                Return { ts } => w.ret(*ts),
                _ => unreachable!(),
            }
        }
        w.finish();
        ThreadStream::open(path).unwrap()
    }

    /// The merge of the two streams, with `rule`; the merged stream is flagged as both.
    fn merged(py: &[Event], native: &[Event], rule: Closing) -> Vec<Event> {
        let d = tempfile::tempdir().unwrap();
        let py = stream(&d.path().join("py.ev"), FLAG_PYTHON, py);
        let native = stream(&d.path().join("n.ev"), FLAG_NATIVE, native);
        let out = d.path().join("merged.ev");
        merge_streams(&py, &native, 3, rule, &out).unwrap();
        let merged = ThreadStream::open(&out).unwrap();
        assert_eq!(merged.header.flags & (FLAG_PYTHON | FLAG_NATIVE), FLAG_PYTHON | FLAG_NATIVE);
        let got = merged.events().unwrap().map(Result::unwrap).collect();
        drop(d);
        got
    }

    /// Python `a` (0) calls native `f` (0 in the native table, 3 merged), which calls `h` and
    /// then calls back into Python `b` (1); after it, `f` calls `g`; then `a` calls `c` (2).
    /// The native stream has no returns of its own before the next native call (entry
    /// patching): `h`'s return is inferred at `g`'s call.
    #[test]
    fn native_calls_nest_under_the_python_frame_running_and_python_callbacks_under_them() {
        let py = [
            Call { func: 0, ts: 10 },
            Call { func: 1, ts: 50 },
            Return { ts: 60 },
            Call { func: 2, ts: 100 },
            Return { ts: 110 },
            Return { ts: 200 },
        ];
        let native = [
            Call { func: 0, ts: 20 },
            Call { func: 1, ts: 30 },
            Return { ts: 70 },
            Call { func: 2, ts: 70 },
            Return { ts: 120 },
            Return { ts: 120 },
        ];
        assert_eq!(
            merged(&py, &native, Closing::LookAhead),
            [
                Call { func: 0, ts: 10 },
                Call { func: 3, ts: 20 },
                Call { func: 4, ts: 30 },
                // `h` ends before the native stream's next call (`g`): closed when Python
                // code runs; `f` does not, so `b` is its callback.
                Return { ts: 50 },
                Call { func: 1, ts: 50 },
                Return { ts: 60 },
                // `f` goes on after the callback and calls `g`.
                Call { func: 5, ts: 70 },
                // Both end before the native stream's next call (it has none).
                Return { ts: 100 },
                Return { ts: 100 },
                Call { func: 2, ts: 100 },
                Return { ts: 110 },
                Return { ts: 200 },
            ]
        );
    }

    /// The native function returned and the Python caller calls another Python function, with
    /// no native call after: the Python call is not under the native frames; a Python return
    /// closes native frames left open above it.
    #[test]
    fn native_frames_end_at_the_next_python_call_when_no_native_call_follows() {
        let py = [
            Call { func: 0, ts: 10 },
            Call { func: 1, ts: 20 },
            Return { ts: 40 },
            Call { func: 2, ts: 50 },
            Return { ts: 60 },
            Return { ts: 90 },
        ];
        let native = [Call { func: 0, ts: 25 }, Call { func: 1, ts: 30 }];
        assert_eq!(
            merged(&py, &native, Closing::LookAhead),
            [
                Call { func: 0, ts: 10 },
                Call { func: 1, ts: 20 },
                Call { func: 3, ts: 25 },
                Call { func: 4, ts: 30 },
                // `b` returns: with it the native frames it called.
                Return { ts: 40 },
                Return { ts: 40 },
                Return { ts: 40 },
                Call { func: 2, ts: 50 },
                Return { ts: 60 },
                Return { ts: 90 },
            ]
        );
    }

    /// Python `run` (0) calls C `apply` (3), which calls `item_weight` (4) and then Python
    /// `scale` (1), twice; after `apply` returned, `run` calls `finish` (2). The native shim
    /// wrote each return at the first Python call after it, with that call's time (the
    /// Python shim's `slice_trace_python_entry_ns`): `item_weight`'s at each `scale`, `apply`'s
    /// at `finish`. Both callbacks nest under `apply`, `finish` beside it.
    #[test]
    fn with_returns_written_at_python_calls_every_callback_nests_under_its_c_caller() {
        let py = [
            Call { func: 0, ts: 10 },
            Call { func: 1, ts: 50 },
            Return { ts: 60 },
            Call { func: 1, ts: 70 },
            Return { ts: 80 },
            Call { func: 2, ts: 100 },
            Return { ts: 110 },
            Return { ts: 200 },
        ];
        let native = [
            Call { func: 0, ts: 20 },
            Call { func: 1, ts: 30 },
            Return { ts: 50 },
            Call { func: 1, ts: 65 },
            Return { ts: 70 },
            Return { ts: 100 },
        ];
        assert_eq!(
            merged(&py, &native, Closing::AtPythonCalls),
            [
                Call { func: 0, ts: 10 },
                Call { func: 3, ts: 20 },
                Call { func: 4, ts: 30 },
                // A return at a Python call's time goes before that call.
                Return { ts: 50 },
                Call { func: 1, ts: 50 },
                Return { ts: 60 },
                Call { func: 4, ts: 65 },
                Return { ts: 70 },
                // The last callback: `apply` has not returned yet.
                Call { func: 1, ts: 70 },
                Return { ts: 80 },
                Return { ts: 100 },
                Call { func: 2, ts: 100 },
                Return { ts: 110 },
                Return { ts: 200 },
            ]
        );
        // The look-ahead rule (older shims) takes `apply` as ended before the last callback:
        // it returns before the native stream's next call (there is none).
        let old = merged(&py, &native, Closing::LookAhead);
        assert_eq!(old[7..11], [Return { ts: 70 }, Return { ts: 70 }, Call { func: 1, ts: 70 }, Return { ts: 80 }], "{old:?}");
    }

    /// A C function `f` (3) running under Python `b` (1), which returns: `f` goes with it, and
    /// its return, written later by the native shim (at `c`'s call), is not written twice. A
    /// generator `g` (2) resumed from C nests under the C function, as a callback does.
    #[test]
    fn with_returns_written_at_python_calls_a_python_return_still_closes_the_native_frames_above_it() {
        let py = [
            Call { func: 0, ts: 10 },
            Call { func: 1, ts: 20 },
            Return { ts: 40 },
            Call { func: 1, ts: 50 },
            Resume { func: 2, ts: 60 },
            Return { ts: 65 },
            Return { ts: 70 },
            Return { ts: 90 },
        ];
        let native = [Call { func: 0, ts: 25 }, Return { ts: 50 }, Call { func: 1, ts: 55 }];
        assert_eq!(
            merged(&py, &native, Closing::AtPythonCalls),
            [
                Call { func: 0, ts: 10 },
                Call { func: 1, ts: 20 },
                Call { func: 3, ts: 25 },
                Return { ts: 40 },
                Return { ts: 40 },
                Call { func: 1, ts: 50 },
                Call { func: 4, ts: 55 },
                Resume { func: 2, ts: 60 },
                Return { ts: 65 },
                // `b` returns with the C function it called, which the native stream never
                // returned.
                Return { ts: 70 },
                Return { ts: 70 },
                Return { ts: 90 },
            ]
        );
    }
}
