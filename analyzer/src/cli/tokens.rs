//! `slice tokens`: count the tokens of texts with the tokenizers the prompts are measured with.
//!
//! Lets scripts (the evaluation in `eval/`, a user comparing prompts from other tools) count
//! tokens exactly as `slice from-trace` and `--budget` do, offline, without tiktoken's
//! downloaded tables.

use crate::tokens::Tokenizer;
use anyhow::Context;
use clap::Args;
use std::io::{Read, Write};
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct TokensArgs {
    /// Text files to count (UTF-8); `-` or none reads standard input. With one input the count
    /// alone is printed; with several, one `COUNT<TAB>FILE` line per input.
    #[arg(value_name = "FILE|-")]
    pub files: Vec<PathBuf>,
    /// Tokenizer: o200k_base (GPT-4o and later) or cl100k_base (GPT-4).
    #[arg(long, value_name = "NAME", default_value = "o200k_base")]
    pub tokenizer: Tokenizer,
}

/// The text of one input: a file, or standard input for `-`.
fn read_input(path: &std::path::Path) -> anyhow::Result<String> {
    if path.as_os_str() == "-" {
        let mut s = String::new();
        std::io::stdin().read_to_string(&mut s).context("reading standard input (it must be UTF-8 text)")?;
        Ok(s)
    } else {
        std::fs::read_to_string(path).with_context(|| match std::fs::metadata(path) {
            Ok(_) => format!("{}: cannot read it as UTF-8 text", path.display()),
            Err(_) => format!("{}: cannot read it", path.display()),
        })
    }
}

/// The output lines for counted inputs: the bare count for a single input, else
/// `COUNT<TAB>NAME` per input.
fn format_counts(counts: &[(String, usize)]) -> String {
    match counts {
        [(_, n)] => format!("{n}\n"),
        _ => counts.iter().map(|(name, n)| format!("{n}\t{name}\n")).collect(),
    }
}

pub fn run(a: TokensArgs) -> anyhow::Result<()> {
    let files = if a.files.is_empty() { vec![PathBuf::from("-")] } else { a.files };
    if files.iter().filter(|f| f.as_os_str() == "-").count() > 1 {
        return Err(super::common::UsageError("standard input (`-`) can be counted only once".into()).into());
    }
    let mut counts = Vec::with_capacity(files.len());
    for f in &files {
        let text = read_input(f)?;
        counts.push((f.display().to_string(), a.tokenizer.count(&text)));
    }
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(format_counts(&counts).as_bytes()).and_then(|_| out.flush()) {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            return Err(e).context("writing the counts to standard output");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_input_prints_the_bare_count_several_print_count_and_name() {
        assert_eq!(format_counts(&[("a.txt".into(), 7)]), "7\n");
        assert_eq!(format_counts(&[("a.txt".into(), 7), ("-".into(), 0)]), "7\ta.txt\n0\t-\n");
    }

    #[test]
    fn reads_files_and_reports_unreadable_ones() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("t.txt");
        std::fs::write(&p, "hello world").expect("write");
        assert_eq!(read_input(&p).expect("read"), "hello world");
        let missing = dir.path().join("missing.txt");
        let e = read_input(&missing).expect_err("missing file");
        assert!(format!("{e:#}").contains("missing.txt"), "{e:#}");
        std::fs::write(&p, [0xff, 0xfe]).expect("write");
        assert!(read_input(&p).is_err());
    }
}
