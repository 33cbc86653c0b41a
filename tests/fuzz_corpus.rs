//! The fuzz targets' inputs in the normal suite: every committed seed and minimized crash input
//! under `fuzz/corpus/<target>/`, then a bounded, deterministic set of mutations of the seeds,
//! each run through the same code the fuzz targets run (`fuzz/harness.rs`). A panic fails the
//! test; the coverage-guided runs themselves need `cargo fuzz` (see `fuzz/README.md`).

#[path = "../fuzz/harness.rs"]
mod harness;

use std::path::{Path, PathBuf};

type Target = fn(&Path, &[u8]);

fn seeds(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus").join(target);
    let mut v: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .map(|p| {
            let b = std::fs::read(&p).unwrap();
            (p, b)
        })
        .collect();
    v.sort();
    assert!(!v.is_empty(), "{}: no seeds", dir.display());
    v
}

/// xorshift64*: a fixed sequence, so a failure reproduces.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// One to four of libFuzzer's simplest mutations: flip a bit, set a byte to an edge value,
/// truncate, copy a chunk over another place.
fn mutate(rng: &mut Rng, seed: &[u8]) -> Vec<u8> {
    let mut d = seed.to_vec();
    for _ in 0..1 + rng.below(4) {
        if d.is_empty() {
            break;
        }
        let i = rng.below(d.len());
        match rng.below(4) {
            0 => d[i] ^= 1 << rng.below(8),
            1 => d[i] = [0, 0x7f, 0x80, 0xff][rng.below(4)],
            2 => d.truncate(i),
            _ => {
                let n = 1 + rng.below(16.min(d.len() - i));
                let chunk = d[i..i + n].to_vec();
                let j = rng.below(d.len() - n + 1);
                d[j..j + n].copy_from_slice(&chunk);
            }
        }
    }
    d
}

fn replay(target: &str, run: Target, mutations_per_seed: usize) {
    let dir = harness::scratch(&format!("test-{target}"));
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for (path, seed) in seeds(target) {
        eprintln!("{}", path.display());
        run(&dir, &seed);
        for k in 0..mutations_per_seed {
            let m = mutate(&mut rng, &seed);
            let r = std::panic::catch_unwind(|| run(&dir, &m));
            if r.is_err() {
                let keep = dir.join(format!("crash-{target}-{k}"));
                std::fs::write(&keep, &m).unwrap();
                panic!("{}: mutation {k} panicked; the input is {}", path.display(), keep.display());
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn event_decoder_seeds_and_mutations() {
    replay("event_decoder", harness::event_decoder, 300);
}

#[test]
fn json_documents_seeds_and_mutations() {
    replay("json_documents", harness::json_documents, 100);
}

#[test]
fn slice_pipeline_seeds_and_mutations() {
    replay("slice_pipeline", harness::slice_pipeline, 25);
}

#[test]
fn mcp_server_seeds_and_mutations() {
    replay("mcp_server", harness::mcp_server, 20);
}

/// The `mcp_server` target really serves its input: the seed with lines that are not JSON gets
/// one -32700 for each, and the ping after them is answered.
#[test]
fn mcp_server_seed_is_served_whole() {
    let seed = std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/mcp_server/session-parse-errors")).unwrap();
    let out = String::from_utf8(analyzer::mcp::answer_lines(&seed)).unwrap();
    let answers: Vec<serde_json::Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(answers.iter().filter(|a| a["error"]["code"] == -32700).count(), 3, "{out}");
    assert_eq!(answers.iter().filter(|a| a["error"]["code"] == -32600).count(), 5, "{out}");
    assert!(answers.iter().any(|a| a["id"] == "p" && a["result"] == serde_json::json!({})), "{out}");
}
