fn main() -> std::process::ExitCode {
    ccp_lab::cli::main()
}
