use std::process::ExitCode;

fn main() -> ExitCode {
    ccp_agent::cli::main()
}
