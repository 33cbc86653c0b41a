//! What each fuzz target runs on one input, shared by the fuzz targets (`fuzz_targets/`) and
//! the replay test of the normal suite (`tests/fuzz_corpus.rs`, which runs every committed seed,
//! every minimized crash input and a bounded set of mutations of the seeds through the same
//! code). Errors are expected results; a panic, a hang or unbounded memory is a finding.

#![allow(dead_code)]

use analyzer::analysis::{prepare, Options, PruneMode};
use analyzer::prompt::budget::fit;
use analyzer::prompt::render::{Format, Renderer};
use analyzer::prompt::{Layout, Model};
use analyzer::select::Selection;
use analyzer::tokens::Tokenizer;
use analyzer::views::{self, tree, Threads};
use std::path::{Path, PathBuf};
use trace_format::ThreadStream;

/// A fresh scratch directory for one fuzzing process or test, on tmpfs when there is one (the
/// readers take paths: streams are read with `pread`, documents with `read_document`).
pub fn scratch(name: &str) -> PathBuf {
    let base = if Path::new("/dev/shm").is_dir() { PathBuf::from("/dev/shm") } else { std::env::temp_dir() };
    let dir = base.join(format!("slice-fuzz-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create the fuzz scratch directory");
    dir
}

/// `event_decoder`: the input is a thread stream file (`*.ev`), opened with
/// `ThreadStream::open` and decoded to the end with `EventIter`, `summary` and `scan_summary`.
pub fn event_decoder(dir: &Path, data: &[u8]) {
    let path = dir.join("1.ev");
    std::fs::write(&path, data).expect("write the stream");
    let Ok(stream) = ThreadStream::open(&path) else { return };
    if let Ok(it) = stream.events() {
        let mut n = 0u64;
        for ev in it {
            n += 1;
            if ev.is_err() {
                break;
            }
        }
        // Every event takes at least one byte.
        assert!(n <= data.len() as u64 + 1, "{n} events from {} bytes", data.len());
    }
    let _ = stream.summary();
    let _ = stream.scan_summary();
}

/// `json_documents`: the first byte picks the document (0 `meta.json`, 1 `proc.json`,
/// 2 `funcs.jsonl`, 3 `sources.json`, modulo 4), the rest is its content, parsed by the reader
/// `slice` and `trace info` use.
pub fn json_documents(dir: &Path, data: &[u8]) {
    let Some((&which, body)) = data.split_first() else { return };
    match which % 4 {
        0 => {
            std::fs::write(dir.join(trace_format::META_FILE), body).expect("write");
            let _ = trace_format::reader::read_meta(dir);
        }
        1 => {
            let _ = serde_json::from_slice::<trace_format::ProcMeta>(body);
        }
        2 => {
            let path = dir.join(trace_format::FUNCS_FILE);
            std::fs::write(&path, body).expect("write");
            if let Ok(funcs) = trace_format::reader::read_funcs(&path) {
                // The table is bounded by the file, whatever an id says.
                let lines = body.iter().filter(|&&b| b == b'\n').count();
                assert!(funcs.len() <= lines + trace_format::reader::FUNC_ID_SLACK);
            }
        }
        _ => {
            std::fs::write(dir.join(trace_format::SOURCES_FILE), body).expect("write");
            if let Some(doc) = analyzer::source::SourceCache::read_sources_doc(dir) {
                drop(analyzer::source::SourceCache::new(Some(doc), dir));
            }
        }
    }
}

/// The line that separates the parts of a `slice_pipeline` input.
pub const SEPARATOR: &[u8] = b"\n#~#\n";
/// The files of a `slice_pipeline` input's parts, in order (a missing part is a missing file).
pub const PIPELINE_FILES: [&str; 5] = ["meta.json", "p1/proc.json", "p1/funcs.jsonl", "p1/1.ev", "sources.json"];

fn split(data: &[u8]) -> Vec<&[u8]> {
    let mut parts = Vec::new();
    let mut rest = data;
    while parts.len() + 1 < PIPELINE_FILES.len() {
        match rest.windows(SEPARATOR.len()).position(|w| w == SEPARATOR) {
            Some(i) => {
                parts.push(&rest[..i]);
                rest = &rest[i + SEPARATOR.len()..];
            }
            None => break,
        }
    }
    parts.push(rest);
    parts
}

/// `slice_pipeline`: the input split on [`SEPARATOR`] into [`PIPELINE_FILES`] makes a trace
/// directory, which goes through `analysis::prepare` (load, fold, prune, select), the tree
/// view, `Model::build` and `fit` under a small token budget, as `slice tree` and `slice
/// prompt` run them. The last byte picks pruning and stdlib hiding and the budget.
pub fn slice_pipeline(dir: &Path, data: &[u8]) {
    let root = dir.join("trace");
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(root.join("p1")).expect("create the trace directory");
    for (part, name) in split(data).into_iter().zip(PIPELINE_FILES) {
        std::fs::write(root.join(name), part).expect("write a trace file");
    }
    let selector = data.last().copied().unwrap_or(0);
    let opts = Options {
        prune: if selector & 1 == 0 { PruneMode::Auto } else { PruneMode::Off },
        selection: Selection { hide_stdlib: selector & 2 == 0, ..Default::default() },
        ..Default::default()
    };
    let Ok((mut traces, _warnings)) = prepare(std::slice::from_ref(&root), &opts) else { return };
    let mut out = Vec::new();
    for t in &traces {
        let vs = views::views(t, Threads::Separate);
        let _ = tree::render_all(&mut out, &vs, &t.cwd, &tree::Palette::new(false));
    }
    let model = Model::build("How does the program compute its result?", &mut traces);
    let Ok(renderer) = Renderer::new(Format::Markdown, None) else { return };
    let _ = fit(&model, Layout::DEFAULT, &renderer, Tokenizer::O200kBase, Some(300 + (selector as usize) * 8));
}

/// The trace the `mcp_server` seeds ask about (`@TRACE@` in an input): the parts of a
/// `slice_pipeline` seed (a recorded `fib 8 2`), written once into the scratch directory.
const MCP_TRACE: &[u8] = include_bytes!("corpus/slice_pipeline/fib-p0-t0");

/// `mcp_server`: the input is what a client writes to `slice mcp` (JSON-RPC lines; `@TRACE@`
/// stands for a real trace directory), served by `analyzer::mcp::answer_lines` with recording
/// off (an input never runs a command). Every line the server writes must be a JSON-RPC 2.0
/// answer to an id the input sent (or null); once a session is established, every line that is
/// not JSON gets exactly one -32700.
pub fn mcp_server(dir: &Path, data: &[u8]) {
    let trace = dir.join("trace.d");
    if !trace.join("meta.json").exists() {
        let _ = std::fs::remove_dir_all(&trace);
        std::fs::create_dir_all(trace.join("p1")).expect("create the trace directory");
        for (part, name) in split(MCP_TRACE).into_iter().zip(PIPELINE_FILES) {
            std::fs::write(trace.join(name), part).expect("write a trace file");
        }
    }
    let path = trace.display().to_string();
    let mut input = Vec::with_capacity(data.len());
    let mut rest = data;
    while let Some(i) = rest.windows(7).position(|w| w == b"@TRACE@") {
        input.extend_from_slice(&rest[..i]);
        input.extend_from_slice(path.as_bytes());
        rest = &rest[i + 7..];
    }
    input.extend_from_slice(rest);

    let out = analyzer::mcp::answer_lines(&input);

    // What the input holds: its ids, its lines that are not JSON, whether it starts with an
    // initialize request.
    let lines: Vec<&[u8]> = input.split(|&b| b == b'\n').collect();
    let clean = |l: &[u8]| -> Vec<u8> {
        let l = l.strip_suffix(b"\r").unwrap_or(l);
        l.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(l).to_vec()
    };
    let mut ids = Vec::new();
    let mut not_json = 0usize;
    for l in &lines {
        let l = clean(l);
        if l.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<serde_json::Value>(&l) {
            Ok(v) => {
                if let Some(id) = v.get("id") {
                    ids.push(id.clone());
                }
            }
            Err(_) => not_json += 1,
        }
    }
    let mut parse_errors = 0usize;
    let mut initialized = false;
    for line in out.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        let v: serde_json::Value = serde_json::from_slice(line)
            .unwrap_or_else(|e| panic!("the server wrote a line that is not JSON ({e}): {}", String::from_utf8_lossy(line)));
        assert_eq!(v["jsonrpc"], "2.0", "{v}");
        if v.get("method").is_some() {
            continue; // a notification or a request of the server's own
        }
        assert!(v.get("result").is_some() != v.get("error").is_some(), "an answer has a result or an error: {v}");
        let id = &v["id"];
        assert!(id.is_null() || ids.contains(id), "an answer to an id the input never sent: {v}");
        if v["result"]["serverInfo"].is_object() {
            initialized = true;
        }
        if v["error"]["code"] == -32700 {
            assert!(id.is_null(), "{v}");
            parse_errors += 1;
        }
    }
    assert!(parse_errors <= not_json, "{parse_errors} parse errors for {not_json} lines that are not JSON");
    // Once a session is established, the server reads the input to its end: every line that
    // is not JSON (and within the transport's line limit) got its -32700.
    if initialized && lines.iter().all(|l| l.len() <= analyzer::mcp::transport::MAX_LINE) {
        assert_eq!(parse_errors, not_json, "every line that is not JSON gets one -32700");
    }
}
