//! A run of only standard-library code (`python3 -m json.tool`): the prompt that the default
//! hiding of the standard library empties says why and names the option that shows it.

use slice_trace_e2e::{cmd, python, run, run_ok, scratch, texts};

#[test]
fn json_tool_prompt_names_the_stdlib_option() {
    let dir = scratch();
    std::fs::write(dir.path().join("small.json"), "{\"a\": [1, 2, {\"b\": null}]}\n").unwrap();
    let d = dir.path().join("m.d");
    let out = run_ok(cmd("trace").current_dir(dir.path()).arg("run").arg("-o").arg(&d).arg("--").arg(python()).args([
        "-m",
        "json.tool",
        "small.json",
    ]));
    assert!(out.contains("\"b\": null"), "json.tool ran: {out}");

    // Everything the run did is standard library (with --no-site-packages, also the atexit hooks
    // an installed package such as certifi may register): nothing is left, and the error says
    // which rule removed what and which option shows it.
    let o = run(cmd("slice").arg("from-trace").arg(&d).args(["-q", "How is the JSON indented?", "--no-site-packages"]));
    let (stdout, stderr) = texts(&o);
    assert_eq!(o.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(stderr.contains("nothing left to show: the run recorded "), "{stderr}");
    assert!(stderr.contains("start-up pruning removed ") && stderr.contains("(`--prune-startup off` keeps them)"), "{stderr}");
    assert!(stderr.contains("are standard-library functions, hidden by default (`--stdlib` shows them)"), "{stderr}");
    let shows = stderr.rsplit("; `--stdlib` shows ").next().unwrap();
    let n: usize = shows.split(' ').next().unwrap().parse().unwrap_or_else(|_| panic!("a node count after `--stdlib shows`: {stderr}"));
    assert!(n > 10 && shows.trim_end().ends_with("tree nodes"), "{stderr}");

    // With the defaults (installed packages shown) the prompt may keep an atexit hook or two of
    // an installed package; either nothing is left (the same error) or the prompt and stderr
    // carry the note naming --stdlib.
    let o = run(cmd("slice").arg("from-trace").arg(&d).args(["-q", "How is the JSON indented?"]));
    let (stdout, stderr) = texts(&o);
    if o.status.success() {
        let note = "The standard library is hidden by default: ";
        assert!(stdout.contains(note) && stdout.contains("`--stdlib` shows its code."), "{stdout}");
        assert!(stderr.contains(note), "{stderr}");
    } else {
        assert!(stderr.contains("(`--stdlib` shows them)"), "{stderr}");
    }

    // --stdlib shows json.tool's own functions.
    let prompt = run_ok(cmd("slice").arg("from-trace").arg(&d).args(["-q", "How is the JSON indented?", "--stdlib"]));
    assert!(prompt.contains("json/tool.py") && prompt.contains("encode"), "{prompt}");
    assert!(!prompt.contains("The standard library is hidden by default"), "{prompt}");
}
