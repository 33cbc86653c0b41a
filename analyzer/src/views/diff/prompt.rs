//! `slice diff`'s prompt: the question, the differing paths, the functions only one run
//! reached and the source of the functions where the runs part ways, within a budget.

use super::{Diff, LineChange, LineDiff, OneSided, Side};
use crate::analysis::PreparedTrace;
use crate::calltree::NodeId;
use crate::coverage::line_ranges as ranges;
use crate::frontend::{FrontEnd, Opt};
use crate::prompt::{fence_for, DocSource, Layout, Model, ModelNode, ModelTrace, Order, Plan};
use std::collections::HashMap;
use trace_format::escape;

/// The differential slice as a Markdown prompt section: the question (if any), the differing
/// paths, the functions only one run reached, and the source of the functions where the runs
/// part ways and of those on the differing paths, extracted by the prompt's source machinery
/// (`traces`: run A then run B, as given to [`diff_traces`]).
/// The budget of a diff prompt ([`prompt_within`]).
#[derive(Debug, Clone, Copy)]
pub struct DiffBudget {
    pub tokens: usize,
    pub tokenizer: crate::tokens::Tokenizer,
    /// The command line's default, not one the caller chose: the prompt says so.
    pub by_default: bool,
}

pub fn prompt(question: Option<&str>, d: &Diff, traces: &mut [PreparedTrace]) -> String {
    prompt_within(question, d, traces, None).unwrap_or_else(|e| e.to_string())
}

/// A diff prompt that does not fit its budget even with every source dropped and the paths cut.
#[derive(Debug, thiserror::Error)]
#[error(
    "{} {budget} is too small for this diff: without any source, with one line of call paths and no names of functions only one run reached it takes {needed} tokens ({tokenizer}); raise {} or narrow it with {}",
    .front.name(Opt::Budget), .front.name(Opt::Budget), .front.name(Opt::Focus)
)]
pub struct DiffTooSmall {
    pub budget: usize,
    pub needed: usize,
    pub tokenizer: &'static str,
    /// Who reads it: how it names the options.
    pub front: FrontEnd,
}

/// [`prompt`] within a budget: the sources kept most relevant first (by the prompt's ranking:
/// the spectrum, then the question) beside a share of the call paths and of the lists of
/// functions only one run reached, then the paths and the lists cut from the end to what is
/// left, each cut said.
pub fn prompt_within(
    question: Option<&str>,
    d: &Diff,
    traces: &mut [PreparedTrace],
    budget: Option<DiffBudget>,
) -> Result<String, DiffTooSmall> {
    let cmd = |t: &PreparedTrace| trace_format::escape::command(&t.meta.argv);
    let (cmd_a, cmd_b) = (cmd(&traces[0]), cmd(&traces[1]));
    let (dir_a, dir_b) = (traces[0].dir.display().to_string(), traces[1].dir.display().to_string());
    let model = Model::build(question.unwrap_or(""), traces);
    // Sources: divergence points and one-sided nodes, in call order, each function once.
    let mut nodes = Vec::new();
    // The callers of the points where the runs part ways: what they passed decides the split.
    let callers: std::collections::HashSet<usize> =
        d.shown_preorder().into_iter().filter(|&i| d.is_divergence(i)).map(|i| d.nodes[i].parent).filter(|&p| p != 0).collect();
    // The functions whose lines ran differently, at their first node.
    let line_nodes: HashMap<usize, &LineDiff> = d.lines.iter().flatten().map(|l| (l.node, l)).collect();
    // Runs that took the same paths through the same lines differ in their values only: every
    // function they ran is a candidate, most relevant first as the budget keeps them.
    let alike = same_paths_and_lines(d);
    for i in super::preorder(&d.nodes).into_iter().filter(|&i| alike || d.shown[i] || line_nodes.contains_key(&i)) {
        let n = &d.nodes[i];
        if !alike && n.side() == Side::Both && !d.is_divergence(i) && !callers.contains(&i) && !line_nodes.contains_key(&i) {
            continue;
        }
        let Some(func) = model.func_of_trace(n.func_id.0 as usize, n.func_id.1) else { continue };
        nodes.push(ModelNode {
            id: i as NodeId,
            parent: n.parent as NodeId,
            depth: n.depth,
            func,
            count: n.count_a + n.count_b,
            resumes: 0,
            time_ns: 0,
            recursive: n.recursive,
            descendants: 0,
            inlined: n.func.inlined,
        });
    }
    let why: HashMap<crate::prompt::FuncId, &str> = super::preorder(&d.nodes)
        .into_iter()
        .filter(|&i| alike || d.shown[i] || line_nodes.contains_key(&i))
        .filter_map(|i| {
            let n = &d.nodes[i];
            let why = match n.side() {
                // (Without line data, only the calls were compared.)
                _ if alike && d.lines_note.is_none() => "both runs, the same lines",
                _ if alike => "both runs, the same calls",
                Side::OnlyA => "only run A reached it here",
                Side::OnlyB => "only run B reached it here",
                Side::Both if line_nodes.get(&i).is_some_and(|l| matches!(l.change, LineChange::Source { .. })) => SOURCE_DIFFERS,
                Side::Both if line_nodes.contains_key(&i) => "both runs; its lines ran differently",
                Side::Both if d.is_divergence(i) => "both runs; from here they call different functions",
                Side::Both => "both runs; it calls where they part ways",
            };
            Some((model.func_of_trace(n.func_id.0 as usize, n.func_id.1)?, why))
        })
        .rev()
        .collect();
    // The lines of those functions that ran in one run only, marked in their source.
    let marks: Marks = line_nodes
        .values()
        .filter_map(|l| {
            let LineChange::Ran { only_a, only_b } = &l.change else { return None };
            let n = &d.nodes[l.node];
            let mut m: Vec<(u32, &'static str)> = only_a.iter().map(|&x| (x, "ran only in run A")).collect();
            m.extend(only_b.iter().map(|&x| (x, "ran only in run B")));
            Some((model.func_of_trace(n.func_id.0 as usize, n.func_id.1)?, m))
        })
        .collect();
    // A file changed since its run is named with the run it changed since: in a diff of two
    // runs of one checkout, "the run" could be either.
    let mut notes: Vec<String> = model.notes.iter().filter(|n| !n.starts_with(crate::prompt::RECOVERED_NOTE)).cloned().collect();
    notes.extend(traces.iter().zip(["run A", "run B"]).filter_map(|(t, run)| crate::prompt::recovered_note(t, run)));
    notes.extend(d.unread.iter().map(|u| u.sentence()));
    // Two runs' tests make one spectrum (as shards do): a source's counts say so, since run A's
    // passing tests may have run another copy of the function than run B's failing ones.
    let mut funcs = model.funcs.clone();
    if traces[0].dir != traces[1].dir {
        let ids: Vec<crate::prompt::FuncId> = funcs.iter().map(|(id, _)| id).collect();
        for id in ids {
            if let Some(f) = funcs.get_mut(id) {
                if let Some(s) = f.spectrum.take() {
                    f.spectrum = Some(format!("over both runs' tests: {s}"));
                }
            }
        }
    }
    let restricted = Model {
        question: model.question.clone(),
        traces: vec![ModelTrace::one_thread(
            format!("{dir_a} vs {dir_b}"),
            format!("{cmd_a} vs {cmd_b}"),
            traces[0].meta.cwd.clone(),
            nodes,
        )],
        funcs,
        notes,
        tests_shown: model.tests_shown,
        front: model.front,
        budget_by_default: false,
        analysis_ids: Default::default(),
    };
    let layout = Layout { tree: false, sources: true, order: Order::Call, repeat: false };
    let doc = restricted.doc(layout, &Plan::default());
    let sources: Vec<DocSource> = doc.traces.into_iter().flat_map(|t| t.sources).collect();

    let tree_lines: Vec<String> = d.text().lines().map(str::to_string).collect();
    // The functions whose lines ran differently, or whose source differs between the runs,
    // come first: they are where the runs part.
    let differing: std::collections::HashSet<crate::prompt::FuncId> = line_nodes
        .values()
        .filter_map(|l| {
            let n = &d.nodes[l.node];
            model.func_of_trace(n.func_id.0 as usize, n.func_id.1)
        })
        .collect();
    // How run B's copy of a function differs from run A's, where both are on disk.
    let edits: HashMap<crate::prompt::FuncId, &str> = line_nodes
        .values()
        .filter_map(|l| {
            let n = &d.nodes[l.node];
            Some((model.func_of_trace(n.func_id.0 as usize, n.func_id.1)?, l.edit.as_deref()?))
        })
        .collect();
    let relevance = |s: &DocSource| {
        let first = if differing.contains(&s.func) { 1e12 } else { 0.0 };
        first + restricted.funcs.get(s.func).map_or(0.0, |f| f.relevance)
    };
    // Least relevant first: the order sources are dropped in.
    let mut drop_order: Vec<usize> = (0..sources.len()).collect();
    drop_order.sort_by(|&x, &y| relevance(&sources[x]).total_cmp(&relevance(&sources[y])).then(y.cmp(&x)));
    let same_run = traces[0].dir == traces[1].dir;
    let ends = super::ends::section(traces);
    let line_text = lines_section(d);
    // `with_edit`: the sources whose edit (how run B's copy differs from run A's) is shown.
    let render = |kept: &[bool], with_edit: &[bool], tree_keep: usize, list_keep: usize| -> String {
        // Most relevant first (the reverse of the order they were dropped in).
        let dropped: Vec<&str> = drop_order.iter().rev().filter(|&&i| !kept[i]).map(|&i| sources[i].qualname.as_str()).collect();
        let mut tree: String = tree_lines[..tree_keep].iter().map(|l| format!("{l}\n")).collect();
        if tree_keep < tree_lines.len() {
            tree.push_str(&format!("… {} more lines of call paths left out to fit the budget\n", tree_lines.len() - tree_keep));
        }
        let mut notes = doc.notes.clone();
        if !dropped.is_empty() {
            notes.push(dropped_note(&dropped, budget, restricted.tests_shown));
        }
        let edits_left = sources.iter().zip(kept).zip(with_edit).filter(|((s, k), e)| **k && !**e && edits.contains_key(&s.func)).count();
        if edits_left > 0 {
            notes.push(format!(
                "How run B's copy differs from run A's is left out to fit the budget for {}.",
                crate::testrun::plural(edits_left, "function")
            ));
        }
        let shown: Vec<&DocSource> = sources.iter().zip(kept).filter(|(_, k)| **k).map(|(s, _)| s).collect();
        let shown_edits: HashMap<crate::prompt::FuncId, &str> =
            sources.iter().zip(with_edit).filter(|(_, e)| **e).filter_map(|(s, _)| Some((s.func, *edits.get(&s.func)?))).collect();
        write_prompt(
            question,
            &cmd_a,
            (!same_run).then_some(cmd_b.as_str()),
            d,
            &tree,
            &notes,
            &shown,
            (&why, &marks, &shown_edits),
            list_keep,
            &ends,
            &line_text,
        )
    };
    let all = tree_lines.len();
    // The longer of the two lists of functions only one run reached: `list_keep` caps each.
    let listed = d.funcs_only_a.len().max(d.funcs_only_b.len());
    let every = vec![true; sources.len()];
    let text = render(&every, &every, all, listed);
    let Some(DiffBudget { tokens: budget, tokenizer: tok, .. }) = budget else { return Ok(text) };
    let within = |t: &str, limit: usize| tok.count(t) <= limit;
    if within(&text, budget) {
        return Ok(text);
    }
    // The largest count in `lo..=hi` for which `ok` holds (`lo` if none does): `ok` holds up to
    // some count and not after (more lines of paths or more sources only add text).
    let largest = |mut lo: usize, mut hi: usize, ok: &dyn Fn(usize) -> bool| {
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            if ok(mid) {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        lo
    };
    let first = 1usize.min(all);
    let none = vec![false; sources.len()];
    // 1. The lists of functions only one run reached take at most a quarter of what the budget
    //    leaves beside the rest of the prompt while there are sources to show (half when there
    //    are none), and the call paths at most half while there are sources: a diff of two
    //    large runs has thousands of lines of paths and of names, which would leave no source.
    let fixed = tok.count(&render(&none, &none, first, 0));
    let share = |parts: usize| fixed + budget.saturating_sub(fixed) / parts;
    let list_share = share(if sources.is_empty() { 2 } else { 4 });
    let mut list_keep = listed;
    if !within(&render(&none, &none, first, listed), list_share) {
        list_keep = largest(0, listed, &|k| within(&render(&none, &none, first, k), list_share));
    }
    let mut tree_keep = all;
    if !sources.is_empty() && !within(&render(&none, &none, all, list_keep), share(2)) {
        tree_keep = largest(first, all, &|k| within(&render(&none, &none, k, list_keep), share(2)));
    }
    // 2. The sources (without their edits), most relevant first, each taken when its block
    //    fits the room left by its own count (one large block, a module's, does not keep the smaller ones after it
    //    out); then the largest part of that choice, in the same order, that fits for real.
    let base = tok.count(&render(&none, &none, tree_keep, list_keep));
    let mut left = budget.saturating_sub(base);
    let mut chosen: Vec<usize> = Vec::new();
    for &i in drop_order.iter().rev() {
        let cost =
            tok.count(&source_block(&sources[i], why.get(&sources[i].func).copied().unwrap_or(""), marks_of(&marks, &sources[i]), None));
        if cost <= left {
            left -= cost;
            chosen.push(i);
        }
    }
    let kept_of = |m: usize| {
        let mut kept = vec![false; sources.len()];
        for &i in &chosen[..m] {
            kept[i] = true;
        }
        kept
    };
    let kept = kept_of(largest(0, chosen.len(), &|m| m == 0 || within(&render(&kept_of(m), &none, tree_keep, list_keep), budget)));
    // Then the edits of the kept sources, in the same order, as many as fit beside them.
    let edit_order: Vec<usize> = chosen.iter().copied().filter(|&i| kept[i] && edits.contains_key(&sources[i].func)).collect();
    let edits_of = |m: usize| {
        let mut e = vec![false; sources.len()];
        for &i in &edit_order[..m] {
            e[i] = true;
        }
        e
    };
    let with_edit =
        edits_of(largest(0, edit_order.len(), &|m| m == 0 || within(&render(&kept, &edits_of(m), tree_keep, list_keep), budget)));
    // 3. The paths: as many lines as fit beside those sources (more than half of the budget
    //    when the sources left room; fewer when even no source leaves too little); then the
    //    lists, as many names as fit beside both (at least what step 1 gave them, unless even
    //    no source leaves too little).
    let tree_keep = largest(first, all, &|k| within(&render(&kept, &with_edit, k, list_keep), budget));
    let list_keep = if within(&render(&kept, &with_edit, tree_keep, list_keep), budget) {
        largest(list_keep, listed, &|k| within(&render(&kept, &with_edit, tree_keep, k), budget))
    } else {
        largest(0, list_keep, &|k| within(&render(&kept, &with_edit, tree_keep, k), budget))
    };
    let text = render(&kept, &with_edit, tree_keep, list_keep);
    if within(&text, budget) {
        Ok(text)
    } else {
        Err(DiffTooSmall { budget, needed: tok.count(&text), tokenizer: tok.name(), front: model.front })
    }
}

/// The note of a diff prompt whose budget dropped sources (`dropped`: most relevant first):
/// how many, the most relevant of them by name (as `slice from-trace`'s notes name them: a
/// run's diff can drop a thousand), and, when the budget is the command line's default, that
/// it is and how to turn it off.
fn dropped_note(dropped: &[&str], budget: Option<DiffBudget>, tests_shown: bool) -> String {
    let of = match budget {
        Some(b) if b.by_default => {
            format!(" of {} tokens ({}{})", b.tokens, b.tokenizer.name(), crate::prompt::budget::default_budget_words(tests_shown))
        }
        _ => String::new(),
    };
    let names = crate::prompt::budget::list_of(dropped.iter().copied(), dropped.len(), crate::prompt::budget::NOTE_NAMES);
    format!("To fit the budget{of}, the source of {} is not shown: {names}.", crate::testrun::plural(dropped.len(), "function"))
}

/// The diff prompt's text (see [`prompt`]).
/// What a diff prompt says of a function both runs reached whose text differs between them.
const SOURCE_DIFFERS: &str = "both runs; its source differs between the runs (shown as run A ran it)";

#[allow(clippy::too_many_arguments)]
fn write_prompt(
    question: Option<&str>,
    cmd_a: &str,
    // `None`: both sides are parts of one run (two tests of it).
    cmd_b: Option<&str>,
    d: &Diff,
    tree: &str,
    notes: &[String],
    sources: &[&DocSource],
    (why, marks, edits): (&HashMap<crate::prompt::FuncId, &str>, &Marks, &HashMap<crate::prompt::FuncId, &str>),
    list_keep: usize,
    ends: &str,
    line_text: &str,
) -> String {
    let fence = fence_for(&[tree]);
    let mut s = String::new();
    if let Some(q) = question.map(str::trim).filter(|q| !q.is_empty()) {
        s.push_str(&format!("# Question\n\n{q}\n\n"));
    }
    s.push_str("# Differential slice\n\n");
    match cmd_b {
        None => s.push_str(&format!("Two parts of one recorded run are compared (run A and run B below): {}.\n", escape::code_span(cmd_a))),
        Some(cmd_b) => s.push_str(&format!(
            "The program was run twice and both runs were recorded. Run A: {}. Run B: {}.\n",
            escape::code_span(cmd_a),
            escape::code_span(cmd_b)
        )),
    }
    s.push_str(
        "Below are how each run ended, the call paths that only one of the runs reached (each line a function that ran, indented under its caller; \
`-`: only in run A, `+`: only in run B; unmarked lines are callers both runs share, shown for context), the functions \
only one run reached at all, the lines that ran in only one run of the functions both reached (when the runs recorded lines), \
and the source code of the functions where the runs part ways, of the functions on the differing paths and of those \
whose lines ran differently, in call order",
    );
    // A function whose text changed between the runs is the change itself: its source leads.
    let changed = |src: &&&DocSource| why.get(&src.func).is_some_and(|w| *w == SOURCE_DIFFERS);
    let (first, rest): (Vec<&&DocSource>, Vec<&&DocSource>) = sources.iter().partition(changed);
    if !first.is_empty() {
        s.push_str(&format!(
            ", except that {} whose source differs between the runs {} first",
            if first.len() == 1 { "the function" } else { "the functions" },
            if first.len() == 1 { "comes" } else { "come" }
        ));
    }
    s.push_str(".\n");
    for n in notes {
        s.push_str(&format!("\n> {}\n", escape::line(n)));
    }
    s.push_str(ends);
    s.push_str("\n## Call paths only in one run\n\n");
    if d.is_empty() {
        s.push_str("Both runs reached exactly the same call paths.\n");
        if d.lines.is_none() && same_paths_and_lines(d) {
            s.push_str("The source below is that of the functions both ran, the most relevant first within the budget.\n");
        }
    } else {
        s.push_str(&format!("{fence}diff\n{tree}{fence}\n"));
    }
    s.push_str("\n## Functions reached by only one run\n\n");
    let list = |v: &[OneSided]| -> String {
        if v.is_empty() {
            return "none".to_string();
        }
        let mut names: Vec<String> = v
            .iter()
            .take(list_keep)
            .map(|f| match f.ochiai.filter(|o| *o > 0.0) {
                Some(o) => format!("{} ({}; Ochiai {o:.2})", escape::code_span(&f.qualname), escape::line(&f.location)),
                None => format!("{} ({})", escape::code_span(&f.qualname), escape::line(&f.location)),
            })
            .collect();
        if v.len() > names.len() {
            let more = v.len() - names.len();
            names.push(if names.is_empty() {
                format!("{} (left out to fit the budget)", crate::testrun::plural(more, "function"))
            } else {
                format!("and {more} more (left out to fit the budget)")
            });
        }
        names.join(", ")
    };
    let ranked = if d.funcs_only_a.iter().chain(&d.funcs_only_b).any(|f| f.ochiai.is_some()) {
        " (most associated with failing tests first)"
    } else {
        ""
    };
    s.push_str(&format!("- Only in run A{ranked}: {}\n", list(&d.funcs_only_a)));
    s.push_str(&format!("- Only in run B{ranked}: {}\n", list(&d.funcs_only_b)));
    s.push_str(line_text);
    if !sources.is_empty() {
        s.push_str("\n## Source code\n");
        for src in first.into_iter().chain(rest) {
            s.push_str(&source_block(src, why.get(&src.func).copied().unwrap_or(""), marks_of(marks, src), edits.get(&src.func).copied()));
        }
    }
    s
}

/// Whether the runs reached the same call paths and, where both recorded lines, ran the same
/// lines: then only their values differ.
fn same_paths_and_lines(d: &Diff) -> bool {
    d.is_empty() && d.funcs_only_a.is_empty() && d.funcs_only_b.is_empty() && d.lines.as_ref().is_none_or(Vec::is_empty)
}

/// At most this many functions are listed whose lines ran differently (the rest counted).
const LINE_DIFFS_LISTED: usize = 30;

/// The functions both runs reached whose lines ran differently ([`Diff::lines`]); nothing
/// when a run holds no line data.
fn lines_section(d: &Diff) -> String {
    let Some(lines) = &d.lines else {
        return match &d.lines_note {
            Some(n) => format!("\n## Lines that ran in only one run\n\n{n}\n"),
            None => String::new(),
        };
    };
    let mut s = String::from("\n## Lines that ran in only one run\n\n");
    if let Some(n) = &d.lines_note {
        // Only what the functions' text says (`diff_traces`).
        s.push_str(&format!(
            "{n}\nFunctions both runs reached whose source differs between the runs (line numbers of run B's copy of the file):\n"
        ));
        list_changes(&mut s, lines);
        return s;
    }
    if lines.is_empty() {
        s.push_str("In the functions both runs reached, both ran the same lines.\n");
        if d.is_empty() {
            s.push_str(
                "The runs took the same paths through the same lines: they differ in the values computed, or in code changed \
between them on lines both ran. The source below is that of the functions both ran, the most relevant first within the budget.\n",
            );
        }
        return s;
    }
    s.push_str("Functions both runs reached whose lines ran differently (line numbers of run B's copy of the file):\n");
    list_changes(&mut s, lines);
    s
}

/// One line per function of `lines`, at most [`LINE_DIFFS_LISTED`].
fn list_changes(s: &mut String, lines: &[LineDiff]) {
    for l in lines.iter().take(LINE_DIFFS_LISTED) {
        let what = match &l.change {
            LineChange::Ran { only_a, only_b } => {
                let mut parts = Vec::new();
                if !only_a.is_empty() {
                    parts.push(format!("only in run A: {} {}", if only_a.len() == 1 { "line" } else { "lines" }, ranges(only_a)));
                }
                if !only_b.is_empty() {
                    parts.push(format!("only in run B: {} {}", if only_b.len() == 1 { "line" } else { "lines" }, ranges(only_b)));
                }
                parts.join("; ")
            }
            LineChange::Source { lines_a, lines_b } => {
                format!("its source differs between the runs ({lines_a} lines in run A, {lines_b} in run B): not compared line by line")
            }
        };
        s.push_str(&format!("- {} ({}): {what}\n", escape::code_span(&l.qualname), escape::line(&l.location)));
    }
    if lines.len() > LINE_DIFFS_LISTED {
        s.push_str(&format!("- and {} more functions\n", lines.len() - LINE_DIFFS_LISTED));
    }
}

/// Per function, the lines of its source to mark and what to say there.
type Marks = HashMap<crate::prompt::FuncId, Vec<(u32, &'static str)>>;

fn marks_of<'a>(marks: &'a Marks, src: &DocSource) -> &'a [(u32, &'static str)] {
    marks.get(&src.func).map_or(&[], Vec::as_slice)
}

/// `code` (lines `first..` of a file) with a comment in the language's syntax at the end of
/// each marked line; unchanged when the language has no known comment syntax or the code is
/// not the function's lines one for one (condensed: fewer lines than its span).
fn mark_lines(code: &str, lang: &str, first: Option<u32>, last: Option<u32>, marks: &[(u32, &str)]) -> String {
    let comment = match lang {
        "python" => "#",
        "c" | "cpp" | "rust" => "//",
        _ => return code.to_string(),
    };
    let (Some(first), Some(last)) = (first, last) else { return code.to_string() };
    if marks.is_empty() || code.lines().count() as u32 != last.saturating_sub(first) + 1 {
        return code.to_string();
    }
    let at: HashMap<u32, &str> = marks.iter().copied().collect();
    let mut out = String::with_capacity(code.len() + 32 * marks.len());
    for (i, line) in code.lines().enumerate() {
        out.push_str(line);
        if let Some(what) = at.get(&(first + i as u32)) {
            out.push_str(&format!("  {comment} <- {what}"));
        }
        out.push('\n');
    }
    if !code.ends_with('\n') {
        out.pop();
    }
    out
}

/// A source of the diff prompt: its heading (with `why` the runs reach it), note and code,
/// with `marks` at the end of their lines ([`mark_lines`]).
fn source_block(src: &DocSource, why: &str, marks: &[(u32, &str)], edit: Option<&str>) -> String {
    let lines = match (src.first_line, src.last_line) {
        (Some(a), Some(b)) => format!(":{a}-{b}"),
        (Some(a), None) => format!(":{a}"),
        _ => String::new(),
    };
    let mut s = format!("\n#### {} ({}{lines}): {why}\n", escape::code_span(&src.qualname), escape::line(&src.file));
    if let Some(note) = &src.note {
        s.push_str(&format!("\n_{}_\n", escape::line(note)));
    }
    if let Some(code) = &src.code {
        let code = mark_lines(code, &src.lang, src.first_line, src.last_line, marks);
        s.push_str(&format!("\n{}{}\n{}\n{}\n", src.fence, escape::line(&src.lang), escape::block(&code), src.fence));
    }
    if let Some(edit) = edit {
        let fence = crate::prompt::fence_for(&[edit]);
        s.push_str(&format!(
            "\nHow run B's copy differs from run A's (`-` run A's lines, `+` run B's):\n\n{fence}diff\n{}\n{fence}\n",
            escape::block(edit)
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Marks go at the end of their lines, in the language's comment syntax; none when the
    /// code is not the function's lines one for one, or the language is unknown.
    #[test]
    fn lines_are_marked_in_the_languages_comment_syntax() {
        let code = "def f(x):\n    if x:\n        return 1\n    return 2";
        let marks = [(12, "ran only in run A"), (13, "ran only in run B")];
        assert_eq!(
            mark_lines(code, "python", Some(10), Some(13), &marks),
            "def f(x):\n    if x:\n        return 1  # <- ran only in run A\n    return 2  # <- ran only in run B"
        );
        assert_eq!(mark_lines("int f() {\n  return 1;\n}\n", "c", Some(1), Some(3), &[(2, "m")]), "int f() {\n  return 1;  // <- m\n}\n");
        // Condensed (fewer lines than its span), an unknown language, no span: unchanged.
        assert_eq!(mark_lines(code, "python", Some(10), Some(20), &marks), code);
        assert_eq!(mark_lines(code, "", Some(10), Some(13), &marks), code);
        assert_eq!(mark_lines(code, "python", None, None, &marks), code);
    }

    /// The note of dropped sources says the budget only when it is the default, with how to
    /// turn it off.
    #[test]
    fn a_default_budget_is_said_in_the_dropped_sources_note() {
        let b = |by_default| Some(DiffBudget { tokens: 20_000, tokenizer: crate::tokens::Tokenizer::O200kBase, by_default });
        assert_eq!(dropped_note(&["f", "g"], b(false), true), "To fit the budget, the source of 2 functions is not shown: `f`, `g`.");
        assert_eq!(
            dropped_note(&["f"], b(true), true),
            "To fit the budget of 20000 tokens (o200k_base; a test's prompt gets this budget by default, `--no-budget` shows \
             every function), the source of 1 function is not shown: `f`."
        );
        // A thousand dropped: the first ten named, the rest counted.
        let many: Vec<String> = (0..1000).map(|i| format!("f{i}")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        assert_eq!(
            dropped_note(&many, b(false), false),
            "To fit the budget, the source of 1000 functions is not shown: `f0`, `f1`, `f2`, `f3`, `f4`, `f5`, `f6`, `f7`, `f8`, \
             `f9` and 990 more."
        );
    }
}
