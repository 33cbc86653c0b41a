//! What to say when `trace` cannot find a shim beside itself.

use std::path::Path;

/// The error for a missing shim (`what`: "Python" or "native"; `name`: its file name;
/// `exe_dir`: the directory of the running `trace`). Inside a cargo target directory the fix is
/// to build the workspace with the same profile; anywhere else `trace` was copied or installed
/// (`cargo install`) without the shims, which are separate shared objects it loads from beside
/// itself.
pub fn missing_message(what: &str, name: &str, exe_dir: &Path) -> String {
    let dir = exe_dir.display();
    let head = format!("the {what} shim {name} is not next to `trace` in {dir} (nor in {dir}/../lib)");
    let profile = exe_dir.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let in_target = exe_dir.parent().and_then(Path::file_name).is_some_and(|n| n == "target");
    match profile {
        "release" if in_target => format!("{head}; build it with `cargo build --release` at the root of the slice-trace checkout"),
        "debug" if in_target => format!("{head}; build it with `cargo build` at the root of the slice-trace checkout"),
        _ => format!(
            "{head}. `trace` loads its shims from beside itself, and an installed or copied `trace` (`cargo install` \
             does this) comes without them: build the checkout with `cargo build --release` and put target/release on \
             your PATH, or copy libslicetrace_py.so and libslicetrace_native.so from target/release next to this `trace`"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::missing_message;
    use std::path::Path;

    #[test]
    fn advice_fits_where_trace_runs_from() {
        let m = missing_message("Python", "libslicetrace_py.so", Path::new("/src/st/target/release"));
        assert!(m.ends_with("build it with `cargo build --release` at the root of the slice-trace checkout"), "{m}");
        let m = missing_message("Python", "libslicetrace_py.so", Path::new("/src/st/target/debug"));
        assert!(m.ends_with("build it with `cargo build` at the root of the slice-trace checkout"), "{m}");
        let m = missing_message("native", "libslicetrace_native.so", Path::new("/home/u/.cargo/bin"));
        assert!(m.starts_with("the native shim libslicetrace_native.so is not next to `trace` in /home/u/.cargo/bin"), "{m}");
        assert!(m.contains("`cargo install` does this") && m.contains("copy libslicetrace_py.so and libslicetrace_native.so"), "{m}");
    }
}
