fn main() -> std::process::ExitCode {
    analyzer::cli::main()
}
