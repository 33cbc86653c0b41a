//! The budget of a test's prompt: the tree draws one path per shown function (to its first
//! call), and long functions go after short ones of like relevance.

use super::budget::{plan_for, Step};
use super::{FuncId, FuncInfo, Funcs, Model, ModelNode, ModelTrace, Plan, SourceState, RIDER_MARK};
use crate::pathclass::Origin;
use crate::tokens::Tokenizer;

fn func(name: &str) -> FuncInfo {
    crate::testutil::func_info(name, "pkg/m.py", Origin::Program, &format!("def {name}():\n    pass"))
}

/// test -> a -> helper; test -> b -> helper; test -> c (pre-order, descendants set).
fn model(tests_shown: bool) -> (Model, [FuncId; 5]) {
    let mut funcs = Funcs::default();
    let ids = ["test_x", "a", "b", "c", "helper"].map(|n| funcs.insert(func(n)));
    let [t, a, b, c, h] = ids;
    let mut nodes: Vec<ModelNode> = [(t, 1), (a, 2), (h, 3), (b, 2), (h, 3), (c, 2)]
        .iter()
        .enumerate()
        .map(|(i, &(f, d))| ModelNode::new(i as u32 + 1, d, f))
        .collect();
    for (i, n) in [5, 1, 0, 1, 0, 0].into_iter().enumerate() {
        nodes[i].descendants = n;
    }
    (test_model(funcs, nodes, tests_shown), ids)
}

#[test]
fn with_first_places_a_helper_called_from_two_places_keeps_one_path() {
    let (m, [_, _, b, _, h]) = model(true);
    let nodes = &m.traces[0].threads[0].nodes;
    let mut plan = Plan { tree_depth: Some(1), tree_keep: [h].into_iter().collect(), ..Default::default() };
    let shown = |plan: &Plan| plan.visible(nodes).iter().map(|v| v.0).collect::<Vec<_>>();
    assert_eq!(shown(&plan), [true, true, true, true, true, false], "every path to the helper");
    plan.first_places = true;
    let vis = plan.visible(nodes);
    assert_eq!(vis.iter().map(|v| v.0).collect::<Vec<_>>(), [true, true, true, false, false, false]);
    // b's subtree and c are counted at the root as hidden calls.
    assert_eq!(vis[0].1, 3);
    assert!(nodes.iter().zip(&vis).all(|(n, v)| n.func != b || !v.0));
}

#[test]
fn only_a_tests_prompt_cut_to_its_sources_draws_first_places_only() {
    for tests_shown in [true, false] {
        let (m, ids) = model(tests_shown);
        let steps = [Step::TreeToSources, Step::Name(ids[1]), Step::Name(ids[2]), Step::Name(ids[3])];
        let (plan, _) = plan_for(&m, &steps, Some(ids[0]), true, 1000, Tokenizer::Cl100kBase);
        assert_eq!(plan.first_places, tests_shown);
        assert!(plan.notes[0].contains("the path to the first call of each function") == tests_shown, "{}", plan.notes[0]);
    }
}

#[test]
fn in_a_tests_prompt_the_budget_puts_a_long_function_after_a_short_one_of_like_relevance() {
    for tests_shown in [true, false] {
        let (mut m, [t, a, b, _, _]) = model(tests_shown);
        m.funcs[t].relevance = 600.0;
        // a: 8,000 characters at 10.0 (discounted to 10/sqrt(5) = 4.5); b: short, at 6.0.
        if let SourceState::Code(e) = &mut m.funcs[a].source {
            e.code = format!("def a():\n{}", "    x = 1\n".repeat(800));
        }
        m.funcs[a].relevance = 10.0;
        m.funcs[b].relevance = 6.0;
        let prio = m.priority();
        let pos = |k: FuncId| prio.iter().position(|&p| p == k);
        assert_eq!(prio[0], t);
        assert_eq!(pos(b) < pos(a), tests_shown, "{prio:?}");
        // The ranking itself stays by relevance.
        assert_eq!(m.ranking()[1], a);
    }
}

/// Without `--budget` a test's prompt is held to 20,000 tokens and any other to 100,000 (a
/// compiled program's 0.01 s run gave 374k, more than any model reads), each saying so and how
/// to see everything; a prompt that fits its default is the prompt without one, byte for byte.
#[test]
fn a_prompt_without_a_budget_gets_the_default_one() {
    use super::budget::{fit, DEFAULT_RUN_BUDGET, DEFAULT_TEST_BUDGET};
    use super::render::{Format, Renderer};
    for tests_shown in [true, false] {
        let (mut m, [t, a, ..]) = model(tests_shown);
        m.funcs[t].relevance = 600.0;
        // a: far more than either default budget (some 150k tokens).
        if let SourceState::Code(e) = &mut m.funcs[a].source {
            e.code = format!("def a():\n{}", (0..24_000).map(|i| format!("    v{i} = w{i}\n")).collect::<String>());
        }
        let default = if tests_shown { DEFAULT_TEST_BUDGET } else { DEFAULT_RUN_BUDGET };
        assert_eq!(m.default_budget(), default);
        let r = Renderer::new(Format::Markdown, None).unwrap();
        let whole = fit(&m, super::Layout::DEFAULT, &r, Tokenizer::Cl100kBase, None).unwrap();
        assert!(whole.tokens > DEFAULT_RUN_BUDGET, "{}", whole.tokens);
        // The same number given as `--budget`: not worded as a default.
        let chosen = fit(&m, super::Layout::DEFAULT, &r, Tokenizer::Cl100kBase, Some(default)).unwrap();
        assert!(chosen.text.contains(&format!("To fit the budget of {default} tokens (cl100k_base): ")), "{}", &chosen.text[..2000]);
        m.budget_by_default = true;
        let fitted = fit(&m, super::Layout::DEFAULT, &r, Tokenizer::Cl100kBase, Some(m.default_budget())).unwrap();
        assert!(fitted.tokens <= default, "{}", fitted.tokens);
        assert_eq!(fitted.text.replacen(note_of(tests_shown), "", 1), chosen.text);
        let note = if tests_shown {
            "; a test's prompt gets this budget by default, `--no-budget` shows every function"
        } else {
            "; a prompt gets this budget by default, `--no-budget` shows every function"
        };
        assert!(fitted.text.contains(&format!("To fit the budget of {default} tokens (cl100k_base{note})")), "{}", &fitted.text[..2000]);
        // A prompt that fits its default budget is the prompt without one, byte for byte.
        let (m, _) = model(tests_shown);
        let with = fit(&m, super::Layout::DEFAULT, &r, Tokenizer::Cl100kBase, Some(m.default_budget())).unwrap();
        let without = fit(&m, super::Layout::DEFAULT, &r, Tokenizer::Cl100kBase, None).unwrap();
        assert_eq!(with.text, without.text);
    }
}

fn note_of(tests_shown: bool) -> &'static str {
    super::budget::default_budget_words(tests_shown)
}

#[test]
fn under_a_budget_the_failure_is_cut_to_its_share_and_without_one_it_is_whole() {
    use super::budget::fit;
    use super::render::{Format, Renderer};
    let (mut m, [t, a, ..]) = model(true);
    m.funcs[t].relevance = 600.0;
    // a: some 3,000 tokens, so that a budget of 2,000 cuts.
    if let SourceState::Code(e) = &mut m.funcs[a].source {
        e.code = format!("def a():\n{}", (0..600).map(|i| format!("    v{i} = w{i}\n")).collect::<String>());
    }
    let lines: String = (0..60).map(|i| format!("E   the test's input, line {i}\n")).collect();
    let failure = format!("FAILED t.py::test_x, 1 ms\nat t.py:3\nE   AssertionError: Lists differ\n{lines}E   but got: 4");
    m.traces[0].outcome = vec![failure.clone()];
    let r = Renderer::new(Format::Markdown, None).unwrap();
    let whole = fit(&m, super::Layout::DEFAULT, &r, Tokenizer::Cl100kBase, None).unwrap();
    assert!(whole.text.contains(&failure), "no budget: the failure whole");
    let cut = fit(&m, super::Layout::DEFAULT, &r, Tokenizer::Cl100kBase, Some(2000)).unwrap();
    assert!(cut.tokens <= 2000);
    for kept in ["FAILED t.py::test_x, 1 ms\nat t.py:3\nE   AssertionError: Lists differ\n", "E   but got: 4", "lines cut]"] {
        assert!(cut.text.contains(kept), "{kept:?} missing:\n{}", cut.text);
    }
    assert!(!cut.text.contains("line 30\n"), "{}", cut.text);
    assert!(cut.text.contains("the failure's text is cut to about 350 characters"), "{}", cut.text);
}

#[test]
fn a_python_function_defined_inside_a_shown_one_is_not_printed_again() {
    use super::{Layout, SourceState};
    let mut funcs = Funcs::default();
    let code = "def outer():\n    def inner():\n        return 1\n    return inner()";
    let mut outer = crate::testutil::func_info("outer", "pkg/m.py", Origin::Program, code);
    let mut inner = crate::testutil::func_info("outer.<locals>.inner", "pkg/m.py", Origin::Program, "    def inner():\n        return 1");
    // A function of the same lines elsewhere (not defined inside): printed.
    let mut other = crate::testutil::func_info("other", "pkg/n.py", Origin::Program, "def other():\n    pass");
    for (f, (a, b)) in [(&mut outer, (1, 4)), (&mut inner, (2, 3)), (&mut other, (2, 3))] {
        if let SourceState::Code(e) = &mut f.source {
            (e.first_line, e.last_line) = (a, b);
        }
    }
    let ids = [outer, inner, other].map(|f| funcs.insert(f));
    let nodes: Vec<ModelNode> =
        [(ids[0], 1), (ids[1], 2), (ids[2], 2)].iter().enumerate().map(|(i, &(f, d))| ModelNode::new(i as u32 + 1, d, f)).collect();
    let m = test_model(funcs, nodes, true);
    let shown = |plan: &Plan| m.doc(Layout::DEFAULT, plan).traces[0].sources.iter().map(|s| s.qualname.clone()).collect::<Vec<_>>();
    assert_eq!(shown(&Plan::default()), ["outer", "other"]);
    // With the enclosing function's body elided, the inner one has a block of its own.
    let plan = Plan { levels: [(ids[0], super::Level::Signature)].into_iter().collect(), ..Default::default() };
    assert_eq!(shown(&plan), ["outer", "outer.<locals>.inner", "other"]);
}

/// `--show-ranking`'s lines are in the budget's order with the score that order sorts by (a
/// long function's discounted), and a small function riding after its caller, whatever its own
/// score, is marked: unmarked scores never rise down the list.
#[test]
fn the_ranking_shows_the_budgets_order_its_scores_and_the_riders() {
    let mut funcs = Funcs::default();
    let long = format!("def long():\n{}", "    x = 1\n".repeat(640));
    let infos = [
        ("test_x", "tests/test_x.py", "def test_x():\n    pass".to_string(), 600.0),
        ("long", "pkg/m.py", long, 100.0),
        ("Cls.big", "pkg/m.py", format!("def big(self):\n{}    self.small()", "    x = 1\n".repeat(5)), 80.0),
        ("Cls.small", "pkg/m.py", "def small(self):\n    pass".to_string(), 1.0),
        ("other", "pkg/m.py", "def other():\n    pass".to_string(), 20.0),
    ];
    let ids: Vec<FuncId> = infos
        .iter()
        .map(|(k, file, code, r)| {
            let mut f = crate::testutil::func_info(k, file, Origin::Program, code);
            (f.relevance, f.lexical) = (*r, *r);
            funcs.insert(f)
        })
        .collect();
    // test_x -> long, Cls.big -> Cls.small, other.
    let nodes: Vec<ModelNode> =
        [(0, 1), (1, 2), (2, 2), (3, 3), (4, 2)].iter().enumerate().map(|(i, &(f, d))| ModelNode::new(i as u32 + 1, d, ids[f])).collect();
    let m = test_model(funcs, nodes, true);
    let lines = m.ranking_lines(0);
    assert!(lines[0].starts_with("slice: the budget keeps functions in this order"), "{}", lines[0]);
    // (rank, score, name, file) as scripts split them.
    let rows: Vec<Vec<&str>> = lines[1..].iter().map(|l| l.split_whitespace().skip(2).collect()).collect();
    let got: Vec<String> = rows.iter().map(|r| r.join(" ")).collect();
    // `long` has 6,400+ characters: its 100 counts half.
    assert_eq!(
        got,
        [
            "1 600.000 test_x (tests/test_x.py)",
            "2 80.000 Cls.big (pkg/m.py)",
            &format!("3 {RIDER_MARK}1.000 Cls.small (pkg/m.py)"),
            "4 49.953 long (pkg/m.py)",
            "5 20.000 other (pkg/m.py)"
        ]
    );
    let unmarked: Vec<f64> = rows.iter().filter_map(|r| r[1].parse().ok()).collect();
    assert!(unmarked.windows(2).all(|w| w[0] >= w[1]), "{lines:?}");
}

/// A model of one thread's `nodes` over `funcs`, with no question or notes; `tests_shown`: a
/// test's prompt.
fn test_model(funcs: Funcs, nodes: Vec<ModelNode>, tests_shown: bool) -> Model {
    let traces = vec![ModelTrace::one_thread(String::new(), String::new(), String::new(), nodes)];
    Model {
        question: String::new(),
        traces,
        funcs,
        notes: Vec::new(),
        tests_shown,
        front: Default::default(),
        budget_by_default: false,
        analysis_ids: Default::default(),
    }
}
