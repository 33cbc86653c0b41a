//! State a test reused that an earlier test built (`docs/prompts.md`, "Tests").

use super::FuncKind;
use crate::calltree::CallTree;
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use trace_format::TestRun;

/// Most earlier tests a test's prompt shows reused state from, and most functions per test.
const EARLIER_TESTS: usize = 3;
const EARLIER_FUNCTIONS: usize = 20;

/// State a test reused that an earlier test of its thread built: a cache filled on first use
/// (a lexer, a table of prices), a session or module fixture computed once. Found as a call
/// `F → G` that a function this test also ran made in one earlier test only, and not in this
/// one, where `G` is code under test (not the runner, not the standard library, not a test
/// file) and that earlier test was the first to run `F` (the first use filled the cache); or
/// where `G` is a fixture this test requested that the runner computed in one earlier test
/// only. Per earlier test (first builder first, at most [`EARLIER_TESTS`]): its `seq`, the
/// calls found, and the part of its tree that holds them (those calls with everything under
/// them, under their callers).
///
/// A function defined inside `F` (`F.<locals>.g`, a lambda) is not state: each call of `F`
/// makes it anew, so a call of it is a branch the test did not take. Nor is code compiled
/// from a string (a doctest's examples, `<doctest m.f[0]>`): each test compiles its own; nor
/// an import hook's method (`find_spec`, `exec_module`, ...): the import system's work.
pub fn built_earlier(p: &crate::fold::ProcessTrees, test: &TestRun, kinds: &[FuncKind]) -> Vec<(usize, Vec<String>, CallTree)> {
    let Some(th) = p.threads.iter().find(|th| th.tid == test.tid) else { return Vec::new() };
    in_thread(&th.tests, test, kinds)
}

/// [`built_earlier`] over the trees of the tests of `test`'s thread, in order.
fn in_thread(tests: &[CallTree], test: &TestRun, kinds: &[FuncKind]) -> Vec<(usize, Vec<String>, CallTree)> {
    let Some(tree) = tests.get(test.seq as usize) else { return Vec::new() };
    let in_test: HashSet<u32> = tree.nodes.iter().skip(1).map(|n| n.func).collect();
    let kind = |f: u32| kinds.get(f as usize).copied().unwrap_or(FuncKind::Other);
    // Over the thread's tests: the first test each function ran in, and in how many tests
    // each call (caller, callee) was made.
    let mut first_seen: HashMap<u32, usize> = HashMap::default();
    let mut edge_tests: HashMap<(u32, u32), u32> = HashMap::default();
    for (j, t) in tests.iter().enumerate() {
        let mut edges: HashSet<(u32, u32)> = HashSet::default();
        for node in t.nodes.iter().skip(1) {
            first_seen.entry(node.func).or_insert(j);
            if node.parent != crate::calltree::ROOT && in_test.contains(&t.nodes[node.parent as usize].func) {
                edges.insert((t.nodes[node.parent as usize].func, node.func));
            }
        }
        for e in edges {
            *edge_tests.entry(e).or_default() += 1;
        }
    }
    let mut flagged_funcs: HashSet<u32> = HashSet::default();
    let mut out = Vec::new();
    for (j, earlier) in tests.iter().enumerate().take(test.seq as usize) {
        if out.len() >= EARLIER_TESTS || flagged_funcs.len() >= EARLIER_FUNCTIONS {
            break;
        }
        let n = earlier.nodes.len();
        let mut flagged = vec![false; n];
        let mut names = Vec::new();
        for (m, node) in earlier.nodes.iter().enumerate().skip(1) {
            if node.parent == crate::calltree::ROOT || flagged_funcs.len() >= EARLIER_FUNCTIONS {
                continue;
            }
            let (f, g) = (earlier.nodes[node.parent as usize].func, node.func);
            if !in_test.contains(&f) || in_test.contains(&g) || flagged_funcs.contains(&g) || edge_tests.get(&(f, g)) != Some(&1) {
                continue;
            }
            let Some(gf) = earlier.function(g) else { continue };
            let made_by_caller = earlier.function(f).is_some_and(|ff| gf.qualname.starts_with(&format!("{}.<locals>.", ff.qualname)));
            // Code compiled from a string (a doctest's examples, `exec`): its file is a name in
            // angle brackets, and each compile makes new code, as a lambda is made anew.
            let from_string = gf.file.is_some() && gf.key_is_bracketed();
            // An import hook's method (setuptools' `DistutilsMetaFinder.find_spec`), which the
            // import system called because a module was imported for the first time: the
            // module is state an earlier test left, but the hook is not the code under test.
            let import_hook = matches!(gf.name.as_str(), "find_spec" | "find_module" | "create_module" | "exec_module" | "load_module");
            if made_by_caller || from_string || import_hook {
                continue;
            }
            let test_code = gf.file.as_deref().is_some_and(crate::plumbing::is_test_file);
            let reused = match kind(g) {
                k if k.is_code() && !test_code => first_seen.get(&f) == Some(&j),
                // A fixture this test requested, computed once by an earlier test.
                k if k.is_code() => kind(f) == FuncKind::Runner && test.fixtures.contains(&gf.name),
                _ => false,
            };
            if reused {
                flagged[m] = true;
                flagged_funcs.insert(g);
                let caller = earlier.function(f).map(|x| x.qualname.as_str()).unwrap_or("?");
                names.push(format!("{} → {}", trace_format::escape::code_span(caller), trace_format::escape::code_span(&gf.qualname)));
            }
        }
        if names.is_empty() {
            continue;
        }
        // Pre-order: whether a node is inside a flagged call, and the callers to keep.
        let mut inside = vec![false; n];
        let mut keep_caller = vec![false; n];
        let mut on_path = vec![false; n];
        for m in earlier.preorder() {
            let m = m as usize;
            let parent = earlier.nodes[m].parent as usize;
            inside[m] = flagged[m] || (m != 0 && parent != 0 && inside[parent]);
            if flagged[m] {
                keep_caller[parent] = true;
                let mut a = earlier.nodes[parent].parent as usize;
                while a != 0 && !on_path[a] {
                    on_path[a] = true;
                    a = earlier.nodes[a].parent as usize;
                }
            }
        }
        let part = earlier.rebuild(|_, id| {
            let i = id as usize;
            if inside[i] || keep_caller[i] {
                crate::calltree::Keep::Keep
            } else if on_path[i] {
                crate::calltree::Keep::Splice
            } else {
                crate::calltree::Keep::Drop
            }
        });
        out.push((j, names, part));
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::testutil::{py_funcs, Ev};
    use Ev::{C, R};

    /// `lexer` filled a cache in the first test (the second only reads it): flagged. `key`
    /// made a lambda and called it in the first test only: each call of `key` makes its
    /// lambda anew, so that is a branch, not state. Nor is the code `run` compiled from a
    /// string and ran in the first test only (a doctest's example: each test's is its own).
    #[test]
    fn a_cache_filled_earlier_is_state_a_callers_own_lambda_is_not() {
        let names = [
            "test_a",
            "test_b",
            "tokenize",
            "lexer",
            "key",
            "key.<locals>.<lambda>",
            "run",
            "<module>",
            "<module>",
            "DistutilsMetaFinder.find_spec",
        ];
        let mut funcs = py_funcs(&names);
        funcs[7].file = Some("<doctest m.a[0]>".into());
        funcs[8].file = Some("<doctest m.b[0]>".into());
        let funcs = std::sync::Arc::new(funcs);
        let classes: Vec<_> = funcs.iter().map(crate::fold::fold_class).collect();
        let fold = |evs: &[Ev]| crate::fold::fold_events(funcs.clone(), &classes, Ev::events(evs)).0;
        let first = fold(&[C(0), C(2), C(3), R, R, C(2), R, C(4), C(5), R, R, C(6), C(7), R, C(9), R, R, R]);
        let second = fold(&[C(1), C(2), R, C(4), R, C(6), C(8), R, R, R]);
        let mut test = crate::testrun::test_run("t.py::test_b", trace_format::TestOutcome::Failed);
        test.seq = 1;
        let kinds = vec![super::FuncKind::Other; names.len()];
        let found = super::in_thread(&[first, second], &test, &kinds);
        let names: Vec<(usize, Vec<String>)> = found.into_iter().map(|(j, n, _)| (j, n)).collect();
        assert_eq!(names, [(0, vec!["`tokenize` → `lexer`".to_string()])]);
    }
}
