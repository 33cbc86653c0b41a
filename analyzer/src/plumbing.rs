//! Framework plumbing: installed packages whose code only carries control to the program
//! (command-line parsing and dispatch, plugin managers). In a prompt they take many tokens and
//! answer nothing: `rich data.csv` spends about 19k of its 64k tokens in click's argument
//! parsing. So by default, for prompts:
//!
//! - a function of a **framework package** (the curated list [`FRAMEWORKS`], plus `--plumbing
//!   PKG`) installed in site-packages keeps its tree line when it leads to other code (the
//!   path from the entry to the program's callback stays readable) or is where control enters
//!   the framework, but its source is not shown;
//! - calls made inside the framework that lead to no other code (its parser internals) are
//!   removed from the tree, and the prompt's note says how many;
//! - a framework package is **never collapsed** when the question names it (`click` in "Why does
//!   click reject...?"), when an `--include`/`--module`/`--focus` filter matches its name, or
//!   when the run's entry script belongs to it. `--show-plumbing` turns the rule off.
//!
//! The rule is a list, not a guess from the tree's shape: it is predictable, and what it hides
//! is named in the prompt.

use crate::calltree::{CallTree, Keep, NodeId, ROOT};
use crate::native::paths::cargo_crate;
use crate::pathclass::{module_name, origin, Origin};
use crate::select::Selection;
use regex::Regex;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::Path;

/// Installed packages that only parse a command line, dispatch to the program or manage
/// plugins (top-level import names).
pub const FRAMEWORKS: &[&str] = &[
    "click",
    "typer",
    "docopt",
    "fire",
    "pluggy",
    "cleo",
    "cliff",
    "argh",
    "plac",
    "clize",
    "rich_click",
    "cloup",
    "asyncclick",
    "stevedore",
    "defopt",
    "jsonargparse",
    "tyro",
    "cyclopts",
    // Rust crates (from cargo's registry, `-` read as `_`).
    "clap",
    "clap_builder",
    "clap_lex",
    "structopt",
    "lexopt",
    "pico_args",
    "bpaf",
    "gumdrop",
];

/// Test runners and their plugins (top-level import names; also every `pytest_*` plugin
/// package): plumbing for every prompt, also when the run's entry is the runner (`python -m
/// pytest`), since a test's question is about the code under test. unittest's runner is in the
/// standard library, hidden with it. coverage.py measures the run (pytest-cov starts it, and its
/// `atexit` handler saves the data: semver's `.pytest.ini` turns it on for every run) and is
/// no code under test.
pub const TEST_RUNNERS: &[&str] =
    &["pytest", "_pytest", "pluggy", "xdist", "execnet", "iniconfig", "_hypothesis_pytestplugin", "coverage", GOOGLETEST];

/// GoogleTest's package name here (its C++ namespace is `testing`).
pub const GOOGLETEST: &str = "googletest";

/// The package of a native function, if it is one: GoogleTest by its namespace, a Rust crate
/// by its path in cargo's registry.
pub fn native_package(f: &crate::symbols::Function) -> Option<String> {
    let q = f.qualname.trim_start_matches('<');
    if q.starts_with("testing::") {
        return Some(GOOGLETEST.to_string());
    }
    match f.file.as_deref() {
        Some(file) => cargo_crate(&file.to_string_lossy()),
        // Without debug information, a dependency's crate by its name.
        None if f.dependency_crate => crate::native::paths::rust_name_crate(&f.qualname),
        None => None,
    }
}

/// Whether a top-level package is a test runner or one of its plugins ([`TEST_RUNNERS`]).
pub fn is_test_runner(package: &str) -> bool {
    TEST_RUNNERS.contains(&package) || package.starts_with("pytest_")
}

/// Whether a source file is a test module by its name: `test_*.py`, `*_test.py`,
/// `conftest.py`, C/C++ `test_*`/`*_test`/`*_unittest` sources, or any file under a
/// `tests`/`test`/`testing` directory.
pub fn is_test_file(path: &Path) -> bool {
    let name = path.file_name().map(|n| n.to_string_lossy()).unwrap_or_default();
    // C and C++ test sources by the usual names (`calc_test.cc`, `calc_unittest.cpp`, `test_calc.c`).
    let (stem, ext) = name.rsplit_once('.').unwrap_or((&name, ""));
    let c_like = matches!(ext, "c" | "cc" | "cpp" | "cxx" | "C");
    (name.starts_with("test_") && name.ends_with(".py"))
        || (c_like && (stem.starts_with("test_") || stem.ends_with("_test") || stem.ends_with("_unittest")))
        || name.ends_with("_test.py")
        || name == "conftest.py"
        || parent_dirs(path).iter().any(|c| matches!(c.as_str(), "tests" | "test" | "testing"))
}

/// The names of the directories above `path`'s file, `.` and `..` resolved as text: a module
/// Python found through `tests/..` on `sys.path` (`tests/../pkg/gen.py`) is not in `tests`.
fn parent_dirs(path: &Path) -> Vec<String> {
    let mut dirs: Vec<String> = Vec::new();
    let parent = path.parent().map(|d| d.components()).into_iter().flatten();
    for c in parent {
        match c {
            std::path::Component::ParentDir => {
                dirs.pop();
            }
            std::path::Component::Normal(n) => dirs.push(n.to_string_lossy().into_owned()),
            _ => {}
        }
    }
    dirs
}

/// Packages that the name of their family stands for in a question or filter: "How does clap
/// parse ...?" keeps clap's builder and lexer too.
const FAMILIES: &[(&str, &str)] = &[("clap_builder", "clap"), ("clap_lex", "clap")];

/// Which packages to collapse. `Default` collapses nothing (the views show everything).
#[derive(Debug, Clone, Default)]
pub struct Plumbing {
    /// Top-level package names, after the exemptions of the question and the filters.
    pub packages: Vec<String>,
    /// The test runner is spliced out of whole runs' trees too, not only out of tests' trees
    /// ([`Plumbing::test_runners`], `slice diff`): see [`Plumbing::splices_runner`].
    pub runner_out_of_runs: bool,
}

/// What collapsing did to one tree.
#[derive(Debug, Clone)]
pub struct Collapsed {
    pub tree: CallTree,
    /// Function indices of the tree's plumbing functions (shown without source).
    pub funcs: HashSet<u32>,
    /// Nodes removed (calls inside a framework that led to no other code).
    pub removed: usize,
    /// The framework packages that occurred.
    pub packages: BTreeSet<String>,
}

fn named_in(text: &str, package: &str) -> bool {
    let words: Vec<String> = text
        .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '-'))
        .filter(|w| !w.is_empty())
        .map(|w| w.to_ascii_lowercase().replace('-', "_"))
        .collect();
    words.iter().any(|w| w == package)
}

impl Plumbing {
    /// The default rule for a prompt: [`FRAMEWORKS`] and `extra`, less the packages that the
    /// question names or that an include, module or focus filter of `sel` matches.
    pub fn for_prompt(question: &str, extra: &[String], sel: &Selection) -> Plumbing {
        let filters: Vec<&Regex> = sel.include.iter().chain(&sel.include_module).chain(&sel.include_file).chain(&sel.focus).collect();
        let mut packages: Vec<String> = Vec::new();
        for p in FRAMEWORKS.iter().chain(TEST_RUNNERS).map(|s| s.to_string()).chain(extra.iter().map(|s| s.replace('-', "_"))) {
            let family = FAMILIES.iter().find(|(m, _)| *m == p).map(|(_, f)| *f);
            let named = |text: &str| named_in(text, &p) || family.is_some_and(|f| named_in(text, f));
            if named(question) || filters.iter().any(|r| r.is_match(&p)) || packages.contains(&p) {
                continue;
            }
            packages.push(p);
        }
        Plumbing { packages, runner_out_of_runs: false }
    }

    /// Only the test runners ([`TEST_RUNNERS`], and every `pytest_*` plugin), and `extra`:
    /// for views that show whole call paths (`slice diff`), where what a failing test's
    /// runner does to report it would otherwise lead. The runner is spliced out of whole
    /// runs' trees as out of tests' ([`Plumbing::splices_runner`]): the paths of a run of a
    /// test suite start at the tests, and what only a failing run did starts at the code
    /// under test, not at the runner's failure reporting.
    pub fn test_runners(extra: &[String]) -> Plumbing {
        let mut packages: Vec<String> = TEST_RUNNERS.iter().map(|s| s.to_string()).collect();
        packages.extend(extra.iter().map(|s| s.replace('-', "_")));
        Plumbing { packages, runner_out_of_runs: true }
    }

    /// Only the test runners, as [`Plumbing::test_runners`], but spliced out of tests' trees
    /// only: for views of chosen tests (`slice tree --test ID`), whose trees start at the test.
    pub fn test_runners_in_tests(extra: &[String]) -> Plumbing {
        Plumbing { runner_out_of_runs: false, ..Plumbing::test_runners(extra) }
    }

    /// Whether [`splice_runner`] applies to a tree: to a test's tree whenever plumbing is
    /// collapsed, to a whole run's with [`Plumbing::runner_out_of_runs`].
    pub fn splices_runner(&self, test_tree: bool) -> bool {
        !self.is_off() && (test_tree || self.runner_out_of_runs)
    }

    pub fn is_off(&self) -> bool {
        self.packages.is_empty()
    }

    /// The framework package of a function, if it is one of [`Plumbing::packages`] installed
    /// in site-packages (for native code: a crate from cargo's registry).
    fn package_of(&self, f: &crate::symbols::Function, cwd: &Path) -> Option<String> {
        if origin(f) != Origin::SitePackages {
            return None;
        }
        let top = if f.language == crate::symbols::Language::Native {
            native_package(f)?
        } else {
            module_name(f, cwd).split('.').next()?.to_string()
        };
        (self.packages.contains(&top) || (is_test_runner(&top) && self.packages.iter().any(|p| p == "pytest"))).then_some(top)
    }

    /// What the rule reads of a function table (`cwd`: the run's directory), once for every
    /// tree of that table ([`TableFacts::exempt`], [`TableFacts::plumbing`]).
    pub fn facts(&self, funcs: &[crate::symbols::Function], cwd: &Path) -> TableFacts {
        TableFacts {
            pkg_of: funcs.iter().map(|f| self.package_of(f, cwd)).collect(),
            in_test_file: funcs
                .iter()
                .map(|f| {
                    f.language == crate::symbols::Language::Python
                        && origin(f) == Origin::Program
                        && f.file.as_deref().is_some_and(is_test_file)
                })
                .collect(),
        }
    }

    /// Collapse the plumbing of one tree. `entry`: the entry script's function indices (a
    /// framework the entry script belongs to is not collapsed).
    pub fn collapse(&self, tree: &CallTree, cwd: &Path, entry: &HashSet<u32>) -> Collapsed {
        self.collapse_owned(tree.clone(), cwd, entry)
    }

    /// [`Plumbing::collapse`] of a tree it takes: with nothing to collapse the tree itself is
    /// handed back, no copy.
    pub fn collapse_owned(&self, tree: CallTree, cwd: &Path, entry: &HashSet<u32>) -> Collapsed {
        if self.is_off() {
            return Collapsed { tree, funcs: HashSet::new(), removed: 0, packages: BTreeSet::new() };
        }
        let mut out = Collapsed { tree: CallTree::new(tree.funcs.clone()), funcs: HashSet::new(), removed: 0, packages: BTreeSet::new() };
        let facts = self.facts(&tree.funcs, cwd);
        let exempt = facts.exempt(&tree, entry);
        let plumb_func = |func: u32| facts.plumbing(func, &exempt);
        let n = tree.nodes.len();
        // Code generated at run time (`<string>`: attrs' and dataclasses' methods, `eval`'s
        // lambdas) that plumbing calls is plumbing too; parents come before children.
        let generated: Vec<bool> = tree
            .funcs
            .iter()
            .map(|f| f.language == crate::symbols::Language::Python && f.file.as_deref().is_some_and(|p| p.to_string_lossy() == "<string>"))
            .collect();
        // Where the test runner is plumbing, so is the installed packages' code that only the
        // runner called (its report's colouring: `crate::testrun::runner_work`).
        let runner_is_plumbing = self.packages.iter().any(|p| p == "pytest");
        let kinds = if runner_is_plumbing { crate::testrun::function_kinds(&tree.funcs, cwd) } else { Vec::new() };
        let runner_work = if runner_is_plumbing { crate::testrun::runner_work(&tree, &kinds) } else { vec![false; n] };
        let runners_dependency = |id: usize, func: u32| runner_work[id] && kinds.get(func as usize).is_some_and(|k| k.is_code());
        let mut is_plumb: Vec<bool> = vec![false; n];
        for (id, node) in tree.nodes.iter().enumerate().skip(1) {
            let parent = node.parent as usize;
            is_plumb[id] = plumb_func(node.func).is_some()
                || (parent != ROOT as usize && is_plumb[parent] && generated.get(node.func as usize).copied().unwrap_or(false))
                || runners_dependency(id, node.func);
        }
        // A function of such a package is shown without source only where no test or program
        // code called it (a test of pygments itself calls it directly).
        let called_by_code: HashSet<u32> =
            tree.nodes.iter().enumerate().skip(1).filter(|&(id, _)| !is_plumb[id]).map(|(_, node)| node.func).collect();
        // Leaves up (children have larger ids than their parent): does a node's subtree hold
        // code that is not plumbing?
        let mut other_below = vec![false; n];
        for id in (1..n).rev() {
            let p = tree.nodes[id].parent as usize;
            if !is_plumb[id] || other_below[id] {
                other_below[p] = true;
            }
        }
        let keep = |tree: &CallTree, id: NodeId| -> bool {
            let i = id as usize;
            let parent = tree.nodes[i].parent;
            !is_plumb[i] || other_below[i] || parent == ROOT || !is_plumb[parent as usize]
        };
        let sizes = tree.subtree_sizes();
        for id in 1..n as NodeId {
            let i = id as usize;
            if is_plumb[i] {
                let func = tree.nodes[i].func;
                if let Some(p) = plumb_func(func) {
                    out.packages.insert(p.to_string());
                    out.funcs.insert(func);
                } else if !runners_dependency(i, func) || !called_by_code.contains(&func) {
                    out.funcs.insert(func);
                }
                if !keep(&tree, id) && keep(&tree, tree.nodes[i].parent) {
                    out.removed += sizes[i];
                }
            }
        }
        // `rebuild` asks about the nodes of `tree`, top down: a dropped node takes its subtree.
        out.tree = tree.rebuild_into(|t, id| if keep(t, id) { Keep::Keep } else { Keep::Drop });
        out
    }
}

/// What the plumbing rule reads of each function of a table ([`Plumbing::facts`]).
#[derive(Debug, Clone)]
pub struct TableFacts {
    /// The framework package of each function, if it is one of [`Plumbing::packages`].
    pkg_of: Vec<Option<String>>,
    /// Whether each function is the program's own Python code in a test file.
    in_test_file: Vec<bool>,
}

impl TableFacts {
    /// The framework packages that are not plumbing in `tree` (a tree of the table the facts
    /// were read from; `entry`: its entry script's function indices). A framework the entry
    /// script belongs to is the program (a test runner never is), and so is one that a test
    /// calls directly: click's own tests exercise click.
    pub fn exempt(&self, tree: &CallTree, entry: &HashSet<u32>) -> HashSet<&str> {
        let mut exempt: HashSet<&str> =
            entry.iter().filter_map(|&i| self.pkg_of.get(i as usize)?.as_deref()).filter(|p| !is_test_runner(p)).collect();
        for node in &tree.nodes {
            if node.parent == ROOT || !self.in_test_file.get(tree.nodes[node.parent as usize].func as usize).copied().unwrap_or(false) {
                continue;
            }
            if let Some(p) = self.pkg_of.get(node.func as usize).and_then(|p| p.as_deref()).filter(|p| !is_test_runner(p)) {
                exempt.insert(p);
            }
        }
        exempt
    }

    /// The framework package of function `func` (an index into the table) when it is plumbing
    /// in a tree whose [`TableFacts::exempt`] packages are `exempt`.
    pub fn plumbing(&self, func: u32, exempt: &HashSet<&str>) -> Option<&str> {
        let p = self.pkg_of.get(func as usize)?.as_deref()?;
        (!exempt.contains(p)).then_some(p)
    }
}

/// The runner is plumbing: the test runner's functions that collapsing kept as tree lines
/// (`collapsed`, [`Collapsed::funcs`]: its calls on the way to the tests, the hook calls, the
/// assertion rewriting a failing `assert` calls) are spliced out of `tree`, and what they led to
/// (the tests, their fixtures, the code under test) moves up to their callers. The one rule for
/// tests' trees ([`crate::analysis::prepare`]) and, with [`Plumbing::test_runners`], for whole
/// runs' (`slice diff`); [`Plumbing::splices_runner`] says when.
///
/// The standard library the runner called for its own work (pathlib for collecting, `ast` for
/// rewriting assertions, `inspect` for reports: what `--stdlib` shows) goes with it: a standard
/// library call of a runner function that reaches no code but the runner's and the standard
/// library's is dropped, with its callees. One that leads to a test stays.
///
/// unittest's runner is the standard library's: `--stdlib` shows it instead of collapsing it,
/// and a test's tree under `python -m unittest --stdlib` began with the runner's per-test
/// protocol (`TestResult.startTest`, `_Outcome`, `TestCase._callSetUp`) and its failure report
/// (`TextTestResult.addFailure` formatting the traceback, 100 of 173 nodes). Its functions are
/// spliced as the collapsed runner's are, except where a test calls one itself (an assertion
/// helper, `TestCase.assertEqual`): that call is the test's code, and stays (the standard
/// library it called for its message goes, as under a collapsed runner's function).
///
/// `test_tree`: the tree is a test's, whose first level the runner called (unittest's
/// `TestCase.run` is the test's boundary, not in the tree): a standard library call there
/// that reaches no code (the `with` of `_Outcome.testPartExecutor`) is the runner's too.
pub fn splice_runner(tree: CallTree, collapsed: &HashSet<u32>, cwd: &Path, test_tree: bool) -> CallTree {
    use crate::pathclass::{origin, Origin};
    use crate::testrun::{function_kind, FuncKind};
    let stdlib_runner = |f: &crate::symbols::Function| origin(f) == Origin::Stdlib && function_kind(f, cwd) == FuncKind::Runner;
    let mut runner: HashSet<u32> =
        collapsed.iter().copied().filter(|&f| tree.function(f).is_some_and(|f| function_kind(f, cwd) == FuncKind::Runner)).collect();
    let shown_runner: HashSet<u32> =
        tree.nodes.iter().skip(1).map(|n| n.func).filter(|&f| tree.function(f).is_some_and(stdlib_runner)).collect();
    runner.extend(shown_runner.iter().copied());
    if runner.is_empty() {
        return tree;
    }
    let mut kinds: HashMap<u32, FuncKind> = HashMap::new();
    let mut kind = |f: u32| *kinds.entry(f).or_insert_with(|| tree.function(f).map_or(FuncKind::Other, |x| function_kind(x, cwd)));
    // Whether each node's subtree holds code that is neither the runner's nor the standard
    // library's (children have larger ids than their parent).
    let n = tree.len() + 1; // (the root included)
    let mut reaches_code = vec![false; n];
    for id in (1..n).rev() {
        let node = tree.node(id as NodeId);
        reaches_code[id] |= kind(node.func).is_code();
        if reaches_code[id] {
            reaches_code[node.parent as usize] = true;
        }
    }
    // A shown runner function that a test calls itself (root's children: the test's own).
    let called_by_code: Vec<bool> = (0..n)
        .map(|id| {
            let node = tree.node(id as NodeId);
            id != 0 && shown_runner.contains(&node.func) && node.parent != 0 && kind(tree.node(node.parent).func).is_code()
        })
        .collect();
    let runners_stdlib: Vec<bool> = (0..n)
        .map(|id| {
            let node = tree.node(id as NodeId);
            id != 0
                && !reaches_code[id]
                && (if node.parent == 0 { test_tree } else { runner.contains(&tree.node(node.parent).func) })
                && kind(node.func) == FuncKind::Stdlib
        })
        .collect();
    tree.rebuild_into(|t, n| {
        if runners_stdlib[n as usize] {
            Keep::Drop
        } else if runner.contains(&t.node(n).func) && !called_by_code[n as usize] {
            Keep::Splice
        } else {
            Keep::Keep
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calltree::TreeBuilder;
    use crate::symbols::{Function, Language};
    use std::sync::Arc;

    fn f(name: &str, file: &str) -> Function {
        Function {
            language: Language::Python,
            name: name.rsplit('.').next().unwrap_or(name).to_string(),
            qualname: name.to_string(),
            file: Some(file.into()),
            first_line: Some(1),
            last_line: Some(2),
            object: None,
            program_library: false,
            program_crate: false,
            dependency_crate: false,
            std_dependency: false,
            rust_symbol: false,
            made_in: None,
            inlined: false,
        }
    }

    const SP: &str = "/v/lib/python3.11/site-packages";

    /// main (program) -> Command.main (click) -> [parse_args (click) -> split (click),
    /// invoke (click) -> callback (program) -> render (rich)]
    fn tree() -> CallTree {
        let funcs = Arc::new(vec![
            f("main", "/p/app.py"),
            f("Command.main", &format!("{SP}/click/core.py")),
            f("Parser.parse_args", &format!("{SP}/click/parser.py")),
            f("split_opt", &format!("{SP}/click/parser.py")),
            f("Context.invoke", &format!("{SP}/click/core.py")),
            f("callback", "/p/app.py"),
            f("Table.render", &format!("{SP}/rich/table.py")),
        ]);
        let mut b = TreeBuilder::new(funcs);
        let main = b.child(ROOT, 0);
        let cm = b.child(main, 1);
        let pa = b.child(cm, 2);
        b.child(pa, 3);
        let inv = b.child(cm, 4);
        let cb = b.child(inv, 5);
        b.child(cb, 6);
        b.finish()
    }

    fn names(t: &CallTree) -> Vec<String> {
        t.preorder().iter().map(|&n| format!("{}{}", "  ".repeat(t.node(n).depth as usize - 1), t.func(n).unwrap().qualname)).collect()
    }

    #[test]
    fn framework_internals_go_the_path_to_the_program_stays() {
        let p = Plumbing::for_prompt("How is the table drawn?", &[], &Selection::default());
        let c = p.collapse(&tree(), Path::new("/p"), &HashSet::new());
        assert_eq!(names(&c.tree), vec!["main", "  Command.main", "    Context.invoke", "      callback", "        Table.render"]);
        assert_eq!(c.removed, 2);
        assert_eq!(c.packages.iter().collect::<Vec<_>>(), vec!["click"]);
        assert_eq!(c.funcs, [1u32, 2, 3, 4].into_iter().collect());
    }

    #[test]
    fn a_package_the_question_or_a_filter_names_is_kept() {
        let p = Plumbing::for_prompt("Why does Click reject the option?", &[], &Selection::default());
        assert!(!p.packages.contains(&"click".to_string()));
        assert_eq!(p.collapse(&tree(), Path::new("/p"), &HashSet::new()).removed, 0);
        let sel = Selection { include_module: vec![Regex::new("^click").unwrap()], ..Selection::default() };
        assert!(!Plumbing::for_prompt("q", &[], &sel).packages.contains(&"click".to_string()));
    }

    /// A Rust program: clap's crates from cargo's registry are plumbing, the program's own
    /// derive code under them stays; naming clap keeps its builder and lexer too.
    /// main -> parse -> (2, 3); main -> 4: an app whose argument parser calls back into it.
    fn main_parse_run(funcs: Arc<Vec<Function>>) -> crate::calltree::CallTree {
        let mut b = TreeBuilder::new(funcs);
        let main = b.child(ROOT, 0);
        let parse = b.child(main, 1);
        b.child(parse, 2);
        b.child(parse, 3);
        b.child(main, 4);
        b.finish()
    }

    #[test]
    fn rust_argument_parsing_from_cargos_registry() {
        let reg = "/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f";
        let native = |name: &str, file: &str| Function { language: Language::Native, ..f(name, file) };
        let funcs = Arc::new(vec![
            native("app::main", "/w/app/src/main.rs"),
            native("clap_builder::derive::Parser::parse", &format!("{reg}/clap_builder-4.5.20/src/derive.rs")),
            native("clap_lex::RawArgs::next", &format!("{reg}/clap_lex-0.7.2/src/lib.rs")),
            native("<app::Opt as clap_builder::derive::Args>::augment_args", "/w/app/src/main.rs"),
            native("app::run", "/w/app/src/main.rs"),
        ]);
        let t = main_parse_run(funcs);
        let c = Plumbing::for_prompt("How does app run?", &[], &Selection::default()).collapse(&t, Path::new("/w/app"), &HashSet::new());
        assert_eq!(
            names(&c.tree),
            [
                "app::main",
                "  clap_builder::derive::Parser::parse",
                "    <app::Opt as clap_builder::derive::Args>::augment_args",
                "  app::run"
            ]
        );
        assert_eq!(c.packages.iter().collect::<Vec<_>>(), vec!["clap_builder", "clap_lex"]);
        assert_eq!(c.removed, 1);
        let p = Plumbing::for_prompt("How does clap parse the options?", &[], &Selection::default());
        assert_eq!(p.collapse(&t, Path::new("/w/app"), &HashSet::new()).removed, 0, "{:?}", p.packages);

        // The same program without debug information: clap's crates are told by their names
        // (marked as dependencies by `symbols`), and collapsed the same.
        let nameonly = |name: &str, dep: bool| Function { file: None, dependency_crate: dep, program_crate: !dep, ..native(name, "") };
        let funcs = Arc::new(vec![
            nameonly("app::main", false),
            nameonly("clap_builder::derive::Parser::parse", true),
            nameonly("<P as clap_lex::ext::OsStrExt>::find", true),
            nameonly("<app::Opt as clap_builder::derive::Args>::augment_args", false),
            nameonly("app::run", false),
        ]);
        let t = main_parse_run(funcs);
        let c = Plumbing::for_prompt("How does app run?", &[], &Selection::default()).collapse(&t, Path::new("/w/app"), &HashSet::new());
        assert_eq!(c.packages.iter().collect::<Vec<_>>(), vec!["clap_builder", "clap_lex"]);
        assert_eq!(c.removed, 1);
    }

    /// click's own regression test exercises click: a framework that a test file calls
    /// directly is the code under test, while the runner stays collapsed, also as the entry.
    /// A whole run of a test suite, with `slice diff`'s rule (the runner is plumbing, spliced
    /// out of whole runs too): the paths start at the tests; the assertion rewriting a failing
    /// `assert` calls and the runner's failure reporting are gone, the code under test (a
    /// framework the test calls: click) stays where it was called.
    #[test]
    fn the_runner_is_spliced_out_of_a_whole_run_for_diff() {
        let funcs = Arc::new(vec![
            f("<module>", &format!("{SP}/pytest/__main__.py")),
            f("_multicall", &format!("{SP}/pluggy/_callers.py")),
            f("pytest_pyfunc_call", &format!("{SP}/_pytest/python.py")),
            f("test_option_parsing", "/p/tests/test_options.py"),
            f("CliRunner.invoke", &format!("{SP}/click/testing.py")),
            f("Parser.parse_args", &format!("{SP}/click/parser.py")),
            f("_call_reprcompare", &format!("{SP}/_pytest/assertion/rewrite.py")),
            f("pytest_runtest_makereport", &format!("{SP}/_pytest/runner.py")),
            f("Item.repr_failure", &format!("{SP}/_pytest/python.py")),
            f("Options.__repr__", "/p/app/options.py"),
            f("Path.exists", "/v/lib/python3.11/pathlib.py"),
            f("TestCase.run", "/v/lib/python3.11/unittest/case.py"),
            f("TestCase.assertEqual", "/v/lib/python3.11/unittest/case.py"),
        ]);
        let mut b = TreeBuilder::new(funcs);
        let main = b.child(ROOT, 0);
        let hook = b.child(main, 1);
        // The runner's own use of the standard library (what `--stdlib` keeps): dropped.
        b.child(hook, 10);
        let call = b.child(hook, 2);
        let test = b.child(call, 3);
        let invoke = b.child(test, 4);
        b.child(invoke, 5);
        b.child(test, 6);
        // unittest's runner (`--stdlib` shows it) that leads to a test: spliced; what a test
        // calls of it: kept.
        let run = b.child(call, 11);
        let unit = b.child(run, 3);
        b.child(unit, 12);
        let report = b.child(hook, 7);
        let repr = b.child(report, 8);
        b.child(repr, 9);
        let t = b.finish();
        let cwd = Path::new("/p");
        let entry: HashSet<u32> = [0u32].into_iter().collect();
        let diff = Plumbing::test_runners(&[]);
        let c = diff.collapse(&t, cwd, &entry);
        assert!(diff.splices_runner(false) && diff.splices_runner(true));
        assert_eq!(
            names(&splice_runner(c.tree, &c.funcs, cwd, false)),
            ["test_option_parsing", "  CliRunner.invoke", "    Parser.parse_args", "  TestCase.assertEqual", "Options.__repr__"]
        );
        // A prompt's rule splices the runner out of tests' trees only; without plumbing, never.
        let prompt = Plumbing::for_prompt("Why?", &[], &Selection::default());
        assert!(prompt.splices_runner(true) && !prompt.splices_runner(false));
        assert!(!Plumbing::default().splices_runner(true));
        // Nothing of the runner collapsed (a question that names pytest): pytest's lines stay;
        // unittest's, which no rule collapses (the standard library's), go all the same.
        assert_eq!(
            names(&splice_runner(t.clone(), &HashSet::new(), cwd, false)),
            [
                "<module>",
                "  _multicall",
                "    Path.exists",
                "    pytest_pyfunc_call",
                "      test_option_parsing",
                "        CliRunner.invoke",
                "          Parser.parse_args",
                "        _call_reprcompare",
                "        TestCase.assertEqual",
                "    pytest_runtest_makereport",
                "      Item.repr_failure",
                "        Options.__repr__"
            ]
        );
    }

    /// `python -m unittest --stdlib`: unittest's runner is the standard library's, shown, not
    /// collapsed. A test's tree starts at the test all the same: the runner's per-test protocol
    /// and its failure report (with the standard library it called for them) are gone; the
    /// assertion helper the test called stays, without the standard library it called for its
    /// message (difflib), as pytest's assertion report goes.
    #[test]
    fn unittests_runner_shown_with_the_standard_library_is_spliced_out_of_a_tests_tree() {
        let ut = "/v/lib/python3.11/unittest";
        let funcs = Arc::new(vec![
            f("TestCase.run", &format!("{ut}/case.py")),
            f("TestResult.startTest", &format!("{ut}/result.py")),
            f("_GeneratorContextManager.__enter__", "/v/lib/python3.11/contextlib.py"),
            f("_Outcome.testPartExecutor", &format!("{ut}/case.py")),
            f("DivideTest.test_basic", "/p/tests/test_more.py"),
            f("divide", "/p/more_itertools/more.py"),
            f("TestCase.assertEqual", &format!("{ut}/case.py")),
            f("SequenceMatcher.get_opcodes", "/v/lib/python3.11/difflib.py"),
            f("TextTestResult.addFailure", &format!("{ut}/runner.py")),
            f("extract_tb", "/v/lib/python3.11/traceback.py"),
        ]);
        let mut b = TreeBuilder::new(funcs);
        // The test's tree: what `TestCase.run` (its boundary, not in the tree) called.
        b.child(ROOT, 1);
        let enter = b.child(ROOT, 2);
        b.child(enter, 3);
        let part = b.child(ROOT, 3);
        let test = b.child(part, 4);
        b.child(test, 5);
        let assert = b.child(test, 6);
        b.child(assert, 7);
        let report = b.child(ROOT, 8);
        b.child(report, 9);
        let t = b.finish();
        assert_eq!(
            names(&splice_runner(t.clone(), &HashSet::new(), Path::new("/p"), true)),
            ["DivideTest.test_basic", "  divide", "  TestCase.assertEqual"]
        );
        // A whole run's tree (`slice diff`): the first level is the program's.
        assert_eq!(
            names(&splice_runner(t, &HashSet::new(), Path::new("/p"), false)),
            ["_GeneratorContextManager.__enter__", "DivideTest.test_basic", "  divide", "  TestCase.assertEqual"]
        );
    }

    /// The rule read once per function table and applied per tree (`slice tests`' ranking):
    /// click is plumbing in a tree where only the program calls it, not in one where a test
    /// file calls it; the runner always is, whoever calls it.
    #[test]
    fn table_facts_say_per_tree_what_is_plumbing() {
        let funcs = Arc::new(vec![
            f("test_cli", "/p/tests/test_cli.py"),
            f("CliRunner.invoke", &format!("{SP}/click/testing.py")),
            f("run", "/p/app/cli.py"),
            f("Command.main", &format!("{SP}/click/core.py")),
            f("_call_reprcompare", &format!("{SP}/_pytest/assertion/rewrite.py")),
        ]);
        let p = Plumbing::for_prompt("", &[], &Selection::default());
        let facts = p.facts(&funcs, Path::new("/p"));
        // test_cli -> run -> Command.main ; test_cli -> _call_reprcompare
        let mut b = TreeBuilder::new(funcs.clone());
        let test = b.child(ROOT, 0);
        let run = b.child(test, 2);
        b.child(run, 3);
        b.child(test, 4);
        let via_program = b.finish();
        let exempt = facts.exempt(&via_program, &HashSet::new());
        assert!(exempt.is_empty(), "{exempt:?}");
        let verdicts: Vec<Option<&str>> = (0..5).map(|i| facts.plumbing(i, &exempt)).collect();
        assert_eq!(verdicts, [None, Some("click"), None, Some("click"), Some("_pytest")]);
        // test_cli -> CliRunner.invoke -> Command.main ; test_cli -> _call_reprcompare
        let mut b = TreeBuilder::new(funcs);
        let test = b.child(ROOT, 0);
        let invoke = b.child(test, 1);
        b.child(invoke, 3);
        b.child(test, 4);
        let direct = b.finish();
        let exempt = facts.exempt(&direct, &HashSet::new());
        let verdicts: Vec<Option<&str>> = (0..5).map(|i| facts.plumbing(i, &exempt)).collect();
        assert_eq!(verdicts, [None, None, None, None, Some("_pytest")]);
    }

    #[test]
    fn a_framework_called_by_a_test_is_the_code_under_test_and_the_runner_never_is() {
        let funcs = Arc::new(vec![
            f("<module>", &format!("{SP}/pytest/__main__.py")),
            f("pytest_pyfunc_call", &format!("{SP}/_pytest/python.py")),
            f("test_option_parsing", "/p/tests/test_options.py"),
            f("CliRunner.invoke", &format!("{SP}/click/testing.py")),
            f("Parser.parse_args", &format!("{SP}/click/parser.py")),
            f("split_opt", &format!("{SP}/click/parser.py")),
            f("hook_impls", &format!("{SP}/pluggy/_manager.py")),
            f("CallInfo.from_call", &format!("{SP}/_pytest/runner.py")),
        ]);
        let mut b = TreeBuilder::new(funcs);
        let main = b.child(ROOT, 0);
        let call = b.child(main, 1);
        let test = b.child(call, 2);
        let invoke = b.child(test, 3);
        let parse = b.child(invoke, 4);
        b.child(parse, 5);
        let hooks = b.child(main, 6);
        b.child(hooks, 7);
        let t = b.finish();
        let entry: HashSet<u32> = [0u32].into_iter().collect();
        let c = Plumbing::for_prompt("Why does the option fail?", &[], &Selection::default()).collapse(&t, Path::new("/p"), &entry);
        assert_eq!(
            names(&c.tree),
            [
                "<module>",
                "  pytest_pyfunc_call",
                "    test_option_parsing",
                "      CliRunner.invoke",
                "        Parser.parse_args",
                "          split_opt"
            ]
        );
        assert!(!c.funcs.contains(&3) && !c.funcs.contains(&5), "click is not plumbing here: {:?}", c.funcs);
        assert!(c.funcs.contains(&0) && c.funcs.contains(&1), "pytest is, even as the entry");
        assert_eq!(c.packages.iter().collect::<Vec<_>>(), ["_pytest", "pluggy", "pytest"]);
        assert!(is_test_runner("pytest_asyncio") && !is_test_runner("pytestish"));
        assert!(
            is_test_file(Path::new("/p/tests/helpers.py"))
                && is_test_file(Path::new("/p/test_x.py"))
                && !is_test_file(Path::new("/p/app/latest.py"))
        );
        // A package Python found through `tests/..` on `sys.path` is not test code.
        assert!(!is_test_file(Path::new("/p/tests/../pkg/gen.py")) && !is_test_file(Path::new("tests/../pkg/gen.py")));
        assert!(is_test_file(Path::new("/p/pkg/../tests/helpers.py")));
    }

    #[test]
    fn the_entry_scripts_own_framework_and_extra_packages() {
        let p = Plumbing::for_prompt("q", &[], &Selection::default());
        let c = p.collapse(&tree(), Path::new("/p"), &[1u32].into_iter().collect());
        assert_eq!(c.removed, 0, "entry belongs to click");
        let p = Plumbing::for_prompt("q", &["rich".into()], &Selection::default());
        let c = p.collapse(&tree(), Path::new("/p"), &HashSet::new());
        assert!(c.packages.contains("rich") && c.funcs.contains(&6));
        assert_eq!(names(&c.tree).last().unwrap(), "        Table.render", "a leaf entered from program code stays");
    }
}
