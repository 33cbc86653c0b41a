//! Which of many chosen tests a prompt shows ([`cap_tests`]).

use rustc_hash::FxHashSet as HashSet;
use std::path::Path;
use trace_format::TestRun;

/// The words of a test id or a question, to match one against the other: split at every
/// character that is not a letter or digit, lowercased, numbers kept (`test_ordinalize[13-13th]`:
/// `test`, `ordinalize`, `13`, `13th`).
pub fn id_words(text: &str) -> HashSet<String> {
    text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase).collect()
}

/// Of the chosen tests (in run order) with the code under test each ran (`code`: function ids,
/// one set per test), at most `max`: first one per distinct way of failing (exception type and
/// the innermost frame of the runner's traceback outside the tests; of each, the test whose id
/// shares the most of `question`'s words ([`id_words`]), else the first; most common first;
/// when no test failed, one per way of passing or skipping), then the failing tests left, then
/// the tests that ran the most code the kept ones did not (a bug in shared code fails every test alike: the
/// tests of other classes and paths show where else it reaches), among equals those whose ids
/// share the most words with the question, then run order. Returned in run order.
pub fn cap_tests<F: Eq + std::hash::Hash + Copy>(
    tests: &[&TestRun],
    code: &[HashSet<F>],
    question: &HashSet<String>,
    max: usize,
) -> Vec<usize> {
    if tests.len() <= max {
        return (0..tests.len()).collect();
    }
    let named: Vec<usize> = tests.iter().map(|t| id_words(&t.id).intersection(question).count()).collect();
    // The innermost frame outside the tests (an assertion fails at each test's own line).
    let how = |t: &TestRun| {
        t.failure.as_ref().map(|f| {
            let last = f.frames.iter().rev().find(|x| !crate::plumbing::is_test_file(Path::new(&x.file)));
            (f.exception.clone(), last.map(|x| x.file.clone()), last.and_then(|x| x.line), f.phase.clone())
        })
    };
    // Per way, in order of first appearance: the test the question names most, else the first;
    // and how many tests fail that way.
    let mut ways: Vec<(_, usize, usize)> = Vec::new();
    for i in 0..tests.len() {
        let w = how(tests[i]);
        match ways.iter_mut().find(|(x, ..)| *x == w) {
            Some((_, best, n)) => {
                *n += 1;
                if named[i] > named[*best] {
                    *best = i;
                }
            }
            None => ways.push((w, i, 1)),
        }
    }
    // The way most tests fail first (stable: then first appearance): where fewer tests than ways
    // fit (a small budget), the one shown is the bug's common face, not whichever came first
    // (isodate: 1 `test_sub_date` of 9 failures shown, 8 were `test_calc_date`'s).
    // A way of failing before a way of passing or skipping, however many passed: `--test
    // 'tests/test_compare.py::*'` matched 89 tests, 4 of them failing, and the passing ones
    // were the most common way.
    let failed = |i: usize| tests[i].outcome.is_failure();
    ways.sort_by_key(|w| std::cmp::Reverse(w.2));
    // The ways of failing; with none, the others (a glob of passing tests: the first of each).
    let any_failed = ways.iter().any(|w| failed(w.1));
    let mut keep: Vec<usize> = ways.into_iter().filter(|w| failed(w.1) == any_failed).map(|(_, i, _)| i).take(max).collect();
    let empty = HashSet::default();
    let code_of = |i: usize| code.get(i).unwrap_or(&empty);
    let mut covered: HashSet<F> = keep.iter().flat_map(|&i| code_of(i).iter().copied()).collect();
    while keep.len() < max {
        // Failing tests first; of those adding the most (none adding any: all), the one the
        // question names most, then the first in run order.
        let best = (0..tests.len())
            .filter(|i| !keep.contains(i))
            .map(|i| (failed(i), code_of(i).iter().filter(|f| !covered.contains(f)).count(), named[i], i))
            .max_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)).then(b.3.cmp(&a.3)));
        let Some((_, _, _, i)) = best else { break };
        covered.extend(code_of(i).iter().copied());
        keep.push(i);
    }
    keep.sort_unstable();
    keep
}

#[cfg(test)]
mod tests {
    use super::cap_tests;
    use rustc_hash::FxHashSet as HashSet;
    use trace_format::{TestFailure, TestOutcome, TestRun};

    fn failing(id: &str, exception: &str) -> TestRun {
        let mut t = crate::testrun::test_run(id, TestOutcome::Failed);
        t.failure = Some(TestFailure { exception: Some(exception.into()), ..Default::default() });
        t
    }

    #[test]
    fn a_few_tests_are_kept_one_per_way_of_failing_first() {
        let runs: Vec<TestRun> = ["a", "b", "c", "d"]
            .iter()
            .map(|id| failing(id, "AssertionError"))
            .chain([failing("e", "KeyError"), failing("f", "AssertionError"), failing("g", "TypeError")])
            .collect();
        let refs: Vec<&TestRun> = runs.iter().collect();
        let same: Vec<HashSet<u32>> = vec![HashSet::from_iter([1]); runs.len()];
        let none = HashSet::default();
        assert_eq!(cap_tests(&refs, &same, &none, 3), [0, 4, 6]);
        // Nothing new to add: run order.
        assert_eq!(cap_tests(&refs, &same, &none, 5), [0, 1, 2, 4, 6]);
        assert_eq!(cap_tests(&refs[..2], &same, &none, 5), [0, 1]);
        // Fewer places than ways: the way most tests fail, though another came first.
        let runs: Vec<TestRun> =
            [failing("s", "KeyError"), failing("a", "ValueError"), failing("b", "ValueError"), failing("c", "TypeError")].into();
        let refs: Vec<&TestRun> = runs.iter().collect();
        assert_eq!(cap_tests(&refs, &same, &none, 1), [1]);
        assert_eq!(cap_tests(&refs, &same, &none, 2), [0, 1]);
    }

    /// Failing tests come before passing ones, however many passed alike (`--test GLOB`
    /// matching a few failures among many passing tests).
    #[test]
    fn failing_tests_are_kept_before_passing_ones() {
        let passing = |id: &str| crate::testrun::test_run(id, TestOutcome::Passed);
        let runs: Vec<TestRun> = vec![
            passing("p0"),
            passing("p1"),
            failing("f2", "AssertionError"),
            passing("p3"),
            failing("f4", "AssertionError"),
            passing("p5"),
        ];
        let refs: Vec<&TestRun> = runs.iter().collect();
        // The passing tests ran more code than the failing ones.
        let code: Vec<HashSet<u32>> =
            [&[1, 2, 3][..], &[4, 5, 6], &[1], &[7, 8], &[1], &[9, 10]].iter().map(|c| c.iter().copied().collect()).collect();
        let none = HashSet::default();
        assert_eq!(cap_tests(&refs, &code, &none, 1), [2]);
        assert_eq!(cap_tests(&refs, &code, &none, 2), [2, 4]);
        // Then the passing tests that ran the most code the kept ones did not.
        assert_eq!(cap_tests(&refs, &code, &none, 3), [1, 2, 4]);
        assert_eq!(cap_tests(&refs, &code, &none, 4), [0, 1, 2, 4]);
    }

    /// Every test fails alike: after the first, those that ran code the kept ones did not,
    /// most new code first.
    #[test]
    fn tests_that_fail_alike_are_picked_by_the_code_they_add() {
        let runs: Vec<TestRun> = (0..6).map(|i| failing(&format!("t{i}"), "AssertionError")).collect();
        let refs: Vec<&TestRun> = runs.iter().collect();
        let none = HashSet::default();
        let code: Vec<HashSet<u32>> = [&[1, 2][..], &[1, 2], &[1, 2, 3], &[1, 4, 5, 6], &[1, 2], &[1, 4, 5, 6, 7]]
            .iter()
            .map(|c| c.iter().copied().collect())
            .collect();
        // t0, then t5 (4 new), then t2 (3; t3 adds nothing after t5).
        assert_eq!(cap_tests(&refs, &code, &none, 3), [0, 2, 5]);
        // Then run order among those adding nothing.
        assert_eq!(cap_tests(&refs, &code, &none, 4), [0, 1, 2, 5]);
    }

    /// The tests the question names come first among equals: as the one of their way of
    /// failing, and when they add no code the others did not.
    #[test]
    fn the_tests_the_question_names_are_kept_among_equals() {
        let ids = [
            "t.py::test_ordinal[1-1st]",
            "t.py::test_ordinal[13-13th]",
            "t.py::test_ordinalize[1-1st]",
            "t.py::test_ordinalize[13-13th]",
            "t.py::test_ordinal[2-2nd]",
        ];
        let runs: Vec<TestRun> = ids.iter().map(|id| failing(id, "AssertionError")).collect();
        let refs: Vec<&TestRun> = runs.iter().collect();
        // test_ordinalize ran ordinalize too.
        let code: Vec<HashSet<u32>> = [&[1][..], &[1], &[1, 2], &[1, 2], &[1]].iter().map(|c| c.iter().copied().collect()).collect();
        let q = super::id_words("ordinalize(13) gives '13rd' instead of '13th'");
        assert!(q.contains("13") && q.contains("13th") && q.contains("ordinalize"), "{q:?}");
        // The one way of failing: its test the question names most (3 words: test_ordinalize's
        // 13th); no other adds code it did not run, so the next the question names (2 words).
        assert_eq!(cap_tests(&refs, &code, &q, 2), [1, 3]);
        // Without the question: the first, then the first adding ordinalize.
        assert_eq!(cap_tests(&refs, &code, &HashSet::default(), 2), [0, 2]);
    }
}
