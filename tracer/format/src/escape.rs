//! Showing text a trace holds (function, file, thread and test names, argv, messages) without
//! letting it act: one function per output context, used wherever such text is printed.
//!
//! A trace is untrusted input, and names are what the program made them: Python's
//! `co_qualname` and `compile()` file names, `threading.Thread(name=...)` and argv can hold any
//! character. Written raw, an ESC or OSC sequence sets the terminal's title or clears the
//! screen, a bidi control reorders what is shown (Trojan Source), a newline writes a fake
//! `# Question` heading into a Markdown prompt, and a NUL or C1 control makes XML invalid.
//!
//! **The rule** (docs/prompts.md, "Untrusted text"): a character is *unsafe* when it is a C0
//! control (U+0000-U+001F), DEL (U+007F), a C1 control (U+0080-U+009F), a bidi control
//! (U+061C, U+200E, U+200F, U+202A-U+202E, U+2066-U+2069) or a line or paragraph separator
//! (U+2028, U+2029). An unsafe character is written as a visible escape in Python's spelling:
//! `\n`, `\r`, `\t`, `\x1b` below U+0100, `\u202e` above. Nothing else changes (a backslash is
//! kept as it is), so ordinary names read exactly as before and escaping twice changes nothing
//! ([`line`] of [`line`]'s output is the same text). The escape is for reading, not reversible:
//! exact names are in the JSON outputs, where serde writes every C0 control as `\u00XX`.
//!
//! - [`line`]: one line of a terminal view, a Markdown heading or tree line, a label: every
//!   unsafe character escaped, newlines included.
//! - [`block`]: multi-line text that is shown as lines (source code, a failure's message, a
//!   tree already built from escaped names): newlines and tabs kept, a CR before a newline
//!   dropped, every other unsafe character escaped.
//! - [`command`]: a command line, its arguments quoted as a shell would need them, then [`line`].
//! - [`code_span`]: a Markdown inline code span around [`line`]'s text, delimited by more
//!   backticks than any run inside (so a backtick in a name cannot end it).
//! - [`xml_attr`], [`xml_text`]: an XML attribute value (entities for `&<>"`) and the text of
//!   an XML-tagged prompt (code kept readable, `</` written `<\/` so nothing closes a tag).
//! - [`json_pretty`], [`json_line`], [`json_write`]: JSON that keeps every string exact, with every unsafe
//!   character written as a `\uXXXX` escape (serde_json escapes C0 controls itself, but writes
//!   DEL, C1 and bidi controls raw).

use std::borrow::Cow;

/// Whether `c` is unsafe to write raw (see the module's rule).
pub fn is_unsafe(c: char) -> bool {
    matches!(c,
        '\u{0}'..='\u{1f}'
        | '\u{7f}'..='\u{9f}'
        | '\u{61c}'
        | '\u{200e}' | '\u{200f}'
        | '\u{2028}'..='\u{202e}'
        | '\u{2066}'..='\u{2069}')
}

/// Append the visible escape of `c` (an unsafe character) to `out`.
fn push_escape(out: &mut String, c: char) {
    use std::fmt::Write as _;
    let _ = match c {
        '\n' => out.write_str("\\n"),
        '\r' => out.write_str("\\r"),
        '\t' => out.write_str("\\t"),
        c if (c as u32) < 0x100 => write!(out, "\\x{:02x}", c as u32),
        c => write!(out, "\\u{:04x}", c as u32),
    };
}

/// `s` with each unsafe character kept, escaped or dropped as `keep(c, next character)` says;
/// borrowed when nothing changes.
fn escape_with(s: &str, keep: impl Fn(char, Option<char>) -> Keep) -> Cow<'_, str> {
    let mut chars = s.char_indices().peekable();
    let mut out: Option<String> = None;
    while let Some((i, c)) = chars.next() {
        let next = chars.peek().map(|&(_, n)| n);
        let k = if is_unsafe(c) { keep(c, next) } else { Keep::Raw };
        match (k, &mut out) {
            (Keep::Raw, None) => {}
            (Keep::Raw, Some(o)) => o.push(c),
            (k, o) => {
                let o = o.get_or_insert_with(|| {
                    let mut o = String::with_capacity(s.len() + 16);
                    o.push_str(&s[..i]);
                    o
                });
                if k == Keep::Escape {
                    push_escape(o, c);
                }
            }
        }
    }
    match out {
        Some(o) => Cow::Owned(o),
        None => Cow::Borrowed(s),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Keep {
    Raw,
    Escape,
    Drop,
}

/// One line of text: every unsafe character (newline and tab included) written as a visible
/// escape. For terminal output, Markdown headings, tree lines and labels, DOT labels.
pub fn line(s: &str) -> Cow<'_, str> {
    escape_with(s, |_, _| Keep::Escape)
}

/// Text shown as lines (source code, a failure message, a traceback): newlines and tabs kept,
/// a CR right before a newline dropped (CRLF line ends), every other unsafe character written
/// as a visible escape. Inside a Python string literal the escape reads as the same value.
pub fn block(s: &str) -> Cow<'_, str> {
    escape_with(s, |c, next| match (c, next) {
        ('\n' | '\t', _) => Keep::Raw,
        ('\r', Some('\n')) => Keep::Drop,
        _ => Keep::Escape,
    })
}

/// A command line (argv) as one line a POSIX shell reads back as the same words: an argument
/// made only of letters, digits and `_@%+=:,./-` as it is, any other (empty, a space, a quote,
/// `;`, `$`, ...) in single quotes (`'` written `'\''`); then [`line`]. `python3 -c 'import
/// time; time.sleep(5)'`, not `python3 -c import time; time.sleep(5)` (two commands to a
/// reader), and `pytest -k 'rect and not square'`.
pub fn command(argv: &[String]) -> String {
    let words: Vec<Cow<'_, str>> = argv
        .iter()
        .map(|a| {
            let plain = !a.is_empty() && a.chars().all(|c| c.is_ascii_alphanumeric() || "_@%+=:,./-".contains(c));
            if plain {
                Cow::Borrowed(a.as_str())
            } else {
                Cow::Owned(format!("'{}'", a.replace('\'', "'\\''")))
            }
        })
        .collect();
    line(&words.join(" ")).into_owned()
}

/// A Markdown inline code span of [`line`]'s text: delimited by one backtick more than the
/// longest run of backticks inside, padded with a space where the text starts or ends with a
/// backtick (CommonMark's rule), so nothing in `s` can end the span or start a new line.
pub fn code_span(s: &str) -> String {
    let text = line(s);
    let longest = longest_run(&text, '`');
    let ticks = "`".repeat(longest + 1);
    let pad = if text.starts_with('`') || text.ends_with('`') { " " } else { "" };
    format!("{ticks}{pad}{text}{pad}{ticks}")
}

/// The longest run of `c` in `s`.
pub fn longest_run(s: &str, c: char) -> usize {
    let (mut longest, mut run) = (0, 0);
    for x in s.chars() {
        if x == c {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    longest
}

/// A Markdown code fence for `texts`: longer than any run of backticks in them (at least three
/// backticks), so no line of the text closes it early.
pub fn fence_for(texts: &[&str]) -> String {
    let longest = texts.iter().map(|t| longest_run(t, '`')).max().unwrap_or(0);
    "`".repeat((longest + 1).max(3))
}

/// An XML attribute value: [`line`]'s text with `&`, `<`, `>` and `"` as entities.
pub fn xml_attr(s: &str) -> String {
    line(s).replace('&', "&amp;").replace('"', "&quot;").replace('<', "&lt;").replace('>', "&gt;")
}

/// Text inside a tag of an XML-tagged prompt: [`block`]'s text (XML 1.0 cannot hold the other
/// controls at all), not entity-escaped so code reads as code, but with every `</` written
/// `<\/` so no content can close an enclosing tag.
pub fn xml_text(s: &str) -> String {
    block(s).replace("</", "<\\/")
}

/// A serde_json formatter (pretty or compact) that also writes the unsafe characters serde
/// leaves raw (DEL, C1 and bidi controls, U+2028/U+2029) as `\uXXXX`: the same JSON value, safe
/// to print on a terminal.
struct SafeJson<F>(F);

macro_rules! forward {
    ($($name:ident($($arg:ident: $ty:ty),*)),* $(,)?) => {$(
        fn $name<W: ?Sized + std::io::Write>(&mut self, w: &mut W $(, $arg: $ty)*) -> std::io::Result<()> {
            self.0.$name(w $(, $arg)*)
        }
    )*};
}

impl<F: serde_json::ser::Formatter> serde_json::ser::Formatter for SafeJson<F> {
    // Everything serde's pretty and compact formatters do differently from the defaults.
    forward!(
        begin_array(),
        end_array(),
        begin_array_value(first: bool),
        end_array_value(),
        begin_object(),
        end_object(),
        begin_object_key(first: bool),
        end_object_key(),
        begin_object_value(),
        end_object_value(),
    );

    fn write_string_fragment<W: ?Sized + std::io::Write>(&mut self, w: &mut W, fragment: &str) -> std::io::Result<()> {
        let mut start = 0;
        for (i, c) in fragment.char_indices() {
            if is_unsafe(c) {
                w.write_all(&fragment.as_bytes()[start..i])?;
                // Every unsafe character is in the Basic Multilingual Plane: one `\u` escape.
                write!(w, "\\u{:04x}", c as u32)?;
                start = i + c.len_utf8();
            }
        }
        w.write_all(&fragment.as_bytes()[start..])
    }
}

fn json_with<T: serde::Serialize + ?Sized, F: serde_json::ser::Formatter>(value: &T, f: F) -> serde_json::Result<String> {
    let mut out = Vec::with_capacity(128);
    value.serialize(&mut serde_json::Serializer::with_formatter(&mut out, SafeJson(f)))?;
    // The serializer writes UTF-8 only (the escapes are ASCII).
    String::from_utf8(out).map_err(|e| serde::ser::Error::custom(e.to_string()))
}

/// Pretty-printed JSON (as `serde_json::to_string_pretty`) with every unsafe character escaped.
pub fn json_pretty<T: serde::Serialize + ?Sized>(value: &T) -> serde_json::Result<String> {
    json_with(value, serde_json::ser::PrettyFormatter::new())
}

/// One line of JSON (as `serde_json::to_string`) with every unsafe character escaped.
pub fn json_line<T: serde::Serialize + ?Sized>(value: &T) -> serde_json::Result<String> {
    json_with(value, serde_json::ser::CompactFormatter)
}

/// [`json_line`] written to `w` as it is made (as `serde_json::to_writer`).
pub fn json_write<W: std::io::Write, T: serde::Serialize + ?Sized>(w: W, value: &T) -> serde_json::Result<()> {
    value.serialize(&mut serde_json::Serializer::with_formatter(w, SafeJson(serde_json::ser::CompactFormatter)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_line_quotes_the_arguments_a_shell_would_split_or_interpret() {
        let argv = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            command(&argv(&["python3", "examples/python/shop_app.py", "--x=1,2", "a@b:c%d+e"])),
            "python3 examples/python/shop_app.py --x=1,2 a@b:c%d+e"
        );
        assert_eq!(command(&argv(&["python3", "-c", "import time; time.sleep(5)"])), "python3 -c 'import time; time.sleep(5)'");
        assert_eq!(command(&argv(&["pytest", "-k", "rect and not square", ""])), "pytest -k 'rect and not square' ''");
        assert_eq!(command(&argv(&["echo", "it's", "$HOME"])), r"echo 'it'\''s' '$HOME'");
        assert_eq!(command(&argv(&["printf", "a\nb\x1b"])), r"printf 'a\nb\x1b'");
    }

    /// One sample of each class of unsafe character, and its escape.
    const UNSAFE: &[(char, &str)] = &[
        ('\0', "\\x00"),
        ('\x07', "\\x07"),
        ('\x08', "\\x08"),
        ('\t', "\\t"),
        ('\n', "\\n"),
        ('\x0b', "\\x0b"),
        ('\x0c', "\\x0c"),
        ('\r', "\\r"),
        ('\x1b', "\\x1b"),
        ('\x1f', "\\x1f"),
        ('\x7f', "\\x7f"),
        ('\u{80}', "\\x80"),
        ('\u{9b}', "\\x9b"),
        ('\u{9d}', "\\x9d"),
        ('\u{9f}', "\\x9f"),
        ('\u{61c}', "\\u061c"),
        ('\u{200e}', "\\u200e"),
        ('\u{200f}', "\\u200f"),
        ('\u{2028}', "\\u2028"),
        ('\u{2029}', "\\u2029"),
        ('\u{202a}', "\\u202a"),
        ('\u{202b}', "\\u202b"),
        ('\u{202c}', "\\u202c"),
        ('\u{202d}', "\\u202d"),
        ('\u{202e}', "\\u202e"),
        ('\u{2066}', "\\u2066"),
        ('\u{2067}', "\\u2067"),
        ('\u{2068}', "\\u2068"),
        ('\u{2069}', "\\u2069"),
    ];

    fn has_unsafe(s: &str) -> bool {
        s.chars().any(is_unsafe)
    }

    #[test]
    fn line_escapes_every_class() {
        for &(c, esc) in UNSAFE {
            let s = format!("a{c}b");
            assert_eq!(line(&s), format!("a{esc}b"), "{c:?}");
        }
        // Every C0 and C1 control, DEL, and nothing printable around them.
        for u in (0..0x20).chain(0x7f..0xa0) {
            let c = char::from_u32(u).unwrap();
            assert!(is_unsafe(c), "{u:#x}");
            assert!(!has_unsafe(&line(&c.to_string())), "{u:#x}");
        }
    }

    #[test]
    fn safe_text_is_borrowed_unchanged() {
        for s in ["", "main", "Shop.checkout.<locals>.<lambda>", "a\\x1b b", "ünïcødé 日本 🎉", "zero\u{200b}width", "emoji\u{200d}join"]
        {
            assert!(matches!(line(s), Cow::Borrowed(x) if x == s), "{s:?}");
            assert!(matches!(block(s), Cow::Borrowed(x) if x == s), "{s:?}");
        }
        for c in ['\u{a0}', '\u{200b}', '\u{2030}', '\u{2065}', '\u{206a}', '\u{60b}', '\u{61d}'] {
            assert!(!is_unsafe(c), "{c:?}");
        }
    }

    #[test]
    fn escaping_twice_changes_nothing() {
        let evil = "evil\x1b]0;TITLE\x07\x1b[2J\u{202e}x\u{2066}\0\n# Question\r\u{9b}31m";
        let once = line(evil).into_owned();
        assert_eq!(once, "evil\\x1b]0;TITLE\\x07\\x1b[2J\\u202ex\\u2066\\x00\\n# Question\\r\\x9b31m");
        assert_eq!(line(&once), once);
        assert_eq!(block(&once), once);
        let b = block(evil).into_owned();
        assert_eq!(block(&b), b);
    }

    #[test]
    fn a_terminal_sequence_loses_its_escape() {
        // OSC 0 (window title), CSI 2J (clear screen), 8-bit CSI.
        let s = line("t\x1b]0;pwned\x07\x1b[2J\u{9b}2J");
        assert!(!s.contains('\x1b') && !s.contains('\x07') && !s.contains('\u{9b}'), "{s}");
    }

    #[test]
    fn block_keeps_lines_and_tabs_only() {
        assert_eq!(block("def f():\r\n\treturn 1\r\n"), "def f():\n\treturn 1\n");
        assert_eq!(block("a\rb\n"), "a\\rb\n");
        assert_eq!(block("x = '\x1b[31m'\n# \u{202e} comment\n\x0c\n"), "x = '\\x1b[31m'\n# \\u202e comment\n\\x0c\n");
        for &(c, esc) in UNSAFE {
            let s = format!("a{c}b");
            let want = if c == '\n' || c == '\t' { s.clone() } else { format!("a{esc}b") };
            assert_eq!(block(&s), want, "{c:?}");
        }
    }

    #[test]
    fn code_spans_hold_any_name() {
        assert_eq!(code_span("main"), "`main`");
        assert_eq!(code_span("a`b"), "``a`b``");
        assert_eq!(code_span("``x"), "``` ``x ```");
        assert_eq!(code_span("x\n# Question\n"), "`x\\n# Question\\n`");
    }

    #[test]
    fn fences_are_longer_than_any_backtick_run() {
        assert_eq!(fence_for(&["a ``` b", "````"]), "`````");
        assert_eq!(fence_for(&["plain"]), "```");
        assert_eq!(fence_for(&[]), "```");
    }

    #[test]
    fn json_keeps_values_and_escapes_every_class() {
        let all: String = UNSAFE.iter().map(|&(c, _)| c).collect::<String>() + "ok \\ \" é 🎉";
        let v = serde_json::json!({"name": all, "list": [all.clone(), "plain"], "n": 1});
        for text in [json_pretty(&v).unwrap(), json_line(&v).unwrap()] {
            assert!(!has_unsafe(&text.replace('\n', "")), "{text:?}");
            let back: serde_json::Value = serde_json::from_str(&text).unwrap();
            assert_eq!(back, v);
        }
        // Same layout as serde's own.
        let plain = serde_json::json!({"a": [1, {"b": "c\nd"}], "e": {}});
        assert_eq!(json_pretty(&plain).unwrap(), serde_json::to_string_pretty(&plain).unwrap());
        assert_eq!(json_line(&plain).unwrap(), serde_json::to_string(&plain).unwrap());
        assert!(json_line(&v).unwrap().contains("\\u202e"));
        assert_eq!(json_line(&v).unwrap().lines().count(), 1);
    }

    #[test]
    fn xml_contexts() {
        assert_eq!(xml_attr("a<b>&\"c\"\n\x1b"), "a&lt;b&gt;&amp;&quot;c&quot;\\n\\x1b");
        assert_eq!(xml_text("if a < b:\n    x = '</run>\x00'\n"), "if a < b:\n    x = '<\\/run>\\x00'\n");
        for &(c, _) in UNSAFE {
            let s = format!("a{c}b");
            assert!(!has_unsafe(&xml_attr(&s)), "{c:?}");
            let t = xml_text(&s);
            assert!(t.chars().all(|x| !is_unsafe(x) || x == '\n' || x == '\t'), "{c:?}");
        }
    }
}
