//! Selecting the part of a tree to show. Applied in this order:
//!
//! 1. origin: standard-library and/or site-packages functions are *spliced out* (hidden,
//!    with whatever program code they called attached to the nearest shown ancestor, so a
//!    callback run by the standard library stays in the tree);
//! 2. `include` filters (function name, file path, module; all given kinds must match):
//!    functions that do not match are spliced out the same way;
//! 3. `exclude` filters (any match): the function and its whole subtree are dropped;
//! 4. `focus`: only the paths from the root to matching functions are kept (with
//!    `focus_subtree`, also everything below a match);
//! 5. `max_depth`: nodes deeper than this are dropped.
//!
//! Splicing re-applies the folding rules: lifted children merge with same-function siblings.

use crate::calltree::{CallTree, Keep, ROOT};
use crate::pathclass::{module_name, origin, Origin};
use crate::symbols::Function;
use regex::Regex;
use std::path::{Path, PathBuf};

/// What to keep. `Default` keeps everything.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    pub hide_stdlib: bool,
    pub hide_site_packages: bool,
    /// Top-level packages that are the program itself, kept by `hide_site_packages` (see
    /// [`program_packages`]).
    pub program_packages: Vec<String>,
    /// Function-name regexes (matched against the qualified name); any may match.
    pub include: Vec<Regex>,
    pub include_file: Vec<Regex>,
    pub include_module: Vec<Regex>,
    pub exclude: Vec<Regex>,
    pub exclude_file: Vec<Regex>,
    pub exclude_module: Vec<Regex>,
    pub focus: Vec<Regex>,
    pub focus_subtree: bool,
    pub max_depth: Option<u32>,
}

fn any(rs: &[Regex], s: &str) -> bool {
    rs.iter().any(|r| r.is_match(s))
}

/// What the selection reads of a function, computed once per function (not per tree node).
struct Facts {
    origin: Origin,
    /// The first component of `module`.
    package: String,
    qualname: String,
    file: String,
    module: String,
}

/// `modules`: module names by Python file, found once per file (a program file's module name
/// looks for `__init__.py` up its directories).
fn facts(f: &Function, cwd: &Path, modules: &mut rustc_hash::FxHashMap<std::path::PathBuf, String>) -> Facts {
    let module = match (&f.file, f.language) {
        (Some(file), crate::symbols::Language::Python) => modules.entry(file.clone()).or_insert_with(|| module_name(f, cwd)).clone(),
        _ => module_name(f, cwd),
    };
    Facts {
        origin: origin(f),
        package: module.split('.').next().unwrap_or_default().to_string(),
        qualname: f.qualname.clone(),
        file: f.file.as_deref().map(|p| p.to_string_lossy().into_owned()).or_else(|| f.object.clone()).unwrap_or_default(),
        module,
    }
}

/// The top-level packages of a Python program that is itself an installed package: the
/// package of an entry module inside site-packages (`python -m rich_cli`), and the packages of
/// the installed-package functions an entry module calls directly (a console script such as
/// `bin/rich` calling `rich_cli.__main__.run`). `entry`: the entry modules' function indices.
pub fn program_packages(tree: &CallTree, entry: &std::collections::HashSet<u32>, cwd: &Path) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut add = |f: &Function| {
        if origin(f) == Origin::SitePackages {
            let m = module_name(f, cwd);
            let p = m.split('.').next().unwrap_or_default();
            // `python -m pytest` runs the tests, not pytest: the runner is not the program.
            if !p.is_empty() && !crate::plumbing::is_test_runner(p) && !out.iter().any(|x| x == p) {
                out.push(p.to_string());
            }
        }
    };
    for n in tree.preorder() {
        if !entry.contains(&tree.node(n).func) {
            continue;
        }
        if let Some(f) = tree.func(n) {
            add(f);
        }
        for &c in &tree.node(n).children {
            if let Some(f) = tree.func(c) {
                add(f);
            }
        }
    }
    out
}

impl Selection {
    /// Whether the selection changes nothing.
    pub fn is_noop(&self) -> bool {
        !self.hide_stdlib
            && !self.hide_site_packages
            && self.include.is_empty()
            && self.include_file.is_empty()
            && self.include_module.is_empty()
            && self.exclude.is_empty()
            && self.exclude_file.is_empty()
            && self.exclude_module.is_empty()
            && self.focus.is_empty()
            && self.max_depth.is_none()
    }

    /// The origin rule (step 1): the standard library with `hide_stdlib`, installed packages
    /// other than the program's with `hide_site_packages`. `package`: the function's top-level
    /// package, asked only when needed.
    fn origin_hidden(&self, origin: Origin, package: impl FnOnce() -> String) -> bool {
        match origin {
            Origin::Stdlib => self.hide_stdlib,
            Origin::SitePackages => self.hide_site_packages && !self.program_packages.contains(&package()),
            Origin::Program => false,
        }
    }

    /// Whether the origin rule hides `f` (`cwd`: the run's directory, for module names): what
    /// [`Selection::apply`] splices out of a tree first, for lists of functions shown without
    /// their tree (`slice tests`' ranking).
    pub fn hides_by_origin(&self, f: &Function, cwd: &Path) -> bool {
        self.origin_hidden(origin(f), || module_name(f, cwd).split('.').next().unwrap_or_default().to_string())
    }

    fn hidden(&self, x: &Facts) -> bool {
        if self.origin_hidden(x.origin, || x.package.clone()) {
            return true;
        }
        (!self.include.is_empty() && !any(&self.include, &x.qualname))
            || (!self.include_file.is_empty() && !any(&self.include_file, &x.file))
            || (!self.include_module.is_empty() && !any(&self.include_module, &x.module))
    }

    fn excluded(&self, x: &Facts) -> bool {
        any(&self.exclude, &x.qualname) || any(&self.exclude_file, &x.file) || any(&self.exclude_module, &x.module)
    }

    /// Apply the selection to a tree (`cwd`: the run's directory, for module names).
    pub fn apply(&self, tree: &CallTree, cwd: &Path) -> CallTree {
        self.apply_owned(tree.clone(), cwd)
    }

    /// [`Selection::apply`] to a tree it takes: a stage that changes nothing hands the tree
    /// back as it is, no copy (a copy of a two-million-node tree is 128 MB).
    pub fn apply_owned(&self, tree: CallTree, cwd: &Path) -> CallTree {
        if self.is_noop() {
            return tree;
        }
        let funcs = tree.funcs.clone();
        let mut modules = rustc_hash::FxHashMap::default();
        let facts: Vec<Facts> = funcs.iter().map(|f| facts(f, cwd, &mut modules)).collect();
        // Function index of a node, if it has a known function (all rebuilt trees share `funcs`).
        let fi = |t: &CallTree, n| -> Option<usize> {
            let f = t.node(n).func as usize;
            (f < facts.len()).then_some(f)
        };
        // 1-3
        let mut t = tree.rebuild_into(|t, n| match fi(t, n) {
            Some(i) if self.excluded(&facts[i]) => Keep::Drop,
            Some(i) if self.hidden(&facts[i]) => Keep::Splice,
            _ => Keep::Keep,
        });
        // 4
        if !self.focus.is_empty() {
            let mut keep = vec![false; t.nodes.len()];
            let mut below_match = vec![false; t.nodes.len()];
            for n in t.preorder() {
                let p = t.node(n).parent;
                let hit = fi(&t, n).is_some_and(|i| any(&self.focus, &facts[i].qualname));
                below_match[n as usize] = hit || below_match[p as usize];
                if hit || (self.focus_subtree && below_match[p as usize]) {
                    // keep the whole path up to the root
                    let mut a = n;
                    while a != ROOT && !keep[a as usize] {
                        keep[a as usize] = true;
                        a = t.node(a).parent;
                    }
                }
            }
            t = t.rebuild_into(|_, n| if keep[n as usize] { Keep::Keep } else { Keep::Drop });
        }
        // 5
        if let Some(d) = self.max_depth {
            t = t.rebuild_into(|t, n| if t.node(n).depth > d { Keep::Drop } else { Keep::Keep });
        }
        t
    }
}

/// Compile regexes given on the command line, naming the option in errors.
pub fn compile(option: &str, patterns: &[String]) -> Result<Vec<Regex>, String> {
    patterns.iter().map(|p| Regex::new(p).map_err(|e| format!("{option} {p:?}: not a valid regular expression: {e}"))).collect()
}

/// Resolve a possibly relative source path against a directory.
pub fn absolute(file: &Path, cwd: &Path) -> PathBuf {
    if file.is_absolute() {
        file.to_path_buf()
    } else {
        cwd.join(file)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fold::{fold_class, fold_events, FoldClass};
    use crate::testutil::py_funcs;
    use crate::testutil::{Ev, Ev::C, Ev::R};
    use std::sync::Arc;

    /// A folded Python tree: functions `names` defined in `files`, called as `evs`.
    fn py_tree(names: &[&str], files: &[&str], evs: &[Ev]) -> CallTree {
        let mut f = py_funcs(names);
        for (x, file) in f.iter_mut().zip(files) {
            x.file = Some((*file).into());
        }
        let funcs = Arc::new(f);
        let classes: Vec<FoldClass> = funcs.iter().map(fold_class).collect();
        fold_events(funcs, &classes, Ev::events(evs)).0
    }

    /// main(app.py) -> json.loads(stdlib) -> cb(app.py) ; main -> rich.print(site) -> rich.render(site) ; main -> work -> deep
    fn sample() -> CallTree {
        let files = [
            "/p/app.py",
            "/usr/lib/python3.11/json/__init__.py",
            "/p/app.py",
            "/usr/lib/python3/dist-packages/rich/__init__.py",
            "/usr/lib/python3/dist-packages/rich/console.py",
            "/p/work.py",
            "/p/work.py",
        ];
        let evs = [C(0), C(1), C(2), R, R, C(3), C(4), R, R, C(5), C(6), R, R, R];
        py_tree(&["main", "loads", "cb", "print", "render", "work", "deep"], &files, &evs)
    }

    fn show(t: &CallTree) -> Vec<String> {
        t.preorder().iter().map(|&n| format!("{}{}", "  ".repeat(t.node(n).depth as usize - 1), t.func(n).unwrap().qualname)).collect()
    }

    fn re(s: &str) -> Vec<Regex> {
        vec![Regex::new(s).unwrap()]
    }

    const CWD: &str = "/p";

    #[test]
    fn hiding_stdlib_keeps_its_callbacks() {
        let s = Selection { hide_stdlib: true, ..Default::default() };
        assert_eq!(show(&s.apply(&sample(), Path::new(CWD))), vec!["main", "  cb", "  print", "    render", "  work", "    deep"]);
    }

    /// The origin rule alone, for a function outside any tree: the standard library (a
    /// builtin too) with `hide_stdlib`; installed packages with `hide_site_packages`, less the
    /// program's own.
    #[test]
    fn the_origin_rule_tells_one_function() {
        let funcs = sample().funcs.clone();
        let cwd = Path::new(CWD);
        let hidden = |s: &Selection| funcs.iter().filter(|f| s.hides_by_origin(f, cwd)).map(|f| f.qualname.as_str()).collect::<Vec<_>>();
        assert_eq!(hidden(&Selection { hide_stdlib: true, ..Default::default() }), ["loads"]);
        assert_eq!(hidden(&Selection { hide_site_packages: true, ..Default::default() }), ["print", "render"]);
        let own = Selection { hide_site_packages: true, program_packages: vec!["rich".into()], ..Default::default() };
        assert!(hidden(&own).is_empty());
        assert!(hidden(&Selection::default()).is_empty());
        let builtin =
            Function { language: crate::symbols::Language::Builtin, object: Some("builtins".into()), file: None, ..funcs[0].clone() };
        assert!(Selection { hide_stdlib: true, ..Default::default() }.hides_by_origin(&builtin, cwd));
    }

    #[test]
    fn hiding_site_packages() {
        let s = Selection { hide_site_packages: true, ..Default::default() };
        assert_eq!(show(&s.apply(&sample(), Path::new(CWD))), vec!["main", "  loads", "    cb", "  work", "    deep"]);
    }

    /// An installed CLI: `<module>` of the console script bin/tool -> cli.run (site) ->
    /// cli.render (site) -> rich.print (site); cli.run -> json.loads (stdlib).
    fn installed_cli() -> CallTree {
        let files = [
            "/venv/bin/tool",
            "/venv/lib/python3.11/site-packages/cli/__main__.py",
            "/venv/lib/python3.11/site-packages/cli/__main__.py",
            "/venv/lib/python3.11/site-packages/rich/console.py",
            "/usr/lib/python3.11/json/__init__.py",
        ];
        let evs = [C(0), C(1), C(2), C(3), R, R, C(4), R, R, R];
        py_tree(&["<module>", "run", "render", "print", "loads"], &files, &evs)
    }

    #[test]
    fn hiding_site_packages_keeps_an_installed_programs_own_package() {
        let t = installed_cli();
        let cwd = Path::new("/home/u");
        let entry: std::collections::HashSet<u32> = [0].into_iter().collect();
        assert_eq!(program_packages(&t, &entry, cwd), vec!["cli".to_string()]);
        let s = Selection { hide_site_packages: true, program_packages: program_packages(&t, &entry, cwd), ..Default::default() };
        assert_eq!(show(&s.apply(&t, cwd)), vec!["<module>", "  run", "    render", "    loads"]);
        // Without the entry module known, the whole of site-packages goes.
        let s = Selection { hide_site_packages: true, ..Default::default() };
        assert_eq!(show(&s.apply(&t, cwd)), vec!["<module>", "  loads"]);
    }

    #[test]
    fn include_and_exclude_by_name_file_and_module() {
        let t = sample();
        let cwd = Path::new(CWD);
        let s = Selection { include_file: re("^/p/"), ..Default::default() };
        assert_eq!(show(&s.apply(&t, cwd)), vec!["main", "  cb", "  work", "    deep"]);
        let s = Selection { exclude: re("^work$"), ..Default::default() };
        assert_eq!(show(&s.apply(&t, cwd)), vec!["main", "  loads", "    cb", "  print", "    render"]);
        let s = Selection { exclude_module: re("^rich"), ..Default::default() };
        assert_eq!(show(&s.apply(&t, cwd)), vec!["main", "  loads", "    cb", "  work", "    deep"]);
        let s = Selection { include_module: re("^(app|rich)"), ..Default::default() };
        assert_eq!(show(&s.apply(&t, cwd)), vec!["main", "  cb", "  print", "    render"]);
        let s = Selection { include: re("^(main|deep)$"), ..Default::default() };
        assert_eq!(show(&s.apply(&t, cwd)), vec!["main", "  deep"]);
        let s = Selection { exclude_file: re("json"), ..Default::default() };
        assert_eq!(show(&s.apply(&t, cwd)), vec!["main", "  print", "    render", "  work", "    deep"]);
    }

    #[test]
    fn focus_keeps_paths_to_matches() {
        let t = sample();
        let cwd = Path::new(CWD);
        let s = Selection { focus: re("^render$"), ..Default::default() };
        assert_eq!(show(&s.apply(&t, cwd)), vec!["main", "  print", "    render"]);
        let s = Selection { focus: re("^(print|work)$"), focus_subtree: true, ..Default::default() };
        assert_eq!(show(&s.apply(&t, cwd)), vec!["main", "  print", "    render", "  work", "    deep"]);
        let s = Selection { focus: re("^(print|work)$"), ..Default::default() };
        assert_eq!(show(&s.apply(&t, cwd)), vec!["main", "  print", "  work"]);
    }

    #[test]
    fn max_depth() {
        let s = Selection { max_depth: Some(1), ..Default::default() };
        assert_eq!(show(&s.apply(&sample(), Path::new(CWD))), vec!["main"]);
    }
}
