//! Fitting a prompt into a token budget, exactly.
//!
//! Policy (deterministic; see `docs/prompts.md`): functions are ranked by
//! [`Model::priority`] (BM25F relevance to the question, then closest to the root, then
//! earliest call); the first of that ranking is the *top* function. The prompt is degraded
//! by a fixed sequence of steps, in segments, until the rendered text, counted with the real
//! tokenizer, fits:
//!
//! 1. repeated source blocks (layouts that repeat) are shown once; the tree shows only the
//!    paths to the functions whose source is shown; then a walk from the least to the most
//!    important function steps each one down a level, keeping at most one function at
//!    signature level for four at body level: while there are fewer, the least important body
//!    is elided (decorators and signature kept, the body replaced by a marked
//!    `...`; skipped where that saves nothing), otherwise the least important signature is
//!    dropped (the function stays in the tree by name, marked `[name only]`). The walk stops
//!    when only the top function keeps its source, whole;
//! 2. the tree is cut below depth D, D decreasing from the deepest level to 1, except the
//!    paths from the root to the top function (and to any function whose source is still
//!    shown); each cut is marked with the number of calls it hides;
//! 3. the top function's body is elided and the tree is cut again from the full depth;
//! 4. the top function's source is dropped and the tree is cut again.
//!
//! The first segment whose last state fits is searched by bisection for its smallest number
//! of steps that fits; the result is always re-counted, so the output is never over the
//! budget. Every elision is marked in place and summarised in a note at the top of the prompt.

use super::estimate::Estimator;
use super::fill::{refill_tries, Fill};
use super::render::{Renderer, TemplateError};
use super::{FuncId, Layout, Level, Model, Plan, SourceState, NAME_ONLY_MARK};
use crate::frontend::Opt;
use crate::tokens::Tokenizer;
use std::collections::VecDeque;

/// The budget (tokens) of a test's prompt (`--test`) without `--budget`: the size the failing-test
/// workflow aims at (issue 24: each default prompt at most 20k cl100k tokens). A test's tree
/// holds only code under test, which is never collapsed as plumbing, so a test that drives a
/// whole framework end to end (click's own regression tests build a command and invoke it four
/// times, with and without `--help`) runs 140 of its functions, 28,647 tokens shown whole; the
/// condensing (code that did not run, long docstrings) leaves that over 20k. The budget cuts
/// the least relevant (the spectrum's, the traceback's and the question's order) first, and a
/// prompt that fits is unchanged. `--no-budget` shows everything.
pub const DEFAULT_TEST_BUDGET: usize = 20_000;

/// The budget (tokens) of a run's prompt (no `--test`) without `--budget`. A question about a
/// run is answered from the code that ran, and most runs' whole prompts are well under it (the
/// eval's Python CLIs: 3k to 62k cl100k tokens, unchanged byte for byte); but a 0.01 s run of a
/// compiled program can be hundreds of thousands (`rg -c fn .` in a ten-file tree: 374k with
/// its dependencies' code), more than any model's context, which a user cannot paste anywhere.
/// At 100k the prompt fits a 128k-token context with room for the answer, and the budget cuts
/// the least relevant first (`rg-skipped`'s two answers are whole at 100k, not at 64k).
/// `--no-budget` shows everything.
pub const DEFAULT_RUN_BUDGET: usize = 100_000;

impl Model {
    /// The budget of a prompt given no `--budget`: [`DEFAULT_TEST_BUDGET`] for a test's prompt,
    /// [`DEFAULT_RUN_BUDGET`] for any other. A prompt that fits its default is unchanged. The
    /// one rule for every front end: the command line's default; an MCP tool call always has
    /// its `max_tokens` (`mcp::bound`), which is smaller.
    pub fn default_budget(&self) -> usize {
        default_budget_of(self.tests_shown)
    }
}

/// The command line's default budget of a prompt that shows tests' trees or not (`slice
/// from-trace` and `slice diff --format prompt` alike).
pub fn default_budget_of(tests_shown: bool) -> usize {
    if tests_shown {
        DEFAULT_TEST_BUDGET
    } else {
        DEFAULT_RUN_BUDGET
    }
}

/// Appended to the budget note of a prompt cut to the command line's default budget, not one
/// the user chose ([`Model::budget_by_default`]).
pub fn default_budget_words(tests_shown: bool) -> &'static str {
    if tests_shown {
        "; a test's prompt gets this budget by default, `--no-budget` shows every function"
    } else {
        "; a prompt gets this budget by default, `--no-budget` shows every function"
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Step {
    /// Shown tests' failures are cut to a share of the budget
    /// ([`crate::testrun::outcome_chars`]).
    ShortenOutcome,
    CollapseRepeats,
    /// The tree shows only its first level and the paths to the functions whose source is
    /// still shown (and to the top function).
    TreeToSources,
    Signature(FuncId),
    Name(FuncId),
    /// The function shows the code that ran ([`Level::Ran`]); only [`Fill`] takes this step,
    /// raising a function the walk cut.
    Ran(FuncId),
    TreeDepth(u32),
}

/// What the budget removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BudgetReport {
    pub budget: usize,
    /// Qualified names of functions shown as signature only.
    pub elided: Vec<String>,
    /// Qualified names of functions shown by name only.
    pub dropped: Vec<String>,
    /// Qualified names of functions shown as the code that ran ([`Level::Ran`]).
    pub ran: Vec<String>,
    pub collapsed_repeats: bool,
    pub tree_depth: Option<u32>,
    /// The tree was cut to its first level and the paths to the functions whose source is
    /// shown (not at a depth).
    pub tree_to_sources: bool,
    /// Functions whose whole source was kept.
    pub kept: usize,
}

/// A rendered prompt and its token count: exact, always, when fitted into a budget.
#[derive(Debug, Clone)]
pub struct Fitted {
    pub text: String,
    pub tokens: usize,
    /// Whether `tokens` is exact. Without a budget, a prompt of millions of tokens is counted
    /// on a sample ([`Tokenizer::count_for_message`]).
    pub exact: bool,
    pub report: Option<BudgetReport>,
}

#[derive(Debug, thiserror::Error)]
pub enum BudgetError {
    #[error("{}", too_small(*.budget, *.needed, .tokenizer, *.front, *.tree_only))]
    TooSmall {
        budget: usize,
        needed: usize,
        tokenizer: &'static str,
        /// Who reads it: how it names the options.
        front: crate::frontend::FrontEnd,
        /// The layout was the tree only already (`--variant T`): not suggested again.
        tree_only: bool,
    },
    #[error(transparent)]
    Template(#[from] TemplateError),
}

/// [`BudgetError::TooSmall`]'s words.
fn too_small(budget: usize, needed: usize, tokenizer: &str, front: crate::frontend::FrontEnd, tree_only: bool) -> String {
    let (b, focus) = (front.name(Opt::Budget), front.name(Opt::Focus));
    let what = if tree_only {
        "even with the tree cut to one level"
    } else {
        "even with every function body dropped and the tree cut to one level"
    };
    let remedy = if tree_only {
        format!("raise {b} or narrow it with {focus}")
    } else {
        format!("raise {b}, narrow it with {focus}, or ask for {} (the tree only)", front.set(Opt::Variant, "T"))
    };
    format!("{b} {budget} is too small for this prompt: {what}, it takes {needed} tokens ({tokenizer}); {remedy}")
}

pub(super) fn has_block(model: &Model, k: FuncId) -> bool {
    model.funcs.get(k).is_some_and(|f| matches!(f.source, SourceState::Code(_) | SourceState::Unavailable(_)))
}

/// Whether eliding the body saves something (a short body costs less than its marker).
pub(super) fn elision_saves(model: &Model, k: FuncId) -> bool {
    match model.funcs.get(k).map(|f| &f.source) {
        Some(SourceState::Code(e)) => e.signature.as_ref().is_some_and(|sig| sig.len() + 40 < e.code.len()),
        _ => false,
    }
}

fn names(model: &Model, keys: &[FuncId]) -> Vec<String> {
    let same = namesakes(model);
    keys.iter().map(|&k| name_of(model, k, &same)).collect()
}

/// The qualified names that more than one function of the model has: C's `static` functions of
/// one name in several files (cmark-gfm's `html_render` in its renderer and in two extensions),
/// Python's functions of one name in two modules.
fn namesakes(model: &Model) -> rustc_hash::FxHashSet<&str> {
    let mut seen = rustc_hash::FxHashSet::default();
    let mut twice = rustc_hash::FxHashSet::default();
    for (_, f) in model.funcs.iter() {
        if !seen.insert(f.qualname.as_str()) {
            twice.insert(f.qualname.as_str());
        }
    }
    twice
}

/// How the budget's lists name a function: its qualified name, followed by its file when it
/// has namesakes (`html_render (extensions/table.c)`), so that a list of what was cut never
/// leaves the reader to guess which of them it means.
fn name_of(model: &Model, k: FuncId, same: &rustc_hash::FxHashSet<&str>) -> String {
    match model.funcs.get(k) {
        Some(f) if same.contains(f.qualname.as_str()) => format!("{} ({})", f.qualname, f.file),
        Some(f) => f.qualname.clone(),
        None => String::new(),
    }
}

/// At most this many names per list of the prompt's budget note: the most relevant of what was
/// cut (stderr lists more). The rest of a list is counted (`and N more`); the names of the
/// least relevant of 200 dropped functions would cost a few hundred tokens of the budget and
/// tell the model nothing it can use.
pub const NOTE_NAMES: usize = 10;

/// `names`, at most `max` of them, then how many more.
fn list(names: &[String], max: usize) -> String {
    list_of(names.iter().map(String::as_str), names.len(), max)
}

/// The first `max` of `names` (of `total`), then how many more.
pub(crate) fn list_of<'n>(names: impl Iterator<Item = &'n str>, total: usize, max: usize) -> String {
    let mut s = names.take(max).map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ");
    if total > max {
        s.push_str(&format!(" and {} more", total - max));
    }
    s
}

/// [`list`] of names in the order the walk cut them (least relevant first): most relevant
/// first, at most [`NOTE_NAMES`].
#[cfg(test)]
pub(super) fn most_relevant(names: &[String]) -> String {
    list_of(names.iter().rev().map(String::as_str), names.len(), NOTE_NAMES)
}

/// [`most_relevant`] of functions: only the names it shows are looked up.
fn most_relevant_of(model: &Model, ids: &[FuncId]) -> String {
    let same = namesakes(model);
    let shown: Vec<String> = ids.iter().rev().take(NOTE_NAMES).map(|&k| name_of(model, k, &same)).collect();
    list_of(shown.iter().map(String::as_str), ids.len(), NOTE_NAMES)
}

/// The functions a state cut, in step order: elided to their signature (and not dropped by a
/// later step), dropped to name only. Kept as ids: the budget's search builds a plan for each
/// state it estimates, and only the states rendered for real need a [`BudgetReport`].
pub(super) struct Cut {
    sig: Vec<FuncId>,
    name: Vec<FuncId>,
    ran: Vec<FuncId>,
}

/// What a plan removed, for the report.
fn report(model: &Model, plan: &Plan, cut: &Cut, sources: bool, budget: usize) -> BudgetReport {
    BudgetReport {
        budget,
        elided: names(model, &cut.sig),
        dropped: names(model, &cut.name),
        ran: names(model, &cut.ran),
        collapsed_repeats: plan.collapse_repeats,
        tree_depth: plan.tree_depth,
        tree_to_sources: plan.tree_to_sources,
        kept: if sources {
            model.funcs.iter().filter(|(id, f)| matches!(f.source, SourceState::Code(_)) && plan.level(*id) == Level::Body).count()
        } else {
            0
        },
    }
}

/// The plan (and what it cut) for a state: `steps` applied in order. `top`: the function
/// whose paths tree cuts keep; `sources`: whether the layout shows sources (then the paths to
/// every function whose source is still shown are kept too).
pub(super) fn plan_for(model: &Model, steps: &[Step], top: Option<FuncId>, sources: bool, budget: usize, tok: Tokenizer) -> (Plan, Cut) {
    let mut plan = Plan::default();
    // The functions elided to their signature, in step order; a later name-only step of a
    // function takes it out (by its places, found in a map: a walk has a step per function, so
    // searching the list at each step would be quadratic).
    let mut sig: Vec<Option<FuncId>> = Vec::new();
    let mut sig_at: rustc_hash::FxHashMap<FuncId, Vec<usize>> = rustc_hash::FxHashMap::default();
    let mut name = Vec::new();
    let mut ran = Vec::new();
    // Sized once: the estimate's search makes a plan per state it tries, each with up to a
    // step per function.
    plan.levels.reserve(steps.len());
    sig_at.reserve(steps.len());
    for s in steps {
        match *s {
            Step::CollapseRepeats => plan.collapse_repeats = true,
            Step::ShortenOutcome => plan.outcome_chars = Some(crate::testrun::outcome_chars(budget)),
            Step::Signature(k) => {
                plan.levels.insert(k, Level::Signature);
                sig_at.entry(k).or_default().push(sig.len());
                sig.push(Some(k));
            }
            Step::Name(k) => {
                plan.levels.insert(k, Level::Name);
                for i in sig_at.remove(&k).unwrap_or_default() {
                    sig[i] = None;
                }
                name.push(k);
            }
            Step::Ran(k) => {
                plan.levels.insert(k, Level::Ran);
                ran.push(k);
            }
            Step::TreeDepth(d) => plan.tree_depth = Some(d),
            Step::TreeToSources => {
                plan.tree_depth = Some(1);
                plan.tree_to_sources = true;
            }
        }
    }
    let sig: Vec<FuncId> = sig.into_iter().flatten().filter(|&k| plan.level(k) == Level::Signature).collect();
    // A later step of a function shown as the code that ran takes it out of that list.
    ran.retain(|&k| plan.level(k) == Level::Ran);
    let to_sources = steps.contains(&Step::TreeToSources);
    if !steps.is_empty() {
        let mut parts = Vec::new();
        if let Some(max) = plan.outcome_chars {
            let cut = model.traces.iter().flat_map(|t| &t.outcome).filter(|o| o.len() > max).count();
            if cut > 0 {
                parts.push(format!(
                    "{} cut to about {max} characters (the cuts marked `[…`)",
                    if cut == 1 { "the failure's text is".to_string() } else { format!("{cut} failures' texts are") }
                ));
            }
        }
        if plan.collapse_repeats {
            parts.push("repeated source blocks are shown once".to_string());
        }
        if !sig.is_empty() {
            parts.push(format!(
                "the bodies of {} are elided (signature kept, marked `body elided`): {}",
                crate::testrun::plural(sig.len(), "function"),
                most_relevant_of(model, &sig)
            ));
        }
        if !ran.is_empty() {
            parts.push(format!(
                "{} {} only the code that ran (the statements that did not run are elided, marked `...  # N lines not run`): {}",
                ran.len(),
                if ran.len() == 1 { "function shows" } else { "functions show" },
                most_relevant_of(model, &ran)
            ));
        }
        if !name.is_empty() {
            parts.push(format!(
                "{} functions are shown by name only (marked `{}` in the tree{}): {}",
                name.len(),
                NAME_ONLY_MARK.trim(),
                if plan.tree_depth.is_some() { " where the cut tree still shows them" } else { "" },
                most_relevant_of(model, &name)
            ));
        }
        if let Some(d) = plan.tree_depth {
            plan.tree_keep = model
                .funcs
                .iter()
                .map(|(id, _)| id)
                .filter(|&id| Some(id) == top || (sources && has_block(model, id) && plan.level(id) != Level::Name))
                .collect();
            // In a test's prompt, one path per function: its first call, where its source is
            // placed. A helper that the code under test calls from many places (a token
            // lookup under each of twenty grouping passes) otherwise draws every one of
            // them, and at a small budget the tree's lines crowd out whole functions.
            plan.first_places = to_sources && model.tests_shown;
            if plan.first_places {
                parts.push(
                    "the call tree shows only its first level and the path to the first call of each function whose source is shown (other calls are counted in `… N more calls below`)".to_string(),
                );
            } else if to_sources {
                parts.push(
                    "the call tree shows only its first level and the paths to the functions whose source is shown (other calls are counted in `… N more calls below`)".to_string(),
                );
            } else {
                let mut kept = names(model, &plan.tree_keep.iter().copied().collect::<Vec<_>>());
                kept.sort();
                parts.push(format!(
                    "the call tree is cut below depth {d} (marked `… N more calls below`), except the paths to {}",
                    list(&kept, 25)
                ));
            }
        }
        // The default exists at the command line only (a tool call always has its max_tokens).
        let default = if model.budget_by_default { default_budget_words(model.tests_shown) } else { "" };
        plan.notes.push(format!("To fit the budget of {budget} tokens ({}{default}): {}.", tok.name(), parts.join("; ")));
    }
    (plan, Cut { sig, name, ran })
}

/// While walking down, at most this share of the functions that keep some source keep only
/// a signature (NUM/DEN of the bodies): a signature tells what a function takes and returns,
/// a body what it does; the eval (`eval/`) keeps more answers whole with fewer signatures.
const SIGNATURE_SHARE_NUM: usize = 1;
const SIGNATURE_SHARE_DEN: usize = 4;

/// The degradation sequence, in segments: each is (base steps, further steps); the states of
/// a segment are `base + steps[..k]`, k = 0..=steps.len().
fn segments(model: &Model, layout: Layout, prio: &[FuncId]) -> Vec<(Vec<Step>, Vec<Step>)> {
    let top = prio.first().copied();
    let mut walk = Vec::new();
    // The failure first: past its share of the budget it is the least informative text left
    // (a repr repeated, a diff of the test's input), and it comes before every source.
    if model.traces.iter().any(|t| !t.outcome.is_empty()) {
        walk.push(Step::ShortenOutcome);
    }
    if layout.sources {
        if layout.repeat {
            walk.push(Step::CollapseRepeats);
        }
        // The tree first: branches that lead to no shown source go before any source does,
        // and go on going as sources are dropped.
        if layout.tree {
            walk.push(Step::TreeToSources);
        }
        // Least important first; a signature for at most one body in four (SIGNATURE_SHARE),
        // until only the top is left.
        let mut bodies: VecDeque<FuncId> = prio.iter().rev().copied().filter(|&k| has_block(model, k)).collect();
        let mut sigs: VecDeque<FuncId> = VecDeque::new();
        loop {
            let only_top = bodies.len() == 1 && Some(bodies[0]) == top;
            if !sigs.is_empty() && (sigs.len() * SIGNATURE_SHARE_DEN >= bodies.len() * SIGNATURE_SHARE_NUM || bodies.is_empty() || only_top)
            {
                if let Some(k) = sigs.pop_front() {
                    walk.push(Step::Name(k));
                }
            } else if !bodies.is_empty() && !only_top {
                if let Some(k) = bodies.pop_front() {
                    if elision_saves(model, k) {
                        walk.push(Step::Signature(k));
                    }
                    sigs.push_back(k);
                }
            } else {
                break;
            }
        }
    }
    // With sources, the tree already follows them (TreeToSources); depth cuts are for the
    // tree-only layout.
    let cuts: Vec<Step> = if layout.tree && !layout.sources {
        let max = model.traces.iter().flat_map(|t| t.threads.iter()).flat_map(|th| th.nodes.iter()).map(|n| n.depth).max().unwrap_or(1);
        (1..max).rev().map(Step::TreeDepth).collect()
    } else {
        Vec::new()
    };
    let mut segs = vec![(Vec::new(), walk.clone())];
    if !cuts.is_empty() {
        segs.push((walk.clone(), cuts.clone()));
    }
    if let Some(top) = top.filter(|&k| layout.sources && has_block(model, k)) {
        let mut base = walk.clone();
        if elision_saves(model, top) {
            base.push(Step::Signature(top));
            segs.push((base.clone(), cuts.clone()));
        }
        base.push(Step::Name(top));
        segs.push((base, cuts));
    }
    segs
}

/// A prompt estimated larger than this many times the budget is fitted by the estimate first
/// (see [`Estimator`]): rendering and counting it whole, and every state of an exact bisection,
/// would take minutes on a tree of millions of nodes.
const ESTIMATE_FACTOR: f64 = 4.0;

/// Render a prompt, fitted into `budget` tokens when one is given.
pub fn fit(model: &Model, layout: Layout, renderer: &Renderer, tok: Tokenizer, budget: Option<usize>) -> Result<Fitted, BudgetError> {
    let Some(budget) = budget else {
        let full = renderer.render(model, model.doc(layout, &Plan::default()))?;
        let count = tok.count_for_message(&full);
        return Ok(Fitted { text: full, tokens: count.tokens, exact: count.exact, report: None });
    };
    let est = Estimator::new(model, layout, tok);
    if est.estimate(&Plan::default()) > ESTIMATE_FACTOR * budget as f64 {
        return fit_by_estimate(model, layout, renderer, tok, budget, &est);
    }
    let full = renderer.render(model, model.doc(layout, &Plan::default()))?;
    let tokens = tok.count(&full);
    if tokens <= budget {
        let (plan, cut) = plan_for(model, &[], None, layout.sources, budget, tok);
        return Ok(Fitted { text: full, tokens, exact: true, report: Some(report(model, &plan, &cut, layout.sources, budget)) });
    }
    let prio = model.priority();
    let top = prio.first().copied();
    let eval = |steps: &[Step]| -> Result<(String, usize, BudgetReport), BudgetError> {
        let (plan, cut) = plan_for(model, steps, top, layout.sources, budget, tok);
        let text = renderer.render(model, model.doc(layout, &plan))?;
        let n = tok.count(&text);
        Ok((text, n, report(model, &plan, &cut, layout.sources, budget)))
    };
    let state = |base: &[Step], steps: &[Step], k: usize| -> Vec<Step> { base.iter().chain(&steps[..k]).copied().collect() };
    let mut smallest = None;
    for (base, steps) in segments(model, layout, &prio) {
        let last = eval(&state(&base, &steps, steps.len()))?;
        if last.1 > budget {
            smallest = Some(smallest.map_or(last.1, |s: usize| s.min(last.1)));
            continue;
        }
        // Smallest k that fits: k = 0 first (a later segment may start small enough), then
        // bisection between a k that does not fit and one that does.
        let first = eval(&base)?;
        let (k, best) = if first.1 <= budget {
            (0, first)
        } else {
            let (mut lo, mut hi) = (0usize, steps.len());
            let mut best = last;
            while hi - lo > 1 {
                let mid = lo + (hi - lo) / 2;
                let r = eval(&state(&base, &steps, mid))?;
                if r.1 <= budget {
                    hi = mid;
                    best = r;
                } else {
                    lo = mid;
                }
            }
            (hi, best)
        };
        let best = Fitted { text: best.0, tokens: best.1, exact: true, report: Some(best.2) };
        let mut eval = |s: &[Step]| {
            let (text, n, report) = eval(s)?;
            Ok(Fitted { text, tokens: n, exact: true, report: Some(report) })
        };
        let mut fill = Fill { model, prio: &prio, est: &est, budget, eval: &mut eval };
        return Ok(fill.run(refill_tries(model), state(&base, &steps, k), best)?.1);
    }
    Err(BudgetError::TooSmall {
        budget,
        needed: smallest.unwrap_or(tokens),
        tokenizer: tok.name(),
        front: model.front,
        tree_only: !layout.sources,
    })
}

/// [`fit`] by the estimate whatever the prompt's size (for tests of that path).
#[cfg(test)]
pub(crate) fn fit_estimated(
    model: &Model,
    layout: Layout,
    renderer: &Renderer,
    tok: Tokenizer,
    budget: usize,
) -> Result<Fitted, BudgetError> {
    fit_by_estimate(model, layout, renderer, tok, budget, &Estimator::new(model, layout, tok))
}

/// [`fit`] for a prompt far over the budget: in each segment, the smallest number of steps
/// whose *estimate* fits is found by bisection, rendered and counted for real; while the real
/// count is over, the estimate is scaled by the error and the search repeats (then steps
/// forward), so a handful of real renders, each near the budget's size, decide.
fn fit_by_estimate(
    model: &Model,
    layout: Layout,
    renderer: &Renderer,
    tok: Tokenizer,
    budget: usize,
    est: &Estimator<'_>,
) -> Result<Fitted, BudgetError> {
    let prio = model.priority();
    let top = prio.first().copied();
    let state = |base: &[Step], steps: &[Step], k: usize| -> Vec<Step> { base.iter().chain(&steps[..k]).copied().collect() };
    let plan_of = |steps: &[Step]| plan_for(model, steps, top, layout.sources, budget, tok);
    let mut smallest: Option<usize> = None;
    for (base, steps) in segments(model, layout, &prio) {
        let mut scale = 1.0f64;
        // Real renders bound the search: states below `lo` are over the budget, state `hi`
        // fits (when `best` holds it).
        let (mut lo, mut hi) = (0usize, steps.len());
        let mut best: Option<(usize, Fitted)> = None;
        for _ in 0..10 {
            let fits = |k: usize| est.estimate(&plan_of(&state(&base, &steps, k)).0) * scale <= budget as f64;
            let top_k = if best.is_some() { hi - 1 } else { hi };
            let k = if fits(lo) {
                lo
            } else if !fits(top_k) {
                top_k
            } else {
                let (mut a, mut b) = (lo, top_k);
                while b - a > 1 {
                    let mid = a + (b - a) / 2;
                    if fits(mid) {
                        b = mid;
                    } else {
                        a = mid;
                    }
                }
                b
            };
            let (plan, _) = plan_of(&state(&base, &steps, k));
            let text = renderer.render(model, model.doc(layout, &plan))?;
            let n = tok.count(&text);
            let guess = est.estimate(&plan).max(1.0);
            if n <= budget {
                // The report is made once, for the state returned.
                best = Some((k, Fitted { text, tokens: n, exact: true, report: None }));
                hi = k;
                // Close enough to the budget, or nothing smaller left to try.
                if n as f64 >= 0.95 * budget as f64 || k == lo {
                    break;
                }
                scale = n as f64 / guess;
            } else {
                smallest = Some(smallest.map_or(n, |s| s.min(n)));
                if k >= steps.len() {
                    break;
                }
                lo = k + 1;
                scale = (n as f64 / guess).max(scale * 1.05);
            }
            if best.is_some() && lo >= hi {
                break;
            }
        }
        if let Some((k, b)) = best {
            // `refill` keeps the last state that fits: its report is the one returned (made
            // once, not for every state tried: naming what a state cut copies the names of
            // every function of a 200,000-function chain).
            let start = state(&base, &steps, k);
            let mut eval = |s: &[Step]| {
                let (plan, _) = plan_of(s);
                let text = renderer.render(model, model.doc(layout, &plan))?;
                let tokens = tok.count(&text);
                Ok(Fitted { text, tokens, exact: true, report: None })
            };
            let mut fill = Fill { model, prio: &prio, est, budget, eval: &mut eval };
            let (steps, mut out) = fill.run(refill_tries(model), start, b)?;
            let (plan, cut) = plan_of(&steps);
            out.report = Some(report(model, &plan, &cut, layout.sources, budget));
            return Ok(out);
        }
    }
    Err(BudgetError::TooSmall {
        budget,
        needed: smallest.unwrap_or(budget + 1),
        tokenizer: tok.name(),
        front: model.front,
        tree_only: !layout.sources,
    })
}
