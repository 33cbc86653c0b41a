//! Filling the room a fitted state leaves ([`Fill::refill`]) and raising a more important
//! function whole by demoting less important ones ([`Fill::promote`]): the two passes after the
//! walk of [`super::budget`] (`docs/prompts.md`, "Budget"). Both work in one [`Fill`] context:
//! the model, its priority order, the estimator, the budget and the real render.

use super::budget::{elision_saves, has_block, BudgetError, Fitted, Step};
use super::estimate::Estimator;
use super::{FuncId, Model};

/// At most this many extra renders are spent filling the room a fitted state leaves...
const REFILL_TRIES: usize = 48;
/// ...and at most this many tree nodes rendered in all (each render walks the whole tree): a
/// 2 M-node tree gets 2 tries, a 100,000-node one all 48.
const REFILL_NODES: usize = 4_800_000;

/// The renders [`Fill::refill`] may spend on `model`.
pub(super) fn refill_tries(model: &Model) -> usize {
    let nodes: usize = model.traces.iter().flat_map(|t| t.threads.iter()).map(|th| th.nodes.len()).sum();
    (REFILL_NODES / nodes.max(1)).clamp(2, REFILL_TRIES)
}

/// What the passes after the walk share: the model, its priority order, the estimator, the
/// budget, and the real render and count of a state (`eval`).
pub(super) struct Fill<'a> {
    pub model: &'a Model,
    pub prio: &'a [FuncId],
    pub est: &'a Estimator<'a>,
    pub budget: usize,
    pub eval: &'a mut dyn FnMut(&[Step]) -> Result<Fitted, BudgetError>,
}

/// What a state's steps did to a function it cut.
#[derive(Debug, Clone, Copy, Default)]
struct CutTo {
    /// Dropped to name only.
    named: bool,
    /// Elided to its signature (then possibly dropped).
    signed: bool,
    /// Shown as the code that ran, by its last step ([`Step::Ran`]).
    ran: bool,
}

/// Per function a state cut, what its steps did to it.
fn cut_levels(steps: &[Step]) -> rustc_hash::FxHashMap<FuncId, CutTo> {
    let mut levels: rustc_hash::FxHashMap<FuncId, CutTo> = rustc_hash::FxHashMap::default();
    for st in steps {
        match *st {
            Step::Name(k) => {
                let c = levels.entry(k).or_default();
                c.named = true;
                c.ran = false;
            }
            Step::Signature(k) => {
                let c = levels.entry(k).or_default();
                c.signed = true;
                c.ran = false;
            }
            Step::Ran(k) => levels.entry(k).or_default().ran = true,
            _ => {}
        }
    }
    levels
}

/// Whether showing `k` as the code that ran is worth it: it has that form, and it is at most
/// this share of the whole block (a form that elides a few lines is the whole body in all but
/// name, and the walk's steps are sized by whole bodies).
fn ran_form(est: &Estimator<'_>, k: FuncId) -> Option<f64> {
    let (body, _) = est.block(k);
    est.ran(k).filter(|&r| r <= RAN_SHARE * body)
}

/// See [`ran_form`].
const RAN_SHARE: f64 = 0.8;

/// A promotion demotes whole functions worth at most this many times the promoted function's
/// score (in the order of [`Model::priority`]): a more important function is worth more than
/// any one below it, but not more than any number of them. On sqlparse-comment-space at
/// 4,000 tokens, raising `validate_options` (rank 12, 4,900 characters of option checks)
/// would demote four whole functions worth 2.4 times its score, among them `group_comments`,
/// the fix's function; on pyflakes-walrus-after-annotation raising `Checker.addBinding`
/// (rank 10) demotes two worth about 1.5 times its score.
const PROMOTE_WORTH: f64 = 2.0;

/// A function shown whole or as the code that ran is large enough to be tried by
/// [`Fill::give_way`] when it takes at least this share of the budget.
const GIVE_WAY_SHARE: f64 = 0.25;

/// At most this many of the largest shown functions are tried by [`Fill::give_way`].
const GIVE_WAY_TRIES: usize = 2;

/// At most this many renders refill the room after each promotion.
const PROMOTE_REFILL_TRIES: usize = 8;

/// At most this many of the cut functions after a raise are looked at by [`displaces`]: a
/// wide tree has thousands of cut functions, and each raise of a batch looks ahead.
const LOOK_AHEAD: usize = 256;

/// Whether a raise costing `cost` of the room `left` keeps a function after it from being raised
/// whole: `rest` holds each one's cost to raise whole, in priority order, and the refill's own
/// greedy pass is run over the first [`LOOK_AHEAD`] of them in `left` and in `left - cost`.
fn displaces(rest: &[f64], left: f64, cost: f64) -> bool {
    if cost <= 0.0 {
        return false;
    }
    let (mut with, mut without) = (left - cost, left);
    for &c in rest.iter().take(LOOK_AHEAD) {
        let c = c.max(0.0);
        match (c <= without, c <= with) {
            (true, false) => return true,
            (true, true) => {
                without -= c;
                with -= c;
            }
            (false, true) => with -= c,
            (false, false) => {}
        }
        if without < 8.0 {
            break;
        }
    }
    false
}

impl Fill<'_> {
    /// [`Fill::refill`] then [`Fill::promote`], each with at most `max_tries` renders, from the
    /// walk's state `steps` (rendered as `best`).
    pub(super) fn run(&mut self, max_tries: usize, steps: Vec<Step>, best: Fitted) -> Result<(Vec<Step>, Fitted), BudgetError> {
        let (steps, best) = self.refill(max_tries, steps, best, None)?;
        let (steps, best) = self.promote(max_tries, steps, best)?;
        self.give_way(steps, best)
    }

    /// The score of what a state shows: the sum of [`Model::priority_score`] over the
    /// functions with a source block that it shows whole or as the code that ran.
    fn shown_worth(&self, steps: &[Step]) -> (f64, rustc_hash::FxHashSet<FuncId>) {
        let levels = cut_levels(steps);
        let shown: rustc_hash::FxHashSet<FuncId> = self
            .prio
            .iter()
            .copied()
            .filter(|&k| has_block(self.model, k) && levels.get(&k).is_none_or(|c| c.ran && !c.named && !c.signed))
            .collect();
        let worth = shown.iter().map(|&k| self.model.funcs.get(k).map_or(0.0, |f| self.model.priority_score(f).max(0.0))).sum();
        (worth, shown)
    }

    /// A large function shown (whole or as the code that ran) gives way to the functions below
    /// it that its room would hold, when together they are worth more than it. The walk cuts
    /// in priority order, so where a large function's code fits, it stays and the smaller,
    /// less important functions after it are cut; with a little less room it is elided and
    /// they come back whole: more room lost them (pycparser-statement-expr-comma: at 4,000
    /// tokens the fix's function is whole, at 4,500 and 5,000 yacc's 270-line
    /// `parseopt_notrack`, rank 11 of score 191, took 2,165 tokens as the code that ran and cut
    /// the thirteen functions ranked 12 to 24, worth 306 together). Here the largest shown
    /// functions (each at least [`GIVE_WAY_SHARE`] of the budget; not the first in priority,
    /// which the walk keeps in its own segment) are tried at their signature with the room
    /// refilled; the state that shows more worth ([`Fill::shown_worth`]) is kept.
    fn give_way(&mut self, mut steps: Vec<Step>, mut best: Fitted) -> Result<(Vec<Step>, Fitted), BudgetError> {
        let (model, est, budget) = (self.model, self.est, self.budget);
        // Only where the prompt shows tests: there the large functions kept early are the
        // failure's frames (a parser's driver, scored as a raiser) and the functions below
        // them the code under test. Without tests the scores come from the question and fall
        // off in a long tail: a run's large entry point (rich-cli's `main`, score 6.6) would
        // give way to ten small helpers worth 10.8 together (`Text.plain`, `cell_len`), and
        // the Python CLI sets lost `main` at 16k and 8k in three questions.
        if !model.tests_shown {
            return Ok((steps, best));
        }
        let levels = cut_levels(&steps);
        let mut large: Vec<(FuncId, f64)> = self
            .prio
            .iter()
            .skip(1)
            .copied()
            .filter(|&k| has_block(model, k))
            .filter_map(|k| match levels.get(&k) {
                None => Some((k, est.block(k).0)),
                Some(c) if c.ran && !c.named && !c.signed => Some((k, ran_form(est, k).unwrap_or(est.block(k).0))),
                _ => None,
            })
            .filter(|&(_, cost)| cost >= GIVE_WAY_SHARE * budget as f64)
            .collect();
        large.sort_by(|a, b| b.1.total_cmp(&a.1));
        for &(k, _) in large.iter().take(GIVE_WAY_TRIES) {
            let (worth, _) = self.shown_worth(&steps);
            let cut = if elision_saves(model, k) { Step::Signature(k) } else { Step::Name(k) };
            let cand: Vec<Step> =
                steps.iter().filter(|s| !matches!(s, Step::Ran(x) if *x == k)).copied().chain(std::iter::once(cut)).collect();
            let r = (self.eval)(&cand)?;
            if r.tokens > budget {
                continue;
            }
            let (s, b) = self.refill(PROMOTE_REFILL_TRIES, cand, r, Some(k))?;
            if self.shown_worth(&s).0 > worth {
                steps = s;
                best = b;
            }
        }
        Ok((steps, best))
    }

    /// Fill the room the walk left. The walk degrades in steps of whole functions, so the state it
    /// stops at can be well under the budget (the last step may have dropped a large body). In
    /// priority order, each function the state cut is raised back, to whole if its estimated cost
    /// fits the room left, else (if it was dropped) to its signature if that fits. The raises are
    /// tried in batches: as many, in priority order, as the estimate fits into the room; a batch
    /// that does not fit for real is halved (its first half kept), and a single raise that does not
    /// fit is given up (from whole it falls back to the signature first). A raise short of whole
    /// (the code that ran, a signature) goes in only where it keeps no function below it from
    /// being raised whole ([`displaces`]): so more room never trades whole functions for a
    /// partial form (`docs/prompts.md`). So a wide tree with
    /// thousands of small cut functions takes a few renders, not one per function. Every accepted
    /// state is rendered and counted for real, so the result still fits.
    /// `held`: a function that stays as it is (not raised).
    pub(super) fn refill(
        &mut self,
        max_tries: usize,
        mut steps: Vec<Step>,
        mut best: Fitted,
        held: Option<FuncId>,
    ) -> Result<(Vec<Step>, Fitted), BudgetError> {
        let (prio, est, budget) = (self.prio, self.est, self.budget);
        /// A raise: the function back to whole, to the code that ran, or from name only to its
        /// signature.
        #[derive(Clone, Copy, PartialEq)]
        enum Raise {
            Whole,
            Ran,
            Signature,
        }
        let apply = |steps: &[Step], batch: &[(FuncId, Raise)]| -> Vec<Step> {
            // The batch by function (a map: steps and batch can both hold thousands).
            let raised: rustc_hash::FxHashMap<FuncId, Raise> = batch.iter().copied().collect();
            let mut out: Vec<Step> = steps
                .iter()
                .filter(|s| match s {
                    Step::Signature(x) | Step::Ran(x) => !raised.get(x).is_some_and(|&r| r != Raise::Signature),
                    Step::Name(x) => !raised.contains_key(x),
                    _ => true,
                })
                .cloned()
                .collect();
            out.extend(batch.iter().filter(|(_, r)| *r == Raise::Ran).map(|&(k, _)| Step::Ran(k)));
            out
        };
        // Raises given up: a whole that did not fit (its signature may still), then the signature.
        let mut failed: Vec<(FuncId, Raise)> =
            held.into_iter().flat_map(|k| [(k, Raise::Whole), (k, Raise::Ran), (k, Raise::Signature)]).collect();
        let mut tries = 0;
        while tries < max_tries {
            let room = budget.saturating_sub(best.tokens) as f64;
            if room < 8.0 {
                break;
            }
            // The estimate is rough (tree lines come and go with a source); only clearly hopeless
            // raises are left out of a batch.
            let mut left = room * 1.25 + 16.0;
            let mut batch: Vec<(FuncId, Raise)> = Vec::new();
            let levels = cut_levels(&steps);
            // The cut functions in priority order, each with what it shows now and whole, and the
            // cost to raise it whole (for the look-ahead of `displaces`; a whole raise given up
            // counts as never fitting).
            let cut: Vec<(FuncId, CutTo, f64, f64)> = prio
                .iter()
                .filter_map(|&k| levels.get(&k).map(|&c| (k, c)))
                .map(|(k, c)| {
                    let (body, sig) = est.block(k);
                    let now = if c.named {
                        0.0
                    } else if c.ran {
                        ran_form(est, k).unwrap_or(body)
                    } else {
                        sig
                    };
                    (k, c, now, body)
                })
                .collect();
            let wholes: Vec<f64> =
                cut.iter().map(|&(k, _, now, body)| if failed.contains(&(k, Raise::Whole)) { f64::INFINITY } else { body - now }).collect();
            for (i, &(k, c, now, body)) in cut.iter().enumerate() {
                let ran = ran_form(est, k);
                let sig = est.block(k).1;
                let options = [(Raise::Whole, body - now), (Raise::Ran, ran.unwrap_or(body) - now), (Raise::Signature, sig - now)];
                let usable = options.into_iter().filter(|&(r, _)| match r {
                    Raise::Whole => true,
                    Raise::Ran => ran.is_some() && !c.ran,
                    Raise::Signature => c.named && c.signed,
                });
                // A raise to whole goes in priority order; one short of whole (the code that
                // ran, a signature) only into room that no whole raise below it would take.
                if let Some((r, cost)) = usable
                    .filter(|&(r, _)| !failed.contains(&(k, r)))
                    .find(|&(r, cost)| cost <= left && (r == Raise::Whole || !displaces(&wholes[i + 1..], left, cost)))
                {
                    batch.push((k, r));
                    left -= cost.max(0.0);
                }
            }
            if batch.is_empty() {
                break;
            }
            // Whole raises first: a batch that does not fit is halved from its end, and a raise
            // short of whole must not keep its place while a whole one below it is given up.
            batch.sort_by_key(|&(_, r)| r != Raise::Whole);
            loop {
                tries += 1;
                let cand = apply(&steps, &batch);
                let r = (self.eval)(&cand)?;
                if r.tokens <= budget {
                    steps = cand;
                    best = r;
                    break;
                }
                if batch.len() == 1 || tries >= max_tries {
                    failed.push(batch[0]);
                    break;
                }
                batch.truncate(batch.len() / 2);
            }
        }
        Ok((steps, best))
    }

    /// Raise a more important function to whole by demoting less important ones. The walk and
    /// [`Fill::refill`] are greedy: when the walk's last step elides a large function, the refill takes
    /// the smaller, less important functions that fit the room left, and the large one stays cut
    /// while they are whole. Here, in priority order, each function with a source block that a
    /// state cut is tried whole, with functions ranked below it demoted, least important first,
    /// until the estimate says it fits: first whole ones to their signature (name only where
    /// eliding saves nothing), then, if that is not enough, signatures to name only. A candidate
    /// that does not fit for real demotes one more and is tried again; one that still does not
    /// fit, whose demotions cannot make room by the estimate, or whose demoted whole functions
    /// are worth more than [`PROMOTE_WORTH`] times its score, is given up. Every accepted state
    /// is better in the priority order (a function whole that was cut, only functions below it
    /// lower) and is followed by a [`Fill::refill`] of the room it left. So a function is never left cut
    /// while less important ones are whole if demoting a few of them makes it fit.
    pub(super) fn promote(&mut self, max_tries: usize, mut steps: Vec<Step>, mut best: Fitted) -> Result<(Vec<Step>, Fitted), BudgetError> {
        let (model, prio, est, budget) = (self.model, self.prio, self.est, self.budget);
        let mut tries = 0;
        // What the state cut, and where in `prio` the functions it shows whole (with a block)
        // and those it cut to their signature are: made again only when a promotion changes
        // the state, so that a tree of 30,000 cut functions is not read 30,000 times.
        let shown_at = |levels: &rustc_hash::FxHashMap<FuncId, CutTo>| -> (Vec<usize>, Vec<usize>) {
            let whole = (0..prio.len()).filter(|&j| !levels.contains_key(&prio[j]) && has_block(model, prio[j])).collect();
            let signed = (0..prio.len()).filter(|&j| levels.get(&prio[j]).is_some_and(|c| c.signed && !c.named && !c.ran)).collect();
            (whole, signed)
        };
        let mut levels = cut_levels(&steps);
        let (mut whole_at, mut signed_at) = shown_at(&levels);
        for (i, &k) in prio.iter().enumerate() {
            if tries >= max_tries {
                break;
            }
            let Some(&c) = levels.get(&k) else { continue };
            if !has_block(model, k) {
                continue;
            }
            let (body, sig) = est.block(k);
            let now = if c.named {
                0.0
            } else if c.ran {
                est.ran(k).unwrap_or(body)
            } else if c.signed {
                sig
            } else {
                body
            };
            // The estimate leaves out the tree lines that come and go with a source, as in
            // `refill`: only clearly hopeless promotions are left untried.
            let room = budget.saturating_sub(best.tokens) as f64 * 1.25 + 16.0;
            let need = body - now - room;
            // The demotions, in the order they are made, with what each saves by the estimate.
            // (step, tokens it saves, score it costs: the function's when it was whole).
            let mut demotions: Vec<(Step, f64, f64)> = Vec::new();
            let score = |d: FuncId| model.funcs.get(d).map_or(0.0, |f| model.priority_score(f).max(0.0));
            // Whole ones below it, least important first; then signatures below it (cut to
            // one, or just demoted to one) to name only.
            let mut to_name: Vec<usize> = signed_at.iter().rev().take_while(|&&j| j > i).copied().collect();
            for &j in whole_at.iter().rev().take_while(|&&j| j > i) {
                let d = prio[j];
                let (db, ds) = est.block(d);
                if elision_saves(model, d) {
                    demotions.push((Step::Signature(d), db - ds, score(d)));
                    to_name.push(j);
                } else {
                    demotions.push((Step::Name(d), db, score(d)));
                }
            }
            to_name.sort_unstable_by(|a, b| b.cmp(a));
            to_name.dedup();
            for j in to_name {
                let d = prio[j];
                demotions.push((Step::Name(d), est.block(d).1, 0.0));
            }
            let worth = score(k) * PROMOTE_WORTH;
            let total: f64 = demotions.iter().map(|(_, s, _)| s).sum();
            if need > 0.0 && total < need {
                continue;
            }
            // The fewest demotions the estimate says make room (none when it already fits).
            let mut n = 0;
            let mut saved = 0.0;
            while saved < need && n < demotions.len() {
                saved += demotions[n].1;
                n += 1;
            }
            loop {
                let cost: f64 = demotions[..n].iter().map(|(.., c)| c).sum();
                if tries >= max_tries || cost > worth {
                    break;
                }
                tries += 1;
                let cand: Vec<Step> = steps
                    .iter()
                    .filter(|s| !matches!(s, Step::Signature(x) | Step::Name(x) | Step::Ran(x) if *x == k))
                    .copied()
                    .chain(demotions[..n].iter().map(|(s, ..)| *s))
                    .collect();
                let r = (self.eval)(&cand)?;
                if r.tokens <= budget {
                    let fill = max_tries.saturating_sub(tries).clamp(1, PROMOTE_REFILL_TRIES);
                    tries += fill;
                    let (s, b) = self.refill(fill, cand, r, None)?;
                    steps = s;
                    best = b;
                    levels = cut_levels(&steps);
                    (whole_at, signed_at) = shown_at(&levels);
                    break;
                }
                if n >= demotions.len() {
                    break;
                }
                n += 1;
            }
        }
        Ok((steps, best))
    }
}
