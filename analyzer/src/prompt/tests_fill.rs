//! The budget's fill: a function cut while less important ones are whole is raised whole
//! by demoting them ([`super::fill::Fill::promote`]).

use super::budget::{fit, plan_for, Step};
use super::render::{Format, Renderer};
use super::{FuncId, FuncInfo, Funcs, Layout, Model, ModelNode, ModelTrace, SourceState};
use crate::pathclass::Origin;
use crate::tokens::Tokenizer;

/// A function of `lines` body lines and a signature of `params` parameters, with its
/// signature recorded (so eliding its body saves something).
fn func(name: &str, params: usize, lines: usize, relevance: f64) -> FuncInfo {
    let args: Vec<String> = (0..params).map(|i| format!("parameter_number_{i}")).collect();
    let sig = format!("def {name}({}):", args.join(", "));
    let body: String = (0..lines).map(|i| format!("\n    value_{i} = compute_something({i}, value_{})", i.saturating_sub(1))).collect();
    let mut f = crate::testutil::func_info(name, "pkg/m.py", Origin::Program, &format!("{sig}{body}"));
    if let SourceState::Code(e) = &mut f.source {
        e.signature = Some(sig);
        e.last_line = lines as u32 + 1;
    }
    f.relevance = relevance;
    f
}

/// `top` calls, in rank order: eight helpers `h0..h7`, the large `big` (ranked 10th, relevance
/// 50), then four small functions with long signatures `s0..s3` (relevance `below_from`,
/// then one less each).
fn model(below_from: f64) -> (Model, FuncId, Vec<FuncId>, Vec<FuncId>) {
    let mut funcs = Funcs::default();
    let top = funcs.insert(func("top", 1, 4, 100.0));
    let above: Vec<FuncId> = (0..8).map(|i| funcs.insert(func(&format!("h{i}"), 1, 5, 90.0 - i as f64))).collect();
    let big = funcs.insert(func("big", 2, 60, 50.0));
    let below: Vec<FuncId> = (0..4).map(|i| funcs.insert(func(&format!("s{i}"), 12, 6, below_from - i as f64))).collect();
    let mut nodes = vec![ModelNode::new(1, 1, top)];
    for (i, &k) in above.iter().chain([&big]).chain(&below).enumerate() {
        nodes.push(ModelNode::new(i as u32 + 2, 2, k));
    }
    nodes[0].descendants = nodes.len() - 1;
    let traces = vec![ModelTrace::one_thread(String::new(), String::new(), String::new(), nodes)];
    let m = crate::testutil::model("q", traces, funcs);
    (m, big, above, below)
}

/// The budget that fits everything above `big` and `big` whole, everything below it by name
/// only (and the tree cut to the sources, as every fitted state of this layout has it).
fn budget_for_big(m: &Model, r: &Renderer, below: &[FuncId]) -> usize {
    let tok = Tokenizer::Cl100kBase;
    let target: Vec<Step> = [Step::TreeToSources].into_iter().chain(below.iter().map(|&k| Step::Name(k))).collect();
    let (plan, _) = plan_for(m, &target, m.priority().first().copied(), true, 0, tok);
    // (A few tokens over it: the note names the budget, here 0.)
    tok.count(&r.render(m, m.doc(Layout::DEFAULT, &plan)).unwrap()) + 8
}

#[test]
fn a_function_cut_while_less_important_ones_are_whole_is_raised_by_demoting_them() {
    // The four below are worth 34, less than twice big's 50.
    let (m, big, above, below) = model(10.0);
    let prio = m.priority();
    assert_eq!(prio.iter().position(|&k| k == big), Some(9), "big is ranked 10th");
    let r = Renderer::new(Format::Markdown, None).unwrap();
    let tok = Tokenizer::Cl100kBase;
    let budget = budget_for_big(&m, &r, &below);
    let f = fit(&m, Layout::DEFAULT, &r, tok, Some(budget)).unwrap();
    assert!(f.tokens <= budget, "{} > {budget}", f.tokens);
    let rep = f.report.unwrap();
    let cut = |k: FuncId| {
        let n = &m.funcs[k].qualname;
        rep.elided.contains(n) || rep.dropped.contains(n)
    };
    assert!(!cut(big), "big is whole: {rep:?}\n{}", f.text);
    assert!(above.iter().all(|&k| !cut(k)), "nothing above big is cut: {rep:?}");
    assert!(below.iter().all(|&k| cut(k)), "what is below big made the room: {rep:?}");
}

#[test]
fn a_promotion_demotes_no_more_than_twice_its_worth() {
    // The four below are worth 154, more than twice big's 50: they stay whole, big stays cut.
    let (m, big, _, below) = model(40.0);
    let r = Renderer::new(Format::Markdown, None).unwrap();
    let budget = budget_for_big(&m, &r, &below);
    let f = fit(&m, Layout::DEFAULT, &r, Tokenizer::Cl100kBase, Some(budget)).unwrap();
    let rep = f.report.unwrap();
    assert!(rep.elided.contains(&m.funcs[big].qualname) || rep.dropped.contains(&m.funcs[big].qualname), "{rep:?}");
    for &k in &below {
        let n = &m.funcs[k].qualname;
        assert!(!rep.elided.contains(n) && !rep.dropped.contains(n), "{n} kept whole: {rep:?}");
    }
}

#[test]
fn a_fill_that_has_room_leaves_the_walks_state_as_it_is() {
    // With room for everything but one small function, nothing above it is demoted: the
    // walk's state plus its refill already keeps the order.
    let (m, big, above, below) = model(10.0);
    let r = Renderer::new(Format::Markdown, None).unwrap();
    let tok = Tokenizer::Cl100kBase;
    let full = tok.count(&r.render(&m, m.doc(Layout::DEFAULT, &Default::default())).unwrap());
    let f = fit(&m, Layout::DEFAULT, &r, tok, Some(full - 5)).unwrap();
    let rep = f.report.unwrap();
    let last = &m.funcs[*below.last().unwrap()].qualname;
    for &k in above.iter().chain([&big]).chain(&below[..below.len() - 1]) {
        let n = &m.funcs[k].qualname;
        assert!(!rep.elided.contains(n) && !rep.dropped.contains(n), "{n} kept: {rep:?}");
    }
    assert!(rep.elided.contains(last) || rep.dropped.contains(last), "{rep:?}");
}

/// `big`'s code with all but its first body line elided as not run ([`super::Level::Ran`]).
fn with_ran_form(m: &mut Model, big: FuncId) {
    let f = &mut m.funcs[big];
    let SourceState::Code(e) = &f.source else { panic!("big has code") };
    let mut lines = e.code.lines();
    let kept: Vec<&str> = lines.by_ref().take(2).collect();
    let elided = lines.count();
    f.not_run = Some((format!("{}\n    ...  # {elided} lines not run", kept.join("\n")), elided));
}

#[test]
fn a_function_too_large_to_raise_whole_shows_the_code_that_ran_in_the_room_left() {
    // As above, big stays cut (the four below are worth more than twice its score); with line
    // data, the room left shows what of it ran instead of its signature alone.
    let (mut m, big, _, below) = model(40.0);
    with_ran_form(&mut m, big);
    let r = Renderer::new(Format::Markdown, None).unwrap();
    let budget = budget_for_big(&m, &r, &below);
    let f = fit(&m, Layout::DEFAULT, &r, Tokenizer::Cl100kBase, Some(budget)).unwrap();
    assert!(f.tokens <= budget, "{} > {budget}", f.tokens);
    let rep = f.report.unwrap();
    assert_eq!(rep.ran, ["big"], "{rep:?}");
    assert!(!rep.elided.contains(&"big".to_string()) && !rep.dropped.contains(&"big".to_string()), "{rep:?}");
    assert!(f.text.contains("    value_0 = compute_something(0, value_0)\n    ...  # 59 lines not run\n"), "{}", f.text);
    assert!(f.text.contains("1 function shows only the code that ran"), "{}", f.text);
    for &k in &below {
        let n = &m.funcs[k].qualname;
        assert!(!rep.elided.contains(n) && !rep.dropped.contains(n) && !rep.ran.contains(n), "{n} kept whole: {rep:?}");
    }
}

#[test]
fn a_function_that_fits_whole_is_never_shown_as_the_code_that_ran() {
    let (mut m, big, _, below) = model(10.0);
    with_ran_form(&mut m, big);
    let r = Renderer::new(Format::Markdown, None).unwrap();
    let budget = budget_for_big(&m, &r, &below);
    let rep = fit(&m, Layout::DEFAULT, &r, Tokenizer::Cl100kBase, Some(budget)).unwrap().report.unwrap();
    assert!(rep.ran.is_empty() && !rep.elided.contains(&"big".to_string()), "big is whole: {rep:?}");
}

/// `big`'s code with its last `elided` body lines elided as not run.
fn with_long_ran_form(m: &mut Model, big: FuncId, elided: usize) {
    let f = &mut m.funcs[big];
    let SourceState::Code(e) = &f.source else { panic!("big has code") };
    let lines: Vec<&str> = e.code.lines().collect();
    let kept = lines[..lines.len() - elided].join("\n");
    f.not_run = Some((format!("{kept}\n    ...  # {elided} lines not run"), elided));
}

/// The functions a fitted prompt shows whole (neither elided, dropped nor as the code that ran),
/// as their places in the budget's order.
fn whole_ranks(m: &Model, rep: &super::budget::BudgetReport) -> Vec<usize> {
    let cut = |n: &String| rep.elided.contains(n) || rep.dropped.contains(n) || rep.ran.contains(n);
    m.priority().iter().enumerate().filter(|(_, &k)| !cut(&m.funcs[k].qualname)).map(|(i, _)| i).collect()
}

/// Whether the whole functions `after` (a larger budget's) keep every one of `before` (a
/// smaller budget's) that ranks above the best function `after` gained: more room may trade
/// functions for one ranked above them, never for less.
fn keeps_order(before: &[usize], after: &[usize]) -> bool {
    let best_gain = after.iter().filter(|r| !before.contains(r)).min().copied().unwrap_or(usize::MAX);
    before.iter().filter(|&&r| r < best_gain).all(|r| after.contains(r))
}

#[test]
fn more_room_never_trades_whole_functions_for_the_code_that_ran() {
    // big's code that ran is 20 of its 60 lines, about as much as raising the four below it
    // whole (worth 154, more than twice big's 50, so no promotion raises big whole). Over a
    // range of budgets around the one that keeps them whole beside big's signature, a larger
    // budget never loses a whole function unless it gains one ranked above it: the code that
    // ran takes only the room the four leave, and shows once that room holds it.
    let (mut m, big, _, below) = model(40.0);
    with_long_ran_form(&mut m, big, 40);
    let r = Renderer::new(Format::Markdown, None).unwrap();
    let tok = Tokenizer::Cl100kBase;
    let from = budget_for_big(&m, &r, &below) - 400;
    let mut last: Option<(usize, Vec<usize>)> = None;
    let mut ran_seen = false;
    for budget in (from..from + 1400).step_by(25) {
        let Ok(f) = fit(&m, Layout::DEFAULT, &r, tok, Some(budget)) else { continue };
        assert!(f.tokens <= budget, "{} > {budget}", f.tokens);
        let rep = f.report.unwrap();
        ran_seen |= rep.ran.contains(&"big".to_string());
        let whole = whole_ranks(&m, &rep);
        if let Some((b0, w0)) = &last {
            assert!(keeps_order(w0, &whole), "budget {b0} keeps ranks {w0:?} whole, budget {budget} {whole:?}: {rep:?}");
        }
        last = Some((budget, whole));
    }
    assert!(ran_seen, "with room left beside the four below, big shows the code that ran");
}

#[test]
fn a_large_function_gives_way_to_the_smaller_ones_below_it_worth_more() {
    // A test's prompt (scores discounted by size, as a test's budget order has them): big's
    // code that ran is 40 of its 60 lines, and the four small functions below it are worth
    // more together than big. Where big (whole or as the code that ran) would fit in the
    // walk's order (it ranks above them) and cut them, it gives way (`Fill::give_way`): at no
    // budget is big shown while the functions it keeps out are worth more than it.
    let (mut m, big, _, below) = model(40.0);
    m.tests_shown = true;
    m.funcs[big].relevance = 100.0;
    with_long_ran_form(&mut m, big, 20);
    let score = |k: FuncId| m.priority_score(&m.funcs[k]);
    assert!(below.iter().map(|&k| score(k)).sum::<f64>() > score(big), "the four are worth more than big");
    let prio = m.priority();
    let at = |k: FuncId| prio.iter().position(|&x| x == k);
    assert!(below.iter().all(|&k| at(big) < at(k)), "big ranks above the four");
    let r = Renderer::new(Format::Markdown, None).unwrap();
    let tok = Tokenizer::Cl100kBase;
    let from = budget_for_big(&m, &r, &below) - 600;
    let (mut four_seen, mut big_seen) = (false, false);
    for budget in (from..from + 2000).step_by(20) {
        let Ok(f) = fit(&m, Layout::DEFAULT, &r, tok, Some(budget)) else { continue };
        assert!(f.tokens <= budget, "{} > {budget}", f.tokens);
        let rep = f.report.unwrap();
        let cut = |k: FuncId| {
            let n = &m.funcs[k].qualname;
            rep.elided.contains(n) || rep.dropped.contains(n)
        };
        let kept_out: f64 = below.iter().filter(|&&k| cut(k)).map(|&k| score(k)).sum();
        assert!(cut(big) || kept_out <= score(big), "at {budget} tokens big keeps out functions worth {kept_out}: {rep:?}");
        four_seen |= below.iter().all(|&k| !cut(k));
        big_seen |= below.iter().all(|&k| !cut(k)) && !cut(big);
    }
    assert!(four_seen && big_seen, "the four are whole from some budget on, and then big beside them");
}
