//! End-to-end: Rust programs in prompts (docs/prompts.md, "Rust"). A Rust CLI from crates.io
//! (hexyl 0.16.0, release with `debug = 1`), the project's own `slice` binary (debug build;
//! clap's crates with line tables only, the other dependencies without debug information: the
//! root `Cargo.toml`) and a small program whose dependency has no debug information or line
//! tables only, recorded by entry patching (`SLICE_TRACE_PATCH=1`), then `slice from-trace`:
//! exact source spans from DWARF, `std`/`core`/`alloc` hidden by default and shown with
//! `--stdlib`, generic instances merged into one tree line, closures printed once (inside the
//! function that defines them).
//!
//! Golden: `tests/golden/hexyl_functions.txt`, the source headings (name, file, exact lines)
//! of hexyl's own functions in the prompt, sorted. `SLICE_BLESS=1 cargo test --test
//! rust_prompt` rewrites it.

mod native_support;

use native_support::*;
use slice_trace_e2e::{cargo_build, cmd, root, run, run_ok, scratch, texts};
use std::collections::HashMap;
use std::path::Path;

fn trace_patched(dir: &Path, exe: &Path, args: &[&str]) {
    let mut c = cmd("trace");
    c.env("SLICE_TRACE_PATCH", "1").arg("run").arg("-o").arg(dir).arg("--").arg(exe).args(args);
    let out = run(&mut c);
    assert!(out.status.success(), "{:?}", texts(&out));
}

/// The call tree of a prompt (the first `text` block), as (depth, function label) lines.
fn tree(prompt: &str) -> Vec<(usize, String)> {
    let start = prompt.find("```text\n").expect("a call tree") + "```text\n".len();
    let end = start + prompt[start..].find("\n```").expect("end of the tree");
    prompt[start..end]
        .lines()
        .map(|l| {
            let t = l.trim_start();
            let label = t.split("  (").next().unwrap_or(t);
            let label = label.split(" ×").next().unwrap_or(label);
            let label = label.split(" ↻").next().unwrap_or(label);
            let label = label.split(" [").next().unwrap_or(label).trim();
            // A function both called and inlined under one parent is two lines (one marked).
            let label = if t.contains(" [inlined]") { format!("{label} [inlined]") } else { label.to_string() };
            ((l.len() - t.len()) / 2, label)
        })
        .collect()
}

/// Source headings: function -> (display file, first line, last line).
fn headings(prompt: &str) -> HashMap<String, (String, u32, u32)> {
    let mut out = HashMap::new();
    for l in prompt.lines().filter(|l| l.starts_with("#### `")) {
        let Some((name, rest)) = l["#### `".len()..].split_once("` (") else { continue };
        let Some((file, lines)) = rest.trim_end_matches(')').rsplit_once(':') else { continue };
        let (a, b) = lines.split_once('-').unwrap_or((lines, lines));
        out.insert(name.to_string(), (file.to_string(), a.parse().unwrap(), b.parse().unwrap()));
    }
    out
}

/// A function of Rust's standard library by its name: a path in `std`, `core` or `alloc`, or
/// a method of a primitive type (`<[u8]>::starts_with`). (`<std::ffi::OsStr as
/// clap_lex::ext::OsStrExt>::find` is clap_lex's.)
fn is_std(label: &str) -> bool {
    ["std::", "core::", "alloc::", "__rustc::", "<[", "<str>::", "<str as core::"].iter().any(|p| label.starts_with(p))
}

/// The text of a prompt's call tree.
fn tree_text(prompt: &str) -> &str {
    let start = prompt.find("```text\n").expect("a call tree");
    &prompt[start..start + prompt[start + 3..].find("```").expect("end of the tree") + 3]
}

/// Under one parent, every function appears once (instances of one generic function merged).
/// Closures are left out: the legacy mangling names every closure of a function
/// `f::{{closure}}` (no index), and distinct closures are told apart by their line.
fn assert_siblings_distinct(t: &[(usize, String)]) {
    let mut stack: Vec<Vec<&str>> = vec![Vec::new()];
    for (depth, label) in t {
        stack.truncate(depth + 1);
        while stack.len() <= *depth {
            stack.push(Vec::new());
        }
        let siblings = &mut stack[*depth];
        assert!(
            label.trim_end_matches(" [inlined]").ends_with("{{closure}}") || !siblings.contains(&label.as_str()),
            "{label} twice under one parent"
        );
        siblings.push(label);
        stack.push(Vec::new());
    }
}

/// The source block printed under a heading.
fn block<'a>(prompt: &'a str, name: &str) -> &'a str {
    let h = prompt.find(&format!("#### `{name}` (")).unwrap_or_else(|| panic!("no source of {name}"));
    let start = h + prompt[h..].find("```rust\n").expect("a rust block") + "```rust\n".len();
    let end = start + prompt[start..].find("\n```").expect("end of block");
    &prompt[start..end]
}

fn golden(name: &str, actual: &str) {
    let path = root().join("tests/golden").join(name);
    if std::env::var_os("SLICE_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e} (SLICE_BLESS=1 writes it)", path.display()));
    assert_eq!(actual, expected, "{} differs (SLICE_BLESS=1 rewrites it)", path.display());
}

#[test]
fn hexyl_prompt_has_exact_spans_and_hides_the_standard_library() {
    let exe = hexyl();
    let s = scratch();
    let input = s.path().join("in.txt");
    std::fs::write(&input, "hello, world\n").unwrap();
    let t = s.path().join("hexyl.d");
    trace_patched(&t, &exe, &["--color=never", input.to_str().unwrap()]);
    let q = "How does hexyl print a line?";
    let prompt = run_ok(cmd("slice").arg("from-trace").arg(&t).arg("-q").arg(q));

    // hexyl::main with its exact lines, its code the file's lines.
    let main = load(&t)[0].func("hexyl::main").clone();
    let file = main.file.clone().expect("hexyl::main has a file");
    let h = headings(&prompt);
    assert_eq!(h["hexyl::main"], ("cargo-registry/hexyl-0.16.0/src/main.rs".to_string(), 452, 464), "{:?}", h.get("hexyl::main"));
    let text = std::fs::read_to_string(&file).unwrap();
    let expected: Vec<&str> = text.lines().skip(451).take(13).collect();
    assert_eq!(block(&prompt, "hexyl::main"), expected.join("\n"));
    assert!(expected[0].starts_with("fn main()") && expected[12] == "}", "{expected:?}");

    // Golden: hexyl's own functions with their exact spans.
    let mut own: Vec<String> = h
        .iter()
        .filter(|(_, (f, _, _))| f.starts_with("cargo-registry/hexyl-0.16.0/"))
        .map(|(n, (f, a, b))| format!("{n}  {f}:{a}-{b}"))
        .collect();
    own.sort();
    assert!(own.len() >= 10, "{own:?}");
    golden("hexyl_functions.txt", &(own.join("\n") + "\n"));

    // Release builds inline (hexyl::run into hexyl::main): inline probes show what ran
    // (hexyl::run and the methods inlined into it, in the golden above), and the note says so.
    assert_eq!(prompt.matches("> Native code recorded by patching function entries").count(), 1, "{prompt}");

    // clap's argument parsing is framework plumbing: in the tree, without source (the derive
    // code hexyl generated stays); a question that names clap shows it.
    assert!(prompt.contains("> Framework plumbing collapsed: clap_builder"), "{prompt}");
    assert!(h.keys().all(|n| !n.starts_with("clap_builder::")), "{:?}", h.keys().collect::<Vec<_>>());
    assert!(tree(&prompt).iter().any(|(_, l)| l.starts_with("clap_builder::derive::Parser::parse")), "{prompt}");
    let named = run_ok(cmd("slice").arg("from-trace").arg(&t).arg("-q").arg("How does clap parse hexyl's arguments?"));
    assert!(headings(&named).keys().any(|n| n.starts_with("clap_builder::")) && !named.contains("Framework plumbing"), "{named}");

    // No std, core or alloc function by default; instances merged.
    let default_tree = tree(&prompt);
    assert!(default_tree.iter().all(|(_, l)| !is_std(l)), "{default_tree:?}");
    assert!(!tree_text(&prompt).contains("(rust-library/"), "{}", tree_text(&prompt));
    assert!(h.iter().all(|(n, (f, _, _))| !is_std(n) && !f.starts_with("rust-library/")), "{:?}", h.keys().collect::<Vec<_>>());
    assert_siblings_distinct(&default_tree);

    // --stdlib shows them, with their own source paths; still one line per source function.
    let all = run_ok(cmd("slice").arg("from-trace").arg(&t).arg("-q").arg(q).arg("--stdlib").arg("--variant").arg("T"));
    let all_tree = tree(&all);
    let std_lines: Vec<&String> = all_tree.iter().map(|(_, l)| l).filter(|l| is_std(l)).collect();
    assert!(std_lines.iter().any(|l| l.starts_with("alloc::raw_vec::")), "{std_lines:?}");
    assert!(std_lines.iter().any(|l| l.starts_with("std::")), "{std_lines:?}");
    assert!(all.contains("(rust-library/alloc/src/raw_vec/mod.rs:"), "{}", &all[..all.len().min(3000)]);
    assert_siblings_distinct(&all_tree);
    // RawVec::grow_one: several monomorphized copies, merged (called more than once somewhere).
    assert!(all.lines().any(|l| l.contains("::grow_one  (") && l.contains(" ×")), "{}", &all[..all.len().min(3000)]);
}

/// The project's own `slice` binary (a debug build: closures and iterator adapters are real
/// calls) recorded by `trace`.
#[test]
fn the_slice_binary_prompt_prints_closures_once() {
    let s = scratch();
    let t = s.path().join("slice.d");
    let exe = slice_trace_e2e::bin("slice");
    trace_patched(&t, &exe, &["--version"]);
    let prompt = run_ok(cmd("slice").arg("from-trace").arg(&t).arg("-q").arg("How does slice parse its arguments?"));
    let h = headings(&prompt);

    // analyzer::cli::main: from its `pub fn main` line to its closing brace.
    let (file, a, b) = h.get("analyzer::cli::main").unwrap_or_else(|| panic!("{}", &prompt[..prompt.len().min(3000)]));
    assert_eq!(file, "analyzer/src/cli/mod.rs");
    let src = std::fs::read_to_string(root().join(file)).unwrap();
    let lines: Vec<&str> = src.lines().collect();
    let start = lines.iter().position(|l| l.starts_with("pub fn main()")).expect("pub fn main in cli/mod.rs") as u32 + 1;
    let end = start + lines[start as usize..].iter().position(|l| *l == "}").expect("its closing brace") as u32 + 1;
    let attrs = lines[..start as usize - 1].iter().rev().take_while(|l| l.starts_with("#[")).count() as u32;
    assert_eq!((*a, *b), (start - attrs, end));

    // No standard library by default.
    let t = tree(&prompt);
    assert!(t.iter().all(|(_, l)| !is_std(l)), "{t:?}");
    assert!(!tree_text(&prompt).contains("(rust-library/"), "{}", tree_text(&prompt));
    assert!(h.values().all(|(f, _, _)| !f.starts_with("rust-library/")));
    assert_siblings_distinct(&t);

    // Closures: shown in the tree at their own line; when the function that defines them is
    // printed, their code is not printed again (their line is inside its block).
    let closures: Vec<&String> = t.iter().map(|(_, l)| l).filter(|l| l.ends_with("::{{closure}}")).collect();
    let mut inside = 0;
    for c in &closures {
        let parent = &c[..c.len() - "::{{closure}}".len()];
        if let Some((pf, pa, pb)) = h.get(parent) {
            assert!(!h.contains_key(c.as_str()), "{c} printed although {parent} is");
            let at = prompt.lines().find_map(|l| l.trim_start().strip_prefix(&format!("{c}  ("))).expect("the closure's first line");
            let (f, line) = at.trim_end_matches(|ch: char| ch != ')').trim_end_matches(')').rsplit_once(':').unwrap();
            let line: u32 = line.parse().unwrap();
            assert!(f == pf && *pa <= line && line <= *pb, "{c} at {f}:{line}, outside {parent} {pf}:{pa}-{pb}");
            inside += 1;
        }
    }
    assert!(inside >= 5, "closures inside a printed function: {inside} of {}", closures.len());
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}

/// A dependency from cargo's registry with a generic function instantiated twice inside it
/// (`pick`, by `run`) and three methods named `size` inlined into it: two of one module's file
/// (`W<T>::size`, instantiated for `u32` and `u8`, and `U::size`), one of another's.
const DEP_LIB: &str = "pub mod a;
pub mod b;

#[inline(never)]
pub fn pick<F: Fn(u64) -> bool>(f: F, x: u64) -> u64 {
    if f(x) {
        a::W(x as u32).size() + a::W(x as u8).size() + a::U(x).size()
    } else {
        b::V(x as u16).size()
    }
}

#[inline(never)]
pub fn run(x: u64) -> u64 {
    pick(|v| v > 1, x) + pick(|v| v > 5, x)
}
";
const DEP_A: &str = "pub struct W<T>(pub T);
pub struct U(pub u64);

impl<T: Copy + Into<u64>> W<T> {
    #[inline(always)]
    pub fn size(&self) -> u64 {
        let v: u64 = self.0.into();
        v + 1
    }
}

impl U {
    #[inline(always)]
    pub fn size(&self) -> u64 {
        self.0 * 3
    }
}
";
const DEP_B: &str = "pub struct V<T>(pub T);

impl<T: Copy + Into<u64>> V<T> {
    #[inline(always)]
    pub fn size(&self) -> u64 {
        let v: u64 = self.0.into();
        v * 2
    }
}
";

/// A Rust program whose dependency is built without debug information (`debug = false`) or
/// with line tables only (`debug = "line-tables-only"`, what cargo's docs suggest for release
/// backtraces): the copies of one generic function are one tree line, as with full debug
/// information, and the dependency's inlined methods, which line-tables-only DWARF names only
/// `size<u32>`, are named by their module and `impl` block (docs/prompts.md, "Rust").
#[test]
fn a_dependency_without_full_debug_information_gives_distinct_meaningful_lines() {
    let d = scratch();
    let dep = d.path().join("home/registry/src/index.crates.io-1949cf8c6b5b557f/regdep-1.0.0");
    write(&dep.join("Cargo.toml"), "[package]\nname = \"regdep\"\nversion = \"1.0.0\"\nedition = \"2021\"\n");
    write(&dep.join("src/lib.rs"), DEP_LIB);
    write(&dep.join("src/a.rs"), DEP_A);
    write(&dep.join("src/b.rs"), DEP_B);
    let app = d.path().join("app");
    write(&app.join("src/main.rs"), "fn main() {\n    println!(\"{}\", regdep::run(std::hint::black_box(3)));\n}\n");
    for debug in ["false", "\"line-tables-only\""] {
        write(
            &app.join("Cargo.toml"),
            &format!(
                "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\nregdep = {{ path = \"{}\" }}\n\n[profile.dev.package.regdep]\ndebug = {debug}\n",
                dep.display()
            ),
        );
        cargo_build(&app, &app.join("target"));
        let t = d.path().join(format!("t-{}.d", debug.trim_matches('"')));
        trace_patched(&t, &app.join("target/debug/app"), &[]);
        let prompt = run_ok(cmd("slice").arg("from-trace").arg(&t).args(["-q", "what does run add?", "--variant", "T"]));
        let lines = tree(&prompt);
        assert_siblings_distinct(&lines);
        // `pick`'s two instances: one line under `run`, called twice.
        let text = tree_text(&prompt);
        assert_eq!(text.matches("regdep::pick").count(), 1, "debug = {debug}:\n{text}");
        assert!(text.lines().any(|l| l.contains("regdep::pick") && l.ends_with(" ×2")), "debug = {debug}:\n{text}");
        if debug == "false" {
            continue;
        }
        // Line tables only: `run`, whose unit has no subprogram DIE (nothing is inlined into
        // it), at its lines; the inlined methods with their paths, `W<T>::size`'s two
        // instances one line, at their source lines.
        assert!(text.contains("regdep::run  (cargo-registry/regdep-1.0.0/src/lib.rs:13)"), "{text}");
        let inlined: Vec<&str> = text.lines().map(str::trim).filter(|l| l.contains(" [inlined]")).collect();
        for (name, at) in [
            ("regdep::a::W::size [inlined]", "cargo-registry/regdep-1.0.0/src/a.rs:5"),
            ("regdep::a::U::size [inlined]", "cargo-registry/regdep-1.0.0/src/a.rs:13"),
            ("regdep::b::V<T>::size<u16> [inlined]", "cargo-registry/regdep-1.0.0/src/b.rs:4"),
        ] {
            assert!(inlined.iter().any(|l| l.starts_with(name) && l.contains(at)), "{name} at {at}:\n{text}");
        }
        assert_eq!(inlined.len(), 3, "{text}");
        let pick = lines.iter().position(|(_, l)| l == "regdep::pick").expect("pick");
        assert!(lines.iter().filter(|(_, l)| l.ends_with(" [inlined]")).all(|(depth, _)| *depth == lines[pick].0 + 1), "{text}");
    }
}
