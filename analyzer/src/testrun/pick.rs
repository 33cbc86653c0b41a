//! Which of many chosen tests a prompt shows ([`cap_tests`]).

use rustc_hash::FxHashSet as HashSet;
use std::path::Path;
use trace_format::TestRun;

/// Of the chosen tests (in run order) with the code under test each ran (`code`: function ids,
/// one set per test), at most `max`: first one per distinct way of failing (exception type and
/// the innermost frame of the runner's traceback outside the tests, in run order), then the
/// tests that ran the most code the kept ones did not (a bug in shared code fails every test
/// alike: the tests of other classes and paths show where else it reaches), then the rest in
/// run order. Returned in run order.
pub fn cap_tests<F: Eq + std::hash::Hash + Copy>(tests: &[&TestRun], code: &[HashSet<F>], max: usize) -> Vec<usize> {
    if tests.len() <= max {
        return (0..tests.len()).collect();
    }
    // The innermost frame outside the tests (an assertion fails at each test's own line).
    let how = |t: &TestRun| {
        t.failure.as_ref().map(|f| {
            let last = f.frames.iter().rev().find(|x| !crate::plumbing::is_test_file(Path::new(&x.file)));
            (f.exception.clone(), last.map(|x| x.file.clone()), last.and_then(|x| x.line), f.phase.clone())
        })
    };
    let mut seen = HashSet::default();
    let mut keep: Vec<usize> = (0..tests.len()).filter(|&i| seen.insert(how(tests[i]))).take(max).collect();
    let empty = HashSet::default();
    let code_of = |i: usize| code.get(i).unwrap_or(&empty);
    let mut covered: HashSet<F> = keep.iter().flat_map(|&i| code_of(i).iter().copied()).collect();
    while keep.len() < max {
        // The first (in run order) of those adding the most; none adding any: run order.
        let best = (0..tests.len())
            .filter(|i| !keep.contains(i))
            .map(|i| (code_of(i).iter().filter(|f| !covered.contains(f)).count(), i))
            .max_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        let Some((_, i)) = best else { break };
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
        assert_eq!(cap_tests(&refs, &same, 3), [0, 4, 6]);
        // Nothing new to add: run order.
        assert_eq!(cap_tests(&refs, &same, 5), [0, 1, 2, 4, 6]);
        assert_eq!(cap_tests(&refs[..2], &same, 5), [0, 1]);
    }

    /// Every test fails alike: after the first, those that ran code the kept ones did not,
    /// most new code first.
    #[test]
    fn tests_that_fail_alike_are_picked_by_the_code_they_add() {
        let runs: Vec<TestRun> = (0..6).map(|i| failing(&format!("t{i}"), "AssertionError")).collect();
        let refs: Vec<&TestRun> = runs.iter().collect();
        let code: Vec<HashSet<u32>> = [&[1, 2][..], &[1, 2], &[1, 2, 3], &[1, 4, 5, 6], &[1, 2], &[1, 4, 5, 6, 7]]
            .iter()
            .map(|c| c.iter().copied().collect())
            .collect();
        // t0, then t5 (4 new), then t2 (3; t3 adds nothing after t5).
        assert_eq!(cap_tests(&refs, &code, 3), [0, 2, 5]);
        // Then run order among those adding nothing.
        assert_eq!(cap_tests(&refs, &code, 4), [0, 1, 2, 5]);
    }
}
