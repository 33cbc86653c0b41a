//! The pip wheel (pyproject.toml, maturin's `bin` bindings): build it, install it into a fresh
//! venv, and record and slice `examples/python/shop_app.py` with the installed `trace` and
//! `slice`, found on the venv's PATH, in a directory outside the checkout. The installed
//! `trace` has nothing beside it: it must use the shims embedded in it (written to the per-user
//! cache, here a scratch `XDG_CACHE_HOME`).
//!
//! maturin (pinned) is installed from PyPI into a venv under the target directory once. The
//! wheel is built with `--release` into `target/release` (a developer's `cargo build --release`
//! is reused; in CI it is the one release build).

use slice_trace_e2e::{python, root, run, scratch, target_dir, texts, venv_with};
use std::path::{Path, PathBuf};
use std::process::Command;

const MATURIN: &str = "maturin==1.16.0";

/// Build the wheel; returns its path.
fn build_wheel(out: &Path) -> PathBuf {
    let maturin = venv_with("maturin-venv", &python(), &[MATURIN]).join("bin/maturin");
    let mut cmd = Command::new(&maturin);
    cmd.current_dir(root()).args(["build", "--release", "--quiet", "--out"]).arg(out);
    // The variables `cargo test` sets for this test describe the test crate, not the build.
    for (k, _) in std::env::vars_os() {
        if k.to_str().is_some_and(|k| k.starts_with("CARGO_") && k != "CARGO_HOME") {
            cmd.env_remove(k);
        }
    }
    let o = run(&mut cmd);
    assert!(o.status.success(), "`maturin build --release` failed: {:?}", texts(&o));
    let wheels: Vec<PathBuf> =
        std::fs::read_dir(out).unwrap().map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|x| x == "whl")).collect();
    assert_eq!(wheels.len(), 1, "one wheel expected in {}: {wheels:?}", out.display());
    wheels.into_iter().next().unwrap()
}

/// The files in the wheel (a zip), listed by Python's zipfile.
fn wheel_files(wheel: &Path) -> Vec<String> {
    let o = run(Command::new(python())
        .args(["-c", "import sys, zipfile; print('\\n'.join(zipfile.ZipFile(sys.argv[1]).namelist()))"])
        .arg(wheel));
    assert!(o.status.success(), "{:?}", texts(&o));
    texts(&o).0.lines().map(str::to_owned).collect()
}

#[test]
fn the_wheel_installs_trace_and_slice_that_record_and_slice_from_a_venv() {
    let wheels = target_dir().join("wheel-test");
    let _ = std::fs::remove_dir_all(&wheels);
    let wheel = build_wheel(&wheels);
    let name = wheel.file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.starts_with("slice_trace-") && name.contains("-py3-none-"), "{name}");
    let mut scripts: Vec<String> = wheel_files(&wheel).into_iter().filter(|f| f.contains(".data/scripts/")).collect();
    scripts.sort();
    assert_eq!(scripts.iter().map(|s| s.rsplit('/').next().unwrap()).collect::<Vec<_>>(), ["slice", "trace"], "{scripts:?}");

    // A fresh venv, the wheel installed offline (it depends on nothing).
    let venv = wheels.join("venv");
    let o = run(Command::new(python()).args(["-m", "venv"]).arg(&venv));
    assert!(o.status.success(), "`{} -m venv` failed (on Debian: apt-get install python3-venv): {:?}", python(), texts(&o));
    let o = run(Command::new(venv.join("bin/pip")).args(["install", "--quiet", "--no-index"]).arg(&wheel));
    assert!(o.status.success(), "pip install {}: {:?}", wheel.display(), texts(&o));

    // The installed commands, by name on the venv's PATH, from a directory outside the checkout.
    let s = scratch();
    let cache = s.path().join("cache");
    let path = format!("{}:{}", venv.join("bin").display(), std::env::var("PATH").unwrap_or_default());
    let sh = |script: &str| {
        let o = run(Command::new("sh").args(["-c", script]).current_dir(s.path()).env("PATH", &path).env("XDG_CACHE_HOME", &cache));
        assert!(o.status.success(), "`{script}` failed: {:?}", texts(&o));
        texts(&o)
    };
    let (found, _) = sh("command -v trace; command -v slice");
    assert_eq!(found, format!("{0}/bin/trace\n{0}/bin/slice\n", venv.display()));

    let app = root().join("examples/python/shop_app.py");
    let (_, err) = sh(&format!("trace run -o shop.d -- {} {}", python(), app.display()));
    assert!(err.contains("2 processes") && err.ends_with("-> shop.d\n"), "{err}");
    let (prompt, err) = sh("slice from-trace shop.d -q 'How is the price of a bundle computed?'");
    assert!(err.starts_with("slice: ") && err.contains(" tokens"), "{err}");

    // The prompt: the question, the recursive pricing in the call tree, and its exact source.
    let pricing = root().join("examples/python/shop/pricing.py");
    assert!(prompt.starts_with("# Question\n\nHow is the price of a bundle computed?\n"), "{prompt}");
    // (Its tree line names it only: the source block's heading below locates it.)
    assert!(prompt.lines().any(|l| l.trim_start() == "bundle_price ×3"), "{prompt}");
    assert!(prompt.contains("bundle_price ×2 ↻ recursive\n"), "{prompt}");
    let text = std::fs::read_to_string(&pricing).unwrap();
    let source: String = text.lines().skip(5).take(6).map(|l| format!("{l}\n")).collect();
    assert!(source.starts_with("def bundle_price(bundle):\n") && source.ends_with("// 100\n"), "{source}");
    let section = format!(
        "#### `bundle_price` ({0}:6-11)\n\nModule-level values it reads ({0}, line 3):\n\n```python\nBUNDLE_DISCOUNT_PERCENT = 10\n```\n\n```python\n{source}```\n",
        pricing.display()
    );
    assert!(prompt.contains(&section), "{section}\nnot in:\n{prompt}");
    // The subprocess the app starts was recorded too.
    assert!(prompt.contains("examples/python/checksum.py), thread MainThread"), "{prompt}");

    // The shims came from `trace` itself: written to the (private) cache, nothing beside it.
    for shim in ["libslicetrace_py.so", "libslicetrace_native.so"] {
        assert!(!venv.join("bin").join(shim).exists() && !venv.join("lib").join(shim).exists());
    }
    let cached: Vec<String> = std::fs::read_dir(cache.join("slice-trace"))
        .unwrap()
        .flat_map(|d| std::fs::read_dir(d.unwrap().path()).unwrap())
        .map(|f| f.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(cached.contains(&"libslicetrace_py.so".to_owned()), "{cached:?}");
    let _ = std::fs::remove_dir_all(&wheels);
}
