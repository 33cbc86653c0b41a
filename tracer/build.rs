//! Embeds the two shims (`libslicetrace_py.so`, `libslicetrace_native.so`) in `trace`, so that
//! an installed `trace` (`cargo install`, the pip wheel) needs nothing else on disk.
//!
//! A binary cannot depend on a cdylib on stable cargo, so this script runs a nested
//! `cargo build -p slicetrace-python -p slicetrace-native` of the workspace, with the profile
//! of the outer build, into its own target directory, `<target>/<profile>/embedded-shims/`
//! (its own lock: the outer cargo holds the lock of `<target>/<profile>/`, so sharing it would
//! deadlock). That directory persists across builds, so the shims are only recompiled when
//! their sources change. The nested cargo joins the outer one's jobserver (`CARGO_MAKEFLAGS`),
//! so the two never run more jobs than asked for.
//!
//! It writes `$OUT_DIR/embedded_shims.rs`: each shim's bytes (`include_bytes!`) and SHA-256,
//! which `src/shims.rs` uses as the cache key. Without the `embed-shims` feature it writes
//! an empty list and `trace` finds its shims beside itself only.

use sha2::{Digest, Sha256};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The shim packages and the files cargo builds from them.
const SHIMS: [(&str, &str); 2] = [("slicetrace-python", "libslicetrace_py.so"), ("slicetrace-native", "libslicetrace_native.so")];

fn main() {
    if let Err(e) = run() {
        // A build script reports failure by exiting non-zero; cargo shows stderr.
        eprintln!("error: embedding the shims in `trace`: {e}");
        std::process::exit(1);
    }
}

fn var(name: &str) -> Result<String, String> {
    std::env::var(name).map_err(|_| format!("cargo did not set {name}"))
}

fn run() -> Result<(), String> {
    println!("cargo:rerun-if-changed=build.rs");
    let out = PathBuf::from(var("OUT_DIR")?);
    let generated = out.join("embedded_shims.rs");
    if std::env::var_os("CARGO_FEATURE_EMBED_SHIMS").is_none() {
        return write(
            &generated,
            "/// No shims embedded (the `embed-shims` feature is off).\npub const EMBEDDED: &[(&str, &[u8], &str)] = &[];\n",
        );
    }
    let manifest_dir = PathBuf::from(var("CARGO_MANIFEST_DIR")?);
    let root = manifest_dir.parent().ok_or("tracer/ has no parent directory")?.to_path_buf();
    let root_manifest = root.join("Cargo.toml");
    if !root.join("shims/python/Cargo.toml").is_file() || !root.join("shims/native/Cargo.toml").is_file() {
        return Err(format!(
            "the shim sources are not at {}/shims/{{python,native}}: build `trace` from the slice-trace workspace \
             (or turn off the `embed-shims` feature and install the shims beside `trace`)",
            root.display()
        ));
    }
    // Rebuild when anything the shims are built from changes (directories are scanned whole).
    for p in ["shims/python", "shims/native", "tracer/format", "Cargo.lock", "Cargo.toml"] {
        println!("cargo:rerun-if-changed={}", root.join(p).display());
    }

    // OUT_DIR is <target>/<profile>/build/tracer-<hash>/out.
    let profile_dir = out.ancestors().nth(3).ok_or("unexpected OUT_DIR layout")?.to_path_buf();
    let target_dir = profile_dir.join("embedded-shims");
    let release = var("PROFILE")? == "release";
    let (target, host) = (var("TARGET")?, var("HOST")?);

    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.arg("build").arg("--locked").arg("--manifest-path").arg(&root_manifest).arg("--target-dir").arg(&target_dir);
    for (package, _) in SHIMS {
        cmd.args(["-p", package]);
    }
    if release {
        cmd.arg("--release");
    }
    if target != host {
        cmd.args(["--target", &target]);
    }
    clean_env(&mut cmd);
    // The embedded shims need no debug information (the recorder never symbolizes itself;
    // unwinding uses .eh_frame, which stays): without it the release shim is a few MB instead
    // of 27, which `trace` carries, writes to its cache and compares on every run.
    cmd.env("CARGO_PROFILE_RELEASE_STRIP", "debuginfo");
    let status = cmd.status().map_err(|e| format!("cannot run cargo: {e}"))?;
    if !status.success() {
        return Err(format!("the nested `cargo build` of the shims failed ({status}); its errors are above"));
    }

    let built = if target != host { target_dir.join(&target) } else { target_dir };
    let built = built.join(if release { "release" } else { "debug" });
    let mut code = String::from(
        "/// The shims built into `trace`: (file name, bytes, SHA-256 in hex).\npub const EMBEDDED: &[(&str, &[u8], &str)] = &[\n",
    );
    for (_, file) in SHIMS {
        let from = built.join(file);
        let bytes = std::fs::read(&from).map_err(|e| format!("{}: {e}", from.display()))?;
        let hash: String = Sha256::digest(&bytes).iter().fold(String::new(), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        });
        // A copy in OUT_DIR: the nested target directory is rewritten by later builds.
        let copy = out.join(file);
        std::fs::write(&copy, &bytes).map_err(|e| format!("{}: {e}", copy.display()))?;
        let _ = writeln!(code, "    ({file:?}, include_bytes!({:?}), {hash:?}),", copy.display().to_string());
    }
    code.push_str("];\n");
    write(&generated, &code)
}

/// The nested cargo gets the user's environment, not the variables cargo sets for this build
/// script (they describe this package, and `RUSTC_WORKSPACE_WRAPPER` would run clippy on the
/// shims under `cargo clippy`). Kept: the jobserver, the target's rustflags, the cargo home and
/// network settings, and everything that is not cargo's (PATH, compilers, pyenv, ...).
fn clean_env(cmd: &mut Command) {
    const CARGO_SET: [&str; 11] = [
        "OUT_DIR",
        "TARGET",
        "HOST",
        "NUM_JOBS",
        "OPT_LEVEL",
        "DEBUG",
        "PROFILE",
        "RUSTC_WORKSPACE_WRAPPER",
        "RUSTDOC",
        "RUSTC_LINKER",
        "CARGO_TARGET_DIR",
    ];
    const CARGO_KEPT: [&str; 3] = ["CARGO_HOME", "CARGO_MAKEFLAGS", "CARGO_ENCODED_RUSTFLAGS"];
    for (k, _) in std::env::vars_os() {
        let Some(k) = k.to_str() else { continue };
        let cargos = k.starts_with("CARGO_")
            && !CARGO_KEPT.contains(&k)
            && !k.starts_with("CARGO_NET_")
            && !k.starts_with("CARGO_HTTP_")
            && !k.starts_with("CARGO_REGISTR");
        if cargos || k.starts_with("DEP_") || CARGO_SET.contains(&k) {
            cmd.env_remove(k);
        }
    }
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}
