//! Module values: the module-level constants and simple assignments that a shown Python
//! function reads. `BUNDLE_DISCOUNT_PERCENT = 10` sits outside every function, so without it a
//! model cannot say what the discount is.
//!
//! Rule: a *module value* is a statement at column 0 of a Python file that assigns one name
//! (`NAME = ...`, `NAME: T = ...`; not augmented assignments, not tuple targets, not dunder
//! names like `__all__`). A function *reads* it when the name occurs as an identifier in the
//! function's code (not after a `.`, not inside a string or comment) and the function's file
//! defines it. A statement longer than [`MAX_LINES`] lines is cut there, marked. Each value is
//! shown once per prompt, with the first function that reads it.

use crate::source::FileText;
use std::collections::{HashMap, HashSet};

/// Longest value shown whole, in lines.
pub const MAX_LINES: usize = 12;

/// Marker line ending a value cut at [`MAX_LINES`].
pub const CUT_MARK: &str = "...  # value cut";

/// One module-level assignment.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ModuleValue {
    pub name: String,
    /// 1-based, inclusive.
    pub first_line: u32,
    pub last_line: u32,
    /// The statement's text (cut at [`MAX_LINES`], marked).
    pub text: String,
}

/// The assigned name of a column-0 statement, if it assigns exactly one plain name.
fn assigned_name(line: &str) -> Option<&str> {
    let b = line.as_bytes();
    if b.is_empty() || !(b[0].is_ascii_alphabetic() || b[0] == b'_') {
        return None;
    }
    let end = b.iter().position(|c| !(c.is_ascii_alphanumeric() || *c == b'_')).unwrap_or(b.len());
    let name = &line[..end];
    if name.starts_with("__") && name.ends_with("__") {
        return None;
    }
    if matches!(
        name,
        "def"
            | "class"
            | "import"
            | "from"
            | "if"
            | "else"
            | "elif"
            | "for"
            | "while"
            | "try"
            | "except"
            | "finally"
            | "with"
            | "async"
            | "return"
            | "raise"
            | "assert"
            | "del"
            | "global"
            | "pass"
    ) {
        return None;
    }
    let rest = line[end..].trim_start();
    if let Some(r) = rest.strip_prefix('=') {
        return (!r.starts_with('=')).then_some(name);
    }
    // Annotated: `NAME: T = value` (an annotation alone assigns nothing).
    let r = rest.strip_prefix(':')?;
    let eq = r.find('=')?;
    (!r[eq + 1..].starts_with('=')).then_some(name)
}

/// Every module value of a file, by name (a name assigned twice: the last assignment).
pub fn module_values(ft: &FileText) -> HashMap<String, ModuleValue> {
    let mut out = HashMap::new();
    let n = ft.lines.len();
    let mut i = 0;
    while i < n {
        if !ft.logical_start.get(i).copied().unwrap_or(false) {
            i += 1;
            continue;
        }
        let Some(name) = assigned_name(&ft.lines[i]) else {
            i += 1;
            continue;
        };
        let mut end = i + 1;
        while end < n && !ft.logical_start.get(end).copied().unwrap_or(true) {
            end += 1;
        }
        let mut lines: Vec<&str> = ft.lines[i..end].iter().map(String::as_str).collect();
        if lines.len() > MAX_LINES {
            lines.truncate(MAX_LINES);
            lines.push(CUT_MARK);
        }
        out.insert(
            name.to_string(),
            ModuleValue { name: name.to_string(), first_line: i as u32 + 1, last_line: end as u32, text: lines.join("\n") },
        );
        i = end;
    }
    out
}

/// The identifiers a piece of Python code reads by plain name: not attributes (after `.`),
/// not inside strings or comments. Keyword arguments (`f(x=1)`) are included; a value is
/// only matched against names its own module defines, so that costs little.
pub fn names_read(code: &str) -> HashSet<&str> {
    let b = code.as_bytes();
    let mut out = HashSet::new();
    let mut i = 0;
    let mut prev_dot = false;
    while i < b.len() {
        let c = b[i];
        if c == b'#' {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        if c == b'"' || c == b'\'' {
            let triple = b.get(i + 1) == Some(&c) && b.get(i + 2) == Some(&c);
            i += if triple { 3 } else { 1 };
            while i < b.len() {
                if b[i] == b'\\' {
                    i += 2;
                    continue;
                }
                if triple {
                    if b[i] == c && b.get(i + 1) == Some(&c) && b.get(i + 2) == Some(&c) {
                        i += 3;
                        break;
                    }
                } else if b[i] == c || b[i] == b'\n' {
                    i += 1;
                    break;
                }
                i += 1;
            }
            prev_dot = false;
            continue;
        }
        if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            // A string prefix (f"...", rb'...') is not a name.
            let is_prefix = matches!(b.get(i), Some(b'"' | b'\'')) && i - start <= 2;
            if !prev_dot && !is_prefix {
                out.insert(&code[start..i]);
            }
            prev_dot = false;
            continue;
        }
        if !c.is_ascii_whitespace() {
            prev_dot = c == b'.';
        }
        i += 1;
    }
    out
}

/// The values of `values` (a function's) that `code` (its condensed code) still reads.
pub fn still_read(code: &str, values: &mut Vec<ModuleValue>) {
    let names = names_read(code);
    values.retain(|v| names.contains(&v.name.as_str()));
}

/// The module values of `values` that `code` reads, in file order.
pub fn read_by<'a>(code: &str, values: &'a HashMap<String, ModuleValue>) -> Vec<&'a ModuleValue> {
    // A module without values: no name can read one (and its code need not be scanned).
    if values.is_empty() {
        return Vec::new();
    }
    let names = names_read(code);
    let mut v: Vec<&ModuleValue> = names.iter().filter_map(|n| values.get(*n)).collect();
    v.sort_by_key(|m| m.first_line);
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::logical_starts;

    fn ft(src: &str) -> FileText {
        let lines: Vec<String> = src.lines().map(str::to_string).collect();
        let logical_start = logical_starts(&lines);
        FileText { lines, logical_start }
    }

    const SRC: &str = r#""""Prices."""
import os
BUNDLE_DISCOUNT_PERCENT = 10
RATES: dict[str, int] = {
    "a": 1,
    "b": 2,
}
__all__ = ["bundle_price"]
x == 3
count += 1
a, b = 1, 2
LABEL: str


def bundle_price(bundle):
    total = sum(p.BUNDLE_DISCOUNT_PERCENT for p in bundle)  # RATES in a comment
    s = "RATES in a string"
    return total - total * BUNDLE_DISCOUNT_PERCENT // 100
"#;

    #[test]
    fn only_single_name_assignments_at_column_0() {
        let v = module_values(&ft(SRC));
        let mut names: Vec<&str> = v.keys().map(String::as_str).collect();
        names.sort();
        assert_eq!(names, vec!["BUNDLE_DISCOUNT_PERCENT", "RATES"]);
        let r = &v["RATES"];
        assert_eq!((r.first_line, r.last_line), (4, 7));
        assert_eq!(r.text, "RATES: dict[str, int] = {\n    \"a\": 1,\n    \"b\": 2,\n}");
    }

    #[test]
    fn a_function_reads_names_not_attributes_strings_or_comments() {
        let v = module_values(&ft(SRC));
        let code = SRC.lines().skip(14).collect::<Vec<_>>().join("\n");
        let read: Vec<&str> = read_by(&code, &v).iter().map(|m| m.name.as_str()).collect();
        assert_eq!(read, vec!["BUNDLE_DISCOUNT_PERCENT"]);
        let attr_only = "def f(p):\n    return p.RATES\n";
        assert!(read_by(attr_only, &v).is_empty());
    }

    #[test]
    fn long_values_are_cut_and_marked() {
        let mut src = String::from("TABLE = [\n");
        for i in 0..30 {
            src.push_str(&format!("    {i},\n"));
        }
        src.push_str("]\n");
        let v = module_values(&ft(&src));
        let t = &v["TABLE"];
        assert_eq!((t.first_line, t.last_line), (1, 32));
        assert_eq!(t.text.lines().count(), MAX_LINES + 1);
        assert!(t.text.ends_with(CUT_MARK));
    }
}
