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
    pub fn count(self, text: &str) -> usize {
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
}
