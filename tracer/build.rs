//! Embeds the two shims (`libslicetrace_py.so`, `libslicetrace_native.so`) in `trace`, so that
//! an installed `trace` (`cargo install`, the pip wheel) needs nothing else on disk.
//!
//! A binary cannot depend on a cdylib on stable cargo (and a dependency on the shim crates
//! would compile them a second time), so this script runs a nested `cargo build -p
//! slicetrace-python -p slicetrace-native` with the profile of the outer build. The shim
//! sources come from one of two places:
//!
//! - **This workspace** (a clone, `cargo install --path .`, `cargo install --git`): `shims/` in
//!   this crate holds symbolic links to `../shims/*`. The nested build is of the workspace
//!   (`--locked` when its Cargo.lock is there), into `<target>/<profile>/embedded-shims/` (its
//!   own lock: the outer cargo holds the lock of `<target>/<profile>/`, so sharing it would
//!   deadlock). That directory persists across builds, so the shims are only recompiled when
//!   their sources change.
//! - **This crate's package** (installed from crates.io, or `cargo package` verifying it): those
//!   links were stored as files, so the package carries the shim sources and the workspace's
//!   Cargo.lock. They are copied into a workspace of their own under `OUT_DIR` (the package's
//!   directory may be read-only), laid out as in the repository, with `slice-trace-format`'s
//!   sources from that dependency (`DEP_SLICE_TRACE_FORMAT_ROOT`, see tracer/format/build.rs),
//!   and built into a target directory under `OUT_DIR`. Cargo.lock is the starting point, not
//!   `--locked`: it also lists the workspace's other packages, so cargo trims it (the shims'
//!   dependencies keep the versions it names).
//!
//! The nested cargo joins the outer one's jobserver (`CARGO_MAKEFLAGS`), so the two never run
//! more jobs than asked for.
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
    let release = var("PROFILE")? == "release";
    let source = match workspace_root(&manifest_dir)? {
        Some(root) => {
            // Rebuild when anything the shims are built from changes (directories are scanned whole).
            for p in ["shims/python", "shims/native", "tracer/format", "Cargo.lock", "Cargo.toml"] {
                println!("cargo:rerun-if-changed={}", root.join(p).display());
            }
            // OUT_DIR is <target>/<profile>/build/<this crate>-<hash>/out.
            let profile_dir = out.ancestors().nth(3).ok_or("unexpected OUT_DIR layout")?;
            let locked = root.join("Cargo.lock").is_file();
            Source { manifest: root.join("Cargo.toml"), target_dir: profile_dir.join("embedded-shims"), locked }
        }
        None => {
            println!("cargo:rerun-if-changed={}", manifest_dir.join("shims").display());
            println!("cargo:rerun-if-env-changed=DEP_SLICE_TRACE_FORMAT_ROOT");
            let format = PathBuf::from(var("DEP_SLICE_TRACE_FORMAT_ROOT")?);
            let ws = out.join("shim-workspace");
            assemble_workspace(&manifest_dir.join("shims"), &format, &ws)?;
            Source { manifest: ws.join("Cargo.toml"), target_dir: out.join("shim-target"), locked: false }
        }
    };
    let target_dir = source.target_dir;
    let (target, host) = (var("TARGET")?, var("HOST")?);

    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.arg("build").arg("--manifest-path").arg(&source.manifest).arg("--target-dir").arg(&target_dir);
    if source.locked {
        cmd.arg("--locked");
    }
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

/// Where the nested build gets the shims from: a workspace manifest, the target directory for
/// it, and whether its Cargo.lock is to be used as is.
struct Source {
    manifest: PathBuf,
    target_dir: PathBuf,
    locked: bool,
}

/// The root of the slice-trace workspace this crate is built in, or `None` when it is built
/// from its package. In the workspace, `shims/*/Cargo.toml.in` are links to the shim crates'
/// manifests in `../shims/`; in a package they are plain files.
fn workspace_root(manifest_dir: &Path) -> Result<Option<PathBuf>, String> {
    let carried = manifest_dir.join("shims/python/Cargo.toml.in");
    let Some(root) = manifest_dir.parent() else { return Ok(None) };
    let in_workspace = |shim: &str| {
        let real = root.join("shims").join(shim).join("Cargo.toml");
        let link = manifest_dir.join("shims").join(shim).join("Cargo.toml.in");
        matches!((real.canonicalize(), link.canonicalize()), (Ok(a), Ok(b)) if a == b)
    };
    if in_workspace("python") && in_workspace("native") && root.join("Cargo.toml").is_file() {
        return Ok(Some(root.to_path_buf()));
    }
    if !carried.is_file() {
        return Err(format!(
            "the shim sources are neither in a slice-trace workspace around {} nor in {}/shims/ \
             (turn off the `embed-shims` feature and install the shims beside `trace`)",
            manifest_dir.display(),
            manifest_dir.display()
        ));
    }
    Ok(None)
}

/// Lays out, in `ws`, a workspace of the two shim crates as they sit in the repository:
/// `shims/{python,native}/` from the package's `shims/` (`Cargo.toml.in` as `Cargo.toml`),
/// `tracer/format/` from `format` (the slice-trace-format dependency's sources), the
/// repository's Cargo.lock. Files are written only when their content differs, so that a
/// rerun does not make cargo rebuild the shims.
fn assemble_workspace(carried: &Path, format: &Path, ws: &Path) -> Result<(), String> {
    write_if_changed(&ws.join("Cargo.toml"), b"[workspace]\nresolver = \"2\"\nmembers = [\"shims/python\", \"shims/native\"]\n")?;
    let lock = std::fs::read(carried.join("workspace.lock")).map_err(|e| format!("{}/workspace.lock: {e}", carried.display()))?;
    write_if_changed(&ws.join("Cargo.lock"), &lock)?;
    for shim in ["python", "native"] {
        copy_tree(&carried.join(shim), &ws.join("shims").join(shim), &|rel| {
            if rel == Path::new("Cargo.toml.in") {
                Some("Cargo.toml".into())
            } else {
                Some(rel.to_path_buf())
            }
        })?;
    }
    // The dependency's own directory may hold more than its package (a `target/` when cargo
    // verifies it in place): its manifest, build script and sources are what a build reads.
    copy_tree(format, &ws.join("tracer/format"), &|rel| {
        let first = rel.components().next()?.as_os_str().to_str()?;
        matches!(first, "Cargo.toml" | "build.rs" | "src").then(|| rel.to_path_buf())
    })
}

/// Copies the files under `from` to `to`, each under the relative path `rename` gives (`None`:
/// left out).
fn copy_tree(from: &Path, to: &Path, rename: &dyn Fn(&Path) -> Option<PathBuf>) -> Result<(), String> {
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let dir = from.join(&rel);
        let entries = std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        for entry in entries {
            let entry = entry.map_err(|e| format!("{}: {e}", dir.display()))?;
            let rel = rel.join(entry.file_name());
            // Followed: in a package these are plain files, but a link stays readable.
            let path = from.join(&rel);
            if path.is_dir() {
                if rename(&rel).is_some() {
                    stack.push(rel);
                }
            } else if let Some(dest) = rename(&rel) {
                let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
                write_if_changed(&to.join(dest), &bytes)?;
            }
        }
    }
    Ok(())
}

/// Writes `bytes` to `path` (making its directory) unless it already holds them.
fn write_if_changed(path: &Path, bytes: &[u8]) -> Result<(), String> {
    if std::fs::read(path).is_ok_and(|old| old == bytes) {
        return Ok(());
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    std::fs::write(path, bytes).map_err(|e| format!("{}: {e}", path.display()))
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}
