//! Demangling of native symbol names, and splitting a demangled C++/Rust name into its
//! scope and short name.

/// Which mangling scheme a name may use (from the compile unit's `DW_AT_language`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    C,
    Cpp,
    Rust,
    Unknown,
}

impl Lang {
    pub fn from_dwarf(lang: gimli::DwLang) -> Lang {
        match lang {
            gimli::DW_LANG_C | gimli::DW_LANG_C89 | gimli::DW_LANG_C99 | gimli::DW_LANG_C11 | gimli::DW_LANG_C17 => Lang::C,
            gimli::DW_LANG_C_plus_plus
            | gimli::DW_LANG_C_plus_plus_03
            | gimli::DW_LANG_C_plus_plus_11
            | gimli::DW_LANG_C_plus_plus_14
            | gimli::DW_LANG_C_plus_plus_17
            | gimli::DW_LANG_C_plus_plus_20 => Lang::Cpp,
            gimli::DW_LANG_Rust => Lang::Rust,
            _ => Lang::Unknown,
        }
    }
}

/// Demangle a linkage name. C++ names keep their parameter list (so overloads stay
/// distinct) but lose the return type that template manglings carry; Rust names lose
/// their hash. A name that is not mangled is returned as is.
pub fn demangle(name: &str, lang: Lang) -> String {
    // A compiler's copy of a function (`.llvm.N` after LTO or ThinLTO, gcc's `.isra.N`,
    // `.constprop.N`, `.part.N`, `.lto_priv.N`) runs the same source function: named as it.
    let name = strip_clone_suffix(name);
    if lang == Lang::Rust || (lang == Lang::Unknown && looks_rust(name)) {
        if let Ok(d) = rustc_demangle::try_demangle(name) {
            return format!("{d:#}");
        }
    }
    if name.starts_with("_Z") {
        if let Ok(sym) = cpp_demangle::Symbol::new(name) {
            let opts = cpp_demangle::DemangleOptions::new().no_return_type();
            if let Ok(d) = sym.demangle(&opts) {
                return d;
            }
        }
    }
    name.to_string()
}

/// Whether a symbol looks Rust-mangled: v0 (`_R...`) or legacy (`_ZN...17h<hash>E`).
fn looks_rust(name: &str) -> bool {
    name.starts_with("_R") || (name.starts_with("_ZN") && name.ends_with('E') && name.contains("17h"))
}

/// Whether a symbol is a Rust-mangled name (v0, or legacy with its hash), clone suffixes
/// aside: its demangled path names one source function, whatever instance it is.
pub fn is_rust_symbol(name: &str) -> bool {
    let name = strip_clone_suffix(name);
    looks_rust(name) && rustc_demangle::try_demangle(name).is_ok()
}

/// Suffixes compilers append to the symbol of a copy of a function (a clone specialised for
/// some arguments, a part split off, a local alias, LLVM's per-module rename after LTO).
/// `.cold` is not among them: a cold fragment is not the function's entry and stays named so.
const CLONE_SUFFIXES: [&str; 7] = ["llvm", "isra", "constprop", "part", "lto_priv", "localalias", "specialized"];

/// `name` without the clone suffixes at its end (`f.isra.0`, `f.constprop.0.isra.0`,
/// `_ZN...E.llvm.4519946975059345890`); names with any other dot-part are kept whole.
pub fn strip_clone_suffix(name: &str) -> &str {
    let mut end = name.len();
    loop {
        let head = &name[..end];
        // An optional `.<digits>` after a known word.
        let without_number = match head.rfind('.') {
            Some(i) if i + 1 < head.len() && head[i + 1..].bytes().all(|b| b.is_ascii_digit()) => &head[..i],
            _ => head,
        };
        match without_number.rfind('.') {
            Some(i) if i > 0 && CLONE_SUFFIXES.contains(&&without_number[i + 1..]) => end = i,
            _ => break,
        }
    }
    &name[..end]
}

/// The short name of a demangled qualified name: its last scope component, without the
/// parameter list (`ns::Shape::area() const` -> `area`, `max_of<int>(...)` -> `max_of<int>`).
/// A lambda's call operator is named after the lambda (`{lambda(int)#1}`).
pub fn short_name(qualname: &str) -> String {
    let mut parts = split_scope(qualname);
    // A Rust turbofish (`parse::<u8>`, v0 names) is part of the name before it.
    while parts.len() >= 2 && parts.last().is_some_and(|p| p.starts_with('<')) {
        parts.pop();
    }
    let last = parts.last().copied().unwrap_or(qualname);
    if last == "operator()" && parts.len() >= 2 {
        let prev = parts[parts.len() - 2];
        if prev.starts_with("{lambda") || prev.starts_with("{closure") {
            return prev.to_string();
        }
    }
    last.to_string()
}

/// Split a demangled name at its top-level `::`, dropping the parameter list and the
/// qualifiers after it. Operator names (`operator<<`, `operator()`) are kept whole.
pub fn split_scope(q: &str) -> Vec<&str> {
    let b = q.as_bytes();
    let mut parts = Vec::new();
    let mut depth: i32 = 0;
    let mut start = 0;
    let mut i = 0;
    while i < b.len() {
        if depth == 0 && q[i..].starts_with("operator") && (i == 0 || !is_ident(b[i - 1])) {
            let mut j = i + "operator".len();
            if q[j..].starts_with("()") || q[j..].starts_with("[]") {
                j += 2;
            } else if j < b.len() && !is_ident(b[j]) && b[j] != b' ' {
                while j < b.len() && b"<>=!+-*/%^&|~,".contains(&b[j]) {
                    j += 1;
                }
            }
            i = j.max(i + 1);
            continue;
        }
        match b[i] {
            b'(' if depth == 0 => {
                // Either the parameter list, or the parameters of an enclosing function
                // whose local entity follows (`f(int)::{lambda()#1}`).
                match matching_paren(b, i) {
                    Some(close) if q[close + 1..].starts_with("::") => {
                        i = close + 1;
                        continue;
                    }
                    _ => break,
                }
            }
            b'<' | b'(' | b'[' | b'{' => depth += 1,
            b'>' | b')' | b']' | b'}' => depth -= 1,
            b':' if depth == 0 && b.get(i + 1) == Some(&b':') => {
                parts.push(&q[start..i]);
                i += 2;
                start = i;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    let end = i.min(q.len());
    parts.push(q[start..end].trim_end());
    parts
}

/// A Rust name without its generic argument lists: `<alloc::vec::Vec<u8>>::push::<T>` ->
/// `<alloc::vec::Vec>::push`. A `<...>` right after an identifier (`Vec<u8>`) or after `::`
/// (a turbofish, which loses its `::` too) is removed; qualified-path brackets
/// (`<T as Trait>::f`) are kept. The `>` of `->` does not close a list.
pub fn erase_generics(q: &str) -> String {
    let b = q.as_bytes();
    let mut out = String::with_capacity(q.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let after_ident = i > 0 && is_ident(b[i - 1]);
        let turbofish = out.ends_with("::");
        if c == b'<' && (after_ident || turbofish) {
            // Skip to the matching '>'.
            let mut depth = 0i32;
            let mut j = i;
            while j < b.len() {
                match b[j] {
                    b'<' => depth += 1,
                    b'>' if j > 0 && b[j - 1] == b'-' => {}
                    b'>' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
            if turbofish {
                out.truncate(out.len() - 2);
            }
            i = j + 1;
            continue;
        }
        // Copy one whole character.
        let len = q[i..].chars().next().map_or(1, char::len_utf8);
        out.push_str(&q[i..i + len]);
        i += len;
    }
    out
}

/// Index of the `)` that closes the `(` at `open`.
fn matching_paren(b: &[u8], open: usize) -> Option<usize> {
    let mut depth = 0i32;
    for (j, &c) in b.iter().enumerate().skip(open) {
        match c {
            b'(' => depth += 1,
            b')' => {
                depth -= 1;
                if depth == 0 {
                    return Some(j);
                }
            }
            _ => {}
        }
    }
    None
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpp_names() {
        assert_eq!(demangle("_ZNK6Circle4areaEv", Lang::Cpp), "Circle::area() const");
        // Template functions lose the return type but keep parameters.
        assert_eq!(
            demangle("_Z6max_ofIiET_RKSt6vectorIS0_SaIS0_EE", Lang::Cpp),
            "max_of<int>(std::vector<int, std::allocator<int> > const&)"
        );
        assert_eq!(short_name("Circle::area() const"), "area");
        assert_eq!(short_name("max_of<int>(std::vector<int, std::allocator<int> > const&)"), "max_of<int>");
        assert_eq!(short_name("main::{lambda(int)#1}::operator()(int) const"), "{lambda(int)#1}");
        assert_eq!(
            short_name("report(std::vector<int> const&)::{lambda(geo::Shape const&)#2}::operator()(geo::Shape const&) const"),
            "{lambda(geo::Shape const&)#2}"
        );
        assert_eq!(short_name("f(int)::Local::run()"), "run");
        assert_eq!(short_name("geo::operator<<(std::ostream&, geo::Point const&)"), "operator<<");
        assert_eq!(short_name("Vec<int>::operator[](unsigned long)"), "operator[]");
        assert_eq!(short_name("a::b<c::d>::e"), "e");
        assert_eq!(short_name("plain_c"), "plain_c");
    }

    #[test]
    fn clones_are_named_as_the_function_they_copy() {
        assert_eq!(
            demangle("_ZN6ignore3dir6Ignore14matched_ignore17h4968df2f62eb72aaE.llvm.4519946975059345890", Lang::Unknown),
            "ignore::dir::Ignore::matched_ignore"
        );
        assert_eq!(demangle("parse_row.isra.0", Lang::C), "parse_row");
        assert_eq!(demangle("parse_row.constprop.0.isra.0", Lang::C), "parse_row");
        assert_eq!(demangle("_ZN3geo4areaEv.part.0", Lang::Cpp), "geo::area()");
        assert_eq!(demangle("parse_row.cold", Lang::C), "parse_row.cold", "a cold fragment is not the function");
        assert_eq!(demangle("file.name.v2", Lang::C), "file.name.v2");
        assert_eq!(demangle(".llvm.5", Lang::C), ".llvm.5");
    }

    #[test]
    fn rust_symbols_are_told_by_their_mangling() {
        assert!(is_rust_symbol("_ZN4core3fmt5write17h0123456789abcdefE"));
        assert!(is_rust_symbol("_ZN6ignore3dir6Ignore14matched_ignore17h4968df2f62eb72aaE.llvm.4519946975059345890"));
        assert!(is_rust_symbol("_RINvCs1234_5hello5parsehEB2_"));
        assert!(!is_rust_symbol("_ZNK6Circle4areaEv"), "C++");
        assert!(!is_rust_symbol("parse_row.isra.0"), "C");
    }

    #[test]
    fn rust_and_plain_names() {
        assert_eq!(demangle("_ZN4core3fmt5write17h0123456789abcdefE", Lang::Unknown), "core::fmt::write");
        assert_eq!(demangle("main", Lang::C), "main");
        assert_eq!(demangle("_Znot_valid", Lang::Cpp), "_Znot_valid");
        assert_eq!(short_name("core::fmt::write"), "write");
    }

    #[test]
    fn rust_generics_and_closures() {
        // v0 (`_R`) names carry the concrete generic arguments; legacy names do not.
        assert_eq!(demangle("_RINvCs1234_5hello5parsehEB2_", Lang::Rust), "hello::parse::<u8>");
        assert_eq!(short_name("hello::parse::<u8>"), "parse");
        assert_eq!(erase_generics("hello::parse::<u8>"), "hello::parse");
        assert_eq!(erase_generics("<alloc::vec::Vec<u8>>::push"), "<alloc::vec::Vec>::push");
        assert_eq!(
            erase_generics("<alloc::vec::Vec<T> as core::ops::drop::Drop>::drop"),
            "<alloc::vec::Vec as core::ops::drop::Drop>::drop"
        );
        assert_eq!(erase_generics("a::run::<alloc::boxed::Box<dyn Fn(u8) -> u8>>::{closure#0}"), "a::run::{closure#0}");
        assert_eq!(erase_generics("hexyl::main"), "hexyl::main");
        assert_eq!(short_name("hexyl::main::{closure#0}"), "{closure#0}");
        assert_eq!(short_name("hexyl::main::{{closure}}"), "{{closure}}");
        assert_eq!(short_name("<P as clap_builder::builder::value_parser::AnyValueParser>::type_id"), "type_id");
    }
}
