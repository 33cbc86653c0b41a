//! A failing test's ranking follows its failure back to where the failing object was made:
//! `trace run -- python -m unittest` of a small package whose `Word.copy` forgets an
//! attribute that `Word.parse` reads, then `slice from-trace --test failed --show-ranking`.

use slice_trace_e2e::{cmd, run, run_ok, scratch, texts};

const WORD: &str = r#"import re


class Word:
    def __init__(self, chars):
        self.chars = chars
        self.re_match = re.compile("[" + re.escape(chars) + "]+").match

    def copy(self):
        ret = Word.__new__(Word)
        ret.chars = self.chars
        return ret

    def parse(self, text):
        return self.re_match(text).group(0)


def format_words(words):
    """Format the parsed words: each of the words, then the words joined."""
    words = [str(word) for word in words]
    return ", ".join(words)


def parse_words(word, text):
    return [word.parse(t) for t in text.split()]
"#;

const TEST: &str = r#"import unittest

from pkg.word import Word, format_words, parse_words


class WordTest(unittest.TestCase):
    def test_copy_parses(self):
        self.assertEqual(format_words(["a", "b"]), "a, b")
        w = Word("abc").copy()
        self.assertEqual(parse_words(w, "abc cab"), ["abc", "cab"])
"#;

/// The rank of `name` in `slice --show-ranking 0`'s lines (`slice: rank N ... NAME (file)`).
fn rank(ranking: &str, name: &str) -> usize {
    ranking
        .lines()
        .filter(|l| l.starts_with("slice: rank"))
        .find(|l| l.split_whitespace().nth(4) == Some(name))
        .and_then(|l| l.split_whitespace().nth(2)?.parse().ok())
        .unwrap_or_else(|| panic!("{name} not ranked:\n{ranking}"))
}

#[test]
fn an_attribute_error_ranks_the_method_that_made_the_object_without_it() {
    let dir = scratch();
    let proj = dir.path().join("proj");
    std::fs::create_dir_all(proj.join("pkg")).unwrap();
    std::fs::create_dir_all(proj.join("tests")).unwrap();
    std::fs::write(proj.join("pkg/__init__.py"), "").unwrap();
    std::fs::write(proj.join("pkg/word.py"), WORD).unwrap();
    std::fs::write(proj.join("tests/__init__.py"), "").unwrap();
    std::fs::write(proj.join("tests/test_word.py"), TEST).unwrap();
    let t = dir.path().join("t.d");
    let py = slice_trace_e2e::python();
    let o = run(cmd("trace").current_dir(&proj).env("PYTHONDONTWRITEBYTECODE", "1").args(["run", "-o"]).arg(&t).arg("--").arg(&py).args([
        "-m",
        "unittest",
        "tests.test_word",
    ]));
    let (_, err) = texts(&o);
    assert_eq!(o.status.code(), Some(1), "the test fails: {err}");
    let q = "Why does parsing the words with a copied Word fail?";
    let o = run(cmd("slice").arg("from-trace").arg(&t).args(["--test", "failed", "-q", q, "--show-ranking", "0"]));
    let (prompt, ranking) = texts(&o);
    assert!(prompt.contains("'Word' object has no attribute 're_match'"), "{prompt}");
    // The traceback's functions first (the test, parse_words, Word.parse), then the method
    // that made the object without the attribute, before what shares more of the question's
    // words.
    let copy = rank(&ranking, "Word.copy");
    assert!(copy < rank(&ranking, "format_words"), "{ranking}");
    assert!(copy <= 4, "{ranking}");
    // And it is whole in the prompt.
    let p = run_ok(cmd("slice").arg("from-trace").arg(&t).args(["--test", "failed", "-q", q]));
    assert!(p.contains("ret.chars = self.chars"), "{p}");
}
