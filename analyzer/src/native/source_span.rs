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

/// The line of the Rust function `name` whose body holds line `body` (1-based): the nearest
/// line at or above it, at most [`FN_SEARCH_LINES`] up, that declares `fn name` (followed by
/// `(` or `<`) and whose braces close at or below `body`. For an inlined function that
/// line-tables-only DWARF does not declare: its line table gives only the lines of its code.
pub fn fn_line_above(lines: &[&str], body: u32, name: &str) -> Option<u32> {
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') || body == 0 {
        return None;
    }
    let n = lines.len() as u32;
    let declares = |line: &str| {
        let mut rest = line;
        while let Some(k) = rest.find("fn ") {
            let before_ok = k == 0 || !rest.as_bytes()[k - 1].is_ascii_alphanumeric() && rest.as_bytes()[k - 1] != b'_';
            let after = rest[k + 3..].trim_start();
            if before_ok && after.strip_prefix(name).is_some_and(|t| t.trim_start().starts_with(['(', '<'])) {
                return true;
            }
            rest = &rest[k + 3..];
        }
        false
    };
    let top = body.saturating_sub(FN_SEARCH_LINES).max(1);
    (top..=body.min(n)).rev().find(|&l| declares(lines[(l - 1) as usize]) && refine(lines, l, l, true).1 >= body)
}

/// What a Rust method's `fn` line at `fn_line` (1-based) is inside, by the source text: the
/// `impl` block or `trait` whose body holds it, as the path a demangled name gives it
/// (`impl<T, A: Allocator> RawVec<T, A>` -> `RawVec<T, A>`; `unsafe impl<T> SliceIndex<[T]>
/// for ops::RangeFrom<usize>` -> `<ops::RangeFrom<usize> as SliceIndex<[T]>>`; `pub trait
/// Iterator` -> `Iterator`), types as the source writes them. `None` for a free function (its
/// `fn` at the start of a line, or inside anything else: a `mod` block, another function).
/// The block is the first line above with less indentation than the `fn` line, a `where`
/// clause's lines and a lone `{` passed over.
pub fn impl_above(lines: &[&str], fn_line: u32) -> Option<String> {
    let indent = |l: &str| l.len() - l.trim_start().len();
    let fn_text = lines.get((fn_line as usize).checked_sub(1)?)?;
    let n = indent(fn_text);
    if n == 0 {
        return None;
    }
    let mut l = fn_line as usize - 1;
    let mut seen = 0;
    while l > 0 && seen < FN_SEARCH_LINES * 20 {
        l -= 1;
        seen += 1;
        let line = lines[l];
        let t = line.trim();
        if t.is_empty() || indent(line) >= n || t.starts_with("//") || t.starts_with("#[") {
            continue;
        }
        if t == "{" || t.starts_with("where") {
            continue;
        }
        // The header, up to its `{` or `where` (over a few lines at most).
        let mut header = String::new();
        for h in lines[l..].iter().take(SIGNATURE_LINES as usize) {
            let h = h.trim();
            let cut = [h.find('{'), h.find(" where"), h.strip_prefix("where").map(|_| 0)].into_iter().flatten().min();
            header.push(' ');
            header.push_str(&h[..cut.unwrap_or(h.len())]);
            if cut.is_some() {
                break;
            }
        }
        return block_path(header.trim());
    }
    None
}

/// [`impl_above`]'s path of a block header (`impl<T> Foo<T>`, `unsafe impl<T> Tr for Foo<T>`,
/// `pub trait Tr`).
fn block_path(header: &str) -> Option<String> {
    let words = |h: &str| h.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut h = header.trim();
    for vis in ["pub(crate) ", "pub(super) ", "pub(self) ", "pub ", "default ", "unsafe "] {
        h = h.strip_prefix(vis).unwrap_or(h).trim_start();
    }
    if let Some(rest) = h.strip_prefix("trait ") {
        let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        return (!name.is_empty()).then_some(name);
    }
    let rest = h.strip_prefix("impl")?;
    let mut rest = rest.trim_start();
    if !h["impl".len()..].starts_with(['<', ' ']) {
        return None;
    }
    if rest.starts_with('<') {
        // Skip the impl's generic parameters.
        let mut depth = 0i32;
        let mut end = None;
        for (k, c) in rest.char_indices() {
            match c {
                '<' => depth += 1,
                '>' if k > 0 && rest.as_bytes()[k - 1] == b'-' => {}
                '>' => {
                    depth -= 1;
                    if depth == 0 {
                        end = Some(k);
                        break;
                    }
                }
                _ => {}
            }
        }
        rest = rest[end? + 1..].trim_start();
    }
    let rest = words(rest);
    if rest.is_empty() || rest.len() > 200 {
        return None;
    }
    // ` for ` outside brackets splits a trait impl.
    let b = rest.as_bytes();
    let mut depth = 0i32;
    for k in 0..b.len() {
        match b[k] {
            b'<' | b'(' | b'[' => depth += 1,
            b'>' if k > 0 && b[k - 1] == b'-' => {}
            b'>' | b')' | b']' => depth -= 1,
            b' ' if depth == 0 && rest[k..].starts_with(" for ") => {
                let (tr, ty) = (rest[..k].trim(), rest[k + 5..].trim());
                return Some(format!("<{ty} as {}>", tr.trim_start_matches('!')));
            }
            _ => {}
        }
    }
    Some(rest)
}

/// How far above the first line of its code [`fn_line_above`] looks for a function's `fn`.
const FN_SEARCH_LINES: u32 = 200;

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

    /// Line-tables-only DWARF gives an inlined function only the lines of its code: its `fn`
    /// line is found above them, the nearest one of that name whose braces hold them, and its
    /// `impl` block or trait names it.
    #[test]
    fn an_undeclared_method_is_found_by_its_fn_line_and_named_by_its_impl() {
        let src = lines(
            "pub struct W<T>(T);\n\
             impl<T, A: Copy> W<T> {\n\
             \x20   #[inline]\n\
             \x20   pub fn size(&self) -> u64 {\n\
             \x20       1\n\
             \x20   }\n\
             }\n\
             unsafe impl<T> SliceIndex<[T]>\n\
             \x20   for ops::RangeFrom<usize>\n\
             where\n\
             \x20   T: Copy,\n\
             {\n\
             \x20   fn size(\n\
             \x20       &self,\n\
             \x20   ) -> u64 {\n\
             \x20       2\n\
             \x20   }\n\
             }\n\
             pub trait Tr {\n\
             \x20   fn size(&self) -> u64 { 3 }\n\
             }\n\
             fn size() -> u64 {\n\
             \x20   4\n\
             }\n",
        );
        assert_eq!(fn_line_above(&src, 5, "size"), Some(4));
        assert_eq!(fn_line_above(&src, 16, "size"), Some(13), "a signature over several lines");
        assert_eq!(fn_line_above(&src, 20, "size"), Some(20), "on its own line");
        assert_eq!(fn_line_above(&src, 23, "size"), Some(22));
        assert_eq!(fn_line_above(&src, 7, "size"), None, "outside every `fn size`");
        assert_eq!(fn_line_above(&src, 5, "sizes"), None);
        assert_eq!(impl_above(&src, 4).as_deref(), Some("W<T>"));
        assert_eq!(impl_above(&src, 13).as_deref(), Some("<ops::RangeFrom<usize> as SliceIndex<[T]>>"));
        assert_eq!(impl_above(&src, 20).as_deref(), Some("Tr"));
        assert_eq!(impl_above(&src, 22), None, "a free function");
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
