//! Widening a function's DWARF line span to its exact source text.
//!
//! DWARF gives `DW_AT_decl_line` (the line with the function's name) and, from the line
//! table, the largest line of the function's code (normally the closing brace). Two cases
//! need the source itself:
//! - the declaration starts on earlier lines (`static int` or `template <class T>` on the
//!   line before the name): the span is extended upwards over the lines of the same
//!   declaration (non-blank lines that are not comments or preprocessor lines and do not end
//!   a previous statement or block: `;`, `{`, `}`, `:`), at most 4 lines. In Rust, whose
//!   `fn` line is the declaration's first, the span is extended over the one-line attributes
//!   right above it (`#[inline]`, `#[cfg(unix)]`), as Python's decorators are part of a
//!   Python function, at most 8 lines; doc comments (`///`) are not taken: they are
//!   documentation, often long (clap's run to 40 lines with examples), and cost tokens;
//! - the last line of code is not the closing brace (a function that never returns), or
//!   DWARF knows only the first line (an inlined function's call site gives its declaration
//!   line, not its end): the span is extended downwards until the braces opened since the
//!   first line are closed. The body's `{` may come many lines after the name (a signature
//!   over several lines, a `where` clause); a `;` outside parentheses before any `{` means no
//!   body (a declaration, a closure without braces).
//!
//! Braces inside comments, string and character literals are ignored; a Rust lifetime
//! (`'a`) is not a character literal.

/// Refine `(first, last)` (1-based, inclusive) using the file's lines. Returns the input
/// unchanged when the lines do not look like a braced function body.
pub fn refine(lines: &[&str], decl_line: u32, dwarf_last: u32, rust: bool) -> (u32, u32) {
    let n = lines.len() as u32;
    if decl_line == 0 || decl_line > n {
        return (decl_line, dwarf_last);
    }
    let mut first = decl_line;
    if rust {
        while first > 1 && decl_line - first < 8 && is_rust_attribute(lines[(first - 2) as usize]) {
            first -= 1;
        }
    } else {
        while first > 1 && decl_line - first < 4 && continues_declaration(lines[(first - 2) as usize]) {
            first -= 1;
        }
    }
    let mut last = dwarf_last.clamp(decl_line, n);
    // Scan from the declaration line: if the braces are not balanced at `last`, go on to
    // the line that balances them.
    let mut lexer = Lexer::default();
    let mut opened = false;
    for l in decl_line..=n {
        let depth = lexer.line(lines[(l - 1) as usize]);
        if depth < 0 && l > last {
            // Past DWARF's last line, a brace closed that the function did not open: the
            // scan left the enclosing block (a closure or lambda without braces of its own).
            return (first, dwarf_last);
        }
        opened |= lexer.seen_open;
        if l >= last {
            if opened && depth <= 0 {
                last = l;
                break;
            }
            if !opened && (lexer.statement_ended || l > last + SIGNATURE_LINES) {
                // No body seen at all (not a braced function): keep DWARF's answer.
                return (first, dwarf_last);
            }
            if l - last > 2000 {
                return (first, dwarf_last);
            }
        }
    }
    (first, last)
}

/// At most this many lines between a function's name and its body's `{` (a long signature,
/// one parameter per line, and a `where` clause).
const SIGNATURE_LINES: u32 = 40;

/// A one-line Rust outer attribute (`#[inline]`).
fn is_rust_attribute(line: &str) -> bool {
    let t = line.trim();
    t.starts_with("#[") && t.ends_with(']')
}

fn continues_declaration(line: &str) -> bool {
    let t = line.trim();
    if t.is_empty() || t.starts_with('#') || t.starts_with("//") || t.starts_with("/*") || t.starts_with('*') {
        return false;
    }
    !(t.ends_with(';') || t.ends_with('{') || t.ends_with('}') || t.ends_with(':') || t.ends_with("*/") || t.ends_with('\\'))
}

/// A minimal C/C++ lexer that tracks brace depth across lines.
#[derive(Default)]
struct Lexer {
    depth: i64,
    in_block_comment: bool,
    /// Whether an opening brace was seen on the last line.
    seen_open: bool,
    /// Parentheses open.
    parens: i64,
    /// Whether a `;` outside parentheses and braces was seen (a statement or declaration ended).
    statement_ended: bool,
}

impl Lexer {
    fn line(&mut self, line: &str) -> i64 {
        self.seen_open = false;
        let b = line.as_bytes();
        let mut i = 0;
        while i < b.len() {
            if self.in_block_comment {
                if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                    self.in_block_comment = false;
                    i += 2;
                } else {
                    i += 1;
                }
                continue;
            }
            match b[i] {
                b'/' if b.get(i + 1) == Some(&b'/') => break,
                b'/' if b.get(i + 1) == Some(&b'*') => {
                    self.in_block_comment = true;
                    i += 2;
                    continue;
                }
                b'\'' if is_lifetime(line, i) => {}
                q @ (b'"' | b'\'') => {
                    i += 1;
                    while i < b.len() && b[i] != q {
                        if b[i] == b'\\' {
                            i += 1;
                        }
                        i += 1;
                    }
                }
                b'{' => {
                    self.depth += 1;
                    self.seen_open = true;
                }
                b'}' => self.depth -= 1,
                b'(' => self.parens += 1,
                b')' => self.parens -= 1,
                b';' if self.parens <= 0 && self.depth <= 0 => self.statement_ended = true,
                _ => {}
            }
            i += 1;
        }
        self.depth
    }
}

/// Whether the `'` at byte `i` starts a Rust lifetime or label (`'a`, `'static`, `'outer:`)
/// rather than a character literal (`'a'`, `'\n'`, `'é'`).
fn is_lifetime(line: &str, i: usize) -> bool {
    let mut rest = line[i + 1..].chars();
    match (rest.next(), rest.next()) {
        (Some('\\'), _) => false,
        (Some(c), Some('\'')) if c != '\'' => false,
        (Some(c), _) => c.is_alphabetic() || c == '_',
        (None, _) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(s: &str) -> Vec<&str> {
        s.lines().collect()
    }

    #[test]
    fn return_type_and_template_lines_are_included() {
        let src = lines("int x;\n\nstatic int\nfib(int n)\n{\n    return n;\n}\n");
        assert_eq!(refine(&src, 4, 7, false), (3, 7));
        let src = lines("// doc\ntemplate <typename T>\nT id(T v) {\n    return v;\n}\n");
        assert_eq!(refine(&src, 3, 5, false), (2, 5));
    }

    #[test]
    fn noreturn_function_extends_to_its_closing_brace() {
        let src = lines("void die(const char *m)\n{\n    puts(\"}\"); /* { */\n    exit(1);\n}\nint g;\n");
        assert_eq!(refine(&src, 1, 4, false), (1, 5));
    }

    #[test]
    fn balanced_span_is_kept_and_initializer_braces_are_fine() {
        let src = lines("Foo::Foo() : a{1}, b{2}\n{\n    go();\n}\n");
        assert_eq!(refine(&src, 1, 4, false), (1, 4));
        let src = lines("    auto f = [](int x) { return x + 1; };\n");
        assert_eq!(refine(&src, 1, 1, false), (1, 1));
    }

    #[test]
    fn rust_attributes_and_lifetimes() {
        let src = lines(
            "use x;\n\n/// Parses a line.\n#[inline]\npub fn parse<'a>(s: &'a str) -> &'a str {\n    let c = '{';\n    s\n}\nfn g() {}\n",
        );
        // Attributes are part of the function, doc comments not; `'a` is no quote, `'{'` is.
        assert_eq!(refine(&src, 5, 7, true), (4, 8));
        // C rules do not take `#[...]` lines.
        assert_eq!(refine(&src, 5, 8, false).0, 5);
        let src = lines("fn f() {\n    let v = xs.iter().map(|x| {\n        x + 1\n    });\n}\n");
        // A closure: its own lines only.
        assert_eq!(refine(&src, 2, 3, true), (2, 4));
        // A closure without braces, last in its function: not down to the next function.
        let src = lines("    fn find(&self) -> Option<usize> {\n        (0..9)\n            .find(|&x| x > 2)\n    }\n\n    fn next(&self) -> u8 {\n        1\n    }\n");
        assert_eq!(refine(&src, 3, 3, true), (3, 3));
    }

    /// An inlined function's span starts as its declaration line alone: it runs to the
    /// closing brace over a signature of several lines and a `where` clause.
    #[test]
    fn a_declaration_line_alone_runs_to_the_closing_brace() {
        let src = lines(
            "impl Ignore {\n    fn matched_ignore<'a>(\n        &'a self,\n        path: &Path,\n        is_dir: bool,\n    ) -> Match<'a> {\n        let m = (1, 2);\n        m.0\n    }\n}\n",
        );
        assert_eq!(refine(&src, 2, 2, true), (2, 9));
        let src = lines("fn sort<I>(\n    &self,\n    hs: I,\n) -> Vec<u8>\nwhere\n    I: Iterator,\n{\n    hs.collect()\n}\n");
        assert_eq!(refine(&src, 1, 1, true), (1, 9));
        // A declaration without a body stays as DWARF says.
        let src = lines("    fn name(&self) -> &str;\n    fn doc(&self) -> &str {\n        \"\"\n    }\n");
        assert_eq!(refine(&src, 1, 1, true), (1, 1));
    }

    #[test]
    fn out_of_range_is_unchanged() {
        let src = lines("int a;\n");
        assert_eq!(refine(&src, 10, 12, false), (10, 12));
    }
}
