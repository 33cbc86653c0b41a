//! Start-up pruning: removing the part of a run that is not the feature.
//!
//! - Baseline ([`Baseline`], [`prune_baseline`]): a leaf of the analyzed tree that also
//!   occurs at the same path (the sequence of function keys from the root) in a baseline run
//!   is removed; this repeats until no leaf qualifies, so whole start-up subtrees go while
//!   anything with a feature-only call below it stays.
//! - Automatic, for Python ([`prune_imports`]): the work done while importing modules is
//!   start-up. Every node called directly by the import machinery (module bodies, import
//!   finders and loaders) is removed with its subtree. A `<module>` body that something else
//!   ran (`exec(code)`, `runpy.run_path`, execnet's and pytest-xdist's workers, whose whole
//!   work runs under an exec'd `<module>`) is not an import and stays. Only when the process
//!   recorded no import machinery at all, and so cannot tell imports apart, is every
//!   `<module>` node but the entry script's taken for an import.

use crate::calltree::{CallTree, Keep, NodeId, ROOT};
use crate::symbols::{FuncId, Function, Language};
use std::collections::{HashMap, HashSet};

/// Whether a function is a Python module body.
pub fn is_module(f: &Function) -> bool {
    f.language == Language::Python && f.name == "<module>"
}

/// The function indices of the entry module(s) of a thread's tree: `<module>` nodes with no
/// `<module>` above them. Only a process's main thread runs its entry script; in other
/// threads every module body is an import.
pub fn entry_modules(tree: &CallTree, main_thread: bool) -> HashSet<u32> {
    let mut out = HashSet::new();
    if !main_thread {
        return out;
    }
    // (node, has a module ancestor)
    let mut stack: Vec<(NodeId, bool)> = tree.node(ROOT).children.iter().map(|&c| (c, false)).collect();
    while let Some((n, under_module)) = stack.pop() {
        let m = tree.func(n).is_some_and(is_module);
        if m && !under_module {
            out.insert(tree.node(n).func);
        }
        let below = under_module || m;
        stack.extend(tree.node(n).children.iter().map(|&c| (c, below)));
    }
    out
}

/// Whether the function table holds CPython's import machinery
/// (`<frozen importlib._bootstrap>`...), which every real recording of a Python process that
/// imported anything does: then [`crate::calltree::Node::via_import`] tells an imported module
/// body from one run by `exec`.
fn import_machinery_recorded(tree: &CallTree) -> bool {
    tree.funcs.iter().any(|f| crate::fold::fold_class(f) == crate::fold::FoldClass::Import)
}

/// Whether a module body is code the standard library compiled from a string and ran (the
/// scaffolding of `dataclasses`, `typing`, `enum`...): file `<string>`, called by a
/// standard-library function. Class creation, start-up like an import.
fn generated_by_stdlib(t: &CallTree, n: NodeId) -> bool {
    let from_string = t.func(n).and_then(|f| f.file.as_deref()).is_some_and(|p| p.as_os_str() == "<string>");
    let parent = t.node(n).parent;
    from_string && parent != ROOT && t.func(parent).is_some_and(|f| crate::pathclass::origin(f) == crate::pathclass::Origin::Stdlib)
}

/// Remove the subtrees of module bodies reached through an import, and of everything else the
/// import machinery called (finders, loaders). Returns the pruned tree and the number of
/// nodes removed.
pub fn prune_imports(tree: &CallTree, entry: &HashSet<u32>) -> (CallTree, usize) {
    let before = tree.len();
    // Without the import machinery in the table, every module body but the entry's counts.
    let modules_are_imports = !import_machinery_recorded(tree);
    let t = tree.rebuild(|t, n| {
        let node = t.node(n);
        let imported = node.via_import || (t.func(n).is_some_and(is_module) && (modules_are_imports || generated_by_stdlib(t, n)));
        if imported && !entry.contains(&node.func) {
            Keep::Drop
        } else {
            Keep::Keep
        }
    });
    let removed = before - t.len();
    (t, removed)
}

/// The paths a baseline run reached, as a trie of functions (by [`FuncId`]: the baselines and
/// the runs pruned with them must be read with one [`crate::symbols::Interner`]).
#[derive(Debug, Default)]
pub struct Baseline {
    /// Trie nodes; node 0 is the root. Each maps a function to a child.
    children: Vec<HashMap<FuncId, usize>>,
}

impl Baseline {
    pub fn new() -> Baseline {
        Baseline { children: vec![HashMap::new()] }
    }

    /// Add every path of a tree.
    pub fn add(&mut self, tree: &CallTree) {
        let mut stack: Vec<(NodeId, usize)> = tree.node(ROOT).children.iter().map(|&c| (c, 0)).collect();
        while let Some((n, at)) = stack.pop() {
            let key = tree.func_id(n);
            let next = match self.children[at].get(&key) {
                Some(&c) => c,
                None => {
                    let c = self.children.len();
                    self.children.push(HashMap::new());
                    self.children[at].insert(key, c);
                    c
                }
            };
            stack.extend(tree.node(n).children.iter().map(|&c| (c, next)));
        }
    }

    /// Number of paths (trie nodes, the root excluded).
    pub fn len(&self) -> usize {
        self.children.len() - 1
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Remove, repeatedly, the leaves that the baseline reached at the same path. Returns the
/// pruned tree and the number of nodes removed.
pub fn prune_baseline(tree: &CallTree, base: &Baseline) -> (CallTree, usize) {
    let order = tree.preorder();
    // Baseline trie node of each analyzed node (same path), if any.
    let mut at: Vec<Option<usize>> = vec![None; tree.nodes.len()];
    at[ROOT as usize] = Some(0);
    for &n in &order {
        let p = tree.node(n).parent;
        at[n as usize] = at[p as usize].and_then(|b| base.children[b].get(&tree.func_id(n)).copied());
    }
    // Post-order (reverse pre-order visits children before parents): a node goes when the
    // baseline has its path and all its children went (it became a leaf).
    let mut gone = vec![false; tree.nodes.len()];
    for &n in order.iter().rev() {
        let node = tree.node(n);
        gone[n as usize] = at[n as usize].is_some() && node.children.iter().all(|&c| gone[c as usize]);
    }
    let before = tree.len();
    let t = tree.rebuild(|_, n| if gone[n as usize] { Keep::Drop } else { Keep::Keep });
    let removed = before - t.len();
    (t, removed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fold::{fold_class, fold_events, FoldClass};
    use crate::testutil::{py_funcs, Ev, Ev::C, Ev::R};
    use std::sync::Arc;

    fn tree(names: &[&str], evs: &[Ev]) -> CallTree {
        let mut funcs = py_funcs(names);
        for f in &mut funcs {
            f.file = Some(format!("/p/{}.py", f.qualname).into());
        }
        let funcs = Arc::new(funcs);
        let classes: Vec<FoldClass> = funcs.iter().map(fold_class).collect();
        crate::testutil::interned(fold_events(funcs, &classes, Ev::events(evs)).0)
    }

    fn show(t: &CallTree) -> Vec<String> {
        t.preorder().iter().map(|&n| format!("{}{}", "  ".repeat(t.node(n).depth as usize - 1), t.func(n).unwrap().qualname)).collect()
    }

    const NAMES: &[&str] = &["main", "setup", "config", "feature", "log"];

    #[test]
    fn a_baseline_numbered_differently_prunes_the_same_functions() {
        // The baseline's process lists its functions in another order: one interner for both
        // traces gives them the same ids.
        use crate::testutil::{py, TraceBuilder};
        let d = tempfile::tempdir().unwrap();
        let (main, setup, feature) = (py("app.py", "main", 1, 5), py("app.py", "setup", 6, 8), py("app.py", "feature", 9, 12));
        let b = TraceBuilder::new(&d.path().join("base.d"), &["app.py"], d.path()).unwrap();
        b.process(7, &[setup.clone(), main.clone()], &[(7, "MainThread", &[C(1), C(0), R, R])]).unwrap();
        let r = TraceBuilder::new(&d.path().join("run.d"), &["app.py"], d.path()).unwrap();
        r.process(9, &[main, feature, setup], &[(9, "MainThread", &[C(0), C(2), R, C(1), R, R])]).unwrap();
        let mut interner = crate::symbols::Interner::default();
        let base_trace = crate::fold::load_trace(&d.path().join("base.d"), &mut interner, Default::default()).unwrap();
        let run = crate::fold::load_trace(&d.path().join("run.d"), &mut interner, Default::default()).unwrap();
        let mut base = Baseline::new();
        base.add(&base_trace.processes[0].threads[0].tree);
        let (p, removed) = prune_baseline(&run.processes[0].threads[0].tree, &base);
        assert_eq!(show(&p), vec!["main", "  feature"]);
        assert_eq!(removed, 1);
    }

    fn base(evs: &[Ev]) -> Baseline {
        let mut b = Baseline::new();
        b.add(&tree(NAMES, evs));
        b
    }

    #[test]
    fn leaf_at_same_path_is_removed() {
        let t = tree(NAMES, &[C(0), C(1), R, C(3), R, R]);
        let (p, removed) = prune_baseline(&t, &base(&[C(0), C(1), R, R]));
        assert_eq!(show(&p), vec!["main", "  feature"]);
        assert_eq!(removed, 1);
    }

    #[test]
    fn same_function_at_another_path_is_kept() {
        // Baseline calls log from setup; the feature calls log from feature.
        let t = tree(NAMES, &[C(0), C(3), C(4), R, R, R]);
        let (p, removed) = prune_baseline(&t, &base(&[C(0), C(1), C(4), R, R, R]));
        assert_eq!(show(&p), vec!["main", "  feature", "    log"]);
        assert_eq!(removed, 0);
    }

    #[test]
    fn removal_repeats_up_whole_startup_subtrees() {
        // setup -> config -> log is all baseline: the whole subtree goes, leaf by leaf.
        let evs = [C(0), C(1), C(2), C(4), R, R, R, C(3), R, R];
        let t = tree(NAMES, &evs);
        let (p, removed) = prune_baseline(&t, &base(&[C(0), C(1), C(2), C(4), R, R, R, R]));
        assert_eq!(show(&p), vec!["main", "  feature"]);
        assert_eq!(removed, 3);
    }

    #[test]
    fn parent_with_a_feature_only_child_stays() {
        // In the feature run, setup also calls feature: setup stays, its baseline leaf config goes.
        let t = tree(NAMES, &[C(0), C(1), C(2), R, C(3), R, R, R]);
        let (p, _) = prune_baseline(&t, &base(&[C(0), C(1), C(2), R, R, R]));
        assert_eq!(show(&p), vec!["main", "  setup", "    feature"]);
    }

    #[test]
    fn identical_run_prunes_to_nothing() {
        let evs = [C(0), C(1), R, C(3), R, R];
        let t = tree(NAMES, &evs);
        let (p, removed) = prune_baseline(&t, &base(&evs));
        assert!(p.is_empty());
        assert_eq!(removed, 3);
    }

    #[test]
    fn import_time_work_is_pruned_but_not_the_entry_module() {
        // <module>(entry) -> <module>(imported) -> helper ; <module>(entry) -> main
        let mut funcs = py_funcs(&["<module>", "<module>", "helper", "main"]);
        funcs[0].file = Some("/p/app.py".into());
        funcs[1].file = Some("/p/lib.py".into());
        let funcs = Arc::new(funcs);
        let classes: Vec<FoldClass> = funcs.iter().map(fold_class).collect();
        let t = fold_events(funcs, &classes, Ev::events(&[C(0), C(1), C(2), R, R, C(3), R, R])).0;
        let entry = entry_modules(&t, true);
        assert_eq!(entry, [0].into_iter().collect());
        let (p, removed) = prune_imports(&t, &entry);
        assert_eq!(show(&p), vec!["<module>", "  main"]);
        assert_eq!(removed, 2);
        // A finder called by the import machinery is import-time work too.
        let mut funcs = py_funcs(&["<module>", "_find_and_load", "Finder.find_spec", "main"]);
        funcs[1].file = Some("<frozen importlib._bootstrap>".into());
        let funcs = Arc::new(funcs);
        let classes: Vec<FoldClass> = funcs.iter().map(fold_class).collect();
        let t2 = fold_events(funcs, &classes, Ev::events(&[C(0), C(1), C(2), R, R, C(3), R, R])).0;
        let (p2, _) = prune_imports(&t2, &entry_modules(&t2, true));
        assert_eq!(show(&p2), vec!["<module>", "  main"]);
        // Off the main thread, every module body is an import.
        assert!(entry_modules(&t, false).is_empty());
    }

    #[test]
    fn a_module_body_run_by_exec_is_not_an_import() {
        // pytest-xdist's worker: `python -c "exec(eval(...))"` runs execnet's code as a
        // `<module>` from `<string>`, and everything the worker does (the tests) is under it.
        // <module>(-c) -> [_find_and_load] -> <module>(execnet) -> helper
        //              -> <module>(exec'd) -> [_find_and_load] -> <module>(pytest)
        //                                  -> serve -> test_param
        let mut funcs = py_funcs(&["<module>", "_find_and_load", "<module>", "helper", "<module>", "<module>", "serve", "test_param"]);
        funcs[0].file = Some("<string>".into());
        funcs[1].file = Some("<frozen importlib._bootstrap>".into());
        funcs[2].file = Some("/sp/execnet/__init__.py".into());
        funcs[4].file = Some("<string>".into());
        funcs[4].first_line = Some(1);
        funcs[5].file = Some("/sp/pytest/__init__.py".into());
        let funcs = Arc::new(funcs);
        let classes: Vec<FoldClass> = funcs.iter().map(fold_class).collect();
        let evs = [C(0), C(1), C(2), C(3), R, R, R, C(4), C(1), C(5), R, R, C(6), C(7), R, R, R, R];
        let t = fold_events(funcs.clone(), &classes, Ev::events(&evs)).0;
        let (p, removed) = prune_imports(&t, &entry_modules(&t, true));
        assert_eq!(show(&p), vec!["<module>", "  <module>", "    serve", "      test_param"]);
        assert_eq!(removed, 3);
        // In another thread the exec'd body stays too (only imports go).
        let (p, _) = prune_imports(&t, &entry_modules(&t, false));
        assert_eq!(show(&p), vec!["<module>", "  <module>", "    serve", "      test_param"]);
    }

    #[test]
    fn a_module_body_the_standard_library_execs_is_start_up() {
        // `@dataclass` in the entry script: dataclasses' `_create_fn` execs a `<module>` from
        // `<string>` that defines `__create_fn__`; the program's own exec stays.
        // <module>(app) -> [_find_and_load] ; _create_fn -> <module>(<string>) ; run -> <module>(<string>) -> f
        let mut funcs = py_funcs(&["<module>", "_find_and_load", "_create_fn", "<module>", "run", "f"]);
        funcs[0].file = Some("/p/app.py".into());
        funcs[1].file = Some("<frozen importlib._bootstrap>".into());
        funcs[2].file = Some("/usr/lib/python3.12/dataclasses.py".into());
        funcs[3].file = Some("<string>".into());
        funcs[4].file = Some("/p/app.py".into());
        funcs[5].file = Some("<string>".into());
        let funcs = Arc::new(funcs);
        let classes: Vec<FoldClass> = funcs.iter().map(fold_class).collect();
        let evs = [C(0), C(1), R, C(2), C(3), R, R, C(4), C(3), C(5), R, R, R, R];
        let t = fold_events(funcs, &classes, Ev::events(&evs)).0;
        let (p, removed) = prune_imports(&t, &entry_modules(&t, true));
        assert_eq!(show(&p), vec!["<module>", "  _create_fn", "  run", "    <module>", "      f"]);
        assert_eq!(removed, 1);
    }
}
