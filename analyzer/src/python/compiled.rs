//! Python packages that ran as compiled extension code: mypyc, Cython and the like compile a
//! package's Python modules to native extension modules (`black` as `pip install black` gives
//! it), whose functions the Python recorder never sees. Read from the modules a process
//! imported (`extensions.json`, written at its exit by `sitecustomize.py`): a package counts
//! as compiled Python when its extension modules have the Python source they were compiled
//! from beside them (`linegen.py` next to `linegen.cpython-311-x86_64-linux-gnu.so`), or when
//! it was built by mypyc (its runtime module `<hash>__mypyc` in the same directory). C
//! extensions with no Python source (numpy's core) are not named: reinstalling them changes
//! nothing.

use std::collections::BTreeMap;
use std::path::Path;
use trace_format::meta::ExtensionsDoc;

/// A package of which compiled modules were imported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompiledPackage {
    /// Its import name (`black`).
    pub name: String,
    /// Its distribution's name as pip knows it, when its `.dist-info` is found beside it.
    pub distribution: Option<String>,
    /// `mypyc`, or `None` when the compiler is not known (Cython, ...).
    pub compiler: Option<&'static str>,
    /// How many of its modules ran compiled.
    pub modules: usize,
    /// One of them, as a path under its installation directory (`black/linegen.cpython-...so`).
    pub example: String,
    /// The package's directory (`.../site-packages/black`).
    pub dir: String,
}

/// The file name's stem before its first dot (`linegen` of `linegen.cpython-311-x86_64-linux-gnu.so`).
fn stem(file: &str) -> &str {
    let name = file.rsplit('/').next().unwrap_or(file);
    name.split('.').next().unwrap_or(name)
}

/// Whether a package that ran `compiled` modules ran mostly as compiled code: more of its modules
/// were compiled than ran as Python (`python_files`: the files of its recorded Python
/// functions). requests' `charset_normalizer` imports one compiled module among seven Python
/// ones and is not named; black, compiled whole, is.
pub fn mostly_compiled<'a>(p: &CompiledPackage, python_files: impl IntoIterator<Item = &'a Path>) -> bool {
    let dir = Path::new(&p.dir);
    let mut seen: std::collections::HashSet<&Path> = std::collections::HashSet::new();
    for f in python_files {
        if f.starts_with(dir) {
            seen.insert(f);
        }
    }
    p.modules > seen.len()
}

/// The compiled Python packages among the modules of `doc`, by name.
pub fn compiled_packages(doc: &ExtensionsDoc) -> Vec<CompiledPackage> {
    // mypyc's runtime modules (`30fcd23745efe32ce681__mypyc`): each module it compiled is a
    // small shim that imports one by name.
    let runtimes: Vec<&str> =
        doc.modules.iter().map(|m| m.module.as_str()).filter(|m| !m.contains('.') && m.ends_with("__mypyc")).collect();
    let mut by_package: BTreeMap<&str, CompiledPackage> = BTreeMap::new();
    for m in &doc.modules {
        let top = m.module.split('.').next().unwrap_or(&m.module);
        if top.ends_with("__mypyc") || !m.file.starts_with('/') {
            continue;
        }
        let Some((dir, _)) = m.file.rsplit_once('/') else { continue };
        let source_beside = Path::new(dir).join(format!("{}.py", stem(&m.file))).is_file();
        // The directory the top-level package is installed in: `dir` less one level per dot.
        let depth = m.module.matches('.').count() + usize::from(stem(&m.file) == "__init__");
        let mut install = dir;
        for _ in 0..depth {
            install = install.rsplit_once('/').map(|(d, _)| d).unwrap_or(install);
        }
        let mypyc = !runtimes.is_empty() && imports_any(&m.file, &runtimes);
        if !source_beside && !mypyc {
            continue;
        }
        let example = m.file.strip_prefix(install).map(|r| r.trim_start_matches('/')).unwrap_or(&m.file).to_string();
        let entry = by_package.entry(top).or_insert_with(|| CompiledPackage {
            name: top.to_string(),
            distribution: distribution_of(Path::new(install), top),
            compiler: None,
            modules: 0,
            example,
            dir: format!("{install}/{top}"),
        });
        entry.modules += 1;
        if mypyc {
            entry.compiler = Some("mypyc");
        }
    }
    by_package.into_values().collect()
}

/// Whether the (small) extension module at `file` names one of `runtimes` (a mypyc shim
/// imports its runtime module by name); a module over 1 MiB is not a shim.
pub(crate) fn imports_any(file: &str, runtimes: &[&str]) -> bool {
    let Ok(bytes) = crate::source::read_regular_file(Path::new(file), 1 << 20) else { return false };
    runtimes.iter().any(|r| bytes.windows(r.len()).any(|w| w == r.as_bytes()))
}

/// PEP 503's normal form of a project name (`Charset_Normalizer` -> `charset-normalizer`).
fn normalized(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            if !out.ends_with('-') {
                out.push('-');
            }
        } else {
            out.extend(c.to_lowercase());
        }
    }
    out
}

/// The name of the distribution installed in `install` whose import name is `package`: a
/// `<name>-<version>.dist-info` whose `top_level.txt` lists it or whose `RECORD` holds its
/// files (black's also installs `blib2to3`), or whose name is the package's (normalized).
fn distribution_of(install: &Path, package: &str) -> Option<String> {
    let entries = std::fs::read_dir(install).ok()?;
    let mut by_name = None;
    for e in entries.flatten().take(10_000) {
        let file_name = e.file_name();
        let Some(dir) = file_name.to_str().and_then(|n| n.strip_suffix(".dist-info")) else { continue };
        let Some((name, _version)) = dir.rsplit_once('-') else { continue };
        let top_level = crate::source::read_regular_file(&e.path().join("top_level.txt"), 64 << 10).ok();
        if top_level.is_some_and(|t| String::from_utf8_lossy(&t).lines().any(|l| l.trim() == package)) {
            return Some(name.to_string());
        }
        let record = crate::source::read_regular_file(&e.path().join("RECORD"), 16 << 20).ok();
        let prefix = format!("{package}/");
        if record.is_some_and(|r| String::from_utf8_lossy(&r).lines().any(|l| l.starts_with(&prefix))) {
            return Some(name.to_string());
        }
        if normalized(name) == normalized(package) {
            by_name = Some(name.to_string());
        }
    }
    by_name
}

/// How [`note`] starts (to find it among a trace's notes).
pub const NOTE_START: &str = "Compiled Python:";

/// The note of a prompt (and stderr) about compiled packages, or `None` when there are none.
/// `native`: their native functions were recorded (`trace run --native-ext`), so the tree
/// has them (mypyc's as Python functions where their names map to one).
/// The recording option is named as `front` spells it.
pub fn note(packages: &[CompiledPackage], native: bool, front: crate::frontend::FrontEnd) -> Option<String> {
    use crate::frontend::Opt;
    if packages.is_empty() {
        return None;
    }
    let described: Vec<String> = packages
        .iter()
        .map(|p| {
            let how = match p.compiler {
                Some(c) => format!("{c}: "),
                None => String::new(),
            };
            format!(
                "{} ({how}{} such as `{}`)",
                p.name,
                crate::testrun::plural(p.modules, "compiled module"),
                trace_format::escape::line(&p.example)
            )
        })
        .collect();
    let one = packages.len() == 1;
    let mut names: Vec<String> = Vec::new();
    for p in packages {
        let n = p.distribution.clone().unwrap_or_else(|| p.name.clone());
        if !names.contains(&n) {
            names.push(n);
        }
    }
    let what = if native {
        format!(
            "so the functions of {} compiled modules are in the tree as native code (recorded with {}): mypyc's compiled \
             functions as the Python functions they were compiled from, with the source beside {} modules, where their C names \
             (`CPyDef_<module>___<function>`, a generator's body, a nested function, a lambda alone in its function) name one \
             function; the rest (mypyc's helpers, other compilers' functions) by their C names, without source",
            if one { "its" } else { "their" },
            front.on(Opt::NativeExt),
            if one { "its" } else { "their" }
        )
    } else {
        format!(
            "so the functions of {} compiled modules are not in the tree or the sources here (the recorder sees Python functions only; \
             {} records them as native code, by their C names)",
            if one { "its" } else { "their" },
            front.record_with(Opt::NativeExt)
        )
    };
    Some(format!(
        "{NOTE_START} {} ran as compiled extension code, not as Python, {what}. To record {} as Python, reinstall {} from source and record again: \
         `pip install --force-reinstall --no-binary {} {}`.",
        described.join(", "),
        if one { "it" } else { "them" },
        if names.len() == 1 { "its distribution" } else { "their distributions" },
        names.join(","),
        names.join(" ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frontend::FrontEnd;
    use trace_format::meta::ExtensionModule;

    #[test]
    fn compiled_python_is_told_from_c_extensions() {
        let d = tempfile::tempdir().unwrap();
        let sp = d.path().join("site-packages");
        let so = "cpython-311-x86_64-linux-gnu.so";
        let shim = b"\x7fELF...PyInit_linegen\x0030fcd23745efe32ce681__mypyc\x00";
        for (f, text) in [
            ("black/__init__.py".to_string(), &b""[..]),
            (format!("black/__init__.{so}"), shim),
            (format!("black/linegen.{so}"), shim),
            (format!("black/nodes/__init__.{so}"), shim),
            (format!("cyth/fast.{so}"), b"\x7fELF"),
            ("cyth/fast.py".to_string(), b""),
            (format!("numpy/core/_multiarray_umath.{so}"), b"\x7fELF"),
            ("numpy/core/x.py".to_string(), b""),
        ] {
            std::fs::create_dir_all(sp.join(&f).parent().unwrap()).unwrap();
            std::fs::write(sp.join(&f), text).unwrap();
        }
        std::fs::create_dir_all(sp.join("black-24.10.0.dist-info")).unwrap();
        std::fs::write(sp.join("black-24.10.0.dist-info/top_level.txt"), "_black_version\nblack\n").unwrap();
        let m = |module: &str, rel: &str| ExtensionModule { module: module.into(), file: format!("{}/{rel}", sp.display()) };
        // `black.linegen.py` is not there: its shim names the runtime.
        let doc = ExtensionsDoc {
            modules: vec![
                m("30fcd23745efe32ce681__mypyc", &format!("30fcd23745efe32ce681__mypyc.{so}")),
                m("black", &format!("black/__init__.{so}")),
                m("black.linegen", &format!("black/linegen.{so}")),
                m("black.nodes", &format!("black/nodes/__init__.{so}")),
                m("cyth.fast", &format!("cyth/fast.{so}")),
                m("numpy.core._multiarray_umath", &format!("numpy/core/_multiarray_umath.{so}")),
            ],
        };
        let p = compiled_packages(&doc);
        assert_eq!(
            p,
            vec![
                CompiledPackage {
                    name: "black".into(),
                    distribution: Some("black".into()),
                    compiler: Some("mypyc"),
                    modules: 3,
                    example: format!("black/__init__.{so}"),
                    dir: format!("{}/black", sp.display()),
                },
                CompiledPackage {
                    name: "cyth".into(),
                    distribution: None,
                    compiler: None,
                    modules: 1,
                    example: format!("cyth/fast.{so}"),
                    dir: format!("{}/cyth", sp.display()),
                },
            ]
        );
        let n = note(&p, false, FrontEnd::Cli).unwrap();
        assert!(n.starts_with("Compiled Python: black (mypyc: 3 compiled modules such as `black/__init__.cpython-311"), "{n}");
        assert!(n.ends_with("`pip install --force-reinstall --no-binary black,cyth black cyth`."), "{n}");
        assert!(n.contains("are not in the tree") && n.contains("`trace run --native-ext` records them"), "{n}");
        let n = note(&p, true, FrontEnd::Cli).unwrap();
        assert!(n.contains("are in the tree as native code (recorded with --native-ext): mypyc's compiled functions as the Python"), "{n}");
        assert!(n.ends_with("`pip install --force-reinstall --no-binary black,cyth black cyth`."), "{n}");
        assert_eq!(note(&[], false, FrontEnd::Cli), None);
        // Through MCP: the record tool's parameter.
        let n = note(&p, false, FrontEnd::Mcp).unwrap();
        assert!(n.contains("; the `record` tool with `native_ext: true` records them as native code"), "{n}");
        let n = note(&p, true, FrontEnd::Mcp).unwrap();
        assert!(n.contains("(recorded with native_ext: true)"), "{n}");
        let black = sp.join("black");
        let py: Vec<std::path::PathBuf> = vec![black.join("trans.py"), black.join("trans.py"), black.join("x.py")];
        assert!(mostly_compiled(&p[0], py.iter().map(|p| p.as_path())), "3 compiled, 2 Python");
        let py: Vec<std::path::PathBuf> = (0..3).map(|i| black.join(format!("m{i}.py"))).collect();
        assert!(!mostly_compiled(&p[0], py.iter().map(|p| p.as_path())), "3 compiled, 3 Python");
        assert_eq!(normalized("Charset_Normalizer"), "charset-normalizer");
    }
}
