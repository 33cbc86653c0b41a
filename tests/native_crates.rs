//! End-to-end: a Rust program's dependencies are recognised by the shape cargo gives their
//! directories, not by the name of `CARGO_HOME` (issue 26): a registry package
//! (`registry/src/<index>-<hash>/<crate>-<version>/`, also under an index with no name, as a
//! source-replaced registry has) in a home called `deps`, and a vendored crate
//! (`vendor/<crate>/` with `cargo vendor`'s `.cargo-checksum.json`). Their functions are
//! installed packages (hidden by `--no-site-packages`), shown with short paths; the
//! program's own `vendor/` folder without the checksum file stays the program's.

use slice_trace_e2e::{cargo_build, cmd, run, run_ok, scratch, texts};
use std::path::Path;

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}

/// A library crate `name` at `dir` whose one function returns `x + add`.
fn library(dir: &Path, name: &str, add: u32) {
    write(&dir.join("Cargo.toml"), &format!("[package]\nname = \"{name}\"\nversion = \"1.0.0\"\nedition = \"2021\"\n"));
    write(
        &dir.join("src/lib.rs"),
        &format!("#[inline(never)]\npub fn step_{name}(x: u32) -> u32 {{\n    std::hint::black_box(x) + {add}\n}}\n"),
    );
}

#[test]
fn dependencies_are_found_by_their_directory_shape() {
    let d = scratch();
    let home = d.path().join("deps");
    let reg = home.join("registry/src/index.crates.io-1949cf8c6b5b557f/regdep-1.0.0");
    let unnamed = home.join("registry/src/-14cd1cce6819ff87/anondep-1.0.0");
    let proj = d.path().join("proj");
    let vend = proj.join("vendor/vendep");
    let own = proj.join("vendor/owndep");
    library(&reg, "regdep", 1);
    library(&unnamed, "anondep", 2);
    library(&vend, "vendep", 3);
    write(&vend.join(".cargo-checksum.json"), "{\"files\":{},\"package\":null}");
    library(&own, "owndep", 4);
    write(
        &proj.join("Cargo.toml"),
        &format!(
            "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\nregdep = {{ path = \"{}\" }}\nanondep = {{ path = \"{}\" }}\nvendep = {{ path = \"vendor/vendep\" }}\nowndep = {{ path = \"vendor/owndep\" }}\n",
            reg.display(),
            unnamed.display()
        ),
    );
    write(
        &proj.join("src/main.rs"),
        "fn main() {\n    let x = owndep::step_owndep(vendep::step_vendep(anondep::step_anondep(regdep::step_regdep(1))));\n    println!(\"{x}\");\n}\n",
    );
    cargo_build(&proj, &proj.join("target"));
    let exe = proj.join("target/debug/app");
    let trace = d.path().join("t.d");
    let mut c = cmd("trace");
    c.env("SLICE_TRACE_PATCH", "1").arg("run").arg("-o").arg(&trace).arg("--").arg(&exe);
    assert_eq!(run_ok(&mut c).trim(), "11");

    let prompt = run_ok(cmd("slice").arg("from-trace").arg(&trace).args(["-q", "what does each step add?"]));
    for (f, path) in [
        ("regdep::step_regdep", "cargo-registry/regdep-1.0.0/src/lib.rs"),
        ("anondep::step_anondep", "cargo-registry/anondep-1.0.0/src/lib.rs"),
        ("vendep::step_vendep", "cargo-vendor/vendep/src/lib.rs"),
    ] {
        assert!(prompt.contains(f) && prompt.contains(path), "{f} from {path}:\n{prompt}");
    }
    assert!(!prompt.contains(&home.display().to_string()), "no absolute dependency path:\n{prompt}");
    assert!(!prompt.contains(&vend.display().to_string()), "no absolute vendored path:\n{prompt}");

    // Without installed packages: the three dependencies go, the program (with its own
    // `vendor/owndep`, which has no checksum file) stays.
    let mine = run_ok(cmd("slice").arg("from-trace").arg(&trace).args(["--no-site-packages", "-q", "what does each step add?"]));
    for gone in ["regdep::step_regdep", "anondep::step_anondep", "vendep::step_vendep"] {
        assert!(!mine.contains(&format!("#### `{gone}`")), "{gone} hidden:\n{mine}");
    }
    assert!(mine.contains("#### `owndep::step_owndep`") && mine.contains("#### `app::main`"), "{mine}");
    for shown in ["regdep::step_regdep", "anondep::step_anondep", "vendep::step_vendep"] {
        assert!(prompt.contains(&format!("#### `{shown}`")), "{shown} shown by default:\n{prompt}");
    }
}

/// A program built from cargo's registry, as `cargo install` builds it, has its own source
/// there beside its dependencies': the package that holds the program's `main` is the
/// program (kept by `--no-site-packages`, ranked as the program's), and so is a package
/// published from the same repository (its manifest's `repository` inside the program's, as
/// ripgrep's `ignore`); a dependency from elsewhere stays a dependency.
#[test]
fn a_program_built_from_cargos_registry_is_the_program() {
    let d = scratch();
    let index = d.path().join("home/registry/src/index.crates.io-1949cf8c6b5b557f");
    let dep = index.join("regdep-1.0.0");
    let app = index.join("tool-2.1.0");
    let core = index.join("tool-core-1.0.0");
    library(&dep, "regdep", 1);
    library(&core, "tool_core", 1);
    let manifest = core.join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest).expect("manifest");
    write(&manifest, &text.replace("edition", "repository = \"https://git.example.org/u/tool/tree/main/core\"\nedition"));
    write(
        &app.join("Cargo.toml"),
        &format!(
            "[package]\nname = \"tool\"\nversion = \"2.1.0\"\nedition = \"2021\"\nrepository = \"https://git.example.org/u/tool\"\n\n[dependencies]\nregdep = {{ path = \"{}\" }}\ntool_core = {{ path = \"{}\" }}\n",
            dep.display(),
            core.display()
        ),
    );
    write(&app.join("src/lib.rs"), "#[inline(never)]\npub fn double_it(x: u32) -> u32 {\n    std::hint::black_box(x) * 2\n}\n");
    write(
        &app.join("src/main.rs"),
        "fn main() {\n    let x = tool_core::step_tool_core(tool::double_it(regdep::step_regdep(1)));\n    println!(\"{x}\");\n}\n",
    );
    let target = d.path().join("target");
    cargo_build(&app, &target);
    let trace = d.path().join("t.d");
    let mut c = cmd("trace");
    c.env("SLICE_TRACE_PATCH", "1").arg("run").arg("-o").arg(&trace).arg("--").arg(target.join("debug/tool"));
    assert_eq!(run_ok(&mut c).trim(), "5");

    let q = ["-q", "what does the tool compute?"];
    let mine = run_ok(cmd("slice").arg("from-trace").arg(&trace).arg("--no-site-packages").args(q));
    for kept in ["tool::main", "tool::double_it", "tool_core::step_tool_core"] {
        assert!(mine.contains(&format!("#### `{kept}`")), "{kept}, the program's own, kept:\n{mine}");
    }
    assert!(mine.contains("cargo-registry/tool-2.1.0/src/lib.rs"), "its short path:\n{mine}");
    assert!(!mine.contains("#### `regdep::step_regdep`"), "the dependency hidden:\n{mine}");
    // The prompt's JSON model says whose code each function is.
    let json = run_ok(cmd("slice").arg("from-trace").arg(&trace).args(["--format", "json"]).args(q));
    let v: serde_json::Value = serde_json::from_str(&json).expect("json");
    let origin_of = |name: &str| -> String {
        let funcs = v["functions"].as_object().expect("functions");
        let f = funcs.values().find(|f| f["qualname"] == name).unwrap_or_else(|| panic!("{name} in the JSON:\n{json}"));
        f["origin"].as_str().unwrap_or_default().to_string()
    };
    assert_eq!(origin_of("tool::double_it"), "program");
    assert_eq!(origin_of("tool_core::step_tool_core"), "program");
    assert_eq!(origin_of("regdep::step_regdep"), "site-packages");
}

/// A Rust program built without debug information (as `cargo install` builds one by default,
/// `debug = 0` and `strip = "debuginfo"`): the prompt and stderr say that it is a Rust program
/// and how cargo builds it with debug information, not to install a distribution's debug
/// symbols. Its functions, named from the symbol table only, are classed by their names'
/// crates: the program's crate (named as `main`'s, its impl of a dependency's trait included)
/// is the program, a dependency's crate (a path dependency named like a registry crate,
/// its closures included) an installed package, hidden by `--no-site-packages`.
#[test]
fn a_rust_program_without_debug_information_is_told_how_cargo_shows_its_source() {
    let d = scratch();
    let proj = d.path().join("nodebug");
    let dep = d.path().join("tinyparse");
    write(&dep.join("Cargo.toml"), "[package]\nname = \"tinyparse\"\nversion = \"1.0.0\"\nedition = \"2021\"\n");
    write(
        &dep.join("src/lib.rs"),
        "pub trait Scale {\n    fn scale(&self, by: u32) -> u32;\n}\n\n#[inline(never)]\npub fn parse_num(s: &str) -> u32 {\n    s.chars().filter(|c| c.is_ascii_digit()).fold(0, |a, c| a * 10 + (c as u32 - 48))\n}\n",
    );
    write(
        &proj.join("Cargo.toml"),
        &format!(
            "[package]\nname = \"no-debug\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\ntinyparse = {{ path = \"{}\" }}\n\n[profile.dev]\ndebug = 0\nstrip = \"debuginfo\"\n",
            dep.display()
        ),
    );
    write(
        &proj.join("src/main.rs"),
        "use tinyparse::Scale;\n\nstruct Meters(u32);\n\nimpl Scale for Meters {\n    #[inline(never)]\n    fn scale(&self, by: u32) -> u32 {\n        std::hint::black_box(self.0) * by\n    }\n}\n\n#[inline(never)]\nfn triple(x: u32) -> u32 {\n    std::hint::black_box(x) * 3\n}\n\nfn main() {\n    println!(\"{}\", Meters(triple(tinyparse::parse_num(\" 2 \"))).scale(1));\n}\n",
    );
    cargo_build(&proj, &proj.join("target"));
    let trace = d.path().join("t.d");
    let mut c = cmd("trace");
    c.env("SLICE_TRACE_PATCH", "1").arg("run").arg("-o").arg(&trace).arg("--").arg(proj.join("target/debug/no-debug"));
    assert_eq!(run_ok(&mut c).trim(), "6");
    let q = ["-q", "what does it print?"];
    let out = run(cmd("slice").arg("from-trace").arg(&trace).args(q));
    let (prompt, stderr) = texts(&out);
    assert!(out.status.success(), "{stderr}");
    let note = prompt.lines().find(|l| l.starts_with("> No source for ")).unwrap_or_else(|| panic!("a note:\n{prompt}"));
    assert!(note.contains("of `no-debug`") && note.contains("It is a Rust program"), "{note}");
    assert!(note.contains("CARGO_PROFILE_RELEASE_DEBUG=1 cargo install --force"), "{note}");
    assert!(!note.contains("-dbgsym"), "{note}");
    assert!(stderr.contains("no debug information") && stderr.contains("CARGO_PROFILE_RELEASE_DEBUG=1 cargo install --force"), "{stderr}");

    // Whose code each function is, by its name's crate.
    let json = run_ok(cmd("slice").arg("from-trace").arg(&trace).args(["--format", "json"]).args(q));
    let v: serde_json::Value = serde_json::from_str(&json).expect("json");
    let origin_of = |name: &str| -> String {
        let funcs = v["functions"].as_object().expect("functions");
        let f = funcs.values().find(|f| f["qualname"] == name).unwrap_or_else(|| panic!("{name} in the JSON:\n{json}"));
        assert!(!f["file"].as_str().is_some_and(|p| p.ends_with(".rs")), "{name} has no source file: {f}");
        f["origin"].as_str().unwrap_or_default().to_string()
    };
    assert_eq!(origin_of("no_debug::main"), "program");
    assert_eq!(origin_of("no_debug::triple"), "program");
    assert_eq!(origin_of("<no_debug::Meters as tinyparse::Scale>::scale"), "program");
    assert_eq!(origin_of("tinyparse::parse_num"), "site-packages");
    assert_eq!(origin_of("tinyparse::parse_num::{{closure}}"), "site-packages");
    // Without installed packages, the dependency goes and the program stays.
    let tree = run_ok(cmd("slice").arg("tree").arg(&trace).arg("--no-site-packages"));
    assert!(tree.contains("no_debug::triple") && tree.contains("<no_debug::Meters as tinyparse::Scale>::scale"), "{tree}");
    assert!(!tree.contains("tinyparse::parse_num"), "the dependency hidden:\n{tree}");
}
