//! End-to-end: a Python package that runs as compiled extension code. `black` as
//! `pip install black` gives it is compiled by mypyc: none of its functions is a Python function
//! the recorder sees. The prompt and stderr say which package ran compiled and how to record
//! its Python source (`analyzer/src/compiled.rs`, from the `extensions.json` the process writes
//! at its exit).

use slice_trace_e2e::{cmd, python, run, scratch, texts, venv_with, BLACK};

#[test]
fn a_mypyc_compiled_package_is_named_with_how_to_record_its_source() {
    let venv = venv_with("black-24.10-venv", &python(), BLACK);
    let d = scratch();
    let t = d.path().join("black.d");
    let o = run(cmd("trace").args(["run", "-o"]).arg(&t).arg("--").arg(venv.join("bin/black")).args(["-q", "-c", "x  =  [1,2]"]));
    let (out, err) = texts(&o);
    assert!(o.status.success(), "{err}");
    assert_eq!(out, "x = [1, 2]\n", "black's own output, untouched");
    let doc = std::fs::read_to_string(
        std::fs::read_dir(&t)
            .unwrap()
            .flatten()
            .find(|e| e.file_name().to_string_lossy().starts_with('p'))
            .unwrap()
            .path()
            .join("extensions.json"),
    )
    .unwrap();
    assert!(doc.contains("\"module\": \"black.linegen\""), "{doc}");
    let o = run(cmd("slice").arg("from-trace").arg(&t).args(["-q", "How does black split long lines?"]));
    let (prompt, err) = texts(&o);
    assert!(o.status.success(), "{err}");
    let note =
        prompt.lines().find(|l| l.starts_with("> Compiled Python: ")).unwrap_or_else(|| panic!("no note on compiled code:\n{prompt}"));
    assert!(note.starts_with("> Compiled Python: black (mypyc: "), "{note}");
    assert!(note.contains("compiled modules such as `black/"), "{note}");
    assert!(note.ends_with("`pip install --force-reinstall --no-binary black black`."), "{note}");
    assert!(err.contains("Compiled Python: black (mypyc: "), "stderr says it too: {err}");
    // Its dependencies that ran as Python (click) are not named.
    assert!(!note.contains("click"), "{note}");
}

/// With `--native-ext` the compiled functions are in the tree, nested as they ran: black's
/// `main` (compiled) under click's Python code that calls it, the formatting under it; and the
/// note says so. mypyc's functions are named and shown as the Python functions they were
/// compiled from (`analyzer/src/python/mypyc.rs`), with the source the wheel ships beside the
/// compiled module; so are its generators' bodies and nested functions: a line too long for
/// one is split by `transform_line`'s nested generator `_rhs`, whose body runs in mypyc's
/// `..._gen_____mypyc_generator_helper__`.
#[test]
fn with_native_ext_a_mypyc_compiled_packages_functions_are_in_the_tree() {
    let venv = venv_with("black-24.10-venv", &python(), BLACK);
    let d = scratch();
    let t = d.path().join("black-ext.d");
    let long = "x  =  [1111111111, 2222222222, 3333333333, 4444444444, 5555555555, 6666666666, 7777777777, 88888]";
    let o =
        run(cmd("trace").args(["run", "-q", "--native-ext", "-o"]).arg(&t).arg("--").arg(venv.join("bin/black")).args(["-q", "-c", long]));
    let (out, err) = texts(&o);
    assert!(o.status.success(), "{err}");
    let items = ["1111111111", "2222222222", "3333333333", "4444444444", "5555555555", "6666666666", "7777777777", "88888"];
    assert_eq!(out, format!("x = [\n{}]\n", items.map(|i| format!("    {i},\n")).concat()), "black's own output, untouched");
    let o = run(cmd("slice").arg("from-trace").arg(&t).args(["-q", "How does black split long lines?"]));
    let (prompt, err) = texts(&o);
    assert!(o.status.success(), "{err}");
    let note = prompt.lines().find(|l| l.starts_with("> Compiled Python: ")).unwrap_or_else(|| panic!("no note:\n{prompt}"));
    assert!(note.contains("are in the tree as native code (recorded with --native-ext)"), "{note}");
    let tree = &prompt[prompt.find("```text\n").unwrap()..];
    let lines: Vec<&str> = tree.lines().collect();
    let at = |name: &str| {
        lines
            .iter()
            .position(|l| l.trim_start().starts_with(&format!("{name} ")) || l.trim_start() == name)
            .unwrap_or_else(|| panic!("no {name}:\n{tree}"))
    };
    let indent = |i: usize| lines[i].len() - lines[i].trim_start().len();
    let (click, main, contents, format) = (at("pass_context.<locals>.new_func"), at("main"), at("format_file_contents"), at("format_str"));
    assert!(click < main && main < contents && contents < format, "{tree}");
    assert_eq!(indent(main), indent(click) + 2, "black's compiled main under click's Python caller:\n{tree}");
    assert!(indent(contents) > indent(main), "{tree}");
    assert_eq!(indent(format), indent(contents) + 2, "{tree}");
    // mypyc's runtime (argument parsing, reference counting, type slots) is plumbing.
    assert!(!tree.contains("CPyPy_") && !tree.contains("CPy_DecRef") && !tree.contains("_traverse"), "{tree}");
    // No C name of a function that is mapped is left; its Python source is in the prompt, as
    // the wheel ships it beside the compiled module.
    assert!(!tree.contains("CPyDef_black___main") && !tree.contains("CPyDef_linegen___LineGenerator___visit_default"), "{tree}");
    assert!(tree.lines().any(|l| l.trim_start().starts_with("LineGenerator.visit_default ")), "{tree}");
    let site = std::fs::read_dir(venv.join("lib")).unwrap().flatten().next().unwrap().path().join("site-packages");
    let linegen = std::fs::read_to_string(site.join("black/linegen.py")).unwrap();
    let expected = method_source(&linegen, "    def visit_default(");
    assert!(expected.lines().count() > 5 && expected.contains("Default `visit_*()` implementation"), "{expected}");
    assert!(prompt.contains(&expected), "no source of LineGenerator.visit_default:\n{expected}\n---\n{prompt}");

    // Generators' bodies and nested functions are their Python functions too: no
    // `..._gen_____mypyc_generator_helper__` (a generator's body) or `..._obj_____call__` (a
    // nested function) is left, nor the generator classes' `__next__`/`__iter__` around them.
    for c in ["_gen_____mypyc_generator_helper__", "_obj_____call__", "_gen_____next__", "_gen_____iter__"] {
        assert!(!tree.contains(c), "{c}:\n{tree}");
    }
    // `_rhs` (nested in `transform_line`, a generator): what its body calls is under it, and
    // its source is in the prompt.
    let rhs = at("transform_line.<locals>._rhs");
    let below = |name: &str| {
        let i = (rhs + 1..lines.len())
            .take_while(|&i| indent(i) > indent(rhs))
            .find(|&i| lines[i].trim_start().starts_with(&format!("{name} ")) || lines[i].trim_start() == name);
        assert!(i.is_some_and(|i| indent(i) == indent(rhs) + 2), "no {name} under _rhs:\n{tree}");
    };
    below("generate_trailers_to_omit");
    below("right_hand_split");
    // From its `def` (its signature spans lines, the last at the def's indentation) to its
    // last line.
    let start = linegen.find("        def _rhs(\n").expect("_rhs in linegen.py");
    let last = "            yield from right_hand_split(line, mode, features=features)";
    let rhs_src = &linegen[start..start + linegen[start..].find(last).expect("_rhs's last line") + last.len()];
    assert!(rhs_src.contains("for omit in generate_trailers_to_omit(line, mode.line_length):"), "{rhs_src}");
    assert!(prompt.contains(rhs_src), "no source of transform_line.<locals>._rhs:\n{rhs_src}\n---\n{prompt}");
    // Its source once (its def and its body are one function, and a function defined inside
    // one shown whole is not printed again: `transform_line` is, so `_rhs` has no block of
    // its own), where the tree says it was made once and resumed.
    assert_eq!(prompt.matches(rhs_src).count(), 1, "{prompt}");
    // (The heading's path is relative to where the venv is: `site-packages/...` or
    // `target/debug/black-24.10-venv/lib/...`.)
    let headings =
        |name: &str| prompt.lines().filter(|l| l.starts_with(&format!("#### `{name}` (")) && l.contains("black/linegen.py:")).count();
    assert_eq!(headings("transform_line"), 1, "{prompt}");
    assert_eq!(headings("transform_line.<locals>._rhs"), 0, "{prompt}");
    assert!(lines[rhs].contains(" resumes)"), "{}", lines[rhs]);
}

/// The lines of the method whose `def` line starts with `header`: to the last line before the
/// next one indented as far as the `def` or less.
fn method_source(file: &str, header: &str) -> String {
    let lines: Vec<&str> = file.lines().collect();
    let start = lines.iter().position(|l| l.starts_with(header)).unwrap_or_else(|| panic!("no {header}"));
    let ind = header.len() - header.trim_start().len();
    let mut end = start + 1;
    while end < lines.len() && (lines[end].trim().is_empty() || lines[end].len() - lines[end].trim_start().len() > ind) {
        end += 1;
    }
    while lines[end - 1].trim().is_empty() {
        end -= 1;
    }
    lines[start..end].join("\n")
}
