//! A spectrum inside one test: the test's own invocations of the code under test.
//!
//! A failing test often calls the same function several times (click's test invokes its
//! command through `CliRunner.invoke` four times, asserting after each), and the run stops at
//! the failure: the last of those calls is the one whose result failed, the earlier ones
//! passed their assertions. What ran only in the last call goes with failure more than what
//! ran in every call: an Ochiai score over the calls, one failing and the earlier ones
//! passing ([`InvocationTracker`] records them while the test's events are folded;
//! [`Invocations::scores`] scores them; `docs/prompts.md`, "Tests").

use rustc_hash::FxHashMap as HashMap;

/// The calls a test's code made directly to one function, and the functions each reached.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Callee {
    /// How many times the test's code called it.
    pub calls: u32,
    /// Function (index of the process's table) -> in how many calls before the last it ran.
    pub earlier: HashMap<u32, u32>,
    /// The functions the last call reached (itself included), once each.
    pub last: Vec<u32>,
}

/// A test's direct calls from its own code, by the function called (index of the process's
/// function table).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Invocations {
    pub callees: HashMap<u32, Callee>,
}

impl Invocations {
    /// The score of each function the last call of a repeated callee reached: with `n` calls
    /// and the function in `ep` of the `n - 1` earlier ones, its Ochiai score `1/sqrt(1 + ep)`
    /// above that of a function that ran in every call (`1/sqrt(n)`), scaled to 0..1: 1 when it
    /// ran only in the last call, 0 when it ran in all. A callee whose calls all reached the
    /// same functions says nothing and is skipped; over several callees a function keeps its
    /// highest score. Only functions with a score above 0 are returned.
    pub fn scores(&self) -> HashMap<u32, f64> {
        let mut out: HashMap<u32, f64> = HashMap::default();
        for c in self.callees.values().filter(|c| c.calls >= 2) {
            let floor = 1.0 / (c.calls as f64).sqrt();
            for &f in &c.last {
                let ep = c.earlier.get(&f).copied().unwrap_or(0);
                let s = ((1.0 / (1.0 + ep as f64).sqrt() - floor) / (1.0 - floor)).clamp(0.0, 1.0);
                if s > 0.0 {
                    let e = out.entry(f).or_default();
                    *e = e.max(s);
                }
            }
        }
        out
    }
}

/// Records [`Invocations`] while a test's events are folded. The test's code is the functions
/// of test files ([`crate::plumbing::is_test_file`]): the first frame of test code opened where
/// none is open is a *root* (a fixture, the test function), and each call made directly from a
/// root (through transparent frames only: a comprehension) is one call of its callee, which
/// records every function that runs beneath it. Memory: per callee, its functions, never the
/// events.
#[derive(Debug, Clone, Default)]
pub struct InvocationTracker {
    /// Per function index: whether it is test code.
    test_code: Vec<bool>,
    /// Stack index of the open root frame.
    root: Option<usize>,
    /// The callee of the call under way and its frame's stack index.
    current: Option<(u32, usize)>,
    /// Per function index: the number of the call that last recorded it (0: none).
    stamp: Vec<u32>,
    call_no: u32,
    reached: Vec<u32>,
    out: Invocations,
}

impl InvocationTracker {
    pub fn new(test_code: Vec<bool>) -> InvocationTracker {
        let n = test_code.len();
        InvocationTracker { test_code, stamp: vec![0; n], ..Default::default() }
    }

    /// A call of `func` whose frame is at stack index `idx`; `parent`: the stack index of the
    /// nearest frame below it that is not transparent.
    pub fn call(&mut self, func: u32, idx: usize, parent: Option<usize>) {
        let fi = func as usize;
        if let Some((_, _)) = self.current {
            self.reach(func);
            return;
        }
        match self.root {
            None => {
                if self.test_code.get(fi).copied().unwrap_or(false) {
                    self.root = Some(idx);
                }
            }
            Some(r) if parent == Some(r) => {
                let c = self.out.callees.entry(func).or_default();
                if c.calls > 0 {
                    for f in std::mem::take(&mut c.last) {
                        *c.earlier.entry(f).or_default() += 1;
                    }
                }
                c.calls += 1;
                self.call_no += 1;
                self.reached.clear();
                self.current = Some((func, idx));
                self.reach(func);
            }
            Some(_) => {}
        }
    }

    fn reach(&mut self, func: u32) {
        let fi = func as usize;
        if fi >= self.stamp.len() {
            self.stamp.resize(fi + 1, 0);
        }
        if self.stamp[fi] != self.call_no {
            self.stamp[fi] = self.call_no;
            self.reached.push(func);
        }
    }

    /// The frame at stack index `idx` returned.
    pub fn ret(&mut self, idx: usize) {
        if let Some((callee, at)) = self.current {
            if at == idx {
                self.current = None;
                if let Some(c) = self.out.callees.get_mut(&callee) {
                    c.last = std::mem::take(&mut self.reached);
                }
            }
        }
        if self.root == Some(idx) {
            self.root = None;
        }
    }

    /// The invocations of the test that ends here (a call still under way counts as the
    /// last); the tracker is ready for the next test.
    pub fn take(&mut self) -> Invocations {
        if let Some((callee, _)) = self.current.take() {
            if let Some(c) = self.out.callees.get_mut(&callee) {
                c.last = std::mem::take(&mut self.reached);
            }
        }
        self.root = None;
        std::mem::take(&mut self.out)
    }

    /// [`InvocationTracker::take`], for the last test.
    pub fn finish(mut self) -> Invocations {
        self.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Functions: 0 test, 1 invoke, 2 always, 3 help, 4 only_last, 5 helper (test code).
    fn run(calls: &[&[u32]]) -> Invocations {
        let mut t = InvocationTracker::new(vec![true, false, false, false, false, true]);
        t.call(0, 0, None);
        for c in calls {
            t.call(1, 1, Some(0));
            for (i, &f) in c.iter().enumerate() {
                t.call(f, 2 + i, Some(1 + i));
            }
            for i in (0..c.len()).rev() {
                t.ret(2 + i);
            }
            t.ret(1);
        }
        t.ret(0);
        t.finish()
    }

    #[test]
    fn what_ran_only_in_the_last_call_scores_highest_and_what_ran_in_every_call_nothing() {
        // invoke x4: always in all; help in calls 2 and 4; only_last in call 4.
        let inv = run(&[&[2], &[2, 3], &[2], &[2, 3, 4]]);
        let c = &inv.callees[&1];
        assert_eq!((c.calls, c.earlier[&2], c.earlier[&3]), (4, 3, 1));
        let s = inv.scores();
        assert_eq!(s.get(&2), None, "in every call: no evidence");
        assert_eq!(s.get(&1), None, "the callee itself");
        assert!((s[&4] - 1.0).abs() < 1e-9);
        // help: 1/sqrt(2) above 1/sqrt(4), scaled: (0.7071 - 0.5) / 0.5.
        assert!((s[&3] - (std::f64::consts::FRAC_1_SQRT_2 - 0.5) / 0.5).abs() < 1e-9, "{s:?}");
    }

    #[test]
    fn calls_that_reached_the_same_code_or_a_single_call_say_nothing() {
        assert!(run(&[&[2, 3], &[2, 3]]).scores().is_empty());
        assert!(run(&[&[2, 3, 4]]).scores().is_empty());
    }

    #[test]
    fn only_direct_calls_of_the_first_test_code_open_are_counted() {
        let mut t = InvocationTracker::new(vec![true, false, false, false, false, true]);
        // A runner frame (not test code) calls the test; the test calls helper (test code), which
        // calls invoke twice: not direct calls of the root.
        t.call(2, 0, None);
        t.call(0, 1, Some(0));
        t.call(5, 2, Some(1));
        for _ in 0..2 {
            t.call(1, 3, Some(2));
            t.ret(3);
        }
        t.ret(2);
        t.ret(1);
        let inv = t.finish();
        assert_eq!(inv.callees.len(), 1, "{inv:?}");
        assert_eq!(inv.callees[&5].last, vec![5, 1]);
    }

    #[test]
    fn folding_a_test_records_its_own_repeated_calls() {
        use crate::testutil::Ev::{C, R};
        let mut funcs = crate::testutil::py_funcs(&[
            "_slicetrace_test_begin",
            "_slicetrace_test_end",
            "pytest_pyfunc_call",
            "test_x",
            "CliRunner.invoke",
            "get_default",
            "get_help_record",
        ]);
        let files = [
            "/tmp/slice-trace-rt-1/_slicetrace_tests.py",
            "/tmp/slice-trace-rt-1/_slicetrace_tests.py",
            "/v/site-packages/_pytest/python.py",
            "/p/tests/test_x.py",
            "/p/pkg/testing.py",
            "/p/pkg/core.py",
            "/p/pkg/core.py",
        ];
        for (f, file) in funcs.iter_mut().zip(files) {
            f.file = Some(file.into());
        }
        let funcs = std::sync::Arc::new(funcs);
        let classes: Vec<crate::fold::FoldClass> = funcs.iter().map(crate::fold::fold_class).collect();
        // The runner calls the test, which invokes three times; the last invocation also runs
        // get_help_record.
        let mut evs = vec![C(0), R, C(2), C(3)];
        for last in [false, false, true] {
            evs.extend([C(4), C(5), R]);
            if last {
                evs.extend([C(6), R]);
            }
            evs.push(R);
        }
        evs.extend([R, R, C(1), R]);
        let (_, info, tests) = crate::fold::fold_events_with_tests(funcs, &classes, crate::testutil::Ev::events(&evs));
        assert_eq!((tests.len(), info.test_invocations.len()), (1, 1));
        let inv = &info.test_invocations[0];
        assert_eq!(inv.callees.len(), 1, "only the test function's own calls: {inv:?}");
        assert_eq!(inv.callees[&4].calls, 3);
        let s = inv.scores();
        assert_eq!(s.len(), 1, "{s:?}");
        assert!((s[&6] - 1.0).abs() < 1e-9, "{s:?}");
    }
}
