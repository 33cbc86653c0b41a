//! Where Python code comes from: the standard library (`.../lib/python3.X/`), installed
//! packages (`site-packages`, `dist-packages`) or the program, and the dotted module names of
//! files. The language-neutral dispatch is [`crate::pathclass`].

use crate::pathclass::Origin;
use crate::symbols::{Function, Language};
use std::path::Path;

/// Classify a Python source path.
pub fn python_origin(path: &str) -> Origin {
    if path.starts_with("<frozen ") {
        return Origin::Stdlib;
    }
    if packages_dir_end(path).is_some() {
        return Origin::SitePackages;
    }
    if stdlib_dir_end(path).is_some() {
        return Origin::Stdlib;
    }
    Origin::Program
}

/// Whether a Python function is code the standard library compiled from a string and ran
/// (file `<string>`): the `__new__` of every `collections.namedtuple`
/// (`<lambda>`, `<string>:1`), the methods `dataclasses` generates, the body that defined them.
/// Decided by what the recorder saw: the file of the code that ran the string
/// (`funcs.jsonl`'s `made_in`, [`Function::made_in`]) is the standard library's. What a
/// program or an installed package generates (fastjsonschema's validators) stays theirs; so
/// does code under another name (`<doctest ...>`: the examples of a program's docstrings,
/// which `doctest` compiles). A trace recorded before `made_in` existed
/// falls back to `dataclasses`' naming ([`is_dataclass_generated`]).
pub fn made_by_stdlib(f: &Function) -> bool {
    if f.language != Language::Python || f.file.as_deref().is_none_or(|p| p.as_os_str() != "<string>") {
        return false;
    }
    match f.made_in.as_deref() {
        Some(m) => python_origin(m) == Origin::Stdlib,
        None => is_dataclass_generated(f),
    }
}

/// Whether a Python function is one of the methods the standard library's `dataclasses`
/// generates (`__init__`, `__eq__`, `__setattr__`... compiled from a string inside a function
/// named `__create_fn__`, so `<string>` is their file and `__create_fn__.<locals>.__init__`
/// their qualified name, whatever the class): the standard library's code, not the program's.
/// Shown as the program's, they filled trees with lines such as `__create_fn__.<locals>.__init__
/// ×334` that name no class and have no source (black: 9 of 65 tree lines).
pub fn is_dataclass_generated(f: &Function) -> bool {
    f.language == Language::Python
        && f.file.as_deref().is_some_and(|p| p.as_os_str() == "<string>")
        && (f.qualname == "__create_fn__" || f.qualname.starts_with("__create_fn__.<locals>."))
}

/// The dotted module name of a program file from its package directories (those with an
/// `__init__.py`), as Python would import it: `.../shop/pricing.py` -> `shop.pricing`.
pub(crate) fn package_module(file: &Path) -> Option<String> {
    let stem = file.file_stem()?.to_string_lossy().into_owned();
    let mut parts = if stem == "__init__" { Vec::new() } else { vec![stem] };
    let mut dir = file.parent();
    let mut in_package = false;
    while let Some(d) = dir {
        if !d.join("__init__.py").exists() {
            break;
        }
        in_package = true;
        parts.push(d.file_name()?.to_string_lossy().into_owned());
        dir = d.parent();
    }
    if !in_package {
        return None; // not inside a package: the caller falls back to the path
    }
    parts.reverse();
    Some(parts.join("."))
}

/// The installed-packages directory of a path: its name (`site-packages` or `dist-packages`)
/// and where the path inside it starts.
pub(crate) fn packages_dir_end(s: &str) -> Option<(&'static str, usize)> {
    // (Searched with the slashes as constants: this runs for every function of a trace.)
    [("site-packages", "/site-packages/"), ("dist-packages", "/dist-packages/")]
        .into_iter()
        .find_map(|(name, dir)| s.rfind(dir).map(|i| (name, i + dir.len())))
}

/// Where the path inside the Python standard library directory starts (`/usr/lib/python3.11/`,
/// `/usr/local/lib/python3.12/`, `~/.pyenv/versions/3.11.7/lib/python3.11/`...).
pub(crate) fn stdlib_dir_end(s: &str) -> Option<usize> {
    let mut off = 0;
    let parts: Vec<&str> = s.split('/').collect();
    for w in parts.windows(2) {
        off += w[0].len() + 1;
        if w[0].starts_with("lib") && w[1].starts_with("python3") {
            return Some((off + w[1].len() + 1).min(s.len()));
        }
    }
    None
}

pub(crate) fn dotted(rel: &str) -> String {
    let rel = rel.strip_suffix(".py").unwrap_or(rel);
    let rel = rel.strip_suffix("/__init__").unwrap_or(rel);
    rel.trim_start_matches('/').replace('/', ".")
}
