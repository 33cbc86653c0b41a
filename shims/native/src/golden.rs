//! The golden corpus of the event encoding (`tracer/format/tests/golden/`, described in
//! `tracer/format/tests/corpus/mod.rs`) against this crate's two copies of the encoding's
//! logic: hot.c's encoder must write each case's bytes exactly (its calls and returns through
//! hot.c, the events only Rust writes through the writer, as the shim does), and window.rs's
//! decoder must read back what the case's calls, resumes and returns add up to. The Rust writer
//! and reader are checked against the same files by `tracer/format/tests/golden.rs`.

#[path = "../../../tracer/format/tests/corpus/mod.rs"]
mod corpus;

use crate::hot::SltThread;
use corpus::{Case, Op};
use trace_format::event::{HEADER_LEN, KIND_CALL, KIND_RETURN};
use trace_format::writer::StreamWriter;

extern "C" {
    fn slt_test_encode(t: *mut SltThread, kinds: *const u8, ids: *const u64, times: *const u64, n: u64) -> u64;
}

fn cases() -> Vec<Case> {
    corpus::load(&corpus::dir(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tracer/format")))
}

/// Write `ops` (calls and returns only) through hot.c's encoders into `w`'s window, as the
/// fast paths do: the cursor lent, moved by hot.c, taken back.
fn encode_in_c(w: &mut StreamWriter, ops: &[&Op]) {
    let mut kinds = Vec::new();
    let mut ids = Vec::new();
    let mut times = Vec::new();
    for op in ops {
        let (k, id, ts) = match **op {
            Op::Call { func, ts } => (KIND_CALL, u64::from(func), ts),
            Op::Return { ts } => (KIND_RETURN, 0, ts),
            ref other => panic!("not an event hot.c writes: {other:?}"),
        };
        kinds.push(k);
        ids.push(id);
        times.push(ts);
    }
    // SAFETY: a zeroed block is valid (null pointers, mode 0); only `cur` is used.
    let mut t: Box<SltThread> = Box::new(unsafe { std::mem::zeroed() });
    let mut done = 0;
    while done < kinds.len() {
        t.cur = w.cursor().expect("the stream is open");
        let n = kinds.len() - done;
        // SAFETY: the arrays hold `n` entries from `done`; the cursor is the writer's.
        let wrote = unsafe { slt_test_encode(&mut *t, kinds[done..].as_ptr(), ids[done..].as_ptr(), times[done..].as_ptr(), n as u64) };
        // SAFETY: hot.c moved the cursor by whole events, each starting before `limit`.
        unsafe { w.set_cursor(&t.cur) };
        done += wrote as usize;
    }
}

/// hot.c writes the corpus: every call and return of every case goes through its encoders (the
/// cached id bytes where an id fits the cache, else its general encoder); thread names, line
/// events and resume markers go through the writer, as in the shim (hot.c never writes them).
#[test]
fn hot_c_writes_the_corpus_byte_for_byte() {
    let mut through_c = 0;
    for case in cases() {
        let d = tempfile::tempdir().expect("a temporary directory");
        let path = d.path().join("t.ev");
        let mut w = StreamWriter::create(&path, case.flags, case.pid, case.tid, case.start_ns, corpus::WINDOW).expect("create the stream");
        let mut run: Vec<&Op> = Vec::new();
        for s in &case.steps {
            if matches!(s.op, Op::Call { .. } | Op::Return { .. }) {
                run.push(&s.op);
                continue;
            }
            encode_in_c(&mut w, &run);
            through_c += run.len();
            run.clear();
            match &s.op {
                Op::Resume { func, ts } => w.resume(*func, *ts),
                Op::Line { func, line } => w.line(*func, *line),
                Op::Name(n) => w.thread_name(n),
                Op::Call { .. } | Op::Return { .. } => unreachable!("taken above"),
            }
        }
        encode_in_c(&mut w, &run);
        through_c += run.len();
        w.finish();
        let got = std::fs::read(&path).expect("read the stream back");
        corpus::assert_same_bytes(&case, "hot.c", &got, &case.bytes());
    }
    assert!(through_c > 30, "hot.c wrote {through_c} events of the corpus");
}

/// window.rs's decoder reads each case's events (what follows the header) as the calls,
/// returns and delta sum the case lists, when they are the shim's kinds of events (calls,
/// resumes, returns), and refuses the others' bytes (they are not the fast paths').
#[test]
fn the_window_decoder_reads_the_corpus() {
    use crate::window::{decode, Written};
    let mut decoded = 0;
    for case in cases() {
        let bytes = case.bytes();
        let body = &bytes[HEADER_LEN..];
        let (calls, returns, end_ns) = case.totals();
        let got = decode(body);
        if case.only_timed() {
            assert_eq!(got, Some(Written { calls, returns, dt: end_ns.wrapping_sub(case.start_ns) }), "{}", case.bytes_path.display());
            decoded += calls + returns;
        } else {
            assert_eq!(got, None, "{}: has events the shim does not write", case.bytes_path.display());
        }
    }
    assert!(decoded > 30, "the window decoder read {decoded} events of the corpus");
}
