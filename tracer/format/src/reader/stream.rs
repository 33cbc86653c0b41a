//! A thread stream read back: its header, its totals, and its events decoded lazily from the
//! mapped file, every malformed byte an error and never a panic.

use super::*;

impl ThreadStream {
    /// Read and check a stream's header.
    pub fn open(path: &Path) -> Result<ThreadStream, FormatError> {
        use std::io::Read;
        let mut f = open_regular(path).map_err(|e| FormatError::io(path, e))?;
        let size = f.metadata().map_err(|e| FormatError::io(path, e))?.len();
        let mut h = [0u8; HEADER_LEN];
        let mut got = 0;
        while got < HEADER_LEN {
            match f.read(&mut h[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) => return Err(FormatError::io(path, e)),
            }
        }
        if got < HEADER_LEN {
            return Err(FormatError::TruncatedHeader { path: path.to_path_buf(), len: got as u64 });
        }
        let header = decode_header(path, &h)?;
        Ok(ThreadStream { path: path.to_path_buf(), header, size })
    }

    /// Iterate over the stream's events (read through a bounded buffer, see [`EventIter`]).
    pub fn events(&self) -> Result<EventIter, FormatError> {
        let f = open_regular(&self.path).map_err(|e| FormatError::io(&self.path, e))?;
        Ok(EventIter::new(f, self))
    }
}

/// What a thread stream holds: its counts, last time and name.
#[derive(Debug, Default)]
pub struct StreamSummary {
    pub calls: u64,
    pub returns: u64,
    /// Time of the last event (`start_ns` if there is none).
    pub end_ns: u64,
    /// The thread's name (the last thread-name event).
    pub name: Option<String>,
    /// The stream ends in unwritten space: its process did not close it.
    pub unclosed: bool,
    /// For an unclosed stream decoded to its end without damage: the offset of the end marker
    /// (the first byte of unwritten space), so everything after it can be cut off.
    pub unclosed_end: Option<u64>,
    /// A damaged tail: the counts are of the events before it.
    pub error: Option<FormatError>,
    /// The counts come from the header's totals (the stream was closed normally), not from
    /// decoding the events.
    pub from_totals: bool,
}

impl StreamSummary {
    /// Call and return events.
    pub fn events(&self) -> u64 {
        self.calls + self.returns
    }
}

impl ThreadStream {
    /// Count what the stream holds: from the totals in its header when it was closed normally
    /// (reading only its thread-name event), else by decoding every event.
    pub fn summary(&self) -> Result<StreamSummary, FormatError> {
        if let Some(t) = self.header.totals {
            let name = match t.name_offset {
                0 => Some(None),
                u32::MAX => None,
                off => self.name_at(off as usize)?.map(Some),
            };
            if let Some(name) = name {
                return Ok(StreamSummary {
                    calls: t.calls,
                    returns: t.returns,
                    end_ns: t.end_ns,
                    name,
                    unclosed: false,
                    unclosed_end: None,
                    error: None,
                    from_totals: true,
                });
            }
        }
        self.scan_summary()
    }

    /// The thread-name event at `offset`, if there is one there.
    fn name_at(&self, offset: usize) -> Result<Option<String>, FormatError> {
        if offset < HEADER_LEN || offset as u64 >= self.size {
            return Ok(None);
        }
        let mut it = self.events()?;
        it.pos = offset;
        Ok(match it.next() {
            Some(Ok(Event::ThreadName(n))) => Some(n),
            _ => None,
        })
    }

    /// [`ThreadStream::summary`] by decoding every event.
    pub fn scan_summary(&self) -> Result<StreamSummary, FormatError> {
        let mut s = StreamSummary { end_ns: self.header.start_ns, ..StreamSummary::default() };
        let mut it = self.events()?;
        for ev in it.by_ref() {
            match ev {
                Ok(Event::Call { ts, .. } | Event::Resume { ts, .. }) => {
                    s.calls += 1;
                    s.end_ns = ts;
                }
                Ok(Event::Return { ts }) => {
                    s.returns += 1;
                    s.end_ns = ts;
                }
                Ok(Event::ThreadName(n)) => s.name = Some(n),
                Ok(Event::Line { .. }) => {}
                Err(e) => s.error = Some(e),
            }
        }
        s.unclosed = it.unclosed();
        if s.unclosed && s.error.is_none() {
            s.unclosed_end = Some(it.offset() as u64);
        }
        Ok(s)
    }
}

fn decode_header(path: &Path, h: &[u8; HEADER_LEN]) -> Result<StreamHeader, FormatError> {
    if h[0..4] != STREAM_MAGIC {
        return Err(FormatError::BadMagic { path: path.to_path_buf() });
    }
    let u16_at = |i: usize| u16::from_le_bytes([h[i], h[i + 1]]);
    let u32_at = |i: usize| u32::from_le_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
    let u64_at = |i: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&h[i..i + 8]);
        u64::from_le_bytes(b)
    };
    let version = u16_at(4);
    if version > STREAM_VERSION {
        return Err(FormatError::NewerVersion { path: path.to_path_buf(), found: version as u64, supported: STREAM_VERSION as u64 });
    }
    let flags = u16_at(6);
    let totals = (flags & FLAG_CLOSED != 0).then(|| StreamTotals::decode(h));
    Ok(StreamHeader { version, flags, pid: u32_at(8), tid: u64_at(16), start_ns: u64_at(24), window: u32_at(32), totals })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum IterState {
    Running,
    /// Reached the end of the file or a closed stream's end.
    Ended,
    /// Reached zeroed space: the writing process did not close the stream.
    Unclosed,
    /// Stopped at a decoding error (already reported).
    Failed,
}

/// Iterator over a thread stream's events.
///
/// The file is read with `pread` into a bounded buffer, never mapped: a mapped page past the
/// end of a file that shrank, or a hole of a sparse file on a full tmpfs, faults with `SIGBUS`
/// when touched, while a read of the same bytes returns what exists (zeros for a hole, nothing
/// past the end). Memory is one buffer per stream whatever its size.
pub struct EventIter {
    file: File,
    /// Bytes of the file from offset `start`.
    buf: Vec<u8>,
    start: usize,
    /// The last read reached the end of the file.
    eof: bool,
    /// Absolute offset of the next event.
    pos: usize,
    ts: u64,
    window: usize,
    state: IterState,
    path: PathBuf,
    /// The totals of a closed stream, checked against what was decoded at the end.
    expect: Option<StreamTotals>,
    calls: u64,
    returns: u64,
}

/// Bytes read at a time.
pub(super) const CHUNK: usize = 256 << 10;
/// Bytes that must be buffered past an event's start for it to decode without a refill: the
/// longest event (a thread name of [`MAX_NAME`] bytes and its length).
const LOOKAHEAD: usize = MAX_NAME + 16;
/// Longest thread name a reader accepts (writers keep 255 bytes); longer is corruption.
const MAX_NAME: usize = 4096;

impl EventIter {
    fn new(file: File, stream: &ThreadStream) -> EventIter {
        EventIter {
            file,
            buf: Vec::with_capacity(CHUNK + LOOKAHEAD),
            start: HEADER_LEN,
            eof: false,
            pos: HEADER_LEN,
            ts: stream.header.start_ns,
            window: stream.header.window.max(1) as usize,
            state: IterState::Running,
            path: stream.path.clone(),
            expect: stream.header.totals,
            calls: 0,
            returns: 0,
        }
    }

    /// After the iterator ended: whether the stream ended in unwritten space, i.e. its
    /// process died or was still running without closing it (all its events were read).
    pub fn unclosed(&self) -> bool {
        self.state == IterState::Unclosed
    }

    /// Byte offset of the next event.
    pub fn offset(&self) -> usize {
        self.pos
    }

    /// Make the buffer hold the bytes from `pos` on: at least [`LOOKAHEAD`] of them, or all
    /// that the file has.
    fn fill(&mut self) -> Result<(), FormatError> {
        let end = self.start + self.buf.len();
        if self.pos >= self.start && self.pos + LOOKAHEAD <= end {
            return Ok(());
        }
        if self.pos >= self.start && self.pos <= end {
            if self.eof {
                return Ok(());
            }
            self.buf.drain(..self.pos - self.start);
        } else {
            // A jump (a pad to the next window, or a seek): nothing buffered is of use.
            self.buf.clear();
            self.eof = false;
        }
        self.start = self.pos;
        use std::os::unix::fs::FileExt;
        while self.buf.len() < CHUNK && !self.eof {
            let have = self.buf.len();
            self.buf.resize(CHUNK, 0);
            let r = self.file.read_at(&mut self.buf[have..], (self.start + have) as u64);
            match r {
                Ok(0) => {
                    self.buf.truncate(have);
                    self.eof = true;
                }
                Ok(n) => self.buf.truncate(have + n),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => self.buf.truncate(have),
                Err(e) => {
                    self.buf.truncate(have);
                    return Err(FormatError::io(&self.path, e));
                }
            }
        }
        Ok(())
    }

    fn fail(&mut self, at: usize, what: &'static str) -> Option<Result<Event, FormatError>> {
        self.state = IterState::Failed;
        Some(Err(FormatError::Corrupt { path: self.path.clone(), offset: at as u64, what }))
    }

    /// An event that could not be decoded from the bytes there: cut short if the file ends
    /// within [`LOOKAHEAD`] bytes, else malformed (an over-long number).
    fn truncated(&mut self, at: usize) -> Option<Result<Event, FormatError>> {
        if self.eof && self.start + self.buf.len() < at + LOOKAHEAD {
            self.state = IterState::Failed;
            return Some(Err(FormatError::TruncatedEvent { path: self.path.clone(), offset: at as u64 }));
        }
        self.fail(at, "malformed number")
    }

    /// The stream ended (`state` says how): compare what was decoded with a closed stream's
    /// totals. A mismatch means the stream changed after it was closed.
    fn finish(&mut self, state: IterState) -> Option<Result<Event, FormatError>> {
        self.state = state;
        let t = self.expect.take()?;
        if t.calls == self.calls && t.returns == self.returns && t.end_ns == self.ts {
            return None;
        }
        self.state = IterState::Failed;
        Some(Err(FormatError::TotalsMismatch {
            path: self.path.clone(),
            decoded: format!("{} calls, {} returns, last at {} ns", self.calls, self.returns, self.ts),
            recorded: format!("{} calls, {} returns, last at {} ns", t.calls, t.returns, t.end_ns),
        }))
    }

    #[inline]
    fn call(&mut self, func: u32) -> Option<Result<Event, FormatError>> {
        self.calls += 1;
        Some(Ok(Event::Call { func, ts: self.ts }))
    }

    #[inline]
    fn ret(&mut self) -> Option<Result<Event, FormatError>> {
        self.returns += 1;
        Some(Ok(Event::Return { ts: self.ts }))
    }
}

/// Why a call event's body could not be decoded.
enum CallError {
    Truncated,
    IdOutOfRange,
}

/// Decode the body of a call event whose tag byte is `tag` (already consumed; `*p` is just
/// after it): the function id and the time delta.
#[inline]
fn decode_call(buf: &[u8], tag: u8, p: &mut usize) -> Result<(u32, u64), CallError> {
    let arg = event::tag_value(tag) as u64;
    let func = if arg == event::INLINE_ESCAPE as u64 {
        // An escaped id is stored minus the inline range: a varint near `u64::MAX` is no id
        // (the addition overflowed: found by the fuzz harness).
        get_varint(buf, p).ok_or(CallError::Truncated)?.checked_add(event::INLINE_MAX + 1).ok_or(CallError::IdOutOfRange)?
    } else {
        arg
    };
    let dt = get_varint(buf, p).ok_or(CallError::Truncated)?;
    let func = u32::try_from(func).map_err(|_| CallError::IdOutOfRange)?;
    Ok((func, dt))
}

impl EventIter {
    fn bad_call(&mut self, start: usize, e: CallError) -> Option<Result<Event, FormatError>> {
        match e {
            CallError::Truncated => self.truncated(start),
            CallError::IdOutOfRange => self.fail(start, "function id out of range"),
        }
    }
}

impl Iterator for EventIter {
    type Item = Result<Event, FormatError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        // Fast path, most events: a return with its delta in the tag, or a call of an id in the
        // tag followed by a one-byte delta, both already buffered.
        if self.state == IterState::Running && self.pos >= self.start {
            let rel = self.pos - self.start;
            if let (Some(&tag), Some(&next)) = (self.buf.get(rel), self.buf.get(rel + 1)) {
                let arg = event::tag_value(tag);
                if arg != event::INLINE_ESCAPE {
                    match tag & event::KIND_MASK {
                        event::KIND_RETURN => {
                            self.pos += 1;
                            self.ts = self.ts.wrapping_add(arg as u64);
                            return self.ret();
                        }
                        event::KIND_CALL if next & event::VARINT_MORE == 0 => {
                            self.pos += 2;
                            self.ts = self.ts.wrapping_add(next as u64);
                            return self.call(arg as u32);
                        }
                        _ => {}
                    }
                }
            }
        }
        loop {
            if self.state != IterState::Running {
                return None;
            }
            if let Err(e) = self.fill() {
                self.state = IterState::Failed;
                return Some(Err(e));
            }
            let start = self.pos;
            let rel = start - self.start;
            let buf: &[u8] = &self.buf;
            let Some(&tag) = buf.get(rel) else {
                return self.finish(IterState::Ended);
            };
            if tag == 0 {
                return self.finish(IterState::Unclosed);
            }
            let mut p = rel + 1;
            let arg = event::tag_value(tag) as u64;
            match tag & event::KIND_MASK {
                event::KIND_CALL => {
                    let (func, dt) = match decode_call(buf, tag, &mut p) {
                        Ok(v) => v,
                        Err(e) => return self.bad_call(start, e),
                    };
                    self.pos = self.start + p;
                    self.ts = self.ts.wrapping_add(dt);
                    return self.call(func);
                }
                event::KIND_RETURN => {
                    let dt = if arg == event::INLINE_ESCAPE as u64 {
                        match get_varint(buf, &mut p) {
                            Some(v) => v.wrapping_add(event::INLINE_MAX + 1),
                            None => return self.truncated(start),
                        }
                    } else {
                        arg
                    };
                    self.pos = self.start + p;
                    self.ts = self.ts.wrapping_add(dt);
                    return self.ret();
                }
                event::KIND_EXT => match event::tag_value(tag) {
                    event::EXT_PAD => {
                        self.pos = (start / self.window).saturating_add(1).saturating_mul(self.window);
                        continue;
                    }
                    event::EXT_THREAD_NAME => {
                        let Some(n) = get_varint(buf, &mut p) else { return self.truncated(start) };
                        if n > MAX_NAME as u64 {
                            return self.fail(start, "thread name too long");
                        }
                        let end = p + n as usize;
                        let Some(bytes) = buf.get(p..end) else { return self.truncated(start) };
                        let name = String::from_utf8_lossy(bytes).into_owned();
                        self.pos = self.start + end;
                        return Some(Ok(Event::ThreadName(name)));
                    }
                    event::EXT_RESUME => {
                        let Some(&call_tag) = buf.get(p) else { return self.truncated(start) };
                        if call_tag & event::KIND_MASK != event::KIND_CALL {
                            return self.fail(start, "resume marker not followed by a call");
                        }
                        p += 1;
                        let (func, dt) = match decode_call(buf, call_tag, &mut p) {
                            Ok(v) => v,
                            Err(e) => return self.bad_call(start, e),
                        };
                        self.pos = self.start + p;
                        self.ts = self.ts.wrapping_add(dt);
                        self.calls += 1;
                        return Some(Ok(Event::Resume { func, ts: self.ts }));
                    }
                    event::EXT_LINE => {
                        let (Some(func), Some(line)) = (get_varint(buf, &mut p), get_varint(buf, &mut p)) else {
                            return self.truncated(start);
                        };
                        let (Ok(func), Ok(line)) = (u32::try_from(func), u32::try_from(line)) else {
                            return self.fail(start, "line event out of range");
                        };
                        self.pos = self.start + p;
                        return Some(Ok(Event::Line { func, line }));
                    }
                    event::EXT_ABS_TS => {
                        let Some(bytes) = buf.get(p..p + 8) else { return self.truncated(start) };
                        let mut b = [0u8; 8];
                        b.copy_from_slice(bytes);
                        self.ts = u64::from_le_bytes(b);
                        self.pos = self.start + p + 8;
                        continue;
                    }
                    _ => return self.fail(start, "unknown extended event"),
                },
                _ => return self.fail(start, "unknown event tag"),
            }
        }
    }
}
