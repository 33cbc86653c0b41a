//! Prompt tests on a synthetic but realistic Python run (real files, a real trace directory
//! written through the trace-format writer).

use super::budget::{fit, BudgetError};
use super::render::{Format, Renderer};
use super::*;
use crate::analysis::{prepare, Options, PruneMode};
use crate::select::Selection;
use crate::testutil::{py, Ev, Ev::C, Ev::R, TraceBuilder};
use crate::tokens::Tokenizer;
use std::path::{Path, PathBuf};

const APP: &str = r#"import lib
from lib import decorate


def helper(x):
    return x * 2


@decorate
def compute(n):
    """Compute.
with a docstring line at column 0
"""
    total = sum(helper(i) for i in range(n))
    return total


def fact(n):
    if n <= 1:
        return 1
    return n * fact(n - 1)


class Greeter:
    def greet(self, name):
        return f"hi {name}"


def main():
    compute(3)
    fact(3)
    Greeter().greet("x")
    compute(2)


main()
"#;

const LIB: &str = "def decorate(f):\n    return f\n\n\nVALUE = 1\n";

fn line_of(src: &str, needle: &str) -> u32 {
    src.lines().position(|l| l.contains(needle)).map(|i| i as u32 + 1).unwrap_or_else(|| panic!("{needle} not in source"))
}

struct Fixture {
    _dir: tempfile::TempDir,
    proj: PathBuf,
    trace: PathBuf,
}

/// Functions of the fixture run, in id order.
fn funcs(proj: &Path) -> Vec<trace_format::FuncKind> {
    let app = proj.join("app.py").to_string_lossy().into_owned();
    let lib = proj.join("lib.py").to_string_lossy().into_owned();
    let n = APP.lines().count() as u32;
    vec![
        py(&app, "<module>", 1, n),                                                               // 0
        py(&lib, "<module>", 1, 5),                                                               // 1
        py(&lib, "decorate", 1, 2),                                                               // 2
        py(&app, "helper", line_of(APP, "def helper"), line_of(APP, "return x * 2")),             // 3
        py(&app, "compute", line_of(APP, "@decorate"), line_of(APP, "return total")),             // 4
        py(&app, "compute.<locals>.<genexpr>", line_of(APP, "total ="), line_of(APP, "total =")), // 5
        py(&app, "fact", line_of(APP, "def fact"), line_of(APP, "return n * fact")),              // 6
        py(&app, "Greeter", line_of(APP, "class Greeter"), line_of(APP, "return f\"hi")),         // 7
        py(&app, "Greeter.greet", line_of(APP, "def greet"), line_of(APP, "return f\"hi")),       // 8
        py(&app, "main", line_of(APP, "def main"), line_of(APP, "compute(2)")),                   // 9
        py("<frozen importlib._bootstrap>", "_find_and_load", 1, 1),                              // 10
        py("/usr/lib/python3.11/json/__init__.py", "dumps", 1, 1),                                // 11
    ]
}

fn events() -> Vec<Ev> {
    let mut e = vec![C(0), C(10), C(1), C(2), R, R, R, C(7), R, C(2), R, C(9)];
    // compute(3): genexpr resumed 4 times, helper called 3 times
    e.extend([C(4), C(5), C(3), R, R, C(5), C(3), R, R, C(5), C(3), R, R, C(5), R, C(11), R, R]);
    // fact(3) recursion
    e.extend([C(6), C(6), C(6), R, R, R]);
    e.extend([C(8), R]);
    // compute(2)
    e.extend([C(4), C(5), C(3), R, R, C(5), C(3), R, R, C(5), R, R]);
    e.extend([R, R]);
    e
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let proj = dir.path().join("proj");
    std::fs::create_dir_all(&proj).unwrap();
    std::fs::write(proj.join("app.py"), APP).unwrap();
    std::fs::write(proj.join("lib.py"), LIB).unwrap();
    let trace = dir.path().join("trace.d");
    let b = TraceBuilder::new(&trace, &["python3", "app.py"], &proj).unwrap();
    b.process(100, &funcs(&proj), &[(100, "MainThread", &events())]).unwrap();
    Fixture { _dir: dir, proj, trace }
}

fn opts() -> Options {
    Options { prune: PruneMode::Auto, selection: Selection { hide_stdlib: true, ..Default::default() }, ..Default::default() }
}

/// The fixture's model for the usual question, and the directory holding its files (for other
/// modules' tests).
pub(super) fn fixture_model() -> (tempfile::TempDir, Model) {
    let fx = fixture();
    let m = model_with(std::slice::from_ref(&fx.trace), &opts(), Q);
    (fx._dir, m)
}

fn model_with(dirs: &[PathBuf], o: &Options, q: &str) -> Model {
    let (mut t, _) = prepare(dirs, o).unwrap();
    Model::build(q, &mut t)
}

fn render(m: &Model, v: Variant, f: Format) -> String {
    Renderer::new(f, None).unwrap().render(m, m.doc(v.layout(), &Plan::default())).unwrap()
}

fn pos(hay: &str, needle: &str) -> usize {
    hay.find(needle).unwrap_or_else(|| panic!("{needle:?} not found in:\n{hay}"))
}

const Q: &str = "How does compute use helper?";

#[test]
fn full_prompt_has_question_tree_and_sources_in_call_order() {
    let fx = fixture();
    let m = model_with(std::slice::from_ref(&fx.trace), &opts(), Q);
    let p = render(&m, Variant::Full, Format::Markdown);
    assert!(p.starts_with("# Question\n\nHow does compute use helper?\n"), "{p}");
    // Functions whose source follows are located by their source headings, not in the tree;
    // the class body (source not shown) keeps its location.
    let tree = "<module>\n  Greeter  (app.py:24)\n  decorate\n  main\n    compute ×2\n      helper ×5\n    fact\n      fact ×2 ↻ recursive\n    Greeter.greet\n";
    assert!(p.contains(tree), "{p}");
    // Sources follow the tree's pre-order, callee after caller.
    let order =
        ["#### `<module>`", "#### `decorate`", "#### `main`", "#### `compute`", "#### `helper`", "#### `fact`", "#### `Greeter.greet`"];
    let mut last = 0;
    for o in order {
        let at = pos(&p, o);
        assert!(at > last, "{o} out of order");
        last = at;
    }
    assert!(pos(&p, "### Call tree") < pos(&p, "### Source code"));
    // `full` repeats a function's source where it repeats in the tree (fact, recursive).
    assert_eq!(p.matches("#### `fact`").count(), 2);
    // Class bodies and the imported module's body are not shown; stdlib is hidden.
    assert!(!p.contains("#### `Greeter` "));
    assert!(!p.contains("lib.py:1-5"));
    assert!(!p.contains("dumps"));
}

#[test]
fn sources_are_exact() {
    let fx = fixture();
    let m = model_with(std::slice::from_ref(&fx.trace), &opts(), Q);
    let p = render(&m, Variant::Full, Format::Markdown);
    let compute = "#### `compute` (app.py:9-15)\n\n```python\n@decorate\ndef compute(n):\n    \"\"\"Compute.\nwith a docstring line at column 0\n\"\"\"\n    total = sum(helper(i) for i in range(n))\n    return total\n```\n";
    assert!(p.contains(compute), "{p}");
    assert!(p.contains("```python\ndef helper(x):\n    return x * 2\n```"));
    assert!(p.contains("```python\n    def greet(self, name):\n        return f\"hi {name}\"\n```"));
    // The entry module: top-level statements, bodies elided.
    let module = &p[pos(&p, "#### `<module>`")..pos(&p, "#### `decorate`")];
    assert!(module.contains("def helper(x):\n    ...  # body elided\n"), "{module}");
    assert!(module.contains("class Greeter:\n    ...  # body elided\n"));
    assert!(module.contains("\nmain()\n"));
    assert!(!module.contains("return x * 2"));
}

#[test]
fn variants_have_the_papers_meaning() {
    let fx = fixture();
    let m = model_with(std::slice::from_ref(&fx.trace), &opts(), Q);
    let a = render(&m, Variant::A, Format::Markdown);
    assert!(a.contains("### Call tree"));
    assert_eq!(a.matches("#### `fact`").count(), 1);
    let sorted =
        ["#### `<module>`", "#### `Greeter.greet`", "#### `compute`", "#### `decorate`", "#### `fact`", "#### `helper`", "#### `main`"];
    let mut last = 0;
    for o in sorted {
        let at = pos(&a, o);
        assert!(at > last, "A: {o} not sorted");
        last = at;
    }
    let c = render(&m, Variant::C, Format::Markdown);
    assert!(!c.contains("Call tree") && !c.contains("×2"));
    assert_eq!(c.matches("#### `fact`").count(), 2);
    assert!(pos(&c, "#### `main`") < pos(&c, "#### `compute`"));
    let ca = render(&m, Variant::CA, Format::Markdown);
    assert!(!ca.contains("Call tree"));
    assert_eq!(ca.matches("#### `fact`").count(), 1);
    assert!(pos(&ca, "#### `compute`") < pos(&ca, "#### `main`"));
    let t = render(&m, Variant::T, Format::Markdown);
    assert!(t.contains("### Call tree") && !t.contains("```python"));
    // Long options give the same layouts.
    assert_eq!(Layout { tree: true, sources: true, order: Order::Sorted, repeat: false }.variant(), Some(Variant::A));
    assert_eq!("ca".parse::<Variant>().unwrap(), Variant::CA);
}

#[test]
fn pruning_off_shows_imported_modules_in_the_tree_only() {
    let fx = fixture();
    let o = Options { prune: PruneMode::Off, selection: Selection { hide_stdlib: true, ..Default::default() }, ..Default::default() };
    let m = model_with(std::slice::from_ref(&fx.trace), &o, Q);
    let p = render(&m, Variant::Full, Format::Markdown);
    assert!(p.contains("\n  <module>  (lib.py:1)\n    decorate\n"), "{p}");
    assert_eq!(p.matches("#### `<module>`").count(), 1);
    let with_stdlib = Options { prune: PruneMode::Off, ..Default::default() };
    let p = render(&model_with(std::slice::from_ref(&fx.trace), &with_stdlib, Q), Variant::T, Format::Markdown);
    assert!(p.contains("      dumps  (stdlib/json/__init__.py:1)"), "{p}");
}

#[test]
fn changed_source_file_is_reported_not_printed() {
    let fx = fixture();
    // The run "started" long after the files were written... then app.py changes.
    let mut meta: trace_format::TraceMeta = serde_json::from_str(&std::fs::read_to_string(fx.trace.join("meta.json")).unwrap()).unwrap();
    let now = std::time::SystemTime::now();
    meta.start_unix_ms = now.duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64 - 60_000;
    let lib = std::fs::File::options().write(true).open(fx.proj.join("lib.py")).unwrap();
    lib.set_modified(now - std::time::Duration::from_secs(3600)).unwrap();
    std::fs::write(fx.trace.join("meta.json"), serde_json::to_string(&meta).unwrap()).unwrap();
    std::fs::write(fx.proj.join("app.py"), APP.replace("return x * 2", "return x * 3")).unwrap();
    let m = model_with(std::slice::from_ref(&fx.trace), &opts(), Q);
    let p = render(&m, Variant::Full, Format::Markdown);
    assert!(!p.contains("return x * 3") && !p.contains("return x * 2"));
    assert!(p.contains("source not shown: the file changed since the run"), "{p}");
    assert!(m.notes.iter().any(|n| n.starts_with("app.py: ")));
    // lib.py did not change (written before the start): still shown.
    assert!(p.contains("def decorate(f):\n    return f"));
}

#[test]
fn fences_are_longer_than_any_backtick_run() {
    assert_eq!(fence_for(&["a ``` b", "````"]), "`````");
    assert_eq!(fence_for(&["plain"]), "```");
    let dir = tempfile::tempdir().unwrap();
    let src = "def f():\n    return \"\"\"\n```python\nx\n````\n\"\"\"\n";
    std::fs::write(dir.path().join("m.py"), src).unwrap();
    let trace = dir.path().join("t.d");
    let b = TraceBuilder::new(&trace, &["python3", "m.py"], dir.path()).unwrap();
    let file = dir.path().join("m.py").to_string_lossy().into_owned();
    b.process(1, &[py(&file, "f", 1, 6)], &[(1, "", &[C(0), R])]).unwrap();
    let m = model_with(&[trace], &opts(), "q");
    let p = render(&m, Variant::Full, Format::Markdown);
    assert!(p.contains("`````python\ndef f():"), "{p}");
    assert!(p.contains("\"\"\"\n`````"), "{p}");
}

#[test]
fn xml_and_json_formats() {
    let fx = fixture();
    let m = model_with(std::slice::from_ref(&fx.trace), &opts(), "Is a < b </source> safe?");
    let x = render(&m, Variant::Full, Format::Xml);
    assert!(x.starts_with("<question>\nIs a < b <\\/source> safe?\n</question>"), "{x}");
    assert!(x.contains("<call_tree>\n<module>\n"));
    assert!(x.contains("<source function=\"compute\" file=\"app.py\" lines=\"9-15\">\n@decorate\n"), "{x}");
    assert!(x.contains("<run index=\"1\" command=\"python3 app.py\">"));
    let j = render(&m, Variant::Full, Format::Json);
    let v: serde_json::Value = serde_json::from_str(&j).unwrap();
    assert_eq!(v["schema"], "slice-prompt");
    assert_eq!(v["schema_version"], 1);
    assert_eq!(v["variant"], "full");
    let nodes = v["traces"][0]["threads"][0]["nodes"].as_array().unwrap();
    let compute = nodes.iter().find(|n| v["functions"][n["function"].as_str().unwrap()]["qualname"] == "compute").unwrap();
    assert_eq!(compute["count"], 2);
    let parent = nodes.iter().find(|n| n["id"] == compute["parent"]).unwrap();
    assert_eq!(v["functions"][parent["function"].as_str().unwrap()]["qualname"], "main");
    let key = compute["function"].as_str().unwrap();
    assert!(v["sources"][key]["code"].as_str().unwrap().starts_with("@decorate\ndef compute(n):"));
    assert_eq!(v["sources"][key]["first_line"], 9);
    assert_eq!(v["functions"][key]["file"], "app.py");
    assert_eq!(v["functions"][key]["origin"], "program");
    assert!(v["traces"][0]["sources"].as_array().unwrap().len() >= 7);
}

#[test]
fn several_traces_in_one_prompt() {
    let fx = fixture();
    let fx2 = fixture();
    let m = model_with(&[fx.trace.clone(), fx2.trace.clone()], &opts(), Q);
    let p = render(&m, Variant::Full, Format::Markdown);
    let r1 = pos(&p, "## Run 1: `python3 app.py`");
    let r2 = pos(&p, "## Run 2: `python3 app.py`");
    assert!(r1 < r2);
    // question, tree 1, sources 1, tree 2, sources 2
    let t1 = pos(&p, "### Call tree");
    let s1 = pos(&p, "### Source code");
    let t2 = r2 + pos(&p[r2..], "### Call tree");
    let s2 = r2 + pos(&p[r2..], "### Source code");
    assert!(pos(&p, "# Question") < r1 && r1 < t1 && t1 < s1 && s1 < r2 && r2 < t2 && t2 < s2);
    // Sorted variants: one deduplicated list (the two runs executed different copies of the
    // files, so each function appears once per copy).
    let a = render(&m, Variant::A, Format::Markdown);
    assert_eq!(a.matches("## Source code").count(), 1);
    assert_eq!(a.matches("#### `helper`").count(), 2);
    let same = model_with(&[fx.trace.clone(), fx.trace.clone()], &opts(), Q);
    assert_eq!(render(&same, Variant::CA, Format::Markdown).matches("#### `helper`").count(), 1);
}

#[test]
fn user_templates() {
    let fx = fixture();
    let m = model_with(std::slice::from_ref(&fx.trace), &opts(), Q);
    let tpl = "Q={{ question }}{% for t in traces %}{% for s in t.sources %}|{{ s.qualname }}{% endfor %}{% endfor %}".to_string();
    let r = Renderer::new(Format::Markdown, Some(("mine.j2".into(), tpl))).unwrap();
    let out = r.render(&m, m.doc(Variant::Full.layout(), &Plan::default())).unwrap();
    assert!(out.starts_with("Q=How does compute use helper?|<module>|decorate|main|compute|helper|fact|fact|Greeter.greet"), "{out}");
    let bad = Renderer::new(Format::Markdown, Some(("bad.j2".into(), "{% for %}".into())));
    assert!(bad.is_err_and(|e| e.to_string().contains("bad.j2")));
}

#[test]
fn budget_is_never_exceeded_and_degrades_in_order() {
    let fx = fixture();
    let m = model_with(std::slice::from_ref(&fx.trace), &opts(), Q);
    let r = Renderer::new(Format::Markdown, None).unwrap();
    let tok = Tokenizer::O200kBase;
    let full = fit(&m, Variant::Full.layout(), &r, tok, None).unwrap();
    assert_eq!(full.tokens, tok.count(&full.text));
    let mut last_tokens = usize::MAX;
    let mut saw_elided = false;
    let mut saw_dropped = false;
    let mut saw_cut = false;
    // Every budget: the window where only the top function's body is elided is a few tokens
    // wide.
    for budget in (120..=full.tokens + 10).rev() {
        match fit(&m, Variant::Full.layout(), &r, tok, Some(budget)) {
            Ok(f) => {
                assert!(f.tokens <= budget, "{} > {budget}", f.tokens);
                assert_eq!(f.tokens, tok.count(&f.text));
                let rep = f.report.unwrap();
                if f.tokens < full.tokens {
                    assert!(f.text.contains(&format!("To fit the budget of {budget} tokens")), "{}", f.text);
                }
                saw_elided |= !rep.elided.is_empty() && f.text.contains("...  # body elided\n```");
                saw_dropped |= !rep.dropped.is_empty() && f.text.contains("[name only]");
                saw_cut |= rep.tree_depth.is_some() && f.text.contains("more calls below");
                // The question is always there, whole.
                assert!(f.text.contains(Q));
                last_tokens = last_tokens.min(f.tokens);
            }
            Err(BudgetError::TooSmall { needed, .. }) => assert!(needed > budget),
            Err(e) => panic!("{e}"),
        }
    }
    assert!(saw_elided && saw_dropped && saw_cut, "{saw_elided} {saw_dropped} {saw_cut}");
    assert!(matches!(fit(&m, Variant::Full.layout(), &r, tok, Some(10)), Err(BudgetError::TooSmall { .. })));
    // The remedies name the tree-only layout, unless that is the layout asked for.
    let too_small = |v: Variant| fit(&m, v.layout(), &r, tok, Some(10)).err().map(|e| e.to_string()).unwrap_or_default();
    let full = too_small(Variant::Full);
    assert!(full.contains("with every function body dropped") && full.ends_with("or ask for --variant T (the tree only)"), "{full}");
    let tree = too_small(Variant::T);
    assert!(
        tree.contains(": even with the tree cut to one level, it takes ") && tree.ends_with("; raise --budget or narrow it with --focus"),
        "{tree}"
    );
}

#[test]
fn budget_keeps_the_functions_closest_to_the_question() {
    let fx = fixture();
    let m = model_with(std::slice::from_ref(&fx.trace), &opts(), "Why does greet say hi?");
    let prio = m.priority();
    assert_eq!(m.funcs[&prio[0]].qualname, "Greeter.greet");
    // Then by depth: the module (depth 1) before main (depth 2)... ties by call order.
    let q2 = model_with(std::slice::from_ref(&fx.trace), &opts(), "nothing matches zzz");
    let names: Vec<&str> = q2.priority().iter().map(|k| q2.funcs[k].qualname.as_str()).collect();
    assert_eq!(names, vec!["<module>", "Greeter", "decorate", "main", "compute", "fact", "Greeter.greet", "helper"]);
    let r = Renderer::new(Format::Markdown, None).unwrap();
    let full = fit(&m, Variant::Full.layout(), &r, Tokenizer::O200kBase, None).unwrap();
    let f = fit(&m, Variant::Full.layout(), &r, Tokenizer::O200kBase, Some(full.tokens * 2 / 3)).unwrap();
    let rep = f.report.unwrap();
    assert!(!rep.elided.contains(&"Greeter.greet".to_string()) && !rep.dropped.contains(&"Greeter.greet".to_string()));
    assert!(f.text.contains("def greet(self, name):\n        return f\"hi {name}\""));
}

#[test]
fn question_words_are_stemmed_terms_without_stopwords() {
    assert_eq!(question_words("Why does --emoji not work for files?"), vec!["emoji", "fil"]);
    assert_eq!(question_words("Which function draws the table borders?"), vec!["draw", "tabl", "border"]);
}

#[test]
fn tree_cuts_keep_the_paths_to_kept_functions_and_count_every_hidden_call() {
    let fx = fixture();
    let m = model_with(std::slice::from_ref(&fx.trace), &opts(), Q);
    let greet = m.funcs.iter().find(|(_, f)| f.qualname == "Greeter.greet").unwrap().0;
    let th = &m.traces[0].threads[0];
    for d in 1..=4 {
        for keep in [vec![], vec![greet]] {
            let plan = Plan { tree_depth: Some(d), tree_keep: keep.iter().cloned().collect(), ..Default::default() };
            let vis = plan.visible(&th.nodes);
            let shown = vis.iter().filter(|v| v.0).count();
            let hidden: usize = vis.iter().filter(|v| v.0).map(|v| v.1 as usize).sum();
            assert_eq!(shown + hidden, th.nodes.len(), "depth {d} keep {keep:?}");
            for (n, (s, _)) in th.nodes.iter().zip(&vis) {
                assert_eq!(
                    *s,
                    n.depth <= d || (n.func == greet && !keep.is_empty()) || (!keep.is_empty() && m.funcs[n.func].qualname == "main")
                );
            }
        }
    }
    let plan = Plan { tree_depth: Some(1), tree_keep: [greet].into_iter().collect(), ..Default::default() };
    let (text, _) = m.tree_text(th, &plan.visible(&th.nodes), &plan, &mut HashSet::default(), None, None);
    assert_eq!(
        text,
        "<module>  (app.py:1)\n  … 2 more calls below (elided to fit the budget)\n  main  (app.py:29)\n    … 4 more calls below (elided to fit the budget)\n    Greeter.greet  (app.py:25)",
    );
    // With source blocks, a function whose block is shown is located by the block's heading,
    // not in the tree; one shown by name only keeps its location in the tree.
    let mut plan = plan;
    let main = m.funcs.iter().find(|(_, f)| f.qualname == "main").unwrap().0;
    plan.levels.insert(main, Level::Name);
    let (text, _) = m.tree_text(th, &plan.visible(&th.nodes), &plan, &mut HashSet::default(), Some(&HashMap::default()), None);
    assert_eq!(
        text,
        "<module>\n  … 2 more calls below (elided to fit the budget)\n  main  (app.py:29) [name only]\n    … 4 more calls below (elided to fit the budget)\n    Greeter.greet",
    );
}

#[test]
fn the_top_function_keeps_its_body_longest() {
    let fx = fixture();
    let q = "Why does greet say hi?";
    let m = model_with(std::slice::from_ref(&fx.trace), &opts(), q);
    let r = Renderer::new(Format::Markdown, None).unwrap();
    let tok = Tokenizer::O200kBase;
    let body = "def greet(self, name):\n        return f\"hi {name}\"";
    let full = fit(&m, Variant::Full.layout(), &r, tok, None).unwrap();
    let mut cut_with_body = false;
    let mut lost = false;
    for budget in (100..full.tokens).rev() {
        let Ok(f) = fit(&m, Variant::Full.layout(), &r, tok, Some(budget)) else { break };
        assert!(f.tokens <= budget);
        let rep = f.report.unwrap();
        if !f.text.contains(body) {
            // Greet loses its body last: after every other source and after the tree was cut
            // as far as it goes (then the tree comes back whole, greet by name).
            assert!(cut_with_body, "{}", f.text);
            assert_eq!(rep.kept, 0, "{}", f.text);
            lost = true;
        } else if lost {
            panic!("greet's body came back at a smaller budget:\n{}", f.text);
        } else if rep.tree_depth.is_some() {
            // The tree follows the shown sources: the path to greet stays while its body does.
            cut_with_body = true;
            assert!(rep.kept >= 1);
            assert!(f.text.contains("    Greeter.greet\n"), "the path to greet stays:\n{}", f.text);
            assert!(f.text.contains("the paths to the functions whose source is shown"), "{}", f.text);
        }
        // Every function without its source is marked wherever the tree shows it.
        for name in &rep.dropped {
            for l in f.text.lines().filter(|l| l.trim_start().starts_with(&format!("{name}  ("))) {
                assert!(l.ends_with(" [name only]"), "{l}:\n{}", f.text);
            }
        }
    }
    assert!(cut_with_body && lost);
}

#[test]
fn the_estimate_path_is_exact_and_close_to_the_bisection() {
    // Prompts far over the budget are fitted by estimate (few real renders); what comes out is
    // still counted for real, within the budget, and not much smaller than the exact search's.
    let fx = fixture();
    let q = "Why does greet say hi?";
    let m = model_with(std::slice::from_ref(&fx.trace), &opts(), q);
    let r = Renderer::new(Format::Markdown, None).unwrap();
    let tok = Tokenizer::O200kBase;
    let full = fit(&m, Layout::DEFAULT, &r, tok, None).unwrap();
    let mut fitted = 0;
    for budget in (full.tokens / 2..full.tokens).step_by(7) {
        let exact = fit(&m, Layout::DEFAULT, &r, tok, Some(budget));
        match super::budget::fit_estimated(&m, Layout::DEFAULT, &r, tok, budget) {
            Ok(f) => {
                assert!(f.tokens <= budget && tok.count(&f.text) == f.tokens, "{} > {budget}", f.tokens);
                let e = exact.expect("the exact search fits where the estimate does");
                assert!(f.tokens * 10 >= e.tokens * 7, "estimate {} vs exact {} at {budget}", f.tokens, e.tokens);
                if e.text.contains("def greet(self, name):") {
                    assert!(f.text.contains("def greet(self, name):"), "{}", f.text);
                }
                fitted += 1;
            }
            Err(BudgetError::TooSmall { needed, .. }) => assert!(needed > budget && exact.is_err()),
            Err(e) => panic!("{e}"),
        }
    }
    assert!(fitted > 3, "full prompt {} tokens", full.tokens);
}

#[test]
fn nodes_that_made_the_same_calls_have_the_same_calls_shape() {
    // root0 -> a -> (x -> z, y) ; b -> (x -> z, y) ; c -> (x, y) ; d -> (x -> z, y ↻)
    // Functions by name: a, b, c, d, x, y, z.
    let id = |key: &str| super::FuncId("abcdxyz".find(key).unwrap() as u32);
    let node = |i: u32, depth: u32, key: &str, recursive: bool| ModelNode { recursive, ..ModelNode::new(i, depth, id(key)) };
    let mut nodes = Vec::new();
    for (i, (head, z, rec)) in [("a", true, false), ("b", true, false), ("c", false, false), ("d", true, true)].into_iter().enumerate() {
        let base = i as u32 * 10;
        nodes.push(node(base, 1, head, false));
        nodes.push(node(base + 1, 2, "x", false));
        if z {
            nodes.push(node(base + 2, 3, "z", false));
        }
        nodes.push(node(base + 3, 2, "y", rec));
    }
    let s = super::treetext::calls_shapes(&nodes);
    let at = |key: &str| nodes.iter().position(|n| n.func == id(key) && n.depth == 1).unwrap();
    assert_eq!(s[at("a")], s[at("b")], "different functions, same calls");
    assert_ne!(s[at("a")], s[at("c")], "c's x called nothing");
    assert_ne!(s[at("a")], s[at("d")], "d's y is a recursion marker");
}

/// The walk drops whole functions, least important first, so where it stops there can be room
/// left; the budget fills it in priority order with what still fits whole.
#[test]
fn the_budget_fills_the_room_the_walk_leaves() {
    let fx = fixture();
    let m = model_with(std::slice::from_ref(&fx.trace), &opts(), Q);
    let r = Renderer::new(Format::Markdown, None).unwrap();
    let prio: Vec<String> = m.priority().iter().map(|k| m.funcs[k].qualname.clone()).collect();
    assert_eq!(prio.last().map(String::as_str), Some("decorate"), "decorate is ranked last: {prio:?}");
    // 580 tokens: the walk has to drop decorate, Greeter.greet, fact and <module> (least
    // important first) to fit; then decorate, small, still fits whole and comes back.
    let f = fit(&m, Layout::DEFAULT, &r, Tokenizer::O200kBase, Some(580)).unwrap();
    let rep = f.report.unwrap();
    assert!(f.tokens <= 580, "{}", f.tokens);
    assert!(rep.dropped.contains(&"fact".to_string()) && rep.dropped.contains(&"Greeter.greet".to_string()), "{rep:?}");
    assert!(!rep.dropped.contains(&"decorate".to_string()), "{rep:?}");
    assert!(f.text.contains("#### `decorate`"), "{}", f.text);
}

#[test]
fn the_refill_raises_what_fits_in_batches_and_halves_what_does_not() {
    use super::budget::{Fitted, Step};
    use super::estimate::Estimator;
    use super::fill::Fill;
    let fx = fixture();
    let m = model_with(std::slice::from_ref(&fx.trace), &opts(), Q);
    let prio = m.priority();
    let est = Estimator::new(&m, Layout::DEFAULT, Tokenizer::O200kBase);
    // Everything but the top function dropped to name only; a fake render whose size grows by
    // 10 tokens per function raised, from 100.
    let steps: Vec<Step> = prio[1..].iter().map(|k| Step::Name(*k)).collect();
    let size = |s: &[Step]| 100 + 10 * (prio.len() - 1 - s.len());
    let start = Fitted { text: String::new(), tokens: 100, exact: true, report: None };
    let mut renders = 0;
    let mut eval = |s: &[Step]| {
        renders += 1;
        Ok(Fitted { text: String::new(), tokens: size(s), exact: true, report: None })
    };
    // Room for all: one render raises them all.
    let (_, all) = Fill { model: &m, prio: &prio, est: &est, budget: 100_000, eval: &mut eval }
        .refill(48, steps.clone(), start.clone(), None)
        .unwrap();
    assert_eq!((all.tokens, renders), (100 + 10 * (prio.len() - 1), 1));
    // Room for two raises while the estimate fits more: the batch is halved until it fits,
    // then the rest is tried again, a single raise given up when it does not fit.
    renders = 0;
    let mut eval = |s: &[Step]| {
        renders += 1;
        Ok(Fitted { text: String::new(), tokens: size(s), exact: true, report: None })
    };
    let (_, two) =
        Fill { model: &m, prio: &prio, est: &est, budget: 120, eval: &mut eval }.refill(48, steps.clone(), start.clone(), None).unwrap();
    assert_eq!(two.tokens, 120);
    assert!(renders <= 8, "{renders} renders");
    // The tries are capped.
    let mut n = 0;
    let mut eval = |s: &[Step]| {
        n += 1;
        Ok(Fitted { text: String::new(), tokens: size(s) + 1_000_000, exact: true, report: None })
    };
    Fill { model: &m, prio: &prio, est: &est, budget: 100_000, eval: &mut eval }.refill(3, steps, start, None).unwrap();
    assert_eq!(n, 3);
}

/// The fixture's model with every function's code given a 6-line docstring, every function an
/// installed package's except `fact`.
fn model_with_long_docstrings() -> Model {
    let fx = fixture();
    let mut m = model_with(std::slice::from_ref(&fx.trace), &opts(), Q);
    for f in m.funcs.values_mut() {
        if let SourceState::Code(e) = &mut f.source {
            if e.kind == CodeKind::Function {
                e.code =
                    "def f(x):\n    \"\"\"Summary.\n\n    Args:\n        x: a value\n    Returns:\n        x\n    \"\"\"\n    return x"
                        .into();
            }
        }
        if f.qualname != "fact" {
            f.origin = Origin::SitePackages;
        }
    }
    m
}

fn cut_keys(m: &Model) -> Vec<String> {
    let mut v: Vec<String> = m
        .funcs
        .values()
        .filter(|f| matches!(&f.source, SourceState::Code(e) if e.code.contains("more docstring lines cut")))
        .map(|f| f.qualname.clone())
        .collect();
    v.sort();
    v
}

#[test]
fn auto_docstrings_keep_the_closest_functions_and_the_programs_own_whole() {
    let mut m = model_with_long_docstrings();
    let prio = m.priority();
    let top = m.funcs[&prio[0]].qualname.clone();
    let with_code = m.funcs.values().filter(|f| matches!(&f.source, SourceState::Code(e) if e.kind == CodeKind::Function)).count();
    let cut = m.shorten_docstrings_top(Docstrings::Auto, 1);
    let names = cut_keys(&m);
    assert_eq!(cut, names.len());
    // Everything but the top function and the program's own `fact` is cut.
    assert_eq!(cut, with_code - 2, "{names:?}");
    assert!(!names.contains(&top), "{top} is the closest to the question: {names:?}");
    assert!(!names.contains(&"fact".to_string()), "{names:?}");
    assert!(names.contains(&"helper".to_string()) || top == "helper", "{names:?}");
}

/// In a test's prompt the program's own functions are condensed too, outside the closest and
/// the test files: the code under test is the program, and a test's set-up may run much of it.
#[test]
fn a_tests_prompt_condenses_the_programs_functions_outside_the_test_files() {
    let mut m = model_with_long_docstrings();
    m.tests_shown = true;
    let top = m.funcs[&m.priority()[0]].qualname.clone();
    assert_ne!(top, "fact");
    m.shorten_docstrings_top(Docstrings::Auto, 1);
    assert!(cut_keys(&m).contains(&"fact".to_string()), "the program's own fact, not among the closest: {:?}", cut_keys(&m));
    let n = super::docstring::note(Docstrings::Auto, 2, m.condensed_whose(), m.front).unwrap();
    assert!(n.contains("2 long docstrings of functions outside the test files that are not among the 25 closest"), "{n}");
    // A function of a test file (the test, a fixture) stays whole.
    let mut m = model_with_long_docstrings();
    m.tests_shown = true;
    for f in m.funcs.values_mut().filter(|f| f.qualname == "fact") {
        f.file = "tests/test_fact.py".into();
    }
    m.shorten_docstrings_top(Docstrings::Auto, 1);
    assert!(!cut_keys(&m).contains(&"fact".to_string()));
}

#[test]
fn short_docstrings_cut_all_and_whole_none_and_the_prompt_says_so() {
    let mut m = model_with_long_docstrings();
    assert_eq!(m.shorten_docstrings(Docstrings::Whole), 0);
    assert!(cut_keys(&m).is_empty());
    let n = m.funcs.values().filter(|f| matches!(&f.source, SourceState::Code(e) if e.kind == CodeKind::Function)).count();
    m.apply_docstrings(Docstrings::Short);
    assert_eq!(cut_keys(&m).len(), n);
    let p = render(&m, Variant::Full, Format::Markdown);
    assert!(p.contains(&format!("> Docstrings cut: {n} long docstrings keep their first paragraph")), "{p}");
    assert!(p.contains("    [6 more docstring lines cut]\n    \"\"\"\n    return x"), "{p}");
}

#[test]
fn many_unreadable_files_are_counted_after_the_first_five() {
    let mut files = std::collections::BTreeMap::new();
    for i in 0..3 {
        files.insert(format!("/p/app{i}.py"), "source not shown: gone".to_string());
    }
    assert_eq!(
        unavailable_notes(&files),
        vec!["/p/app0.py: source not shown: gone", "/p/app1.py: source not shown: gone", "/p/app2.py: source not shown: gone"]
    );
    for i in 0..120 {
        files.insert(format!("/tmp/w/pip.whl/pip/m{i:03}.py"), "source not shown: cannot read".to_string());
    }
    let notes = unavailable_notes(&files);
    assert_eq!(notes.len(), UNAVAILABLE_NAMED + 1, "{notes:?}");
    assert_eq!(notes[0], "/p/app0.py: source not shown: gone");
    assert_eq!(notes[UNAVAILABLE_NAMED], "source not shown either for 118 more files (in /tmp/w/pip.whl/pip)");
}

const PKG_MOD: &str = "LIMIT = 3
SCALE = 2


def pick(x):
    if x > 0:
        return x
    y = x * SCALE
    y += LIMIT
    return y


def other(x):
    if x:
        a = 1
        b = 2
        c = LIMIT
    return 0
";

/// A program calling two functions of an installed package, recorded with line data: `pick`
/// returned early, `other`'s `if` body did not run.
fn model_with_lines() -> (tempfile::TempDir, Model) {
    let dir = tempfile::tempdir().unwrap();
    let proj = dir.path().join("proj");
    let pkg = proj.join("venv/lib/python3.11/site-packages/pkg");
    std::fs::create_dir_all(&pkg).unwrap();
    let app_src = "from pkg.mod import pick, other\n\n\ndef main():\n    pick(1)\n    other(0)\n\n\nmain()\n";
    std::fs::write(proj.join("app.py"), app_src).unwrap();
    std::fs::write(pkg.join("mod.py"), PKG_MOD).unwrap();
    let app = proj.join("app.py").to_string_lossy().into_owned();
    let m = pkg.join("mod.py").to_string_lossy().into_owned();
    let with_lines = |k: trace_format::FuncKind, lines: &[u32]| match k {
        trace_format::FuncKind::Python { file, qualname, name, first_line, last_line, .. } => {
            trace_format::FuncKind::Python { file, qualname, name, first_line, last_line, code_lines: Some(lines.to_vec()), made_in: None }
        }
        other => other,
    };
    let funcs = vec![
        with_lines(py(&app, "<module>", 1, 9), &[1, 4, 9]),
        with_lines(py(&app, "main", 4, 6), &[4, 5, 6]),
        with_lines(py(&m, "pick", 5, 10), &[5, 6, 7, 8, 9, 10]),
        with_lines(py(&m, "other", 13, 18), &[13, 14, 15, 16, 17, 18]),
    ];
    let evs = [
        C(0),
        Ev::L(0, 1),
        Ev::L(0, 9),
        C(1),
        Ev::L(1, 5),
        C(2),
        Ev::L(2, 6),
        Ev::L(2, 7),
        R,
        Ev::L(1, 6),
        C(3),
        Ev::L(3, 14),
        Ev::L(3, 18),
        R,
        R,
        R,
    ];
    let trace = dir.path().join("trace.d");
    let b = TraceBuilder::new(&trace, &["python3", "app.py"], &proj).unwrap();
    b.process(100, &funcs, &[(100, "MainThread", &evs)]).unwrap();
    let model = model_with(std::slice::from_ref(&trace), &opts(), "Where is the limit applied?");
    (dir, model)
}

fn code_of<'a>(m: &'a Model, qualname: &str) -> &'a str {
    match m.funcs.values().find(|f| f.qualname == qualname).map(|f| &f.source) {
        Some(SourceState::Code(e)) => &e.code,
        other => panic!("{qualname}: {other:?}"),
    }
}

#[test]
fn code_that_did_not_run_is_elided_with_the_values_only_it_read() {
    let (_d, mut m) = model_with_lines();
    let pick = m.funcs.values().find(|f| f.qualname == "pick").unwrap();
    assert_eq!(pick.origin, Origin::SitePackages);
    assert_eq!(pick.values.iter().map(|v| v.name.as_str()).collect::<Vec<_>>(), ["LIMIT", "SCALE"]);
    // `show` changes no code, and leaves no condensed form for a budget to show
    // (`Level::Ran`); in `auto` every function here is among the closest ten: exact, their
    // condensed form kept for a budget.
    let mut show = m.clone();
    assert_eq!(show.elide_not_run(NotRun::Show), (0, 0));
    assert!(show.funcs.values().all(|f| f.not_run.is_none()));
    assert_eq!(code_of(&show, "pick"), code_of(&m, "pick"));
    let mut auto = m.clone();
    assert_eq!(auto.elide_not_run(NotRun::Auto), (0, 0));
    assert!(auto.funcs.values().find(|f| f.qualname == "pick").is_some_and(|f| f.not_run.is_some()));
    assert_eq!(code_of(&auto, "pick"), "def pick(x):\n    if x > 0:\n        return x\n    y = x * SCALE\n    y += LIMIT\n    return y");
    m.apply_not_run(NotRun::Hide);
    assert_eq!(code_of(&m, "pick"), "def pick(x):\n    if x > 0:\n        return x\n    ...  # 3 lines not run");
    assert_eq!(code_of(&m, "other"), "def other(x):\n    if x:\n        ...  # 3 lines not run\n    return 0");
    // main ran every line: exact.
    assert_eq!(code_of(&m, "main"), "def main():\n    pick(1)\n    other(0)");
    let pick = m.funcs.values().find(|f| f.qualname == "pick").unwrap();
    assert!(pick.values.is_empty(), "only the elided code read LIMIT and SCALE: {:?}", pick.values);
    let p = render(&m, Variant::Full, Format::Markdown);
    assert!(p.contains("> Code that did not run: 6 lines that this run never executed"), "{p}");
    assert!(!p.contains("LIMIT = 3"), "{p}");
}

/// The budget's note names what was cut most relevant first (the walk cuts the least relevant
/// first), at most NOTE_NAMES of each list, and counts the rest.
#[test]
fn the_budget_note_names_the_most_relevant_cuts_first() {
    let fx = fixture();
    let m = model_with(std::slice::from_ref(&fx.trace), &opts(), Q);
    let r = Renderer::new(Format::Markdown, None).unwrap();
    let f = fit(&m, Layout::DEFAULT, &r, Tokenizer::O200kBase, Some(580)).unwrap();
    let rep = f.report.unwrap();
    assert!(rep.dropped.len() >= 2, "{rep:?}");
    let prio = m.priority();
    let at = |name: &str| prio.iter().position(|k| m.funcs[k].qualname == name).unwrap();
    let listed: Vec<String> = rep.dropped.iter().rev().map(|n| format!("`{n}`")).collect();
    assert!(at(&rep.dropped[rep.dropped.len() - 1]) < at(&rep.dropped[0]), "the walk's order is least relevant first: {rep:?}");
    // (Where the tree is cut too, it may not show every one of them.)
    let where_shown = if rep.tree_depth.is_some() { " where the cut tree still shows them" } else { "" };
    let note = format!("shown by name only (marked `[name only]` in the tree{where_shown}): {}", listed.join(", "));
    assert!(f.text.contains(&format!("{note};")) || f.text.contains(&format!("{note}.")), "{}", f.text);
    let names: Vec<String> = (0..12).map(|i| format!("f{i}")).collect();
    assert_eq!(super::budget::NOTE_NAMES, 10);
    assert_eq!(super::budget::most_relevant(&names), "`f11`, `f10`, `f9`, `f8`, `f7`, `f6`, `f5`, `f4`, `f3`, `f2` and 2 more");
}

/// Two cut functions of one name (C's `static` functions in two files) are told apart by their
/// files in the budget's note and report; a name no other function has stays bare.
#[test]
fn the_budget_note_gives_namesakes_their_files() {
    const BUDGET: usize = 380;
    let fx = fixture();
    let mut m = model_with(std::slice::from_ref(&fx.trace), &opts(), Q);
    let r = Renderer::new(Format::Markdown, None).unwrap();
    let rep = fit(&m, Layout::DEFAULT, &r, Tokenizer::O200kBase, Some(BUDGET)).unwrap().report.unwrap();
    assert!(rep.dropped.len() >= 3, "{rep:?}");
    let by_name = |m: &Model, n: &str| m.funcs.iter().find(|(_, f)| f.qualname == n).map(|(id, _)| id).unwrap();
    let (a, b) = (by_name(&m, &rep.dropped[0]), by_name(&m, &rep.dropped[1]));
    let (fa, fb) = (m.funcs[a].file.clone(), m.funcs[b].file.clone());
    let lone = rep.dropped[2].clone();
    m.funcs[a].qualname = "twin".into();
    m.funcs[b].qualname = "twin".into();
    let f = fit(&m, Layout::DEFAULT, &r, Tokenizer::O200kBase, Some(BUDGET)).unwrap();
    let rep = f.report.unwrap();
    assert!(rep.dropped.contains(&format!("twin ({fa})")) && rep.dropped.contains(&format!("twin ({fb})")), "{rep:?}");
    assert!(rep.dropped.contains(&lone), "{rep:?}");
    assert!(f.text.contains(&format!("`twin ({fa})`")) && f.text.contains(&format!("`{lone}`")), "{}", f.text);
}

#[test]
fn past_twenty_thousand_functions_the_estimate_counts_a_sample_of_blocks() {
    use super::estimate::Estimator;
    let fx = fixture();
    let mut m = model_with(std::slice::from_ref(&fx.trace), &opts(), Q);
    let with_code = m.funcs.values().find(|f| matches!(f.source, SourceState::Code(_))).cloned().unwrap();
    // Distinct bodies, so that no block's count is remembered from another.
    let many: Vec<FuncInfo> = (0..25_000)
        .map(|i| {
            let mut f = with_code.clone();
            f.key = format!("{}#{i}", f.key).into();
            if let SourceState::Code(e) = &mut f.source {
                e.code = format!("{}\n    # body {i}\n", e.code);
            }
            f
        })
        .collect();
    let body_bytes: u64 = many.iter().map(|f| if let SourceState::Code(e) = &f.source { e.code.len() as u64 } else { 0 }).sum();
    for f in many {
        m.funcs.insert(f);
    }
    let before = crate::tokens::encoded_bytes();
    let _est = Estimator::new(&m, Layout::DEFAULT, Tokenizer::O200kBase);
    let encoded = crate::tokens::encoded_bytes() - before;
    // About 2,000 of the 25,000 bodies (and their signatures) are counted, not all of them.
    assert!(encoded < body_bytes / 5, "{encoded} of {body_bytes} bytes encoded");
}

/// A `[same calls as ...]` reference points at a subtree the same prompt prints, and when that
/// subtree is in another tree of the prompt (another test's, the part of an earlier test's,
/// another thread's or run's) it names that tree by its heading: a test's tree read alone
/// never sends the reader to calls it does not hold without saying where they are.
#[test]
fn a_reference_into_another_tree_names_that_tree() {
    let fx = fixture();
    let mut m = model_with(std::slice::from_ref(&fx.trace), &opts(), Q);
    let mut a = m.traces[0].threads[0].clone();
    a.label = "test t.py::test_a".into();
    let mut b = a.clone();
    b.label = "test t.py::test_b".into();
    m.traces[0].threads = vec![a, b];
    let doc = m.doc(Layout::DEFAULT, &Plan::default());
    let (ta, tb) = (&doc.traces[0].threads[0].tree, &doc.traces[0].threads[1].tree);
    assert!(!ta.contains(", in `"), "within one tree a reference says no tree: {ta}");
    let first = ta.lines().next().unwrap();
    assert_eq!(tb, &format!("{first} [same calls as above, in `test t.py::test_a`]"), "{ta}");
    // Two runs: the tree is named with its run.
    let mut second = m.traces[0].clone();
    second.threads.truncate(1);
    m.traces[0].threads.truncate(1);
    m.traces.push(second);
    let doc = m.doc(Layout::DEFAULT, &Plan::default());
    let tb = &doc.traces[1].threads[0].tree;
    assert!(tb.ends_with(" [same calls as above, in `test t.py::test_a of run 1`]"), "{tb}");
}

/// A reference to another function of the same name (each doctest example is a `<module>` of
/// its own) gives that function's place: the name alone would read as the line's own.
#[test]
fn a_reference_to_a_namesake_gives_its_place() {
    let fx = fixture();
    let mut m = model_with(std::slice::from_ref(&fx.trace), &opts(), Q);
    let a = m.traces[0].threads[0].clone();
    let top = a.nodes[0].func;
    let Some(mut twin) = m.funcs.get(top).cloned() else { panic!("the top function") };
    let (name, place) = (twin.qualname.clone(), format!("{}:{}", twin.file, twin.line.unwrap_or(0)));
    twin.key = format!("{}#twin", twin.key).into();
    twin.file = "<doctest m.f[1]>".into();
    let mut b = a.clone();
    b.nodes[0].func = m.funcs.insert(twin);
    m.traces[0].threads = vec![a, b];
    let doc = m.doc(Layout::DEFAULT, &Plan::default());
    let tb = &doc.traces[0].threads[1].tree;
    assert!(tb.lines().next().unwrap_or("").contains(&format!(" [same calls as `{name}` ({place}), in ")), "{tb}");
}

/// The context explains a tree mark only when a shown tree carries it: each legend line with
/// its mark, in both bundled templates, and none of them for a tree without marks.
#[test]
fn the_legend_explains_only_the_marks_the_tree_shows() {
    let (_dir, mut m) = fixture_model();
    let legend = [
        ("×", "`×N`: called N times", "\"×N\": called N times"),
        ("resume", "`(+M resumes)`:", "\"(+M resumes)\":"),
        ("↻ recursive", "`↻ recursive`:", "\"↻ recursive\":"),
    ];
    let tree_of = |p: &str| {
        let start = pos(p, "### Call tree");
        p[start..p[start..].find("### Source code").map_or(p.len(), |e| start + e)].to_string()
    };
    for n in m.traces.iter_mut().flat_map(|t| &mut t.threads).flat_map(|th| &mut th.nodes) {
        (n.count, n.resumes, n.recursive) = (1, 0, false);
    }
    let plain = render(&m, Variant::Full, Format::Markdown);
    let tree = tree_of(&plain);
    for (mark, md, _) in legend {
        assert!(!tree.contains(mark), "{mark} in\n{tree}");
        assert!(!plain.contains(md), "{md} explained, though no line shows it:\n{plain}");
    }
    assert!(plain.contains("Callees appear in the order they were first called."), "{plain}");
    assert_eq!(plain.contains("`[same calls as above]` (or `as f`)"), tree.contains("[same calls as "), "{plain}");
    // One mark at a time: its line alone.
    for (i, (mark, md, xml)) in legend.into_iter().enumerate() {
        let mut one = m.clone();
        let n = &mut one.traces[0].threads[0].nodes[1];
        match i {
            0 => n.count = 3,
            1 => n.resumes = 2,
            _ => n.recursive = true,
        }
        let p = render(&one, Variant::Full, Format::Markdown);
        assert!(tree_of(&p).contains(mark), "{mark}:\n{p}");
        assert!(p.contains(md), "{md} missing:\n{p}");
        assert!(render(&one, Variant::Full, Format::Xml).contains(xml), "{xml}");
        for (_, other, _) in legend.iter().filter(|(_, o, _)| *o != md) {
            assert!(!p.contains(other), "{other} explained with only {mark} shown:\n{p}");
        }
    }
}
