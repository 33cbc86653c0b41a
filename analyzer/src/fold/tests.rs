use super::*;
use crate::testutil::{py_funcs, Ev};

fn fold(names: &[&str], evs: &[Ev]) -> (CallTree, FoldInfo) {
    let funcs = Arc::new(py_funcs(names));
    let classes: Vec<FoldClass> = funcs.iter().map(fold_class).collect();
    fold_events(funcs, &classes, Ev::events(evs))
}

/// Tree as indented "name xcount [R]" lines.
fn show(t: &CallTree) -> Vec<String> {
    t.preorder()
        .iter()
        .map(|&n| {
            let node = t.node(n);
            format!(
                "{}{} x{}{}",
                "  ".repeat(node.depth as usize - 1),
                t.func(n).unwrap().name,
                node.count,
                if node.recursive { " R" } else { "" }
            )
        })
        .collect()
}

use Ev::{C, L, R};

#[test]
fn repeated_calls_under_one_parent_merge_with_their_subtrees() {
    // main -> a -> x ; main -> a -> y : one node a (x2) with children x and y.
    let (t, _) = fold(&["main", "a", "x", "y"], &[C(0), C(1), C(2), R, R, C(1), C(3), R, R, R]);
    assert_eq!(show(&t), vec!["main x1", "  a x2", "    x x1", "    y x1"]);
}

#[test]
fn same_function_under_different_parents_stays_separate() {
    let (t, _) = fold(&["main", "a", "b", "x"], &[C(0), C(1), C(3), R, R, C(2), C(3), R, R, R]);
    assert_eq!(show(&t), vec!["main x1", "  a x1", "    x x1", "  b x1", "    x x1"]);
}

#[test]
fn plain_recursion_stays_one_level_deep() {
    // f -> f -> f -> g ; f -> h : every f below the first is one `f ↻` marker (3 calls),
    // and what the recursive calls reached (g) is under the first f, beside h.
    let (t, info) = fold(&["f", "g", "h"], &[C(0), C(0), C(0), C(1), R, R, R, C(0), R, C(2), R, R]);
    assert_eq!(show(&t), vec!["f x1", "  f x3 R", "  g x1", "  h x1"]);
    assert_eq!(info.events, 12);
    assert!(t.preorder().iter().filter(|&&n| t.node(n).recursive).all(|&n| t.node(n).children.is_empty()));
}

#[test]
fn a_re_entered_dispatcher_hides_nothing_it_reaches() {
    // render -> table -> render -> cell -> text : the nested render's work (cell, text) is
    // folded into the first render, so cell and text are in the tree; table keeps the marker.
    let names = ["render", "table", "cell", "text"];
    let evs = [C(0), C(1), C(0), C(2), C(3), R, R, R, R, C(2), R, R];
    let (t, _) = fold(&names, &evs);
    assert_eq!(show(&t), vec!["render x1", "  table x1", "    render x1 R", "  cell x2", "    text x1"]);
}

#[test]
fn indirect_recursion_folds_into_the_earlier_occurrences() {
    let (t, _) = fold(&["a", "b", "c"], &[C(0), C(1), C(0), C(1), C(2), R, R, R, R, R]);
    assert_eq!(show(&t), vec!["a x1", "  b x1", "    a x1 R", "    c x1", "  b x1 R"]);
}

#[test]
fn re_entered_time_is_counted_once_under_the_earlier_occurrence() {
    // render [0,100] -> table [10,90] -> render' [20,80] -> cell [30,70].
    let funcs = Arc::new(py_funcs(&["render", "table", "cell"]));
    let classes = vec![FoldClass::Visible; 3];
    let call = |func, ts| Ok(Event::Call { func, ts });
    let ret = |ts| Ok(Event::Return { ts });
    let evs = vec![call(0, 0), call(1, 10), call(0, 20), call(2, 30), ret(70), ret(80), ret(90), ret(100)];
    let (t, _) = fold_events(funcs, &classes, evs);
    let time = |name: &str| {
        let n = t.preorder().into_iter().find(|&n| t.func(n).unwrap().name == name && !t.node(n).recursive).unwrap();
        t.node(n).time_ns
    };
    assert_eq!((time("render"), time("table"), time("cell")), (100, 20, 40));
    let marker = t.preorder().into_iter().find(|&n| t.node(n).recursive).unwrap();
    assert_eq!(t.node(marker).time_ns, 0);
}

#[test]
fn an_inline_probe_opens_its_chain_of_inlined_functions_and_takes_no_time() {
    // main (0) calls parse (1); a probe (2: innermost `step`, inside inlined `run`, id 3)
    // fires in main after parse returned; then main calls parse again.
    let mut funcs = py_funcs(&["main", "parse", "step", "run"]);
    for f in &mut funcs[2..] {
        f.inlined = true;
    }
    let chains: HashMap<u32, Vec<u32>> = [(2, vec![3])].into_iter().collect();
    let funcs = Arc::new(funcs);
    let classes = vec![FoldClass::Visible; 4];
    let call = |func, ts| Ok(Event::Call { func, ts });
    let ret = |ts| Ok(Event::Return { ts });
    let evs = vec![call(0, 0), call(1, 10), ret(20), call(2, 30), ret(90), call(1, 100), ret(110), ret(200)];
    let (t, info) = fold_events(funcs.clone(), &classes, with_inlined(evs, &funcs[..], &chains, &HashMap::new()));
    assert_eq!(show(&t), vec!["main x1", "  parse x2", "  run x1", "    step x1"]);
    assert_eq!((info.unmatched_returns, info.open_at_end), (0, 0));
    let time = |name: &str| t.node(t.preorder().into_iter().find(|&n| t.func(n).unwrap().name == name).unwrap()).time_ns;
    assert_eq!((time("main"), time("run"), time("step")), (200, 0, 0));
}

/// GCC at `-O2` (cmark-gfm): an inlined function described as an instance of itself inside
/// its inlined instance, and an out-of-line function holding an inlined instance of itself.
/// A level that is the function of the level above it is its own code: one node, not a
/// "recursive" one under it.
#[test]
fn an_inlined_function_inside_an_instance_of_itself_is_one_node() {
    // main (0) and table_add_align (1) out of line; inlined records: incr (2), incr again (3,
    // the nested instance: same name, file, line), free_row (4), table_add_align (5).
    let mut funcs = py_funcs(&["main", "table_add_align", "incr", "incr", "free_row", "table_add_align"]);
    for f in &mut funcs[2..] {
        f.inlined = true;
    }
    for f in funcs.iter_mut() {
        f.file = Some("table.c".into());
        f.first_line = Some(match f.name.as_str() {
            "incr" => 98,
            "free_row" => 58,
            "table_add_align" => 729,
            _ => 1,
        });
    }
    // Probe 3 (incr in incr), probe 4 (free_row in itself: chain [4]), probe 5 in the
    // out-of-line table_add_align (chain [5]: it within itself).
    let chains: HashMap<u32, Vec<u32>> = [(3, vec![2]), (4, vec![4]), (5, vec![])].into_iter().collect();
    let funcs = Arc::new(funcs);
    let classes = vec![FoldClass::Visible; 6];
    let call = |func, ts| Ok(Event::Call { func, ts });
    let ret = |ts| Ok(Event::Return { ts });
    let evs = vec![call(0, 0), call(3, 10), ret(11), call(4, 20), ret(21), call(1, 30), call(5, 31), ret(32), ret(40), ret(100)];
    let (t, info) = fold_events(funcs.clone(), &classes, with_inlined(evs, &funcs[..], &chains, &HashMap::new()));
    assert_eq!(show(&t), vec!["main x1", "  incr x1", "  free_row x1", "  table_add_align x1"]);
    assert_eq!((info.unmatched_returns, info.open_at_end), (0, 0));
    assert!(t.preorder().into_iter().all(|n| !t.node(n).recursive));
}

#[test]
fn a_call_made_by_inlined_code_goes_under_its_chain_of_inlined_functions() {
    // main (0) calls print (1) twice, from code of `step` (2) inlined into `run` (3) inlined
    // into main: (main, print) is wrapped by `step`. main also calls `other` (4), from its own
    // code, and `other` calls print: not wrapped (its caller is `other`). The probe of `step`
    // fired too: its node is the wrapped calls' node.
    let mut funcs = py_funcs(&["main", "print", "step", "run", "other"]);
    for f in &mut funcs[2..4] {
        f.inlined = true;
    }
    let chains: HashMap<u32, Vec<u32>> = [(2, vec![3])].into_iter().collect();
    let wraps: HashMap<(u32, u32), u32> = [((0, 1), 2)].into_iter().collect();
    let funcs = Arc::new(funcs);
    let classes = vec![FoldClass::Visible; 5];
    let call = |func, ts| Ok(Event::Call { func, ts });
    let ret = |ts| Ok(Event::Return { ts });
    let evs = vec![
        call(0, 0),
        call(2, 5),
        ret(6),
        call(1, 10),
        ret(20),
        call(4, 30),
        call(1, 40),
        ret(45),
        ret(50),
        call(1, 60),
        ret(90),
        ret(200),
    ];
    let (t, info) = fold_events(funcs.clone(), &classes, with_inlined(evs, &funcs[..], &chains, &wraps));
    // (An inlined node's count is of the probes that fired and the calls its code made, which
    // the views do not show as calls.)
    assert_eq!(show(&t), vec!["main x1", "  run x3", "    step x3", "      print x2", "  other x1", "    print x1"]);
    assert_eq!((info.unmatched_returns, info.open_at_end), (0, 0));
    // The chain takes the wrapped calls' time: 10 + 30.
    let time = |name: &str| t.node(t.preorder().into_iter().find(|&n| t.func(n).unwrap().name == name).unwrap()).time_ns;
    assert_eq!((time("main"), time("run"), time("step")), (200, 40, 40));
}

#[test]
fn resumes_are_counted_apart_from_calls() {
    let funcs = Arc::new(py_funcs(&["main", "gen"]));
    let classes = vec![FoldClass::Visible; 2];
    let evs = vec![
        Ok(Event::Call { func: 0, ts: 1 }),
        Ok(Event::Call { func: 1, ts: 2 }),
        Ok(Event::Return { ts: 3 }),
        Ok(Event::Resume { func: 1, ts: 4 }),
        Ok(Event::Return { ts: 5 }),
        Ok(Event::Resume { func: 1, ts: 6 }),
        Ok(Event::Return { ts: 7 }),
        Ok(Event::Return { ts: 8 }),
    ];
    let (t, _) = fold_events(funcs, &classes, evs);
    let g = t.node(t.preorder()[1]);
    assert_eq!((g.count, g.resumes, g.time_ns), (1, 2, 3));
}

/// A resume of the function whose frame is open (mypyc's generator body, recorded inside
/// the call that made the generator) is that node again, its callees under it; not a
/// recursion. A real recursive call still is one.
#[test]
fn a_resume_inside_the_same_functions_frame_is_its_node() {
    let funcs = Arc::new(py_funcs(&["main", "gen", "work"]));
    let classes = vec![FoldClass::Visible; 3];
    let evs = vec![
        Ok(Event::Call { func: 0, ts: 1 }),
        Ok(Event::Call { func: 1, ts: 2 }),
        Ok(Event::Resume { func: 1, ts: 3 }),
        Ok(Event::Call { func: 2, ts: 4 }),
        Ok(Event::Return { ts: 5 }),
        Ok(Event::Return { ts: 6 }),
        Ok(Event::Call { func: 1, ts: 7 }),
        Ok(Event::Return { ts: 8 }),
        Ok(Event::Return { ts: 9 }),
        Ok(Event::Return { ts: 10 }),
    ];
    let (t, _) = fold_events(funcs, &classes, evs);
    assert_eq!(show(&t), vec!["main x1", "  gen x1", "    work x1", "    gen x1 R"], "R: the recursive call");
    let g = t.node(t.preorder()[1]);
    assert_eq!((g.count, g.resumes), (1, 1));
}

#[test]
fn unmatched_returns_are_ignored_and_open_calls_closed() {
    let funcs = Arc::new(py_funcs(&["a", "b"]));
    let classes = vec![FoldClass::Visible; 2];
    let evs = vec![
        Ok(Event::Return { ts: 5 }),
        Ok(Event::Call { func: 0, ts: 10 }),
        Ok(Event::Call { func: 1, ts: 20 }),
        Ok(Event::Return { ts: 25 }),
        Ok(Event::Call { func: 1, ts: 30 }),
    ];
    let (t, info) = fold_events(funcs, &classes, evs);
    assert_eq!(info.unmatched_returns, 1);
    assert_eq!(info.open_at_end, 2);
    assert_eq!(show(&t), vec!["a x1", "  b x2"]);
    let a = t.preorder()[0];
    assert_eq!(t.node(a).time_ns, 20); // 10 .. last ts 30
    let b = t.preorder()[1];
    assert_eq!(t.node(b).time_ns, 5); // 5 + (30 - 30)
}

#[test]
fn equal_native_functions_fold_as_one() {
    // Ids 1 and 3 are two instances of one Rust source function (equal Functions): one
    // node under main, with both calls; id 2 differs only by its line and stays apart.
    let native = |q: &str, line: u32| Function {
        language: Language::Native,
        name: q.into(),
        qualname: q.into(),
        file: Some("/p/src/lib.rs".into()),
        first_line: Some(line),
        last_line: Some(line + 2),
        object: Some("/p/app".into()),
        program_library: false,
        program_crate: false,
        dependency_crate: false,
        std_dependency: false,
        rust_symbol: false,
        made_in: None,
        inlined: false,
    };
    let funcs = Arc::new(vec![native("app::main", 1), native("app::parse", 10), native("app::parse", 20), native("app::parse", 10)]);
    let classes = fold_classes(&funcs);
    assert_eq!(classes, [FoldClass::Visible, FoldClass::Visible, FoldClass::Visible, FoldClass::SameAs(1)]);
    let evs = [C(0), C(1), R, C(3), C(1), R, R, C(2), R, R];
    let (t, _) = fold_events(funcs, &classes, Ev::events(&evs));
    let shown: Vec<String> = t
        .preorder()
        .iter()
        .map(|&n| {
            format!(
                "{}{} x{}{}",
                "  ".repeat(t.node(n).depth as usize - 1),
                t.func(n).unwrap().qualname,
                t.node(n).count,
                if t.node(n).recursive { " R" } else { "" }
            )
        })
        .collect();
    assert_eq!(shown, ["app::main x1", "  app::parse x2", "    app::parse x1 R", "  app::parse x1"]);
}

/// mypyc's generator body and the def that made the generator are mapped to one Python
/// function (`python::mypyc`): folded as one; a Python function the interpreter ran,
/// equal by value, is not merged.
#[test]
fn a_mypyc_generator_body_folds_with_its_def() {
    let compiled = |object: Option<&str>| Function {
        language: Language::Python,
        name: "_rhs".into(),
        qualname: "transform_line.<locals>._rhs".into(),
        file: Some("/v/site-packages/black/linegen.py".into()),
        first_line: Some(650),
        last_line: Some(673),
        object: object.map(Into::into),
        program_library: false,
        program_crate: false,
        dependency_crate: false,
        std_dependency: false,
        rust_symbol: false,
        made_in: None,
        inlined: false,
    };
    let rt = Some("/v/site-packages/30fcd23745efe32ce681__mypyc.cpython-311-x86_64-linux-gnu.so");
    let funcs = [compiled(rt), compiled(None), compiled(rt), compiled(None)];
    assert_eq!(fold_classes(&funcs), [FoldClass::Visible, FoldClass::Visible, FoldClass::SameAs(0), FoldClass::Visible]);
}

/// Native functions known only by their symbol (no debug information): the copies of one
/// Rust function (generic instances, whose symbols differ only by their hash) are one node,
/// as they are with a source file; C functions of one name are not merged (two `static`
/// functions in two files).
#[test]
fn rust_instances_without_a_source_fold_into_one_and_c_namesakes_do_not() {
    let named = |qualname: &str, rust_symbol: bool| Function {
        language: Language::Native,
        name: qualname.rsplit("::").next().unwrap_or(qualname).into(),
        qualname: qualname.into(),
        file: None,
        first_line: None,
        last_line: None,
        object: Some("/bin/app".into()),
        program_library: false,
        program_crate: false,
        dependency_crate: true,
        std_dependency: false,
        rust_symbol,
        made_in: None,
        inlined: false,
    };
    let two_args_of = "clap_builder::builder::command::Command::two_args_of";
    let funcs = [named(two_args_of, true), named("helper", false), named(two_args_of, true), named("helper", false)];
    assert_eq!(fold_classes(&funcs), [FoldClass::Visible, FoldClass::Visible, FoldClass::SameAs(0), FoldClass::Visible]);
}

#[test]
fn import_machinery_and_comprehensions_are_transparent() {
    let mut funcs = py_funcs(&["main", "_find_and_load", "<module>", "<listcomp>", "helper"]);
    funcs[1].file = Some("<frozen importlib._bootstrap>".into());
    let funcs = Arc::new(funcs);
    let classes = fold_classes(&funcs);
    assert_eq!(classes[1], FoldClass::Import);
    assert_eq!(classes[3], FoldClass::Transparent);
    assert_eq!(funcs.iter().map(fold_class).collect::<Vec<_>>(), classes, "Python functions are never merged by value");
    let evs = [C(0), C(1), C(2), R, R, C(3), C(4), R, R, R];
    let (t, _) = fold_events(funcs, &classes, Ev::events(&evs));
    assert_eq!(show(&t), vec!["main x1", "  <module> x1", "  helper x1"]);
    let module = t.preorder()[1];
    assert!(t.node(module).via_import);
    assert!(!t.node(t.preorder()[2]).via_import);
}

#[test]
fn each_test_gets_the_tree_of_the_calls_between_its_boundaries() {
    // runner -> protocol -> [begin] -> run_test -> code ; [end]  (twice), then a third
    // test whose end never comes (its process died inside it).
    let mut funcs = py_funcs(&["runner", "protocol", "_slicetrace_test_begin", "_slicetrace_test_end", "run_test", "code", "other"]);
    for f in &mut funcs[2..4] {
        f.file = Some("/tmp/slice-trace-rt-x/_slicetrace_tests.py".into());
    }
    let funcs = Arc::new(funcs);
    let classes = fold_classes(&funcs);
    assert_eq!((classes[2], classes[3]), (FoldClass::TestBegin, FoldClass::TestEnd));
    // Each test reports its lines (5's line 7 in both), the runner between tests too.
    let one = |inner: u32| vec![C(1), C(2), R, C(4), C(inner), L(inner, 7), R, R, C(3), R, L(1, 3), R];
    let mut evs = vec![C(0), L(0, 1)];
    evs.extend(one(5));
    evs.extend(one(6));
    evs.extend([C(1), C(2), R, C(4), C(5), L(5, 7)]);
    let (t, info, tests) = fold_events_with_tests(funcs, &classes, Ev::events(&evs));
    assert_eq!(show(&t), vec!["runner x1", "  protocol x3", "    run_test x3", "      code x2", "      other x1"]);
    assert_eq!(tests.len(), 3);
    assert_eq!(show(&tests[0]), vec!["run_test x1", "  code x1"]);
    assert_eq!(show(&tests[1]), vec!["run_test x1", "  other x1"]);
    assert_eq!(show(&tests[2]), vec!["run_test x1", "  code x1"], "an unfinished test ends with the stream");
    assert_eq!(info.open_at_end, 4);
    assert_eq!(info.test_lines, vec![vec![(5, 7)], vec![(6, 7)], vec![(5, 7)]], "each test's own line events");
    assert_eq!(info.lines.len(), 6, "all line events: {:?}", info.lines);
}

#[test]
fn damaged_tail_keeps_events_before_it() {
    let funcs = Arc::new(py_funcs(&["a"]));
    let evs = vec![
        Ok(Event::Call { func: 0, ts: 1 }),
        Err(FormatError::TruncatedEvent { path: "t.ev".into(), offset: 70 }),
        Ok(Event::Return { ts: 2 }),
    ];
    let (t, info) = fold_events(funcs, &[FoldClass::Visible], evs);
    assert_eq!(t.len(), 1);
    assert!(info.damaged.unwrap().contains("t.ev"));
}

#[test]
fn nested_re_entries_take_their_time_out_of_the_frames_between_once() {
    // pytest's shape: hook (0) → multicall (1) → test (2) → repr (3) → hook ↻ → multicall ↻ →
    // leaf (4). The re-entered hook's time (4..70) belongs to `hook`; the multicall inside it
    // (5..60) to `multicall`, with `leaf` under it. `test` and `repr` keep only their own time.
    let funcs = Arc::new(py_funcs(&["hook", "multicall", "test", "repr", "leaf"]));
    let classes = vec![FoldClass::Visible; 5];
    let call = |func, ts| Ok(Event::Call { func, ts });
    let ret = |ts| Ok(Event::Return { ts });
    let evs = vec![
        call(0, 0),
        call(1, 1),
        call(2, 2),
        call(3, 3),
        call(0, 4),
        call(1, 5),
        call(4, 10),
        ret(20),
        ret(60),
        ret(70),
        ret(80),
        ret(90),
        ret(99),
        ret(100),
    ];
    let (t, info) = fold_events(funcs, &classes, evs);
    assert_eq!((info.unmatched_returns, info.open_at_end), (0, 0));
    assert_eq!(
        show(&t),
        vec!["hook x1", "  multicall x1", "    test x1", "      repr x1", "        hook x1 R", "    leaf x1", "  multicall x1 R"]
    );
    let time =
        |name: &str| t.node(t.preorder().into_iter().find(|&n| t.func(n).unwrap().name == name && !t.node(n).recursive).unwrap()).time_ns;
    // repr: 3..4 and 70..80; test: 2..3, 80..90 and repr's; multicall: all but hook's own
    // 0..1, 99..100 and the re-entered hook's own 4..5, 60..70.
    assert_eq!((time("repr"), time("test"), time("leaf")), (11, 22, 10));
    assert_eq!((time("multicall"), time("hook")), (87, 100));
    // No node's children take more time than the node.
    for n in t.preorder() {
        let below: u64 = t.node(n).children.iter().map(|&c| t.node(c).time_ns).sum();
        assert!(below <= t.node(n).time_ns, "{}", t.func(n).unwrap().name);
    }
}
