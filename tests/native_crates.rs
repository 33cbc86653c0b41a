//! End-to-end: a Rust program's dependencies are recognised by the shape cargo gives their
//! directories, not by the name of `CARGO_HOME` (issue 26): a registry package
//! (`registry/src/<index>-<hash>/<crate>-<version>/`, also under an index with no name, as a
//! source-replaced registry has) in a home called `deps`, and a vendored crate
//! (`vendor/<crate>/` with `cargo vendor`'s `.cargo-checksum.json`). Their functions are
//! installed packages (hidden by `--no-site-packages`), shown with short paths; the
//! program's own `vendor/` folder without the checksum file stays the program's.

use slice_trace_e2e::{cmd, run, run_ok, scratch, texts};
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
    let out = run(std::process::Command::new("cargo")
        .args(["build", "--offline", "--quiet"])
        .current_dir(&proj)
        .env("CARGO_TARGET_DIR", proj.join("target"))
        .env_remove("RUSTFLAGS"));
    assert!(out.status.success(), "cargo build: {:?}", texts(&out));
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
