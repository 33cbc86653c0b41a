//! Event encoding of a thread stream (`t<tid>-<seq>.ev`), version 3.
//!
//! See `docs/trace-format.md` for the normative description. In short: a 64-byte
//! header, then a sequence of events. Every event starts with a tag byte whose low
//! two bits say what it is. A zero byte is never the start of an event: it marks the
//! unwritten tail of a stream (a process that died before closing its stream).

/// Magic bytes at offset 0 of every thread stream.
pub const STREAM_MAGIC: [u8; 4] = *b"SLEV";
/// Version of the stream encoding. Readers refuse streams with a higher version.
/// Version 2 added the resume marker ([`EXT_RESUME`]), version 3 the executed-line event
/// ([`EXT_LINE`]); older streams are read as before.
pub const STREAM_VERSION: u16 = 3;
// The trace has one format version: `meta.json` says the version its streams are written in.
const _: () = assert!(STREAM_VERSION as u32 == crate::meta::TRACE_FORMAT_VERSION);
/// Size of the stream header in bytes.
pub const HEADER_LEN: usize = 64;
/// Largest encoded size of a call or return event (tag + two 10-byte varints, rounded up).
pub const MAX_EVENT_LEN: usize = 24;

/// Header flag: the stream was written by the Python shim.
pub const FLAG_PYTHON: u16 = 1;
/// Header flag: the stream was written by the native shim.
pub const FLAG_NATIVE: u16 = 2;
/// Header flag: the writer closed the stream normally and stored its totals
/// ([`StreamTotals`]) in the header. Set last, after the totals, so a stream whose process
/// died while closing it is read as not closed. Readers that do not know it ignore it (the
/// totals live in bytes they treat as reserved).
pub const FLAG_CLOSED: u16 = 4;
/// Header flag: the writer stopped recording early because it could not reserve space for the
/// next window (the disk or the file system's quota is full): the stream is a prefix of the
/// thread's calls. Set in the header at the moment recording stops (one `pwrite` into the
/// header's block, which needs no new space), so it is there even if the process is killed.
pub const FLAG_INCOMPLETE: u16 = 8;
/// Offset of the totals ([`StreamTotals`]) in the header.
pub const TOTALS_OFFSET: usize = 36;

// The tag byte and the varints. These constants are the one definition of the encoding: the
// readers and encoders in this crate use them, the native shim's window decoder (window.rs) too,
// and its C hot path (hot.c) gets them as `SLT_*` macros in a header its build script generates
// with [`c_header`]. The golden corpus (`tests/golden/`) pins the bytes they give.

/// The tag's low bits say what the event is ([`KIND_CALL`], [`KIND_RETURN`], [`KIND_EXT`]).
pub const KIND_MASK: u8 = 0b11;
/// Tag kind: a call (the id inline, or [`INLINE_ESCAPE`] and a varint; then the delta).
pub const KIND_CALL: u8 = 0b01;
/// Tag kind: a return (the delta inline, or [`INLINE_ESCAPE`] and a varint).
pub const KIND_RETURN: u8 = 0b10;
/// Tag kind: an extended op, named by the value above the kind bits (`EXT_*`).
pub const KIND_EXT: u8 = 0b11;
/// The tag's value (an inline id or delta, or an extended op) sits above the kind bits.
pub const TAG_SHIFT: u32 = 2;
/// Values 0..=62 are stored in the tag byte itself; 63 means "63 + varint follows".
pub const INLINE_MAX: u64 = 62;
/// The tag value that says a varint of `value - (INLINE_MAX + 1)` follows.
pub const INLINE_ESCAPE: u8 = 63;
/// Varints are unsigned LEB128: this many value bits per byte, low group first...
pub const VARINT_BITS: u32 = 7;
/// ...and this bit set in every byte but the last.
pub const VARINT_MORE: u8 = 0x80;

/// Extended op: padding up to the next window boundary.
pub const EXT_PAD: u8 = 0;
/// Extended op: thread name (varint length, UTF-8 bytes).
pub const EXT_THREAD_NAME: u8 = 2;
/// Extended op: absolute timestamp (u64 little endian), resets the delta base.
pub const EXT_ABS_TS: u8 = 4;
/// Extended op (stream version 2): the call event that follows immediately resumes a suspended
/// frame (a generator, coroutine or async generator continuing after `yield`/`await`) instead
/// of starting a new call. It pairs with a return like a call does.
pub const EXT_RESUME: u8 = 6;
/// Extended op (stream version 3): a function executed a source line (varint function id,
/// varint line number), reported once per line where the recorder can (readers take the
/// union). No time: it neither opens nor closes a frame.
pub const EXT_LINE: u8 = 8;
/// Largest encoded size of a line event (tag + two 5-byte varints).
pub const MAX_LINE_EVENT_LEN: usize = 11;

/// The tag byte of an event of `kind` whose value (an inline id or delta, or an extended op;
/// at most [`INLINE_ESCAPE`]) is `value`.
#[inline(always)]
pub const fn tag(value: u8, kind: u8) -> u8 {
    (value << TAG_SHIFT) | kind
}

/// The value above a tag's kind bits (see [`tag`]).
#[inline(always)]
pub const fn tag_value(tag: u8) -> u8 {
    tag >> TAG_SHIFT
}

/// One decoded event. Timestamps are absolute, in nanoseconds of `CLOCK_MONOTONIC`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// Entry into the function with this id (an index into the process's function table).
    Call { func: u32, ts: u64 },
    /// Re-entry into a suspended frame of the function with this id (a generator or coroutine
    /// resumed after `yield`/`await`). Opens a frame like [`Event::Call`] and pairs with a
    /// [`Event::Return`]; it is not a new call.
    Resume { func: u32, ts: u64 },
    /// Exit from the innermost open call (normal return, exception or unwinding).
    Return { ts: u64 },
    /// The thread's name, as the program set it (Python's `threading.Thread.name`).
    ThreadName(String),
    /// The function with this id executed (a statement on) this source line: recorded once per
    /// line and code object where the recorder can, so a reader takes the union.
    Line { func: u32, line: u32 },
}

/// Append an unsigned LEB128 varint to `out` at `pos`; returns the new position.
///
/// # Safety
/// `out` must have room at `pos` for the varint of `v`: 10 bytes for any `u64`, 5 for a value
/// below 2^35 (so for any `u32`), 2 below 2^14.
#[inline(always)]
pub unsafe fn put_varint(out: *mut u8, mut pos: usize, mut v: u64) -> usize {
    while v >> VARINT_BITS != 0 {
        // SAFETY: a byte of the varint of the original `v` (not its last: more bits follow),
        // which the caller has room for at the original `pos`.
        unsafe { *out.add(pos) = (v as u8) | VARINT_MORE };
        v >>= VARINT_BITS;
        pos += 1;
    }
    // SAFETY: the varint's last byte, within the room the caller has for it.
    unsafe { *out.add(pos) = v as u8 };
    pos + 1
}

/// Encode a call event into `out` at `pos`. Returns the new position.
///
/// # Safety
/// `out` must have room for 16 bytes at `pos` (the tag, the id's varint of at most 5 bytes and
/// the delta's of at most 10); [`MAX_EVENT_LEN`] bytes are enough.
#[inline(always)]
pub unsafe fn encode_call(out: *mut u8, pos: usize, func: u32, dt: u64) -> usize {
    let f = func as u64;
    let mut p = pos;
    if f <= INLINE_MAX {
        // SAFETY: the tag is the first of the 16 bytes the caller has room for.
        unsafe { *out.add(p) = tag(f as u8, KIND_CALL) };
        p += 1;
    } else {
        // SAFETY: as above.
        unsafe { *out.add(p) = tag(INLINE_ESCAPE, KIND_CALL) };
        // SAFETY: f - 63 < 2^32 takes at most 5 bytes, bytes 1..6 of the 16.
        p = unsafe { put_varint(out, p + 1, f - (INLINE_MAX + 1)) };
    }
    // SAFETY: p <= pos + 6, and a u64's varint takes at most 10 bytes: within pos + 16.
    unsafe { put_varint(out, p, dt) }
}

/// Encode a resume event (the [`EXT_RESUME`] marker, then a call event) into `out` at `pos`.
/// Returns the new position. At most 1 + 16 bytes, within [`MAX_EVENT_LEN`].
///
/// # Safety
/// `out` must have room for 17 bytes at `pos`; [`MAX_EVENT_LEN`] bytes are enough.
#[inline(always)]
pub unsafe fn encode_resume(out: *mut u8, pos: usize, func: u32, dt: u64) -> usize {
    // SAFETY: the first of the 17 bytes the caller has room for.
    unsafe { *out.add(pos) = tag(EXT_RESUME, KIND_EXT) };
    // SAFETY: the call event takes at most 16 bytes, the rest of the 17 from pos + 1.
    unsafe { encode_call(out, pos + 1, func, dt) }
}

/// Encode a line event ([`EXT_LINE`]) into `out` at `pos`. Returns the new position.
///
/// # Safety
/// `out` must have room for [`MAX_LINE_EVENT_LEN`] bytes at `pos`.
#[inline(always)]
pub unsafe fn encode_line(out: *mut u8, pos: usize, func: u32, line: u32) -> usize {
    // SAFETY: the first of the MAX_LINE_EVENT_LEN (11) bytes the caller has room for.
    unsafe { *out.add(pos) = tag(EXT_LINE, KIND_EXT) };
    // SAFETY: a u32's varint takes at most 5 bytes: bytes 1..6 of the 11.
    let p = unsafe { put_varint(out, pos + 1, func as u64) };
    // SAFETY: p <= pos + 6, and another u32's varint ends by pos + 11.
    unsafe { put_varint(out, p, line as u64) }
}

/// Encode a return event into `out` at `pos`. Returns the new position.
///
/// # Safety
/// `out` must have room for 11 bytes at `pos` (the tag and the delta's varint of at most 10);
/// [`MAX_EVENT_LEN`] bytes are enough.
#[inline(always)]
pub unsafe fn encode_return(out: *mut u8, pos: usize, dt: u64) -> usize {
    if dt <= INLINE_MAX {
        // SAFETY: the first of the 11 bytes the caller has room for.
        unsafe { *out.add(pos) = tag(dt as u8, KIND_RETURN) };
        pos + 1
    } else {
        // SAFETY: as above.
        unsafe { *out.add(pos) = tag(INLINE_ESCAPE, KIND_RETURN) };
        // SAFETY: a u64's varint takes at most 10 bytes: bytes 1..11 of the 11.
        unsafe { put_varint(out, pos + 1, dt - (INLINE_MAX + 1)) }
    }
}

/// Read a varint from `buf` at `*pos`. Returns `None` if the buffer ends inside it
/// or the varint is longer than 10 bytes.
/// Allocates nothing and makes no call (the native shim decodes with it inside signal
/// handlers: window.rs).
#[inline(always)]
pub fn get_varint(buf: &[u8], pos: &mut usize) -> Option<u64> {
    let mut v: u64 = 0;
    let mut shift = 0u32;
    loop {
        let b = *buf.get(*pos)?;
        *pos += 1;
        if shift >= 64 {
            return None;
        }
        v |= ((b & !VARINT_MORE) as u64) << shift;
        if b & VARINT_MORE == 0 {
            return Some(v);
        }
        shift += VARINT_BITS;
    }
}

/// The encoding as a C header: what the native shim's hot path (`shims/native/src/hot.c`)
/// encodes with. Its build script writes this into `$OUT_DIR/slt_format.h`, so hot.c has no
/// copy of its own of any of these numbers; the golden corpus (`tests/golden/`) checks the bytes
/// hot.c writes with them.
pub fn c_header() -> String {
    let defines: [(&str, u64, &str); 11] = [
        ("SLT_STREAM_VERSION", STREAM_VERSION.into(), "the stream version these events belong to"),
        ("SLT_TAG_SHIFT", TAG_SHIFT.into(), "a tag is (value << SLT_TAG_SHIFT) | kind"),
        ("SLT_KIND_MASK", KIND_MASK.into(), "the kind bits of a tag"),
        ("SLT_KIND_CALL", KIND_CALL.into(), "call: the id inline or escaped, then the delta's varint"),
        ("SLT_KIND_RETURN", KIND_RETURN.into(), "return: the delta inline or escaped"),
        ("SLT_KIND_EXT", KIND_EXT.into(), "extended op (never written by hot.c)"),
        ("SLT_INLINE_MAX", INLINE_MAX, "largest value stored in the tag itself"),
        ("SLT_INLINE_ESCAPE", INLINE_ESCAPE.into(), "tag value: a varint of value - (SLT_INLINE_MAX + 1) follows"),
        ("SLT_VARINT_BITS", VARINT_BITS.into(), "value bits per varint byte (unsigned LEB128, low group first)"),
        ("SLT_VARINT_MORE", VARINT_MORE.into(), "set in every varint byte but the last"),
        ("SLT_EVENT_MAX", MAX_EVENT_LEN as u64, "room an encoder needs for one call or return event"),
    ];
    let mut h = String::from(
        "/* Generated from trace_format::event::c_header (tracer/format/src/event.rs), the one\n \
         * definition of the event encoding (docs/trace-format.md). Do not edit: change event.rs. */\n\
         #ifndef SLT_FORMAT_H\n#define SLT_FORMAT_H\n",
    );
    for (name, value, what) in defines {
        h.push_str(&format!("#define {name} {value}u /* {what} */\n"));
    }
    h.push_str("#endif\n");
    h
}

/// Build the 64-byte stream header.
pub fn encode_header(flags: u16, pid: u32, tid: u64, start_ns: u64, window: u32) -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[0..4].copy_from_slice(&STREAM_MAGIC);
    h[4..6].copy_from_slice(&STREAM_VERSION.to_le_bytes());
    h[6..8].copy_from_slice(&flags.to_le_bytes());
    h[8..12].copy_from_slice(&pid.to_le_bytes());
    h[16..24].copy_from_slice(&tid.to_le_bytes());
    h[24..32].copy_from_slice(&start_ns.to_le_bytes());
    h[32..36].copy_from_slice(&window.to_le_bytes());
    h
}

/// What a stream holds, stored in its header when it is closed normally (see [`FLAG_CLOSED`]),
/// so a summary of a trace need not decode its events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamTotals {
    /// Offset of the last thread-name event (0: none; `u32::MAX`: beyond 4 GiB, not stored).
    pub name_offset: u32,
    /// Call events.
    pub calls: u64,
    /// Return events.
    pub returns: u64,
    /// Time of the last event (`start_ns` if there is none).
    pub end_ns: u64,
}

impl StreamTotals {
    /// The 28 header bytes at [`TOTALS_OFFSET`].
    pub fn encode(&self) -> [u8; HEADER_LEN - TOTALS_OFFSET] {
        let mut b = [0u8; HEADER_LEN - TOTALS_OFFSET];
        b[0..4].copy_from_slice(&self.name_offset.to_le_bytes());
        b[4..12].copy_from_slice(&self.calls.to_le_bytes());
        b[12..20].copy_from_slice(&self.returns.to_le_bytes());
        b[20..28].copy_from_slice(&self.end_ns.to_le_bytes());
        b
    }

    /// Read the totals from a whole header (whether its flag says they are valid is the caller's business).
    pub fn decode(h: &[u8; HEADER_LEN]) -> StreamTotals {
        let u64_at = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&h[i..i + 8]);
            u64::from_le_bytes(b)
        };
        let o = TOTALS_OFFSET;
        StreamTotals {
            name_offset: u32::from_le_bytes([h[o], h[o + 1], h[o + 2], h[o + 3]]),
            calls: u64_at(o + 4),
            returns: u64_at(o + 12),
            end_ns: u64_at(o + 20),
        }
    }

    /// Call and return events.
    pub fn events(&self) -> u64 {
        self.calls + self.returns
    }
}

/// The decoded stream header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamHeader {
    pub version: u16,
    pub flags: u16,
    pub pid: u32,
    pub tid: u64,
    pub start_ns: u64,
    /// Window size: the writer pads to multiples of this many bytes (from file start).
    pub window: u32,
    /// The totals the writer stored when it closed the stream ([`FLAG_CLOSED`]); `None` for a
    /// stream that was not closed normally (or was written before totals existed).
    pub totals: Option<StreamTotals>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs an encoder on a buffer of MAX_EVENT_LEN zeros (the room each encoder asks for).
    fn enc(f: impl FnOnce(*mut u8) -> usize) -> Vec<u8> {
        let mut b = vec![0u8; MAX_EVENT_LEN];
        let n = f(b.as_mut_ptr());
        b.truncate(n);
        b
    }

    #[test]
    fn small_call_is_two_bytes_and_never_starts_with_zero() {
        // SAFETY: `enc` gives MAX_EVENT_LEN bytes.
        let b = enc(|p| unsafe { encode_call(p, 0, 0, 5) });
        assert_eq!(b, vec![KIND_CALL, 5]);
        assert_ne!(b[0], 0);
    }

    #[test]
    fn large_ids_and_deltas_round_trip() {
        for &(id, dt) in &[(62u32, 0u64), (63, 1), (64, 127), (1_000_000, 1 << 40), (u32::MAX, u64::MAX)] {
            // SAFETY: `enc` gives MAX_EVENT_LEN bytes.
            let b = enc(|p| unsafe { encode_call(p, 0, id, dt) });
            assert!(b.len() <= MAX_EVENT_LEN);
            assert_eq!(b[0] & KIND_MASK, KIND_CALL);
            let mut pos = 1;
            let got_id =
                if tag_value(b[0]) == INLINE_ESCAPE { get_varint(&b, &mut pos).unwrap() + INLINE_MAX + 1 } else { tag_value(b[0]) as u64 };
            assert_eq!(got_id, id as u64);
            assert_eq!(get_varint(&b, &mut pos).unwrap(), dt);
            assert_eq!(pos, b.len());
        }
    }

    #[test]
    fn short_return_is_one_byte() {
        // SAFETY: `enc` gives MAX_EVENT_LEN bytes.
        assert_eq!(enc(|p| unsafe { encode_return(p, 0, 62) }).len(), 1);
        // SAFETY: `enc` gives MAX_EVENT_LEN bytes.
        assert_eq!(enc(|p| unsafe { encode_return(p, 0, 63) }).len(), 2);
        // SAFETY: `enc` gives MAX_EVENT_LEN bytes.
        assert_eq!(enc(|p| unsafe { encode_return(p, 0, 0) }), vec![KIND_RETURN]);
    }

    #[test]
    fn resume_is_a_marker_then_a_call_within_the_event_bound() {
        // SAFETY: `enc` gives MAX_EVENT_LEN bytes.
        let b = enc(|p| unsafe { encode_resume(p, 0, u32::MAX, u64::MAX) });
        assert!(b.len() <= MAX_EVENT_LEN);
        assert_eq!(b[0], tag(EXT_RESUME, KIND_EXT));
        // SAFETY: as above.
        assert_eq!(b[1..], enc(|p| unsafe { encode_call(p, 0, u32::MAX, u64::MAX) })[..]);
    }

    /// The room each encoder's `# Safety` section asks for is what its largest event takes.
    #[test]
    fn largest_events_fill_the_room_their_encoders_ask_for() {
        // SAFETY: `enc` gives MAX_EVENT_LEN bytes, more than any encoder asks for.
        assert_eq!(enc(|p| unsafe { encode_call(p, 0, u32::MAX, u64::MAX) }).len(), 16);
        // SAFETY: as above.
        assert_eq!(enc(|p| unsafe { encode_resume(p, 0, u32::MAX, u64::MAX) }).len(), 17);
        // SAFETY: as above.
        assert_eq!(enc(|p| unsafe { encode_return(p, 0, u64::MAX) }).len(), 11);
        // SAFETY: as above.
        assert_eq!(enc(|p| unsafe { encode_line(p, 0, u32::MAX, u32::MAX) }).len(), MAX_LINE_EVENT_LEN);
    }

    #[test]
    fn the_c_header_defines_the_constants_of_this_module() {
        let h = c_header();
        for line in
            ["#define SLT_KIND_CALL 1u ", "#define SLT_INLINE_ESCAPE 63u ", "#define SLT_VARINT_MORE 128u ", "#define SLT_EVENT_MAX 24u "]
        {
            assert!(h.contains(line), "{line} not in\n{h}");
        }
        assert_eq!(h.matches("#define SLT_").count(), 12);
    }

    #[test]
    fn truncated_varint_is_none() {
        let mut pos = 0;
        assert_eq!(get_varint(&[0x80, 0x80], &mut pos), None);
    }
}
