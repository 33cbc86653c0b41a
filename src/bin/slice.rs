//! `slice`: the analyzer. The program is the `analyzer` library (analyzer/src/cli/); this target
//! exists so that the workspace root is the package users install (`cargo install --path .`,
//! the pip wheel), with both `trace` and `slice`.

fn main() -> std::process::ExitCode {
    analyzer::cli::main()
}
