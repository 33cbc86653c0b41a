//! The crates a user installs from crates.io (`cargo install slice-trace`): `cargo package`
//! packs each with what its build needs. Packaging with verification (every crate built from
//! its package, the recorder's shims from the sources it carries) takes minutes, so .ci/run
//! runs that once (`cargo package --workspace`); these tests run it without verifying and check
//! the lists of files, in about a second.

use slice_trace_e2e::{root, run, run_ok, target_dir, texts};
use std::collections::BTreeSet;
use std::process::Command;

/// The published crates, in the order they are published (each depends on ones before it).
const PUBLISHED: [&str; 5] = ["slice-trace-format", "slice-trace-symbolize", "slice-trace-recorder", "slice-trace-analyzer", "slice-trace"];

/// Files cargo writes into every package (not sources).
const GENERATED: [&str; 3] = [".cargo_vcs_info.json", "Cargo.lock", "Cargo.toml.orig"];

/// `cargo ARGS` at the workspace root, without the variables `cargo test` sets for this test.
fn cargo(args: &[&str]) -> Command {
    let mut c = Command::new("cargo");
    c.current_dir(root()).args(args);
    for (k, _) in std::env::vars_os() {
        if k.to_str().is_some_and(|k| k.starts_with("CARGO_") && k != "CARGO_HOME") {
            c.env_remove(k);
        }
    }
    c
}

/// The files `cargo package` puts in `package`'s crate.
fn package_files(package: &str) -> BTreeSet<String> {
    run_ok(&mut cargo(&["package", "--list", "--allow-dirty", "-p", package])).lines().map(str::to_owned).collect()
}

#[test]
fn the_recorder_carries_everything_the_shims_are_built_from() {
    let recorder = package_files("slice-trace-recorder");
    for (dir, package) in [("python", "slicetrace-python"), ("native", "slicetrace-native")] {
        // What the shim crate's own package holds is what building it reads.
        let shim = package_files(package);
        for needed in ["Cargo.toml", "build.rs", "src/lib.rs"] {
            assert!(shim.contains(needed), "{package}'s package has no {needed}: {shim:?}");
        }
        let missing: Vec<String> = shim
            .iter()
            .filter(|f| !GENERATED.contains(&f.as_str()))
            .map(|f| format!("shims/{dir}/{}", if f == "Cargo.toml" { "Cargo.toml.in" } else { f }))
            .filter(|f| !recorder.contains(f))
            .collect();
        assert!(missing.is_empty(), "slice-trace-recorder's package lacks {package}'s {missing:?} (tracer/shims/{dir}/ links to them)");
    }
    for needed in ["build.rs", "shims/workspace.lock"] {
        assert!(recorder.contains(needed), "slice-trace-recorder's package has no {needed}: {recorder:?}");
    }
}

#[test]
fn the_analyzer_carries_its_prompt_templates() {
    let analyzer = package_files("slice-trace-analyzer");
    let templates: Vec<String> = std::fs::read_dir(root().join("prompts"))
        .unwrap()
        .map(|e| format!("prompts/{}", e.unwrap().file_name().to_string_lossy()))
        .collect();
    assert!(templates.len() >= 2, "{templates:?}");
    for t in &templates {
        assert!(analyzer.contains(t), "slice-trace-analyzer's package has no {t} (analyzer/src/prompt/render.rs includes it)");
    }
}

/// Every published crate packs, in dependency order (cargo 1.95 resolves each against the ones
/// packed before it), and the recorder's crate holds the files its links point to, not links.
#[test]
fn the_workspace_packs_without_verifying() {
    let dir = target_dir().join("packaging-test");
    let _ = std::fs::remove_dir_all(&dir);
    let out = run(cargo(&["package", "--workspace", "--no-verify", "--allow-dirty", "--target-dir"]).arg(&dir));
    assert!(out.status.success(), "cargo package --workspace --no-verify failed: {:?}", texts(&out));

    let meta: serde_json::Value = serde_json::from_str(&run_ok(&mut cargo(&["metadata", "--no-deps", "--format-version", "1"]))).unwrap();
    let packages = meta["packages"].as_array().unwrap();
    let root_package = packages.iter().find(|p| p["name"] == "slice-trace").unwrap();
    let version = root_package["version"].as_str().unwrap().to_owned();
    for package in packages {
        let name = package["name"].as_str().unwrap();
        // `publish = false` is an empty list of registries; absent (null) means crates.io.
        let published = package["publish"].is_null();
        assert_eq!(published, PUBLISHED.contains(&name), "{name}: publish = {}", package["publish"]);
    }
    for name in PUBLISHED {
        let krate = dir.join(format!("package/{name}-{version}.crate"));
        assert!(krate.is_file(), "{} was not written", krate.display());
    }

    // The installable package holds the binaries, not the tests' helpers (an unpublished
    // crate of their own, tests/support).
    let installable = run_ok(Command::new("tar").arg("-tzf").arg(dir.join(format!("package/slice-trace-{version}.crate"))));
    assert!(!installable.contains("tests/") && installable.contains("src/bin/trace.rs"), "{installable}");

    let krate = dir.join(format!("package/slice-trace-recorder-{version}.crate"));
    let carried = run_ok(Command::new("tar").arg("-xzOf").arg(&krate).arg(format!("slice-trace-recorder-{version}/shims/workspace.lock")));
    let lock = std::fs::read_to_string(root().join("Cargo.lock")).unwrap();
    assert!(carried == lock, "the recorder's shims/workspace.lock is not the workspace's Cargo.lock");
    let _ = std::fs::remove_dir_all(&dir);
}
