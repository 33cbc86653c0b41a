//! Lexical relevance of the functions of a slice to the question: BM25F over identifier
//! tokens (see `docs/prompts.md`, "Token counting and `--budget N`").
//!
//! Each function is a document with three fields: its qualified name, its display path and
//! the code the prompt would show. Text is cut into terms by [`terms`]: identifiers are split
//! at `_`, `.`, `/` and every other non-alphanumeric character and at CamelCase and
//! letter/digit boundaries, lowercased, stemmed by [`stem`]; pure numbers and one-letter
//! pieces are dropped. The question gives its terms the same way, without stopwords and
//! words under three letters ([`question_terms`]).
//!
//! For a question term `t` and a function `d`:
//!
//! ```text
//! tf(t,d)  = Σ_field w_f · n_f(t,d) / (1 − b_f + b_f · len_f(d) / avglen_f)
//! idf(t)   = ln(1 + (N − df(t) + 0.5) / (df(t) + 0.5))
//! score(d) = Σ_t idf(t) · tf(t,d) / (k1 + tf(t,d))
//! ```
//!
//! with `n_f` the occurrences of `t` in field `f`, `len_f` the field's length in terms,
//! `avglen_f` its mean over the slice, `N` the number of functions in the slice and `df(t)`
//! the number of them with `t` in any field; `k1 = 1.2`, name `w = 3, b = 0.5`, code
//! `w = 1, b = 0.75`, path `w = 0.5, b = 0`. A term that many functions of the slice share
//! (the name of the library's main class, say) therefore counts little, a rare one much, and
//! repeating a term in a long body saturates instead of growing without bound. Scores are
//! rounded to 1e-6 so that the ranking does not depend on the last bit of a floating-point
//! logarithm.

use std::collections::HashMap;

/// BM25 saturation constant.
pub const K1: f64 = 1.2;
/// (weight, length normalisation) of the qualified name.
pub const NAME: (f64, f64) = (3.0, 0.5);
/// (weight, length normalisation) of the code.
pub const CODE: (f64, f64) = (1.0, 0.75);
/// (weight, length normalisation) of the display path.
pub const PATH: (f64, f64) = (0.5, 0.0);

/// Question words that say nothing about which code is meant. Only general vocabulary, in
/// three groups, each for the reason given above it.
pub const STOPWORDS: &[&str] = &[
    // English function words: articles, pronouns, auxiliaries and modals, prepositions,
    // conjunctions, question words, negation, quantifiers and focusing adverbs. They are the
    // grammar of a question, not its subject.
    "the",
    "and",
    "for",
    "with",
    "what",
    "which",
    "why",
    "how",
    "does",
    "did",
    "when",
    "where",
    "this",
    "that",
    "these",
    "those",
    "from",
    "into",
    "onto",
    "like",
    "about",
    "are",
    "not",
    "but",
    "can",
    "could",
    "you",
    "its",
    "has",
    "have",
    "had",
    "was",
    "were",
    "will",
    "would",
    "should",
    "there",
    "their",
    "them",
    "then",
    "than",
    "who",
    "whom",
    "all",
    "any",
    "some",
    "also",
    "only",
    "just",
    // Words for the slice itself: every function in it is code of the program that was called
    // and ran, so these hold for all of them alike; as identifiers (`run`, `call`, `code`) they
    // would raise whatever happens to be named so.
    "function",
    "functions",
    "method",
    "methods",
    "code",
    "program",
    "call",
    "calls",
    "called",
    "run",
    "runs",
    "use",
    "used",
    "using",
    "work",
    "works",
    "happen",
    "happens",
    "happening",
    // Accessor verbs: `get_` and `set_` begin so many names that a question's "get" or "set"
    // does not tell one accessor from another.
    "get",
    "gets",
    "set",
];

/// A light, deterministic suffix stemmer (a small subset of Porter's step 1): plural `-s`,
/// `-es`, `-ies`, a noun's `-ment`, then `-ing` and `-ed` (when a vowel stays before them, undoubling a final
/// double consonant other than l, s, z when four letters or more stay), then a final `-e`. Both the question and the code go
/// through it, so only consistency matters: `borders`/`border`, `draws`/`drawing`/`draw`,
/// `parse`/`parsed`/`parses`/`parsing`, `tables`/`table` meet.
pub fn stem(w: &str) -> String {
    if !w.bytes().all(|b| b.is_ascii_lowercase()) {
        return w.to_string();
    }
    let mut s = american(w);
    if s.len() > 4 && s.ends_with("ies") {
        s.truncate(s.len() - 3);
        s.push('y');
    } else if s.ends_with("sses") {
        s.truncate(s.len() - 2);
    } else if s.len() > 3 && s.ends_with('s') && !s.ends_with("ss") && !s.ends_with("us") && !s.ends_with("is") {
        s.pop();
    }
    let has_vowel = |x: &str| x.bytes().any(|b| b"aeiouy".contains(&b));
    // A noun made with `-ment` meets its verb (`alignment`/`align`, `adjustment`/`adjust`)
    // when at least four letters stay (`segment`, `comment`, `element` are kept whole).
    if s.len() >= 8 && s.ends_with("ment") && has_vowel(&s[..s.len() - 4]) {
        s.truncate(s.len() - 4);
    }
    let mut stripped = false;
    for suffix in ["ing", "ed"] {
        if s.ends_with(suffix) && !s.ends_with("eed") {
            let stem = &s[..s.len() - suffix.len()];
            if stem.len() >= 3 && has_vowel(stem) {
                s.truncate(stem.len());
                stripped = true;
                // `running`/`run`, `padded`/`pad`; a stem of three letters keeps its double
                // consonant: `adding`/`add`, `added`/`add`.
                let b = s.as_bytes();
                let n = b.len();
                if n >= 4 && b[n - 1] == b[n - 2] && !b"aeiouylsz".contains(&b[n - 1]) {
                    s.pop();
                }
            }
            break;
        }
    }
    if !stripped && s.len() >= 4 && s.ends_with('e') && !s.ends_with("ee") {
        s.pop();
    }
    s
}

/// Code is spelt the American way: a question's `colour`, `behaviour`, `centre`, `grey`,
/// `initialise` meet `color`, `behavior`, `center`, `gray`, `initialize`.
fn american(w: &str) -> String {
    for (uk, us) in [
        ("colour", "color"),
        ("behaviour", "behavior"),
        ("favour", "favor"),
        ("flavour", "flavor"),
        ("neighbour", "neighbor"),
        ("honour", "honor"),
    ] {
        if let Some(rest) = w.strip_prefix(uk) {
            return format!("{us}{rest}");
        }
    }
    match w {
        "centre" | "centres" | "centred" => return w.replacen("centre", "center", 1),
        "grey" => return "gray".into(),
        _ => {}
    }
    // -ise/-isation verbs: initialise -> initialize, serialisation -> serialization.
    for (uk, us) in [("ise", "ize"), ("ised", "ized"), ("ises", "izes"), ("ising", "izing"), ("isation", "ization"), ("iser", "izer")] {
        if w.len() > uk.len() + 4 && w.ends_with(uk) && !w.ends_with("wise") && !w.ends_with("noise") && !w.ends_with("raise") {
            return format!("{}{us}", &w[..w.len() - uk.len()]);
        }
    }
    w.to_string()
}

/// Everyday words of a question and the names programs give the same thing, where a standard
/// interface fixes the name (each is added to the question's terms, not substituted). Only
/// general programming vocabulary, each pair for the reason given above it.
pub const SYNONYMS: &[(&str, &[&str])] = &[
    // POSIX: a program tells a pipe or a redirected file from a terminal with isatty(3); a
    // terminal is a tty.
    ("piped", &["isatty", "tty", "terminal"]),
    ("pipe", &["isatty", "tty", "terminal"]),
    ("redirected", &["isatty", "tty", "terminal"]),
    // The screen a user reads is the terminal or console a program writes to.
    ("screen", &["terminal", "console"]),
    // HTML names bold and italic text by what they mean: <strong>, <em> (emphasis).
    ("bold", &["strong"]),
    ("italic", &["emphasis"]),
    // HTML: a link is an <a> element whose href attribute holds its URL.
    ("link", &["href", "url"]),
    ("links", &["href", "url"]),
];

/// The raw words of a text: identifier pieces split at non-alphanumeric characters, CamelCase
/// and letter/digit boundaries, lowercased (not stemmed, nothing dropped).
fn pieces(text: &str, mut f: impl FnMut(&str)) {
    let mut buf = String::new();
    let mut flush = |buf: &mut String| {
        if !buf.is_empty() {
            f(&buf.to_lowercase());
            buf.clear();
        }
    };
    let chars: Vec<char> = text.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        if !c.is_alphanumeric() {
            flush(&mut buf);
            continue;
        }
        if let Some(&p) = buf.chars().last().as_ref() {
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
            let boundary = (p.is_lowercase() && c.is_uppercase())
                || (p.is_uppercase() && c.is_uppercase() && next_lower)
                || (p.is_numeric() != c.is_numeric());
            if boundary {
                flush(&mut buf);
            }
        }
        buf.push(c);
    }
    flush(&mut buf);
}

/// The terms of a piece of code or a name: [`pieces`], stemmed, without pure numbers and
/// one-character pieces; plus each [`digit_word`] whole.
pub fn terms(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    pieces(text, |p| {
        if p.chars().count() >= 2 && !p.chars().all(|c| c.is_numeric()) {
            out.push(stem(p));
        }
    });
    digit_words(text, |w| out.push(w));
    out
}

/// The runs of letters and digits of `text` that hold both, lowercased (`f7`, `h1`, `utf8`,
/// `sha256`). Split at the digit, their pieces are dropped or lose what tells them apart, so
/// they are also terms whole: a question naming `f7` finds `f7`, not every `f`.
fn digit_words(text: &str, mut f: impl FnMut(String)) {
    for run in text.split(|c: char| !c.is_alphanumeric()) {
        if run.chars().count() >= 2 && run.chars().any(char::is_alphabetic) && run.chars().any(char::is_numeric) {
            f(run.to_lowercase());
        }
    }
}

/// The names of the characters a question quotes from the program's input or output: code that
/// handles a character is often named after it (in identifiers, constants and comments).
/// Sentence punctuation (`.,;:?!'"()`) is not in the list.
pub const SYMBOL_NAMES: &[(char, &[&str])] = &[
    // Each character's usual name; besides, `&`'s entity name in HTML and XML (`&amp;`), what
    // `\` is in C-like strings and regular expressions (the escape character), and what `<`
    // opens in markup (a tag).
    ('*', &["asterisk", "star"]),
    ('#', &["hash"]),
    ('&', &["amp", "ampersand"]),
    ('~', &["tilde"]),
    ('|', &["pipe"]),
    ('`', &["backtick"]),
    ('\\', &["backslash", "escape"]),
    ('^', &["caret"]),
    ('$', &["dollar"]),
    ('%', &["percent"]),
    ('<', &["tag"]),
    ('=', &["equal"]),
];

/// The distinct terms of a question, in order: words of 3+ characters that are not
/// stopwords, split and stemmed like code.
pub fn question_terms(q: &str) -> Vec<String> {
    weighted_question_terms(q).into_iter().map(|(t, _)| t).collect()
}

/// File name extensions: a question word ending in one of them after a name (`build.log`,
/// `.scratch.rs`, `src/main.rs`) names a file ([`is_file_name`]). The usual extensions of
/// source, text, data and archive files.
pub const FILE_EXTENSIONS: &[&str] = &[
    "c", "h", "cc", "cpp", "hpp", "rs", "py", "pyi", "js", "ts", "go", "java", "rb", "sh", "md", "rst", "txt", "log", "json", "toml",
    "yaml", "yml", "ini", "cfg", "conf", "csv", "tsv", "xml", "html", "htm", "css", "bin", "dat", "lock", "gz", "zip", "tar", "pdf", "png",
    "jpg", "svg", "so", "exe", "dll",
];

/// Whether a whitespace-separated word of a question is a file name or a path: a directory
/// (`target/`), a path of two or more slashes (`/var/log/shop`), or a name ending in one of
/// [`FILE_EXTENSIONS`] (`build.log`, `.scratch.rs`, `src/main.rs`; a `:line` after it
/// allowed). Not a URL, not markup (`</div>`), not prose (`read/write`), not code
/// (`sqlparse.format('x')`, `server.url`, `c.name`).
pub fn is_file_name(word: &str) -> bool {
    let path_char = |c: char| c.is_alphanumeric() || matches!(c, '.' | '/' | '_' | '-' | '~');
    let t = word.trim_matches(|c: char| !path_char(c) && c != ':').trim_end_matches(['.', ':']);
    // `src/main.rs:2`: a file and a line.
    let t = match t.split_once(':') {
        Some((head, rest)) if rest.chars().all(|c| c.is_ascii_digit() || c == ':') => head,
        _ => t,
    };
    if !t.chars().all(path_char) || !t.chars().any(char::is_alphabetic) {
        return false;
    }
    // `target/`, `/var/log/shop`; not prose's `read/write`.
    let dir = (t.len() > 1 && t.ends_with('/')) || t.matches('/').count() >= 2;
    let ext = t.rsplit_once('.').is_some_and(|(stem, ext)| {
        let name = stem.rsplit('/').next().unwrap_or(stem).trim_start_matches('.');
        !name.is_empty() && FILE_EXTENSIONS.contains(&ext.to_ascii_lowercase().as_str())
    });
    dir || ext
}

/// [`question_terms`] with how often the question uses each (a word the question repeats is
/// what it is about: BM25's query-term frequency). The words of the file names and paths it
/// quotes ([`is_file_name`]) are no terms, unless nothing else is: they name the user's files
/// (`build.log`, `src/main.rs`, `target/`), not the code that read them, and as terms they
/// raised whatever is named `build`, `log`, `main` or `parse`.
pub fn weighted_question_terms(q: &str) -> Vec<(String, u32)> {
    let out = terms_of_question(q, true);
    if out.is_empty() {
        terms_of_question(q, false)
    } else {
        out
    }
}

/// [`weighted_question_terms`], the file names' words left out or not.
fn terms_of_question(q: &str, without_file_names: bool) -> Vec<(String, u32)> {
    let mut out: Vec<(String, u32)> = Vec::new();
    let mut add = |t: String| match out.iter_mut().find(|(x, _)| *x == t) {
        Some((_, n)) => *n += 1,
        None => out.push((t, 1)),
    };
    for (c, names) in SYMBOL_NAMES {
        if q.contains(*c) {
            for n in *names {
                add(stem(n));
            }
        }
    }
    for token in q.split_whitespace().filter(|t| !(without_file_names && is_file_name(t))) {
        for w in token.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.')) {
            let lw = w.to_lowercase();
            if let Some((_, syn)) = SYNONYMS.iter().find(|(q, _)| *q == lw.as_str()) {
                for n in *syn {
                    add(stem(n));
                }
            }
            digit_words(w, &mut add);
            if lw.trim_matches(|c| c == '_' || c == '.').chars().count() < 3 || STOPWORDS.contains(&lw.as_str()) {
                continue;
            }
            pieces(w, |p| {
                if p.chars().count() >= 2 && !p.chars().all(|c| c.is_numeric()) && !STOPWORDS.contains(&p) {
                    add(stem(p));
                }
            });
        }
    }
    out
}

/// The text of one function, as scored.
#[derive(Debug, Clone, Default)]
pub struct Document<'a> {
    pub name: &'a str,
    pub path: &'a str,
    pub code: &'a str,
}

/// Per field: occurrences of each question term, and the field's length in terms.
struct Counted {
    counts: [Vec<u32>; 3],
    len: [usize; 3],
}

/// Occurrences of each question term in `text` and its length in terms: the reference that
/// [`super::termcount::Counter`] computes faster (and falls back on for text that is not ASCII).
pub(super) fn count(text: &str, query: &[String]) -> (Vec<u32>, usize) {
    let mut n = vec![0u32; query.len()];
    let mut len = 0usize;
    let index: HashMap<&str, usize> = query.iter().enumerate().map(|(i, t)| (t.as_str(), i)).collect();
    for t in terms(text) {
        len += 1;
        if let Some(&i) = index.get(t.as_str()) {
            n[i] += 1;
        }
    }
    compounds(text, |c| {
        if let Some(&i) = index.get(c.as_str()) {
            n[i] += 1;
        }
    });
    (n, len)
}

/// Two adjacent pieces of one identifier joined, stemmed: `FileNameReader` also says
/// `filename`, `read_only` says `readonly`, so a question's compound word meets the code's
/// CamelCase or snake_case. Counted as matches, not as terms of their own (a field's length
/// stays its number of pieces).
fn compounds(text: &str, mut f: impl FnMut(String)) {
    for ident in text.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
        let mut prev: Option<String> = None;
        pieces(ident, |p| {
            let word = p.len() >= 2 && p.bytes().all(|b| b.is_ascii_lowercase());
            if let (Some(a), true) = (&prev, word) {
                f(stem(&format!("{a}{p}")));
            }
            prev = word.then(|| p.to_string());
        });
    }
}

/// BM25F scores of `docs` for the question terms `query` (see the module documentation),
/// rounded to 1e-6. All zero when the query is empty.
/// Weight of the coordination factor: a score is multiplied by `1 - COORD + COORD × (terms
/// matched / question terms)`.
pub const COORD: f64 = 0.5;

pub fn scores(docs: &[Document<'_>], query: &[String]) -> Vec<f64> {
    let weighted: Vec<(String, u32)> = query.iter().map(|t| (t.clone(), 1)).collect();
    weighted_scores(docs, &weighted)
}

/// [`scores`] with a weight per question term (how often the question uses it).
pub fn weighted_scores(docs: &[Document<'_>], weighted: &[(String, u32)]) -> Vec<f64> {
    let query: Vec<String> = weighted.iter().map(|(t, _)| t.clone()).collect();
    let query = &query[..];
    if query.is_empty() || docs.is_empty() {
        return vec![0.0; docs.len()];
    }
    let mut counter = super::termcount::Counter::new(query);
    let counted: Vec<Counted> = docs
        .iter()
        .map(|d| {
            let (n0, l0) = counter.count(d.name);
            let (n1, l1) = counter.count(d.code);
            let (n2, l2) = counter.count(d.path);
            Counted { counts: [n0, n1, n2], len: [l0, l1, l2] }
        })
        .collect();
    let n = docs.len() as f64;
    let params = [NAME, CODE, PATH];
    let avg: Vec<f64> = (0..3).map(|f| counted.iter().map(|c| c.len[f]).sum::<usize>() as f64 / n).collect();
    let idf: Vec<f64> = (0..query.len())
        .map(|t| {
            let df = counted.iter().filter(|c| c.counts.iter().any(|f| f[t] > 0)).count() as f64;
            (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
        })
        .collect();
    counted
        .iter()
        .map(|c| {
            let mut score = 0.0;
            let mut matched = 0usize;
            for (t, idf) in idf.iter().enumerate() {
                let mut tf = 0.0;
                for (f, (w, b)) in params.iter().enumerate() {
                    let k = c.counts[f][t];
                    if k == 0 {
                        continue;
                    }
                    let norm = if avg[f] > 0.0 { 1.0 - b + b * c.len[f] as f64 / avg[f] } else { 1.0 };
                    tf += w * k as f64 / norm;
                }
                if tf > 0.0 {
                    matched += 1;
                }
                score += weighted[t].1 as f64 * idf * tf / (K1 + tf);
            }
            // Coordination: a function that matches more of the question's terms is closer
            // to it than one that matches a single rare term strongly.
            score *= 1.0 - COORD + COORD * matched as f64 / query.len() as f64;
            (score * 1e6).round() / 1e6
        })
        .collect()
}

/// Indices of the functions in priority order: higher score first, then smaller depth, then
/// earlier first call. `keys[i] = (score, min_depth, first_index)`.
pub fn rank(keys: &[(f64, u32, usize)]) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..keys.len()).collect();
    idx.sort_by(|&a, &b| {
        let (sa, da, ia) = keys[a];
        let (sb, db, ib) = keys[b];
        sb.total_cmp(&sa).then(da.cmp(&db)).then(ia.cmp(&ib))
    });
    idx
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A question's compound word meets the code's CamelCase and snake_case pieces, within
    /// one identifier only, without lengthening the field.
    #[test]
    fn a_compound_word_meets_an_identifiers_pieces() {
        let q = question_terms("Where is the filename read?");
        assert!(q.contains(&"filenam".to_string()), "{q:?}");
        let i = q.iter().position(|t| t == "filenam").unwrap();
        for (text, n) in
            [("FileNameReader.read", 1), ("def read(self):\n    n = file_name(x)", 1), ("file.name", 0), ("Filename", 1), ("name_file", 0)]
        {
            assert_eq!(count(text, &q).0[i], n, "{text}");
        }
        assert_eq!(count("FileNameReader", &q).1, 3, "file name reader: three terms");
    }

    #[test]
    fn stemming_meets_the_usual_forms() {
        for (a, b) in [
            ("borders", "border"),
            ("draws", "draw"),
            ("drawing", "draw"),
            ("parsed", "parse"),
            ("parsing", "parses"),
            ("tables", "table"),
            ("properties", "property"),
            ("detected", "detect"),
            ("padded", "pad"),
            ("running", "run"),
            ("alignments", "align"),
            ("adjustment", "adjusted"),
            ("statement", "state"),
            ("adding", "add"),
            ("added", "adds"),
            ("hopping", "hop"),
        ] {
            assert_eq!(stem(a), stem(b), "{a} vs {b}");
        }
        for (a, b) in [
            ("string", "str"),
            ("class", "clas"),
            ("status", "statu"),
            ("border", "bord"),
            ("segment", "seg"),
            ("element", "ele"),
            ("comment", "com"),
        ] {
            assert_ne!(stem(a), stem(b), "{a} vs {b}");
        }
        assert_eq!(stem("Ünïcode"), "Ünïcode");
    }

    #[test]
    fn identifiers_are_split() {
        assert_eq!(terms("Table._render"), vec!["tabl", "render"]);
        assert_eq!(terms("border_style = get_style(self.border_style)"), vec!["border", "styl", "get", "styl", "self", "border", "styl"]);
        // A run of letters and digits is also a term whole (its pieces lose the digit).
        assert_eq!(terms("HTTPServer.getTopBorder2x i 42"), vec!["http", "server", "get", "top", "border", "gettopborder2x"]);
        assert_eq!(terms("def f7(): return g12(h1)"), vec!["def", "return", "f7", "g12", "h1"]);
        assert_eq!(terms("site-packages/rich/table.py"), vec!["sit", "packag", "rich", "tabl", "py"]);
    }

    #[test]
    fn question_terms_skip_stopwords_and_stem() {
        assert_eq!(question_terms("Why does --emoji not work for files?"), vec!["emoji", "fil"]);
        assert_eq!(question_terms("Which function draws the table borders?"), vec!["draw", "tabl", "border"]);
        assert_eq!(question_terms("What does Table._render do with show_edge?"), vec!["tabl", "render", "show", "edg"]);
        // Grammar and words true of every function in a slice are no terms.
        assert_eq!(question_terms("Which function is called when the program runs, and what does it use?"), Vec::<String>::new());
        assert!(question_terms("How does it work?").is_empty());
        // A name with a digit is kept whole, however short.
        assert_eq!(question_terms("What does f7 add to the h1 tag?"), vec!["f7", "add", "h1", "tag"]);
        // Characters quoted from the input bring the names code gives them.
        assert_eq!(question_terms("Why is **warning** bold?"), vec!["asterisk", "star", "warn", "strong", "bold"]);
        assert_eq!(question_terms("Where is '# Title' parsed?"), vec!["hash", "titl", "pars"]);
        // British spelling meets code's; a curated synonym adds code's word for it.
        assert_eq!(stem("colours"), stem("color"));
        assert_eq!(stem("initialised"), stem("initialized"));
        assert_eq!(question_terms("Why is it piped?"), vec!["isatty", "tty", "terminal", "pip"]);
        // A word the question repeats weighs more.
        let w = weighted_question_terms("How is the table in a file turned into the table drawn?");
        assert_eq!(w, vec![("tabl".to_string(), 2), ("fil".to_string(), 1), ("turn".to_string(), 1), ("drawn".to_string(), 1)]);
    }

    #[test]
    fn the_words_of_quoted_file_names_are_no_terms() {
        for w in ["build.log,", ".scratch.rs", "src/main.rs:2", "target/.", "/var/log/shop", "docs/notes.md", "(data.CSV)"] {
            assert!(is_file_name(w), "{w}");
        }
        for w in
            ["server.url", "c.name", "sqlparse.format('x')", "</div>", "https://example.org/docs", "fn.", "*.txt", "3.14", "read/write?"]
        {
            assert!(!is_file_name(w), "{w}");
        }
        let q = "rg lists src/main.rs but not build.log or target/, although they contain fn. Which files are skipped?";
        assert_eq!(question_terms(q), vec!["list", "although", "they", "contain", "fil", "skip"]);
        // A word of the prose counts as often as the prose says it.
        assert_eq!(weighted_question_terms("Why is the log in app/log.txt not written to the log?")[0], ("log".to_string(), 2));
        // A question of file names only keeps their words.
        assert_eq!(question_terms("What about data.csv?"), vec!["data", "csv"]);
    }

    fn doc<'a>(name: &'a str, code: &'a str) -> Document<'a> {
        Document { name, path: "app.py", code }
    }

    #[test]
    fn a_rare_term_in_one_body_beats_a_common_term_in_many_names() {
        let docs = vec![
            doc("Table.__init__", "def __init__(self):\n    self.rows = []"),
            doc("Table.add_row", "def add_row(self, row):\n    self.rows.append(row)"),
            doc("Table.add_column", "def add_column(self, c):\n    self.columns.append(c)"),
            doc("Table.get_row_style", "def get_row_style(self, i):\n    return self.style"),
            doc("Table.__rich_measure__", "def __rich_measure__(self):\n    return 1"),
            doc("Segment.line", "def line(cls):\n    return cls('\\n')"),
            doc("Box.get_top", "def get_top(self, widths):\n    # the top border of a box\n    return self.top * 3"),
        ];
        let s = scores(&docs, &question_terms("Which function draws the table borders?"));
        let order = rank(&s.iter().enumerate().map(|(i, &x)| (x, 1, i)).collect::<Vec<_>>());
        assert_eq!(order[0], 6, "{s:?}");
        assert!(s[0] > 0.0 && s[5] == 0.0, "{s:?}");
        // The common term still separates the Table methods from the rest.
        assert!(s[..5].iter().all(|&x| x > s[5]));
    }

    #[test]
    fn name_outweighs_body_and_repetition_saturates() {
        let docs = vec![
            doc("render_csv", "def render_csv(path):\n    return load(path)"),
            doc("main", "def main():\n    # csv\n    x = 1"),
            doc("loader", "def loader():\n    csv; csv; csv; csv; csv; csv; csv; csv; csv; csv; csv; csv"),
            doc("other", "def other():\n    pass"),
            doc("more", "def more():\n    pass"),
        ];
        let s = scores(&docs, &question_terms("How is the CSV file parsed?"));
        assert!(s[0] > s[1], "{s:?}");
        // Twelve occurrences are worth less than three times one.
        assert!(s[2] < 3.0 * s[1], "{s:?}");
        assert_eq!(s[3], 0.0);
    }

    #[test]
    fn ties_fall_back_to_depth_then_call_order() {
        let docs = vec![doc("a", "border"), doc("b", "border"), doc("c", "border"), doc("d", "nothing")];
        let s = scores(&docs, &question_terms("border"));
        assert!(s[0] == s[1] && s[1] == s[2] && s[0] > s[3]);
        let keys = vec![(s[0], 3, 0), (s[1], 2, 5), (s[2], 2, 1), (s[3], 1, 2)];
        assert_eq!(rank(&keys), vec![2, 1, 0, 3]);
        assert_eq!(scores(&docs, &[]), vec![0.0; 4]);
    }
}
