//! The budget's size estimate: a cheap, calibrated guess of a prompt state's tokens, so that
//! the search of [`super::budget`] never renders a huge prompt whole.

use super::{FuncId, FuncInfo, Layout, Level, Model, Plan, SourceState};
use crate::tokens::Tokenizer;

/// Texts longer than this (bytes) are counted on their first this many bytes and scaled by
/// length: counting every function of a 2 M-node tree's prompt in full took a quarter of
/// `--budget`'s time, and the estimate only guides a search whose result is counted exactly.
const COUNT_SAMPLE: usize = 4096;

/// Tokens of `text`, exact up to [`COUNT_SAMPLE`] bytes, extrapolated from a prefix beyond.
/// Counted in remembered pieces ([`Tokenizer::count_in_pieces`]): the same count, and a run of
/// lines that many functions share is encoded once.
fn sampled_count(tok: Tokenizer, text: &str) -> f64 {
    if text.len() <= COUNT_SAMPLE {
        return tok.count_in_pieces(text) as f64;
    }
    let mut end = COUNT_SAMPLE;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    tok.count_in_pieces(&text[..end]) as f64 * text.len() as f64 / end as f64
}

/// Functions per counting thread, at least: below this, threads cost more than they save.
const COUNT_CHUNK: usize = 256;

/// Tokens of a function's block whole and as a signature, its texts counted by `count`
/// ([`sampled_count`], or by length at a measured rate: [`block_costs`]).
fn block_cost(f: &FuncInfo, count: &dyn Fn(&str) -> f64) -> (f64, f64) {
    let head = (f.qualname.len() + f.file.len()) as f64 / 3.0 + 12.0;
    match &f.source {
        SourceState::Code(e) => {
            let values: usize = f.values.iter().map(|v| v.text.len()).sum();
            let body = count(&e.code) + values as f64 / 3.0;
            let sig = e.signature.as_deref().map_or(body, count);
            (body + head, sig + head)
        }
        SourceState::Unavailable(why) => (why.len() as f64 / 3.0 + head, why.len() as f64 / 3.0 + head),
        SourceState::Omitted(_) => (0.0, 0.0),
    }
}

/// Past this many functions, [`block_costs`] counts an even sample of [`CALIBRATION_SAMPLE`]
/// of them and sizes the others by their length at the sample's tokens per byte: a 200,000-function
/// chain's blocks took a quarter of `--budget`'s time to count one by one, and the estimate
/// only guides a search whose result is counted exactly.
const CALIBRATE_FROM: usize = 20_000;
const CALIBRATION_SAMPLE: usize = 2_000;

/// [`block_cost`] of every function, in order: each counted ([`sampled_count`]) on the
/// machine's cores (a wide tree's thousands of functions: counting is most of what the estimate
/// costs to set up), or past [`CALIBRATE_FROM`] functions, by length at a measured rate.
fn block_costs(funcs: &[&FuncInfo], tok: Tokenizer) -> Vec<(f64, f64)> {
    if funcs.len() > CALIBRATE_FROM {
        let (mut bytes, mut tokens) = (0usize, 0.0f64);
        for f in funcs.iter().step_by(funcs.len().div_ceil(CALIBRATION_SAMPLE)) {
            if let SourceState::Code(e) = &f.source {
                bytes += e.code.len();
                tokens += sampled_count(tok, &e.code);
            }
        }
        let per_byte = if bytes > 0 { tokens / bytes as f64 } else { 1.0 / 3.0 };
        let by_length = move |text: &str| text.len() as f64 * per_byte;
        return funcs.iter().map(|f| block_cost(f, &by_length)).collect();
    }
    let counted = move |text: &str| sampled_count(tok, text);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = (funcs.len() / COUNT_CHUNK).clamp(1, cores);
    if threads == 1 {
        return funcs.iter().map(|f| block_cost(f, &counted)).collect();
    }
    let chunk = funcs.len().div_ceil(threads);
    std::thread::scope(|s| {
        let parts: Vec<_> = funcs
            .chunks(chunk)
            .map(|c| {
                s.spawn(move || {
                    let costs = c.iter().map(|f| block_cost(f, &counted)).collect::<Vec<_>>();
                    (costs, crate::tokens::encoded_bytes())
                })
            })
            .collect();
        // A counting thread cannot panic short of a bug in the tokenizer; count here then.
        parts
            .into_iter()
            .zip(funcs.chunks(chunk))
            .flat_map(|(p, c)| match p.join() {
                Ok((costs, encoded)) => {
                    crate::tokens::credit_encoded(encoded);
                    costs
                }
                Err(_) => c.iter().map(|f| block_cost(f, &counted)).collect(),
            })
            .collect()
    })
}

/// A cheap, calibrated guess of a state's size in tokens, so that a huge prompt is never
/// rendered whole: each function's source block is counted once with the real tokenizer, a
/// tree line is estimated from its length, and the visible part of the tree is computed per
/// state in one pass (`Plan::visible`). The guess only chooses where to look: what is returned
/// is always rendered and counted for real.
pub(crate) struct Estimator<'a> {
    model: &'a Model,
    layout: Layout,
    /// Per function id: tokens of its block whole and as a signature.
    blocks: Vec<(f64, f64)>,
    /// Per function id: tokens of its block with the code that did not run elided
    /// ([`Level::Ran`]), for the functions that have that form.
    ran: Vec<Option<f64>>,
    /// Per thread, per node (pre-order): its function's id and the tokens of its tree line.
    nodes: Vec<Vec<(u32, f32)>>,
    fixed: f64,
}

impl<'a> Estimator<'a> {
    pub(crate) fn new(model: &'a Model, layout: Layout, tok: Tokenizer) -> Estimator<'a> {
        let funcs: Vec<&FuncInfo> = model.funcs.values().collect();
        let blocks = block_costs(&funcs, tok);
        // Few functions have it (those the condensing keeps exact, with lines not run).
        let ran = funcs
            .iter()
            .zip(&blocks)
            .map(|(f, &(body, _))| {
                let (ran, _) = f.not_run.as_ref()?;
                let SourceState::Code(e) = &f.source else { return None };
                // By length: the estimate only guides the search, and a program's own functions
                // (thousands, kept exact) would each be counted twice.
                Some(body * ran.len() as f64 / e.code.len().max(1) as f64)
            })
            .collect();
        // Nodes of functions the model lacks cost their line only (id past the blocks).
        let missing = blocks.len() as u32;
        let nodes = model
            .traces
            .iter()
            .flat_map(|t| t.threads.iter())
            .map(|th| {
                th.nodes
                    .iter()
                    .map(|n| {
                        let (id, name) = match model.funcs.get(n.func) {
                            Some(f) => (n.func.0, f.qualname.len()),
                            None => (missing, 0),
                        };
                        let line = n.depth as f64 / 4.0 + name as f64 / 3.0 + 3.0;
                        (id, line as f32)
                    })
                    .collect()
            })
            .collect();
        let threads = model.traces.iter().map(|t| t.threads.len()).sum::<usize>() as f64;
        let fixed = tok.count(&model.question) as f64 + 400.0 + 40.0 * threads + 60.0 * model.traces.len() as f64;
        Estimator { model, layout, blocks, ran, nodes, fixed }
    }

    /// Tokens of `f`'s block whole and as a signature.
    pub(crate) fn block(&self, f: FuncId) -> (f64, f64) {
        self.blocks.get(f.index()).copied().unwrap_or((0.0, 0.0))
    }

    /// Tokens of `f`'s block with the code that did not run elided, if it has that form
    /// ([`Level::Ran`]).
    pub(crate) fn ran(&self, f: FuncId) -> Option<f64> {
        self.ran.get(f.index()).copied().flatten()
    }

    /// A value per function id: the given one for each function, `default` for the rest (one
    /// more slot for the nodes of functions the model lacks).
    fn by_id<T: Copy>(&self, keys: impl Iterator<Item = (FuncId, T)>, default: T) -> Vec<T> {
        let mut v = vec![default; self.blocks.len() + 1];
        for (k, x) in keys {
            if let Some(slot) = v.get_mut(k.index()).filter(|_| k.index() < self.blocks.len()) {
                *slot = x;
            }
        }
        v
    }

    pub(crate) fn estimate(&self, plan: &Plan) -> f64 {
        let repeat = self.layout.repeat && !plan.collapse_repeats && self.layout.order == super::Order::Call;
        let mut total = self.fixed + plan.notes.iter().map(|n| n.len() as f64 / 3.0).sum::<f64>();
        // The plan's keys looked up once per estimate, not once per node.
        let levels = self.by_id(plan.levels.iter().map(|(&k, &l)| (k, l)), Level::Body);
        let keep = self.by_id(plan.tree_keep.iter().map(|&k| (k, true)), false);
        let mut seen = vec![false; self.blocks.len() + 1];
        let threads = self.model.traces.iter().flat_map(|t| t.threads.iter());
        for (th, ids) in threads.zip(&self.nodes) {
            let vis = plan.visible_with(&th.nodes, |i| keep[ids[i].0 as usize]);
            for (&(id, line), (shown, hidden)) in ids.iter().zip(vis) {
                if !shown {
                    continue;
                }
                if self.layout.tree {
                    total += line as f64 + if hidden > 0 { 12.0 } else { 0.0 };
                }
                let first = !std::mem::replace(&mut seen[id as usize], true);
                if self.layout.sources && (repeat || first) {
                    let (body, sig) = self.blocks.get(id as usize).copied().unwrap_or_default();
                    total += match levels[id as usize] {
                        Level::Body => body,
                        Level::Ran => self.ran.get(id as usize).copied().flatten().unwrap_or(body),
                        Level::Signature => sig,
                        Level::Name => 0.0,
                    };
                }
            }
        }
        total
    }
}
