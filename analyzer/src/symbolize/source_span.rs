//! Widening a function's DWARF line span to its exact source text.
//!
//! DWARF gives `DW_AT_decl_line` (the line with the function's name) and, from the line
//! table, the largest line of the function's code (normally the closing brace). Two cases
//! need the source itself:
//! - the declaration starts on earlier lines (`static int` or `template <class T>` on the
//!   line before the name): the span is extended upwards over the lines of the same
//!   declaration (non-blank lines that are not comments or preprocessor lines and do not end
//!   a previous statement or block: `;`, `{`, `}`, `:`), at most 4 lines;
//! - the last line of code is not the closing brace (a function that never returns): the
//!   span is extended downwards until the braces opened since the first line are closed.
//!
//! Braces inside comments, string and character literals are ignored.

/// Refine `(first, last)` (1-based, inclusive) using the file's lines. Returns the input
/// unchanged when the lines do not look like a braced function body.
pub fn refine(lines: &[&str], decl_line: u32, dwarf_last: u32) -> (u32, u32) {
    let n = lines.len() as u32;
    if decl_line == 0 || decl_line > n {
        return (decl_line, dwarf_last);
    }
    let mut first = decl_line;
    while first > 1 && decl_line - first < 4 && continues_declaration(lines[(first - 2) as usize]) {
        first -= 1;
    }
    let mut last = dwarf_last.clamp(decl_line, n);
    // Scan from the declaration line: if the braces are not balanced at `last`, go on to
    // the line that balances them.
    let mut lexer = Lexer::default();
    let mut opened = false;
    for l in decl_line..=n {
        let depth = lexer.line(lines[(l - 1) as usize]);
        opened |= lexer.seen_open;
        if l >= last {
            if opened && depth <= 0 {
                last = l;
                break;
            }
            if !opened && l > last + 2 {
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
                _ => {}
            }
            i += 1;
        }
        self.depth
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
        assert_eq!(refine(&src, 4, 7), (3, 7));
        let src = lines("// doc\ntemplate <typename T>\nT id(T v) {\n    return v;\n}\n");
        assert_eq!(refine(&src, 3, 5), (2, 5));
    }

    #[test]
    fn noreturn_function_extends_to_its_closing_brace() {
        let src = lines("void die(const char *m)\n{\n    puts(\"}\"); /* { */\n    exit(1);\n}\nint g;\n");
        assert_eq!(refine(&src, 1, 4), (1, 5));
    }

    #[test]
    fn balanced_span_is_kept_and_initializer_braces_are_fine() {
        let src = lines("Foo::Foo() : a{1}, b{2}\n{\n    go();\n}\n");
        assert_eq!(refine(&src, 1, 4), (1, 4));
        let src = lines("    auto f = [](int x) { return x + 1; };\n");
        assert_eq!(refine(&src, 1, 1), (1, 1));
    }

    #[test]
    fn out_of_range_is_unchanged() {
        let src = lines("int a;\n");
        assert_eq!(refine(&src, 10, 12), (10, 12));
    }
}
