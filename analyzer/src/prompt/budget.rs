//! Fitting a prompt into a token budget, exactly.
//!
//! Policy (deterministic; see `docs/prompts.md`): functions are ranked by
//! [`Model::priority`] (closest to the question, then closest to the root, then earliest
//! call). The prompt is degraded by a fixed sequence of steps until the rendered text,
//! counted with the real tokenizer, fits:
//!
//! 1. repeated source blocks (layouts that repeat) are shown once;
//! 2. function by function, least important first: the body is elided (decorators and
//!    signature kept, the body replaced by a marked `...`); and, interleaved with it,
//! 3. function by function, least important first: the source is dropped, the function
//!    stays in the tree by name, marked `[source omitted: budget]`. This second walk starts
//!    when the first is halfway through the functions, so the least important half loses
//!    its signatures before the most important half loses its bodies;
//! 4. the tree is cut below depth D, D decreasing from the deepest level to 1, each cut
//!    marked with the number of calls it hides.
//!
//! The smallest number of steps that fits is found by bisection over the step sequence; the
//! result is always re-counted, so the output is never over the budget. Every elision is
//! marked in place and summarised in a note at the top of the prompt.

use super::render::{Renderer, TemplateError};
use super::{Layout, Level, Model, Plan, SourceState};
use crate::tokens::Tokenizer;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    CollapseRepeats,
    Signature(String),
    Name(String),
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
    pub collapsed_repeats: bool,
    pub tree_depth: Option<u32>,
    /// Functions whose whole source was kept.
    pub kept: usize,
}

/// A rendered prompt and its exact token count.
#[derive(Debug, Clone)]
pub struct Fitted {
    pub text: String,
    pub tokens: usize,
    pub report: Option<BudgetReport>,
}

#[derive(Debug, thiserror::Error)]
pub enum BudgetError {
    #[error("the budget of {budget} tokens is too small: even with every function body dropped and the tree cut to one level, the prompt takes {needed} tokens ({tokenizer}); raise --budget or shorten the question")]
    TooSmall { budget: usize, needed: usize, tokenizer: &'static str },
    #[error(transparent)]
    Template(#[from] TemplateError),
}

fn names(model: &Model, keys: &[String]) -> Vec<String> {
    keys.iter().map(|k| model.funcs.get(k).map(|f| f.qualname.clone()).unwrap_or_else(|| k.clone())).collect()
}

fn list(names: &[String]) -> String {
    const MAX: usize = 25;
    let mut s = names.iter().take(MAX).map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ");
    if names.len() > MAX {
        s.push_str(&format!(" and {} more", names.len() - MAX));
    }
    s
}

fn plan_for(model: &Model, steps: &[Step], budget: usize, tok: Tokenizer) -> (Plan, BudgetReport) {
    let mut plan = Plan::default();
    let mut sig = Vec::new();
    let mut name = Vec::new();
    for s in steps {
        match s {
            Step::CollapseRepeats => plan.collapse_repeats = true,
            Step::Signature(k) => {
                plan.levels.insert(k.clone(), Level::Signature);
                sig.push(k.clone());
            }
            Step::Name(k) => {
                plan.levels.insert(k.clone(), Level::Name);
                sig.retain(|x| x != k);
                name.push(k.clone());
            }
            Step::TreeDepth(d) => plan.tree_depth = Some(*d),
        }
    }
    let report = BudgetReport {
        budget,
        elided: names(model, &sig),
        dropped: names(model, &name),
        collapsed_repeats: plan.collapse_repeats,
        tree_depth: plan.tree_depth,
        kept: model.funcs.values().filter(|f| matches!(f.source, SourceState::Code(_)) && plan.level(&f.key) == Level::Body).count(),
    };
    if !steps.is_empty() {
        let mut parts = Vec::new();
        if plan.collapse_repeats {
            parts.push("repeated source blocks are shown once".to_string());
        }
        if !report.elided.is_empty() {
            parts.push(format!(
                "the bodies of {} functions are elided (signature kept, marked `body elided`): {}",
                sig.len(),
                list(&report.elided)
            ));
        }
        if !report.dropped.is_empty() {
            parts.push(format!(
                "{} functions are shown by name only (marked `[source omitted: budget]` in the tree): {}",
                name.len(),
                list(&report.dropped)
            ));
        }
        if let Some(d) = plan.tree_depth {
            parts.push(format!("the call tree is cut below depth {d} (marked `… N more calls below`)"));
        }
        plan.notes.push(format!("To fit the budget of {budget} tokens ({}): {}.", tok.name(), parts.join("; ")));
    }
    (plan, report)
}

/// Render a prompt, fitted into `budget` tokens when one is given.
pub fn fit(model: &Model, layout: Layout, renderer: &Renderer, tok: Tokenizer, budget: Option<usize>) -> Result<Fitted, BudgetError> {
    let full = renderer.render(model, &model.doc(layout, &Plan::default()))?;
    let tokens = tok.count(&full);
    let Some(budget) = budget else { return Ok(Fitted { text: full, tokens, report: None }) };
    if tokens <= budget {
        let report = plan_for(model, &[], budget, tok).1;
        return Ok(Fitted { text: full, tokens, report: Some(report) });
    }
    // The step sequence.
    let prio = model.priority();
    let has_block = |k: &String| matches!(model.funcs[k].source, SourceState::Code(_) | SourceState::Unavailable(_));
    let mut steps = Vec::new();
    if layout.sources {
        if layout.repeat {
            steps.push(Step::CollapseRepeats);
        }
        // Two walks from the least to the most important function: the first elides bodies,
        // the second drops sources. The second starts when the first is halfway, so the least
        // important half loses its signatures before the most important half loses its bodies.
        let blocks: Vec<&String> = prio.iter().rev().filter(|k| has_block(k)).collect();
        let half = blocks.len().div_ceil(2);
        for (i, k) in blocks.iter().enumerate() {
            // Only where eliding saves something (a short body costs less than its marker).
            if let SourceState::Code(e) = &model.funcs[*k].source {
                if e.signature.as_ref().is_some_and(|sig| sig.len() + 40 < e.code.len()) {
                    steps.push(Step::Signature((*k).clone()));
                }
            }
            if i >= half {
                steps.push(Step::Name(blocks[i - half].clone()));
            }
        }
        for k in &blocks[blocks.len() - half..] {
            steps.push(Step::Name((*k).clone()));
        }
    }
    if layout.tree {
        let max = model.traces.iter().flat_map(|t| t.threads.iter()).flat_map(|th| th.nodes.iter()).map(|n| n.depth).max().unwrap_or(1);
        for d in (1..max).rev() {
            steps.push(Step::TreeDepth(d));
        }
    }
    let eval = |k: usize| -> Result<(String, usize, BudgetReport), BudgetError> {
        let (plan, report) = plan_for(model, &steps[..k], budget, tok);
        let text = renderer.render(model, &model.doc(layout, &plan))?;
        let n = tok.count(&text);
        Ok((text, n, report))
    };
    let last = eval(steps.len())?;
    if last.1 > budget {
        return Err(BudgetError::TooSmall { budget, needed: last.1, tokenizer: tok.name() });
    }
    let (mut lo, mut hi) = (0usize, steps.len());
    let mut best = last;
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        let r = eval(mid)?;
        if r.1 <= budget {
            hi = mid;
            best = r;
        } else {
            lo = mid;
        }
    }
    Ok(Fitted { text: best.0, tokens: best.1, report: Some(best.2) })
}
