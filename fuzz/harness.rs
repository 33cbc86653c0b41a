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
