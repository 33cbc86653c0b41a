//! The `def`s and `lambda`s of a Python file, as far as mypyc's naming needs them: each
//! `def` with the classes and functions it is nested in and whether it is a generator or
//! coroutine (mypyc runs its body in a generator class), each `lambda` with the function whose
//! scope it is in. Found over logical lines by indentation; strings and comments are blanked
//! first, so a `yield` or `lambda` in them counts for nothing.

use crate::source::{block_end, header_end, indent, logical_starts, FileText};

/// A `def` (or `async def`) in a Python file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Def {
    /// The names of the classes and functions it is nested in, outermost first, then its own;
    /// each with whether it is a class.
    pub path: Vec<(String, bool)>,
    /// Its first line (its first decorator's), 1-based.
    pub first_line: u32,
    /// Its last line, 1-based.
    pub last_line: u32,
    /// Decorated with `@overload` / `@typing.overload` (a stub, not what runs).
    pub overload: bool,
    /// Its first decorator is `@<name>.setter`: a property's setter, which mypyc names
    /// `__mypyc_setter__<name>` (its getter keeps the name).
    pub setter: bool,
    /// An `async def`, or a `yield` in its own body (not in a function nested in it): mypyc
    /// compiles its body into a generator class's `__mypyc_generator_helper__`.
    pub generator: bool,
}

/// A `lambda` expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lambda {
    /// The index (into [`Scan::defs`]) of the function whose scope it is in: the innermost
    /// `def` whose body holds it, or that holds the `def` whose decorators or defaults hold it
    /// (those are evaluated in the enclosing scope); `None`: the module's (a class body is the
    /// module's scope too).
    pub scope: Option<usize>,
    /// The line of the `lambda` keyword, 1-based.
    pub first_line: u32,
    /// The line where its body ends (a `,` or closing bracket outside brackets of its own, or
    /// the end of the logical line), 1-based.
    pub last_line: u32,
}

/// What [`scan`] finds in a file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scan {
    pub defs: Vec<Def>,
    pub lambdas: Vec<Lambda>,
}

impl Def {
    /// The short name mypyc gives it (`func`, `Class.method`), if mypyc compiles it as a
    /// function of its own: a top-level function or a method of a top-level class.
    pub fn mypyc_short_name(&self) -> Option<String> {
        match self.path.as_slice() {
            [(f, false)] => Some(f.clone()),
            [(c, true), (m, false)] if self.setter => Some(format!("{c}.__mypyc_setter__{m}")),
            [(c, true), (m, false)] => Some(format!("{c}.{m}")),
            _ => None,
        }
    }

    /// Its Python qualified name (`Class.method`, `outer.<locals>.inner`).
    pub fn qualname(&self) -> String {
        qualname(&self.path)
    }
}

fn qualname(path: &[(String, bool)]) -> String {
    let mut out = String::new();
    for (i, (name, _)) in path.iter().enumerate() {
        if i > 0 {
            let outer_is_function = !path[i - 1].1;
            out.push_str(if outer_is_function { ".<locals>." } else { "." });
        }
        out.push_str(name);
    }
    out
}

/// The Python qualified name of a lambda in the scope of `scope` (`outer.<locals>.<lambda>`).
pub fn lambda_qualname(scope: Option<&Def>) -> String {
    match scope {
        Some(d) => format!("{}.<locals>.<lambda>", d.qualname()),
        None => "<lambda>".to_string(),
    }
}

/// The identifier after `def `/`async def `/`class ` at the start of `s` (trimmed), with
/// whether it is a class and whether it is an `async def`.
fn header_name(s: &str) -> Option<(String, bool, bool)> {
    let (rest, class, is_async) = if let Some(r) = s.strip_prefix("def ") {
        (r, false, false)
    } else if let Some(r) = s.strip_prefix("async def ") {
        (r, false, true)
    } else if let Some(r) = s.strip_prefix("class ") {
        (r, true, false)
    } else {
        return None;
    };
    let name: String = rest.trim_start().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
    (!name.is_empty()).then_some((name, class, is_async))
}

/// The lines with every string literal's characters (quotes included) and every comment
/// replaced by spaces, byte for byte, so that positions stay those of the original lines.
pub fn blank_strings_and_comments(lines: &[String]) -> Vec<Vec<u8>> {
    let mut out = Vec::with_capacity(lines.len());
    let mut triple: Option<u8> = None;
    for line in lines {
        let mut b = line.as_bytes().to_vec();
        let mut i = 0;
        while i < b.len() {
            if let Some(q) = triple {
                if b[i] == q && b.get(i + 1) == Some(&q) && b.get(i + 2) == Some(&q) {
                    triple = None;
                    b[i..i + 3].fill(b' ');
                    i += 3;
                    continue;
                }
                let esc = b[i] == b'\\';
                b[i] = b' ';
                if esc && i + 1 < b.len() {
                    b[i + 1] = b' ';
                    i += 1;
                }
                i += 1;
                continue;
            }
            match b[i] {
                b'#' => {
                    b[i..].fill(b' ');
                    break;
                }
                q @ (b'"' | b'\'') => {
                    if b.get(i + 1) == Some(&q) && b.get(i + 2) == Some(&q) {
                        triple = Some(q);
                        b[i..i + 3].fill(b' ');
                        i += 3;
                        continue;
                    }
                    b[i] = b' ';
                    i += 1;
                    while i < b.len() && b[i] != q {
                        if b[i] == b'\\' && i + 1 < b.len() {
                            b[i] = b' ';
                            i += 1;
                        }
                        b[i] = b' ';
                        i += 1;
                    }
                    if i < b.len() {
                        b[i] = b' ';
                    }
                }
                _ => {}
            }
            i += 1;
        }
        out.push(b);
    }
    out
}

fn is_word_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c >= 0x80
}

/// The columns where the keyword `word` stands in the blanked `line`.
fn keyword_at(line: &[u8], word: &str) -> Vec<usize> {
    let w = word.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i + w.len() <= line.len() {
        if &line[i..i + w.len()] == w && (i == 0 || !is_word_byte(line[i - 1])) && line.get(i + w.len()).is_none_or(|c| !is_word_byte(*c)) {
            out.push(i);
            i += w.len();
        } else {
            i += 1;
        }
    }
    out
}

/// The 0-based line where the lambda at (`line`, `col`) ends, not past `last` (the end of
/// its logical line): past its parameters' `:`, the first `,` or closing bracket outside
/// brackets opened after the keyword.
fn lambda_end(code: &[Vec<u8>], line: usize, col: usize, last: usize) -> usize {
    let mut depth = 0i32;
    let mut in_body = false;
    let mut prev_code_line = line;
    for (l, text) in code.iter().enumerate().take(last + 1).skip(line) {
        let start = if l == line { col + "lambda".len() } else { 0 };
        for &c in text.iter().skip(start) {
            match c {
                b'(' | b'[' | b'{' => depth += 1,
                b')' | b']' | b'}' if depth == 0 => return prev_code_line,
                b')' | b']' | b'}' => depth -= 1,
                b':' if depth == 0 && !in_body => in_body = true,
                b',' if depth == 0 && in_body => return l,
                _ => {}
            }
            if !c.is_ascii_whitespace() {
                prev_code_line = l;
            }
        }
    }
    last
}

/// Every `def` and `lambda` of a Python file (see the module's documentation). A `def`'s span
/// includes its decorators; a multi-line signature, a string or brackets spanning lines do
/// not count as lines of their own.
pub fn scan(lines: &[String]) -> Scan {
    let text = FileText { lines: lines.to_vec(), logical_start: logical_starts(lines) };
    let code = blank_strings_and_comments(lines);
    let mut out = Scan::default();
    // (indentation, name, is a class, index into `out.defs` of a def)
    let mut stack: Vec<(usize, String, bool, Option<usize>)> = Vec::new();
    // The first line of the decorators above the next header, whether one is `overload`, and
    // whether the first is `<name>.setter`.
    let mut decorated: Option<(usize, bool, bool)> = None;
    for (i, line) in text.lines.iter().enumerate() {
        let s = line.trim_start();
        if !text.logical_start[i] || s.is_empty() || s.starts_with('#') {
            continue;
        }
        let ind = indent(line);
        while stack.last().is_some_and(|(d, ..)| *d >= ind) {
            stack.pop();
        }
        let owner = stack.iter().rev().find_map(|(_, _, class, d)| if *class { None } else { *d });
        let end = header_end(&text, i);
        let mut lambdas = Vec::new();
        let mut yields = false;
        for (l, c) in code.iter().enumerate().take(end + 1).skip(i) {
            for col in keyword_at(c, "lambda") {
                lambdas.push(Lambda { scope: owner, first_line: l as u32 + 1, last_line: lambda_end(&code, l, col, end) as u32 + 1 });
            }
            yields |= !keyword_at(c, "yield").is_empty();
        }
        if let Some(d) = s.strip_prefix('@') {
            let name = d.split(['(', ' ']).next().unwrap_or("").trim();
            let overload = name == "overload" || name.ends_with(".overload");
            let (first, any, setter) = decorated.unwrap_or((i, false, name.ends_with(".setter")));
            decorated = Some((first, any || overload, setter));
            out.lambdas.extend(lambdas);
            continue;
        }
        let Some((name, class, is_async)) = header_name(s) else {
            decorated = None;
            if let Some(d) = owner {
                out.defs[d].generator |= yields;
            }
            out.lambdas.extend(lambdas);
            continue;
        };
        let (first, overload, setter) = decorated.take().unwrap_or((i, false, false));
        let mut index = None;
        if !class {
            let last = block_end(&text, i, ind, i + 1);
            let mut path: Vec<(String, bool)> = stack.iter().map(|(_, n, c, _)| (n.clone(), *c)).collect();
            path.push((name.clone(), false));
            let one_liner = last == end + 1;
            let d = out.defs.len();
            out.defs.push(Def {
                path,
                first_line: first as u32 + 1,
                last_line: last as u32,
                overload,
                setter,
                generator: is_async || (one_liner && yields),
            });
            index = Some(d);
            // A body on the header's line: its lambdas may be the def's own as well as its
            // defaults' (counted in both scopes: a scope with two is refused, never guessed).
            if one_liner {
                out.lambdas.extend(lambdas.iter().map(|l| Lambda { scope: Some(d), ..l.clone() }));
            }
        }
        out.lambdas.extend(lambdas);
        stack.push((ind, name, class, index));
    }
    out
}

/// Every `def` of a Python file ([`scan`]).
pub fn definitions(lines: &[String]) -> Vec<Def> {
    scan(lines).defs
}
