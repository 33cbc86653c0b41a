//! Counting a question's terms in the texts of a slice, fast: [`Counter::count`] gives exactly
//! what [`super::relevance`]'s reference `count` gives (the terms of [`super::relevance::terms`]
//! and its compounds), in one pass over the bytes of an ASCII text, without a string per term:
//! a word's stem is worked out once per distinct word (a slice's code repeats its words far more
//! often than it has new ones) and remembered with the question term it is, if any. Text that is
//! not ASCII goes through the reference.

use rustc_hash::FxHashMap as HashMap;

/// The counting state of one scoring: the question, and what each word met so far stems to.
pub(super) struct Counter<'q> {
    query: &'q [String],
    index: HashMap<&'q str, usize>,
    /// Lowercased word (letters only) -> the index of its stem among the question terms.
    stems: HashMap<Vec<u8>, Option<usize>>,
    buf: Vec<u8>,
}

impl<'q> Counter<'q> {
    pub(super) fn new(query: &'q [String]) -> Counter<'q> {
        // (Built like the reference's index: a repeated term counts at its last position.)
        let index = query.iter().enumerate().map(|(i, t)| (t.as_str(), i)).collect();
        Counter { query, index, stems: HashMap::default(), buf: Vec::new() }
    }

    /// The question term the stem of this lowercased word is, if any (the word's bytes are in
    /// `self.buf`).
    fn stem_index(&mut self) -> Option<usize> {
        if let Some(&i) = self.stems.get(self.buf.as_slice()) {
            return i;
        }
        // The buffer holds ASCII letters only.
        let word = std::str::from_utf8(&self.buf).unwrap_or_default();
        let i = self.index.get(super::relevance::stem(word).as_str()).copied();
        self.stems.insert(self.buf.clone(), i);
        i
    }

    /// Occurrences of each question term in `text` and the text's length in terms (the
    /// reference `count` of [`super::relevance`]).
    pub(super) fn count(&mut self, text: &str) -> (Vec<u32>, usize) {
        if !text.is_ascii() {
            return super::relevance::count(text, self.query);
        }
        let mut n = vec![0u32; self.query.len()];
        let mut len = 0usize;
        let b = text.as_bytes();
        // The current piece (`relevance::pieces`) starts at `ps` (NONE: no piece open); the
        // current run of letters and digits (`relevance::digit_words`) at `rs`.
        const NONE: usize = usize::MAX;
        let mut ps = NONE;
        let mut rs = NONE;
        let (mut alpha, mut digit) = (false, false);
        // The previous piece of the current identifier, when it is a word (`compounds`).
        let mut prev: Option<(usize, usize)> = None;
        for i in 0..=b.len() {
            let c = b.get(i).copied().unwrap_or(b' ');
            if !c.is_ascii_alphanumeric() {
                if ps != NONE {
                    self.piece(b, ps, i, &mut prev, &mut n, &mut len);
                    ps = NONE;
                }
                if c != b'_' {
                    prev = None;
                }
                if rs != NONE {
                    if i - rs >= 2 && alpha && digit {
                        len += 1;
                        let run = text[rs..i].to_ascii_lowercase();
                        if let Some(&t) = self.index.get(run.as_str()) {
                            n[t] += 1;
                        }
                    }
                    rs = NONE;
                }
                continue;
            }
            if rs == NONE {
                rs = i;
                (alpha, digit) = (false, false);
            }
            alpha |= c.is_ascii_alphabetic();
            digit |= c.is_ascii_digit();
            if ps == NONE {
                ps = i;
                continue;
            }
            // The piece's last character is the one before (a piece is a run of adjacent ones).
            let p = b[i - 1];
            let next_lower = b.get(i + 1).is_some_and(u8::is_ascii_lowercase);
            let boundary = (p.is_ascii_lowercase() && c.is_ascii_uppercase())
                || (p.is_ascii_uppercase() && c.is_ascii_uppercase() && next_lower)
                || (p.is_ascii_digit() != c.is_ascii_digit());
            if boundary {
                self.piece(b, ps, i, &mut prev, &mut n, &mut len);
                ps = i;
            }
        }
        (n, len)
    }

    /// One piece `b[s..e]` (all letters or all digits): a term when it is a word of two or
    /// more letters, and with the identifier's previous word a compound.
    fn piece(&mut self, b: &[u8], s: usize, e: usize, prev: &mut Option<(usize, usize)>, n: &mut [u32], len: &mut usize) {
        let word = e - s >= 2 && b[s].is_ascii_alphabetic();
        if !word {
            *prev = None;
            return;
        }
        *len += 1;
        self.buf.clear();
        self.buf.extend(b[s..e].iter().map(u8::to_ascii_lowercase));
        if let Some(t) = self.stem_index() {
            n[t] += 1;
        }
        if let Some((ps, pe)) = prev.replace((s, e)) {
            self.buf.clear();
            self.buf.extend(b[ps..pe].iter().chain(&b[s..e]).map(u8::to_ascii_lowercase));
            if let Some(t) = self.stem_index() {
                n[t] += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::relevance::{count, question_terms};
    use super::*;

    /// The fast count and the reference agree term by term, on code and on text made of
    /// random pieces of identifiers, numbers, case changes and punctuation.
    #[test]
    fn the_fast_count_is_the_reference_count() {
        let mut texts: Vec<String> = [
            "FileNameReader.read",
            "def read(self):\n    n = file_name(x)",
            "file.name Filename name_file HTTPServer.getTopBorder2x i 42",
            "def f7(): return g12(h1) + g_7(t) + G7x",
            "site-packages/rich/table.py __init__ __rich_measure__ read_only readOnly XMLHttpRequest",
            "ÜnïcodeFileName read_file",
            "",
            "a_b aB Ab AB ab_cd_ef abCDef ABCdef abc123def 123abc abc_",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let parts =
            ["file", "File", "name", "NAME", "read", "_", ".", " ", "2", "x", "7", "Reader", "ing", "s", "(", "\n", "ab", "F", "f7", "h1"];
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..400 {
            let mut s = String::new();
            for _ in 0..(seed % 12) {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                s.push_str(parts[(seed % parts.len() as u64) as usize]);
            }
            seed = seed.wrapping_add(0x9e37_79b9);
            texts.push(s);
        }
        let query: Vec<String> = question_terms("Where is the file name read by the FileNameReader, f7 and h1 or reading names?")
            .into_iter()
            .chain(["readonly", "xmlhttp", "fil", "abcd", "cdef", "abc"].map(String::from))
            .collect();
        let mut c = Counter::new(&query);
        for t in &texts {
            assert_eq!(c.count(t), count(t, &query), "{t:?} with {query:?}");
        }
    }
}
