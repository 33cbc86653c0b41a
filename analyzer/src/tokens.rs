//! Token counting with real tokenizers (tiktoken's BPE tables, embedded in the binary by
//! `tiktoken-rs`: no network at run time).

use std::fmt;
use std::str::FromStr;

/// A tokenizer to count prompt tokens with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Tokenizer {
    /// GPT-4o / GPT-4.1 / o-series / GPT-5 encoding (the default).
    #[default]
    O200kBase,
    /// GPT-4 / GPT-3.5 encoding.
    Cl100kBase,
}

impl Tokenizer {
    /// Exact number of tokens of `text` (special-token text is counted as ordinary text).
    ///
    /// A long text is counted in pieces cut where the tokenizer itself always cuts (see
    /// [`pieces`]), and each piece's count is remembered for the process: the views that count
    /// several renderings of one prompt (`slice stats`: five variants; the budget's search) count
    /// each source block and tree part once. The sum is the count of the whole text.
    pub fn count(self, text: &str) -> usize {
        if text.len() < PIECES_FROM {
            return self.count_whole(text);
        }
        self.count_in_pieces(text)
    }

    /// [`Tokenizer::count`] in remembered pieces however short the text: for many texts that
    /// share runs of lines (a wide tree's functions after their first lines), each run is
    /// encoded once.
    pub(crate) fn count_in_pieces(self, text: &str) -> usize {
        let mut total = 0;
        for piece in pieces(text) {
            let key = PieceKey::new(self, piece);
            let known = MEMO.lock().ok().and_then(|m| m.get(&key).copied());
            let n = match known {
                Some(n) => n as usize,
                None => {
                    let n = self.count_whole(piece);
                    if let Ok(mut m) = MEMO.lock() {
                        if m.len() < MEMO_PIECES {
                            m.insert(key, n as u32);
                        }
                    }
                    n
                }
            };
            total += n;
        }
        total
    }

    /// Tokens of `text` for a message: exact ([`Tokenizer::count`]) unless more than
    /// [`EXACT_UP_TO`] bytes of distinct pieces of it were never counted before; then an estimate, from an exact
    /// count of an even sample of [`SAMPLE_BYTES`] of those bytes scaled by their size (pieces
    /// counted before still count exactly). A prompt that large is millions of tokens, past
    /// any model's context: its exact size told nothing more, and counting it took longer than
    /// building it.
    pub fn count_for_message(self, text: &str) -> Count {
        self.count_sampled(text, EXACT_UP_TO, SAMPLE_BYTES)
    }

    /// [`Tokenizer::count_for_message`] with its two sizes.
    fn count_sampled(self, text: &str, exact_up_to: usize, sample_bytes: usize) -> Count {
        if text.len() <= exact_up_to {
            return Count { tokens: self.count(text), exact: true };
        }
        let memo = MEMO.lock().ok();
        let mut known = 0usize;
        let mut new: Vec<&str> = Vec::new();
        // New pieces met once each (a body repeated in the text is encoded once), until
        // there are more than `exact_up_to` bytes of them: past that, the text is sampled
        // whatever the rest holds.
        let mut distinct: rustc_hash::FxHashSet<PieceKey> = Default::default();
        let mut distinct_bytes = 0usize;
        for piece in pieces(text) {
            let key = PieceKey::new(self, piece);
            match memo.as_ref().and_then(|m| m.get(&key)) {
                Some(&n) => known += n as usize,
                None => {
                    if distinct_bytes <= exact_up_to && distinct.insert(key) {
                        distinct_bytes += piece.len();
                    }
                    new.push(piece)
                }
            }
        }
        drop(distinct);
        drop(memo);
        let new_bytes: usize = new.iter().map(|p| p.len()).sum();
        if distinct_bytes <= exact_up_to {
            return Count { tokens: self.count(text), exact: true };
        }
        // Every k-th new piece, from the start to the end of the text.
        let k = new_bytes.div_ceil(sample_bytes);
        let (mut bytes, mut tokens) = (0usize, 0usize);
        for p in new.iter().step_by(k) {
            bytes += p.len();
            tokens += self.count_whole(p);
        }
        let scaled = tokens as f64 * new_bytes as f64 / bytes.max(1) as f64;
        Count { tokens: known + scaled.round() as usize, exact: false }
    }

    /// Load the tokenizer's tables on a thread of their own (a quarter of a second), so that
    /// a view that will count builds its prompt meanwhile.
    pub fn prewarm(self) {
        std::thread::spawn(move || {
            self.count_whole("");
        });
    }

    /// [`Tokenizer::count`] in one piece.
    fn count_whole(self, text: &str) -> usize {
        ENCODED.with(|e| e.set(e.get() + text.len() as u64));
        match self {
            Tokenizer::O200kBase => tiktoken_rs::o200k_base_singleton().encode_ordinary(text).len(),
            Tokenizer::Cl100kBase => tiktoken_rs::cl100k_base_singleton().encode_ordinary(text).len(),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Tokenizer::O200kBase => "o200k_base",
            Tokenizer::Cl100kBase => "cl100k_base",
        }
    }
}

/// A token count for a message ([`Tokenizer::count_for_message`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Count {
    pub tokens: usize,
    /// Counted exactly; otherwise estimated from a sample.
    pub exact: bool,
}

impl fmt::Display for Count {
    /// `1234`, or `~1234` when estimated.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.exact {
            f.write_str("~")?;
        }
        write!(f, "{}", self.tokens)
    }
}

/// [`Tokenizer::count_for_message`] counts exactly up to this many bytes never counted before
/// (about a million tokens)...
pub const EXACT_UP_TO: usize = 4 << 20;
/// ...and beyond, samples this many of them.
const SAMPLE_BYTES: usize = 512 << 10;

/// Texts shorter than this (bytes) are counted whole.
const PIECES_FROM: usize = 16 * 1024;
/// Within a block, a piece is cut before a line whose hash is 0 modulo this (about one line
/// in this many): where a text is cut depends on its own lines only, not on where it starts,
/// so the same run of lines is cut alike wherever it sits (a tree inside a prompt and alone,
/// the same body after different signatures) and each of its pieces is counted once.
const CUT_ONE_LINE_IN: u64 = 32;
/// A piece is cut at the first safe place past this many bytes even where no rule above cut.
const PIECE_MAX: usize = 64 * 1024;
/// At most this many piece counts are remembered (16 bytes of key and 4 of count each).
const MEMO_PIECES: usize = 1 << 20;

/// A piece of text by its length and two independent 64-bit hashes, SipHash-1-3 and FxHash (a
/// collision of both is far less likely than any other failure; FxHash, several times faster,
/// for the second: every byte of every counted text is hashed), and the tokenizer that counted it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct PieceKey {
    tokenizer: u8,
    len: u32,
    h1: u64,
    h2: u64,
}

impl PieceKey {
    fn new(tok: Tokenizer, piece: &str) -> PieceKey {
        use std::hash::{Hash, Hasher};
        let mut a = std::collections::hash_map::DefaultHasher::new();
        piece.hash(&mut a);
        let mut b = rustc_hash::FxHasher::default();
        piece.hash(&mut b);
        PieceKey { tokenizer: tok as u8, len: piece.len() as u32, h1: a.finish(), h2: b.finish() }
    }
}

thread_local! {
    /// Bytes this thread ran through a tokenizer (not found in the memo): what counting cost,
    /// for tests that check a text is not encoded again.
    static ENCODED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Bytes the calling thread has run through a tokenizer so far ([`ENCODED`]), with those that
/// threads it started counted for it ([`credit_encoded`]).
pub fn encoded_bytes() -> u64 {
    ENCODED.with(|e| e.get())
}

/// Count `bytes` that a helper thread encoded for the calling thread in [`encoded_bytes`].
pub(crate) fn credit_encoded(bytes: u64) {
    ENCODED.with(|e| e.set(e.get() + bytes));
}

static MEMO: std::sync::LazyLock<std::sync::Mutex<rustc_hash::FxHashMap<PieceKey, u32>>> = std::sync::LazyLock::new(Default::default);

/// Whether the tokenizers' pre-tokenization always cuts `text` at byte `i`, so that the tokens
/// of `text` are those of `text[..i]` followed by those of `text[i..]`.
///
/// Both encodings split text with a regular expression before byte-pair encoding, and no token
/// spans two of its pieces. A piece holding a newline is a whitespace run ending in newlines
/// (`\s*[\r\n]+`, which prefers to end at the last newline of the run) or punctuation followed
/// by newlines, and in o200k slashes (`[^\s\p{L}\p{N}]+[\r\n/]*`); nothing else holds one,
/// and the expression looks at nothing before the place it starts. So right after a newline,
/// where the next line is not blank (its leading whitespace is followed by a character other
/// than a newline) and does not start with `/`, `\r` or `\n`, a piece always ends.
fn cut_after_newline(text: &str, i: usize) -> bool {
    let b = text.as_bytes();
    if i == 0 || i >= b.len() || b[i - 1] != b'\n' || matches!(b[i], b'/' | b'\r' | b'\n') {
        return false;
    }
    match text[i..].chars().find(|c| !c.is_whitespace()) {
        None => false,
        Some(_) => {
            // No newline (nor carriage return) in the whitespace run before that character.
            !text[i..].chars().take_while(|c| c.is_whitespace()).any(|c| c == '\n' || c == '\r')
        }
    }
}

/// `text` cut at places where the tokenizer cuts ([`cut_after_newline`]): before each line that
/// starts a block (a Markdown heading or fence, an XML tag), so that the same block counts
/// alike in any rendering; within a block before about one line in [`CUT_ONE_LINE_IN`],
/// chosen by the line's content ([`cut_line`]); and in a longer run without such a line every
/// [`PIECE_MAX`] bytes or so.
fn pieces(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let b = text.as_bytes();
    let mut i = 0;
    while let Some(nl) = memchr_newline(&b[i..]) {
        i += nl + 1;
        if i >= b.len() {
            break;
        }
        let block = matches!(b[i], b'#' | b'`' | b'<');
        if (block || cut_line(&b[i..]) || i - start >= PIECE_MAX) && cut_after_newline(text, i) {
            out.push(&text[start..i]);
            start = i;
        }
    }
    out.push(&text[start..]);
    out
}

/// Whether a piece may start with the line at the start of `rest`: about one line in
/// [`CUT_ONE_LINE_IN`], by a hash of the line's bytes (FNV-1a, mixed), the same on every run.
fn cut_line(rest: &[u8]) -> bool {
    let line = &rest[..memchr_newline(rest).unwrap_or(rest.len())];
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &c in line {
        h = (h ^ c as u64).wrapping_mul(0x0100_0000_01b3);
    }
    (h.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32) % CUT_ONE_LINE_IN == 0
}

fn memchr_newline(b: &[u8]) -> Option<usize> {
    b.iter().position(|&c| c == b'\n')
}

impl fmt::Display for Tokenizer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Tokenizer {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "o200k_base" | "o200k" => Ok(Tokenizer::O200kBase),
            "cl100k_base" | "cl100k" => Ok(Tokenizer::Cl100kBase),
            _ => Err(format!("unknown tokenizer {s:?}: use o200k_base (GPT-4o and later) or cl100k_base (GPT-4)")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_known_strings() {
        // Reference counts from OpenAI's tiktoken.
        assert_eq!(Tokenizer::Cl100kBase.count("hello world"), 2);
        assert_eq!(Tokenizer::O200kBase.count("hello world"), 2);
        assert_eq!(Tokenizer::O200kBase.count(""), 0);
        assert_eq!(Tokenizer::Cl100kBase.count("<|endoftext|>"), 7);
        assert!(Tokenizer::O200kBase.count("def f(x):\n    return x + 1\n") > 5);
    }

    /// The same lines are cut alike wherever they start: a long body after two different
    /// first lines (a function's signature, a tree inside a fence or alone) is encoded once.
    #[test]
    fn a_repeated_run_of_lines_is_encoded_once() {
        let body: String = (0..4000).map(|j| format!("    t += g{j}(t) * 7\n")).collect();
        let a = format!("def f1():\n{body}");
        let b = format!("def f1234567():\n    t = 0\n{body}");
        let tok = Tokenizer::Cl100kBase;
        assert_eq!(tok.count(&a), tok.count_whole(&a));
        let before = encoded_bytes();
        assert_eq!(tok.count(&b), tok.count_whole(&b));
        // count_whole(&b) encoded b once; count(&b) at most a few pieces of it.
        let again = encoded_bytes() - before - b.len() as u64;
        assert!(again < body.len() as u64 / 10, "{again} of {} bytes encoded again", body.len());
    }

    /// A message's count is exact up to its size limit of new text; past it, an estimate from
    /// a sample (a fraction of the text encoded), marked `~`, close to the exact count; text
    /// counted before still counts exactly and is not sampled.
    #[test]
    fn a_huge_text_is_counted_on_a_sample_and_says_so() {
        let tok = Tokenizer::Cl100kBase;
        let text: String = (0..20_000).map(|i| format!("def f{i}(x):\n    return g{}(x) + {}\n", i * 7, i % 13)).collect();
        let exact = tok.count_whole(&text);
        let small = tok.count_sampled(&text, text.len(), 16 << 10);
        assert_eq!(small, Count { tokens: exact, exact: true });
        assert_eq!(small.to_string(), exact.to_string());
        let fresh: String = text.replace("def", "fed");
        let exact = tok.count_whole(&fresh);
        let before = encoded_bytes();
        let est = tok.count_sampled(&fresh, 64 << 10, 16 << 10);
        let encoded = encoded_bytes() - before;
        assert!(!est.exact);
        assert!(est.to_string().starts_with('~'));
        assert!(encoded < fresh.len() as u64 / 10, "{encoded} of {} bytes encoded", fresh.len());
        let off = (est.tokens as f64 - exact as f64).abs() / exact as f64;
        assert!(off < 0.05, "estimate {} vs exact {exact}", est.tokens);
        // The same lines many times over are new text of one copy's size: exact.
        let many = text.repeat(8);
        assert_eq!(tok.count_sampled(&many, text.len() + (64 << 10), 16 << 10), Count { tokens: 8 * tok.count(&text), exact: true });
        // Counted once, the same text is then counted exactly from the memo.
        assert_eq!(tok.count(&fresh), exact);
        assert_eq!(tok.count_sampled(&fresh, 64 << 10, 16 << 10), Count { tokens: exact, exact: true });
    }

    /// Counting in pieces is exact: on this crate's own sources, the docs, and text made of the
    /// cases the cut rule is about (blank and whitespace-only lines, CRLF, lines that start with
    /// `/`, punctuation before newlines, other Unicode whitespace), each piece count summed is
    /// the whole text's count, for both tokenizers.
    #[test]
    fn counting_in_pieces_is_exact() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut texts: Vec<String> = Vec::new();
        for dir in [root.join("src/prompt"), root.join("../docs"), root.join("../examples/python")] {
            for e in std::fs::read_dir(&dir).unwrap() {
                if let Ok(t) = std::fs::read_to_string(e.unwrap().path()) {
                    texts.push(t);
                }
            }
        }
        let tricky = [
            "x = 1\n",
            "\n",
            "\n\n",
            "  \n",
            " \t\n  \n",
            "// c\n",
            "/x\n",
            "):\n",
            "):\n/\n",
            "\r\n",
            "a\r\n\r\n",
            "#### `f`\n",
            "```python\n",
            "<source>\n",
            "\u{2028}x\n",
            "\u{a0}\u{a0}y\n",
            "    z\n",
            "\t\tw\n",
            "é\n",
            "123\n",
            "'s\n",
            "  /a\n",
        ];
        let mut mixed = String::new();
        let mut k = 7usize;
        for _ in 0..40_000 {
            k = k.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            mixed.push_str(tricky[(k >> 33) % tricky.len()]);
        }
        texts.push(mixed);
        let mut cut = 0;
        for t in &texts {
            for tok in [Tokenizer::O200kBase, Tokenizer::Cl100kBase] {
                let p = pieces(t);
                cut += p.len() - 1;
                assert_eq!(p.concat(), *t);
                let sum: usize = p.iter().map(|p| tok.count_whole(p)).sum();
                assert_eq!(sum, tok.count_whole(t), "{tok}: {:?}", &t[..t.len().min(200)]);
                assert_eq!(tok.count(t), tok.count_whole(t));
            }
        }
        assert!(cut > 100, "the texts were cut ({cut} cuts)");
    }
}
