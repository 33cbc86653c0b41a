//! The golden corpus (`tests/golden/`, described in `tests/corpus/mod.rs`) against this crate:
//! the writer must write each case's bytes exactly, and the reader must read them back as the
//! case's events, header and totals. The native shim checks its C encoder and its window
//! decoder against the same files (`shims/native/src/golden.rs`).
//!
//! `SLICE_BLESS=1 cargo test -p slice-trace-format --test golden` rewrites the `.ev` files from
//! the writer: the encoding is defined here, the other encoders and decoders follow it.

mod corpus;

use corpus::{Case, Op};
use trace_format::event::{FLAG_CLOSED, HEADER_LEN, STREAM_VERSION};
use trace_format::writer::StreamWriter;
use trace_format::{Event, ThreadStream};

fn cases() -> Vec<Case> {
    corpus::load(&corpus::dir(std::path::Path::new(env!("CARGO_MANIFEST_DIR"))))
}

/// The case written by the Rust writer, as a closed stream file's bytes.
fn write_rust(case: &Case) -> Vec<u8> {
    let d = tempfile::tempdir().expect("a temporary directory");
    let path = d.path().join("t.ev");
    let mut w = StreamWriter::create(&path, case.flags, case.pid, case.tid, case.start_ns, corpus::WINDOW).expect("create the stream");
    for s in &case.steps {
        match &s.op {
            Op::Call { func, ts } => w.call(*func, *ts),
            Op::Resume { func, ts } => w.resume(*func, *ts),
            Op::Return { ts } => w.ret(*ts),
            Op::Line { func, line } => w.line(*func, *line),
            Op::Name(n) => w.thread_name(n),
        }
    }
    w.finish();
    std::fs::read(&path).expect("read the stream back")
}

#[test]
fn the_writer_writes_the_corpus_byte_for_byte() {
    let bless = std::env::var_os("SLICE_BLESS").is_some();
    for case in cases() {
        let got = write_rust(&case);
        if bless {
            // By rename: the reader's test, running beside this one, sees the old file or the new.
            let tmp = case.bytes_path.with_extension("ev.new");
            std::fs::write(&tmp, &got).expect("write the corpus file");
            std::fs::rename(&tmp, &case.bytes_path).expect("rename the corpus file");
            continue;
        }
        corpus::assert_same_bytes(&case, "trace_format's writer", &got, &case.bytes());
    }
}

#[test]
fn the_reader_reads_the_corpus_as_its_events() {
    for case in cases() {
        let what = case.bytes_path.display().to_string();
        let s = ThreadStream::open(&case.bytes_path).unwrap_or_else(|e| panic!("{e}"));
        let h = s.header;
        assert_eq!(
            (h.version, h.flags, h.pid, h.tid, h.start_ns, h.window as usize),
            (STREAM_VERSION, case.flags | FLAG_CLOSED, case.pid, case.tid, case.start_ns, corpus::WINDOW),
            "{what}: header"
        );
        let (calls, returns, end_ns) = case.totals();
        let t = h.totals.unwrap_or_else(|| panic!("{what}: a closed stream has totals"));
        assert_eq!((t.calls, t.returns, t.end_ns), (calls, returns, end_ns), "{what}: totals");
        let mut it = s.events().unwrap_or_else(|e| panic!("{e}"));
        let got: Vec<Event> = it.by_ref().map(|e| e.unwrap_or_else(|e| panic!("{e}"))).collect();
        let want: Vec<Event> = case.steps.iter().map(|s| s.read.clone()).collect();
        assert_eq!(got, want, "{what}: events");
        assert!(!it.unclosed(), "{what}: ends at the end of the file, not in unwritten space");
        assert_eq!(it.offset(), case.bytes().len(), "{what}: every byte read");
        // The summary from the totals names the thread by its last name event.
        let last_name = case.steps.iter().rev().find_map(|s| if let Event::ThreadName(n) = &s.read { Some(n.clone()) } else { None });
        let sum = s.summary().unwrap_or_else(|e| panic!("{e}"));
        assert!(sum.from_totals, "{what}");
        assert_eq!((sum.calls, sum.returns, sum.end_ns, sum.name), (calls, returns, end_ns, last_name), "{what}: summary");
    }
}

/// The corpus holds every kind of event, and each boundary of the encoding on both sides: an
/// encoder that got one shape wrong cannot pass by never meeting it.
#[test]
fn the_corpus_covers_every_event_shape() {
    use trace_format::event::{INLINE_MAX, VARINT_BITS};
    let cases = cases();
    let steps: Vec<&corpus::Step> = cases.iter().flat_map(|c| &c.steps).collect();
    let call_ids: Vec<u64> = steps.iter().filter_map(|s| if let Op::Call { func, .. } = s.op { Some(func.into()) } else { None }).collect();
    let escaped = |bytes: u32| INLINE_MAX + 1 + (1u64 << (VARINT_BITS * bytes));
    // Inline, the first escaped, each varint length's first and last id, u32::MAX; the first
    // id hot.c's cache cannot keep (63 + 2^21) and the one before it.
    for id in
        [0, INLINE_MAX, INLINE_MAX + 1, escaped(1) - 1, escaped(1), escaped(2) - 1, escaped(2), escaped(3) - 1, escaped(3), u32::MAX.into()]
    {
        assert!(call_ids.contains(&id), "no call of id {id}");
    }
    // Deltas: returns inline (0, 62) and escaped (63, 63 + 127, 63 + 128: one and two varint
    // bytes), and one above 2^63.
    let mut deltas = Vec::new();
    for c in &cases {
        let mut base = c.start_ns;
        for s in &c.steps {
            if let Event::Call { ts, .. } | Event::Resume { ts, .. } | Event::Return { ts } = s.read {
                deltas.push((matches!(s.read, Event::Return { .. }), ts - base));
                base = ts;
            }
        }
    }
    for dt in [0, INLINE_MAX, INLINE_MAX + 1, INLINE_MAX + 1 + 127, INLINE_MAX + 1 + 128] {
        assert!(deltas.contains(&(true, dt)), "no return with delta {dt}");
    }
    for ret in [false, true] {
        assert!(deltas.iter().any(|&(r, dt)| r == ret && dt >= 1 << 63), "no delta of ten varint bytes (return: {ret})");
    }
    // Times going back (written as delta 0), every extended event, line 0.
    assert!(steps.iter().any(|s| matches!((&s.op, &s.read), (Op::Call { ts, .. }, Event::Call { ts: r, .. }) if ts < r)));
    assert!(steps.iter().any(|s| matches!((&s.op, &s.read), (Op::Return { ts }, Event::Return { ts: r }) if ts < r)));
    for want in ["resume", "line", "name", "line 0"] {
        let found = steps.iter().any(|s| {
            matches!(
                (&s.op, want),
                (Op::Resume { .. }, "resume") | (Op::Line { .. }, "line") | (Op::Name(_), "name") | (Op::Line { line: 0, .. }, "line 0")
            )
        });
        assert!(found, "no {want} event");
    }
    assert!(cases.iter().any(|c| c.steps.is_empty()), "no empty stream");
    // The native shim's window decoder reads calls, resumes and returns only: a case of those.
    assert!(cases.iter().any(|c| c.only_timed() && !c.steps.is_empty()), "no case of calls and returns only");
    assert!(cases.iter().all(|c| c.bytes().len() >= HEADER_LEN));
}
